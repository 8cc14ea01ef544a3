"""OpenTelemetry spans, when ``opentelemetry-api`` is installed (the
``etcdlock[otel]`` extra); without it, or without a configured SDK, nothing
is made and a call costs one check.

The API is imported once, on the first acquisition after the program has
imported ``opentelemetry.trace`` itself (which configuring an SDK does) or
on a client given a ``tracer_provider``; a program that never loads
OpenTelemetry never pays for its import.

Two spans, named and attributed alike in every etcdlock language:

- ``etcdlock.acquire`` from the call of lock / try_lock / campaign (and their
  handle and ``with`` forms) to its return: ``etcdlock.lock.name``,
  ``etcdlock.operation``, ``etcdlock.outcome``; ``etcdlock.fencing_token``
  when acquired; ``error.type`` and status ERROR on error (a timeout, a
  would-block and a cancellation are not errors).
- ``etcdlock.hold`` from the acquisition to the end of the hold:
  ``etcdlock.lock.name``, ``etcdlock.fencing_token``, and at its end
  ``etcdlock.end`` (``released`` or ``lost``); a loss adds the event
  ``etcdlock.lost`` (``etcdlock.loss.reason``) and status ERROR. It is
  ended from core's end-of-hold signal, so a loss nobody asks about ends it
  too. A re-entry (``reentrant=True``) is another handle of the same hold:
  its acquire span is made, no second hold span.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Awaitable, Callable, Optional, Set, Tuple, TypeVar

from ._etcdlock import LockError

# The optional dependency, imported once (see _api).
_trace: Any = None
_tried = False
SpanKind: Any = None
Status: Any = None
StatusCode: Any = None
_DEFAULTS: Tuple[type, ...] = ()
_api_mu = threading.Lock()


def _api() -> Any:
    """``opentelemetry.trace``, or None when it is not installed."""
    global _trace, _tried, SpanKind, Status, StatusCode, _DEFAULTS
    if not _tried:
        with _api_mu:
            if not _tried:
                try:
                    from opentelemetry import trace
                    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider
                except ImportError:
                    pass
                else:
                    SpanKind, Status, StatusCode = trace.SpanKind, trace.Status, trace.StatusCode
                    _DEFAULTS = (ProxyTracerProvider, NoOpTracerProvider)
                    _trace = trace
                _tried = True
    return _trace

T = TypeVar("T")

SCOPE = "etcdlock"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("etcdlock")
    except Exception:  # noqa: BLE001 - an uninstalled source tree
        return "0+unknown"


_VERSION: Optional[str] = None

# The holds that have a hold span now: (key, fencing token). A re-entry
# finds its hold here and makes no second span.
_live: Set[Tuple[str, int]] = set()
_live_mu = threading.Lock()


class Tracing:
    """One client's tracer: from its ``tracer_provider``, else the global
    provider at each call (so a provider set after the client was made is
    used). None while the provider is the API's no-op or proxy default."""

    __slots__ = ("_provider", "_last")

    def __init__(self, provider: Any = None) -> None:
        self._provider = provider
        self._last: Optional[Tuple[Any, Any]] = None

    def tracer(self) -> Any:
        if self._provider is None and "opentelemetry.trace" not in sys.modules:
            return None  # the program never loaded OpenTelemetry: no SDK can be configured
        api = _api()
        if api is None:
            return None
        p = self._provider if self._provider is not None else api.get_tracer_provider()
        if isinstance(p, _DEFAULTS):
            return None
        last = self._last
        if last is not None and last[0] is p:
            return last[1]
        global _VERSION
        if _VERSION is None:
            _VERSION = _version()
        t = p.get_tracer(SCOPE, _VERSION)
        self._last = (p, t)
        return t


def _outcome(e: BaseException) -> Tuple[str, Optional[str]]:
    """(outcome, error.type) of an acquisition that raised ``e``."""
    if isinstance(e, LockError):
        code = e.code
        if code == "Timeout":
            return "timeout", None
        if code == "WouldBlock":
            return "would_block", None
        if code == "Cancelled":
            return "cancelled", None
        return "error", str(code)
    if isinstance(e, KeyboardInterrupt) or type(e).__name__ == "CancelledError":
        return "cancelled", None  # Ctrl-C, or an asyncio task cancelled while waiting
    return "error", type(e).__qualname__


def _start(tracer: Any, op: str, name: object) -> Any:
    attrs = {"etcdlock.operation": op}
    if isinstance(name, str):
        attrs["etcdlock.lock.name"] = name
    return tracer.start_span("etcdlock.acquire", kind=SpanKind.INTERNAL, attributes=attrs)


def _failed(span: Any, e: BaseException) -> None:
    outcome, etype = _outcome(e)
    span.set_attribute("etcdlock.outcome", outcome)
    if etype is not None:
        span.set_attribute("error.type", etype)
        span.set_status(Status(StatusCode.ERROR, str(e)))
    span.end()


def _done(tracer: Any, span: Any, g: Any) -> None:
    if g is None:
        span.set_attribute("etcdlock.outcome", "would_block")
    else:
        span.set_attribute("etcdlock.outcome", "acquired")
        span.set_attribute("etcdlock.fencing_token", g.fencing_token)
    span.end()
    if g is not None:
        _hold(tracer, g)


def _hold(tracer: Any, g: Any) -> None:
    """Start the hold span of the native guard ``g`` (unless its hold has one)
    and end it when core says the hold ended."""
    key = (g.key, g.fencing_token)
    with _live_mu:
        if key in _live:
            return
        _live.add(key)
    span = tracer.start_span(
        "etcdlock.hold",
        kind=SpanKind.INTERNAL,
        attributes={"etcdlock.lock.name": g.name, "etcdlock.fencing_token": g.fencing_token},
    )

    def end(reason: Optional[str]) -> None:
        if reason is None:
            span.set_attribute("etcdlock.end", "released")
        else:
            span.add_event("etcdlock.lost", {"etcdlock.loss.reason": reason})
            span.set_attribute("etcdlock.end", "lost")
            span.set_status(Status(StatusCode.ERROR, f"lock lost: {reason}"))
        span.end()
        with _live_mu:
            _live.discard(key)

    try:
        g._on_end(end)
    except BaseException:
        end(None)
        raise


def traced(tracing: Optional[Tracing], op: str, name: object, call: Callable[[], T]) -> T:
    """``call()`` (an acquisition returning a native guard, or None for a
    would-block) inside an ``etcdlock.acquire`` span."""
    tracer = tracing.tracer() if tracing is not None else None
    if tracer is None:
        return call()
    span = _start(tracer, op, name)
    try:
        g = call()
    except BaseException as e:
        _failed(span, e)
        raise
    _done(tracer, span, g)
    return g


async def traced_async(tracing: Optional[Tracing], op: str, name: object, call: Callable[[], Awaitable[T]]) -> T:
    """``traced`` for a coroutine function."""
    tracer = tracing.tracer() if tracing is not None else None
    if tracer is None:
        return await call()
    span = _start(tracer, op, name)
    try:
        g = await call()
    except BaseException as e:
        _failed(span, e)
        raise
    _done(tracer, span, g)
    return g
