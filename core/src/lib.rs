//! # etcdlock
//!
//! A distributed lock on etcd that does the details right: one lease per client
//! kept alive in the background, waiters queued by create_revision that each
//! watch only their predecessor (no thundering herd, no 100 ms unsynced-watch
//! tick), fencing tokens, guarded writes that etcd rejects from a stale holder,
//! and loss detection that tells the holder before etcd can grant the lock to
//! anyone else.
//!
//! The key layout is that of etcd's Go `concurrency.Mutex` and `etcdctl lock`,
//! so etcdlock, `etcdctl lock` and Go programs exclude each other on one name.
//!
//! ```no_run
//! # async fn demo() -> etcdlock::Result<()> {
//! use etcdlock::{Client, ClientOptions, LockOptions};
//! use std::time::Duration;
//!
//! let client = Client::connect(ClientOptions::new(["http://127.0.0.1:2379"]).with_ttl(10)).await?;
//! let guard = client.lock_with("stock", LockOptions::timeout(Duration::from_secs(5))).await?;
//! println!("holding {} with fencing token {}", guard.key(), guard.fencing_token());
//! let stock: i64 = guard.get("stock-count").await?.map(|v| String::from_utf8_lossy(&v).parse().unwrap_or(0)).unwrap_or(0);
//! guard.put("stock-count", (stock - 1).to_string()).await?; // rejected by etcd if we lost the lock
//! guard.unlock().await?;
//! client.close().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

#[cfg(feature = "bench")]
pub mod bench_floor;
pub mod blocking;
pub mod bridge;
mod client;
mod engine;
mod error;
mod guard;
pub mod logs;
#[cfg(feature = "mem")]
mod mem;
mod meta;
pub mod metrics;
mod names;
mod options;
pub mod poison;
mod recipes;
pub mod records;
pub mod runtime;
mod session;
mod transport;
mod waitgraph;
mod watch;

pub use client::window::WINDOW as QUEUED_PER_CLIENT;
pub use client::Client;
pub use error::{Error, ErrorCode, LossReason, Result};
pub use guard::{Guard, GuardState, LossSignal};
#[cfg(feature = "mem")]
pub use mem::{MemKey, MemStore};
pub use meta::{set_language, LockKind, META_PREFIX};
pub use metrics::{AcquireResult, Acquisitions, MetricInfo, Metrics, METRICS};
pub use names::{MAX_NAME_LEN, RECORD_MARK};
pub use options::{env_var, parse_duration, OPTION_KEYS};
pub use options::{
    ClientOptions, LockOptions, TlsOptions, MAX_CLIENT_TIMEOUT, MAX_LOCK_DELAY, MAX_METADATA_BYTES,
    MAX_TTL_SECS,
};
pub use recipes::election::{Election, Leadership, Observer};
pub use recipes::leader::{LeadOptions, LeaderEvent, LeaderLoop, Term};
pub use recipes::multi::{MultiGuard, MultiLock, MultiLossSignal, MAX_MULTI};
pub use recipes::mutex::Mutex;
pub use recipes::once::{now_ms, Once, OnceHold, OnceRecord, ONCE_PREFIX};
pub use recipes::reentry::ReentrantLock;
pub use recipes::rwlock::RwLock;
pub use recipes::semaphore::{Semaphore, MAX_PERMITS};
pub use recipes::sync::{Barrier, Latch, MAX_SYNC_COUNT};
pub use records::Leader;
pub use records::{Contender, ContenderKind, Status};
pub use session::{Loss, Renewal};
pub use tokio_util::sync::CancellationToken;

/// The repository README's Rust example, compiled by `cargo test --doc`
/// (scripts/readme_blocks.py lists every README block and what checks it).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctest;

// The Rust blocks of the documentation site's pages, compiled and run by
// `cargo test --doc`: one module per page, whose file is only the page's
// include on its first line, so a test's id is the page and the line of the
// block in it (`docs_pages/lang_rust.rs - docs_lang_rust (line 59)` is
// docs/lang/rust.md:59). The examples connect through
// `ClientOptions::from_env()`; a hidden first line makes an unset
// `ETCDLOCK_ENDPOINTS` `mem://` (the in-process store), so they run here
// without etcd, and against etcd when the variable names one.
// scripts/readme_blocks.py requires each page with Rust blocks here. (A
// plain comment: an outer doc comment would come first in the doc.)
// docs/guides/fencing.md
#[cfg(doctest)]
#[path = "docs_pages/guides_fencing.rs"]
mod docs_guides_fencing;
// docs/guides/leader-election.md
#[cfg(doctest)]
#[path = "docs_pages/guides_leader_election.rs"]
mod docs_guides_leader_election;
// docs/guides/semaphore.md
#[cfg(doctest)]
#[path = "docs_pages/guides_semaphore.rs"]
mod docs_guides_semaphore;
// docs/guides/tls-auth.md
#[cfg(doctest)]
#[path = "docs_pages/guides_tls_auth.rs"]
mod docs_guides_tls_auth;
// docs/guides/unit-tests.md
#[cfg(doctest)]
#[path = "docs_pages/guides_unit_tests.rs"]
mod docs_guides_unit_tests;
// docs/migrate/go-concurrency.md
#[cfg(doctest)]
#[path = "docs_pages/migrate_go_concurrency.rs"]
mod docs_migrate_go_concurrency;
// docs/lang/rust.md
#[cfg(doctest)]
#[path = "docs_pages/lang_rust.rs"]
mod docs_lang_rust;
// docs/start/rust.md
#[cfg(doctest)]
#[path = "docs_pages/start_rust.rs"]
mod docs_start_rust;
