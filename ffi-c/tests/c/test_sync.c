/* C tests of issue 32's calls: acquisition options (etcdlock_acquire_options
 * and the *_ex calls: lock-delay after a SIGKILLed holder process, clean
 * hand-over, lease time, holder metadata in etcdlock_status), release of a
 * permit by its id, and latches and barriers shared by three clients.
 * Against a real etcd started by etcd-harness; plain C11 + pthreads, in the
 * style of test_etcdlock.c. Last line of output: "N passed, N failed".
 *
 * Environment: ETCDLOCK_HARNESS (path of etcd-harness), ETCDLOCK_TEST_SKIP
 * (comma-separated test names to leave out). An argument selects the tests
 * whose name contains it.
 *
 * Run as `test_sync --delay-holder ENDPOINT NAME` it is the child process of
 * the lock-delay test: it holds NAME with a 2 s TTL and a 3 s lock-delay,
 * prints "held TOKEN" and waits to be killed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcdlock.h"
#include "harness.h"

static etcd_harness H;
static char EXE[4096];
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

#define DELAY_TTL_S 2
#define DELAY_MS 3000

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void unique(char *buf, size_t n, const char *what) {
    static atomic_int seq;
    snprintf(buf, n, "csync-%d-%s-%d", (int)getpid(), what, atomic_fetch_add(&seq, 1));
}

static etcdlock_client *connect_ns(const char *endpoint, int64_t ttl, const char *ns) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) return NULL;
    o.endpoints = endpoint;
    o.ttl_secs = ttl;
    o.namespace_prefix = ns;
    int rc = etcdlock_client_connect(&o, &c);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "  connect failed: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        return NULL;
    }
    return c;
}

/* etcd's own count of the keys under prefix (etcdctl, an independent check). */
static long count_keys(const char *prefix) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s get --prefix --keys-only '%s'", H.endpoint, prefix);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[4096];
    long n = 0;
    while (fgets(line, sizeof line, p))
        if (line[0] != '\n') n++;
    return pclose(p) == 0 ? n : -1;
}

/* ---- the child of the lock-delay test ---------------------------------- */

static int delay_holder_main(const char *endpoint, const char *name) {
    etcdlock_client *c = connect_ns(endpoint, DELAY_TTL_S, NULL);
    if (!c) return 2;
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.lock_delay_ms = DELAY_MS;
    etcdlock_guard *g = NULL;
    if (etcdlock_lock_ex(c, name, &ao, &g) != ETCDLOCK_OK) {
        fprintf(stderr, "holder: %s\n", etcdlock_last_error_message());
        return 3;
    }
    int64_t token = 0;
    etcdlock_guard_fencing_token(g, &token);
    printf("held %lld\n", (long long)token);
    fflush(stdout);
    for (;;) pause(); /* until SIGKILL */
}

/* ------------------------------------------------------------------------ */

static void test_acquire_options_input(void) {
    etcdlock_acquire_options ao;
    CHECK_RC(etcdlock_acquire_options_init(NULL, sizeof ao), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_acquire_options_init(&ao, 4), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_acquire_options_init(&ao, sizeof ao), ETCDLOCK_OK);
    CHECK(ao.struct_size == sizeof ao && ao.timeout_ms == ETCDLOCK_WAIT_FOREVER && ao.lock_delay_ms == ETCDLOCK_UNSET &&
              ao.lease_time_ms == ETCDLOCK_UNSET && ao.metadata == NULL,
          "defaults");
    etcdlock_client *c = connect_ns(H.endpoint, 10, NULL);
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[96];
    unique(name, sizeof name, "opts");
    etcdlock_guard *g = (etcdlock_guard *)&ao; /* set to NULL on failure */
    struct { int64_t *field; int64_t value; const char *word; } bad[] = {
        {&ao.lock_delay_ms, -1, "lock_delay"},
        {&ao.lock_delay_ms, INT64_C(172800000), "lock_delay"},
        {&ao.lease_time_ms, 0, "lease_time"},
        {&ao.lease_time_ms, -5, "lease_time"},
        {&ao.timeout_ms, ETCDLOCK_MAX_TIMEOUT_MS + 1, "timeout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        etcdlock_acquire_options_init(&ao, sizeof ao);
        *bad[i].field = bad[i].value;
        CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
        CHECK(g == NULL, "guard cleared on failure");
        CHECK(strstr(etcdlock_last_error_message(), bad[i].word) != NULL, "message names %s", bad[i].word);
    }
    /* Metadata: a key without a value, and more than 1 KB. */
    etcdlock_acquire_options_init(&ao, sizeof ao);
    const char *odd[] = {"app", NULL};
    ao.metadata = odd;
    CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    static char big[1200];
    memset(big, 'v', sizeof big - 1);
    const char *large[] = {"k", big, NULL};
    ao.metadata = large;
    CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(strstr(etcdlock_last_error_message(), "metadata") != NULL, "message names metadata");
    /* A struct_size that init did not set, and one from a newer header. */
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.struct_size = 3;
    CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    ao.struct_size = sizeof ao + 8;
    CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    /* No lock-delay on permits and read locks. */
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.lock_delay_ms = 1000;
    CHECK_RC(etcdlock_acquire_permit_ex(c, name, 2, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_read_lock_ex(c, name, &ao, &g), ETCDLOCK_INVALID_ARGUMENT);
    /* Nothing was written. */
    etcdlock_queue *q = NULL;
    CHECK_RC(etcdlock_status(c, name, &q), ETCDLOCK_OK);
    CHECK(etcdlock_queue_len(q) == 0, "no key after refused options");
    etcdlock_queue_free(q);
    /* NULL options: the defaults (wait forever; free now). */
    CHECK_RC(etcdlock_lock_ex(c, name, NULL, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    /* timeout 0 through the options: one try, TIMEOUT when taken. */
    etcdlock_guard *h = NULL, *x = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &h), ETCDLOCK_OK);
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = 0;
    etcdlock_client *c2 = connect_ns(H.endpoint, 10, NULL);
    CHECK_RC(etcdlock_lock_ex(c2, name, &ao, &x), ETCDLOCK_TIMEOUT);
    CHECK(x == NULL, "no guard");
    etcdlock_guard_free(h);
    etcdlock_client_free(c2);
    etcdlock_client_free(c);
}

/* The holder's metadata, as etcdlock_status shows it (key, value, ..., NULL). */
static void test_metadata_in_status(void) {
    etcdlock_client *c = connect_ns(H.endpoint, 10, NULL);
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[96];
    unique(name, sizeof name, "meta");
    const char *meta[] = {"app", "billing", "shard", "7", NULL};
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.timeout_ms = 5000;
    ao.metadata = meta;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock_ex(c, name, &ao, &g), ETCDLOCK_OK);
    /* The meta record is written once the name has been in use ~100 ms. */
    int found = 0;
    double until = now_ms() + 5000;
    while (!found && now_ms() < until) {
        etcdlock_queue *q = NULL;
        if (etcdlock_status(c, name, &q) == ETCDLOCK_OK && etcdlock_queue_len(q) == 1) {
            const etcdlock_contender *x = etcdlock_queue_at(q, 0);
            CHECK(x->metadata != NULL, "metadata is never NULL");
            if (x->metadata_len == 2) {
                found = 1;
                CHECK(strcmp(x->metadata[0], "app") == 0 && strcmp(x->metadata[1], "billing") == 0 &&
                          strcmp(x->metadata[2], "shard") == 0 && strcmp(x->metadata[3], "7") == 0 &&
                          x->metadata[4] == NULL,
                      "metadata as given");
            }
        }
        etcdlock_queue_free(q);
        if (!found) usleep(50 * 1000);
    }
    CHECK(found, "metadata shown in status within 5 s");
    /* A contender without metadata has an empty list. */
    char plain[96];
    unique(plain, sizeof plain, "plain");
    etcdlock_guard *p = NULL;
    CHECK_RC(etcdlock_lock(c, plain, 5000, &p), ETCDLOCK_OK);
    etcdlock_queue *q = NULL;
    CHECK_RC(etcdlock_status(c, plain, &q), ETCDLOCK_OK);
    const etcdlock_contender *x = etcdlock_queue_at(q, 0);
    CHECK(x && x->metadata && x->metadata[0] == NULL && x->metadata_len == 0, "empty metadata");
    etcdlock_queue_free(q);
    etcdlock_guard_free(p);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

/* Lock-delay: a child process holds with a 2 s TTL and a 3 s lock-delay and
 * is SIGKILLed: its lease expires within the TTL, and the lock is granted no
 * earlier than 3 s after (so no earlier than kill + 3 s) and before kill +
 * TTL + 3 s + 1 s (the record lease's headroom) + 2 s. try_lock in the delay finds it taken. */
static void test_lock_delay_after_kill(void) {
    char name[96];
    unique(name, sizeof name, "delay");
    int out[2];
    CHECK(pipe(out) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(EXE, EXE, "--delay-holder", H.endpoint, name, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *from = fdopen(out[0], "r");
    char line[128] = "";
    long long token = 0;
    CHECK(from && fgets(line, sizeof line, from) && sscanf(line, "held %lld", &token) == 1, "holder held (%s)", line);
    etcdlock_client *c = connect_ns(H.endpoint, 10, NULL);
    CHECK(c != NULL, "connect");
    if (c && token > 0) {
        double killed = now_ms();
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "holder killed");
        pid = 0;
        etcdlock_guard *g = NULL;
        CHECK_RC(etcdlock_try_lock(c, name, &g), ETCDLOCK_WOULD_BLOCK);
        CHECK_RC(etcdlock_lock(c, name, 20000, &g), ETCDLOCK_OK);
        double after = now_ms() - killed;
        printf("  lock-delay: acquired %.0f ms after SIGKILL (bounds: >= %d, < %d)\n", after, DELAY_MS,
               DELAY_TTL_S * 1000 + DELAY_MS + 1000 + 2000);
        CHECK(after >= DELAY_MS, "acquired %.0f ms after the kill, inside the lock-delay", after);
        CHECK(after < DELAY_TTL_S * 1000 + DELAY_MS + 1000 + 2000, "acquired only %.0f ms after the kill", after);
        int64_t mine = 0;
        etcdlock_guard_fencing_token(g, &mine);
        CHECK(mine > token, "a newer token");
        etcdlock_guard_free(g);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    if (from) fclose(from);
    etcdlock_client_free(c);
}

struct waiter {
    etcdlock_client *c;
    const char *name;
    int rc;
    double acquired;
    etcdlock_guard *g;
};

static void *wait_for_lock(void *arg) {
    struct waiter *w = arg;
    w->rc = etcdlock_lock(w->c, w->name, 20000, &w->g);
    w->acquired = now_ms();
    return NULL;
}

/* A clean unlock hands over at once, lock-delay or not. */
static void test_lock_delay_clean_unlock(void) {
    etcdlock_client *a = connect_ns(H.endpoint, 10, NULL), *b = connect_ns(H.endpoint, 10, NULL);
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[96];
    unique(name, sizeof name, "clean");
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.lock_delay_ms = DELAY_MS;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock_ex(a, name, &ao, &g), ETCDLOCK_OK);
    struct waiter w = {b, name, -1, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, wait_for_lock, &w);
    /* Unlock once the waiter is queued. */
    double until = now_ms() + 5000;
    size_t queued = 0;
    while (queued < 2 && now_ms() < until) {
        etcdlock_queue *q = NULL;
        if (etcdlock_status(a, name, &q) == ETCDLOCK_OK) queued = etcdlock_queue_len(q);
        etcdlock_queue_free(q);
        if (queued < 2) usleep(10 * 1000);
    }
    CHECK(queued == 2, "the waiter queued");
    double t0 = now_ms();
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    pthread_join(t, NULL);
    CHECK(w.rc == ETCDLOCK_OK, "waiter got %s", etcdlock_status_name(w.rc));
    printf("  lock-delay: clean unlock handed over in %.0f ms\n", w.acquired - t0);
    CHECK(w.acquired - t0 < 500, "clean unlock handed over after %.0f ms", w.acquired - t0);
    etcdlock_guard_free(w.g);
    etcdlock_guard_free(g);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* lease_time: the hold ends by itself with LEASE_EXPIRED; a waiting permit gets it. */
static void test_lease_time_and_release_permit(void) {
    etcdlock_client *a = connect_ns(H.endpoint, 10, NULL), *b = connect_ns(H.endpoint, 10, NULL);
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[96];
    unique(name, sizeof name, "lease");
    etcdlock_acquire_options ao;
    etcdlock_acquire_options_init(&ao, sizeof ao);
    ao.lease_time_ms = 800;
    etcdlock_guard *p = NULL, *q = NULL;
    CHECK_RC(etcdlock_acquire_permit_ex(a, name, 1, &ao, &p), ETCDLOCK_OK);
    double t0 = now_ms();
    CHECK_RC(etcdlock_acquire_permit(b, name, 1, 3000, &q), ETCDLOCK_OK);
    double took = now_ms() - t0;
    CHECK(took >= 500 && took < 1700, "the second permit after %.0f ms", took);
    int reason = 0;
    double until = now_ms() + 2000;
    while (reason == ETCDLOCK_LOSS_NONE && now_ms() < until) {
        etcdlock_guard_loss_reason(p, &reason);
        if (reason == ETCDLOCK_LOSS_NONE) usleep(20 * 1000);
    }
    CHECK(reason == ETCDLOCK_LOSS_LEASE_EXPIRED, "lease time ends the hold with LeaseExpired, got %d", reason);
    /* Release q's permit by its id, from the other client. */
    int64_t id = 0;
    int done = -1;
    etcdlock_guard_fencing_token(q, &id);
    CHECK_RC(etcdlock_release_permit(a, name, id + 1, &done), ETCDLOCK_OK);
    CHECK(done == 0, "no permit has that id");
    CHECK_RC(etcdlock_release_permit(a, name, id, &done), ETCDLOCK_OK);
    CHECK(done == 1, "released");
    until = now_ms() + 3000;
    reason = 0;
    while (reason == ETCDLOCK_LOSS_NONE && now_ms() < until) {
        etcdlock_guard_loss_reason(q, &reason);
        if (reason == ETCDLOCK_LOSS_NONE) usleep(20 * 1000);
    }
    CHECK(reason == ETCDLOCK_LOSS_KEY_DELETED, "the permit holder told KeyDeleted, got %d", reason);
    CHECK_RC(etcdlock_release_permit(a, name, id, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_release_permit(NULL, name, id, &done), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_guard_free(p);
    etcdlock_guard_free(q);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

struct party {
    const char *ns, *latch, *barrier;
    int ok;
    int64_t after, count;
    int32_t index;
};

static void *run_party(void *arg) {
    struct party *p = arg;
    etcdlock_client *c = connect_ns(H.endpoint, 2, p->ns);
    etcdlock_latch *l = NULL;
    etcdlock_barrier *b = NULL;
    p->ok = c && etcdlock_latch_open(c, p->latch, 3, &l) == ETCDLOCK_OK &&
            etcdlock_barrier_open(c, p->barrier, 3, &b) == ETCDLOCK_OK &&
            etcdlock_latch_count_down(l, &p->after) == ETCDLOCK_OK && etcdlock_latch_wait(l, 30000) == ETCDLOCK_OK &&
            etcdlock_latch_count(l, &p->count) == ETCDLOCK_OK && etcdlock_barrier_wait(b, 30000, &p->index) == ETCDLOCK_OK;
    if (!p->ok) fprintf(stderr, "  party: %s\n", etcdlock_last_error_message());
    etcdlock_latch_free(l);
    etcdlock_barrier_free(b);
    etcdlock_client_free(c);
    return NULL;
}

/* Three clients (threads) share a latch of 3 and a barrier of 3; once they
 * are freed and the TTL passes no key is left in their namespace (the
 * latch and barrier keys sit beside their names, <ns>NAME\0etcdlock-...). */
static void test_latch_and_barrier(void) {
    char ns[96], prefix[160];
    unique(ns, sizeof ns, "sync");
    strcat(ns, "/");
    snprintf(prefix, sizeof prefix, "%s", ns);
    struct party ps[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        ps[i] = (struct party){ns, "shards", "start", 0, -1, -1, -1};
        pthread_create(&t[i], NULL, run_party, &ps[i]);
    }
    int seen_after = 0, seen_index = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK(ps[i].ok, "party %d", i);
        CHECK(ps[i].count == 0, "party %d saw count %lld after the wait", i, (long long)ps[i].count);
        if (ps[i].after >= 0 && ps[i].after < 3) seen_after |= 1 << ps[i].after;
        if (ps[i].index >= 0 && ps[i].index < 3) seen_index |= 1 << ps[i].index;
    }
    CHECK(seen_after == 7, "each count-down saw its own count (mask %d)", seen_after);
    CHECK(seen_index == 7, "each party got its own arrival index (mask %d)", seen_index);
    double until = now_ms() + 8000;
    long n = -1;
    while ((n = count_keys(prefix)) != 0 && now_ms() < until) usleep(200 * 1000);
    CHECK(n == 0, "%ld keys left under %s", n, prefix);
}

static void test_latch_and_barrier_errors(void) {
    char ns[96];
    unique(ns, sizeof ns, "syncerr");
    strcat(ns, "/");
    etcdlock_client *a = connect_ns(H.endpoint, 5, ns), *b = connect_ns(H.endpoint, 5, ns);
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    etcdlock_latch *l = (etcdlock_latch *)&ns, *l2 = NULL;
    etcdlock_barrier *x = (etcdlock_barrier *)&ns, *solo = NULL;
    int64_t bad[] = {0, -1, INT64_C(2147483649)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(etcdlock_latch_open(a, "l", bad[i], &l), ETCDLOCK_INVALID_ARGUMENT);
        CHECK(l == NULL, "latch cleared on failure");
        CHECK_RC(etcdlock_barrier_open(a, "b", bad[i], &x), ETCDLOCK_INVALID_ARGUMENT);
        CHECK(x == NULL, "barrier cleared on failure");
    }
    CHECK_RC(etcdlock_latch_open(a, "", 1, &l), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_latch_open(a, "l", 1, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_latch_count(NULL, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_latch_wait(NULL, 0), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_barrier_wait(NULL, 0, NULL), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_latch_free(NULL);
    etcdlock_barrier_free(NULL);
    CHECK_RC(etcdlock_latch_open(b, "l", 2, &l2), ETCDLOCK_OK);
    CHECK_RC(etcdlock_latch_open(a, "l", 3, &l), ETCDLOCK_INVALID_ARGUMENT);
    double t0 = now_ms();
    CHECK_RC(etcdlock_latch_wait(l2, 100), ETCDLOCK_TIMEOUT);
    CHECK(now_ms() - t0 >= 100, "timed out early");
    CHECK_RC(etcdlock_latch_wait(l2, ETCDLOCK_MAX_TIMEOUT_MS + 1), ETCDLOCK_INVALID_ARGUMENT);
    int64_t n = -1;
    CHECK_RC(etcdlock_latch_count_down(l2, &n), ETCDLOCK_OK);
    CHECK(n == 1, "count after %lld", (long long)n);
    CHECK_RC(etcdlock_latch_count_down(l2, NULL), ETCDLOCK_OK);
    CHECK_RC(etcdlock_latch_count_down(l2, &n), ETCDLOCK_OK);
    CHECK(n == 0, "a no-op at zero (%lld)", (long long)n);
    CHECK_RC(etcdlock_latch_wait(l2, 0), ETCDLOCK_OK);
    CHECK_RC(etcdlock_barrier_open(a, "solo", 1, &solo), ETCDLOCK_OK);
    int32_t index = -1;
    CHECK_RC(etcdlock_barrier_wait(solo, 1000, &index), ETCDLOCK_OK);
    CHECK(index == 0, "index %d", index);
    CHECK_RC(etcdlock_barrier_open(b, "solo", 1, &x), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_barrier_free(solo);
    /* A closed client: its latch answers CLOSED. */
    etcdlock_client_free(b);
    CHECK_RC(etcdlock_latch_count(l2, &n), ETCDLOCK_CLOSED);
    etcdlock_latch_free(l2);
    etcdlock_client_free(a);
}

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

static const test_case TESTS[] = {
    {"acquire_options_input", test_acquire_options_input},
    {"metadata_in_status", test_metadata_in_status},
    {"lock_delay_after_kill", test_lock_delay_after_kill},
    {"lock_delay_clean_unlock", test_lock_delay_clean_unlock},
    {"lease_time_and_release_permit", test_lease_time_and_release_permit},
    {"latch_and_barrier", test_latch_and_barrier},
    {"latch_and_barrier_errors", test_latch_and_barrier_errors},
};

int main(int argc, char **argv) {
    (void)harness_command; /* harness.h is shared; this program sends no command */
    if (argc == 4 && strcmp(argv[1], "--delay-holder") == 0) return delay_holder_main(argv[2], argv[3]);
    if (!realpath(argv[0], EXE)) snprintf(EXE, sizeof EXE, "%s", argv[0]);
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
