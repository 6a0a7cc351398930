//! geo-bench's options: the common flags and the insert curve's, query's and oracle's own.

use std::path::PathBuf;

use clap::Parser;
use common::human::{parse_count, parse_count_at_most};
use common::options::CommonOpts;
use serde::{Deserialize, Serialize};

use crate::queries;

/// The workload families a run can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// The insert curve: events/s for each --batch-sizes × --clients.
    Insert,
    /// The query table: id lookup, radius (each --radii) and polygon, at --connections.
    Query,
    /// Single-point GEOADD pipelined --pipeline deep at --connections (Redis/Valkey only),
    /// the shape `redis-benchmark -P 64 -c 8 … GEOADD` measures.
    Geoadd,
}

#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(name = "geo-bench", version, about)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Workloads to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "insert,query"
    )]
    pub workloads: Vec<Family>,

    /// Events loaded (not timed) before the queries are verified and measured.
    #[arg(long, default_value = "200k", value_parser = parse_count)]
    pub events: u64,

    /// Events per insert request: the x axis of the insert curve.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,8000", value_parser = batch_size)]
    pub batch_sizes: Vec<usize>,

    /// Concurrent clients of the insert curve (one line each).
    #[arg(long, value_delimiter = ',', default_value = "1,8", value_parser = clients)]
    pub clients: Vec<u32>,

    /// Radii of the radius queries (`1km`, `500m`).
    #[arg(long, value_delimiter = ',', default_value = "1km,10km", value_parser = queries::parse_radius)]
    #[serde(rename = "radii_m")]
    pub radii: Vec<f64>,

    /// Queries generated per family; every one is checked against the oracle before timing.
    #[arg(long, default_value = "100", value_parser = parse_count)]
    pub queries: u64,

    /// A file of radius and polygon queries (`radius LAT LON METRES`,
    /// `polygon LAT LON, LAT LON, …`) used instead of the generated ones.
    #[arg(long, value_name = "PATH")]
    pub query_file: Option<PathBuf>,

    /// Cities events cluster around [default: all of london, paris, berlin, new-york,
    /// san-francisco, sao-paulo, lagos, mumbai, singapore, tokyo, sydney, palermo].
    #[arg(long, value_delimiter = ',')]
    pub cities: Vec<String>,

    /// Share of events placed uniformly over the globe instead of near a city.
    #[arg(long, default_value = "0.1", value_parser = share)]
    pub uniform_share: f64,

    /// Commands per pipeline of the geoadd workload.
    #[arg(long, default_value = "64", value_parser = batch_size)]
    pub pipeline: usize,

    /// Boundary tolerance of the oracle, fixed part in metres.
    #[arg(long, default_value = "1", value_parser = non_negative)]
    pub tolerance_m: f64,

    /// Boundary tolerance of the oracle, in percent of the query's radius or extent. The default
    /// covers the spread between a sphere and the WGS84 ellipsoid (Redis's sphere reads
    /// north–south distances near the equator 0.59% long).
    #[arg(long, default_value = "0.7", value_parser = non_negative)]
    pub tolerance_pct: f64,

    /// Leave fairbench's tables and keys in place after the run.
    #[arg(long)]
    pub keep_data: bool,
}

fn batch_size(text: &str) -> Result<usize, String> {
    parse_count_at_most(text, 100_000, |n| {
        format!("{n} is more than 100,000 events per request")
    })
}

fn clients(text: &str) -> Result<u32, String> {
    let n = parse_count_at_most(text, 1_024, |n| format!("{n} is more than 1,024 clients"))?;
    Ok(n as u32)
}

fn share(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{v} is not a share between 0 and 1"));
    }
    Ok(v)
}

fn non_negative(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{v} must be 0 or more"));
    }
    Ok(v)
}
