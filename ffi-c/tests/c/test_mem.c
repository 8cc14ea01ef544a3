/* C tests of the in-process stores' test controls (etcdlock_mem_*): each
 * control on the real path, with the signal and loss reason a holder sees
 * (the C side of core/tests/mem_faults.rs), and bad input and NULLs.
 * No etcd: every client connects to a mem://NAME store of its test. Plain
 * C11 + pthreads, in the style of test_etcdlock.c. Last line of output:
 * "N passed, N failed".
 *
 * Environment: ETCDLOCK_TEST_SKIP (comma-separated test names to leave out).
 * An argument selects the tests whose name contains it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcdlock.h"

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

/* A store of the test's own (a fresh name per test and run). */
static etcdlock_mem *open_store(const char *what) {
    char name[64];
    snprintf(name, sizeof name, "cmem-%d-%s", (int)getpid(), what);
    etcdlock_mem *s = NULL;
    int rc = etcdlock_mem_open(name, &s);
    if (rc != ETCDLOCK_OK) fprintf(stderr, "  etcdlock_mem_open(%s): %s\n", name, etcdlock_last_error_message());
    return s;
}

/* A client of the store; TTL 3 s and a 1 s request timeout keep the loss
 * tests short (as core/tests/mem_faults.rs). */
static etcdlock_client *connect_to(const etcdlock_mem *s, int64_t ttl) {
    etcdlock_options o;
    etcdlock_client *c = NULL;
    etcdlock_options_init(&o, sizeof o);
    if (etcdlock_mem_endpoint(s, &o.endpoints) != ETCDLOCK_OK) return NULL;
    o.ttl_secs = ttl;
    o.request_timeout_ms = 1000;
    o.connect_timeout_ms = 30000; /* valgrind makes the first connect slow */
    int rc = etcdlock_client_connect(&o, &c);
    if (rc != ETCDLOCK_OK) fprintf(stderr, "  connect: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
    return c;
}

/* What a holder is told, in order: each callback (loss, renewal, lock_async)
 * appends an event; tests await them (condition variable, no sleeps). */
enum { EV_LOCKED = 1, EV_LOSS, EV_AT_RISK, EV_RENEWED, EV_RENEWAL_ENDED };
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int kind[16];
    int64_t value[16]; /* the loss reason, the ms left, the lock's status */
    double at[16];     /* now_ms() of the event */
    int n;
    etcdlock_guard *guard; /* from EV_LOCKED */
    int callback_rc;       /* a store control made from a callback */
    etcdlock_mem *store;   /* for that control, if set */
} events;

static void events_init(events *e) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->callback_rc = -1;
}

static void events_destroy(events *e) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
}

static void push(events *e, int kind, int64_t value) {
    pthread_mutex_lock(&e->mu);
    if (e->n < 16) {
        e->kind[e->n] = kind;
        e->value[e->n] = value;
        e->at[e->n] = now_ms();
        e->n++;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* The index of the first event of kind, waiting up to ms for it; -1 if none came. */
static int await_event(events *e, int kind, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&e->mu);
    int found = -1;
    for (;;) {
        for (int i = 0; i < e->n && found < 0; i++)
            if (e->kind[i] == kind) found = i;
        if (found >= 0 || pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&e->mu);
    return found;
}

static void on_loss(int reason, void *user) {
    events *e = user;
    /* The controls never block: one made from a callback (a runtime thread) works. */
    if (e->store) {
        etcdlock_mem_key_list *l = NULL;
        e->callback_rc = etcdlock_mem_keys(e->store, NULL, 0, &l);
        etcdlock_mem_key_list_free(l);
    }
    push(e, EV_LOSS, reason);
}

static void on_renewal(int64_t ms, void *user) {
    push(user, ms >= 0 ? EV_AT_RISK : ms == ETCDLOCK_RENEWAL_ENDED ? EV_RENEWAL_ENDED : EV_RENEWED, ms);
}

static void on_locked(int status, etcdlock_guard *g, void *user) {
    events *e = user;
    pthread_mutex_lock(&e->mu);
    e->guard = g;
    pthread_mutex_unlock(&e->mu);
    push(e, EV_LOCKED, status);
}

/* The number of keys under prefix in the store, read again every 10 ms until
 * it is want (the waiter's key shows up) or 5 s passed. */
static size_t await_keys(const etcdlock_mem *s, const char *prefix, size_t want) {
    size_t n = 0;
    double t0 = now_ms();
    do {
        etcdlock_mem_key_list *l = NULL;
        if (etcdlock_mem_keys(s, (const uint8_t *)prefix, strlen(prefix), &l) != ETCDLOCK_OK) return 0;
        n = etcdlock_mem_key_list_len(l);
        etcdlock_mem_key_list_free(l);
        if (n == want) break;
        struct timespec ten = {0, 10 * 1000000L};
        nanosleep(&ten, NULL);
    } while (now_ms() - t0 < 5000);
    return n;
}

/* ------------------------------------------------------------------------ */

/* expire_lease: the holder loses the hold with LeaseExpired, the waiter
 * behind it is granted (a larger fencing token), unlock says LockLost. */
static void test_expire_lease(void) {
    etcdlock_mem *s = open_store("expire");
    etcdlock_client *a = s ? connect_to(s, 15) : NULL, *b = s ? connect_to(s, 15) : NULL;
    CHECK(s && a && b, "store and clients");
    if (!s || !a || !b) goto out;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(a, "job", 5000, &g), ETCDLOCK_OK);
    if (!g) goto out;
    events loss, waiter;
    events_init(&loss);
    events_init(&waiter);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &loss), ETCDLOCK_OK);
    CHECK_RC(etcdlock_lock_async(b, "job", 10000, on_locked, &waiter, NULL), ETCDLOCK_OK);
    CHECK(await_keys(s, "job/", 2) == 2, "the waiter queued behind the holder");
    int64_t lease = 0, token = 0;
    int existed = -1;
    CHECK_RC(etcdlock_guard_lease_id(g, &lease), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_fencing_token(g, &token), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_expire_lease(s, lease, &existed), ETCDLOCK_OK);
    CHECK(existed == 1, "the store had the lease: %d", existed);
    CHECK_RC(etcdlock_mem_expire_lease(s, lease, &existed), ETCDLOCK_OK);
    CHECK(existed == 0, "gone already: %d", existed);
    int i = await_event(&loss, EV_LOSS, 5000);
    CHECK(i >= 0 && loss.value[i] == ETCDLOCK_LOSS_LEASE_EXPIRED, "loss reason %s",
          i >= 0 ? etcdlock_loss_reason_name((int)loss.value[i]) : "(none)");
    int held = 1, reason = 0;
    CHECK_RC(etcdlock_guard_is_held(g, &held), ETCDLOCK_OK);
    CHECK(held == 0, "not held after the loss");
    CHECK_RC(etcdlock_guard_loss_reason(g, &reason), ETCDLOCK_OK);
    CHECK(reason == ETCDLOCK_LOSS_LEASE_EXPIRED, "reason %d", reason);
    int w = await_event(&waiter, EV_LOCKED, 5000);
    CHECK(w >= 0 && waiter.value[w] == ETCDLOCK_OK, "the waiter is granted: %s",
          w >= 0 ? etcdlock_status_name((int)waiter.value[w]) : "(no callback)");
    if (waiter.guard) {
        int64_t next = 0;
        etcdlock_guard_fencing_token(waiter.guard, &next);
        CHECK(next > token, "tokens grow: %lld then %lld", (long long)token, (long long)next);
        CHECK_RC(etcdlock_unlock(waiter.guard), ETCDLOCK_OK);
        etcdlock_guard_free(waiter.guard);
    }
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_LOCK_LOST);
    CHECK(etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_LEASE_EXPIRED, "last error's reason %d",
          etcdlock_last_error_loss_reason());
    etcdlock_guard_free(g);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
    a = b = NULL;
    events_destroy(&loss);
    events_destroy(&waiter);
out:
    etcdlock_client_free(a);
    etcdlock_client_free(b);
    etcdlock_mem_free(s);
}

/* delete_key: the store's view of a hold (keys), then the key deleted as an
 * operator would: KeyDeleted, and a control made from the loss callback. */
static void test_delete_key(void) {
    etcdlock_mem *s = open_store("delete");
    etcdlock_client *a = s ? connect_to(s, 15) : NULL;
    CHECK(s && a, "store and client");
    if (!s || !a) goto out;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_lock(a, "job", 5000, &g), ETCDLOCK_OK);
    if (!g) goto out;
    const char *key = NULL;
    int64_t lease = 0, token = 0;
    etcdlock_guard_key(g, &key);
    etcdlock_guard_lease_id(g, &lease);
    etcdlock_guard_fencing_token(g, &token);
    etcdlock_mem_key_list *l = NULL;
    CHECK_RC(etcdlock_mem_keys(s, (const uint8_t *)key, strlen(key), &l), ETCDLOCK_OK);
    CHECK(etcdlock_mem_key_list_len(l) == 1, "one key: %zu", etcdlock_mem_key_list_len(l));
    const etcdlock_mem_key *k = etcdlock_mem_key_list_at(l, 0);
    CHECK(k && k->key_len == strlen(key) && strcmp(k->key, key) == 0, "the guard's key: %s", k ? k->key : "(none)");
    CHECK(k && k->lease_id == lease, "on the guard's lease");
    CHECK(k && k->create_revision == token && k->mod_revision >= token, "created at the fencing token");
    CHECK(etcdlock_mem_key_list_at(l, 1) == NULL, "one key only");
    etcdlock_mem_key_list_free(l);

    events loss;
    events_init(&loss);
    loss.store = s;
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &loss), ETCDLOCK_OK);
    int existed = -1;
    CHECK_RC(etcdlock_mem_delete_key(s, (const uint8_t *)key, strlen(key), &existed), ETCDLOCK_OK);
    CHECK(existed == 1, "the key was there");
    CHECK_RC(etcdlock_mem_delete_key(s, (const uint8_t *)key, strlen(key), &existed), ETCDLOCK_OK);
    CHECK(existed == 0, "gone already");
    int i = await_event(&loss, EV_LOSS, 5000);
    CHECK(i >= 0 && loss.value[i] == ETCDLOCK_LOSS_KEY_DELETED, "loss reason %s",
          i >= 0 ? etcdlock_loss_reason_name((int)loss.value[i]) : "(none)");
    CHECK(loss.callback_rc == ETCDLOCK_OK, "etcdlock_mem_keys from the loss callback: %d", loss.callback_rc);
    CHECK_RC(etcdlock_guard_put(g, (const uint8_t *)"x", 1, (const uint8_t *)"y", 1), ETCDLOCK_LOCK_LOST);
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_LOCK_LOST);
    CHECK(etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_KEY_DELETED, "last error's reason");
    etcdlock_guard_free(g);
    etcdlock_client_free(a);
    a = NULL;
    events_destroy(&loss);
out:
    etcdlock_client_free(a);
    etcdlock_mem_free(s);
}

/* silence: a lock call ends at its timeout; the hold turns at risk (the
 * renewal callback, the hold still held), then is lost with ConnectionLost
 * within the TTL; once the store answers again a new hold is granted. */
static void test_silence(void) {
    etcdlock_mem *s = open_store("silence");
    etcdlock_client *a = s ? connect_to(s, 3) : NULL;
    CHECK(s && a, "store and client");
    if (!s || !a) goto out;
    etcdlock_guard *g = NULL, *other = NULL;
    CHECK_RC(etcdlock_lock(a, "job", 5000, &g), ETCDLOCK_OK);
    if (!g) goto out;
    events ev;
    events_init(&ev);
    CHECK_RC(etcdlock_guard_on_renewal(g, on_renewal, &ev), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &ev), ETCDLOCK_OK);
    double t0 = now_ms();
    CHECK_RC(etcdlock_mem_silence(s, 60000), ETCDLOCK_OK);
    CHECK_RC(etcdlock_lock(a, "other", 500, &other), ETCDLOCK_TIMEOUT);
    CHECK(now_ms() - t0 < 1500, "the lock call ended at its timeout: %.0f ms", now_ms() - t0);
    int risk = await_event(&ev, EV_AT_RISK, 5000);
    CHECK(risk >= 0 && ev.value[risk] > 0 && ev.value[risk] < 3000, "at risk with %lld ms left",
          risk >= 0 ? (long long)ev.value[risk] : -1LL);
    int lost = await_event(&ev, EV_LOSS, 5000);
    CHECK(lost >= 0 && ev.value[lost] == ETCDLOCK_LOSS_CONNECTION_LOST, "loss reason %s",
          lost >= 0 ? etcdlock_loss_reason_name((int)ev.value[lost]) : "(none)");
    CHECK(risk >= 0 && lost > risk, "at risk first, then lost (events %d, %d)", risk, lost);
    CHECK(lost >= 0 && ev.at[lost] - t0 < 4000, "lost within the TTL: %.0f ms", lost >= 0 ? ev.at[lost] - t0 : -1);
    CHECK(await_event(&ev, EV_RENEWAL_ENDED, 5000) >= 0, "the renewal callback's last call (the hold ended)");
    CHECK(await_event(&ev, EV_RENEWED, 0) < 0, "never renewed while the store was silent");
    CHECK_RC(etcdlock_unlock(g), ETCDLOCK_LOCK_LOST);
    CHECK(etcdlock_last_error_loss_reason() == ETCDLOCK_LOSS_CONNECTION_LOST, "last error's reason");
    CHECK_RC(etcdlock_mem_resume(s), ETCDLOCK_OK);
    /* The store answers again: a new hold is granted. */
    etcdlock_guard *again = NULL;
    CHECK_RC(etcdlock_lock(a, "job", 10000, &again), ETCDLOCK_OK);
    CHECK_RC(etcdlock_unlock(again), ETCDLOCK_OK);
    etcdlock_guard_free(again);
    etcdlock_guard_free(g);
    etcdlock_guard_free(other);
    etcdlock_client_free(a);
    a = NULL;
    events_destroy(&ev);
out:
    if (s) etcdlock_mem_resume(s);
    etcdlock_client_free(a);
    etcdlock_mem_free(s);
}

/* silence 0 ends a silence, as resume does: a try while silent is
 * Unavailable at the request timeout; a lock after it is granted within
 * the table's bound for a store answering again (deadline-etcd-hung: 3 s),
 * not when the 60 s silence would have ended. */
static void test_silence_zero_ends_it(void) {
    etcdlock_mem *s = open_store("silence-zero");
    etcdlock_client *a = s ? connect_to(s, 15) : NULL;
    CHECK(s && a, "store and client");
    if (!s || !a) goto out;
    etcdlock_guard *g = NULL;
    CHECK_RC(etcdlock_mem_silence(s, 60000), ETCDLOCK_OK);
    CHECK_RC(etcdlock_try_lock(a, "job", &g), ETCDLOCK_UNAVAILABLE);
    CHECK_RC(etcdlock_mem_silence(s, 0), ETCDLOCK_OK);
    double t0 = now_ms();
    CHECK_RC(etcdlock_lock(a, "job", 5000, &g), ETCDLOCK_OK);
    CHECK(now_ms() - t0 < 3000, "granted once the store answers: %.0f ms", now_ms() - t0);
    etcdlock_guard_free(g);
out:
    if (s) etcdlock_mem_resume(s);
    etcdlock_client_free(a);
    etcdlock_mem_free(s);
}

/* stall: one client cut off while the other goes on; the stalled holder is
 * at risk, then lost with ConnectionLost; once its lease expires in the store
 * the other client is granted its lock with a larger fencing token. */
static void test_stall(void) {
    etcdlock_mem *s = open_store("stall");
    etcdlock_client *a = s ? connect_to(s, 3) : NULL, *b = s ? connect_to(s, 3) : NULL;
    CHECK(s && a && b, "store and clients");
    if (!s || !a || !b) goto out;
    etcdlock_guard *g = NULL, *other = NULL, *h = NULL;
    CHECK_RC(etcdlock_lock(a, "job", 5000, &g), ETCDLOCK_OK);
    if (!g) goto out;
    events ev;
    events_init(&ev);
    CHECK_RC(etcdlock_guard_on_renewal(g, on_renewal, &ev), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_on_loss(g, on_loss, &ev), ETCDLOCK_OK);
    int64_t lease = 0, token = 0;
    etcdlock_guard_lease_id(g, &lease);
    etcdlock_guard_fencing_token(g, &token);
    double t0 = now_ms();
    CHECK_RC(etcdlock_mem_stall(s, lease, 60000), ETCDLOCK_OK);
    /* b goes on while a is stalled. */
    CHECK_RC(etcdlock_lock(b, "other", 1000, &other), ETCDLOCK_OK);
    CHECK(now_ms() - t0 < 1000, "b was not held up: %.0f ms", now_ms() - t0);
    int risk = await_event(&ev, EV_AT_RISK, 5000);
    int lost = await_event(&ev, EV_LOSS, 6000);
    CHECK(risk >= 0, "a's hold turned at risk");
    CHECK(lost >= 0 && ev.value[lost] == ETCDLOCK_LOSS_CONNECTION_LOST, "loss reason %s",
          lost >= 0 ? etcdlock_loss_reason_name((int)ev.value[lost]) : "(none)");
    CHECK(risk >= 0 && lost > risk, "at risk first, then lost (events %d, %d)", risk, lost);
    /* Once a's lease expires in the store, b is granted a's lock. */
    CHECK_RC(etcdlock_lock(b, "job", 6000, &h), ETCDLOCK_OK);
    int64_t next = 0;
    if (h) etcdlock_guard_fencing_token(h, &next);
    CHECK(next > token, "tokens grow: %lld then %lld", (long long)token, (long long)next);
    CHECK_RC(etcdlock_mem_stall(s, lease, 0), ETCDLOCK_OK);
    if (h) CHECK_RC(etcdlock_unlock(h), ETCDLOCK_OK);
    if (other) CHECK_RC(etcdlock_unlock(other), ETCDLOCK_OK);
    etcdlock_guard_free(h);
    etcdlock_guard_free(other);
    etcdlock_guard_free(g);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
    a = b = NULL;
    events_destroy(&ev);
out:
    if (s) etcdlock_mem_resume(s);
    etcdlock_client_free(a);
    etcdlock_client_free(b);
    etcdlock_mem_free(s);
}

/* The endpoint, the process-wide store, keys with a prefix, and values. */
static void test_endpoint_and_keys(void) {
    etcdlock_mem *s = open_store("keys"), *d = NULL, *again = NULL;
    CHECK(s != NULL, "store");
    if (!s) return;
    const char *ep = NULL;
    char want[96];
    snprintf(want, sizeof want, "mem://cmem-%d-keys", (int)getpid());
    CHECK_RC(etcdlock_mem_endpoint(s, &ep), ETCDLOCK_OK);
    CHECK(ep && strcmp(ep, want) == 0, "endpoint %s", ep ? ep : "(null)");
    CHECK_RC(etcdlock_mem_open("", &d), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_endpoint(d, &ep), ETCDLOCK_OK);
    CHECK(ep && strcmp(ep, "mem://") == 0, "the process-wide store: %s", ep ? ep : "(null)");
    etcdlock_mem_free(d);

    etcdlock_client *a = connect_to(s, 15);
    CHECK(a != NULL, "client");
    if (!a) { etcdlock_mem_free(s); return; }
    etcdlock_guard *g1 = NULL, *g2 = NULL;
    CHECK_RC(etcdlock_lock(a, "jobs/a", 5000, &g1), ETCDLOCK_OK);
    CHECK_RC(etcdlock_lock(a, "jobs/b", 5000, &g2), ETCDLOCK_OK);
    CHECK_RC(etcdlock_guard_put(g1, (const uint8_t *)"data/x", 6, (const uint8_t *)"v\0w", 3), ETCDLOCK_OK);
    etcdlock_mem_key_list *l = NULL;
    CHECK_RC(etcdlock_mem_keys(s, (const uint8_t *)"jobs/", 5, &l), ETCDLOCK_OK);
    size_t n = etcdlock_mem_key_list_len(l);
    CHECK(n >= 2, "the two lock keys (and their meta records): %zu", n);
    for (size_t i = 1; i < n; i++)
        CHECK(strcmp(etcdlock_mem_key_list_at(l, i - 1)->key, etcdlock_mem_key_list_at(l, i)->key) < 0, "key order");
    etcdlock_mem_key_list_free(l);
    /* A value with a NUL in it, as stored. */
    CHECK_RC(etcdlock_mem_keys(s, (const uint8_t *)"data/", 5, &l), ETCDLOCK_OK);
    const etcdlock_mem_key *k = etcdlock_mem_key_list_at(l, 0);
    CHECK(etcdlock_mem_key_list_len(l) == 1 && k && k->value_len == 3 && memcmp(k->value, "v\0w", 3) == 0 &&
              k->lease_id == 0 && strcmp(k->key, "data/x") == 0,
          "the guarded put's key and value");
    etcdlock_mem_key_list_free(l);
    /* Every key (NULL, 0), and a prefix nothing has. */
    CHECK_RC(etcdlock_mem_keys(s, NULL, 0, &l), ETCDLOCK_OK);
    CHECK(etcdlock_mem_key_list_len(l) >= 3, "every key: %zu", etcdlock_mem_key_list_len(l));
    etcdlock_mem_key_list_free(l);
    CHECK_RC(etcdlock_mem_keys(s, (const uint8_t *)"nothing/", 8, &l), ETCDLOCK_OK);
    CHECK(l != NULL && etcdlock_mem_key_list_len(l) == 0, "an empty list, not NULL");
    etcdlock_mem_key_list_free(l);
    /* Two handles on one store see the same keys. */
    char name[64];
    snprintf(name, sizeof name, "cmem-%d-keys", (int)getpid());
    CHECK_RC(etcdlock_mem_open(name, &again), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_keys(again, (const uint8_t *)"data/", 5, &l), ETCDLOCK_OK);
    CHECK(etcdlock_mem_key_list_len(l) == 1, "the same store");
    etcdlock_mem_key_list_free(l);
    etcdlock_mem_free(again);
    etcdlock_guard_free(g1);
    etcdlock_guard_free(g2);
    etcdlock_client_free(a);
    etcdlock_mem_free(s);
}

/* NULLs and bad input: ETCDLOCK_INVALID_ARGUMENT with a message, out
 * parameters cleared, never a crash. */
static void test_bad_input(void) {
    etcdlock_mem *s = (etcdlock_mem *)&s; /* not NULL: the call must clear it */
    CHECK_RC(etcdlock_mem_open(NULL, &s), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(s == NULL, "*store cleared");
    CHECK(strstr(etcdlock_last_error_message(), "NULL") != NULL, "message: %s", etcdlock_last_error_message());
    CHECK(etcdlock_last_error_status() == ETCDLOCK_INVALID_ARGUMENT, "last status");
    CHECK_RC(etcdlock_mem_open("a/b", &s), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(strstr(etcdlock_last_error_message(), "a/b") != NULL, "message names the store: %s",
          etcdlock_last_error_message());
    CHECK_RC(etcdlock_mem_open("mem://x", &s), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_open("has space", &s), ETCDLOCK_INVALID_ARGUMENT);
    char longname[80];
    memset(longname, 'n', 65);
    longname[65] = 0;
    CHECK_RC(etcdlock_mem_open(longname, &s), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_open("\xff\xfe", &s), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_open("ok", NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(s == NULL, "nothing opened");

    const char *ep = "x";
    int existed = 7;
    etcdlock_mem_key_list *l = (etcdlock_mem_key_list *)&l;
    CHECK_RC(etcdlock_mem_endpoint(NULL, &ep), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_expire_lease(NULL, 1, &existed), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(existed == 0, "*existed cleared");
    CHECK_RC(etcdlock_mem_delete_key(NULL, (const uint8_t *)"k", 1, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_silence(NULL, 1000), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_stall(NULL, 1, 1000), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_resume(NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_keys(NULL, NULL, 0, &l), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(l == NULL, "*keys cleared");
    CHECK(etcdlock_mem_key_list_len(NULL) == 0, "len of NULL");
    CHECK(etcdlock_mem_key_list_at(NULL, 0) == NULL, "at of NULL");
    etcdlock_mem_key_list_free(NULL);
    etcdlock_mem_free(NULL);

    s = open_store("bad");
    CHECK(s != NULL, "store");
    if (!s) return;
    CHECK_RC(etcdlock_mem_endpoint(s, NULL), ETCDLOCK_INVALID_ARGUMENT);
    /* An unknown lease is no error: nothing existed. */
    existed = 7;
    CHECK_RC(etcdlock_mem_expire_lease(s, 12345, &existed), ETCDLOCK_OK);
    CHECK(existed == 0, "no such lease");
    CHECK_RC(etcdlock_mem_expire_lease(s, -1, NULL), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_delete_key(s, NULL, 3, &existed), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_delete_key(s, NULL, 0, &existed), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_delete_key(s, (const uint8_t *)"k", 0, &existed), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(strstr(etcdlock_last_error_message(), "key is empty") != NULL, "message: %s", etcdlock_last_error_message());
    CHECK_RC(etcdlock_mem_delete_key(s, (const uint8_t *)"k", (size_t)ETCDLOCK_MAX_BUFFER_LEN + 1, &existed),
             ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_delete_key(s, (const uint8_t *)"missing", 7, &existed), ETCDLOCK_OK);
    CHECK(existed == 0, "no such key");
    /* Spans: negative or over ETCDLOCK_MAX_TIMEOUT_MS are refused, nothing silenced. */
    CHECK_RC(etcdlock_mem_silence(s, -1), ETCDLOCK_INVALID_ARGUMENT);
    CHECK(strstr(etcdlock_last_error_message(), "-1 ms") != NULL, "message: %s", etcdlock_last_error_message());
    CHECK_RC(etcdlock_mem_silence(s, INT64_MIN), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_silence(s, ETCDLOCK_MAX_TIMEOUT_MS + 1), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_silence(s, INT64_MAX), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_stall(s, 1, -5), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_stall(s, 1, INT64_MAX), ETCDLOCK_INVALID_ARGUMENT);
    /* The largest span is accepted (and ended again). */
    CHECK_RC(etcdlock_mem_silence(s, ETCDLOCK_MAX_TIMEOUT_MS), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_resume(s), ETCDLOCK_OK);
    CHECK_RC(etcdlock_mem_keys(s, NULL, 3, &l), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_keys(s, NULL, 0, NULL), ETCDLOCK_INVALID_ARGUMENT);
    CHECK_RC(etcdlock_mem_keys(s, NULL, 0, &l), ETCDLOCK_OK);
    CHECK(etcdlock_mem_key_list_at(l, 1000) == NULL, "out of range");
    etcdlock_mem_key_list_free(l);
    /* A client of the store still works after all that (nothing was left silent). */
    etcdlock_client *a = connect_to(s, 15);
    etcdlock_guard *g = NULL;
    CHECK(a != NULL, "client");
    if (a) CHECK_RC(etcdlock_try_lock(a, "job", &g), ETCDLOCK_OK);
    etcdlock_guard_free(g);
    etcdlock_client_free(a);
    etcdlock_mem_free(s);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

static const test_case TESTS[] = {
    {"bad_input", test_bad_input},
    {"endpoint_and_keys", test_endpoint_and_keys},
    {"expire_lease", test_expire_lease},
    {"delete_key", test_delete_key},
    {"silence_zero_ends_it", test_silence_zero_ends_it},
    {"silence_at_risk_then_lost", test_silence},
    {"stall_one_client", test_stall},
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("libetcdlock %s, in-process stores only\n", etcdlock_version());
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
    etcdlock_shutdown();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
