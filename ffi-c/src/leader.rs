//! The leader loop (core `LeaderLoop`): campaign, run the caller's task for
//! each term, resign, campaign again; its events are read one at a time with
//! a blocking, bounded etcdlock_leader_next.

use std::ffi::{c_char, c_int, CString};
use std::time::Duration;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{bridge, Error, ErrorCode, LeadOptions, LeaderEvent, LeaderLoop};

use crate::*;

/// Leader-loop event: elected; `term` is the new term (run the task now).
pub const ETCDLOCK_LEADER_ELECTED: i32 = 1;
/// Leader-loop event: keep-alives are failing while leader (pause guarded work).
pub const ETCDLOCK_LEADER_RENEWAL_FAILING: i32 = 2;
/// Leader-loop event: keep-alives got through again.
pub const ETCDLOCK_LEADER_RENEWAL_RECOVERED: i32 = 3;
/// Leader-loop event: leadership was lost (`loss_reason`); the term is
/// cancelled and the loop waits for etcdlock_term_end before campaigning again.
pub const ETCDLOCK_LEADER_LOST: i32 = 4;
/// Leader-loop event: the term ended by resigning (the task ended, or the loop stopped).
pub const ETCDLOCK_LEADER_RESIGNED: i32 = 5;
/// Leader-loop event: a campaign failed (`status`, `message`); the loop
/// campaigns again after retry_ms when `again`, else it stops.
pub const ETCDLOCK_LEADER_CAMPAIGN_FAILED: i32 = 6;
/// Leader-loop event: who leads now, this candidate included (`has_leader`,
/// `leader_value`, `fencing_token` = the leader's revision).
pub const ETCDLOCK_LEADER_CHANGED: i32 = 7;
/// Leader-loop event: the loop has stopped; no event follows.
pub const ETCDLOCK_LEADER_STOPPED: i32 = 8;

/// How etcdlock_lead campaigns. Initialise with etcdlock_lead_options_init.
#[repr(C)]
pub struct etcdlock_lead_options {
    /// sizeof(etcdlock_lead_options) as seen by the caller; set by
    /// etcdlock_lead_options_init.
    pub struct_size: u32,
    /// 1 (the default): campaign again after a term ended and after a failed
    /// campaign; 0: stop after the first term or the first failure.
    pub again: i32,
    /// Milliseconds to wait before campaigning again after a failed campaign,
    /// 0 .. ETCDLOCK_MAX_TIMEOUT_MS; default 1000.
    pub retry_ms: i64,
}

/// Fill `*options` with the defaults (again = 1, retry_ms = 1000).
/// options_size is sizeof(etcdlock_lead_options).
///
/// Safety: options points to options_size writable bytes.
///
/// Example: etcdlock_lead_options lo; etcdlock_lead_options_init(&lo, sizeof lo); lo.again = 0;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lead_options_init(
    options: *mut etcdlock_lead_options,
    options_size: usize,
) -> c_int {
    ffi(|| {
        let o = out_arg(options, "options")?;
        if options_size != std::mem::size_of::<etcdlock_lead_options>() {
            return Err(invalid(format!(
                "options_size is {options_size}; this library's etcdlock_lead_options is {} bytes",
                std::mem::size_of::<etcdlock_lead_options>()
            )));
        }
        *o = etcdlock_lead_options {
            struct_size: options_size as u32,
            again: 1,
            retry_ms: 1000,
        };
        Ok(())
    })
}

/// One leader-loop event, filled by etcdlock_leader_next. Fields that do not
/// apply to `kind` are 0 / NULL.
#[repr(C)]
pub struct etcdlock_leader_event {
    /// ETCDLOCK_LEADER_ELECTED, ... ETCDLOCK_LEADER_STOPPED.
    pub kind: c_int,
    /// ELECTED: the term's fencing token. CHANGED: the leader's revision
    /// (its fencing token), 0 when nobody leads.
    pub fencing_token: i64,
    /// LOST: the ETCDLOCK_LOSS_* reason.
    pub loss_reason: c_int,
    /// CAMPAIGN_FAILED: the failure's status (an ETCDLOCK_* status code).
    pub status: c_int,
    /// CHANGED: 1 if somebody leads, 0 if nobody does.
    pub has_leader: c_int,
    /// ELECTED: the term, a new handle the caller owns: run the task, call
    /// etcdlock_term_end when it is done, then etcdlock_term_free.
    pub term: *mut etcdlock_term,
    /// CHANGED: the leader's proclaimed value (leader_value_len bytes), a new
    /// buffer to free with etcdlock_buffer_free. CAMPAIGN_FAILED: the error
    /// message, NUL-terminated, freed the same way.
    pub leader_value: *mut u8,
    /// CHANGED: the length of leader_value. CAMPAIGN_FAILED: the message's length.
    pub leader_value_len: usize,
}

/// A running leader loop (etcdlock_lead). Thread-safe: one thread may wait in
/// etcdlock_leader_next while another calls etcdlock_leader_stop.
pub struct etcdlock_leader_loop {
    lp: LeaderLoop,
    pid: u32,
    /// Its client's, for the terms' guards.
    callbacks: std::sync::Arc<Callbacks>,
}

unsafe fn loop_arg<'a>(lp: *const etcdlock_leader_loop) -> Result<&'a etcdlock_leader_loop, Error> {
    let h = lp.as_ref().ok_or_else(|| invalid("leader loop is NULL"))?;
    if h.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this leader loop was created in the parent process before fork(); it cannot be used in the child",
        ));
    }
    Ok(h)
}

/// Start a leader loop for the election `name`, proclaiming `value`
/// (value_len bytes; NULL when 0): campaign; when elected, report
/// ETCDLOCK_LEADER_ELECTED with a term for the caller's task; once the task
/// has ended (etcdlock_term_end) resign and campaign again (opts->again).
/// Leadership lost (ETCDLOCK_LEADER_LOST) cancels the term; the loop does not
/// campaign again before etcdlock_term_end, so one loop never has two tasks
/// running. opts NULL: the defaults of etcdlock_lead_options_init. The loop
/// runs on the library's threads; read its events with
/// etcdlock_leader_next, stop it with etcdlock_leader_stop, free it with
/// etcdlock_leader_free. On success *out is the new loop; otherwise NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL, bad name, opts out of range),
/// ETCDLOCK_CLOSED.
///
/// Safety: client is live; name is NUL-terminated; value points to
/// value_len bytes; opts is NULL or initialised; out is writable.
///
/// Example: etcdlock_leader_loop *lp; etcdlock_lead(c, "scheduler", (const uint8_t *)"node-1", 6, NULL, &lp);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lead(
    client: *const etcdlock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    opts: *const etcdlock_lead_options,
    out: *mut *mut etcdlock_leader_loop,
) -> c_int {
    ffi(|| {
        let out = out_arg(out, "loop (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let name = name_arg(name)?;
        let v = bytes_arg(value, value_len, "value", true)?;
        let mut lo = LeadOptions::default();
        if let Some(o) = opts.as_ref() {
            if o.struct_size as usize != std::mem::size_of::<etcdlock_lead_options>() {
                return Err(invalid(
                    "opts->struct_size does not match this library; initialise opts with etcdlock_lead_options_init",
                ));
            }
            if o.again != 0 && o.again != 1 {
                return Err(invalid(format!("opts->again is {}; use 0 or 1", o.again)));
            }
            if !(0..=ETCDLOCK_MAX_TIMEOUT_MS).contains(&o.retry_ms) {
                return Err(invalid(format!(
                    "opts->retry_ms {} is outside 0 .. {ETCDLOCK_MAX_TIMEOUT_MS}",
                    o.retry_ms
                )));
            }
            lo.again = o.again == 1;
            lo.retry = Duration::from_millis(o.retry_ms as u64);
        }
        let lp = h.client.leader_loop(&name, v, lo)?;
        *out = Box::into_raw(Box::new(etcdlock_leader_loop {
            lp,
            pid: current_pid(),
            callbacks: h.callbacks.clone(),
        }));
        Ok(())
    })
}

/// Wait at most timeout_ms (negative: without limit) for the loop's next
/// event and write it to *ev (every field: those that do not apply are 0 /
/// NULL). Events come in order; ETCDLOCK_LEADER_STOPPED is the last.
/// Returns ETCDLOCK_OK with an event, ETCDLOCK_TIMEOUT when none came in time
/// (*ev zeroed), ETCDLOCK_CLOSED after STOPPED was read,
/// ETCDLOCK_INVALID_ARGUMENT (NULL, timeout_ms too large, or called from a
/// callback).
///
/// Safety: lp is live; ev is writable.
///
/// Example:
///
///     etcdlock_leader_event ev;
///     while (etcdlock_leader_next(lp, -1, &ev) == ETCDLOCK_OK && ev.kind != ETCDLOCK_LEADER_STOPPED) { ... }
#[no_mangle]
pub unsafe extern "C" fn etcdlock_leader_next(
    lp: *const etcdlock_leader_loop,
    timeout_ms: i64,
    ev: *mut etcdlock_leader_event,
) -> c_int {
    ffi(|| {
        let ev = out_arg(ev, "ev (out)")?;
        *ev = empty_event();
        let h = loop_arg(lp)?;
        let l = &h.lp;
        let timeout = timeout_arg(timeout_ms)?;
        let next = block_on(async move {
            match timeout {
                None => Ok(l.next().await),
                Some(d) => tokio::time::timeout(d, l.next())
                    .await
                    .map_err(|_| Error::new(ErrorCode::Timeout, "no leader-loop event in time")),
            }
        })?;
        let Some(next) = next else {
            return Err(Error::new(ErrorCode::Closed, "the leader loop has stopped"));
        };
        fill_event(ev, next, &h.callbacks)
    })
}

fn empty_event() -> etcdlock_leader_event {
    etcdlock_leader_event {
        kind: 0,
        fencing_token: 0,
        loss_reason: ETCDLOCK_LOSS_NONE,
        status: ETCDLOCK_OK,
        has_leader: 0,
        term: std::ptr::null_mut(),
        leader_value: std::ptr::null_mut(),
        leader_value_len: 0,
    }
}

fn fill_event(
    ev: &mut etcdlock_leader_event,
    next: LeaderEvent,
    callbacks: &std::sync::Arc<Callbacks>,
) -> Result<(), Error> {
    ev.kind = match next {
        LeaderEvent::Elected(term) => {
            ev.fencing_token = term.leadership().fencing_token();
            // Freeing the term handle ends the term: a term nobody can end
            // would hold the loop forever.
            let guard = Box::new(etcdlock_guard {
                guard: Held::Term(term.clone()),
                key: CString::new(term.leadership().key().replace('\0', "\\0")).unwrap_or_default(),
                pid: current_pid(),
                callbacks: callbacks.clone(),
            });
            ev.term = Box::into_raw(Box::new(etcdlock_term {
                term,
                guard,
                pid: current_pid(),
            }));
            ETCDLOCK_LEADER_ELECTED
        }
        LeaderEvent::RenewalFailing => ETCDLOCK_LEADER_RENEWAL_FAILING,
        LeaderEvent::RenewalRecovered => ETCDLOCK_LEADER_RENEWAL_RECOVERED,
        LeaderEvent::Lost(loss) => {
            ev.loss_reason = loss.reason as c_int;
            ETCDLOCK_LEADER_LOST
        }
        LeaderEvent::Resigned => ETCDLOCK_LEADER_RESIGNED,
        LeaderEvent::CampaignFailed(e) => {
            let w = bridge::WireError::from(&e);
            ev.status = w.code as c_int;
            ev.leader_value = malloc_copy(w.message.as_bytes(), true)?;
            ev.leader_value_len = w.message.len();
            ETCDLOCK_LEADER_CAMPAIGN_FAILED
        }
        LeaderEvent::Leader(l) => {
            if let Some(l) = l {
                ev.has_leader = 1;
                ev.fencing_token = l.revision;
                ev.leader_value = malloc_copy(&l.value, false)?;
                ev.leader_value_len = l.value.len();
            }
            ETCDLOCK_LEADER_CHANGED
        }
        LeaderEvent::Stopped => ETCDLOCK_LEADER_STOPPED,
    };
    Ok(())
}

/// Stop the loop: cancel its campaign, or cancel the current term (the task
/// must then end: etcdlock_term_end) and resign. Returns at once; the events
/// end with ETCDLOCK_LEADER_STOPPED. Idempotent.
///
/// Safety: lp is live.
///
/// Example: etcdlock_leader_stop(lp);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_leader_stop(lp: *const etcdlock_leader_loop) -> c_int {
    ffi(|| {
        loop_arg(lp)?.lp.stop();
        Ok(())
    })
}

/// Free a leader loop, stopping it first if it runs (a term still running
/// is cancelled; the loop resigns without waiting for its task). NULL is a
/// no-op.
///
/// Safety: lp is NULL or live, and no other thread uses it any more.
///
/// Example: etcdlock_leader_free(lp); lp = NULL;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_leader_free(lp: *mut etcdlock_leader_loop) {
    if lp.is_null() {
        return;
    }
    ffi_void(|| {
        let h = Box::from_raw(lp);
        if h.pid != current_pid() {
            etcdlock_core::runtime::keep_inherited(h);
        }
    })
}
