"""Core's records (status, metrics) as Python decodes them from their one
JSON encoding: exact ids, bytes, seconds, and ``member_failures``."""

from __future__ import annotations

import asyncio
import json
from typing import List

import etcdlock
from etcdlock._common import _metrics, _status

METRIC_KEYS = {
    "acquisitions",
    "waiting",
    "held",
    "held_seconds",
    "holds_ended",
    "hold_seconds",
    "lost",
    "keepalives",
    "keepalive_rtt",
    "wait_histogram",
    "member_failures",
}


def dead_endpoint() -> str:
    """A loopback address nobody listens on: port 1 (no free-port pick hands
    it to another process while the test runs)."""
    return "127.0.0.1:1"


def test_a_dead_member_counts_one_member_failure(endpoints: List[str], name: str) -> None:
    """A dead endpoint listed before the live ones, with a lazy connect (an
    eager one probes every member at once and keeps the first to answer, so
    whether the dead one's refusal counts first is a race): the session's
    first request fails on it once and moves to a live member, which every
    later request uses."""
    with etcdlock.Client(endpoints=[dead_endpoint()] + endpoints, lazy_connect=True) as c:
        after_connect = c.metrics()["member_failures"]
        with c.lock(name, timeout=10):
            pass
        assert (after_connect, c.metrics()["member_failures"]) == (0, 1)
    with etcdlock.Client(endpoints=endpoints) as healthy:
        with healthy.lock(name, timeout=10):
            pass
        assert healthy.metrics()["member_failures"] == 0


def test_async_client_metrics_count_member_failures(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=[dead_endpoint()] + endpoints, lazy_connect=True) as c:
            m = c.metrics()
            assert m is not None
            after_connect = m["member_failures"]
            async with c.lock(name, timeout=10):
                pass
            m = c.metrics()
            assert m is not None and set(m) == METRIC_KEYS
            assert (after_connect, m["member_failures"]) == (0, 1)
        async with etcdlock.AsyncClient(endpoints=endpoints) as healthy:
            m = healthy.metrics()
            assert m is not None and m["member_failures"] == 0

    asyncio.run(asyncio.wait_for(main(), 60))


def test_metrics_keys_and_units(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as c:
        m = c.metrics()
        assert set(m) == METRIC_KEYS
        assert m["keepalive_rtt"] is None or isinstance(m["keepalive_rtt"], float)
        assert set(m["wait_histogram"]) == set(m["acquisitions"])
        with c.lock(name, timeout=10):
            pass
        m = c.metrics()
        assert sum(m["wait_histogram"]["acquired"]) == m["acquisitions"]["acquired"]["count"] == 1


def test_status_decodes_exact_ids_bytes_and_seconds() -> None:
    """The decode by field name: decimal strings beyond 2**53 to exact ints,
    byte arrays to bytes, ``age_ms`` to ``age`` in seconds; keys a dataclass
    does not declare are ignored."""
    contender = {
        "key": "locks/a/694d9a0b1c2d3e4f",
        "kind": "permit",
        "permits": 3,
        "holds": True,
        "lease_id": "7587862106543470159",
        "ttl_remaining": 9,
        "fencing_token": "9007199254740993",
        "owner": "h:7",
        "age_ms": 1500,
        "value": [0, 255],
        "host": "h",
        "pid": 7,
        "language": "rust",
        "local_waiters": None,
        "metadata": {"app": "billing"},
        "foreign": False,
        "a_field_not_declared_yet": 1,
    }
    st = _status(json.dumps({"name": "a", "revision": "43", "holders": [contender], "waiters": [], "kind": "semaphore"}))
    assert st == etcdlock.Status(
        name="a",
        revision=43,
        holders=[
            etcdlock.Contender(
                key="locks/a/694d9a0b1c2d3e4f",
                kind="permit",
                permits=3,
                holds=True,
                lease_id=7587862106543470159,
                ttl_remaining=9,
                fencing_token=9007199254740993,
                owner="h:7",
                age=1.5,
                value=b"\x00\xff",
                host="h",
                pid=7,
                language="rust",
                local_waiters=None,
                foreign=False,
                metadata={"app": "billing"},
            )
        ],
        waiters=[],
        kind="semaphore",
    )
    assert st.holder is not None and type(st.holder.value) is bytes and type(st.revision) is int
    foreign = dict(contender, age_ms=None, owner=None, value=[])
    c = _status(json.dumps({"name": "a", "revision": "1", "holders": [], "waiters": [foreign], "kind": None})).waiters[0]
    assert (c.age, c.owner, c.value) == (None, None, b"")


def test_status_with_unknown_fields_decodes() -> None:
    """A field core adds to the Status record (top level or a contender's)
    is accepted by the one decoder with no edit; the known fields still
    decode exactly."""
    contender = {
        "key": "locks/a/1",
        "kind": "exclusive",
        "permits": None,
        "holds": True,
        "lease_id": "7587862106543470159",
        "ttl_remaining": 9,
        "fencing_token": "42",
        "owner": "h:7",
        "age_ms": 1500,
        "value": [104, 105],
        "host": "h",
        "pid": 7,
        "language": "rust",
        "local_waiters": None,
        "metadata": {},
        "foreign": False,
        "a_field_not_declared_yet": [1, 2],
    }
    record = {"name": "a", "revision": "43", "holders": [contender], "waiters": [], "kind": "mutex", "new_field": {"x": 1}}
    st = _status(json.dumps(record))
    assert (st.name, st.revision, st.kind) == ("a", 43, "mutex")
    assert st.holder is not None
    assert (st.holder.lease_id, st.holder.fencing_token, st.holder.value) == (7587862106543470159, 42, b"hi")
    assert not hasattr(st, "new_field") and not hasattr(st.holder, "a_field_not_declared_yet")


def test_metrics_decode_renames_seconds() -> None:
    m = _metrics(json.dumps({"keepalive_rtt_seconds": 0.002, "member_failures": 3}))
    assert m == {"keepalive_rtt": 0.002, "member_failures": 3}
    assert _metrics(json.dumps({"keepalive_rtt_seconds": None})) == {"keepalive_rtt": None}


def test_live_status_matches_the_guard(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as c, c.lock(name, timeout=10) as g:
        st = c.status(name)
        assert (st.name, len(st.holders), st.waiters) == (name, 1, [])
        h = st.holders[0]
        assert (h.key, h.lease_id, h.fencing_token, h.holds, h.kind, h.permits) == (
            g.key,
            g.lease_id,
            g.fencing_token,
            True,
            "exclusive",
            None,
        )
        assert st.revision >= g.fencing_token
        assert [s.name for s in c.list(name)] == [name]
