'use strict';
// RBAC on an etcd of its own (auth enabled with etcdctl): a user granted only the
// prefix `/app/locks/` locks inside it, is rejected `PermissionDenied` outside it,
// and a wrong password is `AuthFailed`.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { Client, LockError } = require('..');
const { startEtcd } = require('./helpers.js');

let etcd;

function etcdctl(...args) {
  execFileSync('etcdctl', ['--endpoints', etcd.endpoints.join(','), ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

before(async () => {
  // Its own etcd: enabling auth must not leak into other test files.
  etcd = await startEtcd();
  etcdctl('user', 'add', 'root:rootpw');
  etcdctl('user', 'grant-role', 'root', 'root');
  etcdctl('role', 'add', 'r');
  etcdctl('role', 'grant-permission', 'r', '--prefix=true', 'readwrite', '/app/locks/');
  etcdctl('user', 'add', 'u:upw');
  etcdctl('user', 'grant-role', 'u', 'r');
  etcdctl('auth', 'enable');
});

after(async () => {
  await etcd.stop();
});

describe('auth', () => {
  it('RBAC PermissionDenied outside the granted prefix, lock inside it, AuthFailed on a wrong password', async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5, username: 'u', password: 'upw' });
    try {
      const lock = await c.lock('/app/locks/job', { timeout: 5000 });
      assert.equal(lock.isHeld, true);
      await lock.unlock();
      await assert.rejects(c.lock('/other/job', { timeout: 5000 }), (e) => {
        assert.ok(e instanceof LockError, String(e));
        assert.equal(e.code, 'PermissionDenied');
        return true;
      });
    } finally {
      await c.close();
    }
    await assert.rejects(
      Client.connect({ endpoints: etcd.endpoints, ttl: 5, username: 'u', password: 'wrong' }),
      (e) => {
        assert.ok(e instanceof LockError, String(e));
        assert.equal(e.code, 'AuthFailed');
        return true;
      }
    );
  });
});
