//! sql-bench's options: the suite to run, the common flags, and each suite's own. They are
//! stored in every report and read back from it (`Deserialize`).

use anyhow::bail;
use clap::{Parser, Subcommand};
use common::human::{parse_count, parse_count_at_most};
use common::options::CommonOpts;
use serde::{Deserialize, Serialize};

use crate::durability::{Durability, ReadFrom};
use crate::replication::ReplicaSpec;

#[derive(Parser, Serialize, Deserialize, Debug, Clone)]
#[command(name = "sql-bench", version, about, propagate_version = true)]
pub struct Opts {
    #[command(subcommand)]
    pub suite: Suite,
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    /// Seed 000's CRUD workloads: write 1c, write/read/mixed at --connections (ops/s, p50/p99).
    Crud(CrudOpts),
    /// Seeds 003/004's nine application-shaped scenarios through one data layer, every engine
    /// index-matched and its answers verified (median/p95 per scenario, won/lost/placement).
    App(AppOpts),
    /// YCSB's core workloads A–F, or a workload file of your own: a timed load, then each
    /// workload's operation mix in interleaved rounds (ops/s, per-operation latency).
    Ycsb(YcsbOpts),
}

#[derive(clap::Args, Serialize, Deserialize, Debug, Clone)]
pub struct CrudOpts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Workloads to run, comma-separated: write-Nc, read-Nc, mixed-Nc
    /// [default: write-1c and write, read and mixed at --connections].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workloads: Vec<String>,

    /// The durability every system must be in; a system that does not report it is refused.
    #[arg(long, value_enum, ignore_case = true, default_value = "c0")]
    pub config: Durability,

    /// Measure a system whose durability does not match --config anyway; every one of its cells
    /// is labelled `unmatched durability`.
    #[arg(long)]
    pub allow_unmatched_durability: bool,

    /// A target's replicas (standbys), as TARGET=HOST:PORT[,HOST:PORT…] or TARGET=URL; a bare
    /// address reuses the target's user, password and database. C1–C4 need every replica of the
    /// configuration, so each can be asked for its own status. TARGET may be left out when
    /// there is one target.
    #[arg(long = "replica", value_name = "TARGET=HOST:PORT", value_parser = ReplicaSpec::parse)]
    pub replicas: Vec<ReplicaSpec>,

    /// Where the read and mixed workloads' point reads go: the primary, or the replicas given
    /// with --replica (connections spread evenly over them; writes stay on the primary).
    #[arg(long, value_enum, default_value = "primary")]
    pub read_from: ReadFrom,

    /// Rows in the table point reads go to (seed 000: 1,000).
    #[arg(long, default_value = "1000", value_parser = parse_count)]
    pub read_rows: u64,

    /// Bytes in each stored value.
    #[arg(long, default_value = "100", value_parser = value_size)]
    pub value_size: usize,

    /// Leave fairbench's tables in place after the run (by default they are dropped).
    #[arg(long)]
    pub keep_data: bool,
}

fn value_size(text: &str) -> Result<usize, String> {
    parse_count_at_most(text, 65_000, |n| {
        format!("--value-size {n} is larger than 65,000 bytes")
    })
}

#[derive(clap::Args, Serialize, Deserialize, Debug, Clone)]
#[command(mut_arg("warmup", |a| a
    .default_value("2")
    .help("Warm-up iterations per scenario, engine and round, run and discarded")))]
#[command(mut_arg("rounds", |a| a
    .help("Rounds; each re-seeds every engine from empty and pools its measurements")))]
pub struct AppOpts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Records generated and loaded into every engine (seed 003: 250,000).
    #[arg(long, default_value = "250k", value_parser = parse_count)]
    pub rows: u64,

    /// Records appended onto the populated collection [default: --rows].
    #[arg(long, value_parser = parse_count)]
    pub append_rows: Option<u64>,

    /// Records per insert batch, one transaction each.
    #[arg(long, default_value = "5000", value_parser = parse_count)]
    pub batch: u64,

    /// Measured iterations per read scenario, engine and round.
    #[arg(long, default_value = "10", value_parser = parse_count)]
    pub iterations: u64,

    /// Scenarios to run, comma-separated [default: all]: fill, append, point-read, inspection,
    /// first-page, deep-page, flag-scan, range-scan, count, load-all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub scenarios: Vec<String>,

    /// The durability every engine must be in; an engine that does not report it is refused.
    #[arg(long, value_enum, ignore_case = true, default_value = "c0")]
    pub config: Durability,

    /// Measure an engine whose durability does not match --config anyway, labelled.
    #[arg(long)]
    pub allow_unmatched_durability: bool,

    /// Leave the collection in place after the last round (by default it is dropped).
    #[arg(long)]
    pub keep_data: bool,
}

#[derive(clap::Args, Serialize, Deserialize, Debug, Clone)]
pub struct YcsbOpts {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOpts,

    /// Workloads to run after the load, in order, comma-separated: YCSB's core workloads a, b,
    /// c, d, e, f, or the path of a TOML workload file (see docs/src/sql-bench-ycsb.md).
    #[arg(
        long = "workload",
        value_delimiter = ',',
        value_name = "a|b|c|d|e|f|FILE",
        default_value = "a"
    )]
    pub workloads: Vec<String>,

    /// Records loaded before the workloads run [default: the workload file's `records.count`,
    /// else 100k].
    #[arg(long, value_parser = parse_count)]
    pub records: Option<u64>,

    /// Records per load batch (one statement or request where the engine allows).
    #[arg(long, default_value = "500", value_parser = parse_count)]
    pub batch: u64,

    /// The durability every system must be in; a system that does not report it is refused.
    #[arg(long, value_enum, ignore_case = true, default_value = "c0")]
    pub config: Durability,

    /// Measure a system whose durability does not match --config anyway, labelled.
    #[arg(long)]
    pub allow_unmatched_durability: bool,

    /// Leave the YCSB table in place after the run (by default it is dropped).
    #[arg(long)]
    pub keep_data: bool,
}

impl AppOpts {
    pub fn append_rows(&self) -> u64 {
        self.append_rows.unwrap_or(self.rows)
    }

    /// Refuses what the app suite cannot mean, before anything is touched.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.common.validate().map_err(anyhow::Error::msg)?;
        if self.common.rate.is_some() {
            bail!(
                "--rate does not apply to sql-bench app: every request is sequential, as in the application"
            );
        }
        if self.batch > 50_000 {
            bail!(
                "--batch {} is more than 50,000 records in one statement",
                self.batch
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options a report stores read back as the same options.
    fn round_trip(args: &[&str]) {
        let opts = Opts::try_parse_from(args).unwrap();
        let stored = serde_json::to_value(&opts).unwrap();
        let back: Opts = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), stored);
    }

    #[test]
    fn stored_options_read_back() {
        round_trip(&[
            "sql-bench",
            "crud",
            "--target",
            "pg=postgres://u:secret@127.0.0.1:5432/db",
            "--config",
            "c1",
            "--replica",
            "pg=127.0.0.1:5433",
            "--read-from",
            "replicas",
            "--duration",
            "2s",
            "--rate",
            "1k",
        ]);
        round_trip(&[
            "sql-bench",
            "app",
            "--rows",
            "3k",
            "--scenarios",
            "fill,count",
        ]);
        // Each suite's options are what a report stores: they read back on their own too.
        let Suite::Crud(crud) = Opts::try_parse_from(["sql-bench", "crud"]).unwrap().suite else {
            panic!("crud");
        };
        let stored = serde_json::to_value(&crud).unwrap();
        assert_eq!(stored["duration_s"], 5.0);
        let back: CrudOpts = serde_json::from_value(stored).unwrap();
        assert_eq!(back.common, crud.common);
        assert_eq!(back.config, Durability::C0);
    }
}
