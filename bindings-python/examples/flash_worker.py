"""The Python worker of the cross-language flash sale (scripts/flash_sale.py).

Contract shared by every language (see cli/src/flash.rs): FLASH_ENDPOINTS,
FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS,
FLASH_WORKER_ID in the environment; one JSON line per purchase attempt.
With FLASH_STORE=postgres the stock is a row in PostgreSQL (PG* variables)
and each purchase one transaction fenced by the hold's token
(etcdlock.fencing); FLASH_NO_LOCK=1 (the control run) takes no lock there.
"""
import json
import os
import time
from typing import Any, Tuple

import etcdlock


def purchase_etcd(guard: etcdlock.Guard, stock_key: str, sales: str) -> Tuple[bool, int]:
    before = int(guard.get(stock_key) or b"0")
    if before > 0:
        guard.put(stock_key, str(before - 1))
        guard.put(f"{sales}{guard.fencing_token:020d}", "python")
    return before > 0, before


def purchase_postgres(db: Any, sku: str, lock: str, token: int, worker: str) -> Tuple[bool, int]:
    """One transaction: read the stock, and if positive write stock-1 and a sale row,
    fenced by the hold's token (a token of 0 is the control run's: no fence)."""
    from etcdlock.fencing import fence

    with db.transaction(), db.cursor() as cur:
        cur.execute("SELECT stock FROM flash_stock WHERE sku = %s", (sku,))
        row = cur.fetchone()
        before = int(row[0]) if row else 0
        if before > 0:
            if token:
                fence(cur, lock, token)
            else:
                time.sleep(0.005)  # the control run: business logic between the read and the write
            cur.execute("UPDATE flash_stock SET stock = %s WHERE sku = %s", (before - 1, sku))
            cur.execute("INSERT INTO flash_sales (token, lang, worker) VALUES (%s, 'python', %s)", (token, worker))
    return before > 0, before


def main() -> None:
    env = os.environ
    lock, stock_key, sales = env["FLASH_LOCK"], env["FLASH_STOCK_KEY"], env["FLASH_SALES_PREFIX"]
    worker = env["FLASH_WORKER_ID"]
    db = None
    if env.get("FLASH_STORE") == "postgres":
        import psycopg

        db = psycopg.connect(autocommit=True)
    with etcdlock.Client(endpoints=env["FLASH_ENDPOINTS"].split(",")) as client:
        for _ in range(int(env["FLASH_ATTEMPTS"])):
            t0 = time.monotonic()
            if db is not None and env.get("FLASH_NO_LOCK") == "1":
                sold, before = purchase_postgres(db, stock_key, lock, 0, worker)
                wait_ms, token = 0.0, 0
            else:
                with client.lock(lock) as guard:
                    wait_ms = (time.monotonic() - t0) * 1000
                    token = guard.fencing_token
                    if db is None:
                        sold, before = purchase_etcd(guard, stock_key, sales)
                    else:
                        sold, before = purchase_postgres(db, stock_key, lock, token, worker)
            print(json.dumps({"lang": "python", "worker": worker, "sold": sold, "token": token,
                              "wait_ms": wait_ms, "stock_before": before, "t_ms": int(time.time() * 1000)}),
                  flush=True)
    if db is not None:
        db.close()


if __name__ == "__main__":
    main()
