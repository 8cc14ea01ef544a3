#!/usr/bin/env python3
"""The coordinator of bench/fleet.sh (read that file first): starts each
step's fleet processes, waits until every one holds, measures the steady
window from etcd's /metrics and /proc, ends the step, and prints one JSON
line per step and side, then a markdown table."""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count()
METRIC = re.compile(r'^(\w+)(?:\{([^}]*)\})? (\S+)$')


def scrape(endpoint):
    """(msgs by method, cpu s, rss bytes) of one member."""
    body = urllib.request.urlopen(endpoint + "/metrics", timeout=30).read().decode()
    msgs, cpu, rss = {}, None, None
    for line in body.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "grpc_server_msg_received_total":
            method = re.search(r'grpc_method="([^"]*)"', labels).group(1)
            msgs[method] = msgs.get(method, 0.0) + value
        elif name == "process_cpu_seconds_total":
            cpu = value
        elif name == "process_resident_memory_bytes":
            rss = value
    return msgs, cpu, rss


def msgs_between(before, after):
    """Messages etcd received by method between two scrapes of every member."""
    by = {}
    for (m0, _, _), (m1, _, _) in zip(before, after):
        for k, v in m1.items():
            if v - m0.get(k, 0.0) > 0:
                by[k] = by.get(k, 0.0) + v - m0.get(k, 0.0)
    return by


def proc(pid):
    """(cpu s, rss bytes, open files) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return cpu, rss, fds
    except (FileNotFoundError, ProcessLookupError):
        return None


def tail(f):
    f.seek(0)
    return f.read()[-2000:]


def uptime():
    return open("/proc/loadavg").read().split()[:3]


class Fleet:
    """One side's processes for one step."""

    def __init__(self, side, a, endpoints, n, tag):
        self.procs, self.lines, self.errors = [], {}, []
        self.tag = f"{tag}-{side}"
        eps = ",".join(endpoints)
        per = max(1, min(a.per_process, n))
        sizes = [per] * (n // per) + ([n % per] if n % per else [])
        waiters = max(1, n // 100) if a.locks else 0
        for k, size in enumerate(sizes):
            w = waiters * size // n
            prefix = f"{tag}-{side}-p{k}-"
            if side == "etcdlock":
                cmd = [f"{a.bin}/etcdlock", "--endpoints", eps, "--ttl", str(a.ttl), "bench",
                       "--use-endpoints", "--fleet", "--clients", str(size), "--locks", str(a.locks),
                       "--fleet-waiters", str(w), "--fleet-prefix", prefix,
                       "--fleet-sample", str(max(1, 100 * size // n))]
            else:
                cmd = [f"{a.bin}/go-mutex", "-endpoints", eps, "-ttl", str(a.ttl),
                       "-fleet-clients", str(size), "-fleet-locks", str(a.locks),
                       "-fleet-waiters", str(w), "-fleet-prefix", prefix,
                       "-fleet-sample", str(max(1, 100 * size // n))]
            self.start(cmd)
        # The probe: always etcdlock's, the same instrument for both sides.
        self.probe = self.start([f"{a.bin}/etcdlock", "--endpoints", eps, "--ttl", str(a.ttl), "bench",
                                 "--use-endpoints", "--fleet", "--clients", "0",
                                 "--fleet-prefix", f"{tag}-{side}-"])

    def start(self, cmd):
        # stderr to a file: a pipe nobody reads would stall a chatty process.
        # FLEET_LOG_DIR=dir keeps each process's stderr there (with ETCDLOCK_LOG=debug: core's events).
        logs = os.environ.get("FLEET_LOG_DIR")
        err = open(f"{logs}/{len(self.procs)}-{self.tag}.log", "w+") if logs else tempfile.TemporaryFile(mode="w+")
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, text=True, bufsize=1)
        p.err = err
        self.procs.append(p)
        self.lines[p.pid] = []
        return p

    def await_event(self, event, timeout):
        """Every process's next line: the event, or an error; False on timeout or failure."""
        pending = {p.stdout: p for p in self.procs}
        got = {}
        deadline = time.time() + timeout
        while pending and time.time() < deadline:
            ready, _, _ = select.select(list(pending), [], [], 1.0)
            for f in ready:
                p = pending[f]
                line = f.readline()
                if not line:
                    self.errors.append({"pid": p.pid, "exit": p.wait(), "stderr": tail(p.err)})
                    del pending[f]
                    continue
                if not line.startswith("{"):
                    continue
                v = json.loads(line)
                if v.get("event") == "error":
                    self.errors.append(v)
                    del pending[f]
                elif v.get("event") == event:
                    got[p.pid] = v
                    del pending[f]
        if pending:
            self.errors.append({"timeout": event, "pending": len(pending)})
        return got if not pending and not self.errors else None

    def say(self, word, fleet=True, probe=True):
        for p in self.procs:
            if not (probe if p is self.probe else fleet):
                continue
            try:
                p.stdin.write(word + "\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def finish(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def fleet_pids(f):
    return [p.pid for p in f.procs if p is not f.probe]


def start_etcd(a):
    """A fresh 3-member cluster for one side of one step (so that each side's
    etcd RSS grows from the same start), stopped when its stdin closes."""
    extra = ["--enable-pprof"] if os.environ.get("FLEET_PPROF_DIR") else []
    h = subprocess.Popen([a.harness, "--members", "3", "--", "--heartbeat-interval=100",
                          "--election-timeout=1000", *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(h.stdout.readline())
    return h, info["endpoints"], info["pids"]


def profile(endpoints, side, n):
    """With FLEET_PPROF_DIR set: a CPU profile of each member over the first
    FLEET_PPROF_SECONDS (default 15) of the formation (of the steady window
    with FLEET_PPROF_WHEN=window), written as
    <dir>/<side>-n<N>-m<i>.pb.gz (read with `go tool pprof -top`)."""
    out = os.environ.get("FLEET_PPROF_DIR")
    if not out:
        return []
    secs = int(os.environ.get("FLEET_PPROF_SECONDS", "15"))
    os.makedirs(out, exist_ok=True)

    def get(i, e):
        body = urllib.request.urlopen(f"{e}/debug/pprof/profile?seconds={secs}", timeout=secs + 60).read()
        with open(os.path.join(out, f"{side}-n{n}-m{i}.pb.gz"), "wb") as f:
            f.write(body)
    ts = [threading.Thread(target=get, args=(i, e), daemon=True) for i, e in enumerate(endpoints)]
    for t in ts:
        t.start()
    return ts


def step(side, n, a, tag):
    h, endpoints, etcd_pids = start_etcd(a)
    try:
        return measure(side, n, a, endpoints, etcd_pids, tag)
    finally:
        h.stdin.close()
        h.wait()


def measure(side, n, a, endpoints, etcd_pids, tag):
    load0 = uptime()
    base = [scrape(e) for e in endpoints]
    t0 = time.time()
    window_profile = os.environ.get("FLEET_PPROF_WHEN") == "window"
    profiles = [] if window_profile else profile(endpoints, side, n)
    f = Fleet(side, a, endpoints, n, tag)
    row = {"metric": "fleet", "side": side, "clients": n, "locks_per_client": a.locks, "ttl_s": a.ttl,
           "processes": len(f.procs) - 1, "load_before": load0}
    holding = f.await_event("holding", timeout=max(120, n * a.locks / 50))
    # Forming the fleet (fresh cluster to every hold in, or to the failure):
    # what etcd received by method, per lock taken, and the CPU it spent.
    formed = [scrape(e) for e in endpoints]
    setup = msgs_between(base, formed)
    row["setup_msgs"] = {k: int(v) for k, v in sorted(setup.items(), key=lambda kv: -kv[1])}
    row["setup_msgs_per_lock"] = sum(setup.values()) / max(1, n * a.locks)
    row["setup_etcd_cpu_s"] = sum(b[1] - a_[1] for a_, b in zip(base, formed))
    row["setup_wall_s"] = time.time() - t0
    print(f"  {'formed in' if holding else 'did not form; ran'} {row['setup_wall_s']:.1f} s: {sum(setup.values()):.0f} msgs to etcd "
          f"({row['setup_msgs_per_lock']:.2f} per lock; {json.dumps(row['setup_msgs'])}), "
          f"etcd CPU {row['setup_etcd_cpu_s']:.1f} s", file=sys.stderr)
    for t in profiles:
        t.join()
    if holding is None:
        row["error"] = f.errors
        row["etcd_fds_per_member"] = [proc(p)[2] if proc(p) else None for p in etcd_pids]
        f.kill()
        return row
    row["setup_s"] = time.time() - t0
    row["holds"] = sum(v.get("holds", 0) for v in holding.values())
    row["waiters"] = sum(v.get("waiters", 0) for v in holding.values())
    row["keys_in_etcd"] = sum(v["keys"] for v in holding.values() if "keys" in v)
    row["setup_retries"] = sum(v.get("setup_retries", 0) for v in holding.values())
    row["connect_retries"] = sum(v.get("connect_retries", 0) for v in holding.values())
    pids = fleet_pids(f)
    # The steady window: the fleet alone (messages, CPUs, RSS, files), then
    # the probe beside it for --probe seconds (its own requests would count
    # among etcd's messages otherwise); keep-alive gaps over both.
    f.say("window", probe=False)
    if window_profile:
        profiles = profile(endpoints, side, n)
    m0 = [scrape(e) for e in endpoints]
    p0 = {p: proc(p) for p in pids}
    w0 = time.time()
    time.sleep(a.hold)
    m1 = [scrape(e) for e in endpoints]
    p1 = {p: proc(p) for p in pids}
    window = time.time() - w0
    etcd_proc = [proc(p) for p in etcd_pids]
    for t in profiles:
        t.join()
    f.say("window", fleet=False)
    time.sleep(a.probe)
    f.say("release")
    done = f.await_event("done", timeout=300)
    f.finish()
    row["load_after"] = uptime()
    row["window_s"] = window
    by_method = {k: v / window for k, v in msgs_between(m0, m1).items()}
    row["etcd_msgs_per_s"] = {k: round(v, 1) for k, v in sorted(by_method.items(), key=lambda kv: -kv[1])}
    total = sum(by_method.values())
    row["etcd_msgs_per_s_total"] = total
    row["msgs_per_held_lock_minute"] = total * 60 / max(1, row["holds"])
    row["msgs_per_client_minute"] = total * 60 / n
    row["etcd_cpu_s_per_s"] = [(b[1] - a_[1]) / window for a_, b in zip(m0, m1)]
    row["etcd_cpu_pct_of_machine"] = 100 * sum(row["etcd_cpu_s_per_s"]) / CPUS
    row["etcd_rss_mb"] = [b[2] / 2**20 for b in m1]
    row["etcd_rss_mb_fresh"] = [b[2] / 2**20 for b in base]
    grow = sum(b[2] for b in m1) - sum(b[2] for b in base)
    row["etcd_rss_kb_per_client"] = grow / 1024 / n
    row["etcd_rss_bytes_per_held_lock"] = grow / max(1, row["holds"])
    row["etcd_fds_per_member"] = [x[2] if x else None for x in etcd_proc]
    ok = [p for p in pids if p0.get(p) and p1.get(p)]
    row["client_cpu_ms_per_s_per_client"] = 1000 * sum(p1[p][0] - p0[p][0] for p in ok) / window / n
    row["client_cpu_pct_of_machine"] = 100 * sum(p1[p][0] - p0[p][0] for p in ok) / window / CPUS
    row["client_rss_kb_per_client"] = sum(p1[p][1] for p in ok) / 1024 / n
    row["client_fds_per_client"] = sum(p1[p][2] for p in ok) / n
    if done is None:
        row["error"] = f.errors
        return row
    probe = done.pop(f.probe.pid, {})
    row["probe_p50_ms"], row["probe_p99_ms"] = probe.get("p50_ms"), probe.get("p99_ms")
    row["probe_n"], row["probe_errors"] = probe.get("n"), probe.get("errors")
    for k in ("lost", "false_losses", "clients_lost", "waiter_errors", "unlock_errors", "held_at_end"):
        row[k] = sum(v.get(k, 0) for v in done.values())
    # Seconds from a process's "holding" (the window starts right after) to its first and last loss.
    firsts = [v["first_loss_s"] for v in done.values() if v.get("first_loss_s") is not None]
    lasts = [v["last_loss_s"] for v in done.values() if v.get("last_loss_s") is not None]
    row["first_loss_s"] = min(firsts) if firsts else None
    row["last_loss_s"] = max(lasts) if lasts else None
    # Keep-alive gaps: the processes' percentiles, weighted by their samples
    # (each process samples about 100 * its share of the clients).
    gaps = [v for v in done.values() if v.get("keepalive_gaps")]
    if gaps:
        tot = sum(v["keepalive_gaps"] for v in gaps)
        row["keepalive_gaps"] = tot
        row["keepalive_gap_p50_ms"] = sum(v["keepalive_gap_p50_ms"] * v["keepalive_gaps"] for v in gaps) / tot
        row["keepalive_gap_p99_ms"] = max(v["keepalive_gap_p99_ms"] for v in gaps)
        row["keepalive_gap_max_ms"] = max(v["keepalive_gap_max_ms"] for v in gaps)
    row["lost_reasons"] = {}
    for v in done.values():
        for k, c in (v.get("lost_reasons") or {}).items():
            row["lost_reasons"][k] = row["lost_reasons"].get(k, 0) + c
    return row


def fmt(v, spec=".1f"):
    return "n/a" if v is None else format(v, spec)


def lost_detail(r):
    if not r.get("lost"):
        return ""
    why = ", ".join(f"{k} {v}" for k, v in r.get("lost_reasons", {}).items())
    return f" ({why}; from {fmt(r.get('first_loss_s'), '.0f')} to {fmt(r.get('last_loss_s'), '.0f')} s after holding)"


def table(rows):
    out = ["| N | side | holds | etcd msgs/s (top methods) | msgs per held-lock-min | etcd CPU s/s per member (% of machine) | etcd RSS MB per member | etcd RSS per client / per held lock | client CPU ms/s per client | client RSS per client | fds per client (etcd fds per member) | keep-alive gap p50 / p99 / max | lost / false losses | probe lock+unlock p50 / p99 | load before / after |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "etcd_msgs_per_s" not in r:
            out.append(f"| {r['clients']} | {r['side']} | - | did not run: {json.dumps(r.get('error'))[:300]} |" + " |" * 11)
            continue
        top = ", ".join(f"{k} {v:.0f}" for k, v in list(r["etcd_msgs_per_s"].items())[:4])
        out.append(
            f"| {r['clients']} | {r['side']} | {r['holds']} | **{r['etcd_msgs_per_s_total']:.0f}** ({top}) | **{r['msgs_per_held_lock_minute']:.2f}** | "
            f"{' / '.join(fmt(x, '.2f') for x in r['etcd_cpu_s_per_s'])} ({r['etcd_cpu_pct_of_machine']:.0f} %) | "
            f"{' / '.join(fmt(x, '.0f') for x in r['etcd_rss_mb'])} | {r['etcd_rss_kb_per_client']:.1f} KB / {r['etcd_rss_bytes_per_held_lock']:.0f} B | "
            f"{r['client_cpu_ms_per_s_per_client']:.3f} | {r['client_rss_kb_per_client']:.0f} KB | {r['client_fds_per_client']:.2f} ({' / '.join(str(x) for x in r['etcd_fds_per_member'])}) | "
            f"{fmt(r.get('keepalive_gap_p50_ms'), '.0f')} / {fmt(r.get('keepalive_gap_p99_ms'), '.0f')} / {fmt(r.get('keepalive_gap_max_ms'), '.0f')} ms | "
            f"{r.get('lost', 'n/a')}{lost_detail(r)} / **{r.get('false_losses', 'n/a')}** | {fmt(r.get('probe_p50_ms'), '.2f')} / {fmt(r.get('probe_p99_ms'), '.2f')} ms | "
            f"{' '.join(r['load_before'])} / {' '.join(r.get('load_after', []))} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", required=True, help="the etcd-harness binary")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", default="100,1000,5000,10000")
    ap.add_argument("--locks", type=int, default=10)
    ap.add_argument("--ttl", type=int, default=15)
    ap.add_argument("--hold", type=float, default=60)
    ap.add_argument("--probe", type=float, default=30)
    ap.add_argument("--per-process", type=int, default=1000)
    ap.add_argument("--sides", default="etcdlock,go")
    a = ap.parse_args()
    rows = []
    tag = f"f{os.getpid()}"
    print(f"fleet: steps {a.steps}, {a.locks} locks per client, TTL {a.ttl} s, hold {a.hold:.0f} s, "
          f"then {a.probe:.0f} s probe, {a.per_process} clients per process, {CPUS} CPUs, load {' '.join(uptime())}", file=sys.stderr)
    for n in [int(x) for x in a.steps.split(",")]:
        for side in a.sides.split(","):
            print(f"step N={n} {side}...", file=sys.stderr)
            try:
                r = step(side, n, a, f"{tag}-n{n}")
            except (OSError, urllib.error.URLError, subprocess.SubprocessError) as e:
                # A member that stops answering (at 10,000 Go clients one
                # refused its /metrics mid-step) ends the step, not the run.
                r = {"metric": "fleet", "side": side, "clients": n, "locks_per_client": a.locks,
                     "ttl_s": a.ttl, "error": [{"event": "error", "stage": "driver", "error": repr(e)}]}
            print(json.dumps(r), flush=True)
            rows.append(r)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
