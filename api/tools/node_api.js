#!/usr/bin/env node
// The TypeScript declarations the npm package `etcdlock` ships, without comments.
//
// Usage: node api/tools/node_api.js OUTDIR   (scripts/api_check.sh: OUTDIR = api/node or a temp dir)
// Writes OUTDIR/<name>.d.ts for every *.d.ts named in bindings-node/package.json's
// "files" (what `npm pack` puts in the package: bindings-node/pack-main.sh copies
// the same files), after checking that every "types" entry of package.json
// ("types" and each export's "types") is one of them. The declarations are
// hand-written and committed (napi-rs generates none here: bindings-node's
// build writes only the .node module), so the record is the shipped files
// themselves with their comments removed (doc comments are not API) and
// trailing spaces and blank lines dropped; everything else is kept as written.
"use strict";
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "..", "..", "bindings-node");
const out = process.argv[2];
if (!out) {
  console.error("usage: node api/tools/node_api.js OUTDIR");
  process.exit(2);
}
const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
const shipped = pkg.files.filter((f) => f.endsWith(".d.ts"));
const typesNamed = [pkg.types, ...Object.values(pkg.exports || {}).map((e) => (typeof e === "object" ? e.types : undefined))]
  .filter(Boolean)
  .map((t) => t.replace(/^\.\//, ""));
for (const t of typesNamed) {
  if (!shipped.includes(t)) {
    console.error(`node_api.js: package.json names types ${t}, which its "files" does not ship`);
    process.exit(1);
  }
}

// Removes // and /* */ comments outside string and template literals.
function stripComments(src) {
  let out = "";
  let i = 0;
  const n = src.length;
  while (i < n) {
    const c = src[i];
    const d = src[i + 1];
    if (c === "/" && d === "/") {
      while (i < n && src[i] !== "\n") i++;
    } else if (c === "/" && d === "*") {
      const end = src.indexOf("*/", i + 2);
      if (end < 0) throw new Error("unterminated comment");
      i = end + 2;
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < n && src[j] !== c) j += src[j] === "\\" ? 2 : 1;
      out += src.slice(i, j + 1);
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

fs.mkdirSync(out, { recursive: true });
for (const f of shipped.sort()) {
  const src = fs.readFileSync(path.join(root, f), "utf8");
  const text = stripComments(src)
    .split("\n")
    .map((l) => l.replace(/\s+$/, ""))
    .filter((l) => l.length > 0)
    .join("\n");
  fs.writeFileSync(path.join(out, f), text + "\n");
}
