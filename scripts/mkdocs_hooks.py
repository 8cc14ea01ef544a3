"""MkDocs hooks for the site (mkdocs.yml `hooks:`).

Rust blocks: lines rustdoc hides (`# ` at the start: setup the doctest needs,
not the reader) are dropped from the site's copy, as rustdoc drops them.

A page may link to a file of the repository outside docs/ (a README, a script,
a test): on GitHub such a link works, on the built site there is no such file.
The site shows the link's text with the file's path in the repository
instead, so a reader knows where to look and the link check has nothing false
to follow. Links inside docs/ and to other sites are left as they are.

A line `--8<-- "PATH"` includes the repository's file PATH (relative to the
repository root) in its place, as pymdownx.snippets would, but before the
links are rewritten: the included file's links are read from where that file
is (docs/changelog.md includes CHANGELOG.md, whose `api/README.md` is the
repository's and whose `docs/install.md` is the site's install page). A
missing file fails the build.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
HIDDEN = re.compile(r"^\s*#(\s|$)")  # rustdoc's hidden line (not #[attr] or #!)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$')


def _replace(m: "re.Match[str]", page_src: Path, base: Path) -> str:
    """One link of the page page_src, written in a file of the folder base
    (the page's own, or an included file's)."""
    text, url = m.group(1), m.group(2)
    if "://" in url or url.startswith(("#", "mailto:")):
        return m.group(0)
    path, _, anchor = url.partition("#")
    if not path:
        return m.group(0)
    target = (base / path).resolve()
    if ROOT not in target.parents:
        return m.group(0)
    if target == DOCS or DOCS in target.parents:
        if base == page_src.parent:
            return m.group(0)
        rel = os.path.relpath(target, page_src.parent).replace(os.sep, "/")
        return f"[{text}]({rel}{'#' + anchor if anchor else ''})"
    rel = target.relative_to(ROOT).as_posix()
    if rel in text.strip("`"):
        return f"`{rel}` (in the repository)"
    return f"{text} (`{rel}` in the repository)"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' signature)
    src = DOCS / page.file.src_uri
    lines = []  # (line, the folder its links are relative to)
    for line in markdown.split("\n"):
        inc = INCLUDE.match(line)
        if inc:
            f = ROOT / inc.group(1)
            if not f.is_file():
                raise FileNotFoundError(f"{page.file.src_uri}: includes {inc.group(1)}, which is not in the repository")
            lines += [(l, f.parent) for l in f.read_text(encoding="utf-8").split("\n")]
        else:
            lines.append((line, src.parent))
    out = []
    fence = None  # the open fence's language
    for line, base in lines:
        if line.lstrip().startswith("```"):
            fence = line.strip()[3:].strip() if fence is None else None
            out.append(line)
        elif fence is None:
            out.append(LINK.sub(lambda m: _replace(m, src, base), line))
        elif fence == "rust" and HIDDEN.match(line):
            continue
        else:
            out.append(line)
    return "\n".join(out)
