"""Python holder process for the fault scenarios (same line protocol as the Rust child).

Spec (JSON) in $ETCDLOCK_FAULTS_CHILD: endpoints, ns, ttl, lock, rounds.
Prints: HELD <token> <acquired mono ns> <key> / PUT <ok|Error> /
LOST <reason> <last mono ns at which is_held was True> <mono ns it turned False> /
STALE <ok|Error> / DONE. It holds until the hold is lost (or it is killed).
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


def main() -> None:
    spec = json.loads(os.environ["ETCDLOCK_FAULTS_CHILD"])
    lock = spec.get("lock", "L")
    res = "res/" + lock
    client = etcdlock.Client(spec["endpoints"], ttl=int(spec["ttl"]), namespace=spec["ns"], request_timeout=2.0)
    for _ in range(int(spec.get("rounds", 1))):
        g = client.acquire(lock)
        acq = mono()
        say(f"HELD {g.fencing_token} {acq} {g.key}")
        try:
            g.put(res, str(g.fencing_token))
            say("PUT ok")
        except etcdlock.LockError as e:
            say(f"PUT {type(e).__name__}")
        # The belief interval: the last moment is_held answered True.
        last_true = acq
        while True:
            held = g.is_held
            t = mono()
            if not held:
                break
            last_true = t
            time.sleep(0.005)
        say(f"LOST {g.loss_reason} {last_true} {t}")
        try:
            g.put(res, str(g.fencing_token))
            say("STALE ok")
        except etcdlock.LockError as e:
            say(f"STALE {type(e).__name__}")
    client.close()
    say("DONE")


if __name__ == "__main__":
    main()
