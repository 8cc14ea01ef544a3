"""etcdlock: a correct, fast distributed lock on etcd, for Python.

The same lock as every other etcdlock language (and as etcd's own
``concurrency.Mutex`` / ``etcdctl lock``), in the shapes Python programmers
know from ``threading.Lock`` and ``asyncio.Lock``:

    import etcdlock

    with etcdlock.Client(endpoints=["127.0.0.1:2379"], ttl=15) as client:
        with client.lock("orders", timeout=5) as guard:   # raises instead of running unlocked
            stock = int(guard.get("stock") or b"0")
            guard.put("stock", str(stock - 1))           # rejected by etcd if we lost the lock
            print("fencing token", guard.fencing_token)

asyncio:

    async with etcdlock.AsyncClient(endpoints=["127.0.0.1:2379"]) as client:
        async with client.lock("orders", timeout=5) as guard:
            await guard.put("stock", "299")

Every error is an ``LockError``; there is one subclass per core error
code (``.code`` is the code's name, ``.reason`` the loss reason of a
``LockLostError``). Blocking calls release the GIL and answer Ctrl-C
within about 100 ms (a lock wait interrupted that way removes its waiter key).
A client may be shared by threads. A client created before ``fork()`` raises
``ClosedError`` in the child; create a new one there.

Tests need no etcd: ``endpoints=["mem://NAME"]`` reaches an etcd inside the
process, ``MemStore("NAME")`` makes its holds be lost as production loses
them (``expire_lease``, ``delete_key``, ``silence``, ``stall``), and the
pytest plugin that comes with the package gives each test a store and
clients of its own (``etcdlock_store``, ``etcdlock_client``,
``etcdlock_async_client``).

Options not given fall back to the ``ETCDLOCK_*`` environment variables
(``ETCDLOCK_ENDPOINTS``, ``ETCDLOCK_TTL``, ``ETCDLOCK_NAMESPACE``,
``ETCDLOCK_USERNAME``, ``ETCDLOCK_PASSWORD``, ``ETCDLOCK_TLS_CA``,
``ETCDLOCK_TLS_CERT``, ``ETCDLOCK_TLS_KEY``, ``ETCDLOCK_TLS_DOMAIN``,
``ETCDLOCK_CONNECT_TIMEOUT``, ``ETCDLOCK_REQUEST_TIMEOUT``, ``ETCDLOCK_MARGIN``,
``ETCDLOCK_WATCH_HELD_KEYS``, ``ETCDLOCK_KEEPALIVE_INTERVAL``,
``ETCDLOCK_LAZY_CONNECT``; a variable is ignored when its option is given
explicitly), then to the defaults (127.0.0.1:2379, TTL 15 s).
"""

from __future__ import annotations

from typing import Dict, Type

from . import _native  # noqa: F401  (the native module, or an error naming this platform)
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
    DeadlockError,
    Leadership,
    MAX_MULTI,
    MAX_PERMITS,
    MultiGuard,
    InvalidArgumentError,
    LockError,
    LockLostError,
    LostEvent,
    NotHeldError,
    PermissionDeniedError,
    TimeoutError,
    UnavailableError,
    WouldBlockError,
)

__all__ = [
    "Client",
    "Lock",
    "RLock",
    "Guard",
    "LostEvent",
    "Semaphore",
    "Leadership",
    "MultiGuard",
    "Leader",
    "Observer",
    "LeaderLoop",
    "AsyncLeaderLoop",
    "LeaderEvent",
    "Term",
    "AsyncTerm",
    "Status",
    "Contender",
    "Deadlocks",
    "Cycle",
    "WaitEdge",
    "Party",
    "History",
    "HistoryEntry",
    "AsyncClient",
    "AsyncLock",
    "AsyncRLock",
    "AsyncGuard",
    "AsyncLeadership",
    "AsyncMultiGuard",
    "AsyncObserver",
    "AsyncSemaphore",
    "OnceHold",
    "AsyncOnceHold",
    "Latch",
    "Barrier",
    "AsyncLatch",
    "AsyncBarrier",
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
    "DeadlockError",
    "ERROR_CODES",
    "LOSS_REASONS",
    "MAX_NAME_LEN",
    "MAX_TTL_SECS",
    "MAX_PERMITS",
    "MAX_MULTI",
    "release_on_sigterm",
    "MemStore",
    "MemKey",
]

#: Exception class for each core error code name.
ERRORS: Dict[str, Type[LockError]] = {
    code: globals()[cls] for code, _num, cls in ERROR_CODES
}

from ._common import Contender, Cycle, Deadlocks, History, HistoryEntry, Leader, Party, Status, WaitEdge, release_on_sigterm  # noqa: E402
from ._common import Endpoints as Endpoints  # noqa: E402,F401  (the type of the endpoints argument)
from ._client import Client, Observer  # noqa: E402
from ._handles import Lock, Semaphore  # noqa: E402
from ._reentry import AsyncRLock, RLock  # noqa: E402
from ._leader import AsyncLeaderLoop, AsyncTerm, LeaderEvent, LeaderLoop, Term  # noqa: E402
from ._once import AsyncOnceHold, OnceHold  # noqa: E402
from ._sync import AsyncBarrier, AsyncLatch, Barrier, Latch  # noqa: E402
from ._mem import MemKey, MemStore  # noqa: E402
from ._asyncio import (  # noqa: E402
    AsyncClient,
    AsyncGuard,
    AsyncLeadership,
    AsyncLock,
    AsyncMultiGuard,
    AsyncObserver,
    AsyncSemaphore,
)

# The classes are documented and shown as etcdlock.X, wherever defined.
for _cls in (MemStore, MemKey, LeaderLoop, AsyncLeaderLoop, LeaderEvent, Term, AsyncTerm, Contender, Leader, Status, Deadlocks, Cycle, WaitEdge, Party, History, HistoryEntry, OnceHold, AsyncOnceHold, Client, Lock, RLock, AsyncRLock, Observer, Semaphore, AsyncClient, AsyncGuard, AsyncLeadership, AsyncLock, AsyncMultiGuard, AsyncObserver, AsyncSemaphore):
    _cls.__module__ = __name__
del _cls
