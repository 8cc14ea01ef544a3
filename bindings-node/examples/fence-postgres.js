#!/usr/bin/env node
'use strict';
/**
 * A deposit to an account in PostgreSQL, made under an etcdlock lock and
 * fenced with the hold's token: a holder that lost the lock while paused
 * cannot overwrite a newer holder's deposit.
 *
 * Usage: fence-postgres.js NAME ACCOUNT AMOUNT [--pause] [--no-fence]
 *
 * etcd from ETCDLOCK_ENDPOINTS (and ETCDLOCK_TTL), PostgreSQL from the PG*
 * variables node-postgres reads; the tables are examples/postgres/fence_schema.sql.
 * With --pause the holder waits for a line on stdin between reading the balance
 * and writing it (where the tests stop it past its lease); --no-fence writes
 * without the fence (the lost update the fence prevents). scripts/fence_scenario.py runs it.
 */
const path = require('node:path');
const readline = require('node:readline');
const pg = require('pg');
const { Client } = require(path.join(__dirname, '..'));
const { fence, StaleTokenError } = require(path.join(__dirname, '..', 'fencing'));

function nextLine() {
  const rl = readline.createInterface({ input: process.stdin });
  return new Promise((resolve) => rl.once('line', () => {
    rl.close();
    process.stdin.destroy(); // else the open pipe keeps the process alive
    resolve();
  }));
}

async function main() {
  const [name, account, amountArg] = process.argv.slice(2);
  const amount = Number(amountArg);
  const lockName = `account-${account}`;
  const client = await Client.connect();
  const db = new pg.Client();
  await db.connect();
  try {
    const lock = await client.lock(lockName, { timeout: 10000 });
    const token = lock.fencingToken;
    const { rows } = await db.query('SELECT balance FROM accounts WHERE id = $1', [account]);
    const balance = Number(rows[0].balance);
    console.log(`${name}: token ${token}, balance ${balance}`);
    if (process.argv.includes('--pause')) await nextLine(); // a GC pause, a slow disk: the lease may expire here
    try {
      await db.query('BEGIN');
      if (!process.argv.includes('--no-fence')) await fence(db, lockName, token); // refused if a newer holder has written
      await db.query('UPDATE accounts SET balance = $1 WHERE id = $2', [balance + amount, account]);
      await db.query('COMMIT');
      console.log(`${name}: wrote balance ${balance + amount}`);
    } catch (e) {
      await db.query('ROLLBACK');
      if (!(e instanceof StaleTokenError)) throw e;
      console.log(`${name}: refused: ${e.message}`);
    }
    await lock.unlock().catch((e) => console.log(`${name}: the lock was lost: ${e.reason}`));
  } finally {
    await db.end();
    await client.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
