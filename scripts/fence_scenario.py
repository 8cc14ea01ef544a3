#!/usr/bin/env python3
"""The classic fencing failure, played against a real etcd and a real
PostgreSQL by any language's example (docs/guides/fencing-database.md).

    scripts/fence_scenario.py [--label L] [--harness ETCD_HARNESS] -- CMD ARGS...

CMD ARGS NAME ACCOUNT AMOUNT [--pause] [--no-fence] is the example: it takes
the lock `account-ACCOUNT` (etcd from ETCDLOCK_ENDPOINTS, a 2 s lease from
ETCDLOCK_TTL), prints `NAME: token T, balance B`, with --pause waits for a line
on stdin, then deposits AMOUNT in PostgreSQL (PG* variables, the tables of
examples/postgres/fence_schema.sql) fenced by its token, unless --no-fence.
It prints `NAME: wrote balance N` or `NAME: refused: token T is older than U,
...`. Each run, with the fence and without it (the control, side by side):

1. A (a process of its own) takes the lock and reads the balance (100);
2. A is stopped (SIGSTOP) before it writes: its keep-alive stops with it;
3. B asks for the lock, gets it once A's lease has expired (the event awaited:
   B's acquire returns), reads 100 and deposits 20 (120);
4. A is continued (SIGCONT) and writes its deposit of 10 with its old token.

Checked exactly: with the fence, A is refused, naming B's newer token, and the
balance is B's 120; without it, A's 110 overwrites B's deposit (the lost
update). Starts its own etcd (testkit's etcd-harness) and PostgreSQL
(scripts/pg_harness.py) and stops both; exit 1 if a check fails. Last line:
"N passed, N failed".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import pg_harness  # noqa: E402

TTL = 2
START, DEPOSIT_A, DEPOSIT_B = 100, 10, 20


def harness(given: str) -> str:
    for p in (given, os.environ.get("ETCD_HARNESS"), os.environ.get("ETCDLOCK_HARNESS")):
        if p:
            return p
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    return str(Path(target) / "debug" / "etcd-harness")


def psql(env: Dict[str, str], sql: str) -> str:
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql], env=env,
                          check=True, capture_output=True, text=True).stdout.strip()


class Lines:
    """A child's stdout, read line by line on a thread, each line awaited with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: List[str] = []
        self.cond = threading.Condition()
        self.done = False
        threading.Thread(target=self.pump, args=(proc,), daemon=True).start()

    def pump(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 30) -> List[str]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.lines) >= n or self.done, timeout)
            return list(self.lines)


def scenario(cmd: List[str], env: Dict[str, str], fenced: bool) -> Tuple[List[str], List[str]]:
    """One run; returns the problems found (empty when every check held) and a report."""
    account = "acct-fenced" if fenced else "acct-control"
    extra = [] if fenced else ["--no-fence"]
    psql(env, f"INSERT INTO accounts VALUES ('{account}', {START})")
    problems: List[str] = []
    report: List[str] = []
    a = subprocess.Popen(cmd + ["A", account, str(DEPOSIT_A), "--pause", *extra], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out_a = Lines(a)
    try:
        first = out_a.wait(1)
        m = re.fullmatch(rf"A: token (\d+), balance {START}", first[0] if first else "")
        if not m:
            return [f"A's first line: {first!r} (exit {a.poll()})"], report
        token_a = int(m.group(1))
        os.kill(a.pid, signal.SIGSTOP)  # A pauses before its write; its keep-alive stops with it
        t0 = time.monotonic()
        b = subprocess.run(cmd + ["B", account, str(DEPOSIT_B), *extra], env=env, text=True,
                           capture_output=True, timeout=60)
        waited = time.monotonic() - t0
        out_b = b.stdout.splitlines()
        m = re.fullmatch(rf"B: token (\d+), balance {START}", out_b[0] if out_b else "")
        if b.returncode != 0 or not m or out_b[1:] != [f"B: wrote balance {START + DEPOSIT_B}"]:
            problems.append(f"B exited {b.returncode} printing {out_b!r} {b.stderr[-500:]!r}")
            return problems, report
        token_b = int(m.group(1))
        if token_b <= token_a:
            problems.append(f"B's token {token_b} is not larger than A's {token_a}")
        assert a.stdin is not None
        a.stdin.write("\n")  # A's cue to write, read once it runs again
        a.stdin.flush()
        os.kill(a.pid, signal.SIGCONT)
        a.wait(timeout=30)
        lines = out_a.wait(1 << 30, timeout=10)  # all of it: returns when A's stdout closes
        late = lines[1] if len(lines) > 1 else ""
        balance = int(psql(env, f"SELECT balance FROM accounts WHERE id = '{account}'"))
        if fenced:
            want = f"A: refused: token {token_a} is older than {token_b}, the newest written for account-{account}"
            want_balance = START + DEPOSIT_B
            newest = psql(env, f"SELECT token FROM etcdlock_fence WHERE resource = 'account-{account}'")
            if newest != str(token_b):
                problems.append(f"the fence holds {newest}, not B's token {token_b}")
        else:
            want = f"A: wrote balance {START + DEPOSIT_A}"
            want_balance = START + DEPOSIT_A
        if late != want:
            problems.append(f"A's late write printed {late!r}, want {want!r} (all: {lines!r})")
        if a.returncode != 0:
            problems.append(f"A exited {a.returncode}")
        if balance != want_balance:
            problems.append(f"balance {balance}, want {want_balance}")
        kind = "fenced" if fenced else "control, no fence"
        outcome = ("A's stale write rejected, B's deposit kept" if fenced else
                   f"A's stale write landed: B's deposit of {DEPOSIT_B} lost (the lost update)")
        report.append(f"{kind}: A token {token_a} stopped; B waited {waited:.1f} s, token {token_b}, "
                      f"wrote {START + DEPOSIT_B}; A woke: {late!r}; balance {balance}: {outcome}")
        report += [f"  A| {line}" for line in lines[2:]]
        return problems, report
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
            a.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="example")
    ap.add_argument("--harness", default="")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("the example's command is missing (after --)")
    t0 = time.monotonic()
    etcd = subprocess.Popen([harness(a.harness)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pg = None
    try:
        assert etcd.stdout is not None
        endpoints = ",".join(json.loads(etcd.stdout.readline())["endpoints"])
        pg = pg_harness.Postgres()
        env = {**os.environ, **pg_harness.env_for(pg.info()), "ETCDLOCK_ENDPOINTS": endpoints,
               "ETCDLOCK_TTL": str(TTL)}
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f",
                        str(ROOT / "examples" / "postgres" / "fence_schema.sql")], env=env, check=True)
        results: Dict[bool, Tuple[List[str], List[str]]] = {}

        def run(fenced: bool) -> None:
            try:
                results[fenced] = scenario(cmd, env, fenced)
            except Exception as e:  # noqa: BLE001 (reported as a failed run)
                results[fenced] = ([f"{type(e).__name__}: {e}"], [])

        threads = [threading.Thread(target=run, args=(f,)) for f in (True, False)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if pg is not None:
            pg.stop()
        assert etcd.stdin is not None
        etcd.stdin.close()
        etcd.wait(timeout=30)
    passed = failed = 0
    for fenced in (True, False):
        problems, report = results[fenced]
        for line in report:
            print(f"{a.label}: {line}")
        for p in problems:
            print(f"{a.label}: FAIL ({'fenced' if fenced else 'control'}): {p}")
        passed += not problems
        failed += bool(problems)
    print(f"{a.label}: PostgreSQL and etcd started and stopped; {time.monotonic() - t0:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
