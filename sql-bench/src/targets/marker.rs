//! fairbench never touches what it did not make. Every table, collection or database it creates
//! carries a marker (a table comment, a marker row or document), and before it creates, fills or
//! drops anything an engine reads the marker back: an object of the same name without it is
//! refused as foreign, and left as it is. Each engine says how it reads its marker
//! ([`Marked::ownership`]) and how it drops what carries it ([`Marked::drop_marked`]); the
//! refusal, and the check before every drop, are made here, once.

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

    /// Drops the object `name`, already read to carry fairbench's marker (and the marker with
    /// it, where the engine keeps it apart).
    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>>;

    /// Fails with [`TargetError::Foreign`] when `name` exists without fairbench's marker.
    fn ensure_ours_or_absent<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            match self.ownership(name).await? {
                Some(false) => Err(foreign(self, name)),
                _ => Ok(()),
            }
        })
    }

    /// Makes room for fairbench's object `name`, reading the marker once: refuses an object
    /// of that name without it ([`TargetError::Foreign`]) and drops one that carries it.
    fn make_room<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            match self.ownership(name).await? {
                Some(false) => Err(foreign(self, name)),
                Some(true) => self.drop_marked(name).await,
                None => Ok(()),
            }
        })
    }

    /// Drops fairbench's object `name` when it carries the marker; an object without it, or
    /// none, stays as it is.
    fn drop_own<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            if self.ownership(name).await? == Some(true) {
                self.drop_marked(name).await?;
            }
            Ok(())
        })
    }
}

/// The refusal of `name`, an object without fairbench's marker.
fn foreign<M: Marked + ?Sized>(engine: &M, name: &str) -> TargetError {
    engine.identity().foreign(engine.object(name))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use common::testing::block_on;

    use super::*;
    use crate::targets::Identity;

    /// The objects of an engine by name, each marked or not, and what was dropped.
    #[derive(Default)]
    struct Objects {
        identity: Identity,
        marked: BTreeMap<&'static str, bool>,
        dropped: Vec<String>,
    }

    common::identified!(Objects);

    impl Marked for Objects {
        fn ownership<'a>(
            &'a mut self,
            name: &'a str,
        ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
            Box::pin(async move { Ok(self.marked.get(name).copied()) })
        }

        fn object(&self, name: &str) -> String {
            format!("table {name}")
        }

        fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
            Box::pin(async move {
                self.dropped.push(name.to_owned());
                Ok(())
            })
        }
    }

    fn objects() -> Objects {
        Objects {
            identity: Identity {
                name: "engine".into(),
                ..Identity::default()
            },
            marked: BTreeMap::from([("ours", true), ("theirs", false)]),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn only_what_carries_the_marker_is_dropped() {
        let mut engine = objects();
        block_on(async {
            for name in ["theirs", "absent", "ours"] {
                engine.drop_own(name).await.unwrap();
            }
        });
        assert_eq!(engine.dropped, ["ours"]);
    }

    #[test]
    fn an_object_without_the_marker_is_refused_by_name() {
        let mut engine = objects();
        let (theirs, ours, absent) = block_on(async {
            (
                engine.ensure_ours_or_absent("theirs").await,
                engine.ensure_ours_or_absent("ours").await.is_ok(),
                engine.ensure_ours_or_absent("absent").await.is_ok(),
            )
        });
        let error = theirs.unwrap_err().to_string();
        assert!(
            error.contains("engine") && error.contains("table theirs"),
            "{error}"
        );
        assert!(ours && absent);
    }

    #[test]
    fn making_room_refuses_a_foreign_object_and_drops_only_fairbenchs() {
        let mut engine = objects();
        let (theirs, ours, absent) = block_on(async {
            (
                engine.make_room("theirs").await,
                engine.make_room("ours").await.is_ok(),
                engine.make_room("absent").await.is_ok(),
            )
        });
        let error = theirs.unwrap_err().to_string();
        assert!(error.contains("table theirs"), "{error}");
        assert!(ours && absent);
        assert_eq!(engine.dropped, ["ours"]);
    }
}
