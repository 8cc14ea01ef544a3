"""multiprocessing with fork, spawn and forkserver after the runtime started."""

from __future__ import annotations

import multiprocessing as mp
import threading
from typing import List

import pytest

import etcdlock
import fork_children


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_child_process_gets_a_working_runtime(client: etcdlock.Client, endpoints: List[str], name: str, method: str) -> None:
    # the runtime is running in this process (client connected, lock held)
    held = client.acquire(name + "-parent")
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=fork_children.fresh_client, args=(endpoints, name, q))
    p.start()
    res = q.get(timeout=60)
    p.join(30)
    assert p.exitcode == 0
    assert "error" not in res, res
    assert res["read"] == "ok" and res["token"] > 0
    # the parent's client still works
    assert held.is_held
    held.put(name + "-p", "1")
    held.unlock()


def test_forked_child_refuses_the_parents_client(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    held = client.acquire(name)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=fork_children.inherited_client, args=(client, held, endpoints, name, q))
    p.start()
    first = q.get(timeout=60)
    second = q.get(timeout=60)
    p.join(30)
    assert p.exitcode == 0
    assert first["parent_client"] == "ClosedError"
    assert "fork" in first["parent_client_msg"]
    assert first["parent_guard"] == "ClosedError"
    assert "error" not in second, second
    # the child's exit did not release or disturb the parent's lock
    assert held.is_held
    held.put(name + "-x", "parent")
    assert held.get(name + "-x") == b"parent"
    held.unlock()


def test_forked_child_does_not_inherit_a_running_leader_loop(client: etcdlock.Client, name: str) -> None:
    elected = threading.Event()
    terms: List[int] = []

    def task(term: etcdlock.Term) -> None:
        terms.append(term.fencing_token)
        elected.set()
        term.cancelled.wait()

    with client.lead(name, task, "parent") as loop:
        assert elected.wait(10)
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=fork_children.inherited_leader_loop, args=(client, loop, name, q))
        p.start()
        res = q.get(timeout=60)
        p.join(30)
        assert p.exitcode == 0
        assert res == {"stopped": True, "is_leader_thread_alive": False, "lead": "ClosedError", "next": "ClosedError"}
        # the parent's loop still leads, in the same term
        assert loop.is_leader and terms == [loop.term.fencing_token if loop.term else -1]
        leader = client.leader(name)
        assert leader is not None and leader.value == b"parent"
    assert loop.stopped and client.leader(name) is None
