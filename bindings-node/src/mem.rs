//! `NativeMemStore`: the fault controls of an in-process store (core
//! `MemStore`), which lib/mem.js wraps as `MemStore`. Lease ids and
//! revisions cross as decimal strings (the JS layer makes them bigints),
//! durations as milliseconds checked by core's one rule (`bridge::span`).

use etcdlock::bridge::{self, Unit};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::*;
use crate::guard::bytes;

/// The store `mem://NAME`.
#[napi]
pub struct NativeMemStore {
    inner: etcdlock::MemStore,
}

/// A key as the store holds it (core `MemKey`).
#[napi(object)]
pub struct NativeMemKey {
    /// The key as UTF-8 text (lossy for bytes that are not: etcdlock writes none).
    pub key: String,
    pub value: Buffer,
    /// Decimal strings (the JS layer makes them bigints).
    pub lease: String,
    pub create_revision: String,
    pub mod_revision: String,
}

fn lease(id: &str) -> napi::Result<i64> {
    id.parse()
        .map_err(|_| invalid(format!("leaseId must be a 64-bit integer, got {id}")))
}

fn span(what: &str, ms: f64) -> napi::Result<std::time::Duration> {
    js(bridge::span(what, ms, Unit::Millis))
}

#[napi]
impl NativeMemStore {
    /// The store `mem://NAME` (`""`: the process-wide `mem://`), started if
    /// needed; `InvalidArgument` for a bad name.
    #[napi(factory)]
    pub fn open(name: String) -> napi::Result<NativeMemStore> {
        guard_sync(|| {
            Ok(NativeMemStore {
                inner: js(etcdlock::MemStore::open(&name))?,
            })
        })
    }

    #[napi(getter)]
    pub fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// End lease `lease_id` (decimal) now, as its TTL would; false if no such lease.
    #[napi]
    pub fn expire_lease(&self, lease_id: String) -> napi::Result<bool> {
        guard_sync(|| Ok(self.inner.expire_lease(lease(&lease_id)?)))
    }

    /// Delete `key` as another party would; false if there was no such key.
    #[napi]
    pub fn delete_key(&self, key: Either<String, Buffer>) -> napi::Result<bool> {
        guard_sync(|| Ok(self.inner.delete_key(bytes(&key))))
    }

    /// Answer nothing for `ms` (0 ends a silence).
    #[napi]
    pub fn silence(&self, ms: f64) -> napi::Result<()> {
        guard_sync(|| {
            self.inner.silence(span("silence: ms", ms)?);
            Ok(())
        })
    }

    /// Answer nothing to the client of lease `lease_id` (decimal) for `ms` (0 ends it).
    #[napi]
    pub fn stall(&self, lease_id: String, ms: f64) -> napi::Result<()> {
        guard_sync(|| {
            let id = lease(&lease_id)?;
            self.inner.stall(id, span("stall: ms", ms)?);
            Ok(())
        })
    }

    /// End every silence and stall now.
    #[napi]
    pub fn resume(&self) -> napi::Result<()> {
        guard_sync(|| {
            self.inner.resume();
            Ok(())
        })
    }

    /// The keys under `prefix`, in key order.
    #[napi]
    pub fn keys(&self, prefix: Either<String, Buffer>) -> napi::Result<Vec<NativeMemKey>> {
        guard_sync(|| {
            Ok(self
                .inner
                .keys(bytes(&prefix))
                .into_iter()
                .map(|k| NativeMemKey {
                    key: String::from_utf8_lossy(&k.key).into_owned(),
                    value: k.value.into(),
                    lease: k.lease.to_string(),
                    create_revision: k.create_revision.to_string(),
                    mod_revision: k.mod_revision.to_string(),
                })
                .collect())
        })
    }
}
