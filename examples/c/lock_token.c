/* Take a distributed lock and print its fencing token.
 *
 *   cc lock_token.c $(pkg-config --cflags --libs etcdlock) -o lock_token
 *   ETCDLOCK_ENDPOINTS=http://127.0.0.1:2379 ./lock_token my-lock
 *
 * Built and run by ffi-c/test.sh against a real etcd. */
#include <stdio.h>
#include <stdlib.h>

#include <etcdlock.h>

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "example-lock";
    const char *endpoints = getenv("ETCDLOCK_ENDPOINTS");

    etcdlock_options opts;
    etcdlock_options_init(&opts, sizeof opts);
    opts.endpoints = endpoints ? endpoints : "http://127.0.0.1:2379";
    opts.ttl_secs = 10;

    etcdlock_client *client = NULL;
    int rc = etcdlock_client_connect(&opts, &client);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "connect: %s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
        return 1;
    }

    etcdlock_guard *guard = NULL;
    rc = etcdlock_lock(client, name, 5000 /* ms */, &guard);
    if (rc != ETCDLOCK_OK) {
        fprintf(stderr, "lock %s: %s: %s\n", name, etcdlock_status_name(rc), etcdlock_last_error_message());
        etcdlock_client_free(client);
        return 1;
    }

    int64_t token = 0;
    const char *key = NULL;
    etcdlock_guard_fencing_token(guard, &token);
    etcdlock_guard_key(guard, &key);
    printf("holding %s (key %s) with fencing token %lld\n", name, key, (long long)token);

    /* ... the critical section: pass `token` to anything that can reject stale writers ... */

    rc = etcdlock_unlock(guard);
    etcdlock_guard_free(guard);
    etcdlock_client_free(client);
    return rc == ETCDLOCK_OK ? 0 : 1;
}
