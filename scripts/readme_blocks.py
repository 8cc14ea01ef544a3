#!/usr/bin/env python3
"""Every fenced code block of every README and every page of the documentation
site (docs/**/*.md), and what checks it.

Prints one line per block (README, block number, line, language, first line,
how it is checked) and exits 1 if a block is checked by nothing or a check
made here fails. Blocks of a language with a suite of its own are run there
(this script verifies that suite exists and reads that README); the others
are checked here:

- ```sh: `bash -n`, every repository script it runs exists, every `cargo ...
  -p PKG [--example E] [--test T]` names a real package and target, every
  `etcdlock SUBCOMMAND` is one the CLI has (`etcdlock help SUBCOMMAND`);
  a block marked `<!-- run -->` on the line before its fence also runs, in a
  fresh directory, with that CLI on PATH and ETCDLOCK_ENDPOINTS and
  ETCDCTL_ENDPOINTS at a fresh etcd (testkit's etcd-harness; a page's
  http://127.0.0.1:2379 is that etcd), and must print the ```text block after
  it, compared as `<!-- run: MODE -->` says (RUN_MODES);
- ```xml: well-formed (wrapped in one root element); ```json: parses;
- ```properties: every line is a comment or `key=value`;
- a block with no language is program output or a file listing (shown
  as-is, nothing to run), and says so;
- a block of any language marked `<!-- example: PATH -->` on the line before
  its fence is an excerpt of PATH: its lines must appear in PATH as they are,
  one after another, and PATH must be one of EXAMPLES, each named (by its
  stem) in the test or program that runs it (the language suites skip such blocks: PATH is what runs).

Usage: scripts/readme_blocks.py [path/to/etcdlock]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\S*)\s*$")

# (README, language) -> the suite that runs its blocks, and the file of that
# suite that must read this README (so the claim cannot outlive the suite).
SUITES: Dict[Tuple[str, str], Tuple[str, str]] = {
    ("bindings-python/README.md", "python"): ("run as written by the Python suite", "bindings-python/tests/test_readme.py"),
    ("bindings-node/README.md", "js"): ("run as written by the Node suite", "bindings-node/test/readme.test.js"),
    ("bindings-node/README.md", "ts"): ("compiled by tsc and run by the Node suite", "bindings-node/test/readme.test.js"),
    ("ffi-c/README.md", "c"): ("compiled and run (fragments compiled) by ffi-c/test.sh", "ffi-c/test.sh"),
    ("README.md", "rust"): ("compiled as a doctest of core (cargo test -p etcdlock --doc)", "core/src/lib.rs"),
    ("bindings-java/README.md", "java"): ("compiled, and run if it has a main or JUnit tests, by the Java suite (ReadmeBlocksTest)", "bindings-java/etcdlock-spring-demo/src/test/java/io/etcdlock/demo/readme/ReadmeBlocksTest.java"),
    ("ffi-c/dist/README.md", "c"): ("compiled and run from the unpacked package by scripts/cleanroom.sh", "scripts/cleanroom.sh"),
    ("ffi-c/dist/README.md", "cmake"): ("its find_package/target_link_libraries lines are the CMakeLists.txt scripts/cleanroom.sh builds", "scripts/cleanroom.sh"),
}
# The site's pages (docs/**/*.md): language -> the suite that runs those blocks.
# Each suite reads every page (its file names the docs/ folder); Rust's doctests
# include each page by its path (core/src/lib.rs names it).
DOCS_SUITES: Dict[str, Tuple[str, str]] = {
    "python": ("run as written by the Python suite", "bindings-python/tests/test_readme.py"),
    "js": ("run as written by the Node suite", "bindings-node/test/readme.test.js"),
    "ts": ("compiled by tsc and run by the Node suite", "bindings-node/test/readme.test.js"),
    "c": ("compiled and run (fragments compiled) by ffi-c/test.sh", "ffi-c/test.sh"),
    "rust": ("compiled as a doctest of core (cargo test -p etcdlock --doc)", "core/src/lib.rs"),
    "java": ("compiled, and run if it has a main or JUnit tests, by the Java suite (ReadmeBlocksTest)", "bindings-java/etcdlock-spring-demo/src/test/java/io/etcdlock/demo/readme/ReadmeBlocksTest.java"),
    "kotlin": ("run by the Kotlin module's suite as a copy with the test's endpoints, checked to be the block (CoroutinesTest.readmeExample)", "bindings-java/etcdlock-kotlin/src/test/kotlin/io/etcdlock/kotlin/CoroutinesTest.kt"),
    "properties": ("bound as written by the Spring suite", "bindings-java/etcdlock-spring/src/test/java/io/etcdlock/spring/EtcdLockSpringTest.java"),
}
# Files whose excerpts a page may show (`<!-- example: PATH -->`) -> the test
# that runs each (it must name the file, for the claim to hold).
EXAMPLES: Dict[str, str] = {
    "examples/postgres/fence_schema.sql": "scripts/fence_scenario.py",
    "bindings-python/python/etcdlock/fencing.py": "bindings-python/examples/fence_postgres.py",
    "bindings-python/examples/fence_postgres.py": "bindings-python/tests/test_fence_postgres.py",
    "bindings-node/fencing.js": "bindings-node/examples/fence-postgres.js",
    "bindings-node/examples/fence-postgres.js": "bindings-node/test/fence-postgres.test.js",
    "bindings-java/etcdlock/src/main/java/io/etcdlock/Fencing.java":
        "bindings-java/etcdlock-demos/src/main/java/io/etcdlock/demo/FencePostgres.java",
    "bindings-java/etcdlock-demos/src/main/java/io/etcdlock/demo/FencePostgres.java":
        "bindings-java/etcdlock-spring-demo/src/test/java/io/etcdlock/demo/fence/FencePostgresTest.java",
    "bindings-java/etcdlock-spring-demo/src/test/java/io/etcdlock/demo/fence/FenceSpring.java":
        "bindings-java/etcdlock-spring-demo/src/test/java/io/etcdlock/demo/fence/FencePostgresTest.java",
    "examples/c/pg_fence.h": "examples/c/fence_postgres.c",
    "examples/c/fence_postgres.c": "ffi-c/test.sh",
    "scripts/flash_cli_worker.sh": "scripts/flash_sale.py",
}
EXAMPLE_MARK = re.compile(r"^<!-- example: (\S+) -->$")

# How each suite file refers to its README (it must, for the claim to hold).
README_MENTION = {
    "core/src/lib.rs": "README.md",
    "scripts/cleanroom.sh": "README",
}


class Block(NamedTuple):
    readme: str
    number: int
    line: int
    lang: str
    body: List[str]
    run: Optional[str] = None  # `<!-- run -->` (or `<!-- run: MODE -->`) before the fence: executed; see RUN_MODES
    output: Optional[List[str]] = None  # the ```text block that follows it (what it prints)
    example: Optional[str] = None  # `<!-- example: PATH -->` before the fence: an excerpt of PATH

    @property
    def first(self) -> str:
        return next((l.strip() for l in self.body if l.strip()), "")


def readmes() -> List[str]:
    out = subprocess.run(["git", "ls-files", "*README.md"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    # vendor/: third-party sources as published (their READMEs are theirs).
    found = sorted(p for p in out.split() if (ROOT / p).is_file() and not p.startswith("vendor/"))
    # The site's pages, committed or not (a new page is checked before its commit).
    return found + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))


RUN_MARK = re.compile(r"^<!-- run(?::\s*([a-z ]+?))?\s*-->$")
# How a run block's output is compared with the text block after it:
RUN_MODES = {
    "exact": "line by line (`...` stands for any text)",
    "any numbers": "line by line, any number where the page shows one (tokens, revisions)",
    "any order": "the same lines in any order (concurrent commands)",
    "lines vary": "as many lines as the page shows (which one ran varies)",
}
LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def blocks(readme: str) -> List[Block]:
    """The fenced blocks. An indented code block (4 spaces after a paragraph,
    outside any list) is an error: it has no language, so no check can know
    what it is, and rustdoc compiles it as Rust."""
    lines = (ROOT / readme).read_text(encoding="utf-8").splitlines()
    found: List[Block] = []
    i = 0
    in_list = False
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            line = lines[i]
            if LIST_ITEM.match(line):
                in_list = True
            elif line.strip() and not line.startswith(" "):
                in_list = False
            if line.startswith("    ") and line.strip() and i > 0 and not lines[i - 1].strip() and not in_list:
                raise SystemExit(f"{readme}:{i + 1}: an indented code block; fence it with its language (```text for a listing)")
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j >= len(lines):
            raise SystemExit(f"{readme}:{i + 1}: unclosed code fence")
        mark = RUN_MARK.match(lines[i - 1].strip()) if i > 0 else None
        run = (mark.group(1) or "exact") if mark else None
        if run is not None and run not in RUN_MODES:
            raise SystemExit(f"{readme}:{i}: <!-- run: {run} -->: the modes are {', '.join(RUN_MODES)}")
        ex = EXAMPLE_MARK.match(lines[i - 1].strip()) if i > 0 else None
        found.append(Block(readme, len(found) + 1, i + 1, m.group(1), lines[i + 1 : j], run,
                           example=ex.group(1) if ex else None))
        i = j + 1
    # A run block's output: the next fenced block if it is ```text and what
    # lies between them is at most one paragraph ending with a colon ("Prints:").
    for n, b in enumerate(found):
        if b.run and n + 1 < len(found) and found[n + 1].lang == "text":
            nxt = found[n + 1]
            between = lines[b.line + len(b.body) + 1 : nxt.line - 1]
            prose = "\n".join(between).strip()
            if not prose or ("\n\n" not in prose and prose.endswith(":")):
                found[n] = b._replace(output=nxt.body)
    return found


class Etcd:
    """One etcd for the blocks that run, from testkit's etcd-harness (127.0.0.1, free
    ports, a temp dir; stopped when its stdin closes)."""

    def __init__(self) -> None:
        harness = ROOT / "target" / "debug" / "etcd-harness"
        if os.environ.get("CARGO_TARGET_DIR"):
            harness = Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "etcd-harness"
        if not harness.is_file():
            subprocess.run(["cargo", "build", "-q", "-p", "etcdlock-testkit", "--bin", "etcd-harness"], cwd=ROOT, check=True)
        self.proc = subprocess.Popen([str(harness)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.endpoints = ",".join(json.loads(self.proc.stdout.readline())["endpoints"])

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def matches(expected: List[str], got: List[str], mode: str = "exact") -> bool:
    """Compare a block's output with the page's (see RUN_MODES)."""
    if len(expected) != len(got):
        return False
    if mode == "lines vary":
        return True
    if mode == "any order":
        expected, got = sorted(expected), sorted(g.rstrip() for g in got)
    for e, g in zip(expected, got):
        parts = [re.escape(part) for part in e.split("...")]
        if mode == "any numbers":
            parts = [re.sub(r"\d+", r"\\d+", part) for part in parts]
        if not re.fullmatch(".*?".join(parts), g.rstrip()):
            return False
    return True


class Checker:
    def __init__(self, cli: Path) -> None:
        self.cli = cli

        self.packages, self.targets = self.cargo_targets()
        self.subcommands: Dict[str, bool] = {}

    @staticmethod
    def cargo_targets() -> Tuple[set, Dict[str, set]]:
        meta = json.loads(subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=ROOT,
                                         capture_output=True, text=True, check=True).stdout)
        targets: Dict[str, set] = {}
        for p in meta["packages"]:
            targets[p["name"]] = {(k, t["name"]) for t in p["targets"] for k in t["kind"]}
        return set(targets), targets

    def subcommand(self, name: str) -> bool:
        if name not in self.subcommands:
            r = subprocess.run([str(self.cli), "help", name], capture_output=True, text=True)
            self.subcommands[name] = r.returncode == 0 and "Usage:" in r.stdout
        return self.subcommands[name]

    def sh(self, b: Block) -> Tuple[bool, str]:
        code = "\n".join(b.body) + "\n"
        r = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
        if r.returncode != 0:
            return False, f"bash -n: {r.stderr.strip()}"
        notes: List[str] = []
        problems: List[str] = []
        for raw in b.body:
            line = raw.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            line = re.sub(r"^(\w+=\S+\s+)+", "", line)  # leading VAR=value assignments
            words = line.split()
            cmd = words[0]
            if cmd in ("cd", "export", "tar", "sudo", "cc", "cmake", "make", "valgrind", "mvn", "pkg-config"):
                continue
            if cmd == "cargo":
                problems += self.cargo(words)
                notes.append("cargo targets")
            elif cmd == "etcdlock":
                sub = words[1] if len(words) > 1 else ""
                if not self.subcommand(sub):
                    problems.append(f"`etcdlock {sub}` is not a subcommand")
                notes.append("etcdlock subcommands")
            elif "/" in cmd and not cmd.startswith("$"):
                path = ROOT / cmd
                if not path.is_file():
                    problems.append(f"{cmd} does not exist")
                elif not os.access(path, os.X_OK) and not cmd.endswith(".sh"):
                    problems.append(f"{cmd} is not executable")
                notes.append("scripts exist")
            elif cmd in ("bash",) and len(words) > 1 and not (ROOT / words[1]).is_file():
                problems.append(f"{words[1]} does not exist")
        if problems:
            return False, "; ".join(problems)
        how = "bash -n" + "".join(f", {n}" for n in dict.fromkeys(notes))
        if b.run:
            ok, ran = self.run_sh(b, code)
            return ok, f"{how}; {ran}"
        return True, how

    def run_sh(self, b: Block, code: str) -> Tuple[bool, str]:
        """Run a `<!-- run -->` block in a fresh directory with the CLI this
        script checks on PATH and ETCDLOCK_ENDPOINTS/ETCDCTL_ENDPOINTS at a
        test etcd; its stdout must be the ```text block after it, if any."""
        import tempfile

        etcd = Etcd()  # a fresh one per block: a block's locks and records are its own
        env = dict(os.environ, PATH=f"{self.cli.parent}:{os.environ.get('PATH', '')}",
                   ETCDLOCK_ENDPOINTS=etcd.endpoints, ETCDCTL_ENDPOINTS=etcd.endpoints, ETCDCTL_API="3")
        # etcd's default address on a page is the test etcd's.
        code = code.replace("http://127.0.0.1:2379", etcd.endpoints.split(",")[0])
        try:
            with tempfile.TemporaryDirectory(prefix="etcdlock-block-") as cwd:
                r = subprocess.run(["bash", "-eo", "pipefail", "-c", code], cwd=cwd, env=env, capture_output=True,
                                   text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return False, "ran: no exit within 60 s"
        finally:
            etcd.stop()
        if r.returncode != 0:
            return False, f"ran: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
        if b.output is not None:
            got = r.stdout.rstrip("\n").split("\n") if r.stdout.strip() else []
            want = [l for l in b.output]
            while want and not want[-1].strip():
                want.pop()
            if not matches(want, got, b.run or "exact"):
                return False, f"ran: printed {got!r}, the page says {want!r} (compared: {b.run})"
            return True, f"ran against a test etcd, printed what the page shows ({len(got)} lines, {b.run})"
        return True, "ran against a test etcd (exit 0)"

    def cargo(self, words: List[str]) -> List[str]:
        problems: List[str] = []
        pkg = None
        for flag, kind in (("--example", "example"), ("--test", "test"), ("-p", None)):
            if flag in words:
                i = words.index(flag)
                if i + 1 >= len(words):
                    problems.append(f"{flag} without a value")
                    continue
                v = words[i + 1]
                if kind is None:
                    pkg = v
                    if v not in self.packages:
                        problems.append(f"no package {v}")
        for flag, kind in (("--example", "example"), ("--test", "test")):
            if flag in words and pkg in self.targets:
                v = words[words.index(flag) + 1]
                if (kind, v) not in self.targets[pkg]:
                    problems.append(f"{pkg} has no {kind} {v}")
        return problems

    @staticmethod
    def excerpt(b: Block) -> Tuple[bool, str]:
        """A block that shows part of a file a test runs: the lines are that file's."""
        assert b.example is not None
        runner = EXAMPLES.get(b.example)
        if runner is None:
            return False, f"{b.example} is not among the files whose excerpts a page may show (EXAMPLES)"
        name = Path(b.example).stem  # fencing.py is named as etcdlock.fencing
        if not (ROOT / runner).is_file() or name not in (ROOT / runner).read_text(encoding="utf-8"):
            return False, f"{runner} does not name {name}"
        body = [l.rstrip() for l in b.body]
        src = [l.rstrip() for l in (ROOT / b.example).read_text(encoding="utf-8").splitlines()]
        if not any(src[k : k + len(body)] == body for k in range(len(src) - len(body) + 1)):
            return False, f"not an excerpt of {b.example} (its lines, one after another, as they are there)"
        return True, f"excerpt of {b.example} ({len(body)} lines), which {runner} runs"

    def check(self, b: Block) -> Tuple[bool, str]:
        if b.example:
            return self.excerpt(b)
        suite = SUITES.get((b.readme, b.lang))
        if suite is None and b.readme.startswith("docs/"):
            suite = DOCS_SUITES.get(b.lang)
            if suite:
                what, path = suite
                f = ROOT / path
                mention = b.readme if b.lang == "rust" else "docs"
                if not f.is_file() or mention not in f.read_text(encoding="utf-8"):
                    return False, f"{what}: {path} does not read {mention}"
                return True, what
        if suite:
            what, path = suite
            f = ROOT / path
            if not f.is_file():
                return False, f"{what}: {path} is missing"
            mention = README_MENTION.get(path, "README")
            if mention not in f.read_text(encoding="utf-8"):
                return False, f"{what}: {path} does not read the README"
            return True, what
        code = "\n".join(b.body)
        if b.lang == "sh":
            return self.sh(b)
        if b.lang == "xml":
            try:
                doc = xml.dom.minidom.parseString(f"<root>{code}</root>")
            except Exception as e:  # noqa: BLE001 (any parse error is the answer)
                return False, f"not well-formed XML: {e}"
            # A dependency on etcdlock names the version scripts/dist.sh publishes.
            for dep in doc.getElementsByTagName("dependency"):
                group = dep.getElementsByTagName("groupId")
                version = dep.getElementsByTagName("version")
                if group and version and group[0].firstChild.data == "io.etcdlock":
                    v = version[0].firstChild.data
                    if v != workspace_version():
                        return False, f"io.etcdlock version {v}, but dist publishes {workspace_version()}"
                    return True, f"well-formed XML, io.etcdlock {v} (the version dist publishes)"
            return True, "well-formed XML"
        if b.lang == "json":
            try:
                json.loads(code)
            except ValueError as e:
                return False, f"not JSON: {e}"
            return True, "parses as JSON"
        if b.lang in ("", "text"):
            return True, "output or listing, shown as-is"
        return False, f"no check for ```{b.lang} blocks in {b.readme}"


def workspace_version() -> str:
    """The one version every artifact is published with (Cargo.toml [workspace.package])."""
    m = re.search(r'^\[workspace\.package\][^\[]*?^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M | re.S)
    assert m, "no version in Cargo.toml [workspace.package]"
    return m.group(1)


def main() -> int:
    cli = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "target" / "debug" / "etcdlock"
    if not cli.is_file():
        subprocess.run(["cargo", "build", "-q", "-p", "etcdlock-cli"], cwd=ROOT, check=True)
    checker = Checker(cli)
    failures = 0
    total = 0
    ran = 0
    for readme in readmes():
        for b in blocks(readme):
            total += 1
            ran += b.run is not None
            ok, how = checker.check(b)
            failures += not ok
            lang = b.lang or "-"
            print(f"{'ok  ' if ok else 'FAIL'} {b.readme}:{b.line} block {b.number} ({lang}) {b.first[:50]!r}: {how}")
    print(f"{total} code blocks (READMEs and docs/), {total - failures} checked, {failures} failing; "
          f"{ran} shell blocks run here against a test etcd")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
