export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: any[] }>;
}
export const TABLE: string;
export const CREATE_TABLE: string;
export class StaleTokenError extends Error {
  readonly code: 'StaleToken';
  readonly resource: string;
  readonly token: bigint;
  readonly newest: bigint | null;
}
export function fenceSql(table?: string): string;
export function fence(db: Queryable, resource: string, token: bigint | number, options?: { table?: string }): Promise<void>;
