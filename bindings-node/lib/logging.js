'use strict';
// Core's log events (a hold acquired or released: debug; an etcd member
// failing over, the watch stream re-created: info; keep-alives failing, a
// hold lost, an unlock that could not reach etcd: warn) for the `logger`
// option of Client.connect, or stderr under `DEBUG=etcdlock`.
//
// Core's events are process-wide (one subscriber per process, records
// delivered on this thread through a threadsafe function that never keeps
// the event loop alive). Each distinct logger of an open client gets every
// record at or above its level; core forwards only what some sink wants.
const native = require('./native.js');
const { invalid } = require('./errors.js');

const METHODS = ['error', 'warn', 'info', 'debug'];
const RANK = { silent: 0, error: 1, warn: 2, info: 3, debug: 4 };
// The level names of pino and winston (and `fatal`/`trace`), as core's four.
const ALIASES = { fatal: 'error', http: 'info', verbose: 'debug', trace: 'debug', silly: 'debug' };

// Sinks of open clients: logger object -> { level (explicit or null), clients }.
const loggers = new Map();
// Clients logging to stderr under DEBUG (no logger of their own).
let debugClients = 0;
let installed = false;

function rankOfName(name) {
  if (typeof name !== 'string') return undefined;
  const n = ALIASES[name] ?? name;
  return Object.prototype.hasOwnProperty.call(RANK, n) ? RANK[n] : undefined;
}

/** The `logLevel` option: one of debug, info, warn, error, silent. */
function checkLevel(level) {
  if (level === undefined || level === null) return null;
  const r = rankOfName(level);
  if (r === undefined || ALIASES[level] !== undefined) {
    throw invalid(`logLevel must be one of ${Object.keys(RANK).reverse().join(', ')}, got ${JSON.stringify(level)}`);
  }
  return level;
}

function checkLogger(logger) {
  if (logger === undefined || logger === null) return null;
  if ((typeof logger !== 'object' && typeof logger !== 'function') || !METHODS.some((m) => typeof logger[m] === 'function')) {
    throw invalid('logger must be an object with debug/info/warn/error(message, fields) methods (console, pino, winston, ...)');
  }
  return logger;
}

// How verbose a logger sink is now: the `logLevel` option, else the logger's
// own `level` (pino, winston), else info.
function sinkRank(logger, explicit) {
  if (explicit !== null) return RANK[explicit];
  return rankOfName(logger.level) ?? RANK.info;
}

// The `debug` package's DEBUG convention: comma- or space-separated
// patterns, `*` a wildcard, a leading `-` skips. `etcdlock` (or a pattern
// matching it, such as `*`) enables every level; `etcdlock:warn` one.
function debugRank(env = process.env.DEBUG) {
  if (!env) return 0;
  const names = [];
  const skips = [];
  for (const p of env.split(/[\s,]+/)) {
    if (!p) continue;
    const re = (s) => new RegExp(`^${s.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*?')}$`);
    if (p[0] === '-') skips.push(re(p.slice(1)));
    else names.push(re(p));
  }
  let rank = 0;
  for (const m of METHODS) {
    const ns = `etcdlock:${m}`;
    if (skips.some((r) => r.test(ns) || r.test('etcdlock'))) continue;
    if (names.some((r) => r.test(ns) || r.test('etcdlock'))) rank = Math.max(rank, RANK[m]);
  }
  return rank;
}

function deliver(err, rec) {
  if (err || !rec) return;
  const rank = RANK[rec.level];
  const fields = { target: rec.target };
  for (const [k, v] of rec.fields) fields[k] = v;
  for (const [logger, sink] of loggers) {
    if (rank > sinkRank(logger, sink.level) || typeof logger[rec.level] !== 'function') continue;
    try {
      logger[rec.level](rec.message, { ...fields });
    } catch {
      // A failing logger loses this record, nothing else.
    }
  }
  if (debugClients > 0 && rank <= debugRank()) {
    const text = rec.fields.map(([k, v]) => ` ${k}=${v}`).join('');
    process.stderr.write(`${new Date().toISOString()} etcdlock:${rec.level} ${rec.message}${text}\n`);
  }
}

// Tell core the most verbose level any sink wants now.
function apply() {
  let rank = debugClients > 0 ? debugRank() : 0;
  for (const [logger, sink] of loggers) {
    const methods = METHODS.filter((m) => typeof logger[m] === 'function').map((m) => RANK[m]);
    rank = Math.max(rank, Math.min(sinkRank(logger, sink.level), Math.max(0, ...methods)));
  }
  if (rank > 0 && !installed) {
    installed = true;
    native.forwardLogs(deliver);
  }
  native.setLogLevel(rank);
}

/**
 * Register a client's sink: its `logger` (at `level`, or the logger's own),
 * or stderr when `DEBUG` asks for etcdlock. Returns the function that
 * unregisters it (at the client's close).
 */
function addSink(logger, level) {
  if (logger) {
    const sink = loggers.get(logger) ?? { level, clients: 0 };
    if (level !== null) sink.level = level;
    sink.clients += 1;
    loggers.set(logger, sink);
    apply();
    return once(() => {
      sink.clients -= 1;
      if (sink.clients === 0) loggers.delete(logger);
      apply();
    });
  }
  if (debugRank() === 0) return () => {};
  debugClients += 1;
  apply();
  return once(() => {
    debugClients -= 1;
    apply();
  });
}

function once(fn) {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

module.exports = { addSink, checkLogger, checkLevel, debugRank };
