// Type-checked by `tsc --noEmit` (test/types.test.js), then compiled and run
// against real etcd so that `await using` is exercised even on Node 20.
import { Client, Lock, Latch, Barrier, OnceHold, LockError, ErrorCode, LossReason, Leadership, MultiLock, MAX_PERMITS, type ErrorCodeName, type LossReasonName, type Leader, type LockStatus, type Deadlocks, type WaitEdge, type History, type HistoryEntry, type AcquireOptions, LeaderLoop, Term, type LeadOptions, type LeaderLoopEvent, ReentrantLock, type Logger, type LogFields, type LogLevel, MemStore, type MemKey } from 'etcdlock';
import { memStore, withMemStore, MemFixture } from 'etcdlock/testing';
import type { TestContext } from 'node:test';

export async function demo(endpoints: string[]): Promise<string[]> {
  const events: string[] = [];
  await using client = await Client.connect({ endpoints, ttl: 5, namespace: 'usage/', tls: undefined });
  const name = `usage-${process.pid}`;
  {
    await using lock = await client.lock(name, { timeout: 5_000, signal: AbortSignal.timeout(10_000) });
    const token: bigint = lock.fencingToken;
    const lease: bigint = lock.leaseId;
    const key: string = lock.key;
    const held: boolean = lock.isHeld;
    const lost: Promise<LossReasonName> = lock.lost;
    void lost;
    await lock.put('greeting', 'hello');
    await lock.put(Buffer.from('bin'), new Uint8Array([1, 2, 3]));
    const s: string | null = await lock.get('greeting', 'utf8');
    const b: Buffer | null = await lock.get('bin');
    const existed: boolean = await lock.delete('bin');
    events.push(`held ${held} ${key.length > 0} ${token > 0n} ${lease > 0n} ${s} ${b?.length} ${existed}`);
    // a second client sees it held
    const other = await Client.connect({ endpoints, namespace: 'usage/' });
    const none: Lock | null = await other.tryLock(name);
    events.push(`tryLock while held: ${none}`);
    await other.close();
  } // <- lock released here by `await using`
  const again = await client.tryLock(name);
  events.push(`after scope: ${again !== null}`);
  await again?.unlock();

  const n: number = await client.withLock(name, async (l: Lock) => (l.isHeld ? 1 : 0));
  events.push(`withLock ${n}`);

  try {
    await client.lock('', {});
  } catch (e) {
    if (e instanceof LockError) {
      const code: ErrorCodeName = e.code;
      events.push(`error ${code} ${code === ErrorCode.InvalidArgument} ${e.errno}`);
    }
  }
  const reason: LossReasonName = LossReason.KeyDeleted;
  void reason;
  return events;
}

export async function recipes(client: Client): Promise<string[]> {
  const out: string[] = [];
  {
    await using permit: Lock = await client.acquirePermit('transcoders', 3, { timeout: 5000 });
    await permit.put('job', '1');
  }
  {
    await using reader = await client.readLock('config');
    out.push(String(reader.fencingToken > 0n));
  }
  {
    await using many: MultiLock = await client.lockMany(['a', 'b'], { timeout: 5000 });
    const tokens: bigint[] = many.fencingTokens;
    out.push(String(tokens.length));
    // The loss and renewal members of a Lock.
    const state: 'held' | 'released' | LossReasonName = many.state;
    const failing: boolean = many.renewal.failing;
    const lostOne: Promise<{ name: string; reason: LossReasonName }> = many.lost;
    many.onRenewal((r) => {
      const left: number | undefined = r.validForMs;
      void left;
    });
    void state; void failing; void lostOne;
  }
  const lead: Leadership = await client.campaign('leader', 'node-1');
  await lead.proclaim(Buffer.from('node-1 v2'));
  const now: Leader | null = await client.leader('leader');
  if (now) out.push(now.value.toString('utf8'), String(now.revision === lead.fencingToken));
  const ac = new AbortController();
  for await (const change of client.observe('leader', { signal: ac.signal })) {
    out.push(change ? change.key : 'none');
    ac.abort();
  }
  const st: LockStatus = await client.status('transcoders');
  out.push(`${st.holders.length} ${st.waiters.length} ${MAX_PERMITS}`);
  const ran: number | undefined = await client.runOnce('usage-once', async () => 7, { atMost: 10_000, atLeast: 0 });
  const hold: OnceHold | null = await client.takeOnce('usage-once-2', { atMost: 10_000 });
  if (hold) {
    const rev: bigint = hold.revision;
    const until: Date = hold.lockUntil;
    out.push(`once ${ran} ${rev > 0n} ${until > hold.lockedAt} ${await hold.extend({ atMost: 5_000 })} ${await hold.finish()}`);
  }
  await lead.resign();
  return out;
}

export async function sync(client: Client): Promise<string[]> {
  const out: string[] = [];
  const extras: AcquireOptions = { lockDelay: 3_000, leaseTime: 60_000, metadata: { app: 'billing' } };
  {
    await using lock = await client.lock('jobs', { timeout: 5_000, ...extras });
    const st: LockStatus = await client.status('jobs');
    const app: string | undefined = st.holders[0]?.metadata['app'];
    out.push(`${app} ${lock.isHeld}`);
  }
  const dl: Deadlocks = await client.deadlocks();
  const edge: WaitEdge | undefined = dl.cycles[0]?.edges[0];
  const waiterLease: bigint | undefined = edge?.waiter.leaseId;
  const hist: History = await client.history('jobs', { since: 60_000 });
  const ended: HistoryEntry['ended'] | undefined = hist.entries[0]?.ended;
  const granted: bigint | null | undefined = hist.entries[0]?.grantedRevision;
  const careful: Lock = await client.lock('jobs', { timeout: 1_000, detectDeadlock: true });
  await careful.unlock();
  const deadlock: ErrorCodeName = ErrorCode.Deadlock;
  out.push(`${dl.cycles.length} ${waiterLease} ${ended} ${granted} ${deadlock}`);
  const once: Lock | null = await client.tryLock('jobs', { metadata: { app: 'billing' } });
  await once?.unlock();
  const permit = await client.acquirePermit('pool', 2, { leaseTime: 1_000 });
  const freed: boolean = await client.releasePermit('pool', permit.fencingToken);
  {
    await using latch: Latch = await client.latch('shards', 3);
    const after: number = await latch.countDown();
    const now: number = await latch.count();
    await latch.wait({ timeout: 1_000, signal: AbortSignal.timeout(2_000) }).catch(() => {});
    out.push(`${latch.name} ${latch.initial} ${after} ${now} ${freed}`);
  }
  const barrier: Barrier = await client.barrier('start', 1);
  const index: number = await barrier.wait({ timeout: 1_000 });
  out.push(`${barrier.parties} ${index}`);
  barrier.close();
  return out;
}

// The leader loop's types (compiled, not run: test/lead.test.js runs the loop).
export async function leading(client: Client): Promise<bigint[]> {
  const tokens: bigint[] = [];
  const opts: LeadOptions = { value: 'node-1', again: false, retry: 500, lockDelay: 1_000 };
  const loop: LeaderLoop = client.lead('leader', async (term: Term) => {
    tokens.push(term.fencingToken);
    await term.leadership.put('k', 'v');
    if (!term.signal.aborted) await new Promise((r) => term.signal.addEventListener('abort', r, { once: true }));
  }, opts);
  loop.on('lost', (reason: LossReasonName) => void reason);
  loop.on('leader', (l: Leader | null) => void l);
  for await (const ev of loop) {
    const e: LeaderLoopEvent = ev;
    if (e.type === 'elected') tokens.push(e.term.fencingToken);
  }
  await loop.stop();
  return tokens;
}

// Reentrancy, logging and tracing options (compiled, not run: test/reentry.test.js,
// test/logging.test.js and test/otel.test.js run them).
export async function observability(endpoints: string[]): Promise<number> {
  const logger: Logger = { warn: (message: string, fields: LogFields) => console.warn(message, fields.lock, fields.target) };
  const level: LogLevel = 'warn';
  const tracerProvider = { getTracer: (name: string, version?: string) => ({ name, version }) };
  const client = await Client.connect({ endpoints, logger, logLevel: level, tracerProvider });
  await Client.connect({ endpoints, logger: console });
  const outer: bigint = await client.withLock('r', async () => {
    const inner: Lock = await client.lock('r', { reentrant: true, timeout: 0 });
    const again: Lock | null = await client.tryLock('r', { reentrant: true });
    await again?.unlock();
    await inner.unlock();
    return inner.fencingToken;
  }, { reentrant: true });
  const rl: ReentrantLock = client.reentrantLock('r');
  const h: Lock = await rl.lock({ timeout: 1_000 });
  const maybe: Lock | null = await rl.tryLock();
  const count: number = rl.holdCount;
  const held: boolean = rl.isHeld;
  await rl.unlock();
  await rl.withLock(async (l: Lock) => l.key);
  void h; void maybe; void held; void outer;
  return count;
}

// MemStore and etcdlock/testing (type-checked only; test/mem.test.js and test/testing.test.js run them).
export async function memUsage(t: TestContext): Promise<LossReasonName> {
  const store: MemStore = MemStore.open('usage');
  const endpoint: string = store.endpoint;
  const client = await Client.connect({ endpoints: [endpoint] });
  const lock = await client.lock('job');
  const expired: boolean = store.expireLease(lock.leaseId);
  const deleted: boolean = store.deleteKey(lock.key);
  store.silence(1_000);
  store.stall(lock.leaseId, 1_000);
  store.resume();
  const keys: MemKey[] = store.keys('job/');
  const token: bigint = keys[0].createRevision;
  const value: Buffer = keys[0].value;
  void expired; void deleted; void token; void value;
  const mem: MemFixture = memStore(t);
  const vitestShaped: MemFixture = memStore({ onTestFinished: (fn: () => Promise<void>) => { void fn; } });
  await using scoped = memStore();
  const c: Client = await mem.client({ ttl: 3 });
  const reason: LossReasonName = await mem.lose(await c.lock('x'), 'stall', { within: 10_000 });
  const multi: { name: string; reason: LossReasonName } = await mem.lose(await c.lockMany(['a', 'b']));
  const [holder] = (await c.status('x')).holders;
  const none: void = await mem.lose(holder, 'delete');
  const n: number = await withMemStore(async (m) => (await m.client()).ttl);
  const eps: string[] = scoped.endpoints;
  await vitestShaped.close();
  void multi; void none; void n; void eps;
  return reason;
}

// Mistakes the types must catch (tsc fails if any of these stops being an error).
export async function mistakes(client: Client, lock: Lock): Promise<void> {
  // @ts-expect-error the fencing token is a bigint, not a number
  const t: number = lock.fencingToken;
  // @ts-expect-error timeout is a number of milliseconds
  await client.lock('x', { timeout: '5s' });
  // @ts-expect-error tryLock may resolve null
  const l: Lock = await client.tryLock('x');
  // @ts-expect-error no such error code
  const c: ErrorCodeName = 'Oops';
  // @ts-expect-error detectDeadlock is a boolean
  await client.lock('x', { detectDeadlock: 'yes' });
  // @ts-expect-error history's options are an object ({ since } in ms)
  await client.history('x', 60_000);
  // @ts-expect-error values are strings or bytes
  await lock.put('k', 42);
  // @ts-expect-error permits is a number
  await client.acquirePermit('x', '3');
  // @ts-expect-error lockMany takes an array of names
  await client.lockMany('a');
  // @ts-expect-error metadata values are strings
  await client.lock('x', { metadata: { n: 1 } });
  // @ts-expect-error lockMany takes no acquisition options
  await client.lockMany(['a'], { lockDelay: 1000 });
  // @ts-expect-error a latch's count is a number
  await client.latch('x', '3');
  // @ts-expect-error a barrier wait resolves the arrival index, a number
  const i: string = await (await client.barrier('x', 2)).wait();
  // @ts-expect-error lead takes a task function
  client.lead('x', 'task');
  // @ts-expect-error again is a boolean
  client.lead('x', () => 1, { again: 'no' });
  // @ts-expect-error runOnce needs atMost
  await client.runOnce('x', () => 1, { atLeast: 5 });
  const many = await client.lockMany(['a', 'b']);
  // @ts-expect-error a multi-lock's renewal listener takes a Renewal, not ms
  many.onRenewal((ms: number) => ms);
  // @ts-expect-error a multi-lock's state is a string
  const s: boolean = many.state;
  // @ts-expect-error reentrant is a boolean
  await client.lock('x', { reentrant: 'yes' });
  // @ts-expect-error a ReentrantLock's name is fixed at creation
  await client.reentrantLock('x').lock('y');
  // @ts-expect-error no such log level
  await Client.connect({ logLevel: 'loud' });
  // @ts-expect-error a logger's methods take (message, fields)
  await Client.connect({ logger: { warn: (n: number) => n } });
  // @ts-expect-error a lease id is a bigint (lock.leaseId)
  MemStore.open('x').expireLease('1');
  // @ts-expect-error durations are numbers of ms
  MemStore.open('x').silence('1s');
  // @ts-expect-error no such way to lose a hold
  await memStore().lose(lock, 'pause');
  // @ts-expect-error a fixture's clients connect to its store
  await memStore().client({ endpoints: ['mem://x'] });
  // @ts-expect-error a MemStore comes from MemStore.open(name)
  new MemStore();
  void t; void l; void c; void i; void s;
}

// etcdlock/fencing: a pg client (anything with query) fences a write with a lock's token.
import { fence, fenceSql, StaleTokenError, type Queryable } from 'etcdlock/fencing';
async function fencedWrite(db: Queryable, lock: Lock): Promise<void> {
  await db.query('BEGIN');
  try {
    await fence(db, lock.name, lock.fencingToken);
    await db.query('UPDATE accounts SET balance = $1 WHERE id = $2', [110, 'acct-42']);
    await db.query('COMMIT');
  } catch (e) {
    await db.query('ROLLBACK');
    if (e instanceof StaleTokenError) { const newer: bigint | null = e.newest; void newer; }
  }
  const sql: string = fenceSql('my_fence');
  // @ts-expect-error the token is a bigint or a number
  await fence(db, 'r', 'x');
  void sql;
}
void fencedWrite;
