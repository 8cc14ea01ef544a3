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

  it('Deadlocks and History: every revision a bigint (decimal string or number), absent ones null', () => {
    const party = { lease_id: '9223372036854775807', owner: null, host: null, pid: null, language: null };
    const d = decodeRecord(JSON.stringify({
      prefix: 'p/', revision: '12', clients: 2, waits: 2,
      cycles: [{ edges: [{ waiter: party, name: 'p/x', waiter_key: 'p/x/1', holder: party, holder_key: 'p/x/2', fencing_token: '7', waiter_revision: '9' }] }],
    }));
    const e = d.cycles[0].edges[0];
    assert.equal(e.waiter.leaseId, 9223372036854775807n);
    assert.equal(e.fencingToken, 7n);
    assert.equal(e.waiterRevision, 9n);
    assert.equal(e.holderKey, 'p/x/2');
    const h = decodeRecord(JSON.stringify({
      name: 'n', revision: '20', from_revision: '1', read_ms: 1000,
      entries: [{ key: 'n/1', kind: 'exclusive', permits: null, lease_id: '5', fencing_token: '4', queued_ms: 500,
        granted_revision: 4, granted_ms: 500, ended_revision: null, ended_ms: null, ended: 'holding', wait_ms: 0, hold_ms: 20 }],
    }));
    assert.equal(h.fromRevision, 1n);
    assert.equal(h.readMs, 1000);
    assert.deepEqual(h.entries[0], {
      key: 'n/1', kind: 'exclusive', permits: null, leaseId: 5n, fencingToken: 4n, queuedMs: 500,
      grantedRevision: 4n, grantedMs: 500, endedRevision: null, endedMs: null, ended: 'holding', waitMs: 0, holdMs: 20,
    });
  });
});
