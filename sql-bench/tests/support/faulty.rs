//! A database of one test's own on the test PostgreSQL, set up with the functions and triggers
//! that make it misbehave; dropped (with any backend still in it) when the guard goes.

use super::{psql, with_database};

pub struct FaultyDatabase {
    admin_url: String,
    name: &'static str,
    pub url: String,
}

impl FaultyDatabase {
    pub fn new(admin_url: &str, name: &'static str, setup: &str) -> FaultyDatabase {
        psql(
            admin_url,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        );
        psql(admin_url, &format!("CREATE DATABASE {name}"));
        let url = with_database(admin_url, name);
        psql(&url, setup);
        FaultyDatabase {
            admin_url: admin_url.to_owned(),
            name,
            url,
        }
    }
}

impl Drop for FaultyDatabase {
    fn drop(&mut self) {
        psql(
            &self.admin_url,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}
