"""asyncio's own ``LockTests`` (``test.test_asyncio.test_locks``), run against
:class:`etcdlock.AsyncLock` on a real etcd.

The tests come from the interpreter's ``test`` package, not copied here. Each
test builds its lock with ``asyncio.Lock()``; here that call hands out a handle
on a fresh lock name of a client of the test's own event loop. A test that does
not apply sits in ``SKIPS`` with the reason (a difference kept on purpose);
every other one must pass.
"""

from __future__ import annotations

import asyncio
import types
import unittest
import unittest.mock
import uuid
from typing import Any, Iterator

import pytest

import etcdlock

# A missing test package fails the suite; it is never skipped.
import test.test_asyncio.test_locks as asyncio_locks  # noqa: E402

_RELEASE = (
    "calls release() without await: asyncio.Lock.release() is synchronous, "
    "etcdlock's AsyncLock.release() is a coroutine because releasing waits for etcd"
)
_STEPS = (
    "expects the next waiter to run within one event-loop step of release(); "
    "a distributed lock hands over through etcd, milliseconds later"
)
SKIPS = {
    "test_acquire": _RELEASE + "; and " + _STEPS,
    "test_release_not_acquired": _RELEASE,
    "test_release_no_waiters": _RELEASE,
    "test_acquire_cancel": "inspects asyncio.Lock._waiters (etcdlock's waiters are keys in etcd; "
    "test_asyncio.py checks that a cancelled acquire leaves no key)",
    "test_cancel_race": "inspects asyncio.Lock._waiters, and " + _RELEASE,
    "test_cancel_release_race": "patches the loop's call_soon around asyncio's internal wake-up, and " + _RELEASE,
    "test_finished_waiter_cancelled": "inspects asyncio.Lock._waiters, and " + _RELEASE,
    "test_lock": "asserts the class is named Lock ('object Lock can't be used in await'); "
    "etcdlock's is AsyncLock (test_lock_by_with_statement checks the same refusal for any name)",
    "test_lock_doesnt_accept_loop_parameter": "calls the class with loop=; etcdlock's locks come "
    "from AsyncClient.lock(name), which takes no loop either",
}


@pytest.fixture(scope="module")
def endpoints_for_asyncio(etcd: "dict[str, Any]") -> Iterator["list[str]"]:
    yield list(etcd["endpoints"])


class TestAsyncioLockTests(asyncio_locks.LockTests):  # type: ignore[misc,name-defined]
    endpoints: "list[str]" = []

    @pytest.fixture(autouse=True)
    def _bind(self, endpoints_for_asyncio: "list[str]") -> None:
        type(self).endpoints = endpoints_for_asyncio

    def setUp(self) -> None:
        name = self._testMethodName
        if name in SKIPS:
            raise unittest.SkipTest(SKIPS[name])
        super().setUp()

    async def asyncSetUp(self) -> None:
        await super().asyncSetUp()
        self.client = await etcdlock.AsyncClient(endpoints=self.endpoints, ttl=15).connect()
        client = self.client

        class AsyncioWithEtcdLocks(types.ModuleType):
            """The tests' `asyncio` name: the real module, except that Lock()
            is an etcdlock.AsyncLock on a fresh name (the real asyncio is not
            touched, so nothing else in the process sees the swap)."""

            def __getattr__(self, attr: str) -> Any:
                return getattr(asyncio, attr)

            @staticmethod
            def Lock() -> etcdlock.AsyncLock:  # noqa: N802 (asyncio's name)
                return client.lock(f"asyncio-{uuid.uuid4().hex}")

        self._patch = unittest.mock.patch.object(asyncio_locks, "asyncio", AsyncioWithEtcdLocks("asyncio"))
        self._patch.start()

    async def asyncTearDown(self) -> None:
        self._patch.stop()
        await self.client.close()
        await super().asyncTearDown()


def test_the_skip_list_names_real_tests() -> None:
    names = {n for n in dir(asyncio_locks.LockTests) if n.startswith("test")}
    assert set(SKIPS) <= names, set(SKIPS) - names
    # Every other test of asyncio's LockTests runs here and must pass.
    assert len(names - set(SKIPS)) == 3, sorted(names - set(SKIPS))
