/* C benchmark of libetcdlock: uncontended etcdlock_lock + etcdlock_unlock
 * (+ etcdlock_guard_free) p50/p99 over ITERATIONS (10% more as warm-up).
 *
 *   bench_c [ENDPOINT|-] [ITERATIONS]
 *
 * Without an endpoint (or with "-") it starts its own etcd through etcd-harness
 * ($ETCDLOCK_HARNESS). Prints one JSON line. ffi-c/bench.sh runs it next to the
 * Rust core and the raw etcd round trip on the same etcd. */
#define _GNU_SOURCE
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
    if (h.pid) harness_stop(&h);
    return 0;
}
