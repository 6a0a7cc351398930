//! One run of mqtt-bench, as its phases: check the input → reach (or start) every broker,
//! read what it says about itself and verify a round trip → warm up and measure every row,
//! brokers interleaved in alternating order → record each cell as it is measured → render.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use common::environment::{Environment, loadavg, wait_for_quiet};
use common::human::format_rate;
use common::options::TargetSpec;
use common::progress::Progress;
use common::protocol::{CellBuilder, round_order, rounds};
use common::report::verdicts;
use common::results::{Cell, Report, Status};
use common::writer::ResultsDir;
use serde_json::json;

use crate::message::Delivery;
use crate::options::BrokerPid;
use crate::protocol::conn::Endpoint;
use crate::targets::{self, Broker};
use crate::workloads::{self, Ctx, RoundOutcome, Row};
use crate::{Opts, Summary, report};

/// Longest the load gate waits for a quiet machine.
const LOAD_GATE_MAX_WAIT: Duration = Duration::from_secs(600);

/// Runs every chosen scenario against every broker. Bad input fails before anything is sent.
pub async fn run(mut opts: Opts, interrupt: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    opts.common.targets.append(&mut opts.brokers);
    opts.common.validate().map_err(anyhow::Error::msg)?;
    validate(&opts)?;
    let specs = if opts.common.targets.is_empty() {
        vec![TargetSpec::parse("embedded").map_err(anyhow::Error::msg)?]
    } else {
        opts.common.targets.clone()
    };
    let rows = workloads::rows(&opts);
    let progress = Progress::start(opts.common.quiet);
    let environment = measure_environment(&opts, &progress);
    let started = common::clock::now_rfc3339();
    let dir = opts.common.output.clone().unwrap_or_else(|| {
        ResultsDir::default_path("mqtt-bench", "brokers", &common::clock::compact(&started))
    });
    let results = ResultsDir::create(&dir)?;
    let brokers = match prepare(&opts, &specs, &progress).await {
        Ok(brokers) => brokers,
        Err(e) => {
            drop(progress);
            results.discard();
            return Err(e);
        }
    };
    let report = begin(&opts, &brokers, environment)?;
    measure(
        &opts, &brokers, rows, report, &results, &progress, &interrupt,
    )
    .await
}

/// What clap cannot check: values that only make sense together.
fn validate(opts: &Opts) -> anyhow::Result<()> {
    if opts.sweep.is_empty() {
        bail!("--sweep needs at least one publish rate");
    }
    if opts.sweep.windows(2).any(|w| w[1] <= w[0]) {
        bail!("--sweep rates must ascend (each step offers more than the one before)");
    }
    if opts.topic_prefix.is_empty() || opts.topic_prefix.contains(['+', '#']) {
        bail!("--topic-prefix must be a plain topic level (no wildcards)");
    }
    let unnamed = opts.broker_pids.iter().filter(|p| p.name.is_none()).count();
    if unnamed > 0 && (opts.common.targets.len() > 1 || opts.broker_pids.len() > 1) {
        bail!("with several brokers, give each --broker-pid a name: --broker-pid NAME=PID");
    }
    Ok(())
}

fn measure_environment(opts: &Opts, progress: &Progress) -> Environment {
    let mut environment = Environment::capture();
    if let Some(gate) = opts.common.load_gate {
        environment.load_gate = Some(wait_for_quiet(gate, LOAD_GATE_MAX_WAIT, |load| {
            progress.line(format!(
                "waiting for the load average ({load:.2}) to fall to {gate:.2}…"
            ));
        }));
    }
    environment
}

/// Reaches or starts every broker, names them, and verifies a round trip of the run's payload.
async fn prepare(
    opts: &Opts,
    specs: &[TargetSpec],
    progress: &Progress,
) -> anyhow::Result<Vec<Broker>> {
    let mut brokers = Vec::new();
    for spec in specs {
        let pid = pid_for(&opts.broker_pids, spec, specs.len());
        let broker = targets::open(spec, pid).await?;
        brokers.push(broker);
    }
    settle_names(&mut brokers, opts)?;
    let tag = run_tag();
    for broker in &brokers {
        let topic = format!("{}/{tag}/verify", opts.topic_prefix);
        targets::verify_round_trip(&broker.endpoint, &topic, opts.payload_bytes, &tag)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", broker.info.name))?;
        progress.line(format!(
            "{}: {} at {} — verified a {}-byte QoS 1 round trip",
            broker.info.name, broker.info.version, broker.endpoint.addr, opts.payload_bytes
        ));
    }
    Ok(brokers)
}

/// The `--broker-pid` of a broker: by name, or the only one when there is one broker.
fn pid_for<'a>(pids: &'a [BrokerPid], spec: &TargetSpec, brokers: usize) -> Option<&'a BrokerPid> {
    pids.iter().find(|p| match (&p.name, &spec.name) {
        (Some(a), Some(b)) => a == b,
        (None, _) => brokers == 1,
        _ => false,
    })
}

fn settle_names(brokers: &mut [Broker], opts: &Opts) -> anyhow::Result<()> {
    let mut names: Vec<String> = Vec::new();
    for broker in brokers.iter() {
        let name = &broker.info.name;
        if names.contains(name) {
            bail!(
                "two brokers are named `{name}`; tell them apart with NAME=URL (for example --broker {name}2={})",
                broker.info.url_redacted
            );
        }
        names.push(name.clone());
    }
    for pid in &opts.broker_pids {
        if let Some(name) = &pid.name
            && !names.contains(name)
        {
            bail!(
                "--broker-pid {name}={} names no broker (brokers: {})",
                pid.pid,
                names.join(", ")
            );
        }
    }
    if let Some(reference) = &opts.common.reference
        && !names.contains(reference)
    {
        bail!(
            "--reference {reference} names no broker (brokers: {})",
            names.join(", ")
        );
    }
    Ok(())
}

/// A short tag unique to this run, for its topics and client identifiers.
fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:05x}", std::process::id(), nanos & 0xf_ffff)
}

fn begin(opts: &Opts, brokers: &[Broker], environment: Environment) -> anyhow::Result<Report> {
    let options = serde_json::to_value(opts).context("serializing the options")?;
    let section = format!(
        "{}-byte payloads, clean sessions, client and brokers on one machine (loopback)",
        opts.payload_bytes
    );
    let mut report = Report::begin(
        "mqtt-bench",
        env!("CARGO_PKG_VERSION"),
        "brokers",
        &section,
        options,
        environment,
    );
    report.systems = brokers.iter().map(|b| b.info.clone()).collect();
    report.reference = Some(
        opts.common
            .reference
            .clone()
            .unwrap_or_else(|| brokers[0].info.name.clone()),
    );
    report.notes = report::notes(opts, &report.systems);
    report.extra.insert(
        "client".into(),
        client_capacities(opts, &brokers[0].endpoint),
    );
    Ok(report)
}

/// Every capacity of the client, so a report says exactly what drove the brokers.
fn client_capacities(opts: &Opts, endpoint: &Endpoint) -> serde_json::Value {
    json!({
        "protocol": "MQTT 3.1.1, mqtt-bench's own codec over tokio",
        "lanes": common::lanes::Lanes::shared().len(),
        "inflight": opts.inflight,
        "backlog_messages": opts.backlog,
        "max_packet_bytes": endpoint.max_packet_bytes,
        "keep_alive_s": endpoint.keep_alive_s,
        "read_chunk_bytes": 64 * 1024,
        "write_queue_bytes": 256 * 1024,
        "payload_bytes": opts.payload_bytes,
        "clean_session": true,
    })
}

/// A cell's MQTT figures, accumulated over its measured rounds.
#[derive(Default)]
struct Tally {
    rounds: Vec<serde_json::Value>,
    delivery: Delivery,
    messages: u64,
    broker_cpu_ns: Option<u64>,
    broker_peak_rss: Option<u64>,
    client_peak_rss: Option<u64>,
    target_rate: Option<f64>,
    accepted: Vec<f64>,
}

impl Tally {
    fn add(&mut self, round: &RoundOutcome) {
        self.rounds.push(round.detail.clone());
        self.delivery.add(&round.delivery);
        self.messages += round.messages;
        if let Some(cpu) = round.usage.broker_cpu_ns {
            *self.broker_cpu_ns.get_or_insert(0) += cpu;
        }
        self.broker_peak_rss = self.broker_peak_rss.max(round.usage.broker_peak_rss_bytes);
        self.client_peak_rss = self.client_peak_rss.max(round.usage.client_peak_rss_bytes);
        self.target_rate = round.target_rate;
        self.accepted.extend(round.accepted_rate);
    }

    fn apply(&self, cell: &mut Cell) {
        let per_msg = |ns: u64| ns as f64 / self.messages.max(1) as f64;
        cell.extra.insert("delivery".into(), json!(self.delivery));
        cell.extra
            .insert("loss_fraction".into(), json!(self.delivery.loss_fraction()));
        cell.extra.insert("rounds".into(), json!(self.rounds));
        cell.extra.insert("messages".into(), json!(self.messages));
        cell.extra.insert(
            "broker_cpu_ns_per_msg".into(),
            json!(self.broker_cpu_ns.map(per_msg)),
        );
        cell.extra
            .insert("broker_peak_rss_bytes".into(), json!(self.broker_peak_rss));
        cell.extra
            .insert("client_peak_rss_bytes".into(), json!(self.client_peak_rss));
        if let Some(target) = self.target_rate {
            cell.target_rate = Some(target);
            if !self.accepted.is_empty() {
                cell.achieved_rate =
                    Some(self.accepted.iter().sum::<f64>() / self.accepted.len() as f64);
            }
        }
    }
}

async fn measure(
    opts: &Opts,
    brokers: &[Broker],
    rows: Vec<Row>,
    mut report: Report,
    results: &ResultsDir,
    progress: &Progress,
    interrupt: &AtomicBool,
) -> anyhow::Result<Summary> {
    let common = &opts.common;
    let mut cells = new_cells(opts, brokers, &rows);
    for row in &cells {
        for (b, t) in row {
            report.upsert_cell(finished_cell(b, t));
        }
    }
    results.write_results(&report)?;
    let tag = run_tag();
    let epoch = Instant::now();
    let payload: Arc<[u8]> = payload(opts).into();
    let mut next_window = 0u32;
    'rows: for (ri, row) in rows.iter().enumerate() {
        for round in rounds(common.warmup, common.rounds) {
            for si in round_order(brokers.len(), round.index) {
                if interrupt.load(Ordering::SeqCst) {
                    break 'rows;
                }
                let (builder, tally) = &mut cells[ri][si];
                if !builder.is_live() {
                    continue;
                }
                let broker = &brokers[si];
                let label = round.label(common.warmup, common.rounds);
                let mut ctx = Ctx {
                    opts,
                    broker,
                    run_tag: &tag,
                    epoch,
                    payload: payload.clone(),
                    next_window: &mut next_window,
                };
                match workloads::run_round(row, &mut ctx, &label).await {
                    Ok(outcome) => {
                        builder.add(round, &outcome.outcome);
                        for (status, reason) in &outcome.marks {
                            builder.mark(*status, reason.clone());
                        }
                        if !round.is_warmup() {
                            tally.add(&outcome);
                        }
                        progress.line(window_line(&row.name, &broker.info.name, &label, &outcome));
                    }
                    Err(message) => {
                        builder.mark(Status::Error, format!("{label}: {message}"));
                        progress.line(format!(
                            "{} · {} · {label}: {message}",
                            row.name, broker.info.name
                        ));
                    }
                }
                report.upsert_cell(finished_cell(builder, tally));
                results.write_results(&report)?;
            }
        }
    }
    if interrupt.load(Ordering::SeqCst) {
        report
            .notes
            .push("The run was interrupted (Ctrl-C); cells not measured in full say so.".into());
    }
    finish(opts, brokers, report, results)
}

/// One cell per row and broker, carrying the broker's labels.
fn new_cells(opts: &Opts, brokers: &[Broker], rows: &[Row]) -> Vec<Vec<(CellBuilder, Tally)>> {
    let common = &opts.common;
    rows.iter()
        .map(|row| {
            brokers
                .iter()
                .map(|b| {
                    let subscribers = if row.scenario == crate::options::Scenario::Fanout {
                        opts.subscribers
                    } else {
                        1
                    };
                    let cell = Cell::new(
                        &row.name,
                        &b.info.name,
                        row.unit,
                        (subscribers + 1) as u32,
                        common.rounds,
                    );
                    let mut builder = CellBuilder::new(cell, common.ceiling);
                    for label in &b.info.labels {
                        builder.add_label(label);
                    }
                    (builder, Tally::default())
                })
                .collect()
        })
        .collect()
}

fn finished_cell(builder: &CellBuilder, tally: &Tally) -> Cell {
    let mut cell = builder.to_cell();
    tally.apply(&mut cell);
    cell
}

/// The payload every message carries: a seeded, printable filler (its first bytes are stamped).
fn payload(opts: &Opts) -> Vec<u8> {
    let mut rng = common::data::rng(opts.common.seed, 0x6d71_7474);
    common::data::ascii(&mut rng, opts.payload_bytes).into_bytes()
}

fn window_line(row: &str, broker: &str, label: &str, outcome: &RoundOutcome) -> String {
    let rate = outcome.outcome.throughput();
    let d = &outcome.delivery;
    let status = outcome
        .marks
        .first()
        .map_or(String::new(), |(s, r)| format!(" · {}: {r}", s.as_str()));
    format!(
        "{row} · {broker} · {label}: {} /s · sent {} · lost {} · dup {}{status}",
        format_rate(rate),
        d.sent,
        d.lost,
        d.duplicates
    )
}

fn finish(
    opts: &Opts,
    brokers: &[Broker],
    mut report: Report,
    results: &ResultsDir,
) -> anyhow::Result<Summary> {
    report.environment.loadavg_end = Some(loadavg());
    report.finished_at = Some(common::clock::now_rfc3339());
    report.verdicts = verdicts(&report);
    let mut after: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for broker in brokers {
        let rss = broker.probe.as_ref().and_then(|p| p.rss_bytes());
        after.insert(
            broker.info.name.clone(),
            json!({
                "embedded": broker.embedded,
                "rss_after_run_bytes": rss,
                "process_rss_after_run_bytes": broker.embedded.then(crate::resources::own_rss_bytes).flatten(),
            }),
        );
    }
    report.extra.insert("brokers".into(), json!(after));
    results.write_exports(
        &report,
        &common::export::exporters(&common::export::SharedReport),
    )?;
    results.write_atomic("report.md", report::render_markdown(&report).as_bytes())?;
    println!("{}", report::render(&report));
    if !opts.common.quiet {
        eprintln!("results: {}", results.path().display());
    }
    let all_ok = report.cells.iter().all(|c| c.status == Status::Ok);
    Ok(Summary {
        report,
        results_dir: results.path().to_owned(),
        exit_code: if all_ok { 0 } else { 1 },
    })
}
