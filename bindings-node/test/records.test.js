'use strict';
// Core's records as lib/status.js decodes them from their one JSON encoding
// (core/src/records/): a field core adds to a record is accepted with no
// decoder change, here a Status and a contender carrying fields no release
// declares yet.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { decodeRecord } = require('../lib/status.js');

describe('records', () => {
  it('a Status with unknown extra fields decodes, the known ones exactly', () => {
    const contender = {
      key: 'locks/a/694d9a0b1c2d3e4f',
      kind: 'permit',
      permits: 3,
      holds: true,
      lease_id: '7587862106543470159',
      ttl_remaining: 9,
      fencing_token: '9007199254740993',
      owner: 'h:7',
      age_ms: 1500,
      value: [0, 255],
      host: 'h',
      pid: 7,
      language: 'rust',
      local_waiters: null,
      metadata: { app: 'billing' },
      foreign: false,
      a_field_not_declared_yet: 1,
    };
    const st = decodeRecord(JSON.stringify({
      name: 'a',
      revision: '43',
      holders: [contender],
      waiters: [],
      kind: 'semaphore',
      another_new_field: 'x',
    }));
    assert.equal(st.name, 'a');
    assert.equal(st.revision, 43n);
    assert.equal(st.kind, 'semaphore');
    assert.equal(st.anotherNewField, 'x');
    const h = st.holders[0];
    assert.equal(h.leaseId, 7587862106543470159n);
    assert.equal(h.fencingToken, 9007199254740993n);
    assert.deepEqual(h.value, Buffer.from([0, 255]));
    assert.deepEqual(h.metadata, { app: 'billing' });
    assert.equal(h.aFieldNotDeclaredYet, 1);
    assert.deepEqual(st.waiters, []);
  });
});
