"""Python idioms of the binding (issue 14 item 3), against real etcd."""

from __future__ import annotations

import asyncio
import builtins
from typing import List

import pytest

import etcdlock


def test_timeout_error_is_the_builtin_timeout_error_too(client: etcdlock.Client, name: str) -> None:
    assert issubclass(etcdlock.TimeoutError, builtins.TimeoutError)
    assert issubclass(etcdlock.TimeoutError, etcdlock.LockError)
    assert etcdlock.TimeoutError.__module__ == "etcdlock"
    holder = client.acquire(name)
    try:
        # A plain `except TimeoutError:` (the builtin) catches a lock timeout.
        with pytest.raises(builtins.TimeoutError) as ei:
            client.acquire(name, timeout=0.05)
        e = ei.value
        assert isinstance(e, etcdlock.TimeoutError) and isinstance(e, etcdlock.LockError)
        assert e.code == "Timeout" and e.message and str(e)
        assert etcdlock.ERRORS["Timeout"] is etcdlock.TimeoutError
    finally:
        holder.unlock()


def test_not_held_error_is_a_runtime_error(client: etcdlock.Client, name: str) -> None:
    assert issubclass(etcdlock.NotHeldError, RuntimeError)
    assert issubclass(etcdlock.NotHeldError, etcdlock.LockError)
    g = client.acquire(name)
    g.unlock()
    with pytest.raises(RuntimeError) as ei:
        g.put("k", "v")
    assert isinstance(ei.value, etcdlock.NotHeldError) and ei.value.code == "NotHeld"
    # The threading.Lock-style adapter: releasing an unlocked lock is a RuntimeError.
    with pytest.raises(RuntimeError):
        client.lock(name).release()


def test_no_public_name_shadows_a_builtin_without_subclassing_it() -> None:
    for n in etcdlock.__all__:
        if hasattr(builtins, n):
            ours, theirs = getattr(etcdlock, n), getattr(builtins, n)
            assert isinstance(ours, type) and isinstance(theirs, type), n
            assert issubclass(ours, theirs), f"etcdlock.{n} shadows builtins.{n} without subclassing it"


def test_guard_exit_returns_none_and_never_swallows(client: etcdlock.Client, name: str) -> None:
    g = client.acquire(name)
    assert g.__exit__(None, None, None) is None
    assert g.state == "released"
    with pytest.raises(KeyError):
        with client.acquire(name):
            raise KeyError("not swallowed")


def test_on_lost_refuses_a_non_callable_at_once(client: etcdlock.Client, name: str) -> None:
    with client.acquire(name) as g:
        for bad in (42, None, "print"):
            with pytest.raises(TypeError, match="callable"):
                g.on_lost(bad)  # type: ignore[arg-type]
        g.on_lost(lambda reason: None)  # a callable is still fine


def test_lone_surrogates_are_invalid_argument_not_unicode_errors(endpoints: List[str], client: etcdlock.Client, name: str) -> None:
    bad = "jobs\ud800"
    for call in (
        lambda: client.acquire(bad),
        lambda: client.try_lock(bad),
        lambda: client.lock(bad).acquire(),
        lambda: etcdlock.Client(endpoints=endpoints, namespace="ns\udc00/"),
        lambda: etcdlock.Client(endpoints=[endpoints[0] + "\udc00"]),
    ):
        with pytest.raises(etcdlock.InvalidArgumentError) as ei:
            call()
        assert isinstance(ei.value.__cause__, UnicodeEncodeError)
        assert ei.value.code == "InvalidArgument"
    with client.acquire(name) as g:
        for key, value in (("k\ud800", "v"), ("k", "v\udc00")):
            with pytest.raises(etcdlock.InvalidArgumentError):
                g.put(key, value)
        with pytest.raises(etcdlock.InvalidArgumentError):
            g.get("\udc00")
        with pytest.raises(etcdlock.InvalidArgumentError):
            g.delete("\udc00")

    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as ac:
            with pytest.raises(etcdlock.InvalidArgumentError):
                await ac.acquire(bad)
            with pytest.raises(etcdlock.InvalidArgumentError):
                await ac.try_lock(bad)

    asyncio.run(main())


def test_margin_is_checked_against_the_ttl(endpoints: List[str]) -> None:
    for margin in (2.6, 5, 60, float("inf"), float("nan"), -1):
        with pytest.raises(etcdlock.InvalidArgumentError):
            etcdlock.Client(endpoints=endpoints, ttl=5, margin=margin)
    with etcdlock.Client(endpoints=endpoints, ttl=5, margin=0.5) as c:
        assert c.ttl >= 5


def test_importing_etcdlock_does_not_import_asyncio() -> None:
    # asyncio (with ssl) adds ~8 MB RSS to a process; a worker using the blocking API
    # should not pay for it. The async API imports it when used.
    import subprocess
    import sys

    code = "import sys, etcdlock; print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
