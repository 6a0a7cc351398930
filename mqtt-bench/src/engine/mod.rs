//! One measured window against one broker: every client connects and subscribes before the
//! clock starts, P publishers and S subscribers run on the per-core lanes, the subscribers
//! drain what was sent, and their ledgers and histograms are merged once at the end. Beside it,
//! the lanes' own CPU time (what the client cost), and the connection storms of [`storm`].

pub mod lanes;
pub mod publisher;
pub mod retained;
pub mod shared;
pub mod storm;
pub mod subscriber;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::lanes::Lanes;
use common::recorder::Recorder;

use self::lanes::LaneClock;
use self::publisher::{Publisher, PublisherReport};
pub use self::shared::Shared;
use self::subscriber::{Subscriber, SubscriberReport};
use crate::gate::Gate;
use crate::message::{Delivery, Ledger};
use crate::protocol::conn::{Conn, ConnError, ConnectOptions, Endpoint, Session};

/// How long before the window opens the clients are started, so they begin together.
const START_LEAD: Duration = Duration::from_millis(5);

/// How the subscribers of a window are owed the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owed {
    /// Every subscriber is owed every message (fan-out, wildcards).
    Each,
    /// The subscribers are one shared-subscription group: each message is owed once to the
    /// group, whichever member gets it.
    Group,
}

/// A subscriber that leaves for a while and resumes its session (persistent sessions).
#[derive(Debug, Clone, Copy)]
pub struct Away {
    /// How far into the window it disconnects.
    pub after: Duration,
    /// How long it stays away.
    pub away: Duration,
}

/// Everything one window needs to know.
#[derive(Debug, Clone)]
pub struct WindowSpec {
    pub endpoint: Endpoint,
    /// One topic per publisher (inside the run's prefix and this window alone, so no message
    /// of another window can be counted in it).
    pub pub_topics: Vec<String>,
    /// One filter per subscriber (a topic, a wildcard, or `$share/GROUP/…`).
    pub sub_filters: Vec<String>,
    pub owed: Owed,
    pub pub_qos: u8,
    pub sub_qos: u8,
    /// Most QoS 1/2 messages a publisher leaves unacknowledged (lowered to the broker's
    /// receive maximum when it announces one).
    pub inflight: usize,
    /// The payload every message carries (its first bytes are overwritten by the stamp).
    pub payload: Bytes,
    pub duration: Duration,
    /// Open-loop publish rate across all publishers; `None` publishes as fast as the broker
    /// takes messages.
    pub rate_per_s: Option<f64>,
    /// Open loop: yield instead of sleeping for waits under 2 ms (the latency scenario).
    pub precise_pacing: bool,
    /// How long past the end of the window the clients may take before it is a timeout.
    pub ceiling: Duration,
    /// Subscribers stop waiting for missing messages after this long with none arriving.
    pub drain_quiet: Duration,
    /// Closed loop: most messages the publishers may be ahead of the slowest subscriber (or
    /// of the group), so a broker's queues stay bounded and latency stays a measure of the
    /// broker, not of a backlog the client piled up. `None`: no bound.
    pub backlog: Option<u64>,
    /// `--read-coalesce`: how long an idle lane may wait before it sleeps during the window,
    /// where [`WindowSpec::idle_wait`] allows it.
    pub read_coalesce: Duration,
    /// MQTT 5: publishers send under a topic alias when the broker allows one.
    pub topic_alias: bool,
    /// The subscribers' session (persistent sessions ask for one that outlives a disconnect).
    pub session: Session,
    pub away: Option<Away>,
    pub window_id: u32,
    /// Client identifiers are `{client_prefix}-pN` and `{client_prefix}-sN`.
    pub client_prefix: String,
    /// Stamps count nanoseconds from here (the same clock for publishers and subscribers).
    pub epoch: Instant,
}

impl WindowSpec {
    pub fn publishers(&self) -> usize {
        self.pub_topics.len()
    }

    pub fn subscribers(&self) -> usize {
        self.sub_filters.len()
    }

    pub fn subscriber_id(&self, index: usize) -> String {
        format!("{}-s{index}", self.client_prefix)
    }

    /// How long the window's idle lanes wait before they sleep ([`Lanes::coalesce`]).
    pub fn idle_wait(&self) -> Duration {
        idle_wait(
            self.read_coalesce,
            self.rate_per_s,
            self.owed,
            self.subscribers(),
        )
    }
}

/// `configured` in a closed-loop window where every message goes to several subscribers of
/// the client (fan-out, many-to-many): one message then wakes the client once, not once per
/// subscriber. Zero elsewhere: in a paced window its latency is the figure; a shared group or
/// a single subscriber gets each message on one socket, and there waiting only slows the
/// acknowledgements QoS 1 and 2 wait for.
fn idle_wait(
    configured: Duration,
    rate_per_s: Option<f64>,
    owed: Owed,
    subscribers: usize,
) -> Duration {
    if rate_per_s.is_none() && owed == Owed::Each && subscribers > 1 {
        configured
    } else {
        Duration::ZERO
    }
}

/// The merged result of one window.
#[derive(Debug, Clone)]
pub struct WindowResult {
    /// Every publisher's report, merged: counts summed, histograms pooled.
    pub publisher: PublisherReport,
    /// Summed over subscribers (each owed every message), or once for a group.
    pub delivery: Delivery,
    /// Delivery latency of every first copy, all subscribers.
    pub recorder: Recorder,
    /// From the start until the last new message reached any subscriber.
    pub last_delivery: Duration,
    /// The first error of any client (a lost connection, a protocol violation).
    pub error: Option<String>,
    /// Clients still busy when the ceiling passed (abandoned).
    pub stuck: usize,
    /// The client's own CPU during the window: its lanes' threads.
    pub lanes: lanes::LaneUsage,
    pub clients: usize,
    /// Distinct messages each subscriber received, in order (a group's balance).
    pub per_subscriber: Vec<u64>,
    /// Persistent sessions: what the resumed session looked like.
    pub resumed: Vec<subscriber::Resumed>,
    /// Whether the publishers sent under a topic alias.
    pub topic_alias: bool,
    /// The in-flight window the publishers kept (after the broker's receive maximum).
    pub inflight: usize,
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

    /// Messages written per second while the publishers were sending.
    pub fn accepted_per_s(&self) -> f64 {
        self.publisher.sent as f64 / self.publisher.send_elapsed.as_secs_f64().max(1e-9)
    }
}

/// Connects the clients (before any clock), meets the start barrier (`gate`), runs the window,
/// and merges what they measured. An `Err` means the window could not start (a client could
/// not connect or subscribe, or the barrier failed); it keeps the connection error, so a
/// refusal can be told apart.
pub async fn run_window(spec: WindowSpec, gate: &mut Gate) -> Result<WindowResult, ConnError> {
    let spec = Arc::new(spec);
    let lanes = Lanes::shared();
    let publishers = spec.publishers();
    let mut pending = Vec::with_capacity(spec.subscribers());
    for index in 0..spec.subscribers() {
        let spec = spec.clone();
        // Publishers take the first lanes; subscribers fill the lanes after them.
        let lane = publishers + index;
        pending.push(lanes.spawn(lane, async move {
            let id = spec.subscriber_id(index);
            let options = ConnectOptions {
                session: spec.session,
                ..ConnectOptions::clean(&id, publishers + index)
            };
            let (mut conn, _) = Conn::connect(&spec.endpoint, &options).await?;
            let filter = &spec.sub_filters[index];
            conn.subscribe(&[(filter, spec.sub_qos)], spec.endpoint.handshake_timeout)
                .await?;
            Ok::<(usize, Conn), ConnError>((lane, conn))
        }));
    }
    let mut subscribers = Vec::with_capacity(pending.len());
    for handle in pending {
        subscribers.push(handle.await.map_err(|e| task_failed("a subscriber", e))??);
    }
    let mut pub_conns = Vec::with_capacity(publishers);
    for index in 0..publishers {
        let spec = spec.clone();
        let id = format!("{}-p{index}", spec.client_prefix);
        let handle = lanes.spawn(index, async move {
            let options = ConnectOptions::clean(&id, index);
            Conn::connect(&spec.endpoint, &options).await
        });
        let (conn, handshake) = handle.await.map_err(|e| task_failed("a publisher", e))??;
        pub_conns.push((index, conn, handshake.connack));
    }
    if !gate.open().await {
        return Err(ConnError::Unexpected {
            addr: "mqtt-bench".into(),
            what: gate.stopped_message(),
        });
    }
    Ok(measure(spec, pub_conns, subscribers).await)
}

fn task_failed(who: &str, e: tokio::task::JoinError) -> ConnError {
    ConnError::Unexpected {
        addr: "mqtt-bench".into(),
        what: format!("failure: {who}'s task failed ({e})"),
    }
}

async fn measure(
    spec: Arc<WindowSpec>,
    publishers: Vec<(usize, Conn, Box<crate::protocol::codec::ConnAckInfo>)>,
    subscribers: Vec<(usize, Conn)>,
) -> WindowResult {
    let lanes = Lanes::shared();
    let clients = subscribers.len() + publishers.len();
    let _coalescing = lanes.coalesce(spec.idle_wait());
    let clock = LaneClock::start().await;
    let start = Instant::now() + START_LEAD;
    let shared = Arc::new(Shared::new(
        start,
        publishers.len(),
        subscribers.len(),
        spec.owed,
    ));
    let expected = spec.rate_per_s.map_or(1 << 16, |r| {
        (r * spec.duration.as_secs_f64()) as u64 / publishers.len().max(1) as u64
    });
    let sub_tasks: Vec<_> = subscribers
        .into_iter()
        .enumerate()
        .map(|(index, (lane, conn))| {
            let (spec, shared) = (spec.clone(), shared.clone());
            lanes.spawn(lane, async move {
                let subscriber = Subscriber::new(conn, &spec, &shared, index, expected, lane);
                let (conn, report) = subscriber.run(start).await;
                if let Some(conn) = conn {
                    conn.disconnect().await;
                }
                report
            })
        })
        .collect();
    let pub_tasks: Vec<_> = publishers
        .into_iter()
        .map(|(index, conn, connack)| {
            let (spec, shared) = (spec.clone(), shared.clone());
            lanes.spawn(index, async move {
                let publisher = Publisher::new(conn, &connack, &spec, &shared, index);
                let (conn, report) = publisher.run(start).await;
                if let Some(conn) = conn {
                    conn.disconnect().await;
                }
                report
            })
        })
        .collect();
    let give_up = start + spec.duration + spec.ceiling;
    let mut stuck = 0;
    let mut reports = Vec::with_capacity(pub_tasks.len());
    for (index, mut task) in pub_tasks.into_iter().enumerate() {
        let report = match tokio::time::timeout_at(give_up.into(), &mut task).await {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => {
                PublisherReport::failed(Some(format!("the publisher's task failed: {e}")))
            }
            Err(_) => {
                task.abort();
                stuck += 1;
                PublisherReport::failed(Some("the publisher was still busy at the ceiling".into()))
            }
        };
        // A publisher that failed never said how many it sent; the subscribers then drain.
        shared.publisher_done(index, report.sent);
        if report.error.is_some() {
            shared.abort();
        }
        reports.push(report);
    }
    let mut sub_reports = Vec::with_capacity(sub_tasks.len());
    for mut task in sub_tasks {
        match tokio::time::timeout_at(give_up.into(), &mut task).await {
            Ok(Ok(report)) => sub_reports.push(report),
            Ok(Err(e)) => sub_reports.push(SubscriberReport::failed(
                format!("a subscriber failed: {e}"),
                reports.len(),
            )),
            Err(_) => {
                shared.abort();
                task.abort();
                stuck += 1;
            }
        }
    }
    let lanes_used = clock.finish(start).await;
    merge(&spec, reports, sub_reports, stuck, clients, lanes_used)
}

fn merge(
    spec: &WindowSpec,
    publishers: Vec<PublisherReport>,
    subscribers: Vec<SubscriberReport>,
    stuck: usize,
    clients: usize,
    lanes: lanes::LaneUsage,
) -> WindowResult {
    let sent: Vec<u64> = publishers.iter().map(|p| p.sent).collect();
    let mut delivery = Delivery::default();
    match spec.owed {
        Owed::Each => {
            for report in &subscribers {
                for (ledger, sent) in report.ledgers.iter().zip(&sent) {
                    delivery.add(&ledger.settle(*sent));
                }
            }
        }
        Owed::Group => {
            for (p, sent) in sent.iter().enumerate() {
                let members: Vec<&Ledger> = subscribers
                    .iter()
                    .filter_map(|r| r.ledgers.get(p))
                    .collect();
                delivery.add(&Ledger::settle_group(&members, *sent));
            }
        }
    }
    let mut recorder = Recorder::new(false);
    let mut last_delivery = Duration::ZERO;
    let mut error = publishers.iter().find_map(|p| p.error.clone());
    for report in &subscribers {
        recorder.merge(&report.recorder);
        last_delivery = last_delivery.max(report.last_delivery);
        if error.is_none() {
            error.clone_from(&report.error);
        }
    }
    let topic_alias = publishers.iter().any(|p| p.topic_alias);
    let inflight = publishers.iter().map(|p| p.inflight).max().unwrap_or(0);
    WindowResult {
        publisher: PublisherReport::merge(publishers),
        delivery,
        recorder,
        last_delivery,
        error,
        stuck,
        lanes,
        clients,
        per_subscriber: subscribers
            .iter()
            .map(|r| r.ledgers.iter().map(|l| l.distinct).sum())
            .collect(),
        resumed: subscribers
            .iter()
            .filter_map(|r| r.resumed.clone())
            .collect(),
        topic_alias,
        inflight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_closed_loop_windows_owing_each_message_to_several_subscribers_read_in_batches() {
        let configured = Duration::from_micros(500);
        // fan-out and many-to-many, closed loop
        assert_eq!(idle_wait(configured, None, Owed::Each, 50), configured);
        // paced (the latency scenario, --rate, the QoS 0 sweep), a shared group, one subscriber
        let paced = idle_wait(configured, Some(10_000.0), Owed::Each, 50);
        assert_eq!(paced, Duration::ZERO);
        assert_eq!(idle_wait(configured, None, Owed::Group, 5), Duration::ZERO);
        assert_eq!(idle_wait(configured, None, Owed::Each, 1), Duration::ZERO);
    }
}
