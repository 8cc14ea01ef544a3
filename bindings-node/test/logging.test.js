'use strict';
// Core's log events through the `logger` option and `DEBUG=etcdlock`.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const readline = require('node:readline');
const { Client } = require('..');
const { startEtcd, unique, runNode } = require('./helpers.js');

const FIX = path.join(__dirname, 'fixtures');
let etcd;
const clients = [];

before(async () => {
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

function deleteOutside(prefix) {
  return new Promise((resolve, reject) =>
    execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', '--prefix', prefix], { env: { ...process.env, ETCDCTL_API: '3' } }, (err) =>
      err ? reject(err) : resolve()
    )
  );
}

// A logger recording every call as [level, message, fields]; `waitFor(pred)`
// resolves with the first call matching `pred` (already made, or when made).
function recorder(extra = {}) {
  const calls = [];
  const waiters = [];
  const log = (level) => (message, fields) => {
    calls.push([level, message, fields]);
    for (const w of waiters) if (w.pred(level, message, fields)) w.resolve([level, message, fields]);
  };
  return {
    calls,
    logger: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error'), ...extra },
    waitFor(pred, what, ms = 10000) {
      const hit = calls.find((c) => pred(...c));
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no log call ${what} within ${ms} ms; got ${JSON.stringify(calls)}`)), ms);
        waiters.push({ pred, resolve: (v) => (clearTimeout(t), resolve(v)) });
      });
    },
  };
}

describe('logger option', () => {
  it('a hold lost to an outside delete reaches the logger as warn with lock and reason KeyDeleted', async () => {
    const rec = recorder();
    const c = await connect({ logger: rec.logger });
    const name = unique('lost');
    const lock = await c.lock(name);
    await deleteOutside(`${name}/`);
    assert.equal(await lock.lost, 'KeyDeleted');
    const [level, message, fields] = await rec.waitFor((l, m, f) => f.lock === name && f.reason === 'KeyDeleted', `for ${name}`);
    assert.equal(level, 'warn');
    assert.equal(message, 'lock lost');
    assert.equal(fields.target, 'etcdlock::guard::loss');
    // Default level info: no debug call (the acquisition's debug event came first).
    assert.deepEqual(rec.calls.filter(([l]) => l === 'debug'), []);
    await assert.rejects(lock.unlock(), (e) => e.code === 'LockLost');
  });

  it('the level follows logLevel, else the logger\'s own level; core forwards what the most verbose sink wants', async () => {
    const quiet = recorder({ level: 'warn' }); // pino's and winston's `level`
    const chatty = recorder();
    const a = await connect({ logger: quiet.logger });
    await connect({ logger: chatty.logger, logLevel: 'debug' });
    const name = unique('levels');
    const lock = await a.lock(name);
    // Core's events are process-wide: the debug logger sees a's acquisition too.
    const [, msg, f] = await chatty.waitFor((l, m, fl) => l === 'debug' && fl.lock === name, `debug for ${name}`);
    assert.equal(msg, 'acquired');
    assert.equal(f.fencing_token, String(lock.fencingToken));
    await deleteOutside(`${name}/`);
    await quiet.waitFor((l, m, fl) => l === 'warn' && fl.lock === name, `warn for ${name}`);
    assert.deepEqual(quiet.calls.filter(([l]) => l === 'debug' || l === 'info'), []);
  });

  it('a bad logger or logLevel is InvalidArgument', async () => {
    for (const extra of [{ logger: 'console' }, { logger: {} }, { logLevel: 'loud' }, { logLevel: 'trace' }]) {
      await assert.rejects(Client.connect({ endpoints: etcd.endpoints, ...extra }), (e) => e.code === 'InvalidArgument', JSON.stringify(extra));
    }
  });

  it('a process with a client and a logger ends by itself', async () => {
    const r = await runNode([path.join(FIX, 'logger-exit.js'), etcd.endpoints.join(','), unique('exit')], { timeout: 30000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'open');
  });
});

describe('DEBUG=etcdlock', () => {
  // Run the fixture with DEBUG, until a stderr line matches `until`; then let it finish.
  async function run(debug, name, until, { deleteWhenHeld = false } = {}) {
    const child = spawn(process.execPath, [path.join(FIX, 'debug-logger.js'), etcd.endpoints.join(','), name], {
      env: { ...process.env, DEBUG: debug },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise((r) => child.once('exit', (code) => r(code)));
    const lines = [];
    try {
      const out = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      assert.deepEqual(JSON.parse((await out.next()).value), { held: true });
      if (deleteWhenHeld) await deleteOutside(`${name}/`);
      for await (const line of readline.createInterface({ input: child.stderr })) {
        lines.push(line);
        if (until.test(line)) break;
      }
      child.stdin.write('go\n');
      assert.equal(await exited, 0, lines.join('\n'));
      return lines;
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }

  it('prints core\'s events to stderr, in the debug package\'s format', { timeout: 60000 }, async () => {
    const name = unique('dbg');
    const lines = await run('etcdlock', name, new RegExp(`etcdlock:debug acquired lock=${name} `));
    const line = lines.find((l) => l.includes(`lock=${name}`));
    assert.match(line, new RegExp(`^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z etcdlock:debug acquired lock=${name} fencing_token=\\d+$`));
  });

  it('a pattern picks levels: etcdlock:warn prints the loss, not the acquisition before it', { timeout: 60000 }, async () => {
    const name = unique('dbgwarn');
    const lines = await run('other,etcdlock:warn', name, new RegExp(`etcdlock:warn lock lost lock=${name} reason=KeyDeleted$`), { deleteWhenHeld: true });
    assert.deepEqual(lines.filter((l) => l.includes('etcdlock:debug')), []);
  });
});
