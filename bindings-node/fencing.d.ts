/** What `fence` needs of a database client: node-postgres's `query` (a `pg` Client, or a pool's client). */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: any[] }>;
}

/** The fence table's default name. */
export const TABLE: string;
/** Its definition: the newest token written per resource. */
export const CREATE_TABLE: string;

/** A newer holder has written this resource: roll the transaction back. */
export class StaleTokenError extends Error {
  readonly code: 'StaleToken';
  readonly resource: string;
  readonly token: bigint;
  /** The newest token the database has seen for the resource. */
  readonly newest: bigint | null;
}

/** The statement `fence` runs ($1 resource, $2 token): 1 row when the write may go on, 0 when stale. */
export function fenceSql(table?: string): string;

/**
 * Admit this transaction's write to `resource` for a holder with `token` (its lock's
 * `fencingToken`), or reject with `StaleTokenError`. Call it inside the transaction that
 * makes the write, before the write.
 */
export function fence(db: Queryable, resource: string, token: bigint | number, options?: { table?: string }): Promise<void>;
