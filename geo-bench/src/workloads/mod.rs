//! The workload families: the insert curve (events per request × clients), the query table
//! (id lookup, radius, polygon) and pipelined single-point adds; and the operation each worker
//! runs for them. A workload never names a concrete system.

pub mod workers;

use std::fmt;
use std::sync::Arc;

use common::driver::{BlockingOperation, OpError, Operation};

use crate::events::Event;
use crate::queries::{Family, Query};
use crate::targets::{BlockingGeoSession, GeoSession};

/// One row of a report: what each operation does and over how many connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// One request of `batch` events per operation.
    Insert {
        batch: usize,
        clients: u32,
    },
    Query {
        family: Family,
        clients: u32,
    },
    /// `depth` single-point adds pipelined per operation.
    PointAdds {
        depth: usize,
        clients: u32,
    },
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Insert { batch, clients } => write!(f, "insert b{batch} c{clients}"),
            Workload::Query { family, clients } => write!(f, "{family} c{clients}"),
            Workload::PointAdds { depth, clients } => write!(f, "geoadd P{depth} c{clients}"),
        }
    }
}

impl Workload {
    pub fn clients(&self) -> u32 {
        match self {
            Workload::Insert { clients, .. }
            | Workload::Query { clients, .. }
            | Workload::PointAdds { clients, .. } => *clients,
        }
    }

    /// Events (or commands) each operation carries: throughput is operations × this.
    pub fn per_op(&self) -> usize {
        match self {
            Workload::Insert { batch, .. } => *batch,
            Workload::Query { .. } => 1,
            Workload::PointAdds { depth, .. } => *depth,
        }
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Workload::Insert { .. } => "events/s",
            Workload::Query { .. } => "queries/s",
            Workload::PointAdds { .. } => "commands/s",
        }
    }
}

/// What one window's operations draw on; cheap to clone into every worker.
#[derive(Clone, Debug)]
pub enum Work {
    /// Events cycled from `pool`, their ids made unique by `window`, worker and sequence.
    Insert {
        batch: usize,
        pool: Arc<[Event]>,
        window: u64,
    },
    /// The family's verified queries, cycled from a per-worker offset.
    Query { queries: Arc<[Query]> },
    PointAdds {
        depth: usize,
        pool: Arc<[Event]>,
        window: u64,
    },
}

/// An event id no generated event has: `0xfb` tag, window, worker and sequence.
#[inline]
pub fn insert_id(window: u64, worker: usize, sequence: u64) -> u128 {
    (0xfb_u128 << 120)
        | (u128::from(window) << 64)
        | ((worker as u128) << 48)
        | u128::from(sequence)
}

/// Where a worker is in its pool, and the batch it is filling.
struct Feed {
    worker: usize,
    cursor: usize,
    sequence: u64,
    batch: Vec<Event>,
}

impl Feed {
    /// Fills the batch with the next `count` pool events under fresh ids.
    #[inline]
    fn fill(&mut self, pool: &[Event], count: usize, window: u64) -> &[Event] {
        self.batch.clear();
        for _ in 0..count {
            let mut event = pool[self.cursor];
            event.id = insert_id(window, self.worker, self.sequence);
            self.sequence += 1;
            self.cursor = (self.cursor + 1) % pool.len();
            self.batch.push(event);
        }
        &self.batch
    }

    /// The index of the next query of `len`.
    #[inline]
    fn next_query(&mut self, len: usize) -> usize {
        let index = self.cursor % len;
        self.cursor = (index + 1) % len;
        index
    }
}

/// Worker `worker`'s operation for one window.
pub struct GeoOp<S> {
    session: S,
    work: Work,
    feed: Feed,
    ids: Vec<u128>,
    /// Events (or commands) the system acknowledged.
    pub acknowledged: u64,
    /// Ids the queries returned, summed.
    pub results: u64,
}

impl<S> GeoOp<S> {
    pub fn new(worker: usize, session: S, work: &Work) -> GeoOp<S> {
        let (capacity, cursor) = match work {
            Work::Insert { batch, pool, .. } => (*batch, worker * 7_919 % pool.len()),
            Work::PointAdds { depth, pool, .. } => (*depth, worker * 7_919 % pool.len()),
            Work::Query { queries } => (0, worker * 31 % queries.len().max(1)),
        };
        GeoOp {
            session,
            work: work.clone(),
            feed: Feed {
                worker,
                cursor,
                sequence: 0,
                batch: Vec::with_capacity(capacity),
            },
            ids: Vec::with_capacity(1024),
            acknowledged: 0,
            results: 0,
        }
    }

    pub fn into_session(self) -> S {
        self.session
    }
}

impl<S: GeoSession> Operation for GeoOp<S> {
    async fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        match &self.work {
            Work::Insert {
                batch,
                pool,
                window,
            } => {
                let events = self.feed.fill(pool, *batch, *window);
                self.session.insert(events).await?;
                self.acknowledged += *batch as u64;
            }
            Work::Query { queries } => {
                let query = &queries[self.feed.next_query(queries.len())];
                self.session.query(query, &mut self.ids).await?;
                self.results += self.ids.len() as u64;
            }
            Work::PointAdds {
                depth,
                pool,
                window,
            } => {
                // Members are numbered per worker, as redis-benchmark numbers its keys.
                let first = ((self.feed.worker as u64) << 40) + self.feed.sequence;
                let events = self.feed.fill(pool, *depth, *window);
                self.session.add_points(events, first).await?;
                self.acknowledged += *depth as u64;
            }
        }
        Ok(())
    }
}

impl<S: BlockingGeoSession> BlockingOperation for GeoOp<S> {
    fn call(&mut self, _seq: u64) -> Result<(), OpError> {
        match &self.work {
            Work::Insert {
                batch,
                pool,
                window,
            } => {
                let events = self.feed.fill(pool, *batch, *window);
                self.session.insert(events)?;
                self.acknowledged += *batch as u64;
            }
            Work::Query { queries } => {
                let query = &queries[self.feed.next_query(queries.len())];
                self.session.query(query, &mut self.ids)?;
                self.results += self.ids.len() as u64;
            }
            Work::PointAdds { .. } => {
                return Err(OpError::Fatal("this target has no single-point add".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_ids_are_unique_across_windows_workers_and_sequence() {
        let a = insert_id(1, 0, 5);
        assert_ne!(a, insert_id(2, 0, 5));
        assert_ne!(a, insert_id(1, 1, 5));
        assert_ne!(a, insert_id(1, 0, 6));
        assert_eq!(a >> 120, 0xfb);
        let w = Workload::Insert {
            batch: 1_000,
            clients: 8,
        };
        assert_eq!(w.to_string(), "insert b1000 c8");
        assert_eq!((w.per_op(), w.unit()), (1_000, "events/s"));
        let q = Workload::Query {
            family: Family::Radius(1_000),
            clients: 4,
        };
        assert_eq!(q.to_string(), "radius 1 km c4");
    }
}
