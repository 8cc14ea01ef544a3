//! Processes in front of etcd: a gRPC proxy (`etcd grpc-proxy`) and an
//! nginx gRPC load balancer, with what the balancer's access log shows.

use super::*;

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
        #[cfg(target_os = "linux")]
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
            sys::stop(pid);
            await_stopped(pid);
        }
    }

    /// SIGCONT it.
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            sys::cont(pid);
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
