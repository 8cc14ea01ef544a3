"""The leader loop (`Client.lead`, `AsyncClient.lead`) against real etcd:
three candidates at TTL 3 s, the first connected through a harness proxy;
pausing the proxy cancels its task within the TTL and only then does another
candidate's task start; stopping the leader's loop hands over in under 1 s;
never two tasks at once (a counter here, and guarded writes). Plus: a task
that returns resigns and the loop campaigns again with a higher fencing
token; `again=False` runs one term; events arrive in order."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import pytest

import etcdlock
from conftest import Harness

TTL = 3


class Tasks:
    """What the tasks of every candidate saw: how many run now (never above
    1), each start (candidate, fencing token, time) and each cancellation."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running = 0
        self.most = 0
        self.started: List[Tuple[int, int, float]] = []
        self.cancelled: List[Tuple[int, float]] = []
        self.writes = 0
        self.errors: List[str] = []

    def start(self, who: int, token: int) -> None:
        with self.cond:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append((who, token, time.monotonic()))
            self.cond.notify_all()

    def end(self, who: int) -> None:
        with self.cond:
            self.running -= 1
            self.cancelled.append((who, time.monotonic()))
            self.cond.notify_all()

    def wrote(self) -> None:
        with self.cond:
            self.writes += 1
            self.cond.notify_all()

    def await_started(self, n: int, within: float) -> Tuple[int, int, float]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.started) >= n, within), f"term {n} never started within {within} s"
            return self.started[n - 1]


def wait_for(pred: Callable[[], bool], within: float, what: str) -> None:
    """Wait for `pred`, re-checked on every event the loops report."""
    with EVENTS:
        assert EVENTS.wait_for(pred, within), f"timed out after {within} s waiting for {what}"


#: Notified on every event the candidates of a test record (see `recorder`).
EVENTS = threading.Condition()


def recorder(into: List[etcdlock.LeaderEvent]) -> Callable[[etcdlock.LeaderEvent], None]:
    def record(ev: etcdlock.LeaderEvent) -> None:
        with EVENTS:
            into.append(ev)
            EVENTS.notify_all()

    return record


def ns() -> str:
    return f"py-lead-{uuid.uuid4().hex[:8]}/"


def non_leader(kinds: List[str]) -> List[str]:
    """The event kinds of this candidate's own terms (who-leads reports and
    failed campaigns of a partitioned candidate left out)."""
    return [k for k in kinds if k not in ("leader", "campaign_failed", "renewal_failing", "renewal_recovered")]


def test_three_candidates_one_task_at_a_time_across_a_partition_and_a_stop(harness: Harness) -> None:
    proxy, via = harness.proxy()
    space = ns()
    c0 = etcdlock.Client(endpoints=[via], ttl=TTL, namespace=space)
    c1 = etcdlock.Client(endpoints=harness.endpoints, ttl=TTL, namespace=space)
    c2 = etcdlock.Client(endpoints=harness.endpoints, ttl=TTL, namespace=space)
    tasks = Tasks()
    events: Dict[int, List[etcdlock.LeaderEvent]] = {0: [], 1: [], 2: []}

    def task(who: int) -> Callable[[etcdlock.Term], None]:
        def run(term: etcdlock.Term) -> None:
            tasks.start(who, term.fencing_token)
            try:
                term.leadership.put("leader-writes", str(term.fencing_token))
                tasks.wrote()
            except etcdlock.LockError as e:
                tasks.errors.append(f"candidate {who}: {e!r}")
            term.cancelled.wait()
            tasks.end(who)

        return run

    loops = [
        c0.lead("svc", task(0), b"c0", on_event=recorder(events[0])),
    ]
    first = tasks.await_started(1, 10)
    assert first[0] == 0
    loops.append(c1.lead("svc", task(1), b"c1", on_event=recorder(events[1])))
    loops.append(c2.lead("svc", task(2), b"c2", on_event=recorder(events[2])))
    assert loops[0].is_leader and loops[0].term is not None
    assert loops[0].term.fencing_token == first[1]
    wait_for(lambda: loops[0].leader is not None and loops[0].leader.value == b"c0", 5, "candidate 0 seeing itself lead")
    with tasks.cond:
        assert tasks.cond.wait_for(lambda: tasks.writes == 1, 5), tasks.errors

    # Partition candidate 0: its task is cancelled within the TTL, and only
    # then does another candidate's task start.
    cut = time.monotonic()
    harness.proxy_pause(proxy)
    second = tasks.await_started(2, 3 * TTL)
    with tasks.cond:
        who, cancelled_at = tasks.cancelled[0]
    assert who == 0
    assert cancelled_at - cut < TTL, f"the partitioned leader's task ran {cancelled_at - cut:.3f} s after the cut"
    assert second[0] in (1, 2)
    assert second[2] >= cancelled_at, "the next task started before the partitioned one was cancelled"
    print(f"\npy sync partition: task cancelled {1000 * (cancelled_at - cut):.0f} ms after the cut, "
          f"next task started {1000 * (second[2] - cut):.0f} ms after the cut "
          f"({1000 * (second[2] - cancelled_at):.0f} ms after the cancellation)")

    with tasks.cond:
        assert tasks.cond.wait_for(lambda: tasks.writes == 2, 5), tasks.errors
    # Stop the new leader's loop: the last candidate's task starts in < 1 s.
    stop_at = time.monotonic()
    loops[second[0]].stop()
    third = tasks.await_started(3, 5)
    assert third[0] == 3 - second[0]
    handover = third[2] - stop_at
    assert handover < 1.0, f"stop handed over in {handover:.3f} s"
    assert loops[second[0]].join(5)
    print(f"py sync stop: next task started {1000 * handover:.0f} ms after stop()")

    with tasks.cond:
        assert tasks.cond.wait_for(lambda: tasks.writes == 3, 5), (tasks.started, tasks.errors)
    third_loop = loops[third[0]]
    wait_for(lambda: third_loop.leader is not None and third_loop.leader.value == b"c%d" % third[0], 5, "the third candidate seeing itself lead")
    harness.proxy_resume(proxy)
    for lp in loops:
        lp.stop()
    for lp in loops:
        assert lp.join(10), f"{lp!r} did not stop"
    for c in (c0, c1, c2):
        c.close()

    with tasks.cond:
        assert tasks.most == 1 and tasks.running == 0
        tokens = [t for _, t, _ in tasks.started]
        assert tokens == sorted(set(tokens)), f"fencing tokens not strictly increasing: {tokens}"
        assert tasks.writes == len(tasks.started)
    kinds0 = [e.kind for e in events[0]]
    assert non_leader(kinds0)[:2] == ["elected", "lost"]
    assert non_leader(kinds0)[-1] == "stopped" and kinds0[-1] == "stopped"
    lost = next(e for e in events[0] if e.kind == "lost")
    assert lost.reason in etcdlock.LOSS_REASONS
    kinds = [e.kind for e in events[second[0]]]
    assert non_leader(kinds) == ["elected", "resigned", "stopped"]
    # Who leads, as the last candidate saw it: candidate 0 first, itself last.
    values = [e.leader.value if e.leader else None for e in events[third[0]] if e.kind == "leader"]
    assert values[0] == b"c0" and values[-1] == b"c%d" % third[0], values


def test_a_task_that_returns_resigns_and_the_loop_campaigns_again(client: etcdlock.Client, name: str) -> None:
    tokens: List[int] = []

    def task(term: etcdlock.Term) -> None:
        assert term.leadership.is_held
        tokens.append(term.fencing_token)
        if len(tokens) < 3:
            return
        term.cancelled.wait()

    lp = client.lead(name, task, "me")
    got: List[etcdlock.LeaderEvent] = []
    for ev in lp.events():
        got.append(ev)
        seen_me = any(e.kind == "leader" and e.leader is not None and e.leader.value == b"me" for e in got)
        if sum(e.kind == "elected" for e in got) == 3 and seen_me:
            lp.stop()
    assert lp.join(5)
    assert len(tokens) == 3 and tokens[0] < tokens[1] < tokens[2], tokens
    assert non_leader([e.kind for e in got]) == ["elected", "resigned"] * 3 + ["stopped"]
    assert [e.term.fencing_token for e in got if e.kind == "elected" and e.term is not None] == tokens
    assert any(e.kind == "leader" and e.leader is not None and e.leader.value == b"me" for e in got)
    assert client.leader(name) is None


def test_again_false_runs_one_term(client: etcdlock.Client, name: str) -> None:
    ran: List[int] = []
    kinds: List[str] = []
    with client.lead(name, lambda term: ran.append(term.fencing_token), again=False, on_event=lambda e: kinds.append(e.kind)) as lp:
        assert lp.join(10)
    assert len(ran) == 1
    assert non_leader(kinds) == ["elected", "resigned", "stopped"]
    with pytest.raises(RuntimeError):
        next(lp.events())


def test_lead_checks_its_arguments(client: etcdlock.Client) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.lead("", lambda t: None)
    with pytest.raises(TypeError):
        client.lead("x", lambda t: None, retry="1")  # type: ignore[arg-type]
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.lead("x", lambda t: None, retry=-1)


# ----- asyncio -----


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 90))


class AsyncTasks:
    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.running = 0
        self.most = 0
        self.started: List[Tuple[int, int, float]] = []
        self.cancelled: List[Tuple[int, float]] = []
        self.writes = 0

    def note(self) -> None:
        self.changed.set()

    async def until(self, pred: Callable[[], bool], within: float) -> None:
        async def until() -> None:
            while not pred():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), within)

    async def await_started(self, n: int, within: float) -> Tuple[int, int, float]:
        await self.until(lambda: len(self.started) >= n, within)
        return self.started[n - 1]


def test_async_three_candidates_one_task_at_a_time_across_a_partition_and_a_stop(harness: Harness) -> None:
    async def main() -> None:
        proxy, via = harness.proxy()
        space = ns()
        c0 = await etcdlock.AsyncClient(endpoints=[via], ttl=TTL, namespace=space).connect()
        c1 = await etcdlock.AsyncClient(endpoints=harness.endpoints, ttl=TTL, namespace=space).connect()
        c2 = await etcdlock.AsyncClient(endpoints=harness.endpoints, ttl=TTL, namespace=space).connect()
        tasks = AsyncTasks()
        events: Dict[int, List[etcdlock.LeaderEvent]] = {0: [], 1: [], 2: []}

        def task(who: int) -> Callable[[etcdlock.AsyncTerm], Any]:
            async def run(term: etcdlock.AsyncTerm) -> None:
                tasks.running += 1
                tasks.most = max(tasks.most, tasks.running)
                tasks.started.append((who, term.fencing_token, time.monotonic()))
                tasks.note()
                try:
                    await term.leadership.put("leader-writes", str(term.fencing_token))
                    tasks.writes += 1
                    tasks.note()
                    await asyncio.Event().wait()  # until cancelled
                finally:
                    tasks.running -= 1
                    tasks.cancelled.append((who, time.monotonic()))
                    tasks.note()

            return run

        loops = [c0.lead("svc", task(0), b"c0", on_event=recorder(events[0]))]
        await loops[0].start()
        first = await tasks.await_started(1, 10)
        assert first[0] == 0
        loops.append(await c1.lead("svc", task(1), b"c1", on_event=recorder(events[1])).start())
        loops.append(await c2.lead("svc", task(2), b"c2", on_event=recorder(events[2])).start())
        assert loops[0].is_leader
        await tasks.until(lambda: tasks.writes == 1, 5)

        cut = time.monotonic()
        harness.proxy_pause(proxy)
        second = await tasks.await_started(2, 3 * TTL)
        who, cancelled_at = tasks.cancelled[0]
        assert who == 0
        assert cancelled_at - cut < TTL, f"the partitioned leader's task ran {cancelled_at - cut:.3f} s after the cut"
        assert second[0] in (1, 2)
        assert second[2] >= cancelled_at
        print(f"\npy asyncio partition: task cancelled {1000 * (cancelled_at - cut):.0f} ms after the cut, "
              f"next task started {1000 * (second[2] - cut):.0f} ms after the cut "
              f"({1000 * (second[2] - cancelled_at):.0f} ms after the cancellation)")
        await tasks.until(lambda: tasks.writes == 2, 5)

        stop_at = time.monotonic()
        async with loops[second[0]]:  # exit: stop and wait
            pass
        third = await tasks.await_started(3, 5)
        assert third[0] == 3 - second[0]
        handover = third[2] - stop_at
        assert handover < 1.0, f"stop handed over in {handover:.3f} s"
        assert loops[second[0]].stopped
        print(f"py asyncio stop: next task started {1000 * handover:.0f} ms after stop")
        await tasks.until(lambda: tasks.writes == 3, 5)

        harness.proxy_resume(proxy)
        for lp in loops:
            lp.stop()
        for lp in loops:
            await asyncio.wait_for(lp.wait(), 10)
        for c in (c0, c1, c2):
            await c.close()

        assert tasks.most == 1 and tasks.running == 0
        tokens = [t for _, t, _ in tasks.started]
        assert tokens == sorted(set(tokens)), f"fencing tokens not strictly increasing: {tokens}"
        assert tasks.writes == len(tasks.started)
        kinds0 = [e.kind for e in events[0]]
        assert non_leader(kinds0)[:2] == ["elected", "lost"] and kinds0[-1] == "stopped"
        lost = next(e for e in events[0] if e.kind == "lost")
        assert lost.reason in etcdlock.LOSS_REASONS
        assert non_leader([e.kind for e in events[second[0]]]) == ["elected", "resigned", "stopped"]

    run(main())


def test_async_a_task_that_returns_resigns_and_the_loop_campaigns_again(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        tokens: List[int] = []
        cancelled: List[bool] = []

        async def task(term: etcdlock.AsyncTerm) -> None:
            tokens.append(term.fencing_token)
            if len(tokens) < 3:
                return
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(term.cancelled.is_set())
                raise

        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            lp = c.lead(name, task, "me")
            got: List[etcdlock.LeaderEvent] = []
            async for ev in lp.events():
                got.append(ev)
                seen_me = any(e.kind == "leader" and e.leader is not None and e.leader.value == b"me" for e in got)
                if sum(e.kind == "elected" for e in got) == 3 and seen_me:
                    lp.stop()
            await asyncio.wait_for(lp.wait(), 5)
            assert len(tokens) == 3 and tokens[0] < tokens[1] < tokens[2], tokens
            assert cancelled == [True]
            assert non_leader([e.kind for e in got]) == ["elected", "resigned"] * 3 + ["stopped"]
            assert any(e.kind == "leader" and e.leader is not None and e.leader.value == b"me" for e in got)
            assert await c.leader(name) is None

    run(main())


def test_async_again_false_runs_one_term(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        ran: List[int] = []

        async def task(term: etcdlock.AsyncTerm) -> None:
            ran.append(term.fencing_token)

        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            lp = c.lead(name, task, again=False)
            kinds = [e.kind async for e in lp.events()]
            await asyncio.wait_for(lp.wait(), 5)
            assert lp.stopped
        assert len(ran) == 1
        assert non_leader(kinds) == ["elected", "resigned", "stopped"]

    run(main())
