"""Core's records reach `logging.getLogger("etcdlock")` with their fields; with
no logging configured nothing is printed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from typing import List

import etcdlock


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []
        self.cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.cond:
            self.records.append(record)
            self.cond.notify_all()

    def wait_for(self, message: str, lock: str, timeout: float = 10.0) -> logging.LogRecord:
        """The first record of `message` about `lock`: records of other tests'
        locks (a loss noticed late, a release in the background) may arrive
        while this one runs, since logging is process-wide."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.records:
                    fields = getattr(r, "etcdlock", {})
                    if r.getMessage().startswith(message) and fields.get("lock") == lock:
                        return r
                left = deadline - time.monotonic()
                assert left > 0, f"no record {message!r}; got {[r.getMessage() for r in self.records]}"
                self.cond.wait(left)


def etcdctl(endpoints: List[str], *args: str) -> None:
    subprocess.run(["etcdctl", "--endpoints", ",".join(endpoints), *args], check=True, capture_output=True,
                   env={**os.environ, "ETCDCTL_API": "3"})


def test_acquire_release_and_loss_are_logged_with_fields(endpoints: List[str], name: str) -> None:
    log = logging.getLogger("etcdlock")
    cap = Capture()
    log.addHandler(cap)
    old = log.level
    log.setLevel(logging.DEBUG)
    try:
        with etcdlock.Client(endpoints, ttl=5) as c:
            with c.lock(name) as g:
                token = g.fencing_token
            acquired = cap.wait_for("acquired", name)
            assert acquired.levelno == logging.DEBUG and acquired.name == "etcdlock"
            assert acquired.etcdlock == {"lock": name, "fencing_token": str(token)}  # type: ignore[attr-defined]
            released = cap.wait_for("released", name)
            assert released.etcdlock["lock"] == name  # type: ignore[attr-defined]
            g2 = c.acquire(name)
            etcdctl(endpoints, "del", g2.key)
            assert g2.lost.wait(5)
            lost = cap.wait_for("lock lost", name)
            assert lost.levelno == logging.WARNING
            assert lost.etcdlock == {"lock": name, "reason": "KeyDeleted"}  # type: ignore[attr-defined]
    finally:
        log.removeHandler(cap)
        log.setLevel(old)


CHILD = """
import os, subprocess, sys, etcdlock
eps = sys.argv[1].split(",")
with etcdlock.Client(eps, ttl=5) as c:
    g = c.acquire(sys.argv[2])
    subprocess.run(["etcdctl", "--endpoints", sys.argv[1], "del", g.key], check=True, capture_output=True,
                   env={**os.environ, "ETCDCTL_API": "3"})
    assert g.lost.wait(5)
    import time; time.sleep(0.3)  # the record would be written by now
print("done")
"""


def test_nothing_is_printed_unless_logging_is_configured(endpoints: List[str], name: str) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, ",".join(endpoints), name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    assert out.stderr == ""
    configured = CHILD.replace("import os,", "import logging; logging.basicConfig(level=logging.WARNING)\nimport os,")
    out = subprocess.run([sys.executable, "-c", configured, ",".join(endpoints), name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "WARNING:etcdlock:lock lost lock=" in out.stderr and "reason=KeyDeleted" in out.stderr, out.stderr
