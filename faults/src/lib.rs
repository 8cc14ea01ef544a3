//! # etcdlock-faults
//!
//! The fault-injection suite of etcdlock: a TCP fault [`proxy`], a history
//! [`checker`], a lock [`Workload`], holder child processes that SIGSTOP and
//! kill -9 can target, and the [`scenarios`] that the tests and the soak
//! example run against real etcd (never a mock).
//!
//! Child processes re-run the current executable with [`CHILD_ENV`] set; the
//! test binary and the soak example call [`child_main_if_requested`] first.

pub mod checker;
mod child;
pub mod failpoint;
pub mod history;
pub mod infra;
pub mod partition;
pub mod proxy;
pub mod report;
pub mod scenarios;

use etcdlock::poison::Locked;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use etcdlock::runtime::{clock_monotonic_ns, instant_to_mono_ns};
use etcdlock::{CancellationToken, Client, ClientOptions, ErrorCode, LockOptions};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

pub use checker::{Checker, GuardedOp, Hold, LossInfo, OpResult, Report};
pub use child::*;
pub use proxy::{Mode, Proxy};

/// Environment variable that turns a re-executed binary into a child holder.
pub const CHILD_ENV: &str = "ETCDLOCK_FAULTS_CHILD";

/// A small xorshift PRNG (no dependency; deterministic per seed).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Uniform duration in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }
}

/// A per-run seed (`ETCDLOCK_FAULTS_SEED`, else time and pid); printed by the scenarios.
pub fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        std::env::var("ETCDLOCK_FAULTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| clock_monotonic_ns() ^ ((std::process::id() as u64) << 32))
    })
}

static NS: AtomicU64 = AtomicU64::new(0);

/// A key namespace unique to this process and call.
pub fn unique_ns(tag: &str) -> String {
    format!(
        "faults-{tag}-{}-{}/",
        std::process::id(),
        NS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Milliseconds between two CLOCK_MONOTONIC ns readings (signed).
pub fn ms_between(from_ns: u64, to_ns: u64) -> i64 {
    (to_ns as i64 - from_ns as i64) / 1_000_000
}

/// Client options used throughout the suite.
pub fn opts(endpoints: &[String], ns: &str, ttl: i64, request_timeout: Duration) -> ClientOptions {
    ClientOptions::new(endpoints.iter().cloned())
        .with_ttl(ttl)
        .with_namespace(ns)
        .with_request_timeout(request_timeout)
        .with_connect_timeout(request_timeout.max(Duration::from_secs(2)))
}

/// `o` with TLS verified by the CA certificate `ca` (unchanged for `None`: plaintext).
pub fn with_ca(o: ClientOptions, ca: Option<&std::path::Path>) -> ClientOptions {
    match ca {
        Some(ca) => o.with_tls(etcdlock::TlsOptions {
            ca: Some(ca.to_path_buf()),
            cert: None,
            key: None,
            domain: None,
        }),
        None => o,
    }
}

/// The current store revision.
pub async fn current_revision(etcd: &mut etcd_client::Client) -> i64 {
    let r = etcd.get("\0", None).await.expect("read revision");
    r.header().map(|h| h.revision()).unwrap_or(0)
}

/// Keys under `prefix` (raw) as (key, create_revision, lease), sorted by create revision.
pub async fn keys_under(
    etcd: &mut etcd_client::Client,
    prefix: &str,
) -> Result<Vec<(String, i64, i64)>, String> {
    let r = etcd
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_sort(
                etcd_client::SortTarget::Create,
                etcd_client::SortOrder::Ascend,
            )),
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(r.kvs()
        .iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                kv.create_revision(),
                kv.lease(),
            )
        })
        .collect())
}

/// Poll (every 10 ms) until `prefix` holds exactly `n` keys, or `timeout`.
/// Returns the elapsed time, or `None` on timeout.
pub async fn await_key_count(
    etcd: &mut etcd_client::Client,
    prefix: &str,
    n: usize,
    timeout: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if let Ok(k) = keys_under(etcd, prefix).await {
            if k.len() == n {
                return Some(start.elapsed());
            }
        }
        if start.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A plain etcd-client connection (not through a proxy) for observing.
pub async fn raw(endpoints: &[String]) -> etcd_client::Client {
    etcd_client::Client::connect(endpoints, None)
        .await
        .expect("raw etcd client")
}

/// Shared counters of a workload.
#[derive(Default, Debug)]
pub struct Counters {
    /// Successful acquisitions.
    pub acquisitions: AtomicU64,
    /// Holds that ended in a loss.
    pub losses: AtomicU64,
    /// CLOCK_MONOTONIC ns of the latest acquisition.
    pub last_acquired_ns: AtomicU64,
    /// Errors by code name.
    pub errors: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn err(&self, code: ErrorCode) {
        *self
            .errors
            .locked()
            .entry(code.name().to_string())
            .or_default() += 1;
    }
    /// `Timeout=3 Unavailable=1` or `none`.
    pub fn errors_summary(&self) -> String {
        let e = self.errors.locked();
        if e.is_empty() {
            return "no errors".into();
        }
        e.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A lock workload: `clients` clients (one `Client`, i.e. one lease, each)
/// acquiring random locks among `locks`, writing the lock's resource key with
/// a guarded put carrying the fencing token, holding for `hold`, unlocking.
/// Every hold goes to the checker.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Endpoints (etcd members or proxies).
    pub endpoints: Vec<String>,
    /// Key namespace.
    pub ns: String,
    /// Number of clients.
    pub clients: usize,
    /// Number of lock names (`L0`..).
    pub locks: usize,
    /// Lease TTL.
    pub ttl: i64,
    /// Time inside the critical section after the guarded write.
    pub hold: Duration,
    /// Per-acquisition timeout.
    pub lock_timeout: Duration,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Client id prefix in the history.
    pub client_prefix: String,
    /// Stop after this many acquisitions in total (0: only on `stop`).
    pub max_acquisitions: u64,
    /// Never re-lock the lock a client just released (default false; it worked
    /// around a core bug fixed since, see tests/core_bugs.rs; ETCDLOCK_FAULTS_NO_RELOCK=1 sets it).
    pub avoid_immediate_relock: bool,
    /// TLS: the CA certificate that signs etcd's (`https://` endpoints); None: plaintext.
    pub tls_ca: Option<std::path::PathBuf>,
    /// A deliberately broken build, for the tests that prove the checkers
    /// catch it: the resource write skips the fencing compare (a plain put)
    /// and is recorded as accepted. Never set outside those tests.
    pub unfenced_writes: bool,
}

impl Workload {
    /// Defaults: 8 clients, 4 locks, TTL 2 s, no hold time.
    pub fn new(endpoints: Vec<String>, ns: &str) -> Workload {
        Workload {
            endpoints,
            ns: ns.to_string(),
            clients: 8,
            locks: 4,
            ttl: 2,
            hold: Duration::ZERO,
            lock_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(2),
            client_prefix: format!("p{}-c", std::process::id()),
            max_acquisitions: 0,
            avoid_immediate_relock: std::env::var("ETCDLOCK_FAULTS_NO_RELOCK").is_ok(),
            tls_ca: None,
            unfenced_writes: false,
        }
    }

    /// Run until `stop` is cancelled (or `max_acquisitions` is reached, which cancels `stop`).
    /// Every client is closed before this returns.
    pub async fn run(
        &self,
        checker: Arc<Checker>,
        counters: Arc<Counters>,
        stop: CancellationToken,
    ) {
        let mut tasks = Vec::new();
        for i in 0..self.clients {
            let w = self.clone();
            let (checker, counters, stop) = (checker.clone(), counters.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                w.client_loop(i, checker, counters, stop).await
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    }

    async fn client_loop(
        &self,
        idx: usize,
        checker: Arc<Checker>,
        counters: Arc<Counters>,
        stop: CancellationToken,
    ) {
        let id = format!("{}{idx}", self.client_prefix);
        let mut rng = Rng::new(seed() ^ ((idx as u64 + 1) * 7919) ^ std::process::id() as u64);
        let o = with_ca(
            opts(&self.endpoints, &self.ns, self.ttl, self.request_timeout),
            self.tls_ca.as_deref(),
        );
        let Some(client) = connect_until(o, &counters, &stop).await else {
            return;
        };
        let mut last: Option<u64> = None;
        while !stop.is_cancelled() {
            // Never the lock this client just released: an immediate re-lock of the
            // same name on the same session re-creates the same key, which trips
            // the core bug shown by tests/core_bugs.rs (a waiter that misses the
            // delete waits for the re-created key until it times out).
            let mut pick = rng.below(self.locks as u64);
            if self.avoid_immediate_relock && self.locks > 1 && Some(pick) == last {
                pick = (pick + 1 + rng.below(self.locks as u64 - 1)) % self.locks as u64;
            }
            last = Some(pick);
            let lock = format!("L{pick}");
            let invoked = clock_monotonic_ns();
            let r = tokio::select! {
                r = client.lock_with(&lock, LockOptions::timeout(self.lock_timeout)) => r,
                _ = stop.cancelled() => break,
            };
            let g = match r {
                Ok(g) => g,
                Err(e) => {
                    counters.err(e.code());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            let acquired = clock_monotonic_ns();
            counters
                .last_acquired_ns
                .fetch_max(acquired, Ordering::Relaxed);
            let n = counters.acquisitions.fetch_add(1, Ordering::Relaxed) + 1;
            // A guarded read, then a guarded write of the resource with the token
            // (both timed for the porcupine history).
            let mut ops = Vec::with_capacity(2);
            let call = clock_monotonic_ns();
            let read = g.get(checker::resource_key(&lock)).await;
            let ret = clock_monotonic_ns();
            // A failed read whose outcome is unknown says nothing; it is not recorded.
            let result = OpResult::of(&read);
            match &read {
                Ok(v) => {
                    let value = v
                        .as_ref()
                        .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                        .unwrap_or(0);
                    ops.push(GuardedOp {
                        write: false,
                        call_ns: call,
                        ret_ns: Some(ret),
                        value,
                        result,
                    });
                }
                Err(e) => {
                    counters.err(e.code());
                    if result == OpResult::Refused {
                        ops.push(GuardedOp {
                            write: false,
                            call_ns: call,
                            ret_ns: Some(ret),
                            value: 0,
                            result,
                        });
                    }
                }
            }
            let call = clock_monotonic_ns();
            let wr = resource_write(&client, &g, &self.ns, &lock, self.unfenced_writes).await;
            let result = OpResult::of(&wr);
            let ret = (result != OpResult::Unknown).then(clock_monotonic_ns);
            ops.push(GuardedOp {
                write: true,
                call_ns: call,
                ret_ns: ret,
                value: g.fencing_token(),
                result,
            });
            if let Err(e) = wr {
                counters.err(e.code());
            }
            if !self.hold.is_zero() {
                tokio::time::sleep(self.hold).await;
            }
            release_and_record_ops(
                &checker,
                &counters,
                lock,
                &g,
                (invoked, acquired),
                clock_monotonic_ns(),
                &id,
                ops,
            )
            .await;
            if self.max_acquisitions > 0 && n >= self.max_acquisitions {
                stop.cancel();
            }
        }
        client.close().await;
    }
}

/// Connect with `o`, retrying every 100 ms (each failure counted) until it
/// works; `None` once `stop` is cancelled.
pub async fn connect_until(
    o: etcdlock::ClientOptions,
    counters: &Counters,
    stop: &CancellationToken,
) -> Option<Client> {
    loop {
        if stop.is_cancelled() {
            return None;
        }
        match Client::connect(o.clone()).await {
            Ok(c) => return Some(c),
            Err(e) => {
                counters.err(e.code());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Write the lock's resource key with the fencing token: a guarded put, or,
/// in the deliberately broken build (`unfenced`), a plain put with no compare.
pub async fn resource_write(
    client: &Client,
    g: &etcdlock::Guard,
    ns: &str,
    lock: &str,
    unfenced: bool,
) -> etcdlock::Result<()> {
    if !unfenced {
        return g
            .put(checker::resource_key(lock), g.fencing_token().to_string())
            .await;
    }
    let mut raw = client.etcd().await?;
    raw.put(
        format!("{ns}{}", checker::resource_key(lock)),
        g.fencing_token().to_string(),
        None,
    )
    .await
    .map(|_| ())
    .map_err(|e| etcdlock::Error::new(ErrorCode::Unavailable, e.to_string()))
}

/// Unlock `g` (the unlock call made at `end_call`) and record its hold under
/// `lock`: ended at the unlock call, or at the loss if it was lost before or
/// the unlock says so; losses and unlock errors are counted.
pub async fn release_and_record(
    checker: &Checker,
    counters: &Counters,
    lock: String,
    g: &etcdlock::Guard,
    acquired: u64,
    end_call: u64,
    client: &str,
) {
    release_and_record_ops(
        checker,
        counters,
        lock,
        g,
        (0, acquired),
        end_call,
        client,
        Vec::new(),
    )
    .await
}

/// [`release_and_record`] with the acquisition's invocation time and the
/// hold's guarded operations, for the porcupine history.
#[allow(clippy::too_many_arguments)]
pub async fn release_and_record_ops(
    checker: &Checker,
    counters: &Counters,
    lock: String,
    g: &etcdlock::Guard,
    (invoked, acquired): (u64, u64),
    end_call: u64,
    client: &str,
    ops: Vec<GuardedOp>,
) {
    let before = g.loss();
    let unl = g.unlock().await;
    let loss = before.or_else(|| if unl.is_err() { g.loss() } else { None });
    if let Err(e) = &unl {
        counters.err(e.code());
    }
    let loss = loss.map(|l| LossInfo {
        reason: l.reason.name().to_string(),
        at_ns: instant_to_mono_ns(l.at),
        reported_ns: clock_monotonic_ns(),
    });
    if loss.is_some() {
        counters.losses.fetch_add(1, Ordering::Relaxed);
    }
    let ended = loss
        .as_ref()
        .map(|l| l.at_ns.min(end_call))
        .unwrap_or(end_call);
    checker.record(Hold {
        lock,
        token: g.fencing_token(),
        acquired_ns: acquired,
        ended_ns: ended,
        client: client.to_string(),
        loss,
        invoked_ns: invoked,
        ops,
    });
}
