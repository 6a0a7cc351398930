//! The application's measurement records: the typed record every engine's rows deserialize
//! into, the seeded generator that gives every engine byte-identical documents, and the index
//! set declared once for every adapter.

use common::data::{Checksum, ascii, rng};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::query::Doc;

/// The six secondary indexes, declared once: every adapter creates exactly these, and every
/// engine's catalog is checked against this list before anything is timed.
pub const INDEXED_FIELDS: [&str; 6] = [
    "_inspection_id",
    "_system_id",
    "_valve_id",
    "_room_id",
    "_remark_id",
    "_type_group_id",
];

/// The account the application's requests run as; a few records belong to another one.
pub const ACCOUNT: &str = "acct-main";
const OTHER_ACCOUNT: &str = "acct-other";

/// Records per parent, so the seed's shapes come out at 250,000 rows: about 494 records per
/// inspection, about 1,650 per system (a tenth of them above the range threshold).
const PER_INSPECTION: u64 = 494;
const PER_SYSTEM: u64 = 1_650;
const PER_VALVE: u64 = 50;
const PER_ROOM: u64 = 200;
const PER_REMARK: u64 = 25;
const TYPE_GROUPS: u64 = 12;
/// Share of records with the approval flag false (about 10,000 of 250,000).
const UNAPPROVED_SHARE: f64 = 0.04;
/// Shares of records the data layer must filter out.
const OTHER_ACCOUNT_SHARE: f64 = 0.01;
const DELETED_SHARE: f64 = 0.01;
/// Measured values are uniform in `0..VALUE_MAX`.
pub const VALUE_MAX: f64 = 1_000.0;
const TYPES: [&str; 4] = ["measurement", "check", "deviation", "photo"];
const UNITS: [&str; 5] = ["Pa", "l/s", "m3/h", "°C", "%"];
/// 2024-01-01T00:00:00Z in milliseconds, and the span creation times are drawn from (2 years).
const EPOCH_MS: i64 = 1_704_067_200_000;
const SPAN_MS: i64 = 2 * 365 * 24 * 3_600_000;

/// One measurement record, as the application reads it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    #[serde(rename = "_type")]
    pub kind: String,
    #[serde(rename = "_inspection_id")]
    pub inspection_id: String,
    #[serde(rename = "_system_id")]
    pub system_id: String,
    #[serde(rename = "_valve_id")]
    pub valve_id: String,
    #[serde(rename = "_room_id")]
    pub room_id: String,
    #[serde(rename = "_remark_id")]
    pub remark_id: String,
    #[serde(rename = "_type_group_id")]
    pub type_group_id: String,
    #[serde(rename = "_account_id")]
    pub account_id: String,
    #[serde(rename = "_deleted")]
    pub deleted: bool,
    /// ISO 8601 with milliseconds, UTC: sorts as text in time order.
    #[serde(rename = "_created_at")]
    pub created_at: String,
    pub approved: bool,
    pub value: f64,
    pub unit: String,
    pub location: String,
    pub created_by: String,
    pub note: String,
}

impl Record {
    /// FNV-1a 64 over every field, each text followed by a separator, the flags as bytes and
    /// the value as its bits: two records digest alike only when every field is the same, so
    /// an answer with the right rows and a wrong value in one of them is told apart.
    pub fn digest(&self) -> u64 {
        let mut checksum = Checksum::default();
        for text in [
            &self.id,
            &self.kind,
            &self.inspection_id,
            &self.system_id,
            &self.valve_id,
            &self.room_id,
            &self.remark_id,
            &self.type_group_id,
            &self.account_id,
            &self.created_at,
            &self.unit,
            &self.location,
            &self.created_by,
            &self.note,
        ] {
            checksum.update(text.as_bytes());
            checksum.update(b"\x1f");
        }
        checksum.update(&[u8::from(self.deleted), u8::from(self.approved)]);
        checksum.update(&self.value.to_bits().to_le_bytes());
        checksum.value()
    }

    /// Whether the application's account sees it (the filters the data layer adds).
    pub fn visible(&self) -> bool {
        self.account_id == ACCOUNT && !self.deleted
    }
}

/// How many parents of each kind a collection of `shape_rows` records has: sized per record,
/// so every size shows the seed's per-parent shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub inspections: u64,
    pub systems: u64,
    valves: u64,
    rooms: u64,
    remarks: u64,
}

impl Shape {
    pub fn of(shape_rows: u64) -> Shape {
        let parents = |per: u64| (shape_rows / per).max(1);
        Shape {
            inspections: parents(PER_INSPECTION),
            systems: parents(PER_SYSTEM),
            valves: parents(PER_VALVE),
            rooms: parents(PER_ROOM),
            remarks: parents(PER_REMARK),
        }
    }
}

/// Parent `n` of a kind, as records name it (`insp-000042`).
pub fn parent_id(prefix: &str, n: u64) -> String {
    format!("{prefix}-{n:06}")
}

pub const INSPECTION_PREFIX: &str = "insp";
pub const SYSTEM_PREFIX: &str = "sys";

/// The seeded stream of records numbered `first..first + count`, generated one at a time:
/// nothing holds the whole collection.
pub struct Generator {
    rng: ChaCha8Rng,
    shape: Shape,
    next: u64,
    end: u64,
}

impl Generator {
    /// Records numbered from `first` (the append set continues the numbering, so its ids never
    /// collide with the fill's), drawn from stream `stream` of `seed`. The parent counts follow
    /// `shape_rows`, so appended records land under the same parents.
    pub fn new(seed: u64, stream: u64, first: u64, count: u64, shape_rows: u64) -> Generator {
        Generator {
            rng: rng(seed, stream),
            shape: Shape::of(shape_rows),
            next: first,
            end: first + count,
        }
    }
}

impl Iterator for Generator {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.next >= self.end {
            return None;
        }
        let n = self.next;
        self.next += 1;
        let (rng, shape) = (&mut self.rng, self.shape);
        let pick = |rng: &mut ChaCha8Rng, prefix: &str, of: u64| {
            parent_id(prefix, rng.random_range(0..of))
        };
        let created_ms = EPOCH_MS + rng.random_range(0..SPAN_MS);
        let note_len = rng.random_range(80..200);
        Some(Record {
            id: format!("{n:08x}{:016x}", rng.random::<u64>()),
            kind: TYPES[rng.random_range(0..TYPES.len())].to_owned(),
            inspection_id: pick(rng, INSPECTION_PREFIX, shape.inspections),
            system_id: pick(rng, SYSTEM_PREFIX, shape.systems),
            valve_id: pick(rng, "valve", shape.valves),
            room_id: pick(rng, "room", shape.rooms),
            remark_id: pick(rng, "remark", shape.remarks),
            type_group_id: pick(rng, "group", TYPE_GROUPS),
            account_id: if rng.random_bool(OTHER_ACCOUNT_SHARE) {
                OTHER_ACCOUNT
            } else {
                ACCOUNT
            }
            .to_owned(),
            deleted: rng.random_bool(DELETED_SHARE),
            created_at: iso8601_ms(created_ms),
            approved: !rng.random_bool(UNAPPROVED_SHARE),
            // Whole thousandths, so every engine stores and compares the same decimal.
            value: (rng.random_range(0.0..VALUE_MAX) * 1000.0).round() / 1000.0,
            unit: UNITS[rng.random_range(0..UNITS.len())].to_owned(),
            location: format!(
                "Building {} floor {}",
                ascii(rng, 6),
                rng.random_range(1..20)
            ),
            created_by: ascii(rng, 12),
            note: ascii(rng, note_len),
        })
    }
}

/// A record's stored form: its key and its JSON document.
pub fn stored(record: &Record) -> Doc {
    Doc {
        id: record.id.clone(),
        json: serde_json::to_string(record).expect("a record always serializes"),
    }
}

/// `2024-03-05T17:04:09.123Z` from milliseconds since the Unix epoch (UTC, proleptic
/// Gregorian; valid from 1970 to 9999).
fn iso8601_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1_000 % 60,
        ms_of_day % 1_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(EPOCH_MS), "2024-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601_ms(1_767_225_599_999), "2025-12-31T23:59:59.999Z");
    }

    #[test]
    fn the_shape_per_parent_matches_the_seed() {
        // Parents are sized per record, so 50,000 rows show the same per-parent shapes as the
        // seed's 250,000 (about 494 per inspection, 165 in the range), with totals a fifth.
        let records: Vec<Record> = Generator::new(42, 1, 0, 50_000, 50_000).collect();
        let visible: Vec<&Record> = records.iter().filter(|r| r.visible()).collect();
        let first = &records[0];
        let per_inspection = visible
            .iter()
            .filter(|r| r.inspection_id == first.inspection_id)
            .count();
        assert!((400..600).contains(&per_inspection), "{per_inspection}");
        let unapproved = visible.iter().filter(|r| !r.approved).count();
        assert!((1_800..2_200).contains(&unapproved), "{unapproved}");
        let range = visible
            .iter()
            .filter(|r| r.system_id == first.system_id && r.value > 900.0)
            .count();
        assert!((120..220).contains(&range), "{range}");
        assert!(
            (48_000..50_000).contains(&visible.len()),
            "{}",
            visible.len()
        );
        let mean_doc = records.iter().map(|r| stored(r).json.len()).sum::<usize>() / records.len();
        assert!(
            (300..600).contains(&mean_doc),
            "a record is a few hundred bytes: {mean_doc}"
        );
        assert_eq!(Shape::of(50_000).inspections, 101);
        assert!(first.inspection_id.starts_with("insp-0"));
    }

    #[test]
    fn generation_is_deterministic_and_appends_never_collide() {
        let a: Vec<Doc> = Generator::new(7, 1, 0, 1_000, 1_000)
            .map(|r| stored(&r))
            .collect();
        let b: Vec<Doc> = Generator::new(7, 1, 0, 1_000, 1_000)
            .map(|r| stored(&r))
            .collect();
        assert!(
            a.iter()
                .zip(&b)
                .all(|(a, b)| a.json == b.json && a.id == b.id)
        );
        let appended: Vec<Record> = Generator::new(7, 2, 1_000, 1_000, 1_000).collect();
        let ids: std::collections::HashSet<&str> = a
            .iter()
            .map(|d| d.id.as_str())
            .chain(appended.iter().map(|r| r.id.as_str()))
            .collect();
        assert_eq!(ids.len(), 2_000);
        let parsed: Record = serde_json::from_str(&a[3].json).unwrap();
        assert_eq!(
            parsed,
            Generator::new(7, 1, 0, 1_000, 1_000).nth(3).unwrap()
        );
        assert!(a[3].json.contains("\"_inspection_id\":\"insp-"));
    }

    #[test]
    fn the_stream_is_the_one_earlier_versions_generated() {
        // The FNV-1a of the first thousand documents of seed 42's fill, as the generator that
        // held every record in memory produced them: streaming changed no byte.
        let mut checksum = common::data::Checksum::default();
        for record in Generator::new(42, 10, 0, 1_000, 1_000) {
            checksum.update(stored(&record).json.as_bytes());
        }
        assert_eq!(checksum.hex(), "121149b2ab1efbbd");
    }
}
