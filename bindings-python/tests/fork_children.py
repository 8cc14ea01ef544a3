"""Targets for the multiprocessing tests (importable by spawn/forkserver children)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import etcdlock


def fresh_client(endpoints: List[str], name: str, q: Any) -> None:
    res: Dict[str, Any] = {}
    try:
        with etcdlock.Client(endpoints=endpoints) as c:
            with c.lock(name, timeout=10) as g:
                g.put(name + "-child", "ok")
                res["token"] = g.fencing_token
                res["read"] = g.get(name + "-child").decode()  # type: ignore[union-attr]
    except BaseException as e:
        res["error"] = repr(e)
    q.put(res)


def inherited_client(parent: Optional[etcdlock.Client], parent_guard: Optional[etcdlock.Guard], endpoints: List[str], name: str, q: Any) -> None:
    res: Dict[str, Any] = {}
    if parent is not None:
        try:
            parent.acquire(name + "-2", timeout=5)
            res["parent_client"] = "no error"
        except etcdlock.LockError as e:
            res["parent_client"] = type(e).__name__
            res["parent_client_msg"] = str(e)
    if parent_guard is not None:
        try:
            parent_guard.put(name + "-x", "from-child")
            res["parent_guard"] = "no error"
        except etcdlock.LockError as e:
            res["parent_guard"] = type(e).__name__
    q.put(res)
    fresh_client(endpoints, name + "-3", q)


def inherited_leader_loop(parent: etcdlock.Client, loop: etcdlock.LeaderLoop, name: str, q: Any) -> None:
    """In a forked child: the parent's leader loop does not run here, and
    the parent's client cannot start one."""
    res: Dict[str, Any] = {"stopped": loop.stopped, "is_leader_thread_alive": not loop.join(0)}
    try:
        parent.lead(name + "-child", lambda term: None)
        res["lead"] = "no error"
    except etcdlock.LockError as e:
        res["lead"] = type(e).__name__
    try:
        loop._native.next()
        res["next"] = "no error"
    except etcdlock.LockError as e:
        res["next"] = type(e).__name__
    loop.stop()  # a no-op here: the parent's loop goes on
    q.put(res)
