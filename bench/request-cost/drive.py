"""etcd's CPU per request kind: a fresh 3-member etcd (testkit's etcd-harness,
$ETCD_BIN or etcd 3.4), 1,000 requests/s for 15 s of each kind from a Go client
(main.go: linearizable or serializable count Ranges on 50 connections, or
keep-alive streams of 5,000 leases at TTL 15), to the leader and to a follower;
prints etcd's CPU seconds per second over the 3 members.
Usage: (cd bench/request-cost && go build -o rcost .) && python3 bench/request-cost/drive.py [rate]
(run from bench/request-cost; CARGO_TARGET_DIR/release/etcd-harness must be built)."""
import json, subprocess, time, sys, os
H=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target")), "release/etcd-harness")
def cpu(pids):
    t=0
    for p in pids:
        f=open(f"/proc/{p}/stat").read().split(")")[1].split()
        t+=int(f[11])+int(f[12])
    return t/os.sysconf("SC_CLK_TCK")
h=subprocess.Popen([H,"--members","3","--","--heartbeat-interval=100","--election-timeout=1000"],stdin=subprocess.PIPE,stdout=subprocess.PIPE,text=True)
info=json.loads(h.stdout.readline()); eps=info["endpoints"]; pids=info["pids"]
st=subprocess.run(["etcdctl","--endpoints="+",".join(eps),"endpoint","status","-w","json"],capture_output=True,text=True,env=dict(os.environ,ETCDCTL_API="3")).stdout
st=json.loads(st)
leader=[i for i,s in enumerate(st) if s["Status"]["header"]["member_id"]==s["Status"]["leader"]][0]
fol=(leader+1)%3
print("leader",leader)
rate=int(sys.argv[1]) if len(sys.argv)>1 else 1000
def run(mode,ep,secs=25):
    p=subprocess.Popen([os.path.join(os.path.dirname(os.path.abspath(__file__)), "rcost"),"-ep",ep,"-mode",mode,"-rate",str(rate),"-secs",str(secs)],stdout=subprocess.PIPE,text=True)
    if mode=="ka":
        line=p.stdout.readline()
    time.sleep(5); c0=cpu(pids); t0=time.time()
    time.sleep(15); c1=cpu(pids); t1=time.time()
    out=p.communicate()[0]
    print(mode, "leader" if ep==eps[leader] else "follower", f"etcd cpu {(c1-c0)/(t1-t0):.3f} s/s", out.strip().replace("\n"," "), flush=True)
    time.sleep(3)
c0=cpu(pids); time.sleep(10); print("idle", (cpu(pids)-c0)/10)
for mode in ("range", "srange"):
    run(mode, eps[leader]); run(mode, eps[fol])
run("ka", eps[fol]); run("ka", eps[leader])
h.stdin.close(); h.wait()
