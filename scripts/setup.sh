#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test etcdlock.
# Idempotent; quiet when all is there.
#
#   scripts/setup.sh                     everything (.ci/run and ./test.sh): the
#                                        demo's tools below, and protoc with the
#                                        well-known protos (only for
#                                        scripts/protos.sh --check: the build
#                                        itself needs no protoc), pkg-config and
#                                        valgrind for the C layer, openssl,
#                                        libfaketime and nginx for the fault
#                                        suite, chromium (headless, with its
#                                        driver), doxygen, mandoc and curl for
#                                        the documentation site, unzip for the
#                                        dist suite, abigail-tools for the C ABI
#                                        record (scripts/api_check.sh)
#   scripts/setup.sh --demo              only what ./demo.sh uses: etcd (server
#                                        + etcdctl), a C compiler (the C
#                                        worker), python3-venv (the Python
#                                        worker's venv)
#   scripts/setup.sh --demo --postgres   and PostgreSQL (server, psql, libpq's
#                                        headers), for ./demo.sh --store postgres
#
# Without --demo PostgreSQL is installed too: the database fencing examples and
# the flash sale on PostgreSQL (scripts/pg_harness.py starts a private one).
set -euo pipefail

demo=0
postgres=1
case "$*" in
  "") ;;
  --demo) demo=1; postgres=0 ;;
  "--demo --postgres") demo=1 ;;
  *) echo "usage: scripts/setup.sh [--demo [--postgres]]" >&2; exit 2 ;;
esac

need=()
# The demo's tools (and everyone's).
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if [ "$postgres" = 1 ]; then
  # PostgreSQL: scripts/pg_harness.py runs initdb and postgres from /usr/lib/postgresql/*/bin.
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
  command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
  [ -f /usr/include/postgresql/libpq-fe.h ] || need+=(libpq-dev)   # the C example (-lpq)
fi
if [ "$demo" = 0 ]; then
  command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
  [ -f /usr/include/google/protobuf/timestamp.proto ] || need+=(libprotobuf-dev)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)   # TLS tests make their own CA
  ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need+=(faketime)  # clock-jump scenario
  [ -x /usr/sbin/nginx ] || need+=(nginx-light)   # the gRPC load balancer scenarios (GOAWAY)
  # The documentation site (scripts/docs.sh): the browser check, the C and CLI references.
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
  command -v doxygen >/dev/null 2>&1 || need+=(doxygen)
  command -v mandoc >/dev/null 2>&1 || need+=(mandoc)
  command -v curl >/dev/null 2>&1 || need+=(curl)     # PlantUML's jar from Maven Central (docs.sh)
  command -v unzip >/dev/null 2>&1 || need+=(unzip)   # the dist suite's jar/wheel checks, dist's Javadoc for the site
  command -v abidw >/dev/null 2>&1 || need+=(abigail-tools)   # the C ABI record (scripts/api_check.sh)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  $SUDO apt-get clean   # the .deb cache is dead weight on a small CI disk
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: Rust (cargo) is required: install it with rustup or 'apt-get install cargo'" >&2
    exit 1
  fi
fi
