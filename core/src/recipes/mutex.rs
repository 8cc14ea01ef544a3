//! The lock protocol, wire-compatible with etcd's Go `concurrency.Mutex`,
//! `etcdctl lock` and the v3lock service: lock `N` owns the prefix `N/`; each
//! contender puts one key under it, attached to its session lease; the key with
//! the lowest create_revision holds the lock; everyone else waits for the key
//! created just before its own to be deleted.

use crate::client::Client;
use crate::engine::pipeline::{acquire, Recipe, Request};
use crate::error::Result;
use crate::guard::Guard;
use crate::options::LockOptions;

/// A mutex as a value: the lock `name` of a client, the way Go's
/// `concurrency.NewMutex(session, pfx)` is. Cheap to clone; each call queues
/// its own key (one value serves many tasks); nothing is sent until a call.
#[derive(Clone, Debug)]
pub struct Mutex {
    client: Client,
    name: String,
}

impl Mutex {
    /// The mutex `name` of `client`.
    pub fn new(client: &Client, name: impl Into<String>) -> Mutex {
        Mutex {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Take it: [`Client::lock_with`].
    pub async fn lock(&self, opts: LockOptions) -> Result<Guard> {
        acquire(&self.client, Request::new(&self.name, opts, Recipe::MUTEX)).await
    }

    /// One try: [`Client::try_lock_with`].
    pub async fn try_lock(&self, opts: LockOptions) -> Result<Guard> {
        acquire(
            &self.client,
            Request::trying(&self.name, opts, Recipe::MUTEX),
        )
        .await
    }
}
