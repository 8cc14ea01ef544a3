#!/usr/bin/env node
'use strict';
/**
 * Flash sale ("秒杀") worker: the seed article's stock-deduction demo, on etcdlock.
 *
 * The seed runs two Spring Boot instances behind nginx; each request takes an
 * etcd lock, reads `stock`, and if it is positive writes `stock - 1` and bumps
 * `lucky`. Here each process is one instance and fires REQUESTS concurrent
 * requests. The stock lives in etcd and is read and written with the lock's
 * guarded get/put, so a worker that lost its lock (paused past its lease) can
 * never write a stale value: etcd rejects it.
 *
 *   ETCDLOCK_ENDPOINTS=127.0.0.1:2379 node examples/flash-sale.js [--stock 300] [--requests 500] [--sale NAME]
 *
 * The first worker to take the lock creates the stock. Prints one JSON line:
 * `{"worker":...,"sold":N,"soldOut":N,"stockLeft":N,"lucky":N}`.
 */
const { Client } = require('etcdlock');

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
}

async function main() {
  const stock = Number(arg('stock', '300'));
  const requests = Number(arg('requests', '500'));
  const sale = arg('sale', 'flash-sale');
  const worker = `${require('node:os').hostname()}:${process.pid}`;

  await using_(await Client.connect({ ttl: 10 }), async (client) => {
    const lockName = `${sale}/lock`;
    // The first worker in initialises the stock (under the lock, so exactly once).
    await client.withLock(lockName, async (lock) => {
      if ((await lock.get(`${sale}/stock`)) === null) {
        await lock.put(`${sale}/stock`, String(stock));
        await lock.put(`${sale}/lucky`, '0');
      }
    });

    let sold = 0;
    let soldOut = 0;
    const reduceStock = () =>
      client.withLock(lockName, async (lock) => {
        const left = Number(await lock.get(`${sale}/stock`, 'utf8'));
        if (left > 0) {
          await lock.put(`${sale}/stock`, String(left - 1));
          const lucky = Number(await lock.get(`${sale}/lucky`, 'utf8'));
          await lock.put(`${sale}/lucky`, String(lucky + 1));
          sold++;
        } else {
          soldOut++; // 库存不足
        }
      }, { timeout: 60_000 });

    await Promise.all(Array.from({ length: requests }, reduceStock));

    const [stockLeft, lucky] = await client.withLock(lockName, async (lock) => [
      Number(await lock.get(`${sale}/stock`, 'utf8')),
      Number(await lock.get(`${sale}/lucky`, 'utf8')),
    ]);
    console.log(JSON.stringify({ worker, sold, soldOut, stockLeft, lucky }));
  });
}

// `await using client = ...` where the runtime supports it (Node >= 24);
// this helper does the same on older Node versions.
async function using_(resource, fn) {
  try {
    return await fn(resource);
  } finally {
    await resource[Symbol.asyncDispose]();
  }
}

main().catch((e) => {
  console.error(`flash-sale: ${e.code ?? ''} ${e.message}`);
  process.exitCode = 1;
});
