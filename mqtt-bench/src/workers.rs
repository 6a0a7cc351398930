//! mqtt-bench as one of several workers of a run (`--worker-count`): which scenarios split
//! (connection storms by clients and connect rate, many-to-many by publishers, subscribers,
//! topics and rate; a topic's publisher and subscribers stay on one worker), what is refused
//! before anything is sent, and the run stopped at the barrier with every cell saying why.

use anyhow::bail;
use common::options::TargetSpec;
use common::results::Status;
use common::run::Recording;
use common::scale::{BarrierError, Segment, Worker};

use crate::measure::Slot;
use crate::opts::{Opts, Scenario};

/// The scenarios whose every quantity splits across workers.
pub const SPLIT: [Scenario; 3] = [Scenario::Connect, Scenario::Idle, Scenario::ManyToMany];

/// Refuses what worker mode cannot split: a scenario of one topic, a broker inside this
/// process, a broker process whose CPU and memory serve every worker, or a quantity smaller
/// than the number of workers (each needs at least one).
pub fn check(opts: &Opts, specs: &[TargetSpec], segment: Segment) -> anyhow::Result<()> {
    let n = segment.count;
    if n == 1 {
        return Ok(());
    }
    if let Some(s) = opts.chosen().into_iter().find(|s| !SPLIT.contains(s)) {
        bail!(
            "--worker-count {n}: the {s} scenario has one topic, whose publisher and subscribers stay on one worker, so it cannot be shared; worker mode runs --scenarios connect,idle,many-to-many"
        );
    }
    if specs.iter().any(|s| s.scheme() == "embedded") {
        bail!(
            "--worker-count {n} drives one broker from several machines: name it with --broker URL (an embedded broker would be one per worker)"
        );
    }
    if specs.iter().any(|s| s.name.is_none()) {
        bail!(
            "--worker-count {n}: name every broker (--broker NAME=URL): a name read from the broker's $SYS topics could differ between workers, and merge would refuse their parts"
        );
    }
    if !opts.broker_pids.is_empty() {
        bail!(
            "--worker-count {n}: --broker-pid cannot be used, the broker's CPU and memory serve every worker's clients and no worker can divide them by its own"
        );
    }
    let chosen = opts.chosen();
    let mut shared = Vec::new();
    if chosen.contains(&Scenario::Connect) || chosen.contains(&Scenario::Idle) {
        shared.push((opts.clients, "--clients"));
    }
    if chosen.contains(&Scenario::ManyToMany) {
        let m2m = opts.many_to_many;
        shared.extend([
            (m2m.publishers as u64, "publishers of --many-to-many"),
            (m2m.subscribers as u64, "subscribers of --many-to-many"),
            (opts.topics as u64, "--topics"),
        ]);
    }
    if let Some((total, what)) = shared.into_iter().find(|(t, _)| *t < u64::from(n)) {
        bail!(
            "{total} {what} cannot be shared by {n} workers (each needs at least one); use fewer workers or more"
        );
    }
    Ok(())
}

/// The run stopped at the barrier: every cell not yet measured in full says why, the worker
/// block records the failure, results.json is written, and the error (exit 3) goes back; or,
/// when a worker was interrupted, the run ends as an interrupted one (see
/// [`Recording::stopped_at_barrier`]).
pub fn stopped(
    run: Recording,
    worker: &Worker,
    slots: &mut [Vec<Slot>],
    error: BarrierError,
) -> anyhow::Result<common::run::Summary> {
    let unfinished = slots
        .iter_mut()
        .flatten()
        .map(|slot| {
            slot.mark(Status::Error, format!("stopped: {error}"));
            slot.cell()
        })
        .collect();
    run.stopped_at_barrier(unfinished, worker.info(), error, &crate::report::MqttReport)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn checked(extra: &[&str]) -> Result<(), String> {
        let mut argv = vec!["mqtt-bench", "--worker-count", "2", "--worker-index", "1"];
        argv.extend(extra);
        let opts = Opts::try_parse_from(argv)
            .unwrap()
            .with_brokers_as_targets();
        let specs = crate::systems::specs(&opts.common.targets).unwrap();
        check(&opts, &specs, Segment::new(1, 2).unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn worker_mode_refuses_what_it_cannot_split() {
        let named = ["--broker", "m=mqtt://127.0.0.1:1883"];
        let split = ["--scenarios", "connect,idle,many-to-many"];
        assert_eq!(checked(&[&named[..], &split[..]].concat()), Ok(()));
        let one_topic = checked(&named).unwrap_err();
        assert!(
            one_topic.contains("the qos1 scenario has one topic"),
            "{one_topic}"
        );
        assert!(checked(&split).unwrap_err().contains("embedded"));
        let unnamed = checked(&["--broker", "mqtt://127.0.0.1:1883", split[0], split[1]]);
        assert!(unnamed.unwrap_err().contains("name every broker"));
        let pid = checked(&[&named[..], &split[..], &["--broker-pid", "1"]].concat());
        assert!(pid.unwrap_err().contains("--broker-pid"));
        let few = checked(
            &[
                &named[..],
                &["--scenarios", "many-to-many", "--topics", "1"],
            ]
            .concat(),
        );
        assert!(
            few.unwrap_err()
                .starts_with("1 --topics cannot be shared by 2 workers")
        );
        let clients = checked(&[&named[..], &["--scenarios", "idle", "--clients", "1"]].concat());
        assert!(
            clients
                .unwrap_err()
                .starts_with("1 --clients cannot be shared")
        );
    }
}
