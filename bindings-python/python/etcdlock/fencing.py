"""Fencing a database write with the lock's token (PostgreSQL).

A lock on etcd can end while its holder still runs (a pause past the lease,
a partition), so a write decided under the lock can land after the next
holder's. The database stops it if every write carries the hold's fencing
token and the database keeps the newest token it has seen per resource:
:func:`fence` does that in the caller's transaction, before the write::

    with client.lock("account-42") as guard, db.transaction():
        with db.cursor() as cur:
            fence(cur, "account-42", guard.fencing_token)   # StaleTokenError if a newer holder wrote
            cur.execute("UPDATE accounts SET balance = %s WHERE id = %s", (balance, "42"))

The fence table is :data:`CREATE_TABLE` (one row per resource). The fence
row stays locked until the transaction ends, so a stale writer waiting on it
sees the newer token and is refused. Any DB-API cursor with the ``%s``
parameter style works (psycopg 3, psycopg2); no driver is a dependency of
etcdlock. The SQL is PostgreSQL's (``INSERT ... ON CONFLICT``).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Protocol, Sequence

__all__ = ["TABLE", "CREATE_TABLE", "StaleTokenError", "fence", "fence_sql"]

#: The fence table's default name.
TABLE = "etcdlock_fence"
#: Its definition: the newest token written per resource.
CREATE_TABLE = f"CREATE TABLE IF NOT EXISTS {TABLE} (resource text PRIMARY KEY, token bigint NOT NULL)"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


class Cursor(Protocol):
    """What :func:`fence` needs of a DB-API cursor."""

    def execute(self, query: Any, params: Any = ...) -> Any: ...

    def fetchone(self) -> Optional[Sequence[Any]]: ...

    @property
    def rowcount(self) -> int: ...


class StaleTokenError(Exception):
    """The database has seen a newer token for this resource: a later holder
    has written, so this write must not land (roll the transaction back)."""

    def __init__(self, resource: str, token: int, newest: Optional[int]) -> None:
        super().__init__(f"token {token} is older than {newest}, the newest written for {resource}")
        self.resource = resource
        self.token = token
        self.newest = newest


def fence_sql(table: str = TABLE) -> str:
    """The statement :func:`fence` runs (parameters: resource, token): it
    moves the resource's row to the token unless the row holds a newer one,
    and so touches 1 row when the write may go on, 0 when it is stale."""
    if not _IDENT.match(table):
        raise ValueError(f"not a table name: {table!r}")
    return (f"INSERT INTO {table} AS f (resource, token) VALUES (%s, %s) "
            "ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token")


def fence(cursor: Cursor, resource: str, token: int, *, table: str = TABLE) -> None:
    """Admit this transaction's write to ``resource`` for a holder with
    ``token`` (its guard's ``fencing_token``), or raise
    :class:`StaleTokenError` naming the newer token the database has seen.
    Call it inside the transaction that makes the write, before the write."""
    cursor.execute(fence_sql(table), (resource, token))
    if cursor.rowcount == 1:
        return
    cursor.execute(f"SELECT token FROM {table} WHERE resource = %s", (resource,))
    row = cursor.fetchone()
    raise StaleTokenError(resource, token, int(row[0]) if row else None)
