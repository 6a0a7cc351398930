//! What every message carries (a sequence number, its send time, the window and the publisher
//! it belongs to) and the delivery ledger: distinct, duplicated, out-of-order and lost
//! messages, per subscriber or across a shared-subscription group.

/// Bytes of the stamp at the start of every payload: sequence (8), send time (8), window (4),
/// publisher (4).
pub const STAMP_BYTES: usize = 24;

/// What a message says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// 0, 1, 2 … per publisher and window.
    pub seq: u64,
    /// Nanoseconds from the run's epoch: the intended send time in open loop.
    pub sent_ns: u64,
    pub window: u32,
    /// The publisher's index in its window.
    pub publisher: u32,
}

/// Writes the stamp into the first [`STAMP_BYTES`] of `payload`.
#[inline]
pub fn stamp(payload: &mut [u8], stamp: Stamp) {
    payload[0..8].copy_from_slice(&stamp.seq.to_le_bytes());
    payload[8..16].copy_from_slice(&stamp.sent_ns.to_le_bytes());
    payload[16..20].copy_from_slice(&stamp.window.to_le_bytes());
    payload[20..24].copy_from_slice(&stamp.publisher.to_le_bytes());
}

/// Reads a stamp back; `None` when the payload is too short to carry one.
#[inline]
pub fn read_stamp(payload: &[u8]) -> Option<Stamp> {
    let head = payload.get(..STAMP_BYTES)?;
    Some(Stamp {
        seq: u64::from_le_bytes(head[0..8].try_into().ok()?),
        sent_ns: u64::from_le_bytes(head[8..16].try_into().ok()?),
        window: u32::from_le_bytes(head[16..20].try_into().ok()?),
        publisher: u32::from_le_bytes(head[20..24].try_into().ok()?),
    })
}

/// What one subscriber received from one publisher in one window.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// One bit per sequence number seen; grows in whole words as sequences arrive.
    seen: Vec<u64>,
    /// Messages received once (the first copy of each sequence number).
    pub distinct: u64,
    /// Copies of a sequence number already received.
    pub duplicates: u64,
    /// Messages that arrived after a higher sequence number had.
    pub out_of_order: u64,
    /// Messages of another window or without a readable stamp.
    pub strays: u64,
    next_expected: u64,
}

/// What a ledger amounts to once the publisher's count is known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    pub sent: u64,
    pub distinct: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub strays: u64,
}

impl Delivery {
    pub fn add(&mut self, other: &Delivery) {
        self.sent += other.sent;
        self.distinct += other.distinct;
        self.lost += other.lost;
        self.duplicates += other.duplicates;
        self.out_of_order += other.out_of_order;
        self.strays += other.strays;
    }

    /// Lost messages as a fraction of those sent (0 when nothing was sent).
    pub fn loss_fraction(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

impl Ledger {
    /// A ledger ready for about `expected` sequence numbers (it grows past that if needed).
    pub fn with_capacity(expected: u64) -> Ledger {
        Ledger {
            seen: Vec::with_capacity((expected / 64 + 1) as usize),
            ..Ledger::default()
        }
    }

    /// Records one arrival of `seq`; returns true when it is the first copy.
    #[inline]
    pub fn record(&mut self, seq: u64) -> bool {
        let word = (seq / 64) as usize;
        let bit = 1u64 << (seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & bit != 0 {
            self.duplicates += 1;
            return false;
        }
        self.seen[word] |= bit;
        self.distinct += 1;
        if seq < self.next_expected {
            self.out_of_order += 1;
        } else {
            self.next_expected = seq + 1;
        }
        true
    }

    #[inline]
    pub fn stray(&mut self) {
        self.strays += 1;
    }

    /// Whether every sequence number below `sent` has arrived.
    pub fn complete(&self, sent: u64) -> bool {
        self.distinct >= sent
    }

    /// The account against the `sent` messages the publisher wrote. Sequence numbers at or
    /// above `sent` cannot exist; any seen are counted as strays.
    pub fn settle(&self, sent: u64) -> Delivery {
        let beyond = self.count_at_or_above(sent);
        let distinct = self.distinct - beyond;
        Delivery {
            sent,
            distinct,
            lost: sent - distinct.min(sent),
            duplicates: self.duplicates,
            out_of_order: self.out_of_order,
            strays: self.strays + beyond,
        }
    }

    /// The account of a shared-subscription group: each of `sent` messages is owed once to the
    /// group, whichever member receives it. A message two members received is a duplicate.
    pub fn settle_group(members: &[&Ledger], sent: u64) -> Delivery {
        let words = members.iter().map(|l| l.seen.len()).max().unwrap_or(0);
        let mut union = Ledger {
            seen: vec![0; words],
            ..Ledger::default()
        };
        let mut received = 0;
        let mut duplicates = 0;
        let mut out_of_order = 0;
        let mut strays = 0;
        for member in members {
            for (into, word) in union.seen.iter_mut().zip(&member.seen) {
                *into |= word;
            }
            received += member.distinct;
            duplicates += member.duplicates;
            out_of_order += member.out_of_order;
            strays += member.strays;
        }
        union.distinct = union.seen.iter().map(|w| u64::from(w.count_ones())).sum();
        let settled = union.settle(sent);
        Delivery {
            duplicates: duplicates + (received - union.distinct),
            out_of_order,
            strays: strays + settled.strays,
            ..settled
        }
    }

    fn count_at_or_above(&self, sent: u64) -> u64 {
        let first_word = (sent / 64) as usize;
        if first_word >= self.seen.len() {
            return 0;
        }
        let partial = self.seen[first_word] & (!0u64 << (sent % 64));
        let rest: u64 = self.seen[first_word + 1..]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        u64::from(partial.count_ones()) + rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_short_payloads_have_none() {
        let mut payload = [0u8; 64];
        let s = Stamp {
            seq: 7,
            sent_ns: 123_456_789,
            window: 3,
            publisher: 9,
        };
        stamp(&mut payload, s);
        assert_eq!(read_stamp(&payload), Some(s));
        assert_eq!(read_stamp(&payload[..23]), None);
    }

    #[test]
    fn the_ledger_counts_loss_duplicates_and_reordering() {
        let mut ledger = Ledger::with_capacity(10);
        for seq in [0, 1, 2, 5, 3, 3, 6, 200] {
            ledger.record(seq);
        }
        ledger.stray();
        let d = ledger.settle(10);
        // 0 1 2 3 5 6 arrived of 0..10; 4 7 8 9 are lost; 3 came twice and after 5.
        assert_eq!(d.distinct, 6);
        assert_eq!(d.lost, 4);
        assert_eq!(d.duplicates, 1);
        assert_eq!(d.out_of_order, 1);
        // 200 was never sent: a stray, as is the unstamped one.
        assert_eq!(d.strays, 2);
        assert!((d.loss_fraction() - 0.4).abs() < 1e-12);
        assert!(!ledger.complete(10));
        assert!(ledger.complete(6));
    }

    #[test]
    fn a_group_owes_each_message_once_whichever_member_gets_it() {
        let mut a = Ledger::with_capacity(10);
        let mut b = Ledger::with_capacity(10);
        for seq in [0, 2, 4, 6] {
            a.record(seq);
        }
        for seq in [1, 3, 4] {
            b.record(seq);
        }
        let d = Ledger::settle_group(&[&a, &b], 8);
        // 0–4 and 6 arrived (4 at both members); 5 and 7 are lost.
        assert_eq!((d.sent, d.distinct, d.lost, d.duplicates), (8, 6, 2, 1));
    }

    #[test]
    fn a_complete_in_order_stream_is_clean() {
        let mut ledger = Ledger::with_capacity(1_000);
        for seq in 0..1_000 {
            assert!(ledger.record(seq));
        }
        let d = ledger.settle(1_000);
        assert_eq!(
            d,
            Delivery {
                sent: 1_000,
                distinct: 1_000,
                ..Delivery::default()
            }
        );
        let mut total = Delivery::default();
        total.add(&d);
        total.add(&d);
        assert_eq!(total.sent, 2_000);
        assert_eq!(Delivery::default().loss_fraction(), 0.0);
    }
}
