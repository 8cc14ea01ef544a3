#!/usr/bin/env python3
"""The cross-language flash sale: stock in etcd, purchase attempts from
concurrent worker processes written in Rust, C, Python, Node, Java and the
CLI, all on one lock name; then a control run without the lock.

With --store postgres the stock is a row of a private PostgreSQL
(scripts/pg_harness.py) instead of a key in etcd, and each purchase is one
transaction fenced by the hold's token (the database refuses a stale holder's
write: docs/guides/fencing-database.md); the control run's Python workers take
no lock and no fence.

Every worker follows one contract (see cli/src/flash.rs): FLASH_* variables in,
one JSON line per attempt out. This script starts a private etcd (through the
testkit's etcd-harness), runs the sale, checks the result, prints a table and
writes a PNG chart, and stops etcd. Exit status 1 if a check fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.environ.get("FLASH_BIN_DIR", os.path.join(ROOT, "target", "release"))


def workers_available(store="etcd"):
    """language -> (argv, processes, why-not or None)."""
    py = os.environ.get("FLASH_PYTHON", sys.executable)
    java_cp = os.environ.get("FLASH_JAVA_CP", "")
    c_bin = os.environ.get("FLASH_C_WORKER", os.path.join(ROOT, "target", "flash", "flash_worker_c"))
    if store == "postgres":
        c_bin = os.environ.get("FLASH_C_PG_WORKER", os.path.join(ROOT, "target", "flash", "flash_worker_pg"))
    node_worker = os.path.join(ROOT, "bindings-node", "examples", "flash-worker.js")
    py_worker = os.path.join(ROOT, "bindings-python", "examples", "flash_worker.py")
    table = {
        "rust": ([os.path.join(REL, "etcdlock"), "flash-worker"], 2, None),
        "cli": ([os.path.join(ROOT, "scripts", "flash_cli_worker.sh")], 1, None),
        "c": ([c_bin], 2, None if os.path.exists(c_bin) else "C worker not built"),
        "python": ([py, py_worker], 2, None),
        "node": (["node", node_worker], 2, None if os.path.exists(node_worker) else "no Node worker"),
        "java": (["java", "-cp", java_cp, "io.etcdlock.demo.FlashWorker"], 1,
                 None if java_cp else "Java demo jar not built (FLASH_JAVA_CP unset)"),
    }
    if not os.path.exists(py_worker):
        table["python"] = (table["python"][0], 2, "no Python worker")
    else:
        probe = subprocess.run([py, "-c", "import etcdlock"], capture_output=True)
        if probe.returncode != 0:
            table["python"] = (table["python"][0], 2, "the etcdlock Python package is not installed for " + py)
    if store == "postgres":
        # The Rust worker on PostgreSQL is the CLI crate's example flash_pg_worker (tokio-postgres, a
        # dev-dependency: the shipped CLI has no database driver).
        rust_pg = os.path.join(REL, "examples", "flash_pg_worker")
        table["rust"] = ([rust_pg], 2, None if os.path.exists(rust_pg) else "the Rust PostgreSQL worker is not built")
        if shutil.which("psql") is None:
            table["cli"] = (table["cli"][0], 1, "psql not found (scripts/setup.sh)")
        probe = subprocess.run([py, "-c", "import psycopg"], capture_output=True)
        if probe.returncode != 0 and not table["python"][2]:
            table["python"] = (table["python"][0], 2, "psycopg is not installed for " + py)
        probe = subprocess.run(["node", "-e", "require.resolve('pg')"], cwd=os.path.join(ROOT, "bindings-node"),
                               capture_output=True)
        if probe.returncode != 0 and not table["node"][2]:
            table["node"] = (table["node"][0], 2, "node-postgres (pg) is not installed in bindings-node")
    return table


class Store:
    """Where the stock lives: a key in etcd, or a row of PostgreSQL (its env: PG*)."""

    def __init__(self, kind, etcd):
        self.kind, self.etcd, self.pg = kind, etcd, None
        if kind == "postgres":
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import pg_harness

            self.pg = pg_harness.Postgres()
            self.env = dict(os.environ, **pg_harness.env_for(self.pg.info()))
            self.sql("CREATE TABLE etcdlock_fence (resource text PRIMARY KEY, token bigint NOT NULL);"
                     "CREATE TABLE flash_stock (sku text PRIMARY KEY, stock bigint NOT NULL);"
                     "CREATE TABLE flash_sales (token bigint NOT NULL, lang text NOT NULL, worker text NOT NULL)")

    def sql(self, query):
        return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query], env=self.env,
                              check=True, capture_output=True, text=True).stdout.strip()

    def worker_env(self):
        return dict(self.env, FLASH_STORE="postgres") if self.pg else dict(os.environ)

    def set_stock(self, key, stock):
        if self.pg:
            self.sql(f"TRUNCATE flash_sales; INSERT INTO flash_stock VALUES ('{key}', {int(stock)})")
        else:
            ctl(self.etcd.endpoints, "put", key, str(stock))

    def final(self, key, sales):
        """(final stock, sale records, the fence's token or None)."""
        if self.pg:
            fence = self.sql("SELECT max(token) FROM etcdlock_fence")
            return (int(self.sql(f"SELECT stock FROM flash_stock WHERE sku = '{key}'")),
                    int(self.sql("SELECT count(*) FROM flash_sales")), int(fence) if fence else None)
        stock = int(ctl(self.etcd.endpoints, "get", key, "--print-value-only").strip() or 0)
        return stock, len([k for k in ctl(self.etcd.endpoints, "get", sales, "--prefix", "--keys-only").split() if k]), None

    def stop(self):
        if self.pg:
            self.pg.stop()


class Etcd:
    def __init__(self):
        harness = os.path.join(REL, "etcd-harness")
        self.proc = subprocess.Popen([harness], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.proc.stdout.readline())
        self.endpoints = ",".join(self.info["endpoints"])

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def ctl(endpoints, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    return subprocess.run(["etcdctl", "--endpoints=" + endpoints, *args], env=env, check=True,
                           capture_output=True, text=True).stdout


def run_sale(etcd, store, langs, attempts, stock, no_lock, tag):
    lock, stock_key, sales = f"flash-{tag}", f"flash-{tag}/stock-value", f"flash-{tag}-sales/"
    # The stock lives outside the lock's prefix (flash-x/ is the lock's queue).
    stock_key = f"flash-{tag}-stock"
    store.set_stock(stock_key, stock)
    slots = []
    for lang, (argv, procs, _) in langs.items():
        for i in range(procs):
            slots.append((lang, argv, f"{lang}-{i}"))
    per = [attempts // len(slots)] * len(slots)
    for i in range(attempts - sum(per)):
        per[i] += 1
    records, lock_ = [], threading.Lock()
    procs = []
    start = time.time()
    for (lang, argv, wid), n in zip(slots, per):
        env = dict(store.worker_env(), FLASH_ENDPOINTS=etcd.endpoints, FLASH_LOCK=lock, FLASH_STOCK_KEY=stock_key,
                   FLASH_SALES_PREFIX=sales, FLASH_ATTEMPTS=str(n), FLASH_WORKER_ID=wid,
                   FLASH_NO_LOCK="1" if no_lock else "0", ETCDLOCK_BIN=os.path.join(REL, "etcdlock"))
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        procs.append((lang, wid, p))

    def pump(lang, wid, p):
        for line in p.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            rec["lang"] = lang
            with lock_:
                records.append(rec)

    threads = [threading.Thread(target=pump, args=x, daemon=True) for x in procs]
    for t in threads:
        t.start()
    last = 0
    while any(t.is_alive() for t in threads):
        time.sleep(0.25)
        if time.time() - last > 1.0:
            last = time.time()
            with lock_:
                sold = sum(1 for r in records if r.get("sold"))
                by = {}
                for r in records:
                    if r.get("sold"):
                        by[r["lang"]] = by.get(r["lang"], 0) + 1
            print(f"  [{'no lock' if no_lock else 'lock'}] {len(records)}/{attempts} attempts, {sold} sold  "
                  + " ".join(f"{k}:{v}" for k, v in sorted(by.items())), file=sys.stderr, flush=True)
    failed = []
    for lang, wid, p in procs:
        if p.wait() != 0:
            failed.append(f"{wid} exited {p.returncode}")
    final_stock, sale_records, fence = store.final(stock_key, sales)
    leftover = [k for k in ctl(etcd.endpoints, "get", lock + "/", "--prefix", "--keys-only").split() if k]
    return dict(records=records, start=start, elapsed=time.time() - start, final_stock=final_stock,
                sale_records=sale_records, failed=failed, leftover_lock_keys=leftover, fence=fence)


def history_check(etcd, res, lock):
    """`etcdlock history LOCK --json` against what the workers recorded: every
    attempt's hold is one entry (same fencing token, same language), nothing
    else held, and the history's waits beside the workers' own clocks."""
    env = dict(os.environ, ETCDLOCK_ENDPOINTS=etcd.endpoints)
    out = subprocess.run([os.path.join(REL, "etcdlock"), "history", lock, "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return [(False, f"etcdlock history {lock} --json exited {out.returncode}: {out.stderr.strip()[-300:]}")]
    h = json.loads(out.stdout)
    held = {int(e["fencing_token"]): e for e in h["entries"] if e.get("granted_revision") is not None}
    recs = {int(r["token"]): r for r in res["records"] if r.get("token") is not None}
    lang_of = {"cli": "rust"}
    wrong_lang = [t for t, r in recs.items() if t in held
                  and held[t].get("language") not in (r["lang"], lang_of.get(r["lang"]))]
    diffs = sorted(abs(held[t]["wait_ms"] - recs[t]["wait_ms"]) for t in recs if t in held and recs[t].get("wait_ms") is not None)
    by_end = {}
    for e in h["entries"]:
        by_end[e["ended"]] = by_end.get(e["ended"], 0) + 1
    print(f"\nhistory of {lock}: {len(h['entries'])} entries from revision {h['from_revision']} to {h['revision']} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(by_end.items()))}); "
          f"wait in history vs the worker's own clock: median |diff| {pct(diffs, .5):.1f} ms, p99 {pct(diffs, .99):.1f} ms")
    return [
        (set(held) == set(recs), f"history lists every hold the workers recorded and no other "
                                 f"({len(held)} held in history, {len(recs)} recorded, "
                                 f"{len(set(recs) - set(held))} missing, {len(set(held) - set(recs))} extra)"),
        (not wrong_lang, f"each hold's language in history is its worker's ({len(wrong_lang)} differ)"),
        (all(e["ended"] in ("released", "lease_ended") for e in held.values()),
         "every hold ended released (or with its lease: a CLI worker closes its client right after the unlock)"),
    ]


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round((len(xs) - 1) * q)))]


def report(res, stock, attempts, no_lock, store="etcd"):
    recs = res["records"]
    sold = [r for r in recs if r.get("sold")]
    langs = sorted({r["lang"] for r in recs})
    title = "CONTROL RUN, no lock" if no_lock else "WITH etcdlock"
    if store == "postgres":
        title += ", stock in PostgreSQL" + ("" if no_lock else " (fenced writes)")
    print(f"\n### Flash sale {title}: stock {stock}, {attempts} attempts, {res['elapsed']:.1f} s\n")
    print("| language | attempts | sold | lock wait p50 | lock wait p99 |")
    print("|---|---:|---:|---:|---:|")
    for lang in langs:
        rs = [r for r in recs if r["lang"] == lang]
        waits = [r["wait_ms"] for r in rs]
        w = ("-", "-") if no_lock else (f"{pct(waits, .5):.1f} ms", f"{pct(waits, .99):.1f} ms")
        print(f"| {lang} | {len(rs)} | {sum(1 for r in rs if r.get('sold'))} | {w[0]} | {w[1]} |")
    waits = [r["wait_ms"] for r in recs]
    oversold = max(0, res["sale_records"] - stock)
    lost_updates = res["sale_records"] - (stock - res["final_stock"])
    # Along the order of purchases (stock 300, 299, ... 1) the tokens must strictly increase.
    by_stock = sorted(sold, key=lambda r: -r["stock_before"])
    tokens = [r["token"] for r in by_stock]
    increasing = all(a < b for a, b in zip(tokens, tokens[1:]))
    unique_stock = len({r["stock_before"] for r in sold}) == len(sold)
    print()
    print(f"| final stock | sold (sale records) | oversold | lost updates | tokens strictly increasing | lock wait p50 / p99 |")
    print(f"|---:|---:|---:|---:|---|---|")
    inc = "n/a" if no_lock else ("yes" if increasing and unique_stock else "NO")
    wl = "n/a" if no_lock else f"{pct(waits, .5):.1f} / {pct(waits, .99):.1f} ms"
    print(f"| {res['final_stock']} | {res['sale_records']} | {oversold} | {lost_updates} | {inc} | {wl} |")
    return dict(oversold=oversold, lost_updates=lost_updates, increasing=increasing and unique_stock,
                sold=res["sale_records"], final_stock=res["final_stock"], attempts=len(recs))


def chart(res, path, stock):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib not installed: no chart written)", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    langs = sorted({r["lang"] for r in res["records"]})
    t0 = res["start"] * 1000
    for lang in langs:
        ts = sorted((r["t_ms"] - t0) / 1000 for r in res["records"] if r["lang"] == lang and r.get("sold"))
        if ts:
            ax.step(ts, range(1, len(ts) + 1), where="post", label=f"{lang} ({len(ts)})")
    total = sorted((r["t_ms"] - t0) / 1000 for r in res["records"] if r.get("sold"))
    if total:
        ax.step(total, range(1, len(total) + 1), where="post", color="black", linewidth=2, label=f"all ({len(total)})")
    ax.axhline(stock, color="red", linestyle="--", linewidth=1, label=f"stock {stock}")
    ax.set_xlabel("seconds since the sale opened")
    ax.set_ylabel("items sold (cumulative)")
    ax.set_title("etcdlock flash sale: sales over time per language")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return True


def save(res, summary, a, langs):
    """The locked sale as JSON: each attempt's language, seconds since the sale
    opened, whether it sold, its lock wait and fencing token."""
    t0 = res["start"] * 1000
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out = dict(
        command="scripts/flash_sale.py " + " ".join(sys.argv[1:]),
        date=time.strftime("%Y-%m-%d", time.gmtime(res["start"])), commit=commit, store=a.store,
        stock=a.stock, attempts=a.attempts, languages=sorted(langs),
        processes={k: v[1] for k, v in sorted(langs.items())},
        elapsed_s=round(res["elapsed"], 3), final_stock=res["final_stock"], sold=summary["sold"],
        oversold=summary["oversold"], lost_updates=summary["lost_updates"],
        tokens_increasing=summary["increasing"],
        records=[dict(lang=r["lang"], t_s=round((r["t_ms"] - t0) / 1000, 4), sold=bool(r.get("sold")),
                      wait_ms=r.get("wait_ms"), token=r.get("token"))
                 for r in sorted(res["records"], key=lambda r: r["t_ms"])],
    )
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stock", type=int, default=300)
    ap.add_argument("--attempts", type=int, default=500)
    ap.add_argument("--short", action="store_true", help="CI mode: stock 40, 70 attempts")
    ap.add_argument("--langs", default="", help="comma-separated subset (default: every language available)")
    ap.add_argument("--require", default="", help="comma-separated languages that must be available")
    ap.add_argument("--png", help="the chart (default: flash_sale.png, or flash_sale_postgres.png, in the cargo target dir)")
    ap.add_argument("--no-control", action="store_true")
    ap.add_argument("--store", choices=("etcd", "postgres"), default="etcd",
                    help="where the stock lives (postgres: a private PostgreSQL, fenced SQL writes)")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the locked sale's records to PATH (what scripts/charts.py draws the site's chart from)")
    a = ap.parse_args()
    if a.short:
        a.stock, a.attempts = 40, 70
    if not a.png:
        target = os.path.join(ROOT, os.environ.get("CARGO_TARGET_DIR") or "target")
        a.png = os.path.join(target, "flash_sale_postgres.png" if a.store == "postgres" else "flash_sale.png")
    os.makedirs(os.path.dirname(os.path.abspath(a.png)), exist_ok=True)
    table = workers_available(a.store)
    wanted = [x for x in a.langs.split(",") if x] or list(table)
    langs = {}
    for lang in wanted:
        argv, procs, why = table[lang]
        if why:
            print(f"skipping {lang}: {why}", file=sys.stderr)
        else:
            langs[lang] = (argv, procs, why)
    missing = [x for x in a.require.split(",") if x and x not in langs]
    if missing:
        print(f"required languages unavailable: {', '.join(missing)}", file=sys.stderr)
        return 1
    if shutil.which("etcdctl") is None:
        print("etcdctl not found (run scripts/setup.sh)", file=sys.stderr)
        return 1
    etcd = Etcd()
    store = None
    ok = True
    try:
        store = Store(a.store, etcd)
        where = f", private PostgreSQL at {store.pg.info()['dsn']}" if store.pg else ""
        print(f"private etcd at {etcd.endpoints}{where}; languages: {', '.join(langs)}", file=sys.stderr)
        res = run_sale(etcd, store, langs, a.attempts, a.stock, False, "locked")
        r = report(res, a.stock, a.attempts, False, a.store)
        if chart(res, a.png, a.stock):
            print(f"\nchart: {a.png}")
        if a.json:
            save(res, r, a, langs)
            print(f"records: {a.json}")
        checks = [
            (not res["failed"], f"every worker exited 0 {res['failed']}"),
            (r["attempts"] == a.attempts, f"{r['attempts']} attempts recorded of {a.attempts}"),
            (r["oversold"] == 0, "0 oversold"),
            (r["lost_updates"] == 0, "0 lost updates"),
            (r["sold"] == min(a.stock, a.attempts), f"sold {r['sold']} = {min(a.stock, a.attempts)}"),
            (r["final_stock"] == max(0, a.stock - a.attempts), f"final stock {r['final_stock']}"),
            (r["increasing"], "fencing tokens strictly increase along the purchases"),
            (not res["leftover_lock_keys"], "no lock keys left behind"),
        ]
        checks += history_check(etcd, res, "flash-locked")
        if store.pg:
            last = max((rec["token"] for rec in res["records"] if rec.get("sold")), default=None)
            checks.append((res["fence"] == last, f"the fence holds the last purchase's token ({res['fence']})"))
        if not a.no_control and store.pg:
            # Without the lock (and so without a token to fence with), Python workers read and write the row.
            control_langs = {"python": (table["python"][0], 6, None)}
            cres = run_sale(etcd, store, control_langs, a.attempts, a.stock, True, "control")
            c = report(cres, a.stock, a.attempts, True, a.store)
            checks.append((c["oversold"] > 0 or c["lost_updates"] > 0,
                           f"control run without the lock shows the damage: {c['oversold']} oversold, {c['lost_updates']} lost updates"))
        elif not a.no_control:
            control_langs = {k: v for k, v in langs.items() if k in ("rust", "cli")}
            # The control run needs raw (unlocked) reads and writes; the Rust and CLI workers have them.
            control_langs["rust"] = (control_langs.get("rust", table["rust"])[0], 6, None)
            cres = run_sale(etcd, store, control_langs, a.attempts, a.stock, True, "control")
            c = report(cres, a.stock, a.attempts, True)
            checks.append((c["oversold"] > 0 or c["lost_updates"] > 0,
                           f"control run without the lock shows the damage: {c['oversold']} oversold, {c['lost_updates']} lost updates"))
        print()
        for good, what in checks:
            print(f"  [{'ok' if good else 'FAIL'}] {what}")
            ok &= good
    finally:
        if store is not None:
            store.stop()
        etcd.stop()
    print("\nflash sale: " + ("all checks passed" if ok else "CHECKS FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
