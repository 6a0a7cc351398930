//! The workload families: the insert curve (events per request × clients), the query table
//! (id lookup, radius, polygon) and pipelined single-point adds, and what each window of them
//! draws on. A workload never names a concrete system.

use std::fmt;

use crate::queries::Family;

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

    /// Whether its windows write events (worker 0 counts them afterwards).
    pub fn writes(&self) -> bool {
        !matches!(self, Workload::Query { .. })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_name_themselves_and_their_unit() {
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
