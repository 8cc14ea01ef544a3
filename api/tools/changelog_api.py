#!/usr/bin/env python3
"""The `API records:` lines of CHANGELOG.md, for scripts/api_check.sh.

Usage:
  changelog_api.py hash DIR                 the record's hash: sha256 over its files (sorted
                                            paths, each path and its content's sha256), first 16 hex
  changelog_api.py check LANG=HASH...       exit 1 unless [Unreleased]'s line carries HASH for each
                                            LANG, and each LANG whose hash differs from the last
                                            released version's has an entry in [Unreleased]
  changelog_api.py update LANG=HASH...      write each HASH into [Unreleased]'s line, but only for a
                                            LANG whose hash is the last release's or that has an
                                            entry in [Unreleased]; exit 1 naming the others

An entry for a language is a list item of [Unreleased] (outside its
`API records:` line) that starts with the language's name and a colon, or
with a list of names: "- Rust: ...", "- Python, Node: ...", "- Java and C: ...".
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
NAMES = {"rust": "Rust", "java": "Java", "python": "Python", "node": "Node", "c": "C"}
RECORDS = re.compile(r"^API records: (.*)$", re.M)
PAIR = re.compile(r"(\w+) `([0-9a-f]{16})`")


def record_hash(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in d.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(d).as_posix()}\n{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()[:16]


def sections(text: str) -> list[tuple[str, int, int]]:
    """(title, start, end) of each `## [...]` section, in file order."""
    heads = [(m.group(1), m.start()) for m in re.finditer(r"^## \[([^\]]+)\].*$", text, re.M)]
    out = []
    for i, (title, start) in enumerate(heads):
        end = heads[i + 1][1] if i + 1 < len(heads) else len(text)
        # a section ends at the next `## ` heading of any kind (e.g. the policy)
        nxt = re.search(r"^## ", text[start + 3:end], re.M)
        out.append((title, start, start + 3 + nxt.start() if nxt else end))
    return out


def parse_line(body: str) -> tuple[re.Match[str] | None, dict[str, str]]:
    m = RECORDS.search(body)
    return m, (dict(PAIR.findall(m.group(1))) if m else {})


def entries_for(body: str) -> set[str]:
    """The languages [Unreleased]'s entries name."""
    langs: set[str] = set()
    alts = "|".join(NAMES.values())
    for m in re.finditer(rf"^- ((?:{alts})(?:(?:, | and )(?:{alts}))*):", body, re.M):
        for name in re.split(r", | and ", m.group(1)):
            langs.update(k for k, v in NAMES.items() if v == name)
    return langs


def main() -> int:
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "hash":
        print(record_hash(Path(args[0])))
        return 0
    want = dict(a.split("=", 1) for a in args)
    text = CHANGELOG.read_text()
    secs = sections(text)
    if not secs or secs[0][0] != "Unreleased":
        print("CHANGELOG.md: the first version section must be ## [Unreleased]", file=sys.stderr)
        return 1
    _, us, ue = secs[0]
    unreleased = text[us:ue]
    line, current = parse_line(unreleased)
    if line is None:
        print("CHANGELOG.md: [Unreleased] has no `API records:` line", file=sys.stderr)
        return 1
    released: dict[str, str] = {}
    released_title = None
    for title, s, e in secs[1:]:
        _, released = parse_line(text[s:e])
        if released:
            released_title = title
            break
    entries = entries_for(unreleased)
    bad = 0
    if cmd == "check":
        for lang, h in want.items():
            if current.get(lang) != h:
                print(f"api_check: api/{lang}/ hashes to {h}, but CHANGELOG.md's [Unreleased] records "
                      f"{current.get(lang, 'nothing')}: the record changed without its changelog line "
                      f"(scripts/api_check.sh --update writes it once [Unreleased] has a "
                      f"'- {NAMES[lang]}: ...' entry)", file=sys.stderr)
                bad = 1
            elif released.get(lang) not in (None, h) and lang not in entries:
                print(f"api_check: the {NAMES[lang]} API differs from [{released_title}]'s "
                      f"({released[lang]} -> {h}) but [Unreleased] has no '- {NAMES[lang]}: ...' entry",
                      file=sys.stderr)
                bad = 1
        return bad
    if cmd == "update":
        new = dict(current)
        for lang, h in want.items():
            if current.get(lang) == h:
                continue
            if h == released.get(lang) or lang in entries:
                new[lang] = h
                print(f"api_check: CHANGELOG.md [Unreleased]: {lang} {current.get(lang)} -> {h}")
            else:
                print(f"api_check: api/{lang}/ is rewritten, but its hash {h} is not written to "
                      f"CHANGELOG.md: add an entry to [Unreleased] that starts '- {NAMES[lang]}: ' "
                      f"(under Added, Changed, Removed, ...: what changed and, if it breaks, the "
                      f"migration), then run scripts/api_check.sh --update again", file=sys.stderr)
                bad = 1
        order = list(NAMES)
        pairs = ", ".join(f"{k} `{new[k]}`" for k in sorted(new, key=lambda k: order.index(k) if k in order else 99))
        start = us + line.start()
        end = us + line.end()
        CHANGELOG.write_text(text[:start] + f"API records: {pairs}" + text[end:])
        return bad
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
