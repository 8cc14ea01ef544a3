"""multiprocessing with fork, spawn and forkserver after the runtime started."""

from __future__ import annotations

import multiprocessing as mp
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
