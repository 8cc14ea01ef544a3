//! Real etcd processes for tests and benchmarks: one node or a cluster, on
//! 127.0.0.1 with free ports and a temp data dir, health-checked, and always
//! stopped (on drop, and by the kernel if the test process dies: every member
//! gets `PR_SET_PDEATHSIG`). No mock of etcd anywhere.
//!
//! The binary `etcd-harness` exposes the same to tests in other languages: it
//! prints one JSON line with the endpoints and stops the cluster when its
//! stdin closes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod control;
mod front;
mod probe;
mod sys;

use sys::await_stopped;

pub use front::*;
pub use probe::*;

/// The etcd binary: `$ETCD_BIN`, else `etcd` on `PATH`, else `/usr/bin/etcd`
/// (`etcd.exe` on Windows).
pub fn etcd_bin() -> PathBuf {
    if let Ok(p) = std::env::var("ETCD_BIN") {
        return PathBuf::from(p);
    }
    let name = format!("etcd{}", std::env::consts::EXE_SUFFIX);
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join(&name);
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("/usr/bin/etcd")
}

/// `etcdctl`, found like [`etcd_bin`] (`$ETCDCTL_BIN`).
pub fn etcdctl_bin() -> PathBuf {
    if let Ok(p) = std::env::var("ETCDCTL_BIN") {
        return PathBuf::from(p);
    }
    let e = etcd_bin();
    let sib = e.with_file_name(format!("etcdctl{}", std::env::consts::EXE_SUFFIX));
    if sib.is_file() {
        return sib;
    }
    PathBuf::from("/usr/bin/etcdctl")
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

fn scratch_root() -> PathBuf {
    if let Ok(p) = std::env::var("ETCDLOCK_TEST_DIR") {
        return PathBuf::from(p);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// One etcd member.
pub struct Member {
    /// Member name (`m0`, `m1`, ...).
    pub name: String,
    /// Client port (on `host`).
    pub client_port: u16,
    /// Peer port (on `host`).
    pub peer_port: u16,
    /// The loopback address the member listens on (127.0.0.1 unless
    /// [`Config::hosts`] gave it its own).
    pub host: String,
    /// The cgroup v2 directory the member's process starts in (see [`Config::cgroups`]).
    pub cgroup: Option<PathBuf>,
    /// The member's TLS client port (on `host`), when started by [`Etcd::start_tls`].
    pub tls_port: Option<u16>,
    /// The etcd binary the member runs (and is restarted with): see
    /// [`Config::bin`] and [`Etcd::set_bin`]; `None`: [`etcd_bin`].
    pub bin: Option<PathBuf>,
    data_dir: PathBuf,
    child: Option<Child>,
    args: Vec<String>,
}

impl Member {
    /// `http://<host>:<client_port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.client_port)
    }
    /// `https://<host>:<tls_port>`, when started by [`Etcd::start_tls`].
    pub fn tls_endpoint(&self) -> Option<String> {
        self.tls_port.map(|p| format!("https://{}:{p}", self.host))
    }
    /// The member's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

/// A running etcd (one node or a cluster). Dropping it stops every member and
/// deletes the data dirs.
pub struct Etcd {
    /// Members in start order.
    pub members: Vec<Member>,
    dir: PathBuf,
}

/// Extra etcd flags for every member, e.g. `--auth-token-ttl=5`.
#[derive(Default, Clone)]
pub struct Config {
    /// Number of members (default 1).
    pub members: usize,
    /// Extra command-line flags.
    pub extra_args: Vec<String>,
    /// Client URL scheme: "http" (default) or "https" (then pass TLS flags in extra_args).
    pub scheme: Option<String>,
    /// A loopback address per member (e.g. 127.0.0.2, .3, .4) for its client
    /// and peer URLs, so that traffic between members can be told apart;
    /// empty (the default): every member on 127.0.0.1.
    pub hosts: Vec<String>,
    /// A cgroup v2 directory per member, which the member's process joins
    /// before it execs etcd (so every socket it opens belongs to that cgroup,
    /// and netfilter can tell members' traffic apart); empty (the default):
    /// members stay in the caller's cgroup.
    pub cgroups: Vec<PathBuf>,
    /// The etcd binary of every member; `None` (the default): [`etcd_bin`].
    pub bin: Option<PathBuf>,
}

/// The server certificate of [`Etcd::start_tls`] (PEM files).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// Certificate for 127.0.0.1 (and localhost).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl Etcd {
    /// One node.
    pub fn single() -> Etcd {
        Etcd::start(Config {
            members: 1,
            ..Default::default()
        })
    }

    /// A cluster of `n` members.
    pub fn cluster(n: usize) -> Etcd {
        Etcd::start(Config {
            members: n,
            ..Default::default()
        })
    }

    /// Start with a config; panics (this is test code) if etcd does not come up.
    pub fn start(cfg: Config) -> Etcd {
        Etcd::start_with(cfg, None)
    }

    /// Start with a config, every member serving clients over TLS with `tls`
    /// on a port of its own ([`Member::tls_endpoint`], [`Etcd::tls_endpoints`])
    /// beside its plaintext client port ([`Member::endpoint`]), which the
    /// harness keeps for health checks, `etcdctl` and observers.
    pub fn start_tls(cfg: Config, tls: &ServerTls) -> Etcd {
        Etcd::start_with(cfg, Some(tls))
    }

    fn start_with(cfg: Config, tls: Option<&ServerTls>) -> Etcd {
        let mut last = String::new();
        for _attempt in 0..3 {
            match Etcd::try_start(&cfg, tls) {
                Ok(e) => return e,
                Err(e) => last = e,
            }
        }
        panic!("etcd did not start: {last}");
    }

    fn try_start(cfg: &Config, tls: Option<&ServerTls>) -> Result<Etcd, String> {
        let n = cfg.members.max(1);
        let scheme = cfg.scheme.clone().unwrap_or_else(|| "http".into());
        let dir = scratch_root().join(format!(
            "etcdlock-test-{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            Instant::now().elapsed().as_nanos()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let host = |i: usize| {
            cfg.hosts
                .get(i)
                .cloned()
                .unwrap_or_else(|| "127.0.0.1".into())
        };
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("m{i}=http://{}:{p}", host(i)))
            .collect();
        let token = format!("etcdlock-{}", dir.file_name().unwrap().to_string_lossy());
        let mut members = Vec::new();
        for (i, (cp, pp)) in ports.iter().enumerate() {
            let data_dir = dir.join(format!("m{i}"));
            let h = host(i);
            let tls_port = tls.map(|_| free_port());
            let extra_url = tls_port
                .map(|p| format!(",https://{h}:{p}"))
                .unwrap_or_default();
            let mut args = vec![
                format!("--name=m{i}"),
                format!("--data-dir={}", data_dir.display()),
                format!("--listen-client-urls={scheme}://{h}:{cp}{extra_url}"),
                format!("--advertise-client-urls={scheme}://{h}:{cp}{extra_url}"),
                format!("--listen-peer-urls=http://{h}:{pp}"),
                format!("--initial-advertise-peer-urls=http://{h}:{pp}"),
                format!("--initial-cluster={}", initial.join(",")),
                "--initial-cluster-state=new".into(),
                format!("--initial-cluster-token={token}"),
                "--logger=zap".into(),
                format!("--log-level={}", etcd_log_level()),
                "--heartbeat-interval=50".into(),
                "--election-timeout=500".into(),
            ];
            if let Some(t) = tls {
                args.push(format!("--cert-file={}", t.cert.display()));
                args.push(format!("--key-file={}", t.key.display()));
            }
            args.extend(cfg.extra_args.iter().cloned());
            let mut m = Member {
                name: format!("m{i}"),
                client_port: *cp,
                peer_port: *pp,
                host: h,
                cgroup: cfg.cgroups.get(i).cloned(),
                tls_port,
                bin: cfg.bin.clone(),
                data_dir,
                child: None,
                args,
            };
            spawn(&mut m, &dir)?;
            members.push(m);
        }
        let etcd = Etcd { members, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in 0..n {
            if scheme == "http" {
                etcd.wait_healthy(i, deadline)?;
            } else {
                wait_port(&etcd.members[i].host, etcd.members[i].client_port, deadline)?;
            }
        }
        Ok(etcd)
    }

    /// Client endpoints of all members.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.endpoint()).collect()
    }

    /// The members' TLS client endpoints (empty unless started by [`Etcd::start_tls`]).
    pub fn tls_endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter_map(|m| m.tls_endpoint())
            .collect()
    }

    /// Client endpoints joined with commas (for `--endpoints`).
    pub fn endpoints_csv(&self) -> String {
        self.endpoints().join(",")
    }

    /// The data directory root.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn wait_healthy(&self, i: usize, deadline: Instant) -> Result<(), String> {
        let port = self.members[i].client_port;
        loop {
            if http_get_at(&self.members[i].host, port, "/health")
                .map(|b| b.contains("\"health\":\"true\""))
                .unwrap_or(false)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("member m{i} on port {port} not healthy in time"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until member `i` reports healthy (after a restart).
    pub fn wait_member_healthy(&self, i: usize, timeout: Duration) -> Result<(), String> {
        self.wait_healthy(i, Instant::now() + timeout)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                sys::cont(c.id());
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        keep_logs(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// etcd's log level: `ETCDLOCK_ETCD_LOG_LEVEL` (debug, info, warn), else `error`.
fn etcd_log_level() -> String {
    std::env::var("ETCDLOCK_ETCD_LOG_LEVEL").unwrap_or_else(|_| "error".into())
}

/// With `ETCDLOCK_ETCD_KEEP_LOGS=<dir>`, the members' logs are copied there
/// (as `<pid>-<cluster dir>-<member>.log`) before the cluster's directory goes.
fn keep_logs(dir: &Path) {
    let Some(to) = std::env::var_os("ETCDLOCK_ETCD_KEEP_LOGS").map(PathBuf::from) else {
        return;
    };
    let _ = std::fs::create_dir_all(&to);
    let tag = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            let _ = std::fs::copy(e.path(), to.join(format!("{tag}-{name}")));
        }
    }
}

fn spawn(m: &mut Member, dir: &Path) -> Result<(), String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{}.log", m.name)))
        .map_err(|e| e.to_string())?;
    let bin = m.bin.clone().unwrap_or_else(etcd_bin);
    let mut cmd = Command::new(&bin);
    cmd.args(&m.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    // SAFETY: prctl is async-signal-safe; runs in the child before exec.
    // (Linux only: elsewhere a member outlives a test process that dies.)
    #[cfg(target_os = "linux")]
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    #[cfg(not(unix))]
    if m.cgroup.is_some() {
        return Err("a member's cgroup needs Linux".into());
    }
    #[cfg(unix)]
    if let Some(cg) = &m.cgroup {
        let procs = std::ffi::CString::new(
            cg.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(|e| e.to_string())?;
        // SAFETY: open/write/close are async-signal-safe; the path was built before the fork.
        // Writing "0" moves the writing process (the child, before exec) into the cgroup.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
                Ok(())
            });
        }
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    m.child = Some(child);
    Ok(())
}

fn wait_port(host: &str, port: u16, deadline: Instant) -> Result<(), String> {
    loop {
        if TcpStream::connect((host, port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("port {port} never opened"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
