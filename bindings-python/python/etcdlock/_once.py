"""Run-once jobs for schedulers (APScheduler, Celery beat, cron-style workers):
ShedLock's semantics on a record core keeps (the same record Java's ShedLock
provider and Node's ``runOnce`` use)."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, Optional, Tuple, TypeVar

from ._common import _check_name

T = TypeVar("T")

_Hold = Tuple[int, int, int]


def _check_span(what: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(v).__name__}")
    return float(v)


class OnceHold:
    """A taken run-once record (``Client.take_once``). The job stays
    taken until ``lock_until`` whatever happens to this process; call
    ``finish`` when the job is done."""

    def __init__(self, native: Any, name: str, hold: _Hold) -> None:
        self._native = native
        self.name = name
        self._hold = hold

    @property
    def revision(self) -> int:
        """The etcd revision that wrote this hold: strictly increasing per job
        (a fencing token for what the job writes)."""
        return self._hold[0]

    @property
    def locked_at(self) -> float:
        """When the hold began (seconds since the epoch)."""
        return self._hold[1] / 1000.0

    @property
    def lock_until(self) -> float:
        """Until when the job is taken (seconds since the epoch)."""
        return self._hold[2] / 1000.0

    def finish(self, at_least: float = 0.0) -> bool:
        """The job is done: keep it taken until ``locked_at + at_least``
        seconds if that is still ahead (never beyond ``lock_until``), else
        free it. False (and nothing changed) if the record is no longer this
        hold's: it expired and another node took the job, or it was finished."""
        return bool(self._native.once_finish(self.name, self._hold, _check_span("at_least", at_least)))

    def extend(self, at_most: float) -> bool:
        """Keep the job taken until now + ``at_most`` seconds (for a job that
        runs longer than planned). False if the hold expired or is no longer
        this one."""
        h = self._native.once_extend(self.name, self._hold, _check_span("at_most", at_most))
        if h is None:
            return False
        self._hold = h
        return True

    def __repr__(self) -> str:
        return f"<etcdlock.OnceHold name={self.name!r} revision={self.revision} lock_until={self.lock_until:.3f}>"


class AsyncOnceHold(OnceHold):
    """``OnceHold`` for asyncio: ``finish`` and ``extend`` are awaitable."""

    async def finish(self, at_least: float = 0.0) -> bool:  # type: ignore[override]
        """``OnceHold.finish``, awaitable."""
        return bool(await self._native.once_finish_async(self.name, self._hold, _check_span("at_least", at_least)))

    async def extend(self, at_most: float) -> bool:  # type: ignore[override]
        """``OnceHold.extend``, awaitable."""
        h = await self._native.once_extend_async(self.name, self._hold, _check_span("at_most", at_most))
        if h is None:
            return False
        self._hold = h
        return True


def take_once(native: Any, name: str, at_most: float, at_least: float = 0.0) -> Optional[OnceHold]:
    h = native.once_take(_check_name(name), _check_span("at_most", at_most), _check_span("at_least", at_least))
    return None if h is None else OnceHold(native, name, h)


async def take_once_async(native: Any, name: str, at_most: float, at_least: float = 0.0) -> Optional[AsyncOnceHold]:
    h = await native.once_take_async(_check_name(name), _check_span("at_most", at_most), _check_span("at_least", at_least))
    return None if h is None else AsyncOnceHold(native, name, h)


def once(take: Callable[[], Optional[OnceHold]], at_least: float) -> Callable[[Callable[..., T]], Callable[..., Optional[T]]]:
    """The decorator of ``Client.once``: ``take`` tries the record."""

    def decorate(fn: Callable[..., T]) -> Callable[..., Optional[T]]:
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"{fn.__qualname__} is a coroutine function: use AsyncClient.once")

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Optional[T]:
            hold = take()
            if hold is None:
                return None
            try:
                return fn(*args, **kwargs)
            finally:
                hold.finish(at_least)

        return run

    return decorate


def once_async(
    take: Callable[[], Awaitable[Optional[AsyncOnceHold]]], at_least: float
) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[Optional[T]]]]:
    """The decorator of ``AsyncClient.once``."""

    def decorate(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[Optional[T]]]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} is not a coroutine function: use Client.once")

        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Optional[T]:
            hold = await take()
            if hold is None:
                return None
            try:
                return await fn(*args, **kwargs)
            finally:
                await hold.finish(at_least)

        return run

    return decorate
