"""Bad input gets typed errors, never a crash; the exception tree mirrors the core codes."""

from __future__ import annotations

import math
import time
from typing import Any, Dict, List

import pytest

import etcdlock

CORE_CODES = [
    "InvalidArgument", "Timeout", "WouldBlock", "LockLost", "NotHeld", "Cancelled",
    "Unavailable", "AuthFailed", "PermissionDenied", "Closed", "Internal", "Deadlock",
]


def test_exception_tree_mirrors_core_codes() -> None:
    assert [c for c, _n, _cls in etcdlock.ERROR_CODES] == CORE_CODES
    assert [n for _c, n, _cls in etcdlock.ERROR_CODES] == list(range(1, 13))
    assert len({cls for _c, _n, cls in etcdlock.ERROR_CODES}) == 12
    for code, _num, cls_name in etcdlock.ERROR_CODES:
        cls = getattr(etcdlock, cls_name)
        assert cls is etcdlock.ERRORS[code]
        assert issubclass(cls, etcdlock.LockError) and cls is not etcdlock.LockError
        assert cls.code == code
        assert cls.__module__ == "etcdlock"
        try:
            raise cls("boom")
        except etcdlock.LockError as e:
            assert e.code == code
    assert issubclass(etcdlock.LockError, Exception)
    assert etcdlock.LOSS_REASONS == ["LeaseExpired", "KeyDeleted", "ConnectionLost", "ClientClosed"]


@pytest.mark.parametrize(
    "kw,exc",
    [
        ({"ttl": 0}, etcdlock.InvalidArgumentError),
        ({"ttl": -1}, etcdlock.InvalidArgumentError),
        ({"ttl": 9_000_000_001}, etcdlock.InvalidArgumentError),
        ({"ttl": 10**40}, etcdlock.InvalidArgumentError),
        ({"ttl": "15"}, TypeError),
        ({"ttl": 1.5}, TypeError),
        ({"ttl": True}, TypeError),
        ({"endpoints": []}, etcdlock.InvalidArgumentError),
        ({"endpoints": [""]}, etcdlock.InvalidArgumentError),
        ({"endpoints": ["bad host:2379"]}, etcdlock.InvalidArgumentError),
        ({"endpoints": [1]}, TypeError),
        ({"endpoints": b"127.0.0.1:2379"}, TypeError),
        ({"endpoints": ["https://127.0.0.1:2379"]}, etcdlock.InvalidArgumentError),
        ({"username": "u"}, etcdlock.InvalidArgumentError),
        ({"connect_timeout": 0}, etcdlock.InvalidArgumentError),
        ({"connect_timeout": -1}, etcdlock.InvalidArgumentError),
        ({"request_timeout": math.nan}, etcdlock.InvalidArgumentError),
        ({"connect_timeout": "5"}, TypeError),
        ({"ca": "/nonexistent/ca.pem"}, etcdlock.InvalidArgumentError),
        ({"namespace": 5}, TypeError),
        ({"keepalive_interval": 0.001}, etcdlock.InvalidArgumentError),
        ({"keepalive_interval": 100.0}, etcdlock.InvalidArgumentError),
        ({"keepalive_interval": "1s"}, TypeError),
        ({"watch_held_keys": 1}, TypeError),
    ],
)
def test_bad_client_options(endpoints: List[str], kw: Dict[str, Any], exc: type) -> None:
    args: Dict[str, Any] = {"endpoints": endpoints, "connect_timeout": 2.0, **kw}
    with pytest.raises(exc) as ei:
        etcdlock.Client(**args)
    if isinstance(ei.value, etcdlock.LockError):
        assert ei.value.code == "InvalidArgument"
        assert str(ei.value).startswith("InvalidArgument: ")


def test_unreachable_endpoint_is_unavailable_quickly() -> None:
    t0 = time.monotonic()
    with pytest.raises(etcdlock.UnavailableError) as ei:
        etcdlock.Client(endpoints=["127.0.0.1:1"], connect_timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert "127.0.0.1:1" in str(ei.value) and ei.value.code == "Unavailable"
    with pytest.raises(etcdlock.LockError):
        etcdlock.Client(endpoints="127.0.0.1:1", connect_timeout=0.5)


def test_bad_lock_arguments(client: etcdlock.Client, name: str) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError, match="empty"):
        client.acquire("")
    with pytest.raises(etcdlock.InvalidArgumentError, match="limit"):
        client.acquire("x" * (etcdlock.MAX_NAME_LEN + 1))
    with pytest.raises(etcdlock.InvalidArgumentError):
        with client.lock(""):
            pytest.fail("body must not run")
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.try_lock("x" * etcdlock.MAX_NAME_LEN + "y")
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.lock("").acquire()
    for bad in (None, 5, b"bytes", ["x"]):
        with pytest.raises(TypeError):
            client.lock(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            client.try_lock(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.lock(name, timeout="1")  # type: ignore[arg-type]
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire(name, timeout=-1)
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire(name, timeout=math.nan)
    # a huge timeout means "no bound", not an overflow
    g = client.acquire(name, timeout=1e300)
    g.unlock()
    # the client is still fine after all that
    with client.lock(name, timeout=5) as g:
        assert g.is_held


def test_max_len_name_works(client: etcdlock.Client) -> None:
    long = "n" * etcdlock.MAX_NAME_LEN
    g = client.try_lock(long)
    assert g is not None and g.is_held
    g.unlock()


def test_guarded_ops_bad_values(client: etcdlock.Client, name: str) -> None:
    with client.lock(name) as g:
        for bad in (None, 1, 1.0, ["k"], bytearray(b"k")):
            with pytest.raises(TypeError):
                g.put(bad, "v")  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                g.get(bad)  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                g.delete(bad)  # type: ignore[arg-type]
        with pytest.raises(etcdlock.InvalidArgumentError):
            g.lost.wait(-1)


def test_unpicklable_handles(client: etcdlock.Client, name: str) -> None:
    import pickle

    with pytest.raises(Exception):
        pickle.dumps(client)
    with client.lock(name) as g:
        with pytest.raises(Exception):
            pickle.dumps(g)


def test_etcd_going_away_gives_typed_errors_not_hangs() -> None:
    import json
    import subprocess

    from conftest import harness_path

    h = subprocess.Popen([harness_path()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert h.stdout is not None and h.stdin is not None
    eps = json.loads(h.stdout.readline())["endpoints"]
    c = etcdlock.Client(endpoints=eps, ttl=5, request_timeout=0.5, connect_timeout=0.5)
    g = c.acquire("going-away")
    h.stdin.close()
    h.wait(30)
    # the holder learns it lost the lock (no keep-alive acknowledged in time)
    assert g.lost.wait(15) is True
    assert g.loss_reason in ("ConnectionLost", "LeaseExpired")
    t0 = time.monotonic()
    with pytest.raises((etcdlock.UnavailableError, etcdlock.TimeoutError)):
        with c.lock("going-away-2", timeout=5):
            pytest.fail("body must not run without the lock")
    assert time.monotonic() - t0 < 8
    with pytest.raises(etcdlock.LockLostError):
        g.put("k", "v")
    c.close()


def test_options_from_environment(endpoints: List[str], name: str) -> None:
    import os
    import subprocess
    import sys

    code = (
        "import etcdlock\n"
        "try:\n"
        "    c = etcdlock.Client()\n"
        "except etcdlock.LockError as e:\n"
        "    print(type(e).__name__); raise SystemExit(0)\n"
        f"with c, c.lock({name!r}) as g:\n"
        "    print(c.ttl, c.namespace, g.key.split('/')[0])\n"
    )
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints), "ETCDLOCK_TTL": "7", "ETCDLOCK_NAMESPACE": "envns"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7", "envns", "envns" + name]
    env["ETCDLOCK_TTL"] = "soon"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "InvalidArgumentError", out.stderr


def test_explicit_options_win_over_a_malformed_environment(endpoints: List[str], name: str) -> None:
    """Core's one rule: a variable is ignored when its option is given explicitly (wave 1: a
    malformed ETCDLOCK_TTL broke Client(ttl=10)); ETCDLOCK_KEY, which `etcdlock run` exports as
    the lock key, is never read as a TLS key."""
    import os
    import subprocess
    import sys

    code = (
        "import etcdlock\n"
        f"with etcdlock.Client(ttl=10) as c, c.lock({name!r}) as g:\n"
        "    print(c.ttl, g.key.split('/')[0])\n"
    )
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints), "ETCDLOCK_TTL": "soon", "ETCDLOCK_KEY": "other/694d7a3e"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["10", name]


def test_every_option_is_accepted_and_timeouts_come_from_the_environment(endpoints: List[str], name: str) -> None:
    """Every core option key has its keyword (the same list in every language), and the
    timeouts and watch_held_keys follow the one rule too: left out, they come from
    ETCDLOCK_*; given, a malformed variable for them is ignored."""
    import os
    import subprocess
    import sys

    kw = {
        "endpoints": endpoints, "ttl": 10, "namespace": "n/", "connect_timeout": 2.0, "request_timeout": 2.0,
        "margin": 1.0, "watch_held_keys": False,
    }
    with etcdlock.Client(**kw) as c, c.lock(name) as g:  # type: ignore[arg-type]
        assert g.is_held
    code = (
        "import etcdlock\n"
        "try:\n"
        "    c = etcdlock.Client()\n"
        "except etcdlock.LockError as e:\n"
        "    print(type(e).__name__, 'ETCDLOCK_REQUEST_TIMEOUT' in str(e)); raise SystemExit(0)\n"
        "c.close(); print('ok')\n"
    )
    explicit = code.replace("etcdlock.Client()", "etcdlock.Client(request_timeout=1.0, watch_held_keys=True)")
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints), "ETCDLOCK_REQUEST_TIMEOUT": "soon"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["InvalidArgumentError", "True"], out.stderr
    out = subprocess.run([sys.executable, "-c", explicit], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_keepalive_interval_is_an_option_core_checks(endpoints: List[str]) -> None:
    """The option added only in core and declared here: a value core takes
    works, and a bad one carries core's message."""
    with etcdlock.Client(endpoints, ttl=5, keepalive_interval=0.25) as c:
        with c.lock("ka-opt") as g:
            assert g.is_held
    with pytest.raises(etcdlock.InvalidArgumentError, match="keepalive_interval"):
        etcdlock.Client(endpoints, ttl=5, keepalive_interval=3.0)


def test_lazy_connect_starts_without_etcd_and_calls_keep_their_bounds(endpoints: List[str]) -> None:
    """lazy_connect: a client made while etcd is down returns at once; ping
    and try_lock raise UnavailableError within the request timeout and a lock
    call its TimeoutError within its timeout; against a live etcd the
    first call connects. Without it, the constructor raises."""
    down = ["127.0.0.1:1"]
    t = time.monotonic()
    c = etcdlock.Client(down, lazy_connect=True, request_timeout=0.5)
    assert time.monotonic() - t < 0.2
    with c:
        t = time.monotonic()
        with pytest.raises(etcdlock.UnavailableError):
            c.ping()
        assert time.monotonic() - t < 0.5 + 0.7
        t = time.monotonic()
        with pytest.raises(etcdlock.UnavailableError):
            c.try_lock("lazy")
        assert time.monotonic() - t < 0.5 + 0.7
        t = time.monotonic()
        with pytest.raises((etcdlock.TimeoutError, etcdlock.UnavailableError)):
            c.acquire("lazy", timeout=1.0)
        assert time.monotonic() - t < 1.0 + 0.7
    with etcdlock.Client(endpoints, lazy_connect=True) as live:
        with live.lock("lazy") as g:
            assert g.is_held
    with pytest.raises(etcdlock.UnavailableError):
        etcdlock.Client(down, connect_timeout=0.3)
    with pytest.raises(TypeError):
        etcdlock.Client(down, lazy_connect="yes")  # type: ignore[arg-type]


def test_errors_say_whether_a_retry_may_succeed(endpoints: List[str]) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError) as bad:
        etcdlock.Client(endpoints, ttl=0)
    assert bad.value.retryable is False
    with pytest.raises(etcdlock.UnavailableError) as down:
        etcdlock.Client(["127.0.0.1:1"], connect_timeout=0.3)
    assert down.value.retryable is True
    assert etcdlock.LockError("x").retryable is False


def test_import_on_an_unsupported_platform_names_it_and_the_supported_ones(tmp_path) -> None:
    """The package without a native module for this machine (faked: riscv64)
    fails at import with an ImportError naming the platform and the list."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pkg = tmp_path / "etcdlock"
    pkg.mkdir()
    for f in Path(etcdlock.__file__).parent.iterdir():
        if f.suffix in (".py", ".pyi"):
            shutil.copy(f, pkg / f.name)
    probe = (
        "import platform, sys\n"
        "platform.machine = lambda: 'riscv64'\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "try:\n"
        "    import etcdlock\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    print('imported from', etcdlock.__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    msg = out.stdout
    assert f"no native module for {sys.platform}-riscv64" in msg, msg
    assert "linux-x86_64, linux-aarch64" in msg, msg
