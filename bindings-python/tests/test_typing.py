"""The stubs and annotations, checked by mypy (installed by test.sh)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def mypy(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", str(path)],
        capture_output=True,
        text=True,
        cwd=str(HERE.parent),
    )


def test_usage_type_checks() -> None:
    r = mypy(HERE / "typing_usage.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_package_example_and_bench_type_check() -> None:
    root = HERE.parent
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null",
         str(root / "python" / "etcdlock"), str(root / "examples" / "flash_sale.py"), str(root / "examples" / "apscheduler_once.py"), str(root / "examples" / "fence_postgres.py"),
         str(root / "bench.py")],
        capture_output=True,
        text=True,
        cwd=str(root),
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_return_inside_with_guard_is_not_a_missing_return() -> None:
    r = mypy(HERE / "typing_with_return.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_misuse_is_rejected() -> None:
    r = mypy(HERE / "typing_bad.py")
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [6, 7, 9, 10, 11], r.stdout


def test_package_is_typed() -> None:
    import etcdlock

    pkg = Path(etcdlock.__file__).parent
    assert (pkg / "py.typed").exists()
    assert (pkg / "_etcdlock.pyi").exists()
