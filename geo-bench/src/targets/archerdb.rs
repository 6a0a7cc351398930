//! ArcherDB, the subject of seed 002, has no Rust client: its wire protocol (a VSR client
//! session with checksummed message headers and batched 128-byte geo events) is not
//! implemented here, and nothing stands in for it. A target speaking that protocol belongs in
//! this file: it implements [`super::Target`] (durability from the replica's own status: the
//! WAL is O_DIRECT + O_DSYNC, so `durable` is true) and [`super::GeoSession`] (`insert` = one
//! request carrying the whole batch, `query` = UUID lookup, radius and polygon queries), and
//! [`open`] then returns it instead of the refusal below.

use common::options::TargetSpec;

use super::{Target, TargetError};

/// Refuses `archerdb://…` with the reason, so a user asking for it learns why at once.
pub fn open(spec: &TargetSpec) -> Result<Box<dyn Target>, TargetError> {
    Err(TargetError::Url {
        url: spec.url_redacted(),
        message: "ArcherDB has no Rust client and geo-bench does not speak its protocol yet \
                  (see geo-bench/src/targets/archerdb.rs for what a target needs)"
            .into(),
    })
}
