//! The lock protocol, wire-compatible with etcd's Go `concurrency.Mutex`,
//! `etcdctl lock` and the v3lock service: lock `N` owns the prefix `N/`; each
//! contender puts one key under it, attached to its session lease; the key with
//! the lowest create_revision holds the lock; everyone else waits for the key
//! created just before its own to be deleted.

use std::future::Future;
use std::time::Duration;

use crate::client::Client;
use crate::engine::pipeline::acquire;
use crate::error::Result;
use crate::guard::Guard;
use crate::names::Mode;
use crate::options::LockOptions;

/// The body of [`Client::lock`].
pub(crate) fn lock<'a>(
    client: &'a Client,
    name: &'a str,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    lock_with(client, name, LockOptions::default())
}

/// The body of [`Client::lock_with`].
pub(crate) fn lock_with<'a>(
    client: &'a Client,
    name: &'a str,
    opts: LockOptions,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    let mode = if opts.timeout == Some(Duration::ZERO) {
        Mode::Once
    } else {
        Mode::Wait
    };
    acquire(client, name, opts, mode, None)
}

/// The body of [`Client::try_lock`].
pub(crate) fn try_lock<'a>(
    client: &'a Client,
    name: &'a str,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    acquire(client, name, LockOptions::default(), Mode::Try, None)
}

/// The body of [`Client::try_lock_with`].
pub(crate) fn try_lock_with<'a>(
    client: &'a Client,
    name: &'a str,
    opts: LockOptions,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    acquire(
        client,
        name,
        LockOptions {
            timeout: None,
            cancel: None,
            ..opts
        },
        Mode::Try,
        None,
    )
}
