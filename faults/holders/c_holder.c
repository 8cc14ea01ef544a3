/* C holder process for the fault scenarios (the line protocol of
 * python_holder.py and of the Rust child), on the C API (include/etcdlock.h).
 *
 * Spec (JSON) in $ETCDLOCK_FAULTS_CHILD: endpoints, ns, ttl, lock, rounds,
 * request_timeout_ms (optional, default 2000), kind (only "mutex").
 * Prints:
 *   HELD <token> <acquired mono ns> <key>
 *   PUT <ok|status name> <call mono ns> <return mono ns> <ok|refused|unknown>
 *   LOST <reason> <last mono ns at which is_held was 1> <mono ns it turned 0>
 *   STALE <ok|status name> <call mono ns> <return mono ns> <ok|refused|unknown>
 *   DONE
 * It holds until the hold is lost (or it is killed). The loss is polled with
 * etcdlock_guard_is_held every 5 ms (the library can also call back with
 * etcdlock_guard_on_loss, but the checker needs the last instant the holder
 * believed it held, which only the poll gives). Times are CLOCK_MONOTONIC.
 *
 * Built by faults/test.sh: gcc -Iinclude c_holder.c -Ltarget/debug -letcdlock.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcdlock.h"

static uint64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "c_holder: %s\n", what);
    exit(2);
}

/* ---- a minimal reader for the flat spec object (strings, integers, one
 * array of strings); enough for the spec the scenarios write. */

static const char *find_key(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (isspace((unsigned char)*p)) p++;
    if (*p != ':') return NULL;
    p++;
    while (isspace((unsigned char)*p)) p++;
    return p;
}

/* A JSON string at p (no escapes other than \" and \\ expected) into out; returns the char after it. */
static const char *read_string(const char *p, char *out, size_t cap) {
    if (*p != '"') die("spec: string expected");
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\' && *p) c = *p++;
        if (n + 1 >= cap) die("spec: string too long");
        out[n++] = c;
    }
    if (*p != '"') die("spec: unterminated string");
    out[n] = 0;
    return p + 1;
}

static int get_string(const char *json, const char *key, char *out, size_t cap) {
    const char *p = find_key(json, key);
    if (!p) return 0;
    read_string(p, out, cap);
    return 1;
}

static long long get_int(const char *json, const char *key, long long dflt) {
    const char *p = find_key(json, key);
    if (!p) return dflt;
    return strtoll(p, NULL, 10);
}

/* The endpoints array, joined with commas. */
static void get_endpoints(const char *json, char *out, size_t cap) {
    const char *p = find_key(json, "endpoints");
    if (!p || *p != '[') die("spec: endpoints missing");
    p++;
    out[0] = 0;
    char one[512];
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ',') p++;
        if (*p == ']') break;
        p = read_string(p, one, sizeof one);
        if (strlen(out) + strlen(one) + 2 >= cap) die("spec: endpoints too long");
        if (out[0]) strcat(out, ",");
        strcat(out, one);
    }
    if (!out[0]) die("spec: no endpoints");
}

static void say(const char *line) {
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* What a guarded put's status means for the history: etcd applied it (ok),
 * etcd itself rejected the compare (refused), or not known. */
static const char *hist_result(int rc) {
    if (rc == ETCDLOCK_OK) return "ok";
    if (rc == ETCDLOCK_LOCK_LOST && strstr(etcdlock_last_error_message(), "etcd rejected")) return "refused";
    return "unknown";
}

static void guarded_put(const char *tag, const etcdlock_guard *g, const char *res, int64_t token) {
    char value[32];
    snprintf(value, sizeof value, "%lld", (long long)token);
    uint64_t call = mono();
    int rc = etcdlock_guard_put(g, (const uint8_t *)res, strlen(res), (const uint8_t *)value, strlen(value));
    uint64_t ret = mono();
    char line[256];
    snprintf(line, sizeof line, "%s %s %llu %llu %s", tag, rc == ETCDLOCK_OK ? "ok" : etcdlock_status_name(rc),
             (unsigned long long)call, (unsigned long long)ret, hist_result(rc));
    say(line);
}

int main(void) {
    const char *spec = getenv("ETCDLOCK_FAULTS_CHILD");
    if (!spec) die("ETCDLOCK_FAULTS_CHILD is not set");
    char endpoints[4096], ns[512], lock[512] = "L", kind[64] = "mutex";
    get_endpoints(spec, endpoints, sizeof endpoints);
    if (!get_string(spec, "ns", ns, sizeof ns)) ns[0] = 0;
    get_string(spec, "lock", lock, sizeof lock);
    get_string(spec, "kind", kind, sizeof kind);
    if (strcmp(kind, "mutex") != 0) die("only the mutex kind is supported");
    long long rounds = get_int(spec, "rounds", 1);
    char res[600];
    snprintf(res, sizeof res, "res/%s", lock);

    etcdlock_options o;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) die("options_init");
    o.endpoints = endpoints;
    o.namespace_prefix = ns;
    o.ttl_secs = get_int(spec, "ttl", 2);
    o.request_timeout_ms = get_int(spec, "request_timeout_ms", 2000);
    etcdlock_client *c = NULL;
    if (etcdlock_client_connect(&o, &c) != ETCDLOCK_OK) {
        fprintf(stderr, "c_holder: connect: %s\n", etcdlock_last_error_message());
        return 2;
    }
    char line[1024];
    for (long long r = 0; r < rounds; r++) {
        etcdlock_guard *g = NULL;
        if (etcdlock_lock(c, lock, ETCDLOCK_WAIT_FOREVER, &g) != ETCDLOCK_OK) {
            fprintf(stderr, "c_holder: lock: %s\n", etcdlock_last_error_message());
            return 2;
        }
        uint64_t acq = mono();
        int64_t token = 0;
        const char *key = "";
        etcdlock_guard_fencing_token(g, &token);
        etcdlock_guard_key(g, &key);
        snprintf(line, sizeof line, "HELD %lld %llu %s", (long long)token, (unsigned long long)acq, key);
        say(line);
        guarded_put("PUT", g, res, token);
        /* The belief interval: the clock is read before each is_held, so a
         * held answer proves the hold at that instant even if the process is
         * stopped between the two calls; the moment it turned 0 is read after
         * the answer, for the same reason. */
        uint64_t last_true = acq, t;
        for (;;) {
            t = mono();
            int held = 0;
            etcdlock_guard_is_held(g, &held);
            if (!held) {
                t = mono();
                break;
            }
            last_true = t;
            struct timespec d = {0, 5 * 1000 * 1000};
            nanosleep(&d, NULL);
        }
        int reason = 0;
        etcdlock_guard_loss_reason(g, &reason);
        snprintf(line, sizeof line, "LOST %s %llu %llu", etcdlock_loss_reason_name(reason), (unsigned long long)last_true,
                 (unsigned long long)t);
        say(line);
        /* The stale holder writes anyway: the guarded put must fail. */
        guarded_put("STALE", g, res, token);
        etcdlock_guard_free(g);
    }
    etcdlock_client_free(c);
    say("DONE");
    return 0;
}
