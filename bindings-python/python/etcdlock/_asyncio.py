"""The asyncio API: ``AsyncClient``, ``AsyncLock``, ``AsyncGuard`` and the rest."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Literal, Optional, Sequence, Type, TypeVar, Union, overload

if TYPE_CHECKING:  # asyncio is imported where the async API runs: it adds ~8 MB RSS (ssl)
    import asyncio

from ._etcdlock import (
    ClosedError,
    LockError,
    NativeClient,
    NativeObserver,
    NotHeldError,
    TimeoutError,
)

from ._common import (
    Deadlocks,
    Endpoints,
    History,
    Leader,
    Status,
    _check_name,
    _check_names,
    _check_count,
    _check_permits,
    _check_timeout,
    _check_since,
    _deadlocks,
    _extras,
    _history,
    _leader,
    _live_clients,
    _options,
    _sync_log_level,
    _metrics,
    _status,
    _statuses,
)
from ._async_guard import AsyncGuard as AsyncGuard, AsyncLeadership as AsyncLeadership, AsyncMultiGuard as AsyncMultiGuard
from ._sync import AsyncBarrier, AsyncLatch
from ._leader import AsyncLeaderLoop, AsyncTerm, LeaderEvent, _check_retry
from ._once import AsyncOnceHold, _check_span, once_async as _once_async, take_once_async as _take_once_async
from ._otel import Tracing, traced_async as _traced_async
from ._reentry import AsyncRLock, task_owner

T = TypeVar("T")


class AsyncObserver:
    """``Observer`` as an async iterator (``async for leader in ...``)."""

    def __init__(self, native: NativeObserver, name: str) -> None:
        self._native = native
        self.name = name

    def __aiter__(self) -> "AsyncObserver":
        return self

    async def __anext__(self) -> Optional[Leader]:
        return _leader(await self._native.next_async(None))

    async def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next leadership state; ``TimeoutError`` after ``timeout`` seconds."""
        return _leader(await self._native.next_async(_check_timeout(timeout)))

    def __repr__(self) -> str:
        return f"<etcdlock.AsyncObserver name={self.name!r}>"



class AsyncClient:
    """The asyncio client: the same options as ``Client`` (``tracer_provider`` too). Connects on
    ``await client.connect()`` (returns the client) or ``async with``; other
    methods connect on first use. Everything runs on etcdlock's shared native
    runtime; the event loop is never blocked."""

    def __init__(
        self,
        endpoints: Endpoints = None,
        ttl: Optional[int] = None,
        namespace: Optional[str] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        ca: Optional[str] = None,
        cert: Optional[str] = None,
        key: Optional[str] = None,
        domain: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        request_timeout: Optional[float] = None,
        margin: Optional[float] = None,
        watch_held_keys: Optional[bool] = None,
        keepalive_interval: Optional[float] = None,
        lazy_connect: Optional[bool] = None,
        tracer_provider: Any = None,
    ) -> None:
        _sync_log_level()
        self._tracing = Tracing(tracer_provider)
        self._options = _options({k: v for k, v in locals().items() if k != "tracer_provider"})
        self._native: Optional[NativeClient] = None
        self._connecting: Optional[asyncio.Lock] = None
        self._closed = False

    async def connect(self) -> "AsyncClient":
        """Connect (idempotent). Raises ``UnavailableError``, ..."""
        await self._client()
        return self

    async def _client(self) -> NativeClient:
        if self._native is not None:
            return self._native
        if self._closed:
            raise ClosedError("the client was closed")
        if self._connecting is None:
            import asyncio  # already loaded: we run on its loop

            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._native is None:
                self._native = await NativeClient.connect_async(**self._options)
                _live_clients.add(self._native)
            return self._native

    async def _lock_native(self, name: str, timeout: Optional[float], extras: Dict[str, Any], owner: Optional[int] = None) -> AsyncGuard:
        """One lock call (reentrant for ``owner`` if given), in its span."""

        async def call() -> Any:
            c = await self._client()
            return await c.lock_async(name, timeout, owner, **extras)

        return AsyncGuard(await _traced_async(self._tracing, "lock", name, call))

    async def _try_native(self, name: str, extras: Dict[str, Any], owner: Optional[int] = None) -> Optional[AsyncGuard]:
        """One try_lock call (reentrant for ``owner`` if given), in its span."""

        async def call() -> Any:
            c = await self._client()
            return await c.try_lock_async(name, owner, **extras)

        g = await _traced_async(self._tracing, "try_lock", name, call)
        return None if g is None else AsyncGuard(g)

    @overload
    def lock(
        self,
        name: str,
        timeout: Optional[float] = None,
        *,
        reentrant: Literal[False] = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> "AsyncLock": ...
    @overload
    def lock(
        self,
        name: str,
        timeout: Optional[float] = None,
        *,
        reentrant: Literal[True],
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> AsyncRLock: ...
    def lock(
        self,
        name: str,
        timeout: Optional[float] = None,
        *,
        reentrant: bool = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> "Union[AsyncLock, AsyncRLock]":
        """An ``AsyncLock`` handle for ``name`` (``async with`` it);
        acquisition options as ``Client.acquire``. ``reentrant=True``:
        an ``AsyncRLock`` (the holding task acquires it again at once)."""
        if reentrant:
            return AsyncRLock(self, name, timeout, _extras(lock_delay, lease_time, metadata, detect_deadlock))
        return AsyncLock(self, _check_name(name), _check_timeout(timeout), _extras(lock_delay, lease_time, metadata, detect_deadlock))

    async def acquire(
        self,
        name: str,
        timeout: Optional[float] = None,
        *,
        reentrant: bool = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> AsyncGuard:
        """Wait for the lock and return the held ``AsyncGuard``. Raises
        ``TimeoutError`` after ``timeout`` seconds. Cancelling the task
        removes the waiter key. ``lock_delay``, ``lease_time`` and
        ``metadata`` as ``Client.acquire``, and ``detect_deadlock``;
        ``reentrant=True`` too, the owner being the running asyncio task."""
        return await self._lock_native(
            _check_name(name), _check_timeout(timeout), _extras(lock_delay, lease_time, metadata, detect_deadlock), task_owner() if reentrant else None
        )

    async def try_lock(
        self,
        name: str,
        *,
        reentrant: bool = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Optional[AsyncGuard]:
        """Take the lock if free: an ``AsyncGuard``, or None
        (``reentrant=True``: a task that holds it gets another handle)."""
        return await self._try_native(_check_name(name), _extras(lock_delay, lease_time, metadata), task_owner() if reentrant else None)

    async def acquire_permit(
        self, name: str, permits: int, timeout: Optional[float] = None, *, lease_time: Optional[float] = None, metadata: Optional[Dict[str, str]] = None
    ) -> AsyncGuard:
        """``Client.acquire_permit``, awaitable (cancelling removes the waiter key)."""
        c = await self._client()
        return AsyncGuard(
            await c.acquire_permit_async(_check_name(name), _check_permits(permits), _check_timeout(timeout), **_extras(None, lease_time, metadata))
        )

    async def acquire_read(self, name: str, timeout: Optional[float] = None) -> AsyncGuard:
        """``Client.acquire_read``, awaitable."""
        c = await self._client()
        return AsyncGuard(await c.read_lock_async(_check_name(name), _check_timeout(timeout)))

    async def acquire_many(self, names: Sequence[str], timeout: Optional[float] = None) -> AsyncMultiGuard:
        """``Client.acquire_many``, awaitable."""
        c = await self._client()
        return AsyncMultiGuard(await c.lock_many_async(_check_names(names), _check_timeout(timeout)))

    def lead(
        self,
        name: str,
        task: Callable[[AsyncTerm], Awaitable[object]],
        value: Union[str, bytes] = b"",
        *,
        again: bool = True,
        retry: float = 1.0,
        on_event: Optional[Callable[[LeaderEvent], object]] = None,
        lock_delay: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> AsyncLeaderLoop:
        """``Client.lead`` on asyncio: an ``AsyncLeaderLoop``,
        started by ``async with`` (exit stops it and waits) or
        ``await loop.start()``. Each term runs ``await task(term)`` as an
        ``asyncio.Task`` with an ``AsyncTerm``; the task is
        cancelled (``CancelledError`` inside it) when leadership is lost or
        the loop stops."""
        return AsyncLeaderLoop(self, _check_name(name), task, value, bool(again), _check_retry(retry), on_event, _extras(lock_delay, None, metadata))

    async def campaign(
        self, name: str, value: Union[str, bytes], timeout: Optional[float] = None, *, lock_delay: Optional[float] = None, metadata: Optional[Dict[str, str]] = None
    ) -> AsyncLeadership:
        """``Client.campaign``, awaitable."""
        async def call() -> Any:
            c = await self._client()
            return await c.campaign_async(_check_name(name), value, _check_timeout(timeout), **_extras(lock_delay, None, metadata))

        return AsyncLeadership(await _traced_async(self._tracing, "campaign", name, call))

    async def leader(self, name: str) -> Optional[Leader]:
        """``Client.leader``, awaitable."""
        c = await self._client()
        return _leader(await c.leader_async(_check_name(name)))

    async def observe(self, name: str) -> AsyncObserver:
        """``Client.observe`` as an async iterator:
        ``async for leader in await client.observe("jobs"):``."""
        c = await self._client()
        return AsyncObserver(c.observe(_check_name(name)), name)

    async def status(self, name: str) -> Status:
        """``Client.status``, awaitable."""
        c = await self._client()
        return _status(await c.status_async(_check_name(name)))

    async def list(self, prefix: str = "") -> List[Status]:
        """``Client.list``, awaitable."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        c = await self._client()
        return _statuses(await c.list_async(prefix))

    async def deadlocks(self, prefix: str = "") -> Deadlocks:
        """``Client.deadlocks``, awaitable."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        c = await self._client()
        return _deadlocks(await c.deadlocks_async(prefix))

    async def history(self, name: str, since: Optional[float] = None) -> History:
        """``Client.history``, awaitable."""
        name, since = _check_name(name), _check_since(since)
        c = await self._client()
        return _history(await c.history_async(name, since))

    async def release(self, name: str, token: int) -> bool:
        """``Client.release``, awaitable."""
        c = await self._client()
        return await c.release_async(_check_name(name), token)

    async def release_permit(self, name: str, id: int) -> bool:
        """``Client.release_permit``, awaitable."""
        c = await self._client()
        return await c.release_permit_async(_check_name(name), id)

    async def latch(self, name: str, count: int) -> AsyncLatch:
        """``Client.latch``, awaitable: an ``AsyncLatch``."""
        c = await self._client()
        return AsyncLatch(await c.latch_async(_check_name(name), _check_count("count", count)))

    async def barrier(self, name: str, parties: int) -> AsyncBarrier:
        """``Client.barrier``, awaitable: an ``AsyncBarrier``."""
        c = await self._client()
        return AsyncBarrier(await c.barrier_async(_check_name(name), _check_count("parties", parties)))

    async def close(self) -> None:
        """Close (revokes the lease, releasing every lock, and closes the
        connection to etcd). Idempotent."""
        self._closed = True
        if self._native is not None:
            await self._native.close_async()
            _live_clients.discard(self._native)

    def _close_blocking(self) -> None:
        """``close`` from outside any event loop (the pytest plugin's
        teardown, which runs after the test's loop ended): the same native
        close, waited for on this thread."""
        self._closed = True
        if self._native is not None:
            self._native.close()
            _live_clients.discard(self._native)

    async def take_once(self, name: str, at_most: float) -> Optional[AsyncOnceHold]:
        """``Client.take_once``, awaitable; the hold's ``finish`` and
        ``extend`` are awaitable too."""
        c = await self._client()
        return await _take_once_async(c, name, at_most)

    def once(
        self, name: str, *, at_most: float, at_least: float = 0.0
    ) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[Optional[T]]]]:
        """``Client.once`` for ``async def`` jobs (AsyncIOScheduler,
        aiocron): the decorated coroutine function runs if this node took
        the tick and returns its result, else None."""
        _check_name(name)
        _check_span("at_most", at_most)
        _check_span("at_least", at_least)
        async def take() -> Optional[AsyncOnceHold]:
            return await _take_once_async(await self._client(), name, at_most, at_least)

        return _once_async(take, at_least)

    async def ping(self) -> float:
        """``Client.ping``, awaitable (connects first if needed)."""
        c = await self._client()
        return await c.ping_async()

    @property
    def ttl(self) -> Optional[int]:
        """The effective TTL once connected, else None."""
        return None if self._native is None else self._native.ttl

    def metrics(self) -> Optional[Dict[str, Any]]:
        """``Client.metrics``, once connected (else None)."""
        return None if self._native is None else _metrics(self._native.metrics())

    def prometheus(self, **labels: str) -> str:
        """``Client.prometheus``; empty before the client connects."""
        return "" if self._native is None else self._native.prometheus(sorted(labels.items()))

    @property
    def closed(self) -> bool:
        """True after ``close``."""
        return self._closed or (self._native is not None and self._native.closed)

    @property
    def endpoints(self) -> Optional[str]:
        """The endpoints, comma separated, once connected (else None)."""
        return None if self._native is None else self._native.endpoints

    @property
    def namespace(self) -> Optional[str]:
        """The key namespace ("" when none) once connected, else None."""
        return None if self._native is None else self._native.namespace

    def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> "AsyncSemaphore":
        """An ``AsyncSemaphore`` handle for ``name`` with ``permits``
        permits (``async with`` it); nothing is sent to etcd until acquired."""
        return AsyncSemaphore(self, _check_name(name), _check_permits(permits), _check_timeout(timeout))

    async def __aenter__(self) -> "AsyncClient":
        return await self.connect()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()


class AsyncLock:
    """A lock handle shaped like ``asyncio.Lock``: ``await acquire()``,
    ``await release()`` (a coroutine here: it talks to etcd), ``locked()``,
    and ``async with lock as guard:`` which raises instead of running the
    block without the lock."""

    def __init__(self, client: AsyncClient, name: str, timeout: Optional[float], extras: Optional[Dict[str, Any]] = None) -> None:
        self._client = client
        self.name = name
        self.timeout = timeout
        self._extras: Dict[str, Any] = extras or {}
        self._guard: Optional[AsyncGuard] = None

    async def acquire(self, timeout: float = -1) -> bool:
        """True when acquired, False if not within ``timeout`` seconds
        (``-1``: the handle's default; ``0``: only if free now)."""
        t = _check_timeout(timeout)
        if t == -1:
            t = self.timeout
        elif t is not None and t < 0:
            raise ValueError("timeout value must be a non-negative number or -1")
        if t == 0:
            g = await self._client.try_lock(self.name, **self._extras)
            if g is None:
                return False
        else:
            try:
                g = await self._client.acquire(self.name, t, **self._extras)
            except TimeoutError:
                return False
        self._guard = g
        return True

    async def release(self) -> None:
        """Release; ``NotHeldError`` if not held by this handle."""
        g, self._guard = self._guard, None
        if g is None:
            raise NotHeldError(f"lock {self.name!r} is not held by this handle")
        await g.unlock()

    def locked(self) -> bool:
        """True while this handle holds the lock."""
        return self._guard is not None and self._guard.is_held

    @property
    def guard(self) -> Optional[AsyncGuard]:
        """The held ``AsyncGuard``, or None."""
        return self._guard

    def __repr__(self) -> str:
        # asyncio.Lock's shape: "<asyncio.locks.Lock object at 0x... [unlocked]>".
        state = "locked" if self.locked() else "unlocked"
        return f"<etcdlock.AsyncLock name={self.name!r} object at {id(self):#x} [{state}]>"

    async def __aenter__(self) -> AsyncGuard:
        self._guard = await self._client.acquire(self.name, self.timeout, **self._extras)
        return self._guard

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



class AsyncSemaphore:
    """A cluster-wide semaphore handle shaped like
    ``asyncio.BoundedSemaphore``: ``await acquire()``, ``await
    release()`` (a coroutine here: it talks to etcd), ``locked()``, and
    ``async with sem as permit:`` (yields the held ``AsyncGuard``).
    Each acquisition is one permit in etcd; tasks may share the handle.
    ``release()`` without a permit held through this handle raises
    ``NotHeldError``."""

    def __init__(self, client: AsyncClient, name: str, permits: int, timeout: Optional[float]) -> None:
        self._client = client
        self.name = name
        self.permits = permits
        self.timeout = timeout
        self._held: List[AsyncGuard] = []
        # Permits taken by `async with`, per task (blocks nest per task).
        self._entered: Dict[Any, List[AsyncGuard]] = {}

    async def _take(self, timeout: Optional[float]) -> Optional[AsyncGuard]:
        try:
            g = await self._client.acquire_permit(self.name, self.permits, timeout)
        except TimeoutError:
            return None
        self._held.append(g)
        return g

    async def acquire(self, timeout: Optional[float] = None) -> bool:
        """Take a permit: True when taken, False if none came within
        ``timeout`` seconds (None: the handle's default; 0: only if one is
        free now)."""
        t = self.timeout if timeout is None else _check_timeout(timeout)
        return await self._take(t) is not None

    async def release(self) -> None:
        """Give back the oldest permit held through this handle."""
        if not self._held:
            raise NotHeldError(f"semaphore {self.name!r}: no permit is held through this handle")
        await self._held.pop(0).unlock()

    def locked(self) -> bool:
        """True while every permit is held through this handle (asyncio's
        meaning: an acquire would wait, as far as this handle knows)."""
        return len(self._held) >= self.permits

    @property
    def held(self) -> int:
        """Permits held through this handle now."""
        return len(self._held)

    async def __aenter__(self) -> AsyncGuard:
        import asyncio  # already loaded: we run on its loop

        g = await self._take(self.timeout)
        if g is None:
            raise TimeoutError(f"semaphore {self.name!r}: no permit within {self.timeout} s")
        self._entered.setdefault(asyncio.current_task(), []).append(g)
        return g

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        import asyncio

        task = asyncio.current_task()
        stack = self._entered[task]
        g = stack.pop()
        if not stack:
            del self._entered[task]
        if g in self._held:
            self._held.remove(g)
        try:
            await g.unlock()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return f"<etcdlock.AsyncSemaphore name={self.name!r} permits={self.permits} held={self.held}>"
