'use strict';
// Runs in the guest runtime (node.exe under Wine, a musl node) against the
// installed package, while a Linux (glibc) client of drive.js holds NAME:
// tryLock finds it held, a 500 ms lock() times out, then a queued lock() gets
// it once the Linux holder, asked through REQUEST_FILE, releases it.
// Prints one JSON line.
const fs = require('node:fs');
const { Client } = require('etcdlock');
const [endpoints, name, holderToken, requestFile] = process.argv.slice(2);

(async () => {
  const client = await Client.connect({ endpoints: endpoints.split(','), ttl: 10 });
  const tried = await client.tryLock(name);
  if (tried !== null) throw new Error(`tryLock got ${name} while the Linux client holds it`);
  let timedOut = null;
  try {
    await client.lock(name, { timeout: 500 });
  } catch (e) {
    timedOut = e.code;
  }
  if (timedOut !== 'Timeout') throw new Error(`lock({ timeout: 500 }) ended with ${timedOut}, want Timeout`);
  // Queue first, then ask the holder to release: the wait must end by the handoff.
  const waiting = client.lock(name, { timeout: 30_000 });
  fs.writeFileSync(requestFile, 'release');
  const lock = await waiting;
  if (!(lock.fencingToken > BigInt(holderToken)))
    throw new Error(`fencing token ${lock.fencingToken} not above the Linux holder's ${holderToken}`);
  await lock.unlock();
  console.log(JSON.stringify({ tryLock: null, timeout: timedOut, acquired: true, token: String(lock.fencingToken), holderToken, platform: `${process.platform}-${process.arch}`,
    native: Object.keys(require.cache).filter((f) => f.endsWith('.node')) }));
  await client.close();
})().catch((e) => {
  console.error(`guest-exclusion: ${e.code || ''} ${e.stack || e}`);
  process.exit(1);
});
