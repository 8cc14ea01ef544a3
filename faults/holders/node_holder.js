'use strict';
// Node holder process for the fault scenarios (the line protocol of
// python_holder.py and of the Rust child), on the Node binding
// (`require('etcdlock')`; faults/test.sh puts the package on NODE_PATH).
//
// Spec (JSON) in $ETCDLOCK_FAULTS_CHILD: endpoints, ns, ttl, lock, rounds,
// request_timeout_ms (optional, default 2000), kind (only "mutex").
// Prints:
//   HELD <token> <acquired mono ns> <key>
//   PUT <ok|error code> <call mono ns> <return mono ns> <ok|refused|unknown>
//   LOST <reason> <last mono ns at which isHeld was true> <mono ns it turned false>
//   STALE <ok|error code> <call mono ns> <return mono ns> <ok|refused|unknown>
//   DONE
// It holds until the hold is lost (or it is killed). The loss is polled with
// `lock.isHeld` every 5 ms: the binding also delivers it as an event
// (`lock.lost` resolves with the reason, `lock.signal` aborts), which the
// holder awaits as a cross-check, but only the poll gives the last instant the
// holder believed it held, which the checker needs. process.hrtime.bigint()
// is CLOCK_MONOTONIC on Linux, the clock of the Rust side.
const fs = require('node:fs');
const { Client } = require('etcdlock');

function say(line) {
  fs.writeSync(1, line + '\n');
}

const mono = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// What a guarded put's outcome means for the history: etcd applied it (ok),
// etcd itself rejected the compare (refused), or not known.
async function guardedPut(tag, lock, res, token) {
  const call = mono();
  let name = 'ok';
  let hist = 'ok';
  try {
    await lock.put(res, String(token));
  } catch (e) {
    name = e.code || e.name;
    hist = e.code === 'LockLost' && /etcd rejected/.test(e.message) ? 'refused' : 'unknown';
  }
  say(`${tag} ${name} ${call} ${mono()} ${hist}`);
}

async function main() {
  const spec = JSON.parse(process.env.ETCDLOCK_FAULTS_CHILD);
  const name = spec.lock || 'L';
  if ((spec.kind || 'mutex') !== 'mutex') throw new Error('only the mutex kind is supported');
  const res = 'res/' + name;
  const client = await Client.connect({
    endpoints: spec.endpoints,
    ttl: Number(spec.ttl),
    namespace: spec.ns,
    requestTimeout: Number(spec.request_timeout_ms || 2000),
  });
  const rounds = Number(spec.rounds || 1);
  for (let r = 0; r < rounds; r++) {
    const lock = await client.lock(name);
    const acq = mono();
    say(`HELD ${lock.fencingToken} ${acq} ${lock.key}`);
    await guardedPut('PUT', lock, res, lock.fencingToken);
    // The clock is read before each isHeld, so a true answer proves the hold
    // at that instant even if the process is stopped between the two; the
    // moment it turned false is read after the answer, for the same reason.
    let lastTrue = acq;
    let t;
    for (;;) {
      t = mono();
      if (!lock.isHeld) {
        t = mono();
        break;
      }
      lastTrue = t;
      await sleep(5);
    }
    // The event must agree with the poll (it may trail it by a turn of the loop).
    const reason = await Promise.race([lock.lost, sleep(1000).then(() => null)]);
    if (reason === null) throw new Error(`isHeld turned false but lock.lost did not resolve (state ${lock.state})`);
    say(`LOST ${reason} ${lastTrue} ${t}`);
    await guardedPut('STALE', lock, res, lock.fencingToken);
  }
  await client.close();
  say('DONE');
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`node_holder: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
