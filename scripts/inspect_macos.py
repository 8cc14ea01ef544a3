#!/usr/bin/env python3
"""Inspect macOS binaries we build but cannot run here (nothing on Linux runs
Mach-O): for each FILE, its architecture and kind, the minimum macOS version,
the libraries it links (only the system's), the symbols it exports (only its
API), its install name (a dylib: no build path), and its code signature (an
arm64 Mach-O must carry one or macOS refuses to load it): the CodeDirectory's
page hashes are recomputed and compared, so a file changed after signing
(e.g. stripped) fails. One line per file; exit 1 if any check fails.

  scripts/inspect_macos.py [--exports REGEX] [--install-name NAME] ARCH FILE...

ARCH: arm64 or x86_64. --exports: every exported symbol must match (default:
anything); --install-name: the dylib's LC_ID_DYLIB must equal it. Needs lief
(pip install lief).
"""
import argparse
import hashlib
import re
import struct
import sys

import lief

lief.logging.disable()

MIN_OS = {"arm64": (11, 0), "x86_64": (10, 12)}
CPU = {"arm64": "ARM64", "x86_64": "X86_64"}
SYSTEM = re.compile(r"^(/usr/lib/|/System/Library/Frameworks/)")


def verify_signature(raw, b):
    """The ad-hoc (or any) signature's CodeDirectory page hashes, recomputed."""
    cs = b.code_signature
    blob = raw[cs.data_offset:cs.data_offset + cs.data_size]
    magic, _length, count = struct.unpack_from(">III", blob, 0)
    if magic != 0xFADE0CC0:
        return f"no embedded signature superblob (magic {magic:#x})"
    for i in range(count):
        slot, off = struct.unpack_from(">II", blob, 12 + 8 * i)
        if slot != 0:  # CSSLOT_CODEDIRECTORY
            continue
        (cmagic, _l, version, flags, hash_off, _ident, _nspecial, ncode, limit,
         hsize, htype, _plat, page_log2) = struct.unpack_from(">IIIIIIIIIBBBB", blob, off)
        if cmagic != 0xFADE0C02:
            return f"bad CodeDirectory magic {cmagic:#x}"
        if version >= 0x20300:
            limit64 = struct.unpack_from(">Q", blob, off + 56)[0]
            limit = limit64 or limit
        algo = {1: hashlib.sha1, 2: hashlib.sha256}.get(htype)
        if algo is None:
            return f"unknown hash type {htype}"
        page = 1 << page_log2
        for n in range(ncode):
            want = blob[off + hash_off + n * hsize: off + hash_off + (n + 1) * hsize]
            got = algo(raw[n * page: min((n + 1) * page, limit)]).digest()[:hsize]
            if want != got:
                return f"page {n} hash differs (file changed after signing)"
        kind = "ad-hoc" if flags & 0x2 else "signed"
        return f"ok: {kind}, {ncode} pages of {page} B verified ({algo().name})"
    return "no CodeDirectory"


def inspect(path, arch, exports, install_name):
    problems = []
    raw = open(path, "rb").read()
    fat = lief.MachO.parse(path)
    if fat is None or fat.size != 1:
        return [f"{path}: not a thin Mach-O"], ""
    b = fat.at(0)
    cpu = b.header.cpu_type.name
    if cpu != CPU[arch]:
        problems.append(f"built for {cpu}, filed under {arch}")
    kind = b.header.file_type.name
    if b.has_build_version:
        minos = tuple(b.build_version.minos[:2])
    elif b.has_version_min:
        minos = tuple(b.version_min.version[:2])
    else:
        minos = None
        problems.append("no minimum macOS version")
    if minos and minos > MIN_OS[arch]:
        problems.append(f"needs macOS {minos[0]}.{minos[1]}, want <= {MIN_OS[arch][0]}.{MIN_OS[arch][1]}")
    ident = None
    for c in b.commands:
        if c.command == lief.MachO.LoadCommand.TYPE.ID_DYLIB:
            ident = c.name
    libs = [l.name for l in b.libraries if l.name != ident]
    foreign = [l for l in libs if not SYSTEM.match(l)]
    if foreign:
        problems.append(f"links non-system libraries: {foreign}")
    if kind == "DYLIB":
        if ident is None:
            problems.append("a dylib without LC_ID_DYLIB")
        elif install_name and ident != install_name:
            problems.append(f"install name {ident}, want {install_name}")
        elif ident.startswith("/") and not SYSTEM.match(ident):
            problems.append(f"install name is a build path: {ident}")
    exported = sorted({s.name for s in b.symbols if s.has_export_info})
    if exports:
        bad = [s for s in exported if not re.fullmatch(exports, s)]
        if bad:
            problems.append(f"{len(bad)} of {len(exported)} exported symbols outside the API, e.g. {bad[:3]}")
    if b.has_code_signature:
        sig = verify_signature(raw, b)
        if not sig.startswith("ok"):
            problems.append(f"code signature: {sig}")
    else:
        sig = "none"
        if arch == "arm64":
            problems.append("no code signature (macOS refuses an unsigned arm64 binary)")
    line = (f"{path}: Mach-O {kind} {cpu}, macOS >= {minos[0]}.{minos[1] if minos else '?'}"
            if minos else f"{path}: Mach-O {kind} {cpu}")
    line += (f", links {', '.join(libs)}, {len(exported)} exports"
             + (f", install name {ident}" if ident else "") + f", signature {sig}")
    return problems, line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exports")
    ap.add_argument("--install-name")
    ap.add_argument("arch", choices=sorted(MIN_OS))
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    failed = 0
    for f in a.files:
        problems, line = inspect(f, a.arch, a.exports, a.install_name)
        if problems:
            failed += 1
            print(f"FAIL {line or f}\n     " + "\n     ".join(problems))
        else:
            print(f"ok   {line}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
