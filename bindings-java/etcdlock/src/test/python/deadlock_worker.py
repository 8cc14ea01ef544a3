"""A Python client that CrossLanguageDeadlockTest drives: one etcdlock.Client,
commands on stdin, one JSON event per line on stdout.

  lock NAME SECONDS   acquire NAME in a thread of its own, waiting at most SECONDS;
                      then {"ev": "acquired", "name", "token", "lease"} or
                      {"ev": "timeout", "name"} or {"ev": "error", "name", "error": class name}
  unlock NAME         release NAME's hold: {"ev": "unlocked", "name"}
  quit                close the client and exit

argv: the etcd endpoints, comma separated. First event: {"ev": "ready", "pid"}.
"""
import json
import os
import sys
import threading

import etcdlock

out_lock = threading.Lock()


def emit(**ev):
    with out_lock:
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()


def main() -> None:
    client = etcdlock.Client(endpoints=sys.argv[1].split(","), ttl=10)
    held = {}

    def take(name: str, seconds: float) -> None:
        lk = client.lock(name)
        try:
            ok = lk.acquire(timeout=seconds)
        except etcdlock.LockError as e:
            emit(ev="error", name=name, error=type(e).__name__, message=str(e))
            return
        if not ok:
            emit(ev="timeout", name=name)
            return
        held[name] = lk
        g = lk.guard
        emit(ev="acquired", name=name, token=g.fencing_token, lease=g.lease_id)

    emit(ev="ready", pid=os.getpid())
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "lock":
            threading.Thread(target=take, args=(cmd[1], float(cmd[2])), daemon=True).start()
        elif cmd[0] == "unlock":
            held.pop(cmd[1]).release()
            emit(ev="unlocked", name=cmd[1])
        elif cmd[0] == "quit":
            break
    client.close()


if __name__ == "__main__":
    main()
