//! What the integration tests share: the OpenSearch and Elasticsearch servers the test command
//! started (each test holding them to itself: `on_server`, `on_servers`), and running
//! search-bench in-process.

#![allow(dead_code)]

use std::path::Path;

#[allow(unused_imports)] // not every test binary uses every helper
pub use common::testing::{assert_matches_schema, http, on_server, on_servers, read_json};

/// Where the test command exports the OpenSearch URL.
pub const OPENSEARCH: &str = "FAIRBENCH_TEST_OPENSEARCH_URL";

/// Where the test command exports the Elasticsearch URL.
pub const ELASTICSEARCH: &str = "FAIRBENCH_TEST_ELASTICSEARCH_URL";

common::in_process_runs!("search-bench", search_bench);

/// A small corpus and short windows, so a whole run takes seconds.
pub const QUICK: &str = "--docs 3000 --queries 48 --duration 300ms --rounds 2 --warmup 1 \
                         --connections 4 --ingest-threads 4";

/// `--output DIR --quiet`, the quick settings, then `extra` (which overrides them).
pub fn args<'a>(output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    common::testing::quick_args(&[], output, &common::testing::words(QUICK), extra)
}

pub fn cell<'a>(
    report: &'a common::results::Report,
    workload_prefix: &str,
    system: &str,
) -> &'a common::results::Cell {
    report
        .cells
        .iter()
        .find(|c| c.workload.starts_with(workload_prefix) && c.system == system)
        .unwrap_or_else(|| panic!("no cell {workload_prefix}… × {system}"))
}
