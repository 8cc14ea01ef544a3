"""Leadership as a loop: ``LeaderLoop`` (a thread per term) and
``AsyncLeaderLoop`` (an asyncio task per term) over core's leader loop.

Core campaigns, follows the lease, resigns and campaigns again; these
classes only run the user's task of each term and turn core's events into
``LeaderEvent`` objects."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast, AsyncIterator, Awaitable, Callable, Dict, Generic, Iterator, Literal, Optional, Tuple, Type, TypeVar, Union

if TYPE_CHECKING:  # asyncio is imported where the async API runs
    import asyncio

    from ._asyncio import AsyncClient

from ._etcdlock import Leadership, LockError, NativeLeaderLoop, NativeTerm
from ._async_guard import AsyncLeadership
from ._common import Leader, _leader, logger

#: The kinds of ``LeaderEvent``, in the order a term reports them.
EventKind = Literal["elected", "renewal_failing", "renewal_recovered", "lost", "resigned", "campaign_failed", "leader", "stopped"]


class Term:
    """One term of leadership, given to the task of a ``LeaderLoop``.

    ``leadership`` is the ``Leadership`` of the term (guarded ``put`` /
    ``get`` / ``delete``, ``proclaim``); ``fencing_token`` its fencing token,
    which strictly increases from term to term. ``cancelled`` is a
    ``threading.Event`` set when the term is over for the task:
    leadership lost (at the local loss deadline, before etcd expires the
    lease) or the loop stopped. The task should return soon after; the loop
    campaigns again only once it has, so one loop never runs two tasks.
    Do not resign or unlock ``leadership`` yourself: return from the task."""

    __slots__ = ("_native", "leadership", "fencing_token", "cancelled")

    def __init__(self, native: NativeTerm) -> None:
        self._native = native
        self.leadership: Leadership = native.leadership
        self.fencing_token: int = self.leadership.fencing_token
        self.cancelled = threading.Event()

    def __repr__(self) -> str:
        return f"<etcdlock.Term fencing_token={self.fencing_token} cancelled={self.cancelled.is_set()}>"


class AsyncTerm:
    """One term of leadership, given to the task of an ``AsyncLeaderLoop``:
    as ``Term`` with an ``AsyncLeadership``, and ``cancelled`` an
    ``asyncio.Event``. The task itself is cancelled (``CancelledError``
    inside it) when the term is over."""

    __slots__ = ("_native", "leadership", "fencing_token", "cancelled")

    def __init__(self, native: NativeTerm) -> None:
        import asyncio

        self._native = native
        self.leadership = AsyncLeadership(native.leadership)
        self.fencing_token: int = self.leadership.fencing_token
        self.cancelled = asyncio.Event()

    def __repr__(self) -> str:
        return f"<etcdlock.AsyncTerm fencing_token={self.fencing_token} cancelled={self.cancelled.is_set()}>"


@dataclass(frozen=True)
class LeaderEvent:
    """What a leader loop reports, in order. ``kind`` is one of:

    - ``"elected"``: this candidate leads; ``term`` is the new term (its
      task starts right after this event);
    - ``"renewal_failing"`` / ``"renewal_recovered"``: keep-alives of the
      term's lease are failing / got through again;
    - ``"lost"``: leadership was lost; ``reason`` is the loss reason (one of
      ``LOSS_REASONS``); the task has been cancelled;
    - ``"resigned"``: the term ended by resigning (the task returned, or the
      loop stopped);
    - ``"campaign_failed"``: a campaign failed (etcd unavailable, ...);
      ``error`` is the ``LockError``; the loop retries after ``retry``
      seconds when ``again``, else stops;
    - ``"leader"``: who leads now, any candidate (``leader``; None: nobody);
    - ``"stopped"``: the loop has stopped; no event follows.

    A term reports ``elected``, then exactly one of ``lost`` or
    ``resigned``."""

    kind: EventKind
    term: Union[Term, AsyncTerm, None] = field(default=None, repr=False)
    reason: Optional[str] = None
    leader: Optional[Leader] = None
    error: Optional[LockError] = None


def _event(kind: EventKind, payload: Any, term: Union[Term, AsyncTerm, None]) -> LeaderEvent:
    if kind == "elected":
        return LeaderEvent(kind, term=term)
    if kind == "lost":
        return LeaderEvent(kind, reason=payload)
    if kind == "leader":
        return LeaderEvent(kind, leader=_leader(payload))
    if kind == "campaign_failed":
        return LeaderEvent(kind, error=payload)
    return LeaderEvent(kind)


def _check_retry(retry: object) -> float:
    if isinstance(retry, bool) or not isinstance(retry, (int, float)):
        raise TypeError(f"retry must be a number of seconds, not {type(retry).__name__}")
    return float(retry)


def _call_on_event(on_event: Callable[[LeaderEvent], object], ev: LeaderEvent) -> None:
    try:
        on_event(ev)
    except Exception:
        logger.exception("the on_event callback of a leader loop raised")


TermT = TypeVar("TermT", "Term", "AsyncTerm")


class _Following(Generic[TermT]):
    """What both loops tell about the election: the running term, whether
    this candidate leads, and who leads."""

    _term: Optional[TermT]
    _leader: Optional[Leader]

    @property
    def term(self) -> Optional[TermT]:
        """The current term while its task runs, else None."""
        return self._term

    @property
    def is_leader(self) -> bool:
        """True while a term's task runs and the term is not cancelled."""
        t = self._term
        return t is not None and not t.cancelled.is_set()

    @property
    def leader(self) -> Optional[Leader]:
        """Who leads, as last reported (any candidate; None: nobody or not
        known yet)."""
        return self._leader


class LeaderLoop(_Following["Term"]):
    """A running leader loop (``Client.lead``), in the shape of Curator's
    ``LeaderSelector`` with auto-requeue: campaign; while leader, run
    ``task(term)`` in a new thread; when the task returns (or raises: the
    exception is logged to the ``etcdlock`` logger), resign and campaign
    again (``again=False``: stop after the first term); when leadership is
    lost, set ``term.cancelled`` and campaign again once the task has
    returned. ``stop()`` (or leaving ``with``) sets ``term.cancelled``,
    waits for the task to return and resigns, handing leadership to the
    next candidate at once.

    Events reach ``on_event`` (called on the loop's thread, in order: keep it
    short) or, without ``on_event``, ``events``."""

    def __init__(self, native: NativeLeaderLoop, name: str, task: Callable[[Term], object], on_event: Optional[Callable[[LeaderEvent], object]]) -> None:
        self.name = name
        self._native = native
        self._task = task
        self._on_event = on_event
        self._queue: "Optional[queue.SimpleQueue[Optional[LeaderEvent]]]" = queue.SimpleQueue() if on_event is None else None
        self._lock = threading.Lock()
        self._term: Optional[Term] = None
        self._leader: Optional[Leader] = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"etcdlock-lead-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        worker: Optional[threading.Thread] = None
        try:
            while True:
                try:
                    got = self._native.next()
                except LockError:  # a forked child: nothing runs here
                    break
                if got is None:
                    break
                kind, payload = cast(EventKind, got[0]), got[1]
                term = None
                if kind == "elected":
                    term = Term(payload)
                    with self._lock:
                        self._term = term
                        if self._stopping:
                            term.cancelled.set()
                elif kind == "lost":
                    with self._lock:
                        if self._term is not None:
                            self._term.cancelled.set()
                elif kind == "resigned":
                    with self._lock:
                        self._term = None
                elif kind == "leader":
                    self._leader = _leader(payload)
                self._emit(_event(kind, payload, term))
                if term is not None:
                    if worker is not None:
                        worker.join()
                    worker = threading.Thread(target=self._run_term, args=(term,), name=f"etcdlock-lead-{self.name}-{term.fencing_token}", daemon=True)
                    worker.start()
        finally:
            if self._queue is not None:
                self._queue.put(None)
            if worker is not None:
                worker.join()

    def _run_term(self, term: Term) -> None:
        try:
            self._task(term)
        except Exception:
            logger.exception("the task of leader loop %r raised; its term ends", self.name)
        finally:
            term.cancelled.set()
            with self._lock:
                if self._term is term:
                    self._term = None
            term._native.end()

    def _emit(self, ev: LeaderEvent) -> None:
        if self._on_event is not None:
            _call_on_event(self._on_event, ev)
        elif self._queue is not None:
            self._queue.put(ev)

    def events(self) -> Iterator[LeaderEvent]:
        """The events in order, blocking for each; ends after ``"stopped"``.
        Only for a loop started without ``on_event`` (else RuntimeError).
        Events are kept until read."""
        if self._queue is None:
            raise RuntimeError("this leader loop reports its events to on_event")
        q = self._queue
        while True:
            ev = q.get()
            if ev is None:
                q.put(None)  # every later events() ends too
                return
            yield ev


    def stop(self) -> None:
        """Stop: set the current term's ``cancelled`` (or cancel the
        campaign), resign once the task has returned, then report
        ``"stopped"``. Does not wait (see ``join``). Idempotent."""
        with self._lock:
            self._stopping = True
            if self._term is not None:
                self._term.cancelled.set()
        self._native.stop()

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait until the loop has stopped (its task returned, leadership
        resigned, ``"stopped"`` reported): True, or False after ``timeout``
        seconds. A task that ignores ``cancelled`` keeps the loop running."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        """True once the loop has stopped."""
        return not self._thread.is_alive()

    def __enter__(self) -> "LeaderLoop":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.stop()
        self.join()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else ("leading" if self.is_leader else "campaigning")
        return f"<etcdlock.LeaderLoop name={self.name!r} {state}>"


class AsyncLeaderLoop(_Following["AsyncTerm"]):
    """A leader loop on asyncio (``AsyncClient.lead``): as
    ``LeaderLoop``, with each term's task an ``asyncio.Task``
    running ``await task(term)``, cancelled (``CancelledError`` inside it)
    when leadership is lost or the loop stops. Start it with ``async with``
    (exit stops it and waits) or ``await loop.start()``. Events reach
    ``on_event`` (called on the event loop, in order) or, without
    ``on_event``, ``async for ev in loop.events()``."""

    def __init__(
        self,
        client: "AsyncClient",
        name: str,
        task: Callable[[AsyncTerm], Awaitable[object]],
        value: Union[str, bytes],
        again: bool,
        retry: float,
        on_event: Optional[Callable[[LeaderEvent], object]],
        extras: Dict[str, Any],
    ) -> None:
        self.name = name
        self._client = client
        self._args: Tuple[Union[str, bytes], bool, float, Dict[str, Any]] = (value, again, retry, extras)
        self._task_fn = task
        self._on_event = on_event
        self._native: Optional[NativeLeaderLoop] = None
        self._driver: "Optional[asyncio.Task[None]]" = None
        self._queue: "Optional[asyncio.Queue[Optional[LeaderEvent]]]" = None
        self._term: Optional[AsyncTerm] = None
        self._running: "Optional[asyncio.Task[None]]" = None
        self._leader: Optional[Leader] = None
        self._stopping = False

    async def start(self) -> "AsyncLeaderLoop":
        """Start campaigning (idempotent): the loop itself."""
        import asyncio

        if self._driver is None:
            c = await self._client._client()
            value, again, retry, extras = self._args
            self._native = c.lead(self.name, value, again, retry, **extras)
            if self._on_event is None:
                self._queue = asyncio.Queue()
            self._driver = asyncio.get_running_loop().create_task(self._run(self._native))
        return self

    async def _run(self, native: NativeLeaderLoop) -> None:
        import asyncio

        try:
            while True:
                got = await native.next_async()
                if got is None:
                    break
                kind, payload = cast(EventKind, got[0]), got[1]
                term = None
                if kind == "elected":
                    term = AsyncTerm(payload)
                    if self._running is not None:
                        await asyncio.wait([self._running])
                    self._term = term
                    self._running = asyncio.get_running_loop().create_task(self._run_term(term))
                    if self._stopping:
                        term.cancelled.set()
                        self._running.cancel()
                elif kind == "lost":
                    self._cancel_term()
                elif kind == "resigned":
                    self._term = None
                elif kind == "leader":
                    self._leader = _leader(payload)
                self._emit(_event(kind, payload, term))
        finally:
            # Cancelled (the event loop is closing): stop, and let the term's
            # task end so core can resign.
            native.stop()
            self._cancel_term()
            if self._queue is not None:
                self._queue.put_nowait(None)

    async def _run_term(self, term: AsyncTerm) -> None:
        import asyncio

        try:
            await self._task_fn(term)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("the task of leader loop %r raised; its term ends", self.name)
        finally:
            term.cancelled.set()
            if self._term is term:
                self._term = None
            term._native.end()

    def _cancel_term(self) -> None:
        if self._term is not None:
            self._term.cancelled.set()
        if self._running is not None and not self._running.done():
            self._running.cancel()

    def _emit(self, ev: LeaderEvent) -> None:
        if self._on_event is not None:
            _call_on_event(self._on_event, ev)
        elif self._queue is not None:
            self._queue.put_nowait(ev)

    async def events(self) -> AsyncIterator[LeaderEvent]:
        """The events in order; ends after ``"stopped"``. Only for a loop
        started without ``on_event`` (else RuntimeError); starts the loop."""
        if self._on_event is not None:
            raise RuntimeError("this leader loop reports its events to on_event")
        await self.start()
        q = self._queue
        assert q is not None
        while True:
            ev = await q.get()
            if ev is None:
                q.put_nowait(None)
                return
            yield ev


    def stop(self) -> None:
        """Stop: cancel the current term's task (or the campaign), resign
        once it has ended, then report ``"stopped"``. Does not wait (see
        ``wait``). Idempotent."""
        self._stopping = True
        self._cancel_term()
        if self._native is not None:
            self._native.stop()

    async def wait(self) -> None:
        """Wait until the loop has stopped (after ``stop``, or after its
        one term with ``again=False``)."""
        import asyncio

        if self._driver is not None:
            await asyncio.shield(self._driver)

    @property
    def stopped(self) -> bool:
        """True once the loop has stopped."""
        return self._driver is not None and self._driver.done()

    async def __aenter__(self) -> "AsyncLeaderLoop":
        return await self.start()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.stop()
        await self.wait()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else ("leading" if self.is_leader else "campaigning")
        return f"<etcdlock.AsyncLeaderLoop name={self.name!r} {state}>"
