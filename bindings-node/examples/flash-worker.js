#!/usr/bin/env node
'use strict';
/**
 * The Node worker of the cross-language flash sale (scripts/flash_sale.py).
 * Contract shared by every language (see cli/src/flash.rs): FLASH_ENDPOINTS,
 * FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS,
 * FLASH_WORKER_ID in the environment; one JSON line per purchase attempt.
 * With FLASH_STORE=postgres the stock is a row in PostgreSQL (PG* variables,
 * node-postgres) and each purchase one transaction fenced by the hold's token
 * (etcdlock/fencing).
 */
const path = require('node:path');
const { Client } = require(path.join(__dirname, '..'));
const { fence } = require(path.join(__dirname, '..', 'fencing'));

async function purchaseEtcd(lock, env) {
  const before = Number((await lock.get(env.FLASH_STOCK_KEY, 'utf8')) ?? '0');
  if (before > 0) {
    await lock.put(env.FLASH_STOCK_KEY, String(before - 1));
    await lock.put(`${env.FLASH_SALES_PREFIX}${lock.fencingToken.toString().padStart(20, '0')}`, 'node');
  }
  return before;
}

// One transaction: read the stock, and if positive write stock-1 and a sale row, fenced by the token.
async function purchasePostgres(db, lock, env) {
  await db.query('BEGIN');
  try {
    const { rows } = await db.query('SELECT stock FROM flash_stock WHERE sku = $1', [env.FLASH_STOCK_KEY]);
    const before = rows.length ? Number(rows[0].stock) : 0;
    if (before > 0) {
      await fence(db, env.FLASH_LOCK, lock.fencingToken);
      await db.query('UPDATE flash_stock SET stock = $1 WHERE sku = $2', [before - 1, env.FLASH_STOCK_KEY]);
      await db.query("INSERT INTO flash_sales (token, lang, worker) VALUES ($1, 'node', $2)",
        [lock.fencingToken.toString(), env.FLASH_WORKER_ID]);
    }
    await db.query('COMMIT');
    return before;
  } catch (e) {
    await db.query('ROLLBACK');
    throw e;
  }
}

async function main() {
  const env = process.env;
  const client = await Client.connect({ endpoints: env.FLASH_ENDPOINTS.split(',') });
  let db = null;
  if (env.FLASH_STORE === 'postgres') {
    db = new (require('pg').Client)();
    await db.connect();
  }
  try {
    for (let n = 0; n < Number(env.FLASH_ATTEMPTS); n++) {
      const t0 = performance.now();
      const lock = await client.lock(env.FLASH_LOCK);
      const waitMs = performance.now() - t0;
      let before = 0;
      try {
        before = db ? await purchasePostgres(db, lock, env) : await purchaseEtcd(lock, env);
      } finally {
        await lock.unlock();
      }
      console.log(JSON.stringify({
        lang: 'node', worker: env.FLASH_WORKER_ID, sold: before > 0, token: Number(lock.fencingToken),
        wait_ms: waitMs, stock_before: before, t_ms: Date.now(),
      }));
    }
  } finally {
    if (db) await db.end();
    await client.close();
  }
}

main().catch((e) => {
  console.error(`node worker: ${e.code ?? ''} ${e.message}`);
  process.exit(1);
});
