"""Misuse that the stubs must reject (each line is one expected mypy error)."""

import etcdlock

c = etcdlock.Client(endpoints=["127.0.0.1:2379"])
c.lock(42)
c.try_lock("x").fencing_token
g: etcdlock.Guard = c.acquire("x")
g.put("k", 3)
n: str = g.fencing_token
b: str = g.get("k")
