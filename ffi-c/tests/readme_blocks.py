#!/usr/bin/env python3
"""Write each ```c block of ffi-c/README.md and of every page of the site
(docs/**/*.md) as its own C file, for ffi-c/test.sh.

Usage: readme_blocks.py OUTDIR FILE.md...   (paths relative to the repository root)

A block with `<!-- fragment -->` (or `<!-- fragment: why -->`) on the line
right before its fence is not a whole program: it is wrapped so that it
compiles on its own (its #include lines hoisted, the rest in a function body
with a `client` in scope, stubs for the application functions it calls) and
test.sh only compiles it. A block with `<!-- example: PATH -->` there is an
excerpt of PATH, which another test builds and runs: it is skipped here. Any
other ```c block must be a complete program: it
is compiled, linked and run against etcd (ETCDLOCK_ENDPOINTS set) and must
exit 0. When the block after a program is a ```text block, that is what the
program prints, and test.sh compares its standard output with it.

Prints one line per block:
"<file> <fragment|program> <page>:<line> block <n>: <first line>", where
<page>:<line> is the page's path and the line of the fence (the test's id);
a program with an expected output has it in <file without .c>.expected.
"""

import re
import sys
from pathlib import Path

# Application functions the fragments call as placeholders for the user's work.
STUBS = ["run_scheduler", "transcode", "run_job", "do_work", "serve"]
FENCE = re.compile(r"^```(\S*)\s*$")


def blocks(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    n = 0
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        n += 1
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j >= len(lines):
            sys.exit(f"{path}:{i + 1}: unclosed code fence")
        before = lines[i - 1].strip() if i else ""
        fragment = before.startswith("<!-- fragment") and before.endswith("-->")
        # `<!-- example: PATH -->`: an excerpt of a file another test builds (scripts/readme_blocks.py checks it).
        lang = "" if before.startswith("<!-- example:") else m.group(1)
        yield n, i + 1, lang, fragment, lines[i + 1 : j]
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
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    for page in sys.argv[2:]:
        found = list(blocks(Path(page)))
        stem = re.sub(r"[^A-Za-z0-9]+", "_", page.removesuffix(".md"))
        for k, (n, line, lang, fragment, body) in enumerate(found):
            if lang != "c":
                continue
            f = outdir / f"{stem}_L{line}.c"
            f.write_text(wrap_fragment(body) if fragment else "\n".join(body) + "\n", encoding="utf-8")
            nxt = found[k + 1] if k + 1 < len(found) else None
            if not fragment and nxt and nxt[2] == "text":
                f.with_suffix(".expected").write_text("\n".join(nxt[4]) + "\n", encoding="utf-8")
            first = next((l.strip() for l in body if l.strip()), "")
            kind = "fragment" if fragment else "program"
            print(f"{f} {kind} {page}:{line} block {n}: {first}")


if __name__ == "__main__":
    main()
