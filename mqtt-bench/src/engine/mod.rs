//! One measured window against one broker: every client connects and subscribes before the
//! clock starts, one publisher and N subscribers run on the per-core lanes, the subscribers
//! drain what was sent, and their ledgers and histograms are merged once at the end.

pub mod publisher;
pub mod subscriber;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::cputime::process_cpu_ns;
use common::lanes::Lanes;
use common::recorder::Recorder;

use self::publisher::{Publisher, PublisherReport};
use self::subscriber::{Subscriber, SubscriberReport};
use crate::message::Delivery;
use crate::protocol::conn::{Conn, Endpoint};

/// How long before the window opens the clients are started, so they begin together.
const START_LEAD: Duration = Duration::from_millis(5);

/// Everything one window needs to know.
#[derive(Debug, Clone)]
pub struct WindowSpec {
    pub endpoint: Endpoint,
    /// The topic of this window alone (inside the run's prefix), so no message of another
    /// window can be counted in it.
    pub topic: String,
    pub pub_qos: u8,
    pub sub_qos: u8,
    pub subscribers: usize,
    /// Most QoS 1/2 messages the publisher leaves unacknowledged.
    pub inflight: usize,
    /// The payload every message carries (its first bytes are overwritten by the stamp).
    pub payload: Arc<[u8]>,
    pub duration: Duration,
    /// Open-loop publish rate; `None` publishes as fast as the broker takes messages.
    pub rate_per_s: Option<f64>,
    /// Open loop: yield instead of sleeping for waits under 2 ms (the latency scenario).
    pub precise_pacing: bool,
    /// How long past the end of the window the clients may take before it is a timeout.
    pub ceiling: Duration,
    /// Subscribers stop waiting for missing messages after this long with none arriving.
    pub drain_quiet: Duration,
    /// Closed loop: most messages the publisher may be ahead of the slowest subscriber, so
    /// a broker's queues stay bounded and latency stays a measure of the broker, not of a
    /// backlog the client piled up. `None`: no bound.
    pub backlog: Option<u64>,
    pub window_id: u32,
    /// Client identifiers are `{client_prefix}-p` and `{client_prefix}-sN`.
    pub client_prefix: String,
    /// Stamps count nanoseconds from here (the same clock for publisher and subscribers).
    pub epoch: Instant,
}

/// What the window's tasks share: set rarely (once or twice per window), read by the
/// subscribers when idle.
#[derive(Debug)]
pub struct Shared {
    start: Instant,
    /// The publisher's final count once it has written everything; `u64::MAX` before.
    sent: AtomicU64,
    /// Nanoseconds from `start` at which the publisher finished; meaningful once `sent` is set.
    done_ns: AtomicU64,
    aborted: AtomicBool,
    /// Per subscriber: distinct messages received so far (updated once per read).
    progress: Vec<AtomicU64>,
}

impl Shared {
    fn new(start: Instant, subscribers: usize) -> Shared {
        Shared {
            start,
            sent: AtomicU64::new(u64::MAX),
            done_ns: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            progress: (0..subscribers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn report_progress(&self, subscriber: usize, distinct: u64) {
        self.progress[subscriber].store(distinct, Ordering::Relaxed);
    }

    /// The distinct count of the slowest subscriber.
    pub fn slowest_progress(&self) -> u64 {
        self.progress
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX)
    }

    pub fn publisher_done(&self, sent: u64) {
        if self.sent.load(Ordering::Acquire) == u64::MAX {
            self.done_ns
                .store(self.since_start().as_nanos() as u64, Ordering::Release);
            self.sent.store(sent, Ordering::Release);
        }
    }

    pub fn sent(&self) -> Option<u64> {
        let sent = self.sent.load(Ordering::Acquire);
        (sent != u64::MAX).then_some(sent)
    }

    pub fn since_publisher_done(&self) -> Duration {
        if self.sent().is_none() {
            return Duration::ZERO;
        }
        let done = Duration::from_nanos(self.done_ns.load(Ordering::Acquire));
        self.since_start().saturating_sub(done)
    }

    pub fn since_start(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }
}

/// The merged result of one window.
#[derive(Debug, Clone)]
pub struct WindowResult {
    pub publisher: PublisherReport,
    /// Summed over subscribers (each subscriber is owed every message sent).
    pub delivery: Delivery,
    /// Delivery latency of every first copy, all subscribers.
    pub recorder: Recorder,
    /// From the start until the last new message reached any subscriber.
    pub last_delivery: Duration,
    /// The first error of any client (a lost connection, a protocol violation).
    pub error: Option<String>,
    /// Clients still busy when the ceiling passed (abandoned).
    pub stuck: usize,
    /// This process's CPU time during the window (all threads).
    pub process_cpu_ns: u64,
    pub clients: usize,
}

impl WindowResult {
    /// Deliveries per second, from the start of the window to the last delivery.
    pub fn delivered_per_s(&self) -> f64 {
        let elapsed = self
            .last_delivery
            .max(self.publisher.send_elapsed)
            .as_secs_f64();
        self.delivery.distinct as f64 / elapsed.max(1e-9)
    }

    /// Acknowledgements per second, from the start of the window to the last one.
    pub fn acked_per_s(&self) -> f64 {
        self.publisher.acked as f64 / self.publisher.ack_elapsed.as_secs_f64().max(1e-9)
    }

    /// Messages written per second while the publisher was sending.
    pub fn accepted_per_s(&self) -> f64 {
        self.publisher.sent as f64 / self.publisher.send_elapsed.as_secs_f64().max(1e-9)
    }
}

/// Connects the clients (before any clock), runs the window, and merges what they measured.
/// An `Err` means the window could not start (a client could not connect or subscribe).
pub async fn run_window(spec: WindowSpec) -> Result<WindowResult, String> {
    let spec = Arc::new(spec);
    let lanes = Lanes::shared();
    let mut subscribers = Vec::with_capacity(spec.subscribers);
    for index in 0..spec.subscribers {
        let spec = spec.clone();
        // The publisher takes lane 0; subscribers fill the lanes from the next one.
        let lane = index + 1;
        let conn = lanes.spawn(lane, async move {
            let id = format!("{}-s{index}", spec.client_prefix);
            let mut conn = Conn::connect(&spec.endpoint, &id).await?;
            conn.subscribe(&spec.topic, spec.sub_qos, spec.endpoint.handshake_timeout)
                .await?;
            Ok::<Conn, crate::protocol::conn::ConnError>(conn)
        });
        subscribers.push((lane, conn));
    }
    let mut connected = Vec::with_capacity(subscribers.len());
    for (lane, handle) in subscribers {
        let conn = handle
            .await
            .map_err(|e| format!("a subscriber's task failed: {e}"))?
            .map_err(|e| e.to_string())?;
        connected.push((lane, conn));
    }
    let publisher_id = format!("{}-p", spec.client_prefix);
    let endpoint = spec.endpoint.clone();
    let publisher_conn = lanes
        .spawn(
            0,
            async move { Conn::connect(&endpoint, &publisher_id).await },
        )
        .await
        .map_err(|e| format!("the publisher's task failed: {e}"))?
        .map_err(|e| e.to_string())?;
    Ok(measure(spec, publisher_conn, connected).await)
}

async fn measure(
    spec: Arc<WindowSpec>,
    publisher_conn: Conn,
    subscribers: Vec<(usize, Conn)>,
) -> WindowResult {
    let lanes = Lanes::shared();
    let clients = subscribers.len() + 1;
    let cpu_before = process_cpu_ns();
    let start = Instant::now() + START_LEAD;
    let shared = Arc::new(Shared::new(start, subscribers.len()));
    let expected = spec
        .rate_per_s
        .map_or(1 << 16, |r| (r * spec.duration.as_secs_f64()) as u64);
    let sub_tasks: Vec<_> = subscribers
        .into_iter()
        .enumerate()
        .map(|(index, (lane, conn))| {
            let (spec, shared) = (spec.clone(), shared.clone());
            lanes.spawn(lane, async move {
                let subscriber = Subscriber::new(conn, &spec, &shared, index, expected);
                let (conn, report) = subscriber.run().await;
                if let Some(conn) = conn {
                    conn.disconnect().await;
                }
                report
            })
        })
        .collect();
    let (pub_spec, pub_shared) = (spec.clone(), shared.clone());
    let mut pub_task = lanes.spawn(0, async move {
        let (conn, report) = Publisher::new(publisher_conn, &pub_spec, &pub_shared)
            .run(start)
            .await;
        if let Some(conn) = conn {
            conn.disconnect().await;
        }
        report
    });
    let give_up = start + spec.duration + spec.ceiling;
    let mut stuck = 0;
    let publisher = match tokio::time::timeout_at(give_up.into(), &mut pub_task).await {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => PublisherReport::failed(Some(format!("the publisher's task failed: {e}"))),
        Err(_) => {
            pub_task.abort();
            stuck += 1;
            PublisherReport::failed(Some("the publisher was still busy at the ceiling".into()))
        }
    };
    // A publisher that failed never said how many it sent; the subscribers then drain and stop.
    shared.publisher_done(publisher.sent);
    if publisher.error.is_some() {
        shared.aborted.store(true, Ordering::Relaxed);
    }
    let mut reports = Vec::with_capacity(sub_tasks.len());
    for mut task in sub_tasks {
        match tokio::time::timeout_at(give_up.into(), &mut task).await {
            Ok(Ok(report)) => reports.push(report),
            Ok(Err(e)) => reports.push(failed_subscriber(format!("a subscriber failed: {e}"))),
            Err(_) => {
                shared.aborted.store(true, Ordering::Relaxed);
                task.abort();
                stuck += 1;
            }
        }
    }
    merge(publisher, reports, stuck, clients, cpu_before)
}

fn merge(
    publisher: PublisherReport,
    reports: Vec<SubscriberReport>,
    stuck: usize,
    clients: usize,
    cpu_before: u64,
) -> WindowResult {
    let mut delivery = Delivery::default();
    let mut recorder = Recorder::new(false);
    let mut last_delivery = Duration::ZERO;
    let mut error = publisher.error.clone();
    for report in &reports {
        delivery.add(&report.ledger.settle(publisher.sent));
        recorder.merge(&report.recorder);
        last_delivery = last_delivery.max(report.last_delivery);
        if error.is_none() {
            error.clone_from(&report.error);
        }
    }
    WindowResult {
        publisher,
        delivery,
        recorder,
        last_delivery,
        error,
        stuck,
        process_cpu_ns: process_cpu_ns().saturating_sub(cpu_before),
        clients,
    }
}

fn failed_subscriber(error: String) -> SubscriberReport {
    SubscriberReport {
        ledger: Default::default(),
        recorder: Recorder::new(false),
        last_delivery: Duration::ZERO,
        error: Some(error),
    }
}
