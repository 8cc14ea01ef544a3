"""The asyncio guards: ``AsyncGuard``, ``AsyncLeadership`` and
``AsyncMultiGuard``, each wrapping its blocking twin (``.sync``)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Callable, ClassVar, Generic, List, NoReturn, Optional, Tuple, Type, TypeVar, Union, overload

from ._common import _check_timeout
from ._etcdlock import Guard, Leadership, LockError, LostEvent, MultiGuard

_AG = TypeVar("_AG", bound="AsyncGuard")
_V = TypeVar("_V")


class _Forward(Generic[_V]):
    """A member of an async wrapper that reads the member of the same name
    on the blocking object it wraps (``self.sync``): an attribute, a
    property, or a method that does not block (the class then holds a
    function that calls it). Read-only. Its docstring is the blocking member's unless ``doc`` is
    given. Members that block are explicit ``async def`` wrappers instead."""

    def __init__(self, doc: Optional[str] = None) -> None:
        self.__doc__ = doc
        self._name = ""

    def __set_name__(self, owner: Type["_AsyncHold"], name: str) -> None:
        self._name = name
        member = getattr(owner._sync_type, name)
        if self.__doc__ is None:
            self.__doc__ = member.__doc__
        if callable(member):  # a method: the class holds a function, as if written out
            setattr(owner, name, self._method(owner, member))

    def _method(self, owner: type, member: Any) -> Callable[..., Any]:
        name = self._name

        def method(hold: _AsyncHold, *args: Any, **kwargs: Any) -> Any:
            return getattr(hold.sync, name)(*args, **kwargs)

        method.__name__, method.__qualname__ = name, f"{owner.__name__}.{name}"
        method.__doc__ = self.__doc__
        setattr(method, "__wrapped__", member)  # inspect.signature: the blocking method's
        return method

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> "_Forward[_V]": ...
    @overload
    def __get__(self, obj: "_AsyncHold", owner: Optional[type] = None) -> _V: ...
    def __get__(self, obj: Optional["_AsyncHold"], owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.sync, self._name)

    def __set__(self, obj: "_AsyncHold", value: NoReturn) -> None:
        raise AttributeError(f"{type(obj).__name__}.{self._name} is read-only")


class _AsyncHold:
    """What ``AsyncGuard`` and ``AsyncMultiGuard`` share: the
    wrapped blocking object, ``async with`` (unlocks at the end; an unlock
    error is raised only if the block raised nothing) and ``repr``."""

    _sync_type: ClassVar[type]
    sync: Any

    async def unlock(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _AH) -> _AH:
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
        sync = self._sync_type.__name__
        return repr(self.sync).replace(f"etcdlock.{sync}", f"etcdlock.{type(self).__name__}")


_AH = TypeVar("_AH", bound=_AsyncHold)


class AsyncGuard(_AsyncHold):
    """A held lock, asyncio flavour: the same properties as ``Guard``,
    with awaitable ``put`` / ``get`` / ``delete`` / ``unlock`` /
    ``wait_lost``, and ``async with guard:`` (unlocks at the end)."""

    _sync_type = Guard
    sync: Guard

    def __init__(self, guard: Guard) -> None:
        self.sync = guard
        """The underlying blocking ``Guard``."""

    name = _Forward[str]()
    key = _Forward[str]()
    lease_id = _Forward[int]()
    fencing_token = _Forward[int]()
    is_held = _Forward[bool]()
    state = _Forward[str]()
    loss_reason = _Forward[Optional[str]]()
    lost = _Forward[LostEvent]("Event-like loss view (``is_set()``; ``await lost.wait_async(timeout)``).")
    on_lost = _Forward[Callable[[Callable[[str], Any]], None]]("See ``Guard.on_lost`` (the callback runs on its own thread).")
    renewal_failing = _Forward[Optional[float]]("See ``Guard.renewal_failing``.")
    on_renewal = _Forward[Callable[[Callable[[bool, Optional[float]], Any]], None]](
        "See ``Guard.on_renewal`` (the callback runs on its own thread)."
    )

    async def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """True once the hold is lost; False after ``timeout`` or on normal release."""
        return await self.sync.lost.wait_async(_check_timeout(timeout))

    async def put(self, key: Union[str, bytes], value: Union[str, bytes]) -> None:
        """Guarded put (see ``Guard.put``)."""
        await self.sync.put_async(key, value)

    async def get(self, key: Union[str, bytes]) -> Optional[bytes]:
        """Guarded get (see ``Guard.get``)."""
        return await self.sync.get_async(key)

    async def delete(self, key: Union[str, bytes]) -> bool:
        """Guarded delete (see ``Guard.delete``)."""
        return await self.sync.delete_async(key)

    async def unlock(self) -> None:
        """Release (see ``Guard.unlock``)."""
        await self.sync.unlock_async()


class AsyncLeadership(AsyncGuard):
    """``Leadership``, asyncio flavour: an ``AsyncGuard`` with
    awaitable ``proclaim`` and ``resign`` (``async with`` resigns)."""

    _sync_type = Leadership
    sync: Leadership

    def __init__(self, leadership: Leadership) -> None:
        super().__init__(leadership)

    async def proclaim(self, value: Union[str, bytes]) -> None:
        """Announce a new value; ``LockLostError`` if we no longer lead."""
        await self.sync.proclaim_async(value)

    async def resign(self) -> None:
        """Give up leadership (same as ``unlock``)."""
        await self.sync.resign_async()


class AsyncMultiGuard(_AsyncHold):
    """``MultiGuard``, asyncio flavour (``async with`` unlocks every
    lock). The same loss and renewal members as ``MultiGuard``: lost
    when any of its locks is lost."""

    _sync_type = MultiGuard
    sync: MultiGuard

    def __init__(self, multi: MultiGuard) -> None:
        self.sync = multi
        """The underlying ``MultiGuard``."""

    names = _Forward[List[str]]()
    keys = _Forward[List[str]]()
    lease_id = _Forward[int]()
    fencing_tokens = _Forward[List[int]]()
    is_held = _Forward[bool]()
    loss = _Forward[Optional[Tuple[str, str]]]()
    loss_reason = _Forward[Optional[str]]()
    lost = _Forward[LostEvent]("Event-like loss view (``is_set()``; ``await lost.wait_async(timeout)``).")
    on_lost = _Forward[Callable[[Callable[[str, str], Any]], None]](
        "See ``MultiGuard.on_lost`` (the callback runs on its own thread)."
    )
    renewal_failing = _Forward[Optional[float]]("See ``MultiGuard.renewal_failing``.")
    on_renewal = _Forward[Callable[[Callable[[bool, Optional[float]], Any]], None]](
        "See ``MultiGuard.on_renewal`` (the callback runs on its own thread)."
    )

    async def wait_lost(self, timeout: Optional[float] = None) -> Optional[Tuple[str, str]]:
        """(name, reason) of the first lock lost; None on release or after ``timeout``."""
        return await self.sync.wait_lost_async(_check_timeout(timeout))

    async def put(self, key: Union[str, bytes], value: Union[str, bytes]) -> None:
        """``MultiGuard.put``, awaitable."""
        await self.sync.put_async(key, value)

    async def get(self, key: Union[str, bytes]) -> Optional[bytes]:
        """``MultiGuard.get``, awaitable."""
        return await self.sync.get_async(key)

    async def delete(self, key: Union[str, bytes]) -> bool:
        """``MultiGuard.delete``, awaitable."""
        return await self.sync.delete_async(key)

    async def unlock(self) -> None:
        """Release every lock."""
        await self.sync.unlock_async()
