//! The seeded geo events: 128-byte records (event id, entity id, timestamp, position and
//! attributes), clustered around a configurable set of cities plus a uniform share, so radius
//! and polygon queries meet realistic densities.

use common::data::{Checksum, rng};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Bytes in one encoded event (the seed's event size).
pub const EVENT_BYTES: usize = 128;
/// Bytes of attributes after the fixed fields.
pub const ATTRIBUTE_BYTES: usize = 72;
/// Redis and Valkey index latitudes only up to this (the Web Mercator limit); every generated
/// position stays inside it so every target can store every event.
pub const MAX_INDEXED_LATITUDE: f64 = 85.051_128;
/// Generator streams, one per purpose, so adding one never changes another's data.
pub const STREAM_EVENTS: u64 = 1;
pub const STREAM_INSERT_POOL: u64 = 2;
pub const STREAM_QUERIES: u64 = 3;
/// One event every second of simulated time, from a fixed epoch (2026-01-01T00:00:00Z).
const EPOCH_MS: u64 = 1_767_225_600_000;
/// Spread (σ) of events around a city's centre: a two-dimensional normal, so density is
/// highest at the centre and finite there, and about 70% of a city's events lie within 13 km.
const CITY_SIGMA_M: f64 = 8_000.0;
/// Metres per degree of latitude (mean), for small offsets.
pub const METRES_PER_DEGREE: f64 = 111_320.0;

/// A city events cluster around.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct City {
    pub name: &'static str,
    pub lat: f64,
    pub lon: f64,
}

/// The cities `--cities` can name.
pub const CITIES: &[City] = &[
    City {
        name: "london",
        lat: 51.5074,
        lon: -0.1278,
    },
    City {
        name: "paris",
        lat: 48.8566,
        lon: 2.3522,
    },
    City {
        name: "berlin",
        lat: 52.5200,
        lon: 13.4050,
    },
    City {
        name: "new-york",
        lat: 40.7128,
        lon: -74.0060,
    },
    City {
        name: "san-francisco",
        lat: 37.7749,
        lon: -122.4194,
    },
    City {
        name: "sao-paulo",
        lat: -23.5505,
        lon: -46.6333,
    },
    City {
        name: "lagos",
        lat: 6.5244,
        lon: 3.3792,
    },
    City {
        name: "mumbai",
        lat: 19.0760,
        lon: 72.8777,
    },
    City {
        name: "singapore",
        lat: 1.3521,
        lon: 103.8198,
    },
    City {
        name: "tokyo",
        lat: 35.6762,
        lon: 139.6503,
    },
    City {
        name: "sydney",
        lat: -33.8688,
        lon: 151.2093,
    },
    City {
        name: "palermo",
        lat: 38.1157,
        lon: 13.3615,
    },
];

/// Looks a city up by name (case-insensitive).
pub fn city(name: &str) -> Option<City> {
    CITIES
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name.trim()))
        .copied()
}

/// One geo event. Ids are UUIDs kept as 128-bit integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    pub id: u128,
    pub entity: u128,
    pub ts_ms: u64,
    pub lat: f64,
    pub lon: f64,
    pub attributes: [u8; ATTRIBUTE_BYTES],
}

impl Event {
    /// The 128-byte record: id, entity (big-endian), timestamp, latitude, longitude
    /// (little-endian), attributes.
    pub fn encode(&self) -> [u8; EVENT_BYTES] {
        let mut out = [0u8; EVENT_BYTES];
        out[0..16].copy_from_slice(&self.id.to_be_bytes());
        out[16..32].copy_from_slice(&self.entity.to_be_bytes());
        out[32..40].copy_from_slice(&self.ts_ms.to_le_bytes());
        out[40..48].copy_from_slice(&self.lat.to_le_bytes());
        out[48..56].copy_from_slice(&self.lon.to_le_bytes());
        out[56..].copy_from_slice(&self.attributes);
        out
    }

    /// The event id stored in a record made by [`Event::encode`].
    pub fn id_of_record(record: &[u8]) -> Option<u128> {
        let bytes: [u8; 16] = record.get(0..16)?.try_into().ok()?;
        Some(u128::from_be_bytes(bytes))
    }
}

/// How events are spread over the globe.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Spread {
    pub cities: Vec<City>,
    /// The share of events placed uniformly over the globe instead of near a city.
    pub uniform_share: f64,
}

/// A position `distance_m` from (`lat`, `lon`) towards `bearing_rad`, on a local flat
/// approximation (enough for placing synthetic points; the oracle measures geodesically).
pub fn offset(lat: f64, lon: f64, distance_m: f64, bearing_rad: f64) -> (f64, f64) {
    let dlat = distance_m * bearing_rad.cos() / METRES_PER_DEGREE;
    let new_lat = (lat + dlat).clamp(-MAX_INDEXED_LATITUDE, MAX_INDEXED_LATITUDE);
    let scale = METRES_PER_DEGREE * lat.to_radians().cos().max(0.01);
    let mut new_lon = lon + distance_m * bearing_rad.sin() / scale;
    if new_lon > 180.0 {
        new_lon -= 360.0;
    } else if new_lon < -180.0 {
        new_lon += 360.0;
    }
    (new_lat, new_lon)
}

/// A random UUID (version 4 layout) from `rng`.
pub fn uuid(rng: &mut ChaCha8Rng) -> u128 {
    let raw: u128 = rng.random();
    (raw & !(0xf000 << 64) & !(0xc000_0000_0000_0000)) | (0x4000 << 64) | 0x8000_0000_0000_0000
}

/// The canonical text form of a UUID (`8-4-4-4-12` lowercase hex).
pub fn uuid_text(id: u128) -> String {
    let hex = format!("{id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Writes `id` as 32 lowercase hex digits into `out` (the form stored in key-value targets),
/// without allocating.
#[inline]
pub fn write_hex_id(id: u128, out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..32).rev() {
        out.push(DIGITS[((id >> (shift * 4)) & 0xf) as usize]);
    }
}

/// Reads an id written by [`write_hex_id`].
pub fn parse_hex_id(text: &[u8]) -> Option<u128> {
    if text.len() != 32 {
        return None;
    }
    let text = std::str::from_utf8(text).ok()?;
    u128::from_str_radix(text, 16).ok()
}

struct Generator<'a> {
    rng: ChaCha8Rng,
    spread: &'a Spread,
}

impl Generator<'_> {
    fn position(&mut self) -> (f64, f64) {
        let uniform =
            self.spread.cities.is_empty() || self.rng.random::<f64>() < self.spread.uniform_share;
        if uniform {
            // Uniform over the sphere's area, within the band every target indexes.
            let max_sin = MAX_INDEXED_LATITUDE.to_radians().sin();
            let lat = (self.rng.random_range(-max_sin..max_sin))
                .asin()
                .to_degrees();
            let lon = self.rng.random_range(-180.0..180.0);
            return (lat, lon);
        }
        let city = self.spread.cities[self.rng.random_range(0..self.spread.cities.len())];
        // A Rayleigh-distributed distance gives a two-dimensional normal around the centre.
        let u: f64 = self.rng.random_range(1e-12..1.0);
        let distance = CITY_SIGMA_M * (-2.0 * u.ln()).sqrt();
        let bearing = self.rng.random_range(0.0..std::f64::consts::TAU);
        offset(city.lat, city.lon, distance.min(100_000.0), bearing)
    }

    fn attributes(&mut self) -> [u8; ATTRIBUTE_BYTES] {
        let mut out = [0u8; ATTRIBUTE_BYTES];
        let speed_cm_s: u32 = self.rng.random_range(0..4_000);
        let heading_cdeg: u16 = self.rng.random_range(0..36_000);
        out[0..4].copy_from_slice(&speed_cm_s.to_le_bytes());
        out[4..6].copy_from_slice(&heading_cdeg.to_le_bytes());
        out[6] = self.rng.random_range(0..8);
        out[7] = self.rng.random_range(0..4);
        let text = common::data::ascii(&mut self.rng, ATTRIBUTE_BYTES - 8);
        out[8..].copy_from_slice(text.as_bytes());
        out
    }
}

/// The generated events of a run, with the checksum that proves every target got the same.
#[derive(Debug, Clone)]
pub struct EventSet {
    pub events: Vec<Event>,
    pub entities: Vec<u128>,
    pub checksum: String,
}

impl EventSet {
    /// `count` events over `count / 8` entities (at least one), in timestamp order, so the
    /// last event of an entity is its latest.
    pub fn generate(seed: u64, stream: u64, count: usize, spread: &Spread) -> EventSet {
        let mut generator = Generator {
            rng: rng(seed, stream),
            spread,
        };
        let entities: Vec<u128> = (0..(count / 8).max(1))
            .map(|_| uuid(&mut generator.rng))
            .collect();
        let mut checksum = Checksum::default();
        let events = (0..count)
            .map(|i| {
                let id = uuid(&mut generator.rng);
                let entity = entities[generator.rng.random_range(0..entities.len())];
                let (lat, lon) = generator.position();
                let event = Event {
                    id,
                    entity,
                    ts_ms: EPOCH_MS + i as u64 * 1_000,
                    lat,
                    lon,
                    attributes: generator.attributes(),
                };
                checksum.update(&event.encode());
                event
            })
            .collect();
        EventSet {
            events,
            entities,
            checksum: checksum.hex(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread() -> Spread {
        Spread {
            cities: CITIES.to_vec(),
            uniform_share: 0.1,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_events_and_checksum() {
        let a = EventSet::generate(42, STREAM_EVENTS, 1_000, &spread());
        let b = EventSet::generate(42, STREAM_EVENTS, 1_000, &spread());
        assert_eq!(a.events, b.events);
        assert_eq!(a.checksum, b.checksum);
        let c = EventSet::generate(43, STREAM_EVENTS, 1_000, &spread());
        assert_ne!(a.checksum, c.checksum);
        assert_eq!(a.entities.len(), 125);
    }

    #[test]
    fn events_are_128_bytes_in_range_and_mostly_near_cities() {
        let set = EventSet::generate(7, STREAM_EVENTS, 5_000, &spread());
        let mut near = 0;
        for e in &set.events {
            assert!(
                e.lat.abs() <= MAX_INDEXED_LATITUDE && e.lon.abs() <= 180.0,
                "{e:?}"
            );
            assert_eq!(e.encode().len(), EVENT_BYTES);
            assert_eq!(Event::id_of_record(&e.encode()), Some(e.id));
            if CITIES
                .iter()
                .any(|c| (c.lat - e.lat).abs() < 1.0 && (c.lon - e.lon).abs() < 1.0)
            {
                near += 1;
            }
        }
        assert!(near > 4_000, "{near} of 5,000 near a city");
        let ts: Vec<u64> = set.events.iter().map(|e| e.ts_ms).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ids_print_as_uuids_and_round_trip_through_hex() {
        let id = uuid(&mut rng(1, 1));
        let text = uuid_text(id);
        assert_eq!(text.len(), 36);
        assert_eq!(&text[14..15], "4", "version 4");
        let mut hex = Vec::new();
        write_hex_id(id, &mut hex);
        assert_eq!(parse_hex_id(&hex), Some(id));
        assert_eq!(parse_hex_id(b"xyz"), None);
        assert_eq!(city("Paris").unwrap().name, "paris");
    }
}
