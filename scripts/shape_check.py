#!/usr/bin/env python3
"""Shape checks of the source that no compiler makes (scripts/lint.sh runs them).

Three checks, each run alone with --only files|functions|cycles (default: all):

  files      No source file over 600 lines before its in-file tests, anywhere
             in the repository (files tracked by git). Languages: .rs .py .js
             .ts (and .d.ts) .java .kt .c .h .sh. A Rust file counts its lines
             before its first `#[cfg(test)] mod ... {`; other files count whole.
             Excluded, and why:
               - vendored code (a `vendor/` folder): not ours to shape;
               - generated code: a file with "@generated" or "DO NOT EDIT"
                 (any case) in its first 60 lines, such as include/etcdlock.h
                 (cbindgen) and the compiled protos under memetcd/src/gen and
                 vendor/etcd-client/src/rpc/gen (prost): its shape is its
                 generator's;
               - test files: anything under a `tests/` or `test/` folder
                 (which covers Java's src/test): a test file is a list of
                 cases, read one case at a time.
  functions  No function over 120 lines in core (core/src/**/*.rs). A
             function's length runs from its `fn` line to its closing brace,
             found by brace matching that skips string, raw string, byte
             string and char literals, lifetimes and (nested) comments; a
             closure or nested fn counts toward the function that holds it
             (a nested fn is also measured on its own). Functions inside an
             in-file `#[cfg(test)]` module are not measured.
  cycles     No circle of imports among core's files (core/src). An edge
             A -> B is a `use crate::...` (use trees with groups, `self`,
             `pub use`) or an inline `crate::x::y` path in A that names
             the module of file B or an item in it. A module path maps to its
             file: crate::a is a.rs or a/mod.rs; crate::a::b is the file
             a/b.rs (or a/b/mod.rs) if it exists, else an item of a. A name
             that a file re-exports (`pub use`, or `use` at the crate root)
             is followed to the file that defines it. Relative `use x::...`
             paths whose first segment is a child module of the file's module
             are followed too. Visibilities (`pub(in crate::x)`) and in-file
             `#[cfg(test)]` modules are not read. Every strongly connected
             component of more than one file is reported with its edges and
             the names each edge uses. Only crate:: paths make edges: a
             child file's `super::` and a parent's `use child::...` tie a
             module split into files to itself (the usual Rust layout), not
             one layer to another; they are read only to follow re-exports.

Output: one line per offender naming file:line and its length (or the cycle's
files and edges); exit status 1 if any check found one, else 0.
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 600
MAX_FN = 120
EXTS = (".rs", ".py", ".js", ".ts", ".java", ".kt", ".c", ".h", ".sh")
GENERATED = re.compile(r"@generated|\bdo not edit\b", re.I)


# ---------------------------------------------------------------- Rust lexing


def mask_rust(src):
    """The source with every comment, string and char literal blanked out to
    spaces (newlines kept), so that braces, `fn` and paths found in the result
    are code."""
    out = list(src)
    n = len(src)
    i = 0

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "rb" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.compile(r'(?:br|rb|r)(#*)"').match(src, i)
            if m:  # raw string: r"..", r#".."#, br#".."#
                end = '"' + m.group(1)
                j = src.find(end, m.end())
                j = n if j < 0 else j + len(end)
                blank(i, j)
                i = j
            elif src.startswith('b"', i) or src.startswith("b'", i):
                i += 1  # the literal itself is handled on the next turn
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '{') or a lifetime ('a).
            if i + 1 < n and src[i + 1] == "\\":
                j = src.find("'", i + 2)
                if src[i + 2 : i + 3] == "'":  # '\''
                    j = i + 3
                j = n if j < 0 else j
                blank(i, j + 1)
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                blank(i, i + 3)
                i += 3
            else:
                i += 1  # lifetime or label
        else:
            i += 1
    return "".join(out)


def line_of(text, pos, starts):
    """1-based line number of offset pos; starts is the sorted list of line
    start offsets."""
    lo, hi = 0, len(starts)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid
    return lo + 1


def line_starts(text):
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


def close_brace(code, open_pos):
    """Offset of the brace that closes the one at open_pos (code is masked)."""
    depth = 0
    for j in range(open_pos, len(code)):
        ch = code[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def test_ranges(code):
    """(start, end) offsets of the in-file #[cfg(test)] modules."""
    return [(m.start(), close_brace(code, m.end() - 1)) for m in TEST_MOD.finditer(code)]


def inside(pos, ranges):
    return any(a <= pos <= b for a, b in ranges)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def tracked(under=""):
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", under or "."],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p)


# ---------------------------------------------------------------- files


def excluded(path, text):
    parts = path.split("/")
    if "vendor" in parts[:-1]:
        return "vendored"
    if "tests" in parts[:-1] or "test" in parts[:-1]:
        return "test file"
    if GENERATED.search("\n".join(text.splitlines()[:60])):
        return "generated"
    return None


def counted_lines(path, text):
    """Lines of the file before its in-file tests."""
    if path.endswith(".rs"):
        code = mask_rust(text)
        tests = test_ranges(code)
        if tests:
            return text.count("\n", 0, tests[0][0])
    return len(text.splitlines())


def check_files():
    bad = []
    for path in tracked():
        if not path.endswith(EXTS) or not os.path.isfile(os.path.join(ROOT, path)):
            continue
        text = read(path)
        if excluded(path, text):
            continue
        n = counted_lines(path, text)
        if n > MAX_FILE:
            bad.append("%s:1: %d lines before its in-file tests (limit %d)" % (path, n, MAX_FILE))
    return bad


# ---------------------------------------------------------------- functions

FN = re.compile(r"\bfn\s+(\w+)")
IMPL = re.compile(r"\b(impl|trait)\b")


def owners(code):
    """(start, end, name) of impl and trait blocks, for naming methods."""
    blocks = []
    for m in IMPL.finditer(code):
        j, depth = m.end(), 0
        while j < len(code) and not (code[j] in "{;" and depth == 0):
            if code[j] in "([<":
                depth += 1
            elif code[j] in ")]>" and code[j - 1] != "-":
                depth -= 1
            j += 1
        if j >= len(code) or code[j] != "{":
            continue
        head = code[m.end() : j]
        if m.group(1) == "impl":
            head = re.sub(r"^\s*<.*?>(?=\s*[\w&(])", "", head, flags=re.S)  # impl<T>
            if re.search(r"\bfor\b", head):
                head = re.split(r"\bfor\b", head, maxsplit=1)[1]
        head = re.split(r"\bwhere\b", head)[0]
        name = re.sub(r"<.*", "", head, flags=re.S).strip().split("::")[-1].strip("&* ")
        blocks.append((m.start(), close_brace(code, j), name))
    return blocks


def functions(text):
    """(name, first line, length in lines) of every fn with a body outside
    the file's #[cfg(test)] modules."""
    code = mask_rust(text)
    starts = line_starts(code)
    tests = test_ranges(code)
    blocks = owners(code)
    found = []
    for m in FN.finditer(code):
        if inside(m.start(), tests):
            continue
        j, depth = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] != "{":
            continue  # a declaration without a body
        end = close_brace(code, j)
        first, last = line_of(code, m.start(), starts), line_of(code, end, starts)
        owner = [b for b in blocks if b[0] < m.start() and end <= b[1]]
        name = m.group(1)
        if owner:
            name = min(owner, key=lambda b: b[1] - b[0])[2] + "::" + name
        found.append((name, first, last - first + 1))
    return found


def check_functions():
    bad = []
    for path in tracked("core/src"):
        if not path.endswith(".rs"):
            continue
        for name, line, n in functions(read(path)):
            if n > MAX_FN:
                bad.append((n, "%s:%d: fn %s is %d lines (limit %d)" % (path, line, name, n, MAX_FN)))
    return [b for _, b in sorted(bad, reverse=True)]


# ---------------------------------------------------------------- cycles

USE = re.compile(r"\buse\s+([^;]*);")
INLINE = re.compile(r"(?<![\w$])\$?crate((?:\s*::\s*\w+)+)")
VIS_IN = re.compile(r"\bpub\s*\(\s*in\s+crate(?:\s*::\s*\w+)*\s*\)")
PRELUDE = {"std", "core", "alloc", "crate", "self", "super"}


def module_files(src_dir):
    """Module path (tuple) -> file, for the files of a crate's src folder."""
    mods = {}
    for path in tracked(src_dir):
        if not path.endswith(".rs"):
            continue
        rel = path[len(src_dir) :].strip("/")[:-3].split("/")
        if rel[-1] in ("lib", "main") and len(rel) == 1:
            rel = []
        elif rel[-1] == "mod":
            rel = rel[:-1]
        mods[tuple(rel)] = path
    return mods


def expand(tree):
    """Paths of a use tree (aliases already dropped):
    'a::{b, c::{self, D}}' -> [(a, b), (a, c), (a, c, D)]."""
    out = []

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        return parts + [cur] if cur else parts

    def walk(s, pre):
        if "{" in s:
            head, rest = s.split("{", 1)
            segs = tuple(x for x in head.split("::") if x)
            for part in split_top(rest[: rest.rfind("}")]):
                walk(part, pre + segs)
            return
        segs = tuple(x for x in s.split("::") if x)
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if segs and segs[-1] != "*":
            out.append(pre + segs)
        elif segs:
            out.append(pre + segs[:-1])  # a glob names its module

    walk(re.sub(r"\s+", "", tree), ())
    return out


def use_paths(stmt):
    """Segment tuples named by a use statement's tree (aliases dropped)."""
    return expand(re.sub(r"\s+as\s+\w+", "", stmt))


def resolve(segs, mods, reexports, depth=0):
    """(file, name) that a crate-absolute path names, following re-exports."""
    segs = tuple(segs)
    for k in range(len(segs), -1, -1):
        if segs[:k] in mods:
            f = mods[segs[:k]]
            if k == len(segs):
                return f, (segs[-1] if segs else "crate")
            name = segs[k]
            target = reexports.get((f, name))
            if target and depth < 8 and target != segs:
                return resolve(target + segs[k + 1 :], mods, reexports, depth + 1)
            return f, name
    return None


def file_module(path, mods):
    for mp, f in mods.items():
        if f == path:
            return mp
    return ()


def absolute(segs, here, mods):
    """A use path made crate-absolute, or None if it leaves the crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    if segs[0] == "self":
        return here + segs[1:]
    if segs[0] == "super":
        up = here
        while segs and segs[0] == "super":
            up, segs = up[:-1], segs[1:]
        return up + segs
    if segs[0] not in PRELUDE and here + (segs[0],) in mods:
        return here + segs
    return None


def check_cycles(src_dir="core/src"):
    mods = module_files(src_dir)
    codes = {}
    for mp, f in mods.items():
        code = mask_rust(read(f))
        tests = test_ranges(code)
        # Blank the test modules and visibilities.
        chars = list(code)
        for a, b in tests:
            for k in range(a, b + 1):
                if chars[k] != "\n":
                    chars[k] = " "
        code = VIS_IN.sub(lambda m: " " * len(m.group(0)), "".join(chars))
        codes[f] = (mp, code)
    # Re-exports: (file, name) -> the crate-absolute path the name stands for.
    reexports = {}
    for f, (mp, code) in codes.items():
        for m in USE.finditer(code):
            for segs in use_paths(m.group(1)):
                ab = absolute(segs, mp, mods)
                if ab:
                    alias = re.search(r"\b%s\s+as\s+(\w+)" % re.escape(segs[-1]), m.group(1)) if segs else None
                    reexports[(f, alias.group(1) if alias else ab[-1])] = tuple(ab)
    edges = {}  # (a, b) -> set of names
    for f, (mp, code) in codes.items():
        starts = line_starts(code)
        named = []
        for m in USE.finditer(code):
            for segs in use_paths(m.group(1)):
                if segs and segs[0] == "crate":
                    named.append(segs[1:])
        rest = USE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
        for m in INLINE.finditer(rest):
            named.append(tuple(re.sub(r"\s+", "", m.group(1)).strip(":").split("::")))
        for ab in named:
            r = resolve(ab, mods, reexports)
            if r and r[0] != f:
                edges.setdefault((f, r[0]), set()).add(r[1])
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    bad = []
    for comp in sccs(sorted(codes), graph):
        if len(comp) < 2:
            continue
        comp = sorted(comp)
        bad.append("circle of %d files: %s" % (len(comp), ", ".join(comp)))
        for a in comp:
            for b in comp:
                if (a, b) in edges:
                    bad.append("  %s -> %s: %s" % (a, b, ", ".join(sorted(edges[(a, b)]))))
    return bad


def sccs(nodes, graph):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                elif w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


# ---------------------------------------------------------------- main

CHECKS = {
    "files": ("files over %d lines before their in-file tests" % MAX_FILE, check_files),
    "functions": ("functions over %d lines in core/src" % MAX_FN, check_functions),
    "cycles": ("circles of imports among core/src's files", check_cycles),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(CHECKS), help="run one check")
    args = ap.parse_args()
    status = 0
    for key in [args.only] if args.only else ["files", "functions", "cycles"]:
        what, check = CHECKS[key]
        bad = check()
        if bad:
            print("shape: %s:" % what, file=sys.stderr)
            for line in bad:
                print("  " + line, file=sys.stderr)
            status = 1
        else:
            print("shape: no %s" % what)
    return status


if __name__ == "__main__":
    sys.exit(main())
