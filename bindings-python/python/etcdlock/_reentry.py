"""Reentrancy: the owners (a thread, an asyncio task) and the handles shaped
like ``threading.RLock`` (``RLock``) and ``asyncio.Lock``
(``AsyncRLock``).

Core keeps the holds (``Client::lock_reentrant``): an owner that holds a lock
and takes it again gets another handle of the same hold at once (same key,
same fencing token, nothing sent to etcd); the hold ends when its last
handle is unlocked. A lost hold is never re-entered: the owner's next
acquisition raises ``LockLostError`` until it has released every
handle of the lost hold. The handles here only remember which handles each
owner took, to release the latest one.

Owners are 64-bit numbers in two namespaces: a thread is
``threading.get_ident()`` with the top bit clear; an asyncio task is a
number drawn from a process-wide counter the first time the task asks,
with the top bit set. So a thread and a task never share an owner, and a
task id is never reused by a later task (``id()`` of a finished task
could be).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from ._common import _check_name, _check_timeout, _extras
from ._etcdlock import Guard, LockError, NotHeldError, TimeoutError

if TYPE_CHECKING:
    from ._async_guard import AsyncGuard
    from ._asyncio import AsyncClient
    from ._client import Client

_TASK_BIT = 1 << 63
_task_ids: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_task_counter = itertools.count(1)
_task_mu = threading.Lock()


def thread_owner() -> int:
    """The calling thread as an owner: its ``threading.get_ident()``, top bit clear."""
    return threading.get_ident() & (_TASK_BIT - 1)


def task_owner() -> int:
    """The running asyncio task as an owner (top bit set, never reused).
    RuntimeError outside a task."""
    import asyncio  # already loaded: we run on its loop

    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("reentrant=True on asyncio needs a running asyncio task (the owner)")
    with _task_mu:
        n = _task_ids.get(task)
        if n is None:
            n = _task_ids[task] = _TASK_BIT | next(_task_counter)
    return n


def _wait_time(timeout: object, default: Optional[float]) -> Optional[float]:
    """``acquire``'s ``timeout`` as ``threading.Lock`` checks it (-1: the
    handle's default)."""
    t = _check_timeout(timeout)
    if t == -1:
        return default
    if t is not None and t < 0:
        raise ValueError("timeout value must be a non-negative number or -1")
    if t is not None and t > threading.TIMEOUT_MAX:
        raise OverflowError("timeout value is too large")
    return t


class RLock:
    """A reentrant lock handle shaped like ``threading.RLock``: the
    thread that holds it may acquire it again (another handle of the same
    hold: same fencing token, nothing sent to etcd) and must release it as
    many times; ``release()`` by a thread that does not hold it raises
    ``NotHeldError`` (a ``RuntimeError``, as ``threading.RLock`` raises).
    ``with rlock as guard:`` yields the held ``Guard`` (this
    acquisition's handle) and raises instead of running the block without
    the lock. Other threads and processes wait as for ``Lock``.

    The owner is the thread: every reentrant acquisition of ``name`` on the
    same client by the same thread (through any ``RLock``, or
    ``acquire(..., reentrant=True)``) is the same hold. ``timeout`` is the
    default of ``with`` and of ``acquire()`` without one; the acquisition
    options as ``Client.acquire``."""

    def __init__(
        self,
        client: "Client",
        name: str,
        timeout: Optional[float] = None,
        *,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> None:
        self._client = client
        self.name = _check_name(name)
        self.timeout = _check_timeout(timeout)
        self._extras: Dict[str, Any] = _extras(lock_delay, lease_time, metadata, detect_deadlock)
        self._handles: Dict[int, List[Guard]] = {}
        self._mu = threading.Lock()

    def _push(self, owner: int, g: Guard) -> Guard:
        with self._mu:
            self._handles.setdefault(owner, []).append(g)
        return g

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire like ``threading.RLock.acquire``: True when acquired
        (at once if this thread holds it), False if not free
        (``blocking=False``, or ``timeout=0``) or not acquired within
        ``timeout`` seconds (``-1``: the handle's default). Raises
        ``LockLostError`` if this thread's hold was lost and not yet
        released, and other failures."""
        owner = thread_owner()
        c = self._client
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            t: Optional[float] = 0
        else:
            t = _wait_time(timeout, self.timeout)
        if t == 0:
            g = c._try_native(self.name, self._extras, owner)
            if g is None:
                return False
        else:
            try:
                g = c._lock_native(self.name, t, self._extras, owner)
            except TimeoutError:
                return False
        self._push(owner, g)
        return True

    def release(self) -> None:
        """Release this thread's latest acquisition; the lock is released
        when the thread has released every one. ``NotHeldError`` (a
        ``RuntimeError``) if this thread does not hold it;
        ``LockLostError`` if the hold had been lost."""
        owner = thread_owner()
        with self._mu:
            stack = self._handles.get(owner)
            if not stack:
                raise NotHeldError(f"cannot release un-acquired lock {self.name!r}")
            g = stack.pop()
            if not stack:
                del self._handles[owner]
        g.unlock()

    def locked(self) -> bool:
        """True while some thread holds the lock through this handle."""
        with self._mu:
            return any(s[-1].is_held for s in self._handles.values())

    def _is_owned(self) -> bool:
        """True if the calling thread holds the lock through this handle
        (``threading.RLock``'s name for it)."""
        with self._mu:
            return thread_owner() in self._handles

    def _recursion_count(self) -> int:
        """How many acquisitions the calling thread has not released yet."""
        with self._mu:
            return len(self._handles.get(thread_owner(), ()))

    @property
    def guard(self) -> Optional[Guard]:
        """The calling thread's latest held handle (a ``Guard``), or None."""
        with self._mu:
            s = self._handles.get(thread_owner())
            return s[-1] if s else None

    def __enter__(self) -> Guard:
        owner = thread_owner()
        return self._push(owner, self._client._lock_native(self.name, self.timeout, self._extras, owner))

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            self.release()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        # threading.RLock's shape: "<unlocked _thread.RLock object owner=0 count=0 at 0x...>".
        state = "locked" if self.locked() else "unlocked"
        return f"<{state} etcdlock.RLock object name={self.name!r} count={self._recursion_count()} at {id(self):#x}>"


class AsyncRLock:
    """``RLock`` for asyncio, the owner being the running task: ``await
    acquire()``, ``await release()``, ``locked()``, ``async with rlock as
    guard:`` (yields the held ``AsyncGuard``). A task that holds the
    lock acquires it again at once (the same hold); another task waits."""

    def __init__(self, client: "AsyncClient", name: str, timeout: Optional[float] = None, extras: Optional[Dict[str, Any]] = None) -> None:
        self._client = client
        self.name = _check_name(name)
        self.timeout = _check_timeout(timeout)
        self._extras: Dict[str, Any] = extras or {}
        self._handles: Dict[int, List["AsyncGuard"]] = {}

    def _push(self, owner: int, g: "AsyncGuard") -> "AsyncGuard":
        self._handles.setdefault(owner, []).append(g)
        return g

    async def acquire(self, timeout: float = -1) -> bool:
        """True when acquired (at once if this task holds it), False if not
        within ``timeout`` seconds (``-1``: the handle's default; ``0``: only
        if free now). ``LockLostError`` if this task's hold was lost and
        not yet released."""
        owner = task_owner()
        t = _check_timeout(timeout)
        if t == -1:
            t = self.timeout
        elif t is not None and t < 0:
            raise ValueError("timeout value must be a non-negative number or -1")
        if t == 0:
            g = await self._client._try_native(self.name, self._extras, owner)
            if g is None:
                return False
        else:
            try:
                g = await self._client._lock_native(self.name, t, self._extras, owner)
            except TimeoutError:
                return False
        self._push(owner, g)
        return True

    async def release(self) -> None:
        """Release this task's latest acquisition; ``NotHeldError`` if
        this task does not hold the lock through this handle."""
        owner = task_owner()
        stack = self._handles.get(owner)
        if not stack:
            raise NotHeldError(f"cannot release un-acquired lock {self.name!r}")
        g = stack.pop()
        if not stack:
            del self._handles[owner]
        await g.unlock()

    def locked(self) -> bool:
        """True while some task holds the lock through this handle."""
        return any(s[-1].is_held for s in self._handles.values())

    @property
    def guard(self) -> Optional["AsyncGuard"]:
        """The running task's latest held handle, or None."""
        s = self._handles.get(task_owner())
        return s[-1] if s else None

    async def __aenter__(self) -> "AsyncGuard":
        owner = task_owner()
        return self._push(owner, await self._client._lock_native(self.name, self.timeout, self._extras, owner))

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            await self.release()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        state = "locked" if self.locked() else "unlocked"
        return f"<etcdlock.AsyncRLock name={self.name!r} object at {id(self):#x} [{state}]>"
