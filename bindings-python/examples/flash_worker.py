"""The Python worker of the cross-language flash sale (scripts/flash_sale.py).

Contract shared by every language (see cli/src/flash.rs): FLASH_ENDPOINTS,
FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS,
FLASH_WORKER_ID in the environment; one JSON line per purchase attempt.
"""
import json
import os
import time

import etcdlock


def main() -> None:
    env = os.environ
    lock, stock_key, sales = env["FLASH_LOCK"], env["FLASH_STOCK_KEY"], env["FLASH_SALES_PREFIX"]
    with etcdlock.Client(endpoints=env["FLASH_ENDPOINTS"].split(",")) as client:
        for _ in range(int(env["FLASH_ATTEMPTS"])):
            t0 = time.monotonic()
            with client.lock(lock) as guard:
                wait_ms = (time.monotonic() - t0) * 1000
                before = int(guard.get(stock_key) or b"0")
                sold = before > 0
                if sold:
                    guard.put(stock_key, str(before - 1))
                    guard.put(f"{sales}{guard.fencing_token:020d}", "python")
                token = guard.fencing_token
            print(json.dumps({"lang": "python", "worker": env["FLASH_WORKER_ID"], "sold": sold, "token": token,
                              "wait_ms": wait_ms, "stock_before": before, "t_ms": int(time.time() * 1000)}),
                  flush=True)


if __name__ == "__main__":
    main()
