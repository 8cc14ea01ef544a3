"""OpenTelemetry spans (``etcdlock.acquire``, ``etcdlock.hold``) captured by
the SDK's in-memory exporter, against real etcd, sync and asyncio."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from typing import Any, Callable, Iterator, List, Optional

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys, wait_until

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode


class Ended(SpanProcessor):
    """Wakes the test when a span ends (the hold span ends on core's
    end-of-hold signal, on another thread): an event to await, no sleep."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter
        self.cond = threading.Condition()

    def on_end(self, span: ReadableSpan) -> None:
        with self.cond:
            self.cond.notify_all()

    def wait(self, name: str, n: int = 1, timeout: float = 30) -> List[ReadableSpan]:
        """The first ``n`` finished spans named ``name``, once there are ``n``."""
        def found() -> List[ReadableSpan]:
            return [s for s in self.exporter.get_finished_spans() if s.name == name]

        with self.cond:
            assert self.cond.wait_for(lambda: len(found()) >= n, timeout), f"{n} {name} span(s) not ended: {found()}"
        return found()[:n]


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.ended = Ended(self.exporter)
        self.provider.add_span_processor(self.ended)

    def spans(self, name: str) -> List[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]


@pytest.fixture
def otel() -> Iterator[Traced]:
    t = Traced()
    yield t
    t.provider.shutdown()


@pytest.fixture
def traced(endpoints: List[str], otel: Traced) -> Iterator[etcdlock.Client]:
    c = etcdlock.Client(endpoints=endpoints, tracer_provider=otel.provider)
    yield c
    c.close()


def check_acquired(span: ReadableSpan, name: str, op: str, token: int) -> None:
    assert span.kind == SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "etcdlock.lock.name": name,
        "etcdlock.operation": op,
        "etcdlock.outcome": "acquired",
        "etcdlock.fencing_token": token,
    }
    assert span.status.status_code == StatusCode.UNSET
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "etcdlock"
    assert span.instrumentation_scope.version == version("etcdlock")


def check_released(span: ReadableSpan, name: str, token: int) -> None:
    assert span.kind == SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {"etcdlock.lock.name": name, "etcdlock.fencing_token": token, "etcdlock.end": "released"}
    assert span.status.status_code == StatusCode.UNSET
    assert list(span.events) == []


def check_lost(span: ReadableSpan, name: str, token: int) -> None:
    assert dict(span.attributes or {}) == {"etcdlock.lock.name": name, "etcdlock.fencing_token": token, "etcdlock.end": "lost"}
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [("etcdlock.lost", {"etcdlock.loss.reason": "KeyDeleted"})]
    assert span.status.status_code == StatusCode.ERROR


def test_a_wait_for_another_clients_release(traced: etcdlock.Client, otel: Traced, client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    held = client.acquire(name)  # another client, no tracer
    got: List[etcdlock.Guard] = []
    called = time.time_ns()
    t = threading.Thread(target=lambda: got.append(traced.acquire(name, timeout=60)))
    t.start()
    wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 2, what="the traced client's waiter key")
    released = time.time_ns()
    held.unlock()
    t.join(60)
    (span,) = otel.ended.wait("etcdlock.acquire")
    check_acquired(span, name, "lock", got[0].fencing_token)
    assert span.start_time is not None and span.end_time is not None
    # The span covers the whole wait: it began before the holder released, ended after.
    assert called <= span.start_time <= released <= span.end_time
    got[0].unlock()
    (hold,) = otel.ended.wait("etcdlock.hold")
    check_released(hold, name, got[0].fencing_token)
    assert hold.start_time is not None and hold.start_time >= span.end_time


def test_a_timeout_is_not_an_error(traced: etcdlock.Client, otel: Traced, client: etcdlock.Client, name: str) -> None:
    held = client.acquire(name)
    with pytest.raises(etcdlock.TimeoutError):
        traced.acquire(name, timeout=0.2)
    assert traced.try_lock(name) is None
    held.unlock()
    timeout, would_block = otel.ended.wait("etcdlock.acquire", 2)
    assert dict(timeout.attributes or {}) == {"etcdlock.lock.name": name, "etcdlock.operation": "lock", "etcdlock.outcome": "timeout"}
    assert timeout.status.status_code == StatusCode.UNSET
    assert dict(would_block.attributes or {}) == {"etcdlock.lock.name": name, "etcdlock.operation": "try_lock", "etcdlock.outcome": "would_block"}
    assert would_block.status.status_code == StatusCode.UNSET
    assert otel.spans("etcdlock.hold") == []


def test_bad_input_is_an_error(traced: etcdlock.Client, otel: Traced) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError):
        traced.acquire("")
    with pytest.raises(etcdlock.InvalidArgumentError):
        traced.campaign("", "v", timeout=1)
    lock, campaign = otel.ended.wait("etcdlock.acquire", 2)
    for span, op in ((lock, "lock"), (campaign, "campaign")):
        assert dict(span.attributes or {}) == {
            "etcdlock.lock.name": "",
            "etcdlock.operation": op,
            "etcdlock.outcome": "error",
            "error.type": "InvalidArgument",
        }
        assert span.status.status_code == StatusCode.ERROR


def test_a_hold_lost_to_an_outside_delete(traced: etcdlock.Client, otel: Traced, endpoints: List[str], name: str) -> None:
    g = traced.acquire(name)
    etcdctl(endpoints, "del", g.key)  # nobody calls anything on the guard: core reports the loss
    (hold,) = otel.ended.wait("etcdlock.hold")
    check_lost(hold, name, g.fencing_token)
    assert g.loss_reason == "KeyDeleted"


def test_with_forms_campaign_and_reentry(traced: etcdlock.Client, otel: Traced, name: str) -> None:
    with traced.lock(name, timeout=10) as g:
        token = g.fencing_token
    (hold,) = otel.ended.wait("etcdlock.hold")
    check_released(hold, name, token)
    check_acquired(otel.spans("etcdlock.acquire")[0], name, "lock", token)
    otel.exporter.clear()

    # A re-entry: an acquire span each, one hold span for the one hold.
    with traced.lock(name, reentrant=True) as g1:
        with traced.lock(name, reentrant=True) as g2:
            assert g1.fencing_token == g2.fencing_token
    (hold,) = otel.ended.wait("etcdlock.hold")
    check_released(hold, name, g1.fencing_token)
    a1, a2 = otel.spans("etcdlock.acquire")
    check_acquired(a1, name, "lock", g1.fencing_token)
    check_acquired(a2, name, "lock", g1.fencing_token)
    otel.exporter.clear()

    lock = traced.lock(name)
    assert lock.acquire(blocking=False)
    lock.release()
    (a,) = otel.ended.wait("etcdlock.acquire")
    assert dict(a.attributes or {})["etcdlock.operation"] == "try_lock"
    otel.ended.wait("etcdlock.hold")
    otel.exporter.clear()

    with traced.campaign(name + "-e", "v", timeout=10) as ld:
        pass
    (c,) = otel.ended.wait("etcdlock.acquire")
    check_acquired(c, name + "-e", "campaign", ld.fencing_token)
    (hold,) = otel.ended.wait("etcdlock.hold")
    check_released(hold, name + "-e", ld.fencing_token)


def test_asyncio_spans(endpoints: List[str], otel: Traced, client: etcdlock.Client, name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints, tracer_provider=otel.provider) as c:
            # A wait for another client's release.
            held = client.acquire(name)
            called = time.time_ns()
            waiter = asyncio.create_task(c.acquire(name, timeout=60))
            await asyncio.to_thread(wait_until, lambda: len(etcdctl_keys(endpoints, name + "/")) == 2)
            released = time.time_ns()
            await asyncio.to_thread(held.unlock)
            g = await waiter
            (span,) = await asyncio.to_thread(otel.ended.wait, "etcdlock.acquire")
            check_acquired(span, name, "lock", g.fencing_token)
            assert span.start_time is not None and span.end_time is not None
            assert called <= span.start_time <= released <= span.end_time
            # Ended by unlock.
            await g.unlock()
            (hold,) = await asyncio.to_thread(otel.ended.wait, "etcdlock.hold")
            check_released(hold, name, g.fencing_token)
            otel.exporter.clear()

            # A timeout, and bad input.
            held = client.acquire(name)
            with pytest.raises(etcdlock.TimeoutError):
                await c.acquire(name, timeout=0.2)
            held.unlock()
            with pytest.raises(etcdlock.InvalidArgumentError):
                await c.try_lock("")
            timeout, bad = await asyncio.to_thread(otel.ended.wait, "etcdlock.acquire", 2)
            assert dict(timeout.attributes or {})["etcdlock.outcome"] == "timeout"
            assert timeout.status.status_code == StatusCode.UNSET
            assert dict(bad.attributes or {}) == {
                "etcdlock.lock.name": "",
                "etcdlock.operation": "try_lock",
                "etcdlock.outcome": "error",
                "error.type": "InvalidArgument",
            }
            assert bad.status.status_code == StatusCode.ERROR
            otel.exporter.clear()

            # `async with`, then a loss by an outside delete.
            async with c.lock(name, timeout=10) as g2:
                token = g2.fencing_token
            (hold,) = await asyncio.to_thread(otel.ended.wait, "etcdlock.hold")
            check_released(hold, name, token)
            otel.exporter.clear()
            g3 = await c.acquire(name, timeout=10)
            await asyncio.to_thread(etcdctl, endpoints, "del", g3.key)
            (hold,) = await asyncio.to_thread(otel.ended.wait, "etcdlock.hold")
            check_lost(hold, name, g3.fencing_token)

            # A task cancelled while it waits: outcome cancelled, not an error.
            otel.exporter.clear()
            held = client.acquire(name)
            waiter = asyncio.create_task(c.acquire(name))
            await asyncio.to_thread(wait_until, lambda: len(etcdctl_keys(endpoints, name + "/")) == 2)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            held.unlock()
            (cancelled,) = await asyncio.to_thread(otel.ended.wait, "etcdlock.acquire")
            assert dict(cancelled.attributes or {})["etcdlock.outcome"] == "cancelled"
            assert cancelled.status.status_code == StatusCode.UNSET

    asyncio.run(main())


SCRIPT_GLOBAL = """
import sys, etcdlock
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
c = etcdlock.Client(endpoints=sys.argv[1].split(","))
# No SDK configured yet: nothing is made.
assert c._tracing.tracer() is None
c.acquire(sys.argv[2]).unlock()
# The global provider, set after the client was made, is used.
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
c.acquire(sys.argv[2]).unlock()
c.close()
print(sorted(s.attributes["etcdlock.outcome"] for s in exporter.get_finished_spans() if s.name == "etcdlock.acquire"))
"""

SCRIPT_NO_OTEL = """
import sys
import etcdlock
with etcdlock.Client(endpoints=sys.argv[1].split(",")) as c:
    with c.lock(sys.argv[2], timeout=10) as g:
        held = g.fencing_token > 0
# A program that does not use OpenTelemetry does not load it.
assert not [m for m in sys.modules if m.startswith("opentelemetry")], sorted(sys.modules)
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
sys.modules["opentelemetry.trace"] = None
from etcdlock import _otel
with etcdlock.Client(endpoints=sys.argv[1].split(","), tracer_provider=object()) as c:
    with c.lock(sys.argv[2], timeout=10) as g:
        print("held", held and g.fencing_token > 0, _otel._trace)
"""


def test_global_provider_and_no_sdk(endpoints: List[str], name: str) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT_GLOBAL, ",".join(endpoints), name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['acquired']"


def test_without_opentelemetry_installed(endpoints: List[str], name: str) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT_NO_OTEL, ",".join(endpoints), name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "held True None"
