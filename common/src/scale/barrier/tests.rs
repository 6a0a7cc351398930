//! The barrier between real sockets on loopback: workers admitted, windows opened together
//! with the payloads summed, and every way a run stops (mismatch, a worker that never comes,
//! one that leaves) a clear error on every worker; a stranger without the token refused at the
//! door and named, changing nothing; a worker interrupted while it waits stopping every worker.

use super::*;
use crate::testing::{free_port, refusal};

fn hello(index: u32, count: u32) -> Hello {
    Hello {
        run_id: "run-1".into(),
        options_hash: "abc".into(),
        tool_version: "0.1.0".into(),
        index,
        count,
    }
}

/// The run's token, as every worker of these tests has it.
const TOKEN: &str = "test-token-0123456789abcdef";

fn access() -> Access {
    let mut access = Access::open();
    access.token = Token::new(TOKEN).unwrap();
    access.bind = "127.0.0.1".parse().unwrap();
    access
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn three_workers_open_each_window_together_and_sum_their_payloads() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(10);
    let results = runtime().block_on(async {
        let mut tasks = Vec::new();
        // Worker 2 comes first and worker 0 last: followers retry until worker 0 listens.
        for index in [2, 1, 0] {
            let address = address.clone();
            tasks.push(tokio::spawn(async move {
                if index == 0 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                let mut barrier =
                    Barrier::join(&address, hello(index, 3), timeout, access()).await?;
                let mut sums = Vec::new();
                for window in 0..3u64 {
                    sums.push(barrier.wait(u64::from(index) * 10 + window).await?);
                }
                Ok::<_, BarrierError>((index, sums, barrier.record().clone()))
            }));
        }
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.unwrap().unwrap());
        }
        out
    });
    let mut starts: Vec<Vec<u64>> = Vec::new();
    for (index, sums, record) in &results {
        // 0 + 10 + 20 plus three times the window number.
        assert_eq!(sums, &[30, 33, 36], "worker {index}");
        assert_eq!(record.windows, 3);
        assert!(record.failure.is_none());
        starts.push(record.start_unix_ns.clone());
    }
    for window in 0..3 {
        let at: Vec<u64> = starts.iter().map(|s| s[window]).collect();
        let skew = at.iter().max().unwrap() - at.iter().min().unwrap();
        assert!(skew < 20_000_000, "window {window}: starts {skew} ns apart");
    }
}

#[test]
fn a_worker_with_other_options_is_refused_and_worker_0_stops_too() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(5);
    runtime().block_on(async {
        let mut leader = Barrier::join(&address, hello(0, 2), timeout, access())
            .await
            .unwrap();
        let mut other = hello(1, 2);
        other.options_hash = "def".into();
        let refused = Barrier::join(&address, other, timeout, access())
            .await
            .err()
            .unwrap();
        assert!(
            refused
                .to_string()
                .contains("worker 0 refused worker 1: worker 1 has other options"),
            "{refused}"
        );
        let stopped = leader.wait(0).await.unwrap_err().to_string();
        assert!(stopped.contains("worker 1 has other options"), "{stopped}");
        assert!(leader.record().failure.is_some());
    });
}

#[test]
fn a_worker_that_never_arrives_is_one_clear_error_on_every_worker() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_millis(800);
    runtime().block_on(async {
        let leader = tokio::spawn({
            let address = address.clone();
            async move {
                let mut b = Barrier::join(&address, hello(0, 3), timeout, access())
                    .await
                    .unwrap();
                b.wait(0).await.unwrap_err().to_string()
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut one = Barrier::join(&address, hello(1, 3), timeout, access())
            .await
            .unwrap();
        let follower = one.wait(0).await.unwrap_err().to_string();
        let leader = leader.await.unwrap();
        assert!(
            leader.ends_with("worker(s) 2 never arrived (2 of 3 workers there before the timeout)"),
            "{leader}"
        );
        assert!(
            follower.contains("worker 0 stopped the run: worker(s) 2 never arrived"),
            "{follower}"
        );
    });
}

#[test]
fn a_worker_alone_without_worker_0_gives_up_at_the_timeout() {
    let address = format!("127.0.0.1:{}", free_port());
    let error = refusal(runtime().block_on(Barrier::join(
        &address,
        hello(1, 2),
        Duration::from_millis(500),
        access(),
    )));
    assert!(
        error.contains("worker 1 could not join worker 0 within"),
        "{error}"
    );
}

#[test]
fn a_worker_that_leaves_stops_worker_0_at_the_next_window() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(5);
    runtime().block_on(async {
        let mut leader = Barrier::join(&address, hello(0, 2), timeout, access())
            .await
            .unwrap();
        let one = Barrier::join(&address, hello(1, 2), timeout, access())
            .await
            .unwrap();
        drop(one);
        let error = leader.wait(0).await.unwrap_err().to_string();
        assert!(
            error.contains("worker 1 left the run before window 1"),
            "{error}"
        );
    });
}

#[test]
fn addresses_are_host_and_port() {
    assert_eq!(
        parse_address("geo-0.geo:7447").unwrap(),
        ("geo-0.geo".into(), 7447)
    );
    assert_eq!(parse_address("[::1]:80").unwrap().0, "::1");
    for bad in ["geo", "geo:", ":80", "geo:0", "geo:http"] {
        assert!(parse_address(bad).is_err(), "{bad}");
    }
}

/// A stranger on the network: connects to worker 0's barrier and sends the barrier's own
/// messages (a hello as worker 1, a stop, an arrival) without the token, or says nothing.
async fn rogue(address: &str, lines: &[&str]) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(address).await.unwrap();
    let local = stream.local_addr().unwrap().to_string();
    for line in lines {
        let _ = stream.write_all(format!("{line}\n").as_bytes()).await;
    }
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut answer)).await;
    (local, answer)
}

#[test]
fn a_stranger_without_the_token_is_refused_named_and_changes_nothing() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(10);
    runtime().block_on(async {
        let mut leader = Barrier::join(&address, hello(0, 2), timeout, access())
            .await
            .unwrap();
        // One stranger says nothing (worker 0 must not wait for it); the others speak the
        // barrier's protocol as a worker would, but without the token.
        let silent = TcpStream::connect(&address).await.unwrap();
        let (first, answer) = rogue(
            &address,
            &[
                "HELLO run-1 abc 0.1.0 1 2",
                "STOP 1 SIGTERM",
                "ARRIVE 1 999 0",
            ],
        )
        .await;
        assert!(answer.contains("REFUSE not authenticated"), "{answer}");
        let (second, _) = rogue(&address, &["HELLO run-1 def 0.1.0 1 2 00ff", "STOP 1"]).await;
        let joined = Instant::now();
        let follower = tokio::spawn({
            let address = address.clone();
            async move {
                let mut one = Barrier::join(&address, hello(1, 2), timeout, access()).await?;
                let sums = (one.wait(5).await?, one.wait(6).await?);
                Ok::<_, BarrierError>(sums)
            }
        });
        let sums = (leader.wait(1).await.unwrap(), leader.wait(2).await.unwrap());
        assert_eq!(sums, (6, 8), "the stranger's payload was not added");
        assert_eq!(follower.await.unwrap().unwrap(), (6, 8));
        assert!(
            joined.elapsed() < Duration::from_secs(2),
            "the silent stranger delayed the run: {:?}",
            joined.elapsed()
        );
        let record = leader.record();
        assert!(record.failure.is_none(), "{:?}", record.failure);
        assert_eq!(record.windows, 2);
        assert!(record.authenticated);
        for stranger in [&first, &second] {
            assert!(
                record
                    .refused
                    .iter()
                    .any(|r| r.starts_with(&format!("{stranger}: not authenticated"))),
                "{stranger} not named in {:?}",
                record.refused
            );
        }
        drop(silent);
    });
}

#[test]
fn a_worker_with_another_token_is_refused_and_says_why() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(5);
    runtime().block_on(async {
        let _leader = Barrier::join(&address, hello(0, 2), timeout, access())
            .await
            .unwrap();
        let mut other = access();
        other.token = Token::new("another-token-0123456789").unwrap();
        let error = Barrier::join(&address, hello(1, 2), timeout, other)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("worker 0 refused worker 1: not authenticated"),
            "{error}"
        );
    });
}

#[test]
fn a_worker_interrupted_while_it_waits_stops_at_once_and_halts_worker_0() {
    let address = format!("127.0.0.1:{}", free_port());
    let timeout = Duration::from_secs(20);
    runtime().block_on(async {
        let mut leader = Barrier::join(&address, hello(0, 2), timeout, access())
            .await
            .unwrap();
        let mut one = Barrier::join(&address, hello(1, 2), timeout, access())
            .await
            .unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        one.watch(flag.clone());
        // Worker 1 waits for worker 0, which is still preparing; worker 1 is stopped then.
        let waiting = tokio::spawn(async move { one.wait(0).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stopped = Instant::now();
        flag.store(true, Ordering::SeqCst);
        let error = waiting.await.unwrap().unwrap_err();
        assert!(
            stopped.elapsed() < Duration::from_secs(1),
            "worker 1 waited {:?}",
            stopped.elapsed()
        );
        assert!(
            matches!(&error, BarrierError::Interrupted { worker: 1, .. }),
            "{error}"
        );
        let error = leader.wait(0).await.unwrap_err();
        assert!(
            matches!(&error, BarrierError::Interrupted { worker: 1, .. }),
            "{error}"
        );
        assert_eq!(
            leader.record().failure.as_deref(),
            Some("worker 1 was interrupted (Ctrl-C)")
        );
    });
}
