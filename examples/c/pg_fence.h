/* fence(): fencing a PostgreSQL write with an etcdlock hold's token, for
 * libpq programs (examples/c/fence_postgres.c, examples/c/flash_worker_pg.c).
 * The fence table is etcdlock_fence (examples/postgres/fence_schema.sql):
 * the newest token written per resource. Header-only: copy it into your
 * program; libetcdlock itself never links libpq. */
#ifndef ETCDLOCK_PG_FENCE_H
#define ETCDLOCK_PG_FENCE_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

/* Admit this transaction's write to `resource` for a holder with `token`:
 * moves the resource's row of the fence table to the token unless it holds a
 * newer one (the row stays locked until the transaction ends). Returns 1 when
 * the write may go on, 0 when it is stale (*newest: the newer token), -1 on a
 * database error. Call it inside the transaction, before the write. */
static inline int fence(PGconn *db, const char *resource, int64_t token, int64_t *newest) {
    char tok[24];
    snprintf(tok, sizeof tok, "%" PRId64, token);
    const char *params[2] = {resource, tok};
    PGresult *r = PQexecParams(db,
                               "INSERT INTO etcdlock_fence AS f (resource, token) VALUES ($1, $2) "
                               "ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token "
                               "WHERE f.token <= EXCLUDED.token",
                               2, NULL, params, NULL, NULL, 0);
    int admitted = PQresultStatus(r) != PGRES_COMMAND_OK ? -1 : strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    if (admitted != 0) return admitted;
    r = PQexecParams(db, "SELECT token FROM etcdlock_fence WHERE resource = $1", 1, NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok) *newest = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return ok ? 0 : -1;
}

#endif
