'use strict';
// Every js and ts code block of README.md and of every page of the
// documentation site (../docs/**/*.md), run as written against the harness's
// etcd (ETCDLOCK_ENDPOINTS set), one test each, named by file, line, block
// number and first line:
// - ```js: an ES module (`import`) is run as a .mjs file, anything else as a
//   .cjs file; a block that mixes `require` with `import` fails (neither
//   module system runs it);
// - ```ts: compiled by tsc (which lowers `await using` for Node 20) as a .mts
//   module, then run;
// - a block with `<!-- fragment -->` on the line right before its fence is not
//   a whole program: only its syntax is checked (`node --check`, `tsc --noEmit`);
// - a block that is a node:test file runs as a program too: it passes when
//   its tests do (exit code 0);
// - a block with `<!-- example: PATH -->` there is an excerpt of PATH, a file
//   another test runs (scripts/readme_blocks.py checks that it is one): skipped;
// - a block followed by a line `Prints:` and a ```text block must print exactly
//   that text (stdout, trailing blank space ignored).
// README.md may hold only js, ts, sh and text blocks; a docs page holds blocks
// of every language, and only its js and ts blocks are run here (the others
// have their own suites: scripts/readme_blocks.py says which).
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
const DOCS = path.join(ROOT, '..', 'docs');
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
      end: j + 1,
      lang: m[1],
      fragment: prev.startsWith('<!-- fragment') && prev.endsWith('-->'),
      // `<!-- example: PATH -->`: an excerpt of a file another test runs (scripts/readme_blocks.py checks it is one).
      excerpt: prev.startsWith('<!-- example:'),
      code,
      first,
    });
    i = j;
  }
  // `Prints:` then a ```text block right after a block: its expected output.
  for (let k = 0; k + 1 < blocks.length; k++) {
    const between = lines.slice(blocks[k].end, blocks[k + 1].line - 1).map((l) => l.trim()).filter(Boolean);
    if (blocks[k + 1].lang === 'text' && between.length === 1 && between[0] === 'Prints:') blocks[k].prints = blocks[k + 1].code;
  }
  return blocks;
}

// Every page of the site, sorted, as paths relative to the repository root.
function docsPages(dir = DOCS) {
  const found = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) found.push(...docsPages(p));
    else if (e.name.endsWith('.md')) found.push(p);
  }
  return found.sort();
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
// [file relative to the repository root, its blocks]: README first, then the pages.
const SOURCES = [[path.relative(path.join(ROOT, '..'), README), BLOCKS]].concat(
  docsPages().map((p) => [path.relative(path.join(ROOT, '..'), p), fencedBlocks(p)])
);
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
  assert.ok(BLOCKS.filter((b) => b.lang === 'js').length >= 1, 'the first example');
  const others = BLOCKS.filter((b) => !CHECKED.includes(b.lang) && !ELSEWHERE.includes(b.lang)).map((b) => `block ${b.number} (line ${b.line}): ${b.lang}`);
  assert.deepEqual(others, []);
});

it('docs/: the pages hold js blocks to run', () => {
  assert.ok(SOURCES.slice(1).some(([, blocks]) => blocks.some((b) => b.lang === 'js')));
});

for (const [file, blocks] of SOURCES) for (const block of blocks.filter((b) => CHECKED.includes(b.lang) && !b.excerpt)) {
  const style = block.lang === 'ts' ? 'mts' : moduleStyle(block.code);
  const kind = block.fragment ? 'fragment' : 'program';
  it(`${file}:${block.line} (block ${block.number}, ${block.lang} as .${style}, ${kind}): ${block.first}`, async (t) => {
    assert.notEqual(style, 'mixed', 'the block mixes require() with import: neither CommonJS nor an ES module runs it');
    const base = path.join(WORK, `${file.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-')}-L${block.line}`);
    // A block that is a node:test file runs as `node file.js` runs it (its
    // report on stdout, its exit code 1 on a failure), not as a child of
    // this runner, which NODE_TEST_CONTEXT would make it (an undefined value
    // leaves the variable out of the child's environment).
    const env = { ...process.env, ETCDLOCK_ENDPOINTS: etcd.endpoints.join(','), NODE_TEST_CONTEXT: undefined };
    let script;
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
      script = `${base}.mjs`;
    } else {
      script = `${base}.${style}`;
      fs.writeFileSync(script, block.code);
      const check = await run('--check', [script]);
      assert.equal(check.code, 0, `node --check: ${check.out}`);
      if (block.fragment) return;
    }
    const r = await runNode([script], { env });
    if (r.stdout) t.diagnostic(r.stdout.trimEnd().replace(/\n/g, ' | '));
    assert.equal(r.code, 0, `exit ${r.code} ${r.signal || ''}\n${r.stderr}`);
    checkOutput(block, r.stdout);
    if (block.prints !== undefined) assert.equal(r.stdout.trimEnd(), block.prints.trimEnd(), 'the output differs from the `Prints:` block after it');
  });
}
