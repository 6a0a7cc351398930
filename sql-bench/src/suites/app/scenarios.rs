//! The nine application-shaped scenarios of seeds 003/004 (the bulk insert split into a fill
//! from empty and an append) and what each asks through the data layer; the answer each must
//! give is the oracle's.

use super::answer::{Answer, Tally};
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
pub const RANGE_BOUND: f64 = VALUE_MAX * 0.9;

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

/// What each scenario asks for, drawn from the seed (see the oracle).
#[derive(Debug, Clone)]
pub struct Params {
    pub point_ids: Vec<String>,
    pub inspection: String,
    pub range_system: String,
    pub deep_page: u64,
}

/// The deep page's number: page 200 at the seed's 250,000 rows, scaled with the collection.
pub fn deep_page(rows: u64) -> u64 {
    (DEEP_PAGE_AT_SEED_SIZE * rows / SEED_ROWS).max(2)
}

/// Whether the order of a scenario's answer is part of the answer.
pub fn sorts(scenario: Scenario) -> bool {
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

/// One iteration of a read scenario, through the data layer: every returned record is
/// deserialized and folded into the answer as it arrives, and none is kept.
pub async fn run(
    scenario: Scenario,
    layer: &mut DataLayer<'_>,
    params: &Params,
) -> Result<Answer, LayerError> {
    let mut tally = Tally::new(sorts(scenario));
    let mut each = |record: Record| tally.add(record.digest());
    let page = |number: u64| Page {
        number,
        size: PAGE_SIZE,
    };
    match scenario {
        Scenario::Fill | Scenario::Append => unreachable!("writes are not read scenarios"),
        Scenario::PointRead => {
            for id in &params.point_ids {
                if let Some(record) = layer.get(id).await? {
                    each(record);
                }
            }
        }
        Scenario::Inspection => {
            let filter = Filter::equals("_inspection_id", text(&params.inspection));
            layer.list(vec![filter], None, None, &mut each).await?;
        }
        Scenario::FirstPage => {
            layer
                .list(vec![], Some(newest_first()), Some(page(1)), &mut each)
                .await?;
        }
        Scenario::DeepPage => {
            let deep = page(params.deep_page);
            layer
                .list(vec![], Some(newest_first()), Some(deep), &mut each)
                .await?;
        }
        Scenario::FlagScan => {
            let filter = Filter::equals("approved", Value::Bool(false));
            layer.list(vec![filter], None, None, &mut each).await?;
        }
        Scenario::RangeScan => {
            let filters = vec![
                Filter::equals("_system_id", text(&params.range_system)),
                Filter::greater_than("value", RANGE_BOUND),
            ];
            layer.list(filters, None, None, &mut each).await?;
        }
        Scenario::Count => return Ok(Answer::count(layer.count(vec![]).await?)),
        Scenario::LoadAll => layer.list(vec![], None, None, &mut each).await?,
    }
    Ok(tally.answer())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_by_key_and_refuse_unknown_names() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::parse(scenario.key()).unwrap(), scenario);
        }
        let error = Scenario::parse("delete-all").unwrap_err();
        assert!(error.contains("unknown scenario `delete-all`") && error.contains("point-read"));
    }

    #[test]
    fn the_deep_page_scales_with_the_collection() {
        assert_eq!(deep_page(250_000), 200);
        assert_eq!(deep_page(3_500_000), 2_800);
        assert_eq!(deep_page(5_000), 4);
        assert_eq!(deep_page(10), 2);
    }
}
