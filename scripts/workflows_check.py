#!/usr/bin/env python3
"""Every repository script a GitHub workflow runs exists and can run.

For each .github/workflows/*.yml (or the files given): every `run:` block
(with its step's or job's `working-directory`) is read for paths into the
repository, the `scripts/...`, `./test.sh`, `.ci/run`, `ffi-c/test.sh` kind:
a word that names a file under a top-level folder of the repository or
ends in .sh/.py. Each must exist in the repository (git's index: what a
fresh clone has) and be either executable there (mode 100755) or run
through an interpreter (`bash X`, `sh X`, `python3 X`, `source X`, `. X`).
Each shell script found is also parsed with `bash -n`. A `cd DIR` in a
block moves where its later relative paths resolve from. A local action
(`uses: ./path`) must have an action.yml. One line per workflow; exit 1
on any problem, each printed as FILE: job JOB, step N: what.

  python3 scripts/workflows_check.py [WORKFLOW.yml ...]   (PyYAML)
"""
import glob
import os
import re
import shlex
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERPRETERS = {"bash", "sh", "python", "python3", "source", ".", "node", "pwsh"}


def tracked():
    """path -> git mode of every file in the index (a fresh clone's files)."""
    out = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    modes = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]
    return modes


def top_dirs(modes):
    return {p.split("/", 1)[0] for p in modes if "/" in p}


def words(script):
    """(previous word, word) pairs of a shell script, roughly: each line split
    like a shell would, `${{ ... }}` expressions and comments dropped; a word
    after ; && || | ( or a newline has no previous word (it is a command)."""
    script = re.sub(r"\$\{\{.*?\}\}", "EXPR", script)
    for raw in script.replace("\\\n", " ").splitlines():
        try:
            lex = shlex.shlex(raw, posix=True, punctuation_chars=";&|()")
            lex.whitespace_split = True
            lex.commenters = "#"
            toks = list(lex)
        except ValueError:
            toks = raw.split()
        prev = None
        for t in toks:
            if set(t) <= set(";&|()"):
                prev = None
                continue
            yield prev, t
            # `env A=1 cmd`, `time cmd`, `nice -n 10 cmd`, `sudo -E cmd`: the next word is still a command.
            if prev is None and (t in {"env", "time", "exec", "sudo", "nice", "timeout"} or re.match(r"^\w+=", t)):
                continue
            prev = t


def candidates(script, cwd, tops):
    """(path relative to the root, as written, run through an interpreter?)"""
    for prev, w in words(script):
        w = w.strip("'\"")
        if prev == "cd":
            # `cd DIR && ./x.sh`: later words resolve from DIR (a `cd` inside
            # a subshell is taken for the rest of the block too: a rough cut).
            if w and not w.startswith(("$", "/", "-")) and "EXPR" not in w:
                cwd = os.path.normpath(os.path.join(cwd, w))
            continue
        if not w or w.startswith(("-", "$", "http:", "https:", "/")) or "*" in w or "EXPR" in w:
            continue
        rel = os.path.normpath(os.path.join(cwd, w[2:] if w.startswith("./") else w))
        first = rel.split(os.sep, 1)[0]
        looks = w.endswith((".sh", ".py")) or w.startswith("./") or ("/" in w and first in tops)
        # Only a word that names a file: a folder (cd scripts) or a word that is
        # data rather than a path (dist/, target/...) is not checked.
        if not looks or rel.startswith("..") or first in {"dist", "target", "state", "out"}:
            continue
        if "/" not in rel and not w.startswith("./") and not w.endswith((".sh", ".py")):
            continue
        if os.path.isdir(os.path.join(ROOT, rel)):
            continue
        via = prev is not None and os.path.basename(prev) in INTERPRETERS
        if prev is not None and not via and not w.endswith((".sh", ".py")):
            continue  # an argument (a file a command reads), not a program it runs
        yield rel, w, via


def check(path, modes, tops):
    problems, seen = [], 0
    with open(path) as f:
        wf = yaml.safe_load(f)
    if not isinstance(wf, dict) or not isinstance(wf.get("jobs"), dict):
        return [f"{path}: no jobs"], 0
    for jname, job in wf["jobs"].items():
        jdir = (((job or {}).get("defaults") or {}).get("run") or {}).get("working-directory", ".")
        for n, st in enumerate((job or {}).get("steps") or [], 1):
            where = f"{path}: job {jname}, step {n} ({st.get('name') or st.get('uses') or 'run'})"
            uses = st.get("uses", "")
            if isinstance(uses, str) and uses.startswith("./"):
                d = os.path.normpath(uses[2:])
                if not any(os.path.join(d, a) in modes for a in ("action.yml", "action.yaml")):
                    problems.append(f"{where}: local action {uses} has no action.yml in the repository")
            script = st.get("run")
            if not isinstance(script, str):
                continue
            cwd = st.get("working-directory", jdir)
            if "${{" in str(cwd):
                cwd = "."
            for rel, w, via in candidates(script, cwd, tops):
                seen += 1
                mode = modes.get(rel)
                if mode is None:
                    exists = os.path.exists(os.path.join(ROOT, rel))
                    problems.append(f"{where}: runs {w}, {'not in git (untracked)' if exists else 'which does not exist'} ({rel})")
                    continue
                if not via and mode != "100755":
                    problems.append(f"{where}: runs {w} directly, but it is not executable in git (mode {mode}): chmod +x, or run it through bash")
                if rel.endswith(".sh"):
                    r = subprocess.run(["bash", "-n", os.path.join(ROOT, rel)], capture_output=True, text=True)
                    if r.returncode != 0:
                        problems.append(f"{where}: {rel} does not parse (bash -n): {r.stderr.strip()}")
    return problems, seen


def main():
    files = sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, ".github/workflows/*.yml")))
    if not files:
        print("workflows_check: no workflow files")
        return 1
    modes = tracked()
    tops = top_dirs(modes)
    bad = 0
    for p in files:
        problems, seen = check(p, modes, tops)
        rel = os.path.relpath(p, ROOT)
        for pr in problems:
            print("FAIL " + pr.replace(p, rel))
        if not problems:
            print(f"ok   {rel}: {seen} repository paths its run: steps call, each present and runnable")
        bad += len(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
