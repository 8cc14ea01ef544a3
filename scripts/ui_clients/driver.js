// A Node client for scripts/ui_check.py, driven over stdin (the commands of
// driver.py, plus `many PREFIX N`: hold PREFIX0000 .. PREFIX(N-1) at once;
// prints `many N MS` when all are held).
// Usage: node driver.js ENDPOINTS   (ETCDLOCK_NODE_MODULE: the etcdlock package dir)
'use strict';
const path = require('path');
const readline = require('readline');
const { Client } = require(process.env.ETCDLOCK_NODE_MODULE || path.join(__dirname, '..', '..', 'bindings-node'));

const say = (...words) => console.log(words.join(' '));

(async () => {
  const client = await Client.connect({ endpoints: process.argv[2] });
  const held = new Map();
  say('ready');
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, ...args] = line.trim().split(/\s+/);
    if (cmd === 'lock') {
      const name = args[0];
      client.lock(name).then(
        (l) => { held.set(name, l); say('held', name, l.fencingToken, Date.now()); },
        (e) => say('error', name, String(e.message).replace(/\n/g, ' ')));
    } else if (cmd === 'unlock') {
      await held.get(args[0]).unlock();
      held.delete(args[0]);
      say('released', args[0], Date.now());
    } else if (cmd === 'many') {
      const n = Number(args[1]);
      const locks = await Promise.all(Array.from({ length: n }, (_, i) => client.lock(args[0] + String(i).padStart(4, '0'))));
      for (const l of locks) held.set(l.name, l);
      say('many', n, Date.now());
    } else if (cmd === 'quit') {
      break;
    }
  }
  await client.close();
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
