//! Benchmark entry points, only in a build with the `bench` feature (never
//! in the published jar): bench.sh builds one.

use crate::prelude::*;

/// `static native void rawRoundTrip(long client, String key, long lease)`: one
/// round of `etcdlock::bench_floor::txn_delete_round` (raw Txn: put with
/// `lease` if absent + read the owner under `key`'s prefix; then Delete),
/// bypassing the lock protocol; the benchmark's floor.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_rawRoundTrip<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    key: JString<'local>,
    lease: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let key = req_string(env, &key, "key")?;
            block(
                env,
                async move {
                    use etcd_client_shim::*;
                    raw_round_trip(c.etcd().await?, key, lease).await
                },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}

mod etcd_client_shim {
    use etcdlock::{Error, ErrorCode};

    fn e(err: impl std::fmt::Display) -> Error {
        Error::new(ErrorCode::Unavailable, err.to_string())
    }

    pub(crate) async fn raw_round_trip(
        mut etcd: etcd_client::Client,
        key: String,
        lease: i64,
    ) -> etcdlock::Result<()> {
        etcdlock::bench_floor::txn_delete_round(&mut etcd, key, lease)
            .await
            .map(|_| ())
    }

    /// Grant a lease for the raw floor (so the put carries a lease like a lock key does).
    pub(crate) async fn grant(mut etcd: etcd_client::Client, ttl: i64) -> etcdlock::Result<i64> {
        Ok(etcd.lease_grant(ttl, None).await.map_err(e)?.id())
    }
}

/// `static native long rawGrant(long client, long ttl)`: a lease for [`rawRoundTrip`].
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_rawGrant<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    ttl: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            block(
                env,
                async move { etcd_client_shim::grant(c.etcd().await?, ttl).await },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long coreLockUnlock(long client, String name)`: one uncontended
/// lock + unlock done entirely inside the core (one JNI call); the benchmark's
/// measure of what the Java layer adds. Returns the fencing token.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_coreLockUnlock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "lock name")?;
            block(
                env,
                async move {
                    let g = c.lock(&name).await?;
                    let t = g.fencing_token();
                    g.unlock().await?;
                    Ok(t)
                },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}
