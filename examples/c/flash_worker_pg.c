/* The C worker of the cross-language flash sale on PostgreSQL
 * (scripts/flash_sale.py --store postgres). Contract shared by every language
 * (see cli/src/flash.rs): FLASH_ENDPOINTS, FLASH_LOCK, FLASH_STOCK_KEY,
 * FLASH_ATTEMPTS, FLASH_WORKER_ID in the environment, PostgreSQL from libpq's
 * PG* variables; one JSON line per purchase attempt. A purchase: take the lock,
 * then one transaction: read the stock row, and if positive fence the write
 * with the hold's token (pg_fence.h), write stock-1 and a sale row.
 *
 *   cc flash_worker_pg.c $(pkg-config --cflags --libs etcdlock libpq) -o flash_worker_pg
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <etcdlock.h>
#include <libpq-fe.h>

#include "pg_fence.h"

static double now_ms(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *env(const char *k) {
    const char *v = getenv(k);
    return v ? v : "";
}

static int ok(PGconn *db, PGresult *r) {
    int good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!good) fprintf(stderr, "c worker: postgres: %s", PQerrorMessage(db));
    return good;
}

/* One transaction; the stock before it (>= 0), or -1 on an error (a stale token included). */
static long long purchase(PGconn *db, const char *sku, const char *lock, int64_t token, const char *worker) {
    char tok[24], next[24];
    snprintf(tok, sizeof tok, "%" PRId64, token);
    PGresult *r = PQexec(db, "BEGIN");
    int good = ok(db, r);
    PQclear(r);
    if (!good) return -1;
    const char *read[1] = {sku};
    r = PQexecParams(db, "SELECT stock FROM flash_stock WHERE sku = $1", 1, NULL, read, NULL, NULL, 0);
    good = ok(db, r);
    long long before = good && PQntuples(r) ? atoll(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (good && before > 0) {
        int64_t newest = 0;
        good = fence(db, lock, token, &newest) == 1;
        if (!good) fprintf(stderr, "c worker: token %s refused, newest %" PRId64 "\n", tok, newest);
        snprintf(next, sizeof next, "%lld", before - 1);
        const char *write[2] = {next, sku};
        if (good) {
            r = PQexecParams(db, "UPDATE flash_stock SET stock = $1 WHERE sku = $2", 2, NULL, write, NULL, NULL, 0);
            good = ok(db, r);
            PQclear(r);
        }
        const char *sale[2] = {tok, worker};
        if (good) {
            r = PQexecParams(db, "INSERT INTO flash_sales (token, lang, worker) VALUES ($1, 'c', $2)", 2, NULL, sale,
                             NULL, NULL, 0);
            good = ok(db, r);
            PQclear(r);
        }
    }
    r = PQexec(db, good ? "COMMIT" : "ROLLBACK");
    good = ok(db, r) && good;
    PQclear(r);
    return good ? before : -1;
}

int main(void) {
    const char *lock = env("FLASH_LOCK"), *sku = env("FLASH_STOCK_KEY"), *id = env("FLASH_WORKER_ID");
    int attempts = atoi(env("FLASH_ATTEMPTS"));

    etcdlock_options opts;
    etcdlock_options_init(&opts, sizeof opts);
    opts.endpoints = env("FLASH_ENDPOINTS");
    etcdlock_client *client = NULL;
    PGconn *db = PQconnectdb("");
    int rc = 1;
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "c worker: postgres: %s", PQerrorMessage(db));
        goto out;
    }
    if (etcdlock_client_connect(&opts, &client) != ETCDLOCK_OK) {
        fprintf(stderr, "c worker: connect: %s\n", etcdlock_last_error_message());
        goto out;
    }
    for (int n = 0; n < attempts; n++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        etcdlock_guard *g = NULL;
        if (etcdlock_lock(client, lock, -1, &g) != ETCDLOCK_OK) {
            fprintf(stderr, "c worker: lock: %s\n", etcdlock_last_error_message());
            goto out;
        }
        double wait = now_ms(CLOCK_MONOTONIC) - t0;
        int64_t token = 0;
        etcdlock_guard_fencing_token(g, &token);
        long long before = purchase(db, sku, lock, token, id);
        etcdlock_unlock(g);
        etcdlock_guard_free(g);
        if (before < 0) goto out;
        printf("{\"lang\":\"c\",\"worker\":\"%s\",\"sold\":%s,\"token\":%" PRId64
               ",\"wait_ms\":%.3f,\"stock_before\":%lld,\"t_ms\":%.0f}\n",
               id, before > 0 ? "true" : "false", token, wait, before, now_ms(CLOCK_REALTIME));
        fflush(stdout);
    }
    rc = 0;
out:
    etcdlock_client_free(client);
    PQfinish(db);
    return rc;
}
