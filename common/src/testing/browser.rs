//! The real-browser check of an HTML page: Debian's `chromium`, headless, loads it from a
//! `file://` URL with every host name unresolvable (nothing may come from the network), and the
//! check fails on any console message or uncaught error in its log, parses the DOM it dumps and
//! requires drawn marks (`data-system`, coordinates that are numbers) for every system in each
//! `data-chart` SVG, then takes a screenshot. A chart's own list of its systems does not excuse
//! it: every system the caller names must be drawn in some chart, and in the throughput chart
//! ([`MAIN_CHART`]) when the page has one. Missing chromium fails the test when servers are
//! required (`scripts/install-servers chromium` installs it) and skips it with a note otherwise.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{read_report, servers_required};
use crate::results::Status;

/// Longest one chromium run may take.
const DEADLINE: Duration = Duration::from_secs(90);

/// The chart every system with a throughput figure must be drawn in.
pub const MAIN_CHART: &str = "throughput-rounds";

/// The tags that draw a mark.
const MARKS: [&str; 7] = [
    "circle", "rect", "path", "line", "polyline", "polygon", "ellipse",
];

/// chromium's path: `$FAIRBENCH_CHROMIUM`, else `chromium` or `chromium-browser` on `PATH`.
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FAIRBENCH_CHROMIUM") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Fails the test unless `report.html` of the results folder `dir` renders in chromium with no
/// console error and with marks for every system that has an `ok` cell in each chart; leaves
/// `report.png` (1280 × 2000) in `dir`.
pub fn assert_html_renders(dir: &Path) {
    let report = read_report(dir);
    let systems: Vec<String> = report
        .systems
        .iter()
        .map(|s| s.name.clone())
        .filter(|name| {
            report.cells.iter().any(|c| {
                &c.system == name && c.status == Status::Ok && c.usable_throughput().is_some()
            })
        })
        .collect();
    let html = dir.join("report.html");
    match check_page(&html, &systems, Some(&dir.join("report.png"))) {
        Ok(Some(summary)) => eprintln!("{summary}"),
        Ok(None) => {}
        Err(problem) => panic!("{} does not render cleanly: {problem}", html.display()),
    }
}

/// Renders `html` in chromium and checks it (see the module). `Ok(None)`: chromium is missing
/// and not required (a note went to stderr). `systems`: who must have marks in a chart that
/// does not say (`data-systems`) which systems it draws.
pub fn check_page(
    html: &Path,
    systems: &[String],
    screenshot: Option<&Path>,
) -> Result<Option<String>, String> {
    let text = std::fs::read_to_string(html).map_err(|e| format!("cannot read it: {e}"))?;
    static_check(&text)?;
    let Some(browser) = chromium() else {
        if servers_required() {
            return Err(
                "chromium is not installed: run scripts/install-servers chromium \
                        (Debian's chromium package), or set FAIRBENCH_CHROMIUM"
                    .into(),
            );
        }
        eprintln!("skipped: chromium is not installed (scripts/install-servers chromium)");
        return Ok(None);
    };
    let url = file_url(html)?;
    let (dom, log) = run(&browser, &["--dump-dom".to_owned(), url.clone()])?;
    console_errors(&log)?;
    let charts = charts(&dom);
    if charts.is_empty() {
        return Err("the page has no data-chart SVG".into());
    }
    let mut drawn = Vec::new();
    for chart in &charts {
        let expected = chart.declared.clone().unwrap_or_else(|| systems.to_vec());
        let missing: Vec<&String> = expected
            .iter()
            .filter(|s| !chart.marks.contains(*s))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "chart `{}` has no drawn marks for {missing:?}",
                chart.name
            ));
        }
        if let Some(bad) = &chart.broken {
            return Err(format!(
                "chart `{}` has a mark that cannot be drawn: {bad}",
                chart.name
            ));
        }
        drawn.push(format!("{} ({} systems)", chart.name, chart.marks.len()));
    }
    coverage(&charts, systems)?;
    let mut shot = String::new();
    if let Some(png) = screenshot {
        let _ = std::fs::remove_file(png);
        let args = [
            format!("--screenshot={}", png.display()),
            "--window-size=1280,2000".to_owned(),
            url,
        ];
        let (_, log) = run(&browser, &args)?;
        console_errors(&log)?;
        let size = std::fs::metadata(png).map_or(0, |m| m.len());
        if size == 0 {
            return Err(format!("chromium left no screenshot at {}", png.display()));
        }
        shot = format!("; screenshot {} ({} KiB)", png.display(), size / 1024);
    }
    Ok(Some(format!(
        "{} rendered in {}: no console message; charts {}{shot}",
        html.display(),
        browser.display(),
        drawn.join(", ")
    )))
}

/// A self-contained page loads nothing: no script or style from elsewhere, no remote image.
fn static_check(text: &str) -> Result<(), String> {
    let lower = text.to_ascii_lowercase();
    for pattern in [
        "<script src",
        "<link ",
        "src=\"http",
        "src=\"//",
        "src='http",
        "url(http",
        "url(//",
        "@import",
    ] {
        if let Some(at) = lower.find(pattern) {
            let end = (at + 80).min(text.len());
            let excerpt: String = text[at..].chars().take(end - at).collect();
            return Err(format!("it loads from elsewhere: `{excerpt}`"));
        }
    }
    Ok(())
}

fn file_url(path: &Path) -> Result<String, String> {
    let absolute = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = absolute.to_str().ok_or("a path that is not UTF-8")?;
    let mut url = String::from("file://");
    for c in text.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '/' | '-' | '_' | '.' | '~' => url.push(c),
            other => {
                let mut buf = [0u8; 4];
                for byte in other.encode_utf8(&mut buf).bytes() {
                    url.push_str(&format!("%{byte:02X}"));
                }
            }
        }
    }
    Ok(url)
}

/// Runs chromium headless on `args` with a fresh profile and no way to reach a host; returns
/// its stdout and stderr. Its whole process group is killed if it overruns [`DEADLINE`].
fn run(browser: &Path, args: &[String]) -> Result<(String, String), String> {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let profile =
        std::env::temp_dir().join(format!("fairbench-chromium-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&profile).map_err(|e| format!("cannot make a profile: {e}"))?;
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", browser.display()))?;
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("piped")));
    let stderr = reader(Box::new(child.stderr.take().expect("piped")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if status.is_none() {
        // The group this function created: chromium and the helpers it forked, nothing else.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .status();
        let _ = child.wait();
    }
    let (out, err) = (
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    let _ = std::fs::remove_dir_all(&profile);
    match status {
        None => Err(format!("chromium did not finish within {DEADLINE:?}")),
        Some(s) if !s.success() => Err(format!("chromium failed ({s}):\n{err}")),
        Some(_) => Ok((out, err)),
    }
}

/// Every console message (any level) and uncaught error in chromium's log.
fn console_errors(log: &str) -> Result<(), String> {
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("the console says:\n{}", bad.join("\n")))
    }
}

/// One `data-chart` SVG of the dumped DOM.
#[derive(Debug)]
struct Chart {
    name: String,
    /// The systems it says it draws (`data-systems`, JSON), when it says.
    declared: Option<Vec<String>>,
    /// The systems it has drawn marks for.
    marks: BTreeSet<String>,
    /// The first mark whose geometry is not a number, if any.
    broken: Option<String>,
}

/// Whether every one of `systems` is drawn in some chart and in the [`MAIN_CHART`] when there is
/// one, whatever the charts say they draw.
fn coverage(charts: &[Chart], systems: &[String]) -> Result<(), String> {
    let nowhere: Vec<&String> = systems
        .iter()
        .filter(|s| !charts.iter().any(|c| c.marks.contains(*s)))
        .collect();
    if !nowhere.is_empty() {
        return Err(format!("no chart draws {nowhere:?}"));
    }
    for chart in charts.iter().filter(|c| c.name == MAIN_CHART) {
        let left_out: Vec<&String> = systems
            .iter()
            .filter(|s| !chart.marks.contains(*s))
            .collect();
        if !left_out.is_empty() {
            return Err(format!(
                "chart `{MAIN_CHART}` leaves out {left_out:?} (it says it draws {:?})",
                chart.declared.as_deref().unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// The end of the tag that starts at `at` (the index of its `>`), quotes respected.
fn tag_end(dom: &str, at: usize) -> usize {
    let mut quoted = false;
    for (i, c) in dom[at..].char_indices() {
        match c {
            '"' => quoted = !quoted,
            '>' if !quoted => return at + i,
            _ => {}
        }
    }
    dom.len()
}

/// The attribute `name` of a start tag, unescaped.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    let raw = &tag[start..start + len];
    Some(
        raw.replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

fn charts(dom: &str) -> Vec<Chart> {
    let mut charts = Vec::new();
    let mut from = 0;
    while let Some(offset) = dom[from..].find("<svg") {
        let at = from + offset;
        let open_end = tag_end(dom, at);
        let tag = &dom[at..open_end];
        let close = svg_end(dom, open_end);
        from = open_end;
        let Some(name) = attribute(tag, "data-chart") else {
            continue;
        };
        let declared = attribute(tag, "data-systems").and_then(|j| serde_json::from_str(&j).ok());
        let (marks, broken) = marks(&dom[open_end..close]);
        charts.push(Chart {
            name,
            declared,
            marks,
            broken,
        });
        from = close;
    }
    charts
}

/// Where the `<svg>` whose start tag ends at `from` closes (nested SVGs counted).
fn svg_end(dom: &str, from: usize) -> usize {
    let mut depth = 1;
    let mut at = from;
    while depth > 0 {
        let next_open = dom[at..].find("<svg").map(|i| at + i);
        let Some(next_close) = dom[at..].find("</svg>").map(|i| at + i) else {
            return dom.len();
        };
        match next_open {
            Some(open) if open < next_close => {
                depth += 1;
                at = open + 4;
            }
            _ => {
                depth -= 1;
                at = next_close + 6;
            }
        }
    }
    at
}

/// The systems with a drawn mark in `body`, and the first mark that is not drawable.
fn marks(body: &str) -> (BTreeSet<String>, Option<String>) {
    let mut systems = BTreeSet::new();
    let mut broken = None;
    let mut from = 0;
    while let Some(offset) = body[from..].find('<') {
        let at = from + offset;
        let end = tag_end(body, at);
        let tag = &body[at..end];
        from = end;
        let name: String = tag[1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if !MARKS.contains(&name.as_str()) {
            continue;
        }
        let Some(system) = attribute(tag, "data-system") else {
            continue;
        };
        let geometry_ok = !tag.contains("NaN")
            && !tag.contains("inf")
            && match name.as_str() {
                "path" => {
                    attribute(tag, "d").is_some_and(|d| d.chars().any(|c| c.is_ascii_digit()))
                }
                "rect" => attribute(tag, "width")
                    .and_then(|w| w.parse::<f64>().ok())
                    .is_some_and(|w| w > 0.0),
                _ => true,
            };
        if geometry_ok {
            systems.insert(system);
        } else if broken.is_none() {
            broken = Some(tag.chars().take(160).collect());
        }
    }
    (systems, broken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{SharedReport, exporters};
    use crate::writer::ResultsDir;

    const PAGE: &str = r#"<!DOCTYPE html><html><body>
<svg data-chart="c" data-systems="[&quot;a&quot;,&quot;b&quot;]"><rect class="legend" width="9"/>
<circle data-system="a" cx="1" cy="2" r="3"/>MARK_B</svg>SCRIPT</body></html>"#;

    fn page(dir: &Path, mark_b: &str, script: &str) -> PathBuf {
        let path = dir.join("page.html");
        std::fs::write(
            &path,
            PAGE.replace("MARK_B", mark_b).replace("SCRIPT", script),
        )
        .unwrap();
        path
    }

    #[test]
    fn the_dom_scanner_finds_each_charts_marks() {
        let dom = PAGE.replace("MARK_B", r#"<path data-system="b" d="M0 NaN"/>"#);
        let charts = charts(&dom);
        assert_eq!(charts.len(), 1);
        assert_eq!(
            charts[0].declared.as_deref(),
            Some(&["a".to_owned(), "b".to_owned()][..])
        );
        assert_eq!(charts[0].marks.iter().collect::<Vec<_>>(), ["a"]);
        assert!(charts[0].broken.as_deref().unwrap().contains("NaN"));
        // A system no chart draws fails, whatever each chart says it draws; so does one the
        // throughput chart leaves out of its own list.
        let named = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(coverage(&charts, &named(&["a"])).is_ok());
        let error = coverage(&charts, &named(&["a", "c"])).unwrap_err();
        assert!(error.contains("no chart draws [\"c\"]"), "{error}");
        let main = PAGE
            .replace("data-chart=\"c\"", &format!("data-chart=\"{MAIN_CHART}\""))
            .replace("[&quot;a&quot;,&quot;b&quot;]", "[&quot;a&quot;]")
            .replace("MARK_B", "");
        let mut both = super::charts(&main);
        both.push(Chart {
            name: "other".into(),
            declared: None,
            marks: BTreeSet::from(["b".to_owned()]),
            broken: None,
        });
        let error = coverage(&both, &named(&["a", "b"])).unwrap_err();
        assert!(error.contains("leaves out [\"b\"]"), "{error}");
        assert!(static_check("<script src=\"https://cdn.x/d3.js\">").is_err());
        assert!(static_check("<svg xmlns=\"http://www.w3.org/2000/svg\">").is_ok());
        assert_eq!(file_url(Path::new("/")).unwrap(), "file:///");
    }

    #[test]
    fn a_broken_page_fails_in_chromium() {
        let dir = tempfile::tempdir().unwrap();
        let good = page(dir.path(), r#"<path data-system="b" d="M0 0L5 5"/>"#, "");
        let Some(summary) = check_page(&good, &[], None).unwrap() else {
            return;
        };
        assert!(summary.contains("c (2 systems)"), "{summary}");
        let error = page(
            dir.path(),
            r#"<path data-system="b" d="M0 0L5 5"/>"#,
            "<script>drawChart();</script>",
        );
        let problem = check_page(&error, &[], None).unwrap_err();
        assert!(
            problem.contains("Uncaught ReferenceError: drawChart is not defined"),
            "{problem}"
        );
        let missing = page(dir.path(), "", "");
        let problem = check_page(&missing, &[], None).unwrap_err();
        assert!(
            problem.contains("chart `c` has no drawn marks for [\"b\"]"),
            "{problem}"
        );
    }

    #[test]
    fn the_report_of_a_synthetic_run_renders_in_chromium() {
        let dir = tempfile::tempdir().unwrap();
        let results = ResultsDir::create(dir.path()).unwrap();
        let report = crate::export::fixture::report();
        results
            .write_exports(&report, &exporters(&SharedReport))
            .unwrap();
        assert_html_renders(dir.path());
        if chromium().is_some() {
            assert!(dir.path().join("report.png").exists());
        }
        if let Some(keep) = std::env::var_os("FAIRBENCH_KEEP_HTML") {
            for file in ["report.html", "report.png"] {
                let _ = std::fs::copy(dir.path().join(file), Path::new(&keep).join(file));
            }
        }
    }
}
