//! Leader election on the mutex's keys, wire-compatible with etcd's Go
//! `concurrency.Election` and `etcdctl elect`: candidate keys `name/<lease hex>`
//! queue by create_revision exactly as mutex contenders do, the first is the
//! leader, and its value is the proclamation. A [`Leadership`] is a [`Guard`]
//! (fencing token, loss signal, guarded operations) plus `proclaim` and
//! `resign`; [`Client::observe`] also reports "no leader", which Go's
//! `Observe` never does (etcd #18163).

use std::ops::Deref;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, SortOrder, SortTarget, WatchOptions};

use crate::client::Client;
use crate::engine::pipeline::{acquire, Recipe, Request};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::meta::LockKind;
use crate::names::{is_direct_child, show, validate_name};
use crate::options::LockOptions;
use crate::records::Leader;

/// Leadership won by [`Client::campaign`]: everything a [`Guard`] has (deref),
/// plus [`Leadership::proclaim`] and [`Leadership::resign`].
#[derive(Debug)]
pub struct Leadership {
    guard: Guard,
}

impl Deref for Leadership {
    type Target = Guard;
    fn deref(&self) -> &Guard {
        &self.guard
    }
}

impl Leadership {
    /// Announce a new value as leader. Guarded by our key's create_revision,
    /// so a leader that lost its leadership is refused by etcd (`LockLost`).
    pub async fn proclaim(&self, value: impl AsRef<[u8]>) -> Result<()> {
        self.guard.set_value(value).await
    }

    /// Give up leadership (delete our key); the next candidate leads. Same
    /// semantics as [`Guard::unlock`].
    pub async fn resign(&self) -> Result<()> {
        self.guard.unlock().await
    }

    /// The guard behind this leadership.
    pub fn into_guard(self) -> Guard {
        self.guard
    }
}

/// The body of [`Client::campaign`].
pub(crate) async fn campaign(
    client: &Client,
    name: &str,
    value: impl AsRef<[u8]>,
    opts: LockOptions,
) -> Result<Leadership> {
    let req = Request {
        value: Some(value.as_ref()),
        ..Request::new(name, opts, Recipe::Lock(LockKind::Election))
    };
    let guard = acquire(client, req).await?;
    Ok(Leadership { guard })
}

/// The body of [`Client::leader`].
pub(crate) async fn leader(client: &Client, name: &str) -> Result<Option<Leader>> {
    Ok(read_leader(client, name).await?.0)
}

/// The leader and the revision of the read.
pub(crate) async fn read_leader(client: &Client, name: &str) -> Result<(Option<Leader>, i64)> {
    validate_name(name)?;
    let bound = Some(client.request_bound());
    let prefix = crate::engine::keys::prefix(client, name);
    let p = prefix.clone();
    let first = client
        .call(bound, |mut c| {
            let p = p.clone();
            async move {
                c.get(
                    p,
                    Some(
                        GetOptions::new()
                            .with_prefix()
                            .with_sort(SortTarget::Create, SortOrder::Ascend)
                            .with_limit(1),
                    ),
                )
                .await
            }
        })
        .await?;
    let rev = first.header().map(|h| h.revision()).unwrap_or(0);
    let of = |kv: &etcd_client::KeyValue| Leader {
        key: kv.key().to_vec(),
        value: kv.value().to_vec(),
        revision: kv.create_revision(),
        lease_id: kv.lease(),
    };
    match first.kvs().first() {
        None => Ok((None, rev)),
        Some(kv) if is_direct_child(&prefix, kv.key()) => Ok((Some(of(kv)), rev)),
        Some(_) => {
            // Keys of a nested name come first: scan for the first direct child.
            let p = prefix.clone();
            let all = client
                .call(bound, |mut c| {
                    let p = p.clone();
                    async move {
                        c.get(
                            p,
                            Some(
                                GetOptions::new()
                                    .with_prefix()
                                    .with_sort(SortTarget::Create, SortOrder::Ascend),
                            ),
                        )
                        .await
                    }
                })
                .await?;
            let rev = all.header().map(|h| h.revision()).unwrap_or(rev);
            Ok((
                all.kvs()
                    .iter()
                    .find(|kv| is_direct_child(&prefix, kv.key()))
                    .map(of),
                rev,
            ))
        }
    }
}

/// The body of [`Client::observe`].
pub(crate) fn observe(client: &Client, name: &str) -> Result<Observer> {
    validate_name(name)?;
    client.check_open()?;
    Ok(Observer {
        client: client.clone(),
        name: name.to_string(),
        last: None,
        stream: None,
    })
}

/// Leadership changes of one election; see [`Client::observe`].
pub struct Observer {
    client: Client,
    name: String,
    last: Option<Option<Leader>>,
    stream: Option<etcd_client::WatchStream>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("name", &self.name)
            .field("last", &self.last)
            .finish()
    }
}

impl Observer {
    /// The next leadership state that differs from the last one returned
    /// (the first call returns the current state at once). Fails with
    /// `Closed` as soon as the client is closed, whatever it is waiting for
    /// (a read, opening its watch, the next event).
    pub async fn next(&mut self) -> Result<Option<Leader>> {
        let closed = self.client.inner.closed.clone();
        tokio::select! {
            biased;
            _ = closed.cancelled() => Err(self.closed_err()),
            r = self.follow() => r,
        }
    }

    fn closed_err(&self) -> Error {
        Error::new(
            ErrorCode::Closed,
            format!("observe {}: the client was closed", show(&self.name)),
        )
    }

    /// [`Observer::next`] without the close: dropped at any await when the
    /// client closes (`last` changes only right before it returns).
    async fn follow(&mut self) -> Result<Option<Leader>> {
        let mut backoff = Duration::from_millis(50);
        loop {
            self.client.check_open()?;
            if self.stream.is_none() {
                // Read, then watch everything after the read: no change is missed.
                let (now, rev) = match read_leader(&self.client, &self.name).await {
                    Ok(r) => r,
                    Err(e) if e.code() == ErrorCode::Unavailable => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let prefix = crate::engine::keys::prefix(&self.client, &self.name);
                let opened = match self.client.inner.transport.stream_door().await {
                    Ok(c) => c
                        .watch_client()
                        .watch(
                            prefix,
                            Some(
                                WatchOptions::new()
                                    .with_prefix()
                                    .with_start_revision(rev + 1),
                            ),
                        )
                        .await
                        .ok(),
                    Err(_) => None,
                };
                self.stream = opened;
                if self.stream.is_none() {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                if self.last.as_ref() != Some(&now) {
                    self.last = Some(now.clone());
                    return Ok(now);
                }
                continue;
            }
            let Some(stream) = self.stream.as_mut() else {
                continue;
            };
            let msg = stream.message().await;
            match msg {
                Ok(Some(r))
                    if r.events()
                        .iter()
                        .any(|e| matches!(e.event_type(), EventType::Put | EventType::Delete)) =>
                {
                    let (now, _) = match read_leader(&self.client, &self.name).await {
                        Ok(r) => r,
                        Err(e) if e.code() == ErrorCode::Unavailable => {
                            self.stream = None;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    if self.last.as_ref() != Some(&now) {
                        self.last = Some(now.clone());
                        return Ok(now);
                    }
                }
                Ok(Some(r)) if r.canceled() || r.compact_revision() > 0 => self.stream = None,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => self.stream = None,
            }
        }
    }
}

/// An election as a value: the election `name` of a client
/// ([`Client::campaign`], [`Client::leader`], [`Client::observe`],
/// [`Client::leader_loop`]).
#[derive(Clone, Debug)]
pub struct Election {
    pub(crate) client: Client,
    pub(crate) name: String,
}

impl Election {
    /// The election `name` of `client` (nothing is sent until a call).
    pub fn new(client: &Client, name: impl Into<String>) -> Election {
        Election {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// Campaign with `value`: [`Client::campaign`].
    pub async fn campaign(&self, value: impl AsRef<[u8]>, opts: LockOptions) -> Result<Leadership> {
        campaign(&self.client, &self.name, value, opts).await
    }

    /// The current leader: [`Client::leader`].
    pub async fn leader(&self) -> Result<Option<Leader>> {
        leader(&self.client, &self.name).await
    }

    /// Follow its leaders: [`Client::observe`].
    pub fn observe(&self) -> Result<Observer> {
        observe(&self.client, &self.name)
    }
}
