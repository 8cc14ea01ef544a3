"""A multi guard has the loss and renewal surface of a guard: it is lost when
any of its names is lost, `on_lost` fires once with that name and why, and
its renewal is that of the one session holding every name."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import threading
from typing import List, Optional, Tuple

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys, harness_path

LOSS_AND_RENEWAL = ("lost", "loss_reason", "on_lost", "renewal_failing", "on_renewal")


def public(cls: type) -> set:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_multi_guard_has_the_loss_and_renewal_members_of_a_guard() -> None:
    for cls in (etcdlock.Guard, etcdlock.MultiGuard, etcdlock.AsyncGuard, etcdlock.AsyncMultiGuard):
        missing = [a for a in LOSS_AND_RENEWAL if not hasattr(cls, a)]
        assert missing == [], f"{cls.__name__} lacks {missing}"
    for cls in (etcdlock.AsyncGuard, etcdlock.AsyncMultiGuard):
        assert inspect.isfunction(cls.on_lost) and inspect.isfunction(cls.on_renewal)


def test_async_guards_offer_every_non_blocking_member_of_their_blocking_twin() -> None:
    # A blocking member has an `_async` twin; the async guard awaits that one
    # under the blocking member's name.
    for sync_cls, aio_cls in ((etcdlock.Guard, etcdlock.AsyncGuard), (etcdlock.MultiGuard, etcdlock.AsyncMultiGuard), (etcdlock.Leadership, etcdlock.AsyncLeadership)):
        sync = {n for n in public(sync_cls) if not n.endswith("_async")}
        assert sync - public(aio_cls) == set(), aio_cls.__name__
        assert public(aio_cls) - sync == (set() if sync_cls is etcdlock.MultiGuard else {"wait_lost"})
    # The forwarded members carry their blocking twin's docs.
    assert inspect.getdoc(etcdlock.AsyncGuard.fencing_token) == inspect.getdoc(etcdlock.Guard.fencing_token)
    assert inspect.getdoc(etcdlock.AsyncMultiGuard.names) == inspect.getdoc(etcdlock.MultiGuard.names)
    assert list(inspect.signature(etcdlock.AsyncGuard.on_lost).parameters) == ["self", "callback"]


def test_multi_guard_on_lost_fires_once_with_the_lost_name_and_reason(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    names = [f"{name}-a", f"{name}-b", f"{name}-c"]
    m = client.acquire_many(names, timeout=5)
    calls: List[Tuple[str, str]] = []
    fired = threading.Event()

    def on_lost(n: str, reason: str) -> None:
        calls.append((n, reason))
        fired.set()

    m.on_lost(on_lost)
    with pytest.raises(TypeError):
        m.on_lost(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        m.on_renewal(None)  # type: ignore[arg-type]
    assert not m.lost.is_set() and m.lost.reason is None
    assert (m.loss, m.loss_reason, m.renewal_failing) == (None, None, None)
    assert repr(m.lost) == "<etcdlock.LostEvent unset>"
    assert m.lost.wait(0) is False

    etcdctl(endpoints, "del", m.keys[1])
    assert fired.wait(10), "on_lost did not fire after a key of the multi guard was deleted"
    assert calls == [(names[1], "KeyDeleted")]
    assert m.lost.wait(10) is True
    assert m.lost.is_set() and m.lost.reason == "KeyDeleted"
    assert (m.loss, m.loss_reason) == ((names[1], "KeyDeleted"), "KeyDeleted")
    assert m.is_held is False and m.renewal_failing is None
    with pytest.raises(etcdlock.LockLostError):
        m.unlock()
    assert calls == [(names[1], "KeyDeleted")]
    assert etcdctl_keys(endpoints, names[0] + "/") == [] and etcdctl_keys(endpoints, names[2] + "/") == []


def test_multi_guard_released_normally_is_not_lost(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    m = client.acquire_many([f"{name}-a", f"{name}-b"], timeout=5)
    calls: List[Tuple[str, str]] = []
    m.on_lost(lambda n, r: calls.append((n, r)))
    m.unlock()
    assert m.lost.wait(10) is False  # at once: released, not lost
    assert (m.lost.is_set(), m.loss, m.loss_reason, calls) == (False, None, None, [])


def test_multi_guard_renewal_failing_then_recovered_while_etcd_hangs() -> None:
    h = subprocess.Popen([harness_path()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert h.stdin is not None and h.stdout is not None
    try:
        eps = json.loads(h.stdout.readline())["endpoints"]
        c = etcdlock.Client(endpoints=eps, ttl=5)
        m = c.acquire_many(["renewal-a", "renewal-b"])
        assert m.renewal_failing is None
        events: List[Tuple[bool, Optional[float]]] = []
        got = [threading.Event(), threading.Event()]

        def on_renewal(failing: bool, left: Optional[float]) -> None:
            events.append((failing, left))
            got[min(len(events), 2) - 1].set()

        m.on_renewal(on_renewal)
        h.stdin.write("pause 0 2500\n")
        h.stdin.flush()
        assert json.loads(h.stdout.readline())["ok"]
        # At TTL 5 s: keep-alive every 1 s, failing 1.5 s after the last
        # acknowledgement, the hold lasts 4 s after it.
        assert got[0].wait(2.5), "no Failing event while etcd hung"
        assert events[0][0] is True and events[0][1] is not None and events[0][1] > 0, events
        left = m.renewal_failing
        assert left is not None and 0 < left < 4.5 and m.is_held
        assert got[1].wait(3), "no recovery event after etcd resumed"
        assert events[1] == (False, None), events
        assert m.renewal_failing is None and m.is_held and not m.lost.is_set()
        m.unlock()
        assert len(events) == 2, events
        c.close()
    finally:
        h.stdin.close()
        h.wait(30)


def test_async_multi_guard_loss(endpoints: List[str], name: str) -> None:
    names = [f"{name}-x", f"{name}-y"]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Tuple[str, str]] = loop.create_future()
        async with etcdlock.AsyncClient(endpoints) as c:
            m = await c.acquire_many(names, timeout=5)
            m.on_lost(lambda n, r: loop.call_soon_threadsafe(fut.set_result, (n, r)))
            assert m.renewal_failing is None and m.loss_reason is None
            assert await m.lost.wait_async(0) is False
            await asyncio.to_thread(etcdctl, endpoints, "del", m.keys[0])
            assert await asyncio.wait_for(fut, 10) == (names[0], "KeyDeleted")
            assert await m.lost.wait_async(10) is True
            assert await m.wait_lost(0) == (names[0], "KeyDeleted")
            assert (m.lost.reason, m.loss_reason, m.is_held) == ("KeyDeleted", "KeyDeleted", False)
            with pytest.raises(AttributeError):
                m.names = []  # type: ignore
            with pytest.raises(etcdlock.LockLostError):
                await m.unlock()

    asyncio.run(main())


def test_multi_guard_waits_for_a_loss_with_the_gil_released(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    names = [f"{name}-a", f"{name}-b"]
    m = client.acquire_many(names, timeout=5)
    waiting = threading.Event()
    got: List[Optional[Tuple[str, str]]] = []

    def waiter() -> None:
        waiting.set()
        got.append(m.wait_lost(timeout=10))

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    assert waiting.wait(5)
    # The waiter enters wait_lost right after setting the event; a wait that
    # held the GIL would stop this thread until its timeout (None, no loss).
    etcdctl(endpoints, "del", m.keys[1])
    t.join(15)
    assert not t.is_alive() and got == [(names[1], "KeyDeleted")]
