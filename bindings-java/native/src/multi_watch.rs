//! A multi-lock's loss and renewal, as a guard's (guard.rs): Java's
//! `MultiLockGuard.onLost` and `onRenewal` are told through
//! `NativeBridge.complete` from a runtime thread. The watchers own core's
//! signals and keep no lock alive.

use crate::prelude::*;

/// `static native void watchMultiLoss(long multi, long id)`: when the hold
/// ends, `NativeBridge.complete(id, index, reason, 0, 0, null)` runs on a
/// runtime thread: the index (in the names given) and reason of the first
/// lock lost, or index -1 and reason 0 once every lock was released.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_watchMultiLoss<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let names: Vec<String> = m.guards().iter().map(|g| g.name().to_string()).collect();
            let mut signal = m.lost_signal();
            drop(m);
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                let (index, reason) = match signal.wait().await {
                    Some((name, loss)) => (
                        names
                            .iter()
                            .position(|n| *n == name)
                            .map_or(-1, |i| i as jlong),
                        loss.reason as jlong,
                    ),
                    None => (-1, 0),
                };
                complete(id, index, reason, None);
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void watchMultiRenewal(long multi, long id, boolean failing)`:
/// `watchRenewal` for a multi-lock (its locks share one session): once the
/// renewal's state differs from `failing`, `NativeBridge.complete(id, 0, ms,
/// 0, 0, null)` with `ms` as `multiInfo(multi, 4)` gives it (-1: renewed
/// again); -2 when the hold ends first (any lock lost, or all released).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_watchMultiRenewal<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    id: jlong,
    failing: jboolean,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let mut ended = m.lost_signal();
            let Some(changes) = m.renewal_changes() else {
                complete(id, 0, -2, None);
                return Ok(());
            };
            crate::guard::spawn_renewal_watch(id, changes, failing, async move {
                ended.wait().await;
            })
        })
        .resolve::<ThrowEtcdLock>()
}
