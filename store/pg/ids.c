/* The PostgreSQL engine's class ids and oid blocks (pg.h): each a short
 * durable transaction of its own on the engine's connection, under
 * e->lock, tried again once on a new connection when the server went
 * away. */
#include <string.h>

#include "pg.h"

/* ---- class ids and oid blocks (the engine's connection) --------------------------- */

/* Looks the class up: 0 with *id, OST_ENOTFOUND, or a code. */
static int class_find(ost__engine *e, PGconn *c, const char *m, size_t ml, const char *n,
                      size_t nl, uint32_t *id) {
    params p = {0};
    p_bytes(&p, m, ml);
    p_bytes(&p, n, nl);
    int rc = 0;
    PGresult *r =
        ost__pg_run_as(e, c, "reading a class",
                       "SELECT id FROM ost_classes WHERE module = $1::text AND name = $2::text", &p,
                       &rc, NULL, "I");
    if (!r) return rc;
    rc = PQntuples(r) ? 0 : OST_ENOTFOUND;
    if (!rc) *id = rd32(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

static int class_id_once(ost__engine *e, const char *module, size_t mlen, const char *name,
                         size_t nlen, bool create, uint32_t *id) {
    pthread_mutex_lock(&e->lock);
    PGconn *c;
    int rc = ost__pg_eng_conn(e, &c);
    for (int tries = 0; !rc; tries++) {
        rc = class_find(e, c, module, mlen, name, nlen, id);
        if (rc != OST_ENOTFOUND) break;
        if (!create) {
            rc = ost__pg_fail(e, OST_ENOTFOUND, "%s: class %.*s.%.*s: not in the class table",
                              e->shown, (int)mlen, module, (int)nlen, name);
            break;
        }
        if (e->read_only) {
            rc = ost__pg_fail(e, OST_EREADONLY, "%s: cannot add a class: the store is read-only",
                              e->shown);
            break;
        }
        if (tries == 3) {
            rc = ost__pg_fail(e, OST_EIO, "%s: class %.*s.%.*s: could not be added", e->shown,
                              (int)mlen, module, (int)nlen, name);
            break;
        }
        /* A new id under the meta row lock; a session racing us for the
         * same class fails on UNIQUE (module, name) and reads it again. */
        if ((rc = ost__pg_run0(e, c, "adding a class", "BEGIN", NULL))) break;
        PGresult *r = ost__pg_run_as(e, c, "adding a class",
                                     "SELECT next_class FROM ost_meta WHERE id = 1 FOR UPDATE",
                                     NULL, &rc, NULL, "L");
        if (r && PQntuples(r) == 1) {
            uint64_t next = rd64(PQgetvalue(r, 0, 0));
            if (next >= OST__CLASS_LIMIT) {
                rc = ost__pg_fail(e, OST_ELIMIT, "%s: the class table is full", e->shown);
            } else {
                params p = {0};
                p_i32(&p, (uint32_t)next);
                p_bytes(&p, module, mlen);
                p_bytes(&p, name, nlen);
                PGresult *ir = PQexecParams(c,
                                            "INSERT INTO ost_classes VALUES ($1::int, $2::text, $3::text);"
                                            ,
                                            p.n, NULL, p.v, p.l, p.f, 1);
                if (PQresultStatus(ir) == PGRES_COMMAND_OK) {
                    rc = ost__pg_run0(
                        e, c, "adding a class",
                        "UPDATE ost_meta SET next_class = next_class + 1 WHERE id = 1", NULL);
                    if (!rc) rc = ost__pg_run0(e, c, "adding a class (commit)", "COMMIT", NULL);
                    if (!rc) {
                        *id = (uint32_t)next;
                        PQclear(r);
                        PQclear(ir);
                        break;
                    }
                } else {
                    const char *sqlst = PQresultErrorField(ir, PG_DIAG_SQLSTATE);
                    if (sqlst && !strcmp(sqlst, "23505")) rc = OST_ENOTFOUND; /* raced: read again */
                    else {
                        char cause[240];
                        ost__pg_cause(c, ir, cause, sizeof cause);
                        rc = ost__pg_fail(e, ost__pg_code(c, ir), "%s: adding a class: %s",
                                          e->shown, cause);
                    }
                }
                PQclear(ir);
            }
        } else if (r)
            rc = ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
        PQclear(r);
        if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
        if (rc != OST_ENOTFOUND) break;
        rc = 0;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int reserve_once(ost__engine *e, uint64_t want, uint64_t *first) {
    if (e->read_only)
        return ost__pg_fail(e, OST_EREADONLY, "%s: cannot reserve oids: the store is read-only",
                            e->shown);
    pthread_mutex_lock(&e->lock);
    PGconn *c = NULL; /* NULL when ost__pg_eng_conn fails: PQstatus says CONNECTION_BAD */
    int rc = ost__pg_eng_conn(e, &c);
    PGresult *r = NULL;
    if (!rc) rc = ost__pg_run0(e, c, "reserving oids", "BEGIN", NULL);
    if (!rc)
        r = ost__pg_run_as(e, c, "reserving oids",
                           "SELECT next_oid FROM ost_meta WHERE id = 1 FOR UPDATE", NULL, &rc, NULL,
                           "L");
    if (r && PQntuples(r) != 1) rc = ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    if (r && !rc) {
        uint64_t next = rd64(PQgetvalue(r, 0, 0));
        /* next_oid is a bigint: the last oid handed out is 2^63 - 2 */
        if (next > (uint64_t)INT64_MAX)
            rc = ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (next_oid %llu)", e->shown,
                              (unsigned long long)next);
        else if (want > (uint64_t)INT64_MAX - next)
            rc = ost__pg_fail(e, OST_ELIMIT,
                              "%s: cannot reserve %llu oids: the store's oids would pass 2^63",
                              e->shown, (unsigned long long)want);
        else {
            params p = {0};
            p_i64(&p, next + want);
            rc = ost__pg_run0(e, c, "reserving oids",
                              "UPDATE ost_meta SET next_oid = $1::bigint WHERE id = 1", &p);
            if (!rc) rc = ost__pg_run0(e, c, "reserving oids (commit)", "COMMIT", NULL);
            if (!rc) *first = next;
        }
    }
    PQclear(r);
    if (rc && PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int ost__pg_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                     size_t nlen, bool create, uint32_t *id) {
    int rc = class_id_once(e, module, mlen, name, nlen, create, id);
    if (rc == OST_EIO && ost__pg_eng_lost(e))
        rc = class_id_once(e, module, mlen, name, nlen, create, id);
    return rc;
}

int ost__pg_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first) {
    int rc = reserve_once(e, want, first);
    if (rc == OST_EIO && ost__pg_eng_lost(e)) rc = reserve_once(e, want, first);
    return rc;
}
