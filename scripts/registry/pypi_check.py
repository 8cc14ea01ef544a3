#!/usr/bin/env python3
"""The metadata checks PyPI makes at upload (and twine check does not), on
the sdist and wheels scripts/registry/pypi.sh check is given; run with the
tools venv's Python (packaging, trove-classifiers).

    pypi_check.py ROOT VERSION ARTIFACT...

For each artifact (sdist: PKG-INFO; wheel: .dist-info/METADATA and WHEEL):
name and version those of the file name and VERSION; metadata 2.4 with a
summary, Requires-Python, an SPDX License-Expression and its License-Files
inside the archive (the license text, not a stale link), Project-URLs, a
Markdown long description; every classifier on PyPI's list and not
deprecated, no license classifier beside License-Expression (PyPI refuses
both); the wheel's tags those of its file name. The long description (the
PyPI page) has no relative link or image (PyPI cannot resolve one), and each
link into this repository (github.com/etcdlock/etcdlock/blob|tree/main/PATH)
names a PATH that exists under ROOT. Every wheel says what the sdist says
(PyPI shows one page per version, from whichever file came first).
Prints one line per artifact; exits 1 on any problem.
"""
from __future__ import annotations

import email.parser
import os
import re
import sys
import tarfile
import zipfile
from typing import Dict, List, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from trove_classifiers import classifiers as TROVE, deprecated_classifiers as DEPRECATED

REPO = "https://github.com/etcdlock/etcdlock/"
LINK = re.compile(r"(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|<a\s[^>]*href=\"([^\"]+)\"|<img\s[^>]*src=\"([^\"]+)\"")


def read(path: str) -> Tuple[email.message.Message, Dict[str, bytes], List[str]]:
    """(metadata, {member path relative to the project root: bytes} for License-Files, wheel tags)."""
    members: Dict[str, bytes] = {}
    tags: List[str] = []
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            di = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(di) != 1:
                raise ValueError(f"{len(di)} .dist-info/METADATA files")
            base = di[0].rsplit("/", 1)[0]
            meta = email.parser.BytesParser().parsebytes(z.read(di[0]))
            for n in names:
                if n.startswith(base + "/licenses/"):
                    members[n[len(base + "/licenses/"):]] = z.read(n)
            wheel = email.parser.BytesParser().parsebytes(z.read(base + "/WHEEL"))
            tags = wheel.get_all("Tag") or []
    else:
        with tarfile.open(path) as t:
            top = os.path.basename(path)[: -len(".tar.gz")]
            meta = email.parser.BytesParser().parsebytes(t.extractfile(f"{top}/PKG-INFO").read())
            wanted = meta.get_all("License-File") or []
            for m in t.getmembers():
                rel = m.name[len(top) + 1:] if m.name.startswith(top + "/") else None
                if m.isfile() and rel in wanted:
                    members[rel] = t.extractfile(m).read()
    return meta, members, tags


def description_problems(body: str, root: str) -> List[str]:
    problems, relative = [], []
    for m in LINK.finditer(body):
        url = m.group(2) or m.group(3) or m.group(4)
        if url.startswith("#") or re.match(r"[a-z][a-z0-9+.-]*:", url):
            if url.startswith(REPO):
                rest = url[len(REPO):].split("#", 1)[0]
                parts = rest.split("/", 2)
                if len(parts) == 3 and parts[0] in ("blob", "tree") and parts[1] == "main":
                    if not os.path.exists(os.path.join(root, parts[2])):
                        problems.append(f"the long description links to {url}, but {parts[2]} is not in the repository")
            continue
        relative.append(url)
    if relative:
        problems.append(f"the long description has {len(relative)} relative links or images, which PyPI cannot "
                        f"resolve: {', '.join(relative[:3])}{', ...' if len(relative) > 3 else ''}")
    return problems


def canonical_reqs(meta: email.message.Message) -> set:
    out = set()
    for r in meta.get_all("Requires-Dist") or []:
        q = Requirement(r)
        out.add((canonicalize_name(q.name), tuple(sorted(q.extras)), str(q.specifier), str(q.marker or "")))
    return out


def summary(meta: email.message.Message) -> dict:
    return {
        "Name": canonicalize_name(meta.get("Name", "")),
        "Version": meta.get("Version"),
        "Summary": meta.get("Summary"),
        "Requires-Python": meta.get("Requires-Python"),
        "License-Expression": meta.get("License-Expression"),
        "License-File": sorted(meta.get_all("License-File") or []),
        "Classifier": sorted(meta.get_all("Classifier") or []),
        "Project-URL": sorted(meta.get_all("Project-URL") or []),
        "Provides-Extra": sorted(canonicalize_name(e) for e in meta.get_all("Provides-Extra") or []),
        "Requires-Dist": sorted(canonical_reqs(meta)),
        "Keywords": meta.get("Keywords"),
        "Author": meta.get("Author"),
        "Description-Content-Type": meta.get("Description-Content-Type"),
        "Description": meta.get_payload().strip(),
    }


def main() -> int:
    root, version, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    sdists = [p for p in paths if p.endswith(".tar.gz")]
    failed = 0
    reference = None
    if len(sdists) == 1:
        reference = summary(read(sdists[0])[0])
    else:
        print(f"  FAIL {len(sdists)} sdists given, want 1")
        failed += 1
    for path in paths:
        name = os.path.basename(path)
        problems: List[str] = []
        try:
            meta, members, tags = read(path)
        except Exception as e:  # a broken archive is a failed check, with its reason
            print(f"  FAIL {name}: unreadable ({e})")
            failed += 1
            continue
        if meta.get("Metadata-Version") != "2.4":
            problems.append(f"Metadata-Version {meta.get('Metadata-Version')}, want 2.4")
        if canonicalize_name(meta.get("Name", "")) != "etcdlock" or not name.startswith(f"etcdlock-{version}"):
            problems.append(f"Name {meta.get('Name')!r} / file name do not say etcdlock {version}")
        if meta.get("Version") != version:
            problems.append(f"Version {meta.get('Version')!r}, want {version}")
        for field in ("Summary", "Requires-Python", "License-Expression", "Description-Content-Type"):
            if not meta.get(field):
                problems.append(f"no {field}")
        if not (meta.get("Description-Content-Type") or "").startswith("text/markdown"):
            problems.append(f"Description-Content-Type {meta.get('Description-Content-Type')!r}, the README is Markdown")
        if not meta.get_all("Project-URL"):
            problems.append("no Project-URL")
        for f in meta.get_all("License-File") or []:
            text = members.get(f, b"")
            if len(text) < 200 or b"License" not in text:
                problems.append(f"License-File {f} is {'missing' if f not in members else f'{len(text)} bytes, not a license text'} in the archive")
        if meta.get("License-Expression") and not meta.get_all("License-File"):
            problems.append("no License-File")
        for c in meta.get_all("Classifier") or []:
            if c in DEPRECATED:
                problems.append(f"deprecated classifier {c!r}")
            elif c not in TROVE:
                problems.append(f"classifier {c!r} is not on PyPI's list")
            elif c.startswith("License ::") and meta.get("License-Expression"):
                problems.append(f"license classifier {c!r} beside License-Expression")
        problems += description_problems(meta.get_payload(), root)
        if path.endswith(".whl"):
            want = name[: -len(".whl")].split("-", 2)[2]  # cp39-abi3-PLATFORM[.PLATFORM]
            py, abi, plats = want.split("-")
            expect = sorted(f"{py}-{abi}-{p}" for p in plats.split("."))
            if sorted(tags) != expect:
                problems.append(f"WHEEL tags {tags}, the file name says {expect}")
            if reference is not None:
                mine = summary(meta)
                for k, v in reference.items():
                    if mine[k] == v:
                        continue
                    if isinstance(v, list):
                        extra = [x for x in mine[k] if x not in v]
                        lack = [x for x in v if x not in mine[k]]
                        shown = "; ".join(p for p in (f"not in the sdist: {extra}" if extra else "",
                                                      f"missing: {lack}" if lack else "") if p)
                    elif k == "Description":
                        problems.append("the long description is not the sdist's")
                        continue
                    else:
                        shown = f"{mine[k]!r}, the sdist {v!r}"
                    problems.append(f"{k} differs from the sdist's: {shown}")
        if problems:
            failed += 1
            print(f"  FAIL {name}:")
            for p in problems:
                print(f"         {p}")
        else:
            print(f"  ok   {name}: metadata {meta.get('Metadata-Version')}, {meta.get('License-Expression')}, "
                  f"{len(meta.get_all('Classifier') or [])} classifiers, {len(meta.get_all('Project-URL') or [])} URLs"
                  + ("" if path.endswith(".tar.gz") else ", same as the sdist"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
