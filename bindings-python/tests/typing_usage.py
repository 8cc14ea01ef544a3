"""Type-checked usage of the public API (mypy --strict must accept it)."""

from __future__ import annotations

import asyncio
from typing import List, Optional, Tuple

import etcdlock


def sync_usage(endpoints: List[str]) -> int:
    with etcdlock.Client(endpoints=endpoints, ttl=10, namespace="app/", connect_timeout=1.0) as client:
        lock: etcdlock.Lock = client.lock("stock", timeout=5)
        with lock as guard:
            token: int = guard.fencing_token
            key: str = guard.key
            lease: int = guard.lease_id
            held: bool = guard.is_held
            raw: Optional[bytes] = guard.get("count")
            guard.put("count", str(int(raw or b"0") + 1))
            guard.put(b"bin", b"\x00")
            existed: bool = guard.delete("tmp")
            ev: etcdlock.LostEvent = guard.lost
            was_lost: bool = ev.wait(0.0) or ev.is_set()
            reason: Optional[str] = guard.loss_reason or ev.reason
            guard.on_lost(lambda r: print("lost:", r))
            del key, lease, held, existed, was_lost, reason
        ok: bool = lock.acquire(blocking=False)
        if ok:
            lock.release()
        maybe: Optional[etcdlock.Guard] = client.try_lock("stock")
        if maybe is not None:
            maybe.unlock()
        rlock: etcdlock.RLock = client.lock("stock", reentrant=True)
        with rlock as outer, etcdlock.RLock(client, "stock", 5.0) as inner:
            same: bool = outer.fencing_token == inner.fencing_token
            del same
        if rlock.acquire(True, 1.0):
            rlock.release()
        again: Optional[etcdlock.Guard] = client.try_lock("stock", reentrant=True)
        if again is not None:
            again.unlock()
        try:
            client.acquire("stock", timeout=0.1).unlock()
        except etcdlock.TimeoutError as e:
            code: Optional[str] = e.code
            print(code, e.message)
        except etcdlock.LockLostError as e:
            why: Optional[str] = e.reason
            print(why)
        except etcdlock.LockError:
            pass
        return token


async def async_usage(endpoints: List[str]) -> Optional[bytes]:
    async with etcdlock.AsyncClient(endpoints=endpoints) as client:
        async with client.lock("stock", timeout=5) as guard:
            await guard.put("count", "1")
            value: Optional[bytes] = await guard.get("count")
            lost: bool = await guard.wait_lost(0.01)
            del lost
        g: Optional[etcdlock.AsyncGuard] = await client.try_lock("stock")
        if g is not None:
            await g.unlock()
        lk = client.lock("stock")
        if await lk.acquire(timeout=1.0):
            await lk.release()
        rl: etcdlock.AsyncRLock = client.lock("stock", reentrant=True)
        async with rl as outer:
            inner: etcdlock.AsyncGuard = await client.acquire("stock", reentrant=True)
            await inner.unlock()
            del outer
        return value


def recipes_usage(endpoints: List[str]) -> List[str]:
    with etcdlock.Client(endpoints=endpoints) as client:
        with client.acquire_permit("transcoders", 3, timeout=5) as permit:
            permit.put("job", "1")
        sem: etcdlock.Semaphore = client.semaphore("transcoders", 3)
        with sem as p:
            t: int = p.fencing_token
            del t
        with client.acquire_read("config") as r:
            cfg: Optional[bytes] = r.get("config")
            del cfg
        with client.acquire_many(["a", "b"], timeout=5) as m:
            names: List[str] = m.names
            lost: Optional[Tuple[str, str]] = m.wait_lost(0.01)
            m.on_lost(lambda lost_name, why: print(lost_name, why))
            m.on_renewal(lambda failing, left: print(failing, left))
            m_ev: etcdlock.LostEvent = m.lost
            m_left: Optional[float] = m.renewal_failing
            m_why: Optional[str] = m.loss_reason
            del lost, m_ev, m_left, m_why
        lead: etcdlock.Leadership = client.campaign("leader", "node-1", timeout=5)
        lead.proclaim(b"node-1 v2")
        current: Optional[etcdlock.Leader] = client.leader("leader")
        if current is not None:
            v: bytes = current.value
            del v
        for change in client.observe("leader"):
            print(change)
            break
        st: etcdlock.Status = client.status("transcoders")
        holders: List[etcdlock.Contender] = st.holders
        del holders
        dl: etcdlock.Deadlocks = client.deadlocks("")
        for cyc in dl.cycles:
            edge: etcdlock.WaitEdge = cyc.edges[0]
            who: etcdlock.Party = edge.holder
            del edge, who
        hist: etcdlock.History = client.history("transcoders", since=3600)
        entries: List[etcdlock.HistoryEntry] = hist.entries
        held_for: Optional[float] = entries[0].hold if entries else None
        del held_for
        with client.acquire("transcoders", timeout=5, detect_deadlock=True):
            pass
        lead.resign()
        return names


async def async_recipes_usage(endpoints: List[str]) -> Optional[etcdlock.Leader]:
    async with etcdlock.AsyncClient(endpoints=endpoints) as client:
        async with await client.campaign("leader", "node-1") as lead:
            await lead.proclaim("v2")
        async with await client.acquire_many(["a", "b"]) as m:
            ok: bool = m.is_held
            m.on_lost(lambda lost_name, why: print(lost_name, why))
            am_left: Optional[float] = m.renewal_failing
            am_lost: bool = await m.lost.wait_async(0)
            del ok, am_left, am_lost
        adl: etcdlock.Deadlocks = await client.deadlocks()
        ahist: etcdlock.History = await client.history("leader", since=60.0)
        async with await client.acquire("x", detect_deadlock=True):
            pass
        del adl, ahist
        async for change in await client.observe("leader"):
            return change
        return await client.leader("leader")


def leader_loop_usage(client: etcdlock.Client) -> List[str]:
    def task(term: etcdlock.Term) -> None:
        token: int = term.fencing_token
        term.leadership.put("epoch", str(token))
        term.cancelled.wait(1.0)

    kinds: List[str] = []
    with client.lead("svc", task, b"node-1", again=False, retry=0.5) as loop:
        for ev in loop.events():
            kinds.append(ev.kind)
            reason: Optional[str] = ev.reason
            who: Optional[etcdlock.Leader] = ev.leader
            err: Optional[etcdlock.LockError] = ev.error
            del reason, who, err
        done: bool = loop.join(1.0)
        del done
    client.lead("svc", task, on_event=lambda ev: print(ev.kind)).stop()
    return kinds


async def async_leader_loop_usage(client: etcdlock.AsyncClient) -> Optional[int]:
    async def task(term: etcdlock.AsyncTerm) -> None:
        await term.leadership.put("epoch", str(term.fencing_token))
        await term.cancelled.wait()

    async with client.lead("svc", task, "node-1") as loop:
        async for ev in loop.events():
            if ev.kind == "elected" and loop.term is not None:
                return loop.term.fencing_token
    await loop.wait()
    return None


if __name__ == "__main__":
    print(sync_usage(["127.0.0.1:2379"]), asyncio.run(async_usage(["127.0.0.1:2379"])))
