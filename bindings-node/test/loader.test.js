'use strict';
// On a platform with no native module the package fails at load with an error
// naming the platform and the supported list (faked here: riscv64).
const { it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

it('fails at load on an unsupported platform, naming it and the supported ones', () => {
  const probe = `
    Object.defineProperty(process, 'arch', { value: 'riscv64' });
    try { require(${JSON.stringify(path.join(__dirname, '..'))}); console.log('loaded'); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
  const env = { ...process.env };
  delete env.ETCDLOCK_NATIVE;
  const out = JSON.parse(execFileSync(process.execPath, ['-e', probe], { env, encoding: 'utf8' }));
  assert.equal(out.code, 'Internal');
  assert.match(out.message, new RegExp(`no native module for ${process.platform}-riscv64`));
  assert.match(out.message, /supports linux-x64-gnu, linux-arm64-gnu \(glibc >= 2\.17\)/);
});
