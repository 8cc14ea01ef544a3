'use strict';
// Shared test plumbing: a real etcd from the testkit harness (never a mock),
// unique names, and small await-an-event helpers.
const { spawn, execFile } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const crypto = require('node:crypto');

const ROOT = path.resolve(__dirname, '..');
const WORKSPACE = path.resolve(ROOT, '..');

function harnessPath() {
  if (process.env.ETCD_HARNESS) return process.env.ETCD_HARNESS;
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(WORKSPACE, process.env.CARGO_TARGET_DIR) : path.join(WORKSPACE, 'target');
  return path.join(target, 'debug', 'etcd-harness');
}

/** Start etcd; resolves `{ endpoints, pids, dir, stop() }`. */
function startEtcd(args = []) {
  return new Promise((resolve, reject) => {
    const child = spawn(harnessPath(), args, { stdio: ['pipe', 'pipe', 'inherit'] });
    child.on('error', reject);
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (line) => {
      const info = JSON.parse(line);
      info.stop = () =>
        new Promise((res) => {
          if (child.exitCode !== null) return res();
          child.once('exit', () => res());
          child.stdin.end();
        });
      info.child = child;
      // Commands on the harness's stdin (`pause 0`, `kill 0`, ...): one JSON line answers each.
      info.command = (cmd) =>
        new Promise((res) => {
          rl.once('line', (l) => res(JSON.parse(l)));
          child.stdin.write(`${cmd}\n`);
        });
      // etcd's gRPC proxy in front of etcd: resolves `{ index, endpoint }`;
      // a client connected to `endpoint` is partitioned by `proxyPause(index)`.
      info.proxy = async () => {
        const r = await info.command('proxy');
        return { index: r.proxy, endpoint: r.endpoint };
      };
      info.proxyPause = (i) => info.command(`proxy-pause ${i}`);
      info.proxyResume = (i) => info.command(`proxy-resume ${i}`);
      resolve(info);
    });
    child.once('exit', (code) => reject(new Error(`etcd-harness exited early with ${code}`)));
  });
}

function unique(prefix = 'n') {
  return `${prefix}-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

/** Poll `check` until it returns truthy (an event we cannot subscribe to), bounded. */
async function until(check, { timeout = 10000, every = 20, what = 'condition' } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** `etcdctl get --prefix --keys-only` against the test etcd (an independent check). */
function etcdctlKeys(endpoints, prefix) {
  return new Promise((resolve, reject) => {
    execFile(
      'etcdctl',
      ['--endpoints', endpoints.join(','), 'get', '--prefix', '--keys-only', prefix],
      { env: { ...process.env, ETCDCTL_API: '3' } },
      (err, stdout) => (err ? reject(err) : resolve(stdout.split('\n').filter(Boolean)))
    );
  });
}

/** Run a node script, resolve `{ code, signal, stdout, stderr }`. */
function runNode(args, { env = {}, timeout = 60000, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} did not exit within ${timeout} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeout);
    // 'close', not 'exit': a child's stdout can still hold its last line
    // when 'exit' fires (the mutual-exclusion test once saw exit 0 and an
    // empty stdout).
    child.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

module.exports = { ROOT, harnessPath, startEtcd, unique, until, etcdctlKeys, runNode };
