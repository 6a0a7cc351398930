//! What the measured phases share: the plan and its material, the systems, one slot per
//! workload × system (a cell under construction, with the CPU figures and verification
//! evidence common's builder does not keep), this process's worker of the run (its segment,
//! its barrier, its query orders) and the recording every change is written to.

use std::collections::BTreeMap;

use common::protocol::{CellBuilder, Round};
use common::results::{Cell, Status};
use common::run::Recording;
use common::scale::Worker;
use common::servercpu::ServerProcess;
use common::window::{WindowOutcome, WindowPlan};
use serde_json::{Value, json};

use crate::opts::Opts;
use crate::plan::{Material, Plan};
use crate::session::Order;
use crate::systems::System;
use crate::workloads::Workload;

/// A cell under construction, with the figures common's builder does not keep.
pub struct Slot {
    pub builder: CellBuilder,
    pub refresh_ms: Vec<f64>,
    pub extra: BTreeMap<String, Value>,
}

impl Slot {
    fn new(opts: &Opts, workload: Workload, system: &System, worker: &Worker) -> Slot {
        let common = &opts.common;
        let connections = worker.segment.share(u64::from(workload.connections(opts)));
        let cell = Cell::new(
            &workload.label(opts),
            system.name(),
            workload.unit(),
            connections as u32,
            common.rounds,
        );
        let mut builder = CellBuilder::new(cell, common.ceiling);
        let server = ServerProcess::locate(&system.info, system.description.server_pid);
        builder.server(&server.shared_by(worker.segment.count));
        Slot {
            builder,
            refresh_ms: Vec::new(),
            extra: BTreeMap::new(),
        }
    }

    /// Folds one measured (or warm-up) outcome in, with the server's CPU time over it when
    /// it could be read.
    pub fn record(&mut self, round: Round, outcome: &WindowOutcome, server_cpu_ns: Option<u64>) {
        self.builder.add(round, outcome);
        self.builder.add_server_cpu(round, server_cpu_ns);
    }

    fn cell(&self) -> Cell {
        let mut cell = self.builder.to_cell();
        cell.extra.extend(self.extra.clone());
        if !self.refresh_ms.is_empty() {
            cell.extra
                .insert("refresh_ms_rounds".into(), json!(self.refresh_ms));
        }
        cell
    }
}

/// The run between its first cell and its report.
pub struct State<'a> {
    pub opts: &'a Opts,
    pub plan: &'a Plan,
    pub material: &'a Material,
    pub systems: Vec<System>,
    /// `slots[workload][system]`, in report order.
    pub slots: Vec<Vec<Slot>>,
    pub run: Recording,
    /// This process's worker of the run ([`Worker::alone`] without workers).
    pub worker: Worker,
    /// Each query set's order for this worker (`QueryKind as usize`).
    pub orders: [Option<Order>; 4],
}

impl<'a> State<'a> {
    /// Every cell of the run, written at once (unmeasured) so the report has its shape.
    pub fn new(
        opts: &'a Opts,
        plan: &'a Plan,
        material: &'a Material,
        mut systems: Vec<System>,
        run: Recording,
        worker: Worker,
    ) -> anyhow::Result<State<'a>> {
        // The report began with each system's durable-write floor; keep it in what is saved.
        for (system, info) in systems.iter_mut().zip(&run.report.systems) {
            system.info.clone_from(info);
        }
        let slots = plan
            .workloads
            .iter()
            .map(|w| {
                systems
                    .iter()
                    .map(|s| Slot::new(opts, *w, s, &worker))
                    .collect()
            })
            .collect();
        let mut state = State {
            opts,
            plan,
            material,
            systems,
            slots,
            run,
            orders: crate::scale::orders(worker.segment, opts.common.seed, &material.sets),
            worker,
        };
        state.save()?;
        Ok(state)
    }

    /// Writes every cell, what the systems now report (settings read back at each index
    /// creation) and the worker block to `results.json`.
    pub fn save(&mut self) -> anyhow::Result<()> {
        self.run.report.worker = self.worker.info();
        self.run.report.systems = self.systems.iter().map(|s| s.info.clone()).collect();
        for slot in self.slots.iter().flatten() {
            self.run.report.upsert_cell(slot.cell());
        }
        self.run.save()?;
        Ok(())
    }

    /// Marks every query cell of system `si`: none of them can be measured.
    pub fn mark_queries(&mut self, si: usize, status: Status, reason: &str) {
        for (wi, workload) in self.plan.workloads.iter().enumerate() {
            if let Workload::Query(_) = workload {
                self.slots[wi][si].builder.mark(status, reason);
            }
        }
    }

    /// How every query window runs (this worker's share of any --rate).
    pub fn window_plan(&self) -> WindowPlan {
        let common = &self.opts.common;
        self.run
            .window_plan(common, self.worker.segment, common.rate)
    }
}
