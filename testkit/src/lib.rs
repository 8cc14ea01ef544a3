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
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The etcd binary: `$ETCD_BIN`, else `etcd` on `PATH`, else `/usr/bin/etcd`.
pub fn etcd_bin() -> PathBuf {
    if let Ok(p) = std::env::var("ETCD_BIN") {
        return PathBuf::from(p);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join("etcd");
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
    let sib = e.with_file_name("etcdctl");
    if sib.is_file() {
        return sib;
    }
    PathBuf::from("/usr/bin/etcdctl")
}

/// Wait (up to 1 s) until every thread of `pid` is stopped: /proc/PID/task/*/stat
/// shows state `T`.
fn await_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(1);
    let stopped = || -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true;
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .map(|st| {
                    st.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('T'))
                        .unwrap_or(true)
                })
                .unwrap_or(true)
        })
    };
    while !stopped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
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

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop member `i` gracefully: SIGTERM, then wait for it to exit (etcd
    /// hands its leadership over first); SIGKILL after `within`. Returns how
    /// long the stop took, or an error if it had to be killed.
    pub fn stop(&mut self, i: usize, within: Duration) -> Result<Duration, String> {
        let Some(mut c) = self.members[i].child.take() else {
            return Ok(Duration::ZERO);
        };
        let start = Instant::now();
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        while start.elapsed() < within {
            if let Ok(Some(_)) = c.try_wait() {
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = c.kill();
        let _ = c.wait();
        Err(format!("m{i} did not exit within {within:?} of SIGTERM"))
    }

    /// The binary member `i` runs after its next [`Etcd::restart`] (same
    /// data dir, ports and flags): a rolling upgrade.
    pub fn set_bin(&mut self, i: usize, bin: PathBuf) {
        self.members[i].bin = Some(bin);
    }

    /// Restart member `i` (after [`Etcd::kill`]) with its data dir, and wait for it.
    pub fn restart(&mut self, i: usize) {
        let dir = self.dir.clone();
        {
            let m = &mut self.members[i];
            if m.child.is_none() {
                // An existing member rejoins with its data; --initial-cluster-state is ignored then.
                spawn(m, &dir).expect("restart etcd member");
            }
        }
        let port = self.members[i].client_port;
        wait_port(
            &self.members[i].host,
            port,
            Instant::now() + Duration::from_secs(20),
        )
        .expect("member port after restart");
    }

    /// SIGSTOP member `i`, and return once the kernel reports it stopped: a
    /// thread of etcd already running when the signal is sent can still
    /// answer a request, so a test that sends one right after `kill` would
    /// race the stop.
    pub fn pause(&self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            await_stopped(pid);
        }
    }

    /// SIGSTOP member `i` now and SIGCONT it after `d` (from a thread), while
    /// the caller goes on: a hang of known length.
    pub fn pause_for(&self, i: usize, d: Duration) {
        let Some(pid) = self.members[i].pid() else {
            return;
        };
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        await_stopped(pid);
        std::thread::spawn(move || {
            std::thread::sleep(d);
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        });
    }

    /// SIGCONT member `i`.
    pub fn resume(&self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }

    /// The index of the current leader, asked of the first running member that answers.
    pub fn leader(&self) -> Option<usize> {
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            let Ok(out) = Command::new(etcdctl_bin())
                .env("ETCDCTL_API", "3")
                .args([
                    "--endpoints",
                    &self.endpoints_csv(),
                    "endpoint",
                    "status",
                    "-w",
                    "json",
                ])
                .stderr(Stdio::null())
                .output()
            else {
                continue;
            };
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                continue;
            };
            let arr = v.as_array().cloned().unwrap_or_default();
            for st in arr {
                let member_id = st["Status"]["header"]["member_id"].as_u64();
                let leader = st["Status"]["leader"].as_u64();
                if member_id.is_some() && member_id == leader {
                    let ep = st["Endpoint"].as_str().unwrap_or("");
                    return self.members.iter().position(|mm| mm.endpoint() == ep);
                }
            }
            let _ = m;
        }
        None
    }

    /// Wait until a member other than `old` says it leads (asking the other
    /// members only: a hung `old` would stall the question), at most `within`.
    /// The index of the new leader, or None. Each round is one `etcdctl
    /// endpoint status`, about 20-40 ms: the resolution of the measurement.
    pub fn await_new_leader(&self, old: usize, within: Duration) -> Option<usize> {
        let others: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .filter(|(i, m)| *i != old && m.child.is_some())
            .map(|(_, m)| m.endpoint())
            .collect();
        let ep = await_leader_among(&others, within, Duration::from_millis(10))?;
        self.members.iter().position(|m| m.endpoint() == ep)
    }

    /// The sum of the Prometheus series `name` on member `i`'s `/metrics`,
    /// over every series of that name whose labels contain all of `labels`
    /// (e.g. `grpc_method="Txn"`). Panics if etcd exports no series of that
    /// name at all, so a renamed metric fails the test instead of reading 0.
    pub fn metric(&self, i: usize, name: &str, labels: &[&str]) -> f64 {
        let body = http_get_at(
            &self.members[i].host,
            self.members[i].client_port,
            "/metrics",
        )
        .expect("etcd /metrics");
        let mut seen = false;
        let mut sum = 0.0;
        for line in body.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            if series != name
                && !series
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{'))
            {
                continue;
            }
            seen = true;
            if labels.iter().all(|l| series.contains(l)) {
                sum += value.trim().parse::<f64>().unwrap_or(0.0);
            }
        }
        assert!(seen, "{name} is not in etcd's /metrics");
        sum
    }

    /// Run `etcdctl` against this cluster and return stdout (panics on failure).
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let out = Command::new(etcdctl_bin())
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints_csv()))
            .args(args)
            .output()
            .expect("run etcdctl");
        assert!(
            out.status.success(),
            "etcdctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
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
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
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

/// This process's established TCP connections to 127.0.0.1:`port` (Linux:
/// its socket inodes in /proc/self/fd matched against /proc/self/net/tcp).
pub fn connections_to(port: u16) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            Some(
                l.to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let tcp = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
    tcp.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 9 && f[3] == "01" && ours.contains(f[9]))
        .filter(|f| {
            f[2].rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port)
        })
        .count()
}

/// A plain HTTP/1.0 GET on 127.0.0.1 (health, metrics).
pub fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    http_get_at("127.0.0.1", port, path)
}

/// A plain HTTP/1.0 GET on a loopback address `host`.
pub fn http_get_at(host: &str, port: u16, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect((host, port))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}

/// Wait until one of `endpoints` says it leads, at most `within`: its
/// endpoint, or None. Each round is one `etcdctl endpoint status` (about
/// 20-40 ms) and a pause of `every`: the resolution of the measurement, and
/// what it costs the machine meanwhile. Needs no `Etcd`, so a thread can run
/// it while the cluster's owner injects faults. Each status call may take up
/// to 1 s (a loaded 2-core machine starves etcd and etcdctl alike: with 300 ms
/// every call of a 20 s poll timed out once while a leader had long been
/// elected); an answer ends the call at once, so the resolution is unchanged.
pub fn await_leader_among(
    endpoints: &[String],
    within: Duration,
    every: Duration,
) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let out = Command::new(etcdctl_bin())
            .env("ETCDCTL_API", "3")
            .args([
                "--endpoints",
                &endpoints.join(","),
                "--command-timeout=1s",
                "endpoint",
                "status",
                "-w",
                "json",
            ])
            .stderr(Stdio::null())
            .output();
        if let Ok(v) =
            out.map(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default())
        {
            for st in v.as_array().cloned().unwrap_or_default() {
                let member_id = st["Status"]["header"]["member_id"].as_u64();
                if member_id.is_some() && member_id == st["Status"]["leader"].as_u64() {
                    return Some(st["Endpoint"].as_str().unwrap_or("").to_string());
                }
            }
        }
        std::thread::sleep(every);
    }
    None
}

/// A process in front of etcd (a gRPC proxy or load balancer), on 127.0.0.1
/// at a free port: stopped on drop, and by the kernel if the test process
/// dies (`PR_SET_PDEATHSIG`); it can be killed, restarted, paused, resumed.
pub struct Front {
    /// Port clients connect to.
    pub port: u16,
    tls: bool,
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    child: Option<Child>,
}

impl Front {
    fn start(program: PathBuf, args: Vec<String>, port: u16, dir: PathBuf) -> Front {
        let mut f = Front {
            port,
            tls: false,
            program,
            args,
            dir,
            child: None,
        };
        f.restart();
        f
    }

    /// `http://127.0.0.1:<port>` (`https://` for [`grpc_balancer_tls`]).
    pub fn endpoint(&self) -> String {
        format!(
            "{}://127.0.0.1:{}",
            if self.tls { "https" } else { "http" },
            self.port
        )
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again (after [`Front::kill`]) on the same port, and wait until it listens.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            return;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("front.log"))
            .expect("front log");
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; runs in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.program.display()));
        self.child = Some(child);
        if let Err(e) = wait_port(
            "127.0.0.1",
            self.port,
            Instant::now() + Duration::from_secs(20),
        ) {
            panic!(
                "{} did not listen: {e}; its log:\n{}",
                self.program.display(),
                self.log()
            );
        }
    }

    /// SIGSTOP it, and return once the kernel reports it stopped.
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            await_stopped(pid);
        }
    }

    /// SIGCONT it.
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }

    /// What it wrote to stdout and stderr so far (and, for nginx, its error log).
    pub fn log(&self) -> String {
        let mut s = std::fs::read_to_string(self.dir.join("front.log")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default());
        s
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.resume();
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn front_dir(kind: &str) -> PathBuf {
    let dir = scratch_root().join(format!(
        "etcdlock-{kind}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("front dir");
    dir
}

/// etcd's own gRPC proxy (`etcd grpc-proxy start`, in the etcd binary) in
/// front of `endpoints`: it coalesces watches and lease keep-alives of its
/// clients (one keep-alive stream per lease to etcd, answered to each client
/// at its own renewals).
pub fn grpc_proxy(endpoints: &[String]) -> Front {
    let port = free_port();
    let eps: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    let args = vec![
        "grpc-proxy".into(),
        "start".into(),
        format!("--endpoints={}", eps.join(",")),
        format!("--listen-addr=127.0.0.1:{port}"),
    ];
    Front::start(etcd_bin(), args, port, front_dir("grpc-proxy"))
}

/// nginx (Debian's, `/usr/sbin/nginx` or `$NGINX_BIN`) as a gRPC load
/// balancer in front of `endpoint` over h2c (`grpc_pass`): it ends each client
/// connection with GOAWAY after `keepalive_requests` requests (nginx's default
/// is 1,000), as load balancers do after a request count or a connection age.
/// Its access log (`$connection $connection_requests $status $request_uri
/// $request_time`) is read by [`nginx_requests`] and [`balancer_stats`],
/// and so is its error log (level `info`: it names the streams the client
/// cancelled).
pub fn grpc_balancer(endpoint: &str, keepalive_requests: u32) -> Front {
    balancer(endpoint, keepalive_requests, None)
}

/// [`grpc_balancer`] over TLS on both sides: nginx terminates TLS with `tls`
/// (its endpoint is `https://`) and speaks TLS to `endpoint` (an etcd TLS
/// client port, see [`Etcd::start_tls`]), verifying etcd's certificate
/// (issued for `localhost`) with the CA certificate `ca`.
pub fn grpc_balancer_tls(
    endpoint: &str,
    keepalive_requests: u32,
    tls: &ServerTls,
    ca: &Path,
) -> Front {
    balancer(endpoint, keepalive_requests, Some((tls, ca)))
}

fn balancer(endpoint: &str, keepalive_requests: u32, tls: Option<(&ServerTls, &Path)>) -> Front {
    let port = free_port();
    let dir = front_dir("nginx");
    let upstream = endpoint
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let (listen, scheme, tls_conf) = match tls {
        None => ("http2", "grpc", String::new()),
        Some((t, ca)) => (
            "ssl http2",
            "grpcs",
            format!(
                "    ssl_certificate {};\n    ssl_certificate_key {};\n    grpc_ssl_trusted_certificate {};\n    grpc_ssl_verify on;\n    grpc_ssl_name localhost;\n    grpc_ssl_session_reuse on;\n",
                t.cert.display(),
                t.key.display(),
                ca.display()
            ),
        ),
    };
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  log_format grpc '$connection $connection_requests $status $request_uri $request_time';\n  access_log {d}/access.log grpc;\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           server {{\n    listen 127.0.0.1:{port} {listen};\n{tls_conf}    keepalive_requests {keepalive_requests};\n\
             location / {{ grpc_pass {scheme}://{upstream}; grpc_read_timeout 1h; grpc_send_timeout 1h; }}\n  }}\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).expect("nginx.conf");
    let bin = std::env::var("NGINX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/sbin/nginx"));
    assert!(
        bin.is_file(),
        "nginx is missing ({}): apt-get install nginx-light",
        bin.display()
    );
    let args = vec![
        "-p".into(),
        dir.display().to_string(),
        "-c".into(),
        dir.join("nginx.conf").display().to_string(),
        "-e".into(),
        dir.join("error.log").display().to_string(),
    ];
    let mut f = Front::start(bin, args, port, dir);
    f.tls = tls.is_some();
    f
}

/// What an nginx from [`grpc_balancer`] did, from its access log (each
/// request is logged when it ends, with its connection's request count).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BalancerStats {
    /// Client connections that carried a finished request.
    pub connections: usize,
    /// Finished requests (unary calls and ended streams).
    pub requests: usize,
    /// Connections whose requests reached `keepalive_requests`: nginx ended
    /// each with a GOAWAY.
    pub goaways: usize,
    /// Requests nginx answered with an HTTP status other than 200 that the
    /// client had not cancelled: nginx's own errors (502 when it cannot reach
    /// etcd, 504, ...).
    pub non_200: usize,
    /// Requests with a status other than 200 that the client cancelled
    /// (RST_STREAM) before etcd's answer came: nginx's error log says "client
    /// canceled stream" on that connection for that method, and the access
    /// log has 499, or 400 when the answer's header was awaited. A client
    /// cancels the streams and reads in flight when it closes, and h2 under
    /// tonic now and then cancels the request a GOAWAY crossed (then retried).
    pub cancelled: usize,
    /// The gRPC methods of the `cancelled` requests, with their counts.
    pub cancelled_methods: std::collections::BTreeMap<String, usize>,
    /// The access log's lines of the requests counted in `non_200` (at most
    /// 20): connection, its request count, status, gRPC method, seconds.
    pub errors: Vec<String>,
}

/// [`BalancerStats`] of `front` (an nginx with `keepalive_requests`) so far.
pub fn balancer_stats(front: &Front, keepalive_requests: u32) -> BalancerStats {
    let log = std::fs::read_to_string(front.dir.join("access.log")).unwrap_or_default();
    // (connection, method) pairs of the streams the client cancelled, from
    // the error log: `*2790 client canceled stream 199 while ..., request:
    // "POST /etcdserverpb.KV/DeleteRange HTTP/2.0", ...`.
    let errors = std::fs::read_to_string(front.dir.join("error.log")).unwrap_or_default();
    let mut canceled: Vec<(String, String)> = errors
        .lines()
        .filter(|l| l.contains(" client canceled stream "))
        .filter_map(|l| {
            let conn = l
                .split_whitespace()
                .find(|w| w.starts_with('*'))?
                .trim_start_matches('*');
            let uri = l
                .split("request: \"POST ")
                .nth(1)?
                .split_whitespace()
                .next()?;
            Some((conn.to_string(), uri.to_string()))
        })
        .collect();
    let mut conns = std::collections::HashSet::new();
    let mut goaway = std::collections::HashSet::new();
    let mut st = BalancerStats::default();
    for l in log.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(c), Some(n)) = (f.first(), f.get(1).and_then(|n| n.parse::<u32>().ok())) else {
            continue;
        };
        st.requests += 1;
        match f.get(2).copied() {
            Some("200") => {}
            _ => {
                let uri = f.get(3).copied().unwrap_or_default();
                match canceled.iter().position(|(k, u)| k == c && u == uri) {
                    Some(i) => {
                        canceled.swap_remove(i);
                        st.cancelled += 1;
                        *st.cancelled_methods
                            .entry(uri.rsplit('/').next().unwrap_or(uri).to_string())
                            .or_default() += 1;
                    }
                    None => {
                        st.non_200 += 1;
                        if st.errors.len() < 20 {
                            st.errors.push(l.to_string());
                        }
                    }
                }
            }
        }
        conns.insert(*c);
        if n >= keepalive_requests {
            goaway.insert(*c);
        }
    }
    st.connections = conns.len();
    st.goaways = goaway.len();
    st
}

/// The client connections an nginx from [`grpc_balancer`] served so far, and
/// the requests it answered: (connections, requests), from its access log.
pub fn nginx_requests(front: &Front) -> (usize, usize) {
    let log = std::fs::read_to_string(front.dir.join("access.log")).unwrap_or_default();
    let conns: std::collections::HashSet<&str> = log
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    (conns.len(), log.lines().count())
}
