#!/usr/bin/env python3
"""The documentation site's charts, drawn from data files committed in the
repository (never from a live run), as SVG.

    scripts/charts.py OUTDIR

writes OUTDIR/<name>.svg (scripts/docs.sh runs it with the docs venv's
python, which has matplotlib from docs/requirements.txt):

- flash-sale.svg: sales over time per language, from docs/data/flash-sale.json
  (one real run of scripts/flash_sale.py with --json; the file names the
  command, date and commit); flash-sale-postgres.svg the same from
  docs/data/flash-sale-postgres.json (the sale with the stock in PostgreSQL);
- benchmark-languages.svg: every language's p50 as a ratio to the Rust core,
  from docs/data/benchmarks.json (the figures of docs/operations/benchmarks.md);
- benchmark-contention.svg: lock wait under 8 contenders, etcdlock beside
  etcd's Go concurrency.Mutex, from the same file.

Text stays text in the SVGs (searchable, checkable), and the output is the
same for the same data (fixed hash salt, no date).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "data")
plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "etcdlock", "font.size": 10})


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def save(fig, out, name):
    path = os.path.join(out, name + ".svg")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    print(f"charts.py: {path}")


def flash_sale(out, data="flash-sale.json", name="flash-sale", what="Flash sale with etcdlock"):
    d = load(data)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    recs = d["records"]
    for lang in sorted({r["lang"] for r in recs}):
        ts = [r["t_s"] for r in recs if r["lang"] == lang and r["sold"]]
        if ts:
            ax.step(ts, range(1, len(ts) + 1), where="post",
                    label=f"{lang}: {len(ts)} sold in {sum(1 for r in recs if r['lang'] == lang)} attempts")
    total = [r["t_s"] for r in recs if r["sold"]]
    ax.step(total, range(1, len(total) + 1), where="post", color="black", linewidth=2,
            label=f"all: {len(total)} sold")
    ax.axhline(d["stock"], color="red", linestyle="--", linewidth=1, label=f"stock {d['stock']}")
    ax.set_xlabel("seconds since the sale opened")
    ax.set_ylabel("items sold (cumulative)")
    ax.set_title(f"{what}: stock {d['stock']}, {d['attempts']} attempts, "
                 f"oversold {d['oversold']} ({d['date']}, {d['commit']})")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, out, name)


def languages(out):
    d = load("benchmarks.json")["languages"]
    rows = d["rows"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for i, r in enumerate(rows):
        for j, (kind, color) in enumerate((("uncontended", "tab:blue"), ("handoff", "tab:orange"))):
            lo, hi = r[kind]
            y = i + (j - 0.5) * 0.3
            ax.plot([lo, hi], [y, y], color=color, linewidth=6, solid_capstyle="butt",
                    label=kind if i == 0 else None)
            ax.text(hi + 0.01, y, f"{lo:.2f}-{hi:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvline(d["target"], color="red", linestyle="--", linewidth=1, label=f"target {d['target']:.2f}x")
    ax.set_yticks(range(len(rows)), [r["language"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0.8, 1.5)
    ax.set_xlabel("p50 / the Rust core's p50 in the same run (range over 3 runs)")
    ax.set_title(f"Every language against the core ({d['command']}, {d['last_measured'].split(',')[0]})")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    save(fig, out, "benchmark-languages")


def contention(out):
    d = load("benchmarks.json")["contention"]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    names = ["etcdlock", "Go concurrency.Mutex"]
    vals = [d["etcdlock"], d["go_mutex"]]
    for k, (q, color) in enumerate((("p50_ms", "tab:blue"), ("p99_ms", "tab:gray"))):
        ys = [i + (k - 0.5) * 0.35 for i in range(2)]
        xs = [v[q] for v in vals]
        ax.barh(ys, xs, height=0.33, color=color, label=q.replace("_ms", ""))
        for x, y in zip(xs, ys):
            ax.text(x * 1.1, y, f"{x:g} ms", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1, 400)
    ax.set_yticks(range(2), names)
    ax.invert_yaxis()
    ax.set_xlabel("lock wait, ms (log scale)")
    ax.set_title(f"8 contenders on one lock: lock wait ({d['command']})")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    save(fig, out, "benchmark-contention")


def main():
    if len(sys.argv) != 2:
        print("usage: scripts/charts.py OUTDIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    flash_sale(out)
    flash_sale(out, "flash-sale-postgres.json", "flash-sale-postgres", "Flash sale, stock in PostgreSQL")
    languages(out)
    contention(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
