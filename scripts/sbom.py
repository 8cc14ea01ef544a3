#!/usr/bin/env python3
"""One CycloneDX 1.5 SBOM (JSON) per release artifact: what is compiled into it.

  python3 scripts/sbom.py --out DIR [--list FILE] [--no-validate] DIST [ARTIFACT ...]

Each artifact (a file of DIST, or the ones FILE lists, relative to DIST) gets
DIR/<artifact name>.cdx.json: the artifact itself as the BOM's subject (its
SHA-256), and as components the Rust crates built into its native part, as
`cargo metadata --locked --offline --filter-platform <its target>` resolves
them (normal dependencies, not dev or build-only ones), each with its purl
(pkg:cargo/NAME@VERSION), its license expression and, for crates.io crates,
the SHA-256 Cargo.lock records; the dependency graph between them; for a
Maven jar also the Maven dependencies its POM declares (compile and runtime
scopes), for the npm main package the platform packages it names. What
produced it: the crate per artifact name (etcdlock-c-* -> etcdlock-ffi,
etcdlock-cli-* -> etcdlock-cli, wheels and the sdist -> etcdlock-python, npm
platform packages -> etcdlock-node, the etcdlock jar -> etcdlock-jni, a
.crate -> that crate). Sources, Javadoc and tests jars and POMs get none (no code
runs from them). Deterministic: the timestamp is SOURCE_DATE_EPOCH or the
last commit's, the serial number derived from the artifact's hash.

Each written SBOM is validated against the CycloneDX 1.5 JSON schema with
cyclonedx-python-lib (installed in a venv under $CARGO_TARGET_DIR/tools on
first use, from PyPI, pinned); one line per artifact; exit 1 on any failure.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "tools")
VALIDATOR = "cyclonedx-python-lib[json-validation]==11.12.0"

# A file name's platform part -> the Rust target its native code was built for.
TARGETS = [
    (r"x86_64-linux-gnu|manylinux_2_17_x86_64|linux-x64-gnu", "x86_64-unknown-linux-gnu"),
    (r"aarch64-linux-gnu|manylinux_2_17_aarch64|linux-arm64-gnu", "aarch64-unknown-linux-gnu"),
    (r"x86_64-linux-musl|musllinux_1_2_x86_64|linux-x64-musl", "x86_64-unknown-linux-musl"),
    (r"aarch64-linux-musl|musllinux_1_2_aarch64|linux-arm64-musl", "aarch64-unknown-linux-musl"),
    (r"x86_64-macos|macosx_10_12_x86_64|darwin-x64", "x86_64-apple-darwin"),
    (r"aarch64-macos|macosx_11_0_arm64|darwin-arm64", "aarch64-apple-darwin"),
    (r"x86_64-windows|win_amd64|win32-x64", "x86_64-pc-windows-gnu"),
]


def target_of(name):
    for pat, t in TARGETS:
        if re.search(pat, name):
            return t
    return None  # every platform: the sdist, the jar (all seven), a .crate


def crate_of(name):
    """The workspace crate whose build is in the artifact, or None, and the BOM subject's type."""
    if name.startswith("etcdlock-c-"):
        return "etcdlock-ffi", "library"
    if name.startswith("etcdlock-cli-"):
        return "etcdlock-cli", "application"
    if name.endswith(".whl") or re.fullmatch(r"etcdlock-[0-9][^-]*\.tar\.gz", name):
        return "etcdlock-python", "library"
    if name.endswith(".crate"):
        return re.sub(r"-[0-9][^-]*\.crate$", "", name), "library"
    if name.endswith(".tgz"):
        # etcdlock-V.tgz is the JavaScript main package; etcdlock-KEY-V.tgz a platform package.
        return (None if re.fullmatch(r"etcdlock-[0-9][^-]*\.tgz", name) else "etcdlock-node"), "library"
    if re.fullmatch(r"etcdlock-[0-9][^-]*\.jar", name):
        return "etcdlock-jni", "library"
    return None, "library"


_metadata = {}


def metadata(target):
    if target not in _metadata:
        cmd = ["cargo", "metadata", "--format-version", "1", "--locked", "--offline"]
        if target:
            cmd += ["--filter-platform", target]
        _metadata[target] = json.loads(subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    return _metadata[target]


def lock_checksums():
    sums, name, ver = {}, None, None
    with open(os.path.join(ROOT, "Cargo.lock")) as f:
        for line in f:
            m = re.match(r'(name|version|checksum) = "(.*)"', line)
            if not m:
                continue
            if m[1] == "name":
                name = m[2]
            elif m[1] == "version":
                ver = m[2]
            else:
                sums[(name, ver)] = m[2]
    return sums


def purl(p):
    return f"pkg:cargo/{p['name']}@{p['version']}"


def rust_components(crate, target):
    """(components, dependencies) of `crate` and what it depends on (normal deps), for `target`."""
    md = metadata(target)
    pkgs = {p["id"]: p for p in md["packages"]}
    nodes = {n["id"]: n for n in md["resolve"]["nodes"]}
    root = next((p["id"] for p in md["packages"] if p["name"] == crate and p["source"] is None), None)
    if root is None:
        raise SystemExit(f"sbom.py: no workspace crate {crate}")
    sums = lock_checksums()
    seen, order, deps = set(), [], {}
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        order.append(pid)
        kids = []
        for d in nodes[pid]["deps"]:
            if any(k["kind"] is None for k in d["dep_kinds"]):
                kids.append(d["pkg"])
        deps[pid] = sorted(set(kids))
        stack.extend(kids)
    comps = []
    for pid in sorted(order, key=lambda i: (pkgs[i]["name"], pkgs[i]["version"])):
        p = pkgs[pid]
        c = {"type": "library", "bom-ref": purl(p), "name": p["name"], "version": p["version"], "purl": purl(p)}
        if p.get("license"):
            c["licenses"] = [{"expression": p["license"]}]
        s = sums.get((p["name"], p["version"]))
        if s:
            c["hashes"] = [{"alg": "SHA-256", "content": s}]
        if p["source"] is None:
            c["description"] = "built from this repository"
        comps.append(c)
    dependencies = [{"ref": purl(pkgs[i]), "dependsOn": [purl(pkgs[k]) for k in deps[i]]} for i in sorted(order, key=lambda i: purl(pkgs[i]))]
    return comps, dependencies, purl(pkgs[root])


def maven_components(path):
    """The dependencies a jar's POM (beside it) declares with compile or runtime scope,
    their versions from it or its parent's dependencyManagement and properties."""
    pom = path[:-4] + ".pom"
    if not os.path.exists(pom):
        return []
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    r = ET.parse(pom).getroot()
    poms = [r]
    par = r.find("m:parent", ns)
    if par is not None:
        # The file repository's layout: .../<groupId path>/<artifactId>/<version>/ -> its parent's folder.
        a, v = par.findtext("m:artifactId", "", ns), par.findtext("m:version", "", ns)
        pp = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(pom))), a, v, f"{a}-{v}.pom")
        if os.path.exists(pp):
            poms.append(ET.parse(pp).getroot())
    props = {"project.version": r.findtext("m:version", "", ns) or (par.findtext("m:version", "", ns) if par is not None else "")}
    for p in reversed(poms):
        for e in p.findall("m:properties/*", ns):
            props[e.tag.split("}")[1]] = (e.text or "").strip()
    managed = {}
    for p in reversed(poms):
        for d in p.findall("m:dependencyManagement/m:dependencies/m:dependency", ns):
            managed[(d.findtext("m:groupId", "", ns), d.findtext("m:artifactId", "", ns))] = d.findtext("m:version", "", ns)
    expand = lambda v: re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m[1], m[0]), v or "")
    out = []
    for d in r.findall("m:dependencies/m:dependency", ns):
        g, a = d.findtext("m:groupId", "", ns), d.findtext("m:artifactId", "", ns)
        if d.findtext("m:scope", "compile", ns) not in ("compile", "runtime") or d.findtext("m:optional", "false", ns) == "true":
            continue
        g = expand(g)
        v = expand(d.findtext("m:version", "", ns) or managed.get((g, a), ""))
        if "${" in v:
            v = ""
        p = f"pkg:maven/{g}/{a}" + (f"@{v}" if v else "")
        out.append({"type": "library", "bom-ref": p, "group": g, "name": a, **({"version": v} if v else {}), "purl": p})
    return out


def npm_components(path):
    """The platform packages the npm main package names (optionalDependencies)."""
    with zipfile.ZipFile(path) if path.endswith(".zip") else __import__("tarfile").open(path) as t:
        pj = json.load(t.extractfile("package/package.json"))
    out = []
    for n, v in sorted((pj.get("optionalDependencies") or {}).items()):
        p = f"pkg:npm/{n}@{v}"
        out.append({"type": "library", "bom-ref": p, "name": n, "version": v, "purl": p})
    return out


def subject(name, kind, sha, version):
    if name.endswith(".whl") or name.endswith(".tar.gz") and crate_of(name)[0] == "etcdlock-python":
        p = f"pkg:pypi/etcdlock@{version}"
    elif name.endswith(".tgz"):
        pkg = re.sub(r"-[0-9][^-]*\.tgz$", "", name)
        p = f"pkg:npm/{pkg}@{version}"
    elif name.endswith(".jar"):
        p = f"pkg:maven/io.etcdlock/{re.sub(r'-[0-9][^-]*[.]jar$', '', name)}@{version}"
    elif name.endswith(".crate"):
        p = f"pkg:cargo/{crate_of(name)[0]}@{version}"
    else:
        p = f"pkg:generic/{name}@{version}"
    return {"type": kind, "bom-ref": "artifact:" + name, "name": name, "version": version, "purl": p,
            "hashes": [{"alg": "SHA-256", "content": sha}]}


def when():
    e = os.environ.get("SOURCE_DATE_EPOCH")
    if not e:
        e = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True).stdout.strip() or "0"
    return datetime.datetime.fromtimestamp(int(e), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sbom(path, version):
    name = os.path.basename(path)
    crate, kind = crate_of(name)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    subj = subject(name, kind, sha, version)
    comps, deps = [], []
    if crate:
        comps, deps, root = rust_components(crate, target_of(name))
        deps.insert(0, {"ref": subj["bom-ref"], "dependsOn": [root]})
    extra = maven_components(path) if name.endswith(".jar") else npm_components(path) if name.endswith(".tgz") and not crate else []
    if extra:
        comps += extra
        if deps:
            deps[0]["dependsOn"] += [c["bom-ref"] for c in extra]
        else:
            deps.insert(0, {"ref": subj["bom-ref"], "dependsOn": [c["bom-ref"] for c in extra]})
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.5.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "etcdlock-sbom:" + sha)),
        "version": 1,
        "metadata": {
            "timestamp": when(),
            "tools": {"components": [{"type": "application", "name": "etcdlock scripts/sbom.py", "version": version}]},
            "component": subj,
        },
        "components": comps,
        "dependencies": deps,
    }, len(comps)


def validator():
    """A function path -> list of schema errors (CycloneDX 1.5, strict)."""
    venv = os.path.join(TOOLS, "sbom-venv")
    py = os.path.join(venv, "bin", "python")
    probe = "import cyclonedx.validation.json"
    if not os.path.exists(py) or subprocess.run([py, "-c", probe], capture_output=True).returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", VALIDATOR], check=True)
    code = (
        "import sys\n"
        "from cyclonedx.schema import SchemaVersion\n"
        "from cyclonedx.validation.json import JsonStrictValidator\n"
        "v = JsonStrictValidator(SchemaVersion.V1_5)\n"
        "bad = 0\n"
        "for p in sys.argv[1:]:\n"
        "    e = v.validate_str(open(p).read())\n"
        "    if e: print(p + ': ' + str(e)[:300]); bad = 1\n"
        "sys.exit(bad)\n"
    )
    return lambda paths: subprocess.run([py, "-c", code, *paths], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--list")
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("dist")
    ap.add_argument("artifacts", nargs="*")
    a = ap.parse_args()
    names = list(a.artifacts)
    if a.list:
        names += [l.strip() for l in open(a.list) if l.strip()]
    if not names:
        names = sorted(f for f in os.listdir(a.dist) if os.path.isfile(os.path.join(a.dist, f)))
    version = subprocess.run(["sed", "-n", r'/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p', "Cargo.toml"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    os.makedirs(a.out, exist_ok=True)
    written = []
    for n in names:
        base = os.path.basename(n)
        if base.endswith((".pom", "-sources.jar", "-javadoc.jar", "-tests.jar", ".asc", ".md5", ".sha1")) or base in ("SHA256SUMS",):
            continue
        if not base.endswith((".tar.gz", ".zip", ".whl", ".tgz", ".jar", ".crate")):
            continue
        doc, n_comps = sbom(os.path.join(a.dist, n), version)
        out = os.path.join(a.out, base + ".cdx.json")
        with open(out, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        written.append((out, base, n_comps))
    if not written:
        print("sbom.py: no artifacts")
        return 1
    rc = 0
    if not a.no_validate:
        r = validator()([w[0] for w in written])
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            rc = 1
    for out, base, n_comps in written:
        print(f"{'FAIL' if rc else 'ok  '} {os.path.relpath(out, a.dist) if out.startswith(os.path.abspath(a.dist)) else out}: "
              f"{n_comps} components{'' if a.no_validate else ', CycloneDX 1.5 schema' + (' (see above)' if rc else ' valid')}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
