//! search-bench as one of several workers of a run: what worker mode refuses before anything
//! is touched (an embedded engine, fewer senders or connections than workers), the
//! order of each query set a worker draws from its own seed, whether a window runs on every
//! worker or on none, and what a worker's part says of itself.

use std::sync::Arc;

use anyhow::bail;
use common::options::{CommonOpts, TargetSpec};
use common::results::Status;
use common::scale::{BarrierError, Segment, Worker};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::opts::Opts;
use crate::plan::Plan;
use crate::queries::{QueryKind, QuerySet};
use crate::session::Order;

/// This process's segment of the run the flags describe (the whole without workers).
pub fn segment(common: &CommonOpts) -> Segment {
    Segment::new(common.worker_index, common.worker_count).unwrap_or(Segment::WHOLE)
}

/// What several workers cannot do, refused with one line before any folder or index exists:
/// an embedded engine (each process would hold an index of its own) and fewer ingest senders
/// or query connections than workers.
pub fn refuse(opts: &Opts, plan: &Plan, specs: &[TargetSpec]) -> anyhow::Result<()> {
    let count = opts.common.worker_count;
    if count <= 1 {
        return Ok(());
    }
    if let Some(spec) = specs.iter().find(|s| s.scheme() == "tantivy") {
        bail!(
            "--worker-count {count}: `{}` is an embedded tantivy index inside each process, which several workers cannot share; give an Elasticsearch-API server as --target",
            spec.url
        );
    }
    if plan.measures_ingest() && opts.ingest_threads < u64::from(count) {
        bail!(
            "--worker-count {count}: {} ingest threads cannot be shared by {count} workers (each needs one); use fewer workers or more --ingest-threads",
            opts.ingest_threads
        );
    }
    if opts.common.connections < count {
        bail!(
            "--worker-count {count}: {} connections cannot be shared by {count} workers (each needs one); use fewer workers or more --connections",
            opts.common.connections
        );
    }
    Ok(())
}

/// Each query set's order for this worker: `None` (query `seq mod len`, as without workers)
/// for a run alone, otherwise a permutation drawn from `segment.seed(seed)` and the kind, so
/// no two workers send the same sequence.
pub fn orders(segment: Segment, seed: u64, sets: &[QuerySet]) -> [Option<Order>; 4] {
    let mut orders: [Option<Order>; 4] = Default::default();
    if segment.count == 1 {
        return orders;
    }
    for set in sets {
        let stream = segment.seed(seed) ^ (set.kind as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(stream);
        let mut order: Vec<u32> = (0..set.bodies.len() as u32).collect();
        order.shuffle(&mut rng);
        orders[set.kind as usize] = Some(order.into());
    }
    orders
}

/// The order of `kind`'s set for this worker.
pub fn order_of(orders: &[Option<Order>; 4], kind: QueryKind) -> Option<Order> {
    orders[kind as usize].as_ref().map(Arc::clone)
}

/// Every worker meets the barrier before a window and says whether it can run it (its cell
/// may have been marked by verification on worker 0, or by a failed window); the window runs
/// on every worker or on none. Returns whether it runs here; a worker whose cell is still live
/// while another's is not marks it so.
pub async fn window_opens(
    worker: &mut Worker,
    builder: &mut common::protocol::CellBuilder,
    ready: bool,
) -> Result<bool, BarrierError> {
    let here = ready && builder.is_live();
    let not_ready = worker.sync(u64::from(!here)).await?;
    if not_ready > 0 && here {
        builder.mark(
            Status::Error,
            "not measured: another worker of the run could not measure this cell (its results say why)",
        );
        return Ok(false);
    }
    Ok(here)
}

/// The notes of a worker's part: what it did and did not do, and what it could not read.
pub fn notes(worker: &Worker) -> Vec<String> {
    if !worker.is_part() {
        return Vec::new();
    }
    let segment = worker.segment;
    let mut notes = vec![
        "Worker mode: each worker sent its share of the `_bulk` bodies (a contiguous range) on its share of the ingest threads, and its share of the connections and of any --rate, each query set in an order of its own (drawn from --seed and its index); every window opened at the start barrier, and after each ingest round worker 0 counted the index against every worker's acknowledged documents.".to_owned(),
        "Server CPU time is not read in worker mode (each worker would see the whole server's, not its own share).".to_owned(),
    ];
    if !segment.is_leader() {
        notes.push(format!(
            "Worker {} of {}: worker 0 created the index, verified every answer and cleaned up; this worker only sent its share of the load.",
            segment.index, segment.count
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Corpus;

    #[test]
    fn workers_draw_orders_of_their_own_and_a_run_alone_keeps_the_plain_sequence() {
        let corpus = Corpus::generate(42, 200);
        let set = QuerySet::generate(QueryKind::Match, &corpus, 42, 64);
        let sets = std::slice::from_ref(&set);
        assert!(orders(Segment::WHOLE, 42, sets).iter().all(Option::is_none));
        let mine = |i| {
            orders(Segment::new(i, 2).unwrap(), 42, sets)[QueryKind::Match as usize]
                .clone()
                .unwrap()
        };
        let (a, b) = (mine(0), mine(1));
        assert_ne!(a, b, "two workers do not send the same sequence");
        assert_eq!(a, mine(0), "the same seed draws the same order");
        let mut sorted = a.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..64).collect::<Vec<u32>>(), "every query, once");
    }

    async fn join(index: u32, port: u16) -> Worker {
        let opts = <Opts as clap::Parser>::parse_from([
            "search-bench",
            "--worker-count",
            "2",
            "--worker-index",
            &index.to_string(),
            "--run-id",
            "t1",
            "--barrier",
            &format!("127.0.0.1:{port}"),
            "--barrier-timeout",
            "5s",
        ]);
        let options = serde_json::to_value(&opts).unwrap();
        Worker::join(&opts.common, "test", &options, &Default::default())
            .await
            .unwrap()
    }

    fn builder() -> common::protocol::CellBuilder {
        let cell = common::results::Cell::new("match", "os", "q/s", 1, 2);
        common::protocol::CellBuilder::new(cell, std::time::Duration::from_secs(1))
    }

    /// A cell worker 0's verification marked is measured by no worker: the other skips the
    /// window too and says why, and a cell live everywhere opens everywhere.
    #[tokio::test]
    async fn a_window_opens_on_every_worker_or_on_none() {
        let port = common::testing::free_port();
        let (mut zero, mut one) = tokio::join!(join(0, port), join(1, port));
        let (mut invalid, mut live) = (builder(), builder());
        invalid.mark(Status::Invalid, "query 3: total hits 0 (expected 7)");
        let (a, b) = tokio::join!(
            window_opens(&mut zero, &mut invalid, true),
            window_opens(&mut one, &mut live, true)
        );
        assert_eq!((a.unwrap(), b.unwrap()), (false, false));
        assert_eq!(live.to_cell().status, Status::Error);
        let reason = live.to_cell().reason.unwrap();
        assert!(reason.contains("another worker"), "{reason}");
        let (mut x, mut y) = (builder(), builder());
        let (a, b) = tokio::join!(
            window_opens(&mut zero, &mut x, true),
            window_opens(&mut one, &mut y, true)
        );
        assert_eq!((a.unwrap(), b.unwrap()), (true, true));
    }
}
