#!/usr/bin/env python3
"""The public Java API of one published Maven module, from its compiled classes.

Usage: python3 api/tools/java_api.py CLASSES_DIR   (e.g. bindings-java/etcdlock/target/classes)
Prints the signature file scripts/api_check.sh records as api/java/<module>.txt.

`javap -protected` over every class in the directory (what the module's jar
carries: `mvn package` zips target/classes), kept only for classes a user can
name: public top-level classes, and nested classes that are public or
protected (in the InnerClasses attribute) with every enclosing class public.
Each class prints its declaration line (modifiers, generics, extends,
implements) and its public and protected members (fields, constructors,
methods with generic signatures and throws clauses: the javap forms), the
members sorted (declaration order is not API); classes sorted by name.
Package-private and private members, Kotlin's synthetic access$ accessors
and bodies are not part of it. Kotlin's module compiles to the same class files, so its record is
the JVM view of its API (what Java callers and binary compatibility see).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def classes(root: Path) -> list[str]:
    names = []
    for p in sorted(root.rglob("*.class")):
        rel = p.relative_to(root).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith("module-info") or name.endswith("package-info"):
            continue
        names.append(name)
    return names


def javap(root: Path, names: list[str]) -> str:
    jdk = os.environ.get("JAVA_HOME")
    exe = str(Path(jdk) / "bin" / "javap") if jdk else "javap"
    out = []
    for i in range(0, len(names), 200):  # (bounded command lines)
        r = subprocess.run([exe, "-protected", "-cp", str(root), *names[i:i + 200]],
                           check=True, capture_output=True, text=True)
        out.append(r.stdout)
    return "".join(out)


def nested_access(root: Path, names: list[str]) -> dict[str, bool]:
    """Whether each nested class is public or protected in its InnerClasses attribute."""
    acc: dict[str, bool] = {}
    jdk = os.environ.get("JAVA_HOME")
    exe = str(Path(jdk) / "bin" / "javap") if jdk else "javap"
    nested = [n for n in names if "$" in n]
    for i in range(0, len(nested), 200):
        r = subprocess.run([exe, "-v", "-cp", str(root), *nested[i:i + 200]],
                           check=True, capture_output=True, text=True)
        cur = None
        for line in r.stdout.splitlines():
            m = re.match(r"^(?:public |protected |private |abstract |final |static |sealed |non-sealed |strictfp )*(?:class|interface|enum|record|@interface) ([\w.$]+)", line.strip())
            if line and not line.startswith(" ") and m:
                cur = m.group(1).split("<")[0]
            # InnerClasses entries: "  public static #12= #10 of #5;   // Builder=class io/x/A$Builder of class io/x/A"
            m2 = re.search(r"^\s*((?:public|protected|private|static|final|abstract|interface|#\d+|=|\s)*)#\d+= #\d+ of #\d+;\s*//\s*\w+=class ([\w/$]+) of class", line)
            if m2:
                inner = m2.group(2).replace("/", ".")
                flags = m2.group(1)
                acc[inner] = ("public" in flags.split()) or ("protected" in flags.split())
    return acc


def main() -> int:
    root = Path(sys.argv[1])
    names = classes(root)
    if not names:
        print(f"java_api.py: no classes under {root}", file=sys.stderr)
        return 1
    text = javap(root, names)
    inner_ok = nested_access(root, names)
    blocks: dict[str, list[str]] = {}
    head = None
    for line in text.splitlines():
        if line.startswith("Compiled from") or not line.strip():
            continue
        if not line.startswith(" ") and line.endswith("{"):
            head = line[:-1].rstrip()
            blocks[head] = []
        elif line == "}":
            head = None
        elif head is not None:
            blocks[head].append(line.strip())
    public_top = set()
    kept: list[tuple[str, str, list[str]]] = []
    for head, members in blocks.items():
        m = re.search(r"(?:class|interface|enum|record|@interface) ([\w.$]+)", head)
        assert m, head
        name = m.group(1)
        if "$" not in name:
            if head.startswith("public "):
                public_top.add(name)
                kept.append((name, head, members))
        else:
            kept.append((name, head, members))
    out: list[str] = []
    for name, head, members in sorted(kept):
        if "$" in name:
            parts = name.split("$")
            outers = ["$".join(parts[:i]) for i in range(1, len(parts))]
            if parts[0] not in public_top or any(not inner_ok.get(o, True) for o in outers[1:]):
                continue
            if not inner_ok.get(name, False) or any(p.isdigit() for p in parts[1:]):
                continue
        out.append(head + " {")
        # Kotlin's access$... are synthetic accessors between a class and its
        # lambdas (no caller outside the class); its $default methods stay (Kotlin
        # callers compiled against a default argument call them).
        out.extend("  " + m for m in sorted(set(members)) if not re.search(r"\baccess\$", m))
        out.append("}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
