//! search-bench's options: the common flags and the corpus's, ingest's and index's own.

use clap::Parser;
use common::human::parse_count;
use common::options::CommonOpts;
use serde::{Deserialize, Serialize};

#[derive(Parser, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[command(name = "search-bench", version, about)]
pub struct Opts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Documents in the corpus (seed 000: 200k).
    #[arg(long, default_value = "200k", value_parser = parse_count)]
    pub docs: u64,

    /// Documents per `_bulk` request.
    #[arg(long, default_value = "1000", value_parser = parse_count)]
    pub batch: u64,

    /// Concurrent `_bulk` senders during ingest (the query workloads use --connections).
    #[arg(long, default_value = "8", value_parser = parse_count)]
    pub ingest_threads: u64,

    /// Queries in each workload's set; every connection cycles through the same sequence (each
    /// worker of a run on several machines in an order of its own).
    #[arg(long, default_value = "256", value_parser = parse_count)]
    pub queries: u64,

    /// Workloads to run, comma-separated: ingest, match, phrase, bool, agg [default: all].
    /// Without `ingest` the corpus is still loaded once, untimed.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workloads: Vec<String>,

    /// The index search-bench creates (and only ever deletes when it created it).
    #[arg(long, default_value = "fairbench_search", value_parser = index_name)]
    pub index: String,

    /// Bypass Elasticsearch's shard request cache on every search (`request_cache=false`);
    /// by default it serves repeated size-0 aggregations as configured, and the report says so.
    #[arg(long)]
    pub no_request_cache: bool,

    /// Leave the index in place after the run (by default it is deleted).
    #[arg(long)]
    pub keep_index: bool,
}

fn index_name(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.len() <= 200
        && !text.starts_with(['_', '-', '+', '.'])
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'));
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a usable index name (lowercase letters, digits, _ and -, not starting with _ or -)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonsense_sizes_and_index_names_are_refused_by_the_parser() {
        for args in [
            vec!["search-bench", "--docs", "0"],
            vec!["search-bench", "--batch", "0"],
            vec!["search-bench", "--index", "Upper"],
            vec!["search-bench", "--index", "_hidden"],
        ] {
            assert!(Opts::try_parse_from(&args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn the_options_stored_in_a_report_read_back() {
        let opts = Opts::parse_from([
            "search-bench",
            "--target",
            "os=http://u:secret@127.0.0.1:9200",
            "--docs",
            "3k",
            "--workloads",
            "ingest,agg",
            "--duration",
            "1.5s",
            "--no-request-cache",
        ]);
        let stored = serde_json::to_value(&opts).unwrap();
        assert_eq!(stored["docs"], 3000);
        assert_eq!(stored["duration_s"], 1.5);
        let back: Opts = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), stored);
        assert_eq!(back.workloads, ["ingest", "agg"]);
        assert!(back.no_request_cache && !back.keep_index);
    }
}
