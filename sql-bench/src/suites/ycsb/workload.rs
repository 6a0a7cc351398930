//! A YCSB workload as a TOML file: operation proportions, request distribution and its
//! parameters, record shape and count, scan lengths, connections and target rate. YCSB's six
//! core workloads are shipped as such files (`workloads/workloada.toml` …). A file with an
//! unknown key, a value out of range or proportions that do not sum to 1 is refused with one
//! line naming the key.

use std::path::Path;

use toml::{Table, Value};

use crate::session::ycsb::op::{Request, ScanLength, Shape};
use crate::session::ycsb::stats::Kind;

/// YCSB's core workloads, as shipped files.
pub const PRESETS: [(&str, &str); 6] = [
    ("a", include_str!("workloads/workloada.toml")),
    ("b", include_str!("workloads/workloadb.toml")),
    ("c", include_str!("workloads/workloadc.toml")),
    ("d", include_str!("workloads/workloadd.toml")),
    ("e", include_str!("workloads/workloade.toml")),
    ("f", include_str!("workloads/workloadf.toml")),
];

/// The most fields a record may have, and the longest field.
pub const MAX_FIELDS: u64 = 100;
pub const MAX_FIELD_LENGTH: u64 = 10_000;

/// One workload, as its file defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// `a` … `f` for the presets, else the file's stem.
    pub name: String,
    /// `preset a` or the file's path.
    pub source: String,
    pub description: String,
    /// In [`Kind::ALL`]'s order.
    pub proportions: [f64; 6],
    pub request: Request,
    /// YCSB's `operationcount`: only sizes zipfian's key space for inserts.
    pub operation_count: Option<u64>,
    pub records: Option<u64>,
    pub shape: Shape,
    pub scan: ScanLength,
    pub connections: Option<u32>,
    pub target_rate: Option<f64>,
}

impl Workload {
    /// `a`…`f` (any case) or the path of a TOML file.
    pub fn load(spec: &str) -> Result<Workload, String> {
        let lower = spec.trim().to_ascii_lowercase();
        if let Some((name, text)) = PRESETS.iter().find(|(n, _)| *n == lower) {
            return Workload::parse(text, name, &format!("preset {name}"));
        }
        let path = Path::new(spec);
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!("--workload {spec}: not a preset (a to f) and not a readable file: {e}")
        })?;
        let name = path
            .file_stem()
            .map_or_else(|| spec.to_owned(), |s| s.to_string_lossy().into_owned());
        Workload::parse(&text, &name, spec)
    }

    /// Parses and checks a workload file; every error is one line naming the key.
    pub fn parse(text: &str, name: &str, source: &str) -> Result<Workload, String> {
        let fail = |message: String| format!("workload file {source}: {message}");
        let table: Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            fail(format!(
                "not TOML{at}: {}",
                e.message().trim().replace('\n', "; ")
            ))
        })?;
        let file = File { table: &table };
        file.known(
            "",
            &[
                "description",
                "proportions",
                "request",
                "records",
                "scan",
                "run",
            ],
        )
        .map_err(fail)?;
        let proportions = file.proportions().map_err(fail)?;
        let request = file.request().map_err(fail)?;
        let shape = file.shape().map_err(fail)?;
        let scan = file.scan().map_err(fail)?;
        let run = file
            .section("run", &["connections", "target_rate"])
            .map_err(fail)?;
        let connections = int(&run, "run.connections", 1, 4096)
            .map_err(fail)?
            .map(|n| n as u32);
        let target_rate = float(&run, "run.target_rate").map_err(fail)?;
        if let Some(rate) = target_rate
            && rate <= 0.0
        {
            return Err(fail(format!(
                "`run.target_rate` is {rate}; it must be more than 0 operations per second"
            )));
        }
        Ok(Workload {
            name: name.to_owned(),
            source: source.to_owned(),
            description: string(file.table, "description")
                .map_err(fail)?
                .unwrap_or_default(),
            proportions,
            request,
            operation_count: int(
                &file.section("request", &[]).unwrap_or_default(),
                "request.operation_count",
                1,
                u64::MAX,
            )
            .map_err(fail)?,
            records: int(
                &file.section("records", &[]).unwrap_or_default(),
                "records.count",
                1,
                u64::MAX >> 20,
            )
            .map_err(fail)?,
            shape,
            scan,
            connections,
            target_rate,
        })
    }

    pub fn proportion(&self, kind: Kind) -> f64 {
        self.proportions[kind.index()]
    }

    /// The kinds this workload runs.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        Kind::ALL.into_iter().filter(|k| self.proportion(*k) > 0.0)
    }

    /// Cumulative proportions, the last exactly 1.
    pub fn thresholds(&self) -> [f64; 6] {
        let mut thresholds = [0.0; 6];
        let mut sum = 0.0;
        for (t, p) in thresholds.iter_mut().zip(self.proportions) {
            sum += p;
            *t = sum;
        }
        // The last kind that runs ends at exactly 1, whatever the rounding of the sum.
        let top = Kind::ALL
            .iter()
            .rposition(|k| self.proportion(*k) > 0.0)
            .unwrap_or(5);
        for t in &mut thresholds[top..] {
            *t = 1.0;
        }
        thresholds
    }

    /// The scrambled Zipfian's highest key number: CoreWorkload's `insertstart + insertcount +
    /// expectednewkeys`, with expected new keys = operation count × insert share × 2.
    pub fn zipfian_max(&self, records: u64) -> u64 {
        let operations = self.operation_count.unwrap_or(records) as f64;
        let expected = (operations * self.proportion(Kind::Insert) * 2.0) as u64;
        records + expected
    }

    /// `uniform/zipfian/latest/hotspot(0.2, 0.8)`, for titles.
    pub fn distribution(&self) -> String {
        match self.request {
            Request::Hotspot {
                data_fraction,
                operation_fraction,
            } => format!(
                "hotspot ({data_fraction} of the keys get {operation_fraction} of the requests)"
            ),
            other => other.word().to_owned(),
        }
    }
}

/// The file as read, with the checks every section shares.
struct File<'a> {
    table: &'a Table,
}

impl File<'_> {
    /// Fails on the first key of `path` that is not one of `known`.
    fn known(&self, path: &str, known: &[&str]) -> Result<(), String> {
        let table = if path.is_empty() {
            self.table
        } else {
            match self.table.get(path) {
                Some(Value::Table(t)) => t,
                Some(other) => {
                    return Err(format!(
                        "`{path}` is a {}, not a table ([{path}])",
                        other.type_str()
                    ));
                }
                None => return Ok(()),
            }
        };
        for key in table.keys() {
            if !known.contains(&key.as_str()) {
                let full = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                return Err(format!(
                    "unknown key `{full}` (known here: {})",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The table `[name]`, its keys checked; empty when absent.
    fn section(&self, name: &str, known: &[&str]) -> Result<Table, String> {
        if !known.is_empty() {
            self.known(name, known)?;
        }
        Ok(match self.table.get(name) {
            Some(Value::Table(t)) => t.clone(),
            _ => Table::new(),
        })
    }

    fn proportions(&self) -> Result<[f64; 6], String> {
        let words: Vec<&str> = Kind::ALL.iter().map(|k| k.word()).collect();
        let section = self.section("proportions", &words)?;
        let mut proportions = [0.0; 6];
        for kind in Kind::ALL {
            let key = format!("proportions.{}", kind.word());
            if let Some(p) = float(&section, &key)? {
                proportions[kind.index()] = p;
            }
        }
        // A negative proportion is named before one above 1 (it is the likelier slip).
        let out_of_range = |bad: fn(f64) -> bool| {
            Kind::ALL
                .iter()
                .find(|k| bad(proportions[k.index()]))
                .map(|k| {
                    let p = proportions[k.index()];
                    format!(
                        "`proportions.{}` is {p}; a proportion is from 0 to 1",
                        k.word()
                    )
                })
        };
        if let Some(error) = out_of_range(|p| p < 0.0).or_else(|| out_of_range(|p| p > 1.0)) {
            return Err(error);
        }
        let sum: f64 = proportions.iter().sum();
        if (sum - 1.0).abs() > 1e-6 {
            return Err(format!(
                "`proportions` sum to {}, not 1 ({})",
                (sum * 1e9).round() / 1e9,
                Kind::ALL
                    .iter()
                    .filter(|k| proportions[k.index()] > 0.0)
                    .map(|k| format!("{} {}", k.word(), proportions[k.index()]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(proportions)
    }

    fn request(&self) -> Result<Request, String> {
        let section = self.section(
            "request",
            &[
                "distribution",
                "hotspot_data_fraction",
                "hotspot_operation_fraction",
                "operation_count",
            ],
        )?;
        let word = string(&section, "request.distribution")?.unwrap_or_else(|| "uniform".into());
        let hotspot_keys = ["hotspot_data_fraction", "hotspot_operation_fraction"];
        if word != "hotspot"
            && let Some(key) = hotspot_keys.iter().find(|k| section.contains_key(**k))
        {
            return Err(format!(
                "`request.{key}` applies only to distribution = \"hotspot\" (this is \"{word}\")"
            ));
        }
        Ok(match word.as_str() {
            "uniform" => Request::Uniform,
            "zipfian" => Request::Zipfian,
            "latest" => Request::Latest,
            "hotspot" => {
                let data = float(&section, "request.hotspot_data_fraction")?.unwrap_or(0.2);
                let ops = float(&section, "request.hotspot_operation_fraction")?.unwrap_or(0.8);
                if !(data > 0.0 && data < 1.0) {
                    return Err(format!(
                        "`request.hotspot_data_fraction` is {data}; it must lie between 0 and 1, both excluded"
                    ));
                }
                if !(0.0..=1.0).contains(&ops) {
                    return Err(format!(
                        "`request.hotspot_operation_fraction` is {ops}; it must be from 0 to 1"
                    ));
                }
                Request::Hotspot {
                    data_fraction: data,
                    operation_fraction: ops,
                }
            }
            other => {
                return Err(format!(
                    "`request.distribution` is \"{other}\"; use uniform, zipfian, latest or hotspot"
                ));
            }
        })
    }

    fn shape(&self) -> Result<Shape, String> {
        let section = self.section("records", &["count", "fields", "field_length"])?;
        Ok(Shape {
            fields: int(&section, "records.fields", 1, MAX_FIELDS)?.unwrap_or(10) as usize,
            field_length: int(&section, "records.field_length", 1, MAX_FIELD_LENGTH)?.unwrap_or(100)
                as usize,
        })
    }

    fn scan(&self) -> Result<ScanLength, String> {
        let section = self.section("scan", &["min_length", "max_length", "length_distribution"])?;
        let min = int(&section, "scan.min_length", 1, 100_000)?.unwrap_or(1);
        let max = int(&section, "scan.max_length", 1, 100_000)?.unwrap_or(1000);
        if max < min {
            return Err(format!(
                "`scan.max_length` is {max}, less than `scan.min_length` {min}"
            ));
        }
        let zipfian = match string(&section, "scan.length_distribution")?.as_deref() {
            None | Some("uniform") => false,
            Some("zipfian") => true,
            Some(other) => {
                return Err(format!(
                    "`scan.length_distribution` is \"{other}\"; use uniform or zipfian"
                ));
            }
        };
        Ok(ScanLength { min, max, zipfian })
    }
}

fn leaf<'a>(table: &'a Table, key: &str) -> Option<&'a Value> {
    table.get(key.rsplit('.').next().unwrap_or(key))
}

fn float(table: &Table, key: &str) -> Result<Option<f64>, String> {
    match leaf(table, key) {
        None => Ok(None),
        Some(Value::Float(f)) if f.is_finite() => Ok(Some(*f)),
        Some(Value::Integer(i)) => Ok(Some(*i as f64)),
        Some(other) => Err(format!("`{key}` is {other}; it must be a number")),
    }
}

fn int(table: &Table, key: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
    match leaf(table, key) {
        None => Ok(None),
        Some(Value::Integer(i)) if *i >= min as i64 && (*i as u64) <= max => Ok(Some(*i as u64)),
        Some(Value::Integer(i)) => Err(format!("`{key}` is {i}; it must be from {min} to {max}")),
        Some(other) => Err(format!("`{key}` is {other}; it must be a whole number")),
    }
}

fn string(table: &Table, key: &str) -> Result<Option<String>, String> {
    match leaf(table, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` is {other}; it must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presets_are_ycsbs_core_workloads() {
        let expect = [
            ("a", [0.5, 0.5, 0.0, 0.0, 0.0, 0.0], Request::Zipfian),
            ("b", [0.95, 0.05, 0.0, 0.0, 0.0, 0.0], Request::Zipfian),
            ("c", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], Request::Zipfian),
            ("d", [0.95, 0.0, 0.05, 0.0, 0.0, 0.0], Request::Latest),
            ("e", [0.0, 0.0, 0.05, 0.95, 0.0, 0.0], Request::Zipfian),
            ("f", [0.5, 0.0, 0.0, 0.0, 0.5, 0.0], Request::Zipfian),
        ];
        for (name, proportions, request) in expect {
            let w = Workload::load(&name.to_uppercase()).unwrap();
            assert_eq!(w.name, name);
            assert_eq!(w.proportions, proportions, "{name}");
            assert_eq!(w.request, request, "{name}");
            assert_eq!(
                w.shape,
                Shape {
                    fields: 10,
                    field_length: 100
                }
            );
            assert_eq!(w.thresholds()[5], 1.0);
            assert!(w.records.is_none() && w.connections.is_none());
        }
        let e = Workload::load("e").unwrap();
        assert_eq!((e.scan.min, e.scan.max, e.scan.zipfian), (1, 100, false));
        assert_eq!(e.zipfian_max(1000), 1100, "YCSB: 1000 + 1000 × 0.05 × 2");
        assert_eq!(Workload::load("a").unwrap().zipfian_max(1000), 1000);
    }

    fn refused(text: &str) -> String {
        let error = Workload::parse(text, "w", "w.toml").unwrap_err();
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(error.starts_with("workload file w.toml: "), "{error}");
        error
    }

    #[test]
    fn bad_files_are_refused_with_one_line_naming_the_key() {
        let unknown = refused("[proportions]\nread = 0.5\nreed = 0.5\n");
        assert!(
            unknown.contains("unknown key `proportions.reed`"),
            "{unknown}"
        );
        let top = refused("readproportion = 1\n");
        assert!(top.contains("unknown key `readproportion`"), "{top}");
        // A negative proportion is named before one above 1, whatever the order in the file.
        let negative = refused("[proportions]\nread = 1.5\nupdate = -0.5\n");
        assert!(
            negative.contains("`proportions.update` is -0.5"),
            "{negative}"
        );
        let negative = refused("[proportions]\nupdate = -0.5\nread = 1.5\n");
        assert!(
            negative.contains("a proportion is from 0 to 1"),
            "{negative}"
        );
        let sum = refused("[proportions]\nread = 0.5\nupdate = 0.4\n");
        assert!(sum.contains("`proportions` sum to 0.9"), "{sum}");
        let dist = refused("[proportions]\nread = 1\n[request]\ndistribution = \"zipf\"\n");
        assert!(
            dist.contains("`request.distribution` is \"zipf\""),
            "{dist}"
        );
        let hot = refused("[proportions]\nread = 1\n[request]\nhotspot_data_fraction = 0.1\n");
        assert!(
            hot.contains("`request.hotspot_data_fraction` applies only"),
            "{hot}"
        );
        let fields = refused("[proportions]\nread = 1\n[records]\nfields = 0\n");
        assert!(fields.contains("`records.fields` is 0"), "{fields}");
        let scan = refused("[proportions]\nscan = 1\n[scan]\nmin_length = 10\nmax_length = 5\n");
        assert!(scan.contains("`scan.max_length` is 5"), "{scan}");
        let syntax = refused("[proportions\nread = 1\n");
        assert!(syntax.contains("not TOML (line 1)"), "{syntax}");
        let kind = refused("[proportions]\nread = \"all\"\n");
        assert!(kind.contains("must be a number"), "{kind}");
    }

    #[test]
    fn a_file_sets_everything_the_flags_do_not() {
        let text = "description = \"mine\"\n[proportions]\nread = 0.7\nupdate = 0.2\ndelete = 0.05\ninsert = 0.05\n\
                    [request]\ndistribution = \"hotspot\"\nhotspot_data_fraction = 0.1\n\
                    [records]\ncount = 5000\nfields = 4\nfield_length = 20\n\
                    [run]\nconnections = 8\ntarget_rate = 500.0\n";
        let w = Workload::parse(text, "mine", "mine.toml").unwrap();
        assert_eq!(w.records, Some(5000));
        assert_eq!(
            w.shape,
            Shape {
                fields: 4,
                field_length: 20
            }
        );
        assert_eq!(w.connections, Some(8));
        assert_eq!(w.target_rate, Some(500.0));
        assert_eq!(
            w.request,
            Request::Hotspot {
                data_fraction: 0.1,
                operation_fraction: 0.8
            }
        );
        assert_eq!(w.kinds().count(), 4);
        assert!((w.thresholds()[Kind::Delete.index()] - 1.0).abs() < 1e-12);
    }
}
