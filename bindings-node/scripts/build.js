#!/usr/bin/env node
// Build the native module with cargo and copy it next to index.js as
// etcdlock.<key>.node (loader.js nativeFileName(), the local file it loads first).
// Honours CARGO_TARGET_DIR; otherwise uses the workspace's target/.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

// --release, or --profile NAME (a cargo profile: dev, release, demo, ...).
const argv = process.argv;
const at = argv.indexOf('--profile');
const cargoProfile = at > 0 && argv[at + 1] ? argv[at + 1] : argv.includes('--release') ? 'release' : 'dev';
// --bench adds the benchmark entry points (bench.js); the package never has them.
const bench = process.argv.includes('--bench');
const here = path.resolve(__dirname, '..');
const workspace = path.resolve(here, '..');
const args = ['build', '-p', 'etcdlock-node'];
args.push('--profile', cargoProfile);
if (bench) args.push('--features', 'bench');
const r = spawnSync('cargo', args, { cwd: workspace, stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);

const targetDir = process.env.CARGO_TARGET_DIR
  ? path.resolve(workspace, process.env.CARGO_TARGET_DIR)
  : path.join(workspace, 'target');
const profile = cargoProfile === 'dev' ? 'debug' : cargoProfile; // the folder cargo builds into
const libName = { linux: 'libetcdlock_node.so', darwin: 'libetcdlock_node.dylib', win32: 'etcdlock_node.dll' }[process.platform];
if (!libName) {
  console.error(`unsupported platform ${process.platform}`);
  process.exit(1);
}
const src = path.join(targetDir, profile, libName);
const { nativeFileName } = require('../loader.js');
const dst = path.join(here, nativeFileName());
// Copy to a temp name and rename, so a running process never sees a half file.
fs.copyFileSync(src, dst + '.tmp');
fs.renameSync(dst + '.tmp', dst);
console.log(`etcdlock: ${path.relative(process.cwd(), src)} -> ${path.relative(process.cwd(), dst)} (${profile})`);
