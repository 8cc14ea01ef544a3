//! Leadership as a loop, not a call (client-go's `LeaderElector`, Curator's
//! `LeaderSelector` with auto-requeue): campaign; while leader, the caller's
//! task runs with a token that is cancelled when leadership is lost or the
//! loop is stopped; once the task has ended, resign and campaign again
//! (unless told not to); on stop, resign. Who leads is reported alongside.
//!
//! Invariants (guarded by `tests/leader.rs`):
//! - one term at a time per loop: [`LeaderEvent::Elected`] never follows
//!   another `Elected` before that term's task has ended
//!   ([`Term::end`]), so one process never runs two tasks of one loop;
//! - a term's [`Term::cancelled`] fires on loss (the guard's local loss
//!   deadline, before etcd's lease expiry), on stop, and when the task ended;
//! - a term ends with exactly one of [`LeaderEvent::Lost`] or
//!   [`LeaderEvent::Resigned`]; the events end with
//!   [`LeaderEvent::Stopped`];
//! - one loop campaigns at most once per [`LeadOptions::retry`] after a
//!   term: a term shorter than that is followed by a pause.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::options::LockOptions;
use crate::recipes::election::Leadership;
use crate::records::Leader;
use crate::session::{Loss, Renewal};

/// How a leader loop campaigns.
#[derive(Debug, Clone)]
pub struct LeadOptions {
    /// Campaign again after a term ended (leadership lost, or the task
    /// returned) and after a failed campaign. `false`: the loop stops after
    /// its first term or its first failure. Default `true`.
    pub again: bool,
    /// The pause before campaigning again after a failed campaign (etcd
    /// unavailable, ...); also the shortest time from one election of this
    /// loop to its next campaign, so a task that returns or fails at once
    /// does not campaign in a tight loop. Default 1 s.
    pub retry: Duration,
    /// Options of each campaign: lock-delay, lease time, metadata. Its
    /// `timeout` and `cancel` are not used: a campaign waits until elected
    /// or stopped.
    pub campaign: LockOptions,
    /// The loop stops when this token is cancelled, as by
    /// [`LeaderLoop::stop`] (an application's shutdown token, a Node
    /// `AbortSignal`). One cancelled already: the loop never campaigns; its
    /// only event is [`LeaderEvent::Stopped`].
    pub stop: Option<CancellationToken>,
}

impl Default for LeadOptions {
    fn default() -> Self {
        LeadOptions {
            again: true,
            retry: Duration::from_secs(1),
            campaign: LockOptions::default(),
            stop: None,
        }
    }
}

/// One term of leadership: the leadership (guarded writes, fencing token)
/// and the token the task must honour.
#[derive(Debug, Clone)]
pub struct Term {
    leadership: Arc<Leadership>,
    cancel: CancellationToken,
    ended: CancellationToken,
}

impl Term {
    /// The leadership of this term: its fencing token, key, guarded
    /// operations, `proclaim`.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// Cancelled when the term is over for the task: leadership lost, the
    /// loop stopped, or [`Term::end`] called. The task should return soon
    /// after; the loop does not campaign again until it has ([`Term::end`]).
    pub fn cancelled(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The task of this term has ended: resign if still leader; the loop
    /// then campaigns again (or stops). Idempotent.
    pub fn end(&self) {
        self.cancel.cancel();
        self.ended.cancel();
    }
}

/// What a leader loop reports, in order.
#[derive(Debug, Clone)]
pub enum LeaderEvent {
    /// Elected: start the task for this term.
    Elected(Term),
    /// Keep-alives are failing while leader: the term ends at the local
    /// deadline unless one gets through (pause guarded work).
    RenewalFailing,
    /// Keep-alives got through again.
    RenewalRecovered,
    /// Leadership was lost; the term's token is cancelled. The loop waits
    /// for [`Term::end`] before it campaigns again.
    Lost(Loss),
    /// The term ended by resigning (the task ended, or the loop stopped).
    Resigned,
    /// A campaign failed (not a loss); the loop retries after
    /// [`LeadOptions::retry`] when [`LeadOptions::again`].
    CampaignFailed(Error),
    /// Who leads now (any candidate, this one included; `None`: nobody).
    Leader(Option<Leader>),
    /// The loop has stopped; no event follows.
    Stopped,
}

/// A running leader loop ([`Client::leader_loop`]). Dropping it stops the
/// loop (as [`LeaderLoop::stop`]).
#[derive(Debug)]
pub struct LeaderLoop {
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<LeaderEvent>>,
    stop: CancellationToken,
    /// Cancelled on drop: nobody is left to end a term's task.
    dropped: CancellationToken,
}

impl LeaderLoop {
    /// The next event; `None` after [`LeaderEvent::Stopped`].
    pub async fn next(&self) -> Option<LeaderEvent> {
        self.events.lock().await.recv().await
    }

    /// Stop: cancel the campaign, or cancel the current term's task, wait
    /// for it to end ([`Term::end`]) and resign. The events end with
    /// [`LeaderEvent::Stopped`].
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Run `task` for every term until the loop stops, and return then:
    /// each term's task gets the [`Term`] (await `term.cancelled()`); when
    /// it returns, the term ends. `on_event` sees every event in order.
    pub async fn run<F, Fut>(&self, mut task: F, mut on_event: impl FnMut(&LeaderEvent))
    where
        F: FnMut(Term) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        while let Some(ev) = self.next().await {
            on_event(&ev);
            let LeaderEvent::Elected(term) = ev else {
                continue;
            };
            let running = task(term.clone());
            tokio::pin!(running);
            loop {
                tokio::select! {
                    () = &mut running => break,
                    ev = self.next() => match ev {
                        Some(ev) => on_event(&ev),
                        // Stopped with the task running: impossible (the
                        // loop waits for the term's end), but never hang.
                        None => break,
                    },
                }
            }
            term.end();
        }
    }
}

impl Drop for LeaderLoop {
    fn drop(&mut self) {
        self.stop.cancel();
        self.dropped.cancel();
    }
}

/// The body of [`Client::leader_loop`].
pub(crate) fn leader_loop(
    client: &Client,
    name: &str,
    value: impl AsRef<[u8]>,
    opts: LeadOptions,
) -> Result<LeaderLoop> {
    crate::names::validate_name(name)?;
    client.check_open()?;
    opts.campaign.validate()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = opts
        .stop
        .as_ref()
        .map_or_else(CancellationToken::new, CancellationToken::child_token);
    let dropped = CancellationToken::new();
    let run = Run {
        dropped: dropped.clone(),
        client: client.clone(),
        name: name.to_string(),
        value: value.as_ref().to_vec(),
        opts,
        stop: stop.clone(),
        tx,
    };
    client.inner.handle.spawn(run.run());
    Ok(LeaderLoop {
        events: tokio::sync::Mutex::new(rx),
        stop,
        dropped,
    })
}

/// The loop's state, owned by its task.
struct Run {
    client: Client,
    name: String,
    value: Vec<u8>,
    opts: LeadOptions,
    stop: CancellationToken,
    dropped: CancellationToken,
    tx: mpsc::UnboundedSender<LeaderEvent>,
}

/// How a term ended.
enum TermEnd {
    Lost(Loss),
    TaskEnded,
    Stopped,
}

impl Run {
    fn send(&self, ev: LeaderEvent) {
        let _ = self.tx.send(ev);
    }

    async fn run(self) {
        let observing = self.stop.child_token();
        let observer = self.observe(observing.clone());
        let terms = async {
            loop {
                if self.stop.is_cancelled() || self.client.inner.closed.is_cancelled() {
                    break;
                }
                let again = match self.campaign().await {
                    Some(Ok(l)) => {
                        let elected = tokio::time::Instant::now();
                        self.term(l).await
                            && self
                                .pause(self.opts.retry.saturating_sub(elected.elapsed()))
                                .await
                    }
                    Some(Err(e)) => {
                        self.send(LeaderEvent::CampaignFailed(e));
                        self.opts.again && self.pause(self.opts.retry).await
                    }
                    None => false,
                };
                if !again {
                    break;
                }
            }
        };
        tokio::select! {
            () = terms => {}
            () = observer => {}
        }
        observing.cancel();
        self.send(LeaderEvent::Stopped);
    }

    /// `None` when stopped (or closed) while campaigning.
    async fn campaign(&self) -> Option<Result<Leadership>> {
        let opts = LockOptions {
            timeout: None,
            cancel: Some(self.stop.child_token()),
            ..self.opts.campaign.clone()
        };
        let r = self.client.campaign(&self.name, &self.value, opts).await;
        if self.stop.is_cancelled() {
            if let Ok(l) = &r {
                let _ = l.resign().await;
            }
            return None;
        }
        match r {
            Err(e) if e.code() == crate::error::ErrorCode::Closed => None,
            r => Some(r),
        }
    }

    /// Sleep `d` unless stopped first: whether to go on.
    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(d) => true,
            () = self.stop.cancelled() => false,
        }
    }

    /// One term: report it, follow renewal until it ends, wait for the
    /// task's end, resign. Whether to campaign again.
    async fn term(&self, leadership: Leadership) -> bool {
        let leadership = Arc::new(leadership);
        let term = Term {
            leadership: leadership.clone(),
            cancel: self.stop.child_token(),
            ended: CancellationToken::new(),
        };
        let mut renewal = Some(leadership.renewal_changes());
        self.send(LeaderEvent::Elected(term.clone()));
        let how = loop {
            tokio::select! {
                biased;
                loss = leadership.wait_lost() => match loss {
                    Some(loss) => break TermEnd::Lost(loss),
                    None => break TermEnd::TaskEnded,
                },
                () = term.ended.cancelled() => break TermEnd::TaskEnded,
                () = self.stop.cancelled() => break TermEnd::Stopped,
                ev = renewal_change(&mut renewal) => self.send(ev),
            }
        };
        term.cancel.cancel();
        if let TermEnd::Lost(loss) = &how {
            self.send(LeaderEvent::Lost(*loss));
        }
        // Never two tasks of one loop: the next campaign waits for this
        // term's task to return (or for nobody to be left to end it).
        tokio::select! {
            () = term.ended.cancelled() => {}
            () = self.dropped.cancelled() => {}
        }
        if !matches!(how, TermEnd::Lost(_)) {
            let _ = leadership.resign().await;
            self.send(LeaderEvent::Resigned);
        }
        self.opts.again && !matches!(how, TermEnd::Stopped) && !self.stop.is_cancelled()
    }

    /// Report who leads, as it changes, until `stop`; never ends by itself.
    async fn observe(&self, stop: CancellationToken) {
        let Ok(mut obs) = self.client.observe(&self.name) else {
            return std::future::pending().await;
        };
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return std::future::pending().await,
                n = obs.next() => n,
            };
            match next {
                Ok(l) => self.send(LeaderEvent::Leader(l)),
                Err(e) if e.code() == crate::error::ErrorCode::Closed => {
                    return std::future::pending().await
                }
                Err(_) => {
                    if !self.pause(self.opts.retry).await {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

/// The next change of the session's renewal as an event; pending forever
/// once the session is gone (`renewal` is then `None`).
async fn renewal_change(
    renewal: &mut Option<tokio::sync::watch::Receiver<Renewal>>,
) -> LeaderEvent {
    let Some(rx) = renewal.as_mut() else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        *renewal = None;
        return std::future::pending().await;
    }
    match *rx.borrow_and_update() {
        Renewal::Ok => LeaderEvent::RenewalRecovered,
        Renewal::Failing { .. } => LeaderEvent::RenewalFailing,
    }
}

impl crate::recipes::election::Election {
    /// Run for it in a loop: [`Client::leader_loop`].
    pub fn leader_loop(&self, value: impl AsRef<[u8]>, opts: LeadOptions) -> Result<LeaderLoop> {
        leader_loop(&self.client, &self.name, value, opts)
    }
}
