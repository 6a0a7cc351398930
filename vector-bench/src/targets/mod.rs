//! The systems vector-bench drives, one file each. A target knows its engine (how to connect,
//! build an HNSW index with the asked-for parameters, read them back, and search) and nothing of
//! the sweep that calls it. Adding a system is adding a file here and one line in [`open`].

pub mod chroma;
pub mod exact;
pub mod pgvector;
pub mod qdrant;
#[cfg(feature = "qdrant-edge")]
pub mod qdrant_edge;
pub mod usearch;
pub mod weaviate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::deadline::Deadline;
use common::options::TargetSpec;
use common::pool::BoxFuture;
pub use common::target::{Described, Identified, Identity, TargetError, location_of_url};
use serde::Serialize;

use crate::dataset::Dataset;
use crate::index::{IndexSpec, Variant};
use crate::session::Searchers;
use crate::workloads::FilterMode;

/// One way of searching a built index, measured as its own curve (a lane of the sweep, and a
/// system of the report named `NAME+SUFFIX`): pgvector with `hnsw.iterative_scan`, Qdrant's
/// quantized search with rescoring. Every target has its default mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mode {
    /// Appended to the system's name; empty for the target's default.
    pub suffix: String,
    /// What the mode sets, in words, for the report.
    pub description: String,
    /// The variants it applies to; empty: every variant the target offers.
    pub variants: Vec<Variant>,
    /// It changes only filtered search (unfiltered answers would be the default's).
    pub filtered_only: bool,
}

impl Mode {
    /// Whether this mode measures `variant` × `filter`.
    pub fn applies(&self, variant: Variant, filter: FilterMode) -> bool {
        (self.variants.is_empty() || self.variants.contains(&variant))
            && !(self.filtered_only && filter == FilterMode::None)
    }

    /// The lane's system name: `pgvector+relaxed_order`.
    pub fn name(&self, base: &str) -> String {
        if self.suffix.is_empty() {
            base.to_owned()
        } else {
            format!("{base}+{}", self.suffix)
        }
    }
}

/// Search sessions opened in one mode, with the settings read back from the first.
pub type Opened = (Box<dyn Searchers>, BTreeMap<String, String>);

/// What opening a target may need besides its URL: the results folder (an embedded engine
/// keeps its files there), passwords from files or variables, `--insecure-skip-verify`.
pub use common::reach::{Reach, TlsState};

/// Refuses an existing collection of fairbench's whose dimension is not the dataset's.
pub fn check_dimensions(
    identity: &Identity,
    object: String,
    found: Option<usize>,
    wanted: usize,
) -> Result<(), TargetError> {
    match found {
        Some(found) if found != wanted => Err(identity.query_error(format!(
            "{object} holds {found}-dimension vectors, the dataset has {wanted}: \
             drop it or choose another --namespace"
        ))),
        _ => Ok(()),
    }
}

/// What building an index cost, and what the times include.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BuildReport {
    /// Seconds until every row was acknowledged.
    pub insert_s: f64,
    /// Seconds from the first row sent until the index answered a query through the index.
    pub build_s: f64,
    /// What the two times cover on this engine (`add() on 2 threads; insert is the build`).
    pub method: String,
    /// The index's own memory figure, for an embedded index.
    pub index_bytes: Option<u64>,
}

/// What a build says does not stop it: `--build-ceiling` sets its bound.
pub const BUILD_PHASE: &str = "building the index";
pub const BUILD_FLAG: &str = "--build-ceiling";

/// A build's progress and its bound: the rows sent so far, and the deadline a loop that cannot
/// be preempted (rows added in process, batches sent by a blocking client) checks between
/// batches. The caller also drops an async build at the deadline.
#[derive(Debug)]
pub struct BuildProgress {
    rows: AtomicU64,
    deadline: Deadline,
}

impl BuildProgress {
    pub fn new(deadline: Deadline) -> BuildProgress {
        BuildProgress {
            rows: AtomicU64::new(0),
            deadline,
        }
    }

    /// Counts `rows` more rows sent; `Err` (a complete sentence) once the build is past its
    /// bound, for the loop to stop there.
    pub fn sent(&self, rows: u64) -> Result<(), String> {
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.deadline
            .check(BUILD_PHASE, BUILD_FLAG)
            .map_err(|e| e.to_string())
    }

    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }
}

/// The control path of a system: everything but the measured searches.
pub trait VectorTarget: Identified + Send {
    /// Version and settings, read from the system itself, under the target's own kind.
    fn describe(&mut self) -> BoxFuture<'_, Result<Described, TargetError>>;

    /// What its connections use for TLS, for a target reached over the network (recorded with
    /// the system: version, cipher, verification).
    fn tls(&self) -> Option<TlsState> {
        None
    }

    /// How the target offers `variant` (`Ok(how)`), or why it does not (`Err(why)`).
    fn offer(&self, variant: Variant) -> Result<String, String>;

    /// Checks the namespace before anything is written: an object in the way that fairbench did
    /// not create, or one of fairbench's with another dimension, is an error.
    fn check<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>>;

    /// (Re)creates fairbench's collection, loads every row with its category, builds the index
    /// and waits until it answers queries. Each batch sent goes through
    /// [`BuildProgress::sent`], which stops the build once it is past `--build-ceiling`.
    fn build<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        data: &'a Arc<Dataset>,
        batch: usize,
        progress: &'a BuildProgress,
    ) -> BoxFuture<'a, Result<BuildReport, TargetError>>;

    /// The index's parameters and row count as the system reports them: setting → value.
    fn verify<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>>;

    /// The ways of searching this target measures, its default first.
    fn modes(&self) -> Vec<Mode> {
        vec![Mode::default()]
    }

    /// Opens `sessions` search sessions on the built index in `mode`, before any clock starts,
    /// and reads back what the mode set.
    fn searchers<'a>(
        &'a mut self,
        spec: &'a IndexSpec,
        sessions: usize,
        mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Opened, TargetError>>;

    /// Drops fairbench's own collection of `spec`.
    fn drop_index<'a>(&'a mut self, spec: &'a IndexSpec) -> BoxFuture<'a, Result<(), TargetError>>;
}

/// How every report labels the qdrant-edge target.
pub const QDRANT_EDGE_LABEL: &str = concat!(
    "Qdrant engine (qdrant-edge ",
    env!("QDRANT_EDGE_VERSION"),
    ", in process) — not the Qdrant server: no network, no gRPC"
);

/// Where the sweep runs when no target is named: the embedded usearch index.
pub const DEFAULT_TARGET: &str = "usearch";

/// Whether `spec` names an engine that runs inside this process, not a server: each of several
/// workers would build and search an index of its own.
pub fn is_embedded(spec: &TargetSpec) -> bool {
    matches!(spec.scheme(), "usearch" | "qdrant-edge")
}

/// How long a server's requests may take. A search is bounded by `ceiling`, which the pass and
/// the window keep by dropping it (and the request with it) and counting a timeout: a client
/// timer of its own set to the same moment could fire first and make it an `error`, so a
/// search request has none. A build as a whole is bounded by `build` (its caller drops it).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// `--ceiling`
    pub ceiling: Duration,
    /// `--build-ceiling`
    pub build: Duration,
}

impl Bounds {
    /// No bound at all, for a target opened outside a run.
    pub const NONE: Bounds = Bounds {
        ceiling: Duration::MAX,
        build: Duration::MAX,
    };

    /// The bound of one request of the control path (describe, check, an add of a build,
    /// verify, drop): it is one operation, and may be part of a build, so neither bound cuts
    /// it shorter than the other allows.
    pub fn request(&self) -> Duration {
        self.ceiling.max(self.build)
    }
}

/// Connects to the system `spec` names.
pub async fn open(
    spec: &TargetSpec,
    reach: &Reach,
    bounds: Bounds,
) -> Result<Box<dyn VectorTarget>, TargetError> {
    match spec.scheme() {
        "usearch" => Ok(Box::new(usearch::UsearchTarget::open(spec))),
        "qdrant-edge" => open_qdrant_edge(spec, reach),
        "postgres" | "postgresql" | "pgvector" => pgvector::PgvectorTarget::open(spec, reach).await,
        "chroma" => chroma::ChromaTarget::open(spec, reach, bounds).await,
        "qdrant" => qdrant::QdrantTarget::open(spec, reach, bounds).await,
        "weaviate" => weaviate::WeaviateTarget::open(spec, reach, bounds).await,
        _ => Err(TargetError::unknown_scheme(
            spec,
            "usearch, qdrant-edge, postgres://… (pgvector), chroma://HOST:PORT, qdrant://HOST:PORT (gRPC) or weaviate://HOST:PORT",
        )),
    }
}

#[cfg(feature = "qdrant-edge")]
fn open_qdrant_edge(
    spec: &TargetSpec,
    reach: &Reach,
) -> Result<Box<dyn VectorTarget>, TargetError> {
    Ok(Box::new(qdrant_edge::QdrantEdgeTarget::open(
        spec,
        &reach.results_dir,
    )?))
}

#[cfg(not(feature = "qdrant-edge"))]
fn open_qdrant_edge(
    spec: &TargetSpec,
    _reach: &Reach,
) -> Result<Box<dyn VectorTarget>, TargetError> {
    Err(TargetError::Url {
        url: spec.url_redacted(),
        message: "this vector-bench was built without the `qdrant-edge` feature (cargo build -p vector-bench --features qdrant-edge)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::results::Location;
    use common::testing::refusal;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_the_choices() {
        let spec = TargetSpec::parse("redis://127.0.0.1:6379").unwrap();
        let error = refusal(open(&spec, &Reach::local(&std::env::temp_dir()), Bounds::NONE).await);
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("chroma://"), "{error}");
        // Every choice the refusal names is one this function opens (nothing there to reach).
        let choices = error.split_once("; use ").map_or("", |(_, c)| c);
        let schemes: Vec<&str> = choices
            .split([',', ' '])
            .filter_map(|word| word.split_once("://").map_or(Some(word), |(s, _)| Some(s)))
            .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .filter(|s| !["or", "pgvector", "grpc"].contains(s))
            .collect();
        assert!(schemes.len() >= 5, "{choices}");
        for scheme in schemes {
            let url = match scheme {
                "usearch" | "qdrant-edge" => scheme.to_owned(),
                _ => format!("{scheme}://127.0.0.1:9"),
            };
            let spec = TargetSpec::parse(&url).unwrap();
            let opened = open(&spec, &Reach::local(&std::env::temp_dir()), Bounds::NONE).await;
            if let Err(e) = opened {
                assert!(!e.to_string().contains("unknown scheme"), "{url}: {e}");
            }
        }
    }

    #[test]
    fn hosts_are_read_from_authorities_and_dimensions_checked() {
        assert_eq!(location_of_url("db.example.com:8000"), Location::Remote);
        let spec = TargetSpec::parse("ch=chroma://127.0.0.1:8000").unwrap();
        let id = Identity::of(&spec, "chroma");
        assert!(check_dimensions(&id, "collection x".into(), Some(16), 16).is_ok());
        assert!(check_dimensions(&id, "collection x".into(), None, 16).is_ok());
        let error = check_dimensions(&id, "collection x".into(), Some(16), 24)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "ch: collection x holds 16-dimension vectors, the dataset has 24: drop it or choose another --namespace"
        );
    }
}
