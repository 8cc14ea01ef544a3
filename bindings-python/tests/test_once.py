"""Run-once jobs (core's record, ShedLock's semantics): the decorator, the
steps apart, asyncio, bad input, and the APScheduler example across 3
processes."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

import etcdlock

from conftest import etcdctl_keys

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_one_run_per_tick_across_clients_and_at_least_holds(endpoints: List[str], name: str) -> None:
    runs: List[str] = []
    with etcdlock.Client(endpoints=endpoints) as a, etcdlock.Client(endpoints=endpoints) as b:

        def make(client: etcdlock.Client, who: str) -> "object":
            @client.once(name, at_most=30, at_least=1.0)
            def job(x: int) -> int:
                runs.append(who)
                return x * 2

            return job

        ja, jb = make(a, "a"), make(b, "b")
        assert ja.__name__ == "job"  # functools.wraps
        t0 = time.monotonic()
        assert ja(21) == 42
        assert jb(21) is None, "the tick is taken until at_least after the start"
        assert ja(21) is None, "the same node does not run it twice either"
        assert runs == ["a"]
        # After at_least the record is free again.
        while time.monotonic() - t0 < 1.0:
            time.sleep(0.05)
        deadline = time.monotonic() + 5
        while jb(1) is None:
            assert time.monotonic() < deadline, "free after at_least"
            time.sleep(0.05)
        assert runs == ["a", "b"]
        # The record is one key, outside every lock prefix.
        assert etcdctl_keys(endpoints, "__etcdlock/once/") == [f"__etcdlock/once/{name}"]


def test_a_job_that_raises_finishes_its_record_and_the_exception_propagates(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as c:

        @c.once(name, at_most=30)  # at_least 0: freed at once
        def job() -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            job()
        assert etcdctl_keys(endpoints, f"__etcdlock/once/{name}") == []
        with pytest.raises(ValueError):
            job()  # free again: it runs (and raises) again


def test_steps_apart_extend_and_a_late_finish_touches_nothing(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as a, etcdlock.Client(endpoints=endpoints) as b:
        h = a.take_once(name, at_most=0.5)
        assert isinstance(h, etcdlock.OnceHold) and h.name == name
        assert abs(h.lock_until - h.locked_at - 0.5) < 0.01
        assert b.take_once(name, at_most=10) is None
        rev = h.revision
        assert h.extend(at_most=0.5) and h.revision > rev
        time.sleep(0.6)  # the record's wall-clock expiry is what this test is about
        hb = b.take_once(name, at_most=10)
        assert hb is not None and hb.revision > h.revision
        assert not h.finish(), "expired: b's record is left alone"
        assert not h.extend(at_most=10)
        assert a.take_once(name, at_most=10) is None
        assert hb.finish()
        assert a.take_once(name, at_most=10) is not None


def test_bad_input_is_typed(client: etcdlock.Client, name: str) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError, match="at_most"):
        client.take_once(name, at_most=0)
    with pytest.raises(etcdlock.InvalidArgumentError, match="at_most"):
        client.once(name, at_most=-1)(lambda: None)()
    with pytest.raises(etcdlock.InvalidArgumentError, match="at_most"):
        client.take_once(name, at_most=float("nan"))
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.take_once("", at_most=1)
    with pytest.raises(etcdlock.InvalidArgumentError, match="reserved"):
        client.take_once("__etcdlock/meta/x", at_most=1)
    ran: List[int] = []
    with pytest.raises(etcdlock.InvalidArgumentError, match="must not exceed"):
        client.once(name, at_most=1, at_least=2)(lambda: ran.append(1))()
    with pytest.raises(etcdlock.InvalidArgumentError, match="at_least"):
        client.once(name, at_most=1, at_least=-1)(lambda: ran.append(1))()
    assert ran == [], "a bad at_least is refused before the job runs"
    with pytest.raises(TypeError):
        client.once(name, at_most="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.take_once(3, at_most=1)  # type: ignore[arg-type]

    async def coro() -> None:
        pass

    with pytest.raises(TypeError, match="AsyncClient.once"):
        client.once(name, at_most=1)(coro)  # type: ignore[arg-type]


def test_asyncio_once(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as a, etcdlock.AsyncClient(endpoints=endpoints) as b:
            ran: List[str] = []

            def make(client: etcdlock.AsyncClient, who: str) -> "object":
                @client.once(name, at_most=30, at_least=30)
                async def job() -> str:
                    ran.append(who)
                    await asyncio.sleep(0.05)
                    return who

                return job

            ja, jb = make(a, "a"), make(b, "b")
            results = await asyncio.gather(*(j() for j in [ja, jb] * 5))  # type: ignore[operator]
            assert sorted(r for r in results if r is not None) == ran and len(ran) == 1
            h = await a.take_once(name + "-2", at_most=5)
            assert isinstance(h, etcdlock.AsyncOnceHold)
            assert await b.take_once(name + "-2", at_most=5) is None
            assert await h.extend(at_most=5)
            assert await h.finish()
            assert not await h.finish()

    asyncio.run(main())


def test_apscheduler_three_processes_run_each_tick_exactly_once(endpoints: List[str], tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    seconds = 20
    procs = [
        subprocess.Popen([sys.executable, str(EXAMPLES / "apscheduler_once.py"), str(seconds), str(log)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=seconds + 30) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"scheduler exited {p.returncode}\n{out}\n{err}"
    runs = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    per_tick = collections.Counter(t for t, _ in runs)
    pids = collections.Counter(pid for _, pid in runs)
    ticks = sorted(per_tick)
    print(f"{len(runs)} runs over ticks {ticks[0]}..{ticks[-1]}, by process: {dict(pids)}")
    assert [t for t, n in per_tick.items() if n != 1] == [], f"ticks run more than once: {per_tick}"
    # Every tick between the first and the last ran (3 schedulers up: one took it).
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 2)), f"missed ticks: {ticks}"
    assert len(ticks) >= seconds // 2 - 2, ticks
