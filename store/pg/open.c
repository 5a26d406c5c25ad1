/* The PostgreSQL engine's addresses, open, close and stat (pg.h): the
 * engine object, its first connection, the schema (schema.c) and the
 * exclusive option. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- addresses ----------------------------------------------------------------- */

/* What libpq is given: a URI as it is, "postgres:" + a conninfo string
 * without its prefix. */
static const char *conn_string(const char *addr) {
    if (!strncmp(addr, "postgresql://", 13) || !strncmp(addr, "postgres://", 11)) return addr;
    return addr + 9;
}

/* ---- open, close, stat ---------------------------------------------------------- */

static void eng_free(ost__engine *e) {
    if (!e) return;
    ost__pg_views_close(e);
    if (e->conn) PQfinish(e->conn);
    for (int i = 0; i < NVIEWS; i++) pthread_mutex_destroy(&e->views[i].xlock);
    pthread_mutex_destroy(&e->vlock);
    pthread_mutex_destroy(&e->lock);
    free(e->conninfo);
    free(e);
}

int ost__pg_open(const ost__host *host, ost_store *st, const char *addr,
                 const ost_store_options *o, ost__engine **out) {
    *out = NULL;
    if (!ost__pg_claims(addr))
        return ost__eng_fail(host, st, OST_EINVAL, "not a PostgreSQL address");
    if (o && ((unsigned)o->durability > OST_SYNC_NONE || (o->create && o->read_only)))
        return ost__eng_fail(host, st, OST_EINVAL, "postgresql store: bad options");
    if (o && o->prefetch_connections > 8)
        return ost__eng_fail(host, st, OST_EINVAL,
                             "postgresql store: prefetch_connections is %u: at most 8 (0 or 1: "
                             "one)",
                             o->prefetch_connections);
    ost__engine *e = calloc(1, sizeof *e);
    if (!e) return ost__eng_fail(host, st, OST_ENOMEM, "out of memory");
    e->host = host;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->vlock, NULL);
    for (int i = 0; i < NVIEWS; i++) pthread_mutex_init(&e->views[i].xlock, NULL);
    e->st = st;
    e->read_only = o && o->read_only;
    e->par = o && o->prefetch_connections > 1 ? o->prefetch_connections : 1;
    if (e->par > 8) e->par = 8;
    e->sync_off = o && o->durability != OST_SYNC_FULL;
    e->group_commit = o && o->group_commit && !e->read_only;
    ost__pg_show(addr, e->shown, sizeof e->shown);
    e->conninfo = strdup(conn_string(addr));
    if (!e->conninfo) {
        eng_free(e);
        return ost__eng_fail(host, st, OST_ENOMEM, "out of memory");
    }
    PGconn *c;
    int rc = ost__pg_connect(e, &c);
    if (rc) {
        eng_free(e);
        return rc;
    }
    e->conn = c;
    bool dels = false;
    rc = ost__pg_schema_open(e, c, o && o->create && !e->read_only, &dels);
    /* only when it is missing: CREATE TABLE IF NOT EXISTS needs the
     * right to create in the schema even when the table is there
     * (RangeVarGetAndCheckCreationNamespace in
     * src/backend/catalog/namespace.c checks ACL_CREATE first), which a
     * role with rights on the tables alone does not have */
    if (!rc && !e->read_only && !dels) rc = ost__pg_mapdels_ensure(e, c);
    if (!rc && o && o->exclusive) {
        rc = ost__pg_take_excl(e, c);
        e->exclusive = !rc;
    }
    if (rc) {
        eng_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void ost__pg_close(ost__engine *e) { eng_free(e); }

static int stat_once(ost__engine *e, ost_store_stats *out) {
    pthread_mutex_lock(&e->lock);
    PGconn *c;
    int rc = ost__pg_eng_conn(e, &c);
    PGresult *r = NULL;
    if (!rc)
        rc = ost__pg_run0(e, c, "stat", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL);
    if (!rc) {
        r = ost__pg_run_as(
            e, c, "stat",
            "SELECT (SELECT count(*) FROM ost_records)::bigint, (SELECT "
            "coalesce(sum(16 + octet_length(state)), 0) FROM ost_records)::bigint, next_oid, "
            "last_serial FROM ost_meta WHERE id = 1",
            NULL, &rc, NULL, "LLLL");
        PQclear(PQexec(c, "COMMIT"));
    }
    if (r && PQntuples(r) == 1) {
        memset(out, 0, sizeof *out);
        out->records = rd64(PQgetvalue(r, 0, 0));
        out->bytes = rd64(PQgetvalue(r, 0, 1));
        out->next_oid = rd64(PQgetvalue(r, 0, 2));
        out->last_serial = rd64(PQgetvalue(r, 0, 3));
        out->map_size = 0;
    } else if (r)
        rc = ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    PQclear(r);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int ost__pg_stat(ost__engine *e, ost_store_stats *out) {
    int rc = stat_once(e, out);
    if (rc == OST_EIO && ost__pg_eng_lost(e)) rc = stat_once(e, out);
    return rc;
}
