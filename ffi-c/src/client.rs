//! The client handle: connect, TTL, metrics, free.

use etcdlock_core::poison::Locked;
use std::ffi::c_int;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Client, Error, ErrorCode};

use crate::*;

/// What a client has done so far (etcdlock_client_metrics): the core's metrics,
/// the same figures as in every etcdlock language. Counters only grow;
/// waiting and held are "now". Durations in nanoseconds.
#[repr(C)]
pub struct etcdlock_metrics {
    /// sizeof(etcdlock_metrics) as the caller compiled it; set by etcdlock_client_metrics.
    pub struct_size: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// Acquisition calls by outcome, indexed by ETCDLOCK_RESULT_*.
    pub acquisitions: [u64; 5],
    /// The time those calls took, summed, indexed by ETCDLOCK_RESULT_*.
    pub wait_ns: [u64; 5],
    /// Acquisition calls in progress.
    pub waiting: i64,
    /// Locks held now.
    pub held: i64,
    /// How long the locks held now have been held, summed.
    pub held_ns: u64,
    /// Holds that ended (released or lost).
    pub holds_ended: u64,
    /// How long the ended holds lasted, summed.
    pub hold_ns: u64,
    /// Holds lost, indexed by ETCDLOCK_LOSS_* - 1 (lease expired, key deleted,
    /// connection lost, client closed).
    pub lost: [u64; 4],
    /// Keep-alive round trips acknowledged.
    pub keepalives: u64,
    /// The last keep-alive round trip, -1 before the first.
    pub keepalive_rtt_ns: i64,
    /// Requests that failed on an etcd member (which the client then avoided
    /// for a while); 0 while every member answers. Written only when
    /// struct_size covers it.
    pub member_failures: u64,
}

/// A connection to etcd (one lease shared by all its locks). Thread-safe.
pub struct etcdlock_client {
    pub(crate) client: Client,
    pub(crate) pid: u32,
    pub(crate) callbacks: Arc<Callbacks>,
}

/// The callbacks still to come from one client and its guards (lock_async,
/// observe, on_loss, on_renewal): etcdlock_client_free waits until none is
/// left. Each registration holds one [`PendingCallback`] from before its task
/// starts until after its last call returned (or until the task is dropped
/// unrun), so each is counted exactly once, cancelled or not.
#[derive(Default)]
pub(crate) struct Callbacks {
    state: Mutex<CallbackState>,
    idle: Condvar,
}

#[derive(Default)]
struct CallbackState {
    pending: usize,
    /// etcdlock_client_free was called: lock_async and observe are refused.
    freeing: bool,
    /// The handle, freed on a runtime thread while callbacks were pending:
    /// dropped when the last of them returns (they may still use it).
    orphan: Option<Box<etcdlock_client>>,
}

/// One callback still to come; dropping it (after the callback's last call
/// returned) counts it done.
pub(crate) struct PendingCallback(Arc<Callbacks>);

impl Callbacks {
    fn lock(&self) -> MutexGuard<'_, CallbackState> {
        self.state.locked()
    }

    /// A callback registered on the client itself (lock_async, observe):
    /// refused with Closed once etcdlock_client_free has been called, so a
    /// callback that starts another wait cannot keep the free waiting.
    pub(crate) fn begin(self: &Arc<Self>) -> Result<PendingCallback, Error> {
        let mut s = self.lock();
        if s.freeing {
            return Err(Error::new(
                ErrorCode::Closed,
                "the client is being freed (etcdlock_client_free)",
            ));
        }
        s.pending += 1;
        Ok(PendingCallback(self.clone()))
    }

    /// A callback registered on a guard of the client (on_loss, on_renewal):
    /// always accepted; its hold has ended or ends with the client's close,
    /// so it runs soon.
    pub(crate) fn begin_guard(self: &Arc<Self>) -> PendingCallback {
        self.lock().pending += 1;
        PendingCallback(self.clone())
    }

    fn start_freeing(&self) {
        self.lock().freeing = true;
    }

    /// Block until every pending callback has returned.
    fn wait_idle(&self) {
        let mut s = self.lock();
        while s.pending > 0 {
            s = self.idle.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Drop `handle` now if no callback is pending, else when the last returns.
    fn free_when_idle(&self, handle: Box<etcdlock_client>) {
        let mut s = self.lock();
        if s.pending > 0 {
            s.orphan = Some(handle);
            return;
        }
        drop(s);
        drop(handle);
    }
}

impl Drop for PendingCallback {
    fn drop(&mut self) {
        let orphan = {
            let mut s = self.0.lock();
            s.pending -= 1;
            if s.pending > 0 {
                return;
            }
            self.0.idle.notify_all();
            s.orphan.take()
        };
        drop(orphan);
    }
}

pub(crate) unsafe fn client_arg<'a>(
    c: *const etcdlock_client,
) -> Result<&'a etcdlock_client, Error> {
    let c = c.as_ref().ok_or_else(|| invalid("client is NULL"))?;
    if c.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this client was created in the parent process before fork(); create a new client in the child",
        ));
    }
    Ok(c)
}

/// Connect to etcd and open the client's session (grant its lease). Blocks up
/// to options->connect_timeout_ms. On success *client is a new handle to free
/// with etcdlock_client_free; on failure *client is NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL, bad endpoint, TTL outside
/// 1..9000000000, bad TLS file, ...), ETCDLOCK_UNAVAILABLE (no endpoint
/// answered), ETCDLOCK_AUTH_FAILED.
///
/// Safety: options points to an etcdlock_options initialised with
/// etcdlock_options_init whose strings are valid for the duration of the call;
/// client is a writable etcdlock_client*.
///
/// Example:
///
///     etcdlock_client *c = NULL;
///     int rc = etcdlock_client_connect(&o, &c);
///     if (rc) fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_connect(
    options: *const etcdlock_options,
    client: *mut *mut etcdlock_client,
) -> c_int {
    ffi(|| {
        let out = out_arg(client, "client (out)")?;
        *out = std::ptr::null_mut();
        let opts = convert_options(options)?;
        etcdlock_core::set_language("c");
        let c = block_on(async move { Client::connect(opts).await })?;
        *out = Box::into_raw(Box::new(etcdlock_client {
            client: c,
            pid: current_pid(),
            callbacks: Arc::default(),
        }));
        Ok(())
    })
}

/// The effective lease TTL in seconds (etcd raises TTLs below its minimum).
///
/// Safety: client is a live handle; ttl_secs is writable.
///
/// Example: int64_t ttl; etcdlock_client_ttl(c, &ttl);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_ttl(
    client: *const etcdlock_client,
    ttl_secs: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(ttl_secs, "ttl_secs (out)")?;
        *out = client_arg(client)?.client.ttl();
        Ok(())
    })
}

/// Fill *metrics with what client has done so far (no etcd request; a few
/// atomic loads). struct_size must be sizeof(etcdlock_metrics) as the caller
/// compiled it; only that many bytes are written, so a program built against
/// an older header keeps working.
///
/// Safety: client is a live handle; metrics points to struct_size writable bytes.
///
/// Example:
///
///     etcdlock_metrics m;
///     etcdlock_client_metrics(c, &m, sizeof m);
///     printf("held %lld, lost to deletes %llu\n", (long long)m.held,
///            (unsigned long long)m.lost[ETCDLOCK_LOSS_KEY_DELETED - 1]);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_metrics(
    client: *const etcdlock_client,
    metrics: *mut etcdlock_metrics,
    struct_size: usize,
) -> c_int {
    ffi(|| {
        if metrics.is_null() {
            return Err(invalid("metrics is NULL"));
        }
        if struct_size < 8 {
            return Err(invalid(format!(
                "struct_size {struct_size} is smaller than any etcdlock_metrics"
            )));
        }
        let m = client_arg(client)?.client.metrics();
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let full = etcdlock_metrics {
            struct_size: std::mem::size_of::<etcdlock_metrics>().min(struct_size) as u32,
            reserved: 0,
            acquisitions: m.acquisitions.map(|a| a.count),
            wait_ns: m.acquisitions.map(|a| ns(a.wait_total)),
            waiting: m.waiting,
            held: m.held,
            held_ns: ns(m.held_duration),
            holds_ended: m.holds_ended,
            hold_ns: ns(m.hold_total),
            lost: m.lost.map(|(_, n)| n),
            keepalives: m.keepalives,
            keepalive_rtt_ns: m
                .keepalive_rtt
                .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
                .unwrap_or(-1),
            member_failures: m.member_failures,
        };
        let n = struct_size.min(std::mem::size_of::<etcdlock_metrics>());
        std::ptr::copy_nonoverlapping(
            (&full as *const etcdlock_metrics).cast::<u8>(),
            metrics.cast::<u8>(),
            n,
        );
        Ok(())
    })
}

/// Close and free a client: revokes its lease, which releases every lock it
/// holds at once; their guards report ETCDLOCK_LOSS_CLIENT_CLOSED, pending
/// etcdlock_lock_async waits complete with ETCDLOCK_CLOSED (one cancelled
/// just before may complete with ETCDLOCK_CANCELLED instead) and observers
/// get their last call with ETCDLOCK_CLOSED. Guards stay valid objects and
/// must still be freed. NULL is a no-op.
///
/// Called outside a callback, it returns only after every callback of this
/// client has made its last call and returned: those of etcdlock_lock_async,
/// etcdlock_observe, and etcdlock_guard_on_loss and etcdlock_guard_on_renewal
/// on its guards, registered before the call or by those callbacks while it
/// runs. Their user_data may be freed once it returns. It blocks for the
/// close (at most one request timeout), then until those callbacks have
/// returned, so a callback must not wait for the thread that frees its
/// client. Until it returns, the client's callbacks may still use the
/// handle; etcdlock_lock_async and etcdlock_observe on it return
/// ETCDLOCK_CLOSED (a callback that starts a new wait cannot keep it waiting).
///
/// Called from a callback (a runtime thread), it cannot wait for the
/// callbacks, the calling one among them: it returns at once and the close
/// runs in the background. Every other callback still makes its last call as
/// described above, possibly after this returned, so free their user_data in
/// those last calls, not after this returns. From this call on,
/// etcdlock_lock_async and etcdlock_observe on the client return
/// ETCDLOCK_CLOSED; the handle stays valid for the client's callbacks (the
/// calling one included) until the last of them has returned, and is freed
/// then.
///
/// In a child created by fork() without exec, a client inherited from the
/// parent is not closed (the parent still owns the lease and its connection)
/// and its memory is deliberately left to the child process; the same holds
/// for inherited guards in etcdlock_guard_free.
///
/// Safety: client is NULL or a handle from etcdlock_client_connect not yet
/// freed, and no other thread uses it any more (except the client's own
/// callbacks, as above).
///
/// Example: etcdlock_client_free(c); c = NULL;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_free(client: *mut etcdlock_client) {
    if client.is_null() {
        return;
    }
    ffi_void(|| {
        let c = Box::from_raw(client);
        if c.pid != current_pid() {
            // The parent's runtime threads do not exist in a forked child; touching
            // the connection could hang. The memory is left to the process.
            etcdlock_core::runtime::keep_inherited(c);
            return;
        }
        let callbacks = c.callbacks.clone();
        callbacks.start_freeing();
        let client = c.client.clone();
        if on_runtime_thread() {
            // This thread may be running one of the callbacks: it cannot wait.
            let _ = etcdlock_core::runtime::spawn(async move { client.close().await });
            callbacks.free_when_idle(c);
        } else {
            // The close ends every wait of the client (Closed) and every hold
            // of its guards (ClientClosed), so each pending callback runs now.
            let closed = block_on(async move {
                client.close().await;
                Ok(())
            });
            if closed.is_ok() {
                callbacks.wait_idle();
            }
            drop(c);
        }
    })
}
