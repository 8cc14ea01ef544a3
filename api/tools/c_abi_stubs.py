#!/usr/bin/env python3
"""A C file that defines every function include/etcdlock.h declares, for abidw.

Usage: python3 api/tools/c_abi_stubs.py include/etcdlock.h > stubs.c
scripts/api_check.sh compiles it with -g into a shared object whose DWARF is
the header's: each function's parameter and return types and every struct,
enum, typedef and callback type they reach, with sizes, offsets and
qualifiers. `abidw --headers-dir include` over that object is the C ABI as a C
program compiled against the header sees it (api/c/libetcdlock.abi); the Rust
library itself carries no C type information (its DWARF describes Rust types,
and the dev build keeps line tables only). The bodies trap: the object is
never run.
"""

import re
import subprocess
import sys

header = sys.argv[1]
# The header with comments removed, its #define lines kept apart.
text = subprocess.run(["gcc", "-fpreprocessed", "-dD", "-E", "-P", header],
                      check=True, capture_output=True, text=True).stdout
code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
code = re.sub(r'extern\s+"C"\s*\{', "", code)
decls = []
depth = 0
stmt = ""
for ch in code:
    if ch == "{":
        depth += 1
    elif ch == "}":
        depth -= 1
    stmt += ch
    if ch == ";" and depth == 0:
        s = " ".join(stmt.split())
        stmt = ""
        if s.startswith("typedef") or "(" not in s:
            continue
        m = re.match(r"^(.*?\b(etcdlock_\w+))\s*\((.*)\)\s*;$", s)
        if m and "(*" not in m.group(1):
            decls.append(s[:-1])
print(f'#include "{header.rsplit("/", 1)[-1]}"')
for d in decls:
    print(f"{d} {{ __builtin_trap(); }}")
print(f"/* {len(decls)} functions */", file=sys.stderr)
