'use strict';
// How loader.js finds the native module: the local file of a source build, else
// the platform package etcdlock-<key> (the published layout); with neither, an
// error naming the package to install (or, for a platform nothing is
// published for, that fact) and the supported list.
const { it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { ROOT } = require('./helpers.js');
const { PLATFORMS, SUPPORTED, nativeFileName, platformKey } = require('../loader.js');

const LIST = 'linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64, win32-x64-gnu';

/** Require `dir` in a fresh node with process.arch faked (when given); the error as JSON. */
function probe(dir, arch) {
  const src = `
    ${arch ? `Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} });` : ''}
    try { const m = require(${JSON.stringify(dir)}); console.log(JSON.stringify({ loaded: typeof m.Client })); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
  const env = { ...process.env };
  delete env.ETCDLOCK_NATIVE;
  return JSON.parse(execFileSync(process.execPath, ['-e', src], { env, encoding: 'utf8', cwd: os.tmpdir() }));
}

/** A copy of the package's JavaScript (no native module) under DIR/node_modules/etcdlock. */
function installJs(dir) {
  const pkg = path.join(dir, 'node_modules', 'etcdlock');
  fs.mkdirSync(pkg, { recursive: true });
  for (const f of ['package.json', 'index.js', 'loader.js', 'lib']) fs.cpSync(path.join(ROOT, f), path.join(pkg, f), { recursive: true });
  return pkg;
}

it('lists seven platforms, one Rust target each, keys as npm names them', () => {
  assert.equal(SUPPORTED.join(', '), LIST);
  assert.equal(new Set(PLATFORMS.map((p) => p.target)).size, 7);
  for (const p of PLATFORMS) {
    assert.match(p.key, new RegExp(`^${p.os}-${p.cpu}(-(gnu|musl))?$`));
    assert.equal(p.libc === 'musl', p.key.endsWith('-musl'));
  }
  assert.equal(nativeFileName(), `etcdlock.${platformKey()}.node`);
});

it('fails at load on a platform nothing is published for, naming it and the supported ones', () => {
  const out = probe(ROOT, 'riscv64');
  assert.equal(out.code, 'Internal');
  assert.match(out.message, new RegExp(`no native module for ${process.platform}-riscv64.*: no package is published for it`));
  assert.ok(out.message.includes(`The published packages support ${LIST}`), out.message);
});

it('fails at load on a supported platform whose package is missing, naming the package to install', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdlock-loader-'));
  try {
    // The other architecture: this machine's build is no help there.
    const arch = process.arch === 'x64' ? 'arm64' : 'x64';
    const out = probe(installJs(dir), arch);
    const key = platformKey().replace(process.arch, arch);
    assert.equal(out.code, 'Internal');
    assert.ok(out.message.includes(`no native module for ${key}: install the package etcdlock-${key}`), out.message);
    assert.ok(out.message.includes(LIST), out.message);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

it('loads the platform package when no local module is beside loader.js', () => {
  const built = path.join(ROOT, nativeFileName());
  assert.ok(fs.existsSync(built), `${built} missing: run npm run build`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdlock-loader-'));
  try {
    const main = installJs(dir);
    assert.equal(probe(main).code, 'Internal'); // neither local file nor package yet
    const plat = path.join(dir, 'node_modules', `etcdlock-${platformKey()}`);
    fs.mkdirSync(plat, { recursive: true });
    fs.copyFileSync(built, path.join(plat, nativeFileName()));
    fs.writeFileSync(path.join(plat, 'package.json'), JSON.stringify({ name: `etcdlock-${platformKey()}`, version: '0.0.0', main: nativeFileName() }));
    assert.deepEqual(probe(main), { loaded: 'function' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
