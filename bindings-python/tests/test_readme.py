"""Every ```python block of the README, run as written against the suite's etcd
(ETCDLOCK_ENDPOINTS points the examples' `Client()` at it), one test each.

A block marked `<!-- fragment -->` on the line right before its fence is not a
whole program: it is only compiled. The test ids name the README, the block's
number among the README's fenced blocks, its line and its first line, so the
output lists what ran."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, NamedTuple

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\S*)\s*$")


class Block(NamedTuple):
    number: int  # 1-based, among all the README's fenced blocks
    line: int  # 1-based line of the opening fence
    lang: str
    fragment: bool
    code: str
    after: str  # the prose line just before the block, to tell blocks apart

    @property
    def id(self) -> str:
        first = next((l.strip() for l in self.code.splitlines() if l.strip()), "")
        kind = "fragment" if self.fragment else "program"
        return f"{README.name} block {self.number} (line {self.line}, {kind}, after {self.after[:40]!r}): {first[:60]}"


def fenced_blocks(path: Path) -> List[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    prose = ""  # the last line of text outside the code blocks
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip() and not lines[i].strip().startswith("<!--"):
                prose = lines[i].strip()
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        assert j < len(lines), f"{path.name}:{start + 1}: unclosed code fence"
        before = lines[start - 1].strip() if start > 0 else ""
        fragment = before.startswith("<!-- fragment") and before.endswith("-->")
        code = "\n".join(lines[start + 1 : j]) + "\n"
        blocks.append(Block(len(blocks) + 1, start + 1, m.group(1), fragment, code, prose))
        i = j + 1
    return blocks


BLOCKS = fenced_blocks(README)
PYTHON = [b for b in BLOCKS if b.lang in ("python", "py")]


def test_readme_has_python_blocks_and_no_unchecked_languages() -> None:
    # The Use section (4) and the recipes (3); a new language here needs a runner.
    assert len(PYTHON) >= 7, [b.id for b in PYTHON]
    # Shell commands and listings: scripts/readme_blocks.py checks them.
    others = [b.id for b in BLOCKS if b not in PYTHON and b.lang not in ("sh", "text")]
    assert others == [], f"fenced blocks this test does not check: {others}"


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_readme_block(block: Block, endpoints: List[str]) -> None:
    # Every block must at least compile (a fragment only that).
    compile(block.code, f"{README.name}:block{block.number}", "exec")
    if block.fragment:
        return
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    p = subprocess.run([sys.executable, "-c", block.code], env=env, capture_output=True, text=True, timeout=60)
    print(p.stdout, end="")
    assert p.returncode == 0, f"{block.id} exited {p.returncode}\n{p.stderr}"
    # What some blocks promise in their comments.
    if 'client.observe("scheduler-2")' in block.code:
        assert p.stdout.split() == ["None", "b'node-1'", "None"]
    if '@client.once("reports/nightly"' in block.code:
        assert p.stdout.split("\n")[:2] == ["report written", "None"], p.stdout
    if 'client.campaign("scheduler-3"' in block.code:
        assert "node-1 v2" in p.stdout


def test_readme_blocks_type_check_strict(tmp_path: Path) -> None:
    # Each block as its own module, checked as a user's mypy --strict would.
    files = []
    for b in PYTHON:
        f = tmp_path / f"readme_block{b.number}.py"
        f.write_text(b.code, encoding="utf-8")
        files.append(str(f))
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", *files],
                       capture_output=True, text=True)
    print(r.stdout, end="")
    assert r.returncode == 0, r.stdout + r.stderr
