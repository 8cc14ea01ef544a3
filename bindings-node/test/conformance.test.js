'use strict';
// The conformance table (conformance/cases.json, read at test time), run by
// the Node binding against a real etcd from the harness. Every language's
// suite runs the same table; conformance/README.md defines the steps and how
// each outcome maps to Node's idiom (an `Error` whose string `code` is the
// error name; `tryLock` resolving `null` is `would_block`).
// With ETCDLOCK_CONFORMANCE_BACKEND=mem it runs against the in-process etcd
// (`mem://conformance`) instead: every case but those marked `etcd_only`;
// etcdctl reaches that store at the URL it writes under ETCDLOCK_MEM_URL_DIR.
// There a case with `"etcd": "private"` gets a store of its own
// (`mem://conf-ID`), whose `silence` and `resume` the `etcd` step's `pause`
// and `resume` become; the `mem` step (the fault controls, `mem_only` cases)
// acts on the case's store through `MemStore`, which every case ends resumed.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { Client, ErrorCode, LossReason, MemStore } = require('..');
const { ROOT, startEtcd, unique } = require('./helpers.js');

const LANG = 'node';
const MEM = process.env.ETCDLOCK_CONFORMANCE_BACKEND === 'mem';
const MEM_STORE = 'conformance';
if (MEM && !process.env.ETCDLOCK_MEM_URL_DIR) {
  process.env.ETCDLOCK_MEM_URL_DIR = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'etcdlock-mem-'));
}
const TABLE = path.join(ROOT, '..', 'conformance', 'cases.json');
const table = JSON.parse(fs.readFileSync(TABLE, 'utf8'));
const forUs = (c) => !Array.isArray(c.langs) || c.langs.includes(LANG);
// The etcd run leaves out the cases that use the store's fault controls, the mem run those about etcd itself.
const cases = table.cases.filter((c) => forUs(c) && !(MEM ? c.etcd_only : c.mem_only));
/** A pause with no `for_ms` on mem://: a silence longer than any case (the case resumes it). */
const LONG_SILENCE_MS = 3600e3;
const ran = new Set();

let etcd;

before(async () => {
  etcd = MEM ? { endpoints: [`mem://${MEM_STORE}`], stop: async () => {} } : await startEtcd();
});

after(async () => {
  await etcd.stop();
});

/** Where etcdctl reaches the in-process store `name` (the URL it wrote under ETCDLOCK_MEM_URL_DIR). */
function memUrl(name) {
  return fs.readFileSync(path.join(process.env.ETCDLOCK_MEM_URL_DIR, `${name}.url`), 'utf8').trim();
}


/** A step's input string: a JSON string, `{repeat, count}`, or `{utf16: [...]}` (lone surrogates kept). */
function text(v, what) {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object') {
    if (typeof v.repeat === 'string') return v.repeat.repeat(v.count);
    if (Array.isArray(v.utf16)) {
      let s = '';
      for (const u of v.utf16) s += String.fromCharCode(u);
      return s;
    }
  }
  throw new Error(`${what}: an input Node cannot express: ${JSON.stringify(v)}`);
}

/** A `names` input: a list of string inputs, or `{prefix, count}`. */
function names(v) {
  if (Array.isArray(v)) return v.map((x) => text(x, 'name'));
  return Array.from({ length: v.count }, (_, i) => `${v.prefix}${i}`);
}

/** A duration or TTL: a JSON number, or "NaN" / "inf" / "-inf" as the float values. */
function num(v) {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return NaN;
  if (v === 'inf') return Infinity;
  if (v === '-inf') return -Infinity;
  throw new Error(`not a number in the table: ${JSON.stringify(v)}`);
}

/** The token an error maps to; an error without a string `code` fails the case. */
function codeOf(e, where) {
  assert.ok(e instanceof Error, `${where}: rejected with a non-Error: ${String(e)}`);
  assert.equal(typeof e.code, 'string', `${where}: rejected with an Error without a string code: ${e.stack}`);
  assert.ok(e.code in ErrorCode, `${where}: rejected with code ${e.code}, not an etcdlock error code: ${e.message}`);
  return e.code;
}

/** Await an API call that must return a Promise: `{ ok, value }` or `{ ok: false, token }`. */
async function settle(fn, where) {
  let p;
  try {
    p = fn();
  } catch (e) {
    assert.fail(`${where}: threw synchronously instead of rejecting: ${e && e.stack}`);
  }
  assert.ok(p && typeof p.then === 'function', `${where}: did not return a Promise`);
  try {
    return { ok: true, value: await p };
  } catch (e) {
    return { ok: false, token: codeOf(e, where) };
  }
}

const tokenOf = (r) => (r.ok ? 'ok' : r.token);

/** etcdctl against `eps`: the case's etcd or store. */
function etcdctl(args, eps) {
  return new Promise((resolve, reject) => {
    execFile(
      'etcdctl',
      ['--endpoints', eps.join(','), ...args],
      { env: { ...process.env, ETCDCTL_API: '3' } },
      (err, stdout, stderr) => (err ? reject(new Error(`etcdctl ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout))
    );
  });
}

/** etcd's own count of the keys under `prefix` (the Range response's `count`; this etcdctl has no --count-only). */
async function countKeys(prefix, eps) {
  const out = JSON.parse(await etcdctl(['get', '--prefix', '--keys-only', '-w', 'json', prefix], eps));
  return out.count ?? 0; // protobuf JSON leaves out a zero count
}

/** Resolve with the loss reason, or fail once `ms` pass: awaits the `lost` Promise, no polling. */
function awaitLost(lock, ms, where) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${where}: no loss reported within ${ms} ms`)), ms);
  });
  return Promise.race([lock.lost, deadline]).finally(() => clearTimeout(timer));
}

/** Milliseconds added to every call's `within_ms` (conformance/README.md, "Time"): set by the clean room's aarch64 runs under qemu-user only. */
const SLACK_MS = Number(process.env.ETCDLOCK_CONFORMANCE_SLACK_MS || 0);

/** The step's `within_ms` / `at_least_ms` bounds on the call's own time. */
function checkTime(step, ms, where) {
  if ('within_ms' in step) assert.ok(ms <= step.within_ms + SLACK_MS, `${where}: took ${ms.toFixed(0)} ms, the table allows ${step.within_ms} ms (+${SLACK_MS} ms slack)`);
  if ('at_least_ms' in step) assert.ok(ms >= step.at_least_ms, `${where}: took ${ms.toFixed(0)} ms, the table wants at least ${step.at_least_ms} ms`);
}

async function runCase(c) {
  const wantsPrivate = c.etcd === 'private';
  // A case that hangs or kills etcd gets an etcd of its own; on mem:// a
  // store of its own, which the `etcd` and `mem` steps act on.
  const store = MEM ? MemStore.open(wantsPrivate ? `conf-${c.id}` : MEM_STORE) : null;
  const priv = wantsPrivate && !MEM ? await startEtcd() : null;
  // The etcd the clients use and the one etcdctl reaches (the same, by its URL on mem://).
  const target = priv ?? (MEM ? { endpoints: [store.endpoint], raw: [memUrl(store.name)] } : etcd);
  try {
    await runSteps(c, { priv, store, endpoints: target.endpoints, raw: target.raw ?? target.endpoints });
  } finally {
    // A case that failed mid-silence leaves its store answering for the next.
    if (store) store.resume();
    if (priv) await priv.stop();
  }
}

/** A `mem` step, or an `etcd` step on mem://, on the case's store. */
function memStep(store, step, guard, where) {
  switch (step.action) {
    case 'pause': // the `etcd` step: a hung etcd is a silent store
    case 'silence':
      store.silence('for_ms' in step ? step.for_ms : LONG_SILENCE_MS);
      break;
    case 'resume':
      store.resume();
      break;
    case 'expire':
      assert.equal(store.expireLease(guard(step.guard).leaseId), true, `${where}: the store has no lease of guard ${step.guard}`);
      break;
    case 'stall':
      assert.ok('for_ms' in step, `${where}: stall needs for_ms`);
      store.stall(guard(step.guard).leaseId, step.for_ms);
      break;
    default:
      assert.fail(`${where}: ${step.op} ${step.action} has no mem:// equivalent: mark the case etcd_only`);
  }
}

async function runSteps(c, { priv, store, endpoints, raw }) {
  const ns = `${unique(`conf-${c.id}`)}/`;
  const base = { endpoints, ttl: 10, namespace: ns };
  const clients = new Map();
  const guards = new Map();
  const client = async (who) => {
    if (!clients.has(who)) clients.set(who, await Client.connect(base));
    return clients.get(who);
  };
  const guard = (v) => {
    assert.ok(guards.has(v), `no guard ${v} (an earlier step did not keep it)`);
    return guards.get(v);
  };
  // `relock`: one ReentrantLock object per (lock, owner) pair (`client.reentrantLock(name)`):
  // each object is its own owner, so an owner name maps onto one object.
  const relocks = new Map();
  const relock = async (step) => {
    const k = JSON.stringify([step.client ?? 'a', step.lock, step.owner ?? 'main']);
    if (!relocks.has(k)) relocks.set(k, (await client(step.client ?? 'a')).reentrantLock(text(step.name, 'name')));
    return relocks.get(k);
  };
  const calls = new Map(); // `"background": true` calls (their settle Promises) by their `as`
  const syncs = new Map(); // latches and barriers by their `as`
  const sync = (v) => {
    assert.ok(syncs.has(v), `no latch or barrier ${v} (an earlier step did not keep it)`);
    return syncs.get(v);
  };
  try {
    for (const [i, step] of c.steps.entries()) {
      const { op } = step;
      const who = step.client ?? 'a';
      const where = `case ${c.id} step ${i} (${op})`;
      const expect = Object.prototype.hasOwnProperty.call(step, `expect_${LANG}`) ? step[`expect_${LANG}`] : step.expect;
      const want = (got) => assert.deepEqual(got, expect, `${where}: got ${JSON.stringify(got)}, the table says ${JSON.stringify(expect)}`);
      if (store && (op === 'etcd' || op === 'mem')) {
        assert.ok(op === 'mem' || c.etcd === 'private', `${where}: the etcd op needs "etcd": "private"`);
        memStep(store, step, guard, where);
        continue;
      }
      assert.notEqual(op, 'mem', `${where}: a mem op in an etcd run: mark the case mem_only`);
      if (op === 'etcd') {
        assert.ok(priv, `${where}: the etcd op needs "etcd": "private"`);
        const cmd = `${step.action} 0${'for_ms' in step ? ` ${step.for_ms}` : ''}`;
        const reply = await priv.command(cmd);
        assert.ok(reply.ok, `${where}: etcd-harness answered ${JSON.stringify(reply)} to ${cmd}`);
        continue;
      }
      const t0 = performance.now();
      switch (op) {
        case 'connect': {
          const o = { ...base };
          for (const [k, v] of Object.entries(step.options)) {
            if (k === 'endpoints') o.endpoints = v.map((e) => text(e, 'endpoint'));
            else if (k === 'ttl') o.ttl = num(v);
            else if (k === 'namespace') o.namespace = text(v, 'namespace');
            else if (k === 'margin_ms') o.margin = num(v);
            else if (k === 'connect_timeout_ms') o.connectTimeout = num(v);
            else if (k === 'request_timeout_ms') o.requestTimeout = num(v);
            else assert.fail(`${where}: unknown connect option ${k}`);
          }
          const r = await settle(() => Client.connect(o), where);
          if (r.ok) {
            if (clients.has(who)) await clients.get(who).close();
            clients.set(who, r.value);
          }
          want(tokenOf(r));
          break;
        }
        case 'lock': {
          const cl = await client(who);
          const name = text(step.name, 'name');
          const opts = acquireOptions(step);
          if (step.background) {
            // Started, not awaited: `join` awaits it.
            calls.set(step.as, settle(() => (opts ? cl.lock(name, opts) : cl.lock(name)), where));
            break;
          }
          const r = await settle(() => (opts ? cl.lock(name, opts) : cl.lock(name)), where);
          if (r.ok && step.as) guards.set(step.as, r.value);
          else if (r.ok) await r.value.unlock();
          want(tokenOf(r));
          break;
        }
        case 'join': {
          assert.ok(calls.has(step.call), `${where}: no background call ${step.call}`);
          const r = await calls.get(step.call);
          calls.delete(step.call);
          if (r.ok) guards.set(step.call, r.value);
          want(tokenOf(r));
          break;
        }
        case 'try_lock': {
          const cl = await client(who);
          const r = await settle(() => cl.tryLock(text(step.name, 'name')), where);
          if (r.ok && r.value !== null && step.as) guards.set(step.as, r.value);
          else if (r.ok && r.value !== null) await r.value.unlock();
          want(r.ok ? (r.value === null ? 'would_block' : 'ok') : r.token);
          break;
        }
        case 'unlock':
          if ('lock' in step) {
            const k = JSON.stringify([who, step.lock, step.owner ?? 'main']);
            assert.ok(relocks.has(k), `${where}: no reentrant lock ${step.lock} of owner ${step.owner ?? 'main'}`);
            want(tokenOf(await settle(() => relocks.get(k).unlock(), where)));
          } else {
            want(tokenOf(await settle(() => guard(step.guard).unlock(), where)));
          }
          break;
        case 'relock': {
          const rl = await relock(step);
          const opts = acquireOptions(step);
          const r = await settle(() => (opts ? rl.lock(opts) : rl.lock()), where);
          if (r.ok && step.as) guards.set(step.as, r.value);
          want(tokenOf(r));
          break;
        }
        case 'acquire_permit':
        case 'read_lock':
        case 'campaign':
        case 'lock_many': {
          const cl = await client(who);
          const opts = acquireOptions(step);
          const start = {
            acquire_permit: () => cl.acquirePermit(text(step.name, 'name'), step.permits, opts),
            read_lock: () => cl.readLock(text(step.name, 'name'), opts),
            campaign: () => cl.campaign(text(step.name, 'name'), text(step.value, 'value'), opts),
            lock_many: () => cl.lockMany(names(step.names), opts),
          }[op];
          const r = await settle(start, where);
          if (r.ok && step.as) guards.set(step.as, r.value);
          else if (r.ok) await r.value.unlock();
          want(tokenOf(r));
          break;
        }
        case 'proclaim': {
          const g = guard(step.guard);
          want(tokenOf(await settle(() => g.proclaim(text(step.value, 'value')), where)));
          break;
        }
        case 'leader': {
          const cl = await client(who);
          const r = await settle(() => cl.leader(text(step.name, 'name')), where);
          want(r.ok ? (r.value === null ? null : r.value.value.toString('utf8')) : r.token);
          break;
        }
        case 'put': {
          const g = guard(step.guard);
          want(tokenOf(await settle(() => g.put(text(step.key, 'key'), text(step.value, 'value')), where)));
          break;
        }
        case 'delete': {
          const g = guard(step.guard);
          want(tokenOf(await settle(() => g.delete(text(step.key, 'key')), where)));
          break;
        }
        case 'get': {
          const g = guard(step.guard);
          const r = await settle(() => g.get(text(step.key, 'key'), 'utf8'), where);
          want(r.ok ? r.value : r.token);
          break;
        }
        case 'close': {
          const cl = await client(who);
          want(tokenOf(await settle(() => cl.close(), where)));
          break;
        }
        case 'state': {
          const s = guard(step.guard).state;
          if (s !== 'held' && s !== 'released') {
            assert.ok(s in LossReason, `${where}: state ${s} is neither held, released nor a loss reason`);
          }
          want(s === 'held' || s === 'released' ? s : 'lost');
          break;
        }
        case 'keys': {
          const prefix = `${ns}${text(step.name, 'name')}/`;
          let n = await countKeys(prefix, raw);
          // With `await`: until the count is the table's (the step's within_ms bounds the wait).
          const until = t0 + (step.await ? step.within_ms : 0);
          while (n !== expect && performance.now() < until) {
            await new Promise((r) => setTimeout(r, 10));
            n = await countKeys(prefix, raw);
          }
          want(n);
          break;
        }
        case 'delete_outside':
          await etcdctl(['del', '--prefix', `${ns}${text(step.name, 'name')}/`], raw);
          break;
        case 'await_lost': {
          const start = Date.now();
          const reason = await awaitLost(guard(step.guard), step.within_ms, where);
          assert.ok(Date.now() - start <= step.within_ms + 50, `${where}: loss reported after ${Date.now() - start} ms`);
          want(reason);
          break;
        }
        case 'token_order': {
          const a = guard(step.first).fencingToken;
          const b = guard(step.second).fencingToken;
          want(a < b ? 'ok' : `tokens not increasing (${a} then ${b})`);
          break;
        }
        case 'token_same': {
          const a = guard(step.first).fencingToken;
          const b = guard(step.second).fencingToken;
          want(a === b ? 'ok' : `tokens differ (${a} and ${b})`);
          break;
        }
        case 'status': {
          const cl = await client(who);
          want(tokenOf(await settle(() => cl.status(text(step.name, 'name')), where)));
          break;
        }
        case 'deadlocks': {
          const cl = await client(who);
          const r = await settle(() => cl.deadlocks(text(step.prefix, 'prefix')), where);
          want(r.ok ? r.value.cycles.length : r.token);
          break;
        }
        case 'history': {
          const cl = await client(who);
          const r = await settle(() => cl.history(text(step.name, 'name')), where);
          want(r.ok ? r.value.entries.map((e) => e.ended) : r.token);
          break;
        }
        case 'release': {
          const cl = await client(who);
          const token = guard(step.guard).fencingToken + BigInt(step.token_offset ?? 0);
          const r = await settle(() => cl.release(text(step.name, 'name'), token), where);
          want(r.ok ? r.value : r.token);
          break;
        }
        case 'latch':
        case 'barrier': {
          const cl = await client(who);
          const name = text(step.name, 'name');
          const r = await settle(() => (op === 'latch' ? cl.latch(name, step.count) : cl.barrier(name, step.parties)), where);
          if (r.ok && step.as) syncs.set(step.as, r.value);
          else if (r.ok) r.value.close();
          want(tokenOf(r));
          break;
        }
        case 'count_down':
          want(tokenOf(await settle(() => sync(step.latch).countDown(), where)));
          break;
        case 'latch_count': {
          const r = await settle(() => sync(step.latch).count(), where);
          want(r.ok ? r.value : r.token);
          break;
        }
        case 'latch_wait':
        case 'barrier_wait': {
          const o = 'timeout_ms' in step ? { timeout: num(step.timeout_ms) } : undefined;
          const h = sync(op === 'latch_wait' ? step.latch : step.barrier);
          want(tokenOf(await settle(() => h.wait(o), where)));
          break;
        }
        default:
          assert.fail(`case ${c.id}: unknown op ${op}`);
      }
      checkTime(step, performance.now() - t0, where);
    }
  } finally {
    // Resumed first, so the clients' close is not held by a silence.
    if (store) store.resume();
    for (const h of syncs.values()) h.close();
    for (const cl of clients.values()) await cl.close();
  }
}

/** A step's acquisition options: `{ timeout, lockDelay, leaseTime, metadata, detectDeadlock }` (ms), or undefined when it has none. */
function acquireOptions(step) {
  const o = {};
  if ('timeout_ms' in step) o.timeout = num(step.timeout_ms);
  if ('lock_delay_ms' in step) o.lockDelay = num(step.lock_delay_ms);
  if ('lease_time_ms' in step) o.leaseTime = num(step.lease_time_ms);
  if ('detect_deadlock' in step) o.detectDeadlock = step.detect_deadlock;
  if ('metadata' in step) o.metadata = Object.fromEntries(Object.entries(step.metadata).map(([k, v]) => [k, text(v, `metadata.${k}`)]));
  return Object.keys(o).length ? o : undefined;
}

describe('conformance table', () => {
  for (const c of cases) {
    it(c.id, { timeout: 60000 }, async () => {
      await runCase(c);
      ran.add(c.id);
    });
  }

  it('every case listed for node ran', () => {
    console.log(`conformance: ${ran.size} of ${table.cases.length} cases ran for ${LANG}${MEM ? ' (mem)' : ''}`);
    const missing = cases.map((c) => c.id).filter((id) => !ran.has(id));
    assert.deepEqual(missing, [], `cases listed for ${LANG} that did not run to the end: ${missing.join(', ')}`);
    assert.ok(cases.length > 0, 'no case is listed for node');
  });
});
