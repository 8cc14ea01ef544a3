'use strict';
// Finds and loads the native half of etcdlock, in this order:
// 1. the file named by ETCDLOCK_NATIVE;
// 2. etcdlock.<platform key>.node next to this file (`npm run build` writes it
//    in a source checkout);
// 3. the platform package etcdlock-<platform key> (the @napi-rs convention:
//    the published package lists one per platform in optionalDependencies,
//    each limited by `os`/`cpu`/`libc`, so npm installs only the machine's).
const fs = require('node:fs');
const path = require('node:path');

/**
 * Every platform a native package is published for: its key (`process.platform`
 * - `process.arch` [- libc]), the Rust target it is built from and its npm
 * `os`/`cpu`/`libc` fields. The Windows module is a MinGW-w64 (windows-gnu)
 * build: it resolves Node-API from node.exe at load time and imports only
 * system DLLs, so the official (MSVC-built) node.exe loads it.
 */
const PLATFORMS = [
  { key: 'linux-x64-gnu', target: 'x86_64-unknown-linux-gnu', os: 'linux', cpu: 'x64', libc: 'glibc', about: 'Linux x86_64, glibc >= 2.17' },
  { key: 'linux-arm64-gnu', target: 'aarch64-unknown-linux-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc', about: 'Linux aarch64, glibc >= 2.17' },
  { key: 'linux-x64-musl', target: 'x86_64-unknown-linux-musl', os: 'linux', cpu: 'x64', libc: 'musl', about: 'Linux x86_64, musl (Alpine)' },
  { key: 'linux-arm64-musl', target: 'aarch64-unknown-linux-musl', os: 'linux', cpu: 'arm64', libc: 'musl', about: 'Linux aarch64, musl (Alpine)' },
  { key: 'darwin-x64', target: 'x86_64-apple-darwin', os: 'darwin', cpu: 'x64', libc: null, about: 'macOS x86_64' },
  { key: 'darwin-arm64', target: 'aarch64-apple-darwin', os: 'darwin', cpu: 'arm64', libc: null, about: 'macOS arm64 (Apple silicon)' },
  {
    key: 'win32-x64-gnu',
    target: 'x86_64-pc-windows-gnu',
    os: 'win32',
    cpu: 'x64',
    libc: null,
    about: 'Windows x64 (a MinGW-w64 build that the official node.exe loads)',
  },
];

/** The platform keys the published packages cover. */
const SUPPORTED = PLATFORMS.map((p) => p.key);

function isMusl() {
  if (process.platform !== 'linux') return false;
  try {
    const report = process.report && process.report.getReport();
    const header = report && (typeof report === 'string' ? JSON.parse(report) : report).header;
    return !(header && header.glibcVersionRuntime);
  } catch {
    return false;
  }
}

/**
 * This machine's platform key: linux-<arch>-gnu|musl, darwin-<arch>,
 * win32-<arch>-gnu (the one Windows build), or <platform>-<arch> elsewhere.
 */
function platformKey() {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform === 'linux') return `${base}-${isMusl() ? 'musl' : 'gnu'}`;
  if (process.platform === 'win32') return `${base}-gnu`;
  return base;
}

/** The file name `npm run build` writes and `load()` looks for next to this file. */
function nativeFileName() {
  return `etcdlock.${platformKey()}.node`;
}

/** The npm package that carries this machine's native module. */
function packageName(key = platformKey()) {
  return `etcdlock-${key}`;
}

function fail(message) {
  const err = new Error(message);
  err.code = 'Internal';
  return err;
}

function load() {
  if (process.env.ETCDLOCK_NATIVE) return require(process.env.ETCDLOCK_NATIVE);
  const key = platformKey();
  const local = path.join(__dirname, nativeFileName());
  if (fs.existsSync(local)) return require(local);
  const pkg = packageName(key);
  const supported = `The published packages support ${SUPPORTED.join(', ')}`;
  const fromSource = `From a source checkout run \`npm run build\` in ${__dirname} (needs Rust and a C compiler)`;
  let resolved;
  try {
    resolved = require.resolve(pkg);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    if (!SUPPORTED.includes(key)) {
      throw fail(`etcdlock: no native module for ${key}: no package is published for it. ${supported}. ${fromSource}.`);
    }
    throw fail(
      `etcdlock: no native module for ${key}: install the package ${pkg} (same version as etcdlock). ` +
        `npm installs it with etcdlock as an optional dependency unless optional dependencies were ` +
        `omitted (--omit=optional, --no-optional) or the lockfile was written on another platform. ` +
        `${supported}. ${fromSource}.`
    );
  }
  try {
    return require(resolved);
  } catch (e) {
    throw fail(`etcdlock: ${pkg} is installed (${resolved}) but its native module does not load: ${e.message}`);
  }
}

module.exports = { load, nativeFileName, packageName, platformKey, PLATFORMS, SUPPORTED };
