"""Every ```python block of the README and of every page of the documentation
site (docs/**/*.md), run as written against the suite's etcd
(ETCDLOCK_ENDPOINTS points the examples' `Client()` at it), one test each.

A block marked `<!-- fragment -->` on the line right before its fence is not a
whole program: it is only compiled (and type-checked). A block marked
`<!-- pytest -->` is a test module: it is run by pytest, alone in a fresh
directory with no conftest.py (so its etcdlock fixtures come from the
installed package's plugin), and every test in it must pass. A block marked
`<!-- example: PATH -->` is an excerpt of PATH, a file another test runs
(scripts/readme_blocks.py checks that it is one): it is not run here. A block followed by a
```text block (only blank lines or one line of prose ending in ":", such as
"Prints:", between them) promises that output: the program's stdout must
match it line by line, where `...` in the expected text stands for any run of
characters (a lease id, a fencing token). The test ids name the file (relative
to the repository), the block's line and its first line, so the output lists
what ran."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
README = HERE.parent / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\S*)\s*$")


class Block(NamedTuple):
    source: str  # the file, relative to the repository
    number: int  # 1-based, among the file's fenced blocks
    line: int  # 1-based line of the opening fence
    lang: str
    fragment: bool
    is_test: bool  # `<!-- pytest -->`: a test module, run by pytest
    excerpt: bool  # `<!-- example: PATH -->`: a part of PATH, which another test runs
    code: str
    output: Optional[str]  # the ```text block that follows it, if any

    @property
    def id(self) -> str:
        first = next((l.strip() for l in self.code.splitlines() if l.strip()), "")
        kind = "fragment" if self.fragment else "pytest" if self.is_test else "program"
        return f"{self.source}:{self.line} ({kind}): {first[:60]}"


def fenced_blocks(path: Path) -> List[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    source = str(path.relative_to(ROOT))
    raw = []  # (start, end, lang)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        assert j < len(lines), f"{source}:{i + 1}: unclosed code fence"
        raw.append((i, j, m.group(1)))
        i = j + 1
    blocks: List[Block] = []
    for n, (start, end, lang) in enumerate(raw):
        before = lines[start - 1].strip() if start > 0 else ""
        fragment = before.startswith("<!-- fragment") and before.endswith("-->")
        is_test = before == "<!-- pytest -->"
        excerpt = before.startswith("<!-- example:")
        code = "\n".join(lines[start + 1 : end]) + "\n"
        output = None
        if n + 1 < len(raw) and raw[n + 1][2] == "text":
            between = [l.strip() for l in lines[end + 1 : raw[n + 1][0]] if l.strip()]
            if not between or (len(between) == 1 and between[0].endswith(":")):
                s, e, _ = raw[n + 1]
                output = "\n".join(lines[s + 1 : e])
        blocks.append(Block(source, n + 1, start + 1, lang, fragment, is_test, excerpt, code, output))
    return blocks


SOURCES = [README] + sorted(DOCS.rglob("*.md"))
BLOCKS = {str(p.relative_to(ROOT)): fenced_blocks(p) for p in SOURCES}
PYTHON = [b for bs in BLOCKS.values() for b in bs if b.lang in ("python", "py") and not b.excerpt]

# How many python blocks each file has at least (the pages the Python
# binding's docs own); a block dropped by mistake fails here.
EXPECTED: Dict[str, int] = {
    "bindings-python/README.md": 1,
    "docs/start/python.md": 2,
    "docs/lang/python.md": 11,
    "docs/guides/asyncio.md": 4,
    "docs/guides/scheduled-jobs.md": 1,
    "docs/guides/leader-election.md": 1,
    "docs/guides/semaphore.md": 1,
    "docs/guides/fencing.md": 1,
    "docs/guides/unit-tests.md": 5,
    "docs/guides/tls-auth.md": 1,
    "docs/guides/proxy.md": 1,
    "docs/migrate/python-etcd3.md": 1,
}


def test_every_source_has_its_python_blocks() -> None:
    counts = {s: sum(1 for b in PYTHON if b.source == s) for s in EXPECTED}
    short = {s: (n, EXPECTED[s]) for s, n in counts.items() if n < EXPECTED[s]}
    assert short == {}, f"(found, expected at least) per file: {short}"
    # The README: shell commands and listings are checked by scripts/readme_blocks.py;
    # any other language there needs a runner.
    readme = BLOCKS["bindings-python/README.md"]
    others = [b.id for b in readme if b.lang not in ("python", "py", "sh", "text")]
    assert others == [], f"fenced blocks this test does not check: {others}"
    # On the site, a Python block is spelled ```python (the language the site
    # highlights and scripts/readme_blocks.py maps to this suite).
    assert [b.id for b in PYTHON if b.lang == "py" and b.source.startswith("docs/")] == []


def matches(expected: str, got: str) -> bool:
    want = [l.rstrip() for l in expected.strip("\n").splitlines()]
    have = [l.rstrip() for l in got.strip("\n").splitlines()]
    if len(want) != len(have):
        return False
    for w, h in zip(want, have):
        pattern = ".*?".join(re.escape(part) for part in w.split("..."))
        if not re.fullmatch(pattern, h):
            return False
    return True


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_block(block: Block, endpoints: List[str], tmp_path: Path) -> None:
    # Every block must at least compile (a fragment only that).
    compile(block.code, f"{block.source}:{block.line}", "exec")
    if block.fragment:
        return
    if block.is_test:
        (tmp_path / "test_block.py").write_text(block.code, encoding="utf-8")
        p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_block.py"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        print(p.stdout, end="")
        tests = block.code.count("\ndef test_")
        assert p.returncode == 0 and f"{tests} passed" in p.stdout, f"{block.id}: pytest exited {p.returncode}\n{p.stdout}{p.stderr}"
        return
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    p = subprocess.run([sys.executable, "-c", block.code], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    print(p.stdout, end="")
    assert p.returncode == 0, f"{block.id} exited {p.returncode}\n{p.stderr}"
    if block.output is not None:
        assert matches(block.output, p.stdout), f"{block.id} printed\n{p.stdout}\nnot what its page says:\n{block.output}"
    # What some blocks promise in their comments.
    if 'client.observe("scheduler-2")' in block.code:
        assert p.stdout.split() == ["None", "b'node-1'", "None"]
    if '@client.once("reports/nightly"' in block.code:
        assert p.stdout.split("\n")[:2] == ["report written", "None"], p.stdout
    if 'client.campaign("scheduler-3"' in block.code:
        assert "node-1 v2" in p.stdout


def test_blocks_type_check_strict(tmp_path: Path) -> None:
    # Each block as its own module, checked as a user's mypy --strict would.
    files = []
    for i, b in enumerate(PYTHON):
        stem = re.sub(r"\W", "_", f"{b.source}_{b.line}")
        f = tmp_path / f"block_{i}_{stem}.py"
        f.write_text(b.code, encoding="utf-8")
        files.append(str(f))
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", *files],
                       capture_output=True, text=True)
    print(r.stdout, end="")
    assert r.returncode == 0, r.stdout + r.stderr
