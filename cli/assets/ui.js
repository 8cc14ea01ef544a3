// etcdlock ui: the page. Plain JS, no build step, no dependency.
// The server pushes the locks over server-sent events (api/events): a
// snapshot first, then a diff per read of etcd (see cli/src/ui/feed.rs).
"use strict";

const $ = (s) => document.querySelector(s);
const SVG = "http://www.w3.org/2000/svg";

// What the page knows. `starts` maps a contender's key to when its key was
// created, on the server's clock (ms since the epoch).
const state = {
  locks: new Map(), rows: new Map(), starts: new Map(),
  seq: -1, revision: 0, skew: 0, cycles: [], cycleNames: new Set(), config: null,
};

// For tests and for curious operators: when things were drawn.
const probe = window.etcdlockUi = {
  firstPaint: null, updates: 0, lastApplyMs: 0, seen: {}, errors: [],
};

function esc(s) {
  return String(s).replace(/[\u0000-\u001f\u007f\\]/g, (c) =>
    c === "\\" ? "\\\\" : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "-";
  if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

const serverNow = () => Date.now() + state.skew;

function who(c) {
  if (c.foreign) return "foreign (etcdctl, Go)";
  let s = (c.host || "?") + ":" + (c.pid ?? "?");
  if (c.language) s += " " + c.language;
  const meta = Object.entries(c.metadata || {}).map(([k, v]) => esc(k) + "=" + esc(v));
  return meta.length ? s + " " + meta.join(" ") : s;
}

function kindOf(st) {
  const permits = (st.holders[0] || st.waiters[0] || {}).permits;
  if (st.kind === "semaphore" && permits) return "semaphore (" + permits + " permits)";
  return st.kind || "lock";
}

// A contender's start on the server's clock, kept from the first read
// that showed its key (later diffs leave unchanged locks out).
function started(c, nowMs) {
  let s = state.starts.get(c.key);
  if (s === undefined && c.age_ms !== null && c.age_ms !== undefined) {
    s = nowMs - c.age_ms;
    state.starts.set(c.key, s);
  }
  return s;
}

function since(c) {
  const s = state.starts.get(c.key);
  return el("span", s === undefined ? {} : { "data-start": String(s) }, s === undefined ? "-" : fmtMs(serverNow() - s));
}

function waitingCount(st) {
  const local = new Map();
  for (const c of st.holders.concat(st.waiters)) local.set(c.lease_id, c.local_waiters || 0);
  let n = 0;
  for (const v of local.values()) n += v;
  return Math.max(st.waiters.length, n);
}

function holderCell(st) {
  if (!st.holders.length) return el("span", { class: "dim" }, "free");
  if (st.kind === "election") {
    const h = st.holders[0];
    const value = new TextDecoder().decode(new Uint8Array(h.value || []));
    return el("span", {}, "leader ", el("b", {}, esc(value) || "(no value)"), " ", el("span", { class: "dim" }, who(h)));
  }
  if (st.holders.length > 1 || st.kind === "semaphore") {
    const permits = st.holders[0].permits;
    const head = permits ? st.holders.length + "/" + permits + " permits: " : st.holders.length + " holding: ";
    return el("span", {}, head, st.holders.map(who).join(", "));
  }
  return el("span", {}, who(st.holders[0]));
}

function waitersCell(st) {
  const n = waitingCount(st);
  if (!n) return el("span", { class: "dim" }, "none");
  const list = el("ol", { class: "waiters" });
  for (const w of st.waiters.slice(0, 3)) list.append(el("li", {}, who(w), " ", since(w)));
  const more = n - Math.min(3, st.waiters.length);
  return el("div", {}, el("b", { class: "count" }, String(n)), list,
    more > 0 ? el("span", { class: "dim" }, "+" + more + " more" + (n > st.waiters.length ? " (some queued inside their clients)" : "")) : null);
}

function row(st) {
  const h = st.holders[0];
  const tr = el("tr", {
    "data-name": st.name, "data-token": st.holders.map((c) => c.fencing_token).join(","),
    "data-waiters": String(waitingCount(st)),
  },
  el("td", { class: "name" }, el("a", { href: "#/lock/" + encodeURIComponent(st.name) }, esc(st.name))),
  el("td", { "data-label": "kind" }, kindOf(st)),
  el("td", { "data-label": "holder" }, holderCell(st)),
  el("td", { "data-label": "token", class: "num" }, h ? h.fencing_token : "-"),
  el("td", { "data-label": "held", class: "num" }, h ? since(h) : "-"),
  el("td", { "data-label": "waiters" }, waitersCell(st)));
  if (state.cycleNames.has(st.name)) tr.classList.add("deadlock");
  if (waitingCount(st)) tr.classList.add("contended");
  return tr;
}

function matches(st) {
  const q = $("#filter").value.trim().toLowerCase();
  if ($("#contended").checked && !waitingCount(st)) return false;
  if (!q) return true;
  const hay = [st.name, st.kind || ""].concat(st.holders.concat(st.waiters).map(who)).join(" ").toLowerCase();
  return q.split(/\s+/).every((w) => hay.includes(w));
}

// Draw every row (first snapshot, filter change) or only `names`.
function renderList(names) {
  const body = $("#locks tbody");
  if (!names) {
    const frag = document.createDocumentFragment();
    state.rows.clear();
    for (const name of [...state.locks.keys()].sort()) {
      const tr = row(state.locks.get(name));
      state.rows.set(name, tr);
      tr.hidden = !matches(state.locks.get(name));
      frag.append(tr);
    }
    body.replaceChildren(frag);
  } else {
    for (const name of names) {
      const old = state.rows.get(name);
      const st = state.locks.get(name);
      if (!st) { if (old) old.remove(); state.rows.delete(name); continue; }
      const tr = row(st);
      tr.hidden = !matches(st);
      state.rows.set(name, tr);
      if (old) { old.replaceWith(tr); continue; }
      // A new name: before the first row whose name sorts after it.
      const next = [...state.rows.keys()].filter((n) => n > name && state.rows.get(n).isConnected).sort()[0];
      body.insertBefore(tr, next ? state.rows.get(next) : null);
    }
  }
  const all = [...state.locks.values()];
  const held = all.filter((s) => s.holders.length).length;
  const waiting = all.reduce((n, s) => n + waitingCount(s), 0);
  $("#summary").textContent = all.length + " locks under \"" + esc(state.config ? state.config.prefix : "") +
    "\": " + held + " held, " + waiting + " waiting; revision " + state.revision;
}

function partyText(p) {
  const whoText = p.owner ? "client " + p.owner : "client (lease " + p.lease_id + ")";
  return whoText + " (" + (p.language || "?") + ", lease " + BigInt(p.lease_id).toString(16) + ")";
}

function renderCycles() {
  const box = $("#deadlocks");
  state.cycleNames = new Set();
  for (const c of state.cycles) for (const e of c.edges) state.cycleNames.add(e.name);
  if (!state.cycles.length) { box.hidden = true; box.replaceChildren(); return; }
  box.hidden = false;
  const items = state.cycles.map((c, i) => el("li", {}, "cycle " + (i + 1) + ":", el("ul", {},
    ...c.edges.map((e) => el("li", {}, partyText(e.waiter), " waits for ",
      el("a", { href: "#/lock/" + encodeURIComponent(e.name) }, "\"" + esc(e.name) + "\""),
      " held by " + partyText(e.holder) + " (fencing token " + e.fencing_token + ")")))));
  box.replaceChildren(el("h2", {}, state.cycles.length + " deadlock" + (state.cycles.length > 1 ? "s" : "") +
    ": clients waiting on each other"), el("ul", {}, ...items));
}

function apply(msg) {
  const t0 = performance.now();
  if (msg.type === "error") { live(false, msg.message); probe.errors.push(msg.message); return; }
  const rev = Number(msg.revision);
  if (msg.type === "diff" && msg.seq <= state.seq) return;
  state.seq = msg.seq;
  state.skew = msg.now_ms - Date.now();
  const before = new Set(state.cycleNames);
  state.cycles = msg.cycles || [];
  renderCycles();
  let changed;
  if (msg.type === "snapshot") {
    if (msg.pending) return;
    state.locks = new Map(msg.locks.map((s) => [s.name, s]));
    changed = null;
  } else {
    for (const s of msg.changed) state.locks.set(s.name, s);
    for (const n of msg.removed) state.locks.delete(n);
    changed = new Set(msg.changed.map((s) => s.name).concat(msg.removed));
    for (const n of before) if (!state.cycleNames.has(n)) changed.add(n);
    for (const n of state.cycleNames) if (!before.has(n)) changed.add(n);
  }
  const keys = new Set();
  for (const s of state.locks.values()) {
    for (const c of s.holders.concat(s.waiters)) { keys.add(c.key); started(c, msg.now_ms); }
  }
  for (const k of [...state.starts.keys()]) if (!keys.has(k)) state.starts.delete(k);
  state.revision = rev;
  renderList(changed ? [...changed] : null);
  const now = Date.now();
  for (const n of changed || state.locks.keys()) probe.seen[n] = { at: now, revision: rev };
  probe.updates++;
  probe.lastApplyMs = performance.now() - t0;
  live(true);
  if (probe.firstPaint === null) {
    requestAnimationFrame(() => { probe.firstPaint = performance.now(); });
  }
  const open = currentLock();
  if (open !== null && (!changed || changed.has(open))) renderLockNow(open);
}

function live(ok, why) {
  const l = $("#live");
  l.textContent = ok ? "live" : "disconnected" + (why ? ": " + why : "");
  l.className = "live " + (ok ? "on" : "off");
}

function connect() {
  const src = new EventSource("api/events");
  src.onmessage = (e) => apply(JSON.parse(e.data));
  src.onerror = () => live(false, "reconnecting");
}

// Every second: the hold and wait times tick on.
function tick() {
  const now = serverNow();
  for (const s of document.querySelectorAll("[data-start]")) {
    if (s.offsetParent !== null) s.textContent = fmtMs(now - Number(s.dataset.start));
  }
}

// ---- one lock's page (#/lock/NAME) -------------------------------------

function currentLock() {
  const m = location.hash.match(/^#\/lock\/(.*)$/);
  return m ? decodeURIComponent(m[1]) : null;
}

function renderLockNow(name) {
  const st = state.locks.get(name) || { name, holders: [], waiters: [], kind: null };
  $("#lock-title").textContent = esc(name);
  $("#lock-kind").textContent = kindOf(st) + (state.cycleNames.has(name) ? " - in a deadlock cycle" : "") +
    (state.locks.has(name) ? "" : " - no key under this name now");
  $("#lock-title").classList.toggle("deadlock", state.cycleNames.has(name));
  const hb = $("#lock-holders tbody");
  hb.replaceChildren(...st.holders.map((c) => el("tr", { "data-token": c.fencing_token },
    el("td", {}, who(c)), el("td", { class: "num" }, c.fencing_token),
    el("td", { class: "num" }, BigInt(c.lease_id).toString(16)), el("td", { class: "num" }, since(c)),
    el("td", {}, releaseButton(name, c.fencing_token)))));
  if (!st.holders.length) hb.append(el("tr", {}, el("td", { colspan: "5", class: "dim" }, "nobody holds it")));
  const wb = $("#lock-waiters tbody");
  wb.replaceChildren(...st.waiters.map((c, i) => el("tr", {},
    el("td", {}, String(i + 1)), el("td", {}, who(c)), el("td", { class: "num" }, c.fencing_token),
    el("td", { class: "num" }, BigInt(c.lease_id).toString(16)), el("td", { class: "num" }, since(c)))));
  const beyond = waitingCount(st) - st.waiters.length;
  if (beyond > 0) wb.append(el("tr", {}, el("td", { colspan: "5", class: "dim" }, "+" + beyond + " waiting inside their clients (not yet queued in etcd)")));
  if (!st.waiters.length && beyond <= 0) wb.append(el("tr", {}, el("td", { colspan: "5", class: "dim" }, "nobody waits")));
}

function releaseButton(name, token) {
  const b = el("button", { type: "button", class: "release", "data-token": token }, "release");
  b.onclick = () => release(name, token);
  return b;
}

async function release(name, token) {
  const out = $("#release-result");
  const secret = $("#release-token").value;
  const headers = { "Content-Type": "application/json" };
  if (secret) headers.Authorization = "Bearer " + secret;
  let text;
  let cls;
  try {
    const r = await fetch("api/release", { method: "POST", headers, body: JSON.stringify({ name, token }) });
    const body = await r.json();
    text = r.status + ": " + (r.ok ? "released \"" + esc(name) + "\" (fencing token " + token + ")" : body.error);
    cls = r.ok ? "ok" : "refused";
  } catch (e) {
    text = "the request failed: " + e;
    cls = "refused";
  }
  out.textContent = text;
  out.className = cls;
}

async function renderLock(name) {
  renderLockNow(name);
  $("#release-result").textContent = "";
  $("#release-mode").textContent = state.config && state.config.release
    ? "releases allowed with the view's token" : "read-only view: releases are refused";
  await loadHistory(name);
}

async function loadHistory(name) {
  const note = $("#history-note");
  const since = $("#history-since").value;
  note.textContent = "reading the history";
  const q = "api/history?name=" + encodeURIComponent(name) + (since ? "&since=" + since : "");
  let h;
  try {
    const r = await fetch(q);
    if (r.status === 404) { note.textContent = "this server has no history API"; return; }
    h = await r.json();
    if (!r.ok) { note.textContent = "history: " + h.error; return; }
  } catch (e) { note.textContent = "history: " + e; return; }
  if (currentLock() !== name) return;
  note.textContent = h.entries.length + " keys queued" + (since ? " in the last " + since : "") +
    "; etcd's history here runs from revision " + h.from_revision + " to " + h.revision +
    (Number(h.from_revision) > 1 ? " (older revisions were compacted)" : " (nothing compacted yet)");
  drawTimeline(h);
  $("#hist-hold").replaceChildren(histogram("hold times", h.entries.map((e) => e.hold_ms)));
  $("#hist-wait").replaceChildren(histogram("wait times", h.entries.map((e) => e.wait_ms)));
  const when = (ms) => (ms ? new Date(ms).toLocaleTimeString() : "-");
  $("#history-table tbody").replaceChildren(...h.entries.slice().reverse().map((e) => el("tr", {},
    el("td", { class: "num" }, e.fencing_token), el("td", {}, who(e)), el("td", {}, when(e.queued_ms)),
    el("td", {}, when(e.granted_ms)), el("td", {}, when(e.ended_ms)), el("td", {}, e.ended),
    el("td", { class: "num" }, fmtMs(e.wait_ms)), el("td", { class: "num" }, fmtMs(e.hold_ms)))));
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

// Holds as bars, one lane per client; the wait before each hold as a thin bar.
function drawTimeline(h) {
  const box = $("#timeline-box");
  const now = serverNow();
  const es = h.entries.filter((e) => e.queued_ms);
  if (!es.length) { box.replaceChildren(el("p", { class: "dim" }, "no key reached etcd in this span")); return; }
  const laneOf = (e) => (e.owner ? e.owner + " " + (e.language || "") : "lease " + BigInt(e.lease_id).toString(16));
  const lanes = [...new Set(es.map(laneOf))];
  const t0 = Math.min(...es.map((e) => e.queued_ms));
  const t1 = Math.max(now, ...es.map((e) => e.ended_ms || 0));
  const W = Math.max(320, box.clientWidth || 800), L = Math.min(160, W * 0.3), R = 8, H = 22, top = 18;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const s = svg("svg", { id: "timeline", width: W, height: top + lanes.length * H + 20, role: "img",
    "aria-label": "who held " + h.name + " when" });
  s.append(svg("text", { x: L, y: 12, class: "axis" }, new Date(t0).toLocaleTimeString()),
    svg("text", { x: W - R, y: 12, class: "axis", "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  lanes.forEach((lane, i) => s.append(svg("text", { x: 2, y: top + i * H + 15, class: "lane" }, lane.slice(0, 24))));
  for (const e of es) {
    const y = top + lanes.indexOf(laneOf(e)) * H;
    const end = e.ended_ms || now;
    const tip = "token " + e.fencing_token + ", " + who(e) + ": waited " + fmtMs(e.wait_ms) + ", held " +
      fmtMs(e.hold_ms) + ", " + e.ended;
    const wEnd = e.granted_ms || end;
    s.append(svg("rect", { class: "wait", x: x(e.queued_ms), y: y + 8, height: 4,
      width: Math.max(1, x(wEnd) - x(e.queued_ms)) }, svg("title", {}, tip)));
    if (e.granted_ms) {
      s.append(svg("rect", { class: "hold " + (e.language || "other"), x: x(e.granted_ms), y: y + 2, height: 16,
        width: Math.max(2, x(end) - x(e.granted_ms)), "data-token": e.fencing_token }, svg("title", {}, tip)));
    }
  }
  box.replaceChildren(s);
}

// A histogram over powers-of-ten-ish buckets (ms).
function histogram(title, values) {
  const v = values.filter((x) => x !== null && x !== undefined);
  const edges = [1, 10, 100, 1000, 10000, 60000, Infinity];
  const labels = ["<1ms", "<10ms", "<0.1s", "<1s", "<10s", "<1m", "1m+"];
  const counts = edges.map(() => 0);
  for (const x of v) counts[edges.findIndex((e) => x < e)]++;
  const max = Math.max(1, ...counts), W = 336, H = 110, bw = W / edges.length;
  const s = svg("svg", { width: W, height: H + 30, class: "hist", role: "img", "aria-label": title });
  s.append(svg("text", { x: 0, y: 12, class: "axis" }, title + " (" + v.length + ")"));
  counts.forEach((c, i) => {
    const bh = (c / max) * (H - 30);
    s.append(svg("rect", { x: i * bw + 2, y: H - bh, width: bw - 4, height: bh, class: "bar" }, svg("title", {}, labels[i] + ": " + c)),
      svg("text", { x: i * bw + bw / 2, y: H + 12, class: "axis", "text-anchor": "middle" }, labels[i]),
      svg("text", { x: i * bw + bw / 2, y: H - bh - 3, class: "axis", "text-anchor": "middle" }, c ? String(c) : ""));
  });
  return s;
}

// ---- run-once jobs -------------------------------------------------------

async function loadOnce() {
  const box = $("#once-body");
  try {
    const r = await fetch("api/once");
    const j = await r.json();
    if (!r.ok) { box.textContent = "run-once jobs: " + j.error; return; }
    if (!j.jobs.length) { box.textContent = "no run-once job under this prefix"; return; }
    const t = el("table", { class: "detail" }, el("thead", {}, el("tr", {}, ...["Job", "Last run began", "By", "Taken until", "Token"].map((h) => el("th", {}, h)))));
    const tb = el("tbody");
    for (const job of j.jobs) {
      tb.append(el("tr", { class: job.taken ? "contended" : "" }, el("td", {}, esc(job.name)),
        el("td", {}, new Date(job.locked_at_ms).toLocaleString()), el("td", {}, job.locked_by + ":" + job.pid),
        el("td", {}, job.taken ? new Date(job.lock_until_ms).toLocaleTimeString() + " (taken)" : "free since " + new Date(job.lock_until_ms).toLocaleTimeString()),
        el("td", { class: "num" }, job.revision)));
    }
    t.append(tb);
    box.replaceChildren(t, el("p", { class: "dim" }, "The next run is each node's schedule (cron, @Scheduled): etcd only knows the last one." + (j.truncated ? " (first 500 jobs)" : "")));
  } catch (e) { box.textContent = "run-once jobs: " + e; }
}

// ---- routing -------------------------------------------------------------

function route() {
  const name = currentLock();
  $("#list-view").hidden = name !== null;
  $("#lock-view").hidden = name === null;
  if (name !== null) renderLock(name);
}

async function main() {
  try {
    state.config = await (await fetch("api/config")).json();
    $("#prefix").textContent = state.config.prefix ? "under \"" + esc(state.config.prefix) + "\"" : "all locks";
  } catch (e) { live(false, "no server"); }
  $("#filter").addEventListener("input", () => renderList(null));
  $("#contended").addEventListener("change", () => renderList(null));
  $("#history-since").addEventListener("change", () => { const n = currentLock(); if (n !== null) loadHistory(n); });
  window.addEventListener("hashchange", route);
  route();
  connect();
  loadOnce();
  setInterval(tick, 1000);
  setInterval(() => { if (currentLock() === null) loadOnce(); }, 10000);
}

main();
