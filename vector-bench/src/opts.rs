//! vector-bench's options: the common flags and the sweep's own (data, ef points, HNSW
//! parameters, filters, variants), stored in every report and read back from it.

use std::path::PathBuf;

use clap::Parser;
use common::options::CommonOpts;
use common::procstat::ServerPid;
use serde::{Deserialize, Serialize};

use crate::dataset::Metric;
use crate::index::Variant;
use crate::workloads::FilterMode;

/// `vector-bench`: with no `--target`, the sweep on an embedded usearch index over a generated
/// dataset (seed 000: 100,000 × 768, cosine, m = 16, ef_construction = 200, k = 10).
#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(
    name = "vector-bench",
    version,
    about,
    // A sweep measures many points (ef × filter × variant); shorter windows keep the seed's
    // default run to minutes. Both remain flags with the same meaning as in every tool.
    mut_arg("duration", |a| a.default_value("2s")),
    mut_arg("rounds", |a| a.default_value("3"))
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// The vectors: `generated` (a seeded Gaussian mixture), an ann-benchmarks `.hdf5` file,
    /// or a TEXMEX `.fvecs`/`.bvecs` base file (with --query-file).
    #[arg(long, default_value = "generated", value_name = "generated|PATH")]
    pub data: String,

    /// TEXMEX query vectors (`.fvecs`/`.bvecs`) for a TEXMEX base file.
    #[arg(long, value_name = "PATH")]
    pub query_file: Option<PathBuf>,

    /// TEXMEX ground truth (`.ivecs`) for the unfiltered queries; checked against the exact
    /// ground truth vector-bench computes.
    #[arg(long, value_name = "PATH")]
    pub truth_file: Option<PathBuf>,

    /// Rows of generated data (or the first rows of a file).
    #[arg(long, default_value = "100k", value_parser = common::human::parse_count)]
    pub rows: u64,

    /// Dimensions of generated data.
    #[arg(long, default_value = "768", value_parser = common::human::parse_count)]
    pub dims: u64,

    /// Clusters of the generated Gaussian mixture.
    #[arg(long, default_value = "64", value_parser = common::human::parse_count)]
    pub clusters: u64,

    /// Queries per ef point.
    #[arg(long, default_value = "250", value_parser = common::human::parse_count)]
    pub queries: u64,

    /// Neighbours asked for and scored (recall@k).
    #[arg(long, default_value = "10", value_parser = common::human::parse_count)]
    pub k: u64,

    /// The ef (search breadth) points of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "32,64,128,256", value_parser = common::human::parse_count)]
    pub ef: Vec<u64>,

    /// HNSW links per node, the same on every target.
    #[arg(long, default_value = "16", value_parser = common::human::parse_count)]
    pub m: u64,

    /// HNSW build breadth, the same on every target.
    #[arg(long, default_value = "200", value_parser = common::human::parse_count)]
    pub ef_construction: u64,

    /// Distance (generated data; a file's own metric wins when it names one).
    #[arg(long, value_enum, default_value = "cosine")]
    pub metric: Metric,

    /// Query families: unfiltered, and filtered to a category holding 10% or 1% of the rows.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,10pct,1pct"
    )]
    pub filters: Vec<FilterMode>,

    /// Index variants: full-precision f32, scalar int8, binary (each where the target offers
    /// it; rescoring on where offered).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "f32,int8,binary"
    )]
    pub variants: Vec<Variant>,

    /// Rows per insert batch.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub batch: u64,

    /// Prefix of every collection, table or index vector-bench creates.
    #[arg(long, default_value = "fairbench")]
    pub namespace: String,

    /// A local server's PID (`[NAME=]PID`; the name may be left out with one target), to report
    /// its resident memory after each build.
    #[arg(long = "server-pid", value_name = "[NAME=]PID", value_parser = ServerPid::parse)]
    pub server_pids: Vec<ServerPid>,

    /// Where ground truth for generated data is cached (default ~/.cache/fairbench/vector-bench).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Leave the collections and tables in place after the run (by default they are dropped).
    #[arg(long)]
    pub keep_data: bool,

    /// Only compute the exact ground truth (ignoring any cache, then caching it), report its
    /// time and, when the data ships neighbour lists, how well they agree; measure no target.
    #[arg(long)]
    pub truth_only: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_options_read_back_as_parsed() {
        let opts = Opts::parse_from([
            "vector-bench",
            "--target",
            "pg=postgres://u:secret@127.0.0.1/db",
            "--ef",
            "16,64",
            "--filters",
            "none,1pct",
            "--variants",
            "f32,binary",
            "--metric",
            "l2",
            "--server-pid",
            "pg=42",
            "--duration",
            "500ms",
        ]);
        let json = serde_json::to_value(&opts).unwrap();
        assert_eq!(
            json["duration_s"], 0.5,
            "the common flags sit at the top level"
        );
        assert!(!json.to_string().contains("secret"), "{json}");
        let back: Opts = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert_eq!(back.server_pids, opts.server_pids);
        assert_eq!(back.common.duration, opts.common.duration);
        assert_eq!(
            (back.ef, back.variants),
            (vec![16, 64], vec![Variant::F32, Variant::Binary])
        );
    }
}
