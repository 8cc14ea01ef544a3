/* C tests of issue 62's calls: etcdlock_deadlocks (a cycle of two clients
 * waiting on each other's holds), the detect_deadlock acquisition option
 * (ETCDLOCK_DEADLOCK for the wait that would close the cycle, the other wait
 * then served; also between two owners of one client's reentrant holds), and etcdlock_history (holds, waits and how each ended, with
 * fencing tokens). Against a real etcd started by etcd-harness; plain C11 +
 * pthreads, in the style of test_sync.c. Last line of output:
 * "N passed, N failed".
 *
 * Environment: ETCDLOCK_HARNESS (path of etcd-harness), ETCDLOCK_TEST_SKIP
 * (comma-separated test names to leave out). An argument selects the tests
 * whose name contains it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcdlock.h"
#include "harness.h"

static etcd_harness H;
static int g_failed_checks;
static int n_passed, n_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            g_failed_checks++;                                                             \
            fprintf(stderr, "  FAIL %s:%d: %s -- ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, " [last error: %s]\n", etcdlock_last_error_message());         \
        }                                                                                  \
    } while (0)

#define CHECK_RC(expr, want)                                                               \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        CHECK(rc_ == (want), "%s returned %s (%d), want %s", #expr, etcdlock_status_name(rc_), rc_, \
              etcdlock_status_name(want));                                                 \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void unique(char *buf, size_t n, const char *what) {
    static atomic_int seq;
    snprintf(buf, n, "cdl-%d-%s-%d", (int)getpid(), what, atomic_fetch_add(&seq, 1));
}

/* A client in the namespace ns (each test has its own, so that a deadlock
 * search over "" sees that test's clients only). */
static etcdlock_client *connect_ns(const char *ns) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) return NULL;
    o.endpoints = H.endpoint;
    o.ttl_secs = 10;
    o.namespace_prefix = ns;
    int rc = etcdlock_client_connect(&o, &c);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "  connect failed: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        return NULL;
    }
    return c;
}

/* Read name's queue (every 10 ms) until it has `want` keys or within_ms has
 * passed: the wait of another thread has reached etcd. The count read last. */
static size_t await_queue(etcdlock_client *c, const char *name, size_t want, double within_ms) {
    double until = now_ms() + within_ms;
    size_t n = 0;
    for (;;) {
        etcdlock_queue *q = NULL;
        if (etcdlock_status(c, name, &q) == ETCDLOCK_OK) n = etcdlock_queue_len(q);
        etcdlock_queue_free(q);
        if (n == want || now_ms() > until) return n;
        usleep(10 * 1000);
    }
}

/* One blocking lock call on a thread of its own. */
struct waiter {
    pthread_t thread;
    etcdlock_client *client;
    const char *name;
    int64_t timeout_ms;
    int detect;
    int rc;
    double took_ms;
    etcdlock_guard *guard;
};

static void *waiter_main(void *arg) {
    struct waiter *w = arg;
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = w->timeout_ms;
    ao.detect_deadlock = w->detect;
    double t0 = now_ms();
    w->rc = etcdlock_lock_ex(w->client, w->name, &ao, &w->guard);
    w->took_ms = now_ms() - t0;
    return NULL;
}

static void waiter_start(struct waiter *w, etcdlock_client *c, const char *name, int64_t timeout_ms, int detect) {
    memset(w, 0, sizeof *w);
    w->client = c;
    w->name = name;
    w->timeout_ms = timeout_ms;
    w->detect = detect;
    pthread_create(&w->thread, NULL, waiter_main, w);
}

static int64_t token_of(etcdlock_guard *g) {
    int64_t t = -1;
    etcdlock_guard_fencing_token(g, &t);
    return t;
}

static size_t cycles_now(etcdlock_client *c, const char *prefix) {
    etcdlock_cycles *d = NULL;
    CHECK_RC(etcdlock_deadlocks(c, prefix, &d), ETCDLOCK_OK);
    size_t n = etcdlock_cycles_len(d);
    etcdlock_cycles_free(d);
    return n;
}

/* A holds x and waits for y; B holds y and waits for x: etcdlock_deadlocks
 * finds one cycle of two waits (from either client, whatever the prefix
 * covers both names); B's wait with detect_deadlock fails with
 * ETCDLOCK_DEADLOCK, and A's is served once B lets y go. */
static void test_deadlock_two_clients(void) {
    char ns[96], x[32] = "x", y[32] = "y";
    unique(ns, sizeof ns, "ns");
    strcat(ns, "/");
    etcdlock_client *a = connect_ns(ns), *b = connect_ns(ns);
    CHECK(a && b, "connect");
    if (!a || !b) goto out;
    etcdlock_guard *hx = NULL, *hy = NULL;
    CHECK_RC(etcdlock_lock(a, x, 5000, &hx), ETCDLOCK_OK);
    CHECK_RC(etcdlock_lock(b, y, 5000, &hy), ETCDLOCK_OK);
    struct waiter wa, wb;
    waiter_start(&wa, a, y, 20000, 0);
    CHECK(await_queue(a, y, 2, 5000) == 2, "A's wait on y reached etcd");
    /* One wait is no cycle. */
    etcdlock_cycles *d = NULL;
    CHECK_RC(etcdlock_deadlocks(a, "", &d), ETCDLOCK_OK);
    CHECK(etcdlock_cycles_len(d) == 0, "no cycle yet: %zu", etcdlock_cycles_len(d));
    CHECK(etcdlock_cycles_waits(d) == 1 && etcdlock_cycles_clients(d) == 2, "1 wait, 2 clients: %zu, %zu",
          etcdlock_cycles_waits(d), etcdlock_cycles_clients(d));
    etcdlock_cycles_free(d);
    /* B waits for x (without the check): a cycle. */
    waiter_start(&wb, b, x, 2000, 0);
    CHECK(await_queue(b, x, 2, 5000) == 2, "B's wait on x reached etcd");
    d = NULL;
    CHECK_RC(etcdlock_deadlocks(b, "", &d), ETCDLOCK_OK);
    CHECK(etcdlock_cycles_len(d) == 1, "one cycle: %zu", etcdlock_cycles_len(d));
    CHECK(etcdlock_cycles_waits(d) == 2 && etcdlock_cycles_revision(d) > 0, "2 waits, a revision");
    CHECK(etcdlock_cycles_edge_count(d, 0) == 2, "two waits in the cycle: %zu", etcdlock_cycles_edge_count(d, 0));
    CHECK(etcdlock_cycles_edge(d, 0, 2) == NULL && etcdlock_cycles_edge(d, 1, 0) == NULL &&
              etcdlock_cycles_describe(d, 1) == NULL && etcdlock_cycles_edge_count(d, 1) == 0,
          "out of range: NULL, 0");
    int64_t tx = token_of(hx), ty = token_of(hy);
    for (size_t i = 0; i < etcdlock_cycles_edge_count(d, 0); i++) {
        const etcdlock_wait_edge *e = etcdlock_cycles_edge(d, 0, i);
        const etcdlock_wait_edge *next = etcdlock_cycles_edge(d, 0, (i + 1) % 2);
        if (!e || !next) continue;
        int on_x = strcmp(e->name, x) == 0;
        CHECK(on_x || strcmp(e->name, y) == 0, "edge on x or y: %s", e->name);
        CHECK(e->fencing_token == (on_x ? tx : ty), "holder's token %lld", (long long)e->fencing_token);
        CHECK(e->holder.lease_id == next->waiter.lease_id, "the holder waits next");
        CHECK(e->waiter.lease_id != e->holder.lease_id, "two clients");
        CHECK(e->waiter.pid == getpid() && e->holder.pid == getpid(), "this process");
        CHECK(e->waiter.language && strcmp(e->waiter.language, "c") == 0, "language c");
        CHECK(e->waiter.owner && e->holder.owner && e->waiter.host, "owner and host known");
        CHECK(strstr(e->waiter_key, on_x ? "x/" : "y/") && strstr(e->holder_key, on_x ? "x/" : "y/"), "keys of the name");
        CHECK(e->waiter_revision > e->fencing_token, "the wait came after the hold");
    }
    const char *text = etcdlock_cycles_describe(d, 0);
    CHECK(text && strstr(text, "waits for \"x\"") && strstr(text, "waits for \"y\""), "described: %s", text ? text : "NULL");
    etcdlock_cycles_free(d);
    /* A prefix covering one name has no cycle. */
    CHECK(cycles_now(a, "x") == 0, "no cycle under x");
    pthread_join(wb.thread, NULL);
    CHECK(wb.rc == ETCDLOCK_TIMEOUT && wb.guard == NULL, "B's plain wait times out: %s", etcdlock_status_name(wb.rc));
    CHECK(await_queue(a, x, 1, 5000) == 1, "its key is gone");
    /* B waits for x again, with the check: Deadlock, naming the cycle. */
    struct waiter wd;
    waiter_start(&wd, b, x, 30000, 1);
    pthread_join(wd.thread, NULL);
    CHECK(wd.rc == ETCDLOCK_DEADLOCK && wd.guard == NULL, "detect_deadlock: %s", etcdlock_status_name(wd.rc));
    printf("  Deadlock after %.0f ms\n", wd.took_ms);
    CHECK(await_queue(a, x, 1, 5000) == 1, "the refused wait left no key");
    /* Without a cycle the option changes nothing. */
    char free_name[32] = "z";
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = 5000;
    ao.detect_deadlock = 1;
    etcdlock_guard *hz = NULL;
    CHECK_RC(etcdlock_lock_ex(b, free_name, &ao, &hz), ETCDLOCK_OK);
    etcdlock_guard_free(hz);
    /* B lets y go: A's wait is served, with a larger token. */
    CHECK_RC(etcdlock_unlock(hy), ETCDLOCK_OK);
    pthread_join(wa.thread, NULL);
    CHECK(wa.rc == ETCDLOCK_OK && wa.guard, "A acquires y: %s", etcdlock_status_name(wa.rc));
    CHECK(token_of(wa.guard) > ty, "larger token");
    CHECK(cycles_now(a, "") == 0, "no cycle any more");
    etcdlock_guard_free(wa.guard);
    etcdlock_guard_free(hx);
    etcdlock_guard_free(hy);
out:
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* Two owners of one client (etcdlock_lock_reentrant), each holding one name,
 * the other owner waiting for y: etcd sees one lease, the client's own wait
 * graph sees the cycle. With detect_deadlock the wait that closes it (this
 * thread's, on x) fails with ETCDLOCK_DEADLOCK, and the other owner acquires
 * once this one lets y go. */
struct owner {
    pthread_t thread;
    etcdlock_client *client;
    atomic_int x_held;
    int rc;
    int64_t token;
};

static void *owner_main(void *arg) {
    struct owner *o = arg;
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = 30000;
    etcdlock_guard *h = NULL, *g = NULL;
    o->rc = etcdlock_lock_reentrant(o->client, "x", 2, &ao, &h);
    atomic_store(&o->x_held, 1);
    if (o->rc == ETCDLOCK_OK) {
        ao.detect_deadlock = 1;
        o->rc = etcdlock_lock_reentrant(o->client, "y", 2, &ao, &g);
        o->token = token_of(g);
    }
    etcdlock_guard_free(g);
    etcdlock_guard_free(h);
    return NULL;
}

static void test_two_owners(void) {
    char ns[96];
    unique(ns, sizeof ns, "own");
    strcat(ns, "/");
    etcdlock_client *c = connect_ns(ns);
    CHECK(c != NULL, "connect");
    if (!c) return;
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = 30000;
    etcdlock_guard *hy = NULL, *gx = NULL;
    CHECK_RC(etcdlock_lock_reentrant(c, "y", 1, &ao, &hy), ETCDLOCK_OK);
    struct owner o = {.client = c};
    pthread_create(&o.thread, NULL, owner_main, &o);
    double until = now_ms() + 30000;
    while (!atomic_load(&o.x_held) && now_ms() < until) usleep(1000);
    CHECK(await_queue(c, "y", 2, 5000) == 2, "the other owner's wait on y reached etcd");
    ao.detect_deadlock = 1;
    CHECK_RC(etcdlock_lock_reentrant(c, "x", 1, &ao, &gx), ETCDLOCK_DEADLOCK);
    CHECK(strstr(etcdlock_last_error_message(), "owners of this client") != NULL, "names the owners");
    int64_t ty = token_of(hy);
    etcdlock_guard_free(hy);
    pthread_join(o.thread, NULL);
    CHECK(o.rc == ETCDLOCK_OK && o.token > ty, "the other owner acquires y: %s", etcdlock_status_name(o.rc));
    CHECK(await_queue(c, "x", 0, 5000) == 0 && await_queue(c, "y", 0, 5000) == 0, "both free");
    etcdlock_guard_free(gx);
    etcdlock_client_free(c);
}

/* A holds, B waits, A tries once more with a short timeout, A releases, B
 * holds: three entries, oldest first, with their tokens and ends. */
static void test_history(void) {
    char ns[96], name[32] = "job";
    unique(ns, sizeof ns, "hist");
    strcat(ns, "/");
    etcdlock_client *a = connect_ns(ns), *b = connect_ns(ns);
    CHECK(a && b, "connect");
    if (!a || !b) goto out;
    etcdlock_guard *h1 = NULL, *tmp = NULL;
    CHECK_RC(etcdlock_lock(a, name, 5000, &h1), ETCDLOCK_OK);
    struct waiter w;
    waiter_start(&w, b, name, 20000, 0);
    CHECK(await_queue(a, name, 2, 5000) == 2, "B's wait reached etcd");
    CHECK_RC(etcdlock_lock(a, name, 100, &tmp), ETCDLOCK_TIMEOUT);
    int64_t t1 = token_of(h1);
    CHECK_RC(etcdlock_unlock(h1), ETCDLOCK_OK);
    pthread_join(w.thread, NULL);
    CHECK(w.rc == ETCDLOCK_OK, "B acquires: %s", etcdlock_status_name(w.rc));
    int64_t t2 = token_of(w.guard);
    etcdlock_history_entries *h = NULL;
    CHECK_RC(etcdlock_history(b, name, -1, &h), ETCDLOCK_OK);
    size_t n = etcdlock_history_entries_len(h);
    CHECK(n == 3, "three entries: %zu", n);
    CHECK(etcdlock_history_entries_revision(h) > t2 && etcdlock_history_entries_from_revision(h) >= 1 &&
              etcdlock_history_entries_read_ms(h) > 0,
          "revisions and read time");
    const char *want[] = {"released", "holding", "abandoned"};
    for (size_t i = 0; i < n && i < 3; i++) {
        const etcdlock_history_entry *e = etcdlock_history_entries_at(h, i);
        CHECK(strcmp(e->ended, want[i]) == 0, "entry %zu: %s, want %s", i, e->ended, want[i]);
        CHECK(e->kind == ETCDLOCK_KIND_EXCLUSIVE && e->permits == 1, "exclusive");
        CHECK(e->pid == getpid() && e->language && strcmp(e->language, "c") == 0 && e->owner, "this process, c");
        CHECK(strstr(e->key, "job/") != NULL, "a key of job: %s", e->key);
        CHECK(e->queued_ms > 0 && e->wait_ms >= 0, "queued and waited");
    }
    const etcdlock_history_entry *e0 = etcdlock_history_entries_at(h, 0), *e1 = etcdlock_history_entries_at(h, 1),
                                 *e2 = etcdlock_history_entries_at(h, 2);
    if (n == 3) {
        CHECK(e0->fencing_token == t1 && e0->granted_revision == t1 && e0->ended_revision > t1 && e0->hold_ms >= 0 &&
                  e0->ended_ms >= e0->granted_ms,
              "A's hold: token %lld", (long long)e0->fencing_token);
        CHECK(e1->fencing_token == t2 && e1->granted_revision == e0->ended_revision && e1->ended_revision == -1 &&
                  e1->ended_ms == -1 && e1->hold_ms >= 0,
              "B's hold, granted at A's release: token %lld", (long long)e1->fencing_token);
        CHECK(e2->granted_revision == -1 && e2->granted_ms == -1 && e2->hold_ms == -1 && e2->ended_revision > e2->fencing_token &&
                  e2->lease_id == e0->lease_id && e1->lease_id != e0->lease_id,
              "A's abandoned try: never held");
    }
    CHECK(etcdlock_history_entries_at(h, n) == NULL, "out of range: NULL");
    etcdlock_history_entries_free(h);
    /* An hour back: the same three. */
    h = NULL;
    CHECK_RC(etcdlock_history(a, name, 3600 * 1000, &h), ETCDLOCK_OK);
    CHECK(etcdlock_history_entries_len(h) == 3, "an hour: %zu", etcdlock_history_entries_len(h));
    etcdlock_history_entries_free(h);
    /* A name never used: no entry. */
    h = NULL;
    CHECK_RC(etcdlock_history(a, "never-used", ETCDLOCK_UNSET, &h), ETCDLOCK_OK);
    CHECK(h && etcdlock_history_entries_len(h) == 0, "empty");
    etcdlock_history_entries_free(h);
    etcdlock_guard_free(w.guard);
    etcdlock_guard_free(h1);
out:
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* Bad input, NULL handles, and the options struct of an older header. */
static void test_input(void) {
    char ns[96];
    unique(ns, sizeof ns, "in");
    strcat(ns, "/");
    etcdlock_client *c = connect_ns(ns);
    CHECK(c != NULL, "connect");
    if (!c) return;
    etcdlock_cycles *d = (etcdlock_cycles *)&d;
    CHECK_RC(etcdlock_deadlocks(c, NULL, &d), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(d == NULL, "cleared on failure");
    CHECK_RC(etcdlock_deadlocks(c, "", NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_deadlocks(NULL, "", &d), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_deadlocks(c, "\xff", &d), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_history_entries *h = (etcdlock_history_entries *)&h;
    CHECK_RC(etcdlock_history(c, "", -1, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(h == NULL, "cleared on failure");
    CHECK_RC(etcdlock_history(c, NULL, -1, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_history(c, "job", -1, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(etcdlock_cycles_len(NULL) == 0 && etcdlock_cycles_edge(NULL, 0, 0) == NULL &&
              etcdlock_cycles_describe(NULL, 0) == NULL && etcdlock_cycles_revision(NULL) == 0 &&
              etcdlock_history_entries_len(NULL) == 0 && etcdlock_history_entries_at(NULL, 0) == NULL,
          "NULL handles");
    etcdlock_cycles_free(NULL);
    etcdlock_history_entries_free(NULL);
    /* Nothing under the namespace: no cycle, no client. */
    d = NULL;
    CHECK_RC(etcdlock_deadlocks(c, "", &d), ETCDLOCK_OK);
    CHECK(d && etcdlock_cycles_len(d) == 0 && etcdlock_cycles_clients(d) == 0 && etcdlock_cycles_waits(d) == 0, "empty");
    etcdlock_cycles_free(d);
    /* A program built before detect_deadlock: its struct ends at metadata. */
    etcdlock_acquire_options ao;
    memset(&ao, 0x5a, sizeof ao);
    size_t old = offsetof(etcdlock_acquire_options, detect_deadlock);
    CHECK_RC(etcdlock_acquire_options_init(&ao, old), ETCDLOCK_OK);
    CHECK(ao.struct_size == old && ao.detect_deadlock == 0x5a5a5a5a, "only the old fields written");
    ao.timeout_ms = 5000;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock_ex(c, "old", &ao, &g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    CHECK_RC(etcdlock_acquire_options_init(&ao, sizeof ao), ETCDLOCK_OK);
    CHECK(ao.detect_deadlock == 0, "off by default");
    etcdlock_client_free(c);
}

static const struct {
    const char *name;
    void (*fn)(void);
} TESTS[] = {
    {"deadlock_two_clients", test_deadlock_two_clients},
    {"two_owners", test_two_owners},
    {"history", test_history},
    {"input", test_input},
};

int main(int argc, char **argv) {
    (void)harness_command; /* harness.h is shared; this program sends no command */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (harness_start(&H) != 0) {
        printf("cannot start etcd\n0 passed, 1 failed\n");
        return 1;
    }
    printf("etcd at %s, libetcdlock %s\n", H.endpoint, etcdlock_version());
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        if (argc > 1 && !strstr(TESTS[i].name, argv[1])) continue;
        const char *skip = getenv("ETCDLOCK_TEST_SKIP");
        if (skip && *skip && strstr(skip, TESTS[i].name)) {
            printf("skip %s (ETCDLOCK_TEST_SKIP)\n", TESTS[i].name);
            continue;
        }
        g_failed_checks = 0;
        double t0 = now_ms();
        TESTS[i].fn();
        double dt = now_ms() - t0;
        if (g_failed_checks == 0) {
            n_passed++;
            printf("ok   %s (%.0f ms)\n", TESTS[i].name, dt);
        } else {
            n_failed++;
            printf("FAIL %s (%d checks failed, %.0f ms)\n", TESTS[i].name, g_failed_checks, dt);
        }
    }
    harness_stop(&H);
    etcdlock_shutdown();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
