'use strict';
// The Linux side of a platform smoke test (wine-smoke.sh, musl-smoke.sh):
// starts Debian's etcd on 127.0.0.1 (temp data dir, free ports), then runs in
// the guest runtime, from APP (a project with etcdlock and its platform
// package installed):
// 1. bindings-node/README.md's first example (its first ```js block), as
//    written, with ETCDLOCK_ENDPOINTS set;
// 2. guest-exclusion.js while this process, a Linux glibc client (the
//    checkout's build), holds the same lock name.
// Exits non-zero on any failure.
//
//   node drive.js APP GUEST_COMMAND...   (e.g. wine /x/node.exe)
//
// EXPECT_NATIVE: a file name the guest's loaded native module must have
// (e.g. etcdlock.win32-x64-gnu.node).
//
// The guest's stdout and stderr go to files (node.exe under Wine cannot write
// to a Unix pipe) and are printed after it exits.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const [app, ...guest] = process.argv.slice(2);
if (!app || guest.length === 0) {
  console.error('usage: node drive.js APP GUEST_COMMAND...');
  process.exit(2);
}
const ROOT = path.resolve(__dirname, '..', '..');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Debian's etcd, resolved once it logs that it serves clients. */
async function startEtcd(dir) {
  const [client, peer] = [await freePort(), await freePort()];
  const c = `http://127.0.0.1:${client}`;
  const p = `http://127.0.0.1:${peer}`;
  const child = spawn('/usr/bin/etcd', [
    '--name', 'smoke', '--data-dir', path.join(dir, 'etcd'),
    '--listen-client-urls', c, '--advertise-client-urls', c,
    '--listen-peer-urls', p, '--initial-advertise-peer-urls', p,
    '--initial-cluster', `smoke=${p}`, '--log-outputs', 'stderr',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`etcd not ready in 30 s:\n${log.join('\n')}`)), 30_000);
    readline.createInterface({ input: child.stderr }).on('line', (l) => {
      log.push(l);
      if (l.includes('ready to serve client requests')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`etcd exited with ${code}:\n${log.join('\n')}`)));
  });
  child.removeAllListeners('exit');
  return {
    endpoint: `127.0.0.1:${client}`,
    stop: () => new Promise((r) => (child.exitCode !== null ? r() : (child.once('exit', r), child.kill('SIGTERM')))),
  };
}

/** Run the guest command with ARGS in APP; resolve { code, out } (stdout + stderr). */
function runGuest(args, env, timeoutMs = 120_000) {
  const outFile = path.join(app, `guest-${Date.now()}.out`);
  const fd = fs.openSync(outFile, 'w');
  return new Promise((resolve, reject) => {
    const child = spawn(guest[0], [...guest.slice(1), ...args], { cwd: app, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${guest.join(' ')} ${args.join(' ')} did not exit in ${timeoutMs} ms:\n${fs.readFileSync(outFile, 'utf8')}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, out: fs.readFileSync(outFile, 'utf8').replace(/\r\n/g, '\n') });
    });
  });
}

function firstJsBlock(file) {
  const m = /^```js\n([\s\S]*?)^```$/m.exec(fs.readFileSync(file, 'utf8'));
  if (!m) throw new Error(`${file}: no \`\`\`js block`);
  return m[1];
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdlock-smoke-'));
  const etcd = await startEtcd(dir);
  let failed = false;
  const check = (ok, what, detail = '') => {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
    if (!ok) failed = true;
  };
  try {
    const env = { ETCDLOCK_ENDPOINTS: etcd.endpoint };
    const version = await runGuest(['-p', '`${process.platform}-${process.arch} node ${process.version}`'], {});
    check(version.code === 0, 'guest node starts', version.out.trim());

    // 1. The README's first example, as written.
    const example = firstJsBlock(path.join(ROOT, 'README.md'));
    const style = /^\s*import\s/m.test(example) ? 'mjs' : 'cjs';
    fs.writeFileSync(path.join(app, `readme-first.${style}`), example);
    const first = await runGuest([`readme-first.${style}`], env);
    check(first.code === 0 && /etcd round trip/.test(first.out), `README.md's first example (readme-first.${style})`, first.out.trim().replace(/\n/g, ' | '));

    // 2. Exclusion against this Linux client on one name.
    const { Client } = require(ROOT);
    const client = await Client.connect({ endpoints: [etcd.endpoint], ttl: 10 });
    const name = `smoke-${process.pid}`;
    const held = await client.lock(name);
    const request = path.join(app, `release-${process.pid}`);
    fs.rmSync(request, { force: true });
    // Release when the guest asks (it has queued its wait by then).
    const released = new Promise((resolve, reject) => {
      const w = fs.watch(app, () => {
        if (!fs.existsSync(request)) return;
        w.close();
        held.unlock().then(resolve, reject);
      });
    });
    fs.copyFileSync(path.join(__dirname, 'guest-exclusion.js'), path.join(app, 'guest-exclusion.js'));
    const excl = await runGuest(['guest-exclusion.js', etcd.endpoint, name, String(held.fencingToken), path.basename(request)], {});
    const line = excl.out.trim().split('\n').pop();
    // The module the guest loaded: the platform package's (EXPECT_NATIVE: its file name).
    const want = process.env.EXPECT_NATIVE;
    check(excl.code === 0 && (!want || line.includes(want)), `exclusion: Linux client holds ${name} (token ${held.fencingToken}); guest tryLock null, 500 ms lock Timeout, queued lock after release`, line);
    if (excl.code === 0) await released;
    else held.unlock().catch(() => {});
    check(!held.isHeld, 'Linux holder released');
    await client.close();
  } finally {
    await etcd.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (failed) process.exit(1);
})().catch((e) => {
  console.error(`drive.js: ${e.stack || e}`);
  process.exit(1);
});
