/* A unit test a user writes: "my job stops writing when it loses its lock".
 *
 * No etcd: the client runs on the in-process store mem://job-test, and the
 * test ends the hold's lease there as etcd would once its time-to-live ran
 * out (etcdlock_mem_expire_lease). The job learns of the loss from its
 * guard's loss callback, as it would in production, and must stop.
 *
 *   cc job_stops_on_loss.c $(pkg-config --cflags --libs etcdlock) -lpthread -o job_stops_on_loss
 *   ./job_stops_on_loss        # exit 0: the job stopped; 1: it did not
 *
 * Built and run by ffi-c/test.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <etcdlock.h>

/* ---- the code under test: a job that writes while it holds its lock ---- */

struct job {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    etcdlock_guard *guard;
    int lost;        /* set by the loss callback */
    int reason;      /* its ETCDLOCK_LOSS_* reason */
    long writes;     /* what the job wrote (the "resource") */
    long finished;   /* 1: the job's loop has returned */
};

/* The guard's loss callback (on a library thread): tell the job. */
static void job_lost(int reason, void *user) {
    struct job *j = user;
    pthread_mutex_lock(&j->mu);
    j->lost = 1;
    j->reason = reason;
    pthread_cond_broadcast(&j->changed);
    pthread_mutex_unlock(&j->mu);
}

/* The job: write until the hold is reported lost, then stop. */
static void *job_run(void *user) {
    struct job *j = user;
    pthread_mutex_lock(&j->mu);
    while (!j->lost) {
        j->writes++; /* one unit of work on the protected resource */
        pthread_cond_broadcast(&j->changed);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 5 * 1000000L; /* the next unit in 5 ms, or at once on a loss */
        if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&j->changed, &j->mu, &t);
    }
    j->finished = 1;
    pthread_cond_broadcast(&j->changed);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* ---- the test ---- */

/* Wait (on the job's condition variable, not by sleeping) until *value is at
 * least want, or ms passed; the job's mutex is held. Returns whether it is. */
static int await_at_least(struct job *j, const long *value, long want, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    while (*value < want && pthread_cond_timedwait(&j->changed, &j->mu, &until) == 0) {}
    return *value >= want;
}

static int failures;
#define CHECK(cond, what)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "FAIL %s (%s) [%s]\n", what, #cond, etcdlock_last_error_message()); \
        }                                                                              \
    } while (0)

int main(void) {
    /* The fixture: a store of the test's own, and a client on it. TTL 3 s
     * keeps the loss tests that wait for a TTL short; this one waits for none. */
    etcdlock_mem *store = NULL;
    if (etcdlock_mem_open("job-test", &store) != ETCDLOCK_OK) {
        fprintf(stderr, "mem store: %s\n", etcdlock_last_error_message());
        return 1;
    }
    etcdlock_options o;
    etcdlock_options_init(&o, sizeof o);
    etcdlock_mem_endpoint(store, &o.endpoints); /* "mem://job-test" */
    o.ttl_secs = 3;
    etcdlock_client *client = NULL;
    if (etcdlock_client_connect(&o, &client) != ETCDLOCK_OK) {
        fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
        return 1;
    }

    struct job j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.changed, NULL);
    CHECK(etcdlock_lock(client, "nightly-report", 5000, &j.guard) == ETCDLOCK_OK, "lock");
    if (!j.guard) return 1;
    CHECK(etcdlock_guard_on_loss(j.guard, job_lost, &j) == ETCDLOCK_OK, "on_loss");
    pthread_t worker;
    pthread_create(&worker, NULL, job_run, &j);

    /* The job writes while it holds the lock. */
    pthread_mutex_lock(&j.mu);
    CHECK(await_at_least(&j, &j.writes, 3, 5000), "the job writes while it holds the lock");
    pthread_mutex_unlock(&j.mu);

    /* The lease ends in the store, as when etcd let its TTL run out. */
    int64_t lease = 0;
    int existed = 0;
    etcdlock_guard_lease_id(j.guard, &lease);
    CHECK(etcdlock_mem_expire_lease(store, lease, &existed) == ETCDLOCK_OK && existed, "expire the lease");

    /* The job hears of it and stops; nothing is written after that. */
    pthread_mutex_lock(&j.mu);
    CHECK(await_at_least(&j, &j.finished, 1, 5000), "the job stops once the loss is reported");
    CHECK(j.reason == ETCDLOCK_LOSS_LEASE_EXPIRED, "the reason is LeaseExpired");
    long at_stop = j.writes;
    pthread_mutex_unlock(&j.mu);
    pthread_join(worker, NULL);
    CHECK(j.writes == at_stop, "no write after the job stopped");
    int held = 1;
    etcdlock_guard_is_held(j.guard, &held);
    CHECK(!held, "the guard says it is not held");
    CHECK(etcdlock_unlock(j.guard) == ETCDLOCK_LOCK_LOST, "unlock says the hold was lost");
    printf("the job stopped writing: %s\n", etcdlock_loss_reason_name(j.reason));

    etcdlock_guard_free(j.guard);
    etcdlock_client_free(client);
    etcdlock_mem_resume(store); /* the fixture's teardown: no fault outlives the test */
    etcdlock_mem_free(store);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.changed);
    return failures ? 1 : 0;
}
