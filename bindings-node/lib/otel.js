'use strict';
// OpenTelemetry spans (the same names and attributes in every etcdlock
// language): `etcdlock.acquire` around lock / tryLock / campaign, and
// `etcdlock.hold` from acquisition to the hold's end (unlock or loss).
// `@opentelemetry/api` is an optional peer dependency, looked up once; without
// it (and without a `tracerProvider` option) nothing here runs. With the API
// but no SDK the global provider's tracer makes non-recording spans, and the
// hold is not followed.
const { invalid } = require('./errors.js');
const { onHoldEnd } = require('./guard.js');
const { version: VERSION } = require('../package.json');

const SCOPE = 'etcdlock';
// The API's enum values (stable in the OpenTelemetry specification), so a
// `tracerProvider` works without the API package's constants.
const KIND_INTERNAL = 0;
const STATUS_ERROR = 2;

let api; // undefined: not looked up yet; null: not installed
function otelApi() {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api');
    } catch {
      api = null;
    }
  }
  return api;
}

/**
 * The tracer a client makes its spans with: from `provider` when given, else
 * from the global tracer provider (`trace.getTracer('etcdlock', version)`),
 * else null (no `@opentelemetry/api`).
 */
function tracerOf(provider) {
  if (provider !== undefined && provider !== null) {
    if (typeof provider !== 'object' || typeof provider.getTracer !== 'function') {
      throw invalid('tracerProvider must be an OpenTelemetry TracerProvider (with getTracer(name, version))');
    }
    return provider.getTracer(SCOPE, VERSION);
  }
  const a = otelApi();
  return a ? a.trace.getTracer(SCOPE, VERSION) : null;
}

// An acquisition's outcome attribute for an error code; the others are errors.
const NOT_ERRORS = { Timeout: 'timeout', WouldBlock: 'would_block', Cancelled: 'cancelled' };

/**
 * Spans of one client: `acquire(operation, name, start)` runs `start()` (it
 * resolves a Lock, or null for a try that found the lock taken) inside an
 * `etcdlock.acquire` span and starts the `etcdlock.hold` span of a fresh hold.
 */
class Spans {
  #tracer;
  // Open hold spans by `key@token`: a re-entry (another handle of the same
  // hold) joins its hold's span.
  #holds = new Map();

  constructor(tracer) {
    this.#tracer = tracer;
  }

  async acquire(operation, name, start) {
    const span = this.#tracer.startSpan('etcdlock.acquire', {
      kind: KIND_INTERNAL,
      attributes: { 'etcdlock.lock.name': String(name), 'etcdlock.operation': operation },
    });
    if (!span.isRecording()) {
      span.end();
      return start();
    }
    try {
      const lock = await start();
      if (lock === null) {
        span.setAttribute('etcdlock.outcome', 'would_block');
      } else {
        span.setAttributes({ 'etcdlock.outcome': 'acquired', 'etcdlock.fencing_token': tokenOf(lock) });
        this.#hold(lock);
      }
      return lock;
    } catch (e) {
      const code = e && typeof e.code === 'string' ? e.code : 'Internal';
      if (code in NOT_ERRORS) {
        span.setAttribute('etcdlock.outcome', NOT_ERRORS[code]);
      } else {
        span.setAttributes({ 'etcdlock.outcome': 'error', 'error.type': code });
        span.setStatus({ code: STATUS_ERROR, message: e && e.message });
      }
      throw e;
    } finally {
      span.end();
    }
  }

  // Start the hold span of `lock` (unless it is a re-entry of an open one),
  // ended by core's end-of-hold signal (the one `lock.lost` follows).
  #hold(lock) {
    const k = `${lock.key}@${lock.fencingToken}`;
    if (this.#holds.has(k)) {
      HOLD.set(lock, this.#holds.get(k));
      return;
    }
    const span = this.#tracer.startSpan('etcdlock.hold', {
      kind: KIND_INTERNAL,
      attributes: { 'etcdlock.lock.name': lock.name, 'etcdlock.fencing_token': tokenOf(lock) },
    });
    this.#holds.set(k, span);
    HOLD.set(lock, span);
    const holds = this.#holds;
    // Captures neither the Lock nor its native handle (a forgotten lock can
    // still be collected, which ends the hold and this span).
    onHoldEnd(lock, (err, reason) => {
      holds.delete(k);
      if (reason) {
        span.addEvent('etcdlock.lost', { 'etcdlock.loss.reason': reason });
        span.setAttribute('etcdlock.end', 'lost');
        span.setStatus({ code: STATUS_ERROR, message: `lock lost (${reason})` });
      } else {
        span.setAttribute('etcdlock.end', 'released');
      }
      span.end();
    });
  }
}

// A lock's hold span, for `withLock` to run its callback in.
const HOLD = new WeakMap();

/** Run `fn()` with `lock`'s hold span as the active span (when there is one and the API is present). */
function inHold(lock, fn) {
  const span = HOLD.get(lock);
  const a = span && otelApi();
  if (!a) return fn();
  return a.context.with(a.trace.setSpan(a.context.active(), span), fn);
}

// int64 as OpenTelemetry JS carries it: a number (exact below 2^53).
function tokenOf(lock) {
  return Number(lock.fencingToken);
}

module.exports = { tracerOf, Spans, inHold };
