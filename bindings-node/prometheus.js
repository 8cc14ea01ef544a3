'use strict';
/**
 * etcdlock's metrics in a prom-client registry (prom-client is an optional
 * peer dependency: install it yourself):
 *
 *   const { register } = require('etcdlock/prometheus');
 *   register(client, { labels: { service: 'orders' } }); // prom-client's default registry
 *
 * Families and names are core's one list (`etcdlock_acquire_seconds`,
 * `etcdlock_held`, `etcdlock_lost_total`, ...), the same Java's Micrometer
 * binder, Python's collector and `etcdlock run --metrics-listen` expose.
 * Each scrape reads the client's counters (no etcd request); a closed client
 * contributes nothing.
 */

// One scrape renders the client's text once for all its families.
const FRESH_MS = 100;

function unescape(v) {
  return v.replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c));
}

/** Prometheus' text format as families: `{ name, help, type, values: [{ metricName, labels, value }] }`. */
function parse(text) {
  const families = new Map();
  let current = null;
  for (const line of text.split('\n')) {
    let m;
    if ((m = /^# HELP (\S+) (.*)$/.exec(line))) {
      current = { name: m[1], help: m[2], type: 'untyped', values: [] };
      families.set(m[1], current);
    } else if ((m = /^# TYPE (\S+) (\S+)$/.exec(line))) {
      (families.get(m[1]) ?? current).type = m[2];
    } else if ((m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)) && current) {
      const labels = {};
      for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = unescape(l[2]);
      current.values.push({ metricName: m[1], labels, value: Number(m[3]) });
    }
  }
  return families;
}

/**
 * Register `client`'s metric families in `registry` (default: prom-client's
 * global one), with `labels` on every series. Returns a function that removes
 * them again.
 */
function register(client, { registry, labels = {} } = {}) {
  const reg = registry ?? require('prom-client').register;
  const pairs = Object.entries(labels).map(([k, v]) => [k, String(v)]);
  let cached = null;
  let at = 0;
  const families = () => {
    if (client.closed) return new Map();
    const now = Date.now();
    if (!cached || now - at > FRESH_MS) {
      cached = parse(client.prometheus(Object.fromEntries(pairs)));
      at = now;
    }
    return cached;
  };
  const names = [];
  for (const f of families().values()) {
    const metric = {
      name: f.name,
      help: f.help,
      type: f.type,
      aggregator: 'sum',
      get: async () => {
        const now = families().get(f.name);
        return { name: f.name, help: f.help, type: f.type, aggregator: 'sum', values: now ? now.values : [] };
      },
    };
    reg.registerMetric(metric);
    names.push(f.name);
  }
  return () => {
    for (const n of names) reg.removeSingleMetric(n);
  };
}

module.exports = { register, parse };
