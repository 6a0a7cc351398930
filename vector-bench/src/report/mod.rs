//! Reports: pure functions from a [`Report`] to text. Per curve family, one table of ef points
//! (recall@k, p50/p99 at concurrency 1, QPS at --connections) in the seed's shape; then the
//! comparison at matched recall, which is the one that decides; builds; ground truth. The
//! verdicts and every renderer reach common's run lifecycle through [`VectorReport`] (and
//! [`TruthReport`] for `--truth-only`).

pub mod chart;
pub mod pareto;

use std::collections::BTreeMap;

use common::export::ToolReport;
use common::human::{format_bytes, format_latency_ns, format_rate, format_thousands};
use common::report::{
    Table, floor_text, notes_markdown, problems_markdown, problems_text, run_line,
};
use common::results::{Cell, Metric, NoVerdict, Report, Status, Verdict};
use common::verdict::{self, Direction, Judgement};
use serde_json::{Value, json};

use crate::curve::{MATCHED_RECALLS, Matched, Point, at_recall};
use crate::opts::Opts;
use crate::workloads::groundtruth::TruthInfo;

/// vector-bench's verdicts and renderers, for common's run lifecycle.
pub struct VectorReport;

impl ToolReport for VectorReport {
    /// QPS at matched recall against the reference's (not common's per-cell comparison: two
    /// indexes rarely reach the same recall at the same ef).
    fn judge(&self, report: &Report) -> Judgement {
        matched_verdicts(report, &curves(report))
    }

    fn terminal(&self, report: &Report) -> String {
        render_terminal(report)
    }

    fn markdown(&self, report: &Report) -> String {
        render_markdown(report)
    }

    fn charts(&self, report: &Report) -> Vec<(String, String)> {
        let mut charts = chart::render_charts(report);
        charts.extend(pareto::charts(report));
        charts
    }
}

/// `--truth-only`: the ground truth's time and agreement, and nothing measured.
pub struct TruthReport;

impl ToolReport for TruthReport {
    fn judge(&self, _: &Report) -> Judgement {
        Judgement::default()
    }

    /// One line per family, as the run printed it while computing, with any cache warning.
    fn terminal(&self, report: &Report) -> String {
        let mut lines = Vec::new();
        for info in stored_truths(report) {
            lines.push(info.line());
            if let Some(note) = &info.cache_note {
                lines.push(format!("  note: {note}"));
            }
        }
        lines.join("\n")
    }

    fn markdown(&self, report: &Report) -> String {
        render_markdown(report)
    }

    fn charts(&self, _: &Report) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The ground truth of each family, as stored under `extra.ground_truth`.
fn stored_truths(report: &Report) -> Vec<TruthInfo> {
    report
        .extra
        .get("ground_truth")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default()
}

/// The notes every report carries: what the figures are and what they do not establish.
pub fn notes(opts: &Opts, kinds: &[String], metric: crate::dataset::Metric) -> Vec<String> {
    let mut notes = vec![
        format!(
            "Latency (p50/p99) is one query at a time over the same {} queries per round; QPS is {} sessions searching flat out for {} per round. Recall@{} is tie-aware against exact ground truth (a row exactly as near as the k-th true neighbour counts).",
            opts.queries(),
            opts.common.connections,
            common::human::format_duration(opts.common.duration),
            opts.k
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", @")
        ),
        format!(
            "`{}` is vector-bench's own exact scan of each query family's rows (brute force over only the rows the filter admits, recall 1.0 by construction): the bar a filtered index must beat.",
            crate::targets::exact::NAME
        ),
        "Two indexes rarely reach the same recall at the same ef: compare them at matched recall (interpolated along each target's own curve), not row by row.".to_owned(),
        "Every system ran on this machine beside the client: the client's CPU time is taken from the servers'. Figures compare only within this run.".to_owned(),
    ];
    if kinds.iter().any(|k| k == "usearch") {
        notes.push("usearch runs inside the client process: no network and no protocol; its searches share the cores with nothing else of the client.".into());
        let int8 = opts
            .variants
            .as_ref()
            .is_some_and(|v| v.contains(&crate::index::Variant::Int8));
        if int8 && metric == crate::dataset::Metric::L2 {
            notes.push("usearch's int8 rows (and queries) of this L2 data are quantized by vector-bench, not by usearch: usearch's own f32→i8 cast scales each vector to unit length, valid for cosine only (it would rank by angle). One offset and one scale for every component, from the base rows' range, map them into [-127, 127]; the figures are `int8.i8_offset` and `int8.i8_scale` in usearch's verified settings.".into());
        }
    }
    if kinds.iter().any(|k| k == "qdrant-edge") {
        notes.push(format!(
            "qdrant-edge is {}",
            crate::targets::QDRANT_EDGE_LABEL
        ));
    }
    notes
}

/// The curves and their matched-recall figures, as stored under `extra.curves`.
pub fn curves_json(report: &Report) -> Value {
    json!(curves(report))
}

/// One system's curve of one family, with its figures at each matched recall.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct Curve {
    pub system: String,
    pub family: String,
    pub points: Vec<Point>,
    pub matched: Vec<(f64, Option<Matched>)>,
}

/// The `ok` cells grouped by (family, system), as curves in ef order.
pub fn curves(report: &Report) -> Vec<Curve> {
    let mut grouped: BTreeMap<(String, usize), Vec<Point>> = BTreeMap::new();
    for cell in report.cells.iter().filter(|c| c.status == Status::Ok) {
        let (Some(family), Some(point)) = (family_of(cell), point_of(cell)) else {
            continue;
        };
        let order = report
            .systems
            .iter()
            .position(|s| s.name == cell.system)
            .unwrap_or(usize::MAX);
        grouped.entry((family, order)).or_default().push(point);
    }
    grouped
        .into_iter()
        .map(|((family, order), mut points)| {
            points.sort_by_key(|p| p.ef);
            let matched = MATCHED_RECALLS
                .iter()
                .map(|r| (*r, at_recall(&points, *r)))
                .collect();
            Curve {
                system: report
                    .systems
                    .get(order)
                    .map_or_else(String::new, |s| s.name.clone()),
                family,
                points,
                matched,
            }
        })
        .collect()
}

fn family_of(cell: &Cell) -> Option<String> {
    cell.extra.get("family")?.as_str().map(str::to_owned)
}

fn point_of(cell: &Cell) -> Option<Point> {
    let throughput = cell.usable_throughput()?;
    let latency = cell.latency_ns?;
    Some(Point {
        ef: cell.extra.get("ef")?.as_u64()?,
        recall: cell.extra.get("recall")?.as_f64()?,
        p50_ns: latency.p50 as f64,
        p99_ns: latency.p99 as f64,
        qps: throughput.median,
        qps_min: throughput.min,
        qps_max: throughput.max,
    })
}

/// QPS at each matched recall against the reference's, where both curves cross that recall,
/// judged by common's rule on the per-round figures: each round's QPS interpolated between the
/// two bracketing ef points, then the interval of the ratio (no verdict with fewer than three
/// rounds a side, or where a curve gives only a bound).
fn matched_verdicts(report: &Report, curves: &[Curve]) -> Judgement {
    let mut judgement = Judgement::default();
    let Some(reference) = report.reference.as_deref() else {
        return judgement;
    };
    let threshold = verdict::threshold_of(report);
    for base in curves.iter().filter(|c| c.system == reference) {
        for other in curves
            .iter()
            .filter(|c| c.family == base.family && c.system != reference)
        {
            for ((recall, a), (_, b)) in base.matched.iter().zip(&other.matched) {
                let workload = format!("{} · recall {recall:.2}", base.family);
                let no = |reason: String| NoVerdict {
                    workload: workload.clone(),
                    system: other.system.clone(),
                    reference: reference.to_owned(),
                    metric: Metric::Throughput,
                    reason,
                };
                let (Some(theirs), Some(mine)) = (
                    round_qps(report, base, a, *recall),
                    round_qps(report, other, b, *recall),
                ) else {
                    if a.is_some() && b.is_some() {
                        judgement.no_verdicts.push(no(
                            "a curve that starts above this recall or never reaches it gives a bound, not a figure to divide".into(),
                        ));
                    }
                    continue;
                };
                match verdict::judge_rounds(&mine, &theirs, threshold, Direction::HigherIsBetter) {
                    Ok((ratio, interval, kind)) => judgement.verdicts.push(Verdict {
                        workload,
                        system: other.system.clone(),
                        reference: reference.to_owned(),
                        metric: Metric::Throughput,
                        ratio,
                        interval: [interval.low, interval.high],
                        confidence: interval.confidence,
                        verdict: kind,
                    }),
                    Err(reason) => judgement.no_verdicts.push(no(reason)),
                }
            }
        }
    }
    judgement
}

/// A curve's QPS at `target` recall, round by round: each measured round's QPS interpolated
/// linearly between the two ef points around the target (the recall of a point does not vary
/// by round: the same queries get the same answers). Only interpolations compare: a curve that
/// starts above the recall gives a bound, and a bound against a figure is no ratio.
fn round_qps(
    report: &Report,
    curve: &Curve,
    matched: &Option<Matched>,
    target: f64,
) -> Option<Vec<f64>> {
    let Some(Matched::Interpolated {
        ef_below, ef_above, ..
    }) = *matched
    else {
        return None;
    };
    let cell = |ef: u64| {
        let workload = format!("{} · ef {ef}", curve.family);
        report
            .cells
            .iter()
            .find(|c| c.system == curve.system && c.workload == workload)
    };
    let (below, above) = (cell(ef_below)?, cell(ef_above)?);
    let recall = |c: &Cell| c.extra.get("recall").and_then(Value::as_f64);
    let (ra, rb) = (recall(below)?, recall(above)?);
    let t = if rb > ra {
        (target - ra) / (rb - ra)
    } else {
        0.0
    };
    // Each fork's QPS when the run had forks, else each round's (`verdict::round_figures`).
    let (qa, qb) = (
        &verdict::round_figures(below, Metric::Throughput)?,
        &verdict::round_figures(above, Metric::Throughput)?,
    );
    Some(qa.iter().zip(qb).map(|(x, y)| x + t * (y - x)).collect())
}

/// The sweep's families (the exact scan's are not curves), in the order of their variants.
fn families(report: &Report) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for cell in &report.cells {
        if let Some(family) = family_of_workload(&cell.workload).or_else(|| family_of(cell))
            && !family.starts_with("exact scan")
            && !seen.contains(&family)
        {
            seen.push(family);
        }
    }
    // Cells go ef by ef; a reader wants a variant's families together.
    let variant = |f: &String| f.split(" · ").next().unwrap_or("").to_owned();
    let order: Vec<String> = seen.iter().map(variant).fold(Vec::new(), |mut v, x| {
        if !v.contains(&x) {
            v.push(x);
        }
        v
    });
    seen.sort_by_key(|f| order.iter().position(|v| *v == variant(f)));
    seen
}

/// The exact scan of each query family, beside the fastest index point at recall ≥ 0.95.
pub fn exact_table(report: &Report) -> Option<Table> {
    let views = pareto::views(report);
    let exact = report
        .systems
        .iter()
        .find(|s| s.name == crate::targets::exact::NAME);
    let rows: Vec<Vec<String>> = report
        .cells
        .iter()
        .filter(|c| c.system == crate::targets::exact::NAME)
        .map(|c| {
            let query = c.workload.trim_start_matches("exact scan · ").to_owned();
            let filter = query.split(" · ").next().unwrap_or("").to_owned();
            let rows = exact
                .and_then(|s| s.verified.get(&format!("rows.{filter}")))
                .map_or("–".into(), |r| {
                    format_thousands(r.parse::<f64>().unwrap_or(0.0))
                });
            let mut row = vec![query.clone(), rows];
            row.extend(exact_figures(c));
            let bar = views.iter().find(|v| v.query == query).and_then(|v| {
                let qps = v.exact?.qps;
                let best = v
                    .systems
                    .iter()
                    .flat_map(|s| s.points.iter().map(move |p| (s, p)))
                    .filter(|(_, p)| p.recall >= 0.95)
                    .max_by(|a, b| a.1.qps.total_cmp(&b.1.qps))?;
                Some(format!(
                    "{} ({} ef {}): {} q/s, {}× the scan's",
                    best.0.system,
                    best.1.variant,
                    best.1.ef,
                    format_rate(best.1.qps),
                    two_figures(best.1.qps / qps.max(1e-9))
                ))
            });
            row.push(bar.unwrap_or_else(|| "no index point reaches 0.95".into()));
            row
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        title: "Exact scan of each query family's rows (recall 1.0 by construction; latency at concurrency 1, QPS at --connections)".into(),
        header: vec![
            "query family".into(),
            "rows scanned".into(),
            "recall".into(),
            "p50".into(),
            "p99".into(),
            "QPS".into(),
            "index point of highest median QPS at recall ≥ 0.95 (a ratio of medians: descriptive, no interval)".into(),
        ],
        rows,
        numeric: false,
    })
}

/// A ratio with two significant figures however small (`0.0043`, `0.52`, `3.1`), so a
/// filter that leaves the scan little to read never prints as `0.00`.
fn two_figures(ratio: f64) -> String {
    if !ratio.is_finite() || ratio <= 0.0 {
        return format!("{ratio}");
    }
    let decimals = (1 - ratio.log10().floor() as i32).clamp(0, 9) as usize;
    format!("{ratio:.decimals$}")
}

/// `f32 · unfiltered · ef 64` → `f32 · unfiltered` (for cells that never got their extras).
fn family_of_workload(workload: &str) -> Option<String> {
    workload.rsplit_once(" · ef ").map(|(f, _)| f.to_owned())
}

fn ef_of_workload(workload: &str) -> Option<u64> {
    workload.rsplit_once(" · ef ")?.1.parse().ok()
}

/// The systems with a cell in `family`, in report order.
fn systems_in<'a>(report: &'a Report, family: &str) -> Vec<&'a common::results::SystemInfo> {
    report
        .systems
        .iter()
        .filter(|s| {
            report.cells.iter().any(|c| {
                c.system == s.name && family_of_workload(&c.workload).as_deref() == Some(family)
            })
        })
        .collect()
}

/// One family's ef points: recall, p50, p99 and QPS per system that measured it.
pub fn family_table(report: &Report, family: &str) -> Table {
    let systems = systems_in(report, family);
    let mut header = vec!["ef".to_owned()];
    for s in &systems {
        for what in ["recall", "p50", "p99", "QPS"] {
            header.push(format!("{} {what}", s.name));
        }
    }
    let mut efs: Vec<u64> = report
        .cells
        .iter()
        .filter(|c| family_of_workload(&c.workload).as_deref() == Some(family))
        .filter_map(|c| ef_of_workload(&c.workload))
        .collect();
    efs.sort_unstable();
    efs.dedup();
    let rows =
        efs.iter()
            .map(|ef| {
                let mut row = vec![ef.to_string()];
                for s in &systems {
                    let cell = report.cells.iter().find(|c| {
                        c.system == s.name && c.workload == format!("{family} · ef {ef}")
                    });
                    row.extend(point_figures(cell));
                }
                row
            })
            .collect();
    Table {
        title: format!("{family} (recall@k; latency at concurrency 1; QPS median of rounds)"),
        header,
        rows,
        numeric: true,
    }
}

fn point_figures(cell: Option<&Cell>) -> Vec<String> {
    let Some(cell) = cell else {
        return vec!["–".into(); 4];
    };
    match (cell.status, point_of(cell)) {
        (Status::Ok, Some(p)) => vec![
            format!("{:.4}", p.recall),
            format_latency_ns(p.p50_ns as u64),
            format_latency_ns(p.p99_ns as u64),
            format_rate(p.qps),
        ],
        _ => {
            let mut out = vec![cell.status.as_str().to_owned()];
            out.extend(std::iter::repeat_n("–".to_owned(), 3));
            out
        }
    }
}

/// An exact-scan cell's recall, p50, p99 and QPS (it has no ef, so no curve point).
fn exact_figures(cell: &Cell) -> Vec<String> {
    match (cell.status, cell.usable_throughput(), cell.latency_ns) {
        (Status::Ok, Some(t), Some(l)) => vec![
            cell.extra
                .get("recall")
                .and_then(Value::as_f64)
                .map_or("–".into(), |r| format!("{r:.4}")),
            format_latency_ns(l.p50),
            format_latency_ns(l.p99),
            format_rate(t.median),
        ],
        _ => {
            let mut out = vec![cell.status.as_str().to_owned()];
            out.extend(std::iter::repeat_n("–".to_owned(), 3));
            out
        }
    }
}

/// Each system's QPS and latency at each matched recall, with the verdict against the reference.
pub fn matched_table(report: &Report) -> Option<Table> {
    let curves: Vec<Curve> = report
        .extra
        .get("curves")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    if curves.is_empty() {
        return None;
    }
    let mut header = vec!["family · recall".to_owned()];
    header.extend(report.systems.iter().map(|s| s.name.clone()));
    let mut rows = Vec::new();
    for family in families(report) {
        for (i, recall) in MATCHED_RECALLS.iter().enumerate() {
            if !curves.iter().any(|c| c.family == family) {
                continue;
            }
            let mut row = vec![format!("{family} · {recall:.2}")];
            for s in &report.systems {
                let curve = curves
                    .iter()
                    .find(|c| c.system == s.name && c.family == family);
                let matched = curve.and_then(|c| c.matched.get(i)).and_then(|m| m.1);
                let verdict = report.verdicts.iter().find(|v| {
                    v.system == s.name && v.workload == format!("{family} · recall {recall:.2}")
                });
                row.push(matched_figure(matched, verdict));
            }
            rows.push(row);
        }
    }
    Some(Table {
        title: format!(
            "At matched recall (QPS · p50, interpolated along each curve; ratio of QPS against {})",
            report.reference.as_deref().unwrap_or("the reference")
        ),
        header,
        rows,
        numeric: true,
    })
}

fn matched_figure(matched: Option<Matched>, verdict: Option<&Verdict>) -> String {
    let Some(matched) = matched else {
        return "–".into();
    };
    let figure = match matched {
        Matched::NotReached { best_recall, ef } => {
            return format!("not reached (best {best_recall:.4} at ef {ef})");
        }
        Matched::Interpolated { qps, p50_ns, .. } => {
            format!(
                "{} q/s · {}",
                format_rate(qps),
                format_latency_ns(p50_ns as u64)
            )
        }
        Matched::AlreadyAbove { ef, point, .. } => format!(
            "≥ {} q/s · ≤ {} (already at ef {ef})",
            format_rate(point.qps),
            format_latency_ns(point.p50_ns as u64)
        ),
    };
    match verdict {
        Some(v) => format!("{figure} · {}", verdict::describe(v)),
        None => figure,
    }
}

/// Build time, insert throughput and memory per system and variant.
pub fn builds_table(report: &Report) -> Option<Table> {
    let builds = report.extra.get("builds")?.as_array()?;
    if builds.is_empty() {
        return None;
    }
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let rows = builds
        .iter()
        .map(|b| {
            let build = b.get("build");
            let seconds = |key: &str| {
                build
                    .and_then(|x| x.get(key))
                    .and_then(Value::as_f64)
                    .map_or("–".to_owned(), |s| format!("{s:.1} s"))
            };
            let memory = b
                .get("server_rss_bytes")
                .and_then(Value::as_u64)
                .map(|m| format!("server {}", format_bytes(m)))
                .or_else(|| {
                    let index = build
                        .and_then(|x| x.get("index_bytes"))
                        .and_then(Value::as_u64)
                        .map(|i| format!("index {}", format_bytes(i)));
                    let growth = b
                        .get("process_rss_growth_bytes")
                        .and_then(Value::as_u64)
                        .map(|g| format!("process +{}", format_bytes(g)));
                    let both: Vec<String> = index.into_iter().chain(growth).collect();
                    (!both.is_empty()).then(|| both.join(", "))
                })
                .unwrap_or_else(|| "–".into());
            let what = b
                .get("problem")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| text(b, "offered"));
            vec![
                format!("{} · {}", text(b, "system"), text(b, "variant")),
                b.get("insert_rows_per_s")
                    .and_then(Value::as_f64)
                    .map_or("–".into(), format_rate),
                seconds("insert_s"),
                seconds("build_s"),
                memory,
                what,
            ]
        })
        .collect();
    Some(Table {
        title: "Index builds (time until the index answers queries)".into(),
        header: vec![
            "system · variant".into(),
            "insert rows/s".into(),
            "insert".into(),
            "build".into(),
            "memory".into(),
            "how".into(),
        ],
        rows,
        numeric: false,
    })
}

fn truth_lines(report: &Report) -> Vec<String> {
    let Some(truths) = report.extra.get("ground_truth").and_then(Value::as_array) else {
        return Vec::new();
    };
    truths
        .iter()
        .map(|t| {
            let source = t.get("source").and_then(Value::as_str).unwrap_or("?");
            let rows = t.get("rows").and_then(Value::as_u64).unwrap_or(0);
            let queries = t.get("queries").and_then(Value::as_u64).unwrap_or(0);
            let filter = t.get("filter").and_then(Value::as_str).unwrap_or("?");
            let how = match source {
                "computed" => format!(
                    "computed in {:.2} s",
                    t.get("seconds").and_then(Value::as_f64).unwrap_or(0.0)
                ),
                other => format!("from the {other}"),
            };
            // Why a data file's lists were not used (or a cache was not), beside the figure.
            let note = t
                .get("cache_note")
                .and_then(Value::as_str)
                .map_or(String::new(), |n| format!(" ({n})"));
            format!(
                "ground truth ({filter}): {queries} queries over {} rows, {how}{note}",
                format_thousands(rows as f64)
            )
        })
        .collect()
}

fn header_lines(report: &Report) -> Vec<String> {
    let mut lines = vec![format!("{} · {}", report.tool, report.section)];
    lines.extend(common::report::environment_lines(report));
    lines.extend(truth_lines(report));
    if let Some(peak) = report
        .extra
        .get("client_peak_rss_bytes")
        .and_then(Value::as_u64)
    {
        lines.push(format!(
            "client peak resident memory {}",
            format_bytes(peak)
        ));
    }
    lines
}

fn tables(report: &Report) -> Vec<Table> {
    let mut out: Vec<Table> = families(report)
        .iter()
        .map(|f| family_table(report, f))
        .collect();
    out.extend(matched_table(report));
    out.extend(exact_table(report));
    out.extend(builds_table(report));
    out.extend(harness_table(report));
    out.extend(common::report::cpu_table(report));
    out
}

/// What the client itself costs per query, outside the search call (the median over cells),
/// beside the search call's own median latency: for the embedded index, the share of a query
/// that is harness rather than index.
pub fn harness_table(report: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = report
        .systems
        .iter()
        .filter_map(|s| {
            let cells: Vec<&Cell> = report
                .cells
                .iter()
                .filter(|c| c.system == s.name && c.status == Status::Ok)
                .collect();
            let mut harness: Vec<f64> = cells
                .iter()
                .filter_map(|c| c.extra.get("harness_ns_per_query")?.as_f64())
                .collect();
            let mut calls: Vec<f64> = cells
                .iter()
                .filter_map(|c| c.latency_ns.map(|l| l.p50 as f64))
                .collect();
            if harness.is_empty() || calls.is_empty() {
                return None;
            }
            harness.sort_by(f64::total_cmp);
            calls.sort_by(f64::total_cmp);
            let (h, c) = (harness[harness.len() / 2], calls[calls.len() / 2]);
            Some(vec![
                s.name.clone(),
                format_latency_ns(h as u64),
                format_latency_ns(c as u64),
                format!("{:.2}%", 100.0 * h / (h + c).max(1.0)),
            ])
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        title: "Harness cost per query (outside the search call; medians over the measured cells)"
            .into(),
        header: vec![
            "system".into(),
            "harness".into(),
            "search call p50".into(),
            "harness share".into(),
        ],
        rows,
        numeric: true,
    })
}

/// The terminal summary printed at the end of a run.
pub fn render_terminal(report: &Report) -> String {
    let mut out = String::from("\n");
    for line in header_lines(report) {
        out.push_str(&format!("{line}\n"));
    }
    for table in tables(report) {
        out.push('\n');
        out.push_str(&table.to_text());
    }
    out.push_str(&problems_text(report));
    out.push('\n');
    for s in &report.systems {
        out.push_str(&format!("{}: {}", s.name, s.version));
        if let Some(floor) = s.durable_write_floor_ns.map(floor_text) {
            out.push_str(&format!(" · durable-write floor {floor}"));
        }
        out.push('\n');
    }
    for note in &report.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// `report.md`: the same tables, with every system's verified settings and the notes in full.
pub fn render_markdown(report: &Report) -> String {
    let mut out = format!(
        "# {} {}\n\n{}\n\n",
        report.tool,
        report.suite,
        run_line(report)
    );
    for line in header_lines(report) {
        out.push_str(&format!("- {line}\n"));
    }
    for table in tables(report) {
        out.push('\n');
        out.push_str(&table.to_markdown());
    }
    out.push_str(&problems_markdown(report));
    if !report.systems.is_empty() {
        out.push_str("\n**Systems (as each reported itself)**\n\n");
    }
    for s in &report.systems {
        out.push_str(&format!("- {} — {}\n", s.name, s.version));
        for (key, value) in &s.verified {
            out.push_str(&format!("  - {key} = {value}\n"));
        }
        if let (Some(ns), Some(dir)) = (s.durable_write_floor_ns, &s.data_dir) {
            out.push_str(&format!(
                "  - durable-write floor (4 KiB O_DSYNC, median) in {dir} = {}\n",
                floor_text(ns)
            ));
        }
        for what in &s.not_measured {
            out.push_str(&format!("  - not measured: {what}\n"));
        }
    }
    out.push_str(&notes_markdown(report));
    out
}

#[cfg(test)]
pub(crate) mod tests;
