#!/usr/bin/env python3
"""Pack the abi3 wheel from a native module scripts/cross.sh or dist.sh built.

    pack_wheel.py NATIVE_MODULE VERSION OUT_DIR [TARGET]
    pack_wheel.py --repack WHEEL OUT_DIR

TARGET is the Rust target the module was built for (default
x86_64-unknown-linux-gnu; x86_64 and aarch64 also mean their glibc targets).
--repack takes the native module (and the version and target) out of a wheel
this script made, the rest from this checkout: new metadata on an old build,
with no rebuild (for example dist/ after a change to pyproject.toml). The
wheel's path is printed.

maturin would compile the crate again on its own (a second, differently
feature-resolved build of tonic, prost, tokio...); dist.sh builds every native
part of a target in one cargo invocation and this packs the Python one. The
layout is what `maturin build` makes from bindings-python/pyproject.toml: the
pure-Python package from python/etcdlock/ plus the extension module
etcdlock/_etcdlock.abi3.so (_etcdlock.pyd on Windows), tagged cp39-abi3-PLATFORM:
"""
import base64, glob, hashlib, os, re, sys, zipfile

# Rust target -> (wheel platform tags, the extension's file name). manylinux
# 2.17 = manylinux2014 (auditwheel checks it); the macOS minimums are the Rust
# targets' own and cross.sh's MACOSX_DEPLOYMENT_TARGET.
TARGETS = {
    "x86_64-unknown-linux-gnu": ("manylinux_2_17_x86_64.manylinux2014_x86_64", "_etcdlock.abi3.so"),
    "aarch64-unknown-linux-gnu": ("manylinux_2_17_aarch64.manylinux2014_aarch64", "_etcdlock.abi3.so"),
    "x86_64-unknown-linux-musl": ("musllinux_1_2_x86_64", "_etcdlock.abi3.so"),
    "aarch64-unknown-linux-musl": ("musllinux_1_2_aarch64", "_etcdlock.abi3.so"),
    "x86_64-apple-darwin": ("macosx_10_12_x86_64", "_etcdlock.abi3.so"),
    "aarch64-apple-darwin": ("macosx_11_0_arm64", "_etcdlock.abi3.so"),
    "x86_64-pc-windows-gnu": ("win_amd64", "_etcdlock.pyd"),
}

here = os.path.dirname(os.path.abspath(__file__))
pkg_root = os.path.join(here, "..", "bindings-python")
if len(sys.argv) == 4 and sys.argv[1] == "--repack":
    old_wheel, out = sys.argv[2:4]
    m = re.fullmatch(r"etcdlock-([^-]+)-cp39-abi3-(.+)\.whl", os.path.basename(old_wheel))
    target = next((t for t, (p, _) in TARGETS.items() if m and p == m.group(2)), None)
    if target is None:
        sys.exit(f"pack_wheel.py: {old_wheel} is not an etcdlock wheel of a known platform")
    version = m.group(1)
    with zipfile.ZipFile(old_wheel) as z:
        native = z.read(f"etcdlock/{TARGETS[target][1]}")
else:
    so, version, out = sys.argv[1:4]
    native = open(so, "rb").read()
    target = sys.argv[4] if len(sys.argv) > 4 else "x86_64"
    target = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}.get(target, target)
if target not in TARGETS:
    sys.exit(f"pack_wheel.py: unknown target {target!r} ({', '.join(TARGETS)})")
platform, module = TARGETS[target]
tag = f"cp39-abi3-{platform}"
name = f"etcdlock-{version}"

try:
    import tomllib
except ImportError:  # Python < 3.11: the metadata would lose the extras
    sys.exit("pack_wheel.py: needs Python >= 3.11 (tomllib) to read pyproject.toml")
pyproject = open(os.path.join(pkg_root, "pyproject.toml"), "rb").read()
project = tomllib.loads(pyproject.decode())["project"]
readme = open(os.path.join(pkg_root, "README.md"), encoding="utf-8").read()

# Core metadata 2.4, the fields `maturin sdist` writes into the sdist's
# PKG-INFO from the same pyproject.toml (scripts/registry/pypi.sh check
# compares the two, and runs twine check --strict on both).
meta = ["Metadata-Version: 2.4", "Name: etcdlock", f"Version: {version}"]
if "description" in project:
    meta.append(f"Summary: {project['description']}")
if project.get("keywords"):
    meta.append("Keywords: " + ",".join(project["keywords"]))
authors = [a["name"] for a in project.get("authors", []) if "name" in a and "email" not in a]
if authors:
    meta.append("Author: " + ", ".join(authors))
license = project.get("license", "Apache-2.0")
if isinstance(license, str):  # an SPDX expression (PEP 639)
    meta.append(f"License-Expression: {license}")
else:
    meta.append(f"License: {license.get('text', 'Apache-2.0')}")
# License files: .dist-info/licenses/<path as in pyproject.toml> (PEP 639).
license_files = []
for pattern in project.get("license-files", []):
    found = sorted(glob.glob(pattern, root_dir=pkg_root))
    if not found:
        sys.exit(f"pack_wheel.py: license-files pattern {pattern!r} matches nothing in bindings-python/")
    for f in found:
        meta.append(f"License-File: {f}")
        license_files.append((f, open(os.path.join(pkg_root, f), "rb").read()))
for c in project.get("classifiers", []):
    meta.append(f"Classifier: {c}")
meta.append(f"Requires-Python: {project.get('requires-python', '>=3.9')}")
# Dependencies and extras as pyproject.toml declares them, so
# `pip install "etcdlock[prometheus]"` pulls prometheus_client.
for r in project.get("dependencies", []):
    meta.append(f"Requires-Dist: {r}")
for extra, reqs in project.get("optional-dependencies", {}).items():
    meta.append(f"Provides-Extra: {extra}")
    for r in reqs:
        meta.append(f'Requires-Dist: {r}; extra == "{extra}"')
for label, url in project.get("urls", {}).items():
    meta.append(f"Project-URL: {label}, {url}")
meta.append("Description-Content-Type: text/markdown; charset=UTF-8; variant=GFM")
metadata = "\n".join(meta) + "\n\n" + readme
wheel = f"Wheel-Version: 1.0\nGenerator: etcdlock scripts/pack_wheel.py\nRoot-Is-Purelib: false\n"
for t in tag.split("-", 2)[2].split("."):
    wheel += f"Tag: cp39-abi3-{t}\n"

files = []
src = os.path.join(pkg_root, "python", "etcdlock")
for f in sorted(os.listdir(src)):
    if f.endswith((".py", ".pyi")) or f == "py.typed":
        files.append((f"etcdlock/{f}", open(os.path.join(src, f), "rb").read()))
files.append((f"etcdlock/{module}", native))
di = f"{name}.dist-info"
files.append((f"{di}/METADATA", metadata.encode()))
files.append((f"{di}/WHEEL", wheel.encode()))
for f, b in license_files:
    files.append((f"{di}/licenses/{f}", b))
# Entry points as pyproject.toml declares them (tooz finds its driver there).
eps = project.get("entry-points", {})
if eps:
    text = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n" for group, items in eps.items())
    files.append((f"{di}/entry_points.txt", text.encode()))

def digest(b):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()

record = "".join(f"{p},{digest(b)},{len(b)}\n" for p, b in files) + f"{di}/RECORD,,\n"
files.append((f"{di}/RECORD", record.encode()))
path = os.path.join(out, f"{name}-{tag}.whl")
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for p, b in files:
        info = zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o755 if p.endswith((".so", ".pyd")) else 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, b)
print(path)
