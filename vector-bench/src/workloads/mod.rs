//! The sweep's axes: index variants (full precision, scalar, binary; [`crate::index`]) and
//! query families (unfiltered, filtered to 10% or 1% of the rows), each measured at every ef in
//! interleaved rounds. A workload never names a concrete system and sees a system only through
//! [`crate::session::Searchers`].

pub mod baseline;
pub mod groundtruth;
pub mod point;
pub mod sweep;

use serde::{Deserialize, Serialize};

use crate::dataset::{CATEGORY_1PCT, CATEGORY_10PCT};
use crate::index::Variant;

/// Which rows a query may return.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterMode {
    /// Every row.
    #[value(name = "none")]
    #[serde(rename = "none")]
    None,
    /// Rows of the category holding 10% of the rows.
    #[value(name = "10pct")]
    #[serde(rename = "10pct")]
    TenPercent,
    /// Rows of the category holding 1% of the rows.
    #[value(name = "1pct")]
    #[serde(rename = "1pct")]
    OnePercent,
}

impl FilterMode {
    pub fn category(self) -> Option<u8> {
        match self {
            FilterMode::None => None,
            FilterMode::TenPercent => Some(CATEGORY_10PCT),
            FilterMode::OnePercent => Some(CATEGORY_1PCT),
        }
    }

    /// As a workload name shows it: `` (none), `filter 10%`, `filter 1%`.
    pub fn label(self) -> &'static str {
        match self {
            FilterMode::None => "unfiltered",
            FilterMode::TenPercent => "filter 10%",
            FilterMode::OnePercent => "filter 1%",
        }
    }
}

/// One curve of the sweep: a variant and a query family at one k, measured at every ef.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Family {
    pub variant: Variant,
    pub filter: FilterMode,
    pub k: usize,
}

impl Family {
    /// `f32 · unfiltered · k 10`.
    pub fn label(&self) -> String {
        format!(
            "{} · {} · k {}",
            self.variant.as_str(),
            self.filter.label(),
            self.k
        )
    }

    /// The cell workload name of one ef point: `f32 · filter 10% · k 10 · ef 64`.
    pub fn workload(&self, ef: u64) -> String {
        format!("{} · ef {ef}", self.label())
    }

    /// The query family alone, across variants: `filter 10% · k 10` (a Pareto view's key).
    pub fn query_label(&self) -> String {
        query_label(self.filter, self.k)
    }
}

/// `filter 10% · k 10`.
pub fn query_label(filter: FilterMode, k: usize) -> String {
    format!("{} · k {k}", filter.label())
}

/// The workload name of the exact scan of a query family: `exact scan · filter 1% · k 10`.
pub fn exact_workload(filter: FilterMode, k: usize) -> String {
    format!("exact scan · {}", query_label(filter, k))
}
