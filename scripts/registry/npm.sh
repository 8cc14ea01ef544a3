#!/usr/bin/env bash
# The npm registry for a release run: a local Verdaccio on 127.0.0.1 that the
# npm packages of dist/ (scripts/dist.sh: the main package etcdlock-V.tgz and
# one etcdlock-KEY-V.tgz per platform) are checked for, published to with the
# release's command and installed from in a clean room.
#
#   scripts/registry/npm.sh start   STATE            Verdaccio 6.8.0 (installed with npm into
#                                                    $CARGO_TARGET_DIR/tools/verdaccio if missing;
#                                                    node-fetch pinned to 2.7.0: 6.10 wants Node 22)
#                                                    on a free port, storage in STATE/npm/, no uplink
#                                                    (the registry serves only what was published to
#                                                    it), one throwaway user whose token the login API
#                                                    returns; writes STATE/npm/.npmrc (registry and
#                                                    token, never ~/.npmrc), STATE/npm.env, STATE/npm.pid
#   scripts/registry/npm.sh check   DIST             npm publish --dry-run of every package tgz in DIST
#                                                    (any npm warning fails it) and the metadata npm does
#                                                    not check itself: name, version, license, repository,
#                                                    engines, main/types/exports files, os/cpu/libc of each
#                                                    platform package (loader.js PLATFORMS), the main
#                                                    package's optionalDependencies naming every platform
#                                                    package at the same version
#   scripts/registry/npm.sh publish DIST STATE       npm publish of the platform packages, then the main
#                                                    one; then the registry's shasum of each is the tgz's
#   scripts/registry/npm.sh install STATE ENDPOINTS  a fresh project (npm init -y, .npmrc naming the
#                                                    registry), `npm install etcdlock` on a PATH with no
#                                                    cargo, rustc, protoc or C compiler; only this
#                                                    platform's package installed; a CommonJS and an ES
#                                                    module script each lock, guarded put, release
#                                                    against etcd at ENDPOINTS (comma-separated)
#   scripts/registry/npm.sh stop    STATE            stop Verdaccio (nothing left running)
#
# check: DIST may lack platform packages that dist.sh --fast leaves out (macOS
# x86_64); each is a "note" line, or a FAIL with NPM_REQUIRE_ALL_PLATFORMS=1
# (a release: every package the main one names must be published).
# publish does what a release does (`npm publish --access public`; the release
# workflow adds --provenance, which needs the CI's OIDC token).
# Lines are "  ok   ..." / "  FAIL ..." / "  note ..."; exit 1 on any FAIL.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR=$ROOT/$CARGO_TARGET_DIR ;; esac
VERDACCIO_VERSION=6.8.0
TOOLS=$CARGO_TARGET_DIR/tools/verdaccio
# This machine's platform package (the clean room installs on it).
HOST_KEY=$(node -p 'require(process.argv[1]).platformKey()' "$ROOT/bindings-node/loader.js")
die() { echo "npm.sh: $*" >&2; exit 1; }
fail=0
ok() { echo "  ok   $*"; }
bad() { echo "  FAIL $*"; fail=1; }
note() { echo "  note $*"; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
shift

# --- start ------------------------------------------------------------------
install_verdaccio() {
  if [ -x "$TOOLS/node_modules/.bin/verdaccio" ] &&
    [ "$(node -p 'require(process.argv[1]).version' "$TOOLS/node_modules/verdaccio/package.json" 2>/dev/null)" = "$VERDACCIO_VERSION" ]; then
    return 0
  fi
  echo "npm.sh: installing Verdaccio $VERDACCIO_VERSION into $TOOLS (npm)" >&2
  mkdir -p "$TOOLS"
  # overrides: Verdaccio 6.8's dependencies would take a node-fetch that wants
  # a newer Node than the Node 20 here; 2.7.0 is the one it was built on.
  cat >"$TOOLS/package.json" <<JSON
{
  "name": "etcdlock-release-tools-verdaccio",
  "private": true,
  "dependencies": { "verdaccio": "$VERDACCIO_VERSION" },
  "overrides": { "node-fetch": "2.7.0" }
}
JSON
  (cd "$TOOLS" && npm install --no-audit --no-fund --omit=dev --loglevel=error >/dev/null) ||
    die "npm install verdaccio@$VERDACCIO_VERSION failed"
}

start() {
  local state=$1 dir port url i token user pass try up
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  dir=$state/npm
  if [ -s "$state/npm.pid" ] && kill -0 "$(cat "$state/npm.pid")" 2>/dev/null; then
    die "Verdaccio already runs for $state (pid $(cat "$state/npm.pid")); stop it first"
  fi
  install_verdaccio
  rm -rf "$dir"
  mkdir -p "$dir/storage"
  # Three tries at a free port: another process may take the one picked
  # before Verdaccio binds it (then Verdaccio exits: EADDRINUSE).
  for try in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    url=http://127.0.0.1:$port/
    # No uplinks: a package the release did not publish here is a 404, never
    # a copy from the public registry. max_users: 1, the throwaway user below;
    # max_body_size: a platform package is ~8 MB, ~11 MB as a publish's base64.
    cat >"$dir/config.yaml" <<YAML
storage: $dir/storage
auth:
  htpasswd:
    file: $dir/htpasswd
    max_users: 1
uplinks: {}
packages:
  '**':
    access: \$all
    publish: \$authenticated
    unpublish: \$authenticated
max_body_size: 100mb
web:
  enable: false
log: { type: file, path: $dir/verdaccio.log, level: warn }
YAML
    # No setsid: a caller that stops its process group stops this server too.
    # ETCDLOCK_NPM_STATE marks the process as this state's (Verdaccio sets its
    # process title, which overwrites the command line stop could read).
    ETCDLOCK_NPM_STATE=$state node "$TOOLS/node_modules/verdaccio/bin/verdaccio" --config "$dir/config.yaml" \
      --listen "127.0.0.1:$port" </dev/null >"$dir/stdout.log" 2>&1 &
    echo $! >"$state/npm.pid"
    up=0
    for i in $(seq 1 300); do # 30 s
      kill -0 "$(cat "$state/npm.pid")" 2>/dev/null || break
      if curl -fsS --max-time 5 -o /dev/null "${url}-/ping" 2>/dev/null; then up=1; break; fi
      sleep 0.1
    done
    # Still alive once it answered: the answer was Verdaccio's, not another
    # server's on that port (Verdaccio exits at once when the port is taken).
    if [ "$up" = 1 ] && sleep 0.2 && kill -0 "$(cat "$state/npm.pid")" 2>/dev/null; then break; fi
    if kill -0 "$(cat "$state/npm.pid")" 2>/dev/null; then stop "$state"; die "Verdaccio did not answer on $url in 30 s"; fi
    rm -f "$state/npm.pid"
    if [ "$try" = 3 ] || ! grep -q EADDRINUSE "$dir/stdout.log" "$dir/verdaccio.log" 2>/dev/null; then
      cat "$dir/stdout.log" "$dir/verdaccio.log" >&2 2>/dev/null
      die "Verdaccio exited"
    fi
  done
  # The throwaway user, as a CI creates it: the login API (what `npm adduser`
  # calls) registers it in the htpasswd file and returns a token.
  user=release-ci
  pass=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  token=$(curl -fsS --max-time 30 -X PUT -H 'content-type: application/json' \
    -d "{\"name\":\"$user\",\"password\":\"$pass\"}" "${url}-/user/org.couchdb.user:$user" |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).token || ""))') || true
  [ -n "$token" ] || { stop "$state"; die "the login API at $url gave no token"; }
  # The per-STATE user config (npm --userconfig / NPM_CONFIG_USERCONFIG).
  printf 'registry=%s\n//127.0.0.1:%s/:_authToken=%s\naudit=false\nfund=false\nupdate-notifier=false\n' \
    "$url" "$port" "$token" >"$dir/.npmrc"
  chmod 600 "$dir/.npmrc"
  # The identity npm sees with that token (a wrong token is a 401 here).
  [ "$(NPM_CONFIG_USERCONFIG=$dir/.npmrc npm whoami 2>/dev/null)" = "$user" ] || { stop "$state"; die "npm whoami against $url is not $user"; }
  cat >"$state/npm.env" <<ENV
export NPM_REGISTRY_URL=$url
export NPM_TOKEN=$token
export NPM_USERCONFIG=$dir/.npmrc
ENV
  echo "npm.sh: Verdaccio $VERDACCIO_VERSION at $url (pid $(cat "$state/npm.pid")), user $user, storage $dir/storage"
}

stop() {
  local state=$1 pid i
  [ -s "$state/npm.pid" ] || return 0
  pid=$(cat "$state/npm.pid")
  rm -f "$state/npm.pid"
  # Only our server: the pid's environment names this state.
  if ! { kill -0 "$pid" 2>/dev/null && tr '\0' '\n' <"/proc/$pid/environ" | grep -qxF "ETCDLOCK_NPM_STATE=$state"; }; then
    echo "npm.sh: Verdaccio (pid $pid) was not running"
    return 0
  fi
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do # 10 s, then SIGKILL
    kill -0 "$pid" 2>/dev/null || { echo "npm.sh: Verdaccio stopped (pid $pid)"; return 0; }
    [ "$i" -lt 100 ] || kill -9 "$pid" 2>/dev/null || true
    sleep 0.1
  done
  sleep 0.5
  ! kill -0 "$pid" 2>/dev/null || die "Verdaccio (pid $pid) still runs"
  echo "npm.sh: Verdaccio killed (pid $pid)"
}

# --- check ------------------------------------------------------------------
# The metadata npm publish --dry-run does not look at (it takes an uppercase
# name, a license that is no SPDX expression, a string repository, no engines).
# Reads every package.json from its tgz; prints ok/FAIL/note lines.
metadata_check() {
  local npmdir
  npmdir=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules
  node - "$npmdir" "${NPM_REQUIRE_ALL_PLATFORMS:-0}" "$@" <<'JS'
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const [npmdir, requireAll, ...tgzs] = process.argv.slice(2);
// npm's own validators (what the registry applies on publish).
const validName = require(path.join(npmdir, 'validate-npm-package-name'));
const semver = require(path.join(npmdir, 'semver'));
const spdx = require(path.join(npmdir, 'spdx-expression-parse'));
const REPO = 'git+https://github.com/etcdlock/etcdlock.git';
let failed = false;
const ok = (m) => console.log(`  ok   ${m}`);
const bad = (m) => { console.log(`  FAIL ${m}`); failed = true; };
const note = (m) => console.log(`  note ${m}`);
const tar = (args) => execFileSync('tar', args, { encoding: 'utf8', maxBuffer: 1 << 26 });

const pkgs = tgzs.map((file) => {
  const files = tar(['-tzf', file]).split('\n').map((f) => f.replace(/^package\//, '')).filter((f) => f && !f.endsWith('/'));
  const json = JSON.parse(tar(['-xzOf', file, 'package/package.json']));
  return { file, base: path.basename(file), files, json };
});
const main = pkgs.find((p) => p.json.name === 'etcdlock');
if (!main) { bad('no main package (name etcdlock) among ' + pkgs.map((p) => p.base).join(' ')); process.exit(1); }
const version = main.json.version;
// The one table of platforms, as the packed loader.js has it.
const loaderSrc = tar(['-xzOf', main.file, 'package/loader.js']);
const mod = { exports: {} };
new Function('module', 'exports', 'require', '__dirname', loaderSrc)(mod, mod.exports, require, '/');
const PLATFORMS = mod.exports.PLATFORMS;

function common(p, errs) {
  const j = p.json;
  const v = validName(j.name || '');
  if (!v.validForNewPackages) errs.push(`name ${JSON.stringify(j.name)}: ${(v.errors || v.warnings || []).join('; ')}`);
  if (!semver.valid(j.version) || semver.clean(j.version) !== j.version) errs.push(`version ${JSON.stringify(j.version)} is not semver`);
  if (j.version !== version) errs.push(`version ${j.version}, the main package ${version}`);
  if (p.base !== `${j.name}-${j.version}.tgz`) errs.push(`file name ${p.base}, not ${j.name}-${j.version}.tgz`);
  try { spdx(j.license || ''); } catch { errs.push(`license ${JSON.stringify(j.license)} is no SPDX expression`); }
  if (!p.files.includes('LICENSE')) errs.push('no LICENSE file');
  if (!p.files.includes('README.md')) errs.push('no README.md');
  const r = j.repository;
  if (!r || typeof r !== 'object' || r.type !== 'git' || r.url !== REPO)
    errs.push(`repository ${JSON.stringify(r)}, want {type: git, url: ${REPO}} (npm --provenance checks it against the source repository)`);
  if (!j.description) errs.push('no description');
  if (!j.engines || !j.engines.node || !semver.validRange(j.engines.node)) errs.push(`engines.node ${JSON.stringify(j.engines && j.engines.node)} is no semver range`);
  if (!j.main || !p.files.includes(path.posix.normalize(j.main))) errs.push(`main ${JSON.stringify(j.main)} is not in the package`);
  for (const s of ['preinstall', 'install', 'postinstall'])
    if (j.scripts && j.scripts[s]) errs.push(`an ${s} script (${j.scripts[s]}): nothing is built or fetched at install`);
}
const report = (p, errs, what) => (errs.length ? bad(`${p.base}: ${errs.join('; ')}`) : ok(`${p.base}: ${what}`));

// The main package.
{
  const j = main.json, errs = [];
  common(main, errs);
  if (main.files.some((f) => f.endsWith('.node'))) errs.push('carries a native module');
  if (!j.types || !main.files.includes(path.posix.normalize(j.types))) errs.push(`types ${JSON.stringify(j.types)} is not in the package`);
  const targets = [];
  const walk = (x, at) => {
    if (typeof x === 'string') targets.push([at, x]);
    else if (x && typeof x === 'object') for (const [k, y] of Object.entries(x)) walk(y, `${at}.${k}`);
  };
  walk(j.exports, 'exports');
  for (const [at, t] of targets) if (!main.files.includes(path.posix.normalize(t))) errs.push(`${at} ${t} is not in the package`);
  const dot = (j.exports || {})['.'] || {};
  for (const c of ['types', 'import', 'default']) if (!dot[c]) errs.push(`exports["."] has no ${c} condition`);
  const want = Object.fromEntries(PLATFORMS.map((p) => [`etcdlock-${p.key}`, version]));
  const got = j.optionalDependencies || {};
  if (JSON.stringify(Object.entries(got).sort()) !== JSON.stringify(Object.entries(want).sort()))
    errs.push(`optionalDependencies ${JSON.stringify(got)}, want ${JSON.stringify(want)} (every loader.js platform, exactly this version)`);
  for (const k of ['dependencies', 'bundleDependencies', 'bundledDependencies'])
    if (j[k] && Object.keys(j[k]).length) errs.push(`${k} ${JSON.stringify(j[k])}: the package needs none`);
  report(main, errs, `${j.name}@${version}, ${j.license}, engines ${j.engines.node}, exports ${Object.keys(j.exports).join(' ')} (types, import, require), ` +
    `optionalDependencies: ${PLATFORMS.length} platform packages at ${version}`);
}
// The platform packages.
for (const p of pkgs) {
  if (p === main) continue;
  const j = p.json, errs = [];
  common(p, errs);
  const plat = PLATFORMS.find((x) => j.name === `etcdlock-${x.key}`);
  if (!plat) { report(p, [`${j.name} is no loader.js platform (${PLATFORMS.map((x) => x.key).join(' ')})`]); continue; }
  const node = `etcdlock.${plat.key}.node`;
  if (j.main !== node) errs.push(`main ${JSON.stringify(j.main)}, want ${node}`);
  const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  if (!eq(j.os, [plat.os])) errs.push(`os ${JSON.stringify(j.os)}, want ["${plat.os}"]`);
  if (!eq(j.cpu, [plat.cpu])) errs.push(`cpu ${JSON.stringify(j.cpu)}, want ["${plat.cpu}"]`);
  if (!eq(j.libc, plat.libc ? [plat.libc] : undefined)) errs.push(`libc ${JSON.stringify(j.libc)}, want ${plat.libc ? `["${plat.libc}"]` : 'none'}`);
  if (j.engines && main.json.engines && j.engines.node !== main.json.engines.node) errs.push(`engines.node ${j.engines.node}, the main package ${main.json.engines.node}`);
  const extra = p.files.filter((f) => !['LICENSE', 'README.md', 'package.json', node].includes(f));
  if (extra.length) errs.push(`unexpected files ${extra.join(' ')}`);
  report(p, errs, `${j.name}@${j.version}: os ${j.os} cpu ${j.cpu}${j.libc ? ` libc ${j.libc}` : ''}, main ${j.main}`);
}
const missing = PLATFORMS.filter((x) => !pkgs.some((p) => p.json.name === `etcdlock-${x.key}`));
for (const x of missing) {
  const m = `etcdlock-${x.key}@${version} (${x.target}) is named by optionalDependencies but not in DIST`;
  if (requireAll === '1') bad(`${m} (NPM_REQUIRE_ALL_PLATFORMS=1)`);
  else note(`${m} (dist.sh --fast leaves it out; a release must publish it)`);
}
process.exit(failed ? 1 : 0);
JS
}

npm_tgzs() { # DIST: the main package, then every platform package (publish order reversed)
  local dist=$1 f
  for f in "$dist"/etcdlock-*.tgz; do
    [ -e "$f" ] || continue
    echo "$f"
  done
}

check() {
  local dist=$1 f out rc tmp
  [ -d "$dist" ] || die "$dist is no directory"
  mapfile -t tgzs < <(npm_tgzs "$dist")
  [ ${#tgzs[@]} -gt 0 ] || die "no etcdlock-*.tgz in $dist"
  echo "== npm: package metadata (${#tgzs[@]} packages in $dist)"
  metadata_check "${tgzs[@]}" || fail=1
  echo "== npm: npm publish --dry-run (any npm warning fails)"
  # A user config of its own: a closed loopback port as the registry (the dry
  # run asks it once whether the version exists: refused, at once with no
  # retries) and a token, so the one warning a good package would get
  # ("requires you to be logged in") is gone.
  tmp=$(mktemp -d)
  printf 'registry=http://127.0.0.1:9/\n//127.0.0.1:9/:_authToken=dry-run\nfetch-retries=0\n' >"$tmp/npmrc"
  for f in "${tgzs[@]}"; do
    rc=0
    out=$(cd "$tmp" && NPM_CONFIG_USERCONFIG=$tmp/npmrc npm publish --dry-run --access public "$f" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q '^npm \(warn\|WARN\|error\|ERR\)' <<<"$out"; then
      ok "$(basename "$f"): $(grep -o 'package size: .*' <<<"$out"), $(grep -o 'total files: .*' <<<"$out")"
    else
      bad "$(basename "$f") (exit $rc): $(grep '^npm \(warn\|WARN\|error\|ERR\)' <<<"$out" | grep -v 'complete log' | tr '\n' ' ')"
    fi
  done
  rm -rf "$tmp"
}

# --- publish ----------------------------------------------------------------
publish() {
  local dist=$1 state=$2 f main="" name ver sha want out
  [ -s "$state/npm.env" ] || die "$state/npm.env missing: run start first"
  # shellcheck disable=SC1091
  source "$state/npm.env"
  export NPM_CONFIG_USERCONFIG=$NPM_USERCONFIG
  mapfile -t tgzs < <(npm_tgzs "$dist")
  [ ${#tgzs[@]} -gt 0 ] || die "no etcdlock-*.tgz in $dist"
  echo "== npm: npm publish to $NPM_REGISTRY_URL (platform packages first, then etcdlock)"
  # Platform packages first: once etcdlock is visible, every package its
  # optionalDependencies name that this release has is there too.
  order=()
  for f in "${tgzs[@]}"; do
    name=$(tar -xzOf "$f" package/package.json | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).name')
    if [ "$name" = etcdlock ]; then main=$f; else order+=("$f"); fi
  done
  [ -n "$main" ] || die "no main package (name etcdlock) in $dist"
  order+=("$main")
  for f in "${order[@]}"; do
    if [ "$f" = "$main" ] && [ "$fail" = 1 ]; then
      bad "etcdlock not published: a platform package it names failed above"
      break
    fi
    if out=$(cd "$state/npm" && npm publish --access public "$f" 2>&1); then
      name=$(tar -xzOf "$f" package/package.json | node -p 'const j = JSON.parse(require("fs").readFileSync(0, "utf8")); j.name + "@" + j.version')
      # What the registry serves is this file: its dist.shasum is the tgz's SHA-1.
      sha=$(npm view "$name" dist.shasum 2>/dev/null || true)
      want=$(sha1sum "$f" | cut -d' ' -f1)
      if [ "$sha" = "$want" ]; then ok "published $name (shasum $sha)"; else bad "published $name but the registry has shasum '$sha', the tgz $want"; fi
    else
      bad "npm publish $(basename "$f"): $(grep '^npm error' <<<"$out" | grep -v 'complete log' | tr '\n' ' ')"
    fi
  done
}

# --- install ----------------------------------------------------------------
install() {
  local state=$1 ep=$2 dir app tmp out lock expect got other version
  [ -s "$state/npm.env" ] || die "$state/npm.env missing: run start first"
  state=$(cd "$state" && pwd)
  # shellcheck disable=SC1091
  source "$state/npm.env"
  dir=$state/npm
  # The clean PATH: no cargo, rustc, protoc or C compiler.
  # shellcheck source=scripts/cleanpath.sh
  source "$ROOT/scripts/cleanpath.sh"
  rm -rf "$dir/clean" "$dir/app" "$dir/home"
  cleanpath "$dir/clean" || die "no clean PATH"
  app=$dir/app
  mkdir -p "$app" "$dir/home"
  echo "== npm: fresh project, npm install etcdlock from $NPM_REGISTRY_URL (no cargo, rustc, protoc, cc)"
  # A user with no npm config and an empty cache (HOME of its own): the
  # registry comes from the project's .npmrc only, the ordinary way.
  run() { (cd "$app" && env -i PATH="$NOCC" HOME="$dir/home" "$@"); }
  if ! out=$(run npm init -y 2>&1); then bad "npm init -y: $out"; return; fi
  printf 'registry=%s\n' "$NPM_REGISTRY_URL" >"$app/.npmrc"
  if out=$(run npm install --no-audit --no-fund etcdlock 2>&1); then
    ok "npm install etcdlock: $(grep -o 'added [0-9]* packages\?' <<<"$out" || echo "$out" | tail -n 1)"
  else
    bad "npm install etcdlock: $(tr '\n' ' ' <<<"$out")"
    return
  fi
  # What npm chose: etcdlock and this platform's package, from the local
  # registry, and no other platform's package on disk.
  lock=$app/package-lock.json
  version=$(node -p 'require(process.argv[1]).version' "$app/node_modules/etcdlock/package.json")
  expect=etcdlock-$HOST_KEY
  got=$(cd "$app/node_modules" && ls -d etcdlock* | tr '\n' ' ')
  other=$(node -e '
    const lock = require(process.argv[1]), url = process.argv[2];
    const pk = Object.entries(lock.packages).filter(([k]) => k.startsWith("node_modules/etcdlock"));
    const away = pk.filter(([, v]) => !String(v.resolved).startsWith(url));
    if (away.length) console.log("resolved elsewhere: " + away.map(([k, v]) => `${k} ${v.resolved}`).join(", "));
    const opt = pk.filter(([k, v]) => v.optional).length;
    console.log(`${pk.length} etcdlock packages in package-lock.json (${opt} optional), all from ${url}`);' "$lock" "$NPM_REGISTRY_URL")
  if [ "$got" = "etcdlock $expect " ] && [ "$(node -p 'require(process.argv[1]).version' "$app/node_modules/$expect/package.json")" = "$version" ] &&
    ! grep -q '^resolved elsewhere' <<<"$other"; then
    ok "installed: etcdlock@$version, $expect@$version and no other platform package; $other"
  else
    bad "installed: node_modules has $got(want etcdlock $expect); $other"
  fi
  # No uplink: a package this release did not publish is not there (npm
  # would otherwise have been free to take etcdlock from the public registry).
  if out=$(run npm view --json is-number version 2>&1); then
    bad "the local registry serves is-number ($out): it proxies another registry"
  elif grep -q E404 <<<"$out"; then
    ok "no uplink: npm view is-number against the local registry is E404"
  else
    bad "npm view is-number: $(tr '\n' ' ' <<<"$out")"
  fi
  # CommonJS: lock, guarded put and get, release; then a try-lock gets it.
  cat >"$app/main.cjs" <<'JS'
const { Client } = require('etcdlock');
(async () => {
  const client = await Client.connect({ endpoints: process.argv[2].split(','), ttl: 10 });
  const lock = await client.lock('registry-npm-cjs', { timeout: 10000 });
  const token = String(lock.fencingToken);
  await lock.put('registry/npm-cjs', token);
  if ((await lock.get('registry/npm-cjs', 'utf8')) !== token) throw new Error('guarded get mismatch');
  await lock.unlock();
  const again = await client.tryLock('registry-npm-cjs');
  if (!again) throw new Error('unlock did not release');
  await again.unlock();
  await client.close();
  console.log(`ok ${token} ${require.resolve('etcdlock').split('/').pop()}`);
})().catch((e) => { console.error(e.message); process.exit(1); });
JS
  # ES module: the package's import condition, the same Client as require's.
  cat >"$app/main.mjs" <<'JS'
import { Client } from 'etcdlock';
import { createRequire } from 'node:module';
if (Client !== createRequire(import.meta.url)('etcdlock').Client) throw new Error('import and require give different Clients');
try {
  const client = await Client.connect({ endpoints: process.argv[2].split(','), ttl: 10 });
  const lock = await client.lock('registry-npm-esm', { timeout: 10000 });
  const token = String(lock.fencingToken);
  await lock.put('registry/npm-esm', token);
  await lock.unlock();
  await client.close();
  console.log(`ok ${token} ${import.meta.resolve('etcdlock').split('/').pop()}`);
} catch (e) { console.error(e.message); process.exit(1); }
JS
  for m in cjs esm; do
    f=main.$m; [ "$m" = esm ] && f=main.mjs
    if out=$(run node "$f" "$ep" 2>&1) && [[ "$out" == ok* ]]; then
      # etcd holds what the guarded put wrote (read outside the clean room).
      got=$(etcdctl --endpoints="$ep" get "registry/npm-$m" --print-value-only 2>&1 || true)
      read -r _ tok file <<<"$out"
      if [ "$got" = "$tok" ]; then ok "node ($m, $file): lock, guarded put (token $tok, etcd has it), release"; else bad "node ($m): wrote $tok, etcd has '$got'"; fi
    else
      # The error's message line (a module that does not load throws before
      # the script's own catch), else the output's end.
      bad "node ($m): $(grep -m 1 '^[A-Za-z]*Error: ' <<<"$out" || tail -n 3 <<<"$out" | tr '\n' ' ')"
    fi
  done
}

case "$cmd" in
  start) [ $# -eq 1 ] || usage; start "$1" ;;
  stop) [ $# -eq 1 ] || usage; stop "$(cd "$1" && pwd)" ;;
  check) [ $# -eq 1 ] || usage; check "$(cd "$1" && pwd)" ;;
  publish) [ $# -eq 2 ] || usage; publish "$(cd "$1" && pwd)" "$(cd "$2" && pwd)" ;;
  install) [ $# -eq 2 ] || usage; install "$1" "$2" ;;
  *) usage ;;
esac
exit "$fail"
