'use strict';
// etcdlock/prometheus in a prom-client registry: the scrape has core's family
// names, the labels given and the live values; removal and a closed client.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const prom = require('prom-client');
const { Client } = require('..');
const { register, parse } = require('../prometheus');
const { startEtcd, unique } = require('./helpers.js');

let etcd;

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  await etcd.stop();
});

const sample = (families, name, labels) =>
  families.get(name)?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));

describe('etcdlock/prometheus', () => {
  it('registers core\'s families with labels and live values; unregister removes them', async () => {
    const client = await Client.connect({ endpoints: etcd.endpoints });
    const registry = new prom.Registry();
    const unregister = register(client, { registry, labels: { service: 'orders' } });
    const lock = await client.lock(unique('prom'));
    await new Promise((r) => setTimeout(r, 150)); // past the per-scrape cache
    let text = await registry.metrics();
    let fam = parse(text);
    assert.equal(fam.get('etcdlock_held').type, 'gauge');
    assert.equal(sample(fam, 'etcdlock_held', { service: 'orders' }).value, 1);
    for (const n of ['etcdlock_acquire_seconds', 'etcdlock_waiting', 'etcdlock_lost_total', 'etcdlock_keepalive_total']) {
      assert.ok(fam.has(n), `${n} in ${[...fam.keys()]}`);
    }
    await lock.unlock();
    await new Promise((r) => setTimeout(r, 150));
    text = await registry.metrics();
    fam = parse(text);
    assert.equal(sample(fam, 'etcdlock_held', { service: 'orders' }).value, 0);
    const acquired = fam.get('etcdlock_acquire_seconds').values.find((v) => v.metricName === 'etcdlock_acquire_seconds_count' && v.labels.result === 'acquired');
    assert.equal(acquired.value, 1);
    // prom-client's JSON view works on the same metrics.
    const json = await registry.getMetricsAsJSON();
    assert.ok(json.some((m) => m.name === 'etcdlock_held'));
    await client.close();
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(parse(await registry.metrics()).get('etcdlock_held').values.length, 0, 'a closed client contributes nothing');
    unregister();
    assert.equal(registry.getSingleMetric('etcdlock_held'), undefined);
  });
});
