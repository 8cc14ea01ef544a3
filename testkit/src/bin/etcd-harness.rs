//! `etcd-harness [--members N] [--scheme https] [-- EXTRA_ETCD_FLAGS...]`
//!
//! With `--scheme https`, pass etcd's TLS flags after `--` (`--cert-file`,
//! `--key-file`, `--trusted-ca-file`, `--client-cert-auth`); readiness is then
//! the client port accepting connections.
//!
//! Starts real etcd on 127.0.0.1 (free ports, temp dir), prints one JSON line
//! `{"endpoints":[...],"pids":[...],"dir":"..."}` to stdout, and stops etcd
//! when stdin closes (so a test in any language owns its lifetime by holding a
//! pipe) or on SIGTERM/SIGINT. Commands on stdin, one per line:
//! `kill I`, `restart I`, `pause I [MS]` (with MS: resumed by the harness
//! after MS milliseconds), `resume I`, `leader`, `elected I` (after a fault on
//! leader I: waits for another member to lead; answers its index and the ms
//! that took), `proxy` (starts etcd's gRPC proxy in front of every member:
//! answers its index and endpoint; a client connected through it is
//! partitioned from etcd by `proxy-pause I` and reconnected by
//! `proxy-resume I`), each answered by one JSON line.
use std::io::{BufRead, Write};

use etcdlock_testkit::{Config, Etcd};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cfg = Config {
        members: 1,
        ..Default::default()
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--members" => cfg.members = args.next().and_then(|v| v.parse().ok()).unwrap_or(1),
            "--scheme" => cfg.scheme = args.next(),
            "--" => cfg.extra_args.extend(args.by_ref()),
            "-h" | "--help" => {
                println!("usage: etcd-harness [--members N] [--scheme http|https] [-- EXTRA_ETCD_FLAGS...]");
                return;
            }
            other => {
                eprintln!("etcd-harness: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    unsafe {
        // Let SIGTERM/SIGINT end the stdin loop by closing our stdin fd, so Drop runs.
        extern "C" fn on_signal(_: libc::c_int) {
            unsafe { libc::close(0) };
        }
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let mut etcd = Etcd::start(cfg);
    let mut proxies: Vec<etcdlock_testkit::Front> = Vec::new();
    let line = serde_json::json!({
        "endpoints": etcd.endpoints(),
        "pids": etcd.members.iter().map(|m| m.pid()).collect::<Vec<_>>(),
        "dir": etcd.dir().display().to_string(),
    });
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let idx: usize = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let ms: Option<u64> = parts.next().and_then(|v| v.parse().ok());
        let reply = match cmd {
            "kill" => {
                etcd.kill(idx);
                serde_json::json!({"ok": true})
            }
            "restart" => {
                etcd.restart(idx);
                serde_json::json!({"ok": true, "pid": etcd.members[idx].pid()})
            }
            "pause" => {
                match ms {
                    Some(ms) => etcd.pause_for(idx, std::time::Duration::from_millis(ms)),
                    None => etcd.pause(idx),
                }
                serde_json::json!({"ok": true})
            }
            "resume" => {
                etcd.resume(idx);
                serde_json::json!({"ok": true})
            }
            "leader" => serde_json::json!({"leader": etcd.leader()}),
            "proxy" => {
                let front = etcdlock_testkit::grpc_proxy(&etcd.endpoints());
                let endpoint = front.endpoint();
                proxies.push(front);
                serde_json::json!({"proxy": proxies.len() - 1, "endpoint": endpoint})
            }
            "proxy-pause" | "proxy-resume" => match proxies.get(idx) {
                Some(p) => {
                    if cmd == "proxy-pause" {
                        p.pause()
                    } else {
                        p.resume()
                    }
                    serde_json::json!({"ok": true})
                }
                None => serde_json::json!({"error": format!("no proxy {idx}")}),
            },
            // After a fault on the leader `idx`: when another member leads, and
            // how long after this command that was seen.
            "elected" => {
                let t = std::time::Instant::now();
                match etcd.await_new_leader(idx, std::time::Duration::from_secs(20)) {
                    Some(l) => {
                        serde_json::json!({"leader": l, "ms": t.elapsed().as_millis() as u64})
                    }
                    None => serde_json::json!({"error": "no new leader within 20 s"}),
                }
            }
            "" => continue,
            _ => serde_json::json!({"error": format!("unknown command {cmd}")}),
        };
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}
