"""The blocking API: ``Client`` and ``Observer`` (``Lock`` and ``Semaphore``,
the handles it makes, are in ``_handles``)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Type, TypeVar, Union, overload

from ._etcdlock import (
    Guard,
    Leadership,
    MultiGuard,
    NativeClient,
    NativeObserver,
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
from ._sync import Barrier, Latch
from ._leader import LeaderEvent, LeaderLoop, Term, _check_retry
from ._once import OnceHold, _check_span, once as _once, take_once as _take_once
from ._otel import Tracing, traced as _traced
from ._reentry import RLock, thread_owner
from ._handles import Lock, Semaphore

T = TypeVar("T")


class Observer:
    """Leadership changes of one election: an iterator of ``Leader``
    (or None while nobody leads), starting with the current state. Each step
    blocks (GIL released, Ctrl-C answered); ``next(timeout)`` bounds one step.
    Ends with ``ClosedError`` when the client is closed."""

    def __init__(self, native: NativeObserver, name: str) -> None:
        self._native = native
        self.name = name

    def __iter__(self) -> "Observer":
        return self

    def __next__(self) -> Optional[Leader]:
        return _leader(self._native.next(None))

    def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next leadership state; ``TimeoutError`` after ``timeout`` seconds."""
        return _leader(self._native.next(_check_timeout(timeout)))

    def __repr__(self) -> str:
        return f"<etcdlock.Observer name={self.name!r}>"



class Client:
    """A connection to etcd that hands out locks; one lease kept alive in the
    background for all of them. Connecting happens in the constructor (raises
    ``UnavailableError`` when no endpoint answers within
    ``connect_timeout``). Usable as a context manager (closes on exit).

    Args:
        endpoints: ``["127.0.0.1:2379", ...]`` or ``"host:port,host:port"``;
            ``http://`` / ``https://`` URLs also work. Default: ``$ETCDLOCK_ENDPOINTS``
            or ``127.0.0.1:2379``.
        ttl: lease TTL in whole seconds (1 .. 9e9). Default ``$ETCDLOCK_TTL`` or 15.
        namespace: prefix prepended to every key this client touches.
        username: etcd auth user (given with ``password``).
        password: etcd auth password (given with ``username``).
        ca: PEM file of the CA that signed the members' certificates (TLS).
        cert: PEM file of the client's certificate (mutual TLS, with ``key``).
        key: PEM file of the client's private key (mutual TLS, with ``cert``).
        domain: TLS server name to verify instead of the endpoint host.
        connect_timeout: seconds to connect, lease grant included (default
            ``$ETCDLOCK_CONNECT_TIMEOUT`` or 5.0).
        request_timeout: seconds that bound every call that does not wait for
            a lock (``try_lock``, release, guarded operations, ``status``),
            retries and failover included: ``UnavailableError`` after
            it (default ``$ETCDLOCK_REQUEST_TIMEOUT`` or 2.0). Calls that wait
            are bounded by their own ``timeout``.
        margin: seconds taken off the TTL for local loss detection (default:
            TTL/5, at most 2 s; ``$ETCDLOCK_MARGIN``). A margin above half
            the TTL is ``InvalidArgumentError``.
        watch_held_keys: watch each held key so an outside delete is reported
            at once (default ``$ETCDLOCK_WATCH_HELD_KEYS`` or True).
        keepalive_interval: seconds between lease keep-alives (default 75 %
            of the TTL or TTL - margin - 5 s, whichever is shorter, 8 s at TTL
            15; at small TTLs TTL/3, at most (TTL - margin)/4, at least
            0.25; ``$ETCDLOCK_KEEPALIVE_INTERVAL``); when set, at least 0.05
            and at most TTL - margin - min(5, half of TTL - margin), else
            ``InvalidArgumentError``.
        lazy_connect: return at once without reaching etcd (default False:
            raise ``UnavailableError`` within ``connect_timeout`` when no
            member answers; ``$ETCDLOCK_LAZY_CONNECT``). A service can then
            start while etcd is briefly down: ``ping`` raises
            ``UnavailableError`` until a member answers, and each call
            reaches etcd within its own bound (a lock call its timeout,
            anything else ``request_timeout``).
        tracer_provider: the OpenTelemetry ``TracerProvider`` for this
            client's spans (default: the global one; see the API tour's
            "OpenTelemetry"). Needs ``opentelemetry-api`` (``etcdlock[otel]``).

    Every argument left out (None) comes from its ``ETCDLOCK_*`` variable,
    else the default; a given one wins, and a malformed variable for it is
    ignored (the rule every etcdlock language follows).

    Text arguments (names, keys, values, namespace, ...) that UTF-8 cannot
    encode (a lone surrogate) raise ``InvalidArgumentError``.
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
        keepalive_interval: Optional[float] = None,
        lazy_connect: Optional[bool] = None,
        tracer_provider: Any = None,
    ) -> None:
        _sync_log_level()
        self._tracing = Tracing(tracer_provider)
        self._native = NativeClient.connect(**_options({k: v for k, v in locals().items() if k != "tracer_provider"}))
        self._pid = os.getpid()
        _live_clients.add(self._native)

    def _lock_native(self, name: str, timeout: Optional[float], extras: Dict[str, Any], owner: Optional[int] = None) -> Guard:
        """One lock call (reentrant for ``owner`` if given), in its span."""
        return _traced(self._tracing, "lock", name, lambda: self._native.lock(name, timeout, owner, **extras))

    def _try_native(self, name: str, extras: Dict[str, Any], owner: Optional[int] = None) -> Optional[Guard]:
        """One try_lock call (reentrant for ``owner`` if given), in its span."""
        return _traced(self._tracing, "try_lock", name, lambda: self._native.try_lock(name, owner, **extras))

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
    ) -> "Lock": ...
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
    ) -> RLock: ...
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
    ) -> "Union[Lock, RLock]":
        """A ``Lock`` handle for ``name``; nothing is sent to etcd until
        it is acquired. ``timeout`` (seconds, None = forever) applies to
        ``with`` and to ``acquire()`` without an explicit timeout; the
        acquisition options (see ``acquire``) to every acquisition.
        ``reentrant=True``: an ``RLock`` instead (the holding thread
        acquires it again at once)."""
        if reentrant:
            return RLock(self, name, timeout, lock_delay=lock_delay, lease_time=lease_time, metadata=metadata, detect_deadlock=detect_deadlock)
        return Lock(self, _check_name(name), _check_timeout(timeout), _extras(lock_delay, lease_time, metadata, detect_deadlock))

    def try_lock(
        self,
        name: str,
        *,
        reentrant: bool = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Optional[Guard]:
        """Take the lock ``name`` if it is free (no waiting): a held
        ``Guard``, or None when someone else holds or waits for it, or
        a vanished holder's lock-delay still runs. Options as ``acquire``
        (``reentrant`` too: a thread that holds it gets another handle)."""
        return self._try_native(_check_name(name), _extras(lock_delay, lease_time, metadata), thread_owner() if reentrant else None)

    def acquire(
        self,
        name: str,
        timeout: Optional[float] = None,
        *,
        reentrant: bool = False,
        lock_delay: Optional[float] = None,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
        detect_deadlock: bool = False,
    ) -> Guard:
        """Wait for the lock ``name`` and return the held ``Guard``.
        Raises ``TimeoutError`` after ``timeout`` seconds.

        ``reentrant=True``: the calling thread is the lock's owner; if it
        holds ``name`` (taken with ``reentrant=True`` on this client), the
        call returns at once another handle of the same hold (same key and
        fencing token, nothing sent to etcd), and the lock is released when
        every handle is unlocked. A lost hold is not re-entered:
        ``LockLostError`` until every handle of it is unlocked.

        ``lock_delay`` (seconds, Chubby's lock-delay): if this hold ends
        because its lease ended (the process died or froze, its session
        expired) rather than by ``unlock``, the next holder in any language
        gets the lock no earlier than that long after etcd removed the key,
        so this holder's in-flight requests drain first; a clean unlock hands
        over at once. ``lease_time`` (seconds): hold at most that long (the
        guard then reports ``LeaseExpired``). ``metadata`` (str to str, at
        most 1 KB): shown to everyone by ``status`` as
        ``holder.metadata``, beside the host, pid and language etcdlock adds.

        ``detect_deadlock=True``: raise ``DeadlockError`` (naming the cycle)
        instead of waiting when this wait would close a cycle of clients
        waiting on each other's holds (this client holds a lock another
        client waits for, while it waits for a lock that client, or one
        waiting on it, holds; see ``deadlocks``). Checked when the key is
        queued and again each time the key it waits behind changes, with
        one read of the namespace each time; of a cycle's waits checked at
        once only the youngest fails, so one member backs off."""
        return self._lock_native(
            _check_name(name), _check_timeout(timeout), _extras(lock_delay, lease_time, metadata, detect_deadlock), thread_owner() if reentrant else None
        )

    def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> "Semaphore":
        """A ``Semaphore`` handle: at most ``permits`` holders of
        ``name`` at once, cluster-wide. Nothing is sent until acquired."""
        return Semaphore(self, _check_name(name), _check_permits(permits), _check_timeout(timeout))

    def acquire_permit(
        self,
        name: str,
        permits: int,
        timeout: Optional[float] = None,
        *,
        lease_time: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Guard:
        """Wait (FIFO) for one of ``permits`` permits of the semaphore
        ``name``: a held ``Guard`` (fencing token, loss signal, guarded
        ops; ``with`` releases). Every contender must agree on ``permits``
        (else ``InvalidArgumentError``). ``timeout=0`` is one try.
        The permit's id is its ``fencing_token``: any client can free it with
        ``release_permit``; with ``lease_time`` (seconds) it frees itself
        after that long even if this process never releases it."""
        return self._native.acquire_permit(
            _check_name(name), _check_permits(permits), _check_timeout(timeout), **_extras(None, lease_time, metadata)
        )

    def acquire_read(self, name: str, timeout: Optional[float] = None) -> Guard:
        """Wait for the read side of the read-write lock ``name``: shared
        with other readers, excluded by writers. The write side is the plain
        lock (``acquire`` / ``lock``), so ``etcdctl lock`` and Go's
        Mutex on ``name`` exclude readers too. FIFO: a reader that comes after
        a waiting writer waits for it."""
        return self._native.read_lock(_check_name(name), _check_timeout(timeout))

    def acquire_many(self, names: Sequence[str], timeout: Optional[float] = None) -> MultiGuard:
        """Lock every name in ``names`` together: one ``MultiGuard``.
        The waiter keys are created in one etcd transaction, so all clients
        queue in the same order on every name: no deadlock, no retry loop. At
        most ``MAX_MULTI`` names; timeout or Ctrl-C removes every key, and
        losing any one lock loses the whole hold."""
        return self._native.lock_many(_check_names(names), _check_timeout(timeout))

    def campaign(
        self,
        name: str,
        value: Union[str, bytes],
        timeout: Optional[float] = None,
        *,
        lock_delay: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Leadership:
        """Wait to be elected leader of ``name`` (FIFO among candidates),
        announcing ``value``: a ``Leadership`` (a ``Guard`` with
        ``proclaim`` and ``resign``; ``with`` resigns). Same keys as Go's
        ``concurrency.Election`` and ``etcdctl elect``. ``lock_delay`` and
        ``metadata`` as for ``acquire``."""
        return _traced(
            self._tracing,
            "campaign",
            name,
            lambda: self._native.campaign(_check_name(name), value, _check_timeout(timeout), **_extras(lock_delay, None, metadata)),
        )

    def lead(
        self,
        name: str,
        task: Callable[[Term], object],
        value: Union[str, bytes] = b"",
        *,
        again: bool = True,
        retry: float = 1.0,
        on_event: Optional[Callable[[LeaderEvent], object]] = None,
        lock_delay: Optional[float] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> LeaderLoop:
        """Run ``task`` while this candidate leads the election ``name``
        (announcing ``value``), as a loop: a ``LeaderLoop``, started.

        Each term runs ``task(term)`` in a new thread with a ``Term``
        (``fencing_token``, ``leadership`` for guarded writes, ``cancelled``:
        a ``threading.Event`` set when leadership is lost or the loop
        stops). When the task returns, the loop resigns and campaigns again
        (``again=False``: it stops after one term); after a loss it
        campaigns again once the task has returned, so one loop never runs
        two tasks. A failed campaign is retried after ``retry`` seconds.
        ``with client.lead(...)`` stops the loop and waits for it on exit.
        ``lock_delay`` and ``metadata`` as for ``campaign``."""
        native = self._native.lead(_check_name(name), value, bool(again), _check_retry(retry), **_extras(lock_delay, None, metadata))
        return LeaderLoop(native, name, task, on_event)

    def leader(self, name: str) -> Optional[Leader]:
        """The current ``Leader`` of the election ``name``, or None."""
        return _leader(self._native.leader(_check_name(name)))

    def observe(self, name: str) -> Observer:
        """Follow the election ``name``: an iterator of ``Leader`` (or
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
        return _statuses(self._native.list(prefix))

    def deadlocks(self, prefix: str = "") -> Deadlocks:
        """The clients under ``prefix`` (all of this client's namespace by
        default) that wait on each other, whatever language each uses, from
        one read of the keys and owner records: what ``etcdlock deadlocks``
        shows. A client waits for the clients holding the names its queued
        keys wait on; each ``Cycle`` of such waits is a deadlock (none is
        served until one gives up). Two threads of one client waiting on
        each other are not visible in etcd and are not reported. See
        ``acquire(..., detect_deadlock=True)``."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        return _deadlocks(self._native.deadlocks(prefix))

    def history(self, name: str, since: Optional[float] = None) -> History:
        """The ``History`` of ``name`` from etcd's MVCC history: every key
        queued on it (holds and waits, any language, etcdctl and Go too)
        with its client, fencing token, when it was queued, granted and
        ended, and how: what ``etcdlock history`` shows. ``since``
        (seconds): only the entries that ended that recently or are still
        there; None: as far back as etcd keeps (its compaction,
        ``--auto-compaction-retention``; ``from_revision`` says where it
        began). Costs etcd a put and a delete of a marker key beside the
        name and one watch of the name's keys from that revision."""
        return _history(self._native.history(_check_name(name), _check_since(since)))

    def release(self, name: str, token: int) -> bool:
        """Free a lock whose holder is wedged: delete the hold of ``name``
        whose fencing token is ``token`` (``status`` shows it), whoever holds
        it; a later holder is never touched. True if it was released, False
        if no hold has that token. The former holder's guard reports the loss
        with reason ``KeyDeleted``."""
        return self._native.release(_check_name(name), token)

    def release_permit(self, name: str, id: int) -> bool:
        """Free the permit of the semaphore ``name`` whose id (its
        ``fencing_token``) is ``id``, from any client or process. True if it
        was released, False if no permit has that id any more. Its holder's
        guard reports the loss with reason ``KeyDeleted``."""
        return self._native.release_permit(_check_name(name), id)

    def latch(self, name: str, count: int) -> "Latch":
        """Open the count-down latch ``name`` with ``count`` (created with it
        if new; every process must give the same count, else
        ``InvalidArgumentError``): ``count_down()``, ``wait(timeout)``,
        ``count()``; ``with`` closes it. The latch lives while any client has
        it open; then its keys expire with the TTL."""
        return Latch(self._native.latch(_check_name(name), _check_count("count", count)))

    def barrier(self, name: str, parties: int) -> "Barrier":
        """Open the barrier ``name`` for ``parties`` parties: ``wait(timeout)``
        returns in every party at once when the last has arrived (its arrival
        index). A party that dies while waiting frees its place; a finished
        barrier refuses late parties (``InvalidArgumentError``): use a
        new name per round."""
        return Barrier(self._native.barrier(_check_name(name), _check_count("parties", parties)))

    def take_once(self, name: str, at_most: float) -> Optional[OnceHold]:
        """Take job ``name``'s run-once record until now + ``at_most`` seconds
        if no node holds it: an ``OnceHold``, or None at once if taken
        (never waits). The record outlives this process: a node that dies
        mid-job keeps the job taken until ``at_most`` runs out. What
        ``once`` is made of, for schedulers that need the steps apart."""
        return _take_once(self._native, name, at_most)

    def once(self, name: str, *, at_most: float, at_least: float = 0.0) -> Callable[[Callable[..., T]], Callable[..., Optional[T]]]:
        """Decorate a scheduled job so that one node runs each tick
        (ShedLock's semantics):

            @client.once("nightly-report", at_most=600, at_least=30)
            def nightly_report() -> None: ...

        Each call takes the job's run-once record for ``at_most`` seconds (the
        longest the job may run: after it another node may take the job even
        if this one is still running), runs the function if it got the record
        and returns its result, else returns None at once. When the function
        returns or raises, the record stays taken until ``at_least`` seconds
        after the start (choose it above the nodes' clock skew and the
        schedulers' jitter, below the interval), then frees. Expiry compares
        wall clocks: keep the nodes' clocks in sync (NTP)."""
        _check_name(name)
        _check_span("at_most", at_most)
        _check_span("at_least", at_least)
        return _once(lambda: _take_once(self._native, name, at_most, at_least), at_least)

    def ping(self) -> float:
        """Check etcd answers through this client's session: one read,
        bounded by ``request_timeout`` (``UnavailableError`` after it).
        Returns the round trip in seconds. For health checks."""
        return self._native.ping()

    def close(self) -> None:
        """Close the client: revoke its lease, which releases every lock it
        holds (their guards report ``ClientClosed``), and close its
        connection to etcd now, not when the object is garbage-collected.
        Every ``acquire`` waiting on this client in another thread raises
        ``ClosedError`` at once. Returns within ``request_timeout``,
        whatever etcd does. Idempotent."""
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
        ``keepalive_rtt`` (seconds, None before the first),
        ``wait_histogram`` (per outcome, the calls whose wait fits each of
        core's buckets, the last entry beyond every bucket) and
        ``member_failures`` (requests that failed on an etcd member, which
        was then avoided for a while). No etcd request."""
        return _metrics(self._native.metrics())

    @property
    def closed(self) -> bool:
        """True after ``close``."""
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
