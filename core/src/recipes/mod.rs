//! The recipes built on the engine: mutex, read-write lock, semaphore,
//! multi-lock, election and its leader loop, latch and barrier, run-once,
//! and reentrant holds. Each is the keys it writes and the rule for whose
//! turn it is; the engine does the queueing and the waiting.
//!
//! It may call: engine, client, session, transport, watch, guard, names,
//! options, meta, metrics, error. Nothing below it names a recipe.
//!
//! Each recipe is a public value built from a client (`Mutex::new(&client,
//! name)`, as Go's `concurrency.NewMutex(session, pfx)`), one type per file;
//! the calls on `Client` below are one-line delegations to the same code.

pub(crate) mod election;
pub(crate) mod leader;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod once;
pub(crate) mod reentry;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod sync;

use std::future::Future;
use std::time::Duration;

use crate::client::Client;
use crate::engine::pipeline::{acquire, Recipe, Request};
use crate::error::Result;
use crate::guard::Guard;
use crate::options::LockOptions;
use crate::recipes::election::Leadership;
use crate::recipes::election::Observer;
use crate::recipes::leader::LeadOptions;
use crate::recipes::leader::LeaderLoop;
use crate::recipes::multi::MultiGuard;
use crate::recipes::once::OnceHold;
use crate::recipes::once::OnceRecord;
use crate::recipes::sync::Barrier;
use crate::recipes::sync::Latch;
use crate::records::status;
use crate::records::Leader;
use crate::records::Status;

/// Convenience calls on [`Client`]: each a one-line delegation.
impl Client {
    /// Wait for the lock `name` and hold it. Waiters are served in the order they
    /// arrived: by create_revision in etcd, and in call order among this
    /// client's waiters, who queue in the client and keep at most
    /// [`crate::QUEUED_PER_CLIENT`] keys in etcd's queue at a time. Dropping the
    /// future cancels the wait and removes the waiter's key.
    ///
    /// ```no_run
    /// # async fn demo() -> etcdlock::Result<()> {
    /// let client = etcdlock::Client::connect(etcdlock::ClientOptions::new(["127.0.0.1:2379"])).await?;
    /// let guard = client.lock("orders").await?;
    /// guard.put("stock", "299").await?; // applied by etcd only while we hold the lock
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock<'a>(&'a self, name: &'a str) -> impl Future<Output = Result<Guard>> + Send + 'a {
        acquire(
            self,
            Request::new(name, LockOptions::default(), Recipe::MUTEX),
        )
    }

    /// [`Client::lock`] with a timeout and/or a cancellation token. A timeout
    /// of zero means one try and no wait: the lock is taken if it is free, else
    /// `Timeout`, and nothing is written to etcd when it is held.
    pub fn lock_with<'a>(
        &'a self,
        name: &'a str,
        opts: LockOptions,
    ) -> impl Future<Output = Result<Guard>> + Send + 'a {
        acquire(self, Request::new(name, opts, Recipe::MUTEX))
    }

    /// Take the lock if it is free; `WouldBlock` if someone holds it or waits for
    /// it. Writes nothing to etcd in that case (one Txn that compares the
    /// prefix), so followers that poll cost etcd a read, not a put and a delete.
    pub fn try_lock<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Future<Output = Result<Guard>> + Send + 'a {
        acquire(
            self,
            Request::trying(name, LockOptions::default(), Recipe::MUTEX),
        )
    }

    /// [`Client::try_lock`] with acquisition options (`lock_delay`,
    /// `lease_time`, `metadata`; a timeout or cancel token is ignored: a try
    /// never waits).
    pub fn try_lock_with<'a>(
        &'a self,
        name: &'a str,
        opts: LockOptions,
    ) -> impl Future<Output = Result<Guard>> + Send + 'a {
        acquire(self, Request::trying(name, opts, Recipe::MUTEX))
    }

    /// Take the read side of the read-write lock `name`: shared with other
    /// readers, excluded by writers ([`Client::lock`] on the same name is the
    /// write side). Waits (FIFO) as [`Client::lock_with`]; timeout zero is one
    /// try that writes nothing while a writer holds or waits.
    pub async fn read_lock(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        acquire(self, Request::new(name, opts, Recipe::Reader)).await
    }

    /// Take one of `permits` permits of the semaphore `name`, waiting (FIFO)
    /// as [`Client::lock_with`] does; timeout zero is one try. A permit is a
    /// [`Guard`]: fencing token, loss signal, guarded operations, `unlock`.
    ///
    /// ```no_run
    /// # async fn demo(client: etcdlock::Client) -> etcdlock::Result<()> {
    /// let permit = client.acquire_permit("transcoders", 3, etcdlock::LockOptions::default()).await?;
    /// // at most 3 holders run this at once, cluster-wide
    /// permit.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_permit(
        &self,
        name: &str,
        permits: u32,
        opts: LockOptions,
    ) -> Result<Guard> {
        semaphore::acquire_permit(self, name, permits, opts).await
    }

    /// Lock every name in `names` together (FIFO on each, no deadlock with
    /// other multi-locks or single locks); timeout zero is one try. At most
    /// [`MAX_MULTI`](crate::MAX_MULTI) distinct names.
    pub async fn lock_many(&self, names: &[&str], opts: LockOptions) -> Result<MultiGuard> {
        multi::lock_many(self, names, opts).await
    }

    /// Campaign for leadership of `name` with `value`, waiting (FIFO, as
    /// [`Client::lock_with`]) until elected. Timeout zero: one try.
    pub async fn campaign(
        &self,
        name: &str,
        value: impl AsRef<[u8]>,
        opts: LockOptions,
    ) -> Result<Leadership> {
        election::campaign(self, name, value, opts).await
    }

    /// The current leader of `name`, or `None` if nobody leads.
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>> {
        election::leader(self, name).await
    }

    /// Follow the leadership of `name`: each [`Observer::next`] returns the
    /// leader (or `None`: no leader) as it changes, starting with the current
    /// state. A new proclamation by the same leader is a change.
    pub fn observe(&self, name: &str) -> Result<Observer> {
        election::observe(self, name)
    }

    /// Start a leader loop for election `name` with `value` as the
    /// proclamation: see [`LeaderLoop`] and [`LeaderEvent`](crate::LeaderEvent). The loop runs
    /// on the client's runtime until stopped or the client is closed.
    pub fn leader_loop(
        &self,
        name: &str,
        value: impl AsRef<[u8]>,
        opts: LeadOptions,
    ) -> Result<LeaderLoop> {
        leader::leader_loop(self, name, value, opts)
    }

    /// Take the run-once record of job `name` until `now + at_most` if it is
    /// free now (system clock): `Ok(None)` if another node holds it. Never
    /// waits for it. See [`Client::once_take_at`].
    pub async fn once_take(&self, name: &str, at_most: Duration) -> Result<Option<OnceHold>> {
        once::once_take(self, name, at_most).await
    }

    /// Take the run-once record of job `name` until `lock_until_ms` if it is
    /// free at `now_ms` (no record, or its `lock_until_ms` not after
    /// `now_ms`): at most two requests (a compare-and-swap, and one more when
    /// an expired record is replaced). `Ok(None)` if it is taken, also when
    /// another node took it between our read and our write. `lock_until_ms`
    /// must be after `now_ms`.
    pub async fn once_take_at(
        &self,
        name: &str,
        now_ms: i64,
        lock_until_ms: i64,
    ) -> Result<Option<OnceHold>> {
        once::once_take_at(self, name, now_ms, lock_until_ms).await
    }

    /// Finish a hold (system clock): keep the job taken until
    /// `locked_at + at_least` if that is still ahead, else delete the record.
    /// See [`Client::once_finish_at`].
    pub async fn once_finish(&self, hold: &OnceHold, at_least: Duration) -> Result<bool> {
        once::once_finish(self, hold, at_least).await
    }

    /// Finish a hold: if `at_least_until_ms` is after `now_ms`, lower the
    /// record's `lock_until_ms` to it (never raise it), else delete the
    /// record. One Txn, applied only while the record is still this hold's
    /// (same revision): `Ok(false)` if it is not (it expired and another node
    /// took the job, or it was finished already), and nothing is changed.
    pub async fn once_finish_at(
        &self,
        hold: &OnceHold,
        now_ms: i64,
        at_least_until_ms: i64,
    ) -> Result<bool> {
        once::once_finish_at(self, hold, now_ms, at_least_until_ms).await
    }

    /// Extend a hold (system clock) to `now + at_most`. See
    /// [`Client::once_extend_at`].
    pub async fn once_extend(
        &self,
        hold: &OnceHold,
        at_most: Duration,
    ) -> Result<Option<OnceHold>> {
        once::once_extend(self, hold, at_most).await
    }

    /// Extend a hold: set `lock_until_ms` (if the hold is still this one and
    /// has not expired at `now_ms`). Returns the new hold (a new revision:
    /// the old one no longer finishes or extends anything), or `Ok(None)`.
    pub async fn once_extend_at(
        &self,
        hold: &OnceHold,
        now_ms: i64,
        lock_until_ms: i64,
    ) -> Result<Option<OnceHold>> {
        once::once_extend_at(self, hold, now_ms, lock_until_ms).await
    }

    /// The run-once record of job `name`, if any (taken or expired).
    pub async fn once_record(&self, name: &str) -> Result<Option<OnceRecord>> {
        once::once_record(self, name).await
    }

    /// [`Client::lock_with`], reentrant for `owner`: if `owner` holds `name`
    /// (taken with this method), another handle of that hold at once (no
    /// request; same key and fencing token); the lock is released when every
    /// handle is unlocked or dropped. A hold that was lost is not re-entered
    /// (`LockLost`, until its handles are unlocked or dropped). Other owners
    /// wait as for [`Client::lock_with`].
    pub async fn lock_reentrant(&self, name: &str, owner: u64, opts: LockOptions) -> Result<Guard> {
        reentry::lock_reentrant(self, name, owner, opts).await
    }

    /// [`Client::try_lock_with`], reentrant for `owner` as
    /// [`Client::lock_reentrant`]: a re-entry never waits; another owner's
    /// hold is `WouldBlock`.
    pub async fn try_lock_reentrant(
        &self,
        name: &str,
        owner: u64,
        opts: LockOptions,
    ) -> Result<Guard> {
        reentry::try_lock_reentrant(self, name, owner, opts).await
    }

    /// Open the count-down latch `name` with `count` (created with it if it
    /// does not exist; every process opens it with the same count, else
    /// `InvalidArgument`, as a semaphore refuses another permit count).
    /// [`Latch::count_down`] lowers the count, [`Latch::wait`] waits for zero.
    /// A latch at zero stays at zero while any client has it open (a late
    /// [`Latch::wait`] returns at once; `count_down` is a no-op); once every
    /// handle is closed its keys expire within the TTL and the name starts
    /// afresh.
    ///
    /// ```no_run
    /// # async fn demo(client: etcdlock::Client) -> etcdlock::Result<()> {
    /// let latch = client.latch("nightly-shards", 3).await?;
    /// latch.count_down().await?; // each of 3 workers, when its shard is done
    /// latch.wait(Some(std::time::Duration::from_secs(60))).await?; // the reducer
    /// latch.close();
    /// # Ok(()) }
    /// ```
    pub async fn latch(&self, name: &str, count: u64) -> Result<Latch> {
        sync::latch(self, name, count).await
    }

    /// Open the barrier `name` for `parties` parties: [`Barrier::wait`]
    /// returns in every party at once, when the `parties`-th has arrived. Every
    /// process opens it with the same number (else `InvalidArgument`). A party
    /// that dies while waiting frees its place for another. Once released the
    /// barrier is finished: a party that arrives after is refused
    /// (`InvalidArgument`) until every handle is closed and its keys have
    /// expired; use a new name per round.
    pub async fn barrier(&self, name: &str, parties: u32) -> Result<Barrier> {
        sync::barrier(self, name, parties).await
    }

    // Inspection: what any client can read of every lock (records/status.rs).

    /// The holders and waiters of `name`, whatever kind of lock it is.
    pub async fn status(&self, name: &str) -> Result<Status> {
        status::status(self, name).await
    }

    /// Release the hold of `name` whose fencing token is `token`, whoever
    /// holds it (an operator freeing a lock whose holder is wedged): its key
    /// is deleted only if its create_revision is still `token`, in one Txn, so
    /// a later holder (a key name can repeat, a token never does) is never
    /// touched. True if that key was deleted; false if no key of `name` has
    /// that token (released already, or never). The former holder learns of
    /// the loss with reason `KeyDeleted` (at once with `watch_held_keys`, the
    /// default; else at its next guarded operation).
    pub async fn release(&self, name: &str, token: i64) -> Result<bool> {
        status::release(self, name, token).await
    }

    /// Release the permit of the semaphore `name` whose id is `id` (its
    /// fencing token, [`crate::Guard::fencing_token`]), from any client: as
    /// [`Client::release`]. The permit's holder learns of it with
    /// `KeyDeleted`.
    pub async fn release_permit(&self, name: &str, id: i64) -> Result<bool> {
        status::release_permit(self, name, id).await
    }

    /// Every lock, election, semaphore and read-write lock whose name starts
    /// with `prefix` (empty: all of this client's namespace), sorted by name,
    /// each as [`Client::status`] shows it, from one read of etcd. Keys with
    /// no lease (data written with guarded operations) are not locks and are
    /// left out.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Status>> {
        status::list(self, prefix).await
    }

    /// The clients under `prefix` that wait on each other (empty: the whole
    /// namespace), from one read of the keys and owner records (no request
    /// per lease): a client waits for the clients holding the names its
    /// queued keys wait on (a semaphore permit for any one of them). A
    /// cycle of such waits is a deadlock: none of them will be served until
    /// one gives up. Two threads of one client waiting on each other are not
    /// visible in etcd and are not reported. See also
    /// [`crate::LockOptions::detect_deadlock`], which fails the wait that
    /// would close a cycle.
    pub async fn deadlocks(&self, prefix: &str) -> Result<crate::records::Deadlocks> {
        crate::records::deadlock::deadlocks(self, prefix).await
    }

    /// The history of `name` from etcd's MVCC history: every key queued on it
    /// since `since` ago (`None`: as far back as etcd keeps), with when it
    /// was queued, granted and ended, and how. How far back etcd keeps is
    /// set by its compaction (`--auto-compaction-retention`); the answer's
    /// `compact_revision` says where it began. Times are wall-clock
    /// estimates: etcd records revisions, not times, so each revision's time
    /// is taken from the keys' own timestamps (every etcdlock key carries the
    /// time it was written), interpolated between them.
    pub async fn history(
        &self,
        name: &str,
        since: Option<std::time::Duration>,
    ) -> Result<crate::records::History> {
        crate::records::history::history(self, name, since).await
    }
}
