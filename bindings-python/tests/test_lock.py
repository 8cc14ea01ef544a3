"""The core behaviour suite, blocking API, against real etcd."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import List, Set

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys, wait_until, worker


def test_uncontended_lock_unlock(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    with client.lock(name, timeout=5) as g:
        assert isinstance(g, etcdlock.Guard)
        assert g.is_held and g.state == "held"
        assert g.name == name
        assert g.key.startswith(name + "/")
        assert g.lease_id > 0 and g.fencing_token > 0
        assert not g.lost.is_set() and g.loss_reason is None
        assert etcdctl_keys(endpoints, name + "/") == [g.key]
    assert not g.is_held and g.state == "released"
    assert etcdctl_keys(endpoints, name + "/") == []


def test_excludes_etcdctl_lock(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    # etcdctl lock uses the same key layout: while we hold, it queues behind us.
    g = client.acquire(name)
    p = subprocess.Popen(
        ["etcdctl", "--endpoints", ",".join(endpoints), "lock", name, "echo", "etcdctl-got-it"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ETCDCTL_API": "3"},
    )
    try:
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 2, what="etcdctl queued")
        assert p.poll() is None
        g.unlock()
        out, _ = p.communicate(timeout=20)
        assert "etcdctl-got-it" in out and p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()


def test_threading_lock_shape(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    lock = client.lock(name)
    assert not lock.locked()
    assert lock.acquire() is True
    assert lock.locked() and lock.guard is not None and lock.guard.is_held
    other = client.lock(name)
    assert other.acquire(blocking=False) is False
    assert other.acquire(timeout=0) is False
    t0 = time.monotonic()
    assert other.acquire(timeout=0.3) is False
    assert time.monotonic() - t0 >= 0.29
    with pytest.raises(ValueError):
        other.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        other.acquire(timeout=-5)
    lock.release()
    assert not lock.locked()
    with pytest.raises(etcdlock.NotHeldError):
        lock.release()
    assert other.acquire(blocking=False) is True
    other.release()
    assert etcdctl_keys(endpoints, name + "/") == []


def test_try_lock(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g = client.try_lock(name)
    assert g is not None and g.is_held
    with etcdlock.Client(endpoints=endpoints) as c2:
        assert c2.try_lock(name) is None
        # try_lock leaves no key behind when it fails
        assert etcdctl_keys(endpoints, name + "/") == [g.key]
        g.unlock()
        g2 = c2.try_lock(name)
        assert g2 is not None
        g2.unlock()
    g.unlock()  # idempotent


def test_timeout_raises_and_leaves_no_key(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    holder = client.acquire(name)
    with etcdlock.Client(endpoints=endpoints) as c2:
        t0 = time.monotonic()
        with pytest.raises(etcdlock.TimeoutError) as ei:
            with c2.lock(name, timeout=0.4):
                pytest.fail("the body must not run without the lock")
        elapsed = time.monotonic() - t0
        assert 0.39 <= elapsed < 3
        assert ei.value.code == "Timeout"
        assert isinstance(ei.value, etcdlock.LockError)
        wait_until(lambda: etcdctl_keys(endpoints, name + "/") == [holder.key], what="waiter key removed")
    holder.unlock()
    assert etcdctl_keys(endpoints, name + "/") == []


def test_fifo_order(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    holder = client.acquire(name)
    order: List[int] = []
    errors: List[BaseException] = []
    n = 5
    # One client per waiter: waiters of one client queue locally and keep at
    # most 2 keys in etcd at a time (core's window), so only waiters of
    # different clients each show a key queued in etcd.
    waiters = [etcdlock.Client(endpoints=endpoints) for _ in range(n)]

    def waiter(i: int) -> None:
        try:
            with waiters[i].lock(name, timeout=30):
                order.append(i)
        except BaseException as e:
            errors.append(e)

    threads = []
    try:
        for i in range(n):
            t = threading.Thread(target=waiter, args=(i,))
            t.start()
            threads.append(t)
            # the next waiter starts only once this one's key is queued in etcd
            wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == i + 2, what=f"waiter {i} queued")
        holder.unlock()
        for t in threads:
            t.join(30)
    finally:
        for c in waiters:
            c.close()
    assert errors == []
    assert order == list(range(n))
    assert etcdctl_keys(endpoints, name + "/") == []


def test_fencing_tokens_increase(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as a, etcdlock.Client(endpoints=endpoints) as b:
        tokens = []
        for i in range(6):
            c = a if i % 2 == 0 else b
            with c.lock(name, timeout=5) as g:
                tokens.append(g.fencing_token)
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_guarded_ops(client: etcdlock.Client, name: str) -> None:
    with client.lock(name) as g:
        assert g.get(name + "-k") is None
        g.put(name + "-k", "v1")
        assert g.get(name + "-k") == b"v1"
        g.put(name.encode() + b"-k", b"\x00\xffbin")
        assert g.get(name + "-k") == b"\x00\xffbin"
        assert g.delete(name + "-k") is True
        assert g.delete(name + "-k") is False
        with pytest.raises(TypeError):
            g.put(1, "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            g.put("k", 1.5)  # type: ignore[arg-type]
    with pytest.raises(etcdlock.NotHeldError) as ei:
        g.put(name + "-k", "after")
    assert ei.value.code == "NotHeld"


def test_namespace(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints, namespace="ns1/") as c:
        assert c.namespace == "ns1/"
        with c.lock(name) as g:
            assert g.key.startswith("ns1/" + name + "/")
            g.put("data", "x")
            assert etcdctl_keys(endpoints, "ns1/" + name + "/") == [g.key]
        assert etcdctl(endpoints, "get", "ns1/data", "--print-value-only").strip() == "x"


def test_loss_by_key_deletion(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g = client.acquire(name)
    seen: List[str] = []
    fired = threading.Event()
    g.on_lost(lambda reason: (seen.append(reason), fired.set()))
    assert g.lost.wait(0.05) is False
    etcdctl(endpoints, "del", g.key)
    assert g.lost.wait(10) is True
    assert g.lost.is_set() and g.lost.reason == "KeyDeleted"
    assert g.loss_reason == "KeyDeleted" and not g.is_held and g.state == "lost"
    assert fired.wait(10) and seen == ["KeyDeleted"]
    with pytest.raises(etcdlock.LockLostError) as ei:
        g.put(name + "-x", "y")
    assert ei.value.reason == "KeyDeleted" and ei.value.code == "LockLost"
    with pytest.raises(etcdlock.LockLostError):
        g.unlock()


def test_lost_wait_returns_false_after_release(client: etcdlock.Client, name: str) -> None:
    g = client.acquire(name)
    ev = g.lost
    threading.Timer(0.2, g.unlock).start()
    assert ev.wait(10) is False
    assert not ev.is_set()


def test_close_releases_and_reports(endpoints: List[str], name: str) -> None:
    c = etcdlock.Client(endpoints=endpoints)
    g = c.acquire(name)
    c.close()
    assert c.closed
    assert g.lost.wait(5) and g.loss_reason == "ClientClosed"
    assert etcdctl_keys(endpoints, name + "/") == []
    with pytest.raises(etcdlock.ClosedError):
        c.acquire(name)
    c.close()  # idempotent


def _sockets_to(port: int) -> Set[str]:
    """Inodes of this process's sockets connected to ``port`` (Linux:
    ESTABLISHED entries of /proc/self/net/tcp that are our descriptors)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            ours.add(link[8:-1])
    found = set()
    with open("/proc/self/net/tcp") as f:
        for line in list(f)[1:]:
            p = line.split()
            if len(p) > 9 and p[3] == "01" and p[9] in ours and int(p[2].rsplit(":", 1)[1], 16) == port:
                found.add(p[9])
    return found


def test_close_closes_the_connection_while_the_object_lives(endpoints: List[str], name: str) -> None:
    # The object outlives close() until garbage collection; its socket must not.
    port = int(endpoints[0].rsplit(":", 1)[1])
    before = _sockets_to(port)
    c = etcdlock.Client(endpoints=endpoints)
    c.acquire(name).unlock()
    mine = _sockets_to(port) - before
    assert len(mine) == 1, mine
    c.close()
    assert not (_sockets_to(port) & mine), "the connection outlived close()"
    with pytest.raises(etcdlock.ClosedError):
        c.acquire(name)
    assert _sockets_to(port) <= before, "nothing connected again"


def test_threads_share_one_client_mutual_exclusion(client: etcdlock.Client, name: str) -> None:
    inside = 0
    max_inside = 0
    count = 0
    guard = threading.Lock()

    # each thread re-acquires at once after releasing, while the others of the
    # same client (same lease) wait: the key name is re-created behind them
    def run() -> None:
        nonlocal inside, max_inside, count
        for _ in range(5):
            with client.lock(name, timeout=30) as g:
                with guard:
                    inside += 1
                    max_inside = max(max_inside, inside)
                v = int(g.get(name + "-n") or b"0")
                g.put(name + "-n", str(v + 1))
                with guard:
                    inside -= 1
                    count += 1

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert count == 20 and max_inside == 1
    with client.lock(name) as g:
        assert g.get(name + "-n") == b"20"


def test_mutual_exclusion_4_processes_x_4_threads(endpoints: List[str], name: str) -> None:
    iters, threads, procs = 5, 4, 4
    ps = [worker("counter", ",".join(endpoints), name, str(iters), str(threads)) for _ in range(procs)]
    holds = []
    for p in ps:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        r = json.loads(out.strip().splitlines()[-1])
        assert r["errors"] == []
        holds.extend(r["holds"])
    total = iters * threads * procs
    assert len(holds) == total
    with etcdlock.Client(endpoints=endpoints) as c, c.lock(name) as g:
        assert g.get(name + "-counter") == str(total).encode()
    # every read saw the previous write, tokens grow with the counter, and the
    # holds (CLOCK_MONOTONIC is system-wide) never overlap
    holds.sort(key=lambda h: h[3])
    assert [h[3] for h in holds] == list(range(total))
    tokens = [h[2] for h in holds]
    assert tokens == sorted(tokens) and len(set(tokens)) == total
    for a, b in zip(holds, holds[1:]):
        assert a[1] <= b[0], "two holders overlapped"


def test_loss_detected_when_holder_process_is_stopped(endpoints: List[str], name: str) -> None:
    p = worker("hold", ",".join(endpoints), name, "2")
    try:
        assert p.stdout is not None and p.stdin is not None
        first = json.loads(p.stdout.readline())
        assert first["held"]
        os.kill(p.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with etcdlock.Client(endpoints=endpoints) as c:
            # the stopped holder's lease expires; etcd hands the lock over
            g = c.acquire(name, timeout=20)
            waited = time.monotonic() - t0
            assert g.fencing_token > first["token"]
            os.kill(p.pid, signal.SIGCONT)
            p.stdin.write("go\n")
            p.stdin.flush()
            res = json.loads(p.stdout.readline())
            assert res["held"] is False and res["lost"] is True
            # paused past its TTL, the holder asks etcd why: the lease is gone there
            assert res["loss_reason"] == "LeaseExpired"
            assert res["put"] == "LockLostError" and res["put_code"] == "LockLost"
            assert res["put_reason"] == "LeaseExpired"
            assert res["callback"] is True and res["callback_reasons"] == ["LeaseExpired"]
            # the stale write never reached etcd
            assert g.get(name + "-data") == b"from-child"
            g.unlock()
        assert waited < 15
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()


def test_keyboard_interrupt_during_blocked_lock(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    holder = client.acquire(name)
    p = worker("wait", ",".join(endpoints), name)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert json.loads(p.stdout.readline()) == {"ready": True}
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 2, what="child waiter queued")
        t0 = time.monotonic_ns()
        os.kill(p.pid, signal.SIGINT)
        r = json.loads(p.stdout.readline())
        latency_ms = (r["interrupted"] - t0) / 1e6
        assert latency_ms < 500, f"KeyboardInterrupt took {latency_ms:.0f} ms"
        # the waiter key goes although the child (and its client) is still alive
        wait_until(lambda: etcdctl_keys(endpoints, name + "/") == [holder.key], what="waiter key removed")
        assert p.poll() is None
        p.stdin.close()
        p.wait(timeout=30)
        assert p.returncode != 0
        assert p.stderr is not None and "KeyboardInterrupt" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    holder.unlock()
    print(f"KeyboardInterrupt latency: {latency_ms:.1f} ms")


def test_guard_is_a_context_manager(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g = client.try_lock(name)
    assert g is not None
    with g as same:
        assert same is g and g.is_held
    assert g.state == "released"
    assert etcdctl_keys(endpoints, name + "/") == []
    # an exception in the block propagates; the lock is released anyway
    with pytest.raises(ZeroDivisionError):
        with client.lock(name) as g2:
            1 / 0
    assert g2.state == "released"
    assert etcdctl_keys(endpoints, name + "/") == []


def test_on_lost_after_the_fact_and_not_on_release(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g = client.acquire(name)
    etcdctl(endpoints, "del", g.key)
    assert g.lost.wait(10)
    fired = threading.Event()
    g.on_lost(lambda r: fired.set())  # registered after the loss: still called
    assert fired.wait(10)
    g2 = client.acquire(name)
    never = threading.Event()
    g2.on_lost(lambda r: never.set())
    g2.unlock()
    assert not g2.lost.wait(0.3) and not never.is_set()


def test_exit_with_daemon_threads_blocked_in_lock(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    import sys

    holder = client.acquire(name)
    code = (
        "import etcdlock, threading, time\n"
        f"c = etcdlock.Client(endpoints={endpoints!r})\n"
        "def w():\n"
        "    try:\n"
        f"        c.acquire({name!r})\n"
        "    except etcdlock.LockError:\n"
        "        pass\n"
        "for _ in range(3):\n"
        "    threading.Thread(target=w, daemon=True).start()\n"
        "mine = etcdlock.Client(endpoints=" + repr(endpoints) + ").acquire(" + repr(name + "-own") + ")\n"
        "threading.Thread(target=mine.lost.wait, daemon=True).start()\n"
        "print('exiting', flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "exiting"
        p.wait(timeout=30)
        assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    finally:
        if p.poll() is None:
            p.kill()
    # the exiting process closed its clients: its waiter keys are gone
    wait_until(lambda: etcdctl_keys(endpoints, name + "/") == [holder.key], what="waiters of the exited process removed")
    assert etcdctl_keys(endpoints, name + "-own/") == []
    holder.unlock()


def test_on_lost_callback_errors_are_reported_not_fatal(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    import sys

    seen = threading.Event()
    caught: List[BaseException] = []
    old = sys.unraisablehook

    def hook(u: "sys.UnraisableHookArgs") -> None:
        if u.exc_value is not None:
            caught.append(u.exc_value)
        seen.set()

    def bad_callback(reason: str) -> None:
        raise ValueError("callback failed: " + reason)

    sys.unraisablehook = hook
    try:
        g = client.acquire(name)
        g.on_lost(bad_callback)
        etcdctl(endpoints, "del", g.key)
        assert seen.wait(10)
        assert isinstance(caught[0], ValueError) and "KeyDeleted" in str(caught[0])
    finally:
        sys.unraisablehook = old
    # the client is unaffected
    with client.lock(name, timeout=5) as g2:
        assert g2.is_held



def test_metrics_count_acquisitions_holds_and_losses(endpoints: List[str], name: str) -> None:
    """The core's metrics source, as a dict: the same figures as in every language."""
    from conftest import etcdctl

    with etcdlock.Client(endpoints=endpoints, ttl=5) as c, etcdlock.Client(endpoints=endpoints, ttl=5) as other:
        m = c.metrics()
        assert set(m["acquisitions"]) == {"acquired", "timeout", "would_block", "cancelled", "error"}
        assert set(m["lost"]) == {"LeaseExpired", "KeyDeleted", "ConnectionLost", "ClientClosed"}
        assert (m["held"], m["waiting"], m["holds_ended"]) == (0, 0, 0)
        with c.lock(name):
            assert c.metrics()["held"] == 1
            assert other.try_lock(name) is None
        m = c.metrics()
        assert (m["held"], m["holds_ended"], m["acquisitions"]["acquired"]["count"]) == (0, 1, 1)
        assert other.metrics()["acquisitions"]["would_block"]["count"] == 1
        h = c.try_lock(name)
        assert h is not None
        etcdctl(endpoints, "del", h.key)
        assert h.lost.wait(5)
        m = c.metrics()
        assert (m["lost"]["KeyDeleted"], m["held"], m["holds_ended"]) == (1, 0, 2)
