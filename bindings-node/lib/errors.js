'use strict';
// LockError and the mapping of native errors (core's wire form) to it.
const native = require('./native.js');

/** The core's error names, in C status-code order (`ErrorCode.Timeout === 'Timeout'`). */
const ErrorCode = Object.freeze(Object.fromEntries(native.errorCodes().map((c) => [c, c])));
/** Why a held lock ended without `unlock()`. */
const LossReason = Object.freeze(Object.fromEntries(native.lossReasons().map((r) => [r, r])));
const ERRNO = Object.fromEntries(native.errorCodes().map((c, i) => [c, i + 1]));


/**
 * Every error etcdlock rejects with. `code` is the core's error name
 * (`'Timeout'`, `'LockLost'`, ... see `ErrorCode`), `errno` its numeric value,
 * for `LockLost` `reason` says why the hold ended (see `LossReason`), and
 * `retryable` whether the same call may succeed if tried again (core's rule).
 */
class LockError extends Error {
  constructor(code, message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LockError';
    this.code = code;
    this.errno = ERRNO[code] ?? ERRNO.Internal;
    if (options.reason) this.reason = options.reason;
    this.retryable = options.retryable ?? false;
  }
}

const SEP = '\u001f';
// napi's own argument-conversion failures (wrong JS type reached the native side).
const NAPI_TYPE_CODES = new Set([
  'InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected',
  'NumberExpected', 'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected',
  'ArrayBufferExpected', 'DetachableArraybufferExpected',
]);

function fromNative(e) {
  if (e instanceof LockError) return e;
  const msg = e && typeof e.message === 'string' ? e.message : String(e);
  if (msg.startsWith('ETCDLOCK' + SEP)) {
    // Core's wire form: ETCDLOCK, code, loss reason, retryable (1/0), message.
    const [, code, reason, retryable, ...rest] = msg.split(SEP);
    return new LockError(code, rest.join(SEP), { reason: reason || undefined, retryable: retryable === '1' });
  }
  if (e && NAPI_TYPE_CODES.has(e.code)) {
    return new LockError('InvalidArgument', msg, { cause: e });
  }
  return new LockError('Internal', `a bug in etcdlock: ${msg}`, { cause: e });
}

async function call(fn) {
  try {
    return await fn();
  } catch (e) {
    throw fromNative(e);
  }
}

function invalid(message) {
  return new LockError('InvalidArgument', message);
}


module.exports = { ErrorCode, LossReason, LockError, fromNative, call, invalid };
