"""The fault controls of an in-process store (``etcdlock.MemStore``), from
Python: what a holder sees for each one (the signal and the reason), waiters
granted in order, calls ending at their bounds, and bad arguments refused
with typed errors. The stores and clients come from the package's pytest
plugin (``etcdlock_store``, ``etcdlock_make_client``); the loss tests that
wait for a lease to run out use TTL 3 s."""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

import pytest

import etcdlock

# A client whose holds are lost within ~3 s of the store going quiet, and
# whose calls other than lock waits end within 1 s.
FAST = {"ttl": 3, "request_timeout": 1.0}


def waiters_queued(store: etcdlock.MemStore, prefix: str, n: int, within: float = 5.0) -> None:
    """Until the store holds `n` keys under `prefix` (an observation of the
    store, read every 10 ms)."""
    until = time.monotonic() + within
    while len(store.keys(prefix)) < n:
        assert time.monotonic() < until, f"{n} keys under {prefix!r}: {store.keys(prefix)}"
        time.sleep(0.01)


def in_thread(fn: Callable[[], Any]) -> "queue.Queue[Tuple[str, Any]]":
    """Run `fn` on a thread; its outcome ("ok", value) or ("raised", exc) arrives on the queue."""
    out: "queue.Queue[Tuple[str, Any]]" = queue.Queue()

    def run() -> None:
        try:
            out.put(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.put(("raised", e))

    threading.Thread(target=run, daemon=True).start()
    return out


def test_expire_lease_loses_the_hold_with_lease_expired_and_grants_the_waiter(
    etcdlock_store: etcdlock.MemStore, etcdlock_make_client: Callable[..., etcdlock.Client]
) -> None:
    a, b = etcdlock_make_client(), etcdlock_make_client()
    g = a.acquire("job", timeout=5)
    waiter = in_thread(lambda: b.acquire("job", timeout=5))
    waiters_queued(etcdlock_store, "job/", 2)
    assert not g.lost.is_set()
    assert etcdlock_store.expire_lease(g.lease_id) is True
    assert etcdlock_store.expire_lease(g.lease_id) is False, "gone already"
    assert g.lost.wait(5)
    assert (g.state, g.loss_reason, g.is_held) == ("lost", "LeaseExpired", False)
    kind, h = waiter.get(timeout=5)
    assert kind == "ok", h
    assert h.fencing_token > g.fencing_token
    # The lease's keys went with it: only the new holder's key is left.
    assert [(k.key, k.lease_id) for k in etcdlock_store.keys("job/")] == [(h.key.encode(), h.lease_id)]
    with pytest.raises(etcdlock.LockLostError) as e:
        g.unlock()
    assert e.value.reason == "LeaseExpired"
    h.unlock()


def test_delete_key_loses_the_hold_with_key_deleted(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    g = etcdlock_client.acquire("job", timeout=5)
    (k,) = etcdlock_store.keys(g.key)
    assert k == etcdlock.MemKey(g.key.encode(), k.value, g.lease_id, g.fencing_token, k.mod_revision)
    assert k.mod_revision >= k.create_revision
    reasons: "queue.Queue[str]" = queue.Queue()
    g.on_lost(reasons.put)
    assert etcdlock_store.delete_key(g.key) is True
    assert etcdlock_store.delete_key(g.key.encode()) is False, "deleted already (bytes name the same key)"
    assert reasons.get(timeout=5) == "KeyDeleted"
    assert (g.state, g.loss_reason) == ("lost", "KeyDeleted")
    with pytest.raises(etcdlock.LockLostError) as e:
        g.put("out", "1")
    assert e.value.reason == "KeyDeleted"
    with pytest.raises(etcdlock.LockLostError):
        g.unlock()
    assert etcdlock_store.keys("job/") == []


@pytest.mark.parametrize("etcdlock_client_options", [FAST])
def test_silence_turns_a_hold_at_risk_then_lost_with_connection_lost(
    etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client
) -> None:
    client = etcdlock_client
    g = client.acquire("job", timeout=5)
    renewals: "queue.Queue[Tuple[bool, Optional[float]]]" = queue.Queue()
    g.on_renewal(lambda failing, left: renewals.put((failing, left)))
    t0 = time.monotonic()
    etcdlock_store.silence(60)
    # A lock call ends at its own timeout, not later.
    with pytest.raises(etcdlock.TimeoutError):
        client.acquire("other", timeout=0.5)
    assert 0.4 <= time.monotonic() - t0 < 1.5
    # At risk first (the renewal fails, the hold lives), then lost.
    failing, left = renewals.get(timeout=5)
    assert failing is True and left is not None and 0 < left < 3
    assert g.is_held and g.loss_reason is None, "at risk is not lost"
    assert g.lost.wait(5)
    assert g.loss_reason == "ConnectionLost"
    assert time.monotonic() - t0 < 4, "lost within the TTL"
    with pytest.raises(etcdlock.LockLostError):
        g.unlock()
    etcdlock_store.resume()
    # The store answers again: a new hold is granted.
    client.acquire("job", timeout=10).unlock()


@pytest.mark.parametrize("etcdlock_client_options", [FAST])
def test_stall_cuts_off_one_client_while_the_others_go_on(
    etcdlock_store: etcdlock.MemStore, etcdlock_make_client: Callable[..., etcdlock.Client]
) -> None:
    a, b = etcdlock_make_client(), etcdlock_make_client()
    g = a.acquire("job", timeout=5)
    reasons: "queue.Queue[str]" = queue.Queue()
    g.on_lost(reasons.put)
    t0 = time.monotonic()
    etcdlock_store.stall(g.lease_id, 60)
    # b goes on while a is cut off.
    other = b.acquire("other", timeout=1)
    assert time.monotonic() - t0 < 1
    assert reasons.get(timeout=6) == "ConnectionLost"
    # Once a's lease expires in the store, b is granted a's lock.
    h = b.acquire("job", timeout=6)
    assert h.fencing_token > g.fencing_token
    etcdlock_store.stall(g.lease_id, 0)
    h.unlock()
    other.unlock()


def test_stores_are_shared_by_name_and_say_where_they_are(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    same = etcdlock.MemStore(etcdlock_store.name)
    assert same.endpoint == etcdlock_store.endpoint == f"mem://{etcdlock_store.name}"
    assert repr(same) == f"<etcdlock.MemStore endpoint={same.endpoint!r}>"
    g = etcdlock_client.acquire("shared", timeout=5)
    assert [k.lease_id for k in same.keys("shared/")] == [g.lease_id]
    assert same.keys(b"shared/") == etcdlock_store.keys("shared/")
    assert all(k.key.startswith(b"shared/") for k in same.keys("shared/"))
    assert etcdlock.MemStore("").endpoint == "mem://" and etcdlock.MemStore().name == ""
    # Nothing left but what the test holds; a released hold leaves no key.
    g.unlock()
    assert same.keys("shared/") == []
    h = etcdlock_client.try_lock("shared")
    assert h is not None
    (k,) = same.keys("shared/")
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.key = b"x"  # type: ignore[misc]
    h.unlock()


def test_a_multi_guard_shows_the_lease_its_locks_are_held_on(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    m = etcdlock_client.acquire_many(["x", "y"], timeout=5)
    assert [k.lease_id for k in etcdlock_store.keys("x/") + etcdlock_store.keys("y/")] == [m.lease_id] * 2
    assert etcdlock_store.expire_lease(m.lease_id)
    lost = m.wait_lost(5)
    assert lost is not None and lost[1] == "LeaseExpired"


@pytest.mark.parametrize("bad", ["a/b", "x" * 65, "sp ace", "caf\u00e9", "\ud800"])
def test_a_bad_store_name_is_invalid_argument(bad: str) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError):
        etcdlock.MemStore(bad)


@pytest.mark.parametrize("bad", [3, b"x", None])
def test_a_store_name_that_is_not_a_str_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError):
        etcdlock.MemStore(bad)


@pytest.mark.parametrize("seconds", [-1, -0.001, math.nan, math.inf, -math.inf, 1e300])
def test_a_bad_span_is_invalid_argument_and_changes_nothing(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client, seconds: float) -> None:
    g = etcdlock_client.acquire("job", timeout=5)
    with pytest.raises(etcdlock.InvalidArgumentError) as e:
        etcdlock_store.silence(seconds)
    assert e.value.code == "InvalidArgument" and "seconds" in e.value.message
    with pytest.raises(etcdlock.InvalidArgumentError):
        etcdlock_store.stall(g.lease_id, seconds)
    # The store still answers at once.
    assert etcdlock_client.try_lock("other") is not None


@pytest.mark.parametrize("seconds", ["1", True, None, [1]])
def test_a_span_that_is_not_a_number_is_a_type_error(etcdlock_store: etcdlock.MemStore, seconds: Any) -> None:
    with pytest.raises(TypeError):
        etcdlock_store.silence(seconds)
    with pytest.raises(TypeError):
        etcdlock_store.stall(1, seconds)


def test_other_bad_arguments_are_type_errors(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    g = etcdlock_client.acquire("job", timeout=5)
    for bad in (g, "1", True, 1.0, None):
        with pytest.raises(TypeError):
            etcdlock_store.expire_lease(bad)
        with pytest.raises(TypeError):
            etcdlock_store.stall(bad, 1)
    for bad_key in (3, None, ["job"]):
        with pytest.raises(TypeError):
            etcdlock_store.delete_key(bad_key)
        with pytest.raises(TypeError):
            etcdlock_store.keys(bad_key)
    with pytest.raises(OverflowError):
        etcdlock_store.expire_lease(2**64)
    with pytest.raises(etcdlock.InvalidArgumentError):
        etcdlock_store.delete_key("\ud800")
    # A lease or key the store does not have: False, nothing else.
    assert etcdlock_store.expire_lease(-1) is False
    assert etcdlock_store.delete_key("no/such/key") is False
    etcdlock_store.stall(12345, 0)
    assert g.is_held


def test_the_controls_end_by_zero_and_by_resume(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    etcdlock_client.acquire("warm", timeout=5).unlock()
    for start, end in (
        (lambda: etcdlock_store.silence(60), lambda: etcdlock_store.silence(0)),
        (lambda: etcdlock_store.silence(60), etcdlock_store.resume),
    ):
        start()
        pending = in_thread(lambda: etcdlock_client.acquire("job", timeout=10))
        with pytest.raises(queue.Empty):
            pending.get(timeout=0.3)  # the store answers nothing meanwhile
        end()
        kind, g = pending.get(timeout=5)
        assert kind == "ok", g
        g.unlock()
