//! Benchmark entry points, only in a build with the `bench` feature (never
//! in the published package): `node scripts/build.js --release --bench`.

use std::time::Instant;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

async fn raw_txn_delete(c: &etcdlock::Client, key: Vec<u8>) -> etcdlock::Result<()> {
    let lease = c.lease_id().await.unwrap_or(0);
    etcdlock::bench_floor::txn_delete_round(&mut c.etcd().await?, key, lease)
        .await
        .map(|_| ())
}

#[napi]
impl NativeClient {
    /// Benchmark floor (`etcdlock::bench_floor::txn_delete_round`): one raw Txn
    /// (put `key` with the session lease if absent + read the owner, the first
    /// key under `key`'s prefix) plus one raw Delete, on the client's etcd
    /// connection. Not namespaced.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn raw_txn_delete<'env>(&self, env: &'env Env, key: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                raw_txn_delete(&c, key.into_bytes())
                    .await
                    .map_err(|e| to_js_err(&e))
            })
        })
    }

    /// Core-only benchmark: `n` uncontended lock+unlock cycles timed inside
    /// Rust (no JS in the loop), then `n` raw Txn+Delete floors. Resolves
    /// `[coreNs..., rawNs...]` (2n latencies in nanoseconds).
    #[napi(ts_return_type = "Promise<number[]>")]
    pub fn core_bench<'env>(
        &self,
        env: &'env Env,
        name: String,
        n: u32,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let mut out = Vec::with_capacity(2 * n as usize);
                let core = etcdlock::bench_floor::lock_unlock(&c, &name, n as usize)
                    .await
                    .map_err(|e| to_js_err(&e))?;
                out.extend(core.iter().map(|d| d.as_nanos() as f64));
                let key = format!("{name}-raw/k").into_bytes();
                for _ in 0..n {
                    let t = Instant::now();
                    raw_txn_delete(&c, key.clone())
                        .await
                        .map_err(|e| to_js_err(&e))?;
                    out.push(t.elapsed().as_nanos() as f64);
                }
                Ok(out)
            })
        })
    }
}

/// A Promise settled from the shared runtime with no etcd work: the cost of one
/// JS -> runtime -> JS hop (the benchmark reports it).
#[napi(ts_return_type = "Promise<void>")]
pub fn runtime_round_trip(env: &Env) -> napi::Result<Object<'_>> {
    guard_sync(|| promise(env, async { Ok(()) }))
}
