/* The C test suite of libetcdlock, against a real etcd started by etcd-harness.
 * Plain C11 + pthreads. Last line of output: "N passed, N failed".
 *
 * Environment:
 *   ETCDLOCK_HARNESS      path of etcd-harness (default target/debug/etcd-harness)
 *   ETCDLOCK_TEST_THREADS threads of the contention test (default 8)
 *   ETCDLOCK_TEST_ITERS   acquisitions per thread (default 500)
 *   ETCDLOCK_TEST_FREE_ROUNDS rounds of the client_free stress test (default 20)
 *   ETCDLOCK_TEST_SKIP    comma-separated test names to leave out of this run
 * An argument selects the tests whose name contains it.
 *
 * Run as `test_etcdlock --holder ENDPOINT NAME` it is the child process of the
 * SIGSTOP test: it holds NAME with a 2 s TTL and reports on stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void unique(char *buf, size_t n, const char *what) {
    static atomic_int seq;
    snprintf(buf, n, "ctest-%d-%s-%d", (int)getpid(), what, atomic_fetch_add(&seq, 1));
}

static etcdlock_client *connect_ttl(int64_t ttl) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) return NULL;
    o.endpoints = H.endpoint;
    o.ttl_secs = ttl;
    int rc = etcdlock_client_connect(&o, &c);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "  connect failed: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        return NULL;
    }
    return c;
}
static etcdlock_client *connect_default(void) { return connect_ttl(10); }

/* A one-shot event (mutex + condvar) with a timeout, to await callbacks. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fired;     /* how many times the callback ran */
    int status;
    etcdlock_guard *guard;
    pthread_t thread;
    char message[512];
} event;

static void event_init(event *e) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->status = -1;
}
static void event_destroy(event *e) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
}
/* Wait until the event fired, at most ms. Returns 1 if it fired. */
static int event_wait(event *e, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&e->mu);
    while (!e->fired) {
        if (pthread_cond_timedwait(&e->cv, &e->mu, &ts) == ETIMEDOUT) break;
    }
    int f = e->fired;
    pthread_mutex_unlock(&e->mu);
    return f;
}

static void on_locked(int status, etcdlock_guard *g, void *ud) {
    event *e = ud;
    pthread_mutex_lock(&e->mu);
    e->fired++;
    e->status = status;
    e->guard = g;
    e->thread = pthread_self();
    snprintf(e->message, sizeof e->message, "%s", etcdlock_last_error_message());
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void on_loss(int reason, void *ud) {
    event *e = ud;
    pthread_mutex_lock(&e->mu);
    e->fired++;
    e->status = reason;
    e->thread = pthread_self();
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* A multi-lock's loss callback: the event plus the lost lock's index. */
typedef struct {
    event e;
    size_t index;
} multi_loss_event;

static void on_multi_loss(int reason, size_t index, void *ud) {
    multi_loss_event *m = ud;
    pthread_mutex_lock(&m->e.mu);
    m->e.fired++;
    m->e.status = reason;
    m->index = index;
    m->e.thread = pthread_self();
    pthread_cond_broadcast(&m->e.cv);
    pthread_mutex_unlock(&m->e.mu);
}

static void ignore_renewal(int64_t ms, void *ud) {
    (void)ms;
    (void)ud;
}

/* ------------------------------------------------------------------------ */

static void test_version_and_names(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ETCDLOCK_VERSION_MAJOR, ETCDLOCK_VERSION_MINOR, ETCDLOCK_VERSION_PATCH);
    CHECK(etcdlock_version() != NULL && strcmp(etcdlock_version(), want) == 0, "version %s", etcdlock_version());
    CHECK(etcdlock_version_number() == ETCDLOCK_VERSION_NUMBER, "version number %d", etcdlock_version_number());
    CHECK(strcmp(etcdlock_status_name(ETCDLOCK_OK), "OK") == 0, "OK name");
    CHECK(strcmp(etcdlock_status_name(ETCDLOCK_WOULD_BLOCK), "WouldBlock") == 0, "WouldBlock name");
    CHECK(strcmp(etcdlock_status_name(ETCDLOCK_INTERNAL), "Internal") == 0, "Internal name");
    CHECK(strcmp(etcdlock_status_name(ETCDLOCK_DEADLOCK), "Deadlock") == 0, "Deadlock name");
    CHECK(strcmp(etcdlock_status_name(13), "Unknown") == 0, "unknown name");
    CHECK(strcmp(etcdlock_status_name(-1), "Unknown") == 0, "negative name");
    CHECK(strcmp(etcdlock_loss_reason_name(ETCDLOCK_LOSS_NONE), "Released") == 0, "Released");
    CHECK(strcmp(etcdlock_loss_reason_name(ETCDLOCK_LOSS_KEY_DELETED), "KeyDeleted") == 0, "KeyDeleted");
    CHECK(strcmp(etcdlock_loss_reason_name(99), "Unknown") == 0, "unknown reason");
    CHECK(etcdlock_last_error_message() != NULL, "message never NULL");
}

static void test_lock_unlock(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128];
    unique(name, sizeof name, "lock");
    int64_t ttl = 0;
    CHECK_RC(etcdlock_client_ttl(c, &ttl), ETCDLOCK_OK);
    CHECK(ttl == 10, "ttl %lld", (long long)ttl);

    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    CHECK(g != NULL, "guard");
    if (!g) { etcdlock_client_free(c); return; }
    const char *key = NULL;
    int64_t lease = 0, token = 0, token2 = 0;
    int held = 0, reason = -1;
    CHECK_RC(etcdlock_guard_key(g, &key), ETCDLOCK_OK);
    CHECK(key && strncmp(key, name, strlen(name)) == 0 && key[strlen(name)] == '/', "key %s", key ? key : "(null)");
    CHECK_RC(etcdlock_guard_lease_id(g, &lease), ETCDLOCK_OK);
    CHECK(lease != 0, "lease %lld", (long long)lease);
    CHECK_RC(etcdlock_guard_fencing_token(g, &token), ETCDLOCK_OK);
    CHECK(token > 0, "token %lld", (long long)token);
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 1, "held %d", held);
    CHECK_RC(etcdlock_guard_loss_reason(g, &reason), ETCDLOCK_OK);
    CHECK(reason == ETCDLOCK_LOSS_NONE, "reason %d", reason);

    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 0, "held after unlock %d", held);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK); /* idempotent */
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1), ETCDLOCK_NOT_HELD);
    etcdlock_guard_free(g);

    /* The lock is free again at once, and the next holder's token is larger. */
    etcdlock_guard *g2 = NULL;
    CHECK_RC(etcdlock_try_lock(c, name, &g2), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_fencing_token(g2, &token2), ETCDLOCK_OK);
    CHECK(token2 > token, "token %lld then %lld", (long long)token, (long long)token2);
    etcdlock_guard_free(g2); /* releases: the next try_lock succeeds */
    g2 = NULL;
    CHECK_RC(etcdlock_try_lock(c, name, &g2), ETCDLOCK_OK);
    etcdlock_guard_free(g2);
    etcdlock_client_free(c);
}

static void test_try_lock(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "try");
    etcdlock_guard *ga = NULL, *gb = (etcdlock_guard *)0x1;
    CHECK_RC(etcdlock_try_lock(a, name, &ga), ETCDLOCK_OK);
    CHECK_RC(etcdlock_try_lock(b, name, &gb), ETCDLOCK_WOULD_BLOCK);
    CHECK(gb == NULL, "guard NULL on WOULD_BLOCK");
    CHECK(strlen(etcdlock_last_error_message()) > 0, "message set");
    /* Same client, second acquisition: also excluded. */
    etcdlock_guard *ga2 = NULL;
    CHECK_RC(etcdlock_try_lock(a, name, &ga2), ETCDLOCK_WOULD_BLOCK);
    CHECK_RC(etcdlock_unlock(ga), ETCDLOCK_OK);
    CHECK_RC(etcdlock_try_lock(b, name, &gb), ETCDLOCK_OK);
    etcdlock_guard_free(gb);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

static void test_timeout(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "timeout");
    etcdlock_guard *ga = NULL, *gb = (etcdlock_guard *)0x1;
    CHECK_RC(etcdlock_lock(a, name, 5000, &ga), ETCDLOCK_OK);
    double t0 = now_ms();
    CHECK_RC(etcdlock_lock(b, name, 300, &gb), ETCDLOCK_TIMEOUT);
    double dt = now_ms() - t0;
    CHECK(dt >= 290 && dt < 3000, "timed out after %.0f ms", dt);
    CHECK(gb == NULL, "guard NULL on timeout");
    CHECK_RC(etcdlock_lock(b, name, 0, &gb), ETCDLOCK_TIMEOUT);
    /* The timed-out waiters left no key: after A unlocks, B's try_lock succeeds. */
    CHECK_RC(etcdlock_unlock(ga), ETCDLOCK_OK);
    CHECK_RC(etcdlock_try_lock(b, name, &gb), ETCDLOCK_OK);
    etcdlock_guard_free(gb);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

typedef struct {
    etcdlock_client *c;
    const char *name;
    int rc;
    etcdlock_guard *g;
} waiter_arg;

static void *waiter_main(void *p) {
    waiter_arg *w = p;
    w->rc = etcdlock_lock(w->c, w->name, ETCDLOCK_WAIT_FOREVER, &w->g);
    return NULL;
}

static void *unlock_main(void *p) {
    return (void *)(intptr_t)etcdlock_unlock((etcdlock_guard *)p);
}

/* A blocking call from a thread with a small stack: 128 KiB is what musl
 * (Alpine) gives every pthread_create'd thread by default. The library polls a
 * blocking call on the caller's thread, so it must not need more stack than
 * that (it moves to a stack of its own when too little is left). */
static void *small_stack_main(void *p) {
    waiter_arg *w = p;
    w->rc = etcdlock_lock(w->c, w->name, ETCDLOCK_WAIT_FOREVER, &w->g);
    if (w->rc == ETCDLOCK_OK) w->rc = etcdlock_unlock(w->g);
    return NULL;
}

static void test_small_stack_thread(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "small-stack");
    etcdlock_guard *ga = NULL;
    CHECK_RC(etcdlock_lock(a, name, -1, &ga), ETCDLOCK_OK);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    CHECK(pthread_attr_setstacksize(&attr, 128 * 1024) == 0, "stack size");
    for (int round = 0; round < 3; round++) {
        /* Round 0 waits for A's release (a queued wait, then the hand-over);
         * the others take the free lock at once. */
        waiter_arg w = {b, name, -1, NULL};
        pthread_t t;
        CHECK(pthread_create(&t, &attr, small_stack_main, &w) == 0, "pthread_create");
        if (round == 0) {
            usleep(50 * 1000);
            CHECK_RC(etcdlock_unlock(ga), ETCDLOCK_OK);
        }
        pthread_join(t, NULL);
        CHECK_RC(w.rc, ETCDLOCK_OK);
        etcdlock_guard_free(w.g);
    }
    pthread_attr_destroy(&attr);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

static void test_wait_forever_handoff_and_cross_thread_unlock(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "handoff");
    etcdlock_guard *ga = NULL;
    CHECK_RC(etcdlock_lock(a, name, -1, &ga), ETCDLOCK_OK);
    waiter_arg w = {b, name, -1, NULL};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    /* Wait until B queues behind A: then A's own second try_lock sees a waiter too. */
    usleep(200 * 1000);
    /* Unlock from another thread than the one that locked. */
    pthread_t u;
    void *urc = NULL;
    pthread_create(&u, NULL, unlock_main, ga);
    pthread_join(u, &urc);
    CHECK((intptr_t)urc == ETCDLOCK_OK, "unlock from another thread: %d", (int)(intptr_t)urc);
    pthread_join(t, NULL);
    CHECK(w.rc == ETCDLOCK_OK, "waiter got %s", etcdlock_status_name(w.rc));
    int64_t ta = 0, tb = 0;
    etcdlock_guard_fencing_token(ga, &ta);
    if (w.g) etcdlock_guard_fencing_token(w.g, &tb);
    CHECK(tb > ta, "tokens %lld -> %lld", (long long)ta, (long long)tb);
    etcdlock_guard_free(w.g);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

static void test_guarded_ops(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128], key[160];
    unique(name, sizeof name, "guarded");
    snprintf(key, sizeof key, "%s-data", name);
    size_t kl = strlen(key);
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    if (!g) { etcdlock_client_free(c); return; }
    uint8_t *v = (uint8_t *)0x1;
    size_t n = 99;
    CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_OK);
    CHECK(v == NULL && n == 0, "missing key: %p %zu", (void *)v, n);
    const uint8_t bin[5] = {'a', 0, 'b', 0xff, 'c'};
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)key, kl, bin, sizeof bin), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_OK);
    CHECK(v != NULL && n == 5 && memcmp(v, bin, 5) == 0, "binary value round trip (%zu bytes)", n);
    etcdlock_buffer_free(v);
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)key, kl, NULL, 0), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_OK);
    CHECK(v != NULL && n == 0, "empty value is present: %p %zu", (void *)v, n);
    etcdlock_buffer_free(v);
    int deleted = -1;
    CHECK_RC(etcdlock_guard_delete(g, (const uint8_t *)key, kl, &deleted), ETCDLOCK_OK);
    CHECK(deleted == 1, "deleted %d", deleted);
    CHECK_RC(etcdlock_guard_delete(g, (const uint8_t *)key, kl, &deleted), ETCDLOCK_OK);
    CHECK(deleted == 0, "deleted again %d", deleted);
    CHECK_RC(etcdlock_guard_delete(g, (const uint8_t *)key, kl, NULL), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_NOT_HELD);
    CHECK_RC(etcdlock_guard_delete(g, (const uint8_t *)key, kl, NULL), ETCDLOCK_NOT_HELD);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

static void test_async_lock(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128];
    unique(name, sizeof name, "async");
    event e;
    event_init(&e);
    etcdlock_cancel_handle *h = NULL;
    CHECK_RC(etcdlock_lock_async(c, name, 5000, on_locked, &e, &h), ETCDLOCK_OK);
    CHECK(h != NULL, "cancel handle");
    CHECK(event_wait(&e, 10000), "callback ran");
    CHECK(e.status == ETCDLOCK_OK && e.guard != NULL, "status %s", etcdlock_status_name(e.status));
    CHECK(!pthread_equal(e.thread, pthread_self()), "callback on a runtime thread");
    CHECK_RC(etcdlock_cancel(h), ETCDLOCK_OK); /* after completion: no-op */
    usleep(50 * 1000);
    CHECK(e.fired == 1, "fired %d times", e.fired);
    int held = 0;
    if (e.guard) {
        CHECK_RC(etcdlock_guard_is_held(e.guard, &held), ETCDLOCK_OK);
        CHECK(held == 1, "held");
    }
    etcdlock_cancel_free(h);
    etcdlock_guard_free(e.guard);
    /* Without a cancel handle. */
    event e2;
    event_init(&e2);
    CHECK_RC(etcdlock_lock_async(c, name, -1, on_locked, &e2, NULL), ETCDLOCK_OK);
    CHECK(event_wait(&e2, 10000) && e2.status == ETCDLOCK_OK, "second async lock");
    etcdlock_guard_free(e2.guard);
    event_destroy(&e2);
    event_destroy(&e);
    etcdlock_client_free(c);
}

static void test_async_timeout_and_cancel(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "asynccancel");
    etcdlock_guard *ga = NULL;
    CHECK_RC(etcdlock_lock(a, name, 5000, &ga), ETCDLOCK_OK);

    event t;
    event_init(&t);
    CHECK_RC(etcdlock_lock_async(b, name, 200, on_locked, &t, NULL), ETCDLOCK_OK);
    CHECK(event_wait(&t, 10000), "timeout callback ran");
    CHECK(t.status == ETCDLOCK_TIMEOUT && t.guard == NULL, "status %s", etcdlock_status_name(t.status));
    CHECK(strlen(t.message) > 0 && strstr(t.message, name) != NULL, "message in callback: %s", t.message);

    event e;
    event_init(&e);
    etcdlock_cancel_handle *h = NULL;
    CHECK_RC(etcdlock_lock_async(b, name, ETCDLOCK_WAIT_FOREVER, on_locked, &e, &h), ETCDLOCK_OK);
    CHECK(!event_wait(&e, 300), "still waiting while held");
    CHECK_RC(etcdlock_cancel(h), ETCDLOCK_OK);
    CHECK(event_wait(&e, 10000), "cancel callback ran");
    CHECK(e.status == ETCDLOCK_CANCELLED && e.guard == NULL, "status %s", etcdlock_status_name(e.status));
    CHECK_RC(etcdlock_cancel(h), ETCDLOCK_OK);
    etcdlock_cancel_free(h);
    /* The cancelled waiter removed its key: once A unlocks, try_lock succeeds. */
    CHECK_RC(etcdlock_unlock(ga), ETCDLOCK_OK);
    etcdlock_guard *gb = NULL;
    CHECK_RC(etcdlock_try_lock(b, name, &gb), ETCDLOCK_OK);
    etcdlock_guard_free(gb);
    usleep(50 * 1000);
    CHECK(e.fired == 1 && t.fired == 1, "each callback exactly once (%d, %d)", e.fired, t.fired);

    /* Freeing the client completes a pending wait (once) with CLOSED or LOCK_LOST. */
    etcdlock_guard *ga2 = NULL;
    CHECK_RC(etcdlock_lock(a, name, 5000, &ga2), ETCDLOCK_OK);
    event f;
    event_init(&f);
    CHECK_RC(etcdlock_lock_async(b, name, -1, on_locked, &f, NULL), ETCDLOCK_OK);
    CHECK(!event_wait(&f, 200), "waiting");
    etcdlock_client_free(b);
    CHECK(event_wait(&f, 10000), "callback after client free");
    CHECK((f.status == ETCDLOCK_CLOSED || f.status == ETCDLOCK_LOCK_LOST) && f.guard == NULL, "status %s",
          etcdlock_status_name(f.status));
    etcdlock_guard_free(ga2);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    event_destroy(&t);
    event_destroy(&e);
    event_destroy(&f);
}

/* A blocking call inside a callback is refused (it would stall the runtime). */
static void blocking_in_callback(int status, etcdlock_guard *g, void *ud) {
    event *e = ud;
    int rc = g ? etcdlock_unlock(g) : -1;
    etcdlock_guard_free(g); /* fine on a runtime thread: releases in the background */
    pthread_mutex_lock(&e->mu);
    e->fired++;
    e->status = status == ETCDLOCK_OK ? rc : -2;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void test_blocking_call_in_callback(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128];
    unique(name, sizeof name, "cbblock");
    event e;
    event_init(&e);
    CHECK_RC(etcdlock_lock_async(c, name, 5000, blocking_in_callback, &e, NULL), ETCDLOCK_OK);
    CHECK(event_wait(&e, 10000), "callback ran");
    CHECK(e.status == ETCDLOCK_INVALID_ARGUMENT, "unlock in callback returned %s", etcdlock_status_name(e.status));
    /* The guard freed inside the callback released the lock in the background. */
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    event_destroy(&e);
    etcdlock_client_free(c);
}

static void test_loss_callbacks(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128], other[128];
    unique(name, sizeof name, "loss");
    unique(other, sizeof other, "loss-other");

    /* Normal release: the callback runs once with LOSS_NONE. */
    etcdlock_guard *g = NULL;
    event rel;
    event_init(&rel);
    CHECK_RC(etcdlock_lock(a, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &rel), ETCDLOCK_OK);
    CHECK(!event_wait(&rel, 100), "not yet");
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    CHECK(event_wait(&rel, 5000) && rel.status == ETCDLOCK_LOSS_NONE, "released: %d", rel.status);
    /* Registered after the end: runs at once. */
    event late;
    event_init(&late);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &late), ETCDLOCK_OK);
    CHECK(event_wait(&late, 5000) && late.status == ETCDLOCK_LOSS_NONE, "late: %d", late.status);
    etcdlock_guard_free(g);

    /* Key deleted by someone else (B's guarded delete of A's key): KEY_DELETED. */
    event del;
    event_init(&del);
    etcdlock_guard *gb = NULL;
    const char *akey = NULL;
    CHECK_RC(etcdlock_lock(a, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &del), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_key(g, &akey), ETCDLOCK_OK);
    CHECK_RC(etcdlock_lock(b, other, 5000, &gb), ETCDLOCK_OK);
    int existed = 0;
    CHECK_RC(etcdlock_guard_delete(gb, (const uint8_t *)akey, strlen(akey), &existed), ETCDLOCK_OK);
    CHECK(existed == 1, "A's key existed");
    CHECK(event_wait(&del, 10000), "loss callback ran");
    CHECK(del.status == ETCDLOCK_LOSS_KEY_DELETED, "reason %s", etcdlock_loss_reason_name(del.status));
    CHECK(!pthread_equal(del.thread, pthread_self()), "on a runtime thread");
    int held = 1, reason = 0;
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 0, "not held after loss");
    CHECK_RC(etcdlock_guard_loss_reason(g, &reason), ETCDLOCK_OK);
    CHECK(reason == ETCDLOCK_LOSS_KEY_DELETED, "reason %d", reason);
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"x", 1, (const uint8_t *)"y", 1), ETCDLOCK_LOCK_LOST);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_LOCK_LOST);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_LOCK_LOST); /* stays lost: every unlock says so */
    etcdlock_guard_free(g);
    etcdlock_guard_free(gb);

    /* Client freed while held: CLIENT_CLOSED, and the lock is free for others. */
    event closed;
    event_init(&closed);
    CHECK_RC(etcdlock_lock(a, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &closed), ETCDLOCK_OK);
    etcdlock_client_free(a);
    CHECK(event_wait(&closed, 10000) && closed.status == ETCDLOCK_LOSS_CLIENT_CLOSED, "closed: %d",
          closed.status);
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"x", 1, (const uint8_t *)"y", 1), ETCDLOCK_LOCK_LOST);
    gb = NULL;
    CHECK_RC(etcdlock_try_lock(b, name, &gb), ETCDLOCK_OK);
    etcdlock_guard_free(gb);
    etcdlock_guard_free(g);
    usleep(50 * 1000);
    CHECK(rel.fired == 1 && late.fired == 1 && del.fired == 1 && closed.fired == 1, "each once: %d %d %d %d",
          rel.fired, late.fired, del.fired, closed.fired);
    etcdlock_client_free(b);
    event_destroy(&rel);
    event_destroy(&late);
    event_destroy(&del);
    event_destroy(&closed);
}

/* One guard used by several threads at once: getters and guarded reads race
 * with each other and with an unlock from yet another thread. */
typedef struct {
    etcdlock_guard *g;
    const char *key;
    int errors;
    int reads;
} shared_guard_arg;

static void *shared_guard_main(void *p) {
    shared_guard_arg *a = p;
    for (int i = 0; i < 25; i++) {
        int held = 0;
        int64_t t = 0;
        uint8_t *v = NULL;
        size_t n = 0;
        if (etcdlock_guard_is_held(a->g, &held) || etcdlock_guard_fencing_token(a->g, &t) || t <= 0) a->errors++;
        int rc = etcdlock_guard_get(a->g, (const uint8_t *)a->key, strlen(a->key), &v, &n);
        if (rc == ETCDLOCK_OK) {
            if (!v || n != 2 || memcmp(v, "42", 2) != 0) a->errors++;
            a->reads++;
        } else if (rc != ETCDLOCK_NOT_HELD && rc != ETCDLOCK_LOCK_LOST) {
            /* Only "unlocked meanwhile" is acceptable: NOT_HELD, or LOCK_LOST when
             * the read passed the local check just before the unlock and etcd then
             * rejected it because the key was gone. */
            a->errors++;
            fprintf(stderr, "  guarded get: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        }
        etcdlock_buffer_free(v);
    }
    return NULL;
}

static void test_guard_shared_by_threads(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128], key[160];
    unique(name, sizeof name, "sharedguard");
    snprintf(key, sizeof key, "%s-v", name);
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    if (!g) { etcdlock_client_free(c); return; }
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)key, strlen(key), (const uint8_t *)"42", 2), ETCDLOCK_OK);
    pthread_t t[4], u;
    shared_guard_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (shared_guard_arg){g, key, 0, 0};
        pthread_create(&t[i], NULL, shared_guard_main, &a[i]);
    }
    usleep(20 * 1000);
    void *urc = NULL;
    pthread_create(&u, NULL, unlock_main, g);
    pthread_join(u, &urc);
    int errors = 0, reads = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        errors += a[i].errors;
        reads += a[i].reads;
    }
    CHECK((intptr_t)urc == ETCDLOCK_OK, "unlock from a third thread: %d", (int)(intptr_t)urc);
    CHECK(errors == 0, "%d errors in the reader threads", errors);
    CHECK(reads > 0, "no guarded read overlapped the hold");
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

/* A forked child (no exec) must not use the parent's handles: they return
 * CLOSED and free without touching etcd, and a new client works in the child. */
static void test_fork_child(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128];
    unique(name, sizeof name, "fork");
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    fflush(NULL);
    int res[2];
    if (pipe(res)) { CHECK(0, "pipe"); return; }
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a hang fails the test instead of blocking the suite */
        int code = 0, held = -1;
        etcdlock_guard *g2 = NULL;
        if (etcdlock_lock(c, "fork-other", 1000, &g2) != ETCDLOCK_CLOSED) code |= 1;
        if (etcdlock_guard_is_held(g, &held) != ETCDLOCK_CLOSED) code |= 2;
        if (etcdlock_unlock(g) != ETCDLOCK_CLOSED) code |= 4;
        etcdlock_guard_free(g);
        etcdlock_client_free(c);
        etcdlock_client *mine = connect_default();
        if (!mine) code |= 8;
        if (mine && etcdlock_try_lock(mine, name, &g2) != ETCDLOCK_WOULD_BLOCK) code |= 16; /* parent holds it */
        etcdlock_client_free(mine);
        /* Report through the pipe, then end without exit-time processing: the
         * parent's handles are deliberately leaked in the child (freeing them
         * could hang), and valgrind's leak check at exit would count them. */
        unsigned char b = (unsigned char)code;
        if (write(res[1], &b, 1) != 1) _exit(1);
        kill(getpid(), SIGKILL);
    }
    close(res[1]);
    unsigned char code = 0xff;
    CHECK(read(res[0], &code, 1) == 1, "child reported");
    close(res[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(code == 0, "child: failed checks (bits) %d", code);
    int held = 0;
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 1, "the parent still holds the lock after the child freed its copies");
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

/* ---- the holder process of the SIGSTOP test ---- */

static int holder_main(const char *endpoint, const char *name) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    etcdlock_guard *g = NULL;
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = endpoint;
    o.ttl_secs = 2;
    if (etcdlock_client_connect(&o, &c) || etcdlock_lock(c, name, 10000, &g)) {
        printf("ERROR %s\n", etcdlock_last_error_message());
        return 1;
    }
    event loss;
    event_init(&loss);
    etcdlock_guard_on_loss(g, on_loss, &loss);
    int64_t token = 0;
    etcdlock_guard_fencing_token(g, &token);
    printf("HELD %lld\n", (long long)token);
    fflush(stdout);
    if (!event_wait(&loss, 120000)) {
        printf("NOLOSS\n");
        return 1;
    }
    printf("LOST %d\n", loss.status);
    fflush(stdout);
    int rc = etcdlock_guard_put(g, (const uint8_t *)"stop-test-data", 14, (const uint8_t *)"stale", 5);
    printf("PUT %d\n", rc);
    fflush(stdout);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
    event_destroy(&loss);
    return 0;
}

static int read_line_timeout(FILE *f, char *buf, size_t n, int ms) {
    struct pollfd p = {fileno(f), POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return 0;
    return fgets(buf, (int)n, f) != NULL;
}

static void test_loss_after_sigstop(void) {
    char name[128];
    unique(name, sizeof name, "sigstop");
    int out[2];
    if (pipe(out)) { CHECK(0, "pipe"); return; }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(EXE, EXE, "--holder", H.endpoint, name, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    setvbuf(f, NULL, _IONBF, 0);
    char line[512] = "";
    long long child_token = 0;
    CHECK(read_line_timeout(f, line, sizeof line, 20000) && sscanf(line, "HELD %lld", &child_token) == 1,
          "child holds: %s", line);
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    etcdlock_guard *g = NULL;
    if (c && child_token) {
        CHECK_RC(etcdlock_try_lock(c, name, &g), ETCDLOCK_WOULD_BLOCK);
        kill(pid, SIGSTOP);
        /* The event we await: etcd expires the stopped child's 2 s lease and hands us the lock. */
        double t0 = now_ms();
        CHECK_RC(etcdlock_lock(c, name, 20000, &g), ETCDLOCK_OK);
        double waited = now_ms() - t0;
        CHECK(waited > 1000, "the lease outlived the stop for %.0f ms", waited);
        int64_t token = 0;
        if (g) etcdlock_guard_fencing_token(g, &token);
        CHECK(token > child_token, "tokens %lld -> %lld", child_token, (long long)token);
        /* Our data, written under our hold. */
        CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"stop-test-data", 14, (const uint8_t *)"fresh", 5),
                 ETCDLOCK_OK);
        kill(pid, SIGCONT);
        int reason = -1, put = -1;
        CHECK(read_line_timeout(f, line, sizeof line, 20000) && sscanf(line, "LOST %d", &reason) == 1,
              "child reports loss: %s", line);
        /* Paused past its TTL, the holder asks etcd why: the lease is gone there. */
        CHECK(reason == ETCDLOCK_LOSS_LEASE_EXPIRED, "reason %s", etcdlock_loss_reason_name(reason));
        CHECK(read_line_timeout(f, line, sizeof line, 20000) && sscanf(line, "PUT %d", &put) == 1, "put: %s", line);
        CHECK(put == ETCDLOCK_LOCK_LOST, "stale guarded put returned %s", etcdlock_status_name(put));
        /* And etcd kept our value, not the stale one. */
        uint8_t *v = NULL;
        size_t n = 0;
        CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)"stop-test-data", 14, &v, &n), ETCDLOCK_OK);
        CHECK(v && n == 5 && memcmp(v, "fresh", 5) == 0, "value kept");
        etcdlock_buffer_free(v);
    } else {
        kill(pid, SIGKILL);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %d", status);
    fclose(f);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

/* ---- contention: N threads x M acquisitions, a non-atomic counter ---- */

static int plain_counter; /* deliberately not atomic: only the lock protects it */

/* Regression guard for a core lost-wakeup bug (fixed in core: a waiter closing
 * its watch gap must compare the predecessor's create_revision, since key names
 * are re-created by clients that unlock and lock again). Each wait has a 5 s
 * timeout; a wait that times out is counted as a stall and retried, and any
 * stall fails the test unless ETCDLOCK_TEST_MAX_STALLS allows some. */
static atomic_int stalls;

static int lock_retrying(etcdlock_client *c, const char *name, etcdlock_guard **g) {
    for (int attempt = 0; attempt < 12; attempt++) {
        int rc = etcdlock_lock(c, name, 5000, g);
        if (rc != ETCDLOCK_TIMEOUT) return rc;
        atomic_fetch_add(&stalls, 1);
    }
    return ETCDLOCK_TIMEOUT;
}

static void check_stalls(void) {
    int n = atomic_exchange(&stalls, 0);
    const char *max = getenv("ETCDLOCK_TEST_MAX_STALLS");
    if (!max || !*max) max = "0";
    if (n) fprintf(stderr, "  %d lock waits stalled for 5 s (lost wakeup, see lock_retrying)\n", n);
    CHECK(n <= atoi(max), "%d stalls, at most %s allowed", n, max);
}

typedef struct {
    etcdlock_client *c;
    const char *name;
    int iters;
    int errors;
    int64_t last_token;
    int token_regressions;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg *w = p;
    for (int i = 0; i < w->iters; i++) {
        etcdlock_guard *g = NULL;
        int rc = lock_retrying(w->c, w->name, &g);
        if (rc != ETCDLOCK_OK) {
            w->errors++;
            fprintf(stderr, "  lock: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
            continue;
        }
        int64_t t = 0;
        etcdlock_guard_fencing_token(g, &t);
        if (t <= w->last_token) w->token_regressions++;
        w->last_token = t;
        int v = plain_counter; /* read-yield-write: loses updates without mutual exclusion */
        sched_yield();
        plain_counter = v + 1;
        if (etcdlock_unlock(g) != ETCDLOCK_OK) w->errors++;
        etcdlock_guard_free(g);
    }
    return NULL;
}

static int env_int(const char *k, int def) {
    const char *v = getenv(k);
    return (v && *v) ? atoi(v) : def;
}

static void test_contention_plain_counter(void) {
    int threads = env_int("ETCDLOCK_TEST_THREADS", 8), iters = env_int("ETCDLOCK_TEST_ITERS", 500);
    if (threads > 64) threads = 64;
    etcdlock_client *c = connect_default(); /* one client shared by every thread */
    CHECK(c != NULL, "connect");
    if (!c) return;
    char name[128];
    unique(name, sizeof name, "contention");
    plain_counter = 0;
    pthread_t t[64];
    worker_arg w[64];
    double t0 = now_ms();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker_arg){c, name, iters, 0, 0, 0};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    int errors = 0, regressions = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
        regressions += w[i].token_regressions;
    }
    double dt = now_ms() - t0;
    fprintf(stderr, "  contention: %d threads x %d in %.0f ms (%.0f acquisitions/s)\n", threads, iters, dt,
            threads * iters / (dt / 1000.0));
    CHECK(errors == 0, "%d errors", errors);
    CHECK(regressions == 0, "%d fencing token regressions", regressions);
    CHECK(plain_counter == threads * iters, "counter %d, want %d", plain_counter, threads * iters);
    check_stalls();
    etcdlock_client_free(c);
}

/* An etcd counter read and written with guarded get/put, one client per thread. */
typedef struct {
    const char *name;
    int iters;
    int errors;
} etcd_worker_arg;

static void *etcd_worker_main(void *p) {
    etcd_worker_arg *w = p;
    etcdlock_client *c = connect_default();
    if (!c) { w->errors = w->iters; return NULL; }
    char key[200];
    snprintf(key, sizeof key, "%s-counter", w->name);
    for (int i = 0; i < w->iters; i++) {
        etcdlock_guard *g = NULL;
        if (lock_retrying(c, w->name, &g) != ETCDLOCK_OK) { w->errors++; continue; }
        uint8_t *v = NULL;
        size_t n = 0;
        long cur = 0;
        char buf[32];
        if (etcdlock_guard_get(g, (const uint8_t *)key, strlen(key), &v, &n) != ETCDLOCK_OK) w->errors++;
        if (v) {
            snprintf(buf, sizeof buf, "%.*s", (int)n, (const char *)v);
            cur = atol(buf);
        }
        etcdlock_buffer_free(v);
        snprintf(buf, sizeof buf, "%ld", cur + 1);
        if (etcdlock_guard_put(g, (const uint8_t *)key, strlen(key), (const uint8_t *)buf, strlen(buf)) !=
            ETCDLOCK_OK)
            w->errors++;
        etcdlock_guard_free(g); /* releases */
    }
    etcdlock_client_free(c);
    return NULL;
}

static void test_contention_etcd_counter(void) {
    int threads = 4, iters = env_int("ETCDLOCK_TEST_ITERS", 500) / 10;
    if (iters < 5) iters = 5;
    char name[128];
    unique(name, sizeof name, "etcdcounter");
    pthread_t t[4];
    etcd_worker_arg w[4];
    for (int i = 0; i < threads; i++) {
        w[i] = (etcd_worker_arg){name, iters, 0};
        pthread_create(&t[i], NULL, etcd_worker_main, &w[i]);
    }
    int errors = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
    }
    CHECK(errors == 0, "%d errors", errors);
    check_stalls();
    etcdlock_client *c = connect_default();
    etcdlock_guard *g = NULL;
    char key[200];
    snprintf(key, sizeof key, "%s-counter", name);
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    uint8_t *v = NULL;
    size_t n = 0;
    CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, strlen(key), &v, &n), ETCDLOCK_OK);
    char buf[32] = "";
    if (v) snprintf(buf, sizeof buf, "%.*s", (int)n, (const char *)v);
    CHECK(atol(buf) == threads * iters, "etcd counter %s, want %d", buf, threads * iters);
    etcdlock_buffer_free(v);
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
}

/* ---- every bad input ---- */

static int cb_never_calls;
static void never_cb(int s, etcdlock_guard *g, void *u) { (void)s; (void)g; (void)u; cb_never_calls++; }

#define BAD(expr) CHECK_RC(expr, ETCDLOCK_INVALID_ARGUMENT)

static int connect_rc(etcdlock_options *o) {
    etcdlock_client *c = (etcdlock_client *)0x1;
    int rc = etcdlock_client_connect(o, &c);
    if (c == (etcdlock_client *)0x1) return -100; /* out-param not reset */
    if (c) etcdlock_client_free(c);
    return rc;
}

static void test_bad_input(void) {
    etcdlock_options o;
    /* options */
    BAD(etcdlock_options_init(NULL, sizeof o));
    BAD(etcdlock_options_init(&o, 4));
    BAD(etcdlock_options_init(&o, 0));
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    CHECK(o.struct_size == sizeof o && o.ttl_secs == ETCDLOCK_UNSET && o.connect_timeout_ms == ETCDLOCK_UNSET &&
              o.watch_held_keys == -1 && o.margin_ms == -1 && o.endpoints == NULL,
          "every field not set");
    etcdlock_client *c = (etcdlock_client *)0x1;
    BAD(etcdlock_client_connect(NULL, &c));
    CHECK(c == NULL, "out reset on error");
    o.endpoints = H.endpoint;
    BAD(etcdlock_client_connect(&o, NULL));
#define WITH(field, value, want)                                     \
    do {                                                             \
        etcdlock_options_init(&o, sizeof o);                         \
        o.endpoints = H.endpoint;                                    \
        o.connect_timeout_ms = 1500;                                 \
        o.field = value;                                             \
        int rc__ = connect_rc(&o);                                   \
        CHECK(rc__ == (want), "options." #field " = " #value ": %s (%d)", etcdlock_status_name(rc__), rc__); \
    } while (0)
    WITH(struct_size, 0, ETCDLOCK_INVALID_ARGUMENT);
    WITH(struct_size, 8, ETCDLOCK_INVALID_ARGUMENT);
    WITH(struct_size, sizeof o + 8, ETCDLOCK_INVALID_ARGUMENT);
    /* endpoints = NULL is "not set": ETCDLOCK_ENDPOINTS or the default (test_options_from_env). */
    WITH(endpoints, "", ETCDLOCK_INVALID_ARGUMENT);
    WITH(endpoints, " , ", ETCDLOCK_INVALID_ARGUMENT);
    WITH(endpoints, "\xff\xfe", ETCDLOCK_INVALID_ARGUMENT);
    WITH(endpoints, "https://127.0.0.1:2379", ETCDLOCK_INVALID_ARGUMENT);
    WITH(endpoints, "http://127.0.0.1:1", ETCDLOCK_UNAVAILABLE);
    WITH(ttl_secs, 0, ETCDLOCK_INVALID_ARGUMENT);
    WITH(ttl_secs, -5, ETCDLOCK_INVALID_ARGUMENT);
    WITH(ttl_secs, 9000000001LL, ETCDLOCK_INVALID_ARGUMENT);
    WITH(ttl_secs, INT64_MAX, ETCDLOCK_INVALID_ARGUMENT);
    WITH(connect_timeout_ms, 0, ETCDLOCK_INVALID_ARGUMENT);
    WITH(request_timeout_ms, -1, ETCDLOCK_INVALID_ARGUMENT);
    WITH(request_timeout_ms, INT64_MAX, ETCDLOCK_INVALID_ARGUMENT);
    WITH(margin_ms, INT64_MAX, ETCDLOCK_INVALID_ARGUMENT);
    WITH(watch_held_keys, 2, ETCDLOCK_INVALID_ARGUMENT);
    WITH(namespace_prefix, "\xc3\x28", ETCDLOCK_INVALID_ARGUMENT);
    WITH(username, "root", ETCDLOCK_INVALID_ARGUMENT); /* without password */
    WITH(tls_ca, "/nonexistent/ca.pem", ETCDLOCK_INVALID_ARGUMENT);
    /* A password never shows up in a message. */
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = H.endpoint;
    o.username = "root";
    o.password = "s3cr3t-pa55word";
    int rc = connect_rc(&o);
    CHECK(rc != ETCDLOCK_OK, "auth against an etcd without auth: %s", etcdlock_status_name(rc));
    CHECK(strstr(etcdlock_last_error_message(), "s3cr3t-pa55word") == NULL, "password in message");
    /* NULL out-params and handles */
    int64_t i64;
    int i32;
    const char *s;
    BAD(etcdlock_client_ttl(NULL, &i64));
    etcdlock_client *good = connect_default();
    CHECK(good != NULL, "connect");
    if (!good) return;
    BAD(etcdlock_client_ttl(good, NULL));
    etcdlock_guard *g = (etcdlock_guard *)0x1;
    BAD(etcdlock_lock(NULL, "x", 0, &g));
    CHECK(g == NULL, "guard out reset");
    BAD(etcdlock_lock(good, "x", 0, NULL));
    BAD(etcdlock_lock(good, NULL, 0, &g));
    BAD(etcdlock_lock(good, "", 0, &g));
    BAD(etcdlock_lock(good, "\xff\xfe\xfd", 0, &g));
    BAD(etcdlock_lock(good, "ok\xc3", 0, &g));
    BAD(etcdlock_lock(good, "x", ETCDLOCK_MAX_TIMEOUT_MS + 1, &g));
    BAD(etcdlock_lock(good, "x", INT64_MAX, &g));
    char *big = malloc(ETCDLOCK_MAX_NAME_LEN + 2);
    memset(big, 'n', ETCDLOCK_MAX_NAME_LEN + 1);
    big[ETCDLOCK_MAX_NAME_LEN + 1] = '\0';
    BAD(etcdlock_lock(good, big, 1000, &g));
    BAD(etcdlock_try_lock(good, big, &g));
    BAD(etcdlock_try_lock(NULL, "x", &g));
    BAD(etcdlock_try_lock(good, NULL, &g));
    BAD(etcdlock_try_lock(good, "", &g));
    BAD(etcdlock_try_lock(good, "\x80", &g));
    BAD(etcdlock_try_lock(good, "x", NULL));
    etcdlock_cancel_handle *h = (etcdlock_cancel_handle *)0x1;
    BAD(etcdlock_lock_async(NULL, "x", 0, never_cb, NULL, &h));
    CHECK(h == NULL, "cancel out reset");
    BAD(etcdlock_lock_async(good, NULL, 0, never_cb, NULL, &h));
    BAD(etcdlock_lock_async(good, "", 0, never_cb, NULL, &h));
    BAD(etcdlock_lock_async(good, big, 0, never_cb, NULL, &h));
    BAD(etcdlock_lock_async(good, "\xff", 0, never_cb, NULL, &h));
    BAD(etcdlock_lock_async(good, "x", ETCDLOCK_MAX_TIMEOUT_MS + 1, never_cb, NULL, &h));
    BAD(etcdlock_lock_async(good, "x", 0, NULL, NULL, &h));
    CHECK(h == NULL, "no handle on error");
    BAD(etcdlock_cancel(NULL));
    free(big);
    /* guard functions */
    BAD(etcdlock_guard_key(NULL, &s));
    BAD(etcdlock_guard_lease_id(NULL, &i64));
    BAD(etcdlock_guard_fencing_token(NULL, &i64));
    BAD(etcdlock_guard_is_held(NULL, &i32));
    BAD(etcdlock_guard_loss_reason(NULL, &i32));
    BAD(etcdlock_guard_on_loss(NULL, on_loss, NULL));
    BAD(etcdlock_unlock(NULL));
    BAD(etcdlock_guard_put(NULL, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1));
    uint8_t *v = (uint8_t *)0x1;
    size_t n = 7;
    BAD(etcdlock_guard_get(NULL, (const uint8_t *)"k", 1, &v, &n));
    CHECK(v == NULL && n == 0, "get outs reset");
    BAD(etcdlock_guard_delete(NULL, (const uint8_t *)"k", 1, NULL));
    char name[128];
    unique(name, sizeof name, "bad");
    CHECK_RC(etcdlock_lock(good, name, 5000, &g), ETCDLOCK_OK);
    if (g) {
        BAD(etcdlock_guard_key(g, NULL));
        BAD(etcdlock_guard_lease_id(g, NULL));
        BAD(etcdlock_guard_fencing_token(g, NULL));
        BAD(etcdlock_guard_is_held(g, NULL));
        BAD(etcdlock_guard_loss_reason(g, NULL));
        BAD(etcdlock_guard_on_loss(g, NULL, NULL));
        BAD(etcdlock_guard_put(g, NULL, 1, (const uint8_t *)"v", 1));
        BAD(etcdlock_guard_put(g, (const uint8_t *)"k", 0, (const uint8_t *)"v", 1));
        BAD(etcdlock_guard_put(g, NULL, 0, NULL, 0));
        BAD(etcdlock_guard_put(g, (const uint8_t *)"k", 1, NULL, 5));
        BAD(etcdlock_guard_put(g, (const uint8_t *)"k", (size_t)ETCDLOCK_MAX_BUFFER_LEN + 1, (const uint8_t *)"v", 1));
        BAD(etcdlock_guard_put(g, (const uint8_t *)"k", 1, (const uint8_t *)"v", SIZE_MAX));
        BAD(etcdlock_guard_get(g, NULL, 1, &v, &n));
        BAD(etcdlock_guard_get(g, (const uint8_t *)"k", 0, &v, &n));
        BAD(etcdlock_guard_get(g, (const uint8_t *)"k", 1, NULL, &n));
        BAD(etcdlock_guard_get(g, (const uint8_t *)"k", 1, &v, NULL));
        BAD(etcdlock_guard_get(g, (const uint8_t *)"k", SIZE_MAX, &v, &n));
        BAD(etcdlock_guard_delete(g, NULL, 1, NULL));
        BAD(etcdlock_guard_delete(g, (const uint8_t *)"k", 0, NULL));
        /* etcd's own request size limit (1.5 MiB) is reported as INVALID_ARGUMENT too. */
        size_t huge = 3 * 1024 * 1024;
        uint8_t *hv = calloc(1, huge);
        BAD(etcdlock_guard_put(g, (const uint8_t *)"k", 1, hv, huge));
        free(hv);
        int held = 0;
        CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
        CHECK(held == 1, "still held after bad calls");
    }
    etcdlock_guard_free(g);
    /* Every *_free accepts NULL. */
    etcdlock_client_free(NULL);
    etcdlock_guard_free(NULL);
    etcdlock_cancel_free(NULL);
    etcdlock_buffer_free(NULL);
    /* Every error sets a message. */
    BAD(etcdlock_lock(good, "", 0, &g));
    CHECK(strstr(etcdlock_last_error_message(), "empty") != NULL, "message: %s", etcdlock_last_error_message());
    usleep(50 * 1000);
    CHECK(cb_never_calls == 0, "callback ran after a refused lock_async");
    etcdlock_client_free(good);
}

/* The last error message is per thread. */
static void *other_thread_message(void *p) {
    (void)p;
    return (void *)(intptr_t)(strlen(etcdlock_last_error_message()) == 0 && etcdlock_last_error_status() == ETCDLOCK_OK);
}
/* The core's metrics source through the C ABI: acquisitions by outcome, holds,
 * a smaller struct_size written only that far, bad arguments refused. */
static void test_metrics(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    if (!a || !b) { CHECK(0, "connect"); etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[96];
    unique(name, sizeof name, "metrics");
    etcdlock_metrics m;
    memset(&m, 0xff, sizeof m);
    CHECK_RC(etcdlock_client_metrics(a, &m, sizeof m), ETCDLOCK_OK);
    CHECK(m.struct_size == sizeof m && m.held == 0 && m.waiting == 0 && m.holds_ended == 0 &&
              m.acquisitions[ETCDLOCK_RESULT_ACQUIRED] == 0, "fresh client");
    etcdlock_guard *g = NULL, *g2 = NULL;
    CHECK_RC(etcdlock_lock(a, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_client_metrics(a, &m, sizeof m), ETCDLOCK_OK);
    CHECK(m.held == 1 && m.acquisitions[ETCDLOCK_RESULT_ACQUIRED] == 1, "held %lld", (long long)m.held);
    CHECK_RC(etcdlock_try_lock(b, name, &g2), ETCDLOCK_WOULD_BLOCK);
    CHECK_RC(etcdlock_lock(b, name, 0, &g2), ETCDLOCK_TIMEOUT);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    CHECK_RC(etcdlock_client_metrics(a, &m, sizeof m), ETCDLOCK_OK);
    CHECK(m.held == 0 && m.holds_ended == 1 && m.lost[ETCDLOCK_LOSS_KEY_DELETED - 1] == 0, "after unlock");
    CHECK_RC(etcdlock_client_metrics(b, &m, sizeof m), ETCDLOCK_OK);
    CHECK(m.acquisitions[ETCDLOCK_RESULT_WOULD_BLOCK] == 1 && m.acquisitions[ETCDLOCK_RESULT_TIMEOUT] == 1,
          "would_block %llu timeout %llu", (unsigned long long)m.acquisitions[ETCDLOCK_RESULT_WOULD_BLOCK],
          (unsigned long long)m.acquisitions[ETCDLOCK_RESULT_TIMEOUT]);
    /* An older, smaller struct: written only that far. */
    unsigned char small[16];
    memset(small, 0xab, sizeof small);
    CHECK_RC(etcdlock_client_metrics(a, (etcdlock_metrics *)(void *)small, 12), ETCDLOCK_OK);
    CHECK(small[12] == 0xab && small[15] == 0xab, "bytes past struct_size untouched");
    CHECK_RC(etcdlock_client_metrics(a, NULL, sizeof m), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_client_metrics(a, &m, 4), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_client_metrics(NULL, &m, sizeof m), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* member_failures: a dead endpoint (a loopback port nobody listens on) listed
 * before the live one counts exactly one failure at connect and none for a
 * lock and release after it; a client of the live endpoint only counts none.
 * A caller compiled before the field existed (struct_size up to
 * keepalive_rtt_ns) gets nothing written past it. */
static void test_metrics_member_failures(void) {
    /* Port 1: nothing listens there, and no free-port pick hands it to another process. */
    char endpoints[512];
    snprintf(endpoints, sizeof endpoints, "127.0.0.1:1,%s", H.endpoint);
    etcdlock_options o;
    etcdlock_client *c = NULL, *healthy = connect_default();
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    o.endpoints = endpoints;
    o.ttl_secs = 10;
    /* Lazily: an eager connect probes every member at once and keeps the
     * first to answer, so whether the dead one's refusal counts first is a
     * race. The session's first request fails on it once, then moves on. */
    o.lazy_connect = 1;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (!c || !healthy) { CHECK(0, "connect"); etcdlock_client_free(c); etcdlock_client_free(healthy); return; }
    etcdlock_metrics m;
    memset(&m, 0xff, sizeof m);
    CHECK_RC(etcdlock_client_metrics(c, &m, sizeof m), ETCDLOCK_OK);
    uint64_t after_connect = m.member_failures;
    char name[96];
    unique(name, sizeof name, "memberfail");
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    CHECK_RC(etcdlock_client_metrics(c, &m, sizeof m), ETCDLOCK_OK);
    CHECK(after_connect == 0 && m.member_failures == 1, "member_failures after connect %llu, after lock+unlock %llu",
          (unsigned long long)after_connect, (unsigned long long)m.member_failures);
    memset(&m, 0xff, sizeof m);
    CHECK_RC(etcdlock_client_metrics(healthy, &m, sizeof m), ETCDLOCK_OK);
    CHECK(m.member_failures == 0, "healthy client: member_failures %llu", (unsigned long long)m.member_failures);
    /* The struct as an older header declared it: member_failures left alone. */
    memset(&m, 0xab, sizeof m);
    size_t older = offsetof(etcdlock_metrics, member_failures);
    CHECK_RC(etcdlock_client_metrics(c, &m, older), ETCDLOCK_OK);
    CHECK(m.struct_size == older && m.member_failures == 0xababababababababULL, "struct_size %u", m.struct_size);
    etcdlock_client_free(c);
    etcdlock_client_free(healthy);
}

/* Core's log events through etcdlock_set_logger: a hold acquired reaches the
 * callback (debug, with the lock's name in its fields); level OFF forwards
 * nothing; the log thread delivers in order, so a later event proves an
 * earlier one was not forwarded. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_seen[8192];
static int log_levels_ok = 1;

static void on_log(void *ud, int level, const char *target, const char *message, const char *fields) {
    pthread_mutex_lock(&log_mu);
    if (ud != (void *)log_seen || level < ETCDLOCK_LOG_ERROR || level > ETCDLOCK_LOG_DEBUG || !target) log_levels_ok = 0;
    size_t n = strlen(log_seen);
    snprintf(log_seen + n, sizeof log_seen - n, "%d %s %s|", level, message, fields);
    pthread_mutex_unlock(&log_mu);
}

static int log_has(const char *needle) {
    pthread_mutex_lock(&log_mu);
    int has = strstr(log_seen, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return has;
}

static void lock_unlock_name(etcdlock_client *c, const char *name) {
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, name, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
}

static void test_logger(void) {
    etcdlock_client *c = connect_default();
    if (!c) { CHECK(0, "connect"); return; }
    char first[96], quiet[96], last[96], want[160];
    unique(first, sizeof first, "log-first");
    unique(quiet, sizeof quiet, "log-quiet");
    unique(last, sizeof last, "log-last");
    CHECK_RC(etcdlock_set_logger(7, on_log, log_seen), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_set_logger(ETCDLOCK_LOG_DEBUG, on_log, log_seen), ETCDLOCK_OK);
    lock_unlock_name(c, first);
    snprintf(want, sizeof want, "%d acquired lock=%s ", ETCDLOCK_LOG_DEBUG, first);
    double deadline = now_ms() + 5000;
    while (!log_has(want) && now_ms() < deadline) usleep(5000);
    CHECK(log_has(want), "no '%s' among: %.300s", want, log_seen);
    CHECK_RC(etcdlock_set_logger(ETCDLOCK_LOG_OFF, NULL, NULL), ETCDLOCK_OK);
    lock_unlock_name(c, quiet);
    CHECK_RC(etcdlock_set_logger(ETCDLOCK_LOG_DEBUG, on_log, log_seen), ETCDLOCK_OK);
    lock_unlock_name(c, last);
    snprintf(want, sizeof want, "acquired lock=%s ", last);
    deadline = now_ms() + 5000;
    while (!log_has(want) && now_ms() < deadline) usleep(5000);
    CHECK(log_has(want), "no '%s'", want);
    /* (its release may be logged later, in the background: only its
     * acquisition happened while the level was OFF) */
    snprintf(want, sizeof want, "acquired lock=%s ", quiet);
    CHECK(!log_has(want), "an event was forwarded while the level was OFF");
    CHECK(log_levels_ok, "a callback got a bad level, target or user_data");
    CHECK_RC(etcdlock_set_logger(ETCDLOCK_LOG_OFF, NULL, NULL), ETCDLOCK_OK);
    etcdlock_client_free(c);
}

/* Run-once: the record Java's @SchedulerLock, Python's and Node's once and
 * `etcdlock once` take. One node per tick; at_least keeps the job taken after
 * it finished; another client (and, where the suite gives it, the CLI) is
 * refused while it is taken. */
static void test_once(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    if (!a || !b) { CHECK(0, "connect"); etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char job[96];
    unique(job, sizeof job, "once");
    etcdlock_once *h = NULL, *other = (etcdlock_once *)1;
    CHECK_RC(etcdlock_once_take(a, job, 60000, 0, &h), ETCDLOCK_OK);
    int64_t rev = etcdlock_once_revision(h);
    CHECK(h && rev > 0, "revision %lld", (long long)rev);
    CHECK_RC(etcdlock_once_take(b, job, 60000, 0, &other), ETCDLOCK_WOULD_BLOCK);
    CHECK(other == NULL, "*hold is NULL when another node has the job");
    CHECK_RC(etcdlock_once_finish(h), ETCDLOCK_OK);
    /* Finished with at_least 0: free at once; at_least 60 s: taken after. */
    CHECK_RC(etcdlock_once_take(b, job, 60000, 60000, &h), ETCDLOCK_OK);
    CHECK(etcdlock_once_revision(h) > rev, "a new take, a higher revision");
    CHECK_RC(etcdlock_once_finish(h), ETCDLOCK_OK);
    CHECK_RC(etcdlock_once_take(a, job, 60000, 0, &other), ETCDLOCK_WOULD_BLOCK);
    const char *cli = getenv("ETCDLOCK_CLI_BIN");
    if (cli && *cli) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' --endpoints %s once '%s' --at-most 60s --skipped-exit 3 -- true", cli, H.endpoint, job);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "etcdlock once ran a job C holds (status %d)", st);
    } else {
        printf("     (once: the CLI's exclusion is not checked here: ETCDLOCK_CLI_BIN is unset)\n");
    }
    /* Bad input: typed errors, nothing taken. */
    CHECK_RC(etcdlock_once_take(a, job, 0, 0, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_once_take(a, job, 1000, 2000, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_once_take(a, job, 1000, -1, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_once_take(a, NULL, 1000, 0, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_once_take(NULL, job, 1000, 0, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_once_take(a, job, 1000, 0, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(etcdlock_once_revision(NULL) == 0, "revision of NULL");
    CHECK_RC(etcdlock_once_finish(NULL), ETCDLOCK_OK);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* Fields left unset come from ETCDLOCK_* (core's one rule, as in every
 * language); a field the program sets wins, and a malformed variable for it is
 * ignored. */
static void test_options_from_env(void) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    int64_t ttl = 0;
    setenv("ETCDLOCK_ENDPOINTS", H.endpoint, 1);
    setenv("ETCDLOCK_TTL", "7", 1);
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) {
        CHECK_RC(etcdlock_client_ttl(c, &ttl), ETCDLOCK_OK);
        CHECK(ttl == 7, "TTL from ETCDLOCK_TTL: %lld", (long long)ttl);
        etcdlock_client_free(c);
        c = NULL;
    }
    setenv("ETCDLOCK_TTL", "garbage", 1);
    o.ttl_secs = 10;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) {
        CHECK_RC(etcdlock_client_ttl(c, &ttl), ETCDLOCK_OK);
        CHECK(ttl == 10, "explicit TTL over a malformed ETCDLOCK_TTL: %lld", (long long)ttl);
        etcdlock_client_free(c);
        c = NULL;
    }
    o.ttl_secs = ETCDLOCK_UNSET;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(c == NULL && strstr(etcdlock_last_error_message(), "ETCDLOCK_TTL") != NULL,
          "a malformed variable for an unset field names it: %s", etcdlock_last_error_message());
    unsetenv("ETCDLOCK_TTL");
    unsetenv("ETCDLOCK_ENDPOINTS");
}

/* keepalive_interval_ms: a client connects with it set and renews at that
 * interval; 0 and negatives are refused with core's message; a caller whose
 * struct_size ends before the field (an older header) leaves it not set. */
static void test_keepalive_interval(void) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    CHECK(o.keepalive_interval_ms == ETCDLOCK_UNSET, "init leaves it not set");
    o.endpoints = H.endpoint;
    o.ttl_secs = 10;
    o.keepalive_interval_ms = 400;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) {
        usleep(1500 * 1000);
        etcdlock_metrics m;
        CHECK_RC(etcdlock_client_metrics(c, &m, sizeof m), ETCDLOCK_OK);
        /* The default at TTL 10 s (2 s) would have renewed at most once by now. */
        CHECK(m.keepalives >= 3, "keep-alives every 400 ms: %llu in 1.5 s", (unsigned long long)m.keepalives);
        etcdlock_client_free(c);
    }
    static const int64_t bad[] = {0, -1, -400};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        etcdlock_options_init(&o, sizeof o);
        o.endpoints = H.endpoint;
        o.keepalive_interval_ms = bad[i];
        CHECK_RC(connect_rc(&o), ETCDLOCK_INVALID_ARGUMENT);
        CHECK(strstr(etcdlock_last_error_message(), "keepalive_interval") != NULL, "%lld: core's message: %s",
              (long long)bad[i], etcdlock_last_error_message());
    }
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = H.endpoint;
    o.keepalive_interval_ms = 0;
    o.struct_size = (uint32_t)offsetof(etcdlock_options, keepalive_interval_ms);
    CHECK_RC(connect_rc(&o), ETCDLOCK_OK);
}

/* lazy_connect: with etcd down, connect returns at once; try_lock fails
 * ETCDLOCK_UNAVAILABLE within request_timeout_ms and etcdlock_lock within its
 * timeout_ms; on a live etcd the first call connects. Without it connect
 * fails; an older struct_size leaves it not set (connect now). */
static void test_lazy_connect(void) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    CHECK(o.lazy_connect == -1, "init leaves it not set");
    o.endpoints = "127.0.0.1:1";
    o.request_timeout_ms = 500;
    o.connect_timeout_ms = 300;
    CHECK_RC(connect_rc(&o), ETCDLOCK_UNAVAILABLE);
    o.lazy_connect = 1;
    double t = now_ms();
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    CHECK(now_ms() - t < 200, "lazy connect took %.0f ms", now_ms() - t);
    if (c) {
        t = now_ms();
        CHECK_RC(etcdlock_try_lock(c, "lazy", &g), ETCDLOCK_UNAVAILABLE);
        CHECK(now_ms() - t < 500 + 700, "try_lock took %.0f ms", now_ms() - t);
        t = now_ms();
        int rc = etcdlock_lock(c, "lazy", 1000, &g);
        CHECK(rc == ETCDLOCK_TIMEOUT || rc == ETCDLOCK_UNAVAILABLE, "lock(1 s) with etcd down: %d", rc);
        CHECK(now_ms() - t < 1000 + 700, "lock(1 s) took %.0f ms", now_ms() - t);
        etcdlock_client_free(c);
        c = NULL;
    }
    o.endpoints = H.endpoint;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) {
        CHECK_RC(etcdlock_lock(c, "lazy-live", 5000, &g), ETCDLOCK_OK);
        if (g) {
            CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
            etcdlock_guard_free(g);
        }
        etcdlock_client_free(c);
    }
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = "127.0.0.1:1";
    o.connect_timeout_ms = 300;
    o.lazy_connect = 1;
    o.struct_size = (uint32_t)offsetof(etcdlock_options, lazy_connect);
    CHECK_RC(connect_rc(&o), ETCDLOCK_UNAVAILABLE);
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = H.endpoint;
    o.lazy_connect = 2;
    CHECK_RC(connect_rc(&o), ETCDLOCK_INVALID_ARGUMENT);
}

static void test_error_message_per_thread(void) {
    etcdlock_guard *g = NULL;
    BAD(etcdlock_lock(NULL, "x", 0, &g));
    CHECK(strstr(etcdlock_last_error_message(), "client is NULL") != NULL, "message %s",
          etcdlock_last_error_message());
    CHECK(etcdlock_last_error_status() == ETCDLOCK_INVALID_ARGUMENT, "status %d", etcdlock_last_error_status());
    CHECK(etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_NONE, "no loss reason");
    pthread_t t;
    void *empty = NULL;
    pthread_create(&t, NULL, other_thread_message, NULL);
    pthread_join(t, &empty);
    CHECK((intptr_t)empty == 1, "a fresh thread has an empty message");
}

/* ------------------------------------------------------------------------ */

/* Run etcdctl (ETCDCTL_API=3) against endpoint with the given args; 1 on exit 0. */
static int run_etcdctl(const char *endpoint, const char *const *args) {
    const char *argv[16];
    int n = 0;
    argv[n++] = "etcdctl";
    argv[n++] = "--endpoints";
    argv[n++] = endpoint;
    for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        setenv("ETCDCTL_API", "3", 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1);
        execvp("etcdctl", (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* RBAC on an etcd of its own (auth enabled with etcdctl, so it cannot leak into
 * the other tests): a user granted only the prefix /app/locks/ locks inside it,
 * gets ETCDLOCK_PERMISSION_DENIED outside it, and a wrong password is
 * ETCDLOCK_AUTH_FAILED. */
static void test_auth_rbac(void) {
    etcd_harness A;
    if (harness_start(&A) != 0) {
        CHECK(0, "cannot start a second etcd");
        harness_stop(&A);
        return;
    }
    static const char *const setup[][8] = {
        {"user", "add", "root:rootpw", NULL},
        {"user", "grant-role", "root", "root", NULL},
        {"role", "add", "r", NULL},
        {"role", "grant-permission", "r", "--prefix=true", "readwrite", "/app/locks/", NULL},
        {"user", "add", "u:upw", NULL},
        {"user", "grant-role", "u", "r", NULL},
        {"auth", "enable", NULL},
    };
    int ok = 1;
    for (size_t i = 0; ok && i < sizeof setup / sizeof setup[0]; i++) {
        ok = run_etcdctl(A.endpoint, setup[i]);
        CHECK(ok, "etcdctl %s %s failed", setup[i][0], setup[i][1]);
    }
    if (!ok) { harness_stop(&A); return; }

    etcdlock_options o;
    CHECK_RC(etcdlock_options_init(&o, sizeof o), ETCDLOCK_OK);
    o.endpoints = A.endpoint;
    o.ttl_secs = 5;
    o.username = "u";
    o.password = "upw";
    etcdlock_client *c = NULL;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) {
        etcdlock_guard *g = NULL;
        CHECK_RC(etcdlock_lock(c, "/app/locks/job", 5000, &g), ETCDLOCK_OK);
        int held = 0;
        if (g) {
            CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
            CHECK(held == 1, "held %d", held);
        }
        etcdlock_guard_free(g);
        etcdlock_guard *bad = NULL;
        CHECK_RC(etcdlock_lock(c, "/other/job", 5000, &bad), ETCDLOCK_PERMISSION_DENIED);
        CHECK(bad == NULL, "guard NULL on PERMISSION_DENIED");
        etcdlock_guard_free(bad);
        etcdlock_client_free(c);
    }

    o.password = "wrong";
    etcdlock_client *w = NULL;
    CHECK_RC(etcdlock_client_connect(&o, &w), ETCDLOCK_AUTH_FAILED);
    CHECK(w == NULL, "client NULL on AUTH_FAILED");
    etcdlock_client_free(w);
    harness_stop(&A);
}

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

/* ------------------------------------------------------------------------ */
/* Recipes: semaphore, read-write lock, multi-lock, election, queue view.   */

/* Number of contenders under name (etcdlock_status), or -1 on error. */
static int queue_len(etcdlock_client *c, const char *name) {
    etcdlock_queue *q = NULL;
    if (etcdlock_status(c, name, &q) != ETCDLOCK_OK) return -1;
    int n = (int)etcdlock_queue_len(q);
    etcdlock_queue_free(q);
    return n;
}

/* Poll the queue (a state in etcd we cannot subscribe to) until it has n keys. */
static int await_queue_len(etcdlock_client *c, const char *name, int n) {
    double end = now_ms() + 10000;
    while (now_ms() < end) {
        if (queue_len(c, name) == n) return 1;
        usleep(20000);
    }
    return 0;
}

typedef struct {
    etcdlock_client *c;
    const char *name;
    int kind; /* 0 lock, 1 permit(3), 2 read */
    int rc;
    etcdlock_guard *g;
} recipe_waiter;

static void *recipe_waiter_thread(void *p) {
    recipe_waiter *w = p;
    if (w->kind == 1) w->rc = etcdlock_acquire_permit(w->c, w->name, 3, 20000, &w->g);
    else if (w->kind == 2) w->rc = etcdlock_read_lock(w->c, w->name, 20000, &w->g);
    else w->rc = etcdlock_lock(w->c, w->name, 20000, &w->g);
    return NULL;
}

static void test_semaphore(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "sem");
    etcdlock_guard *g[3] = {NULL, NULL, NULL}, *extra = (etcdlock_guard *)0x1;
    CHECK_RC(etcdlock_acquire_permit(a, name, 3, 5000, &g[0]), ETCDLOCK_OK);
    CHECK_RC(etcdlock_acquire_permit(b, name, 3, 5000, &g[1]), ETCDLOCK_OK);
    CHECK_RC(etcdlock_acquire_permit(a, name, 3, 5000, &g[2]), ETCDLOCK_OK);
    /* A fourth: one try fails and leaves no key. */
    CHECK_RC(etcdlock_acquire_permit(b, name, 3, 0, &extra), ETCDLOCK_TIMEOUT);
    CHECK(extra == NULL, "guard NULL on TIMEOUT");
    etcdlock_queue *q = NULL;
    CHECK_RC(etcdlock_status(a, name, &q), ETCDLOCK_OK);
    CHECK(etcdlock_queue_len(q) == 3, "queue %zu", etcdlock_queue_len(q));
    for (size_t i = 0; i < etcdlock_queue_len(q); i++) {
        const etcdlock_contender *x = etcdlock_queue_at(q, i);
        CHECK(x->kind == ETCDLOCK_KIND_PERMIT && x->permits == 3 && x->holds == 1, "contender %zu kind %d permits %u holds %d", i,
              x->kind, x->permits, x->holds);
        CHECK(x->owner && strstr(x->owner, ":") && x->ttl_remaining > 0 && x->fencing_token > 0, "contender %zu fields", i);
    }
    CHECK(etcdlock_queue_at(q, 3) == NULL, "out of range is NULL");
    etcdlock_queue_free(q);
    /* Mismatched count and bad counts. */
    CHECK_RC(etcdlock_acquire_permit(b, name, 2, 5000, &extra), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_acquire_permit(b, name, 0, 5000, &extra), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_acquire_permit(b, name, ETCDLOCK_MAX_PERMITS + 1, 5000, &extra), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(queue_len(a, name) == 3, "still 3 keys");
    /* A waiter is served by a release. */
    recipe_waiter w = {b, name, 1, -1, NULL};
    pthread_t t;
    pthread_create(&t, NULL, recipe_waiter_thread, &w);
    CHECK(await_queue_len(a, name, 4), "the fourth contender's key");
    CHECK_RC(etcdlock_unlock(g[0]), ETCDLOCK_OK);
    pthread_join(t, NULL);
    CHECK(w.rc == ETCDLOCK_OK && w.g, "waiter %s", etcdlock_status_name(w.rc));
    etcdlock_guard_free(w.g);
    for (int i = 0; i < 3; i++) etcdlock_guard_free(g[i]);
    CHECK(queue_len(a, name) == 0, "no key left");
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

static void test_rwlock(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "rw");
    etcdlock_guard *r1 = NULL, *r2 = NULL, *x = NULL;
    CHECK_RC(etcdlock_read_lock(a, name, 5000, &r1), ETCDLOCK_OK);
    CHECK_RC(etcdlock_read_lock(b, name, 5000, &r2), ETCDLOCK_OK); /* readers overlap */
    const char *key = NULL;
    CHECK_RC(etcdlock_guard_key(r1, &key), ETCDLOCK_OK);
    CHECK(key && strlen(key) > 2 && strcmp(key + strlen(key) - 2, "-r") == 0, "reader key %s", key ? key : "(null)");
    CHECK_RC(etcdlock_try_lock(b, name, &x), ETCDLOCK_WOULD_BLOCK);
    recipe_waiter w = {b, name, 0, -1, NULL};
    pthread_t t;
    pthread_create(&t, NULL, recipe_waiter_thread, &w);
    CHECK(await_queue_len(a, name, 3), "the writer's key");
    /* A reader behind a waiting writer waits: one try fails and writes nothing. */
    CHECK_RC(etcdlock_read_lock(a, name, 0, &x), ETCDLOCK_TIMEOUT);
    CHECK(queue_len(a, name) == 3, "3 keys");
    CHECK_RC(etcdlock_unlock(r1), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(r2), ETCDLOCK_OK);
    pthread_join(t, NULL);
    CHECK(w.rc == ETCDLOCK_OK, "writer %s", etcdlock_status_name(w.rc));
    etcdlock_queue *q = NULL;
    CHECK_RC(etcdlock_status(a, name, &q), ETCDLOCK_OK);
    CHECK(etcdlock_queue_len(q) == 1 && etcdlock_queue_at(q, 0)->kind == ETCDLOCK_KIND_EXCLUSIVE && etcdlock_queue_at(q, 0)->holds,
          "the writer holds");
    etcdlock_queue_free(q);
    etcdlock_guard_free(w.g);
    etcdlock_guard_free(r1);
    etcdlock_guard_free(r2);
    CHECK(queue_len(a, name) == 0, "no key left");
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

typedef struct {
    etcdlock_client *c;
    const char *names[2];
    atomic_int *inside, *bad, *done;
} multi_arg;

static void *multi_thread(void *p) {
    multi_arg *m = p;
    for (int i = 0; i < 15; i++) {
        etcdlock_multi *h = NULL;
        if (etcdlock_lock_many(m->c, m->names, 2, 30000, &h) != ETCDLOCK_OK) { atomic_fetch_add(m->bad, 1); continue; }
        if (atomic_fetch_add(m->inside, 1) != 0) atomic_fetch_add(m->bad, 1);
        sched_yield();
        atomic_fetch_sub(m->inside, 1);
        atomic_fetch_add(m->done, 1);
        etcdlock_multi_free(h);
    }
    return NULL;
}

/* Guarded operations under every lock of a multi-lock; one lock lost from outside. */
static void test_multi_guarded(void) {
    etcdlock_client *c = connect_default();
    CHECK(c != NULL, "connect");
    if (!c) return;
    char n0[128], n1[160], key[160], inside[200];
    unique(n0, sizeof n0, "mguard");
    snprintf(n1, sizeof n1, "%s-2", n0);
    snprintf(key, sizeof key, "%s-ledger", n0);
    snprintf(inside, sizeof inside, "%s/inside", n1);
    size_t kl = strlen(key);
    const char *names[] = {n0, n1};
    etcdlock_multi *m = NULL;
    CHECK_RC(etcdlock_lock_many(c, names, 2, 5000, &m), ETCDLOCK_OK);
    if (!m) { etcdlock_client_free(c); return; }
    /* The loss API of a guard, on the multi-lock: nothing lost while held. */
    multi_loss_event lost, late;
    event_init(&lost.e);
    event_init(&late.e);
    lost.index = late.index = 7;
    int mreason = -1;
    size_t mindex = 7;
    int64_t mleft = 0;
    CHECK_RC(etcdlock_multi_on_loss(m, on_multi_loss, &lost), ETCDLOCK_OK);
    CHECK_RC(etcdlock_multi_loss_reason(m, &mreason, &mindex), ETCDLOCK_OK);
    CHECK(mreason == ETCDLOCK_LOSS_NONE && mindex == SIZE_MAX, "held: reason %d index %zu", mreason, mindex);
    CHECK_RC(etcdlock_multi_renewal(m, &mleft), ETCDLOCK_OK);
    CHECK(mleft == -1, "renewal while held: %lld", (long long)mleft);
    CHECK_RC(etcdlock_multi_put(m, (const uint8_t *)key, kl, (const uint8_t *)"100", 3), ETCDLOCK_OK);
    uint8_t *v = NULL;
    size_t n = 0;
    CHECK_RC(etcdlock_multi_get(m, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_OK);
    CHECK(v != NULL && n == 3 && memcmp(v, "100", 3) == 0, "value round trip (%zu bytes)", n);
    etcdlock_buffer_free(v);
    int deleted = -1;
    CHECK_RC(etcdlock_multi_delete(m, (const uint8_t *)key, kl, &deleted), ETCDLOCK_OK);
    CHECK(deleted == 1, "deleted %d", deleted);
    CHECK_RC(etcdlock_multi_put(m, (const uint8_t *)inside, strlen(inside), (const uint8_t *)"x", 1), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_put(m, NULL, 0, (const uint8_t *)"x", 1), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_put(m, (const uint8_t *)key, kl, (const uint8_t *)"1", 1), ETCDLOCK_OK);
    const char *k1 = NULL;
    CHECK_RC(etcdlock_multi_key(m, 1, &k1), ETCDLOCK_OK);
    const char *del[] = {"del", k1, NULL};
    CHECK(run_etcdctl(H.endpoint, del), "etcdctl del");
    /* The loss callback names the lock (index 1) and the reason. */
    CHECK(event_wait(&lost.e, 10000), "multi loss callback ran");
    CHECK(lost.e.status == ETCDLOCK_LOSS_KEY_DELETED && lost.index == 1, "multi loss: %s, index %zu",
          etcdlock_loss_reason_name(lost.e.status), lost.index);
    CHECK(!pthread_equal(lost.e.thread, pthread_self()), "on a runtime thread");
    CHECK_RC(etcdlock_multi_put(m, (const uint8_t *)key, kl, (const uint8_t *)"2", 1), ETCDLOCK_LOCK_LOST);
    CHECK(etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_KEY_DELETED, "loss reason %d", etcdlock_last_error_loss_reason());
    int held = 1;
    CHECK_RC(etcdlock_multi_is_held(m, &held), ETCDLOCK_OK);
    CHECK(held == 0, "not held after the loss");
    CHECK_RC(etcdlock_multi_loss_reason(m, &mreason, &mindex), ETCDLOCK_OK);
    CHECK(mreason == ETCDLOCK_LOSS_KEY_DELETED && mindex == 1, "lost: reason %d index %zu", mreason, mindex);
    CHECK_RC(etcdlock_multi_loss_reason(m, &mreason, NULL), ETCDLOCK_OK);
    CHECK(mreason == ETCDLOCK_LOSS_KEY_DELETED, "reason without index %d", mreason);
    CHECK_RC(etcdlock_multi_renewal(m, &mleft), ETCDLOCK_OK);
    CHECK(mleft == -1, "renewal after the loss: %lld", (long long)mleft);
    /* Registered after the end (lock 0 still held): runs at once with the loss. */
    CHECK_RC(etcdlock_multi_on_loss(m, on_multi_loss, &late), ETCDLOCK_OK);
    CHECK(event_wait(&late.e, 10000) && late.e.status == ETCDLOCK_LOSS_KEY_DELETED && late.index == 1,
          "late: %d index %zu", late.e.status, late.index);
    CHECK_RC(etcdlock_multi_unlock(m), ETCDLOCK_LOCK_LOST);
    CHECK_RC(etcdlock_multi_loss_reason(m, &mreason, &mindex), ETCDLOCK_OK);
    CHECK(mreason == ETCDLOCK_LOSS_KEY_DELETED && mindex == 1, "after unlock: reason %d index %zu", mreason, mindex);
    etcdlock_multi_free(m);
    /* The data kept the value written while both locks were held. */
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(c, n0, 5000, &g), ETCDLOCK_OK);
    if (g) {
        CHECK_RC(etcdlock_guard_get(g, (const uint8_t *)key, kl, &v, &n), ETCDLOCK_OK);
        CHECK(v != NULL && n == 1 && v[0] == '1', "value kept");
        etcdlock_buffer_free(v);
        etcdlock_unlock(g);
        etcdlock_guard_free(g);
    }
    /* etcdlock_client_free returns after every callback of the client's
     * multi-locks returned: each loss callback ran exactly once. */
    etcdlock_client_free(c);
    CHECK(lost.e.fired == 1 && late.e.fired == 1, "each once: %d %d", lost.e.fired, late.e.fired);
    event_destroy(&lost.e);
    event_destroy(&late.e);
}

static void test_lock_many(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char n0[128], n1[128], n2[128], z[128];
    unique(n0, sizeof n0, "multi");
    unique(n1, sizeof n1, "multi");
    unique(n2, sizeof n2, "multi");
    unique(z, sizeof z, "multi-z");
    const char *names[] = {n0, n1, n2};
    etcdlock_multi *m = NULL, *m2 = (etcdlock_multi *)0x1;
    CHECK_RC(etcdlock_lock_many(a, names, 3, 5000, &m), ETCDLOCK_OK);
    if (!m) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    int held = -1;
    int64_t token = 0;
    CHECK_RC(etcdlock_multi_is_held(m, &held), ETCDLOCK_OK);
    CHECK(held == 1, "held %d", held);
    CHECK_RC(etcdlock_multi_fencing_token(m, &token), ETCDLOCK_OK);
    CHECK(token > 0, "token %lld", (long long)token);
    for (size_t i = 0; i < 3; i++) {
        const char *k = NULL;
        CHECK_RC(etcdlock_multi_key(m, i, &k), ETCDLOCK_OK);
        CHECK(k && strncmp(k, names[i], strlen(names[i])) == 0, "key %zu %s", i, k ? k : "(null)");
        etcdlock_guard *x = NULL;
        CHECK_RC(etcdlock_try_lock(b, names[i], &x), ETCDLOCK_WOULD_BLOCK);
    }
    const char *k = NULL;
    CHECK_RC(etcdlock_multi_key(m, 3, &k), ETCDLOCK_INVALID_ARGUMENT);
    multi_loss_event rel;
    event_init(&rel.e);
    rel.index = 7;
    CHECK_RC(etcdlock_multi_on_loss(m, NULL, &rel), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_on_renewal(m, NULL, &rel), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_loss_reason(m, NULL, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_renewal(m, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_on_loss(m, on_multi_loss, &rel), ETCDLOCK_OK);
    /* A one-try on an overlapping set fails and leaves no key on either name. */
    const char *overlap[] = {z, n1};
    CHECK_RC(etcdlock_lock_many(b, overlap, 2, 0, &m2), ETCDLOCK_TIMEOUT);
    CHECK(m2 == NULL, "multi NULL on TIMEOUT");
    CHECK(queue_len(a, z) == 0 && queue_len(a, n1) == 1, "no key left by the try");
    CHECK_RC(etcdlock_multi_unlock(m), ETCDLOCK_OK);
    CHECK_RC(etcdlock_multi_is_held(m, &held), ETCDLOCK_OK);
    CHECK(held == 0, "held after unlock %d", held);
    /* Released normally: the loss callback says NONE, with index SIZE_MAX. */
    CHECK(event_wait(&rel.e, 10000) && rel.e.status == ETCDLOCK_LOSS_NONE && rel.index == SIZE_MAX,
          "released: %d index %zu", rel.e.status, rel.index);
    int rreason = -1;
    size_t rindex = 0;
    CHECK_RC(etcdlock_multi_loss_reason(m, &rreason, &rindex), ETCDLOCK_OK);
    CHECK(rreason == ETCDLOCK_LOSS_NONE && rindex == SIZE_MAX, "released: reason %d index %zu", rreason, rindex);
    CHECK_RC(etcdlock_multi_unlock(m), ETCDLOCK_OK); /* idempotent */
    etcdlock_multi_free(m);
    for (size_t i = 0; i < 3; i++) CHECK(queue_len(a, names[i]) == 0, "no key on %s", names[i]);
    /* Bad input. */
    const char *dup[] = {n0, n0};
    const char *withnull[] = {n0, NULL};
    CHECK_RC(etcdlock_lock_many(a, names, 0, 1000, &m2), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lock_many(a, NULL, 2, 1000, &m2), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lock_many(a, dup, 2, 1000, &m2), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lock_many(a, withnull, 2, 1000, &m2), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lock_many(a, names, ETCDLOCK_MAX_MULTI + 1, 1000, &m2), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_is_held(NULL, &held), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_loss_reason(NULL, &rreason, &rindex), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_on_loss(NULL, on_multi_loss, &rel), ETCDLOCK_INVALID_ARGUMENT);
    int64_t rleft = 0;
    CHECK_RC(etcdlock_multi_renewal(NULL, &rleft), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_multi_on_renewal(NULL, ignore_renewal, NULL), ETCDLOCK_INVALID_ARGUMENT);
    etcdlock_multi_free(NULL);
    /* Opposite orders on two clients never deadlock; exclusion holds. */
    atomic_int inside = 0, bad = 0, done = 0;
    multi_arg args[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (multi_arg){i % 2 ? b : a, {i % 2 ? n1 : n0, i % 2 ? n0 : n1}, &inside, &bad, &done};
        pthread_create(&t[i], NULL, multi_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&done) == 60 && atomic_load(&bad) == 0, "done %d bad %d", atomic_load(&done), atomic_load(&bad));
    etcdlock_client_free(a);
    etcdlock_client_free(b);
    CHECK(rel.e.fired == 1, "the release was reported %d times", rel.e.fired);
    event_destroy(&rel.e);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int status[16];
    int leader[16];
    char value[16][64];
    int64_t revision[16];
} observations;

static void on_leader(int status, const char *key, const uint8_t *value, size_t len, int64_t revision, void *ud) {
    observations *o = ud;
    pthread_mutex_lock(&o->mu);
    if (o->n < 16) {
        o->status[o->n] = status;
        o->leader[o->n] = key != NULL;
        snprintf(o->value[o->n], sizeof o->value[0], "%.*s", (int)(len < 63 ? len : 63), value ? (const char *)value : "");
        o->revision[o->n] = revision;
        o->n++;
    }
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static int await_observations(observations *o, int n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&o->mu);
    while (o->n < n) {
        if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) == ETIMEDOUT) break;
    }
    int ok = o->n >= n;
    pthread_mutex_unlock(&o->mu);
    return ok;
}

static void test_election(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char name[128];
    unique(name, sizeof name, "elect");
    char *lk = (char *)0x1;
    uint8_t *lv = NULL;
    size_t ln = 7;
    int64_t rev = 7;
    CHECK_RC(etcdlock_leader(a, name, &lk, &lv, &ln, &rev), ETCDLOCK_OK);
    CHECK(lk == NULL && lv == NULL && ln == 0 && rev == 0, "no leader");
    observations o;
    memset(&o, 0, sizeof o);
    pthread_mutex_init(&o.mu, NULL);
    pthread_cond_init(&o.cv, NULL);
    etcdlock_cancel_handle *h = NULL;
    CHECK_RC(etcdlock_observe(b, name, on_leader, &o, &h), ETCDLOCK_OK);
    CHECK(await_observations(&o, 1) && o.status[0] == ETCDLOCK_OK && !o.leader[0], "first: no leader");
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_campaign(a, name, (const uint8_t *)"node-a", 6, 5000, &g), ETCDLOCK_OK);
    int64_t token = 0;
    etcdlock_guard_fencing_token(g, &token);
    CHECK(await_observations(&o, 2) && o.leader[1] && strcmp(o.value[1], "node-a") == 0 && o.revision[1] == token, "second: node-a");
    CHECK_RC(etcdlock_leader(b, name, &lk, &lv, &ln, &rev), ETCDLOCK_OK);
    const char *key = NULL;
    etcdlock_guard_key(g, &key);
    CHECK(lk && key && strcmp(lk, key) == 0 && ln == 6 && memcmp(lv, "node-a", 6) == 0 && rev == token, "leader() agrees");
    etcdlock_buffer_free((uint8_t *)lk);
    etcdlock_buffer_free(lv);
    CHECK_RC(etcdlock_leader(b, name, &lk, NULL, NULL, NULL), ETCDLOCK_OK); /* value not wanted */
    etcdlock_buffer_free((uint8_t *)lk);
    CHECK_RC(etcdlock_proclaim(g, (const uint8_t *)"node-a v2", 9), ETCDLOCK_OK);
    CHECK(await_observations(&o, 3) && strcmp(o.value[2], "node-a v2") == 0, "third: the proclamation");
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK); /* resign */
    CHECK(await_observations(&o, 4) && o.status[3] == ETCDLOCK_OK && !o.leader[3], "fourth: no leader");
    CHECK_RC(etcdlock_proclaim(g, (const uint8_t *)"x", 1), ETCDLOCK_NOT_HELD);
    etcdlock_guard_free(g);
    CHECK_RC(etcdlock_cancel(h), ETCDLOCK_OK);
    CHECK(await_observations(&o, 5) && o.status[4] == ETCDLOCK_CANCELLED, "last call: CANCELLED");
    etcdlock_cancel_free(h);

    /* A deposed leader cannot proclaim: etcd refuses it. */
    g = NULL;
    CHECK_RC(etcdlock_campaign(a, name, NULL, 0, 5000, &g), ETCDLOCK_OK);
    key = NULL;
    etcdlock_guard_key(g, &key);
    event lost;
    event_init(&lost);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &lost), ETCDLOCK_OK);
    const char *del[] = {"del", key, NULL};
    CHECK(run_etcdctl(H.endpoint, del), "etcdctl del");
    CHECK(event_wait(&lost, 10000) && lost.status == ETCDLOCK_LOSS_KEY_DELETED, "loss reported");
    CHECK_RC(etcdlock_proclaim(g, (const uint8_t *)"v2", 2), ETCDLOCK_LOCK_LOST);
    etcdlock_guard_free(g);
    event_destroy(&lost);
    CHECK_RC(etcdlock_observe(b, name, NULL, NULL, &h), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_observe(b, "", on_leader, &o, &h), ETCDLOCK_INVALID_ARGUMENT);
    pthread_mutex_destroy(&o.mu);
    pthread_cond_destroy(&o.cv);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}

/* ---- the renewal-failing signal: etcd hung 2.5 s under a TTL 5 s holder ---- */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t ms[8];
    int n;
    int ended;
} renewal_log;

static void on_renewal(int64_t ms, void *user) {
    renewal_log *r = user;
    pthread_mutex_lock(&r->mu);
    if (ms == ETCDLOCK_RENEWAL_ENDED) r->ended = 1;
    else if (r->n < 8) r->ms[r->n++] = ms;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Wait until `n` events (or the end, with n < 0) arrived, at most `ms`. */
static int renewal_await(renewal_log *r, int n, int ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (rc == 0 && (n < 0 ? !r->ended : r->n < n)) rc = pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    int ok = n < 0 ? r->ended : r->n >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void test_renewal(void) {
    etcd_harness A;
    if (harness_start(&A) != 0) {
        CHECK(0, "cannot start a second etcd");
        harness_stop(&A);
        return;
    }
    etcdlock_options o;
    etcdlock_client *c = NULL;
    etcdlock_guard *g = NULL;
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = A.endpoint;
    o.ttl_secs = 5;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    if (c) CHECK_RC(etcdlock_lock(c, "renewal", 5000, &g), ETCDLOCK_OK);
    if (!g) { etcdlock_client_free(c); harness_stop(&A); return; }
    /* A multi-lock on the same client: the same session, the same renewal. */
    const char *mnames[] = {"renewal-a", "renewal-b"};
    etcdlock_multi *m = NULL;
    CHECK_RC(etcdlock_lock_many(c, mnames, 2, 5000, &m), ETCDLOCK_OK);
    if (!m) { etcdlock_guard_free(g); etcdlock_client_free(c); harness_stop(&A); return; }
    int64_t left = 0;
    CHECK_RC(etcdlock_guard_renewal(g, &left), ETCDLOCK_OK);
    CHECK(left == -1, "renewal before the hang: %lld", (long long)left);
    CHECK_RC(etcdlock_multi_renewal(m, &left), ETCDLOCK_OK);
    CHECK(left == -1, "multi renewal before the hang: %lld", (long long)left);
    static renewal_log r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};
    static renewal_log mr = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};
    CHECK_RC(etcdlock_guard_on_renewal(g, NULL, &r), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_guard_on_renewal(g, on_renewal, &r), ETCDLOCK_OK);
    CHECK_RC(etcdlock_multi_on_renewal(m, on_renewal, &mr), ETCDLOCK_OK);
    char line[256];
    CHECK(write(A.to_harness, "pause 0 2500\n", 13) == 13, "harness command");
    CHECK(fgets(line, sizeof line, A.from_harness) && strstr(line, "\"ok\":true"), "harness answer: %s", line);
    /* TTL 5 s: failing 1.5 s after the last acknowledgement; the hold lasts 4 s. */
    CHECK(renewal_await(&r, 1, 2500), "no failing event while etcd hung");
    CHECK(r.ms[0] > 0 && r.ms[0] < 4500, "failing with %lld ms left", (long long)r.ms[0]);
    CHECK_RC(etcdlock_guard_renewal(g, &left), ETCDLOCK_OK);
    CHECK(left >= 0, "renewal while hung: %lld", (long long)left);
    CHECK(renewal_await(&mr, 1, 2500), "no multi failing event while etcd hung");
    CHECK(mr.ms[0] > 0 && mr.ms[0] < 4500, "multi failing with %lld ms left", (long long)mr.ms[0]);
    CHECK_RC(etcdlock_multi_renewal(m, &left), ETCDLOCK_OK);
    CHECK(left >= 0, "multi renewal while hung: %lld", (long long)left);
    CHECK(renewal_await(&r, 2, 3000), "no renewed event after etcd resumed");
    CHECK(r.ms[1] == -1, "second event %lld", (long long)r.ms[1]);
    CHECK(renewal_await(&mr, 2, 3000), "no multi renewed event after etcd resumed");
    CHECK(mr.ms[1] == -1, "second multi event %lld", (long long)mr.ms[1]);
    CHECK_RC(etcdlock_multi_renewal(m, &left), ETCDLOCK_OK);
    CHECK(left == -1, "multi renewal after the hang: %lld", (long long)left);
    int held = 0;
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 1, "the hold survived the hang");
    CHECK_RC(etcdlock_multi_is_held(m, &held), ETCDLOCK_OK);
    CHECK(held == 1, "the multi-lock's hold survived the hang");
    /* Losing the second lock ends the multi-lock's hold: its renewal
     * callback gets ENDED (lock 0 and the guard are still held). */
    const char *k1 = NULL;
    CHECK_RC(etcdlock_multi_key(m, 1, &k1), ETCDLOCK_OK);
    const char *del[] = {"del", k1, NULL};
    CHECK(k1 && run_etcdctl(A.endpoint, del), "etcdctl del");
    CHECK(renewal_await(&mr, -1, 10000), "no multi ENDED call after a lock was lost");
    CHECK(mr.n == 2, "multi renewal events %d", mr.n);
    pthread_mutex_lock(&r.mu);
    int guard_ended = r.ended;
    pthread_mutex_unlock(&r.mu);
    CHECK(!guard_ended, "the guard's renewal ended with the multi-lock's");
    etcdlock_multi_free(m);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    CHECK(renewal_await(&r, -1, 5000), "no ENDED call after the unlock");
    etcdlock_guard_free(g);
    etcdlock_client_free(c);
    harness_stop(&A);
}

/* ---- a hold and a waiter ride through a leader kill / 3 s leader hang ---- */
typedef struct {
    etcdlock_client *c;
    atomic_int stop;
    _Atomic double last_done;
    _Atomic double fault_at;    /* set by the test: record the first completion after it */
    _Atomic double first_after;
} cycler_arg;

static void *cycle_thread(void *p) {
    cycler_arg *a = p;
    while (!atomic_load(&a->stop)) {
        etcdlock_guard *g = NULL;
        if (etcdlock_lock(a->c, "cycle", 10000, &g) == ETCDLOCK_OK) {
            if (etcdlock_unlock(g) == ETCDLOCK_OK) {
                double t = now_ms(), f = atomic_load(&a->fault_at);
                atomic_store(&a->last_done, t);
                if (f > 0 && t > f + 50 && atomic_load(&a->first_after) == 0) atomic_store(&a->first_after, t);
            }
            etcdlock_guard_free(g);
        }
    }
    return NULL;
}

static void leader_fault(const char *fault, int ttl) {
    etcd_harness A;
    if (harness_start_members(&A, 3) != 0) {
        CHECK(0, "cannot start a 3-member etcd");
        harness_stop(&A);
        return;
    }
    etcdlock_client *cl[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        etcdlock_options o;
        etcdlock_options_init(&o, sizeof o);
        o.endpoints = A.endpoint;
        o.ttl_secs = ttl;
        CHECK_RC(etcdlock_client_connect(&o, &cl[i]), ETCDLOCK_OK);
    }
    etcdlock_guard *g = NULL;
    if (cl[0] && cl[1] && cl[2]) CHECK_RC(etcdlock_lock(cl[0], "held", 5000, &g), ETCDLOCK_OK);
    if (!g) goto out;
    event w;
    event_init(&w);
    CHECK_RC(etcdlock_lock_async(cl[1], "held", -1, on_locked, &w, NULL), ETCDLOCK_OK);
    usleep(300 * 1000); /* the waiter queues behind the holder */
    cycler_arg a = {cl[2], 0, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, cycle_thread, &a);
    while (atomic_load(&a.last_done) == 0) usleep(5000);
    char reply[256], cmd[64];
    int leader = -1;
    CHECK(harness_command(&A, "leader", reply, sizeof reply) == 0 && sscanf(strstr(reply, ":") + 1, "%d", &leader) == 1,
          "leader: %s", reply);
    double fault_at = now_ms();
    atomic_store(&a.fault_at, fault_at);
    if (strcmp(fault, "kill") == 0) snprintf(cmd, sizeof cmd, "kill %d", leader);
    else snprintf(cmd, sizeof cmd, "pause %d %d", leader, (fault[4] - '0') * 1000);
    CHECK(harness_command(&A, cmd, reply, sizeof reply) == 0, "%s", cmd);
    /* etcd's own election, seen by asking the other members (~30 ms resolution). */
    snprintf(cmd, sizeof cmd, "elected %d", leader);
    CHECK(harness_command(&A, cmd, reply, sizeof reply) == 0 && strstr(reply, "\"leader\""), "elected: %s", reply);
    double election = now_ms() - fault_at;
    /* The first cycle that completes after the fault. */
    double first = 0;
    while (now_ms() - fault_at < 5000) {
        double d = atomic_load(&a.first_after);
        if (d > 0) { first = d; break; }
        if (atomic_load(&a.last_done) > fault_at + 50 && atomic_load(&a.first_after) == 0) {
            first = atomic_load(&a.last_done);
            break;
        }
        usleep(2000);
    }
    double resumed = first - fault_at;
    CHECK(first > 0, "cycles did not resume within 5 s");
    /* The target is 600 ms after the new leader; 1 s here for a loaded CI machine. */
    CHECK(resumed - election <= 1000, "resumed %.0f ms after the fault, %.0f ms after the election", resumed, resumed - election);
    /* Past where a session that stopped renewing at the fault would have ended locally. */
    double rest = fault_at + (ttl + 1) * 1000.0 - now_ms();
    if (rest > 0) usleep((useconds_t)(rest * 1000));
    int held = 0;
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 1, "the hold survived the leader %s", fault);
    CHECK(w.fired == 0, "the queued waiter ended (%s)", etcdlock_status_name(w.status));
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"still-mine", 10, (const uint8_t *)"yes", 3), ETCDLOCK_OK);
    int64_t tok = 0, tok2 = 0;
    etcdlock_guard_fencing_token(g, &tok);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_OK);
    CHECK(event_wait(&w, 5000) && w.status == ETCDLOCK_OK, "the waiter acquired after the unlock");
    if (w.guard) {
        etcdlock_guard_fencing_token(w.guard, &tok2);
        CHECK(tok2 > tok, "tokens %lld -> %lld", (long long)tok, (long long)tok2);
        etcdlock_guard_free(w.guard);
    }
    atomic_store(&a.stop, 1);
    pthread_join(t, NULL);
    printf("  ttl %d s, leader %s: etcd elected a new leader %.0f ms after the fault; lock/unlock resumed %.0f ms after that; hold and waiter survived\n",
           ttl, fault, election, resumed - election);
    event_destroy(&w);
out:
    etcdlock_guard_free(g);
    for (int i = 0; i < 3; i++) etcdlock_client_free(cl[i]);
    harness_stop(&A);
}

static void test_leader_faults(void) {
    leader_fault("kill", 5);
    leader_fault("hang3s", 5);
    leader_fault("hang5s", 10);
}

/* etcdlock_list: every kind under a prefix with its kind and the holder's
 * language; etcdlock_release: a wedged holder freed by its fencing token. */
static int g_list_loss = -1;
static void on_list_loss(int reason, void *ud) {
    (void)ud;
    __atomic_store_n(&g_list_loss, reason, __ATOMIC_SEQ_CST);
}

static void test_list_and_release(void) {
    etcdlock_client *a = connect_default(), *b = connect_default();
    CHECK(a && b, "connect");
    if (!a || !b) { etcdlock_client_free(a); etcdlock_client_free(b); return; }
    char base[96], mutex[128], sem[128], rw[128];
    unique(base, sizeof base, "fleet");
    snprintf(mutex, sizeof mutex, "%s/mutex", base);
    snprintf(sem, sizeof sem, "%s/sem", base);
    snprintf(rw, sizeof rw, "%s/rw", base);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/", base);
    etcdlock_guard *m = NULL, *p = NULL, *r = NULL;
    CHECK_RC(etcdlock_lock(a, mutex, 5000, &m), ETCDLOCK_OK);
    CHECK_RC(etcdlock_acquire_permit(a, sem, 3, 5000, &p), ETCDLOCK_OK);
    CHECK_RC(etcdlock_read_lock(a, rw, 5000, &r), ETCDLOCK_OK);
    /* The meta records come within ~200 ms: poll until every kind is known. */
    etcdlock_locks *l = NULL;
    double until = now_ms() + 10000;
    for (;;) {
        etcdlock_locks_free(l);
        l = NULL;
        CHECK_RC(etcdlock_list(a, prefix, &l), ETCDLOCK_OK);
        size_t known = 0;
        for (size_t i = 0; i < etcdlock_locks_len(l); i++) known += etcdlock_queue_kind(etcdlock_locks_at(l, i)) != ETCDLOCK_LOCK_UNKNOWN;
        if ((etcdlock_locks_len(l) == 3 && known == 3) || now_ms() > until) break;
        usleep(20 * 1000);
    }
    CHECK(etcdlock_locks_len(l) == 3, "3 names, got %zu", etcdlock_locks_len(l));
    if (etcdlock_locks_len(l) == 3) {
        const etcdlock_queue *q0 = etcdlock_locks_at(l, 0), *q1 = etcdlock_locks_at(l, 1), *q2 = etcdlock_locks_at(l, 2);
        CHECK(strcmp(etcdlock_queue_name(q0), mutex) == 0 && etcdlock_queue_kind(q0) == ETCDLOCK_LOCK_MUTEX, "mutex first");
        CHECK(strcmp(etcdlock_queue_name(q1), rw) == 0 && etcdlock_queue_kind(q1) == ETCDLOCK_LOCK_RWLOCK, "then rw");
        CHECK(strcmp(etcdlock_queue_name(q2), sem) == 0 && etcdlock_queue_kind(q2) == ETCDLOCK_LOCK_SEMAPHORE, "then sem");
        const etcdlock_contender *h = etcdlock_queue_at(q0, 0);
        int64_t token = 0;
        etcdlock_guard_fencing_token(m, &token);
        CHECK(h && h->fencing_token == token && h->pid == (int64_t)getpid() && !h->foreign, "the mutex holder");
        CHECK(h && h->language && strcmp(h->language, "c") == 0, "language %s", h && h->language ? h->language : "(null)");
    }
    CHECK(etcdlock_locks_at(l, 3) == NULL, "out of range");
    etcdlock_locks_free(l);
    CHECK_RC(etcdlock_list(a, NULL, &l), ETCDLOCK_INVALID_ARGUMENT);
    /* Release by token: the holder is told KeyDeleted; a wrong or spent token releases nothing. */
    int64_t token = 0;
    etcdlock_guard_fencing_token(m, &token);
    CHECK_RC(etcdlock_guard_on_loss(m, on_list_loss, NULL), ETCDLOCK_OK);
    int done = -1;
    CHECK_RC(etcdlock_release(b, mutex, token + 1, &done), ETCDLOCK_OK);
    CHECK(done == 0, "a token nobody has");
    CHECK_RC(etcdlock_release(b, mutex, token, &done), ETCDLOCK_OK);
    CHECK(done == 1, "released");
    until = now_ms() + 5000;
    while (__atomic_load_n(&g_list_loss, __ATOMIC_SEQ_CST) < 0 && now_ms() < until) usleep(10 * 1000);
    CHECK(g_list_loss == ETCDLOCK_LOSS_KEY_DELETED, "holder told KeyDeleted, got %d", g_list_loss);
    /* The failed call's last error carries the loss reason. */
    CHECK_RC(etcdlock_unlock(m), ETCDLOCK_LOCK_LOST);
    CHECK(etcdlock_last_error_status() == ETCDLOCK_LOCK_LOST &&
              etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_KEY_DELETED,
          "last error %d, reason %d", etcdlock_last_error_status(), etcdlock_last_error_loss_reason());
    CHECK_RC(etcdlock_release(b, mutex, token, &done), ETCDLOCK_OK);
    CHECK(done == 0, "released already");
    etcdlock_guard_free(m);
    CHECK_RC(etcdlock_unlock(p), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(r), ETCDLOCK_OK);
    etcdlock_guard_free(p);
    etcdlock_guard_free(r);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
}


/* ---- etcdlock_client_free and the callbacks still to come ----------------- */

/* Two child processes that spin until killed: CPU load beside the library's
 * runtime threads, which is what lets a callback lag behind client_free. */
static void hogs_start(pid_t pids[2]) {
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (volatile unsigned long n = 0;; n++) {
            }
        }
    }
}
static void hogs_stop(pid_t pids[2]) {
    for (int i = 0; i < 2; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    }
}

#define FREE_WAITS 100

typedef struct free_round free_round;
typedef struct {
    free_round *round;
    int fired;
    int status;
    int rearm_rc; /* etcdlock_lock_async from the callback, on the client being freed */
    char message[96];
} free_wait;

/* Everything a round's callbacks touch: one allocation, freed right after
 * etcdlock_client_free when every callback has finished (valgrind reports an
 * access after that). */
struct free_round {
    etcdlock_client *client;
    const char *held;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int freed;     /* etcdlock_client_free has returned */
    int finished;  /* callbacks whose last call has returned */
    int late;      /* ... of which after etcdlock_client_free returned */
    free_wait w[FREE_WAITS];
    int loss_fired, loss_reason;
    int renewal_calls, renewal_last;
    int observe_calls, observe_last_status, observe_errors;
};

static void free_round_finish(free_round *r) {
    pthread_mutex_lock(&r->mu);
    if (r->freed) r->late++;
    r->finished++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void never_called(int status, etcdlock_guard *g, void *ud) {
    (void)status, (void)ud;
    etcdlock_guard_free(g);
    fprintf(stderr, "  a lock_async refused with ETCDLOCK_CLOSED called its callback\n");
    abort();
}

static void on_free_wait(int status, etcdlock_guard *g, void *ud) {
    free_wait *w = ud;
    w->fired++;
    w->status = status;
    snprintf(w->message, sizeof w->message, "%s", etcdlock_last_error_message());
    etcdlock_guard_free(g);
    /* A callback that waits again: on a client being freed it is refused. */
    if (status == ETCDLOCK_CLOSED)
        w->rearm_rc = etcdlock_lock_async(w->round->client, w->round->held, ETCDLOCK_WAIT_FOREVER, never_called, NULL, NULL);
    free_round_finish(w->round);
}

static void on_free_loss(int reason, void *ud) {
    free_round *r = ud;
    r->loss_fired++;
    r->loss_reason = reason;
    free_round_finish(r);
}

static void on_free_renewal(int64_t ms, void *ud) {
    free_round *r = ud;
    r->renewal_calls++;
    r->renewal_last = (int)ms;
    if (ms == ETCDLOCK_RENEWAL_ENDED) free_round_finish(r);
}

static void on_free_observe(int status, const char *k, const uint8_t *v, size_t n, int64_t rev, void *ud) {
    (void)k, (void)v, (void)n, (void)rev;
    free_round *r = ud;
    r->observe_calls++;
    r->observe_last_status = status;
    if (status != ETCDLOCK_OK) {
        r->observe_errors++;
        free_round_finish(r);
    }
}

/* Await r->finished >= want, at most ms. */
static int free_round_await(free_round *r, int want, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&r->mu);
    while (r->finished < want) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) break;
    }
    int got = r->finished;
    pthread_mutex_unlock(&r->mu);
    return got >= want;
}

/* etcdlock_client_free returns only after every callback of the client has
 * returned: 100 lock_async waits on a held lock (every third cancelled just
 * before), an observer, and a held guard's loss and renewal callbacks, with
 * two CPU hogs beside it, ETCDLOCK_TEST_FREE_ROUNDS rounds (default 20). */
static void test_client_free_waits_for_callbacks(void) {
    const char *env = getenv("ETCDLOCK_TEST_FREE_ROUNDS");
    int rounds = env && *env ? atoi(env) : 20;
    etcdlock_client *a = connect_default();
    CHECK(a != NULL, "connect");
    if (!a) return;
    char held[128], own[128], elect[128];
    unique(held, sizeof held, "freeheld");
    etcdlock_guard *ga = NULL;
    CHECK_RC(etcdlock_lock(a, held, 5000, &ga), ETCDLOCK_OK);
    pid_t hogs[2] = {0, 0};
    hogs_start(hogs);
    const int want = FREE_WAITS + 3; /* the waits, the observer, the loss and renewal callbacks */
    int rounds_late = 0, late_total = 0, cancelled_seen = 0;
    double free_ms_max = 0;
    for (int round = 0; round < rounds; round++) {
        free_round *r = calloc(1, sizeof *r);
        if (!r) break;
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
        r->held = held;
        r->client = connect_default();
        CHECK(r->client != NULL, "connect (round %d)", round);
        if (!r->client) { free(r); break; }
        unique(own, sizeof own, "freeown");
        unique(elect, sizeof elect, "freeelect");
        etcdlock_guard *g = NULL;
        etcdlock_cancel_handle *observer = NULL, *h[FREE_WAITS] = {0};
        CHECK_RC(etcdlock_lock(r->client, own, 5000, &g), ETCDLOCK_OK);
        CHECK_RC(etcdlock_guard_on_loss(g, on_free_loss, r), ETCDLOCK_OK);
        CHECK_RC(etcdlock_guard_on_renewal(g, on_free_renewal, r), ETCDLOCK_OK);
        CHECK_RC(etcdlock_observe(r->client, elect, on_free_observe, r, &observer), ETCDLOCK_OK);
        for (int i = 0; i < FREE_WAITS; i++) {
            r->w[i].round = r;
            r->w[i].rearm_rc = -1;
            CHECK_RC(etcdlock_lock_async(r->client, held, ETCDLOCK_WAIT_FOREVER, on_free_wait, &r->w[i], &h[i]),
                     ETCDLOCK_OK);
        }
        for (int i = 0; i < FREE_WAITS; i += 3) CHECK_RC(etcdlock_cancel(h[i]), ETCDLOCK_OK);
        double t0 = now_ms();
        etcdlock_client_free(r->client);
        double dt = now_ms() - t0;
        if (dt > free_ms_max) free_ms_max = dt;
        pthread_mutex_lock(&r->mu);
        r->freed = 1;
        int at_return = r->finished;
        pthread_mutex_unlock(&r->mu);
        CHECK(at_return == want, "round %d: %d of %d callbacks had returned when etcdlock_client_free returned",
              round, at_return, want);
        if (at_return != want) {
            /* Let the rest run before their memory goes, to report instead of crash. */
            CHECK(free_round_await(r, want, 10000), "round %d: only %d of %d callbacks ran", round, r->finished, want);
            rounds_late++;
            late_total += r->late;
        }
        for (int i = 0; i < FREE_WAITS; i++) {
            free_wait *w = &r->w[i];
            int cancelled = i % 3 == 0;
            /* A cancel reaches the wait first or the close does; either way exactly once. */
            CHECK(w->fired == 1 && (w->status == ETCDLOCK_CLOSED || (cancelled && w->status == ETCDLOCK_CANCELLED)),
                  "round %d wait %d: fired %d, status %s: %s", round, i, w->fired, etcdlock_status_name(w->status),
                  w->message);
            CHECK(w->status != ETCDLOCK_CLOSED || w->rearm_rc == ETCDLOCK_CLOSED,
                  "round %d wait %d: lock_async from its callback returned %s", round, i, etcdlock_status_name(w->rearm_rc));
            cancelled_seen += w->status == ETCDLOCK_CANCELLED;
            etcdlock_cancel_free(h[i]);
        }
        CHECK(r->loss_fired == 1 && r->loss_reason == ETCDLOCK_LOSS_CLIENT_CLOSED, "round %d: loss callback %d x, reason %d",
              round, r->loss_fired, r->loss_reason);
        CHECK(r->renewal_calls >= 1 && r->renewal_last == ETCDLOCK_RENEWAL_ENDED, "round %d: renewal %d calls, last %d",
              round, r->renewal_calls, r->renewal_last);
        CHECK(r->observe_errors == 1 && r->observe_last_status == ETCDLOCK_CLOSED, "round %d: observer's last call %s (%d errors)",
              round, etcdlock_status_name(r->observe_last_status), r->observe_errors);
        CHECK(r->late == 0, "round %d: %d callbacks returned after etcdlock_client_free", round, r->late);
        etcdlock_cancel_free(observer);
        etcdlock_guard_free(g);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
    }
    hogs_stop(hogs);
    printf("  client_free: %d rounds x %d callbacks under 2 CPU hogs; %d cancelled; %d rounds with %d callbacks after "
           "client_free returned; client_free took up to %.0f ms\n",
           rounds, want, cancelled_seen, rounds_late, late_total, free_ms_max);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
}

/* etcdlock_client_free called inside a callback returns at once (it cannot
 * wait for itself); the close runs in the background, every other callback
 * of the client still runs once, and the handle stays valid for them. */
typedef struct {
    etcdlock_client *client;
    const char *held;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int freer_done;       /* the freeing callback has returned */
    double free_ms;       /* how long etcdlock_client_free took inside it */
    int freer_rearm_rc;   /* lock_async after the free, in the same callback */
    int done;             /* other callbacks that returned */
    int fired[10], status[10], rearm_rc[10];
    int loss_reason, loss_fired;
} inside_free;

static inside_free *INSIDE;

static void inside_mark(inside_free *s, int freer) {
    pthread_mutex_lock(&s->mu);
    if (freer) s->freer_done = 1; else s->done++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_inside_wait(int status, etcdlock_guard *g, void *ud) {
    inside_free *s = INSIDE;
    int i = (int)(intptr_t)ud;
    s->fired[i]++;
    s->status[i] = status;
    etcdlock_guard_free(g);
    s->rearm_rc[i] = etcdlock_lock_async(s->client, s->held, ETCDLOCK_WAIT_FOREVER, never_called, NULL, NULL);
    inside_mark(s, 0);
}

static void on_inside_loss(int reason, void *ud) {
    inside_free *s = ud;
    s->loss_fired++;
    s->loss_reason = reason;
    inside_mark(s, 0);
}

static void on_inside_freer(int status, etcdlock_guard *g, void *ud) {
    inside_free *s = ud;
    (void)status;
    etcdlock_guard_free(g);
    double t0 = now_ms();
    etcdlock_client_free(s->client);
    s->free_ms = now_ms() - t0;
    s->freer_rearm_rc = etcdlock_lock_async(s->client, s->held, ETCDLOCK_WAIT_FOREVER, never_called, NULL, NULL);
    inside_mark(s, 1);
}

static int inside_await(inside_free *s, int done, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&s->mu);
    while (!(s->freer_done && s->done >= done)) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
    }
    int ok = s->freer_done && s->done >= done;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void test_client_free_in_callback(void) {
    etcdlock_client *a = connect_default();
    inside_free *s = calloc(1, sizeof *s);
    CHECK(a && s, "connect");
    if (!a || !s) { etcdlock_client_free(a); free(s); return; }
    INSIDE = s;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    char held[128], own[128], freer[128];
    unique(held, sizeof held, "insideheld");
    unique(own, sizeof own, "insideown");
    unique(freer, sizeof freer, "insidefreer");
    s->held = held;
    etcdlock_guard *ga = NULL, *g = NULL;
    CHECK_RC(etcdlock_lock(a, held, 5000, &ga), ETCDLOCK_OK);
    s->client = connect_default();
    CHECK(s->client != NULL, "connect");
    if (!s->client) { etcdlock_guard_free(ga); etcdlock_client_free(a); free(s); return; }
    CHECK_RC(etcdlock_lock(s->client, own, 5000, &g), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_inside_loss, s), ETCDLOCK_OK);
    for (int i = 0; i < 10; i++)
        CHECK_RC(etcdlock_lock_async(s->client, held, ETCDLOCK_WAIT_FOREVER, on_inside_wait, (void *)(intptr_t)i, NULL),
                 ETCDLOCK_OK);
    /* A free lock: its callback gets it at once and frees the client. */
    CHECK_RC(etcdlock_lock_async(s->client, freer, 5000, on_inside_freer, s, NULL), ETCDLOCK_OK);
    CHECK(inside_await(s, 11, 20000), "the freeing callback returned: %d, other callbacks: %d of 11", s->freer_done,
          s->done);
    CHECK(s->freer_rearm_rc == ETCDLOCK_CLOSED, "lock_async after the free in the same callback: %s",
          etcdlock_status_name(s->freer_rearm_rc));
    for (int i = 0; i < 10; i++) {
        CHECK(s->fired[i] == 1 && s->status[i] == ETCDLOCK_CLOSED, "wait %d: fired %d, %s", i, s->fired[i],
              etcdlock_status_name(s->status[i]));
        CHECK(s->rearm_rc[i] == ETCDLOCK_CLOSED, "wait %d: lock_async from its callback: %s", i,
              etcdlock_status_name(s->rearm_rc[i]));
    }
    CHECK(s->loss_fired == 1 && s->loss_reason == ETCDLOCK_LOSS_CLIENT_CLOSED, "loss %d x, reason %d", s->loss_fired,
          s->loss_reason);
    /* The background close revoked the lease: the freed client's lock is free. */
    etcdlock_guard *again = NULL;
    CHECK_RC(etcdlock_lock(a, own, 5000, &again), ETCDLOCK_OK);
    printf("  client_free inside a callback returned after %.1f ms\n", s->free_ms);
    etcdlock_guard_free(again);
    etcdlock_guard_free(g);
    etcdlock_guard_free(ga);
    etcdlock_client_free(a);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    INSIDE = NULL;
    free(s);
}


/* The leader loop (etcdlock_lead): each candidate's thread reads its loop's
 * events and runs the task of each term inline: count itself running (never
 * above 1 across candidates), write its fencing token through the term's
 * guard, wait for the term's cancellation, end the term. */
typedef struct {
    atomic_int running, most, starts, cancels;
    struct { int who; int64_t token; double at; } started[16];
    struct { int who; double at; } cancelled[16];
    atomic_int writes;
} lead_tasks;

typedef struct {
    etcdlock_leader_loop *lp;
    int who;
    lead_tasks *tasks;
    int kinds[64]; /* the events other than LEADER_CHANGED, in order */
    int n_kinds;
    int lost_reason;
    int next_rc; /* the status that ended the thread: CLOSED after STOPPED */
} lead_candidate;

static void *lead_candidate_main(void *p) {
    lead_candidate *c = p;
    lead_tasks *t = c->tasks;
    for (;;) {
        etcdlock_leader_event ev;
        int rc = etcdlock_leader_next(c->lp, 30000, &ev);
        if (rc != ETCDLOCK_OK) { c->next_rc = rc; break; }
        if (ev.kind != ETCDLOCK_LEADER_CHANGED && c->n_kinds < 64) c->kinds[c->n_kinds++] = ev.kind;
        if (ev.kind == ETCDLOCK_LEADER_LOST) c->lost_reason = ev.loss_reason;
        etcdlock_buffer_free(ev.leader_value);
        if (ev.kind != ETCDLOCK_LEADER_ELECTED) continue;
        int n = atomic_fetch_add(&t->running, 1) + 1;
        int m = atomic_load(&t->most);
        while (n > m && !atomic_compare_exchange_weak(&t->most, &m, n)) {}
        double at = now_ms();
        char tok[32];
        int len = snprintf(tok, sizeof tok, "%lld", (long long)ev.fencing_token);
        if (etcdlock_guard_put(etcdlock_term_guard(ev.term), (const uint8_t *)"leader-writes", 13, (const uint8_t *)tok,
                               (size_t)len) == ETCDLOCK_OK)
            atomic_fetch_add(&t->writes, 1);
        /* Counted as started once its write is through (the test awaits starts). */
        int s = atomic_load(&t->starts);
        if (s < 16) {
            t->started[s].who = c->who;
            t->started[s].token = ev.fencing_token;
            t->started[s].at = at;
        }
        atomic_fetch_add(&t->starts, 1);
        etcdlock_term_wait(ev.term, ETCDLOCK_WAIT_FOREVER);
        int k = atomic_fetch_add(&t->cancels, 1);
        if (k < 16) {
            t->cancelled[k].who = c->who;
            t->cancelled[k].at = now_ms();
        }
        atomic_fetch_sub(&t->running, 1);
        etcdlock_term_end(ev.term);
        etcdlock_term_free(ev.term);
    }
    return NULL;
}

/* Wait until `n` tasks have started, at most ms; 1 if they have. */
static int lead_await_starts(lead_tasks *t, int n, int ms) {
    double until = now_ms() + ms;
    while (atomic_load(&t->starts) < n) {
        if (now_ms() > until) return 0;
        usleep(2000);
    }
    return 1;
}

static etcdlock_client *connect_at(const char *endpoint, int64_t ttl) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    if (etcdlock_options_init(&o, sizeof o) != ETCDLOCK_OK) return NULL;
    o.endpoints = endpoint;
    o.ttl_secs = ttl;
    CHECK_RC(etcdlock_client_connect(&o, &c), ETCDLOCK_OK);
    return c;
}

/* Three candidates (TTL 3 s), candidate 0 through a harness proxy and
 * elected first. Pausing the proxy cancels 0's task within the TTL, and only
 * then does another task start; stopping that leader's loop hands over to
 * the third in under 1 s; never two tasks at once. */
static void test_lead_partition(void) {
    char reply[256], ep[128] = "", name[64], cmd[64];
    int proxy = -1;
    const char *e = NULL, *p = NULL;
    CHECK(harness_command(&H, "proxy", reply, sizeof reply) == 0 && (e = strstr(reply, "\"endpoint\":\"")) &&
              (p = strstr(reply, "\"proxy\":")) && sscanf(e + 12, "%127[^\"]", ep) == 1 && sscanf(p + 8, "%d", &proxy) == 1,
          "proxy: %s", reply);
    if (proxy < 0) return;
    unique(name, sizeof name, "lead");
    etcdlock_client *cl[3] = {connect_at(ep, 3), connect_at(H.endpoint, 3), connect_at(H.endpoint, 3)};
    lead_tasks tasks;
    memset(&tasks, 0, sizeof tasks);
    lead_candidate cand[3];
    pthread_t th[3];
    int started[3] = {0, 0, 0};
    memset(cand, 0, sizeof cand);
    if (!cl[0] || !cl[1] || !cl[2]) goto out;
    for (int i = 0; i < 3; i++) {
        char v[8];
        snprintf(v, sizeof v, "c%d", i);
        cand[i].who = i;
        cand[i].tasks = &tasks;
        CHECK_RC(etcdlock_lead(cl[i], name, (const uint8_t *)v, 2, NULL, &cand[i].lp), ETCDLOCK_OK);
        if (!cand[i].lp) goto out;
        pthread_create(&th[i], NULL, lead_candidate_main, &cand[i]);
        started[i] = 1;
        if (i == 0) {
            CHECK(lead_await_starts(&tasks, 1, 10000), "candidate 0 was not elected");
            CHECK(tasks.started[0].who == 0, "first leader %d", tasks.started[0].who);
        }
    }
    snprintf(cmd, sizeof cmd, "proxy-pause %d", proxy);
    double cut = now_ms();
    CHECK(harness_command(&H, cmd, reply, sizeof reply) == 0 && strstr(reply, "\"ok\""), "%s: %s", cmd, reply);
    CHECK(lead_await_starts(&tasks, 2, 9000), "no second term within 3 TTLs of the partition");
    double cancelled = tasks.cancelled[0].at - cut, next = tasks.started[1].at - cut;
    CHECK(atomic_load(&tasks.cancels) >= 1 && tasks.cancelled[0].who == 0, "first cancelled: %d", tasks.cancelled[0].who);
    CHECK(cancelled < 3000, "the partitioned leader's task ran %.0f ms past the cut (TTL 3 s)", cancelled);
    CHECK(tasks.cancelled[0].at < tasks.started[1].at, "the next task started %.0f ms before the old one was cancelled",
          tasks.cancelled[0].at - tasks.started[1].at);
    CHECK(tasks.started[1].who != 0 && tasks.started[1].token > tasks.started[0].token, "second term: %d, token %lld after %lld",
          tasks.started[1].who, (long long)tasks.started[1].token, (long long)tasks.started[0].token);
    snprintf(cmd, sizeof cmd, "proxy-resume %d", proxy);
    CHECK(harness_command(&H, cmd, reply, sizeof reply) == 0 && strstr(reply, "\"ok\""), "%s: %s", cmd, reply);

    int second = tasks.started[1].who;
    double stop_at = now_ms();
    CHECK_RC(etcdlock_leader_stop(cand[second].lp), ETCDLOCK_OK);
    CHECK(lead_await_starts(&tasks, 3, 5000), "no third term within 5 s of the stop");
    double handover = tasks.started[2].at - stop_at;
    CHECK(handover < 1000, "handover took %.0f ms", handover);
    CHECK(tasks.started[2].who != second && tasks.started[2].token > tasks.started[1].token, "third term: %d, token %lld",
          tasks.started[2].who, (long long)tasks.started[2].token);
    printf("  partition: old task cancelled %.0f ms after the cut, next task started %.0f ms after it (TTL 3 s); "
           "stop handed over in %.0f ms\n", cancelled, next, handover);
out:
    for (int i = 0; i < 3; i++)
        if (cand[i].lp) etcdlock_leader_stop(cand[i].lp);
    for (int i = 0; i < 3; i++)
        if (started[i]) {
            pthread_join(th[i], NULL);
            CHECK(cand[i].next_rc == ETCDLOCK_CLOSED, "candidate %d: next ended with %s", i, etcdlock_status_name(cand[i].next_rc));
            CHECK(cand[i].n_kinds > 0 && cand[i].kinds[cand[i].n_kinds - 1] == ETCDLOCK_LEADER_STOPPED, "candidate %d: last event %d", i,
                  cand[i].n_kinds ? cand[i].kinds[cand[i].n_kinds - 1] : 0);
        }
    CHECK(atomic_load(&tasks.most) == 1, "tasks running at once: %d", atomic_load(&tasks.most));
    CHECK(atomic_load(&tasks.writes) == atomic_load(&tasks.starts), "guarded writes by the terms: %d of %d", atomic_load(&tasks.writes),
          atomic_load(&tasks.starts));
    if (started[0]) {
        /* Candidate 0 lost its term to the partition: ELECTED, RENEWAL_FAILING,
         * LOST (never RESIGNED for that term), and STOPPED last. */
        CHECK(cand[0].n_kinds >= 4 && cand[0].kinds[0] == ETCDLOCK_LEADER_ELECTED &&
                  cand[0].kinds[1] == ETCDLOCK_LEADER_RENEWAL_FAILING && cand[0].kinds[2] == ETCDLOCK_LEADER_LOST,
              "candidate 0's events start %d, %d, %d", cand[0].kinds[0], cand[0].kinds[1], cand[0].kinds[2]);
        CHECK(cand[0].lost_reason != ETCDLOCK_LOSS_NONE, "candidate 0's loss has no reason");
        printf("  candidate 0's loss: %s\n", etcdlock_loss_reason_name(cand[0].lost_reason));
    }
    for (int i = 0; i < 3; i++) {
        etcdlock_leader_free(cand[i].lp);
        etcdlock_client_free(cl[i]);
    }
}

/* Next event other than LEADER_CHANGED within 10 s; records CHANGED values. */
static int lead_next_kind(etcdlock_leader_loop *lp, etcdlock_leader_event *ev, int *saw_self, const char *self) {
    for (;;) {
        int rc = etcdlock_leader_next(lp, 10000, ev);
        if (rc != ETCDLOCK_OK) return -rc;
        if (ev->kind != ETCDLOCK_LEADER_CHANGED) return ev->kind;
        if (ev->has_leader && ev->leader_value_len == strlen(self) && memcmp(ev->leader_value, self, ev->leader_value_len) == 0)
            *saw_self = 1;
        etcdlock_buffer_free(ev->leader_value);
    }
}

/* A task that returns resigns and the loop campaigns again (tokens strictly
 * increase); again = 0 runs one term; a term lost to an operator's release
 * reports KEY_DELETED; events arrive in order, STOPPED last; bad input gets
 * ETCDLOCK_INVALID_ARGUMENT. */
static void test_lead_events(void) {
    etcdlock_client *c = connect_default();
    if (!c) return;
    char name[64];
    unique(name, sizeof name, "lead-events");
    etcdlock_leader_loop *lp = NULL;
    etcdlock_leader_event ev;
    etcdlock_lead_options lo;
    int saw = 0;
    /* Bad input. */
    CHECK_RC(etcdlock_lead(NULL, name, NULL, 0, NULL, &lp), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead(c, NULL, NULL, 0, NULL, &lp), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead(c, "", NULL, 0, NULL, &lp), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead(c, name, NULL, 3, NULL, &lp), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead(c, name, NULL, 0, NULL, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead_options_init(NULL, sizeof lo), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead_options_init(&lo, sizeof lo - 1), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_lead_options_init(&lo, sizeof lo), ETCDLOCK_OK);
    CHECK(lo.again == 1 && lo.retry_ms == 1000, "defaults: again %d, retry_ms %lld", lo.again, (long long)lo.retry_ms);
    lo.again = 2;
    CHECK_RC(etcdlock_lead(c, name, NULL, 0, &lo, &lp), ETCDLOCK_INVALID_ARGUMENT);
    lo.again = 1;
    lo.retry_ms = -1;
    CHECK_RC(etcdlock_lead(c, name, NULL, 0, &lo, &lp), ETCDLOCK_INVALID_ARGUMENT);
    lo.struct_size = 3;
    lo.retry_ms = 10;
    CHECK_RC(etcdlock_lead(c, name, NULL, 0, &lo, &lp), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(lp == NULL, "a refused etcdlock_lead wrote a loop");
    CHECK_RC(etcdlock_leader_next(NULL, 0, &ev), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_leader_stop(NULL), ETCDLOCK_INVALID_ARGUMENT);
    int flag = -1;
    CHECK_RC(etcdlock_term_cancelled(NULL, &flag), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_term_wait(NULL, 0), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_term_end(NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(etcdlock_term_guard(NULL) == NULL, "a NULL term has a guard");
    etcdlock_leader_free(NULL);
    etcdlock_term_free(NULL);

    /* again = 1: a task that returns resigns, the loop campaigns again. */
    CHECK_RC(etcdlock_lead(c, name, (const uint8_t *)"me", 2, NULL, &lp), ETCDLOCK_OK);
    if (!lp) goto out;
    CHECK_RC(etcdlock_leader_next(lp, 0, NULL), ETCDLOCK_INVALID_ARGUMENT);
    int64_t tokens[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        CHECK(lead_next_kind(lp, &ev, &saw, "me") == ETCDLOCK_LEADER_ELECTED, "term %d: event %d", i, ev.kind);
        if (ev.kind != ETCDLOCK_LEADER_ELECTED) goto out;
        tokens[i] = ev.fencing_token;
        int64_t gt = 0;
        CHECK_RC(etcdlock_guard_fencing_token(etcdlock_term_guard(ev.term), &gt), ETCDLOCK_OK);
        CHECK(gt == ev.fencing_token, "guard token %lld, event token %lld", (long long)gt, (long long)ev.fencing_token);
        CHECK_RC(etcdlock_term_cancelled(ev.term, NULL), ETCDLOCK_INVALID_ARGUMENT);
        CHECK_RC(etcdlock_term_cancelled(ev.term, &flag), ETCDLOCK_OK);
        CHECK(flag == 0, "a running term is cancelled");
        CHECK_RC(etcdlock_term_wait(ev.term, 10), ETCDLOCK_TIMEOUT);
        if (i == 0) {
            /* While the first task runs, the loop reports this candidate as leader. */
            etcdlock_term *t = ev.term;
            int rc;
            while (!saw && (rc = etcdlock_leader_next(lp, 10000, &ev)) == ETCDLOCK_OK) {
                CHECK(ev.kind == ETCDLOCK_LEADER_CHANGED || ev.kind == ETCDLOCK_LEADER_RENEWAL_RECOVERED, "while leader: event %d", ev.kind);
                if (ev.has_leader && ev.leader_value_len == 2 && memcmp(ev.leader_value, "me", 2) == 0 && ev.fencing_token == tokens[0])
                    saw = 1;
                etcdlock_buffer_free(ev.leader_value);
            }
            ev.term = t;
        }
        if (i < 2) {
            CHECK_RC(etcdlock_term_end(ev.term), ETCDLOCK_OK);
            CHECK_RC(etcdlock_term_cancelled(ev.term, &flag), ETCDLOCK_OK);
            CHECK(flag == 1, "an ended term is not cancelled");
            etcdlock_term_free(ev.term);
            CHECK(lead_next_kind(lp, &ev, &saw, "me") == ETCDLOCK_LEADER_RESIGNED, "after the task: event %d", ev.kind);
            if (i > 0) CHECK(tokens[i] > tokens[i - 1], "tokens %lld then %lld", (long long)tokens[i - 1], (long long)tokens[i]);
        } else {
            /* Stop while the task runs: the term is cancelled, the loop
             * resigns once the task ended, then STOPPED. */
            etcdlock_term *t = ev.term;
            CHECK_RC(etcdlock_leader_stop(lp), ETCDLOCK_OK);
            CHECK_RC(etcdlock_term_wait(t, 5000), ETCDLOCK_OK);
            /* The loop waits for the task's end: nothing but who leads comes. */
            int rc;
            while ((rc = etcdlock_leader_next(lp, 200, &ev)) == ETCDLOCK_OK && ev.kind == ETCDLOCK_LEADER_CHANGED) {
                if (ev.has_leader && ev.leader_value_len == 2 && memcmp(ev.leader_value, "me", 2) == 0) saw = 1;
                etcdlock_buffer_free(ev.leader_value);
            }
            CHECK(rc == ETCDLOCK_TIMEOUT, "before the task ended: %s, event %d", etcdlock_status_name(rc), ev.kind);
            CHECK(ev.kind == 0 && ev.term == NULL, "a timed-out next wrote kind %d", ev.kind);
            etcdlock_term_free(t); /* ends the term */
            CHECK(tokens[2] > tokens[1], "tokens %lld then %lld", (long long)tokens[1], (long long)tokens[2]);
            CHECK(lead_next_kind(lp, &ev, &saw, "me") == ETCDLOCK_LEADER_RESIGNED, "after stop: event %d", ev.kind);
            CHECK(lead_next_kind(lp, &ev, &saw, "me") == ETCDLOCK_LEADER_STOPPED, "then: event %d", ev.kind);
            CHECK_RC(etcdlock_leader_next(lp, 1000, &ev), ETCDLOCK_CLOSED);
        }
    }
    CHECK(saw == 1, "no LEADER_CHANGED named this candidate");
    etcdlock_leader_free(lp);
    lp = NULL;

    /* again = 0: one term. */
    etcdlock_lead_options_init(&lo, sizeof lo);
    lo.again = 0;
    CHECK_RC(etcdlock_lead(c, name, (const uint8_t *)"once", 4, &lo, &lp), ETCDLOCK_OK);
    if (!lp) goto out;
    saw = 0;
    CHECK(lead_next_kind(lp, &ev, &saw, "once") == ETCDLOCK_LEADER_ELECTED, "again=0: event %d", ev.kind);
    if (ev.kind == ETCDLOCK_LEADER_ELECTED) etcdlock_term_free(ev.term);
    CHECK(lead_next_kind(lp, &ev, &saw, "once") == ETCDLOCK_LEADER_RESIGNED, "again=0: event %d", ev.kind);
    CHECK(lead_next_kind(lp, &ev, &saw, "once") == ETCDLOCK_LEADER_STOPPED, "again=0: event %d", ev.kind);
    etcdlock_leader_free(lp);
    lp = NULL;

    /* An operator's release: LOST with KEY_DELETED, the term cancelled. */
    CHECK_RC(etcdlock_lead(c, name, (const uint8_t *)"rel", 3, NULL, &lp), ETCDLOCK_OK);
    if (!lp) goto out;
    CHECK(lead_next_kind(lp, &ev, &saw, "rel") == ETCDLOCK_LEADER_ELECTED, "release: event %d", ev.kind);
    if (ev.kind == ETCDLOCK_LEADER_ELECTED) {
        etcdlock_term *t = ev.term;
        int done = 0;
        CHECK_RC(etcdlock_release(c, name, ev.fencing_token, &done), ETCDLOCK_OK);
        CHECK(done == 1, "release found no key");
        int k;
        while ((k = lead_next_kind(lp, &ev, &saw, "rel")) == ETCDLOCK_LEADER_RENEWAL_RECOVERED) {}
        CHECK(k == ETCDLOCK_LEADER_LOST && ev.loss_reason == ETCDLOCK_LOSS_KEY_DELETED, "release: event %d, reason %d", k,
              ev.loss_reason);
        CHECK_RC(etcdlock_term_cancelled(t, &flag), ETCDLOCK_OK);
        CHECK(flag == 1, "a lost term is not cancelled");
        int held = 1;
        CHECK_RC(etcdlock_guard_is_held(etcdlock_term_guard(t), &held), ETCDLOCK_OK);
        CHECK(held == 0, "a lost term's guard is held");
        etcdlock_term_free(t);
        CHECK(lead_next_kind(lp, &ev, &saw, "rel") == ETCDLOCK_LEADER_ELECTED, "after the loss: event %d", ev.kind);
        if (ev.kind == ETCDLOCK_LEADER_ELECTED) etcdlock_term_free(ev.term);
    }
out:
    etcdlock_leader_free(lp); /* stops a running loop */
    etcdlock_client_free(c);
}


static const test_case TESTS[] = {
    {"version_and_names", test_version_and_names},
    {"once", test_once},
    {"logger", test_logger},
    {"lock_unlock", test_lock_unlock},
    {"try_lock", test_try_lock},
    {"timeout", test_timeout},
    {"wait_forever_handoff_and_cross_thread_unlock", test_wait_forever_handoff_and_cross_thread_unlock},
    {"small_stack_thread", test_small_stack_thread},
    {"guarded_ops", test_guarded_ops},
    {"multi_guarded", test_multi_guarded},
    {"async_lock", test_async_lock},
    {"async_timeout_and_cancel", test_async_timeout_and_cancel},
    {"blocking_call_in_callback", test_blocking_call_in_callback},
    {"client_free_waits_for_callbacks", test_client_free_waits_for_callbacks},
    {"client_free_in_callback", test_client_free_in_callback},
    {"guard_shared_by_threads", test_guard_shared_by_threads},
    {"loss_callbacks", test_loss_callbacks},
    {"loss_after_sigstop", test_loss_after_sigstop},
    {"fork_child", test_fork_child},
    {"contention_plain_counter", test_contention_plain_counter},
    {"contention_etcd_counter", test_contention_etcd_counter},
    {"bad_input", test_bad_input},
    {"options_from_env", test_options_from_env},
    {"keepalive_interval", test_keepalive_interval},
    {"lazy_connect", test_lazy_connect},
    {"metrics", test_metrics},
    {"metrics_member_failures", test_metrics_member_failures},
    {"error_message_per_thread", test_error_message_per_thread},
    {"auth_rbac", test_auth_rbac},
    {"semaphore", test_semaphore},
    {"rwlock", test_rwlock},
    {"lock_many", test_lock_many},
    {"election", test_election},
    {"renewal", test_renewal},
    {"leader_faults", test_leader_faults},
    {"list_and_release", test_list_and_release},
    {"lead_events", test_lead_events},
    {"lead_partition", test_lead_partition},
};

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--holder") == 0) return holder_main(argv[2], argv[3]);
    if (!realpath(argv[0], EXE)) snprintf(EXE, sizeof EXE, "%s", argv[0]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (harness_start(&H) != 0) {
        printf("cannot start etcd\n0 passed, 1 failed\n");
        return 1;
    }
    printf("etcd at %s, libetcdlock %s\n", H.endpoint, etcdlock_version());
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        if (argc > 1 && !strstr(TESTS[i].name, argv[1])) continue;
        const char *skip = getenv("ETCDLOCK_TEST_SKIP"); /* comma-separated test names */
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
    /* Every client is freed: stop the runtime, so background work a test
     * leaves behind (a waiter key's delete still retrying after a close) is
     * not reported as leaked by valgrind when the process exits. */
    etcdlock_shutdown();
    harness_stop(&H);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
