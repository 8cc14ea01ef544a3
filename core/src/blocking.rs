//! A blocking facade over the async API, on the shared [`runtime`](crate::runtime).
//! For Rust programs that do not run tokio; each call parks the calling
//! thread. (The language bindings call the async API themselves, through
//! [`runtime`](crate::runtime) and the bridge.)
//!
//! ```no_run
//! # fn demo() -> etcdlock::Result<()> {
//! let client = etcdlock::blocking::Client::connect(etcdlock::ClientOptions::new(["127.0.0.1:2379"]))?;
//! let guard = client.lock("nightly-job", Some(std::time::Duration::from_secs(5)))?;
//! println!("token {}", guard.fencing_token());
//! guard.unlock()?;
//! # Ok(()) }
//! ```

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::block_on;
use crate::{ClientOptions, LockOptions, Result};

/// A blocking client. Cheap to clone; share it across threads.
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
}

/// A blocking guard: derefs to [`crate::Guard`] for the non-blocking getters.
#[derive(Debug, Clone)]
pub struct Guard {
    inner: Arc<crate::Guard>,
}

impl Deref for Guard {
    type Target = crate::Guard;
    fn deref(&self) -> &crate::Guard {
        &self.inner
    }
}

impl Client {
    /// Connect (see [`crate::Client::connect`]).
    pub fn connect(opts: ClientOptions) -> Result<Client> {
        let inner = block_on(async move { crate::Client::connect(opts).await })?;
        Ok(Client { inner })
    }

    /// The async client behind this one.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// Wait for the lock, at most `timeout` if given.
    pub fn lock(&self, name: &str, timeout: Option<Duration>) -> Result<Guard> {
        self.lock_with(
            name,
            LockOptions {
                timeout,
                ..LockOptions::default()
            },
        )
    }

    /// Wait for the lock with full options.
    pub fn lock_with(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        let c = self.inner.clone();
        let name = name.to_string();
        let g = block_on(async move { c.lock_with(&name, opts).await })?;
        Ok(Guard { inner: Arc::new(g) })
    }

    /// Take the lock if free, else `WouldBlock`.
    pub fn try_lock(&self, name: &str) -> Result<Guard> {
        let c = self.inner.clone();
        let name = name.to_string();
        let g = block_on(async move { c.try_lock(&name).await })?;
        Ok(Guard { inner: Arc::new(g) })
    }

    /// Close the client, releasing every lock it holds.
    pub fn close(&self) -> Result<()> {
        let c = self.inner.clone();
        block_on(async move {
            c.close().await;
            Ok(())
        })
    }

    /// The effective lease TTL in seconds.
    pub fn ttl(&self) -> i64 {
        self.inner.ttl()
    }
}

impl Guard {
    /// Wrap an async guard.
    pub fn from_async(g: crate::Guard) -> Guard {
        Guard { inner: Arc::new(g) }
    }

    /// The async guard behind this one.
    pub fn as_async(&self) -> &Arc<crate::Guard> {
        &self.inner
    }

    /// Release (see [`crate::Guard::unlock`]).
    pub fn unlock(&self) -> Result<()> {
        let g = self.inner.clone();
        block_on(async move { g.unlock().await })
    }

    /// Guarded put.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let (g, k, v) = (self.inner.clone(), key.to_vec(), value.to_vec());
        block_on(async move { g.put(k, v).await })
    }

    /// Guarded get.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (g, k) = (self.inner.clone(), key.to_vec());
        block_on(async move { g.get(k).await })
    }

    /// Guarded delete.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let (g, k) = (self.inner.clone(), key.to_vec());
        block_on(async move { g.delete(k).await })
    }
}
