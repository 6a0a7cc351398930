//! What the application's data layer itself costs per point read, against SQLite (where the
//! engine is cheapest, so the layer's share is largest): the `point-read` scenario through the
//! data layer, against the same statement issued bare, against a bare primary-key lookup.
//! Interleaved, many rounds, medians. Timed in process CPU time, not wall time: SQLite runs in
//! this process, so its CPU time is the whole cost of a read, and a busy machine does not blur
//! microsecond figures.
//!
//!     cargo run --release -p sql-bench --example data_layer_cost [ROWS] [ROUNDS]

use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::options::TargetSpec;
use rusqlite::Connection;
use sql_bench::query::{Filter, Query, Value};
use sql_bench::suites::app::COLLECTION;
use sql_bench::suites::app::data::Data;
use sql_bench::suites::app::layer::DataLayer;
use sql_bench::suites::app::record::ACCOUNT;
use sql_bench::suites::app::scenarios::{self, Scenario};

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// CPU microseconds per read since `started_ns`.
fn per_read_us(started_ns: u64, reads: usize) -> f64 {
    (process_cpu_ns() - started_ns) as f64 / 1e3 / reads as f64
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args.next().map_or(Ok(50_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(30), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("cost.db");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let data = Data::prepare(42, rows, 0);
    let params = data.params();
    let spec =
        TargetSpec::parse(&format!("sqlite:{}", path.display())).map_err(anyhow::Error::msg)?;

    let (layered, filtered, bare) = runtime.block_on(async {
        let mut target =
            sql_bench::targets::open(&spec, &sql_bench::targets::Reach::local(dir.path())).await?;
        target.create_collection(&COLLECTION).await?;
        let mut session = target.open_doc_session(&COLLECTION).await?;
        for batch in data.fill_batches(5_000) {
            session
                .insert_batch(&batch, Instant::now() + Duration::from_secs(60))
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let raw = Connection::open(&path)?;
        let (mut layered, mut filtered, mut bare) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            // Through the data layer: filters added, SQL built, rows deserialized.
            let started = process_cpu_ns();
            let mut layer =
                DataLayer::new(session.as_mut(), Instant::now() + Duration::from_secs(60));
            scenarios::run(Scenario::PointRead, &mut layer, params).await?;
            layered.push(per_read_us(started, params.point_ids.len()));

            // The statement the layer issues, through the adapter, without the layer.
            let started = process_cpu_ns();
            for id in &params.point_ids {
                let query = Query {
                    id: Some(id.clone()),
                    filters: vec![
                        Filter::equals("_account_id", Value::Text(ACCOUNT.into())),
                        Filter::equals("_deleted", Value::Bool(false)),
                    ],
                    ..Query::default()
                };
                let mut docs = Vec::new();
                session
                    .find(
                        &query,
                        Instant::now() + Duration::from_secs(60),
                        &mut |doc| docs.push(doc.to_owned()),
                    )
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                std::hint::black_box(docs);
            }
            filtered.push(per_read_us(started, params.point_ids.len()));

            // A bare primary-key lookup: what SQLite itself costs.
            let started = process_cpu_ns();
            let mut stmt =
                raw.prepare_cached("SELECT doc FROM fairbench_app_records WHERE id = ?1")?;
            for id in &params.point_ids {
                let doc: String = stmt.query_row([id], |r| r.get(0))?;
                std::hint::black_box(doc);
            }
            bare.push(per_read_us(started, params.point_ids.len()));
        }
        anyhow::Ok((layered, filtered, bare))
    })?;
    let (layered, filtered, bare) = (median(layered), median(filtered), median(bare));
    println!(
        "{rows} records, {rounds} interleaved rounds of 200 point reads, medians of CPU time per read:"
    );
    println!("  through the data layer (scenario point-read)    {layered:8.2} µs");
    println!("  the same statement, bare through the adapter    {filtered:8.2} µs");
    println!("  a bare primary-key lookup in SQLite             {bare:8.2} µs");
    println!(
        "  the data layer's own cost (layer − statement)   {:8.2} µs ({:.0}% of the read)",
        layered - filtered,
        100.0 * (layered - filtered) / layered
    );
    println!(
        "  the account and soft-delete filters' cost       {:8.2} µs",
        filtered - bare
    );
    Ok(())
}
