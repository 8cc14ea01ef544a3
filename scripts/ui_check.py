#!/usr/bin/env python3
"""`etcdlock ui` in a real browser (headless Chromium through Selenium, as
scripts/docs_check.py drives it), against real etcd from the test harness.

Clients in three languages take, wait for and release locks: the CLI
(`etcdlock run`, Rust), Python (the bindings' package) and Node (the
bindings' module), each driven over stdin (scripts/ui_clients/). The check
awaits each change in the page's DOM (bounded: BOUND_S) and prints how long
after the client's call returned the page showed it (the page records when
it drew each lock: window.etcdlockUi.seen). Then: a deadlock between the
Python and the Node client is shown highlighted (once core finds cycles),
a lock's history timeline draws (once core reads history), a release
without the view's token is refused (403, shown on the page) and one with it
releases; the browser log has no error but that 403's. Screenshots: desktop
and 390 px wide, into target/site-shots/. Last, at scale: 1,000 locks held
and 100 waiters, the page's first paint and the delay of one update.

Usage: scripts/ui_check.py    exit 1 on any failure
Environment: CARGO_TARGET_DIR (the built etcdlock and etcd-harness: debug/),
ETCDLOCK_UI_PYTHON (a python that imports etcdlock; default
bindings-python/.venv/bin/python), ETCDLOCK_NODE_MODULE (default
bindings-node), ETCDLOCK_SITE_SHOTS (default $CARGO_TARGET_DIR/site-shots).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_check import browser  # noqa: E402  (the same Chromium and driver options)

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()
BIN = TARGET / "debug"
CLIENTS = ROOT / "scripts" / "ui_clients"
SHOTS = Path(os.environ.get("ETCDLOCK_SITE_SHOTS", TARGET / "site-shots"))
TOKEN = "ui-check-secret"
BOUND_S = 5.0  # each change must show within this
P = "ui/"  # the prefix the view serves

problems: List[str] = []
delays: Dict[str, float] = {}
procs: List[subprocess.Popen] = []


def now_ms() -> int:
    return int(time.time() * 1000)


def start(args: List[str], **kw) -> subprocess.Popen:
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, **kw)
    procs.append(p)
    return p


class Driven:
    """A client process of scripts/ui_clients, one command a line."""

    def __init__(self, lang: str, args: List[str], env: Optional[dict] = None) -> None:
        self.lang = lang
        self.p = start(args, env=env)
        self.expect("ready")

    def send(self, line: str) -> None:
        assert self.p.stdin
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def expect(self, word: str, timeout: float = 20.0) -> List[str]:
        """The next line, which must start with `word` (a blocking read: the
        harness's processes answer or die, and a dead one ends the read)."""
        assert self.p.stdout
        line = self.p.stdout.readline()
        words = line.split()
        if not words or words[0] != word:
            raise RuntimeError(f"{self.lang} client: expected {word!r}, got {line!r}")
        return words

    def quit(self) -> None:
        try:
            self.send("quit")
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


def await_js(driver, js: str, what: str, timeout: float = BOUND_S):
    """Poll `js` in the page (every 20 ms) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        v = driver.execute_script(js)
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"not shown within {timeout} s: {what}")
        time.sleep(0.02)


def row_js(name: str, cond: str) -> str:
    """JS: when the row of `name` satisfies `cond` (over `r`, the row), the
    time the page drew it (ms since the epoch), else null."""
    return (f"const r = document.querySelector('tr[data-name=\"' + CSS.escape({json.dumps(name)}) + '\"]');"
            f"return (r && ({cond})) ? window.etcdlockUi.seen[{json.dumps(name)}].at : null;")


def shown(driver, what: str, name: str, cond: str, t0: int, since: str = "the client's call returned") -> None:
    at = await_js(driver, row_js(name, cond), what)
    delays[what] = at - t0
    print(f"ui_check: {what}: shown {at - t0} ms after {since}")


def api(url: str, method: str = "GET", body: Optional[dict] = None, token: Optional[str] = None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def console_errors(driver, allowed: List[str]) -> List[str]:
    out = []
    for e in driver.get_log("browser"):
        if e.get("level") == "SEVERE" and not any(a in e.get("message", "") for a in allowed):
            out.append(e.get("message", ""))
    return out


def scenario(driver, base: str, ep: str, py: Driven, node: Driven) -> None:
    driver.get(base)
    await_js(driver, "return window.etcdlockUi && window.etcdlockUi.firstPaint !== null", "first paint")
    # 1. Python takes a lock; Node, then the CLI (Rust) wait; each hand-off shows.
    py.send(f"lock {P}shared")
    _, _, tok_py, t = py.expect("held")
    shown(driver, "python holds", f"{P}shared", f"r.dataset.token === '{tok_py}'", int(t))
    t = now_ms()
    node.send(f"lock {P}shared")
    shown(driver, "node waits", f"{P}shared", "r.dataset.waiters === '1'", t, "the lock command was sent")
    t = now_ms()
    cli = start([str(BIN / "etcdlock"), "--endpoints", ep, "run", f"{P}shared", "--", "sleep", "600"])
    shown(driver, "cli (rust) waits", f"{P}shared", "r.dataset.waiters === '2' && r.textContent.includes('rust')", t,
          "`etcdlock run` started")
    py.send(f"unlock {P}shared")
    py.expect("released")
    _, _, tok_node, t = node.expect("held")
    shown(driver, "node holds after python's release", f"{P}shared", f"r.dataset.token === '{tok_node}'", int(t))
    node.send(f"unlock {P}shared")
    _, _, t = node.expect("released")
    shown(driver, "cli (rust) holds after node's release", f"{P}shared",
          f"r.dataset.token !== '{tok_node}' && r.dataset.token !== '' && r.dataset.waiters === '0'", int(t))
    # 2. Release from the page: refused without the token (403, shown), done with it.
    driver.get(base + "#/lock/" + P.replace("/", "%2F") + "shared")
    await_js(driver, "return document.querySelector('#lock-holders button.release')", "the holder's release button")
    driver.execute_script("document.querySelector('#release-token').value = ''")
    driver.execute_script("document.querySelector('#lock-holders button.release').click()")
    msg = await_js(driver, "const t = document.querySelector('#release-result').textContent; return t.startsWith('403') ? t : null",
                   "the refusal of a release without the token")
    print(f"ui_check: release without the token: the page says {msg!r}")
    status, _ = api(base + "api/release", "POST", {"name": f"{P}shared", "token": 1})
    if status != 403:
        problems.append(f"POST /api/release without a token answered {status}, not 403")
    driver.execute_script(f"document.querySelector('#release-token').value = {json.dumps(TOKEN)}")
    t = now_ms()
    driver.execute_script("document.querySelector('#lock-holders button.release').click()")
    await_js(driver, "return document.querySelector('#release-result').textContent.startsWith('200')", "release with the token")
    try:
        rc = cli.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    print(f"ui_check: release with the token: done; the CLI holder exited {rc} (70: it lost the lock) "
          f"{now_ms() - t} ms after the click")
    if rc != 70:
        problems.append(f"the CLI holder exited {rc} after the release from the page, not 70")
    driver.get(base + "#/")
    await_js(driver, f"return !document.querySelector('tr[data-name=\"{P}shared\"]')", "the released lock gone from the list")
    # 3. The history timeline of the lock (core's history API).
    h, _ = api(base + "api/history?name=" + P + "shared")
    if h == 404:
        print("ui_check: history: this build has no /api/history yet (core's history API): timeline not checked")
    else:
        driver.get(base + "#/")
        driver.get(base + "#/lock/" + P.replace("/", "%2F") + "shared")
        n = await_js(driver, "const n = document.querySelectorAll('#timeline rect.hold').length; return n >= 3 ? n : null",
                     "the history timeline's holds")
        print(f"ui_check: history timeline: {n} holds drawn")
        shot(driver, "ui-lock.png", 1280, 900)
    # 4. A deadlock: Python holds x and waits for y, Node holds y and waits for x.
    driver.get(base + "#/")
    py.send(f"lock {P}x")
    py.expect("held")
    node.send(f"lock {P}y")
    node.expect("held")
    py.send(f"lock {P}y")
    t = now_ms()
    node.send(f"lock {P}x")
    d, _ = api(base + "api/deadlocks")  # 404: a build without core's deadlocks
    if d == 404:
        print("ui_check: deadlock: this build has no /api/deadlocks yet (core's find_cycles): highlight not checked")
        shown(driver, "deadlock waits", f"{P}x", "r.dataset.waiters === '1'", t)
    else:
        shown(driver, "deadlock highlighted", f"{P}x", "r.classList.contains('deadlock')", t,
              "the second wait was sent")
        await_js(driver, "return !document.querySelector('#deadlocks').hidden", "the deadlock banner")
    # 5. The other kinds: a semaphore's permits, an election's leader, a run-once job.
    e = [str(BIN / "etcdlock"), "--endpoints", ep]
    t = now_ms()
    for _ in range(2):
        start(e + ["run", f"{P}pool", "--permits", "2", "--", "sleep", "600"])
    shown(driver, "semaphore's 2 permits held", f"{P}pool", "r.textContent.includes('2/2 permits')", t,
          "two `etcdlock run --permits 2` started")
    t = now_ms()
    start(e + ["elect", f"{P}leader", "node-a", "--", "sleep", "600"])
    shown(driver, "election's leader", f"{P}leader", "r.textContent.includes('leader node-a')", t,
          "`etcdlock elect` started")
    subprocess.run(e + ["once", f"{P}nightly", "--at-most", "10m", "--at-least", "10m", "--", "true"], check=True)
    driver.execute_script("loadOnce()")
    await_js(driver, f"return document.querySelector('#once-body').textContent.includes({json.dumps(P + 'nightly')})",
             "the run-once job")
    # 6. The filter box: "python" leaves the rows a Python client holds or waits in.
    driver.execute_script("const f = document.querySelector('#filter'); f.value = 'python';"
                          "f.dispatchEvent(new Event('input'))")
    rows = await_js(driver, "const v = [...document.querySelectorAll('#locks tbody tr')].filter(r => !r.hidden)"
                    ".map(r => r.dataset.name); return v.length ? v.join(',') : null", "the filtered rows")
    if rows != f"{P}x,{P}y":
        problems.append(f"filter 'python' shows {rows}, not {P}x,{P}y")
    driver.execute_script("const f = document.querySelector('#filter'); f.value = '';"
                          "f.dispatchEvent(new Event('input'))")
    shot(driver, "ui-desktop.png", 1280, 900)
    shot(driver, "ui-phone.png", 390, 844)
    driver.set_window_size(1280, 900)


def shot(driver, name: str, w: int, h: int) -> None:
    driver.set_window_size(w, h)
    # Two animation frames: the page has laid out and painted at the new width.
    driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done()));")
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / name))


def scale(driver, base: str, ep: str, node_env: dict) -> None:
    """1,000 locks held (one Node client), 100 waiters (another): first
    paint of a fresh page, then the delay of one update."""
    many = Driven("node", ["node", str(CLIENTS / "driver.js"), ep], env=node_env)
    waiters = Driven("node", ["node", str(CLIENTS / "driver.js"), ep], env=node_env)
    many.send(f"many {P}n/ 1000")
    many.expect("many", timeout=120)
    for i in range(100):
        waiters.send(f"lock {P}n/{i:04d}")
    driver.get(base)
    await_js(driver, f"return document.querySelectorAll('#locks tr[data-waiters=\"1\"]').length >= 100", "100 waiters", 30)
    driver.get("about:blank")
    driver.get(base)
    fp = await_js(driver, "return window.etcdlockUi.firstPaint !== null && document.querySelectorAll('#locks tbody tr').length >= 1000"
                  " ? window.etcdlockUi.firstPaint : null", "1,000 rows", 30)
    delays["first paint, 1,000 locks + 100 waiters"] = fp
    print(f"ui_check: scale: first paint {fp:.0f} ms after navigation (1,000+ locks, 100 waiters)")
    many.send(f"unlock {P}n/0000")
    _, _, t = many.expect("released")
    at = await_js(driver, row_js(f"{P}n/0000", "r.dataset.waiters === '0'"), "the hand-off at scale")
    delays["update at scale (a hand-off)"] = at - int(t)
    read = driver.execute_script("return window.etcdlockUi.lastApplyMs")
    with urllib.request.urlopen(base + "metrics", timeout=10) as r:
        metrics = r.read().decode()
    last = next(line.split()[1] for line in metrics.splitlines() if line.startswith("etcdlock_ui_last_read_seconds "))
    print(f"ui_check: scale: a hand-off shown {at - int(t)} ms after the release returned (the view's read of "
          f"etcd took {float(last) * 1000:.1f} ms, the page applied the diff in {read:.1f} ms)")
    many.quit()
    waiters.quit()


def main() -> int:
    harness = start([str(BIN / "etcd-harness")])
    ep = json.loads(harness.stdout.readline())["endpoints"][0]
    env = dict(os.environ, ETCDLOCK_UI_TOKEN=TOKEN)
    ui = start([str(BIN / "etcdlock"), "--endpoints", ep, "ui", P, "--listen", "127.0.0.1:0", "--allow-release"], env=env)
    first = ui.stdout.readline().strip()
    if not first.startswith("etcdlock ui: http://127.0.0.1:"):
        print(f"ui_check: etcdlock ui printed {first!r} first")
        return 1
    base = first.split(": ", 1)[1]
    print(f"ui_check: etcd {ep}, {first}")
    py_bin = os.environ.get("ETCDLOCK_UI_PYTHON", str(ROOT / "bindings-python" / ".venv" / "bin" / "python"))
    node_env = dict(os.environ, ETCDLOCK_NODE_MODULE=os.environ.get("ETCDLOCK_NODE_MODULE", str(ROOT / "bindings-node")))
    py = Driven("python", [py_bin, str(CLIENTS / "driver.py"), ep])
    node = Driven("node", ["node", str(CLIENTS / "driver.js"), ep], env=node_env)
    driver = browser()
    try:
        scenario(driver, base, ep, py, node)
        scale(driver, base, ep, node_env)
        errs = console_errors(driver, ["api/release - Failed to load resource: the server responded with a status of 403"])
        problems.extend(f"console error: {e}" for e in errs)
    except (AssertionError, RuntimeError) as e:
        problems.append(str(e))
        shot(driver, "ui-failure.png", 1280, 900)
    finally:
        driver.quit()
        py.quit()
        node.quit()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    print("ui_check: delays (ms): " + ", ".join(f"{k}: {v:.0f}" for k, v in delays.items()))
    print(f"ui_check: screenshots: {', '.join(sorted(str(p) for p in SHOTS.glob('ui-*.png')))}")
    for p in problems:
        print(f"  FAIL {p}")
    print(f"ui_check: {'FAILED' if problems else 'ok'} ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
