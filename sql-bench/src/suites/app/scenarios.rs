//! The nine application-shaped scenarios of seeds 003/004 (the bulk insert split into a fill
//! from empty and an append), what each asks through the data layer, and the exact answer
//! each must give, computed from the generated records.

use std::collections::HashSet;

use common::data::{Checksum, rng};
use rand::RngExt;

use super::layer::{DataLayer, LayerError, Page};
use super::record::{Record, VALUE_MAX};
use crate::query::{Filter, Sort, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    Fill,
    Append,
    PointRead,
    Inspection,
    FirstPage,
    DeepPage,
    FlagScan,
    RangeScan,
    Count,
    LoadAll,
}

/// Sequential primary-key lookups per point-read iteration.
pub const POINT_READS: usize = 200;
/// Rows per page.
pub const PAGE_SIZE: u64 = 50;
/// The deep page at the seed's 250,000 rows; smaller collections scale it down.
const DEEP_PAGE_AT_SEED_SIZE: u64 = 200;
const SEED_ROWS: u64 = 250_000;
/// The range scan keeps the top tenth of the measured values.
const RANGE_BOUND: f64 = VALUE_MAX * 0.9;

impl Scenario {
    pub const ALL: [Scenario; 10] = [
        Scenario::Fill,
        Scenario::Append,
        Scenario::PointRead,
        Scenario::Inspection,
        Scenario::FirstPage,
        Scenario::DeepPage,
        Scenario::FlagScan,
        Scenario::RangeScan,
        Scenario::Count,
        Scenario::LoadAll,
    ];

    /// The name on the command line and in results.json.
    pub fn key(self) -> &'static str {
        match self {
            Scenario::Fill => "fill",
            Scenario::Append => "append",
            Scenario::PointRead => "point-read",
            Scenario::Inspection => "inspection",
            Scenario::FirstPage => "first-page",
            Scenario::DeepPage => "deep-page",
            Scenario::FlagScan => "flag-scan",
            Scenario::RangeScan => "range-scan",
            Scenario::Count => "count",
            Scenario::LoadAll => "load-all",
        }
    }

    /// The row title in reports, as in seed 003.
    pub fn title(self) -> &'static str {
        match self {
            Scenario::Fill => "Bulk insert, fill from empty",
            Scenario::Append => "Bulk insert, append onto a populated collection",
            Scenario::PointRead => "Point read by identifier, 200 requests",
            Scenario::Inspection => "All records of one inspection",
            Scenario::FirstPage => "First sorted page, 50 rows",
            Scenario::DeepPage => "Deep page of the sorted listing",
            Scenario::FlagScan => "Filtered scan on an unindexed flag",
            Scenario::RangeScan => "Range scan on an unindexed number",
            Scenario::Count => "Exact count of the whole collection",
            Scenario::LoadAll => "Load the whole collection",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(self, Scenario::Fill | Scenario::Append)
    }

    pub fn parse(text: &str) -> Result<Scenario, String> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.key() == text.trim())
            .ok_or_else(|| {
                let keys: Vec<&str> = Scenario::ALL.iter().map(|s| s.key()).collect();
                format!(
                    "unknown scenario `{text}`; the app scenarios are {}",
                    keys.join(", ")
                )
            })
    }
}

/// What each scenario asks for, chosen from the generated data with the seed.
#[derive(Debug, Clone)]
pub struct Params {
    pub point_ids: Vec<String>,
    pub inspection: String,
    pub range_system: String,
    pub deep_page: u64,
}

impl Params {
    pub fn choose(records: &[Record], seed: u64) -> Params {
        let visible: Vec<&Record> = records.iter().filter(|r| r.visible()).collect();
        let mut rng = rng(seed, 20);
        let point_ids = (0..POINT_READS)
            .map(|_| visible[rng.random_range(0..visible.len())].id.clone())
            .collect();
        let anchor = visible[rng.random_range(0..visible.len())];
        Params {
            point_ids,
            inspection: anchor.inspection_id.clone(),
            range_system: anchor.system_id.clone(),
            deep_page: deep_page(records.len() as u64),
        }
    }
}

/// The deep page's number: page 200 at the seed's 250,000 rows, scaled with the collection.
fn deep_page(rows: u64) -> u64 {
    (DEEP_PAGE_AT_SEED_SIZE * rows / SEED_ROWS).max(2)
}

/// What a scenario returned: how many rows, and a digest of their ids (in the returned order
/// where the scenario sorts, else in id order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub rows: u64,
    pub digest: u64,
}

impl Answer {
    fn of(records: &[&Record], ordered: bool) -> Answer {
        let mut ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        if !ordered {
            ids.sort_unstable();
        }
        Answer {
            rows: ids.len() as u64,
            digest: digest(&ids),
        }
    }

    fn count(rows: u64) -> Answer {
        Answer { rows, digest: rows }
    }

    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }
}

fn digest(ids: &[&str]) -> u64 {
    let mut checksum = Checksum::default();
    for id in ids {
        checksum.update(id.as_bytes());
        checksum.update(b"\n");
    }
    checksum.value()
}

/// What a read scenario got back from the data layer.
pub enum Outcome {
    Records(Vec<Record>),
    Count(u64),
}

impl Outcome {
    pub fn answer(&self, scenario: Scenario) -> Answer {
        match self {
            Outcome::Count(n) => Answer::count(*n),
            Outcome::Records(records) => {
                let refs: Vec<&Record> = records.iter().collect();
                Answer::of(&refs, sorts(scenario))
            }
        }
    }
}

/// Whether the order of a scenario's answer is part of the answer.
fn sorts(scenario: Scenario) -> bool {
    matches!(
        scenario,
        Scenario::PointRead | Scenario::FirstPage | Scenario::DeepPage
    )
}

fn newest_first() -> Sort {
    Sort {
        field: "_created_at",
        descending: true,
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.to_owned())
}

/// One iteration of a read scenario, through the data layer.
pub async fn run(
    scenario: Scenario,
    layer: &mut DataLayer<'_>,
    params: &Params,
) -> Result<Outcome, LayerError> {
    let records = match scenario {
        Scenario::Fill | Scenario::Append => unreachable!("writes are not read scenarios"),
        Scenario::PointRead => {
            let mut found = Vec::with_capacity(params.point_ids.len());
            for id in &params.point_ids {
                found.extend(layer.get(id).await?);
            }
            found
        }
        Scenario::Inspection => {
            let filter = Filter::equals("_inspection_id", text(&params.inspection));
            layer.list(vec![filter], None, None).await?
        }
        Scenario::FirstPage => {
            let page = Page {
                number: 1,
                size: PAGE_SIZE,
            };
            layer.list(vec![], Some(newest_first()), Some(page)).await?
        }
        Scenario::DeepPage => {
            let page = Page {
                number: params.deep_page,
                size: PAGE_SIZE,
            };
            layer.list(vec![], Some(newest_first()), Some(page)).await?
        }
        Scenario::FlagScan => {
            let filter = Filter::equals("approved", Value::Bool(false));
            layer.list(vec![filter], None, None).await?
        }
        Scenario::RangeScan => {
            let filters = vec![
                Filter::equals("_system_id", text(&params.range_system)),
                Filter::greater_than("value", RANGE_BOUND),
            ];
            layer.list(filters, None, None).await?
        }
        Scenario::Count => return Ok(Outcome::Count(layer.count(vec![]).await?)),
        Scenario::LoadAll => layer.list(vec![], None, None).await?,
    };
    Ok(Outcome::Records(records))
}

/// The exact answer of a read scenario over `records` (everything stored), computed here.
pub fn expected(scenario: Scenario, records: &[Record], params: &Params) -> Answer {
    let visible: Vec<&Record> = records.iter().filter(|r| r.visible()).collect();
    let matching = |keep: &dyn Fn(&Record) -> bool| -> Vec<&Record> {
        visible.iter().copied().filter(|r| keep(r)).collect()
    };
    let sorted_page = |number: u64| -> Vec<&Record> {
        let mut all = visible.clone();
        all.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        all.into_iter()
            .skip(((number - 1) * PAGE_SIZE) as usize)
            .take(PAGE_SIZE as usize)
            .collect()
    };
    let found = match scenario {
        Scenario::Fill | Scenario::Append => unreachable!("writes are not read scenarios"),
        Scenario::PointRead => {
            let visible_ids: HashSet<&str> = visible.iter().map(|r| r.id.as_str()).collect();
            let by_id: std::collections::HashMap<&str, &Record> =
                visible.iter().map(|r| (r.id.as_str(), *r)).collect();
            params
                .point_ids
                .iter()
                .filter(|id| visible_ids.contains(id.as_str()))
                .map(|id| by_id[id.as_str()])
                .collect()
        }
        Scenario::Inspection => matching(&|r| r.inspection_id == params.inspection),
        Scenario::FirstPage => sorted_page(1),
        Scenario::DeepPage => sorted_page(params.deep_page),
        Scenario::FlagScan => matching(&|r| !r.approved),
        Scenario::RangeScan => {
            matching(&|r| r.system_id == params.range_system && r.value > RANGE_BOUND)
        }
        Scenario::Count => return Answer::count(visible.len() as u64),
        Scenario::LoadAll => visible,
    };
    Answer::of(&found, sorts(scenario))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::app::record::generate;

    #[test]
    fn scenarios_parse_by_key_and_refuse_unknown_names() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::parse(scenario.key()).unwrap(), scenario);
        }
        let error = Scenario::parse("delete-all").unwrap_err();
        assert!(error.contains("unknown scenario `delete-all`") && error.contains("point-read"));
    }

    #[test]
    fn the_oracle_gives_the_seed_shapes_and_scales_the_deep_page() {
        assert_eq!(deep_page(250_000), 200);
        assert_eq!(deep_page(5_000), 4);
        assert_eq!(deep_page(10), 2);
        let data = generate(42, 1, 0, 50_000, 50_000);
        let params = Params::choose(&data.records, 42);
        assert_eq!(params.deep_page, 40);
        let rows = |s| expected(s, &data.records, &params).rows;
        assert_eq!(rows(Scenario::PointRead), 200);
        assert!((400..600).contains(&rows(Scenario::Inspection)));
        assert_eq!(rows(Scenario::FirstPage), 50);
        assert_eq!(rows(Scenario::DeepPage), 50);
        assert!((1_800..2_200).contains(&rows(Scenario::FlagScan)));
        assert!((120..220).contains(&rows(Scenario::RangeScan)));
        assert_eq!(rows(Scenario::Count), rows(Scenario::LoadAll));
    }

    #[test]
    fn order_matters_only_where_the_scenario_sorts() {
        let data = generate(3, 1, 0, 10, 10);
        let forward: Vec<&Record> = data.records.iter().collect();
        let backward: Vec<&Record> = data.records.iter().rev().collect();
        assert_eq!(Answer::of(&forward, false), Answer::of(&backward, false));
        assert_ne!(Answer::of(&forward, true), Answer::of(&backward, true));
    }
}
