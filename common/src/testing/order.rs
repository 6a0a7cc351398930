//! Reads back from a finished run the order its systems were measured in, round by round
//! (DESIGN rule 4: interleaved, the order alternating from one round to the next).

use crate::results::Report;

/// Asserts that in every workload measured on two systems or more, each measured round ran the
/// systems in the order they were named or in its reverse, and that each round reversed the
/// one before it. The order is read from `round_opened_at_ms`; returns how many workloads
/// were checked, and fails when none could be.
pub fn assert_systems_alternate(report: &Report) -> usize {
    let names: Vec<&str> = report.systems.iter().map(|s| s.name.as_str()).collect();
    let mut checked = 0;
    let mut workloads: Vec<&str> = report.cells.iter().map(|c| c.workload.as_str()).collect();
    workloads.dedup();
    for workload in workloads {
        let timed: Vec<(&str, &[u64])> = names
            .iter()
            .filter_map(|name| {
                let cell = report
                    .cells
                    .iter()
                    .find(|c| c.workload == workload && c.system == *name)?;
                (!cell.round_opened_at_ms.is_empty())
                    .then_some((*name, cell.round_opened_at_ms.as_slice()))
            })
            .collect();
        if timed.len() < 2 {
            continue;
        }
        let named: Vec<&str> = timed.iter().map(|(name, _)| *name).collect();
        let reversed: Vec<&str> = named.iter().rev().copied().collect();
        let rounds = timed.iter().map(|(_, at)| at.len()).min().unwrap_or(0);
        let mut before: Option<Vec<&str>> = None;
        for round in 0..rounds {
            let mut order = timed.clone();
            order.sort_by_key(|(_, at)| at[round]);
            let order: Vec<&str> = order.iter().map(|(name, _)| *name).collect();
            assert!(
                order == named || order == reversed,
                "{workload}, measured round {}: the systems ran as {order:?}, neither as named \
                 ({named:?}) nor reversed",
                round + 1
            );
            if let Some(before) = &before {
                let flipped: Vec<&str> = before.iter().rev().copied().collect();
                assert_eq!(
                    order,
                    flipped,
                    "{workload}, measured round {}: the same order as the round before",
                    round + 1
                );
            }
            before = Some(order);
        }
        checked += 1;
    }
    assert!(
        checked > 0,
        "no workload records when its rounds opened on two systems or more"
    );
    checked
}
