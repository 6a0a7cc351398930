//! The durability evidence under a report's tables: for each system, every fact read from its
//! servers against what the configuration needs. Pure functions of the report.

use common::results::Report;

use crate::replication::{DurabilityEvidence, EXTRA_KEY, SystemEvidence};

/// The evidence stored in the report, when there is any.
pub fn evidence(report: &Report) -> Option<DurabilityEvidence> {
    serde_json::from_value(report.extra.get(EXTRA_KEY)?.clone()).ok()
}

fn heading(evidence: &DurabilityEvidence) -> String {
    format!(
        "Durability {:?} ({}), read from each system's own status; point reads go to the {}",
        evidence.config,
        evidence.config.summary(),
        evidence.read_from
    )
}

fn verdict(system: &SystemEvidence, config: &str) -> String {
    let mut verdict = match (system.matched, system.measured_unmatched) {
        (true, _) => format!("matches {config}"),
        (false, true) => format!("does NOT match {config}; measured anyway, every cell labelled"),
        (false, false) => format!("does NOT match {config}; refused"),
    };
    if system.evidence.approximation.is_some() {
        verdict.push_str(" as far as it can be expressed (*)");
    }
    if !system.changed_during_run.is_empty() {
        verdict.push_str(&format!(
            "; by the end of the run: {}",
            system.changed_during_run.join("; ")
        ));
    }
    verdict
}

fn check_line(check: &crate::durability::Check) -> String {
    let mark = if check.ok { "✓" } else { "✗" };
    format!(
        "{mark} {}={} (needs {})",
        check.what, check.reported, check.needs
    )
}

/// How one rendering lays the evidence out.
struct Layout {
    heading: fn(&str) -> String,
    system: fn(&str, &str) -> String,
    /// Put before each check, node list and note of a system.
    item: &'static str,
}

fn render(report: &Report, layout: &Layout) -> Option<String> {
    let evidence = evidence(report)?;
    let config = format!("{:?}", evidence.config);
    let mut out = (layout.heading)(&heading(&evidence));
    for system in &evidence.systems {
        out.push_str(&(layout.system)(&system.system, &verdict(system, &config)));
        let mut items: Vec<String> = system.evidence.checks.iter().map(check_line).collect();
        if !system.evidence.nodes.is_empty() {
            items.push(format!("nodes: {}", system.evidence.nodes.join(" · ")));
        }
        items.extend(system.evidence.approximation.clone());
        for item in items {
            out.push_str(&format!("{}{item}\n", layout.item));
        }
    }
    Some(out)
}

/// The block printed under the terminal tables.
pub fn render_text(report: &Report) -> Option<String> {
    render(
        report,
        &Layout {
            heading: |h| format!("\n{h}:\n"),
            system: |name, verdict| format!("  {name}: {verdict}\n"),
            item: "    ",
        },
    )
}

/// The section appended to `report.md`.
pub fn render_markdown(report: &Report) -> Option<String> {
    render(
        report,
        &Layout {
            heading: |h| format!("\n**{h}**\n\n"),
            system: |name, verdict| format!("- **{name}** {verdict}\n"),
            item: "  - ",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::{Check, Durability, ReadFrom};
    use crate::replication::ClusterEvidence;
    use common::environment::Environment;

    fn report() -> Report {
        let mut report = Report::begin(
            "sql-bench",
            "0.1.0",
            "crud",
            Durability::C3.section(),
            serde_json::json!({}),
            Environment::default(),
        );
        let mut evidence = DurabilityEvidence::new(Durability::C3, ReadFrom::Primary);
        evidence.systems.push(SystemEvidence {
            system: "postgres".into(),
            matched: true,
            measured_unmatched: false,
            evidence: ClusterEvidence {
                checks: vec![
                    Check::new(
                        "synchronous_standby_names",
                        "'FIRST 2 (s1, s2)'",
                        "FIRST 2 (s1, s2)",
                        true,
                    ),
                    Check::new(
                        "pg_stat_replication",
                        "2: s1 streaming sync, s2 streaming sync",
                        "2 standbys streaming, both sync",
                        true,
                    ),
                ],
                nodes: vec![
                    "primary 127.0.0.1:5432".into(),
                    "s1 streaming sync".into(),
                    "s2 streaming sync".into(),
                ],
                ..ClusterEvidence::default()
            },
            changed_during_run: Vec::new(),
        });
        evidence.systems.push(SystemEvidence {
            system: "mariadb".into(),
            matched: true,
            measured_unmatched: false,
            evidence: ClusterEvidence {
                checks: vec![Check::new("Rpl_semi_sync_master_clients", "2", "2", true)],
                approximation: Some("* semi-sync over two replicas (≈ 2 of 3)".into()),
                ..ClusterEvidence::default()
            },
            changed_during_run: vec!["Rpl_semi_sync_master_no_tx rose from 0 to 4".into()],
        });
        evidence.systems.push(SystemEvidence {
            system: "sqlite".into(),
            matched: false,
            measured_unmatched: false,
            evidence: ClusterEvidence {
                checks: vec![Check::new(
                    "replicated configuration",
                    "none",
                    "3 nodes",
                    false,
                )],
                ..ClusterEvidence::default()
            },
            changed_during_run: Vec::new(),
        });
        report
            .extra
            .insert(EXTRA_KEY.into(), serde_json::to_value(&evidence).unwrap());
        report
    }

    #[test]
    fn evidence_text_snapshot() {
        insta::assert_snapshot!(render_text(&report()).unwrap());
    }

    #[test]
    fn evidence_markdown_snapshot() {
        insta::assert_snapshot!(render_markdown(&report()).unwrap());
    }

    #[test]
    fn a_report_without_evidence_renders_nothing() {
        let mut plain = report();
        plain.extra.clear();
        assert!(render_text(&plain).is_none() && render_markdown(&plain).is_none());
    }
}
