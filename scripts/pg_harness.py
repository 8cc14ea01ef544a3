#!/usr/bin/env python3
"""A private PostgreSQL for the tests, as testkit's etcd-harness is a private etcd.

    scripts/pg_harness.py                 start, print one JSON line, stop when stdin closes
    scripts/pg_harness.py -- CMD ARGS...  start, run CMD with PG* variables set, stop; CMD's exit status

Starts Debian's `postgres` (initdb into a fresh temp dir, a free port on
127.0.0.1, no Unix socket, trust authentication, fsync off: a throwaway
database). Both initdb and postgres refuse to run as root, so under root they
run as `nobody` (or ETCDLOCK_PG_USER), the temp dir handed to that user. The
JSON line:

    {"dsn": "postgresql://etcdlock@127.0.0.1:PORT/postgres", "host": "127.0.0.1",
     "port": PORT, "user": "etcdlock", "dbname": "postgres", "pid": PID, "dir": "..."}

and the variables set for CMD: PGHOST, PGPORT, PGUSER, PGDATABASE (what libpq,
psql, node-postgres read) and ETCDLOCK_PG_DSN (the URL; JDBC's form is
jdbc:postgresql://HOST:PORT/DBNAME?user=USER). The server stops (fast shutdown,
then SIGKILL after 10 s) and the temp dir is removed when stdin closes, on
SIGTERM or SIGINT, or when CMD exits; postgres is also told to die with this
process (PR_SET_PDEATHSIG). Binaries: ETCDLOCK_PG_BIN, else the newest
/usr/lib/postgresql/*/bin, else initdb and postgres on PATH
(scripts/setup.sh installs them).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Optional

USER = "etcdlock"  # the database's superuser (initdb -U)
DBNAME = "postgres"
PR_SET_PDEATHSIG = 1


def bindir() -> str:
    if os.environ.get("ETCDLOCK_PG_BIN"):
        return os.environ["ETCDLOCK_PG_BIN"]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    path = shutil.which("postgres")
    if path:
        return os.path.dirname(os.path.realpath(path))
    raise SystemExit("pg_harness: no PostgreSQL server found (scripts/setup.sh installs Debian's postgresql)")


def demote(uid: Optional[int], gid: Optional[int], die_with_parent: bool) -> Callable[[], None]:
    """What the child runs before exec: become the unprivileged user, then ask
    for SIGQUIT (postgres's immediate shutdown) when this harness dies. The
    order matters: a change of credentials clears the parent-death signal."""

    def run() -> None:
        os.setsid()  # a terminal's Ctrl-C reaches the harness, which stops the server in order
        if uid is not None and gid is not None:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        if die_with_parent:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)

    return run


def tempdir() -> Optional[str]:
    """TMPDIR, unless the unprivileged user could not reach a folder in it
    (under root, a TMPDIR such as /root/tmp): then /tmp."""
    if os.geteuid() != 0:
        return None
    path = tempfile.gettempdir()
    while path not in ("/", ""):
        if not os.stat(path).st_mode & 0o001:
            return "/tmp"
        path = os.path.dirname(path)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    def __init__(self) -> None:
        self.bin = bindir()
        self.dir = tempfile.mkdtemp(prefix="etcdlock-pg-", dir=tempdir())
        self.proc: Optional[subprocess.Popen] = None
        self.uid: Optional[int] = None
        self.gid: Optional[int] = None
        try:
            if os.geteuid() == 0:
                pw = pwd.getpwnam(os.environ.get("ETCDLOCK_PG_USER", "nobody"))
                self.uid, self.gid = pw.pw_uid, pw.pw_gid
                os.chown(self.dir, self.uid, self.gid)
            self.data = os.path.join(self.dir, "data")
            self.log = os.path.join(self.dir, "postgres.log")
            r = subprocess.run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", USER, "-A", "trust",
                                "--no-sync", "-E", "UTF8", "--locale=C"], cwd=self.dir, capture_output=True,
                               text=True, preexec_fn=demote(self.uid, self.gid, False))
            if r.returncode != 0:
                raise RuntimeError(f"initdb failed: {r.stdout}{r.stderr}")
            self.port = self.start()
        except BaseException:
            self.stop()
            raise

    def start(self) -> int:
        for _ in range(5):  # a port taken between free_port and postgres's bind: another one
            port = free_port()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [os.path.join(self.bin, "postgres"), "-D", self.data, "-p", str(port), "-h", "127.0.0.1",
                     "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off", "-c", "max_connections=200"],
                    cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    preexec_fn=demote(self.uid, self.gid, True))
            if self.ready(port):
                return port
            self.kill()
        raise RuntimeError(f"postgres did not start; its log:\n{self.tail()}")

    def ready(self, port: int, timeout: float = 30) -> bool:
        """The server accepts connections on its port (its log says so) or it exited."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if "ready to accept connections" in self.tail():
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        return True
            time.sleep(0.05)
        return False

    def tail(self) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: clients disconnected, no recovery needed
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def info(self) -> dict:
        assert self.proc is not None
        return {"dsn": f"postgresql://{USER}@127.0.0.1:{self.port}/{DBNAME}", "host": "127.0.0.1",
                "port": self.port, "user": USER, "dbname": DBNAME, "pid": self.proc.pid, "dir": self.dir}


def env_for(info: dict) -> dict:
    """The variables a client reads: libpq's (and psql's, node-postgres's) PG*, and the URL."""
    return {"PGHOST": info["host"], "PGPORT": str(info["port"]), "PGUSER": info["user"],
            "PGDATABASE": info["dbname"], "ETCDLOCK_PG_DSN": info["dsn"]}


def main(argv: List[str]) -> int:
    cmd: List[str] = []
    if argv and argv[0] == "--":
        cmd = argv[1:]
    elif argv:
        print(__doc__, file=sys.stderr)
        return 2

    stop_requested: List[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop_requested.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    pg = Postgres()
    try:
        info = pg.info()
        if cmd:
            child = subprocess.Popen(cmd, env={**os.environ, **env_for(info)})
            try:
                return child.wait()
            except KeyboardInterrupt:
                child.terminate()
                return child.wait()
        print(json.dumps(info), flush=True)
        try:
            while sys.stdin.readline():
                pass
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        pg.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
