//! Benchmark entry points, only in a build with the `bench` feature (never
//! in the published wheel): `python bench.py` builds one.

use etcdlock::{Client, ClientOptions};
use pyo3::prelude::*;

use crate::wait::wait;

pub(crate) fn url(e: &str) -> String {
    if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// Benchmark floor (`etcdlock::bench_floor::txn_delete`): `n` rounds of the
/// raw etcd round trips an uncontended lock + unlock costs (one Txn that puts
/// a key with a lease and reads the prefix's first key, then one Delete), with
/// a plain etcd client on the same runtime. Returns the per-round times in nanoseconds.
#[pyfunction]
pub(crate) fn _raw_floor(py: Python<'_>, endpoints: Vec<String>, n: usize) -> PyResult<Vec<u64>> {
    let urls: Vec<String> = endpoints.iter().map(|e| url(e)).collect();
    wait(py, async move {
        let v = etcdlock::bench_floor::txn_delete(&urls, n).await?;
        Ok(v.iter().map(|d| d.as_nanos() as u64).collect())
    })
}

/// Benchmark reference (`etcdlock::bench_floor::lock_unlock`): `n` uncontended
/// lock + unlock rounds of the Rust core itself (no Python in the loop), in nanoseconds.
#[pyfunction]
pub(crate) fn _core_bench(py: Python<'_>, endpoints: Vec<String>, n: usize) -> PyResult<Vec<u64>> {
    wait(py, async move {
        let c = Client::connect(ClientOptions::new(endpoints)).await?;
        let name = format!("bench-core-{}", std::process::id());
        let out = etcdlock::bench_floor::lock_unlock(&c, &name, n).await;
        c.close().await;
        Ok(out?.iter().map(|d| d.as_nanos() as u64).collect())
    })
}
