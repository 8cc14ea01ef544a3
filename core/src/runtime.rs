//! The one tokio runtime that the language bindings share, and clock helpers.
//!
//! Rust users who already run tokio never touch this: the async API runs on the
//! caller's runtime. The C, Java, Python and Node layers call [`runtime`] and
//! [`block_on`], so each loaded native library has exactly one runtime, created
//! on first use (never at load time) and re-created in a forked child, whose
//! copy of the parent's runtime has no worker threads and would hang forever.

use crate::poison::Locked;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorCode, Result};

struct Shared {
    pid: u32,
    rt: Arc<tokio::runtime::Runtime>,
}

static RUNTIME: Mutex<Option<Shared>> = Mutex::new(None);

/// The runtimes of parent processes, in a forked child: never dropped (their
/// threads do not exist here, and dropping one could block), but kept
/// reachable, so a leak checker in the child does not report them as lost.
static ABANDONED: Mutex<Vec<Shared>> = Mutex::new(Vec::new());

/// Keep a parent's runtime, in a forked child, without dropping it.
fn abandon(parent: Shared) {
    ABANDONED.locked().push(parent);
}

/// What a forked child inherited and must not drop (a binding's handle to a
/// client or guard of the parent, whose drop would talk to a runtime with no
/// threads here): kept, reachable, until the process exits.
static INHERITED: Mutex<Vec<Box<dyn std::any::Any + Send>>> = Mutex::new(Vec::new());

/// Keep `value`, an object a forked child inherited from its parent, without
/// dropping it: the memory stays the process's (and a leak checker sees it
/// reachable) and nothing of the parent's runtime is touched.
pub fn keep_inherited<T: Send + 'static>(value: T) {
    INHERITED.locked().push(Box::new(value));
}

/// This process's id; 0 until first read, and again in a forked child.
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[cfg(unix)]
extern "C" fn forked_child() {
    PID.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// The process id (it changes across `fork`). Every lock call checks it, so
/// it is cached rather than asked of the kernel on every call (a system call
/// on the path of every lock): a `fork` handler clears the cache in the
/// child. A child made by a raw `clone` system call, which runs no fork
/// handlers, is not supported.
pub fn current_pid() -> u32 {
    use std::sync::atomic::Ordering::Relaxed;
    let cached = PID.load(Relaxed);
    if cached != 0 {
        return cached;
    }
    #[cfg(unix)]
    {
        static HANDLER: std::sync::Once = std::sync::Once::new();
        // SAFETY: registers a handler that only stores to an atomic, which is
        // async-signal-safe as a forked child's handlers must be.
        HANDLER.call_once(|| unsafe {
            libc::pthread_atfork(None, None, Some(forked_child));
        });
    }
    // Read after the handler is in place: a fork from here on clears what we store.
    let pid = std::process::id();
    PID.store(pid, Relaxed);
    pid
}

/// The shared runtime, created on first use. In a forked child the parent's
/// runtime is abandoned (its threads do not exist here; dropping it could
/// block) and a fresh one is built.
pub fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    let mut slot = RUNTIME.locked();
    let pid = current_pid();
    if let Some(shared) = slot.as_ref() {
        if shared.pid == pid {
            return Ok(shared.rt.clone());
        }
        // Forked child: abandon the parent's runtime.
        if let Some(old) = slot.take() {
            abandon(old);
        }
    }
    // Two workers: the runtime only multiplexes network I/O and timers (one
    // keep-alive task per client, a watch per waiter), never CPU work, and
    // each worker costs a thread stack plus allocator arenas in every process
    // that loads a binding (bench/footprint.sh measures what a binding adds).
    // ETCDLOCK_WORKER_THREADS overrides it (1..=64).
    let workers = std::env::var("ETCDLOCK_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=64).contains(n))
        .unwrap_or(2);
    let rt = build_shared_runtime(workers).map_err(|e| {
        Error::new(
            ErrorCode::Internal,
            format!("cannot start the etcdlock runtime: {e}"),
        )
    })?;
    let rt = Arc::new(rt);
    *slot = Some(Shared {
        pid,
        rt: rt.clone(),
    });
    Ok(rt)
}

/// Build the shared runtime. Never inlined: what a forked child's leak checker
/// reports of the parent's runtime (memory only its vanished threads owned)
/// is suppressed by this frame's name in the shipped `etcdlock.supp`, in
/// optimized builds too.
#[inline(never)]
fn build_shared_runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("etcdlock-rt")
        .enable_all()
        .build()
}

/// Stop the shared runtime's worker threads, waiting at most `timeout` for
/// them, so leak checkers (valgrind, ASan) see none at exit. Optional: a
/// process that exits without it loses nothing. Clients still open stop
/// working (their keep-alive ran on these threads), so close them first; a
/// later call into the library starts a fresh runtime. Returns `false` (and
/// does nothing) when called from inside a tokio runtime, where a runtime
/// cannot be shut down; when another handle to the runtime is still alive its
/// threads stop once that last handle is dropped.
pub fn shutdown(timeout: Duration) -> bool {
    if tokio::runtime::Handle::try_current().is_ok() {
        return false;
    }
    let taken = RUNTIME.locked().take();
    match taken {
        Some(shared) if shared.pid == current_pid() => match Arc::try_unwrap(shared.rt) {
            Ok(rt) => rt.shutdown_timeout(timeout),
            Err(rt) => drop(rt),
        },
        // Forked child: the parent's runtime has no threads here.
        Some(shared) => abandon(shared),
        None => {}
    }
    true
}

/// Run a future to completion on the shared runtime, parking the calling thread.
///
/// Refuses (with `InvalidArgument`) to run on a thread that is already inside a
/// tokio runtime, where blocking would stall or panic.
pub fn block_on<F, T>(fut: F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let rt = blocking_runtime()?;
    on_enough_stack(|| rt.block_on(fut))
}

/// The shared runtime for a blocking call; `InvalidArgument` on a thread
/// already inside a tokio runtime, where blocking would stall or panic.
fn blocking_runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            "a blocking etcdlock call was made from inside an async runtime; use the async API",
        ));
    }
    runtime()
}

/// The stack a blocking call needs below it to poll its future: the caller's
/// thread is the one that polls (see [`block_on_interruptible`]), and a
/// caller's thread may be small: musl gives a `pthread_create`d thread 128
/// KiB (a C program's worker on Alpine), a JVM or Python thread can be set to
/// less. Polling a lock's future nests a few dozen frames; debug builds make
/// them large (a lock on a 128 KiB musl thread overflowed). Measured again
/// by `tests/engine.rs` `a_blocking_lock_works_on_a_128_kib_thread` with the
/// acquisition chain at 6 functions in 3 files (engine/pipeline.rs):
/// without this, a debug build overflows a 128 KiB and a 160 KiB thread
/// already in `blocking::Client::connect`, a 192 KiB thread in the
/// contended lock or its unlock; 224 KiB and 256 KiB pass. A release build
/// (glibc) passes at 96 and 128 KiB and overflows at 80 KiB: too thin a
/// margin to drop this for callers' small threads.
const STACK_NEEDED: usize = 256 * 1024;

/// Run `f` where at least [`STACK_NEEDED`] bytes of stack are left: on this
/// stack when they are (the common case: a check of a thread-local), else on
/// a fresh 2 MiB stack segment for the duration of the call.
fn on_enough_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(STACK_NEEDED, 2 * 1024 * 1024, f)
}

/// Like [`block_on`], but wakes every `tick` to call `check`; when `check`
/// returns an error the future is dropped (which cancels a lock wait and removes
/// its waiter key) and that error is returned. Python uses this to answer
/// Ctrl-C while a thread waits for a lock with the GIL released.
///
/// The future runs on the calling thread, not on a worker: no thread
/// hand-off per call (`bench/languages.sh` compares each language's
/// blocking lock + unlock with the async path). The tick is this thread's own park timeout,
/// not a runtime timer: `check` runs every `tick` even if the runtime's
/// workers are all busy, so Ctrl-C is answered whatever the runtime is doing.
pub fn block_on_interruptible<F, T>(
    fut: F,
    tick: Duration,
    check: impl FnMut() -> Result<()>,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let rt = blocking_runtime()?;
    on_enough_stack(move || poll_here(&rt, fut, tick, check))
}

fn poll_here<F, T>(
    rt: &tokio::runtime::Runtime,
    fut: F,
    tick: Duration,
    mut check: impl FnMut() -> Result<()>,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    // Timers, sockets and spawns made while polling belong to the shared runtime.
    let _ctx = rt.enter();
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let mut next_check = Instant::now() + tick;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        let now = Instant::now();
        if now >= next_check {
            check()?;
            next_check = Instant::now() + tick;
        }
        std::thread::park_timeout(next_check.saturating_duration_since(Instant::now()));
    }
}

/// Spawn a future on the shared runtime (background work; a call a binding
/// makes and completes through a callback starts with [`start`] instead).
pub fn spawn<F>(fut: F) -> Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(fut))
}

/// Start `fut` on the calling thread and let the shared runtime finish it:
/// for callback-style bindings (Node's Promises, Python's asyncio, Java's
/// `CompletableFuture`s), called from a thread outside the runtime.
///
/// The first poll runs here, in the runtime's context, so the request `fut`
/// makes first leaves from this thread (the transport writes a request on
/// the thread that makes it). With [`spawn`] a runtime worker had to be
/// woken to start the task before anything was written: a thread wake-up
/// on every call's path. Once `fut` waits, it moves to the runtime as a task
/// spawned by whatever wakes it: usually the worker that read the answer,
/// which queues the task on itself without waking another thread.
///
/// `fut` may finish in that first poll, on this thread, unless it awaits
/// [`on_runtime`] first (as [`crate::bridge::spawn_complete`] does before its
/// callback). The returned handle
/// aborts it: the future is dropped (a lock wait cancelled, its waiter key
/// removed) wherever it is.
pub fn start<F>(fut: F) -> Result<Started>
where
    F: Future<Output = ()> + Send + 'static,
{
    use std::task::{Context, Poll, Waker};
    let rt = runtime()?;
    let handoff = Arc::new(Handoff {
        rt: rt.handle().clone(),
        stage: Mutex::new(Stage::Inline {
            woken: false,
            aborted: false,
        }),
    });
    let mut fut: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(fut);
    let _ctx = rt.enter();
    let waker = Waker::from(handoff.clone());
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fut.as_mut().poll(&mut Context::from_waker(&waker))
    }));
    let mut stage = handoff.lock();
    let Ok(first) = first else {
        *stage = Stage::Done;
        return Err(Error::new(
            ErrorCode::Internal,
            "a bug in etcdlock (a panic starting a call); the process is fine",
        ));
    };
    let mut aborted = None;
    match (first, &*stage) {
        (Poll::Ready(()), _) => *stage = Stage::Done,
        (Poll::Pending, Stage::Inline { aborted: true, .. }) => {
            *stage = Stage::Done;
            aborted = Some(fut);
        }
        // Woken while this thread polled it: the runtime takes it now.
        (Poll::Pending, Stage::Inline { woken: true, .. }) => {
            *stage = Stage::Task(rt.spawn(fut).abort_handle())
        }
        (Poll::Pending, _) => *stage = Stage::Parked(fut),
    }
    drop(stage);
    drop(aborted);
    Ok(Started(handoff))
}

/// Continue on a runtime thread. In a future [`start`]ed on its caller's
/// thread and still in that first poll, this moves the rest of it to the
/// runtime (the caller's thread returns at once); on a runtime thread it
/// does nothing. Callbacks that must run on a runtime thread (a binding's
/// completion) await this first.
pub async fn on_runtime() {
    if tokio::task::try_id().is_some() {
        return;
    }
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// A future [`start`]ed on its caller's thread; [`Started::abort`] drops it.
pub struct Started(Arc<Handoff>);

impl Started {
    /// Drop the future (here if no task runs it yet, else on the runtime,
    /// as `tokio::task::AbortHandle::abort` does), unless it has finished.
    pub fn abort(&self) {
        let mut stage = self.0.lock();
        match std::mem::replace(&mut *stage, Stage::Done) {
            Stage::Parked(fut) => {
                drop(stage);
                let _ctx = self.0.rt.enter();
                drop(fut);
            }
            Stage::Task(task) => task.abort(),
            Stage::Inline { woken, .. } => {
                *stage = Stage::Inline {
                    woken,
                    aborted: true,
                }
            }
            Stage::Done => {}
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a [`start`]ed future is: its waker hands it to the runtime.
struct Handoff {
    rt: tokio::runtime::Handle,
    stage: Mutex<Stage>,
}

enum Stage {
    /// Being polled on its caller's thread.
    Inline {
        woken: bool,
        aborted: bool,
    },
    /// Waiting for its first wake.
    Parked(BoxFuture),
    /// A runtime task has it (and wakes come to that task from its next poll).
    Task(tokio::task::AbortHandle),
    Done,
}

impl Handoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage.locked()
    }
}

impl std::task::Wake for Handoff {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut stage = self.lock();
        match std::mem::replace(&mut *stage, Stage::Done) {
            Stage::Parked(fut) => *stage = Stage::Task(self.rt.spawn(fut).abort_handle()),
            Stage::Inline { aborted, .. } => {
                *stage = Stage::Inline {
                    woken: true,
                    aborted,
                }
            }
            other => *stage = other,
        }
    }
}

struct MonoBase {
    instant: Instant,
    ns: u64,
}

fn mono_base() -> &'static MonoBase {
    static BASE: OnceLock<MonoBase> = OnceLock::new();
    BASE.get_or_init(|| MonoBase {
        instant: Instant::now(),
        ns: clock_monotonic_ns(),
    })
}

/// `CLOCK_MONOTONIC` now, in nanoseconds. It is system-wide on Linux and
/// macOS, so timestamps from different processes compare (the tests rely on
/// this). On Windows, which has no such clock, it counts from the first call
/// in this process: good for durations, not for comparing processes.
#[cfg(unix)]
pub fn clock_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` now, in nanoseconds. It is system-wide on Linux and
/// macOS, so timestamps from different processes compare (the tests rely on
/// this). On Windows, which has no such clock, it counts from the first call
/// in this process: good for durations, not for comparing processes.
#[cfg(not(unix))]
pub fn clock_monotonic_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    // 1 s, not 0: a zero stamp reads as "never" in the callers' records.
    1_000_000_000 + START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Convert an `Instant` (which std takes from `CLOCK_MONOTONIC` on Linux) to
/// `CLOCK_MONOTONIC` nanoseconds.
pub fn instant_to_mono_ns(i: Instant) -> u64 {
    let base = mono_base();
    if i >= base.instant {
        base.ns + (i - base.instant).as_nanos() as u64
    } else {
        base.ns.saturating_sub((base.instant - i).as_nanos() as u64)
    }
}

/// Sleep until `deadline`; forever when there is none.
pub(crate) async fn sleep_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_cached_pid_is_the_childs_after_fork() {
        let parent = current_pid();
        assert_eq!(parent, std::process::id());
        assert_eq!(current_pid(), parent, "cached");
        // SAFETY: the child only reads atomics, makes system calls and exits.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            let ok = current_pid() == std::process::id() && current_pid() != parent;
            // SAFETY: leaves the child at once, running nothing of the test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child we just made.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child saw its parent's pid: status {status}"
        );
        assert_eq!(current_pid(), parent);
    }

    /// `start` polls first on the caller's thread, then the runtime finishes
    /// the future; `on_runtime` moves a future that is still on its caller's
    /// thread to the runtime; `abort` drops a started future, parked or running.
    #[test]
    fn started_futures_begin_on_the_caller_and_end_on_the_runtime() {
        use std::sync::mpsc;
        fn where_am_i() -> (std::thread::ThreadId, bool) {
            (std::thread::current().id(), tokio::task::try_id().is_some())
        }
        let me = std::thread::current().id();
        let (tx, rx) = mpsc::channel();
        let _s = start(async move {
            let first = where_am_i();
            tokio::time::sleep(Duration::from_millis(5)).await;
            tx.send((first, where_am_i())).unwrap();
        })
        .unwrap();
        let (first, rest) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            first,
            (me, false),
            "the first poll runs on the caller, outside any task"
        );
        assert!(rest.0 != me && rest.1, "the rest runs in a runtime task");

        // Ready in its first poll, but its tail awaits on_runtime.
        let (tx, rx) = mpsc::channel();
        let _s = start(async move {
            on_runtime().await;
            tx.send(where_am_i()).unwrap();
        })
        .unwrap();
        let tail = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(tail.0 != me && tail.1, "after on_runtime, a runtime task");

        // Aborted while parked (before any wake) or while a task runs it: dropped, never finished.
        struct Dropped(mpsc::Sender<&'static str>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.send("dropped");
            }
        }
        for wake_first in [false, true] {
            let (tx, rx) = mpsc::channel();
            let d = Dropped(tx.clone());
            let s = start(async move {
                let _d = d;
                if wake_first {
                    on_runtime().await;
                    let _ = tx.send("running");
                }
                std::future::pending::<()>().await;
                let _ = tx.send("finished");
            })
            .unwrap();
            if wake_first {
                assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "running");
            }
            s.abort();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "dropped");
            s.abort(); // twice: nothing more
            assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        }
    }

    #[test]
    fn interruptible_block_on_runs_runtime_futures_and_checks_every_tick() {
        // A runtime timer completes the future.
        let r = block_on_interruptible(
            async {
                tokio::time::sleep(Duration::from_millis(30)).await;
                Ok(7)
            },
            Duration::from_millis(10),
            || Ok(()),
        );
        assert_eq!(r.unwrap(), 7);
        // A future that never completes is dropped when the check says so.
        let mut calls = 0;
        let t = Instant::now();
        let r: Result<()> =
            block_on_interruptible(std::future::pending(), Duration::from_millis(10), || {
                calls += 1;
                if calls == 3 {
                    Err(Error::new(ErrorCode::Cancelled, "interrupted"))
                } else {
                    Ok(())
                }
            });
        assert_eq!(r.unwrap_err().code(), ErrorCode::Cancelled);
        assert_eq!(calls, 3);
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
