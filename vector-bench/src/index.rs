//! The index every target builds, the same on each: how it stores vectors (the variant) and
//! the parameters it is built with. Below targets and workloads, which both name it.

use serde::{Deserialize, Serialize};

use crate::dataset::Metric;

/// How the index stores vectors.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// Full-precision f32 vectors.
    F32,
    /// Scalar quantization to 8-bit integers (rescored with full vectors where offered).
    Int8,
    /// Binary quantization, one bit per dimension (rescored with full vectors where offered).
    Binary,
}

impl Variant {
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::F32 => "f32",
            Variant::Int8 => "int8",
            Variant::Binary => "binary",
        }
    }
}

/// The index every target builds, with the same parameters.
#[derive(Debug, Clone, Serialize)]
pub struct IndexSpec {
    pub namespace: String,
    pub variant: Variant,
    pub dims: usize,
    pub metric: Metric,
    pub m: usize,
    pub ef_construction: usize,
    pub rows: usize,
}

impl IndexSpec {
    /// The collection/table name of this variant (`fairbench_f32`).
    pub fn collection(&self) -> String {
        format!("{}_{}", self.namespace, self.variant.as_str())
    }
}
