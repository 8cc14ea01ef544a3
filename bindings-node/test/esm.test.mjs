// The package's `import` condition: `import ... from 'etcdlock'` (and
// 'etcdlock/prometheus', 'etcdlock/testing', 'etcdlock/fencing') resolves to the ES module entries, which export
// exactly what `require` gives, as the same objects.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from 'etcdlock';
import * as esmProm from 'etcdlock/prometheus';
import * as esmTesting from 'etcdlock/testing';
import * as esmFencing from 'etcdlock/fencing';

const require = createRequire(import.meta.url);

test('import and require give the same objects, through the import condition', () => {
  assert.match(import.meta.resolve('etcdlock'), /\/index\.mjs$/);
  assert.match(import.meta.resolve('etcdlock/prometheus'), /\/prometheus\.mjs$/);
  assert.match(import.meta.resolve('etcdlock/testing'), /\/testing\.mjs$/);
  assert.match(import.meta.resolve('etcdlock/fencing'), /\/fencing\.mjs$/);
  for (const [mod, cjs] of [[esm, require('etcdlock')], [esmProm, require('etcdlock/prometheus')],
    [esmTesting, require('etcdlock/testing')], [esmFencing, require('etcdlock/fencing')]]) {
    const named = Object.keys(mod).filter((k) => k !== 'default').sort();
    assert.deepEqual(named, Object.keys(cjs).sort());
    for (const k of named) assert.equal(mod[k], cjs[k], k);
    assert.equal(mod.default, cjs);
  }
  assert.equal(typeof esm.Client.connect, 'function');
  assert.equal(typeof esm.MemStore.open, 'function');
  assert.equal(typeof esmTesting.memStore, 'function');
});
