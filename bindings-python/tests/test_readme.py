"""The README's recipe examples, run as written against the suite's etcd
(ETCDLOCK_ENDPOINTS points the examples' `Client()` at it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def recipe_blocks() -> List[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Recipes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


BLOCKS = recipe_blocks()


def test_the_recipes_section_has_examples() -> None:
    assert len(BLOCKS) == 3


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_recipe_example_runs(i: int, endpoints: List[str]) -> None:
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    p = subprocess.run([sys.executable, "-c", BLOCKS[i]], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    if i == 1:
        assert p.stdout.split() == ["None", "b'node-1'", "None"]
