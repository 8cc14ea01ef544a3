#!/usr/bin/env bash
# The checks of the code's form that no compiler makes (test.sh runs them):
#   1. cargo fmt --all --check: the workspace is formatted by rustfmt's
#      defaults (the generated proto code is not a workspace crate's source);
#   2. core's comments state what holds and name the test or benchmark that
#      shows it: no measured figure (microseconds, kilobytes, a ratio like
#      "1.5x", "took 11 s", "~80 handoffs/s") outside the benchmark code.
#      Figures live in docs/operations/benchmarks.md's current table; history in commits;
#   3. scripts/shape_check.py: no source file over 600 lines before its in-file
#      tests (outside generated, vendored and test files), no function over
#      120 lines in core/src, no circle of imports among core/src's files
#      (the script's doc comment says how each is counted and what it skips;
#      `python3 scripts/shape_check.py --only files|functions|cycles` runs one).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo fmt --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null; then
    rustup component add rustfmt >/dev/null
  elif command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    # Debian's cargo (setup.sh accepts it) ships rustfmt apart.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q rustfmt >/dev/null
  else
    echo "lint.sh: rustfmt is missing (rustup component add rustfmt, or apt-get install rustfmt)" >&2
    exit 1
  fi
fi
bad=0
if cargo fmt --all --check >/dev/null; then
  echo "lint: cargo fmt --all --check: formatted"
else
  echo "lint: cargo fmt --all --check found unformatted code (run cargo fmt --all):" >&2
  cargo fmt --all --check 2>&1 | grep '^Diff in' | head -20 >&2
  bad=1
fi
figures='\b[0-9][0-9,.]* ?(us|µs|KB|kB|MB|GB)\b|\b[0-9]+\.[0-9]+ ?x\b|~[0-9]+ ?(ms|us|KB|x)\b|took [0-9]|handoffs/s|\bas before\b|A/B'
hits=$(grep -rnE "^\s*//[/!]?.*($figures)" core/src --include='*.rs' | grep -v '^core/src/bench' || true)
if [ -n "$hits" ]; then
  echo "lint: comments in core/src carry measured figures or history (state the invariant and name its test or benchmark):" >&2
  echo "$hits" >&2
  bad=1
else
  echo "lint: core/src comments: no measured figures outside the benchmark code"
fi
python3 scripts/shape_check.py || bad=1
exit $bad
