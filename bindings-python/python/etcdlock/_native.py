"""Loads the native module, or fails naming this platform and the supported ones.

pip installs a wheel only where one matches (``manylinux2014`` x86_64 and
aarch64), and builds from the sdist elsewhere; a package copied to another
platform, or one whose native part is missing, fails here at import with the
platform's name instead of a bare "No module named" or an ELF error.
"""

from __future__ import annotations

import importlib
import platform
import sys

#: The platforms the published wheels carry a native module for (glibc >= 2.17).
SUPPORTED = ("linux-x86_64", "linux-aarch64")


def platform_name() -> str:
    """This interpreter's platform as ``<os>-<arch>``, e.g. ``linux-aarch64``."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{sys.platform}-{machine}"


try:
    importlib.import_module("._etcdlock", __package__)
except ImportError as e:
    raise ImportError(
        f"etcdlock: no native module for {platform_name()} ({e}). The published wheels support "
        f"{', '.join(SUPPORTED)} (glibc >= 2.17); elsewhere install from the sdist "
        "(pip install --no-binary etcdlock etcdlock), which builds it and needs Rust and protoc"
    ) from e
