"""A deposit to an account in PostgreSQL, made under an etcdlock lock and
fenced with the hold's token: a holder that lost the lock while paused
cannot overwrite a newer holder's deposit.

Usage: fence_postgres.py NAME ACCOUNT AMOUNT [--pause] [--no-fence]

etcd from ETCDLOCK_ENDPOINTS (and ETCDLOCK_TTL), PostgreSQL from libpq's PG*
variables; the tables are examples/postgres/fence_schema.sql. With --pause the
holder waits for a line on stdin between reading the balance and writing it
(where the tests stop it past its lease); --no-fence writes without the fence
(the lost update the fence prevents). scripts/fence_scenario.py runs it.
"""

import sys

import psycopg

import etcdlock
from etcdlock.fencing import StaleTokenError, fence


def main() -> None:
    name, account, amount = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lock = f"account-{account}"
    with etcdlock.Client() as client, psycopg.connect(autocommit=True) as db:
        guard = client.acquire(lock, timeout=10)
        token = guard.fencing_token
        row = db.execute("SELECT balance FROM accounts WHERE id = %s", (account,)).fetchone()
        balance = row[0] if row else 0
        print(f"{name}: token {token}, balance {balance}", flush=True)
        if "--pause" in sys.argv:
            sys.stdin.readline()  # a GC pause, a slow disk: the lease may expire here
        try:
            with db.transaction(), db.cursor() as cur:
                if "--no-fence" not in sys.argv:
                    fence(cur, lock, token)  # refused if a newer holder has written
                cur.execute("UPDATE accounts SET balance = %s WHERE id = %s", (balance + amount, account))
            print(f"{name}: wrote balance {balance + amount}")
        except StaleTokenError as e:
            print(f"{name}: refused: {e}")
        try:
            guard.unlock()
        except etcdlock.LockLostError as e:
            print(f"{name}: the lock was lost: {e.reason}")


if __name__ == "__main__":
    main()
