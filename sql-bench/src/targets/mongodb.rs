//! MongoDB and servers speaking its wire protocol (FerretDB) through the official driver: one
//! client with one connection per worker, every write journaled (`w:1, j:true`). fairbench's
//! collections live in the `fairbench` database; a marker collection lists the ones it made.

use std::collections::BTreeMap;
use std::time::Duration;

use common::driver::OpError;
use common::options::TargetSpec;
use common::pool::{BoxFuture, Connector};
use common::results::Location;
use common::tls::{TlsSettings, Verify};
use mongodb::bson::{Bson, Document, doc};
use mongodb::error::{Error as MongoError, ErrorKind};
use mongodb::options::{
    Acknowledgment, ClientOptions, ServerAddress, Tls, TlsOptions, WriteConcern,
};
use mongodb::{Client, Collection as MongoCollection, Database};

mod docs;
mod ycsb;

use super::{
    Described, Description, Identity, KvTable, Marked, Reach, Target, TargetError, TlsState,
    is_local_host, op_error,
};
use crate::durability::Durability;
use crate::session::{KvSession, KvWorkers, async_workers};

/// fairbench's own database; nothing outside it is written.
const DATABASE: &str = "fairbench";
/// Lists (by `_id`) the collections fairbench created: its ownership marker.
const MARKER_COLLECTION: &str = "fairbench_objects";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The write concern and topology a configuration asks of a MongoDB deployment (seed 000's
/// table). C1–C4 map to `w:2`, `w:1` with an async member, `w:3` and `w:majority`, each
/// checked against the member count `replSetGetStatus` reports.
struct Requirement {
    write_concern: WriteConcern,
    members: usize,
}

fn requirement(durability: Durability) -> Requirement {
    let (w, members) = match durability {
        Durability::C0 => (Acknowledgment::Nodes(1), 1),
        Durability::C1 => (Acknowledgment::Nodes(2), 2),
        Durability::C2 => (Acknowledgment::Nodes(1), 2),
        Durability::C3 => (Acknowledgment::Nodes(3), 3),
        Durability::C4 => (Acknowledgment::Majority, 3),
    };
    Requirement {
        write_concern: WriteConcern::builder().w(w).journal(true).build(),
        members,
    }
}

fn describe_write_concern(concern: &WriteConcern) -> String {
    let w = match &concern.w {
        Some(Acknowledgment::Nodes(n)) => n.to_string(),
        Some(Acknowledgment::Majority) => "majority".to_owned(),
        Some(Acknowledgment::Custom(tag)) => tag.clone(),
        Some(_) | None => "default".to_owned(),
    };
    format!("w:{w}, j:{}", concern.journal.unwrap_or(false))
}

pub struct MongoTarget {
    identity: Identity,
    options: ClientOptions,
    client: Client,
    tls: TlsState,
}

/// Whether the connection is gone (as opposed to the server refusing one request).
fn is_lost(e: &MongoError) -> bool {
    matches!(
        *e.kind,
        ErrorKind::Io(_)
            | ErrorKind::ConnectionPoolCleared { .. }
            | ErrorKind::ServerSelection { .. }
            | ErrorKind::Shutdown
    )
}

/// The server stopped the request at its `maxTimeMS` (code 50, MaxTimeMSExpired).
fn max_time_expired(e: &MongoError) -> bool {
    const MAX_TIME_EXPIRED: i32 = 50;
    matches!(&*e.kind, ErrorKind::Command(command) if command.code == MAX_TIME_EXPIRED)
}

impl MongoTarget {
    /// `mongodb://[user:password@]host[:port][/authdb][?options]`.
    /// TLS: `tls=true` (or `sslmode=`), `tlsCAFile=` (or `cacert=`), read by common; a probe
    /// handshake first, so a certificate that does not verify fails at once in one line (the
    /// driver would wait out its server selection and flatten the reason into text).
    pub async fn open(spec: &TargetSpec, reach: &Reach) -> Result<Box<dyn Target>, TargetError> {
        let url_error = |message: String| TargetError::Url {
            url: spec.url_redacted(),
            message,
        };
        if spec.url.starts_with("mongodb+srv:") {
            return Err(url_error(
                "DNS seed lists (mongodb+srv) are not supported: name the host, mongodb://HOST:PORT".into(),
            ));
        }
        let settings = reach.tls(spec)?;
        let url = common::tls::strip_params(&reach.url(spec));
        let mut options = ClientOptions::parse(&url)
            .await
            .map_err(|e| url_error(common::redact::redact_text(&e.to_string())))?;
        // Direct TLS, as the driver connects.
        let tls = TlsState::probe(settings, &spec.url, Some(27017)).await?;
        options.tls = tls_options(&tls.settings)?;
        options.app_name = Some("fairbench".into());
        options.connect_timeout = Some(CONNECT_TIMEOUT);
        options.server_selection_timeout = Some(CONNECT_TIMEOUT);
        let identity = Identity::of(spec, "mongodb");
        let client =
            Client::with_options(options.clone()).map_err(|e| connect_error(&identity, &e))?;
        // The driver connects lazily: a ping makes an unreachable server fail here.
        client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .map_err(|e| connect_error(&identity, &e))?;
        Ok(Box::new(MongoTarget {
            identity,
            options,
            client,
            tls,
        }))
    }

    fn error(&self, e: impl std::fmt::Display) -> TargetError {
        self.identity.query_error(e)
    }

    /// Where the deployment runs: on this machine when every host the URL names is.
    fn location(&self) -> Location {
        let local = self.options.hosts.iter().all(|host| match host {
            ServerAddress::Tcp { host, .. } => is_local_host(host),
            _ => true,
        });
        if local {
            Location::Local
        } else {
            Location::Remote
        }
    }

    fn database(&self) -> Database {
        self.client.database(DATABASE)
    }

    async fn command(&self, db: &str, command: Document) -> Result<Document, TargetError> {
        self.client
            .database(db)
            .run_command(command)
            .await
            .map_err(|e| self.error(e))
    }

    /// Drops the collection when it is fairbench's, then (re)creates it, marked, empty.
    async fn recreate(&mut self, name: &str) -> Result<MongoCollection<Document>, TargetError> {
        self.ensure_ours_or_absent(name).await?;
        let db = self.database();
        let collection = db.collection::<Document>(name);
        collection.drop().await.map_err(|e| self.error(e))?;
        db.collection::<Document>(MARKER_COLLECTION)
            .update_one(
                doc! {"_id": name},
                doc! {"$set": {"created_by": "fairbench"}},
            )
            .upsert(true)
            .await
            .map_err(|e| self.error(e))?;
        db.create_collection(name)
            .await
            .map_err(|e| self.error(e))?;
        Ok(collection)
    }

    /// One client per session: one pooled connection, opened before any clock starts.
    fn session_options(&self) -> ClientOptions {
        let mut options = self.options.clone();
        options.max_pool_size = Some(1);
        options.min_pool_size = Some(1);
        options
    }
}

fn connect_error(identity: &Identity, e: &MongoError) -> TargetError {
    let text = e.to_string();
    let hint = if is_lost(e) {
        " — is the server running? (scripts/services start)"
    } else {
        ""
    };
    identity.connect_error(format!("{text}{hint}"))
}

/// The driver's TLS options for `settings`: its rustls checks the chain and the name, or
/// nothing (`tlsAllowInvalidCertificates`); the chain alone it cannot check.
fn tls_options(settings: &TlsSettings) -> Result<Option<Tls>, TargetError> {
    if !settings.uses_tls() {
        return Ok(Some(Tls::Disabled));
    }
    let verify = settings.verify();
    if verify == Verify::Chain {
        return Err(TargetError::Other(format!(
            "{}: the MongoDB driver cannot check a certificate's chain without its name \
             (verify-ca); use verify-full (tls=true) or --insecure-skip-verify",
            settings.host
        )));
    }
    let options = TlsOptions::builder()
        .ca_file_path(settings.ca_file.clone())
        .allow_invalid_certificates((verify == Verify::Nothing).then_some(true))
        .build();
    Ok(Some(Tls::Enabled(options)))
}

/// Opens a client with the options given and checks that it reaches the server.
async fn open_client(options: ClientOptions, identity: &Identity) -> Result<Client, TargetError> {
    let client = Client::with_options(options).map_err(|e| connect_error(identity, &e))?;
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .map_err(|e| connect_error(identity, &e))?;
    Ok(client)
}

/// A document's field as text, for the settings a server reports.
fn text_of(document: &Document, path: &[&str]) -> Option<String> {
    let (last, parents) = path.split_last()?;
    let mut current = document;
    for key in parents {
        current = current.get_document(key).ok()?;
    }
    current.get(last).map(|value| match value {
        Bson::String(s) => s.clone(),
        other => other.to_string(),
    })
}

impl MongoTarget {
    /// The server's own account of its topology, storage and journal, checked against `durability`.
    async fn durability_evidence(
        &self,
        durability: Durability,
        ferretdb: bool,
        settings: &mut BTreeMap<String, String>,
    ) -> Result<Vec<String>, TargetError> {
        let required = requirement(durability);
        settings.insert(
            "write_concern".into(),
            format!(
                "{} (sent with every write)",
                describe_write_concern(&required.write_concern)
            ),
        );
        let mut mismatches = Vec::new();
        let hello = self.command("admin", doc! {"hello": 1}).await?;
        let members = match hello.get_str("setName") {
            Ok(set) => {
                let status = self.command("admin", doc! {"replSetGetStatus": 1}).await?;
                let members = status.get_array("members").map_or(0, Vec::len);
                settings.insert("replica_set".into(), set.to_owned());
                members
            }
            Err(_) => {
                settings.insert("replica_set".into(), "none (standalone)".into());
                1
            }
        };
        settings.insert("replSetGetStatus.members".into(), members.to_string());
        if members != required.members {
            mismatches.push(format!(
                "{members} replica-set members (needs {}: {})",
                required.members,
                durability.section()
            ));
        }
        if ferretdb {
            settings.insert(
                "journal".into(),
                "not reported: FerretDB ignores the write concern and acknowledges when its backend commits"
                    .into(),
            );
            mismatches.push(
                "journal not reported (FerretDB ignores writeConcern; its backend's fsync setting cannot be read through the MongoDB protocol)".into(),
            );
            return Ok(mismatches);
        }
        let status = self.command("admin", doc! {"serverStatus": 1}).await?;
        let engine = text_of(&status, &["storageEngine", "name"]).unwrap_or_default();
        let persistent = text_of(&status, &["storageEngine", "persistent"]);
        settings.insert("storageEngine.name".into(), engine.clone());
        if let Some(p) = &persistent {
            settings.insert("storageEngine.persistent".into(), p.clone());
        }
        if persistent.as_deref() == Some("false") {
            mismatches.push(format!(
                "storage engine {engine} is not persistent (needs an on-disk engine with a journal)"
            ));
        }
        let options = self.command("admin", doc! {"getCmdLineOpts": 1}).await?;
        let journal = text_of(&options, &["parsed", "storage", "journal", "enabled"]);
        settings.insert(
            "storage.journal.enabled".into(),
            journal
                .clone()
                .unwrap_or_else(|| "not set (always on since MongoDB 6.1)".into()),
        );
        if journal.as_deref() == Some("false") {
            mismatches.push("storage.journal.enabled=false (j:true needs the journal)".into());
        }
        Ok(mismatches)
    }
}

impl Marked for MongoTarget {
    fn ownership<'a>(
        &'a mut self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, TargetError>> {
        Box::pin(async move {
            let db = self.database();
            let names = db
                .list_collection_names()
                .filter(doc! {"name": name})
                .await
                .map_err(|e| self.error(e))?;
            if names.is_empty() {
                return Ok(None);
            }
            let marked = db
                .collection::<Document>(MARKER_COLLECTION)
                .find_one(doc! {"_id": name})
                .await
                .map_err(|e| self.error(e))?
                .is_some();
            Ok(Some(marked))
        })
    }

    fn object(&self, name: &str) -> String {
        format!("collection {DATABASE}.{name}")
    }

    fn drop_marked<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let db = self.database();
            db.collection::<Document>(name)
                .drop()
                .await
                .map_err(|e| self.error(e))?;
            db.collection::<Document>(MARKER_COLLECTION)
                .delete_one(doc! {"_id": name})
                .await
                .map_err(|e| self.error(e))?;
            Ok(())
        })
    }
}

common::identified!(MongoTarget);

impl Target for MongoTarget {
    fn tls(&self) -> Option<TlsState> {
        Some(self.tls.clone())
    }

    fn describe(
        &mut self,
        durability: Durability,
    ) -> BoxFuture<'_, Result<Description, TargetError>> {
        Box::pin(async move {
            let build = self.command("admin", doc! {"buildInfo": 1}).await?;
            let wire = text_of(&build, &["version"]).unwrap_or_default();
            let ferret = text_of(&build, &["ferretdbVersion"]);
            let (kind, version) = match &ferret {
                Some(v) => (
                    "ferretdb",
                    format!("FerretDB {v}, presenting MongoDB {wire}"),
                ),
                None => ("mongodb", format!("MongoDB {wire}")),
            };
            let mut settings = BTreeMap::new();
            let mismatches = self
                .durability_evidence(durability, ferret.is_some(), &mut settings)
                .await?;
            // Every client the run opens from here on, this one included, carries the write
            // concern the configuration asks for.
            self.options.write_concern = Some(requirement(durability).write_concern);
            self.client = open_client(self.options.clone(), &self.identity).await?;
            Ok(Description {
                system: Described {
                    kind: kind.into(),
                    version,
                    settings,
                    data_dir: None,
                    location: self.location(),
                },
                mismatches,
                settings_checks: None,
            })
        })
    }

    fn create_kv<'a>(
        &'a mut self,
        table: KvTable,
        rows: &'a [(i64, String)],
    ) -> BoxFuture<'a, Result<(), TargetError>> {
        Box::pin(async move {
            let collection = self.recreate(table.name).await?;
            if rows.is_empty() {
                return Ok(());
            }
            let docs: Vec<Document> = rows.iter().map(|(k, v)| doc! {"_id": k, "v": v}).collect();
            collection
                .insert_many(docs)
                .await
                .map_err(|e| self.error(e))?;
            Ok(())
        })
    }

    fn verify_kv<'a>(
        &'a mut self,
        table: KvTable,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, TargetError>> {
        Box::pin(async move {
            let indexes = self
                .database()
                .collection::<Document>(table.name)
                .list_index_names()
                .await
                .map_err(|e| self.error(e))?;
            if !indexes.iter().any(|n| n == "_id_") {
                return Err(self.error(format!(
                    "{DATABASE}.{} has no _id index (listIndexes shows {indexes:?})",
                    table.name
                )));
            }
            Ok(BTreeMap::from([(
                format!("{}.primary_key", table.name),
                "_id (unique index _id_, listIndexes)".to_owned(),
            )]))
        })
    }

    fn read_kv(
        &mut self,
        table: KvTable,
    ) -> BoxFuture<'_, Result<Vec<(i64, String)>, TargetError>> {
        Box::pin(async move {
            let mut cursor = self
                .database()
                .collection::<Document>(table.name)
                .find(doc! {})
                .sort(doc! {"_id": 1})
                .await
                .map_err(|e| self.error(e))?;
            let mut rows = Vec::new();
            while cursor.advance().await.map_err(|e| self.error(e))? {
                let doc = cursor.deserialize_current().map_err(|e| self.error(e))?;
                let key = doc.get_i64("_id").map_err(|e| self.error(e))?;
                let value = doc.get_str("v").map_err(|e| self.error(e))?;
                rows.push((key, value.to_owned()));
            }
            Ok(rows)
        })
    }

    fn count_kv(
        &mut self,
        table: KvTable,
        low: i64,
        high: i64,
    ) -> BoxFuture<'_, Result<u64, TargetError>> {
        Box::pin(async move {
            self.database()
                .collection::<Document>(table.name)
                .count_documents(doc! {"_id": {"$gte": low, "$lt": high}})
                .await
                .map_err(|e| self.error(e))
        })
    }

    fn open_kv_workers(
        &self,
        size: usize,
        read: KvTable,
        write: KvTable,
    ) -> BoxFuture<'_, Result<Box<dyn KvWorkers>, TargetError>> {
        let options = self.session_options();
        let identity = self.identity.clone();
        let connector: Connector<MongoSession> = std::sync::Arc::new(move || {
            let (options, identity) = (options.clone(), identity.clone());
            Box::pin(async move {
                let client = open_client(options, &identity)
                    .await
                    .map_err(|e| e.to_string())?;
                let db = client.database(DATABASE);
                Ok(MongoSession {
                    read: db.collection(read.name),
                    write: db.collection(write.name),
                    _client: client,
                })
            })
        });
        async_workers(size, connector)
    }

    fn ycsb(&mut self) -> Option<&mut dyn super::YcsbTarget> {
        Some(self)
    }
}

/// A worker's client (one connection), opened on the lane it runs on.
struct MongoSession {
    read: MongoCollection<Document>,
    write: MongoCollection<Document>,
    _client: Client,
}

fn mongo_op_error(e: MongoError) -> OpError {
    op_error(is_lost(&e), e)
}

impl KvSession for MongoSession {
    async fn insert(&mut self, key: i64, value: &str) -> Result<(), OpError> {
        self.write
            .insert_one(doc! {"_id": key, "v": value})
            .await
            .map(drop)
            .map_err(mongo_op_error)
    }

    async fn read(&mut self, key: i64) -> Result<usize, OpError> {
        match self.read.find_one(doc! {"_id": key}).await {
            Ok(Some(doc)) => doc
                .get_str("v")
                .map(str::len)
                .map_err(|e| OpError::Failed(format!("key {key}: {e}"))),
            Ok(None) => Err(OpError::Failed(format!("key {key} not found"))),
            Err(e) => Err(mongo_op_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c0_is_a_journaled_write_on_one_member() {
        let required = requirement(Durability::C0);
        assert_eq!(
            describe_write_concern(&required.write_concern),
            "w:1, j:true"
        );
        assert_eq!(required.members, 1);
    }

    #[test]
    fn replicated_configurations_map_to_write_concerns_and_members() {
        let expected = [
            (Durability::C1, "w:2, j:true", 2),
            (Durability::C2, "w:1, j:true", 2),
            (Durability::C3, "w:3, j:true", 3),
            (Durability::C4, "w:majority, j:true", 3),
        ];
        for (config, concern, members) in expected {
            let required = requirement(config);
            assert_eq!(describe_write_concern(&required.write_concern), concern);
            assert_eq!(required.members, members, "{config:?}");
        }
    }

    #[test]
    fn nested_settings_read_as_text() {
        let status = doc! {"storageEngine": {"name": "wiredTiger", "persistent": true}};
        assert_eq!(
            text_of(&status, &["storageEngine", "name"]).as_deref(),
            Some("wiredTiger")
        );
        assert_eq!(
            text_of(&status, &["storageEngine", "persistent"]).as_deref(),
            Some("true")
        );
        assert_eq!(text_of(&status, &["storageEngine", "journal"]), None);
    }
}
