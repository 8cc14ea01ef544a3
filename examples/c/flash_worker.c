/* The C worker of the cross-language flash sale (scripts/flash_sale.py).
 * Contract (shared by every language, see cli/src/flash.rs): FLASH_ENDPOINTS,
 * FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS,
 * FLASH_WORKER_ID in the environment; one JSON line per purchase attempt.
 * A purchase: take the lock, guarded get of the stock, and if positive a
 * guarded put of stock-1 plus a sale record keyed by the fencing token.
 *
 *   cc flash_worker.c $(pkg-config --cflags --libs etcdlock) -o flash_worker
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <etcdlock.h>

static double now_ms(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *env(const char *k) {
    const char *v = getenv(k);
    return v ? v : "";
}

#define PUT(g, k, v) etcdlock_guard_put((g), (const uint8_t *)(k), strlen(k), (const uint8_t *)(v), strlen(v))

int main(void) {
    const char *lock = env("FLASH_LOCK"), *stock_key = env("FLASH_STOCK_KEY");
    const char *sales = env("FLASH_SALES_PREFIX"), *id = env("FLASH_WORKER_ID");
    int attempts = atoi(env("FLASH_ATTEMPTS"));

    etcdlock_options opts;
    etcdlock_options_init(&opts, sizeof opts);
    opts.endpoints = env("FLASH_ENDPOINTS");
    etcdlock_client *client = NULL;
    int rc = etcdlock_client_connect(&opts, &client);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "c worker: connect: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        return 1;
    }
    for (int n = 0; n < attempts; n++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        etcdlock_guard *g = NULL;
        if ((rc = etcdlock_lock(client, lock, -1, &g)) != ETCDLOCK_OK) goto fail;
        double wait = now_ms(CLOCK_MONOTONIC) - t0;
        uint8_t *v = NULL;
        size_t len = 0;
        if ((rc = etcdlock_guard_get(g, (const uint8_t *)stock_key, strlen(stock_key), &v, &len)) != ETCDLOCK_OK) goto fail;
        char buf[32] = "0";
        if (v) {
            snprintf(buf, sizeof buf, "%.*s", (int)(len < 31 ? len : 31), (const char *)v);
            etcdlock_buffer_free(v);
        }
        long before = atol(buf);
        int64_t token = 0;
        etcdlock_guard_fencing_token(g, &token);
        int sold = before > 0;
        if (sold) {
            char next[32], sale_key[512];
            snprintf(next, sizeof next, "%ld", before - 1);
            snprintf(sale_key, sizeof sale_key, "%s%020lld", sales, (long long)token);
            if ((rc = PUT(g, stock_key, next)) != ETCDLOCK_OK) goto fail;
            if ((rc = PUT(g, sale_key, "c")) != ETCDLOCK_OK) goto fail;
        }
        etcdlock_unlock(g);
        etcdlock_guard_free(g);
        printf("{\"lang\":\"c\",\"worker\":\"%s\",\"sold\":%s,\"token\":%lld,\"wait_ms\":%.3f,\"stock_before\":%ld,\"t_ms\":%.0f}\n",
               id, sold ? "true" : "false", (long long)token, wait, before, now_ms(CLOCK_REALTIME));
        fflush(stdout);
        continue;
    fail:
        fprintf(stderr, "c worker: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        etcdlock_guard_free(g);
        etcdlock_client_free(client);
        return 1;
    }
    etcdlock_client_free(client);
    return 0;
}
