//! One run of mqtt-bench, as its phases: plan (check every input before anything is sent) →
//! reach (or start) every broker, read what it says about itself and verify a round trip →
//! warm up and measure every row, brokers interleaved in alternating order → record each cell
//! as it is measured → render, on common's run lifecycle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use common::protocol::schedule;
use common::results::SystemInfo;
use common::run::{Begin, Lifecycle, Summary, Tool};

use crate::measure::{self, Windows};
use crate::opts::Opts;
use crate::report::{self, MqttReport};
use crate::systems;
use crate::workloads;

const TOOL: Tool = Tool {
    name: "mqtt-bench",
    version: env!("CARGO_PKG_VERSION"),
    suite: "brokers",
};

/// Runs every chosen scenario against every broker. Bad input fails before anything is sent.
pub async fn run(opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let opts = opts.with_brokers_as_targets();
    opts.validate()?;
    let specs = systems::specs(&opts.common.targets)?;
    let rows = workloads::rows(&opts);
    let lifecycle = Lifecycle::start(TOOL, &opts.common, &opts, interrupt)?;
    let run_tag = measure::run_tag();
    let prepared = systems::prepare(&opts, &specs, &run_tag, lifecycle.progress()).await;
    let (brokers, reference) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return Err(lifecycle.abandon(e)),
    };
    let systems: Vec<SystemInfo> = brokers.iter().map(|b| b.info.clone()).collect();
    let mut run = lifecycle.begin(Begin {
        section: format!(
            "{}-byte payloads, clean sessions, client and brokers on one machine (loopback)",
            opts.payload_bytes
        ),
        notes: report::notes(&opts, &systems),
        systems,
        reference: Some(reference),
        data: None,
    })?;
    let endpoint = &brokers[0].link.endpoint;
    run.report
        .extra
        .insert("client".into(), measure::client_capacities(&opts, endpoint));
    let mut slots = measure::slots(&opts, &brokers, &rows);
    for slot in slots.iter().flatten() {
        run.report.upsert_cell(slot.cell());
    }
    run.save()?;
    let mut windows = Windows {
        opts: &opts,
        run_tag: &run_tag,
        epoch: Instant::now(),
        payload: measure::payload(&opts).into(),
        next_window: 0,
    };
    let common = &opts.common;
    for step in schedule(rows.len(), brokers.len(), common.warmup, common.rounds) {
        if run.interrupted() {
            break;
        }
        let slot = &mut slots[step.workload][step.system];
        if !slot.is_live() {
            continue;
        }
        let (row, broker) = (&rows[step.workload], &brokers[step.system]);
        windows
            .round(row, broker, step.round, slot, run.progress())
            .await;
        run.record(slot.cell())?;
    }
    run.report
        .extra
        .insert("brokers".into(), measure::after_run(&brokers));
    run.finish(&MqttReport)
}
