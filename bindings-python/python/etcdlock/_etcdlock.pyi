"""Type stubs of the native module etcdlock._etcdlock (pyo3)."""

import builtins
from typing import Any, Awaitable, Callable, List, Optional, Tuple, TypeVar, Union, final

ERROR_CODES: List[Tuple[str, int, str]]
LOSS_REASONS: List[str]
MAX_NAME_LEN: int
MAX_TTL_SECS: int
MAX_PERMITS: int
"""The most permits one semaphore may have."""
MAX_MULTI: int
"""The most names one `acquire_many` may lock (etcd's default --max-txn-ops)."""

class LockError(Exception):
    """Base class of every etcdlock error."""

    code: Optional[str]
    """The core error code name, e.g. "LockLost" (None only on LockError itself)."""
    message: str
    """The message without the code prefix."""
    reason: Optional[str]
    """For LockLostError: "LeaseExpired", "KeyDeleted", "ConnectionLost" or "ClientClosed"."""
    retryable: bool
    """Whether the same call may succeed if tried again (core's rule: e.g.
    Unavailable and Timeout are, InvalidArgument and Closed are not)."""

class InvalidArgumentError(LockError):
    """An argument etcdlock refuses: an empty or oversized name, a TTL out of
    range, a bad endpoint or TLS file, a negative or NaN timeout, text with a
    lone surrogate, a guarded write under the lock's own prefix."""

    code: str

class TimeoutError(LockError, builtins.TimeoutError):
    """Also the builtin TimeoutError: `except TimeoutError:` catches it."""

    code: str

class WouldBlockError(LockError):
    """The lock is held and the call may not wait (``try_lock`` returns None
    instead of raising it)."""

    code: str

class LockLostError(LockError):
    """The hold was lost (``.reason``: LeaseExpired, KeyDeleted, ConnectionLost,
    ClientClosed); a guarded operation of a lost hold raises it."""

    code: str

class NotHeldError(LockError, builtins.RuntimeError):
    """Also a RuntimeError (like releasing an unlocked threading.Lock)."""

    code: str

class CancelledError(LockError):
    """The operation was cancelled."""

    code: str

class UnavailableError(LockError):
    """No etcd member answered within the call's bound; the message names the
    endpoints. Retryable."""

    code: str

class AuthFailedError(LockError):
    """etcd refused the username or password."""

    code: str

class PermissionDeniedError(LockError):
    """The user's role does not grant the keys the call touches."""

    code: str

class ClosedError(LockError):
    """The client was closed (also: a client created before ``fork()``, used in
    the child)."""

    code: str

class InternalError(LockError):
    """A bug in etcdlock, reported instead of crashing."""

    code: str

class DeadlockError(LockError):
    """The wait would close a cycle of clients waiting on each other's
    holds (only with ``detect_deadlock=True``); the message names the cycle."""

    code: str

_Bytes = Union[str, bytes]
_G = TypeVar("_G", bound="Guard")

@final
class LostEvent:
    """Event-like view of a guard's loss (shaped like threading.Event); for a
    MultiGuard, set once any of its locks is lost."""

    @property
    def reason(self) -> Optional[str]:
        """The loss reason name, or None."""
    def is_set(self) -> bool:
        """True once the hold is lost."""
    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block (GIL released, Ctrl-C answered) until the hold is lost (True)
        or `timeout` seconds pass (False). False at once after a normal release."""
    def wait_async(self, timeout: Optional[float] = None) -> Awaitable[bool]:
        """`wait` as an awaitable of the running asyncio loop."""


class Guard:
    """A held lock. `with guard:` unlocks at the end of the block.

    Dropping a guard that is still held releases the lock in the background,
    but call `unlock()` (or use `with`) to learn whether the hold lasted."""

    @property
    def name(self) -> str:
        """The lock name."""
    @property
    def key(self) -> str:
        """Our key in etcd (with the namespace), e.g. "orders/694d7a3e4b2c8f05"."""
    @property
    def lease_id(self) -> int:
        """The session's lease id (what `MemStore.expire_lease` and
        `MemStore.stall` take in a test)."""
    @property
    def fencing_token(self) -> int:
        """Our key's create_revision: strictly increases from one holder to the next."""
    @property
    def is_held(self) -> bool:
        """True while held: not unlocked, not lost, inside the local validity window."""
    @property
    def state(self) -> str:
        """"held", "released" or "lost"."""
    @property
    def loss_reason(self) -> Optional[str]:
        """Why the hold was lost, or None."""
    @property
    def lost(self) -> LostEvent:
        """An Event-like view of the loss."""
    def on_lost(self, callback: Callable[[str], Any]) -> None:
        """Call `callback(reason)` once if the hold is lost (on a fresh thread).
        TypeError at once if `callback` is not callable. At interpreter exit a
        callback still running delays the exit until it returns (at most 10 s);
        one not yet started then is skipped."""
    def _on_end(self, callback: Callable[[Optional[str]], Any]) -> None:
        """Call `callback(reason)` once when the hold ends (the loss reason, or
        None when released), on a fresh thread. Internal (the hold span)."""
    @property
    def renewal_failing(self) -> Optional[float]:
        """Seconds of validity left while the keep-alive renewal is failing, else None."""
    def on_renewal(self, callback: Callable[[bool, Optional[float]], Any]) -> None:
        """Call `callback(failing, seconds_left)` at each change of the renewal
        ((True, s) when it starts failing, (False, None) when it recovers), in
        order, each on a fresh thread, until the hold ends. TypeError at once
        if `callback` is not callable."""
    def unlock(self) -> None:
        """Release. Idempotent; LockLostError if the hold had been lost before."""
    def put(self, key: _Bytes, value: _Bytes) -> None:
        """Guarded put: etcd applies it only while we hold the lock (else LockLostError)."""
    def get(self, key: _Bytes) -> Optional[bytes]:
        """Guarded get: the value, or None if the key does not exist."""
    def delete(self, key: _Bytes) -> bool:
        """Guarded delete: True if the key existed."""
    def unlock_async(self) -> Awaitable[None]: ...
    def put_async(self, key: _Bytes, value: _Bytes) -> Awaitable[None]: ...
    def get_async(self, key: _Bytes) -> Awaitable[Optional[bytes]]: ...
    def delete_async(self, key: _Bytes) -> Awaitable[bool]: ...
    def __enter__(self: _G) -> _G: ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None: ...

@final
class Leadership(Guard):
    """Leadership won by `campaign`: a Guard (fencing token, loss signal,
    guarded operations; `with` resigns) plus `proclaim` and `resign`."""

    def proclaim(self, value: _Bytes) -> None:
        """Announce a new value as leader (guarded: LockLostError if we no longer lead)."""
    def resign(self) -> None:
        """Give up leadership; the next candidate leads. Same as `unlock`."""
    def proclaim_async(self, value: _Bytes) -> Awaitable[None]: ...
    def resign_async(self) -> Awaitable[None]: ...

@final
class MultiGuard:
    """Several locks held together (`acquire_many`); `with` unlocks them all.
    Losing any one lock is losing the whole hold: the loss and renewal
    members are those of a Guard, for the hold as a whole."""

    @property
    def names(self) -> List[str]:
        """The lock names, in the order given."""
    @property
    def keys(self) -> List[str]:
        """Our key on each lock."""
    @property
    def lease_id(self) -> int:
        """The session's lease id: one session holds every lock."""
    @property
    def fencing_tokens(self) -> List[int]:
        """The fencing token on each lock (equal: one Txn created every key)."""
    @property
    def is_held(self) -> bool:
        """True while every lock is held."""
    @property
    def loss(self) -> Optional[Tuple[str, str]]:
        """(name, reason) of the first lock lost, or None."""
    @property
    def loss_reason(self) -> Optional[str]:
        """The reason of the first lock lost (in name order), or None."""
    @property
    def lost(self) -> LostEvent:
        """An Event-like view of the loss: set once any lock is lost; its
        `reason` is that of the first lock lost (in name order)."""
    def on_lost(self, callback: Callable[[str, str], Any]) -> None:
        """Call `callback(name, reason)` once if any lock is lost (not on a
        normal release), with the name and reason of the first loss seen, on
        a fresh thread (as `Guard.on_lost`). TypeError at once if `callback`
        is not callable."""
    @property
    def renewal_failing(self) -> Optional[float]:
        """Seconds of validity left while the keep-alive renewal of the
        locks' session is failing and every lock is held, else None."""
    def on_renewal(self, callback: Callable[[bool, Optional[float]], Any]) -> None:
        """Call `callback(failing, seconds_left)` at each change of the
        renewal of the locks' session (one session holds every lock), in
        order, each on a fresh thread, until the hold ends (every lock
        released, or any lost). TypeError at once if `callback` is not
        callable."""
    def wait_lost(self, timeout: Optional[float] = None) -> Optional[Tuple[str, str]]:
        """Block until a lock is lost: its (name, reason); None on release or timeout."""
    def wait_lost_async(self, timeout: Optional[float] = None) -> Awaitable[Optional[Tuple[str, str]]]: ...
    def put(self, key: Union[str, bytes], value: Union[str, bytes]) -> None:
        """Write ``key`` only while every lock is held (one etcd Txn compares
        every key's fencing token); LockLostError otherwise. The key may not
        be under any of the locks' prefixes (InvalidArgumentError)."""
    def get(self, key: Union[str, bytes]) -> Optional[bytes]:
        """Read ``key`` only while every lock is held."""
    def delete(self, key: Union[str, bytes]) -> bool:
        """Delete ``key`` only while every lock is held; True if it existed."""
    def put_async(self, key: Union[str, bytes], value: Union[str, bytes]) -> Awaitable[None]: ...
    def get_async(self, key: Union[str, bytes]) -> Awaitable[Optional[bytes]]: ...
    def delete_async(self, key: Union[str, bytes]) -> Awaitable[bool]: ...
    def unlock(self) -> None:
        """Release every lock (each is tried; the first error is raised)."""
    def unlock_async(self) -> Awaitable[None]: ...
    def __enter__(self) -> "MultiGuard": ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None: ...

_LeaderTuple = Tuple[str, bytes, int, int]

@final
class NativeObserver:
    def next(self, timeout: Optional[float] = None) -> Optional[_LeaderTuple]: ...
    def next_async(self, timeout: Optional[float] = None) -> Awaitable[Optional[_LeaderTuple]]: ...

@final
class NativeTerm:
    @property
    def leadership(self) -> Leadership: ...
    @property
    def cancelled(self) -> bool: ...
    def end(self) -> None: ...

_LeaderEventTuple = Tuple[str, Any]

@final
class NativeLeaderLoop:
    def next(self) -> Optional[_LeaderEventTuple]: ...
    def next_async(self) -> Awaitable[Optional[_LeaderEventTuple]]: ...
    def stop(self) -> None: ...

@final
class NativeLatch:
    name: str
    initial: int
    def count_down(self) -> int: ...
    def count_down_async(self) -> Awaitable[int]: ...
    def count(self) -> int: ...
    def count_async(self) -> Awaitable[int]: ...
    def wait(self, timeout: Optional[float] = None) -> None: ...
    def wait_async(self, timeout: Optional[float] = None) -> Awaitable[None]: ...
    def close(self) -> None: ...

class NativeBarrier:
    name: str
    parties: int
    def wait(self, timeout: Optional[float] = None) -> int: ...
    def wait_async(self, timeout: Optional[float] = None) -> Awaitable[int]: ...
    def close(self) -> None: ...

_MemKeyTuple = Tuple[bytes, bytes, int, int, int]

@final
class NativeMemStore:
    """The native half of `etcdlock.MemStore` (its docs are there)."""

    @staticmethod
    def open(name: str) -> "NativeMemStore": ...
    @property
    def endpoint(self) -> str: ...
    @property
    def name(self) -> str: ...
    def expire_lease(self, lease_id: int) -> bool: ...
    def delete_key(self, key: _Bytes) -> bool: ...
    def silence(self, seconds: float) -> None: ...
    def stall(self, lease_id: int, seconds: float) -> None: ...
    def resume(self) -> None: ...
    def keys(self, prefix: _Bytes) -> List[_MemKeyTuple]: ...

class NativeClient:
    @staticmethod
    def connect(**options: Any) -> "NativeClient": ...
    @staticmethod
    def connect_async(**options: Any) -> Awaitable["NativeClient"]: ...
    def lock(self, name: str, timeout: Optional[float] = None, owner: Optional[int] = None, **extras: Any) -> Guard: ...
    def try_lock(self, name: str, owner: Optional[int] = None, **extras: Any) -> Optional[Guard]: ...
    def lock_async(self, name: str, timeout: Optional[float] = None, owner: Optional[int] = None, **extras: Any) -> Awaitable[Guard]: ...
    def try_lock_async(self, name: str, owner: Optional[int] = None, **extras: Any) -> Awaitable[Optional[Guard]]: ...
    def close(self) -> None: ...
    def close_async(self) -> Awaitable[None]: ...
    def ping(self) -> float: ...
    def ping_async(self) -> Awaitable[float]: ...
    @property
    def ttl(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def endpoints(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    def metrics(self) -> str:
        """Core's metrics record as JSON (decoded by `etcdlock._common._metrics`)."""
    def acquire_permit(self, name: str, permits: int, timeout: Optional[float] = None, **extras: Any) -> Guard: ...
    def acquire_permit_async(self, name: str, permits: int, timeout: Optional[float] = None, **extras: Any) -> Awaitable[Guard]: ...
    def read_lock(self, name: str, timeout: Optional[float] = None, **extras: Any) -> Guard: ...
    def read_lock_async(self, name: str, timeout: Optional[float] = None, **extras: Any) -> Awaitable[Guard]: ...
    def lock_many(self, names: List[str], timeout: Optional[float] = None) -> MultiGuard: ...
    def lock_many_async(self, names: List[str], timeout: Optional[float] = None) -> Awaitable[MultiGuard]: ...
    def campaign(self, name: str, value: _Bytes, timeout: Optional[float] = None, **extras: Any) -> Leadership: ...
    def campaign_async(self, name: str, value: _Bytes, timeout: Optional[float] = None, **extras: Any) -> Awaitable[Leadership]: ...
    def lead(self, name: str, value: _Bytes, again: bool = True, retry: float = 1.0, **extras: Any) -> NativeLeaderLoop: ...
    def leader(self, name: str) -> Optional[_LeaderTuple]: ...
    def leader_async(self, name: str) -> Awaitable[Optional[_LeaderTuple]]: ...
    def observe(self, name: str) -> NativeObserver: ...
    def status(self, name: str) -> str:
        """Core's status record of `name` as JSON (decoded by `etcdlock._common._status`)."""
    def status_async(self, name: str) -> Awaitable[str]: ...
    def prometheus(self, labels: "builtins.list[Tuple[str, str]]" = ...) -> str: ...
    def list(self, prefix: str) -> str:
        """The JSON array of core's status records under `prefix`."""
    def list_async(self, prefix: str) -> Awaitable[str]: ...
    def deadlocks(self, prefix: str) -> str:
        """Core's deadlocks record under `prefix` as JSON (decoded by `etcdlock._common._deadlocks`)."""
    def deadlocks_async(self, prefix: str) -> Awaitable[str]: ...
    def history(self, name: str, since: Optional[float] = None) -> str:
        """Core's history record of `name` as JSON (decoded by `etcdlock._common._history`)."""
    def history_async(self, name: str, since: Optional[float] = None) -> Awaitable[str]: ...
    def release(self, name: str, token: int) -> bool: ...
    def release_async(self, name: str, token: int) -> Awaitable[bool]: ...
    def release_permit(self, name: str, id: int) -> bool: ...
    def release_permit_async(self, name: str, id: int) -> Awaitable[bool]: ...
    def latch(self, name: str, count: int) -> NativeLatch: ...
    def latch_async(self, name: str, count: int) -> Awaitable[NativeLatch]: ...
    def barrier(self, name: str, parties: int) -> NativeBarrier: ...
    def barrier_async(self, name: str, parties: int) -> Awaitable[NativeBarrier]: ...
    def once_take(self, name: str, at_most: float, at_least: float = ...) -> Optional[Tuple[int, int, int]]: ...
    def once_take_async(self, name: str, at_most: float, at_least: float = ...) -> Awaitable[Optional[Tuple[int, int, int]]]: ...
    def once_finish(self, name: str, hold: Tuple[int, int, int], at_least: float) -> bool: ...
    def once_finish_async(self, name: str, hold: Tuple[int, int, int], at_least: float) -> Awaitable[bool]: ...
    def once_extend(self, name: str, hold: Tuple[int, int, int], at_most: float) -> Optional[Tuple[int, int, int]]: ...
    def once_extend_async(self, name: str, hold: Tuple[int, int, int], at_most: float) -> Awaitable[Optional[Tuple[int, int, int]]]: ...

# Only in a build with the `bench` feature (bench.py builds one).
def _raw_floor(endpoints: List[str], n: int) -> List[int]: ...
def _core_bench(endpoints: List[str], n: int) -> List[int]: ...
def _close_gate() -> None: ...
def _completions_mode() -> str: ...
def _forward_logs(callback: Callable[[int, str, str, List[Tuple[str, str]]], None]) -> bool: ...
def _set_log_level(levelno: int) -> None: ...
def _gate_after_fork() -> None: ...
