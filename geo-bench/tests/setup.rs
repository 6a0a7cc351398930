//! Rule 1: setup is never timed. A relay in front of the test Redis holds every new connection
//! for 700 ms before a byte passes (a server that accepts slowly: a TLS terminator, a busy
//! accept loop); geo-bench's run against it must show none of that wait in any sample.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::results::Status;
use support::{args, on_server, run};

const HOLD: Duration = Duration::from_millis(700);

/// Relays each connection to `upstream` after holding it for [`HOLD`]; counts the connections.
/// Its threads live as long as the test process.
fn slow_relay(upstream: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                std::thread::sleep(HOLD);
                let Ok(server) = TcpStream::connect(&upstream) else {
                    return;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(c2, s2));
                pipe(server, client);
            });
        }
    });
    (port, accepted)
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buffer) {
        if n == 0 || to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[test]
fn connections_to_a_slowly_accepting_server_are_in_no_sample() {
    let Some((redis, dir)) = on_server("FAIRBENCH_TEST_REDIS_URL") else {
        return;
    };
    let upstream = redis
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/').to_owned())
        .unwrap();
    let (port, accepted) = slow_relay(upstream);
    let url = format!("redis://127.0.0.1:{port}");
    let summary = run(&args(
        dir.path(),
        // No warm-up: a connection made inside the first window would land in its samples.
        &[
            "--target",
            &url,
            "--batch-sizes",
            "1,10",
            "--clients",
            "1,2",
            "--warmup",
            "0",
        ],
    ))
    .unwrap();
    let held = accepted.load(Ordering::SeqCst);
    assert!(
        held >= 2,
        "the run went around the relay ({held} connections)"
    );
    let measured: Vec<_> = summary
        .report
        .cells
        .iter()
        .filter(|c| c.status == Status::Ok)
        .collect();
    assert!(!measured.is_empty(), "nothing was measured");
    for cell in measured {
        let max = cell.latency_ns.expect("an ok cell has latency").max;
        assert!(
            max < HOLD.as_nanos() as u64,
            "{} · {}: a sample of {max} ns holds a connection's {HOLD:?} wait",
            cell.workload,
            cell.system
        );
    }
}
