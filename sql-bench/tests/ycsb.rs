//! `sql-bench ycsb` end to end, in-process: YCSB's six core workloads on the embedded SQLite
//! and the real PostgreSQL at small sizes (operation mix within ±2% of the definition, the
//! zipfian's hottest key at 1/zeta, `latest` reading what the run inserted, counts verified),
//! MariaDB beside PostgreSQL, FerretDB (MongoDB wire) with scans and read-modify-writes,
//! Cassandra with its lightweight transactions and its scans refused for the token order, the
//! CouchDB API (pouchdb-server) with its `_rev`-checked writes and `_all_docs` scans, bad
//! workload files refused with one line and exit 2, and updates hanging past the ceiling on
//! PostgreSQL and MariaDB stopped on the server while the run goes on.

mod support;

use common::results::{Cell, Report, Status};
use common::testing::cell;
use common::testing::scratch::{Scratch, on_create};
use support::*;

const ALL: &str = "a,b,c,d,e,f";

/// `ycsb` at a small size: 2,000 records, two rounds of 400 ms after one warm-up, 4 connections
/// (the records and the duration unless `extra` gives its own).
fn small<'a>(output: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut own = Vec::new();
    for (flag, value) in [("--records", "2000"), ("--duration", "400ms")] {
        if !extra.contains(&flag) {
            own.extend([flag, value]);
        }
    }
    own.extend_from_slice(extra);
    args("ycsb", output, &own)
}

/// Every operation's measured share lies within ±2 points of its definition (or, for a run
/// too short for that to be more than chance, within four standard deviations of a binomial
/// draw), and nothing failed. Returns how many operations were measured.
fn assert_mix(cell: &Cell) -> u64 {
    let operations = cell.extra["operations"].as_object().unwrap();
    assert!(!operations.is_empty(), "{cell:?}");
    let n: u64 = operations
        .values()
        .map(|op| op["ok"].as_u64().unwrap() + op["error"].as_u64().unwrap())
        .sum();
    for (name, op) in operations {
        let share = op["share"].as_f64().unwrap();
        let defined = op["proportion"].as_f64().unwrap();
        let chance = 4.0 * (defined * (1.0 - defined) / n as f64).sqrt();
        assert!(
            (share - defined).abs() <= chance.max(0.02),
            "{} {}: {name} share {share} against {defined} over {n} operations",
            cell.workload,
            cell.system
        );
        assert_eq!(op["error"], 0, "{} {name}: {op}", cell.workload);
        assert!(op["ok"].as_u64().unwrap() > 0, "{} {name}", cell.workload);
        assert!(op["latency_ns"]["p50"].as_u64().unwrap() > 0);
        assert!(op["histogram_b64"].is_string());
    }
    n
}

/// How far the hottest key's share may lie from 1/zeta after `draws` zipfian key choices over
/// `records` records: five binomial standard errors of the draws actually made (so a run that
/// made few operations under load gets the wider margin chance gives it), plus one record's
/// mean share for the other ranks that hash onto the same key.
fn hottest_margin(expected: f64, draws: u64, records: u64) -> f64 {
    assert!(draws > 0, "no key was drawn");
    5.0 * (expected * (1.0 - expected) / draws as f64).sqrt() + 1.0 / records as f64
}

/// The checks every engine's six workloads share.
fn assert_workloads(report: &Report, system: &str) {
    let load = cell(report, "load", system);
    assert_eq!(load.status, Status::Ok, "{load:?}");
    assert_eq!(load.unit, "records/s");
    assert_eq!(load.extra["records_counted"], 2000);
    assert!(load.extra["sample_verified"].as_u64().unwrap() > 1000);
    for workload in ["a", "b", "c", "d", "e", "f"] {
        let cell = cell(report, workload, system);
        assert_eq!(cell.status, Status::Ok, "{cell:?}");
        assert_eq!(cell.throughput.as_ref().unwrap().rounds.len(), 2);
        assert_mix(cell);
    }
    for zipfian in ["a", "b", "c", "f"] {
        let keys = &cell(report, zipfian, system).extra["keys"];
        let hottest = keys["hottest_share"].as_f64().unwrap();
        let expected = keys["expected_hottest_share"].as_f64().unwrap();
        assert!((expected - 0.0378).abs() < 1e-4, "{keys}");
        let margin = hottest_margin(expected, keys["chosen"].as_u64().unwrap(), 2000);
        assert!(
            (hottest - expected).abs() <= margin,
            "{zipfian} {system}: hottest share off by more than {margin}: {keys}"
        );
    }
    let latest = &cell(report, "d", system).extra["keys"];
    assert!(
        latest["inserted_by_run_share"].as_f64().unwrap() > 0.2,
        "`latest` reads what the run inserted: {latest}"
    );
    assert!(latest["newest_share"].as_f64().unwrap() > 0.02, "{latest}");
    let scans = &cell(report, "e", system).extra["workload"]["scan_length"];
    assert_eq!(scans["max"], 100);
    for inserting in ["d", "e"] {
        assert!(
            cell(report, inserting, system).extra["records_counted"]
                .as_u64()
                .unwrap()
                > 2000
        );
    }
}

#[test]
fn every_core_workload_runs_on_sqlite_with_its_mix_and_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let summary = run(&small(&out, &["--workload", ALL])).unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(&out);
    assert_workloads(&summary.report, "sqlite");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("workload e: short ranges"), "{markdown}");
    assert!(markdown.contains("read-modify-write"), "{markdown}");
    assert_eq!(read_json(&out)["suite"], "ycsb");
}

#[test]
fn with_enough_operations_every_share_is_within_two_points() {
    // A database in memory (no fsync) gives each window tens of thousands of operations,
    // enough that ±2% is a real bound (four standard deviations of a 50/50 draw is 1.3%).
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let db = format!("sqlite:{}", dir.path().join("ycsb.db").display());
    let out = dir.path().join("run");
    let summary = run(&small(
        &out,
        &["--workload", "a,d,e,f", "--target", &db, "--duration", "1s"],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    for workload in ["a", "d", "e", "f"] {
        let cell = cell(&summary.report, workload, "sqlite");
        let n = assert_mix(cell);
        if n >= 10_000 {
            for op in cell.extra["operations"].as_object().unwrap().values() {
                let gap =
                    (op["share"].as_f64().unwrap() - op["proportion"].as_f64().unwrap()).abs();
                assert!(gap <= 0.02, "{workload}: {op}");
            }
        } else {
            eprintln!("{workload}: only {n} operations on this machine; checked against chance");
        }
    }
}

#[test]
fn every_core_workload_runs_on_postgres_beside_mariadb() {
    let Some(([pg, my], dir)) = on_servers([POSTGRES, MYSQL]) else {
        return;
    };
    let summary = run(&small(
        dir.path(),
        &["--workload", ALL, "--target", &pg, "--target", &my],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(dir.path());
    let report = &summary.report;
    assert_workloads(report, "postgres");
    assert_mix(cell(report, "a", "mariadb"));
    let postgres = &report.systems[0];
    assert_eq!(
        postgres.verified["ycsb.primary_key"],
        "ycsb_key (btree, COLLATE \"C\", pg_index)"
    );
    assert_eq!(report.systems[1].verified["ycsb.engine"], "InnoDB");
    // The table is dropped afterwards.
    let left = psql(
        &pg,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'fairbench' AND tablename = 'ycsb'",
    );
    assert_eq!(left, "0");
}

#[test]
fn a_workload_file_of_ones_own_runs_and_bad_ones_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.toml");
    std::fs::write(
        &file,
        "description = \"mine\"\n[proportions]\nread = 0.6\nupdate = 0.2\ninsert = 0.1\ndelete = 0.1\n\
         [request]\ndistribution = \"hotspot\"\n[records]\ncount = 1500\nfields = 3\nfield_length = 20\n\
         [run]\nconnections = 2\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let summary = run(&args("ycsb", &out, &["--workload", file.to_str().unwrap()])).unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(&out);
    let mine = cell(&summary.report, "mine", "sqlite");
    assert_eq!(mine.connections, 2, "the file's connections");
    assert_mix(mine);
    assert_eq!(
        cell(&summary.report, "load", "sqlite").extra["records_counted"],
        1500
    );
    assert!(mine.extra["records_counted"].as_u64().is_some());

    for (text, says) in [
        (
            "[proportions]\nread = 1\nzipf = 0\n",
            "unknown key `proportions.zipf`",
        ),
        (
            "[proportions]\nread = 1.5\nupdate = -0.5\n",
            "`proportions.update` is -0.5",
        ),
        ("[proportions]\nread = 1.5\n", "`proportions.read` is 1.5"),
        (
            "[proportions]\nupdate = -0.5\nread = 1.5\n",
            "`proportions.update` is -0.5",
        ),
        (
            "[proportions]\nread = 0.6\nupdate = 0.3\n",
            "`proportions` sum to 0.9",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = dir.path().join("refused");
        let ran = std::process::Command::new(env!("CARGO_BIN_EXE_sql-bench"))
            .args(args("ycsb", &out, &["--workload", file.to_str().unwrap()]))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(2), "{text}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!out.exists(), "the binary touches nothing for a bad file");
        let error = run(&args("ycsb", &out, &["--workload", file.to_str().unwrap()]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{error}");
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(!out.exists(), "nothing is touched for a bad file");
    }
}

#[test]
fn reads_updates_scans_and_read_modify_writes_run_on_ferretdb() {
    let Some((url, dir)) = on_server(FERRETDB) else {
        return;
    };
    let summary = run(&small(
        dir.path(),
        &[
            "--workload",
            "a,e,f",
            "--records",
            "500",
            "--target",
            &url,
            "--allow-unmatched-durability",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(dir.path());
    let report = &summary.report;
    let load = cell(report, "load", "ferretdb");
    assert_eq!(load.extra["records_counted"], 500, "{load:?}");
    assert!(load.extra["sample_verified"].as_u64().unwrap() > 100);
    for workload in ["a", "e", "f"] {
        assert_mix(cell(report, workload, "ferretdb"));
    }
    assert!(
        cell(report, "e", "ferretdb").extra["records_counted"]
            .as_u64()
            .unwrap()
            > 500
    );
    let rmw = &cell(report, "f", "ferretdb").extra["operations"]["read_modify_write"];
    assert!(
        rmw["answered_by"]
            .as_str()
            .unwrap()
            .contains("findAndModify"),
        "{rmw}"
    );
    let ferret = &report.systems[0];
    assert_eq!(
        ferret.verified["ycsb.primary_key"],
        "_id (unique index _id_, listIndexes)"
    );
    assert_eq!(
        ferret.verified["write_concern"],
        "w:1, j:true (sent with every write)"
    );
    // The collection and its marker are gone afterwards.
    let left = block_on(async {
        let client = mongodb::Client::with_uri_str(&url).await.unwrap();
        client
            .database("fairbench")
            .list_collection_names()
            .filter(mongodb::bson::doc! {"name": "ycsb"})
            .await
            .unwrap()
    });
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn read_modify_writes_run_on_cassandra_as_lightweight_transactions_and_scans_are_refused() {
    let Some((url, dir)) = on_server(CASSANDRA) else {
        return;
    };
    let summary = run(&small(
        dir.path(),
        &["--workload", "f,e", "--records", "500", "--target", &url],
    ))
    .unwrap();
    assert_matches_schema(dir.path());
    let report = &summary.report;
    let load = cell(report, "load", "cassandra");
    assert_eq!(load.status, Status::Ok, "{load:?}");
    assert_eq!(load.extra["records_counted"], 500);
    let f = cell(report, "f", "cassandra");
    assert_eq!(f.status, Status::Ok, "{f:?}");
    assert_mix(f);
    let rmw = &f.extra["operations"]["read_modify_write"];
    assert!(
        rmw["answered_by"]
            .as_str()
            .unwrap()
            .contains("lightweight transaction"),
        "{rmw}"
    );
    let e = cell(report, "e", "cassandra");
    assert_eq!(e.status, Status::Refused);
    assert!(e.reason.as_deref().unwrap().contains("token"), "{e:?}");
    assert_eq!(summary.exit, Exit::NotAllOk);
    let cassandra = &report.systems[0];
    assert_eq!(
        cassandra.verified["ycsb.primary_key"],
        "ycsb_key (partition key, system_schema.columns)"
    );
    assert!(
        cassandra.verified["consistency"].starts_with("One"),
        "{:?}",
        cassandra.verified
    );
}

#[test]
fn every_operation_runs_on_the_couchdb_api_with_rev_checked_writes_and_key_order_scans() {
    // pouchdb-server speaks CouchDB's API (Apache CouchDB is not packaged here); it has no
    // fsync per write, hence --allow-unmatched-durability.
    let Some((url, dir)) = on_server(POUCHDB) else {
        return;
    };
    let file = dir.path().join("deletes.toml");
    std::fs::write(
        &file,
        "description = \"deletes\"\n[proportions]\nread = 0.4\nupdate = 0.2\ninsert = 0.2\ndelete = 0.2\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let workloads = format!("a,e,f,{}", file.display());
    let summary = run(&small(
        &out,
        &[
            "--workload",
            &workloads,
            "--records",
            "500",
            "--duration",
            "300ms",
            "--target",
            &url,
            "--allow-unmatched-durability",
        ],
    ))
    .unwrap();
    assert_eq!(summary.exit, Exit::AllOk, "{:#?}", summary.report.cells);
    assert_matches_schema(&out);
    let report = &summary.report;
    let system = report.systems[0].name.as_str();
    let load = cell(report, "load", system);
    assert_eq!(load.extra["records_counted"], 500, "{load:?}");
    assert_eq!(load.extra["sample_verified"], 500, "{load:?}");
    for workload in ["a", "e", "f", "deletes"] {
        assert_mix(cell(report, workload, system));
    }
    for inserting in ["e", "deletes"] {
        assert!(
            cell(report, inserting, system).extra["records_counted"].is_u64(),
            "the count is checked after every window that inserts or deletes"
        );
    }
    let operations = &cell(report, "f", system).extra["operations"];
    let rmw = operations["read_modify_write"]["answered_by"]
        .as_str()
        .unwrap();
    assert!(rmw.contains("compare-and-set on the revision"), "{rmw}");
    let update = cell(report, "a", system).extra["operations"]["update"]["answered_by"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(update.contains("_rev"), "{update}");
    let verified = &report.systems[0].verified;
    assert_eq!(
        verified["ycsb.primary_key"],
        "_id (the document id: CouchDB's by-id B-tree)"
    );
    assert!(
        verified["ycsb.key_order"].starts_with("byte order"),
        "{verified:?}"
    );
    assert!(
        verified["ycsb.storage"].contains("database info"),
        "{verified:?}"
    );
    // The database and the key-order probe's are gone afterwards.
    let base = url.replacen("couchdb://", "http://", 1);
    for db in ["fairbench_ycsb", "fairbench_ycsb_key_order_probe"] {
        let (status, _) = common::testing::http("GET", &format!("{base}/{db}"), None);
        assert_eq!(status, 404, "{db} is left");
    }
}

/// `a` (half updates) past a 1 s ceiling, then `c` (reads only), keeping the table: every
/// update of `a` hangs on the server.
fn hanging_updates<'a>(output: &'a std::path::Path, target: &'a str) -> Vec<&'a str> {
    small(
        output,
        &[
            "--workload",
            "a,c",
            "--records",
            "500",
            "--ceiling",
            "1s",
            "--keep-data",
            "--target",
            target,
        ],
    )
}

/// The updates of `a` passed the ceiling and were cancelled: `a` is a timeout, not retried,
/// and `c` after it is measured.
fn assert_a_timed_out_and_c_ran(report: &Report, system: &str) {
    let a = cell(report, "a", system);
    assert_eq!(a.status, Status::Timeout, "{a:?}");
    let reason = a.reason.as_deref().unwrap();
    assert!(
        reason.contains("warm-up 1: ") && reason.contains("still running 1s after they started"),
        "{reason}"
    );
    assert!(a.throughput.is_none());
    let c = cell(report, "c", system);
    assert_eq!(c.status, Status::Ok, "{c:?}");
}

#[test]
fn updates_past_the_ceiling_are_cancelled_on_postgres_and_the_run_goes_on() {
    let Some((pg, dir)) = on_server(POSTGRES) else {
        return;
    };
    let slow = Scratch::new(
        &pg,
        "fairbench_ycsb_slow",
        &format!(
            "CREATE FUNCTION update_fault() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$;
             {}",
            on_create(
                "CREATE TABLE",
                "IF obj = 'fairbench.ycsb' THEN
                   CREATE TRIGGER fault BEFORE UPDATE ON fairbench.ycsb
                     FOR EACH ROW EXECUTE FUNCTION public.update_fault();
                 END IF;",
            )
        ),
    );
    let target = format!("slow={}", slow.url);
    let summary = run(&hanging_updates(dir.path(), &target)).unwrap();
    assert_a_timed_out_and_c_ran(&summary.report, "slow");
    // The cancel requests reached the server: no update of the run is still sleeping there,
    // though its sessions are closed and the table kept (nothing else would stop them).
    let sleeping = psql(
        &pg,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'fairbench_ycsb_slow' \
         AND state = 'active' AND query LIKE 'UPDATE%'",
    );
    assert_eq!(sleeping, "0", "a cancelled update is still running");
}

#[test]
fn updates_past_the_ceiling_are_killed_on_mariadb_and_the_run_goes_on() {
    let Some((my, dir)) = on_server(MYSQL) else {
        return;
    };
    mariadb(&my, "DROP TABLE IF EXISTS fairbench.ycsb");
    // MariaDB has no event triggers: a watcher attaches the sleeping trigger as soon as the run
    // has created its table (the load only inserts; the updates come after it).
    let watcher = {
        let my = my.clone();
        std::thread::spawn(move || {
            let exists = "SELECT COUNT(*) FROM information_schema.TABLES \
                          WHERE TABLE_SCHEMA = 'fairbench' AND TABLE_NAME = 'ycsb'";
            let started = std::time::Instant::now();
            while mariadb(&my, exists) != "1" {
                assert!(started.elapsed().as_secs() < 60, "the run made no table");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            mariadb(
                &my,
                "CREATE TRIGGER fairbench.ycsb_fault BEFORE UPDATE ON fairbench.ycsb \
                 FOR EACH ROW SET @slept = SLEEP(60)",
            );
        })
    };
    let summary = run(&hanging_updates(dir.path(), &my)).unwrap();
    watcher.join().unwrap();
    let sleeping = mariadb(
        &my,
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'UPDATE fairbench.ycsb%'",
    );
    mariadb(&my, "DROP TABLE IF EXISTS fairbench.ycsb");
    assert_a_timed_out_and_c_ran(&summary.report, "mariadb");
    // KILL QUERY reached the server: no update of the run is still sleeping there, though its
    // sessions are closed and the table kept (nothing else would stop them).
    assert_eq!(sleeping, "0", "a killed update is still running");
}
