"""The conformance table (conformance/cases.json), run by Python against the
suite's real etcd. Every language's suite runs the same table; see
conformance/README.md for the steps and how outcomes map to each idiom.

One pytest test per case listed for Python (or listing no languages), each in
a fresh namespace; a last test fails if any of them did not run to its end,
and the session prints ``conformance: N of M cases ran for python``.

The etcd run leaves out the cases marked ``mem_only`` (they use the fault
controls of an in-process store). With ``ETCDLOCK_CONFORMANCE_BACKEND=mem``
the table runs against the in-process etcd instead (``mem://conformance``),
every case but those marked ``etcd_only``; a case with ``"etcd": "private"``
gets a store of its own (``mem://conf-ID``), on which the ``etcd`` step's
``pause`` and ``resume`` are the store's ``silence`` (an hour when the step
gives no ``for_ms``) and ``resume``, and the ``mem`` steps its controls
(``etcdlock.MemStore``). After every case, passed or failed, its store is
resumed. The raw steps (``keys``, ``delete_outside``) reach the store with
etcdctl at the URL it writes under ``ETCDLOCK_MEM_URL_DIR``. The line then
reads ``... cases ran for python (mem)``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import queue
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import etcdlock
from conftest import CONFORMANCE, ROOT, etcdctl, harness_path

LANG = "python"
TABLE_PATH = ROOT / "conformance" / "cases.json"
TABLE: Dict[str, Any] = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
CASES: List[Dict[str, Any]] = TABLE["cases"]


def listed(case: Dict[str, Any]) -> bool:
    return LANG in case.get("langs", TABLE["languages"])


MEM = os.environ.get("ETCDLOCK_CONFORMANCE_BACKEND") == "mem"
MEM_STORE = "conformance"
if MEM:
    # Where the in-process store writes its URL (read by the raw steps).
    if "ETCDLOCK_MEM_URL_DIR" not in os.environ:  # test.sh sets it (and removes it)
        os.environ["ETCDLOCK_MEM_URL_DIR"] = tempfile.mkdtemp(prefix="etcdlock-mem-")
# Each run leaves out the cases only the other backend can run.
MINE = [c for c in CASES if listed(c) and not c.get("mem_only" if not MEM else "etcd_only")]
CONFORMANCE.update(lang=LANG + (" (mem)" if MEM else ""), total=len(CASES), listed=[c["id"] for c in MINE], ran=[])


def raw_endpoints(endpoints: List[str], store: Optional[etcdlock.MemStore]) -> List[str]:
    """Where etcdctl reaches the etcd or the store a case's clients use."""
    if store is None:
        return endpoints
    path = os.path.join(os.environ["ETCDLOCK_MEM_URL_DIR"], f"{store.name or 'default'}.url")
    with open(path, encoding="utf-8") as f:
        return [f.read().strip()]


#: An `etcd` pause step without `for_ms`, on mem://: a silence this long.
PAUSE_FOREVER_S = 3600.0


def case_store(case: Dict[str, Any]) -> Optional[etcdlock.MemStore]:
    """On mem://, the store of a case: its own for a case with a private
    etcd (mem://conf-ID), else the run's. None in the etcd run."""
    if not MEM:
        return None
    return etcdlock.MemStore(f"conf-{case['id']}" if case.get("etcd") == "private" else MEM_STORE)


def store_control(case_id: str, store: etcdlock.MemStore, step: Dict[str, Any], guards: Dict[str, Any]) -> None:
    """An `etcd` or `mem` step on mem://: the store's fault controls (the
    guard's lease for `expire` and `stall`), as conformance/README.md says."""
    action = step["action"]
    for_s = step["for_ms"] / 1000 if "for_ms" in step else None
    if action in ("pause", "silence"):
        store.silence(PAUSE_FOREVER_S if for_s is None else for_s)
    elif action == "resume":
        store.resume()
    elif action == "expire":
        assert store.expire_lease(guards[step["guard"]].lease_id), f"case {case_id}: no lease to expire"
    elif action == "stall":
        assert for_s is not None, f"case {case_id}: a stall step needs for_ms"
        store.stall(guards[step["guard"]].lease_id, for_s)
    else:
        raise AssertionError(f"case {case_id}: {action} has no mem:// equivalent: mark the case etcd_only")


def text(v: Any) -> str:
    """A step's input string: a JSON string, {"repeat", "count"}, or UTF-16
    code units ({"utf16": [...]}, lone surrogates kept as such in the str)."""
    if isinstance(v, str):
        return v
    if "repeat" in v:
        return str(v["repeat"]) * int(v["count"])
    if "utf16" in v:
        units = v["utf16"]
        # Pairs decode to one code point; a lone surrogate stays a lone one.
        return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")
    raise AssertionError(f"an input Python cannot express: {v!r}")


def names(v: Any) -> List[str]:
    """A `names` input: a list of string inputs, or {"prefix", "count"}."""
    if isinstance(v, list):
        return [text(x) for x in v]
    return [f"{v['prefix']}{i}" for i in range(int(v["count"]))]


def number(v: Any) -> float:
    if v == "NaN":
        return math.nan
    if v == "inf":
        return math.inf
    return v  # type: ignore[no-any-return]


def seconds(ms: Any) -> float:
    """A `*_ms` duration as Python's seconds (float)."""
    v = number(ms)
    return v if not math.isfinite(v) else v / 1000


def outcome(fn: Callable[[], Any]) -> Tuple[Any, Any]:
    """("ok", value) or the token of the raised error: the code name of an
    etcdlock error, else the exception's class name (e.g. "TypeError")."""
    try:
        return "ok", fn()
    except etcdlock.LockError as e:
        return e.code, None
    except Exception as e:  # noqa: BLE001 - reported as a token, compared with the table
        return type(e).__name__, None


class PrivateEtcd:
    """The etcd of a case marked `"etcd": "private"`: its own etcd-harness,
    so pausing or killing it touches no other case."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([harness_path()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise AssertionError("the private etcd harness printed nothing")
        self.endpoints: List[str] = list(json.loads(line)["endpoints"])

    def act(self, step: Dict[str, Any]) -> None:
        """`pause 0 [for_ms]`, `resume 0` or `kill 0`, and the harness's answer."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cmd = f"{step['action']} 0" + (f" {step['for_ms']}" if "for_ms" in step else "")
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert reply.get("ok"), f"etcd-harness answered {reply!r} to {cmd!r}"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# Milliseconds added to every call's `within_ms` (conformance/README.md,
# "Time"): set by the clean room's aarch64 runs under qemu-user only.
SLACK_MS = int(os.environ.get("ETCDLOCK_CONFORMANCE_SLACK_MS", "0"))


def check_time(case_id: str, i: int, step: Dict[str, Any], took: float) -> None:
    """The step's `within_ms` / `at_least_ms` bounds on the call's own time."""
    ms = took * 1000
    if "within_ms" in step:
        limit = step["within_ms"] + SLACK_MS
        assert ms <= limit, f"case {case_id} step {i} ({step['op']}): took {ms:.0f} ms, the table allows {step['within_ms']} ms (+{SLACK_MS} ms slack)"
    if "at_least_ms" in step:
        assert ms >= step["at_least_ms"], f"case {case_id} step {i} ({step['op']}): took {ms:.0f} ms, the table wants at least {step['at_least_ms']} ms"


def extras(step: Dict[str, Any]) -> Dict[str, Any]:
    """A step's acquisition options as Python's keyword arguments (seconds)."""
    x: Dict[str, Any] = {}
    if "lock_delay_ms" in step:
        x["lock_delay"] = seconds(step["lock_delay_ms"])
    if "lease_time_ms" in step:
        x["lease_time"] = seconds(step["lease_time_ms"])
    if "metadata" in step:
        x["metadata"] = {k: text(v) for k, v in step["metadata"].items()}
    if "detect_deadlock" in step:
        x["detect_deadlock"] = bool(step["detect_deadlock"])
    return x


class OwnerThread:
    """One owner of the `relock` steps: a dedicated thread that makes every
    call of that owner, so `etcdlock.RLock` sees one thread per owner name."""

    def __init__(self) -> None:
        self.calls: "queue.Queue[Optional[Tuple[Callable[[], Any], queue.Queue[Tuple[Any, Any]]]]]" = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.calls.get()
            if item is None:
                return
            fn, reply = item
            reply.put(outcome(fn))

    def call(self, fn: Callable[[], Any]) -> Tuple[Any, Any]:
        reply: "queue.Queue[Tuple[Any, Any]]" = queue.Queue()
        self.calls.put((fn, reply))
        return reply.get(timeout=120)

    def stop(self) -> None:
        self.calls.put(None)
        self.thread.join(30)


class Run:
    def __init__(self, case: Dict[str, Any], endpoints: List[str]) -> None:
        self.id: str = case["id"]
        self.store = case_store(case)
        self.private = PrivateEtcd() if case.get("etcd") == "private" and not MEM else None
        self.endpoints = [self.store.endpoint] if self.store else self.private.endpoints if self.private else endpoints
        self.ns = f"conf-py-{self.id}-{uuid.uuid4().hex[:8]}/"
        self.clients: Dict[str, etcdlock.Client] = {}
        self.guards: Dict[str, Any] = {}
        # Calls started with `"background": true` (a thread each), awaited by `join`.
        self.calls: Dict[str, Tuple[threading.Thread, List[Tuple[Any, Any]]]] = {}
        # `relock` / `unlock` with `lock`: the reentrant locks, and one thread per owner.
        self.rlocks: Dict[str, etcdlock.RLock] = {}
        self.owners: Dict[str, OwnerThread] = {}

    def owner(self, step: Dict[str, Any]) -> OwnerThread:
        who = step.get("owner", "main")
        if who not in self.owners:
            self.owners[who] = OwnerThread()
        return self.owners[who]

    def connect(self, options: Dict[str, Any]) -> etcdlock.Client:
        kw: Dict[str, Any] = {"endpoints": list(self.endpoints), "namespace": self.ns, "ttl": 10}
        for k, v in options.items():
            if k == "endpoints":
                kw["endpoints"] = list(v)
            elif k == "ttl":
                kw["ttl"] = number(v)
            elif k == "namespace":
                kw["namespace"] = text(v)
            elif k == "margin_ms":
                kw["margin"] = seconds(v)
            elif k == "connect_timeout_ms":
                kw["connect_timeout"] = seconds(v)
            elif k == "request_timeout_ms":
                kw["request_timeout"] = seconds(v)
            else:
                raise AssertionError(f"case {self.id}: unknown connect option {k}")
        return etcdlock.Client(**kw)

    def prefix(self, step: Dict[str, Any]) -> str:
        return f"{self.ns}{text(step['name'])}/"

    def step(self, i: int, step: Dict[str, Any]) -> None:
        if step["op"] in ("etcd", "mem") and self.store:
            store_control(self.id, self.store, step, self.guards)
            return
        assert step["op"] != "mem", f"case {self.id}: a mem op in an etcd run: mark the case mem_only"
        if step["op"] == "etcd":
            assert self.private, f"case {self.id}: the etcd op needs \"etcd\": \"private\""
            self.private.act(step)
            return
        start = time.monotonic()
        self.call(i, step)
        check_time(self.id, i, step, time.monotonic() - start)

    def call(self, i: int, step: Dict[str, Any]) -> None:
        op = step["op"]
        who = step.get("client", "a")
        want = step["expect_python"] if "expect_python" in step else step.get("expect")
        if op != "connect" and who not in self.clients:
            self.clients[who] = self.connect({})

        def check(got: Any) -> None:
            assert got == want, f"case {self.id} step {i} ({op}): got {got!r}, the table says {want!r}"

        if op == "lock" and step.get("background"):
            c = self.clients[who]
            name = text(step["name"])
            t0: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            result: List[Tuple[Any, Any]] = []
            th = threading.Thread(target=lambda: result.append(outcome(lambda: c.acquire(name, timeout=t0))), daemon=True)
            th.start()
            self.calls[step["as"]] = (th, result)
        elif op == "join":
            th, result = self.calls.pop(step["call"])
            th.join(step.get("within_ms", 60000) / 1000 + 1)
            assert result, f"case {self.id} step {i}: the background call {step['call']} has not returned"
            got, g = result[0]
            if g is not None:
                self.guards[step["call"]] = g
            check(got)
        elif op == "connect":
            got, c = outcome(lambda: self.connect(step["options"]))
            if c is not None:
                self.clients[who] = c
            check(got)
        elif op in ("lock", "try_lock"):
            c = self.clients[who]
            name = text(step["name"])
            if op == "lock":
                t: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
                x = extras(step)
                got, g = outcome(lambda: c.acquire(name, timeout=t, **x))
            else:
                got, g = outcome(lambda: c.try_lock(name))
                if got == "ok" and g is None:
                    got = "would_block"
            if g is not None and "as" in step:
                self.guards[step["as"]] = g
            check(got)
        elif op in ("acquire_permit", "read_lock", "campaign", "lock_many"):
            c = self.clients[who]
            t2: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            if op == "acquire_permit":
                x2 = extras(step)
                got, g = outcome(lambda: c.acquire_permit(text(step["name"]), step["permits"], timeout=t2, **x2))
            elif op == "read_lock":
                got, g = outcome(lambda: c.acquire_read(text(step["name"]), timeout=t2))
            elif op == "campaign":
                got, g = outcome(lambda: c.campaign(text(step["name"]), text(step["value"]), timeout=t2))
            else:
                got, g = outcome(lambda: c.acquire_many(names(step["names"]), timeout=t2))
            if g is not None and "as" in step:
                self.guards[step["as"]] = g
            check(got)
        elif op == "proclaim":
            g = self.guards[step["guard"]]
            check(outcome(lambda: g.proclaim(text(step["value"])))[0])
        elif op == "leader":
            got, leader = outcome(lambda: self.clients[who].leader(text(step["name"])))
            if got == "ok":
                got = None if leader is None else leader.value.decode("utf-8")
            check(got)
        elif op == "relock":
            c = self.clients[who]
            lock_id = step["lock"]
            if lock_id not in self.rlocks:
                self.rlocks[lock_id] = etcdlock.RLock(c, text(step["name"]))
            rl = self.rlocks[lock_id]
            assert rl.name == text(step["name"]), f"case {self.id}: lock {lock_id} is for {rl.name!r}"
            # Absent: -1, the handle's default (None: wait as long as it takes).
            rt: float = seconds(step["timeout_ms"]) if "timeout_ms" in step else -1

            def relock() -> Any:
                # threading.RLock's idiom: False after the timeout; the owner's new handle on success.
                return rl.guard if rl.acquire(timeout=rt) else None

            got, g = self.owner(step).call(relock)
            if got == "ok" and g is None:
                got = "Timeout"
            if g is not None and "as" in step:
                self.guards[step["as"]] = g
            check(got)
        elif op == "unlock" and "lock" in step:
            rl2 = self.rlocks[step["lock"]]
            check(self.owner(step).call(rl2.release)[0])
        elif op == "unlock":
            check(outcome(self.guards[step["guard"]].unlock)[0])
        elif op in ("put", "get", "delete"):
            g = self.guards[step["guard"]]
            key = text(step["key"])
            if op == "put":
                value = text(step["value"])
                got, _ = outcome(lambda: g.put(key, value))
            elif op == "delete":
                got, _ = outcome(lambda: g.delete(key))
            else:
                got, v = outcome(lambda: g.get(key))
                if got == "ok":
                    got = None if v is None else v.decode("utf-8")
            check(got)
        elif op == "close":
            check(outcome(self.clients[who].close)[0])
        elif op == "state":
            check(self.guards[step["guard"]].state)
        elif op == "keys":
            # etcd's own count of the range (etcdctl 3.4 has no --count-only;
            # the JSON response carries `count`, left out when it is 0).
            def count() -> int:
                out = etcdctl(raw_endpoints(self.endpoints, self.store), "get", "--prefix", "--keys-only", "-w", "json", self.prefix(step))
                return int(json.loads(out).get("count", 0))

            n = count()
            if step.get("await"):
                # Until the count is the table's (the step's within_ms bounds the wait).
                until = time.monotonic() + step["within_ms"] / 1000
                while n != want and time.monotonic() < until:
                    time.sleep(0.01)
                    n = count()
            check(n)
        elif op == "delete_outside":
            etcdctl(raw_endpoints(self.endpoints, self.store), "del", "--prefix", self.prefix(step))
        elif op == "await_lost":
            g = self.guards[step["guard"]]
            within = step["within_ms"] / 1000
            start = time.monotonic()
            # The guard's LostEvent: an event wait, not a polling sleep.
            lost = g.lost.wait(within)
            elapsed = time.monotonic() - start
            assert lost, f"case {self.id} step {i}: no loss reported within {within}s (state {g.state})"
            assert elapsed <= within + 0.5, f"case {self.id} step {i}: loss reported after {elapsed:.3f}s"
            check(g.loss_reason)
        elif op == "status":
            check(outcome(lambda: self.clients[who].status(text(step["name"])))[0])
        elif op == "deadlocks":
            # The number of cycles, or the error's code.
            got, d = outcome(lambda: self.clients[who].deadlocks(text(step["prefix"])))
            check(len(d.cycles) if got == "ok" else got)
        elif op == "history":
            # Each entry's `ended`, oldest first, or the error's code.
            got, h = outcome(lambda: self.clients[who].history(text(step["name"])))
            check([e.ended for e in h.entries] if got == "ok" else got)
        elif op == "release":
            g = self.guards[step["guard"]]
            token = g.fencing_token + step.get("token_offset", 0)
            got, released = outcome(lambda: self.clients[who].release(text(step["name"]), token))
            check(released if got == "ok" else got)
        elif op == "latch":
            got, latch = outcome(lambda: self.clients[who].latch(text(step["name"]), step["count"]))
            if latch is not None and "as" in step:
                self.guards[step["as"]] = latch
            check(got)
        elif op == "count_down":
            check(outcome(self.guards[step["latch"]].count_down)[0])
        elif op == "latch_count":
            got, n = outcome(self.guards[step["latch"]].count)
            check(n if got == "ok" else got)
        elif op == "latch_wait":
            t3: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            check(outcome(lambda: self.guards[step["latch"]].wait(t3))[0])
        elif op == "barrier":
            got, barrier = outcome(lambda: self.clients[who].barrier(text(step["name"]), step["parties"]))
            if barrier is not None and "as" in step:
                self.guards[step["as"]] = barrier
            check(got)
        elif op == "barrier_wait":
            t4: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            check(outcome(lambda: self.guards[step["barrier"]].wait(t4))[0])
        elif op == "token_order":
            a, b = self.guards[step["first"]], self.guards[step["second"]]
            check("ok" if a.fencing_token < b.fencing_token else "tokens not increasing")
        elif op == "token_same":
            a, b = self.guards[step["first"]], self.guards[step["second"]]
            check("ok" if a is not b and a.fencing_token == b.fencing_token else f"tokens {a.fencing_token} and {b.fencing_token}")
        else:
            raise AssertionError(f"case {self.id}: unknown op {op}")

    def close(self) -> None:
        # A case that failed mid-silence leaves its store answering (and its
        # clients' close quick).
        if self.store:
            self.store.resume()
        for t in self.owners.values():
            t.stop()
        for c in self.clients.values():
            try:
                c.close()
            except etcdlock.LockError:
                pass
        if self.private:
            self.private.stop()


@pytest.mark.parametrize("case", MINE, ids=[c["id"] for c in MINE])
def test_case(case: Dict[str, Any], endpoints: List[str]) -> None:
    CONFORMANCE["active"] = True
    run = Run(case, endpoints)
    try:
        for i, step in enumerate(case["steps"]):
            run.step(i, step)
    finally:
        run.close()
    CONFORMANCE["ran"].append(case["id"])


DEADLINE = [c for c in MINE if c["id"].startswith("deadline-")]
# Through AsyncClient too: the deadline cases, and closing a client its tasks wait on.
ASYNC = DEADLINE + [c for c in MINE if c["id"] == "close-while-waiting"]


class AsyncRun:
    """Cases through `AsyncClient` (`ASYNC`): the same bounds hold for a
    coroutine as for a blocking call (the steps these cases use only)."""

    def __init__(self, case: Dict[str, Any], endpoints: List[str]) -> None:
        self.id: str = case["id"]
        self.store = case_store(case)
        self.private = PrivateEtcd() if case.get("etcd") == "private" and not MEM else None
        self.endpoints = [self.store.endpoint] if self.store else self.private.endpoints if self.private else endpoints
        self.ns = f"conf-pyasync-{self.id}-{uuid.uuid4().hex[:8]}/"
        self.clients: Dict[str, etcdlock.AsyncClient] = {}
        self.guards: Dict[str, Any] = {}
        # `"background": true` calls (asyncio tasks), awaited by `join`.
        self.calls: Dict[str, "asyncio.Task[Tuple[Any, Any]]"] = {}

    async def outcome(self, coro: Any) -> Tuple[Any, Any]:
        try:
            return "ok", await coro
        except etcdlock.LockError as e:
            return e.code, None

    def client(self, options: Dict[str, Any]) -> etcdlock.AsyncClient:
        kw: Dict[str, Any] = {"endpoints": list(self.endpoints), "namespace": self.ns, "ttl": 10}
        for k, v in options.items():
            key = {"connect_timeout_ms": "connect_timeout", "request_timeout_ms": "request_timeout"}[k]
            kw[key] = seconds(v)
        return etcdlock.AsyncClient(**kw)

    async def step(self, i: int, step: Dict[str, Any]) -> None:
        op = step["op"]
        if op in ("etcd", "mem") and self.store:
            store_control(self.id, self.store, step, self.guards)
            return
        if op == "etcd":
            assert self.private, f"case {self.id}: the etcd op needs \"etcd\": \"private\""
            await asyncio.to_thread(self.private.act, step)
            return
        who = step.get("client", "a")
        want = step["expect_python"] if "expect_python" in step else step.get("expect")
        if op != "connect" and who not in self.clients:
            self.clients[who] = await self.client({}).connect()
        start = time.monotonic()
        if op == "connect":
            got, c = await self.outcome(self.client(step["options"]).connect())
            if c is not None:
                self.clients[who] = c
        elif op == "lock" and step.get("background"):
            t0: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            self.calls[step["as"]] = asyncio.create_task(self.outcome(self.clients[who].acquire(text(step["name"]), timeout=t0)))
            return
        elif op == "join":
            got, g = await self.calls.pop(step["call"])
            if g is not None:
                self.guards[step["call"]] = g
        elif op == "lock":
            t: Optional[float] = seconds(step["timeout_ms"]) if "timeout_ms" in step else None
            got, g = await self.outcome(self.clients[who].acquire(text(step["name"]), timeout=t, **extras(step)))
            if g is not None and "as" in step:
                self.guards[step["as"]] = g
        elif op == "state":
            got = self.guards[step["guard"]].state
        elif op == "close":
            got, _ = await self.outcome(self.clients[who].close())
        elif op == "keys":
            prefix = f"{self.ns}{text(step['name'])}/"

            def count() -> int:
                out = etcdctl(raw_endpoints(self.endpoints, self.store), "get", "--prefix", "--keys-only", "-w", "json", prefix)
                return int(json.loads(out).get("count", 0))

            got = await asyncio.to_thread(count)
            until = time.monotonic() + (step["within_ms"] / 1000 if step.get("await") else 0)
            while got != want and time.monotonic() < until:
                await asyncio.sleep(0.01)
                got = await asyncio.to_thread(count)
        elif op == "try_lock":
            got, g = await self.outcome(self.clients[who].try_lock(text(step["name"])))
            if got == "ok" and g is None:
                got = "would_block"
        elif op == "unlock":
            got, _ = await self.outcome(self.guards[step["guard"]].unlock())
        elif op == "status":
            got, _ = await self.outcome(self.clients[who].status(text(step["name"])))
        else:
            raise AssertionError(f"case {self.id}: op {op} has no asyncio runner")
        assert got == want, f"case {self.id} step {i} ({op}, asyncio): got {got!r}, the table says {want!r}"
        check_time(self.id, i, step, time.monotonic() - start)

    async def close(self) -> None:
        if self.store:
            self.store.resume()
        for c in self.clients.values():
            try:
                await c.close()
            except etcdlock.LockError:
                pass
        if self.private:
            self.private.stop()


@pytest.mark.parametrize("case", ASYNC, ids=[c["id"] for c in ASYNC])
def test_case_asyncio(case: Dict[str, Any], endpoints: List[str]) -> None:
    async def main() -> None:
        run = AsyncRun(case, endpoints)
        try:
            for i, step in enumerate(case["steps"]):
                await run.step(i, step)
        finally:
            await run.close()

    asyncio.run(main())


def test_the_deadline_section_is_there() -> None:
    # On mem:// too: a pause is the store's silence (the cases that kill etcd are etcd_only).
    assert len(DEADLINE) >= 3, [c["id"] for c in DEADLINE]


def test_the_fault_control_cases_are_there() -> None:
    ids = {c["id"] for c in MINE}
    mem_only = {c["id"] for c in CASES if listed(c) and c.get("mem_only")}
    assert len(mem_only) >= 3, mem_only
    assert (mem_only <= ids) if MEM else not (mem_only & ids), (MEM, sorted(mem_only & ids))


def test_every_listed_case_ran() -> None:
    """Runs after the cases (pytest keeps definition order): a case listed for
    Python that did not run to its end fails the suite here too."""
    CONFORMANCE["active"] = True
    ran = CONFORMANCE["ran"]
    missing = [i for i in CONFORMANCE["listed"] if i not in ran]
    line = f"conformance: {len(ran)} of {len(CASES)} cases ran for {CONFORMANCE['lang']}"
    assert not missing, f"{line}; listed for {LANG} and not run: {missing}"
