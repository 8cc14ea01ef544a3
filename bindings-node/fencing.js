'use strict';
/**
 * `etcdlock/fencing`: fence a database write with the lock's token (PostgreSQL).
 *
 * A lock on etcd can end while its holder still runs (a pause past the lease,
 * a partition), so a write decided under the lock can land after the next
 * holder's. The database stops it when every write carries the hold's
 * `fencingToken` and the database keeps the newest token it has seen per
 * resource (the table `CREATE_TABLE` defines): `fence` does that inside the
 * caller's transaction, before the write, and rejects with `StaleTokenError`
 * when a newer holder has written. The fence row stays locked until the
 * transaction ends, so a stale writer waiting on it sees the newer token.
 *
 * `db` is anything with node-postgres's `query(text, values)` resolving
 * `{ rowCount, rows }` (a `pg` Client or a pool's client in a transaction); `pg`
 * is an optional peer dependency, never loaded here.
 */

const TABLE = 'etcdlock_fence';
const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS ${TABLE} (resource text PRIMARY KEY, token bigint NOT NULL)`;
const IDENT = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** A newer holder has written this resource: roll the transaction back. */
class StaleTokenError extends Error {
  constructor(resource, token, newest) {
    super(`token ${token} is older than ${newest}, the newest written for ${resource}`);
    this.name = 'StaleTokenError';
    this.code = 'StaleToken';
    this.resource = resource;
    this.token = token;
    this.newest = newest;
  }
}

/** The statement `fence` runs ($1 resource, $2 token): 1 row when the write may go on, 0 when stale. */
function fenceSql(table = TABLE) {
  if (!IDENT.test(table)) throw new TypeError(`not a table name: ${table}`);
  return `INSERT INTO ${table} AS f (resource, token) VALUES ($1, $2) ` +
    'ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token';
}

/**
 * Admit this transaction's write to `resource` for a holder with `token` (its
 * lock's `fencingToken`, a bigint), or reject with `StaleTokenError` naming the
 * newer token the database has seen.
 */
async function fence(db, resource, token, { table = TABLE } = {}) {
  const t = BigInt(token);
  const r = await db.query(fenceSql(table), [resource, t.toString()]);
  if (r.rowCount === 1) return;
  const seen = await db.query(`SELECT token FROM ${table} WHERE resource = $1`, [resource]);
  const newest = seen.rows.length ? BigInt(seen.rows[0].token) : null;
  throw new StaleTokenError(resource, t, newest);
}

module.exports = { TABLE, CREATE_TABLE, StaleTokenError, fence, fenceSql };
