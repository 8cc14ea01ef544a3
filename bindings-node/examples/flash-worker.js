#!/usr/bin/env node
'use strict';
/**
 * The Node worker of the cross-language flash sale (scripts/flash_sale.py).
 * Contract shared by every language (see cli/src/flash.rs): FLASH_ENDPOINTS,
 * FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS,
 * FLASH_WORKER_ID in the environment; one JSON line per purchase attempt.
 */
const path = require('node:path');
const { Client } = require(path.join(__dirname, '..'));

async function main() {
  const env = process.env;
  const client = await Client.connect({ endpoints: env.FLASH_ENDPOINTS.split(',') });
  try {
    for (let n = 0; n < Number(env.FLASH_ATTEMPTS); n++) {
      const t0 = performance.now();
      const lock = await client.lock(env.FLASH_LOCK);
      const waitMs = performance.now() - t0;
      let before = 0;
      let sold = false;
      try {
        before = Number((await lock.get(env.FLASH_STOCK_KEY, 'utf8')) ?? '0');
        sold = before > 0;
        if (sold) {
          await lock.put(env.FLASH_STOCK_KEY, String(before - 1));
          await lock.put(`${env.FLASH_SALES_PREFIX}${lock.fencingToken.toString().padStart(20, '0')}`, 'node');
        }
      } finally {
        await lock.unlock();
      }
      console.log(JSON.stringify({
        lang: 'node', worker: env.FLASH_WORKER_ID, sold, token: Number(lock.fencingToken),
        wait_ms: waitMs, stock_before: before, t_ms: Date.now(),
      }));
    }
  } finally {
    await client.close();
  }
}

main().catch((e) => {
  console.error(`node worker: ${e.code ?? ''} ${e.message}`);
  process.exit(1);
});
