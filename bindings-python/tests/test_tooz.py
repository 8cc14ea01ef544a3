"""tooz's own coordination tests (``tooz.tests.test_coordination``, the
suite every tooz driver runs) against ``etcdlock://``: the driver found
through its ``tooz.backends`` entry point. Locks (exclusive and shared,
across threads, processes and coordinators, ``break_``) pass; groups and
leader election are not provided and tooz skips them (``tooz.NotImplemented``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Dict, List

# test.sh installs this tooz and what its test module imports; the counts
# below are this version's.
TOOZ = "9.1.0"


def test_toozs_coordination_tests_pass_on_the_etcdlock_driver(endpoints: List[str]) -> None:
    from importlib.metadata import entry_points, version

    assert version("tooz") == TOOZ, f"test.sh pins tooz {TOOZ}"
    found = [ep.value for ep in entry_points(group="tooz.backends") if ep.name == "etcdlock"]
    assert found == ["etcdlock.tooz_driver:EtcdlockDriver"], found
    host = endpoints[0].split("//")[-1]
    env: Dict[str, str] = {**os.environ, "TOOZ_TEST_URL": f"etcdlock://{host}?ttl=5"}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v", "--timeout", "60",
         "--pyargs", "tooz.tests.test_coordination"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    out = r.stdout + r.stderr
    passed = sorted(set(re.findall(r"::(test_\w+) PASSED", out)))
    print(f"tooz {TOOZ}: {len(passed)} passed:", " ".join(passed))
    summary = out.strip().splitlines()[-1]
    print(summary)
    assert r.returncode == 0, out[-4000:]
    assert re.search(r"\b35 passed, 48 skipped\b", summary), summary
    for must in ["test_get_lock", "test_get_shared_lock_locking_two_lock", "test_get_lock_locking_shared_and_exclusive",
                 "test_get_lock_release_broken", "test_get_lock_concurrency_locking_two_lock_process",
                 "test_get_lock_multiple_coords", "test_connection_error_bad_host"]:
        assert must in passed, f"{must} did not pass"


def test_the_driver_reports_a_hold_and_its_fencing_token(endpoints: List[str]) -> None:
    """Beyond tooz's suite: ``acquired``/``heartbeat`` while held, a fencing
    token that grows from one hold to the next, ``break_`` frees another
    coordinator's hold."""
    import tooz.coordination

    host = endpoints[0].split("//")[-1]
    a = tooz.coordination.get_coordinator(f"etcdlock://{host}?ttl=5", b"a")
    b = tooz.coordination.get_coordinator(f"etcdlock://{host}?ttl=5", b"b")
    a.start()
    b.start()
    try:
        la, lb = a.get_lock(b"job"), b.get_lock(b"job")
        assert la.acquire() and la.acquired and la.heartbeat()
        first = la.fencing_token  # type: ignore[attr-defined]
        assert not lb.acquire(blocking=False) and not lb.acquired
        assert lb.break_()
        assert lb.acquire(blocking=5)
        assert lb.fencing_token > first  # type: ignore[attr-defined]
        assert not la.release(), "a's hold was broken: release says so"
        assert lb.release() and not lb.acquired
    finally:
        a.stop()
        b.stop()
