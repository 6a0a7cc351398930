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
/// dataset of `--scale small` (20,000 × 256, f32 and int8, three ef points: under three minutes
/// on two cores), beside the exact scan of every filtered subset.
#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(
    name = "vector-bench",
    version,
    about,
    // A sweep measures many points (ef × filter × variant × k); one-second windows keep the
    // default run to minutes. Both remain flags with the same meaning as in every tool.
    mut_arg("duration", |a| a.default_value("1s")),
    mut_arg("rounds", |a| a.default_value("3"))
)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// The size of the run when the flags below are not given: `small` (20,000 × 256, f32 and
    /// int8, ef 16–64), `medium` (100,000 × 384, every variant, ef 16–256) or `large` (seed
    /// 000's 100,000 × 768, every variant, ef 32–256).
    #[arg(long, value_enum, default_value = "small")]
    pub scale: Scale,

    /// The vectors: `generated` (a seeded Gaussian mixture), an ann-benchmarks `.hdf5` file,
    /// or a TEXMEX `.fvecs`/`.bvecs` base file (with --query-file).
    #[arg(long, default_value = "generated", value_name = "generated|PATH")]
    pub data: String,

    /// TEXMEX query vectors (`.fvecs`/`.bvecs`) for a TEXMEX base file.
    #[arg(long, value_name = "PATH")]
    pub query_file: Option<PathBuf>,

    /// TEXMEX ground truth (`.ivecs`) for the unfiltered queries; checked at every --k with
    /// distances recomputed from the vectors (every query's order, a sample against the exact
    /// search), and replaced by the exact ground truth on any disagreement beyond ties.
    #[arg(long, value_name = "PATH")]
    pub truth_file: Option<PathBuf>,

    /// Rows of generated data (or the first rows of a file) [default: from --scale].
    #[arg(long, value_parser = common::human::parse_count)]
    pub rows: Option<u64>,

    /// Dimensions of generated data [default: from --scale].
    #[arg(long, value_parser = common::human::parse_count)]
    pub dims: Option<u64>,

    /// Clusters of the generated Gaussian mixture.
    #[arg(long, default_value = "64", value_parser = common::human::parse_count)]
    pub clusters: u64,

    /// Queries per ef point [default: from --scale].
    #[arg(long, value_parser = common::human::parse_count)]
    pub queries: Option<u64>,

    /// Neighbours asked for and scored (recall@k); several (`1,10,100`) make one sweep each,
    /// scored against one ground truth computed at the largest.
    #[arg(long, value_delimiter = ',', default_value = "10", value_parser = common::human::parse_count)]
    pub k: Vec<u64>,

    /// The ef (search breadth) points of the sweep [default: from --scale].
    #[arg(long, value_delimiter = ',', value_parser = common::human::parse_count)]
    pub ef: Option<Vec<u64>>,

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
    /// it; with and without rescoring where offered) [default: from --scale].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub variants: Option<Vec<Variant>>,

    /// Rows per insert batch.
    #[arg(long, default_value = "1000", value_parser = common::human::parse_count)]
    pub batch: u64,

    /// Longest one system's index build may take (every row loaded, the index built and read
    /// back, the search sessions opened): past it the build is stopped and every point of
    /// that variant on that system is `timeout`; the run goes on. A build is many steps, not
    /// one operation, so --ceiling does not bound it. The default leaves a wide margin over
    /// --scale large (100,000 × 768) on two cores.
    #[arg(long, default_value = "1h", value_parser = common::human::parse_duration)]
    #[serde(
        rename = "build_ceiling_s",
        serialize_with = "common::options::seconds",
        deserialize_with = "common::options::from_seconds"
    )]
    pub build_ceiling: std::time::Duration,

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

    /// Trust a `--truth-file` (or an HDF5 file's `neighbors`) without checking it against the
    /// vectors and vector-bench's own exact search (the report says it was trusted).
    #[arg(long)]
    pub trust_truth_file: bool,
}

/// The size presets of `--scale`.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// 20,000 × 256, f32 and int8, ef 16, 32, 64 (at this size every f32 family's recall is
    /// 0.999 or more by ef 64 and int8's stops moving there, so ef 128 would add windows and
    /// nothing to read): a first result in under three minutes.
    Small,
    /// 100,000 × 384 (a sentence-embedding size), every variant, ef 16 to 256.
    Medium,
    /// Seed 000's 100,000 × 768, every variant, ef 32 to 256.
    Large,
}

/// What a scale sets when its flag is not given.
struct Preset {
    rows: u64,
    dims: u64,
    queries: u64,
    ef: &'static [u64],
    variants: &'static [Variant],
}

impl Scale {
    fn preset(self) -> Preset {
        const ALL: &[Variant] = &[Variant::F32, Variant::Int8, Variant::Binary];
        match self {
            Scale::Small => Preset {
                rows: 20_000,
                dims: 256,
                queries: 200,
                ef: &[16, 32, 64],
                variants: &[Variant::F32, Variant::Int8],
            },
            Scale::Medium => Preset {
                rows: 100_000,
                dims: 384,
                queries: 250,
                ef: &[16, 32, 64, 128, 256],
                variants: ALL,
            },
            Scale::Large => Preset {
                rows: 100_000,
                dims: 768,
                queries: 250,
                ef: &[32, 64, 128, 256],
                variants: ALL,
            },
        }
    }
}

impl Opts {
    /// The options with every value `--scale` leaves open filled in: what the run uses, and
    /// what its report stores.
    pub fn resolved(&self) -> Opts {
        let preset = self.scale.preset();
        let mut out = self.clone();
        out.rows.get_or_insert(preset.rows);
        out.dims.get_or_insert(preset.dims);
        out.queries.get_or_insert(preset.queries);
        out.ef.get_or_insert_with(|| preset.ef.to_vec());
        out.variants.get_or_insert_with(|| preset.variants.to_vec());
        out
    }

    pub fn rows(&self) -> u64 {
        self.rows.unwrap_or_else(|| self.scale.preset().rows)
    }

    pub fn dims(&self) -> u64 {
        self.dims.unwrap_or_else(|| self.scale.preset().dims)
    }

    pub fn queries(&self) -> u64 {
        self.queries.unwrap_or_else(|| self.scale.preset().queries)
    }

    pub fn efs(&self) -> Vec<u64> {
        self.ef
            .clone()
            .unwrap_or_else(|| self.scale.preset().ef.to_vec())
    }

    pub fn variant_list(&self) -> Vec<Variant> {
        self.variants
            .clone()
            .unwrap_or_else(|| self.scale.preset().variants.to_vec())
    }

    /// The largest k asked for: the ground truth's depth.
    pub fn max_k(&self) -> u64 {
        self.k.iter().copied().max().unwrap_or(10)
    }
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
            (back.efs(), back.variant_list()),
            (vec![16, 64], vec![Variant::F32, Variant::Binary])
        );
    }

    #[test]
    fn a_scale_fills_only_what_the_flags_leave_open() {
        let opts =
            Opts::parse_from(["vector-bench", "--scale", "large", "--rows", "5k"]).resolved();
        assert_eq!((opts.rows, opts.dims), (Some(5_000), Some(768)));
        assert_eq!(opts.efs(), vec![32, 64, 128, 256]);
        assert_eq!(opts.variant_list().len(), 3);
        let small = Opts::parse_from(["vector-bench", "--k", "1,100"]).resolved();
        assert_eq!(
            (small.rows(), small.dims(), small.max_k()),
            (20_000, 256, 100)
        );
        assert_eq!(small.variant_list(), vec![Variant::F32, Variant::Int8]);
        let json = serde_json::to_value(&small).unwrap();
        assert_eq!(
            (json["rows"].as_u64(), json["scale"].as_str()),
            (Some(20_000), Some("small"))
        );
    }
}
