//! What a test does to a running cluster's members: kill, stop, restart,
//! pause and resume them, find the leader, read a metric, run etcdctl.

use super::*;

impl Etcd {
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
        let asked = sys::terminate(c.id());
        while asked && start.elapsed() < within {
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
            sys::stop(pid);
            await_stopped(pid);
        }
    }

    /// SIGSTOP member `i` now and SIGCONT it after `d` (from a thread), while
    /// the caller goes on: a hang of known length.
    pub fn pause_for(&self, i: usize, d: Duration) {
        let Some(pid) = self.members[i].pid() else {
            return;
        };
        sys::stop(pid);
        await_stopped(pid);
        std::thread::spawn(move || {
            std::thread::sleep(d);
            sys::cont(pid);
        });
    }

    /// SIGCONT member `i`.
    pub fn resume(&self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            sys::cont(pid);
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
