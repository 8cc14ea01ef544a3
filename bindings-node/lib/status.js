'use strict';
// Election leaders, lock status and metrics as JS objects (bigint tokens and ids).
const native = require('./native.js');
const { call } = require('./errors.js');

function leaderOf(l) {
  return l ? { key: l.key, value: l.value, revision: BigInt(l.revision), leaseId: BigInt(l.leaseId) } : null;
}

// Core's records (Status with its Contenders, Metrics, Deadlocks, History)
// arrive as their one JSON encoding (core/src/records/) and become JS objects
// by one rule, by field name, at every depth: snake_case keys become
// camelCase; `x_seconds` becomes `xMs` (times 1000); the ids in IDS and every
// `*_revision` (decimal strings or numbers) become bigints; `value` (an array
// of bytes) becomes a Buffer; the objects in KEYED keep their keys (outcome
// and reason names, the holder's metadata) and decode their values. A field
// added to a record in core appears here with no change.
const IDS = new Set(['lease_id', 'fencing_token', 'revision']);
const KEYED = new Set(['acquisitions', 'lost', 'wait_histogram', 'metadata']);
const SECONDS = '_seconds';

const camel = (k) => k.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

function field(key, v) {
  if (v === null) return null;
  if (IDS.has(key) || key.endsWith('_revision')) return BigInt(v);
  if (key === 'value' && Array.isArray(v)) return Buffer.from(v);
  if (key.endsWith(SECONDS)) return v * 1000;
  if (KEYED.has(key)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, any(x)]));
  return any(v);
}

function any(v) {
  if (Array.isArray(v)) return v.map(any);
  if (v === null || typeof v !== 'object') return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    out[k.endsWith(SECONDS) ? camel(k.slice(0, -SECONDS.length)) + 'Ms' : camel(k)] = field(k, x);
  }
  return out;
}

/** A record's JSON (a Status, a list of them, or Metrics) as the JS object(s) index.d.ts declares. */
function decodeRecord(json) {
  return any(JSON.parse(json));
}

async function* follow(obs, signal) {
  for (;;) {
    if (signal?.aborted) return;
    const cancel = new native.NativeCancel();
    const onAbort = () => cancel.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let l;
    try {
      l = await call(() => obs.next(cancel));
    } catch (e) {
      if (e.code === 'Cancelled' && signal?.aborted) return;
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    yield leaderOf(l);
  }
}

module.exports = { leaderOf, decodeRecord, follow };
