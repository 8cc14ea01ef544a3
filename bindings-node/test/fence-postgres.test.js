'use strict';
// examples/fence-postgres.js against a real PostgreSQL and etcd: holder A is
// stopped (SIGSTOP) past its 2 s lease, B takes the lock and deposits, A wakes
// and writes with its old token. With the fence the database refuses A and A
// prints why; the control run without the fence shows the lost update.
// scripts/fence_scenario.py plays it (the same driver for every language) and
// starts and stops its own PostgreSQL (scripts/pg_harness.py) and etcd.
const { test } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { harnessPath } = require('./helpers');
const { fenceSql, StaleTokenError } = require('../fencing');

const WORKSPACE = path.resolve(__dirname, '..', '..');

test('a stale holder\'s write is refused by PostgreSQL, and lost without the fence', async () => {
  const example = path.join(__dirname, '..', 'examples', 'fence-postgres.js');
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile('python3', [path.join(WORKSPACE, 'scripts', 'fence_scenario.py'), '--label', 'node',
      '--harness', harnessPath(), '--', process.execPath, example], { timeout: 120000 },
    (err, out, errOut) => resolve({ code: err ? err.code : 0, stdout: out, stderr: errOut }));
  });
  process.stdout.write(stdout);
  assert.strictEqual(code, 0, stdout + stderr);
  assert.strictEqual(stdout.trim().split('\n').pop(), '2 passed, 0 failed');
});

test('fencing: the statement and the error', () => {
  assert.match(fenceSql(), /^INSERT INTO etcdlock_fence AS f .* WHERE f\.token <= EXCLUDED\.token$/);
  assert.throws(() => fenceSql('x; DROP TABLE y'), TypeError);
  const e = new StaleTokenError('r', 5n, 7n);
  assert.strictEqual(e.code, 'StaleToken');
  assert.strictEqual(e.message, 'token 5 is older than 7, the newest written for r');
});
