"""The renewal-failing signal: an etcd hung (SIGSTOP) for 2.5 s under a holder
with TTL 5 s makes its keep-alive renewal fail (signalled with the validity
left) and recover, and the hold survives."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import List, Optional, Tuple

import pytest

import etcdlock
from conftest import harness_path


def test_renewal_failing_then_recovered_while_etcd_hangs() -> None:
    h = subprocess.Popen([harness_path()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert h.stdin is not None and h.stdout is not None
    try:
        eps = json.loads(h.stdout.readline())["endpoints"]
        c = etcdlock.Client(endpoints=eps, ttl=5)
        g = c.acquire("renewal")
        assert g.renewal_failing is None
        events: List[Tuple[bool, Optional[float]]] = []
        got = [threading.Event(), threading.Event()]

        def on_renewal(failing: bool, left: Optional[float]) -> None:
            events.append((failing, left))
            got[len(events) - 1 if len(events) <= 2 else 1].set()

        g.on_renewal(on_renewal)
        with pytest.raises(TypeError):
            g.on_renewal(3)  # type: ignore[arg-type]
        t0 = time.monotonic()
        h.stdin.write("pause 0 2500\n")
        h.stdin.flush()
        assert json.loads(h.stdout.readline())["ok"]
        # At TTL 5 s: keep-alive every 1 s, failing 1.5 s after the last
        # acknowledgement, the hold lasts 4 s after it.
        assert got[0].wait(2.5), "no Failing event while etcd hung"
        failing_at = time.monotonic() - t0
        assert events[0][0] is True and events[0][1] is not None and events[0][1] > 0, events
        left = g.renewal_failing
        assert left is not None and 0 < left < 4.5 and g.is_held
        assert got[1].wait(3), "no recovery event after etcd resumed"
        assert events[1] == (False, None), events
        assert g.renewal_failing is None and g.is_held
        print(f"failing {failing_at:.2f} s after the hang ({events[0][1]:.2f} s left), recovered {time.monotonic() - t0:.2f} s after it")
        g.unlock()
        c.close()
    finally:
        h.stdin.close()
        h.wait(30)


def test_async_guard_has_the_renewal_api_too() -> None:
    import inspect

    for attr in ("renewal_failing", "on_renewal"):
        assert hasattr(etcdlock.AsyncGuard, attr), attr
    assert inspect.isfunction(etcdlock.AsyncGuard.on_renewal)


