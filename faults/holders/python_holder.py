"""Python holder process for the fault scenarios (same line protocol as the Rust child).

Spec (JSON) in $ETCDLOCK_FAULTS_CHILD: endpoints, ns, ttl, lock, rounds,
request_timeout_ms (optional, default 2000).
Prints: HELD <token> <acquired mono ns> <key> /
PUT <ok|Error> <call mono ns> <return mono ns> <ok|refused|unknown> /
LOST <reason> <last mono ns at which is_held was True> <mono ns it turned False> /
STALE <ok|Error> <call mono ns> <return mono ns> <ok|refused|unknown> / DONE.
It holds until the hold is lost (or it is killed). The loss is polled with
``is_held`` every 5 ms (the binding also has ``on_lost`` and ``lost``, but only
the poll gives the last instant the holder believed it held).
"""
import json
import os
import sys
import time

import etcdlock


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def mono() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def guarded_put(tag: str, g, res: str) -> None:
    """A guarded put, and what its outcome means for the history: etcd applied
    it (ok), etcd itself rejected the compare (refused), or not known."""
    call = mono()
    try:
        g.put(res, str(g.fencing_token))
        name, hist = "ok", "ok"
    except etcdlock.LockError as e:
        name = type(e).__name__
        hist = "refused" if isinstance(e, etcdlock.LockLostError) and "etcd rejected" in str(e) else "unknown"
    say(f"{tag} {name} {call} {mono()} {hist}")


def main() -> None:
    spec = json.loads(os.environ["ETCDLOCK_FAULTS_CHILD"])
    lock = spec.get("lock", "L")
    res = "res/" + lock
    client = etcdlock.Client(spec["endpoints"], ttl=int(spec["ttl"]), namespace=spec["ns"], request_timeout=int(spec.get("request_timeout_ms", 2000)) / 1000.0)
    for _ in range(int(spec.get("rounds", 1))):
        g = client.acquire(lock)
        acq = mono()
        say(f"HELD {g.fencing_token} {acq} {g.key}")
        guarded_put("PUT", g, res)
        # The belief interval: the last moment is_held answered True. The clock
        # is read before each is_held, so a True answer proves the hold at that
        # instant even if the process is stopped between the two; the moment it
        # turned False is read after the answer, for the same reason.
        last_true = acq
        while True:
            t = mono()
            held = g.is_held
            if not held:
                t = mono()
                break
            last_true = t
            time.sleep(0.005)
        say(f"LOST {g.loss_reason} {last_true} {t}")
        guarded_put("STALE", g, res)
    client.close()
    say("DONE")


if __name__ == "__main__":
    main()
