#!/usr/bin/env python3
"""Write each ```c block of a README as its own C file, for ffi-c/test.sh.

Usage: readme_blocks.py README.md OUTDIR

A block with `<!-- fragment -->` on the line right before its fence is not a
whole program: it is wrapped so that it compiles on its own (its #include lines
hoisted, the rest in a function body with a `client` in scope, stubs for the
application functions it calls) and test.sh only compiles it. Any other ```c
block must be a complete program and is compiled, linked and run against etcd.

Prints one line per block: "<file> <fragment|program> <README>:<line> block <n>: <first line>".
"""

import re
import sys
from pathlib import Path

# Application functions the fragments call as placeholders for the user's work.
STUBS = ["run_scheduler", "transcode"]


def blocks(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    n = 0
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        n += 1
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j >= len(lines):
            sys.exit(f"{path.name}:{i + 1}: unclosed code fence")
        before = lines[i - 1].strip() if i else ""
        fragment = before.startswith("<!-- fragment") and before.endswith("-->")
        yield n, i + 1, m.group(1), fragment, lines[i + 1 : j]
        i = j + 1


def wrap_fragment(body):
    includes = [l for l in body if l.lstrip().startswith("#include")]
    rest = [l for l in body if not l.lstrip().startswith("#include")]
    out = ["#include <stdint.h>", "#include <stdio.h>", "#include <etcdlock.h>", *includes]
    for s in STUBS:
        out += [f"void {s}(void);", f"void {s}(void) {{}}"]
    out += [
        "int readme_fragment(etcdlock_client *client);",
        "int readme_fragment(etcdlock_client *client) {",
        "    (void)client;",
        "    {",
        *("        " + l if l else "" for l in rest),
        "    }",
        "    return 0;",
        "}",
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    readme, outdir = Path(sys.argv[1]), Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    for n, line, lang, fragment, body in blocks(readme):
        if lang != "c":
            continue
        f = outdir / f"readme_block{n}.c"
        f.write_text(wrap_fragment(body) if fragment else "\n".join(body) + "\n", encoding="utf-8")
        first = next((l.strip() for l in body if l.strip()), "")
        kind = "fragment" if fragment else "program"
        print(f"{f} {kind} {readme.name}:{line} block {n}: {first}")


if __name__ == "__main__":
    main()
