"""Argument checks, the exit hooks and the status records shared by the
blocking and the asyncio API."""

from __future__ import annotations

import atexit
import json
import logging
import os
import weakref
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union, get_args, get_origin, get_type_hints

from ._etcdlock import (
    NativeClient,
)
from . import _etcdlock as _native_module

Endpoints = Union[str, Sequence[str], None]
_T = TypeVar("_T")


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


def _options(args: Dict[str, Any]) -> Dict[str, Any]:
    """A client constructor's arguments (its ``locals()``) as the native
    layer's options: endpoints as a list, a path-like value as str, None left
    out. Core finds each option by name and checks its value."""
    out = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in args.items() if k != "self" and v is not None}
    if "endpoints" in out:
        out["endpoints"] = _endpoints(out["endpoints"])
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


def _check_count(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what} must be an int, not {type(n).__name__}")
    return n


def _extras(lock_delay: object, lease_time: object, metadata: object, detect_deadlock: object = False) -> Dict[str, Any]:
    """The acquisition options that were given, for the native calls (which
    check them by core's one rule)."""
    out: Dict[str, Any] = {}
    if detect_deadlock is not None and detect_deadlock is not False:
        out["detect_deadlock"] = detect_deadlock
    if lock_delay is not None:
        out["lock_delay"] = lock_delay
    if lease_time is not None:
        out["lease_time"] = lease_time
    if metadata is not None:
        out["metadata"] = metadata
    return out


def _check_timeout(timeout: object) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    return float(timeout)


def _check_since(since: object) -> Optional[float]:
    if since is None:
        return None
    if isinstance(since, bool) or not isinstance(since, (int, float)):
        raise TypeError(f"since must be a number of seconds or None, not {type(since).__name__}")
    return float(since)


# Runtime threads call into Python (settling asyncio futures, running on_lost
# callbacks) only through a gate the native module keeps. At exit it is closed
# after _close_at_exit below (atexit runs handlers last-registered first), and
# closing waits for calls already in progress: a thread that takes the GIL
# once the interpreter is finalizing is killed mid-call by CPython.
atexit.register(_native_module._close_gate)
os.register_at_fork(after_in_child=_native_module._gate_after_fork)

#: The library's logger. Core's records arrive here: ``DEBUG`` for each hold
#: acquired and released, ``INFO`` when an etcd member fails over or the watch
#: stream is re-created, ``WARNING`` when keep-alives start failing (a hold at
#: risk), when a hold is lost and when an unlock could not reach etcd. Each
#: record carries ``record.etcdlock``: its fields (``lock``, ``reason``,
#: ``fencing_token``, ...). Nothing is printed unless the application
#: configures logging (a NullHandler stops Python's last-resort output).
logger = logging.getLogger("etcdlock")
logger.addHandler(logging.NullHandler())


def _log_record(levelno: int, target: str, message: str, fields: List[Tuple[str, str]]) -> None:
    if logger.isEnabledFor(levelno):
        text = message + "".join(f" {k}={v}" for k, v in fields)
        logger.log(levelno, "%s", text, extra={"etcdlock": dict(fields), "etcdlock_target": target})


def _sync_log_level() -> None:
    """Tell core which records the logger wants now (called as each client
    is created: configure logging before creating clients)."""
    _native_module._set_log_level(logger.getEffectiveLevel() if logger.isEnabledFor(logging.CRITICAL) else 100)


_native_module._forward_logs(_log_record)
_sync_log_level()


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
    """One key in the queue of a name (see ``Client.status``)."""

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
    metadata: Dict[str, str] = field(default_factory=dict)
    """What its acquisition gave as ``metadata=`` (empty until its meta
    record is written, ~100 ms into a use of the name)."""


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

    @property
    def holder(self) -> Optional[Contender]:
        """The oldest holder, or None when nobody holds."""
        return self.holders[0] if self.holders else None


@dataclass(frozen=True)
class Party:
    """A client in a cycle of waits (see ``Client.deadlocks``), from its key."""

    lease_id: int
    """Its session's lease: the client."""
    owner: Optional[str]
    """``host:pid`` for etcdlock keys; None for etcdctl and Go keys."""
    host: Optional[str]
    pid: Optional[int]
    language: Optional[str]
    """The language its client uses etcdlock from (``"python"``, ``"java"``, ...)."""


@dataclass(frozen=True)
class WaitEdge:
    """One wait of a cycle: ``waiter`` waits in ``name`` for ``holder``."""

    waiter: Party
    name: str
    """The lock name it waits for."""
    waiter_key: str
    """Its queued key (with the namespace)."""
    waiter_revision: int
    """Its key's create_revision: when its wait reached etcd."""
    holder: Party
    """The client holding ``name`` that it waits for."""
    holder_key: str
    fencing_token: int
    """The holder's fencing token."""


@dataclass(frozen=True)
class Cycle:
    """Clients waiting on each other: each edge's holder is the next edge's
    waiter, and the last edge's holder the first edge's waiter."""

    edges: List[WaitEdge]


@dataclass(frozen=True)
class Deadlocks:
    """The cycles of clients waiting on each other under a prefix, as one
    read saw them (``Client.deadlocks``)."""

    prefix: str
    revision: int
    """The store revision of the read."""
    clients: int
    """Clients with a key under the prefix."""
    waits: int
    """Queued keys that wait."""
    cycles: List[Cycle]
    """One cycle per group of clients that wait on each other (empty: no deadlock)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One key queued on a name (see ``Client.history``): a wait, and the
    hold it became. Times are wall-clock estimates in seconds since the epoch
    (as ``time.time()``): etcd keeps revisions, and each etcdlock key carries
    the time it was written."""

    key: str
    kind: str
    """``"exclusive"``, ``"reader"`` or ``"permit"``."""
    permits: Optional[int]
    lease_id: int
    """Its lease: the client."""
    fencing_token: int
    """Its key's create_revision: its fencing token if it held."""
    owner: Optional[str]
    """``host:pid`` for etcdlock keys; None for etcdctl and Go keys."""
    host: Optional[str]
    pid: Optional[int]
    language: Optional[str]
    queued_at: float
    """When the key was queued."""
    granted_revision: Optional[int]
    """The revision at which it came to hold; None if it never held."""
    granted_at: Optional[float]
    ended_revision: Optional[int]
    """The revision of its delete; None while the key is there."""
    ended_at: Optional[float]
    ended: str
    """``"holding"``, ``"waiting"`` (still there), ``"released"`` (deleted
    while its lease lived on), ``"lease_ended"`` (gone with its lease) or
    ``"abandoned"`` (deleted before it held: a timeout, cancel or try)."""
    wait: float
    """Seconds it waited (to its grant, its end, or now)."""
    hold: Optional[float]
    """Seconds it held (to its end, or now); None if it never held."""


@dataclass(frozen=True)
class History:
    """The history of one name from etcd's MVCC history (``Client.history``)."""

    name: str
    revision: int
    """The store revision the history ends at."""
    from_revision: int
    """The first revision replayed: etcd's compaction revision (nothing older
    is known; ``--auto-compaction-retention`` sets how far back it is)."""
    read_at: float
    """When it was read (seconds since the epoch)."""
    entries: List[HistoryEntry]
    """Every key queued on the name, oldest first."""


# Core hands every record over as one JSON encoding (``etcdlock::records``:
# snake_case keys, 64-bit ids as decimal strings, byte values as arrays of
# numbers, durations as seconds). One decode builds the dataclasses above from
# it by field name, converting each value by the field's type hint; a field
# added to a record in core appears here once declared on its dataclass.

#: The fields Python names or scales differently from core's records: the
#: Python name -> (the record's key, the conversion of a value that is not None).
_RENAMED: Dict[str, Tuple[str, Callable[[Any], Any]]] = {
    "age": ("age_ms", lambda ms: ms / 1000.0),
    "queued_at": ("queued_ms", lambda ms: ms / 1000.0),
    "granted_at": ("granted_ms", lambda ms: ms / 1000.0),
    "ended_at": ("ended_ms", lambda ms: ms / 1000.0),
    "read_at": ("read_ms", lambda ms: ms / 1000.0),
    "wait": ("wait_ms", lambda ms: ms / 1000.0),
    "hold": ("hold_ms", lambda ms: ms / 1000.0),
    "keepalive_rtt": ("keepalive_rtt_seconds", float),
}

_HINTS: Dict[type, Dict[str, Any]] = {}


def _convert(hint: Any, v: Any) -> Any:
    """``v`` as decoded from JSON, as the type ``hint`` says."""
    if v is None:
        return None
    origin = get_origin(hint)
    if origin is Union:
        return _convert(next(a for a in get_args(hint) if a is not type(None)), v)
    if origin is list:
        (item,) = get_args(hint)
        return [_convert(item, x) for x in v]
    if origin is dict:
        return dict(v)
    if isinstance(hint, type) and is_dataclass(hint):
        return _decode(hint, v)
    if hint is int or hint is float or hint is bytes:
        return hint(v)
    return v


def _decode(cls: Type[_T], record: Dict[str, Any]) -> _T:
    """The dataclass ``cls`` built from one JSON record, field by field
    (keys the dataclass does not declare are ignored)."""
    hints = _HINTS.get(cls)
    if hints is None:
        # This module's names: the public dataclasses report module `etcdlock`.
        hints = _HINTS[cls] = get_type_hints(cls, globals())
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        key, scale = _RENAMED.get(f.name, (f.name, None))
        if key in record:
            v = record[key]
            values[f.name] = _convert(hints[f.name], v if scale is None or v is None else scale(v))
    return cls(**values)


def _status(text: str) -> Status:
    """A ``Status`` from the JSON of core's record."""
    return _decode(Status, json.loads(text))


def _statuses(text: str) -> List[Status]:
    """The ``Status`` of each record of a JSON array of them."""
    return [_decode(Status, r) for r in json.loads(text)]


def _deadlocks(text: str) -> Deadlocks:
    """``Deadlocks`` from the JSON of core's record."""
    return _decode(Deadlocks, json.loads(text))


def _history(text: str) -> History:
    """``History`` from the JSON of core's record."""
    return _decode(History, json.loads(text))


def _metrics(text: str) -> Dict[str, Any]:
    """The dict ``Client.metrics`` returns, from the JSON of core's record
    (its keys, with the names in ``_RENAMED``)."""
    out: Dict[str, Any] = json.loads(text)
    for name, (key, scale) in _RENAMED.items():
        if key in out:
            v = out.pop(key)
            out[name] = None if v is None else scale(v)
    return out
