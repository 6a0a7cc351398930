//! fairbench never touches what it did not make. Every table, collection or database it creates
//! carries a marker (a table comment, a marker row or document), and before it creates, fills or
//! drops anything an engine reads the marker back: an object of the same name without it is
//! refused as foreign, and left as it is. Each engine says how it reads its marker
//! ([`Marked::ownership`]); the refusal is made here, once.

use common::pool::BoxFuture;

use super::{Identified, TargetError};

pub trait Marked: Identified + Send {
    /// `None` when fairbench's object `name` (its logical name) does not exist in the engine;
    /// else whether it carries fairbench's marker.
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>>;

    /// What the engine calls the object `name` in a refusal (`relation fairbench.crud_read`).
    fn object(&self, name: &str) -> String;

    /// Fails with [`TargetError::Foreign`] when `name` exists without fairbench's marker.
    fn ensure_ours_or_absent<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            match self.ownership(name).await? {
                Some(false) => Err(self.identity().foreign(self.object(name))),
                _ => Ok(()),
            }
        })
    }
}
