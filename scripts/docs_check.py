#!/usr/bin/env python3
"""The built site (target/site), checked as a reader's browser sees it.

1. Links: every <a href>, <img src>, <link href> and <script src> of every
   page (the API reference's own pages excepted: they come from rustdoc,
   Javadoc, TypeDoc and Doxygen, which check their own) points to a file of
   the site, and every #anchor to an element with that id. Links leaving the
   site are listed, not fetched (this machine has no route to them).
2. Headless Chromium (Debian's chromium and chromedriver, through Selenium),
   the site served on 127.0.0.1 as mike publishes a version (/dev/, with
   versions.json beside it): every page loads with no console error and
   every image on it renders (a diagram or chart with no size fails); the
   version selector shows the version; the search box finds "lock-delay".
3. Screenshots of the home page, a guide, a diagram page and the search
   results, kept in target/site-check/ (CI artifacts).

Usage: scripts/docs_check.py [SITE_DIR]    exit 1 on any failure
"""

from __future__ import annotations

import functools
import http.server
import os
import socketserver
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Set, Tuple
from urllib.parse import unquote, urldefrag, urlparse

ROOT = Path(__file__).resolve().parent.parent
SEARCH_TERM = "lock-delay"
VERSION = "dev"  # the folder the site is served from, as `mike deploy dev` would
SHOTS = {
    "home.png": "index.html",
    "guide.png": "guides/scheduled-jobs.html",
    "diagram.png": "concepts/protocol.html",
}


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: Set[str] = set()
        self.refs: List[Tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key] or "")
        url = {"a": a.get("href"), "img": a.get("src"), "script": a.get("src"), "link": a.get("href")}.get(tag)
        if url:
            self.refs.append((tag, url))


@functools.lru_cache(maxsize=None)
def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def site_pages(site: Path) -> List[Path]:
    # 404.html is served for any missing path, so its links are absolute (from the server's root).
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html" and (
                  "reference" not in p.relative_to(site).parts[:1]
                  or p.relative_to(site).parts[:2] == ("reference", "index.html")
                  or p.name == "python.html"))


def check_links(site: Path, pages: List[Path]) -> Tuple[List[str], int, Set[str]]:
    problems: List[str] = []
    external: Set[str] = set()
    checked = 0
    for page in pages:
        for tag, url in parse(page).refs:
            u = urlparse(url)
            if u.scheme in ("http", "https", "mailto", "data", "javascript") or u.netloc:
                if u.scheme in ("http", "https"):
                    external.add(url)
                continue
            path, frag = urldefrag(url)
            target = page if not path else (page.parent / unquote(path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            where = f"{page.relative_to(site)}: <{tag}> {url}"
            if not target.is_file() or site.resolve() not in target.resolve().parents and target.resolve() != site.resolve():
                problems.append(f"{where}: no such file")
                continue
            if frag and target.suffix == ".html" and unquote(frag) not in parse(target).ids:
                problems.append(f"{where}: no element with id {frag!r} in {target.relative_to(site.resolve())}")
    return problems, checked, external


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(site: Path) -> Tuple[socketserver.TCPServer, int]:
    """The site as mike publishes a version: under /VERSION/, with versions.json
    at the root (the theme's version selector reads ../versions.json)."""
    import atexit
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="etcdlock-site-"))
    atexit.register(shutil.rmtree, root, True)
    (root / VERSION).symlink_to(site, target_is_directory=True)
    (root / "versions.json").write_text(f'[{{"version": "{VERSION}", "title": "{VERSION}", "aliases": ["latest"]}}]\n')
    handler = functools.partial(Quiet, directory=str(root))
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
              "--no-proxy-server", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=opts)


IMAGES_JS = """
return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.naturalHeight]);
"""


def check_in_browser(site: Path, pages: List[Path], shots: Path) -> Tuple[List[str], Dict[str, int], List[str]]:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    problems: List[str] = []
    counts = {"pages": 0, "images": 0, "diagrams": 0, "charts": 0}
    found: List[str] = []
    srv, port = serve(site)
    base = f"http://127.0.0.1:{port}/{VERSION}/"
    driver = browser()
    try:
        for page in pages:
            rel = page.relative_to(site).as_posix()
            driver.get(base + rel)
            WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
            counts["pages"] += 1
            for src, complete, w, h in driver.execute_script(IMAGES_JS):
                counts["images"] += 1
                if "diagrams/" in (src or ""):
                    counts["diagrams"] += 1
                if "charts/" in (src or ""):
                    counts["charts"] += 1
                if not complete or not w or not h:
                    problems.append(f"{rel}: image {src} did not render ({w}x{h})")
            for entry in driver.get_log("browser"):
                if entry.get("level") == "SEVERE":
                    problems.append(f"{rel}: console error: {entry.get('message')}")
        for name, rel in SHOTS.items():
            driver.get(base + rel)
            WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
            if name == "diagram.png":  # the first diagram in view, not the page's top
                driver.execute_script("document.querySelector('img[src*=\"diagrams/\"]').scrollIntoView({block: 'center'})")
            time.sleep(0.3)  # web fonts are off; this lets the theme's last layout pass paint
            driver.save_screenshot(str(shots / name))
        # Versioned docs: the theme's selector, filled from ../versions.json.
        driver.get(base + "index.html")
        try:
            current = WebDriverWait(driver, 10).until(
                lambda d: d.execute_script("const e = document.querySelector('.md-version__current');"
                                           " return e && e.textContent.trim();"))
        except TimeoutException:
            current = None
        if current != VERSION:
            problems.append(f"index.html: no version selector showing {VERSION!r} (found {current!r})")
        counts["version"] = 1 if current == VERSION else 0
        # Search: Material's box, served index (search/search_index.json), results list.
        driver.get(base + "index.html")
        # (At this width the header shows the box itself; narrower, a button opens it.)
        toggles = [t for t in driver.find_elements(By.CSS_SELECTOR, "label.md-header__button[for='__search']")
                   if t.is_displayed()]
        if toggles:
            toggles[0].click()
        box = WebDriverWait(driver, 10).until(EC.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input")))
        box.click()
        box.send_keys(SEARCH_TERM)
        box.send_keys(Keys.SHIFT)  # (the theme searches on input events)
        # The theme renders results as the search worker answers, replacing the
        # list's elements: read them in one script call, and only once two
        # readings 300 ms apart agree.
        last: List[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = driver.execute_script(
                "return Array.from(document.querySelectorAll('.md-search-result__item > a'))"
                ".map(a => a.getAttribute('href'))")
            if now and now == last:
                break
            last = now
            time.sleep(0.3)
        found = [h.replace(base, "").split("?")[0] for h in last]
        driver.save_screenshot(str(shots / "search.png"))
        for entry in driver.get_log("browser"):
            if entry.get("level") == "SEVERE":
                problems.append(f"search: console error: {entry.get('message')}")
    finally:
        driver.quit()
        srv.shutdown()
    if "concepts/protocol.html" not in found:
        problems.append(f"search for {SEARCH_TERM!r} did not find the protocol page (found {found})")
    return problems, counts, found


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target" / "site").resolve()
    shots = Path(os.environ.get("ETCDLOCK_SITE_CHECK", site.parent / "site-check"))
    shots.mkdir(parents=True, exist_ok=True)
    pages = site_pages(site)
    problems, checked, external = check_links(site, pages)
    print(f"docs_check: links: {checked} internal links and anchors on {len(pages)} pages, "
          f"{len(problems)} broken; {len(external)} external links listed, not fetched")
    from selenium.common.exceptions import WebDriverException

    try:
        b_problems, counts, found = check_in_browser(site, pages, shots)
    except WebDriverException as e:
        # The driver itself (not a page) failing, e.g. Chromium slow to start on a
        # loaded machine: one more try, said out loud; a broken page fails both.
        print(f"docs_check: the browser session failed ({type(e).__name__}: {e.msg}); trying once more")
        b_problems, counts, found = check_in_browser(site, pages, shots)
    print(f"docs_check: browser: {counts['pages']} pages loaded in headless Chromium, {counts['images']} images "
          f"rendered ({counts['diagrams']} diagrams, {counts['charts']} charts), "
          f"{sum('console error' in p for p in b_problems)} console errors, "
          f"version selector {'shown' if counts.get('version') else 'MISSING'}")
    print(f"docs_check: search {SEARCH_TERM!r}: {len(found)} results: {', '.join(found[:5])}")
    print(f"docs_check: screenshots: {', '.join(sorted(str(p) for p in shots.glob('*.png')))}")
    problems += b_problems
    for p in problems:
        print(f"  FAIL {p}")
    print(f"docs_check: {'FAILED' if problems else 'ok'} ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
