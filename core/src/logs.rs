//! Core's log events for a language's own logging (Python's `logging`, ...).
//!
//! Core reports through `tracing`: a hold acquired or released (debug), a
//! keep-alive renewal failing and a hold lost (warn), an etcd member failing
//! over and the watch stream re-created (info). [`forward`] installs one
//! process-wide subscriber that hands each event at or above [`set_level`] to a
//! sink on a thread of its own: never on the runtime's threads or the
//! caller's, so a slow sink (or one that needs Python's GIL) delays no lock.
//! At most [`QUEUE`] records wait for the sink; beyond that they are dropped
//! and counted ([`dropped`]).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// One event: its level, the module it came from, its message and its
/// fields (`lock`, `reason`, `fencing_token`, ...) as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The event's level.
    pub level: Level,
    /// The module that emitted it (`etcdlock::session`, ...).
    pub target: String,
    /// What happened.
    pub message: String,
    /// The event's fields, in order, as text.
    pub fields: Vec<(String, String)>,
}

/// Records waiting for the sink at most.
pub const QUEUE: usize = 4096;

// 0: off, 1: error, 2: warn, 3: info, 4: debug.
static MIN: AtomicU8 = AtomicU8::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static SENDER: OnceLock<SyncSender<Record>> = OnceLock::new();

fn rank(l: &Level) -> u8 {
    match *l {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

/// Forward events at `level` and above (`None`: none). Cheap; a binding
/// calls it whenever its language's logger level may have changed.
pub fn set_level(level: Option<Level>) {
    MIN.store(level.as_ref().map_or(0, rank), Ordering::Relaxed);
}

/// Records dropped because the sink fell [`QUEUE`] behind.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Install the subscriber (once per process; this copy of core's) handing
/// records to `sink` on a thread named `etcdlock-log`. False if a
/// subscriber was set already (then nothing changes).
pub fn forward(sink: impl Fn(Record) + Send + 'static) -> bool {
    if SENDER.get().is_some() {
        return false;
    }
    let (tx, rx) = sync_channel::<Record>(QUEUE);
    if tracing_subscriber::registry()
        .with(Forward)
        .try_init()
        .is_err()
    {
        return false;
    }
    let spawned = std::thread::Builder::new()
        .name("etcdlock-log".into())
        .spawn(move || {
            for r in rx {
                sink(r);
            }
        });
    spawned.is_ok() && SENDER.set(tx).is_ok()
}

struct Forward;

impl<S: Subscriber> Layer<S> for Forward {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if rank(&level) > MIN.load(Ordering::Relaxed) {
            return;
        }
        let Some(tx) = SENDER.get() else { return };
        let mut v = Fields::default();
        event.record(&mut v);
        let r = Record {
            level,
            target: event.metadata().target().to_string(),
            message: v.message,
            fields: v.fields,
        };
        if let Err(TrySendError::Full(_)) = tx.try_send(r) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::DEBUG)
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.message = v.to_string();
        } else {
            self.fields.push((f.name().to_string(), v.to_string()));
        }
    }

    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.message = format!("{v:?}");
        } else {
            self.fields.push((f.name().to_string(), format!("{v:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn events_at_or_above_the_level_reach_the_sink_in_order() {
        let (tx, rx) = channel();
        assert!(forward(move |r| tx.send(r).unwrap()));
        assert!(!forward(|_| {}), "one subscriber per process");
        set_level(Some(Level::INFO));
        tracing::debug!(lock = "a", "not forwarded at info");
        tracing::warn!(lock = "a", reason = %"LeaseExpired", "lock lost");
        tracing::info!(member = 3, "member failed");
        let a = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((a.level, a.message.as_str()), (Level::WARN, "lock lost"));
        assert_eq!(
            a.fields,
            vec![
                ("lock".to_string(), "a".to_string()),
                ("reason".to_string(), "LeaseExpired".to_string())
            ]
        );
        let b = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((b.level, b.fields[0].1.as_str()), (Level::INFO, "3"));
        set_level(Some(Level::DEBUG));
        tracing::debug!("now forwarded");
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap().message,
            "now forwarded"
        );
        set_level(None);
        tracing::error!("off");
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(dropped(), 0);
    }
}
