//! Probes of what is running on 127.0.0.1: this process's connections to a
//! port, a plain HTTP GET, which of a list of endpoints leads.

use super::*;

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
