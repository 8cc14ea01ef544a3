"""The handles shaped like ``threading``'s: ``Lock`` (``threading.Lock``) and
``Semaphore`` (``threading.BoundedSemaphore``), both made by a ``Client``
(``Client.lock`` without a timeout argument's ``with``, ``Client.semaphore``)."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from ._etcdlock import Guard, LockError, NotHeldError, TimeoutError
from ._common import _check_timeout

if TYPE_CHECKING:
    from ._client import Client


class Lock:
    """A lock handle shaped like ``threading.Lock``: ``acquire`` /
    ``release`` / ``locked`` and ``with``. ``with lock as guard:`` raises
    (``TimeoutError``, ``UnavailableError``, ...) instead of running
    the block without the lock, and yields the held ``Guard``.

    Threads may share one handle: each acquisition is a separate waiter in
    etcd, so they exclude each other (like a ``threading.Lock``, a thread
    that acquires twice without releasing waits forever)."""

    def __init__(self, client: Client, name: str, timeout: Optional[float], extras: Optional[Dict[str, Any]] = None) -> None:
        self._client = client
        self.name = name
        self.timeout = timeout
        self._extras: Dict[str, Any] = extras or {}
        self._guard: Optional[Guard] = None
        self._slot = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire like ``threading.Lock.acquire``: True when acquired,
        False if not free (``blocking=False``) or not acquired within
        ``timeout`` seconds. ``timeout=-1`` uses the handle's default
        timeout. Other failures raise."""
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            g = self._client._try_native(self.name, self._extras)
        else:
            t = _check_timeout(timeout)
            if t == -1:
                t = self.timeout
            elif t is not None and t < 0:
                raise ValueError("timeout value must be a non-negative number or -1")
            elif t is not None and t > threading.TIMEOUT_MAX:
                raise OverflowError("timeout value is too large")
            if t == 0:
                g = self._client._try_native(self.name, self._extras)
            else:
                try:
                    g = self._client._lock_native(self.name, t, self._extras)
                except TimeoutError:
                    return False
        if g is None:
            return False
        with self._slot:
            self._guard = g
        return True

    def release(self) -> None:
        """Release the lock. Raises ``NotHeldError`` if this handle does
        not hold it, ``LockLostError`` if the hold had been lost."""
        with self._slot:
            g, self._guard = self._guard, None
        if g is None:
            raise NotHeldError(f"lock {self.name!r} is not held by this handle")
        g.unlock()

    def locked(self) -> bool:
        """True while this handle holds the lock."""
        g = self._guard
        return g is not None and g.is_held

    @property
    def guard(self) -> Optional[Guard]:
        """The held ``Guard``, or None."""
        return self._guard

    def __enter__(self) -> Guard:
        g = self._client._lock_native(self.name, self.timeout, self._extras)
        with self._slot:
            self._guard = g
        return g

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
        # threading.Lock's shape: "<unlocked _thread.lock object at 0x...>".
        state = "locked" if self.locked() else "unlocked"
        return f"<{state} etcdlock.Lock object name={self.name!r} at {id(self):#x}>"


class Semaphore:
    """A cluster-wide semaphore handle shaped like
    ``threading.BoundedSemaphore``: ``acquire(blocking, timeout)`` /
    ``release()`` and ``with sem as permit:`` (yields the held ``Guard``).
    Each acquisition is one permit in etcd; threads may share the handle.
    ``release()`` without a permit held through this handle raises
    ``NotHeldError`` (a ``RuntimeError``; BoundedSemaphore raises
    ``ValueError``)."""

    def __init__(self, client: Client, name: str, permits: int, timeout: Optional[float]) -> None:
        self._client = client
        self.name = name
        self.permits = permits
        self.timeout = timeout
        self._held: List[Guard] = []
        self._mu = threading.Lock()
        self._local = threading.local()

    def _take(self, timeout: Optional[float]) -> Optional[Guard]:
        try:
            g = self._client.acquire_permit(self.name, self.permits, timeout)
        except TimeoutError:
            return None
        with self._mu:
            self._held.append(g)
        return g

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Take a permit: True when taken, False if none came within
        ``timeout`` seconds (None: the handle's default; ``blocking=False``:
        only if one is free now)."""
        if not blocking:
            if timeout is not None:
                raise ValueError("can't specify a timeout for a non-blocking call")
            t: Optional[float] = 0.0
        else:
            t = self.timeout if timeout is None else _check_timeout(timeout)
        return self._take(t) is not None

    def release(self) -> None:
        """Give back the oldest permit held through this handle."""
        with self._mu:
            if not self._held:
                raise NotHeldError(f"semaphore {self.name!r}: no permit is held through this handle")
            g = self._held.pop(0)
        g.unlock()

    @property
    def held(self) -> int:
        """Permits held through this handle now."""
        with self._mu:
            return len(self._held)

    def __enter__(self) -> Guard:
        g = self._take(self.timeout)
        if g is None:
            raise TimeoutError(f"semaphore {self.name!r}: no permit within {self.timeout} s")
        self._local.__dict__.setdefault("stack", []).append(g)
        return g

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        g = self._local.stack.pop()
        with self._mu:
            if g in self._held:
                self._held.remove(g)
        try:
            g.unlock()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return f"<etcdlock.Semaphore name={self.name!r} permits={self.permits} held={self.held}>"
