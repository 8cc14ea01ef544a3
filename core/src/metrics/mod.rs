//! What a client has done, for every language to expose (Micrometer meters in
//! Java, a dict in Python, an object in Node, a struct in C): acquisitions by
//! outcome with their wait time, current waiters and holds, hold time, losses
//! by reason, and the session keep-alive's round trip. Counters only grow;
//! gauges are "now". A snapshot is a few atomic loads, cheap enough to poll.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, LossReason, Result};

mod exposition;

pub use exposition::{MetricInfo, METRICS, WAIT_BUCKETS};

/// How an acquisition call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcquireResult {
    /// The lock (or permit) was taken.
    Acquired,
    /// `Timeout`: not taken within the caller's timeout (or held, for timeout zero).
    Timeout,
    /// `WouldBlock`: a try found it held.
    WouldBlock,
    /// `Cancelled` by the caller (a token, or the call's future dropped).
    Cancelled,
    /// Any other error (etcd unreachable, bad input, closed client, ...).
    Error,
}

impl AcquireResult {
    /// Every result, in a fixed order (the index of [`Metrics::acquisitions`]).
    pub const ALL: [AcquireResult; 5] = [
        AcquireResult::Acquired,
        AcquireResult::Timeout,
        AcquireResult::WouldBlock,
        AcquireResult::Cancelled,
        AcquireResult::Error,
    ];

    /// Lower-case name, the same in every language (a metric tag value).
    pub fn name(self) -> &'static str {
        match self {
            AcquireResult::Acquired => "acquired",
            AcquireResult::Timeout => "timeout",
            AcquireResult::WouldBlock => "would_block",
            AcquireResult::Cancelled => "cancelled",
            AcquireResult::Error => "error",
        }
    }

    pub(crate) fn of<T>(r: &Result<T>) -> AcquireResult {
        match r {
            Ok(_) => AcquireResult::Acquired,
            Err(e) => match e.code() {
                ErrorCode::Timeout => AcquireResult::Timeout,
                ErrorCode::WouldBlock => AcquireResult::WouldBlock,
                ErrorCode::Cancelled => AcquireResult::Cancelled,
                _ => AcquireResult::Error,
            },
        }
    }
}

/// Acquisitions that ended one way: how many, and the time their callers waited in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquisitions {
    /// The outcome.
    pub result: AcquireResult,
    /// Calls that ended this way.
    pub count: u64,
    /// The time those calls took, summed (from the call to its outcome).
    pub wait_total: Duration,
}

/// A snapshot of one client's metrics ([`crate::Client::metrics`]); its
/// encoding for the bindings: [`crate::records`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Metrics {
    /// One entry per [`AcquireResult::ALL`], in that order (encoded as an
    /// object keyed by result name: `{count, wait_seconds}`).
    #[serde(serialize_with = "crate::records::acquisitions")]
    pub acquisitions: [Acquisitions; 5],
    /// Acquisition calls in progress now.
    pub waiting: i64,
    /// Holds now (locks, permits, read holds, leaderships; a multi-lock counts each name).
    pub held: i64,
    /// How long the holds now have lasted, summed.
    #[serde(rename = "held_seconds", serialize_with = "crate::records::seconds")]
    pub held_duration: Duration,
    /// Holds that ended (released or lost).
    pub holds_ended: u64,
    /// How long the ended holds lasted, summed.
    #[serde(rename = "hold_seconds", serialize_with = "crate::records::seconds")]
    pub hold_total: Duration,
    /// Holds lost, per [`LossReason::ALL`] (same order).
    #[serde(serialize_with = "crate::records::lost")]
    pub lost: [(LossReason, u64); 4],
    /// Keep-alive round trips acknowledged.
    pub keepalives: u64,
    /// The last acknowledged keep-alive's round trip (None before the first).
    #[serde(
        rename = "keepalive_rtt_seconds",
        serialize_with = "crate::records::opt_seconds"
    )]
    pub keepalive_rtt: Option<Duration>,
    /// Acquisition calls per result (as [`Metrics::acquisitions`]) whose wait
    /// was at most each of [`WAIT_BUCKETS`] (not cumulative: a call counts in
    /// the first bucket it fits; the last entry is beyond every bucket).
    #[serde(serialize_with = "crate::records::histogram")]
    pub wait_histogram: [[u64; WAIT_BUCKETS.len() + 1]; 5],
    /// Requests that failed on an etcd member (it was then avoided for a while).
    pub member_failures: u64,
}

impl Metrics {
    /// The entry for `result`.
    pub fn acquisitions(&self, result: AcquireResult) -> Acquisitions {
        self.acquisitions[AcquireResult::ALL
            .iter()
            .position(|r| *r == result)
            .unwrap_or(0)]
    }

    /// Holds lost for `reason`.
    pub fn lost(&self, reason: LossReason) -> u64 {
        self.lost
            .iter()
            .find(|(r, _)| *r == reason)
            .map(|(_, n)| *n)
            .unwrap_or(0)
    }
}

/// The client's counters (lock-free; updated on the hot paths).
pub(crate) struct Recorder {
    epoch: Instant,
    count: [AtomicU64; 5],
    wait_nanos: [AtomicU64; 5],
    waiting: AtomicI64,
    held: AtomicI64,
    /// Sum over current holds of their start, in ns after `epoch`.
    held_since_sum: AtomicU64,
    holds_ended: AtomicU64,
    hold_nanos: AtomicU64,
    lost: [AtomicU64; 4],
    keepalives: AtomicU64,
    keepalive_rtt_nanos: AtomicU64,
    wait_histogram: [[AtomicU64; WAIT_BUCKETS.len() + 1]; 5],
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Recorder {
    pub(crate) fn new() -> Recorder {
        Recorder {
            epoch: Instant::now(),
            count: Default::default(),
            wait_nanos: Default::default(),
            waiting: AtomicI64::new(0),
            held: AtomicI64::new(0),
            held_since_sum: AtomicU64::new(0),
            holds_ended: AtomicU64::new(0),
            hold_nanos: AtomicU64::new(0),
            lost: Default::default(),
            keepalives: AtomicU64::new(0),
            keepalive_rtt_nanos: AtomicU64::new(0),
            wait_histogram: Default::default(),
        }
    }

    /// An acquisition call starts: counted as waiting until the returned
    /// token records its outcome (or is dropped: the call was cancelled).
    pub(crate) fn acquiring(&self) -> Acquiring<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Acquiring {
            rec: self,
            started: Instant::now(),
            done: false,
        }
    }

    /// A hold starts at `at`.
    pub(crate) fn hold_started(&self, at: Instant) {
        self.held.fetch_add(1, Ordering::Relaxed);
        self.held_since_sum.fetch_add(
            nanos(at.saturating_duration_since(self.epoch)),
            Ordering::Relaxed,
        );
    }

    /// A hold that started at `at` ended (`lost`: why, if it was lost).
    pub(crate) fn hold_ended(&self, at: Instant, lost: Option<LossReason>) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.held_since_sum.fetch_sub(
            nanos(at.saturating_duration_since(self.epoch)),
            Ordering::Relaxed,
        );
        self.holds_ended.fetch_add(1, Ordering::Relaxed);
        self.hold_nanos
            .fetch_add(nanos(at.elapsed()), Ordering::Relaxed);
        if let Some(r) = lost {
            if let Some(i) = LossReason::ALL.iter().position(|x| *x == r) {
                self.lost[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn keepalive(&self, rtt: Duration) {
        self.keepalives.fetch_add(1, Ordering::Relaxed);
        self.keepalive_rtt_nanos
            .store(nanos(rtt), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let acquisitions = std::array::from_fn(|i| Acquisitions {
            result: AcquireResult::ALL[i],
            count: self.count[i].load(Ordering::Relaxed),
            wait_total: Duration::from_nanos(self.wait_nanos[i].load(Ordering::Relaxed)),
        });
        let held = self.held.load(Ordering::Relaxed);
        let since = self.held_since_sum.load(Ordering::Relaxed);
        let now = nanos(self.epoch.elapsed());
        let held_duration = Duration::from_nanos(
            (now as u128 * held.max(0) as u128)
                .saturating_sub(since as u128)
                .min(u64::MAX as u128) as u64,
        );
        let rtt = self.keepalive_rtt_nanos.load(Ordering::Relaxed);
        let keepalives = self.keepalives.load(Ordering::Relaxed);
        Metrics {
            acquisitions,
            waiting: self.waiting.load(Ordering::Relaxed),
            held,
            held_duration,
            holds_ended: self.holds_ended.load(Ordering::Relaxed),
            hold_total: Duration::from_nanos(self.hold_nanos.load(Ordering::Relaxed)),
            lost: std::array::from_fn(|i| {
                (LossReason::ALL[i], self.lost[i].load(Ordering::Relaxed))
            }),
            keepalives,
            keepalive_rtt: (keepalives > 0).then(|| Duration::from_nanos(rtt)),
            wait_histogram: std::array::from_fn(|r| {
                std::array::from_fn(|b| self.wait_histogram[r][b].load(Ordering::Relaxed))
            }),
            member_failures: 0,
        }
    }
}

/// One acquisition call in progress (see [`Recorder::acquiring`]).
pub(crate) struct Acquiring<'a> {
    rec: &'a Recorder,
    started: Instant,
    done: bool,
}

impl Acquiring<'_> {
    pub(crate) fn finish<T>(mut self, r: &Result<T>) {
        self.record(AcquireResult::of(r));
    }

    fn record(&mut self, result: AcquireResult) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let i = AcquireResult::ALL
            .iter()
            .position(|x| *x == result)
            .unwrap_or(4);
        self.rec.waiting.fetch_sub(1, Ordering::Relaxed);
        self.rec.count[i].fetch_add(1, Ordering::Relaxed);
        let waited = self.started.elapsed();
        self.rec.wait_nanos[i].fetch_add(nanos(waited), Ordering::Relaxed);
        let b = WAIT_BUCKETS
            .iter()
            .position(|le| waited.as_secs_f64() <= *le)
            .unwrap_or(WAIT_BUCKETS.len());
        self.rec.wait_histogram[i][b].fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Acquiring<'_> {
    /// The call's future was dropped before it ended: a cancellation.
    fn drop(&mut self) {
        self.record(AcquireResult::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn outcomes_waits_holds_and_losses_add_up() {
        let r = Recorder::new();
        let a = r.acquiring();
        assert_eq!(r.snapshot().waiting, 1);
        a.finish(&Ok::<(), Error>(()));
        r.acquiring()
            .finish(&Err::<(), _>(Error::new(ErrorCode::Timeout, "t")));
        r.acquiring()
            .finish(&Err::<(), _>(Error::new(ErrorCode::WouldBlock, "w")));
        r.acquiring()
            .finish(&Err::<(), _>(Error::new(ErrorCode::Unavailable, "u")));
        drop(r.acquiring()); // a dropped call: cancelled
        let t0 = Instant::now();
        r.hold_started(t0);
        r.hold_started(t0);
        let m = r.snapshot();
        assert_eq!(m.waiting, 0);
        for (res, n) in [
            (AcquireResult::Acquired, 1),
            (AcquireResult::Timeout, 1),
            (AcquireResult::WouldBlock, 1),
            (AcquireResult::Cancelled, 1),
            (AcquireResult::Error, 1),
        ] {
            assert_eq!(m.acquisitions(res).count, n, "{}", res.name());
        }
        assert_eq!(m.held, 2);
        r.hold_ended(t0, None);
        r.hold_ended(t0, Some(LossReason::KeyDeleted));
        let m = r.snapshot();
        assert_eq!(
            (m.held, m.holds_ended, m.held_duration),
            (0, 2, Duration::ZERO)
        );
        assert_eq!(m.lost(LossReason::KeyDeleted), 1);
        assert_eq!(m.lost(LossReason::LeaseExpired), 0);
        assert_eq!(m.keepalive_rtt, None);
        r.keepalive(Duration::from_millis(3));
        assert_eq!(r.snapshot().keepalive_rtt, Some(Duration::from_millis(3)));
        assert_eq!(
            AcquireResult::ALL.map(AcquireResult::name),
            ["acquired", "timeout", "would_block", "cancelled", "error"]
        );
    }
}
