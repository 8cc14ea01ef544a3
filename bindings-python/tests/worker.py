"""Child processes for the multi-process tests. Each mode prints JSON lines."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

import etcdlock


def out(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def counter(endpoints: str, name: str, iters: int, threads: int) -> None:
    """`threads` threads share one client; each does `iters` non-atomic
    read-modify-write increments of an etcd counter under the lock."""
    holds = []
    errors = []
    with etcdlock.Client(endpoints=endpoints) as client:
        def run() -> None:
            try:
                for _ in range(iters):
                    with client.lock(name, timeout=60) as g:
                        t0 = time.monotonic_ns()
                        v = int(g.get(name + "-counter") or b"0")
                        g.put(name + "-counter", str(v + 1))
                        holds.append((t0, time.monotonic_ns(), g.fencing_token, v))
            except BaseException as e:  # reported to the parent
                errors.append(repr(e))

        ts = [threading.Thread(target=run) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    out({"holds": holds, "errors": errors})


def hold(endpoints: str, name: str, ttl: int) -> None:
    """Hold the lock, report, wait for a line on stdin, then report the loss
    state and try a guarded put."""
    client = etcdlock.Client(endpoints=endpoints, ttl=ttl)
    g = client.acquire(name, timeout=10)
    fired = threading.Event()
    reasons = []

    def on_lost(reason: str) -> None:
        reasons.append(reason)
        fired.set()

    g.on_lost(on_lost)
    g.put(name + "-data", "from-child")
    out({"token": g.fencing_token, "key": g.key, "held": g.is_held})
    sys.stdin.readline()
    res = {"held": g.is_held, "lost": g.lost.is_set()}
    try:
        g.put(name + "-data", "stale-write")
        res["put"] = "ok"
    except etcdlock.LockError as e:
        res["put"] = type(e).__name__
        res["put_code"] = e.code
        res["put_reason"] = e.reason
    res["callback"] = fired.wait(10)
    res["callback_reasons"] = reasons
    # Read after the event: until etcd has said why (half the margin at most)
    # the reason reads ConnectionLost.
    res["loss_reason"] = g.loss_reason
    out(res)


def wait(endpoints: str, name: str) -> None:
    """Block in lock() on the main thread until SIGINT arrives."""
    # A process started in the background by a non-interactive shell inherits
    # SIGINT ignored, and Python then leaves it ignored: restore Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    client = etcdlock.Client(endpoints=endpoints)
    out({"ready": True})
    try:
        client.acquire(name)
        out({"acquired": True})
    except KeyboardInterrupt:
        out({"interrupted": time.monotonic_ns()})
        sys.stdin.readline()  # stay alive (client open) until the parent has looked
        raise


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "counter":
        counter(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "hold":
        hold(args[0], args[1], int(args[2]))
    elif mode == "wait":
        wait(args[0], args[1])
    else:
        raise SystemExit(f"unknown mode {mode}")
