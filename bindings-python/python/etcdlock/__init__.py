"""etcdlock: a correct, fast distributed lock on etcd, for Python.

The same lock as every other etcdlock language (and as etcd's own
``concurrency.Mutex`` / ``etcdctl lock``), in the shapes Python programmers
know from :class:`threading.Lock` and :class:`asyncio.Lock`::

    import etcdlock

    with etcdlock.Client(endpoints=["127.0.0.1:2379"], ttl=15) as client:
        with client.lock("orders", timeout=5) as guard:   # raises instead of running unlocked
            stock = int(guard.get("stock") or b"0")
            guard.put("stock", str(stock - 1))           # rejected by etcd if we lost the lock
            print("fencing token", guard.fencing_token)

asyncio::

    async with etcdlock.AsyncClient(endpoints=["127.0.0.1:2379"]) as client:
        async with client.lock("orders", timeout=5) as guard:
            await guard.put("stock", "299")

Every error is an :class:`LockError`; there is one subclass per core error
code (``.code`` is the code's name, ``.reason`` the loss reason of a
:class:`LockLostError`). Blocking calls release the GIL and answer Ctrl-C
within about 100 ms (a lock wait interrupted that way removes its waiter key).
A client may be shared by threads. A client created before ``fork()`` raises
:class:`ClosedError` in the child; create a new one there.

Options not given fall back to the ``ETCDLOCK_*`` environment variables
(``ETCDLOCK_ENDPOINTS``, ``ETCDLOCK_TTL``, ``ETCDLOCK_NAMESPACE``,
``ETCDLOCK_USERNAME``, ``ETCDLOCK_PASSWORD``, ``ETCDLOCK_TLS_CA``,
``ETCDLOCK_TLS_CERT``, ``ETCDLOCK_TLS_KEY``, ``ETCDLOCK_TLS_DOMAIN``; a variable is
ignored when its option is given explicitly), then to the defaults (127.0.0.1:2379,
TTL 15 s).
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

if TYPE_CHECKING:  # asyncio is imported where the async API runs: it adds ~8 MB RSS (ssl)
    import asyncio

from ._etcdlock import (
    ERROR_CODES,
    LOSS_REASONS,
    MAX_NAME_LEN,
    MAX_TTL_SECS,
    AuthFailedError,
    CancelledError,
    ClosedError,
    Guard,
    InternalError,
    Leadership,
    MAX_MULTI,
    MAX_PERMITS,
    MultiGuard,
    InvalidArgumentError,
    LockError,
    LockLostError,
    LostEvent,
    NativeClient,
    NativeObserver,
    NotHeldError,
    PermissionDeniedError,
    TimeoutError,
    UnavailableError,
    WouldBlockError,
)
from . import _etcdlock as _native_module

__all__ = [
    "Client",
    "Lock",
    "Guard",
    "LostEvent",
    "Semaphore",
    "Leadership",
    "MultiGuard",
    "Leader",
    "Observer",
    "Status",
    "Contender",
    "AsyncClient",
    "AsyncLock",
    "AsyncGuard",
    "AsyncLeadership",
    "AsyncMultiGuard",
    "AsyncObserver",
    "LockError",
    "InvalidArgumentError",
    "TimeoutError",
    "WouldBlockError",
    "LockLostError",
    "NotHeldError",
    "CancelledError",
    "UnavailableError",
    "AuthFailedError",
    "PermissionDeniedError",
    "ClosedError",
    "InternalError",
    "ERROR_CODES",
    "LOSS_REASONS",
    "MAX_NAME_LEN",
    "MAX_TTL_SECS",
    "MAX_PERMITS",
    "MAX_MULTI",
    "release_on_sigterm",
]

Endpoints = Union[str, Sequence[str], None]

#: Exception class for each core error code name.
ERRORS: Dict[str, Type[LockError]] = {
    code: globals()[cls] for code, _num, cls in ERROR_CODES
}


def _endpoints(endpoints: Endpoints) -> Optional[List[str]]:
    if endpoints is None:
        return None
    if isinstance(endpoints, str):
        return [e.strip() for e in endpoints.split(",") if e.strip()]
    if isinstance(endpoints, (bytes, bytearray)):
        raise TypeError("endpoints must be a str or a sequence of str, not bytes")
    out = list(endpoints)
    for e in out:
        if not isinstance(e, str):
            raise TypeError(f"each endpoint must be a str, not {type(e).__name__}")
    return out


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"lock name must be a str, not {type(name).__name__}")
    return name


def _check_names(names: object) -> List[str]:
    if isinstance(names, (str, bytes, bytearray)) or not isinstance(names, Sequence):
        raise TypeError(f"names must be a sequence of str, not {type(names).__name__}")
    return [_check_name(n) for n in names]


def _check_permits(permits: object) -> int:
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError(f"permits must be an int, not {type(permits).__name__}")
    return permits


def _check_timeout(timeout: object) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    return float(timeout)


# Runtime threads call into Python (settling asyncio futures, running on_lost
# callbacks) only through a gate the native module keeps. At exit it is closed
# after _close_at_exit below (atexit runs handlers last-registered first), and
# closing waits for calls already in progress: a thread that takes the GIL
# once the interpreter is finalizing is killed mid-call by CPython.
atexit.register(_native_module._close_gate)
os.register_at_fork(after_in_child=_native_module._gate_after_fork)

# Native clients still alive (directly, or through a guard that holds one).
_live_clients: "weakref.WeakSet[NativeClient]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # Revoke the leases of clients left open, so their locks and waiter keys go
    # at once instead of after the TTL. (A client inherited across fork() is
    # left alone: its close is a no-op in the child.)
    for c in list(_live_clients):
        try:
            c.close()
        except BaseException:  # pragma: no cover - best effort at exit
            pass


def release_on_sigterm() -> None:
    """Let SIGTERM stop the process the way Ctrl-C does, so its locks are free
    at once instead of after the TTL.

    SIGTERM is how systemd, Kubernetes and docker stop a service, and its
    default action ends Python with no ``finally``, ``with`` exit or atexit
    handler run: every lease stays alive until its TTL runs out. After this
    call SIGTERM raises ``SystemExit(143)`` in the main thread (interrupting a
    blocked ``lock()`` as Ctrl-C does), so ``with`` blocks release their locks
    and, at exit, every client still open is closed (its lease revoked).

    Call it from the main thread. It replaces any SIGTERM handler; a program
    with its own should close its clients there instead.
    """
    import signal

    def _stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)


@dataclass(frozen=True)
class Leader:
    """The leader of an election, as read from etcd."""

    key: str
    """The leader's key (with the namespace), e.g. ``"jobs/694d7a3e4b2c8f05"``."""
    value: bytes
    """Its proclamation."""
    revision: int
    """Its key's create_revision: the leadership's fencing token."""
    lease_id: int
    """Its lease."""


def _leader(t: Optional[Tuple[str, bytes, int, int]]) -> Optional[Leader]:
    return None if t is None else Leader(*t)


@dataclass(frozen=True)
class Contender:
    """One key in the queue of a name (see :meth:`Client.status`)."""

    key: str
    kind: str
    """``"exclusive"`` (mutex, election, writer), ``"reader"`` or ``"permit"``."""
    permits: Optional[int]
    """The semaphore's permit count, for ``"permit"``."""
    holds: bool
    """Holds now (by its kind's rule), or waits."""
    lease_id: int
    ttl_remaining: Optional[int]
    """Seconds left on its lease, if etcd reports it."""
    fencing_token: int
    """The key's create_revision."""
    owner: Optional[str]
    """``host:pid`` for etcdlock keys; None for etcdctl and Go keys."""
    age: Optional[float]
    """Seconds since the key was created (etcdlock keys)."""
    value: bytes
    """The key's value (an election's proclamation, etcdlock's owner info)."""
    host: Optional[str]
    """The holder's host (etcdlock keys)."""
    pid: Optional[int]
    """The holder's process id (etcdlock keys)."""
    language: Optional[str]
    """The language its client uses etcdlock from (``"python"``, ``"rust"``,
    ...), once its meta record is written (keys older than ~100 ms)."""
    local_waiters: Optional[int]
    """Acquisitions of this name in progress in its client: the client's
    local queue (it keeps at most two keys per name in etcd)."""
    foreign: bool
    """A key without etcdlock's owner info: etcdctl, Go's Mutex or Election."""


@dataclass(frozen=True)
class Status:
    """Holders and waiters of one name, as one read saw them."""

    name: str
    revision: int
    """The store revision of the read."""
    holders: List[Contender]
    """Who holds, oldest first."""
    waiters: List[Contender]
    """Who waits, in the order they will be served."""
    kind: Optional[str] = None
    """``"mutex"``, ``"election"``, ``"semaphore"`` or ``"rwlock"``, from
    the contenders' records or keys; None when they do not tell."""


def _status(d: Dict[str, Any]) -> Status:
    return Status(
        name=d["name"],
        kind=d["kind"],
        revision=d["revision"],
        holders=[Contender(**c) for c in d["holders"]],
        waiters=[Contender(**c) for c in d["waiters"]],
    )


class Observer:
    """Leadership changes of one election: an iterator of :class:`Leader`
    (or None while nobody leads), starting with the current state. Each step
    blocks (GIL released, Ctrl-C answered); ``next(timeout)`` bounds one step.
    Ends with :class:`ClosedError` when the client is closed."""

    def __init__(self, native: NativeObserver, name: str) -> None:
        self._native = native
        self.name = name

    def __iter__(self) -> "Observer":
        return self

    def __next__(self) -> Optional[Leader]:
        return _leader(self._native.next(None))

    def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next leadership state; :class:`TimeoutError` after ``timeout`` seconds."""
        return _leader(self._native.next(_check_timeout(timeout)))

    def __repr__(self) -> str:
        return f"<etcdlock.Observer name={self.name!r}>"


class AsyncObserver:
    """:class:`Observer` as an async iterator (``async for leader in ...``)."""

    def __init__(self, native: NativeObserver, name: str) -> None:
        self._native = native
        self.name = name

    def __aiter__(self) -> "AsyncObserver":
        return self

    async def __anext__(self) -> Optional[Leader]:
        return _leader(await self._native.next_async(None))

    async def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next leadership state; :class:`TimeoutError` after ``timeout`` seconds."""
        return _leader(await self._native.next_async(_check_timeout(timeout)))

    def __repr__(self) -> str:
        return f"<etcdlock.AsyncObserver name={self.name!r}>"


class Client:
    """A connection to etcd that hands out locks; one lease kept alive in the
    background for all of them. Connecting happens in the constructor (raises
    :class:`UnavailableError` when no endpoint answers within
    ``connect_timeout``). Usable as a context manager (closes on exit).

    Args:
        endpoints: ``["127.0.0.1:2379", ...]`` or ``"host:port,host:port"``;
            ``http://`` / ``https://`` URLs also work. Default: ``$ETCDLOCK_ENDPOINTS``
            or ``127.0.0.1:2379``.
        ttl: lease TTL in whole seconds (1 .. 9e9). Default ``$ETCDLOCK_TTL`` or 15.
        namespace: prefix prepended to every key this client touches.
        username, password: etcd auth (given together).
        ca, cert, key: PEM file paths for TLS / mutual TLS.
        domain: TLS server name to verify instead of the endpoint host.
        connect_timeout: seconds to connect, lease grant included (default
            ``$ETCDLOCK_CONNECT_TIMEOUT`` or 5.0).
        request_timeout: seconds that bound every call that does not wait for
            a lock (``try_lock``, release, guarded operations, ``status``),
            retries and failover included: :class:`UnavailableError` after
            it (default ``$ETCDLOCK_REQUEST_TIMEOUT`` or 2.0). Calls that wait
            are bounded by their own ``timeout``.
        margin: seconds taken off the TTL for local loss detection (default:
            TTL/5, at most 2 s; ``$ETCDLOCK_MARGIN``). A margin above half
            the TTL is :class:`InvalidArgumentError`.
        watch_held_keys: watch each held key so an outside delete is reported
            at once (default ``$ETCDLOCK_WATCH_HELD_KEYS`` or True).

    Every argument left out (None) comes from its ``ETCDLOCK_*`` variable,
    else the default; a given one wins, and a malformed variable for it is
    ignored (the rule every etcdlock language follows).

    Text arguments (names, keys, values, namespace, ...) that UTF-8 cannot
    encode (a lone surrogate) raise :class:`InvalidArgumentError`.
    """

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
    ) -> None:
        self._native = NativeClient.connect(
            _endpoints(endpoints),
            ttl,
            namespace,
            username,
            password,
            _path(ca),
            _path(cert),
            _path(key),
            domain,
            connect_timeout,
            request_timeout,
            margin,
            watch_held_keys,
        )
        self._pid = os.getpid()
        _live_clients.add(self._native)

    def lock(self, name: str, timeout: Optional[float] = None) -> "Lock":
        """A :class:`Lock` handle for ``name``; nothing is sent to etcd until
        it is acquired. ``timeout`` (seconds, None = forever) applies to
        ``with`` and to ``acquire()`` without an explicit timeout."""
        return Lock(self, _check_name(name), _check_timeout(timeout))

    def try_lock(self, name: str) -> Optional[Guard]:
        """Take the lock ``name`` if it is free (no waiting): a held
        :class:`Guard`, or None when someone else holds or waits for it."""
        return self._native.try_lock(_check_name(name))

    def acquire(self, name: str, timeout: Optional[float] = None) -> Guard:
        """Wait for the lock ``name`` and return the held :class:`Guard`.
        Raises :class:`TimeoutError` after ``timeout`` seconds."""
        return self._native.lock(_check_name(name), _check_timeout(timeout))

    def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> "Semaphore":
        """A :class:`Semaphore` handle: at most ``permits`` holders of
        ``name`` at once, cluster-wide. Nothing is sent until acquired."""
        return Semaphore(self, _check_name(name), _check_permits(permits), _check_timeout(timeout))

    def acquire_permit(self, name: str, permits: int, timeout: Optional[float] = None) -> Guard:
        """Wait (FIFO) for one of ``permits`` permits of the semaphore
        ``name``: a held :class:`Guard` (fencing token, loss signal, guarded
        ops; ``with`` releases). Every contender must agree on ``permits``
        (else :class:`InvalidArgumentError`). ``timeout=0`` is one try."""
        return self._native.acquire_permit(_check_name(name), _check_permits(permits), _check_timeout(timeout))

    def acquire_read(self, name: str, timeout: Optional[float] = None) -> Guard:
        """Wait for the read side of the read-write lock ``name``: shared
        with other readers, excluded by writers. The write side is the plain
        lock (:meth:`acquire` / :meth:`lock`), so ``etcdctl lock`` and Go's
        Mutex on ``name`` exclude readers too. FIFO: a reader that comes after
        a waiting writer waits for it."""
        return self._native.read_lock(_check_name(name), _check_timeout(timeout))

    def acquire_many(self, names: Sequence[str], timeout: Optional[float] = None) -> MultiGuard:
        """Lock every name in ``names`` together: one :class:`MultiGuard`.
        The waiter keys are created in one etcd transaction, so all clients
        queue in the same order on every name: no deadlock, no retry loop. At
        most :data:`MAX_MULTI` names; timeout or Ctrl-C removes every key, and
        losing any one lock loses the whole hold."""
        return self._native.lock_many(_check_names(names), _check_timeout(timeout))

    def campaign(self, name: str, value: Union[str, bytes], timeout: Optional[float] = None) -> Leadership:
        """Wait to be elected leader of ``name`` (FIFO among candidates),
        announcing ``value``: a :class:`Leadership` (a :class:`Guard` with
        ``proclaim`` and ``resign``; ``with`` resigns). Same keys as Go's
        ``concurrency.Election`` and ``etcdctl elect``."""
        return self._native.campaign(_check_name(name), value, _check_timeout(timeout))

    def leader(self, name: str) -> Optional[Leader]:
        """The current :class:`Leader` of the election ``name``, or None."""
        return _leader(self._native.leader(_check_name(name)))

    def observe(self, name: str) -> Observer:
        """Follow the election ``name``: an iterator of :class:`Leader` (or
        None when nobody leads) that yields the current state first, then
        each change (a new proclamation is a change)."""
        return Observer(self._native.observe(_check_name(name)), name)

    def status(self, name: str) -> Status:
        """Holders and waiters of ``name`` for any kind (mutex, semaphore,
        read-write lock, election; etcdctl and Go keys too): the data
        ``etcdlock status`` shows."""
        return _status(self._native.status(_check_name(name)))

    def list(self, prefix: str = "") -> List[Status]:
        """Every lock, election, semaphore and read-write lock whose name
        starts with ``prefix`` (all of this client's namespace by default),
        sorted by name, from one read: what ``etcdlock list`` shows."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        return [_status(d) for d in self._native.list(prefix)]

    def release(self, name: str, token: int) -> bool:
        """Free a lock whose holder is wedged: delete the hold of ``name``
        whose fencing token is ``token`` (``status`` shows it), whoever holds
        it; a later holder is never touched. True if it was released, False
        if no hold has that token. The former holder's guard reports the loss
        with reason ``KeyDeleted``."""
        return self._native.release(_check_name(name), token)

    def close(self) -> None:
        """Close the client: revoke its lease, which releases every lock it
        holds (their guards report ``ClientClosed``). Idempotent."""
        if self._pid == os.getpid():
            self._native.close()
        _live_clients.discard(self._native)

    @property
    def ttl(self) -> int:
        """The effective lease TTL in seconds (etcd may raise a small one)."""
        return self._native.ttl

    def prometheus(self, **labels: str) -> str:
        """The same metrics in Prometheus' text exposition format (version
        0.0.4), named by core's one list (``etcdlock_acquire_seconds``,
        ``etcdlock_held``, ``etcdlock_lost_total``, ...: the names Java's
        Micrometer binder and ``etcdlock run --metrics-listen`` use), with
        ``labels`` on every series. Serve it from your own ``/metrics``
        handler, or hand it to a ``prometheus_client`` custom collector."""
        return self._native.prometheus(sorted(labels.items()))

    def metrics(self) -> Dict[str, Any]:
        """What this client has done so far, from the native core (the same
        figures in every language): ``acquisitions`` by outcome (``acquired``,
        ``timeout``, ``would_block``, ``cancelled``, ``error``: each
        ``{"count", "wait_seconds"}``), ``waiting`` and ``held`` now,
        ``held_seconds`` (current holds, summed), ``holds_ended`` and
        ``hold_seconds``, ``lost`` by reason (``LeaseExpired``, ``KeyDeleted``,
        ``ConnectionLost``, ``ClientClosed``), ``keepalives`` and
        ``keepalive_rtt`` (seconds, None before the first). No etcd request."""
        return self._native.metrics()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._native.closed

    @property
    def endpoints(self) -> str:
        """The endpoints, comma separated."""
        return self._native.endpoints

    @property
    def namespace(self) -> str:
        """The key namespace ("" when none)."""
        return self._native.namespace

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<etcdlock.Client endpoints={self.endpoints!r} ttl={self.ttl} closed={self.closed}>"


def _path(p: Optional[Any]) -> Optional[str]:
    return None if p is None else os.fspath(p)


class Lock:
    """A lock handle shaped like :class:`threading.Lock`: ``acquire`` /
    ``release`` / ``locked`` and ``with``. ``with lock as guard:`` raises
    (:class:`TimeoutError`, :class:`UnavailableError`, ...) instead of running
    the block without the lock, and yields the held :class:`Guard`.

    Threads may share one handle: each acquisition is a separate waiter in
    etcd, so they exclude each other (like a ``threading.Lock``, a thread
    that acquires twice without releasing waits forever)."""

    def __init__(self, client: Client, name: str, timeout: Optional[float]) -> None:
        self._client = client
        self.name = name
        self.timeout = timeout
        self._guard: Optional[Guard] = None
        self._slot = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire like :meth:`threading.Lock.acquire`: True when acquired,
        False if not free (``blocking=False``) or not acquired within
        ``timeout`` seconds. ``timeout=-1`` uses the handle's default
        timeout. Other failures raise."""
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            g = self._client._native.try_lock(self.name)
        else:
            t = _check_timeout(timeout)
            if t == -1:
                t = self.timeout
            elif t is not None and t < 0:
                raise ValueError("timeout value must be a non-negative number or -1")
            elif t is not None and t > threading.TIMEOUT_MAX:
                raise OverflowError("timeout value is too large")
            if t == 0:
                g = self._client._native.try_lock(self.name)
            else:
                try:
                    g = self._client._native.lock(self.name, t)
                except TimeoutError:
                    return False
        if g is None:
            return False
        with self._slot:
            self._guard = g
        return True

    def release(self) -> None:
        """Release the lock. Raises :class:`NotHeldError` if this handle does
        not hold it, :class:`LockLostError` if the hold had been lost."""
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
        """The held :class:`Guard`, or None."""
        return self._guard

    def __enter__(self) -> Guard:
        g = self._client._native.lock(self.name, self.timeout)
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
    :class:`threading.BoundedSemaphore`: ``acquire(blocking, timeout)`` /
    ``release()`` and ``with sem as permit:`` (yields the held :class:`Guard`).
    Each acquisition is one permit in etcd; threads may share the handle.
    ``release()`` without a permit held through this handle raises
    :class:`NotHeldError` (a ``RuntimeError``; BoundedSemaphore raises
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


_AG = TypeVar("_AG", bound="AsyncGuard")


class AsyncGuard:
    """A held lock, asyncio flavour: the same properties as :class:`Guard`,
    with awaitable ``put`` / ``get`` / ``delete`` / ``unlock`` /
    ``wait_lost``, and ``async with guard:`` (unlocks at the end)."""

    def __init__(self, guard: Guard) -> None:
        self.sync = guard
        """The underlying blocking :class:`Guard`."""

    @property
    def name(self) -> str:
        return self.sync.name

    @property
    def key(self) -> str:
        return self.sync.key

    @property
    def lease_id(self) -> int:
        return self.sync.lease_id

    @property
    def fencing_token(self) -> int:
        return self.sync.fencing_token

    @property
    def is_held(self) -> bool:
        return self.sync.is_held

    @property
    def state(self) -> str:
        return self.sync.state

    @property
    def loss_reason(self) -> Optional[str]:
        return self.sync.loss_reason

    @property
    def lost(self) -> LostEvent:
        """Event-like loss view (``is_set()``; ``await lost.wait_async(timeout)``)."""
        return self.sync.lost

    def on_lost(self, callback: Callable[[str], Any]) -> None:
        """See :meth:`Guard.on_lost` (the callback runs on its own thread)."""
        self.sync.on_lost(callback)

    @property
    def renewal_failing(self) -> Optional[float]:
        """See :attr:`Guard.renewal_failing`."""
        return self.sync.renewal_failing

    def on_renewal(self, callback: Callable[[bool, Optional[float]], Any]) -> None:
        """See :meth:`Guard.on_renewal` (the callback runs on its own thread)."""
        self.sync.on_renewal(callback)

    async def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """True once the hold is lost; False after ``timeout`` or on normal release."""
        return await self.sync.lost.wait_async(_check_timeout(timeout))

    async def put(self, key: Union[str, bytes], value: Union[str, bytes]) -> None:
        """Guarded put (see :meth:`Guard.put`)."""
        await self.sync.put_async(key, value)

    async def get(self, key: Union[str, bytes]) -> Optional[bytes]:
        """Guarded get (see :meth:`Guard.get`)."""
        return await self.sync.get_async(key)

    async def delete(self, key: Union[str, bytes]) -> bool:
        """Guarded delete (see :meth:`Guard.delete`)."""
        return await self.sync.delete_async(key)

    async def unlock(self) -> None:
        """Release (see :meth:`Guard.unlock`)."""
        await self.sync.unlock_async()

    async def __aenter__(self: _AG) -> _AG:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            await self.unlock()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return repr(self.sync).replace("etcdlock.Guard", "etcdlock.AsyncGuard")


class AsyncLeadership(AsyncGuard):
    """:class:`Leadership`, asyncio flavour: an :class:`AsyncGuard` with
    awaitable ``proclaim`` and ``resign`` (``async with`` resigns)."""

    sync: Leadership

    def __init__(self, leadership: Leadership) -> None:
        super().__init__(leadership)

    async def proclaim(self, value: Union[str, bytes]) -> None:
        """Announce a new value; :class:`LockLostError` if we no longer lead."""
        await self.sync.proclaim_async(value)

    async def resign(self) -> None:
        """Give up leadership (same as ``unlock``)."""
        await self.sync.resign_async()

    def __repr__(self) -> str:
        return repr(self.sync).replace("etcdlock.Leadership", "etcdlock.AsyncLeadership")


class AsyncMultiGuard:
    """:class:`MultiGuard`, asyncio flavour (``async with`` unlocks every lock)."""

    def __init__(self, multi: MultiGuard) -> None:
        self.sync = multi
        """The underlying :class:`MultiGuard`."""

    @property
    def names(self) -> List[str]:
        return self.sync.names

    @property
    def keys(self) -> List[str]:
        return self.sync.keys

    @property
    def fencing_tokens(self) -> List[int]:
        return self.sync.fencing_tokens

    @property
    def is_held(self) -> bool:
        return self.sync.is_held

    @property
    def loss(self) -> Optional[Tuple[str, str]]:
        return self.sync.loss

    async def wait_lost(self, timeout: Optional[float] = None) -> Optional[Tuple[str, str]]:
        """(name, reason) of the first lock lost; None on release or after ``timeout``."""
        return await self.sync.wait_lost_async(_check_timeout(timeout))

    async def unlock(self) -> None:
        """Release every lock."""
        await self.sync.unlock_async()

    async def __aenter__(self) -> "AsyncMultiGuard":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            await self.unlock()
        except LockError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return repr(self.sync).replace("etcdlock.MultiGuard", "etcdlock.AsyncMultiGuard")


class AsyncClient:
    """The asyncio client: the same options as :class:`Client`. Connects on
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
    ) -> None:
        self._args = (
            _endpoints(endpoints),
            ttl,
            namespace,
            username,
            password,
            _path(ca),
            _path(cert),
            _path(key),
            domain,
            connect_timeout,
            request_timeout,
            margin,
            watch_held_keys,
        )
        self._native: Optional[NativeClient] = None
        self._connecting: Optional[asyncio.Lock] = None
        self._closed = False

    async def connect(self) -> "AsyncClient":
        """Connect (idempotent). Raises :class:`UnavailableError`, ..."""
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
                self._native = await NativeClient.connect_async(*self._args)
                _live_clients.add(self._native)
            return self._native

    def lock(self, name: str, timeout: Optional[float] = None) -> "AsyncLock":
        """An :class:`AsyncLock` handle for ``name`` (``async with`` it)."""
        return AsyncLock(self, _check_name(name), _check_timeout(timeout))

    async def acquire(self, name: str, timeout: Optional[float] = None) -> AsyncGuard:
        """Wait for the lock and return the held :class:`AsyncGuard`. Raises
        :class:`TimeoutError` after ``timeout`` seconds. Cancelling the task
        removes the waiter key."""
        c = await self._client()
        return AsyncGuard(await c.lock_async(_check_name(name), _check_timeout(timeout)))

    async def try_lock(self, name: str) -> Optional[AsyncGuard]:
        """Take the lock if free: an :class:`AsyncGuard`, or None."""
        c = await self._client()
        g = await c.try_lock_async(_check_name(name))
        return None if g is None else AsyncGuard(g)

    async def acquire_permit(self, name: str, permits: int, timeout: Optional[float] = None) -> AsyncGuard:
        """:meth:`Client.acquire_permit`, awaitable (cancelling removes the waiter key)."""
        c = await self._client()
        return AsyncGuard(await c.acquire_permit_async(_check_name(name), _check_permits(permits), _check_timeout(timeout)))

    async def acquire_read(self, name: str, timeout: Optional[float] = None) -> AsyncGuard:
        """:meth:`Client.acquire_read`, awaitable."""
        c = await self._client()
        return AsyncGuard(await c.read_lock_async(_check_name(name), _check_timeout(timeout)))

    async def acquire_many(self, names: Sequence[str], timeout: Optional[float] = None) -> AsyncMultiGuard:
        """:meth:`Client.acquire_many`, awaitable."""
        c = await self._client()
        return AsyncMultiGuard(await c.lock_many_async(_check_names(names), _check_timeout(timeout)))

    async def campaign(self, name: str, value: Union[str, bytes], timeout: Optional[float] = None) -> AsyncLeadership:
        """:meth:`Client.campaign`, awaitable."""
        c = await self._client()
        return AsyncLeadership(await c.campaign_async(_check_name(name), value, _check_timeout(timeout)))

    async def leader(self, name: str) -> Optional[Leader]:
        """:meth:`Client.leader`, awaitable."""
        c = await self._client()
        return _leader(await c.leader_async(_check_name(name)))

    async def observe(self, name: str) -> AsyncObserver:
        """:meth:`Client.observe` as an async iterator:
        ``async for leader in await client.observe("jobs"):``."""
        c = await self._client()
        return AsyncObserver(c.observe(_check_name(name)), name)

    async def status(self, name: str) -> Status:
        """:meth:`Client.status`, awaitable."""
        c = await self._client()
        return _status(await c.status_async(_check_name(name)))

    async def list(self, prefix: str = "") -> List[Status]:
        """:meth:`Client.list`, awaitable."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        c = await self._client()
        return [_status(d) for d in await c.list_async(prefix)]

    async def release(self, name: str, token: int) -> bool:
        """:meth:`Client.release`, awaitable."""
        c = await self._client()
        return await c.release_async(_check_name(name), token)

    async def close(self) -> None:
        """Close (revokes the lease, releasing every lock). Idempotent."""
        self._closed = True
        if self._native is not None:
            await self._native.close_async()
            _live_clients.discard(self._native)

    @property
    def ttl(self) -> Optional[int]:
        """The effective TTL once connected, else None."""
        return None if self._native is None else self._native.ttl

    def metrics(self) -> Optional[Dict[str, Any]]:
        """:meth:`Client.metrics`, once connected (else None)."""
        return None if self._native is None else self._native.metrics()

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
    """A lock handle shaped like :class:`asyncio.Lock`: ``await acquire()``,
    ``await release()`` (a coroutine here: it talks to etcd), ``locked()``,
    and ``async with lock as guard:`` which raises instead of running the
    block without the lock."""

    def __init__(self, client: AsyncClient, name: str, timeout: Optional[float]) -> None:
        self._client = client
        self.name = name
        self.timeout = timeout
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
            g = await self._client.try_lock(self.name)
            if g is None:
                return False
        else:
            try:
                g = await self._client.acquire(self.name, t)
            except TimeoutError:
                return False
        self._guard = g
        return True

    async def release(self) -> None:
        """Release; :class:`NotHeldError` if not held by this handle."""
        g, self._guard = self._guard, None
        if g is None:
            raise NotHeldError(f"lock {self.name!r} is not held by this handle")
        await g.unlock()

    def locked(self) -> bool:
        """True while this handle holds the lock."""
        return self._guard is not None and self._guard.is_held

    @property
    def guard(self) -> Optional[AsyncGuard]:
        """The held :class:`AsyncGuard`, or None."""
        return self._guard

    def __repr__(self) -> str:
        # asyncio.Lock's shape: "<asyncio.locks.Lock object at 0x... [unlocked]>".
        state = "locked" if self.locked() else "unlocked"
        return f"<etcdlock.AsyncLock name={self.name!r} object at {id(self):#x} [{state}]>"

    async def __aenter__(self) -> AsyncGuard:
        self._guard = await self._client.acquire(self.name, self.timeout)
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
