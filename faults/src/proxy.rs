//! A TCP fault proxy between etcd clients and one etcd member.
//!
//! It listens on `127.0.0.1:<free port>` and forwards every accepted
//! connection to the member. The test switches its behaviour at run time:
//!
//! - [`Mode::Pass`]: forward as is.
//! - [`Mode::Blackhole`]: accept, but forward nothing in either direction
//!   (bytes are held back, as by a partition where TCP keeps retransmitting,
//!   and delivered in order once the mode changes).
//! - [`Mode::Delay`]: hold each chunk `base ± jitter` before forwarding
//!   (order is preserved).
//! - [`Proxy::drop_new_connections`]: refuse (RST) a fraction of new connections.
//! - [`Proxy::reset_all`] / [`Proxy::reset_fraction`]: RST live connections.
//! - [`Proxy::drop_response_to`]: forward the next request that contains a
//!   byte pattern (so etcd applies it), discard everything the member sends
//!   back on that connection from then on, and cut the connection: the
//!   "request applied, response lost" fault.

use etcdlock::poison::Locked;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcdlock::CancellationToken;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::Rng;

/// What the proxy does to the bytes of live connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward unchanged.
    Pass,
    /// Forward nothing (stall both directions) until the mode changes.
    Blackhole,
    /// Delay every chunk by `base ± jitter` (uniform).
    Delay {
        /// Mean delay.
        base: Duration,
        /// Half-width of the uniform jitter.
        jitter: Duration,
    },
}

/// Counters of what the proxy did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted and forwarded.
    pub accepted: u64,
    /// New connections refused by [`Proxy::drop_new_connections`].
    pub refused: u64,
    /// Live connections reset.
    pub resets: u64,
    /// Responses dropped by [`Proxy::drop_response_to`].
    pub responses_dropped: u64,
    /// Chunks delayed.
    pub delayed_chunks: u64,
}

struct Conn {
    kill: CancellationToken,
    /// Set when the response to a forwarded request must be dropped.
    doomed: AtomicBool,
}

struct State {
    upstream: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Fraction of new connections to refuse, in millionths.
    refuse_ppm: AtomicU32,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    rng: Mutex<Rng>,
    drop_pattern: Mutex<Option<Vec<u8>>>,
    stats: Mutex<Stats>,
    shutdown: CancellationToken,
}

impl State {
    fn stat(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.stats.locked());
    }
    fn chance(&self, ppm: u32) -> bool {
        ppm > 0 && (self.rng.locked().below(1_000_000) as u32) < ppm
    }
}

/// A running fault proxy. Dropping it closes the listener and resets every connection.
pub struct Proxy {
    addr: SocketAddr,
    st: Arc<State>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("upstream", &self.st.upstream)
            .finish()
    }
}

fn parse_upstream(upstream: &str) -> io::Result<SocketAddr> {
    let s = upstream
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let s = s.trim_end_matches('/');
    s.parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad upstream {upstream:?}: {e}"),
        )
    })
}

impl Proxy {
    /// Start a proxy in pass mode in front of `upstream` (`http://127.0.0.1:2379`
    /// or `127.0.0.1:2379`). Must be called inside a tokio runtime.
    pub async fn start(upstream: &str) -> io::Result<Proxy> {
        let upstream = parse_upstream(upstream)?;
        if !upstream.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the proxy only forwards to 127.0.0.1",
            ));
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Pass);
        let st = Arc::new(State {
            upstream,
            mode,
            refuse_ppm: AtomicU32::new(0),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            rng: Mutex::new(Rng::new(addr.port() as u64 ^ crate::seed())),
            drop_pattern: Mutex::new(None),
            stats: Mutex::new(Stats::default()),
            shutdown: CancellationToken::new(),
        });
        tokio::spawn(accept_loop(listener, st.clone()));
        Ok(Proxy { addr, st })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, for client options.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Switch the mode of every live and future connection.
    pub fn set_mode(&self, m: Mode) {
        self.st.mode.send_replace(m);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.st.mode.borrow()
    }

    /// Forward unchanged (heals blackhole and delay).
    pub fn pass(&self) {
        self.set_mode(Mode::Pass);
    }

    /// Stall everything.
    pub fn blackhole(&self) {
        self.set_mode(Mode::Blackhole);
    }

    /// Delay every chunk by `base ± jitter`.
    pub fn delay(&self, base: Duration, jitter: Duration) {
        self.set_mode(Mode::Delay { base, jitter });
    }

    /// Refuse (accept, then RST) this fraction (0.0..=1.0) of new connections.
    pub fn drop_new_connections(&self, fraction: f64) {
        let ppm = (fraction.clamp(0.0, 1.0) * 1_000_000.0) as u32;
        self.st.refuse_ppm.store(ppm, Ordering::Relaxed);
    }

    /// Reset (RST) every live connection; returns how many.
    pub fn reset_all(&self) -> usize {
        self.reset_fraction(1.0)
    }

    /// Reset every live connection and wait until each is closed, so nothing
    /// it held back (in [`Mode::Blackhole`]) can still be forwarded when the
    /// mode changes; returns how many. Connections accepted meanwhile live on.
    pub async fn reset_all_and_wait(&self) -> usize {
        let ids: Vec<u64> = self.st.conns.locked().keys().copied().collect();
        let n = self.reset_all();
        while {
            let conns = self.st.conns.locked();
            ids.iter().any(|id| conns.contains_key(id))
        } {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        n
    }

    /// Reset each live connection with probability `fraction`; returns how many were reset.
    pub fn reset_fraction(&self, fraction: f64) -> usize {
        let ppm = (fraction.clamp(0.0, 1.0) * 1_000_000.0) as u32;
        let conns: Vec<Arc<Conn>> = self.st.conns.locked().values().cloned().collect();
        let mut n = 0;
        for c in conns {
            if ppm >= 1_000_000 || self.st.chance(ppm) {
                c.kill.cancel();
                n += 1;
            }
        }
        self.st.stat(|s| s.resets += n as u64);
        n
    }

    /// Arm the "response lost" fault: the next client chunk containing
    /// `pattern` is forwarded to etcd, then everything etcd sends back on that
    /// connection is discarded and the connection is reset 100 ms later.
    pub fn drop_response_to(&self, pattern: &[u8]) {
        *self.st.drop_pattern.locked() = Some(pattern.to_vec());
    }

    /// Whether the armed response drop has fired (the pattern was seen).
    pub fn drop_pending(&self) -> bool {
        self.st.drop_pattern.locked().is_some()
    }

    /// Live connections.
    pub fn live_connections(&self) -> usize {
        self.st.conns.locked().len()
    }

    /// What the proxy has done so far.
    pub fn stats(&self) -> Stats {
        *self.st.stats.locked()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.st.shutdown.cancel();
        for c in self.st.conns.locked().values() {
            c.kill.cancel();
        }
    }
}

async fn accept_loop(listener: TcpListener, st: Arc<State>) {
    loop {
        let accepted = tokio::select! {
            _ = st.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((sock, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Always close with RST: a reset connection looks like a crashed peer or middlebox.
        // (Linger 0 never blocks on drop: the kernel sends RST at once.)
        #[allow(deprecated)]
        let _ = sock.set_linger(Some(Duration::ZERO));
        let _ = sock.set_nodelay(true);
        if st.chance(st.refuse_ppm.load(Ordering::Relaxed)) {
            st.stat(|s| s.refused += 1);
            drop(sock);
            continue;
        }
        let id = st.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            kill: st.shutdown.child_token(),
            doomed: AtomicBool::new(false),
        });
        st.conns.locked().insert(id, conn.clone());
        st.stat(|s| s.accepted += 1);
        let st2 = st.clone();
        tokio::spawn(async move {
            serve(sock, st2.clone(), conn).await;
            st2.conns.locked().remove(&id);
        });
    }
}

async fn serve(client: TcpStream, st: Arc<State>, conn: Arc<Conn>) {
    let up = tokio::select! {
        _ = conn.kill.cancelled() => return,
        u = TcpStream::connect(st.upstream) => match u { Ok(u) => u, Err(_) => return },
    };
    let _ = up.set_nodelay(true);
    #[allow(deprecated)]
    let _ = up.set_linger(Some(Duration::ZERO));
    let (cr, cw) = client.into_split();
    let (ur, uw) = up.into_split();
    tokio::select! {
        _ = conn.kill.cancelled() => {}
        _ = pump(cr, uw, true, st.clone(), conn.clone()) => {}
        _ = pump(ur, cw, false, st.clone(), conn.clone()) => {}
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    c2s: bool,
    st: Arc<State>,
    conn: Arc<Conn>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut mode_rx = st.mode.subscribe();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let mut fire = false;
        if c2s {
            let mut pat = st.drop_pattern.locked();
            if let Some(p) = pat.as_ref() {
                if !p.is_empty() && chunk.windows(p.len()).any(|w| w == p.as_slice()) {
                    *pat = None;
                    fire = true;
                }
            }
        }
        if fire {
            // From now on nothing etcd says on this connection reaches the client.
            conn.doomed.store(true, Ordering::SeqCst);
            st.stat(|s| s.responses_dropped += 1);
            let kill = conn.kill.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                kill.cancel();
            });
        }
        loop {
            let m = *mode_rx.borrow_and_update();
            match m {
                Mode::Pass => break,
                Mode::Blackhole => {
                    if mode_rx.changed().await.is_err() {
                        return;
                    }
                }
                Mode::Delay { base, jitter } => {
                    let j = jitter.as_micros() as u64;
                    let off = if j == 0 {
                        0
                    } else {
                        st.rng.locked().below(2 * j + 1)
                    };
                    let d = (base.as_micros() as u64 + off).saturating_sub(j);
                    st.stat(|s| s.delayed_chunks += 1);
                    tokio::time::sleep(Duration::from_micros(d)).await;
                    break;
                }
            }
        }
        if !c2s && conn.doomed.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(chunk).await.is_err() {
            return;
        }
    }
}
