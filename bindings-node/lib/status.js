'use strict';
// Election leaders and lock status as JS objects (bigint tokens and ids).
const native = require('./native.js');
const { call } = require('./errors.js');

function leaderOf(l) {
  return l ? { key: l.key, value: l.value, revision: BigInt(l.revision), leaseId: BigInt(l.leaseId) } : null;
}

function contenderOf(c) {
  return {
    key: c.key,
    kind: c.kind,
    permits: c.permits ?? null,
    holds: c.holds,
    leaseId: BigInt(c.leaseId),
    ttlRemaining: c.ttlRemaining ?? null,
    fencingToken: BigInt(c.fencingToken),
    owner: c.owner ?? null,
    ageMs: c.ageMs ?? null,
    value: c.value,
    host: c.host ?? null,
    pid: c.pid ?? null,
    language: c.language ?? null,
    localWaiters: c.localWaiters ?? null,
    metadata: Object.fromEntries(c.metadata ?? []),
    foreign: c.foreign,
  };
}

function statusOf(st) {
  return {
    name: st.name,
    kind: st.kind ?? null,
    revision: BigInt(st.revision),
    holders: st.holders.map(contenderOf),
    waiters: st.waiters.map(contenderOf),
  };
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

module.exports = { leaderOf, statusOf, follow };
