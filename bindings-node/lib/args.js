'use strict';
// Argument checks and conversions: JS values to what the native side takes.
const native = require('./native.js');
const { LockError, call, invalid } = require('./errors.js');

// A JS string may hold a lone UTF-16 surrogate, which no UTF-8 string (hence
// no etcd key or value) can represent; napi's conversion would silently turn
// it into U+FFFD and lock or write a different name. Refuse it instead.
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s); // node 18: in a /u regex only lone surrogates match

function checkText(s, what) {
  if (!isWellFormed(s)) {
    throw invalid(`${what} contains a lone UTF-16 surrogate, which is not valid Unicode: ${JSON.stringify(s)}`);
  }
  return s;
}

function checkName(name) {
  if (typeof name !== 'string') throw invalid(`lock name must be a string, got ${typeof name}`);
  checkText(name, 'lock name');
}

function checkOptions(opts, what) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object') throw invalid(`${what} must be an object, got ${typeof opts}`);
  return opts;
}

// Client options for the native side: each with its name and its value's JS
// type (`tls: { ca, ... }` flattened to `ca`, ...). Core finds every option by
// name and checks its value; nothing here knows a particular option.
function nativeOptions(o) {
  // Options of the JavaScript layer only (not core's).
  const { tls, releaseOnExit, logger, logLevel, tracerProvider, ...rest } = o;
  const out = [];
  for (const [name, v] of Object.entries({ ...rest, ...checkOptions(tls, 'tls') })) {
    if (v === undefined || v === null) continue;
    if (typeof v === 'string') out.push({ name, text: checkText(v, name) });
    else if (typeof v === 'number') out.push({ name, number: v });
    else if (typeof v === 'boolean') out.push({ name, flag: v });
    else if (Array.isArray(v) && v.every((e) => typeof e === 'string')) out.push({ name, list: v.map((e) => checkText(e, name)) });
    else throw invalid(`${name} must be a string, number, boolean or array of strings, got ${Array.isArray(v) ? 'an array' : typeof v}`);
  }
  return out;
}

function optNumber(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number') throw invalid(`${what} must be a number, got ${typeof v}`);
  return v;
}

function optString(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${what} must be a string, got ${typeof v}`);
  return checkText(v, what);
}

function optBoolean(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`${what} must be a boolean, got ${typeof v}`);
  return v;
}

function toBytes(v, what) {
  if (typeof v === 'string') return checkText(v, what);
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw invalid(`${what} must be a string, Buffer or Uint8Array, got ${v === null ? 'null' : typeof v}`);
}


function checkSignal(signal) {
  if (signal === undefined || signal === null) return undefined;
  if (typeof signal !== 'object' || typeof signal.addEventListener !== 'function' || !('aborted' in signal)) {
    throw invalid('signal must be an AbortSignal');
  }
  return signal;
}

// The acquisition options beyond the wait, for the native side (core's
// `bridge::Extras`): `lockDelay` and `leaseTime` in ms, `metadata` a plain
// object of strings as [key, value] pairs, `detectDeadlock` a boolean. Only JS types are checked here;
// core checks the values (spans, limits) with the same messages as in every
// language. `undefined` when none is given.
function extrasOf(o) {
  const lockDelay = optNumber(o.lockDelay, 'lockDelay');
  const leaseTime = optNumber(o.leaseTime, 'leaseTime');
  let metadata;
  if (o.metadata !== undefined && o.metadata !== null) {
    const m = o.metadata;
    if (typeof m !== 'object' || Array.isArray(m) || m instanceof Map) {
      throw invalid(`metadata must be a plain object of strings, got ${Array.isArray(m) ? 'an array' : m instanceof Map ? 'a Map' : typeof m}`);
    }
    metadata = Object.entries(m).map(([k, v]) => {
      if (typeof v !== 'string') throw invalid(`metadata.${k} must be a string, got ${v === null ? 'null' : typeof v}`);
      return [checkText(k, 'metadata key'), checkText(v, `metadata.${k}`)];
    });
  }
  const detectDeadlock = optBoolean(o.detectDeadlock, 'detectDeadlock');
  if (lockDelay === undefined && leaseTime === undefined && metadata === undefined && detectDeadlock === undefined) {
    return undefined;
  }
  return { lockDelay, leaseTime, metadata, detectDeadlock };
}

// Run `start(timeout, cancel, extras)` (a native acquisition) with the
// `{ timeout, signal, lockDelay, leaseTime, metadata }` options every
// acquisition takes: `Infinity` waits forever, an aborted signal rejects
// `Cancelled` (cause: the signal's reason) and removes our waiter keys.
// With `extras: false` (lockMany) the acquisition options are refused.
async function acquire(what, options, start, { extras: withExtras = true } = {}) {
  const o = checkOptions(options, 'options');
  if (o.reentrant !== undefined) throw invalid(`${what}: reentrant is taken by lock(), tryLock() and withLock() only`);
  let timeout = optNumber(o.timeout, 'timeout');
  if (timeout === Infinity) timeout = undefined; // wait as long as it takes
  const signal = checkSignal(o.signal);
  const extras = extrasOf(o);
  if (extras && !withExtras) throw invalid(`${what}: lockDelay, leaseTime, metadata and detectDeadlock are not taken here`);
  if (!signal) return call(() => start(timeout, undefined, extras));
  if (signal.aborted) {
    throw new LockError('Cancelled', `waiting for ${what} was aborted`, { cause: signal.reason });
  }
  const cancel = new native.NativeCancel();
  const onAbort = () => cancel.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(() => start(timeout, cancel, extras));
  } catch (e) {
    if (e.code === 'Cancelled' && signal.aborted && e.cause === undefined) {
      throw new LockError('Cancelled', e.message, { cause: signal.reason });
    }
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

module.exports = { checkText, checkName, checkOptions, nativeOptions, optNumber, optString, optBoolean, toBytes, checkSignal, extrasOf, acquire };
