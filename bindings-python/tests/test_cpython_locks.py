"""CPython's own lock tests, run against :class:`etcdlock.Lock` and
:class:`etcdlock.RLock` on a real etcd.

The tests come from the interpreter's ``test`` package (``test.lock_tests``),
not copied here: ``BaseLockTests`` and ``LockTests`` (``RLockTests`` for the
reentrant handle) with a ``locktype`` that hands out a handle on a fresh lock
name each time. A test that does not apply sits in ``SKIPS`` with the reason;
every other one must pass.
"""

from __future__ import annotations

import unittest
import uuid
from typing import Any, Iterator

import pytest

import etcdlock

# A missing test package fails the suite (test.sh installs Debian's
# libpython3.X-testsuite when the interpreter lacks it); it is never skipped.
import test.lock_tests as lock_tests  # noqa: E402

# What is kept different on purpose, with the reason.
SKIPS = {
    "test_at_fork_reinit": "tests _thread.lock._at_fork_reinit, a private hook of the C lock; "
    "etcdlock's fork safety is tested in test_fork.py",
    "test_release_save_unacquired": "tests RLock._release_save, the private hook threading.Condition "
    "uses to drop and retake a lock around wait(); etcdlock.RLock is not a Condition's lock",
}


@pytest.fixture(scope="module")
def shared_client(etcd: "dict[str, Any]") -> Iterator[etcdlock.Client]:
    c = etcdlock.Client(endpoints=list(etcd["endpoints"]), ttl=15)
    yield c
    c.close()


class _OnEtcd:
    client: etcdlock.Client

    @pytest.fixture(autouse=True)
    def _bind(self, shared_client: etcdlock.Client) -> None:
        type(self).client = shared_client

    def locktype(self) -> etcdlock.Lock:
        return self.client.lock(f"cpython-{uuid.uuid4().hex}")

    def setUp(self) -> None:
        name = self._testMethodName  # type: ignore[attr-defined]
        if name in SKIPS:
            raise unittest.SkipTest(SKIPS[name])
        super().setUp()  # type: ignore[misc]


class TestBaseLockTests(_OnEtcd, lock_tests.BaseLockTests):  # type: ignore[misc,name-defined]
    pass


class TestLockTests(_OnEtcd, lock_tests.LockTests):  # type: ignore[misc,name-defined]
    pass


class TestRLockTests(_OnEtcd, lock_tests.RLockTests):  # type: ignore[misc,name-defined]
    def locktype(self) -> etcdlock.RLock:  # type: ignore[override]
        return etcdlock.RLock(self.client, f"cpython-r-{uuid.uuid4().hex}")


def test_every_cpython_lock_test_ran_or_is_listed() -> None:
    """The classes cover CPython's whole list; the skip list names real tests."""
    for cls in (lock_tests.LockTests, lock_tests.RLockTests):
        names = {n for n in dir(cls) if n.startswith("test")}
        skipped = set(SKIPS) & names
        print(f"CPython lock_tests.{cls.__name__}: {len(names) - len(skipped)} run, {len(skipped)} skipped on purpose")
    every = {n for cls in (lock_tests.LockTests, lock_tests.RLockTests) for n in dir(cls) if n.startswith("test")}
    assert set(SKIPS) <= every
