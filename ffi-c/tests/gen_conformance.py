#!/usr/bin/env python3
"""Turn conformance/cases.json into a C program of real etcdlock C API calls.

Usage: gen_conformance.py CASES_JSON OUT_C

The program takes the etcd endpoints as argv[1], runs every case listed for
"c" (each in its own namespace), prints one line per failed step and
"conformance: N of M cases ran for c", then "P passed, F failed" (the line
ffi-c/test.sh counts). ffi-c/test.sh runs it at test time; nothing generated
is committed.

With the endpoints mem://NAME (ffi-c/test.sh passes mem://conformance) the
program runs the table against the in-process etcd instead: every case listed
for "c" but those marked "etcd_only" (the etcd run leaves out those marked
"mem_only"); the raw steps (keys, delete_outside) reach that store with
etcdctl at the URL it writes to $ETCDLOCK_MEM_URL_DIR/NAME.url (a fresh
directory when the variable is not set). The `mem` op is the store's fault
controls (etcdlock_mem_expire_lease, _stall, _silence, _resume, on the
guard's lease). The line then reads "conformance: N of M cases ran for c
(mem)".

A case with "etcd": "private" runs against its own etcd: the program starts
$ETCDLOCK_HARNESS for it (pipes on its stdin and stdout, for the `etcd` op's
commands) and stops and reaps it after the case. On mem:// it gets a store of
its own instead, mem://conf-ID, whose silence and resume are the `etcd` op's
pause (for_ms absent: an hour) and resume. After every case, failed or not,
the runner resumes its store. A step with "background": true starts the lock
with etcdlock_lock_async; `join` awaits its callback. A step's within_ms and
at_least_ms bound the library call alone, timed on CLOCK_MONOTONIC.
"""

import json
import sys

LANG = "c"


def c_bytes(b: bytes) -> str:
    """A C string literal for bytes (NUL-terminated by the compiler)."""
    out = []
    for x in b:
        if 32 <= x < 127 and chr(x) not in '"\\?':
            out.append(chr(x))
        else:
            out.append("\\%03o" % x)
    return '"' + "".join(out) + '"'


def text(v, what: str) -> str:
    """A C expression of type `const char *` for an input string."""
    if isinstance(v, str):
        return c_bytes(v.encode())
    if isinstance(v, dict) and "repeat" in v:
        return f'repeat({c_bytes(v["repeat"].encode())}, {int(v["count"])})'
    if isinstance(v, dict) and "bytes" in v:
        return c_bytes(bytes(v["bytes"]))
    raise SystemExit(f"{what}: C cannot express {v!r}")


def expect_of(step):
    return step.get("expect_" + LANG, step.get("expect"))


def bounds(st):
    """The step's time bounds as C arguments (at least, within; -1 = none)."""
    return int(st.get("at_least_ms", -1)), int(st.get("within_ms", -1))


EXTRAS = ("lock_delay_ms", "lease_time_ms", "metadata", "detect_deadlock")


def has_extras(st) -> bool:
    """Whether a lock or acquire_permit step has acquisition options (then it
    goes through the *_ex call with an etcdlock_acquire_options)."""
    return any(k in st for k in EXTRAS)


def acquire_options(st):
    """Lines declaring `ao`, the step's etcdlock_acquire_options (and `meta`)."""
    out = ["        etcdlock_acquire_options ao; etcdlock_acquire_options_init(&ao, sizeof ao);"]
    if "timeout_ms" in st:
        out.append(f"        ao.timeout_ms = INT64_C({int(st['timeout_ms'])});")
    if "lock_delay_ms" in st:
        out.append(f"        ao.lock_delay_ms = INT64_C({int(st['lock_delay_ms'])});")
    if "lease_time_ms" in st:
        out.append(f"        ao.lease_time_ms = INT64_C({int(st['lease_time_ms'])});")
    if "metadata" in st:
        items = []
        for k, v in st["metadata"].items():
            items += [c_bytes(k.encode()), text(v, "metadata value")]
        out.append(f"        const char *meta[] = {{{', '.join(items + ['NULL'])}}};")
        out.append("        ao.metadata = meta;")
    if st.get("detect_deadlock"):
        out.append("        ao.detect_deadlock = 1;")
    return out


def gen_case(idx: int, case) -> str:
    cid = case["id"]
    private = case.get("etcd") == "private"
    lines = [f"static void case_{idx}(void) {{", f'    const char *id = {c_bytes(cid.encode())};',
             "    etcdlock_client *cl[2] = {NULL, NULL};", "    char ns[128];",
             f'    snprintf(ns, sizeof ns, "conf-c-%d-{idx}/", (int)getpid());',
             "    struct harness h = {0, NULL, NULL, \"\"}; (void)h;",
             "    const char *shared_endpoints = ENDPOINTS; (void)shared_endpoints;",
             "    int64_t t0 = 0, took = 0; (void)t0; (void)took;", "    int failed_before = 0; (void)failed_before;",
             "    long keys_n = 0; (void)keys_n;",
             # On mem://, the case's store (the shared one, or mem://conf-ID of
             # its own for "etcd": "private"): the `mem` and `etcd` ops act on it.
             "    etcdlock_mem *store = NULL; (void)store;"]
    guards, multis, latches, barriers = [], [], [], []
    # Calls started with "background": true, awaited by `join`.
    calls = [st["as"] for st in case["steps"] if st.get("background")]
    for c in calls:
        lines.append(f"    struct call c_{c}; call_init(&c_{c});")
    # relock: each (lock, owner)'s handles, latest last (known here: the steps
    # run in order), and one owner number per owner name.
    handles, owners = {}, {}
    for i, st in enumerate(case["steps"]):
        if st["op"] == "relock" and "as" not in st:
            guards.append(f"relock{i}")
        if "as" in st:
            bucket = {"lock_many": multis, "latch": latches, "barrier": barriers}.get(st["op"], guards)
            if st["as"] not in bucket:
                bucket.append(st["as"])
    for g in guards:
        lines.append(f"    etcdlock_guard *g_{g} = NULL;")
    for m in multis:
        lines.append(f"    etcdlock_multi *m_{m} = NULL;")
    for x in latches:
        lines.append(f"    etcdlock_latch *l_{x} = NULL;")
    for x in barriers:
        lines.append(f"    etcdlock_barrier *b_{x} = NULL;")
    lines.append("    int rc; (void)rc;")
    # After the declarations, which `goto done` must not skip.
    lines.append(f"    if (MEM && !mem_open(&store, {'id' if private else 'NULL'})) {{ fail(id, 0, \"no in-process store\", \"one opened\"); goto done; }}")
    if private:
        # Its own etcd: clients a and b, and etcdctl, use its endpoints for
        # this case only. On mem://, its own store mem://conf-ID.
        lines.append('    if (MEM) { ENDPOINTS = mem_endpoint(store); }')
        lines.append('    else if (!harness_start(&h)) { fail(id, 0, "no private etcd-harness", "one started"); goto done; }')
        lines.append("    else ENDPOINTS = h.endpoints;")
    for i, st in enumerate(case["steps"]):
        op = st["op"]
        who = 1 if st.get("client") == "b" else 0
        exp = expect_of(st)
        lines.append(f"    /* step {i}: {op} */")
        # Ops on a guard alone need no client (after a close, none is made
        # again: with etcd hung, connecting would fail the step).
        if op not in ("connect", "etcd", "mem", "join", "state", "await_lost", "token_order", "token_same", "unlock", "put", "get", "delete"):
            lines.append(f"    if (!cl[{who}] && !client_open(&cl[{who}], ns, NULL)) {{ fail(id, {i}, \"connect\", \"default client\"); goto done; }}")
        # await_lost's within_ms is its own wait bound (its argument), not a bound on a call.
        timed = op != "await_lost" and ("within_ms" in st or "at_least_ms" in st)
        start = len(lines)
        if op == "connect":
            o = st["options"]
            lines.append("    {")
            lines.append("        etcdlock_options o; etcdlock_options_init(&o, sizeof o);")
            lines.append("        o.endpoints = ENDPOINTS; o.namespace_prefix = ns; o.ttl_secs = 10;")
            for k, v in o.items():
                if k == "endpoints":
                    lines.append(f"        o.endpoints = {c_bytes(','.join(v).encode())};")
                elif k == "ttl":
                    lines.append(f"        o.ttl_secs = INT64_C({int(v)});")
                elif k == "namespace":
                    lines.append(f"        o.namespace_prefix = {text(v, 'namespace')};")
                elif k == "margin_ms":
                    lines.append(f"        o.margin_ms = INT64_C({int(v)});")
                elif k == "connect_timeout_ms":
                    lines.append(f"        o.connect_timeout_ms = INT64_C({int(v)});")
                elif k == "request_timeout_ms":
                    lines.append(f"        o.request_timeout_ms = INT64_C({int(v)});")
                else:
                    raise SystemExit(f"{cid}: unknown connect option {k}")
            lines.append(f"        if (cl[{who}]) {{ etcdlock_client_free(cl[{who}]); cl[{who}] = NULL; }}")
            lines.append(f"        rc = etcdlock_client_connect(&o, &cl[{who}]);")
            lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("    }")
        elif op == "lock" and st.get("background"):
            if has_extras(st):
                raise SystemExit(f"{cid} step {i}: a background lock takes a timeout only (etcdlock_lock_async)")
            t = st.get("timeout_ms")
            t = "ETCDLOCK_WAIT_FOREVER" if t is None else f"INT64_C({int(t)})"
            lines.append(f"    call_start(&c_{st['as']}, cl[{who}], {text(st['name'], 'name')}, {t});")
        elif op == "join":
            var = st["call"]
            if var not in calls:
                raise SystemExit(f"{cid} step {i}: no background call {var}")
            lines.append(f"    rc = call_join(&c_{var}, &g_{var});")
            lines.append(f"    check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
        elif op in ("lock", "try_lock"):
            name = text(st["name"], "name")
            var = st.get("as")
            target = f"&g_{var}" if var else "&tmp"
            lines.append("    {")
            lines.append("        etcdlock_guard *tmp = NULL; (void)tmp;")
            if op == "lock" and has_extras(st):
                lines.extend(acquire_options(st))
                lines.append(f"        rc = etcdlock_lock_ex(cl[{who}], {name}, &ao, {target});")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            elif op == "lock":
                t = st.get("timeout_ms")
                t = "ETCDLOCK_WAIT_FOREVER" if t is None else f"INT64_C({int(t)})"
                lines.append(f"        rc = etcdlock_lock(cl[{who}], {name}, {t}, {target});")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            else:
                lines.append(f"        rc = etcdlock_try_lock(cl[{who}], {name}, {target});")
                lines.append(f"        check_rc(id, {i}, rc == ETCDLOCK_WOULD_BLOCK ? -1 : rc, {c_bytes(exp.encode())});")
            lines.append("        etcdlock_guard_free(tmp);")
            lines.append("    }")
        elif op == "relock":
            var = st.get("as") or f"relock{i}"
            owner = owners.setdefault(st.get("owner", "main"), len(owners) + 1)
            lines.append("    {")
            lines.extend(acquire_options(st))
            lines.append(f"        rc = etcdlock_lock_reentrant(cl[{who}], {text(st['name'], 'name')}, UINT64_C({owner}), &ao, &g_{var});")
            lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("    }")
            if exp == "ok":
                handles.setdefault((st["lock"], st.get("owner", "main")), []).append(var)
        elif op == "unlock" and "lock" in st:
            stack = handles.get((st["lock"], st.get("owner", "main")))
            if not stack:
                raise SystemExit(f"{cid} step {i}: the owner holds no handle of {st['lock']}")
            lines.append(f"    check_rc(id, {i}, etcdlock_unlock(g_{stack.pop()}), {c_bytes(exp.encode())});")
        elif op == "unlock" and st["guard"] in multis:
            lines.append(f"    check_rc(id, {i}, etcdlock_multi_unlock(m_{st['guard']}), {c_bytes(exp.encode())});")
        elif op == "unlock":
            lines.append(f"    check_rc(id, {i}, etcdlock_unlock(g_{st['guard']}), {c_bytes(exp.encode())});")
        elif op in ("acquire_permit", "read_lock", "campaign", "lock_many"):
            var = st.get("as")
            t = st.get("timeout_ms")
            t = "ETCDLOCK_WAIT_FOREVER" if t is None else f"INT64_C({int(t)})"
            lines.append("    {")
            if op == "lock_many":
                target = f"&m_{var}" if var else "&tmpm"
                lines.append("        etcdlock_multi *tmpm = NULL; (void)tmpm;")
                ns_ = st["names"]
                if isinstance(ns_, list):
                    items = ", ".join(text(x, "name") for x in ns_) or "NULL"
                    lines.append(f"        const char *names[] = {{{items}}};")
                    count = len(ns_)
                else:
                    lines.append(f"        const char **names = seq_names({c_bytes(ns_['prefix'].encode())}, {int(ns_['count'])});")
                    count = int(ns_["count"])
                lines.append(f"        rc = etcdlock_lock_many(cl[{who}], names, {count}, {t}, {target});")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
                lines.append("        etcdlock_multi_free(tmpm);")
            else:
                target = f"&g_{var}" if var else "&tmp"
                name = text(st["name"], "name")
                lines.append("        etcdlock_guard *tmp = NULL; (void)tmp;")
                if op == "acquire_permit" and has_extras(st):
                    lines.extend(acquire_options(st))
                    lines.append(f"        rc = etcdlock_acquire_permit_ex(cl[{who}], {name}, {int(st['permits'])}u, &ao, {target});")
                elif op == "acquire_permit":
                    lines.append(f"        rc = etcdlock_acquire_permit(cl[{who}], {name}, {int(st['permits'])}u, {t}, {target});")
                elif op == "read_lock":
                    lines.append(f"        rc = etcdlock_read_lock(cl[{who}], {name}, {t}, {target});")
                else:
                    lines.append(f"        const char *v = {text(st['value'], 'value')};")
                    lines.append(f"        rc = etcdlock_campaign(cl[{who}], {name}, (const uint8_t *)v, strlen(v), {t}, {target});")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
                lines.append("        etcdlock_guard_free(tmp);")
            lines.append("    }")
        elif op == "proclaim":
            lines.append("    {")
            lines.append(f"        const char *v = {text(st['value'], 'value')};")
            lines.append(f"        check_rc(id, {i}, etcdlock_proclaim(g_{st['guard']}, (const uint8_t *)v, strlen(v)), {c_bytes(exp.encode())});")
            lines.append("    }")
        elif op == "leader":
            lines.append("    {")
            lines.append("        char *k = NULL; uint8_t *v = NULL; size_t n = 0;")
            lines.append(f"        rc = etcdlock_leader(cl[{who}], {text(st['name'], 'name')}, &k, &v, &n, NULL);")
            want = "NULL" if exp is None else c_bytes(exp.encode())
            lines.append(f"        check_get(id, {i}, rc, k ? v : NULL, n, {want});")
            lines.append("        etcdlock_buffer_free((uint8_t *)k); etcdlock_buffer_free(v);")
            lines.append("    }")
        elif op in ("put", "get", "delete"):
            g = f"g_{st['guard']}"
            key = text(st["key"], "key")
            lines.append("    {")
            lines.append(f"        const char *k = {key};")
            if op == "put":
                val = text(st["value"], "value")
                lines.append(f"        const char *v = {val};")
                lines.append(f"        rc = etcdlock_guard_put({g}, (const uint8_t *)k, strlen(k), (const uint8_t *)v, strlen(v));")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            elif op == "delete":
                lines.append(f"        rc = etcdlock_guard_delete({g}, (const uint8_t *)k, strlen(k), NULL);")
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            else:
                lines.append("        uint8_t *v = NULL; size_t n = 0;")
                lines.append(f"        rc = etcdlock_guard_get({g}, (const uint8_t *)k, strlen(k), &v, &n);")
                want = "NULL" if exp is None else c_bytes(exp.encode())
                lines.append(f"        check_get(id, {i}, rc, v, n, {want});")
                lines.append("        etcdlock_buffer_free(v);")
            lines.append("    }")
        elif op == "close":
            # C's close is the free (it closes, then frees); rc = for the timing bracket.
            lines.append(f"    rc = (etcdlock_client_free(cl[{who}]), ETCDLOCK_OK); cl[{who}] = NULL;")
            lines.append(f"    check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
        elif op == "state":
            lines.append(f"    check_str(id, {i}, guard_state(g_{st['guard']}), {c_bytes(exp.encode())});")
        elif op == "keys":
            # With "await": read again (every 10 ms) until the count is the
            # table's or within_ms has passed.
            until = int(st["within_ms"]) if st.get("await") else 0
            if st.get("await") and "within_ms" not in st:
                raise SystemExit(f"{cid} step {i}: an awaited keys step has within_ms")
            lines.append(f"    keys_n = count_keys_await(ns, {text(st['name'], 'name')}, {int(exp)}, {until});")
            lines.append(f"    check_int(id, {i}, keys_n, {int(exp)});")
        elif op == "delete_outside":
            lines.append(f"    delete_outside(ns, {text(st['name'], 'name')});")
        elif op == "await_lost":
            lines.append(f"    check_str(id, {i}, await_lost(g_{st['guard']}, {int(st['within_ms'])}), {c_bytes(exp.encode())});")
        elif op == "status":
            lines.append("    {")
            lines.append("        etcdlock_queue *q = NULL;")
            lines.append(f"        rc = etcdlock_status(cl[{who}], {text(st['name'], 'name')}, &q);")
            lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("        etcdlock_queue_free(q);")
            lines.append("    }")
        elif op == "deadlocks":
            # The number of cycles (the table's expect), or the call's status name.
            lines.append("    {")
            lines.append("        etcdlock_cycles *d = NULL; char n[32];")
            lines.append(f"        rc = etcdlock_deadlocks(cl[{who}], {text(st['prefix'], 'prefix')}, &d);")
            lines.append('        snprintf(n, sizeof n, "%zu", etcdlock_cycles_len(d));')
            lines.append(f"        check_str(id, {i}, rc == ETCDLOCK_OK ? n : etcdlock_status_name(rc), {c_bytes(str(exp).encode())});")
            lines.append("        etcdlock_cycles_free(d);")
            lines.append("    }")
        elif op == "history":
            # Each entry's `ended`, oldest first, as the table's JSON list; or
            # the call's status name.
            want = exp if isinstance(exp, str) else json.dumps(exp, separators=(",", ":"))
            lines.append("    {")
            lines.append("        etcdlock_history_entries *hist = NULL;")
            lines.append(f"        rc = etcdlock_history(cl[{who}], {text(st['name'], 'name')}, -1, &hist);")
            lines.append(f"        check_history(id, {i}, rc, hist, {c_bytes(want.encode())});")
            lines.append("        etcdlock_history_entries_free(hist);")
            lines.append("    }")
        elif op == "release":
            name = text(st["name"], "name")
            off = int(st.get("token_offset", 0))
            want = {True: "true", False: "false"}.get(exp, exp)
            lines.append("    {")
            lines.append("        int64_t tok = 0; int done = 0;")
            lines.append(f"        etcdlock_guard_fencing_token(g_{st['guard']}, &tok);")
            lines.append(f"        rc = etcdlock_release(cl[{who}], {name}, tok + INT64_C({off}), &done);")
            lines.append(f"        check_str(id, {i}, rc != ETCDLOCK_OK ? etcdlock_status_name(rc) : done ? \"true\" : \"false\", {c_bytes(str(want).encode())});")
            lines.append("    }")
        elif op == "latch":
            var = st.get("as")
            target = f"&l_{var}" if var else "&tmpl"
            lines.append("    {")
            lines.append("        etcdlock_latch *tmpl = NULL; (void)tmpl;")
            lines.append(f"        rc = etcdlock_latch_open(cl[{who}], {text(st['name'], 'name')}, INT64_C({int(st['count'])}), {target});")
            lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("        etcdlock_latch_free(tmpl);")
            lines.append("    }")
        elif op == "count_down":
            lines.append(f"    check_rc(id, {i}, etcdlock_latch_count_down(l_{st['latch']}, NULL), {c_bytes(exp.encode())});")
        elif op == "latch_count":
            lines.append("    {")
            lines.append("        int64_t n = -1;")
            lines.append(f"        rc = etcdlock_latch_count(l_{st['latch']}, &n);")
            if isinstance(exp, int) and not isinstance(exp, bool):
                lines.append(f"        if (rc != ETCDLOCK_OK) check_rc(id, {i}, rc, \"{exp}\"); else check_int(id, {i}, (long)n, {exp});")
            else:
                lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("    }")
        elif op in ("latch_wait", "barrier_wait"):
            t = st.get("timeout_ms")
            t = "ETCDLOCK_WAIT_FOREVER" if t is None else f"INT64_C({int(t)})"
            call = f"etcdlock_latch_wait(l_{st['latch']}, {t})" if op == "latch_wait" else f"etcdlock_barrier_wait(b_{st['barrier']}, {t}, NULL)"
            lines.append(f"    rc = {call};")
            lines.append(f"    check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
        elif op == "barrier":
            var = st.get("as")
            target = f"&b_{var}" if var else "&tmpb"
            lines.append("    {")
            lines.append("        etcdlock_barrier *tmpb = NULL; (void)tmpb;")
            lines.append(f"        rc = etcdlock_barrier_open(cl[{who}], {text(st['name'], 'name')}, INT64_C({int(st['parties'])}), {target});")
            lines.append(f"        check_rc(id, {i}, rc, {c_bytes(exp.encode())});")
            lines.append("        etcdlock_barrier_free(tmpb);")
            lines.append("    }")
        elif op == "etcd":
            if not private:
                raise SystemExit(f"{cid}: op etcd needs \"etcd\": \"private\"")
            action = st["action"]
            if action not in ("pause", "resume", "kill"):
                raise SystemExit(f"{cid}: unknown etcd action {action}")
            if "for_ms" in st and action != "pause":
                raise SystemExit(f"{cid}: for_ms goes with pause only")
            cmd = f"{action} 0" + (f" {int(st['for_ms'])}" if "for_ms" in st else "")
            # On mem:// (a case not etcd_only): pause is the store's silence
            # (for_ms absent: an hour, longer than any case), resume its resume.
            if action == "pause":
                mem_call = f"etcdlock_mem_silence(store, INT64_C({int(st.get('for_ms', 3600000))}))"
            elif action == "resume":
                mem_call = "etcdlock_mem_resume(store)"
            else:
                mem_call = None
            if mem_call and not case.get("etcd_only"):
                lines.append(f"    if (MEM) mem_control(id, {i}, {mem_call});")
                lines.append(f"    else harness_cmd(&h, id, {i}, {c_bytes(cmd.encode())});")
            elif not case.get("etcd_only"):
                raise SystemExit(f"{cid}: etcd {action} has no mem:// equivalent: mark the case etcd_only")
            else:
                lines.append(f"    harness_cmd(&h, id, {i}, {c_bytes(cmd.encode())});")
        elif op == "mem":
            if not case.get("mem_only"):
                raise SystemExit(f"{cid}: a mem op in a case run on etcd: mark the case mem_only")
            action = st["action"]
            g = f"g_{st['guard']}" if "guard" in st else None
            if action == "expire":
                lines.append(f"    mem_expire(id, {i}, store, {g});")
            elif action == "stall":
                lines.append(f"    mem_stall(id, {i}, store, {g}, INT64_C({int(st['for_ms'])}));")
            elif action == "silence":
                lines.append(f"    mem_control(id, {i}, etcdlock_mem_silence(store, INT64_C({int(st['for_ms'])})));")
            elif action == "resume":
                lines.append(f"    mem_control(id, {i}, etcdlock_mem_resume(store));")
            else:
                raise SystemExit(f"{cid}: unknown mem action {action}")
        elif op == "token_same":
            lines.append("    {")
            lines.append("        int64_t t1 = 0, t2 = 0;")
            lines.append(f"        etcdlock_guard_fencing_token(g_{st['first']}, &t1); etcdlock_guard_fencing_token(g_{st['second']}, &t2);")
            lines.append(f"        check_str(id, {i}, t1 == t2 ? \"ok\" : \"tokens differ\", {c_bytes(exp.encode())});")
            lines.append("    }")
        elif op == "token_order":
            lines.append("    {")
            lines.append("        int64_t t1 = 0, t2 = 0;")
            lines.append(f"        etcdlock_guard_fencing_token(g_{st['first']}, &t1); etcdlock_guard_fencing_token(g_{st['second']}, &t2);")
            lines.append(f"        check_str(id, {i}, t1 < t2 ? \"ok\" : \"tokens not increasing\", {c_bytes(exp.encode())});")
            lines.append("    }")
        else:
            raise SystemExit(f"{cid}: unknown op {op}")
        if timed:
            # Time the library call alone: the line that calls it (the one assigning
            # rc, or the check around it) is bracketed by the monotonic clock.
            call = next((k for k in range(start, len(lines))
                         if lines[k].lstrip().startswith(("rc = ", "check_rc(id", "harness_cmd(", "keys_n = "))), None)
            if call is None:
                raise SystemExit(f"{cid} step {i}: time bounds on op {op} are not supported")
            pad = lines[call][:len(lines[call]) - len(lines[call].lstrip())]
            lines.insert(call, pad + "failed_before = failed_steps; t0 = mono_ms();")
            lines.insert(call + 2, pad + "took = mono_ms() - t0;")
            lo, hi = bounds(st)
            lines.append(f"    check_time(id, {i}, took, {lo}, {hi}, failed_steps > failed_before);")
    lines.append("    goto done; /* every case has the label in use */")
    lines.append("done:")
    # A case that failed mid-silence must not leave its store silent (for the
    # next case, or for the close below).
    lines.append("    if (store) etcdlock_mem_resume(store);")
    for g in guards:
        lines.append(f"    etcdlock_guard_free(g_{g});")
    for m in multis:
        lines.append(f"    etcdlock_multi_free(m_{m});")
    for x in latches:
        lines.append(f"    etcdlock_latch_free(l_{x});")
    for x in barriers:
        lines.append(f"    etcdlock_barrier_free(b_{x});")
    lines.append("    etcdlock_client_free(cl[0]); etcdlock_client_free(cl[1]);")
    # The clients' free waited for their callbacks: a call never joined has
    # completed by now, and its guard (if any) is the case's to free.
    for c in calls:
        lines.append(f"    call_destroy(&c_{c});")
    lines.append("    etcdlock_mem_free(store);")
    if private:
        lines.append("    ENDPOINTS = shared_endpoints;")
        lines.append("    harness_stop(&h);")
    lines.append("    free_repeats();")
    lines.append("    ran++;")
    lines.append("}")
    return "\n".join(lines)


PRELUDE = r'''/* Generated by ffi-c/tests/gen_conformance.py from conformance/cases.json. Do not edit. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "etcdlock.h"

extern char **environ;

/* The shared etcd's endpoints (argv[1]), or a private one's during its case. */
static const char *ENDPOINTS;
/* argv[1] is mem://NAME: the in-process etcd (the etcd_only cases do not run). */
static int MEM;
static int ran, failed_steps, failed_cases_mark;
static char *repeats[8];
static int nrepeats;

static const char *repeat(const char *s, int count) {
    size_t n = strlen(s), total = n * (size_t)count;
    char *p = malloc(total + 1);
    for (int i = 0; i < count; i++) memcpy(p + (size_t)i * n, s, n);
    p[total] = 0;
    repeats[nrepeats++] = p;
    return p;
}

static char **seqs[4];
static int nseqs, seq_len[4];

/* prefix0 .. prefix(count-1), freed with the repeats at the end of the case. */
static const char **seq_names(const char *prefix, int count) {
    char **v = malloc(sizeof *v * (size_t)count);
    for (int i = 0; i < count; i++) {
        size_t n = strlen(prefix) + 16;
        v[i] = malloc(n);
        snprintf(v[i], n, "%s%d", prefix, i);
    }
    seq_len[nseqs] = count;
    seqs[nseqs++] = v;
    return (const char **)v;
}

static void free_repeats(void) {
    while (nrepeats) free(repeats[--nrepeats]);
    while (nseqs) {
        nseqs--;
        for (int i = 0; i < seq_len[nseqs]; i++) free(seqs[nseqs][i]);
        free(seqs[nseqs]);
    }
}

static void fail(const char *id, int step, const char *got, const char *want) {
    printf("FAIL %s step %d: got %s, the table says %s\n", id, step, got, want);
    failed_steps++;
    failed_cases_mark = 1;
}

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A step's time bounds (within_ms, at_least_ms; -1 = none) against the call's
 * measured ms. A step whose outcome already failed gets its time printed too. */
static void check_time(const char *id, int step, int64_t took, int64_t at_least, int64_t within, int outcome_failed) {
    /* Milliseconds added to every call's within_ms (conformance/README.md,
     * "Time"): set by the clean room's aarch64 runs under qemu-user only. */
    const char *slack = getenv("ETCDLOCK_CONFORMANCE_SLACK_MS");
    if (within >= 0 && slack) {
        within += atoll(slack);
        if (within < 0) within = 0;
    }
    if ((within < 0 || took <= within) && (at_least < 0 || took >= at_least)) {
        if (outcome_failed) printf("     %s step %d took %" PRId64 " ms (in its bounds)\n", id, step, took);
        return;
    }
    if (within >= 0 && took > within) {
        printf("FAIL %s step %d: took %" PRId64 " ms, the table says within %" PRId64 " ms\n", id, step, took, within);
        failed_steps++;
        failed_cases_mark = 1;
    }
    if (at_least >= 0 && took < at_least) {
        printf("FAIL %s step %d: took %" PRId64 " ms, the table says at least %" PRId64 " ms\n", id, step, took, at_least);
        failed_steps++;
        failed_cases_mark = 1;
    }
}

/* A case's private etcd ("etcd": "private"): an etcd-harness child with its
 * stdin and stdout on pipes. Closing its stdin stops etcd and the harness. */
struct harness {
    pid_t pid;
    FILE *in, *out;
    char endpoints[1024]; /* comma-separated, as etcdlock_options.endpoints takes them */
};

/* Start $ETCDLOCK_HARNESS and read its first line, {"endpoints":["..."],...}. */
static int harness_start(struct harness *h) {
    const char *bin = getenv("ETCDLOCK_HARNESS");
    if (!bin || !*bin) {
        printf("ETCDLOCK_HARNESS is not set: no etcd-harness for a private etcd\n");
        return 0;
    }
    int in[2], out[2];
    if (pipe(in) != 0) return 0;
    if (pipe(out) != 0) { close(in[0]); close(in[1]); return 0; }
    /* Close-on-exec everywhere: the harness gets its ends as fds 0 and 1 (dup2
     * clears the flag), and no other child (etcdctl) inherits a pipe, which
     * would keep the harness's stdin open after harness_stop. */
    fcntl(in[0], F_SETFD, FD_CLOEXEC); fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC); fcntl(out[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char *argv[] = {(char *)bin, NULL};
    int err = posix_spawn(&h->pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (err != 0) {
        printf("cannot run %s: %s\n", bin, strerror(err));
        close(in[1]);
        close(out[0]);
        h->pid = 0;
        return 0;
    }
    h->in = fdopen(in[1], "w");
    h->out = fdopen(out[0], "r");
    char *line = NULL;
    size_t cap = 0;
    int ok = 0;
    ssize_t got = getline(&line, &cap, h->out);
    if (got > 0 && line[got - 1] == '\n') line[--got] = 0;
    if (got > 0) {
        const char *p = strstr(line, "\"endpoints\":[");
        size_t n = 0;
        if (p) {
            p += strlen("\"endpoints\":[");
            while (*p == '"') {
                const char *end = strchr(p + 1, '"');
                if (!end || n + (size_t)(end - p) + 1 > sizeof h->endpoints) break;
                if (n) h->endpoints[n++] = ',';
                memcpy(h->endpoints + n, p + 1, (size_t)(end - p - 1));
                n += (size_t)(end - p - 1);
                p = end + 1;
                if (*p == ',') p++;
            }
        }
        h->endpoints[n] = 0;
        ok = n > 0;
    }
    if (!ok) printf("etcd-harness printed no endpoints: %s\n", got > 0 ? line : "(nothing)");
    free(line);
    return ok;
}

/* One command line to the harness and its one-line answer, {"ok":true}. */
static void harness_cmd(struct harness *h, const char *id, int step, const char *cmd) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = -1;
    if (h->in && fprintf(h->in, "%s\n", cmd) > 0 && fflush(h->in) == 0) n = getline(&line, &cap, h->out);
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = 0;
    if (n <= 0 || !strstr(line, "\"ok\":true")) {
        char got[256];
        snprintf(got, sizeof got, "etcd-harness answered \"%s\" to \"%s\"", n > 0 ? line : "nothing", cmd);
        fail(id, step, got, "{\"ok\":true}");
    }
    free(line);
}

/* Close the harness's stdin (it stops etcd and exits), reap it, close its stdout. */
static void harness_stop(struct harness *h) {
    if (h->in) fclose(h->in);
    if (h->pid > 0) {
        int st;
        while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR) {}
    }
    if (h->out) fclose(h->out);
    h->in = h->out = NULL;
    h->pid = 0;
}

static void check_str(const char *id, int step, const char *got, const char *want) {
    if (strcmp(got, want) != 0) fail(id, step, got, want);
}

/* rc -1 stands for try_lock's "would_block" status. */
static void check_rc(const char *id, int step, int rc, const char *want) {
    const char *got = rc == -1 ? "would_block" : rc == ETCDLOCK_OK ? "ok" : etcdlock_status_name(rc);
    check_str(id, step, got, want);
}

/* A history's `ended` values as a JSON list (["released","holding"]), or
 * the call's status name, against the table's. */
static void check_history(const char *id, int step, int rc, const etcdlock_history_entries *h, const char *want) {
    char got[1024] = "[";
    size_t n = etcdlock_history_entries_len(h);
    for (size_t k = 0; k < n && strlen(got) < sizeof got - 64; k++) {
        strcat(got, k ? ",\"" : "\"");
        strcat(got, etcdlock_history_entries_at(h, k)->ended);
        strcat(got, "\"");
    }
    strcat(got, "]");
    check_str(id, step, rc == ETCDLOCK_OK ? got : etcdlock_status_name(rc), want);
}

static void check_int(const char *id, int step, long got, long want) {
    if (got != want) {
        char g[32], w[32];
        snprintf(g, sizeof g, "%ld", got);
        snprintf(w, sizeof w, "%ld", want);
        fail(id, step, g, w);
    }
}

static void check_get(const char *id, int step, int rc, const uint8_t *v, size_t n, const char *want) {
    if (rc != ETCDLOCK_OK) { check_rc(id, step, rc, want ? want : "null"); return; }
    if (!want) { if (v) fail(id, step, "a value", "null"); return; }
    if (!v || n != strlen(want) || memcmp(v, want, n) != 0) fail(id, step, v ? "another value" : "null", want);
}

static int client_open(etcdlock_client **c, const char *ns, const char *unused) {
    (void)unused;
    etcdlock_options o;
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = ENDPOINTS;
    o.namespace_prefix = ns;
    o.ttl_secs = 10;
    o.connect_timeout_ms = 30000; /* valgrind makes the first connect slow */
    if (etcdlock_client_connect(&o, c) == ETCDLOCK_OK) return 1;
    printf("connect: %s\n", etcdlock_last_error_message());
    return 0;
}

static const char *guard_state(const etcdlock_guard *g) {
    int held = 0, reason = 0;
    etcdlock_guard_is_held(g, &held);
    if (held) return "held";
    etcdlock_guard_loss_reason(g, &reason);
    return reason == ETCDLOCK_LOSS_NONE ? "released" : "lost";
}

/* Where etcdctl reaches the store the case's clients use: the endpoints, or for
 * mem://NAME the URL the in-process store wrote to $ETCDLOCK_MEM_URL_DIR/NAME.url
 * when it started (a client of the case has connected before any raw step). */
static const char *raw_endpoints(void) {
    static char url[256];
    if (!MEM) return ENDPOINTS;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.url", getenv("ETCDLOCK_MEM_URL_DIR"), ENDPOINTS + strlen("mem://"));
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(url, 1, sizeof url - 1, f) : 0;
    if (f) fclose(f);
    while (n && (url[n - 1] == '\n' || url[n - 1] == ' ')) n--;
    url[n] = 0;
    if (!n) printf("no URL in %s for the in-process etcd\n", path);
    return url;
}

static int etcdctl(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s %s", raw_endpoints(), args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

static long count_keys(const char *ns, const char *name) {
    char args[512], out[65536];
    snprintf(args, sizeof args, "get --prefix --keys-only '%s%s/'", ns, name);
    if (etcdctl(args, out, sizeof out) != 0) return -1;
    long n = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
        if (*line) n++;
    return n;
}

static void delete_outside(const char *ns, const char *name) {
    char args[512], out[4096];
    snprintf(args, sizeof args, "del --prefix '%s%s/'", ns, name);
    etcdctl(args, out, sizeof out);
}

/* count_keys, read again every 10 ms until it is `want` or until_ms have
 * passed (0: one read): the `keys` step with "await": true. */
static long count_keys_await(const char *ns, const char *name, long want, int64_t until_ms) {
    int64_t end = mono_ms() + until_ms;
    long n = count_keys(ns, name);
    while (n != want && mono_ms() < end) {
        struct timespec ten = {0, 10 * 1000000L};
        nanosleep(&ten, NULL);
        n = count_keys(ns, name);
    }
    return n;
}

/* The case's in-process store (mem runs): its own, mem://conf-ID, for a case
 * with "etcd": "private" (id given), else the run's (argv[1]'s name). */
static int mem_open(etcdlock_mem **store, const char *id) {
    char name[128];
    if (id) snprintf(name, sizeof name, "conf-%s", id);
    else snprintf(name, sizeof name, "%s", ENDPOINTS + strlen("mem://"));
    int rc = etcdlock_mem_open(name, store);
    if (rc != ETCDLOCK_OK) printf("etcdlock_mem_open(\"%s\"): %s\n", name, etcdlock_last_error_message());
    return rc == ETCDLOCK_OK;
}

static const char *mem_endpoint(const etcdlock_mem *store) {
    const char *ep = "";
    etcdlock_mem_endpoint(store, &ep);
    return ep;
}

/* A control of the store (the `mem` op, and the `etcd` op on mem://): it must say OK. */
static void mem_control(const char *id, int step, int rc) {
    if (rc != ETCDLOCK_OK) {
        char got[512];
        snprintf(got, sizeof got, "%s (%s)", etcdlock_status_name(rc), etcdlock_last_error_message());
        fail(id, step, got, "the store's control to succeed");
    }
}

/* `mem` expire: end the guard's lease now; the store must have had it. */
static void mem_expire(const char *id, int step, const etcdlock_mem *store, const etcdlock_guard *g) {
    int64_t lease = 0;
    int existed = 0;
    int rc = etcdlock_guard_lease_id(g, &lease);
    if (rc == ETCDLOCK_OK) rc = etcdlock_mem_expire_lease(store, lease, &existed);
    mem_control(id, step, rc);
    if (rc == ETCDLOCK_OK && !existed) fail(id, step, "no such lease in the store", "the guard's lease");
}

/* `mem` stall: answer nothing to the guard's client (its lease) for ms. */
static void mem_stall(const char *id, int step, const etcdlock_mem *store, const etcdlock_guard *g, int64_t ms) {
    int64_t lease = 0;
    int rc = etcdlock_guard_lease_id(g, &lease);
    if (rc == ETCDLOCK_OK) rc = etcdlock_mem_stall(store, lease, ms);
    mem_control(id, step, rc);
}

/* A call started with "background": true (etcdlock_lock_async), awaited by
 * `join`. Its callback runs on a runtime thread; the clients' free waits for
 * it, so a call never joined has completed once the case's clients are freed. */
struct call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, done, joined, status;
    etcdlock_guard *guard;
};

static void call_init(struct call *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void call_done(int status, etcdlock_guard *g, void *user) {
    struct call *c = user;
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    c->status = status;
    c->guard = g;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void call_start(struct call *c, etcdlock_client *cl, const char *name, int64_t timeout_ms) {
    int rc = etcdlock_lock_async(cl, name, timeout_ms, call_done, c, NULL);
    if (rc != ETCDLOCK_OK) {
        /* Refused at once: that is the call's outcome, which `join` reports. */
        c->done = 1;
        c->status = rc;
    }
    c->started = 1;
}

/* The call's outcome (a status), waiting for it up to 120 s (a bound for a
 * broken run only: the step's within_ms is checked by the caller); on OK its
 * guard moves to *g. */
static int call_join(struct call *c, etcdlock_guard **g) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 120;
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) break;
    int done = c->done, status = c->status;
    if (done) {
        *g = c->guard;
        c->guard = NULL;
        c->joined = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return done ? status : ETCDLOCK_INTERNAL;
}

static void call_destroy(struct call *c) {
    etcdlock_guard_free(c->guard); /* a call never joined */
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

struct loss_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, reason;
};

static void on_loss(int reason, void *user) {
    struct loss_wait *w = user;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    w->reason = reason;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Wait for the guard's loss callback (an event, not a poll) for at most ms. */
static const char *await_lost(const etcdlock_guard *g, int ms) {
    static struct loss_wait w;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.done = 0;
    if (etcdlock_guard_on_loss(g, on_loss, &w) != ETCDLOCK_OK) return "on_loss failed";
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        if (pthread_cond_timedwait(&w.cv, &w.mu, &until) != 0) break;
    int done = w.done, reason = w.reason;
    pthread_mutex_unlock(&w.mu);
    if (!done) return "no loss reported in time";
    return etcdlock_loss_reason_name(reason);
}
'''


def main() -> None:
    cases_path, out_path = sys.argv[1], sys.argv[2]
    table = json.load(open(cases_path, encoding="utf-8"))
    mine = [c for c in table["cases"] if LANG in c.get("langs", table["languages"])]
    parts = [PRELUDE]
    for i, case in enumerate(mine):
        parts.append(gen_case(i, case))
    # On mem:// the cases marked etcd_only (they kill etcd) are left out; on
    # etcd, those marked mem_only (they use the store's fault controls).
    def call(i, c):
        run = f"failed_cases_mark = 0; case_{i}(); failed_cases += failed_cases_mark;"
        if c.get("etcd_only") and c.get("mem_only"):
            raise SystemExit(f"{c['id']}: etcd_only and mem_only")
        if c.get("etcd_only"):
            return f"    if (!MEM) {{ {run} }}"
        if c.get("mem_only"):
            return f"    if (MEM) {{ {run} }}"
        return f"    {run}"
    calls = "\n".join(call(i, c) for i, c in enumerate(mine))
    etcd_only = sum(1 for c in mine if c.get("etcd_only"))
    mem_only = sum(1 for c in mine if c.get("mem_only"))
    parts.append(f'''
int main(int argc, char **argv) {{
    if (argc < 2) {{ fprintf(stderr, "usage: %s ENDPOINTS\\n", argv[0]); return 2; }}
    ENDPOINTS = argv[1];
    MEM = strncmp(ENDPOINTS, "mem://", strlen("mem://")) == 0;
    if (MEM && !getenv("ETCDLOCK_MEM_URL_DIR")) {{
        /* Where the in-process store writes its URL (read by the raw steps); set
         * before the first client starts the store. */
        static char dir[] = "/tmp/etcdlock-mem-XXXXXX";
        if (!mkdtemp(dir)) {{ perror("mkdtemp"); return 2; }}
        setenv("ETCDLOCK_MEM_URL_DIR", dir, 1);
    }}
    /* A write to a private harness that died fails that step; it must not kill the run. */
    signal(SIGPIPE, SIG_IGN);
    int failed_cases = 0;
{calls}
    printf("conformance: %d of {len(table["cases"])} cases ran for c%s\\n", ran, MEM ? " (mem)" : "");
    int missing = {len(mine)} - (MEM ? {etcd_only} : {mem_only}) - ran;
    if (missing) printf("FAIL %d cases listed for c did not run\\n", missing);
    etcdlock_shutdown();
    printf("%d passed, %d failed\\n", ran - failed_cases, failed_cases + missing);
    return failed_cases + missing ? 1 : 0;
}}
''')
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
