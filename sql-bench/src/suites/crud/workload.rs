//! The CRUD workloads of seed 000 — `write Nc` (unique-key inserts), `read Nc` (point reads by
//! primary key over a small table) and `mixed Nc` (50/50): their names and how many
//! connections each uses. The operation each worker runs is [`crate::session::CrudOp`].

use std::fmt;

pub use crate::session::{Kind, MAX_CONNECTIONS, MAX_WINDOWS};

/// One workload: what each operation does, and over how many connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    pub kind: Kind,
    pub connections: u32,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}c", self.kind.word(), self.connections)
    }
}

impl Workload {
    /// Seed 000's four: `write 1c`, then write, read and mixed at `connections`.
    pub fn defaults(connections: u32) -> Vec<Workload> {
        vec![
            Workload {
                kind: Kind::Write,
                connections: 1,
            },
            Workload {
                kind: Kind::Write,
                connections,
            },
            Workload {
                kind: Kind::Read,
                connections,
            },
            Workload {
                kind: Kind::Mixed,
                connections,
            },
        ]
    }

    /// Parses `write-1c`, `read 16c`, `mixed-4c`, or a bare `read` (at `connections`).
    pub fn parse(text: &str, connections: u32) -> Result<Workload, String> {
        let normalized = text.trim().to_ascii_lowercase().replace(['-', '_'], " ");
        let mut words = normalized.split_whitespace();
        let kind = match words.next() {
            Some("write") => Kind::Write,
            Some("read") => Kind::Read,
            Some("mixed") => Kind::Mixed,
            _ => {
                return Err(format!(
                    "unknown workload `{text}`; the crud workloads are write-Nc, read-Nc and mixed-Nc (for example write-1c,read-16c)"
                ));
            }
        };
        let connections = match words.next() {
            None => connections,
            Some(count) => count
                .strip_suffix('c')
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| (1..=MAX_CONNECTIONS).contains(n))
                .ok_or_else(|| {
                    format!(
                        "workload `{text}`: `{count}` is not a connection count like 16c (1 to {MAX_CONNECTIONS})"
                    )
                })?,
        };
        if words.next().is_some() {
            return Err(format!("unknown workload `{text}`"));
        }
        Ok(Workload { kind, connections })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_are_named_by_their_connections() {
        let names: Vec<String> = Workload::defaults(16)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(names, ["write 1c", "write 16c", "read 16c", "mixed 16c"]);
        assert_eq!(
            Workload::parse("read-4c", 16).unwrap().to_string(),
            "read 4c"
        );
        assert_eq!(
            Workload::parse("Mixed 8c", 16).unwrap().to_string(),
            "mixed 8c"
        );
        assert_eq!(
            Workload::parse("write", 32).unwrap().to_string(),
            "write 32c"
        );
        for bad in [
            "delete-1c",
            "read-0c",
            "read-16",
            "read 16c extra",
            "",
            "read-99999c",
        ] {
            assert!(Workload::parse(bad, 16).is_err(), "{bad}");
        }
    }
}
