//! The app suite's control path of an engine: its collection (created with exactly the declared
//! indexes, inspected from the engine's own catalog, dropped) and the document sessions its
//! requests run on. Each engine implements it in its own `docs.rs`, beside its document session.

use common::pool::BoxFuture;

use super::{Marked, TargetError};
use crate::query::{Collection, CollectionState, DocSession};

pub trait DocTarget: Marked {
    /// Fails with [`TargetError::Foreign`] when the collection's table exists without
    /// fairbench's marker.
    fn check_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        self.ensure_ours_or_absent(collection.name)
    }

    /// (Re)creates the collection's table, marked as fairbench's, with its primary key and
    /// exactly the declared secondary indexes, before any row is written.
    fn create_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>>;

    /// The collection's exact row count and every index, read from the engine's own catalog.
    fn inspect_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<CollectionState, TargetError>>;

    /// Drops fairbench's own collection table.
    fn drop_collection<'a>(
        &'a mut self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        self.drop_own(collection.name)
    }

    /// Opens a session for the collection's document requests (a connection of its own).
    fn open_doc_session<'a>(
        &'a self,
        collection: &'a Collection,
    ) -> BoxFuture<'a, Result<Box<dyn DocSession>, TargetError>>;
}
