//! The queries: latest event by entity id, events within R metres of a point, events inside a
//! polygon. Generated from the seed (radius centres and polygons near the cities, so they meet
//! realistic densities) or read from a user's query file, and validated either way.

use std::fmt;
use std::path::Path;

use geo::{Coord, LineString, Polygon, Validation};
use rand::RngExt;

use crate::events::{City, EventSet, MAX_INDEXED_LATITUDE, Spread, offset};

/// One query. Polygons are rings of (lat, lon) vertices, not closed (the last vertex is not
/// repeated).
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Latest {
        entity: u128,
    },
    Radius {
        lat: f64,
        lon: f64,
        radius_m: f64,
    },
    /// `wkt` is the same ring as closed WKT in (lon lat) order, rendered once.
    Polygon {
        ring: Vec<(f64, f64)>,
        wkt: String,
    },
}

/// The query families, each one workload of the query table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    Latest,
    /// Radius in whole metres.
    Radius(u64),
    Polygon,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Family::Latest => write!(f, "id lookup"),
            Family::Radius(m) if m % 1000 == 0 => write!(f, "radius {} km", m / 1000),
            Family::Radius(m) => write!(f, "radius {m} m"),
            Family::Polygon => write!(f, "polygon"),
        }
    }
}

impl Query {
    pub fn family(&self) -> Family {
        match self {
            Query::Latest { .. } => Family::Latest,
            Query::Radius { radius_m, .. } => Family::Radius(radius_m.round() as u64),
            Query::Polygon { .. } => Family::Polygon,
        }
    }

    /// A polygon query over `ring`.
    pub fn polygon(ring: Vec<(f64, f64)>) -> Query {
        let wkt = Query::polygon_wkt(&ring);
        Query::Polygon { ring, wkt }
    }

    /// The polygon as a `geo` polygon in (x = lon, y = lat).
    pub fn geo_polygon(ring: &[(f64, f64)]) -> Polygon<f64> {
        let coords: Vec<Coord<f64>> = ring
            .iter()
            .map(|&(lat, lon)| Coord { x: lon, y: lat })
            .collect();
        Polygon::new(LineString::new(coords), Vec::new())
    }

    /// The polygon as WKT in (lon lat) order, closed.
    pub fn polygon_wkt(ring: &[(f64, f64)]) -> String {
        let mut points: Vec<String> = ring
            .iter()
            .map(|(lat, lon)| format!("{lon} {lat}"))
            .collect();
        if let Some(first) = points.first().cloned() {
            points.push(first);
        }
        format!("POLYGON(({}))", points.join(", "))
    }
}

/// (min_lat, max_lat, min_lon, max_lon) of a ring.
pub fn bounds(ring: &[(f64, f64)]) -> (f64, f64, f64, f64) {
    ring.iter().fold(
        (f64::MAX, f64::MIN, f64::MAX, f64::MIN),
        |(a, b, c, d), &(lat, lon)| (a.min(lat), b.max(lat), c.min(lon), d.max(lon)),
    )
}

/// Why a query is not usable; each message is one sentence.
pub fn validate(query: &Query) -> Result<(), String> {
    let point = |lat: f64, lon: f64| -> Result<(), String> {
        if !(lat.is_finite() && (-90.0..=90.0).contains(&lat)) {
            return Err(format!("latitude {lat} is out of range [-90, 90]"));
        }
        if !(lon.is_finite() && (-180.0..=180.0).contains(&lon)) {
            return Err(format!("longitude {lon} is out of range [-180, 180]"));
        }
        Ok(())
    };
    match query {
        Query::Latest { .. } => Ok(()),
        Query::Radius { lat, lon, radius_m } => {
            point(*lat, *lon)?;
            if !(radius_m.is_finite() && *radius_m > 0.0) {
                return Err(format!("radius {radius_m} m must be greater than 0"));
            }
            Ok(())
        }
        Query::Polygon { ring, .. } => {
            if ring.is_empty() {
                return Err("the polygon is empty".into());
            }
            for &(lat, lon) in ring {
                point(lat, lon)?;
            }
            let (_, _, min_lon, max_lon) = bounds(ring);
            if max_lon - min_lon > 180.0 {
                return Err("the polygon crosses the antimeridian, which is not supported".into());
            }
            let polygon = Query::geo_polygon(ring);
            match polygon.validation_errors().into_iter().next() {
                None => Ok(()),
                Some(error) => Err(format!("the polygon is not valid: {error}")),
            }
        }
    }
}

/// What the query generator draws on.
#[derive(Debug, Clone)]
pub struct QueryPlan<'a> {
    pub per_family: usize,
    pub radii_m: &'a [f64],
    pub spread: &'a Spread,
}

/// Seeded queries: `per_family` of each family. Centres sit near a city (within 5 km) when
/// there are cities, so radius and polygon queries land where the events are.
pub fn generate(seed: u64, plan: &QueryPlan<'_>, data: &EventSet) -> Vec<Query> {
    let mut rng = common::data::rng(seed, crate::events::STREAM_QUERIES);
    let centre = |rng: &mut rand_chacha::ChaCha8Rng| -> (f64, f64) {
        match plan.spread.cities.as_slice() {
            [] => {
                let e = &data.events[rng.random_range(0..data.events.len())];
                (e.lat, e.lon)
            }
            cities => {
                let City { lat, lon, .. } = cities[rng.random_range(0..cities.len())];
                offset(
                    lat,
                    lon,
                    rng.random_range(0.0..5_000.0),
                    rng.random_range(0.0..std::f64::consts::TAU),
                )
            }
        }
    };
    let mut queries = Vec::new();
    for _ in 0..plan.per_family {
        let entity = data.entities[rng.random_range(0..data.entities.len())];
        queries.push(Query::Latest { entity });
    }
    for &radius_m in plan.radii_m {
        for _ in 0..plan.per_family {
            let (lat, lon) = centre(&mut rng);
            queries.push(Query::Radius { lat, lon, radius_m });
        }
    }
    for i in 0..plan.per_family {
        let (lat, lon) = centre(&mut rng);
        queries.push(Query::polygon(polygon(&mut rng, lat, lon, i % 2 == 0)));
    }
    queries
}

/// A star-shaped ring around a centre (so it never self-intersects): convex when every vertex
/// is at the same distance, concave when distances vary. City scale: 1 to 6 km across.
fn polygon(rng: &mut rand_chacha::ChaCha8Rng, lat: f64, lon: f64, convex: bool) -> Vec<(f64, f64)> {
    let vertices = rng.random_range(5..=12);
    let radius_m = rng.random_range(500.0..3_000.0);
    let mut angles: Vec<f64> = (0..vertices)
        .map(|k| (k as f64 + rng.random_range(0.1..0.9)) * std::f64::consts::TAU / vertices as f64)
        .collect();
    angles.sort_by(f64::total_cmp);
    angles
        .into_iter()
        .map(|bearing| {
            let r = if convex {
                radius_m
            } else {
                radius_m * rng.random_range(0.35..1.0)
            };
            let (vlat, vlon) = offset(lat, lon, r, bearing);
            (
                vlat.clamp(-MAX_INDEXED_LATITUDE, MAX_INDEXED_LATITUDE),
                vlon,
            )
        })
        .collect()
}

/// Parses a radius: `1km`, `500m`, or plain metres.
pub fn parse_radius(text: &str) -> Result<f64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (number, scale) = if let Some(n) = t.strip_suffix("km") {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1.0)
    } else {
        (t.as_str(), 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a radius; write it like 1km, 500m or 2500"))?;
    let metres = value * scale;
    if !(metres.is_finite() && metres > 0.0) {
        return Err(format!("radius `{text}` must be greater than 0"));
    }
    if metres > 1_000_000.0 {
        return Err(format!("radius `{text}` is more than 1,000 km"));
    }
    Ok(metres)
}

/// Reads a query file: one query a line, `#` starts a comment.
///
/// ```text
/// radius LAT LON METRES
/// polygon LAT LON, LAT LON, LAT LON[, …]
/// ```
pub fn read_query_file(path: &Path) -> Result<Vec<Query>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the query file {}: {e}", path.display()))?;
    let mut queries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let where_ = || format!("query file {} line {}", path.display(), index + 1);
        let query = parse_query_line(line).map_err(|e| format!("{}: {e}", where_()))?;
        validate(&query).map_err(|e| format!("{}: {e}", where_()))?;
        queries.push(query);
    }
    if queries.is_empty() {
        return Err(format!("the query file {} holds no query", path.display()));
    }
    Ok(queries)
}

fn number(text: &str, what: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| format!("`{text}` is not a {what}"))
}

fn parse_query_line(line: &str) -> Result<Query, String> {
    let (kind, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match kind.to_ascii_lowercase().as_str() {
        "radius" => {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let [lat, lon, radius] = fields.as_slice() else {
                return Err("a radius query is `radius LAT LON METRES`".into());
            };
            Ok(Query::Radius {
                lat: number(lat, "latitude")?,
                lon: number(lon, "longitude")?,
                radius_m: number(radius, "radius in metres")?,
            })
        }
        "polygon" => {
            let mut ring = Vec::new();
            for vertex in rest.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                let fields: Vec<&str> = vertex.split_whitespace().collect();
                let [lat, lon] = fields.as_slice() else {
                    return Err(format!("polygon vertex `{vertex}` is not `LAT LON`"));
                };
                ring.push((number(lat, "latitude")?, number(lon, "longitude")?));
            }
            if ring.len() > 1 && ring.first() == ring.last() {
                ring.pop();
            }
            Ok(Query::polygon(ring))
        }
        other => Err(format!(
            "unknown query `{other}`; a line is `radius LAT LON METRES` or `polygon LAT LON, LAT LON, …`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CITIES, STREAM_EVENTS};

    #[test]
    fn generated_queries_are_valid_and_repeatable() {
        let spread = Spread {
            cities: CITIES.to_vec(),
            uniform_share: 0.1,
        };
        let data = EventSet::generate(42, STREAM_EVENTS, 2_000, &spread);
        let plan = QueryPlan {
            per_family: 20,
            radii_m: &[1_000.0, 10_000.0],
            spread: &spread,
        };
        let queries = generate(42, &plan, &data);
        assert_eq!(queries.len(), 80);
        assert_eq!(queries, generate(42, &plan, &data));
        for q in &queries {
            validate(q).unwrap_or_else(|e| panic!("{q:?}: {e}"));
        }
        let families: std::collections::BTreeSet<String> =
            queries.iter().map(|q| q.family().to_string()).collect();
        assert_eq!(
            families.into_iter().collect::<Vec<_>>(),
            ["id lookup", "polygon", "radius 1 km", "radius 10 km"]
        );
    }

    #[test]
    fn bad_queries_are_refused_with_a_reason() {
        let bad = [
            (
                Query::Radius {
                    lat: 91.0,
                    lon: 0.0,
                    radius_m: 10.0,
                },
                "latitude 91",
            ),
            (
                Query::Radius {
                    lat: 0.0,
                    lon: -181.0,
                    radius_m: 10.0,
                },
                "longitude -181",
            ),
            (
                Query::Radius {
                    lat: 0.0,
                    lon: 0.0,
                    radius_m: 0.0,
                },
                "greater than 0",
            ),
            (Query::polygon(vec![]), "empty"),
            (
                Query::polygon(vec![(0.0, 0.0), (1.0, 1.0), (0.0, 1.0), (1.0, 0.0)]),
                "self-intersection",
            ),
            (Query::polygon(vec![(0.0, 0.0), (1.0, 1.0)]), "not valid"),
        ];
        for (query, expected) in bad {
            let error = validate(&query).unwrap_err();
            assert!(error.contains(expected), "{query:?}: {error}");
        }
    }

    #[test]
    fn query_files_parse_and_report_the_line_of_a_bad_query() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.txt");
        std::fs::write(
            &path,
            "# ok\nradius 48.85 2.35 1000\npolygon 48.8 2.3, 48.9 2.3, 48.9 2.4, 48.8 2.3\n",
        )
        .unwrap();
        let queries = read_query_file(&path).unwrap();
        assert_eq!(queries.len(), 2);
        assert!(matches!(&queries[1], Query::Polygon { ring, .. } if ring.len() == 3));
        std::fs::write(&path, "radius 48.85 2.35 1000\nradius 95 2.35 1000\n").unwrap();
        let error = read_query_file(&path).unwrap_err();
        assert!(
            error.contains("line 2") && error.contains("latitude 95"),
            "{error}"
        );
        std::fs::write(&path, "radius 48.85 2.35 -5\n").unwrap();
        assert!(
            read_query_file(&path)
                .unwrap_err()
                .contains("greater than 0")
        );
        assert_eq!(parse_radius("1km").unwrap(), 1_000.0);
        assert_eq!(parse_radius("250m").unwrap(), 250.0);
        assert!(
            parse_radius("0km").is_err()
                && parse_radius("-1").is_err()
                && parse_radius("far").is_err()
        );
    }
}
