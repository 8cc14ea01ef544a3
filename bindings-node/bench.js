#!/usr/bin/env node
'use strict';
/**
 * Uncontended lock+unlock latency from Node, against the raw etcd floor
 * measured in the same run on the same connection:
 *
 *   floor (JS)   = one Promise into the native module doing a raw Txn
 *                  (put with lease if absent) + a raw Delete: the two round
 *                  trips an uncontended lock+unlock cannot avoid.
 *   node         = `await client.lock(name)` + `await lock.unlock()`.
 *   core / floor (Rust) = the same two loops timed inside Rust (no JS), so
 *                  node/core is the binding's own overhead.
 *
 * Then the handoff: 8 concurrent async loops, each with its own Client (its
 * own connection and session), looping lock -> unlock on one name for
 * --handoff acquisitions (default --iterations; 0 skips it) after a tenth as
 * many as warm-up. Handoff = when the next holder's `lock` resolved (its
 * continuation ran) minus when the previous holder called `unlock`, the
 * definition of core_bench's rust_core_handoff (ffi-c/bench/rust) and every
 * binding's bench (bench/languages.sh).
 *
 * Starts its own etcd (testkit harness) unless ETCDLOCK_ENDPOINTS is set.
 *
 *   npm run bench   (node scripts/build.js --release --bench && node bench.js [--iterations 2000] [--handoff N])
 */
const { Client } = require('.');
const native = require('./lib/native.js');

if (typeof native.runtimeRoundTrip !== 'function') {
  console.error('bench.js: this build has no benchmark entry points; run `npm run bench` (builds with --bench)');
  process.exit(2);
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function stats(ns) {
  const s = [...ns].sort((a, b) => a - b);
  return { p50: pct(s, 50) / 1e3, p99: pct(s, 99) / 1e3 }; // microseconds
}

const CONTENDERS = 8;

/** CONTENDERS clients taking turns on one lock for `acquisitions` (+ a tenth as warm-up). */
async function handoff(endpoints, acquisitions) {
  const hr = () => process.hrtime.bigint();
  const warm = Math.floor(acquisitions / 10);
  const total = warm + acquisitions;
  const name = `bench-handoff-${process.pid}`;
  const clients = [];
  for (let k = 0; k < CONTENDERS; k++) clients.push(await Client.connect({ endpoints, ttl: 30 }));
  // Touched only by the holder of the lock (one JS thread: no mutex needed).
  const s = { taken: 0, lastUnlock: null, handoffs: [], waits: [], first: null, last: null };
  const contender = async (c) => {
    for (;;) {
      const t0 = hr();
      const lock = await c.lock(name);
      const at = hr();
      const k = s.taken++;
      if (k >= warm && k < total) {
        if (s.lastUnlock !== null) s.handoffs.push(Number(at - s.lastUnlock));
        s.waits.push(Number(at - t0));
        if (s.first === null) s.first = at;
        s.last = at;
      }
      s.lastUnlock = hr();
      await lock.unlock();
      if (k + 1 >= total) return;
    }
  };
  await Promise.all(clients.map(contender));
  for (const c of clients) await c.close();
  const span = Number(s.last - s.first) / 1e9;
  const h = stats(s.handoffs);
  return { contenders: CONTENDERS, n: s.handoffs.length, p50: h.p50, p99: h.p99, waitP50: stats(s.waits).p50, perSec: span > 0 ? (s.waits.length - 1) / span : 0 };
}

async function main() {
  const i = process.argv.indexOf('--iterations');
  const N = i > 0 ? Number(process.argv[i + 1]) : 2000;
  const j = process.argv.indexOf('--handoff');
  const H = j > 0 ? Number(process.argv[j + 1]) : N;
  let etcd = null;
  let endpoints = process.env.ETCDLOCK_ENDPOINTS && process.env.ETCDLOCK_ENDPOINTS.split(',');
  if (!endpoints) {
    etcd = await require('./test/helpers.js').startEtcd();
    endpoints = etcd.endpoints;
  }
  const client = await Client.connect({ endpoints, ttl: 30 });
  const name = `bench-${process.pid}`;
  const rawKey = `bench-raw-${process.pid}/k`;
  const hr = () => process.hrtime.bigint();

  for (let k = 0; k < 200; k++) {
    await (await client.lock(name)).unlock();
    await client._native().rawTxnDelete(rawKey);
  }
  // Same loop with the held-key watch off (core option watch_held_keys).
  const lean = await Client.connect({ endpoints, ttl: 30, watchHeldKeys: false });
  for (let k = 0; k < 200; k++) await (await lean.lock(`${name}-lean`)).unlock();
  // Interleave the loops so drift in etcd and in the machine's load hits all alike.
  const node = [];
  const floor = [];
  const nodeLean = [];
  const hop = [];
  for (let k = 0; k < N; k++) {
    let t = hr();
    const lock = await client.lock(name);
    await lock.unlock();
    node.push(Number(hr() - t));
    t = hr();
    await client._native().rawTxnDelete(rawKey);
    floor.push(Number(hr() - t));
    t = hr();
    const l2 = await lean.lock(`${name}-lean`);
    await l2.unlock();
    nodeLean.push(Number(hr() - t));
    t = hr();
    await native.runtimeRoundTrip();
    hop.push(Number(hr() - t));
  }
  await lean.close();
  const both = await client._native().coreBench(`${name}-core`, N);
  const core = both.slice(0, N);
  const rustFloor = both.slice(N);
  await client.close();
  const ho = H > 0 ? await handoff(endpoints, H) : null;
  if (etcd) await etcd.stop();

  const r = {
    node: stats(node),
    floorJs: stats(floor),
    core: stats(core),
    floorRust: stats(rustFloor),
    nodeNoWatch: stats(nodeLean),
    hop: stats(hop),
    handoff: ho,
  };
  const f = (x) => x.toFixed(0).padStart(7);
  console.log(`uncontended lock+unlock, ${N} iterations (microseconds)`);
  console.log(`                          p50     p99`);
  console.log(`node lock+unlock      ${f(r.node.p50)} ${f(r.node.p99)}`);
  console.log(`raw Txn+Delete (JS)   ${f(r.floorJs.p50)} ${f(r.floorJs.p99)}`);
  console.log(`node, watchHeldKeys=false ${f(r.nodeNoWatch.p50).trimStart()} ${f(r.nodeNoWatch.p99)}`);
  console.log(`JS->runtime->JS hop   ${f(r.hop.p50)} ${f(r.hop.p99)}   (no etcd work)`);
  console.log(`core lock+unlock      ${f(r.core.p50)} ${f(r.core.p99)}   (timed in Rust)`);
  console.log(`raw Txn+Delete (Rust) ${f(r.floorRust.p50)} ${f(r.floorRust.p99)}   (timed in Rust)`);
  const ratio = (a, b) => (a / b).toFixed(2);
  console.log(`node / floor (JS)   p50 ${ratio(r.node.p50, r.floorJs.p50)}x  p99 ${ratio(r.node.p99, r.floorJs.p99)}x`);
  console.log(`node(watchHeldKeys=false) / floor (JS) p50 ${ratio(r.nodeNoWatch.p50, r.floorJs.p50)}x`);
  console.log(`node / floor (Rust) p50 ${ratio(r.node.p50, r.floorRust.p50)}x`);
  console.log(`node / core         p50 ${ratio(r.node.p50, r.core.p50)}x  p99 ${ratio(r.node.p99, r.core.p99)}x`);
  if (ho) {
    console.log(`${CONTENDERS} clients on one lock, ${H} acquisitions: handoff (unlock -> next holder) p50 ${f(ho.p50).trimStart()} us` +
      `  p99 ${f(ho.p99).trimStart()} us  wait p50 ${f(ho.waitP50).trimStart()} us  ${ho.perSec.toFixed(0)} acquisitions/s`);
  }
  console.log(JSON.stringify({ iterations: N, ...r }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
