//! A database of its own on a test PostgreSQL, for tests that make the server misbehave
//! (triggers that sleep, lose or change rows) without touching what other tests use; and a
//! role of its own owning one, for tests of a password that must never be written.

use super::{psql, with_database};

/// A database created afresh (dropped first if a killed test left it) with `setup` run in it;
/// dropped again, with whatever still runs there, when the guard goes.
pub struct Scratch {
    admin: String,
    name: &'static str,
    pub url: String,
}

impl Scratch {
    pub fn new(admin: &str, name: &'static str, setup: &str) -> Scratch {
        drop_database(admin, name);
        psql(admin, &format!("CREATE DATABASE {name}"));
        let url = with_database(admin, name);
        psql(&url, setup);
        Scratch {
            admin: admin.to_owned(),
            name,
            url,
        }
    }

    pub fn name(&self) -> &str {
        self.name
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        drop_database(&self.admin, self.name);
    }
}

fn drop_database(admin: &str, name: &str) {
    psql(
        admin,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    );
}

/// SQL for an event trigger that runs `body` (PL/pgSQL, with `obj` the created object's
/// identity, `fairbench.crud_write`) after every CREATE of `tag` (`CREATE TABLE`): how a test
/// attaches a row trigger to a table the tool creates itself.
pub fn on_create(tag: &str, body: &str) -> String {
    format!(
        "CREATE FUNCTION on_create() RETURNS event_trigger LANGUAGE plpgsql AS $$
         DECLARE r record;
         BEGIN
           FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = '{tag}' LOOP
             DECLARE obj text := r.object_identity; BEGIN {body} END;
           END LOOP;
         END $$;
         CREATE EVENT TRIGGER on_create ON ddl_command_end EXECUTE FUNCTION on_create();"
    )
}

/// A role `name` that logs in with `password`, owning a database `name`, on the PostgreSQL at
/// `admin` (made once per server: they are kept, and found by the next call); the URL of that
/// database as that role, without the password, with `admin`'s parameters
/// (`postgres://NAME@HOST:PORT/NAME?…`).
pub fn role_with_database(admin: &str, name: &str, password: &str) -> String {
    psql(
        admin,
        &format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}') THEN
                 CREATE ROLE {name} LOGIN PASSWORD '{password}';
               END IF;
             END $$"
        ),
    );
    let exists = format!("SELECT count(*) FROM pg_database WHERE datname = '{name}'");
    if psql(admin, &exists) == "0" {
        psql(admin, &format!("CREATE DATABASE {name} OWNER {name}"));
    }
    let rest = admin.split_once('@').expect("a URL with a user").1;
    let (host, query) = rest.split_once('/').expect("a URL with a database");
    let query = query.split_once('?').map_or("", |(_, q)| q);
    format!("postgres://{name}@{host}/{name}?{query}")
}
