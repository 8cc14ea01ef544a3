"""A tooz coordination driver on etcdlock: ``etcdlock://HOST:PORT``.

tooz (OpenStack's coordination library) finds it by its entry point
(``tooz.backends``: ``etcdlock``), so code written against tooz gets
etcdlock's locks by changing its URL:

    coordinator = tooz.coordination.get_coordinator(
        "etcdlock://127.0.0.1:2379?ttl=10&namespace=myapp/", b"worker-1")
    coordinator.start()
    with coordinator.get_lock(b"resize-volume-42"):
        ...  # one worker at a time, FIFO, with a fencing token

What tooz users get beyond its etcd3gw driver: waiters queue in FIFO order
and wake on a watch (no polling), the session's lease is renewed in the
background (``heartbeat`` has nothing to do), a holder whose lease is lost
learns it, and shared locks exist (``acquire(shared=True)``: the read side
of etcdlock's read-write lock, excluded by exclusive holders of the name).
Groups and leader election are not provided (``tooz.NotImplemented``): use
etcdlock's own election for leadership.

URL: ``etcdlock://HOST:PORT[?OPTIONS]``; more endpoints with
``endpoints=HOST:PORT,HOST:PORT``; ``ttl`` (seconds), ``namespace`` and every
other ``etcdlock.Client`` option by name; TLS with ``etcdlock+https``.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Union

import tooz
from tooz import coordination, locking, utils

import etcdlock

__all__ = ["EtcdlockDriver", "EtcdlockLock"]

_CLIENT_OPTIONS = (
    "ttl", "namespace", "username", "password", "ca", "cert", "key", "domain", "connect_timeout", "request_timeout",
)


def _translate(e: BaseException) -> BaseException:
    if isinstance(e, etcdlock.UnavailableError):
        return coordination.ToozConnectionError(str(e))
    if isinstance(e, etcdlock.TimeoutError):
        return coordination.OperationTimedOut(str(e))
    return tooz.ToozError(str(e))


class EtcdlockLock(locking.Lock):
    """A tooz lock on an etcdlock lock (``shared``: its read side).

    Like tooz's other drivers, one lock object is not reentrant: a blocking
    ``acquire`` of a name the object holds waits for its release (from
    another thread), a non-blocking one returns False; shared holds stack
    (each ``release`` ends one)."""

    def __init__(self, coord: "EtcdlockDriver", name: bytes) -> None:
        super().__init__(name)
        self._coord = coord
        self._lock_name = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)
        self._guards: List[etcdlock.Guard] = []
        self._mu = threading.Lock()

    def acquire(self, blocking: Union[bool, float] = True, shared: bool = False, timeout: Optional[float] = None) -> bool:
        """Take the lock: ``blocking`` True waits (up to ``timeout`` seconds
        if given), False tries once, a number waits that many seconds. True
        when taken, False when not."""
        client = self._coord._client_or_raise()
        wait: Optional[float]
        if blocking is False:
            wait = 0.0
        elif blocking is True:
            wait = timeout
        else:
            wait = float(blocking)
        try:
            if shared:
                guard = client.acquire_read(self._lock_name, wait)
            elif wait == 0.0:
                maybe = client.try_lock(self._lock_name)
                if maybe is None:
                    return False
                guard = maybe
            else:
                guard = client.acquire(self._lock_name, wait)
        except (etcdlock.TimeoutError, etcdlock.WouldBlockError):
            return False
        except etcdlock.LockError as e:
            raise _translate(e) from e
        with self._mu:
            self._guards.append(guard)
        self._coord._held.add(self)
        return True

    def release(self) -> bool:
        """Release the latest hold of this object: True if it had one and
        still held it, else False."""
        with self._mu:
            guard = self._guards.pop() if self._guards else None
            if not self._guards:
                self._coord._held.discard(self)
        if guard is None:
            return False
        try:
            guard.unlock()
            return True
        except (etcdlock.LockLostError, etcdlock.NotHeldError):
            return False
        except etcdlock.LockError as e:
            raise _translate(e) from e

    def break_(self) -> bool:
        """Free the lock whoever holds it (an operator's release by fencing
        token): True if a holder was removed; it learns it lost the lock."""
        client = self._coord._client_or_raise()
        try:
            st = client.status(self._lock_name)
            freed = False
            for h in st.holders:
                freed |= client.release(self._lock_name, h.fencing_token)
            return freed
        except etcdlock.LockError as e:
            raise _translate(e) from e

    def heartbeat(self) -> bool:
        """Nothing to do: the session's lease is renewed in the background.
        True while this object holds the lock."""
        return self.acquired

    @property
    def acquired(self) -> bool:
        with self._mu:
            return any(g.is_held for g in self._guards)

    @property
    def fencing_token(self) -> Optional[int]:
        """The latest hold's fencing token, while held (etcdlock's, beyond tooz's API)."""
        with self._mu:
            return self._guards[-1].fencing_token if self._guards else None


class EtcdlockDriver(coordination.CoordinationDriver):
    """tooz's coordinator over one ``etcdlock.Client`` (one session)."""

    CHARACTERISTICS = (
        coordination.Characteristics.NON_TIMEOUT_BASED,
        coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
        coordination.Characteristics.LINEARIZABLE,
        coordination.Characteristics.SERIALIZABLE,
    )

    def __init__(self, member_id: bytes, parsed_url: Any, options: Dict[str, Any]) -> None:
        super().__init__(member_id, parsed_url, options)
        opts = utils.collapse(options)
        scheme = "https" if parsed_url.scheme.endswith("https") else "http"
        endpoints: List[str] = []
        if parsed_url.hostname:
            endpoints.append(f"{scheme}://{parsed_url.hostname}:{parsed_url.port or 2379}")
        endpoints += [e if "://" in e else f"{scheme}://{e}" for e in str(opts.get("endpoints", "")).split(",") if e]
        self._kwargs: Dict[str, Any] = {"endpoints": endpoints or None}
        for k in _CLIENT_OPTIONS:
            if k in opts:
                v = opts[k]
                self._kwargs[k] = int(v) if k == "ttl" else float(v) if k.endswith("_timeout") else v
        self._client: Optional[etcdlock.Client] = None
        self._held: "set[EtcdlockLock]" = set()

    def _client_or_raise(self) -> etcdlock.Client:
        c = self._client
        if c is None:
            raise tooz.ToozError("the coordinator is not started")
        return c

    def _start(self) -> None:
        try:
            self._client = etcdlock.Client(**self._kwargs)
        except etcdlock.LockError as e:
            raise _translate(e) from e

    def _stop(self) -> None:
        for lock in list(self._held):
            try:
                lock.release()
            except tooz.ToozError:
                pass
        if self._client is not None:
            self._client.close()
            self._client = None

    def get_lock(self, name: bytes) -> EtcdlockLock:
        return EtcdlockLock(self, name)

    def heartbeat(self) -> float:
        """Nothing to do (the lease is kept alive in the background): the
        seconds until tooz may call again."""
        c = self._client
        return max(1.0, (c.ttl if c is not None else 10) / 3)

    # Groups and leader election are not provided: every call says so (tooz
    # callers and tooz's own tests treat tooz.NotImplemented as "skip").
    def _not_provided(self, *_args: Any, **_kwargs: Any) -> Any:
        raise tooz.NotImplemented("etcdlock's tooz driver provides locks; use etcdlock's election for leadership")

    watch_join_group = unwatch_join_group = _not_provided
    watch_leave_group = unwatch_leave_group = _not_provided
    watch_elected_as_leader = unwatch_elected_as_leader = _not_provided
