'use strict';
// index.d.ts is checked by `tsc --noEmit` over test/usage.ts (which also holds
// @ts-expect-error lines, so types that got too loose fail the check). The same
// file is then compiled (tsc downlevels `await using`, which Node 20 cannot
// parse) and run against real etcd, so `await using` really releases the lock.
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { ROOT, startEtcd } = require('./helpers.js');

const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const TSCONFIG = path.join(__dirname, 'tsconfig.json');

function tsc(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [TSC, ...args], { cwd: ROOT }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, out: stdout + stderr })
    );
  });
}

let etcd;
before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  await etcd.stop();
});

it('tsc --noEmit accepts test/usage.ts against index.d.ts', async () => {
  const r = await tsc(['--noEmit', '-p', TSCONFIG]);
  assert.equal(r.code, 0, r.out);
});

it('`await using` (compiled by tsc) releases the lock at scope exit', async () => {
  const r = await tsc(['-p', TSCONFIG, '--noEmit', 'false']);
  assert.equal(r.code, 0, r.out);
  const { demo } = require(path.join(__dirname, '.ts-out', 'usage.js'));
  const events = await demo(etcd.endpoints);
  assert.deepEqual(events, [
    'held true true true true hello 3 true',
    'tryLock while held: null',
    'after scope: true',
    'withLock 1',
    'error InvalidArgument true 1',
  ]);
});

it('`await using` in plain JavaScript, where this Node can parse it', async (t) => {
  const AsyncFunction = (async () => {}).constructor;
  let fn;
  try {
    fn = new AsyncFunction('Client', 'endpoints', `
      await using client = await Client.connect({ endpoints });
      let lock;
      { await using l = await client.lock('native-await-using'); lock = l; }
      return lock.isHeld;`);
  } catch {
    t.diagnostic(`node ${process.version} cannot parse \`await using\`; covered by the tsc-compiled test above`);
    return;
  }
  assert.equal(await fn(require('..').Client, etcd.endpoints), false);

});
