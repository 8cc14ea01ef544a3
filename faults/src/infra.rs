//! What larger installations put between their clients and etcd, as real
//! processes on 127.0.0.1: etcd's own gRPC proxy (`etcd grpc-proxy start`,
//! which coalesces lease keep-alives and watches) and nginx as a gRPC load
//! balancer (`grpc_pass`, which sends GOAWAY on a client connection after
//! `keepalive_requests` requests); and the test CA (openssl CLI) that
//! signs etcd's and nginx's certificates for the TLS scenarios.
//!
//! Every process here is started with `PR_SET_PDEATHSIG` and killed on drop
//! (SIGCONT first, so a stopped one dies too).

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcdlock_testkit::{etcd_bin, free_port, ServerTls};

fn scratch_dir(tag: &str) -> PathBuf {
    let root = crate::history::target_dir().join("faults-infra");
    let d = root.join(format!("{tag}-{}-{}", std::process::id(), crate::unique_ns("d").trim_end_matches('/')));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
    d
}

fn spawn_logged(mut cmd: Command, log: &Path) -> Result<Child, String> {
    let f = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(f.try_clone().map_err(|e| e.to_string())?).stderr(f);
    // SAFETY: prctl is async-signal-safe; runs in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))
}

fn wait_port(port: u16, child: &mut Child, log: &Path, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("exited ({st}) before listening: {}", std::fs::read_to_string(log).unwrap_or_default()));
        }
        if Instant::now() > deadline {
            return Err(format!("port {port} not open within {within:?}: {}", std::fs::read_to_string(log).unwrap_or_default()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn signal(child: &Option<Child>, sig: i32) {
    if let Some(c) = child {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
    }
}

/// `etcd grpc-proxy start` in front of etcd endpoints, on `127.0.0.1:<free port>`;
/// it can be killed, restarted on the same port, stopped and continued.
pub struct GrpcProxy {
    port: u16,
    args: Vec<String>,
    dir: PathBuf,
    child: Option<Child>,
}

impl GrpcProxy {
    /// Start a proxy for the plaintext `endpoints` and wait until it listens.
    pub fn start(endpoints: &[String]) -> Result<GrpcProxy, String> {
        let dir = scratch_dir("grpc-proxy");
        let port = free_port();
        let args = vec![
            "grpc-proxy".into(),
            "start".into(),
            format!("--endpoints={}", endpoints.join(",")),
            format!("--listen-addr=127.0.0.1:{port}"),
            format!("--advertise-client-url=127.0.0.1:{port}"),
            format!("--data-dir={}", dir.join("data").display()),
        ];
        let mut p = GrpcProxy { port, args, dir, child: None };
        p.spawn()?;
        Ok(p)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("proxy.log");
        let mut cmd = Command::new(etcd_bin());
        cmd.args(&self.args);
        let mut child = spawn_logged(cmd, &log)?;
        let r = wait_port(self.port, &mut child, &log, Duration::from_secs(10));
        self.child = Some(child);
        r.map_err(|e| format!("etcd grpc-proxy: {e}"))
    }

    /// `http://127.0.0.1:<port>`, for client options.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL the proxy (and reap it).
    pub fn kill(&mut self) {
        stop(&mut self.child);
    }

    /// Start it again on the same port after [`GrpcProxy::kill`].
    pub fn restart(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        // The port was just freed by the kill; nothing else binds it meanwhile
        // (free ports come from the kernel's ephemeral range, this one was in use).
        self.spawn()
    }

    /// SIGSTOP the proxy.
    pub fn pause(&self) {
        signal(&self.child, libc::SIGSTOP);
    }

    /// SIGCONT the proxy.
    pub fn resume(&self) {
        signal(&self.child, libc::SIGCONT);
    }
}

impl Drop for GrpcProxy {
    fn drop(&mut self) {
        stop(&mut self.child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary: `$ETCDLOCK_FAULTS_NGINX`, else `/usr/sbin/nginx`
/// (Debian's `nginx-light`; faults/test.sh installs it).
pub fn nginx_bin() -> PathBuf {
    std::env::var_os("ETCDLOCK_FAULTS_NGINX").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"))
}

/// nginx as a gRPC load balancer in front of one etcd member: `grpc_pass`
/// over h2c (or TLS on both sides, see [`Nginx::start_tls`]), one worker in
/// the foreground, GOAWAY on a client connection after `keepalive_requests`
/// requests. Its access log names each request's client connection, so
/// [`Nginx::connections`] can tell how many GOAWAYs it sent.
pub struct Nginx {
    port: u16,
    tls: bool,
    keepalive_requests: u64,
    dir: PathBuf,
    child: Option<Child>,
}

/// What nginx's access log says about its client connections.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NginxConnections {
    /// Client connections that carried at least one finished request.
    pub connections: u64,
    /// Connections that reached `keepalive_requests`: nginx sent each a GOAWAY.
    pub goaways: u64,
    /// Finished requests (unary calls and ended streams).
    pub requests: u64,
    /// Requests that nginx answered with an HTTP status other than 200
    /// (its own errors: 502 when etcd is unreachable, 504, ...).
    pub non_200: u64,
}

impl Nginx {
    /// nginx for gRPC over h2c to `upstream_port` (etcd's plaintext client port).
    pub fn start(upstream_port: u16, keepalive_requests: u32) -> Result<Nginx, String> {
        Nginx::start_with(upstream_port, keepalive_requests, None)
    }

    /// nginx terminating TLS with `tls` and speaking TLS to `upstream_port`
    /// (etcd's TLS client port), verifying etcd's certificate with `ca`.
    pub fn start_tls(upstream_port: u16, keepalive_requests: u32, tls: &ServerTls, ca: &Path) -> Result<Nginx, String> {
        Nginx::start_with(upstream_port, keepalive_requests, Some((tls, ca)))
    }

    fn start_with(upstream_port: u16, keepalive_requests: u32, tls: Option<(&ServerTls, &Path)>) -> Result<Nginx, String> {
        let bin = nginx_bin();
        if !bin.is_file() {
            return Err(format!("{} is missing: apt-get install nginx-light (faults/test.sh installs it)", bin.display()));
        }
        let dir = scratch_dir("nginx");
        let port = free_port();
        let d = dir.display();
        let (listen, upstream, tls_conf) = match tls {
            None => (format!("listen 127.0.0.1:{port} http2;"), format!("grpc://127.0.0.1:{upstream_port}"), String::new()),
            Some((t, ca)) => (
                format!("listen 127.0.0.1:{port} ssl http2;"),
                format!("grpcs://127.0.0.1:{upstream_port}"),
                format!(
                    "ssl_certificate {};\n    ssl_certificate_key {};\n    grpc_ssl_trusted_certificate {};\n    grpc_ssl_verify on;\n    grpc_ssl_name localhost;\n    grpc_ssl_session_reuse on;\n",
                    t.cert.display(),
                    t.key.display(),
                    ca.display()
                ),
            ),
        };
        let conf = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format conns '$connection $connection_requests $status $request_uri';
  access_log {d}/access.log conns;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
    {listen}
    {tls_conf}
    keepalive_requests {keepalive_requests};
    client_body_timeout 1h;
    location / {{
      grpc_pass {upstream};
      grpc_read_timeout 1h;
      grpc_send_timeout 1h;
    }}
  }}
}}
"#
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-p").arg(&dir).arg("-c").arg(&conf_path).arg("-e").arg(dir.join("error.log"));
        let log = dir.join("stderr.log");
        let mut child = spawn_logged(cmd, &log)?;
        if let Err(e) = wait_port(port, &mut child, &log, Duration::from_secs(10)) {
            let errs = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            stop(&mut Some(child));
            return Err(format!("nginx: {e} {errs}"));
        }
        Ok(Nginx { port, tls: tls.is_some(), keepalive_requests: keepalive_requests.into(), dir, child: Some(child) })
    }

    /// `http://127.0.0.1:<port>` (`https://` for [`Nginx::start_tls`]), for client options.
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", if self.tls { "https" } else { "http" }, self.port)
    }

    /// The connections and requests of the access log so far (each
    /// request is logged when it ends, with its connection's request count).
    pub fn connections(&self) -> NginxConnections {
        let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        let mut conns = std::collections::BTreeSet::new();
        let mut goaway = std::collections::BTreeSet::new();
        let mut n = NginxConnections::default();
        for l in log.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(c), Some(r)) = (f.first().and_then(|s| s.parse::<u64>().ok()), f.get(1).and_then(|s| s.parse::<u64>().ok())) else { continue };
            n.requests += 1;
            if f.get(2) != Some(&"200") {
                n.non_200 += 1;
            }
            conns.insert(c);
            if r >= self.keepalive_requests {
                goaway.insert(c);
            }
        }
        n.connections = conns.len() as u64;
        n.goaways = goaway.len() as u64;
        n
    }

    /// nginx's error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop(&mut self.child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A test CA with a server certificate (127.0.0.1, localhost) and a client
/// certificate, as PEM files (P-256, made with the openssl CLI).
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate.
    pub ca: PathBuf,
    /// The server certificate.
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// The client certificate (mutual TLS).
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl Pki {
    /// The server certificate as testkit takes it.
    pub fn server(&self) -> ServerTls {
        ServerTls { cert: self.server_cert.clone(), key: self.server_key.clone() }
    }
}

/// Make a CA named `name` under `dir` (`dir/name/`), with its server and client certificates.
pub fn make_pki(dir: &Path, name: &str) -> Pki {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut a: Vec<&str> = vec!["req", "-x509"];
    a.extend(ec);
    a.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=etcdlock-test-ca"]);
    openssl(&d, &a);
    std::fs::write(d.join("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n").unwrap();
    std::fs::write(d.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        let (key, csr, pem, ext, subj) =
            (format!("{who}.key"), format!("{who}.csr"), format!("{who}.pem"), format!("{who}.ext"), format!("/CN={who}"));
        let mut a: Vec<&str> = vec!["req"];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(&d, &a);
        openssl(
            &d,
            &["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", &pem, "-days", "2", "-extfile", &ext],
        );
    }
    Pki {
        ca: d.join("ca.pem"),
        server_cert: d.join("server.pem"),
        server_key: d.join("server.key"),
        client_cert: d.join("client.pem"),
        client_key: d.join("client.key"),
    }
}

/// A test CA for one scenario, in a scratch dir removed on drop.
pub struct TestCa {
    /// The certificates.
    pub pki: Pki,
    dir: PathBuf,
}

impl TestCa {
    /// Make a fresh CA.
    pub fn new() -> TestCa {
        let dir = scratch_dir("pki");
        TestCa { pki: make_pki(&dir, "ca"), dir }
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
