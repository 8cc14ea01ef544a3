"""pytest fixtures for code that takes etcdlock locks, registered as the
pytest plugin ``etcdlock`` (the ``pytest11`` entry point): installing
etcdlock makes them available to every test, with no import and no
``conftest.py`` (``-p no:etcdlock`` turns the plugin off).

Each test gets an in-process store of its own (``mem://NAME``, a fresh name
per test), clients connected to it and closed after the test, and the
store's fault controls to make a hold be lost the ways production loses it:

| fixture | what it gives |
|---|---|
| ``etcdlock_store`` | a fresh ``MemStore``: ``expire_lease``, ``delete_key``, ``silence``, ``stall``, ``resume``, ``keys`` |
| ``etcdlock_client`` | a ``Client`` on that store, closed after the test |
| ``etcdlock_async_client`` | an ``AsyncClient`` on that store (it connects on first use, in the test's event loop), closed after the test |
| ``etcdlock_make_client`` | ``make(**options)``: one more ``Client`` on the store (a second "instance" of the service) |
| ``etcdlock_make_async_client`` | ``make(**options)``: one more ``AsyncClient`` on the store |
| ``etcdlock_client_options`` | the options every client above gets (default ``{}``); override it |

The options are ``Client``'s, but ``endpoints`` (the store's). Override
``etcdlock_client_options`` for a module or a ``conftest.py`` with a fixture
of that name, or for one test with
``@pytest.mark.parametrize("etcdlock_client_options", [{"ttl": 3}])``; a
test that lets a silence or a stall run out wants a short TTL, as the loss
comes at the lease's local deadline.

A hold is lost, as a test wants it lost:

- ``etcdlock_store.expire_lease(guard.lease_id)``: ``"LeaseExpired"``, at once;
- ``etcdlock_store.delete_key(guard.key)``: ``"KeyDeleted"``, at once;
- ``etcdlock_store.stall(guard.lease_id, 60)`` (that client only) or
  ``etcdlock_store.silence(60)`` (everyone): at risk, then
  ``"ConnectionLost"`` within the TTL.

The code under test need not hand its guard out: its lock's key is in the
store, with its lease (``etcdlock_store.keys("name/")``). After the test,
the clients' silence and stalls end (``resume``) and the clients are
closed.

The async fixtures are plain (synchronous) fixtures, so they serve tests
run by ``asyncio.run``, pytest-asyncio or anyio (its asyncio backend)
alike; neither is needed.

A store lives as long as the process, with one listening socket: a session
of thousands of tests that each open one may need a higher open-file limit
(``ulimit -n``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable, Dict, Iterator, List

import pytest

from ._asyncio import AsyncClient
from ._client import Client
from ._mem import MemStore

__all__ = [
    "etcdlock_client_options",
    "etcdlock_store",
    "etcdlock_make_client",
    "etcdlock_client",
    "etcdlock_make_async_client",
    "etcdlock_async_client",
]


def _store_name(test: str) -> str:
    """A store name of the test's own: its name, in the characters a store
    name may have, and a random suffix (tests may share a name across
    modules, and the store outlives the test in this process)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", test).strip("-.")[:40]
    return f"{base or 'test'}-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def etcdlock_client_options() -> Dict[str, Any]:
    """The options of every client the etcdlock fixtures connect (``Client``'s
    keyword arguments but ``endpoints``). Default: none (TTL 15 s). Override
    the fixture, or parametrize it for one test."""
    return {}


@pytest.fixture
def etcdlock_store(request: pytest.FixtureRequest) -> Iterator[MemStore]:
    """A ``MemStore`` of the test's own (``mem://<test name>-<random>``): no
    other test sees its locks. Its silence and stalls end after the test."""
    store = MemStore(_store_name(request.node.name))
    yield store
    store.resume()


@pytest.fixture
def etcdlock_make_client(etcdlock_store: MemStore, etcdlock_client_options: Dict[str, Any]) -> Iterator[Callable[..., Client]]:
    """``make(**options)``: a new ``Client`` on the test's store, with
    ``etcdlock_client_options`` updated by ``options``; each is closed after
    the test."""
    made: List[Client] = []

    def make(**options: Any) -> Client:
        c = Client(endpoints=[etcdlock_store.endpoint], **{**etcdlock_client_options, **options})
        made.append(c)
        return c

    yield make
    # A silent store would make each close wait for its request timeout.
    etcdlock_store.resume()
    for c in made:
        c.close()


@pytest.fixture
def etcdlock_client(etcdlock_make_client: Callable[..., Client]) -> Client:
    """A ``Client`` on the test's store (``etcdlock_store``), closed after the test."""
    return etcdlock_make_client()


@pytest.fixture
def etcdlock_make_async_client(
    etcdlock_store: MemStore, etcdlock_client_options: Dict[str, Any]
) -> Iterator[Callable[..., AsyncClient]]:
    """``make(**options)``: a new ``AsyncClient`` on the test's store, as
    ``etcdlock_make_client``. It connects on first use, in the loop that uses
    it, and is closed after the test, from outside any loop."""
    made: List[AsyncClient] = []

    def make(**options: Any) -> AsyncClient:
        c = AsyncClient(endpoints=[etcdlock_store.endpoint], **{**etcdlock_client_options, **options})
        made.append(c)
        return c

    yield make
    etcdlock_store.resume()
    for c in made:
        c._close_blocking()


@pytest.fixture
def etcdlock_async_client(etcdlock_make_async_client: Callable[..., AsyncClient]) -> AsyncClient:
    """An ``AsyncClient`` on the test's store (``etcdlock_store``), closed
    after the test. A plain fixture: await its calls in ``asyncio.run``, a
    pytest-asyncio or an anyio (asyncio backend) test alike."""
    return etcdlock_make_async_client()
