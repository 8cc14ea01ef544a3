"""Flash sale (秒杀) worker: the seed article's stock-deduction demo on etcdlock.

The stock lives in etcd. Every purchase is: take the lock, guarded get of the
stock, decrement, guarded put, unlock. The read-check-write is deliberately
non-atomic (that is the seed's point: without the lock it oversells); the lock
makes it safe, and the guarded put makes a buyer that lost the lock (GC pause,
partition) fail instead of writing a stale stock.

Run against etcd (several copies may run at once, on one or many machines):

    python flash_sale.py --endpoints 127.0.0.1:2379 --stock 50 --buyers 8 --init

Prints one JSON line: {"sold": ..., "remaining": ..., "buyers": {...}}.
"""

from __future__ import annotations

import argparse
import json
import threading
from typing import Dict, List

import etcdlock


def buy_until_sold_out(client: etcdlock.Client, item: str, buyer: str, sales: Dict[str, int]) -> None:
    """One buyer: purchase one unit at a time until the stock is gone."""
    while True:
        # the lock owns the prefix "<item>/lock/"; the data lives beside it
        with client.lock(item + "/lock", timeout=30) as guard:
            stock = int(guard.get(item + "/stock") or b"0")
            if stock <= 0:
                return
            # the order record carries the fencing token: a downstream service
            # can refuse an order older than one it has already seen
            guard.put(f"{item}/orders/{guard.fencing_token}", buyer)
            guard.put(item + "/stock", str(stock - 1))
        sales[buyer] = sales.get(buyer, 0) + 1


def main(argv: List[str] | None = None) -> Dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoints", default=None, help="etcd endpoints (default $ETCDLOCK_ENDPOINTS)")
    ap.add_argument("--item", default="flash-sale/maotai")
    ap.add_argument("--stock", type=int, default=50)
    ap.add_argument("--buyers", type=int, default=8, help="buyer threads, each with its own client (session)")
    ap.add_argument("--init", action="store_true", help="(re)set the stock before selling")
    ap.add_argument("--name", default="worker", help="this worker's name in the order records")
    args = ap.parse_args(argv)

    sales: Dict[str, int] = {}
    clients = [etcdlock.Client(endpoints=args.endpoints, ttl=10) for _ in range(args.buyers)]
    try:
        if args.init:
            with clients[0].lock(args.item + "/lock", timeout=30) as guard:
                guard.put(args.item + "/stock", str(args.stock))
        threads = [
            threading.Thread(target=buy_until_sold_out, args=(c, args.item, f"{args.name}-{i}", sales))
            for i, c in enumerate(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with clients[0].lock(args.item + "/lock", timeout=30) as guard:
            remaining = int(guard.get(args.item + "/stock") or b"0")
    finally:
        for c in clients:
            c.close()
    result: Dict[str, object] = {"sold": sum(sales.values()), "remaining": remaining, "buyers": sales}
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
