//! Native methods of a leader loop (core's `LeaderLoop`): start, stop, free,
//! and a term's end. Events reach Java in the loop's order through
//! `NativeBridge.leaderEvent`, called from one runtime task per loop.

use crate::prelude::*;
use etcdlock::{LeadOptions, LeaderEvent, LeaderLoop, Term};

/// Event kinds as `NativeBridge.leaderEvent` receives them.
const ELECTED: jint = 1;
const RENEWAL_FAILING: jint = 2;
const RENEWAL_RECOVERED: jint = 3;
const LOST: jint = 4;
const RESIGNED: jint = 5;
const CAMPAIGN_FAILED: jint = 6;
const LEADER: jint = 7;
const STOPPED: jint = 8;
/// The term's token was cancelled (loss, stop, or the task ended): `term`
/// names the term; no listener event.
const TERM_CANCELLED: jint = 9;

/// Call `NativeBridge.leaderEvent(long id, int kind, long term, long guard, int reason,
/// int code, boolean retryable, String leader, String msg)` on a runtime thread. False if
/// the JVM could not be reached.
fn deliver(
    id: jlong,
    kind: jint,
    handles: (jlong, jlong),
    reason: jint,
    leader: Option<&etcdlock::Leader>,
    err: Option<&Error>,
) -> bool {
    with_bridge(|env, bridge| {
        let json = JObject::from(crate::recipes::leader_json(env, leader)?);
        let (code, retryable, msg) = match err.map(wire) {
            Some((c, _, retry, m)) => (c, retry, JObject::from(JString::from_str(env, m)?)),
            None => (0, false, JObject::null()),
        };
        env.call_static_method(
            &bridge.class,
            jni_str!("leaderEvent"),
            jni_sig!("(JIJJIIZLjava/lang/String;Ljava/lang/String;)V"),
            &[
                JValue::Long(id),
                JValue::Int(kind),
                JValue::Long(handles.0),
                JValue::Long(handles.1),
                JValue::Int(reason),
                JValue::Int(code),
                JValue::Bool(retryable),
                JValue::Object(&json),
                JValue::Object(&msg),
            ],
        )?;
        Ok(())
    })
}

/// Hand an elected term to Java: two handles on it (the term's own, and
/// the one its `LockGuard` frees), then report when its token is cancelled.
/// False (handles freed) if Java could not be reached.
fn elected(id: jlong, term: &Term) -> NResult<bool> {
    let th = into_handle(Arc::new(term.clone()));
    let gh = into_handle(Arc::new(term.clone()));
    if !deliver(id, ELECTED, (th, gh), 0, None, None) {
        drop(free::<Term>(th));
        drop(free::<Term>(gh));
        return Ok(false);
    }
    let token = term.cancelled();
    etcdlock::runtime::runtime()?.spawn(async move {
        token.cancelled().await;
        deliver(id, TERM_CANCELLED, (th, 0), 0, None, None);
    });
    Ok(true)
}

/// Deliver every event of `lp` to Java's loop `id`, in order, until the
/// loop's events end. If Java cannot be reached, stop the loop and end its
/// terms (nobody is left to run a task).
async fn pump(id: jlong, lp: Arc<LeaderLoop>) {
    let mut reachable = true;
    while let Some(ev) = lp.next().await {
        if !reachable {
            if let LeaderEvent::Elected(t) = &ev {
                t.end();
            }
            continue;
        }
        let none = (0, 0);
        reachable = match &ev {
            LeaderEvent::Elected(t) => {
                let ok = elected(id, t).unwrap_or(false);
                if !ok {
                    t.end();
                }
                ok
            }
            LeaderEvent::RenewalFailing => deliver(id, RENEWAL_FAILING, none, 0, None, None),
            LeaderEvent::RenewalRecovered => deliver(id, RENEWAL_RECOVERED, none, 0, None, None),
            LeaderEvent::Lost(l) => deliver(id, LOST, none, l.reason as jint, None, None),
            LeaderEvent::Resigned => deliver(id, RESIGNED, none, 0, None, None),
            LeaderEvent::CampaignFailed(e) => deliver(id, CAMPAIGN_FAILED, none, 0, None, Some(e)),
            LeaderEvent::Leader(l) => deliver(id, LEADER, none, 0, l.as_ref(), None),
            LeaderEvent::Stopped => deliver(id, STOPPED, none, 0, None, None),
        };
        if !reachable {
            lp.stop();
        }
    }
}

/// `static native long leaderStart(long client, String name, byte[] value, boolean again,
/// long retryMs, double lockDelayMs, double leaseTimeMs, String[] metadata, long id)`: start a
/// leader loop (campaign extras as `lockAsync`'s) and deliver its events to
/// `NativeBridge.leaderEvent(id, ...)`; returns the loop's handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_leaderStart<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    value: JByteArray<'local>,
    again: jboolean,
    retry_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: JObjectArray<'local, JString<'local>>,
    id: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "election name")?;
            let value = req_bytes(env, &value, "value")?;
            let extras = extras(env, lock_delay_ms, lease_time_ms, &metadata)?;
            let campaign = acquire_opts(-1, extras, None)?;
            let retry = u64::try_from(retry_ms)
                .map(Duration::from_millis)
                .map_err(|_| invalid(format!("retry must not be negative, got {retry_ms} ms")))?;
            let opts = LeadOptions {
                again,
                retry,
                campaign,
                stop: None,
            };
            let lp = Arc::new(c.leader_loop(&name, value, opts)?);
            let rt = etcdlock::runtime::runtime()?;
            let h = into_handle(lp.clone());
            rt.spawn(pump(id, lp));
            Ok(h)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void leaderStop(long loop)`: stop the loop (its current
/// term's token is cancelled; it resigns once the term's task ended).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_leaderStop<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    lp: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            borrow::<LeaderLoop>(lp, "leader loop")?.stop();
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeLeaderLoop(long loop)`: stop the loop and drop
/// the Java side's reference (its events still end with Stopped).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeLeaderLoop<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    lp: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(l) = free::<LeaderLoop>(lp) {
                l.stop();
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean termEnd(long term, boolean end)`: with `end`, the
/// term's task has ended (the loop resigns if still leader, then campaigns
/// again or stops); returns whether the term's token is cancelled.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_termEnd<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    term: jlong,
    end: jboolean,
) -> jboolean {
    unowned
        .with_env(|_env| -> NResult<jboolean> {
            let t = borrow::<Term>(term, "leader term")?;
            if end {
                t.end();
            }
            Ok(t.cancelled().is_cancelled())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeTerm(long term)`: drop the Java side's reference
/// to a term (ending it, so a loop is never left waiting for a task that
/// nobody runs).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeTerm<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    term: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(t) = free::<Term>(term) {
                t.end();
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}
