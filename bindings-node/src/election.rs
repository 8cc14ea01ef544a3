//! Elections: the current leader and leadership changes (core `Leader`,
//! `Observer`).

use std::sync::Arc;

use etcdlock::ErrorCode;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::*;
use crate::wait::*;

/// The current leader of an election.
#[napi(object)]
pub struct NativeLeader {
    pub key: String,
    pub value: Buffer,
    /// Decimal string (the JS layer makes it a bigint).
    pub revision: String,
    pub lease_id: String,
}

pub(crate) fn leader_info(l: etcdlock::Leader) -> NativeLeader {
    NativeLeader {
        key: String::from_utf8_lossy(&l.key).into_owned(),
        value: Buffer::from(l.value),
        revision: l.revision.to_string(),
        lease_id: l.lease_id.to_string(),
    }
}

/// Leadership changes of one election (core `Observer`).
#[napi]
pub struct NativeObserver {
    pub(crate) o: Arc<tokio::sync::Mutex<etcdlock::Observer>>,
}

#[napi]
impl NativeObserver {
    /// The next leadership state (the first call: the current one); null is
    /// "no leader". `cancel` ends the wait with `Cancelled`.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let o = self.o.clone();
            let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
            promise(env, async move {
                let mut o = tokio::select! {
                    g = o.lock() => g,
                    _ = token.cancelled() => return Err(to_js_err(&etcdlock::Error::new(ErrorCode::Cancelled, "observe: aborted"))),
                };
                tokio::select! {
                    r = o.next() => Ok(r.map_err(|e| to_js_err(&e))?.map(leader_info)),
                    _ = token.cancelled() => Err(to_js_err(&etcdlock::Error::new(ErrorCode::Cancelled, "observe: aborted"))),
                }
            })
        })
    }
}
