/* C benchmark of libetcdlock: uncontended etcdlock_lock + etcdlock_unlock
 * (+ etcdlock_guard_free) p50/p99 over ITERATIONS (10% more as warm-up), then
 * the handoff: 8 threads, each with its own client (connection and session),
 * looping etcdlock_lock -> etcdlock_unlock on one name for ITERATIONS
 * acquisitions after a tenth as many as warm-up. Handoff = when the next
 * holder's etcdlock_lock returned minus when the previous holder called
 * etcdlock_unlock, the definition of core_bench's rust_core_handoff.
 *
 *   bench_c [ENDPOINT|-] [ITERATIONS]
 *
 * Without an endpoint (or with "-") it starts its own etcd through etcd-harness
 * ($ETCDLOCK_HARNESS). Prints one JSON line. ffi-c/bench.sh runs it next to the
 * Rust core and the raw etcd round trip on the same etcd. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcdlock.h"
#include "harness.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CONTENDERS 8

/* What the contenders share; the fields below `mu` are touched by the holder. */
static struct {
    pthread_mutex_t mu;
    const char *name;
    int warm, total, taken;
    double last_unlock; /* < 0: none yet */
    double first, last;
    double *handoffs, *waits;
    int nh, nw;
} turns = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *contender(void *arg) {
    etcdlock_client *c = arg;
    for (;;) {
        double t0 = now_ms();
        etcdlock_guard *g = NULL;
        if (etcdlock_lock(c, turns.name, 30000, &g) != ETCDLOCK_OK) {
            fprintf(stderr, "handoff lock: %s\n", etcdlock_last_error_message());
            exit(1);
        }
        double acquired = now_ms();
        pthread_mutex_lock(&turns.mu);
        int k = turns.taken++;
        if (k >= turns.warm && k < turns.total) {
            if (turns.last_unlock >= 0) turns.handoffs[turns.nh++] = acquired - turns.last_unlock;
            turns.waits[turns.nw++] = acquired - t0;
            if (turns.nw == 1) turns.first = acquired;
            turns.last = acquired;
        }
        int done = k + 1 >= turns.total;
        turns.last_unlock = now_ms();
        pthread_mutex_unlock(&turns.mu);
        if (etcdlock_unlock(g) != ETCDLOCK_OK) {
            fprintf(stderr, "handoff unlock: %s\n", etcdlock_last_error_message());
            exit(1);
        }
        etcdlock_guard_free(g);
        if (done) return NULL;
    }
}

static int handoff(const etcdlock_options *o, int iterations) {
    char name[64];
    snprintf(name, sizeof name, "bench-c-handoff-%d", (int)getpid());
    turns.name = name;
    turns.warm = iterations / 10;
    turns.total = turns.warm + iterations;
    turns.last_unlock = -1;
    turns.handoffs = calloc((size_t)iterations, sizeof(double));
    turns.waits = calloc((size_t)iterations, sizeof(double));
    etcdlock_client *cs[CONTENDERS];
    pthread_t th[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++)
        if (etcdlock_client_connect(o, &cs[i]) != ETCDLOCK_OK) {
            fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
            return 1;
        }
    for (int i = 0; i < CONTENDERS; i++) pthread_create(&th[i], NULL, contender, cs[i]);
    for (int i = 0; i < CONTENDERS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < CONTENDERS; i++) etcdlock_client_free(cs[i]);
    qsort(turns.handoffs, (size_t)turns.nh, sizeof(double), cmp);
    qsort(turns.waits, (size_t)turns.nw, sizeof(double), cmp);
    double per_s = turns.last > turns.first ? (turns.nw - 1) / ((turns.last - turns.first) / 1e3) : 0;
    printf("{\"metric\":\"c_abi_handoff\",\"contenders\":%d,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"n\":%d,"
           "\"wait_p50_ms\":%.4f,\"acquisitions_per_s\":%.1f}\n",
           CONTENDERS, turns.handoffs[(int)((turns.nh - 1) * 0.5 + 0.5)], turns.handoffs[(int)((turns.nh - 1) * 0.99 + 0.5)],
           turns.nh, turns.waits[(int)((turns.nw - 1) * 0.5 + 0.5)], per_s);
    free(turns.handoffs);
    free(turns.waits);
    return 0;
}

int main(int argc, char **argv) {
    etcd_harness h = {0};
    const char *endpoint = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
    int iterations = argc > 2 ? atoi(argv[2]) : 2000;
    if (iterations < 10) iterations = 10;
    if (!endpoint) {
        if (harness_start(&h) != 0) { fprintf(stderr, "cannot start etcd\n"); return 1; }
        endpoint = h.endpoint;
    }
    etcdlock_options o;
    etcdlock_options_init(&o, sizeof o);
    o.endpoints = endpoint;
    o.ttl_secs = 30;
    etcdlock_client *c = NULL;
    if (etcdlock_client_connect(&o, &c) != ETCDLOCK_OK) {
        fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
        return 1;
    }
    char name[64];
    snprintf(name, sizeof name, "bench-c-%d", (int)getpid());
    int warm = iterations / 10;
    double *v = calloc((size_t)iterations, sizeof *v);
    for (int i = 0; i < iterations + warm; i++) {
        double t0 = now_ms();
        etcdlock_guard *g = NULL;
        if (etcdlock_lock(c, name, 10000, &g) != ETCDLOCK_OK || etcdlock_unlock(g) != ETCDLOCK_OK) {
            fprintf(stderr, "lock/unlock: %s\n", etcdlock_last_error_message());
            return 1;
        }
        etcdlock_guard_free(g);
        if (i >= warm) v[i - warm] = now_ms() - t0;
    }
    qsort(v, (size_t)iterations, sizeof *v, cmp);
    printf("{\"metric\":\"c_abi_blocking\",\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"n\":%d}\n", v[(iterations - 1) / 2],
           v[(int)((iterations - 1) * 0.99 + 0.5)], iterations);
    free(v);
    etcdlock_client_free(c);
    fflush(stdout);
    int rc = handoff(&o, iterations);
    if (h.pid) harness_stop(&h);
    if (rc) return rc;
    return 0;
}
