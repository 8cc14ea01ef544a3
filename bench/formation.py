#!/usr/bin/env python3
"""What a fleet costs etcd while it forms (issue 60): one fleet process of N
clients x M locks per side (etcdlock's `bench --fleet`, then Go's
`go-mutex -fleet-clients`), each against a fresh 3-member etcd from
etcd-harness; prints per side the seconds until every hold is in, etcd's CPU
seconds (the members together) and the messages etcd received by method
(grpc_server_msg_received_total) over that time.

Usage (after bench/fleet.sh has built the binaries into target/release):
    python3 bench/formation.py N M etcdlock,go
"""
import json, os, subprocess, sys, time, urllib.request
B = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")), "release")
def metrics(eps):
    tot, cpu = {}, 0.0
    for e in eps:
        for l in urllib.request.urlopen(e + "/metrics").read().decode().splitlines():
            if l.startswith("grpc_server_msg_received_total"):
                m = l.split('grpc_method="')[1].split('"')[0]
                tot[m] = tot.get(m, 0) + float(l.split()[-1])
            if l.startswith("process_cpu_seconds_total"):
                cpu += float(l.split()[-1])
    return tot, cpu
def run(side, n, locks, ttl=15):
    h = subprocess.Popen([f"{B}/etcd-harness", "--members", "3", "--", "--heartbeat-interval=100", "--election-timeout=1000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(h.stdout.readline()); eps = info["endpoints"]
    time.sleep(1)
    m0, c0 = metrics(eps); t0 = time.time()
    if side == "etcdlock":
        cmd = [f"{B}/etcdlock", "--endpoints", ",".join(eps), "--ttl", str(ttl), "bench", "--use-endpoints", "--fleet", "--clients", str(n), "--locks", str(locks), "--fleet-waiters", "0", "--fleet-prefix", "x-", "--fleet-sample", "1"]
    else:
        cmd = [f"{B}/go-mutex", "-endpoints", ",".join(eps), "-ttl", str(ttl), "-fleet-clients", str(n), "-fleet-locks", str(locks), "-fleet-waiters", "0", "-fleet-prefix", "x-", "-fleet-sample", "1"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(f"/tmp/form-{side}.log", "w"), text=True)
    line = p.stdout.readline(); t1 = time.time()
    m1, c1 = metrics(eps)
    p.stdin.write("release\n"); p.stdin.flush()
    try: p.wait(60)
    except Exception: p.kill()
    h.stdin.close(); h.wait()
    d = {k: int(m1[k] - m0.get(k, 0)) for k in m1 if m1[k] - m0.get(k, 0) > 0}
    print(json.dumps({"side": side, "n": n, "locks": locks, "secs": round(t1 - t0, 1), "etcd_cpu_s": round(c1 - c0, 1), "msgs": d, "event": line.strip()[:300]}))
for side in sys.argv[3].split(","):
    run(side, int(sys.argv[1]), int(sys.argv[2]))
