"""Count-down latches and barriers shared by processes (core's ``Latch`` and
``Barrier``): ``Client.latch``, ``Client.barrier`` and their
asyncio twins."""

from __future__ import annotations

from types import TracebackType
from typing import Optional, Type

from ._common import _check_timeout
from ._etcdlock import NativeBarrier, NativeLatch


class Latch:
    """A count-down latch shared by every process that opens its name with
    the same count (Java's ``CountDownLatch``, across processes):

        with client.latch("nightly-shards", 3) as latch:
            ...                       # each of 3 workers
            latch.count_down()
        with client.latch("nightly-shards", 3) as latch:
            latch.wait(timeout=60)    # the reducer

    ``count_down()`` at zero does nothing; ``wait`` at zero returns at once.
    The latch lives in etcd while any client has it open (``with`` or
    ``close`` ends this handle's part); then its keys expire."""

    def __init__(self, native: NativeLatch) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def initial(self) -> int:
        """The count it was created with."""
        return self._native.initial

    def count_down(self) -> int:
        """Lower the count by one (a no-op at zero): the count after. At zero
        every waiter is released, in every process at once."""
        return self._native.count_down()

    def count(self) -> int:
        """The count now (one read)."""
        return self._native.count()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Wait until the count is zero; ``TimeoutError`` after
        ``timeout`` seconds (None: no limit)."""
        self._native.wait(_check_timeout(timeout))

    def close(self) -> None:
        """This handle is done with the latch (idempotent)."""
        self._native.close()

    def __enter__(self) -> "Latch":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<etcdlock.Latch name={self.name!r} initial={self.initial}>"


class Barrier:
    """A one-shot barrier for a fixed number of parties, across processes:
    ``wait()`` returns in every party at once when the last one arrives,
    with this party's arrival index (0 first). A party that dies while
    waiting frees its place; once released, the name refuses late parties
    (``InvalidArgumentError``) until every handle is closed."""

    def __init__(self, native: NativeBarrier) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def parties(self) -> int:
        return self._native.parties

    def wait(self, timeout: Optional[float] = None) -> int:
        """Arrive and wait for the others: this party's arrival index.
        ``TimeoutError`` after ``timeout`` seconds (this party leaves)."""
        return self._native.wait(_check_timeout(timeout))

    def close(self) -> None:
        """This handle is done with the barrier (idempotent)."""
        self._native.close()

    def __enter__(self) -> "Barrier":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<etcdlock.Barrier name={self.name!r} parties={self.parties}>"


class AsyncLatch:
    """``Latch`` for asyncio: the same calls, awaitable."""

    def __init__(self, native: NativeLatch) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def initial(self) -> int:
        return self._native.initial

    async def count_down(self) -> int:
        return await self._native.count_down_async()

    async def count(self) -> int:
        return await self._native.count_async()

    async def wait(self, timeout: Optional[float] = None) -> None:
        await self._native.wait_async(_check_timeout(timeout))

    def close(self) -> None:
        self._native.close()

    async def __aenter__(self) -> "AsyncLatch":
        return self

    async def __aexit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


class AsyncBarrier:
    """``Barrier`` for asyncio."""

    def __init__(self, native: NativeBarrier) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def parties(self) -> int:
        return self._native.parties

    async def wait(self, timeout: Optional[float] = None) -> int:
        return await self._native.wait_async(_check_timeout(timeout))

    def close(self) -> None:
        self._native.close()

    async def __aenter__(self) -> "AsyncBarrier":
        return self

    async def __aexit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()
