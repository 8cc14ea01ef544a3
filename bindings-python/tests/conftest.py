"""Real etcd for the suite: one `etcd-harness` process per session (no mocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import etcdlock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
WORKER = str(HERE / "worker.py")

#: Filled by test_conformance.py: the language, how many cases the table has,
#: the ids listed for Python and the ids that ran to their end.
CONFORMANCE: dict = {}


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if CONFORMANCE.get("active"):  # the table's tests were selected
        ran, lang = CONFORMANCE["ran"], CONFORMANCE["lang"]
        terminalreporter.write_line(f"conformance: {len(ran)} of {CONFORMANCE['total']} cases ran for {lang}")
        missing = [i for i in CONFORMANCE["listed"] if i not in ran]
        if missing:
            terminalreporter.write_line(f"conformance: listed for {lang} and not run: {', '.join(missing)}")


def harness_path() -> str:
    p = os.environ.get("ETCD_HARNESS")
    if p:
        return p
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    return str(Path(target) / "debug" / "etcd-harness")


@pytest.fixture(scope="session")
def etcd() -> Iterator[dict]:
    path = harness_path()
    if not os.path.exists(path):
        pytest.fail(f"etcd harness not found at {path}; run `cargo build -p etcdlock-testkit`")
    proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("etcd harness printed nothing")
    info = json.loads(line)
    yield info
    proc.stdin.close()
    proc.wait(timeout=30)


class Harness:
    """An `etcd-harness` process of its own, driven through stdin: `cmd`
    sends one command and returns its JSON answer; `proxy` starts etcd's gRPC
    proxy in front of the members (a client connected through it is
    partitioned from etcd by `proxy_pause` and reconnected by
    `proxy_resume`)."""

    def __init__(self, members: int = 1) -> None:
        self.p = subprocess.Popen([harness_path(), "--members", str(members)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout is not None
        self.endpoints: List[str] = json.loads(self.p.stdout.readline())["endpoints"]

    def cmd(self, line: str) -> dict:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = json.loads(self.p.stdout.readline())
        assert "error" not in reply, f"harness {line!r}: {reply['error']}"
        return reply  # type: ignore[no-any-return]

    def proxy(self) -> "tuple[int, str]":
        """Start a proxy: its index and endpoint."""
        r = self.cmd("proxy")
        return int(r["proxy"]), str(r["endpoint"])

    def proxy_pause(self, i: int) -> None:
        self.cmd(f"proxy-pause {i}")

    def proxy_resume(self, i: int) -> None:
        self.cmd(f"proxy-resume {i}")

    def stop(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(60)


@pytest.fixture
def harness() -> Iterator[Harness]:
    """A single-member etcd of the test's own, with proxies on demand."""
    h = Harness()
    yield h
    h.stop()


@pytest.fixture
def endpoints(etcd: dict) -> List[str]:
    return list(etcd["endpoints"])


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "")
    return f"py-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(endpoints: List[str]) -> Iterator[etcdlock.Client]:
    c = etcdlock.Client(endpoints=endpoints)
    yield c
    c.close()


def etcdctl_keys(endpoints: List[str], prefix: str) -> List[str]:
    """Keys under `prefix`, read with the real etcdctl."""
    out = subprocess.run(
        ["etcdctl", "--endpoints", ",".join(endpoints), "get", "--prefix", "--keys-only", prefix],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "ETCDCTL_API": "3"},
    ).stdout
    return [k for k in out.splitlines() if k.strip()]


def etcdctl(endpoints: List[str], *args: str) -> str:
    return subprocess.run(
        ["etcdctl", "--endpoints", ",".join(endpoints), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "ETCDCTL_API": "3"},
    ).stdout


def wait_until(pred: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll `pred` (an observation of real state) until it holds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def worker(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )
