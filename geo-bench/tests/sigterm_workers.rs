//! Two geo-bench worker processes (the embedded SQLite, one file both open; the barrier on
//! loopback) with a barrier token: a
//! stranger that speaks the barrier's protocol without the token is refused and named in worker
//! 0's log and changes nothing; SIGTERM to worker 1 (what Kubernetes sends a pod it stops) keeps
//! what it measured, marks its part stopped, stops worker 0 at the next meeting, and `merge
//! --wait` refuses the run within seconds instead of waiting out its wait.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::results::Report;
use common::testing::{free_port, read_report};

const BIN: &str = env!("CARGO_BIN_EXE_geo-bench");
const TOKEN: &str = "sigterm-test-token-0123456789";

fn worker(dir: &Path, index: u32, barrier: &str) -> Child {
    let out = dir.join(format!("worker-{index}"));
    let stderr = std::fs::File::create(dir.join(format!("worker-{index}.stderr"))).unwrap();
    Command::new(BIN)
        .arg("--target")
        .arg(format!("sqlite:{}", dir.join("geo.db").display()))
        .args(
            "--workloads insert --batch-sizes 10 --clients 4 --connections 4 --events 2000 \
             --queries 10 --duration 1s --warmup 0 --rounds 30 --forks 1 --quiet \
             --worker-count 2 --run-id sigterm-1 --barrier-timeout 20s --barrier-bind 127.0.0.1"
                .split_whitespace(),
        )
        .args(["--worker-index", &index.to_string(), "--barrier", barrier])
        .arg("--output")
        .arg(&out)
        .env("FAIRBENCH_BARRIER_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .spawn()
        .unwrap()
}

/// A stranger on the network: once worker 0 listens, says it is worker 1 and then that it
/// stops, without the token. Its own address and what worker 0 answered.
fn rogue(barrier: &str) -> (String, String) {
    let began = Instant::now();
    let mut stream = loop {
        match TcpStream::connect(barrier) {
            Ok(stream) => break stream,
            Err(_) if began.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("worker 0 never listened: {e}"),
        }
    };
    let local = stream.local_addr().unwrap().to_string();
    stream
        .write_all(b"HELLO sigterm-1 0000 0.1.0 1 2\nSTOP 1 SIGTERM\nARRIVE 1 999 0\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    (local, answer)
}

fn measured_rounds(path: &Path) -> usize {
    std::fs::read_to_string(path.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Report>(&t).ok())
        .and_then(|r| r.cells.first().and_then(|c| c.throughput.clone()))
        .map_or(0, |t| t.rounds.len())
}

fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            panic!("process {} still running after {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_to_a_worker_marks_its_part_stopped_and_the_merge_refuses_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let barrier = format!("127.0.0.1:{}", free_port());
    let mut zero = worker(dir.path(), 0, &barrier);
    let (stranger, answer) = rogue(&barrier);
    assert!(answer.starts_with("NONCE "), "{answer}");
    assert!(answer.contains("REFUSE not authenticated"), "{answer}");
    // Worker 1 opens the database worker 0 prepared: it starts once worker 0's report began.
    let began = Instant::now();
    while !dir.path().join("worker-0/results.json").is_file() {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "worker 0 prepared nothing in 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut one = worker(dir.path(), 1, &barrier);

    // Once worker 1 has a measured round on disk, stop it as Kubernetes stops a pod.
    let part = dir.path().join("worker-1");
    let began = Instant::now();
    while measured_rounds(&part) == 0 {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "worker 1 measured nothing in 90 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let kept = measured_rounds(&part);
    let killed = Instant::now();
    let term = Command::new("kill")
        .args(["-TERM", &one.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());

    // The merge Job starts with the workers and waits for unfinished parts (two hours by
    // default; a minute here, so a part never marked stopped fails the test in bounded time).
    let merge = Command::new(BIN)
        .args(["merge", "--expect-workers", "2", "--wait", "60s", "-o"])
        .arg(dir.path().join("merged"))
        .arg(dir.path().join("worker-0"))
        .arg(&part)
        .output()
        .unwrap();
    let refused_in = killed.elapsed();
    let said = String::from_utf8_lossy(&merge.stderr);
    assert_eq!(merge.status.code(), Some(2), "{said}");
    assert!(
        said.contains("stopped at the barrier: worker 1 was interrupted (SIGTERM)"),
        "{said}"
    );
    assert!(
        refused_in < Duration::from_secs(15),
        "merge refused {refused_in:?} after SIGTERM"
    );
    assert!(!dir.path().join("merged").exists(), "nothing merged");
    eprintln!("merge refused {} ms after SIGTERM", refused_in.as_millis());

    let status = wait_bounded(&mut one, Duration::from_secs(30));
    assert!(
        status.code().is_some(),
        "worker 1 exited on its own: {status:?}"
    );
    let status = wait_bounded(&mut zero, Duration::from_secs(30));
    assert!(
        status.code().is_some(),
        "worker 0 exited on its own: {status:?}"
    );

    let stopped = read_report(&part);
    assert!(stopped.finished_at.is_some(), "worker 1 closed its report");
    assert!(
        measured_rounds(&part) >= kept,
        "the measured rounds were kept"
    );
    let failure = |r: &Report| {
        r.worker
            .as_ref()
            .and_then(|w| w.barrier.as_ref())
            .and_then(|b| b.failure.clone())
    };
    assert_eq!(
        failure(&stopped).as_deref(),
        Some("worker 1 was interrupted (SIGTERM)")
    );
    let one_said = std::fs::read_to_string(dir.path().join("worker-1.stderr")).unwrap();
    assert!(one_said.contains("interrupted (SIGTERM)"), "{one_said}");

    let leader = read_report(&dir.path().join("worker-0"));
    assert_eq!(
        failure(&leader).as_deref(),
        Some("worker 1 was interrupted (SIGTERM)"),
        "worker 0 stopped at the next meeting"
    );
    let barrier = leader.worker.as_ref().unwrap().barrier.as_ref().unwrap();
    assert!(barrier.authenticated);
    let named = format!("barrier: refused {stranger}: not authenticated");
    let zero_said = std::fs::read_to_string(dir.path().join("worker-0.stderr")).unwrap();
    assert!(zero_said.contains(&named), "{zero_said}");
    assert!(!zero_said.contains("the barrier is open"), "{zero_said}");
    assert!(
        barrier.refused.iter().any(|r| r.starts_with(&stranger)),
        "{:?}",
        barrier.refused
    );
    assert!(
        !zero_said.contains(TOKEN)
            && !std::fs::read_to_string(dir.path().join("worker-0/results.json"))
                .unwrap()
                .contains(TOKEN),
        "the token is never printed or stored"
    );
}
