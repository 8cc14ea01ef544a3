#!/usr/bin/env python3
"""The public API of the Python package `etcdlock`, as its users' type checkers see it.

Usage: python3 api/tools/python_api.py [PACKAGE_DIR]   (default bindings-python/python/etcdlock)
Prints one line per public item, sorted within each module, to stdout
(scripts/api_check.sh records it as api/python/etcdlock.txt).

What ships is the package directory as it is (maturin's python-source: the .py
modules, the native module's stubs _etcdlock.pyi and py.typed), so this reads
those files with `ast` and needs no build: a type checker sees exactly these
annotations, and the native module's runtime is held to its stubs by the
binding's own tests (tests/test_typing.py, mypy --strict).

Public: the package `etcdlock` and its modules whose names do not start with
"_" (fencing, prometheus, pytest_plugin, tooz_driver). A module's public names
are its `__all__`, the names it defines at top level that do not start with
"_", and its explicit re-exports (`from .m import X as X`). Each name is
followed to where it is defined (a private module or the .pyi) and printed with
its full signature: a class with its bases and every member that does not
start with "_" or is a dunder, including members inherited from private base
classes; functions and methods with parameters, defaults, annotations and
decorators (property, staticmethod, classmethod, overload); constants with
their annotation (or literal type), type aliases with their value; last, the
private type aliases and type variables those signatures use (`_Bytes`).
Members are sorted by name (overloads keep their order). Docstrings,
comments and bodies are not part of it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PKG = "etcdlock"


def load(pkgdir: Path, mod: str) -> ast.Module | None:
    """The ast of module `mod` ('' is the package) from its .py or .pyi."""
    base = pkgdir / "__init__" if mod == "" else pkgdir / mod
    for ext in (".pyi", ".py"):
        p = base.with_suffix(ext)
        if p.exists():
            return ast.parse(p.read_text(), str(p))
    return None


def top_defs(tree: ast.Module) -> dict[str, ast.AST]:
    """Names a module binds at top level -> the node binding them (imports as ImportFrom)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, node)  # overloads: the first; all are printed from the class/module body
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                out[a.asname or a.name] = node
    return out


def all_names(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def public_names(tree: ast.Module) -> list[str]:
    names = set(all_names(tree) or [])
    for name, node in top_defs(tree).items():
        if isinstance(node, ast.ImportFrom):
            # explicit re-export: `from .m import X as X`
            if any(a.asname == a.name == name for a in node.names) and not name.startswith("_"):
                names.add(name)
        elif not name.startswith("_"):
            names.add(name)
    names.discard("__all__")
    return sorted(names)


class Resolver:
    def __init__(self, pkgdir: Path):
        self.pkgdir = pkgdir
        self.cache: dict[str, ast.Module | None] = {}

    def module(self, mod: str) -> ast.Module | None:
        if mod not in self.cache:
            self.cache[mod] = load(self.pkgdir, mod)
        return self.cache[mod]

    def resolve(self, mod: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """(defining module, node) of `name` as seen from package module `mod`; None if outside the package."""
        tree = self.module(mod)
        if tree is None or depth > 10:
            return None
        node = top_defs(tree).get(name)
        if node is None:
            return None
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                return None  # from another package (typing, tooz, ...)
            src = node.module or ""
            orig = next(a.name for a in node.names if (a.asname or a.name) == name)
            if node.level == 1:
                return self.resolve(src, orig, depth + 1)
            return None
        return mod, node


def args_text(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return ast.unparse(fn.args)


def deco_text(fn: ast.AST) -> str:
    decos = [ast.unparse(d) for d in getattr(fn, "decorator_list", [])]
    return "".join(f"@{d} " for d in decos)


def func_line(prefix: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    kw = "async def" if isinstance(fn, ast.AsyncFunctionDef) else "def"
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"{deco_text(fn)}{kw} {prefix}{fn.name}({args_text(fn)}){ret}"


def value_text(node: ast.Assign | ast.AnnAssign, name: str) -> str:
    if isinstance(node, ast.AnnAssign):
        return f"{name}: {ast.unparse(node.annotation)}"
    v = node.value
    if isinstance(v, ast.Constant):
        return f"{name}: {type(v.value).__name__}"
    if isinstance(v, (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp)):
        return f"{name} = {ast.unparse(v)}"  # a type alias or an alias of another name
    if isinstance(v, ast.Call):
        return f"{name} = {ast.unparse(v.func)}(...)"  # e.g. a descriptor: _Forward[str]()
    literal = {ast.JoinedStr: "str", ast.Tuple: "tuple", ast.List: "list", ast.Dict: "dict", ast.Set: "set"}
    return f"{name}: {literal.get(type(v), 'object')}"


def is_public_member(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def class_members(r: Resolver, mod: str, cls: ast.ClassDef, prefix: str) -> list[tuple[str, str]]:
    """(member name, line) of each public member, sorted by name (overloads keep their order)."""
    items: list[tuple[str, str]] = []
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_public_member(node.name):
            items.append((node.name, func_line(prefix, node)))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_public_member(node.target.id):
            items.append((node.target.id, value_text(node, prefix + node.target.id)))
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and is_public_member(t.id) and t.id not in ("__slots__", "__module__"):
                    items.append((t.id, value_text(node, prefix + t.id)))
        elif isinstance(node, ast.ClassDef) and is_public_member(node.name):
            nested = class_lines(r, mod, node, prefix)
            items.append((node.name, "\n".join(nested)))
    # Members inherited from the package's private base classes are this class's API.
    seen = {name for name, _ in items}
    for b in cls.bases:
        bname = ast.unparse(b.value if isinstance(b, ast.Subscript) else b)
        if not bname.startswith("_"):
            continue
        found = r.resolve(mod, bname)
        if found and isinstance(found[1], ast.ClassDef):
            for name, line in class_members(r, found[0], found[1], prefix):
                if name not in seen:
                    items.append((name, f"{line}  # from {bname}"))
    return sorted(items, key=lambda it: it[0])


def class_lines(r: Resolver, mod: str, cls: ast.ClassDef, qual: str) -> list[str]:
    bases = [ast.unparse(b) for b in cls.bases] + [ast.unparse(k) for k in cls.keywords]
    head = f"{deco_text(cls)}class {qual}{cls.name}({', '.join(bases)})" if bases else f"{deco_text(cls)}class {qual}{cls.name}"
    return [head] + [line for _, line in class_members(r, mod, cls, f"{qual}{cls.name}.")]


def describe(r: Resolver, modname: str, mod: str, name: str) -> list[str]:
    found = r.resolve(mod, name)
    qual = f"{modname}."
    if found is None:
        tree = r.module(mod)
        node = top_defs(tree).get(name) if tree else None
        if isinstance(node, ast.ImportFrom):
            return [f"{qual}{name} = {'.' * node.level}{node.module}.{name}"]
        return [f"{qual}{name} = <unresolved>"]
    dmod, node = found
    if isinstance(node, ast.ClassDef):
        lines = class_lines(r, dmod, node, qual)
        if node.name != name:
            lines[0] += f"  # as {name}"
        return lines
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        tree = r.module(dmod)
        # every overload of it, in order
        return [func_line(qual, n) for n in tree.body  # type: ignore[union-attr]
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return [value_text(node, qual + name)]
    return [f"{qual}{name}: <{type(node).__name__}>"]


def main() -> int:
    pkgdir = Path(sys.argv[1] if len(sys.argv) > 1 else "bindings-python/python/etcdlock")
    r = Resolver(pkgdir)
    mods = [""] + sorted(p.stem for p in pkgdir.glob("*.py") if not p.stem.startswith("_"))
    out: list[str] = []
    for mod in mods:
        tree = r.module(mod)
        assert tree is not None, mod
        modname = PKG if mod == "" else f"{PKG}.{mod}"
        out.append(f"module {modname}")
        for name in public_names(tree):
            out.extend(describe(r, modname, mod, name))
        out.append("")
    # Private type aliases and type variables the signatures above use (`_Bytes`,
    # `_G`): their definitions are part of those signatures.
    used = sorted(set(re.findall(r"\b(_[A-Za-z]\w*)\b", "\n".join(out))))
    aliases: list[str] = []
    for p in sorted(pkgdir.glob("*.py*")):
        mod = p.stem
        tree = r.module("" if mod == "__init__" else mod)
        if tree is None:
            continue
        for name, node in sorted(top_defs(tree).items()):
            if name in used and isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                aliases.append(f"{PKG}.{mod}.{name} = {ast.unparse(node.value)}")
    out.append("private names used above")
    out.extend(sorted(set(aliases)))
    out.append("")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
