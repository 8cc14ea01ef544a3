#!/usr/bin/env python3
"""Maven Central's rules, checked on a release's Maven repository tree (what
scripts/dist.sh deploys to dist/maven), before anything is published.

    scripts/registry/maven_rules.py REPO [--key PUBKEY.asc] [--expect a,b,c]

REPO is the repository root (the directory holding io/etcdlock/...). For every
artifact version under it (the --expect artifacts must all be there), the
rules Central's validation applies to a deployment
(https://central.sonatype.org/publish/requirements/), each printed as an
"  ok   ..." or "  FAIL ..." line; exit status 1 on any FAIL:

- the POM's coordinates match its path; a release version (no -SNAPSHOT, no
  unresolved ${...});
- name (never inherited), description, url, licenses (each with a name and a
  url), developers (each with an id, name or organization), scm with url,
  connection and developerConnection: in the POM or inherited from a parent
  that is itself in REPO (the parent is published too). An inherited url or
  scm entry to which Maven appends the child's artifactId (no
  child.*.inherit.append.path="false" on the parent) is a FAIL: it names a
  page or repository that does not exist;
- no <repositories> or <pluginRepositories> (in the POM or its parents);
- no SNAPSHOT version among the dependencies, managed dependencies, plugins
  and their dependencies (profiles included), after ${...} resolution with
  the properties of the POM and its parents (an unresolved one is a FAIL too);
- a jar artifact has -sources.jar (with .java or .kt sources) and -javadoc.jar
  (with index.html; a Kotlin-only module's may carry a pointer file instead,
  which Central accepts);
- every file has .md5 and .sha1 (and .sha256/.sha512 when present) that match
  it, and a .asc signature; with --key, each signature verifies (gpgv) against
  that public key and no other.
"""
import argparse
import atexit
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile

NS = "{http://maven.apache.org/POM/4.0.0}"
SUMS = (".md5", ".sha1", ".sha256", ".sha512")
fails = 0


def ok(msg):
    print(f"  ok   {msg}")


def bad(msg):
    global fails
    fails += 1
    print(f"  FAIL {msg}")


def strip_ns(root):
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith(NS):
            el.tag = el.tag[len(NS):]
    return root


def text(el, path):
    if el is None:
        return None
    x = el.find(path)
    return x.text.strip() if x is not None and x.text and x.text.strip() else None


class Pom:
    def __init__(self, path):
        self.path = path
        self.root = strip_ns(ET.parse(path).getroot())
        r = self.root
        self.parent_coords = None
        if r.find("parent") is not None:
            p = r.find("parent")
            self.parent_coords = (text(p, "groupId"), text(p, "artifactId"), text(p, "version"))
        self.group = text(r, "groupId") or (self.parent_coords[0] if self.parent_coords else None)
        self.artifact = text(r, "artifactId")
        self.version = text(r, "version") or (self.parent_coords[2] if self.parent_coords else None)
        self.packaging = text(r, "packaging") or "jar"
        self.parent = None  # a Pom, when resolved

    def chain(self):
        p = self
        while p is not None:
            yield p
            p = p.parent

    def properties(self):
        props = {}
        for p in reversed(list(self.chain())):
            el = p.root.find("properties")
            if el is not None:
                for c in el:
                    if isinstance(c.tag, str):
                        props[c.tag] = (c.text or "").strip()
        props.update({"project.version": self.version, "project.groupId": self.group,
                      "project.artifactId": self.artifact, "pom.version": self.version})
        if self.parent:
            props["project.parent.version"] = self.parent.version
        return props

    def resolve(self, value, props):
        for _ in range(10):
            new = re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), value)
            if new == value:
                break
            value = new
        return value

    def inherited(self, field, attr_holder, attr):
        """url or scm/<x> as Maven inherits it: the nearest POM that sets it;
        each inheritance step appends /artifactId unless the parent's
        attribute says false. Returns (value, appended path or None)."""
        appended = []
        child = None
        for p in self.chain():
            v = text(p.root, field)
            if v:
                if appended:
                    return v.rstrip("/") + "/" + "/".join(reversed(appended)), "/".join(reversed(appended))
                return v, None
            child = p
            if p.parent is not None:
                holder = p.parent.root if attr_holder == "." else p.parent.root.find(attr_holder)
                if holder is None or holder.get(attr, "true") != "false":
                    appended.append(child.artifact)
        return None, None


def sum_of(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--key", help="the public key the .asc signatures must verify against")
    ap.add_argument("--expect", default="", help="comma-separated artifactIds that must be in REPO")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)

    poms = {}
    for d, _, files in os.walk(repo):
        for f in files:
            if f.endswith(".pom"):
                pom = Pom(os.path.join(d, f))
                poms[(pom.group, pom.artifact, pom.version)] = pom
    if not poms:
        bad(f"no POM under {repo}")
        return 1
    for pom in poms.values():
        if pom.parent_coords:
            pom.parent = poms.get(pom.parent_coords)

    artifacts = {p.artifact for p in poms.values()}
    for e in filter(None, a.expect.split(",")):
        if e not in artifacts:
            bad(f"{e}: not in {repo}")

    gpg_home = None
    if a.key:
        gpg_home = tempfile.mkdtemp(prefix="maven-rules-gpg-")
        atexit.register(shutil.rmtree, gpg_home, True)
        keyring = os.path.join(gpg_home, "key.gpg")
        with open(a.key, "rb") as k:
            data = subprocess.run(["gpg", "--batch", "--homedir", gpg_home, "--dearmor"], input=k.read(),
                                  capture_output=True, check=True).stdout
        with open(keyring, "wb") as k:
            k.write(data)

    for key in sorted(poms, key=lambda k: k[1]):
        pom = poms[key]
        g, art, ver = key
        name = f"{art}-{ver}"
        rel = os.path.relpath(pom.path, repo)
        problems = []
        want = os.path.join(*(g or "?").split("."), art or "?", ver or "?", f"{art}-{ver}.pom")
        if rel != want:
            problems.append(f"at {rel}, its coordinates say {want}")
        if not ver or "SNAPSHOT" in ver or "${" in ver:
            problems.append(f"version {ver!r} is not a release version")
        if pom.parent_coords and pom.parent is None:
            problems.append("parent {}:{}:{} is not published in this repository".format(*pom.parent_coords))
        if not text(pom.root, "name"):
            problems.append("no <name> (Maven does not inherit it)")
        desc = next((text(p.root, "description") for p in pom.chain() if text(p.root, "description")), None)
        if not desc:
            problems.append("no <description>")
        url, app = pom.inherited("url", ".", "child.project.url.inherit.append.path")
        if not url:
            problems.append("no <url>")
        elif app:
            problems.append(f"<url> inherited as {url} (the parent's with /{app} appended: "
                            "child.project.url.inherit.append.path=\"false\" on the parent)")
        lic = next((p.root.find("licenses") for p in pom.chain() if p.root.find("licenses") is not None), None)
        lics = [] if lic is None else lic.findall("license")
        if not lics:
            problems.append("no <licenses>")
        for i, l in enumerate(lics):
            if not (text(l, "name") and text(l, "url")):
                problems.append(f"license {i} lacks a <name> or <url>")
        dev = next((p.root.find("developers") for p in pom.chain() if p.root.find("developers") is not None), None)
        devs = [] if dev is None else dev.findall("developer")
        if not devs:
            problems.append("no <developers>")
        for i, dv in enumerate(devs):
            if not any(text(dv, t) for t in ("id", "name", "organization", "organizationUrl")):
                problems.append(f"developer {i} has no id, name or organization")
        scm_vals = {}
        for f in ("url", "connection", "developerConnection"):
            v, app = pom.inherited(f"scm/{f}", "scm", f"child.scm.{f}.inherit.append.path")
            scm_vals[f] = v
            if not v:
                problems.append(f"no <scm><{f}>")
            elif app:
                problems.append(f"<scm><{f}> inherited as {v} (the parent's with /{app} appended: "
                                f"child.scm.{f}.inherit.append.path=\"false\" on the parent's <scm>)")
        for p in pom.chain():
            for tag in ("repositories", "pluginRepositories"):
                if any(el.tag == tag for el in p.root.iter()):
                    problems.append(f"<{tag}> in {p.artifact}'s POM")
        props = pom.properties()
        snaps = set()
        for p in pom.chain():
            for el in p.root.iter():
                if el.tag in ("dependency", "plugin", "extension"):
                    v = text(el, "version")
                    if v and ("SNAPSHOT" in pom.resolve(v, props) or "${" in pom.resolve(v, props)):
                        snaps.add(f"{text(el, 'groupId')}:{text(el, 'artifactId')}:{pom.resolve(v, props)}")
        if snaps:
            problems.append("SNAPSHOT or unresolved versions: " + ", ".join(sorted(snaps)))
        if problems:
            bad(f"{name}.pom: " + "; ".join(problems))
        else:
            ok(f"{name}.pom: name, description, url {url}, license {text(lics[0], 'name')}, "
               f"{len(devs)} developer(s), scm {scm_vals['connection']}; no repositories, no SNAPSHOT"
               + (f"; parent {pom.parent.artifact} published" if pom.parent else ""))

        # The files: sources and javadoc beside a jar; sums and signatures on each.
        d = os.path.dirname(pom.path)
        if pom.packaging in ("jar", "bundle", "maven-plugin"):
            jar, src, doc = (os.path.join(d, f"{name}{s}.jar") for s in ("", "-sources", "-javadoc"))
            jproblems = []
            entries = {}
            for f in (jar, src, doc):
                if not os.path.isfile(f):
                    jproblems.append(f"{os.path.basename(f)} missing")
                    continue
                try:
                    with zipfile.ZipFile(f) as z:
                        if z.testzip() is not None:
                            raise zipfile.BadZipFile("corrupt entry")
                        entries[f] = z.namelist()
                except zipfile.BadZipFile as e:
                    jproblems.append(f"{os.path.basename(f)} is not a valid jar ({e})")
            if src in entries:
                n_src = sum(1 for e in entries[src] if e.endswith((".java", ".kt")))
                if n_src == 0:
                    jproblems.append(f"{os.path.basename(src)} has no .java or .kt source")
                java_src = any(e.endswith(".java") for e in entries[src])
            else:
                n_src, java_src = 0, True
            if doc in entries:
                content = [e for e in entries[doc] if not e.startswith("META-INF/") and not e.endswith("/")]
                if java_src and "index.html" not in entries[doc]:
                    jproblems.append(f"{os.path.basename(doc)} has no index.html")
                elif not content:
                    jproblems.append(f"{os.path.basename(doc)} is empty")
            if jproblems:
                bad(f"{name}: " + "; ".join(jproblems))
            else:
                kind = "Javadoc" if java_src else "a pointer to the KDoc (Kotlin, no Javadoc)"
                ok(f"{name}: jar, -sources.jar ({n_src} sources), -javadoc.jar ({kind})")
        files = sorted(f for f in os.listdir(d) if not f.endswith(SUMS) and not f.endswith(".asc")
                       and not f.startswith("maven-metadata"))
        sproblems = []
        verified = 0
        for f in files:
            path = os.path.join(d, f)
            for signed in ([path] + ([path + ".asc"] if os.path.isfile(path + ".asc") else [])):
                for ext, algo in ((".md5", "md5"), (".sha1", "sha1"), (".sha256", "sha256"), (".sha512", "sha512")):
                    s = signed + ext
                    if not os.path.isfile(s):
                        if ext in (".md5", ".sha1"):
                            sproblems.append(f"{os.path.basename(s)} missing")
                        continue
                    with open(s) as fh:
                        got = (fh.read().split() or [""])[0].lower()
                    if got != sum_of(signed, algo):
                        sproblems.append(f"{os.path.basename(s)} does not match")
            if not os.path.isfile(path + ".asc"):
                sproblems.append(f"{f}.asc missing")
            elif gpg_home:
                r = subprocess.run(["gpgv", "--homedir", gpg_home, "--keyring", os.path.join(gpg_home, "key.gpg"),
                                    path + ".asc", path], capture_output=True, text=True)
                if r.returncode != 0:
                    sproblems.append(f"{f}.asc does not verify: {r.stderr.strip().splitlines()[-1:]}")
                else:
                    verified += 1
        if sproblems:
            bad(f"{name}: " + "; ".join(sproblems))
        else:
            ok(f"{name}: {len(files)} files, each with matching .md5 and .sha1 and a .asc"
               + (f" ({verified} signatures verified against {os.path.basename(a.key)})" if gpg_home else ""))

    print(f"maven rules: {len(poms)} artifacts, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
