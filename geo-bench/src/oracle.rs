//! The exact oracle: every query answered in-process over the generated events, with geodesic
//! distance on the WGS84 ellipsoid (the `geo` crate), and the comparison of a target's answer
//! with it. Points closer to a query's boundary than the stated tolerance may fall either way:
//! targets differ between spherical and ellipsoidal distance, great-circle and planar polygon
//! edges, and quantized coordinates.

use std::collections::HashMap;

use geo::{Contains, Distance, Geodesic, Point};

use crate::events::{EventSet, METRES_PER_DEGREE, uuid_text};
use crate::queries::{Query, bounds};

/// The boundary tolerance: a fixed part (coordinate quantization) plus a share of the query's
/// scale (radius, or a polygon's largest extent), for the spread between distance models.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Tolerance {
    pub fixed_m: f64,
    pub relative: f64,
}

impl Tolerance {
    pub const DEFAULT: Tolerance = Tolerance {
        fixed_m: 1.0,
        relative: 0.007,
    };

    pub fn metres(&self, scale_m: f64) -> f64 {
        self.fixed_m + self.relative * scale_m
    }

    pub fn describe(&self) -> String {
        format!(
            "{} m + {}% of the query's radius (or of a polygon's largest extent)",
            self.fixed_m,
            self.relative * 100.0
        )
    }
}

/// The exact answer to one query: the ids inside, and those near enough to the boundary that a
/// target may include or leave them out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub inside: Vec<u128>,
    pub excused: Vec<u128>,
}

pub struct Oracle<'a> {
    data: &'a EventSet,
    /// Event indexes ordered by latitude, for a band scan.
    by_lat: Vec<u32>,
    latest: HashMap<u128, u128>,
    tolerance: Tolerance,
}

/// The longitude difference folded into [-180, 180].
fn lon_delta(a: f64, b: f64) -> f64 {
    let mut d = a - b;
    if d > 180.0 {
        d -= 360.0;
    } else if d < -180.0 {
        d += 360.0;
    }
    d
}

/// Metres from `p` to the segment `a`–`b` on a local flat projection around `p` (accurate to
/// well under a metre at city scale, which is all a boundary tolerance needs).
fn segment_distance_m(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let scale_lon = METRES_PER_DEGREE * p.0.to_radians().cos();
    let project = |q: (f64, f64)| {
        (
            lon_delta(q.1, p.1) * scale_lon,
            (q.0 - p.0) * METRES_PER_DEGREE,
        )
    };
    let (ax, ay) = project(a);
    let (bx, by) = project(b);
    let (dx, dy) = (bx - ax, by - ay);
    let length2 = dx * dx + dy * dy;
    let t = if length2 > 0.0 {
        (-(ax * dx + ay * dy) / length2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (cx, cy) = (ax + t * dx, ay + t * dy);
    (cx * cx + cy * cy).sqrt()
}

impl<'a> Oracle<'a> {
    pub fn new(data: &'a EventSet, tolerance: Tolerance) -> Oracle<'a> {
        let mut by_lat: Vec<u32> = (0..data.events.len() as u32).collect();
        by_lat.sort_by(|&a, &b| {
            data.events[a as usize]
                .lat
                .total_cmp(&data.events[b as usize].lat)
        });
        // Events are in timestamp order, so the last one seen of an entity is its latest.
        let latest = data.events.iter().map(|e| (e.entity, e.id)).collect();
        Oracle {
            data,
            by_lat,
            latest,
            tolerance,
        }
    }

    pub fn tolerance(&self) -> Tolerance {
        self.tolerance
    }

    /// Indexes of events with latitude in `[low, high]`.
    fn band(&self, low: f64, high: f64) -> impl Iterator<Item = usize> + '_ {
        let events = &self.data.events;
        let start = self
            .by_lat
            .partition_point(|&i| events[i as usize].lat < low);
        self.by_lat[start..]
            .iter()
            .map(|&i| i as usize)
            .take_while(move |&i| events[i].lat <= high)
    }

    pub fn answer(&self, query: &Query) -> Answer {
        match query {
            Query::Latest { entity } => Answer {
                inside: self.latest.get(entity).copied().into_iter().collect(),
                excused: Vec::new(),
            },
            Query::Radius { lat, lon, radius_m } => self.radius(*lat, *lon, *radius_m),
            Query::Polygon { ring, .. } => self.polygon(ring),
        }
    }

    fn radius(&self, lat: f64, lon: f64, radius_m: f64) -> Answer {
        let tolerance_m = self.tolerance.metres(radius_m);
        let reach_m = (radius_m + tolerance_m) * 1.01 + 10.0;
        let dlat = reach_m / 110_000.0;
        let cos = (lat.abs() + dlat).min(89.9).to_radians().cos();
        let dlon = (reach_m / (110_000.0 * cos)).min(360.0);
        let centre = Point::new(lon, lat);
        let mut answer = Answer::default();
        for i in self.band(lat - dlat, lat + dlat) {
            let e = &self.data.events[i];
            if lon_delta(e.lon, lon).abs() > dlon {
                continue;
            }
            let d = Geodesic.distance(centre, Point::new(e.lon, e.lat));
            if (d - radius_m).abs() <= tolerance_m {
                answer.excused.push(e.id);
            } else if d <= radius_m {
                answer.inside.push(e.id);
            }
        }
        answer.inside.sort_unstable();
        answer.excused.sort_unstable();
        answer
    }

    fn polygon(&self, ring: &[(f64, f64)]) -> Answer {
        let (min_lat, max_lat, min_lon, max_lon) = bounds(ring);
        let mid_cos = ((min_lat + max_lat) / 2.0).to_radians().cos();
        let extent_m = ((max_lat - min_lat) * METRES_PER_DEGREE)
            .max((max_lon - min_lon) * METRES_PER_DEGREE * mid_cos);
        let tolerance_m = self.tolerance.metres(extent_m);
        let pad = tolerance_m / 100_000.0 + 1e-4;
        let pad_lon = pad / mid_cos.max(0.01);
        let polygon = Query::geo_polygon(ring);
        let mut answer = Answer::default();
        for i in self.band(min_lat - pad, max_lat + pad) {
            let e = &self.data.events[i];
            if e.lon < min_lon - pad_lon || e.lon > max_lon + pad_lon {
                continue;
            }
            let p = (e.lat, e.lon);
            let edge_m = (0..ring.len())
                .map(|k| segment_distance_m(p, ring[k], ring[(k + 1) % ring.len()]))
                .fold(f64::MAX, f64::min);
            if edge_m <= tolerance_m {
                answer.excused.push(e.id);
            } else if polygon.contains(&Point::new(e.lon, e.lat)) {
                answer.inside.push(e.id);
            }
        }
        answer.inside.sort_unstable();
        answer.excused.sort_unstable();
        answer
    }

    /// Compares a target's ids with the exact answer; `Err` is a one-line example of the
    /// disagreement, fit for a cell's reason.
    pub fn check(&self, query: &Query, got: &[u128]) -> Result<(), String> {
        let expected = self.answer(query);
        let mut got = got.to_vec();
        got.sort_unstable();
        if let Some(w) = got.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "{} returned event {} twice",
                describe(query),
                uuid_text(w[0])
            ));
        }
        let excused = |id: &u128| expected.excused.binary_search(id).is_ok();
        let missing: Vec<u128> = expected
            .inside
            .iter()
            .filter(|id| got.binary_search(id).is_err())
            .copied()
            .collect();
        let extra: Vec<u128> = got
            .iter()
            .filter(|id| expected.inside.binary_search(id).is_err() && !excused(id))
            .copied()
            .collect();
        if missing.is_empty() && extra.is_empty() {
            return Ok(());
        }
        let example = match (missing.first(), extra.first()) {
            (Some(id), _) => format!(
                "e.g. {} is missing ({})",
                uuid_text(*id),
                self.whereabouts(query, *id)
            ),
            (None, Some(id)) => format!(
                "e.g. {} should not be there ({})",
                uuid_text(*id),
                self.whereabouts(query, *id)
            ),
            (None, None) => unreachable!("one of the two lists is not empty"),
        };
        Err(format!(
            "{}: {} of the {} expected events missing, {} unexpected; {example}",
            describe(query),
            missing.len(),
            expected.inside.len(),
            extra.len()
        ))
    }

    /// Where an event sits relative to a query, for a mismatch example.
    fn whereabouts(&self, query: &Query, id: u128) -> String {
        let Some(e) = self.data.events.iter().find(|e| e.id == id) else {
            return "not an event of the generated data".into();
        };
        match query {
            Query::Latest { .. } => format!("entity {}, at {}", uuid_text(e.entity), e.ts_ms),
            Query::Radius { lat, lon, .. } => format!(
                "at ({:.6}, {:.6}), {:.1} m from the centre",
                e.lat,
                e.lon,
                Geodesic.distance(Point::new(*lon, *lat), Point::new(e.lon, e.lat))
            ),
            Query::Polygon { .. } => format!("at ({:.6}, {:.6})", e.lat, e.lon),
        }
    }
}

/// A short description of a query for messages.
pub fn describe(query: &Query) -> String {
    match query {
        Query::Latest { entity } => format!("latest event of entity {}", uuid_text(*entity)),
        Query::Radius { lat, lon, radius_m } => {
            format!("radius {radius_m} m around ({lat:.5}, {lon:.5})")
        }
        Query::Polygon { ring, .. } => {
            let (a, b, c, d) = bounds(ring);
            format!(
                "polygon of {} vertices in ({a:.4}..{b:.4}, {c:.4}..{d:.4})",
                ring.len()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CITIES, STREAM_EVENTS, Spread};

    fn data() -> EventSet {
        let spread = Spread {
            cities: CITIES[..2].to_vec(),
            uniform_share: 0.0,
        };
        EventSet::generate(42, STREAM_EVENTS, 20_000, &spread)
    }

    fn brute_force(data: &EventSet, lat: f64, lon: f64, r: f64) -> Vec<u128> {
        let mut ids: Vec<u128> = data
            .events
            .iter()
            .filter(|e| Geodesic.distance(Point::new(lon, lat), Point::new(e.lon, e.lat)) <= r)
            .map(|e| e.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn the_band_scan_finds_what_a_full_scan_finds() {
        let data = data();
        let oracle = Oracle::new(
            &data,
            Tolerance {
                fixed_m: 0.0,
                relative: 0.0,
            },
        );
        let paris = CITIES[1];
        for r in [300.0, 1_000.0, 10_000.0] {
            let answer = oracle.answer(&Query::Radius {
                lat: paris.lat,
                lon: paris.lon,
                radius_m: r,
            });
            let mut all = answer.inside.clone();
            all.extend(&answer.excused);
            all.sort_unstable();
            assert_eq!(all, brute_force(&data, paris.lat, paris.lon, r));
            assert!(!answer.inside.is_empty());
        }
    }

    #[test]
    fn answers_within_the_tolerance_pass_and_others_give_an_example() {
        let data = data();
        let oracle = Oracle::new(&data, Tolerance::DEFAULT);
        let london = CITIES[0];
        let query = Query::Radius {
            lat: london.lat,
            lon: london.lon,
            radius_m: 2_000.0,
        };
        let answer = oracle.answer(&query);
        assert!(
            !answer.excused.is_empty(),
            "a 10 m band around 2 km holds some events"
        );
        let mut with_edge = answer.inside.clone();
        with_edge.extend(&answer.excused);
        oracle.check(&query, &answer.inside).unwrap();
        oracle.check(&query, &with_edge).unwrap();
        let short = &answer.inside[1..];
        let error = oracle.check(&query, short).unwrap_err();
        assert!(
            error.contains("1 of the")
                && error.contains("is missing")
                && error.contains("m from the centre"),
            "{error}"
        );
        let mut twice = answer.inside.clone();
        twice.push(answer.inside[0]);
        assert!(oracle.check(&query, &twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn polygons_and_latest_events_are_exact() {
        let data = data();
        let oracle = Oracle::new(&data, Tolerance::DEFAULT);
        let p = CITIES[1];
        let ring = vec![
            (p.lat - 0.02, p.lon - 0.03),
            (p.lat - 0.02, p.lon + 0.03),
            (p.lat + 0.02, p.lon + 0.03),
            (p.lat + 0.02, p.lon - 0.03),
        ];
        let answer = oracle.answer(&Query::polygon(ring.clone()));
        let inside_box = data
            .events
            .iter()
            .filter(|e| (e.lat - p.lat).abs() < 0.0199 && (e.lon - p.lon).abs() < 0.0299)
            .count();
        assert!(
            answer.inside.len() <= inside_box
                && answer.inside.len() + answer.excused.len() >= inside_box
        );
        let last = data.events.last().unwrap();
        let latest = oracle.answer(&Query::Latest {
            entity: last.entity,
        });
        assert_eq!(latest.inside, vec![last.id]);
        assert!(
            oracle
                .check(
                    &Query::Latest {
                        entity: last.entity
                    },
                    &[data.events[0].id]
                )
                .is_err()
                || data.events[0].id == last.id
        );
    }
}
