#!/usr/bin/env bash
# The Python package through a real registry, as a release publishes it and a
# user installs it: pypiserver (from PyPI, in a venv cached under
# $CARGO_TARGET_DIR/tools/pypiserver with twine and trove-classifiers) on
# 127.0.0.1, uploads with credentials, no fallback to pypi.org.
#
#   scripts/registry/pypi.sh start   STATE   start pypiserver on a free port serving
#                  STATE/pypi/packages (upload needs the throwaway user in
#                  STATE/pypi/htpasswd), seeded with the third-party wheels the
#                  extras in bindings-python/pyproject.toml need (downloaded from
#                  PyPI once, cached in tools/pypi-deps: what PyPI would serve a
#                  user); writes STATE/pypi.env (PYPI_UPLOAD_URL, PYPI_INDEX_URL,
#                  PYPI_USERNAME, PYPI_PASSWORD) and STATE/pypi.pid
#   scripts/registry/pypi.sh check   DIST    twine check --strict on DIST's etcdlock wheels
#                  and sdist, then the metadata PyPI checks at upload
#                  (scripts/registry/pypi_check.py)
#   scripts/registry/pypi.sh publish DIST STATE   twine upload of all the wheels and the
#                  sdist (the release's command), then the index must list each
#   scripts/registry/pypi.sh install STATE ENDPOINTS   a fresh venv on the clean PATH
#                  (scripts/cleanpath.sh: no cargo, rustc, protoc, C compiler), a
#                  fresh HOME and environment, the index set in the venv's
#                  pip.conf: `pip install etcdlock` must take this machine's
#                  manylinux wheel from the registry (not the sdist); a lock, a
#                  guarded put and get, an unlock against ENDPOINTS; then
#                  `pip install "etcdlock[EXTRA]"` for every extra the package
#                  declares, each used once
#   scripts/registry/pypi.sh stop    STATE   stop the server; nothing left running
# (env: CARGO_TARGET_DIR, default target/)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TOOLS=$CARGO_TARGET_DIR/tools/pypiserver
DEPS=$CARGO_TARGET_DIR/tools/pypi-deps
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
die() { echo "pypi.sh: $*" >&2; exit 1; }
usage() { die "usage: pypi.sh start STATE | check DIST | publish DIST STATE | install STATE ENDPOINTS | stop STATE"; }

# The tools venv: pypiserver (+ passlib for htpasswd), twine, trove-classifiers
# (PyPI's list of classifiers). Reinstalled when the pins change.
TOOL_PINS="pypiserver[passlib]>=2.4,<3 twine>=6.1,<8 trove-classifiers"
tools() {
  if [ "$(cat "$TOOLS/.pins" 2>/dev/null)" != "$TOOL_PINS" ] || ! "$TOOLS/bin/python" -c 'import pypiserver, passlib, twine, trove_classifiers' 2>/dev/null; then
    rm -rf "$TOOLS"
    python3 -m venv "$TOOLS"
    # shellcheck disable=SC2086 # the pins are words
    "$TOOLS/bin/python" -m pip install -q $TOOL_PINS || die "pip install $TOOL_PINS failed"
    echo "$TOOL_PINS" >"$TOOLS/.pins"
  fi
}

# The extras' requirements, as pyproject.toml declares them (one per line).
extra_reqs() {
  python3 -c 'import tomllib, sys
p = tomllib.load(open("bindings-python/pyproject.toml", "rb"))["project"]
print("\n".join(r for reqs in p.get("optional-dependencies", {}).values() for r in reqs))'
}

# Artifacts of this version in DIST: the wheels and the sdist (not the C and
# CLI tarballs, which are etcdlock-c-* / etcdlock-cli-*).
artifacts() {
  local dist=$1
  shopt -s nullglob
  files=("$dist/etcdlock-$version-"*.whl "$dist/etcdlock-$version.tar.gz")
  shopt -u nullglob
  [ -f "$dist/etcdlock-$version.tar.gz" ] || die "$dist/etcdlock-$version.tar.gz (the sdist) missing"
  [ "${#files[@]}" -ge 2 ] || die "no etcdlock-$version-*.whl in $dist"
}

load_env() {
  [ -s "$1/pypi.env" ] || die "$1/pypi.env missing (run: pypi.sh start $1)"
  # shellcheck disable=SC1091
  source "$1/pypi.env"
}

cmd=${1:-}; shift || true
case "$cmd" in
start)
  [ $# -eq 1 ] || usage
  state=$(realpath -m "$1"); dir=$state/pypi
  if [ -s "$state/pypi.pid" ] && kill -0 "$(cat "$state/pypi.pid")" 2>/dev/null; then
    die "a pypiserver already runs for $state (pid $(cat "$state/pypi.pid"))"
  fi
  # A fresh registry each start (a version once uploaded cannot be uploaded again).
  rm -rf "$dir/packages"; mkdir -p "$dir/packages"
  tools
  # What PyPI already serves a user: the extras' third-party wheels for this
  # interpreter, fetched once (re-fetched when the requirements change).
  reqs=$(extra_reqs)
  if [ -n "$reqs" ] && [ "$(cat "$DEPS/.reqs" 2>/dev/null)" != "$reqs" ]; then
    rm -rf "$DEPS"; mkdir -p "$DEPS"
    mapfile -t req_list <<<"$reqs"
    PIP_FIND_LINKS='' python3 -m pip download -q --only-binary :all: -d "$DEPS" "${req_list[@]}" ||
      die "pip download of the extras' dependencies failed"
    echo "$reqs" >"$DEPS/.reqs"
  fi
  if [ -n "$reqs" ]; then
    cp -l "$DEPS"/*.whl "$dir/packages/" 2>/dev/null || cp "$DEPS"/*.whl "$dir/packages/"
  fi
  # A throwaway uploader, as a release's API token would be.
  user=release
  pass=$("$TOOLS/bin/python" -c 'import secrets; print(secrets.token_urlsafe(18))')
  "$TOOLS/bin/python" - "$dir/htpasswd" "$user" "$pass" <<'PY'
import sys
from passlib.apache import HtpasswdFile
h = HtpasswdFile(sys.argv[1], new=True)
h.set_password(sys.argv[2], sys.argv[3])
h.save()
PY
  # A free port (asked of the kernel, then bound by the server: if another
  # process takes it in between, the server exits and the next try has another).
  url=""
  for _ in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # Every fd away from the caller's, so `$(pypi.sh start ...)` returns.
    "$TOOLS/bin/pypi-server" run -i 127.0.0.1 -p "$port" -P "$dir/htpasswd" -a update \
      --disable-fallback "$dir/packages" </dev/null >"$dir/server.log" 2>&1 &
    pid=$!
    echo "$pid" >"$state/pypi.pid"
    for _ in $(seq 150); do
      if curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$port/simple/"; then url=http://127.0.0.1:$port; break 2; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$state/pypi.pid"
  done
  [ -n "$url" ] || { cat "$dir/server.log" >&2; die "pypiserver did not start (three tries)"; }
  cat >"$state/pypi.env" <<ENV
export PYPI_UPLOAD_URL=$url/
export PYPI_INDEX_URL=$url/simple/
export PYPI_USERNAME=$user
export PYPI_PASSWORD=$pass
ENV
  echo "pypi: pypiserver $("$TOOLS/bin/python" -c 'import pypiserver; print(pypiserver.__version__)') at $url (pid $pid), $(find "$dir/packages" -name '*.whl' | wc -l) dependency wheels seeded"
  ;;

check)
  [ $# -eq 1 ] || usage
  dist=$(realpath "$1")
  tools
  artifacts "$dist"
  # --strict: a warning (no long description, no content type) fails too.
  if ! out=$(COLUMNS=200 "$TOOLS/bin/twine" --no-color check --strict "${files[@]}" 2>&1); then
    echo "$out" | sed 's/ *$//; s/^/  /'
    die "twine check --strict failed"
  fi
  echo "  ok   twine check --strict: ${#files[@]} files PASSED ($(cd "$dist" && ls etcdlock-"$version"-*.whl | sed 's/^etcdlock-[^-]*-cp39-abi3-//; s/\.whl$//' | tr '\n' ' ')+ sdist)"
  "$TOOLS/bin/python" scripts/registry/pypi_check.py "$ROOT" "$version" "${files[@]}" || die "metadata check failed"
  ;;

publish)
  [ $# -eq 2 ] || usage
  dist=$(realpath "$1"); state=$(realpath "$2")
  load_env "$state"
  tools
  artifacts "$dist"
  # The release's upload (PyPI: the same command with the token, or trusted publishing).
  TWINE_USERNAME=$PYPI_USERNAME TWINE_PASSWORD=$PYPI_PASSWORD COLUMNS=200 "$TOOLS/bin/twine" --no-color upload --non-interactive \
    --disable-progress-bar --repository-url "$PYPI_UPLOAD_URL" "${files[@]}" 2>&1 | sed 's/ *$//; s/^/  /' ||
    die "twine upload failed"
  index=$(curl -sf --max-time 30 "${PYPI_INDEX_URL}etcdlock/") || die "the index has no page for etcdlock"
  for f in "${files[@]}"; do
    grep -qF ">$(basename "$f")<" <<<"$index" || die "the index does not list $(basename "$f")"
  done
  echo "pypi: published ${#files[@]} files of etcdlock $version; ${PYPI_INDEX_URL}etcdlock/ lists each"
  ;;

install)
  [ $# -eq 2 ] || usage
  state=$(realpath "$1"); EP=$2
  load_env "$state"
  work=$state/pypi/cleanroom
  rm -rf "$work"; mkdir -p "$work/home"
  # shellcheck source=scripts/cleanpath.sh
  source scripts/cleanpath.sh
  cleanpath "$work"
  fail=0
  ok() { echo "  ok   $*"; }
  bad() { echo "  FAIL $*"; fail=$((fail + 1)); }
  # A fresh environment: no PIP_* of this machine, a new HOME (no user pip.conf,
  # no pip cache), the venv first on PATH as `activate` puts it.
  cr() { env -i HOME="$work/home" LANG=C.UTF-8 PATH="$work/venv/bin:$NOCC" VIRTUAL_ENV="$work/venv" "$@"; }
  PATH=$NOCC python3 -m venv "$work/venv"
  # The index set the ordinary way: the venv's pip.conf.
  # (No self-update check: it would ask the index for pip, which it has not.)
  printf '[global]\nindex-url = %s\ndisable-pip-version-check = true\n' "$PYPI_INDEX_URL" >"$work/venv/pip.conf"
  m=$(uname -m)
  want=etcdlock-$version-cp39-abi3-manylinux_2_17_$m.manylinux2014_$m.whl
  echo "== Python: pip install etcdlock from the registry (fresh venv; no cargo, rustc, protoc, cc)"
  took=""
  if cr pip install -q --report "$work/report.json" etcdlock >"$work/pip.log" 2>&1 &&
    took=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(" ".join(i["download_info"]["url"] for i in r["install"] if i["metadata"]["name"] == "etcdlock"))' "$work/report.json") &&
    [[ "$took" == "$PYPI_UPLOAD_URL"*"/$want" || "$took" == "$PYPI_UPLOAD_URL"*"/$want#"* ]]; then
    ok "pip install etcdlock: took ${took%%#*} (this machine's wheel, not the sdist)"
  else
    bad "pip install etcdlock: took '${took:-nothing}', want $want from $PYPI_UPLOAD_URL"
    grep -E 'ERROR|error' "$work/pip.log" | tail -n 4 | sed 's/^/       /' || true
    exit 1
  fi
  if out=$(cr python "$ROOT/scripts/cleanroom_smoke.py" "$EP" registry-python 2>&1) && [ "${out%% *}" = ok ] &&
    { ! command -v etcdctl >/dev/null || [ "$(etcdctl --endpoints="$EP" get cleanroom/registry-python --print-value-only)" = "${out#ok }" ]; }; then
    ok "python: lock, guarded put/get, unlock, lock free again: $out (etcd holds the token)"
  else
    bad "python: $(tail -n 1 <<<"${out:-no output}")"
  fi
  # Each extra the installed package declares, and a use of it.
  extras=$(cr python -c 'import importlib.metadata as m; print(" ".join(m.metadata("etcdlock").get_all("Provides-Extra") or []))' 2>/dev/null || true)
  [ -n "$extras" ] || bad "the installed etcdlock declares no extras"
  host=${EP%%,*}; host=${host#*//}
  for extra in $extras; do
    case "$extra" in
      prometheus) use='import etcdlock, etcdlock.prometheus, prometheus_client as p
reg = p.CollectorRegistry()
with etcdlock.Client(endpoints=sys.argv[1].split(","), ttl=10) as c:
    reg.register(etcdlock.prometheus.Collector(c))
    assert b"etcdlock" in p.generate_latest(reg)' ;;
      otel) use='import opentelemetry.trace, etcdlock
with etcdlock.Client(endpoints=sys.argv[1].split(","), ttl=10) as c, c.lock("registry-otel", timeout=10):
    pass' ;;
      postgres) use='import psycopg, etcdlock.fencing
assert psycopg.pq.version() > 0' ;;
      tooz) use='import tooz.coordination
co = tooz.coordination.get_coordinator(f"etcdlock://{sys.argv[2]}?ttl=10", b"registry")
co.start()
with co.get_lock(b"registry-tooz"):
    pass
co.stop()' ;;
      *) bad "etcdlock[$extra]: pypi.sh has no use of this extra (add one to its install step)"; continue ;;
    esac
    out=""
    if cr pip install -q --report "$work/report-$extra.json" "etcdlock[$extra]" >"$work/pip-$extra.log" 2>&1 &&
      out=$(cr python -c "import sys
$use" "$EP" "$host" 2>&1); then
      pulled=$(python3 -c 'import json, sys
print(" ".join(sorted(i["metadata"]["name"] for i in json.load(open(sys.argv[1]))["install"])))' "$work/report-$extra.json")
      ok "pip install \"etcdlock[$extra]\": pulled ${pulled:-nothing new} from the registry; used once"
    else
      bad "etcdlock[$extra]: $(tail -n 1 <<<"${out:-$(cat "$work/pip-$extra.log")}")"
    fi
  done
  [ "$fail" -eq 0 ] || exit 1
  ;;

stop)
  [ $# -eq 1 ] || usage
  state=$(realpath -m "$1")
  [ -s "$state/pypi.pid" ] || { echo "pypi: nothing to stop"; exit 0; }
  pid=$(cat "$state/pypi.pid")
  # Only the server this STATE started (a stale pid may be someone else's now).
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "pypi-server run" &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$state/pypi/packages"; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
  fi
  rm -f "$state/pypi.pid"
  if [ -s "$state/pypi.env" ]; then
    url=$(sed -n 's/^export PYPI_INDEX_URL=//p' "$state/pypi.env")
    ! curl -s -o /dev/null --max-time 5 "$url" || die "$url still answers after stopping pid $pid"
  fi
  echo "pypi: pypiserver (pid $pid) stopped"
  ;;
*) usage ;;
esac
