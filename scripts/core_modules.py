#!/usr/bin/env python3
"""Print the import graph of core's modules and fail on a cycle.

Reads `crate::module::...` paths and the names `lib.rs` re-exports at the
crate root (`crate::Client` is `client`), including `use crate::{...}` lists.
"""
import pathlib, re, sys

src = pathlib.Path(__file__).resolve().parent.parent / "core" / "src"
lib = (src / "lib.rs").read_text()
root = {}  # re-exported name -> module
for m, names in re.findall(r"pub use (\w+)::\{?([^;]*?)\}?;", lib):
    for n in re.split(r"[,\s]+", names):
        n = n.split(" as ")[-1].strip()
        if n:
            root[n] = m
for n in re.findall(r"pub use window::WINDOW as (\w+);", lib):
    root[n] = "window"

def modules():
    for p in sorted(src.rglob("*.rs")):
        rel = p.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "mod":
            parts = parts[:-1]
        if parts == ["lib"]:
            continue
        yield parts[0], p  # submodules count as their top-level module

graph = {}
for m, p in modules():
    text = p.read_text()
    text = text.split("#[cfg(test)]")[0]  # unit tests may reach anywhere
    text = re.sub(r"//.*", "", text)  # doc links are not dependencies
    deps = graph.setdefault(m, set())
    uses = re.findall(r"crate::\{([^}]*)\}", text, re.S)
    paths = re.findall(r"crate::(\w+)", text)
    for u in uses:
        paths += [x.strip().split("::")[0] for x in u.split(",") if x.strip()]
    for x in paths:
        dep = x if (src / f"{x}.rs").exists() or (src / x).is_dir() else root.get(x)
        if dep and dep != m:
            deps.add(dep)

for m in sorted(graph):
    print(f"{m:12} -> {', '.join(sorted(graph[m])) or '-'}")

# Cycles (Tarjan).
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in graph:
    if v not in index: visit(v)
if sccs:
    print("cycles:", "; ".join(" <-> ".join(c) for c in sccs))
    sys.exit(1)
print("no cycles among", len(graph), "modules")
