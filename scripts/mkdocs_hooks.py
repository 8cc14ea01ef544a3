"""MkDocs hooks for the site (mkdocs.yml `hooks:`).

Rust blocks: lines rustdoc hides (`# ` at the start: setup the doctest needs,
not the reader) are dropped from the site's copy, as rustdoc drops them.

A page may link to a file of the repository outside docs/ (a README, a script,
a test): on GitHub such a link works, on the built site there is no such file.
The site shows the link's text with the file's path in the repository
instead, so a reader knows where to look and the link check has nothing false
to follow. Links inside docs/ and to other sites are left as they are.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
HIDDEN = re.compile(r"^\s*#(\s|$)")  # rustdoc's hidden line (not #[attr] or #!)


def _replace(m: "re.Match[str]", page_src: Path) -> str:
    text, url = m.group(1), m.group(2)
    if "://" in url or url.startswith(("#", "mailto:")):
        return m.group(0)
    path = url.split("#", 1)[0]
    if not path:
        return m.group(0)
    target = (page_src.parent / path).resolve()
    if target == DOCS or DOCS in target.parents or ROOT not in target.parents:
        return m.group(0)
    rel = target.relative_to(ROOT).as_posix()
    if rel in text.strip("`"):
        return f"`{rel}` (in the repository)"
    return f"{text} (`{rel}` in the repository)"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' signature)
    src = DOCS / page.file.src_uri
    out = []
    fence = None  # the open fence's language
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fence = line.strip()[3:].strip() if fence is None else None
            out.append(line)
        elif fence is None:
            out.append(LINK.sub(lambda m: _replace(m, src), line))
        elif fence == "rust" and HIDDEN.match(line):
            continue
        else:
            out.append(line)
    return "\n".join(out)
