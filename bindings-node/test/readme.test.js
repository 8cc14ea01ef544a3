'use strict';
// Every code block of README.md, run as written against the harness's etcd
// (ETCDLOCK_ENDPOINTS set), one test each, named by README, block number, line
// and first line:
// - ```js: an ES module (`import`) is run as a .mjs file, anything else as a
//   .cjs file; a block that mixes `require` with `import` fails (neither
//   module system runs it);
// - ```ts: compiled by tsc (which lowers `await using` for Node 20) as a .mts
//   module, then run;
// - a block with `<!-- fragment -->` on the line right before its fence is not
//   a whole program: only its syntax is checked (`node --check`, `tsc --noEmit`).
// The files are written under test/.readme/, inside the package, so
// `require('etcdlock')` / `import 'etcdlock'` resolve to this checkout through
// the package's own name (package.json "exports"), with no rewriting.
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { ROOT, startEtcd, runNode } = require('./helpers.js');

const README = path.join(ROOT, 'README.md');
const WORK = path.join(__dirname, '.readme');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

function fencedBlocks(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^```(\S*)\s*$/.exec(lines[i]);
    if (!m) continue;
    let j = i + 1;
    while (j < lines.length && lines[j].trimEnd() !== '```') j++;
    if (j >= lines.length) throw new Error(`${path.basename(file)}:${i + 1}: unclosed code fence`);
    const prev = i > 0 ? lines[i - 1].trim() : '';
    const code = lines.slice(i + 1, j).join('\n') + '\n';
    const first = (code.split('\n').find((l) => l.trim()) || '').trim();
    blocks.push({
      number: blocks.length + 1,
      line: i + 1,
      lang: m[1],
      fragment: prev.startsWith('<!-- fragment') && prev.endsWith('-->'),
      code,
      first,
    });
    i = j;
  }
  return blocks;
}

function moduleStyle(code) {
  const esm = /^\s*(import\s[^(]|import\s*['"{*]|export\s)/m.test(code);
  const cjs = /\brequire\s*\(|\bmodule\.exports\b/.test(code);
  if (esm && cjs) return 'mixed';
  return esm ? 'mjs' : 'cjs';
}

function run(file, args, opts = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file, ...args], { cwd: ROOT, ...opts }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, out: stdout + stderr })
    );
  });
}

// What some blocks promise in their comments, checked on their output.
function checkOutput(block, stdout) {
  const lines = stdout.trim().split('\n');
  if (block.code.includes("client.acquirePermit('transcoders'")) {
    assert.equal(lines[0], 'writer free? false');
    assert.equal(lines[1], 'node-1, epoch 2');
    assert.equal(lines[2], "[ null, 'node-1', 'node-1, epoch 2' ]");
    assert.match(lines[lines.length - 1], /^0 0$/);
  }
  if (block.code.includes("client.runOnce('reports/nightly'")) {
    assert.deepEqual(lines, ['report written', 'undefined']);
  }
  if (block.code.includes("client.latch('nightly-shards'")) {
    assert.deepEqual(lines, ["{ app: 'billing' }", '2']);
  }
  if (block.code.includes('await using lock')) {
    assert.deepEqual(lines, ['held true', 'free again: true']);
  }
}

const BLOCKS = fencedBlocks(README);
const CHECKED = ['js', 'ts'];
// Shell commands and listings: scripts/readme_blocks.py checks them.
const ELSEWHERE = ['sh', 'text'];

let etcd;
before(async () => {
  etcd = await startEtcd();
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
});
after(async () => {
  await etcd.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

it('README.md: every fenced block is js or ts (each has a runner here)', () => {
  assert.ok(BLOCKS.filter((b) => b.lang === 'js').length >= 2);
  const others = BLOCKS.filter((b) => !CHECKED.includes(b.lang) && !ELSEWHERE.includes(b.lang)).map((b) => `block ${b.number} (line ${b.line}): ${b.lang}`);
  assert.deepEqual(others, []);
});

for (const block of BLOCKS.filter((b) => CHECKED.includes(b.lang))) {
  const style = block.lang === 'ts' ? 'mts' : moduleStyle(block.code);
  const kind = block.fragment ? 'fragment' : 'program';
  it(`README.md block ${block.number} (line ${block.line}, ${block.lang} as .${style}, ${kind}): ${block.first}`, async (t) => {
    assert.notEqual(style, 'mixed', 'the block mixes require() with import: neither CommonJS nor an ES module runs it');
    const base = path.join(WORK, `block${block.number}`);
    const env = { ...process.env, ETCDLOCK_ENDPOINTS: etcd.endpoints.join(',') };
    let file;
    if (block.lang === 'ts') {
      const src = `${base}.mts`;
      fs.writeFileSync(src, block.code);
      const tsc = await run(TSC, [
        '--target', 'ES2022', '--module', 'node16', '--moduleResolution', 'node16',
        '--lib', 'ES2022,ESNext.Disposable', '--types', 'node', '--strict', '--skipLibCheck',
        '--rootDir', WORK, ...(block.fragment ? ['--noEmit'] : ['--outDir', WORK]),
        src,
      ]);
      assert.equal(tsc.code, 0, `tsc: ${tsc.out}`);
      if (block.fragment) return;
      file = `${base}.mjs`;
    } else {
      file = `${base}.${style}`;
      fs.writeFileSync(file, block.code);
      const check = await run('--check', [file]);
      assert.equal(check.code, 0, `node --check: ${check.out}`);
      if (block.fragment) return;
    }
    const r = await runNode([file], { env });
    if (r.stdout) t.diagnostic(r.stdout.trimEnd().replace(/\n/g, ' | '));
    assert.equal(r.code, 0, `exit ${r.code} ${r.signal || ''}\n${r.stderr}`);
    checkOutput(block, r.stdout);
  });
}
