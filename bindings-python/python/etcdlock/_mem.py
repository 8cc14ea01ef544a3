"""``MemStore``: what a test does to an in-process store (``mem://NAME``),
as a fault or another party would; ``MemKey``, a key as the store holds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Union

from ._etcdlock import NativeMemStore


@dataclass(frozen=True)
class MemKey:
    """A key as a ``MemStore`` holds it. ``key`` and ``value`` are the
    stored bytes, as etcd has them (``Guard.get`` returns bytes too; compare
    a guard's key as ``guard.key.encode()``)."""

    key: bytes
    """The key (with the client's namespace)."""
    value: bytes
    """Its value."""
    lease_id: int
    """The lease it lives on (0: none): a guard's ``lease_id`` for a lock key."""
    create_revision: int
    """The revision that created it: a lock key's fencing token."""
    mod_revision: int
    """The revision of its last write."""


def _lease(lease_id: object) -> int:
    if isinstance(lease_id, bool) or not isinstance(lease_id, int):
        raise TypeError(f"lease_id must be an int (a guard's lease_id), not {type(lease_id).__name__}")
    return lease_id


class MemStore:
    """The in-process store that the endpoint ``mem://NAME`` reaches (``""``:
    the process-wide ``mem://``), for tests: make a hold be lost the ways
    production loses it, and look at what the store holds. Opening happens
    in the constructor, as ``Client`` connects in its own; the store is
    started if no client started it yet, and every ``MemStore`` and client
    of this process that names it shares it. A bad name (more than 64
    characters, or any but ``A-Z a-z 0-9 . _ -``) raises
    ``InvalidArgumentError``; a name that is not a str, ``TypeError``.

    Clients see each control as they would see the same thing happen on
    etcd, with the same signals and reasons:

    | control | what the store does | what a holder sees |
    |---|---|---|
    | ``expire_lease`` | ends the lease now, as its TTL would; its keys go, waiters are granted | lost, ``loss_reason`` ``"LeaseExpired"`` |
    | ``delete_key`` | deletes a key, as an operator would | lost, ``"KeyDeleted"`` |
    | ``silence`` | answers nothing for a while (a hung etcd); leases expire meanwhile | ``renewal_failing`` after a keep-alive interval, then lost at the local deadline, ``"ConnectionLost"`` |
    | ``stall`` | answers nothing to one client (its lease) while the others go on | that client as under ``silence``; the others go on, and are granted its locks once its lease expires |

    A lock call made during a silence ends at its own ``timeout``
    (``TimeoutError``), any other call at the client's ``request_timeout``
    (``UnavailableError``). Spans are seconds, like every duration of the
    package: a negative, NaN or infinite one is ``InvalidArgumentError``, one
    that is not an int or a float ``TypeError``; ``0`` ends the fault now.

    The store locks nothing across processes and lives as long as the
    process; ``etcdlock_store`` (the pytest plugin) opens one per test. A
    ``Client`` connected to etcd has no such handle: the controls exist only
    for ``mem://`` stores.
    """

    def __init__(self, name: str = "") -> None:
        self._native = NativeMemStore.open(name)

    @property
    def endpoint(self) -> str:
        """The endpoint clients give to reach this store: ``"mem://NAME"``."""
        return self._native.endpoint

    @property
    def name(self) -> str:
        """The store's name (``""`` for ``mem://``)."""
        return self._native.name

    def expire_lease(self, lease_id: int) -> bool:
        """End lease ``lease_id`` now, as its time-to-live would: every key
        on it is deleted at one revision, its holders lose their holds with
        ``"LeaseExpired"`` and the waiters behind them are granted. A
        client's lease is its guards' ``lease_id``. False if the store has
        no such lease (e.g. it expired already)."""
        return self._native.expire_lease(_lease(lease_id))

    def delete_key(self, key: Union[str, bytes]) -> bool:
        """Delete ``key`` as another party would (an operator, a script): a
        lock's key is its guard's ``key``, and its holder loses the hold with
        ``"KeyDeleted"`` (the next waiter is granted). False if there was no
        such key."""
        return self._native.delete_key(key)

    def silence(self, seconds: float) -> None:
        """Answer nothing for ``seconds``, as an etcd that hangs: every
        request, keep-alive and watch event waits, and is answered when the
        silence ends if its caller still waits. Time goes on: leases whose
        time-to-live runs out meanwhile expire. A hold's ``renewal_failing``
        turns to a number a keep-alive interval after its last renewal, and
        the hold is lost at its local deadline (``"ConnectionLost"``, within
        the TTL); lock calls end at their timeout, other calls at the
        request timeout. A later call replaces the end; ``0`` ends it now."""
        self._native.silence(seconds)

    def stall(self, lease_id: int, seconds: float) -> None:
        """Answer nothing to the client of lease ``lease_id`` for
        ``seconds`` while every other client goes on: as a client cut off
        from etcd. Its holds turn at risk and are lost as under ``silence``
        (``"ConnectionLost"``); once its lease expires in the store, other
        clients are granted its locks. ``0`` ends it now."""
        self._native.stall(_lease(lease_id), seconds)

    def resume(self) -> None:
        """End every silence and stall now."""
        self._native.resume()

    def keys(self, prefix: Union[str, bytes] = "") -> List[MemKey]:
        """The keys under ``prefix`` (every key for ``""``), in key order:
        what the store holds, for a test to assert on (a lock ``name``'s
        keys are under ``"name/"``, after the client's namespace)."""
        return [MemKey(*k) for k in self._native.keys(prefix)]

    def __repr__(self) -> str:
        return f"<etcdlock.MemStore endpoint={self.endpoint!r}>"
