//! What makes two runs comparable, and where two runs differ in it: the suite and section,
//! every option that shapes the work (not those that only say where results go or how they
//! are judged), the machine, the kernel, each system's version, kind, location, labels and
//! verified settings, and the data (seed and checksum).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::{Report, SystemInfo};

/// Options that do not change what is measured: where results go, what is printed, how the
/// run waits or is judged, and names of things the comparison reads from elsewhere (targets
/// are compared as systems: name, version, settings; PIDs differ every run; which worker of
/// a run wrote a part).
pub const IGNORED_OPTIONS: &[&str] = &[
    "output",
    "quiet",
    "password_files",
    "load_gate",
    "threshold",
    "reference",
    "targets",
    "brokers",
    "keep_data",
    "keep_index",
    "cache_dir",
    "server_pids",
    "broker_pids",
    // Which worker a part is, the run it belongs to and where its barrier was: a one-worker
    // run and a plain one do the same work (`worker_count` still counts).
    "worker_index",
    "run_id",
    "barrier",
    "barrier_timeout_s",
    // How many processes measured the run, and which one a fork is: `compare` judges across
    // runs on forks where both have them and says how many each side had.
    "forks",
    "fork",
];

/// Memory sizes closer than this share are the same machine (the kernel's own reservation
/// moves `MemTotal` between boots).
const MEMORY_TOLERANCE: f64 = 0.02;

/// One way the runs differ.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Difference {
    /// `options`, `machine`, `kernel`, `system`, `data` or `suite`.
    pub kind: &'static str,
    /// What differs (`connections`, `cpu_model`, `postgres version`, …).
    pub what: String,
    pub baseline: String,
    pub candidate: String,
}

impl Difference {
    /// `options: connections 16 → 32`; `kernel: 6.1 → 6.12`.
    pub fn line(&self) -> String {
        let what = if self.what.is_empty() {
            String::new()
        } else {
            format!("{} ", self.what)
        };
        format!(
            "{}: {what}{} → {}",
            self.kind, self.baseline, self.candidate
        )
    }
}

fn text(value: Option<&serde_json::Value>) -> String {
    match value {
        None => "(absent)".into(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The options as leaves (`common.connections` → 16), without the ignored ones.
fn leaves(value: &serde_json::Value, prefix: &str, out: &mut BTreeMap<String, serde_json::Value>) {
    match value.as_object() {
        Some(object) => {
            for (key, child) in object {
                if IGNORED_OPTIONS.contains(&key.as_str()) {
                    continue;
                }
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaves(child, &path, out);
            }
        }
        None => {
            out.insert(prefix.to_owned(), value.clone());
        }
    }
}

fn options(a: &Report, b: &Report, out: &mut Vec<Difference>) {
    let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
    leaves(&a.options, "", &mut left);
    leaves(&b.options, "", &mut right);
    let keys: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for key in keys {
        let (x, y) = (left.get(key), right.get(key));
        if x != y {
            out.push(Difference {
                kind: "options",
                what: key.clone(),
                baseline: text(x),
                candidate: text(y),
            });
        }
    }
}

fn machine(a: &Report, b: &Report, out: &mut Vec<Difference>) {
    let (x, y) = (&a.environment, &b.environment);
    let mut push = |kind, what: &str, baseline: String, candidate: String| {
        if baseline != candidate {
            out.push(Difference {
                kind,
                what: what.into(),
                baseline,
                candidate,
            });
        }
    };
    push(
        "machine",
        "cpu_model",
        x.cpu_model.clone(),
        y.cpu_model.clone(),
    );
    push("machine", "cores", x.cores.to_string(), y.cores.to_string());
    let (m, n) = (x.memory_bytes as f64, y.memory_bytes as f64);
    if (m - n).abs() > MEMORY_TOLERANCE * m.max(n) {
        push(
            "machine",
            "memory",
            crate::human::format_bytes(x.memory_bytes),
            crate::human::format_bytes(y.memory_bytes),
        );
    }
    push("kernel", "", x.kernel.clone(), y.kernel.clone());
}

fn system(x: &SystemInfo, y: &SystemInfo, out: &mut Vec<Difference>) {
    let mut push = |what: String, baseline: String, candidate: String| {
        if baseline != candidate {
            out.push(Difference {
                kind: "system",
                what,
                baseline,
                candidate,
            });
        }
    };
    let name = &x.name;
    push(
        format!("{name} version"),
        x.version.clone(),
        y.version.clone(),
    );
    push(format!("{name} kind"), x.kind.clone(), y.kind.clone());
    push(
        format!("{name} location"),
        format!("{:?}", x.location).to_lowercase(),
        format!("{:?}", y.location).to_lowercase(),
    );
    push(
        format!("{name} labels"),
        x.labels.join(", "),
        y.labels.join(", "),
    );
    let keys: std::collections::BTreeSet<&String> =
        x.verified.keys().chain(y.verified.keys()).collect();
    let absent = || "(not verified)".to_owned();
    for key in keys {
        push(
            format!("{name} verified {key}"),
            x.verified.get(key).cloned().unwrap_or_else(absent),
            y.verified.get(key).cloned().unwrap_or_else(absent),
        );
    }
}

fn data(a: &Report, b: &Report, out: &mut Vec<Difference>) {
    let describe = |r: &Report| match &r.data {
        Some(d) => (d.seed.to_string(), d.checksum.clone()),
        None => ("(none)".to_owned(), "(none)".to_owned()),
    };
    let ((seed_a, sum_a), (seed_b, sum_b)) = (describe(a), describe(b));
    for (what, x, y) in [("seed", seed_a, seed_b), ("checksum", sum_a, sum_b)] {
        if x != y {
            out.push(Difference {
                kind: "data",
                what: what.into(),
                baseline: x,
                candidate: y,
            });
        }
    }
}

/// Every way `candidate` differs from `baseline` in what makes them comparable.
pub fn differences(baseline: &Report, candidate: &Report) -> Vec<Difference> {
    let mut out = Vec::new();
    for (what, x, y) in [
        ("suite", &baseline.suite, &candidate.suite),
        ("section", &baseline.section, &candidate.section),
    ] {
        if x != y {
            out.push(Difference {
                kind: "suite",
                what: what.into(),
                baseline: x.clone(),
                candidate: y.clone(),
            });
        }
    }
    options(baseline, candidate, &mut out);
    machine(baseline, candidate, &mut out);
    for x in &baseline.systems {
        if let Some(y) = candidate.systems.iter().find(|s| s.name == x.name) {
            system(x, y, &mut out);
        }
    }
    data(baseline, candidate, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_does_not_differ_from_itself_and_outputs_do_not_count() {
        let a = crate::export::fixture::report();
        assert!(differences(&a, &a).is_empty());
        let mut b = a.clone();
        b.options["output"] = "/elsewhere".into();
        b.options["quiet"] = false.into();
        b.options["threshold"] = 0.1.into();
        b.environment.memory_bytes += 1 << 20;
        b.environment.hostname = "other".into();
        b.tool_version = "0.2.0".into();
        assert!(differences(&a, &b).is_empty());
    }

    #[test]
    fn each_difference_is_named() {
        let a = crate::export::fixture::report();
        let mut b = a.clone();
        b.options["connections"] = 32.into();
        b.environment.kernel = "6.12.0".into();
        b.environment.cores = 4;
        b.systems[1].version = "PostgreSQL 17.0".into();
        b.systems[1].verified.insert("fsync".into(), "off".into());
        b.data.as_mut().unwrap().checksum = "0000".into();
        let lines: Vec<String> = differences(&a, &b).iter().map(Difference::line).collect();
        assert_eq!(
            lines,
            [
                "options: connections 16 → 32",
                "machine: cores 2 → 4",
                "kernel: 6.1.0-test → 6.12.0",
                "system: postgres version PostgreSQL 16.4 → PostgreSQL 17.0",
                "system: postgres verified fsync on → off",
                "data: checksum 9f86d081884c7d65 → 0000",
            ]
        );
    }
}
