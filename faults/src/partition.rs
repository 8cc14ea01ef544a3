//! Partitions between etcd members, by netfilter on `lo`.
//!
//! Each member listens on its own loopback address (testkit's
//! `Config::hosts`: 127.0.0.2, .3, .4), but the kernel gives every outgoing
//! loopback connection the source 127.0.0.1, so addresses alone cannot tell
//! which member sent a packet. Each member's process therefore starts in its
//! own cgroup v2 (testkit's `Config::cgroups`: a socket belongs to the cgroup
//! its process was in when it was created), and one nftables table per
//! cluster (`inet etcdlock_faults_<pid>_<n>`) does two things in the output
//! hook:
//! - chain `marker`: a connection is marked with the member that opened it
//!   (`socket cgroupv2` of the sending process, on its first packet in the
//!   original direction seen after the table exists);
//! - chain `cuts`: "i -> j cut" drops what i sends to j: packets of
//!   connections i opened to j's peer address and port (original
//!   direction), and i's replies on connections j opened to i's (reply
//!   direction). Marks and ports are unique to the cluster, so clusters of
//!   tests running at once do not cut each other.
//!
//! Clients (this test process) are in no member's cgroup, so their
//! connections to any member are never cut. The [`Partitions`] guard deletes
//! its table and cgroups on drop (panics included); a table or cgroup whose
//! process is gone (a killed test run) is flushed at the next start.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use etcdlock_testkit::{Config, Etcd};

const CGROUP2: &str = "/sys/fs/cgroup/unified";
const PREFIX: &str = "etcdlock_faults_";
const CG_PREFIX: &str = "etcdlock-faults-";

/// The loopback addresses of an `n`-member cluster: 127.0.0.2, .3, ...
pub fn member_hosts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("127.0.0.{}", i + 2)).collect()
}

/// The cgroup v2 mount (`/sys/fs/cgroup/unified` or `/sys/fs/cgroup`) and
/// its path as nft names it (relative to `/sys/fs/cgroup`).
fn cgroup_root() -> Result<(PathBuf, String), String> {
    for (p, rel) in [(CGROUP2, "unified/"), ("/sys/fs/cgroup", "")] {
        if Path::new(p).join("cgroup.procs").exists()
            && Path::new(p).join("cgroup.subtree_control").exists()
        {
            return Ok((PathBuf::from(p), rel.to_string()));
        }
    }
    Err("no cgroup v2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup".into())
}

fn nft(script: &str) -> Result<(), String> {
    let mut c = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {e} (apt-get install nftables)"))?;
    c.stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = c.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft: {} in\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn alive(pid: &str) -> bool {
    Path::new("/proc").join(pid).exists()
}

/// Delete tables and cgroups left by test processes that are gone.
pub fn flush_leftovers() {
    if let Ok(out) = Command::new("nft").args(["list", "tables"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.strip_prefix("table inet ") else {
                continue;
            };
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            if !alive(rest.split('_').next().unwrap_or("")) {
                let _ = nft(&format!("delete table inet {name}\n"));
            }
        }
    }
    let Ok((root, _)) = cgroup_root() else { return };
    for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(CG_PREFIX) else {
            continue;
        };
        if !alive(rest.split('-').next().unwrap_or("")) {
            release_cgroup(&root, &e.path());
        }
    }
}

fn release_cgroup(root: &Path, cg: &Path) {
    if let Ok(procs) = std::fs::read_to_string(cg.join("cgroup.procs")) {
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(root.join("cgroup.procs"), pid);
        }
    }
    let _ = std::fs::remove_dir(cg);
}

/// Cuts between the members of one cluster; everything is undone on drop.
pub struct Partitions {
    table: String,
    hosts: Vec<String>,
    peer_ports: Vec<u16>,
    marks: Vec<u32>,
    root: PathBuf,
    cgroups: Vec<PathBuf>,
    cut: BTreeSet<(usize, usize)>,
}

impl Partitions {
    /// Before an `n`-member cluster starts: its loopback addresses, a cgroup
    /// per member, and the table with its marking rules (marks unique to this
    /// table). Start the cluster with [`Partitions::config`], then [`Partitions::attach`] it.
    pub fn prepare(n: usize) -> Result<Partitions, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        flush_leftovers();
        let (root, rel) = cgroup_root()?;
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let table = format!("{PREFIX}{pid}_{seq}");
        let base = ((pid & 0xffff) << 12) | ((seq as u32 & 0xff) << 4);
        let mut p = Partitions {
            table: table.clone(),
            hosts: member_hosts(n),
            peer_ports: Vec::new(),
            marks: (0..n as u32).map(|i| base + i + 1).collect(),
            root: root.clone(),
            cgroups: Vec::new(),
            cut: BTreeSet::new(),
        };
        let mut script = format!(
            "table inet {table} {{\n chain marker {{ type filter hook output priority -10; policy accept; }}\n chain cuts {{ type filter hook output priority 0; policy accept; }}\n}}\n"
        );
        for i in 0..n {
            let name = format!("{CG_PREFIX}{pid}-{seq}-m{i}");
            let cg = root.join(&name);
            std::fs::create_dir_all(&cg).map_err(|e| format!("{}: {e}", cg.display()))?;
            p.cgroups.push(cg);
            script.push_str(&format!(
                "add rule inet {table} marker ct direction original ct mark 0 socket cgroupv2 level 1 \"{rel}{name}\" counter ct mark set {}\n",
                p.marks[i]
            ));
        }
        nft(&script)?;
        Ok(p)
    }

    /// The testkit config of the cluster: its members, addresses and cgroups.
    pub fn config(&self) -> Config {
        Config {
            members: self.hosts.len(),
            hosts: self.hosts.clone(),
            cgroups: self.cgroups.clone(),
            ..Default::default()
        }
    }

    /// The cluster started with [`Partitions::config`].
    pub fn attach(&mut self, etcd: &Etcd) {
        self.peer_ports = etcd.members.iter().map(|m| m.peer_port).collect();
    }

    /// Drop everything member `from` sends to member `to` (one direction).
    pub fn cut(&mut self, from: usize, to: usize) -> Result<(), String> {
        if from == to || !self.cut.insert((from, to)) {
            return Ok(());
        }
        let t = &self.table;
        let (hf, ht) = (&self.hosts[from], &self.hosts[to]);
        let (pf, pt) = (self.peer_ports[from], self.peer_ports[to]);
        let (mf, mt) = (self.marks[from], self.marks[to]);
        nft(&format!(
            "add rule inet {t} cuts ct mark {mf} meta l4proto tcp ct original ip daddr {ht} ct original proto-dst {pt} ct direction original counter drop comment \"cut {from}->{to}\"\n\
             add rule inet {t} cuts ct mark {mt} meta l4proto tcp ct original ip daddr {hf} ct original proto-dst {pf} ct direction reply counter drop comment \"cut {from}->{to}\"\n"
        ))
    }

    /// Cut member `i` from every other member, both ways.
    pub fn isolate(&mut self, i: usize) -> Result<(), String> {
        for j in 0..self.hosts.len() {
            self.cut(i, j)?;
            self.cut(j, i)?;
        }
        Ok(())
    }

    /// Remove every cut.
    pub fn heal(&mut self) -> Result<(), String> {
        self.cut.clear();
        nft(&format!("flush chain inet {} cuts\n", self.table))
    }

    /// The table as `nft list table` prints it (rules with their counters).
    pub fn listing(&self) -> String {
        Command::new("nft")
            .args(["list", "table", "inet", &self.table])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The cuts in force, as (from, to).
    pub fn cuts(&self) -> Vec<(usize, usize)> {
        self.cut.iter().copied().collect()
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        let _ = nft(&format!("delete table inet {}\n", self.table));
        for cg in &self.cgroups {
            release_cgroup(&self.root, cg);
        }
    }
}
