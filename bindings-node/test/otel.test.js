'use strict';
// OpenTelemetry spans (etcdlock.acquire, etcdlock.hold) captured by the SDK's
// in-memory exporter, against a real etcd.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const api = require('@opentelemetry/api');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { Client } = require('..');
const { version } = require('../package.json');
const { startEtcd, unique, until } = require('./helpers.js');

const ERROR = api.SpanStatusCode.ERROR;
const UNSET = api.SpanStatusCode.UNSET;

// Ended spans: the in-memory exporter has them; `ended(pred)` awaits the first
// matching one (a span processor tells when each span ends).
function capture() {
  const exporter = new InMemorySpanExporter();
  const waiters = [];
  const notify = {
    onStart() {},
    onEnd(span) {
      for (const w of waiters.splice(0)) {
        if (w.pred(span)) w.resolve(span);
        else waiters.push(w);
      }
    },
    forceFlush: async () => {},
    shutdown: async () => {},
  };
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), notify] });
  const ended = (pred, what, ms = 10000) => {
    const hit = exporter.getFinishedSpans().find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no span ${what} ended within ${ms} ms`)), ms);
      waiters.push({ pred, resolve: (s) => (clearTimeout(t), resolve(s)) });
    });
  };
  return { exporter, provider, ended };
}

const global = capture();
// The other client of a case (the holder a waiter waits for) reports here.
const elsewhere = capture();
let etcd;
const clients = [];

before(async () => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.trace.setGlobalTracerProvider(global.provider);
  etcd = await startEtcd();
});

after(async () => {
  for (const c of clients) await c.close();
  await etcd.stop();
});

async function connect(extra) {
  const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5, ...extra });
  clients.push(c);
  return c;
}

const ms = ([s, ns]) => s * 1000 + ns / 1e6;
const acquireOf = (name, operation = 'lock') => (s) =>
  s.name === 'etcdlock.acquire' && s.attributes['etcdlock.lock.name'] === name && s.attributes['etcdlock.operation'] === operation;
const holdOf = (name) => (s) => s.name === 'etcdlock.hold' && s.attributes['etcdlock.lock.name'] === name;

function deleteOutside(prefix) {
  return new Promise((resolve, reject) =>
    execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', '--prefix', prefix], { env: { ...process.env, ETCDCTL_API: '3' } }, (err) =>
      err ? reject(err) : resolve()
    )
  );
}

describe('etcdlock.acquire', () => {
  it('a lock that waits for another client\'s release: the span covers the wait; outcome acquired with the token', async () => {
    const [a, b] = [await connect(), await connect({ tracerProvider: elsewhere.provider })];
    const name = unique('wait');
    const held = await b.lock(name);
    const pending = a.lock(name);
    await until(async () => (await a._rawKeys(`${name}/`)).length === 2, { what: 'the waiter key' });
    const waitFrom = performance.now();
    // Hold on a while after the waiter queued, so the wait is measurable.
    await new Promise((r) => setTimeout(r, 200));
    const releasedAt = performance.now();
    await held.unlock();
    const lock = await pending;
    const span = await global.ended(acquireOf(name), `acquire of ${name}`);
    assert.ok(ms(span.duration) >= releasedAt - waitFrom, `span ${ms(span.duration)} ms, waited ${releasedAt - waitFrom} ms`);
    assert.equal(span.kind, api.SpanKind.INTERNAL);
    assert.deepEqual(span.instrumentationScope, { name: 'etcdlock', version, schemaUrl: undefined });
    assert.deepEqual(span.attributes, {
      'etcdlock.lock.name': name,
      'etcdlock.operation': 'lock',
      'etcdlock.outcome': 'acquired',
      'etcdlock.fencing_token': Number(lock.fencingToken),
    });
    assert.equal(span.status.code, UNSET);
    await lock.unlock();
  });

  it('a timeout is outcome timeout with status unset; a taken tryLock is would_block', async () => {
    const [a, b] = [await connect(), await connect({ tracerProvider: elsewhere.provider })];
    const name = unique('timeout');
    const held = await b.lock(name);
    await assert.rejects(a.lock(name, { timeout: 50 }), (e) => e.code === 'Timeout');
    const span = await global.ended(acquireOf(name), `acquire of ${name}`);
    assert.deepEqual(span.attributes, { 'etcdlock.lock.name': name, 'etcdlock.operation': 'lock', 'etcdlock.outcome': 'timeout' });
    assert.equal(span.status.code, UNSET);
    assert.equal(await a.tryLock(name), null);
    const tried = await global.ended(acquireOf(name, 'try_lock'), `try_lock of ${name}`);
    assert.equal(tried.attributes['etcdlock.outcome'], 'would_block');
    assert.equal(tried.status.code, UNSET);
    await held.unlock();
  });

  it('bad input is outcome error with error.type InvalidArgument and status ERROR', async () => {
    const a = await connect();
    const name = unique('bad');
    await assert.rejects(a.lock(name, { timeout: -1 }), (e) => e.code === 'InvalidArgument');
    const span = await global.ended(acquireOf(name), `acquire of ${name}`);
    assert.deepEqual(span.attributes, {
      'etcdlock.lock.name': name,
      'etcdlock.operation': 'lock',
      'etcdlock.outcome': 'error',
      'error.type': 'InvalidArgument',
    });
    assert.equal(span.status.code, ERROR);
  });

  it('campaign has its own operation', async () => {
    const a = await connect();
    const name = unique('elect');
    const l = await a.campaign(name, 'me');
    const span = await global.ended(acquireOf(name, 'campaign'), `campaign of ${name}`);
    assert.equal(span.attributes['etcdlock.outcome'], 'acquired');
    assert.equal(span.attributes['etcdlock.fencing_token'], Number(l.fencingToken));
    await l.resign();
    await global.ended(holdOf(name), `hold of ${name}`);
  });
});

describe('etcdlock.hold', () => {
  it('a hold ended by unlock: end released, status unset', async () => {
    const a = await connect();
    const name = unique('released');
    const lock = await a.lock(name);
    await lock.unlock();
    const span = await global.ended(holdOf(name), `hold of ${name}`);
    assert.deepEqual(span.attributes, {
      'etcdlock.lock.name': name,
      'etcdlock.fencing_token': Number(lock.fencingToken),
      'etcdlock.end': 'released',
    });
    assert.equal(span.kind, api.SpanKind.INTERNAL);
    assert.equal(span.status.code, UNSET);
    assert.deepEqual(span.events, []);
  });

  it('a hold lost to an outside delete, while nobody calls anything: event etcdlock.lost (KeyDeleted), end lost, status ERROR', async () => {
    const a = await connect();
    const name = unique('lost');
    const lock = await a.lock(name);
    await deleteOutside(`${name}/`);
    const span = await global.ended(holdOf(name), `hold of ${name}`);
    assert.equal(span.attributes['etcdlock.end'], 'lost');
    assert.equal(span.attributes['etcdlock.fencing_token'], Number(lock.fencingToken));
    assert.deepEqual(
      span.events.map((e) => [e.name, e.attributes]),
      [['etcdlock.lost', { 'etcdlock.loss.reason': 'KeyDeleted' }]]
    );
    assert.equal(span.status.code, ERROR);
    await assert.rejects(lock.unlock(), (e) => e.code === 'LockLost');
  });

  it('re-entries share their hold\'s span, which ends with the last handle', async () => {
    const a = await connect();
    const name = unique('reentry');
    const rl = a.reentrantLock(name);
    const g1 = await rl.lock();
    await rl.lock();
    await rl.unlock();
    assert.equal(g1.state, 'held');
    await rl.unlock();
    const hold = await global.ended(holdOf(name), `hold of ${name}`);
    assert.equal(hold.attributes['etcdlock.end'], 'released');
    const finished = global.exporter.getFinishedSpans();
    assert.equal(finished.filter(holdOf(name)).length, 1);
    assert.equal(finished.filter(acquireOf(name)).length, 2);
  });

  it('withLock runs its callback in the hold span', async () => {
    const a = await connect();
    const name = unique('with');
    let inner;
    await a.withLock(name, async () => {
      inner = api.trace.getTracer('test').startSpan('inside');
      inner.end();
    });
    const hold = await global.ended(holdOf(name), `hold of ${name}`);
    const span = global.exporter.getFinishedSpans().find((s) => s.spanContext().spanId === inner.spanContext().spanId);
    assert.equal(span.parentSpanContext.spanId, hold.spanContext().spanId);
  });
});

describe('tracerProvider option', () => {
  it('spans go to the given provider, not the global one', async () => {
    const own = capture();
    const a = await connect({ tracerProvider: own.provider });
    const name = unique('own');
    const lock = await a.lock(name);
    await lock.unlock();
    await own.ended(holdOf(name), `hold of ${name}`);
    assert.equal(own.exporter.getFinishedSpans().filter(acquireOf(name)).length, 1);
    assert.deepEqual(global.exporter.getFinishedSpans().filter((s) => s.attributes['etcdlock.lock.name'] === name), []);
  });

  it('a tracerProvider without getTracer is InvalidArgument', async () => {
    await assert.rejects(Client.connect({ endpoints: etcd.endpoints, tracerProvider: {} }), (e) => e.code === 'InvalidArgument');
  });
});
