/* A deposit to an account in PostgreSQL (libpq), made under an etcdlock lock
 * and fenced with the hold's token: a holder that lost the lock while paused
 * cannot overwrite a newer holder's deposit.
 *
 * Usage: fence_postgres NAME ACCOUNT AMOUNT [--pause] [--no-fence]
 *
 * etcd from ETCDLOCK_ENDPOINTS (and ETCDLOCK_TTL), PostgreSQL from libpq's PG*
 * variables; the tables are examples/postgres/fence_schema.sql. With --pause
 * the holder waits for a line on stdin between reading the balance and
 * writing it (where the tests stop it past its lease); --no-fence writes
 * without the fence (the lost update the fence prevents).
 * scripts/fence_scenario.py runs it (ffi-c/test.sh).
 *
 *   cc fence_postgres.c $(pkg-config --cflags --libs etcdlock libpq) -o fence_postgres
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etcdlock.h>
#include <libpq-fe.h>

#include "pg_fence.h"

/* One statement with text parameters; 1 if it succeeded, else 0 (message on stderr). */
static int exec(PGconn *db, const char *sql, int n, const char *const *params, PGresult **out) {
    PGresult *r = PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "%s: %s", sql, PQerrorMessage(db));
    if (out && ok) *out = r;
    else PQclear(r);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s NAME ACCOUNT AMOUNT [--pause] [--no-fence]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1], *account = argv[2];
    long long amount = atoll(argv[3]);
    int pause = 0, fenced = 1;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--pause") == 0) pause = 1;
        if (strcmp(argv[i], "--no-fence") == 0) fenced = 0;
    }
    char lock[256];
    snprintf(lock, sizeof lock, "account-%s", account);

    etcdlock_options opts;
    etcdlock_options_init(&opts, sizeof opts); /* ETCDLOCK_ENDPOINTS, ETCDLOCK_TTL */
    etcdlock_client *client = NULL;
    etcdlock_guard *guard = NULL;
    PGconn *db = PQconnectdb(""); /* PGHOST, PGPORT, PGUSER, PGDATABASE */
    int rc = 1;
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "postgres: %s", PQerrorMessage(db));
        goto out;
    }
    if (etcdlock_client_connect(&opts, &client) != ETCDLOCK_OK ||
        etcdlock_lock(client, lock, 10000, &guard) != ETCDLOCK_OK) {
        fprintf(stderr, "etcdlock: %s\n", etcdlock_last_error_message());
        goto out;
    }
    int64_t token = 0, newest = 0;
    etcdlock_guard_fencing_token(guard, &token);
    PGresult *row = NULL;
    const char *id[1] = {account};
    if (!exec(db, "SELECT balance FROM accounts WHERE id = $1", 1, id, &row)) goto out;
    long long balance = PQntuples(row) ? atoll(PQgetvalue(row, 0, 0)) : 0;
    PQclear(row);
    printf("%s: token %" PRId64 ", balance %lld\n", name, token, balance);
    fflush(stdout);
    if (pause) { /* a GC pause, a slow disk: the lease may expire here */
        char line[16];
        if (!fgets(line, sizeof line, stdin)) goto out;
    }

    char value[24];
    snprintf(value, sizeof value, "%lld", balance + amount);
    const char *update[2] = {value, account};
    if (!exec(db, "BEGIN", 0, NULL, NULL)) goto out;
    int go = fenced ? fence(db, lock, token, &newest) : 1; /* refused if a newer holder has written */
    if (go == 1 && !exec(db, "UPDATE accounts SET balance = $1 WHERE id = $2", 2, update, NULL)) go = -1;
    if (!exec(db, go == 1 ? "COMMIT" : "ROLLBACK", 0, NULL, NULL) || go < 0) goto out;
    if (go == 1)
        printf("%s: wrote balance %s\n", name, value);
    else
        printf("%s: refused: token %" PRId64 " is older than %" PRId64 ", the newest written for %s\n", name, token,
               newest, lock);
    if (etcdlock_unlock(guard) == ETCDLOCK_LOCK_LOST)
        printf("%s: the lock was lost: %s\n", name, etcdlock_loss_reason_name(etcdlock_last_error_loss_reason()));
    rc = 0;
out:
    etcdlock_guard_free(guard);
    etcdlock_client_free(client);
    PQfinish(db);
    return rc;
}
