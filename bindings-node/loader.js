'use strict';
// Finds and loads the native half of etcdlock: etcdlock.<platform>-<arch>[-gnu|-musl].node
// next to this file (written by `npm run build`), or the file named by ETCDLOCK_NATIVE.
const fs = require('node:fs');
const path = require('node:path');

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

/** The file name `npm run build` writes and `load()` looks for on this machine. */
function nativeFileName() {
  const libc = process.platform === 'linux' ? (isMusl() ? '-musl' : '-gnu') : '';
  return `etcdlock.${process.platform}-${process.arch}${libc}.node`;
}

/** The platforms the published package carries a native module for (glibc >= 2.17). */
const SUPPORTED = ['linux-x64-gnu', 'linux-arm64-gnu'];

function load() {
  const file = process.env.ETCDLOCK_NATIVE || path.join(__dirname, nativeFileName());
  if (!fs.existsSync(file)) {
    // A published package carries one module per supported platform; a source
    // checkout has none until `npm run build`.
    const here = fs.readdirSync(__dirname).filter((f) => /^etcdlock\..+\.node$/.test(f));
    const platform = nativeFileName().replace(/^etcdlock\.|\.node$/g, '');
    const err = new Error(
      `etcdlock: no native module for ${platform} (${file} not found). ` +
        `The published package supports ${SUPPORTED.join(', ')} (glibc >= 2.17)` +
        (here.length ? `; this copy carries ${here.join(', ')}` : '; this copy carries none') +
        `. From a source checkout run \`npm run build\` in ${__dirname} (needs Rust and protoc)`
    );
    err.code = 'Internal';
    throw err;
  }
  return require(file);
}

module.exports = { load, nativeFileName, SUPPORTED };
