/* What walks a whole PostgreSQL store (pg.h): pack's sweep, the scan of
 * records in oid order (check, raw snapshots), the raw snapshot's
 * counters and verify. */
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* ---- sweep --------------------------------------------------------------------------- */

static int sweep_try(ost__sess *s, uint64_t mark, bool (*keepfn)(void *ud, uint64_t oid), void *ud,
                     uint64_t *removed, bool *retry) {
    ost__engine *e = s->e;
    int rc = ost__pg_run0(e, s->conn, "sweep: begin", "BEGIN ISOLATION LEVEL READ COMMITTED", NULL);
    if (rc) return rc;
    /* commits wait: nothing changes under the sweep */
    PGresult *r = ost__pg_run_as(e, s->conn, "sweep: locking meta",
                                 "SELECT last_serial FROM ost_meta WHERE id = 1 FOR UPDATE", NULL,
                                 &rc, retry, "L");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t last = rd64(PQgetvalue(r, 0, 0));
    PQclear(r);
    uint64_t at = 0, gone = 0;
    bool first = true;
    arr a = {0};
    for (;;) {
        params q = {0};
        p_i64(&q, at);
        p_i64(&q, mark);
        p_i64(&q, (uint64_t)PAGE_ROWS);
        r = ost__pg_run_as(
            e, s->conn, "sweep: reading records",
            first ? "SELECT oid FROM ost_records WHERE oid >= $1::bigint AND serial <= $2::bigint "
                    "ORDER BY oid LIMIT $3::bigint"
                  : "SELECT oid FROM ost_records WHERE oid > $1::bigint AND serial <= $2::bigint "
                    "ORDER BY oid LIMIT $3::bigint",
            &q, &rc, retry, "L");
        if (!r) break;
        first = false;
        int nt = PQntuples(r);
        arr_begin(&a, OIDTYPE_INT8);
        for (int i = 0; i < nt; i++) {
            at = rd64(PQgetvalue(r, i, 0));
            if (!keepfn(ud, at)) arr_add_i64(&a, at);
        }
        PQclear(r);
        if (arr_end(&a)) {
            rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
            break;
        }
        if (a.count) {
            params d = {0};
            p_bytes(&d, a.b, a.n);
            rc = ost__pg_run0r(e, s->conn, "sweep: removing records",
                               "DELETE FROM ost_records WHERE oid = ANY($1::bigint[])", &d, retry);
            if (!rc)
                rc =
                    ost__pg_run0r(e, s->conn, "sweep: removing map entries",
                                  "DELETE FROM ost_ments WHERE map = ANY($1::bigint[])", &d, retry);
            if (rc) break;
            gone += a.count;
        }
        if (nt < PAGE_ROWS) break;
    }
    arr_free(&a);
    /* entries of maps that have no record (never reachable, or damage) */
    if (!rc)
        rc = ost__pg_run0(
            e, s->conn, "sweep: removing map entries",
            "DELETE FROM ost_ments m WHERE NOT EXISTS (SELECT 1 FROM ost_records r WHERE "
            "r.oid = m.map)",
            NULL);
    /* the deletion records of maps that are gone */
    if (!rc)
        rc = ost__pg_run0(
            e, s->conn, "sweep: removing deletion records",
            "DELETE FROM ost_mapdels d WHERE NOT EXISTS (SELECT 1 FROM ost_records r WHERE "
            "r.oid = d.map)",
            NULL);
    /* the commit log restarts: caches older than now reload everything */
    if (!rc)
        rc = ost__pg_run0(e, s->conn, "sweep: trimming the commit log", "DELETE FROM ost_txlog",
                          NULL);
    if (!rc) {
        params q = {0};
        p_i64(&q, last + 1);
        rc = ost__pg_run0(e, s->conn, "sweep: writing meta",
                          "UPDATE ost_meta SET low = $1::bigint WHERE id = 1", &q);
    }
    if (!rc) {
        r = ost__pg_run(e, s->conn, "sweep: commit", "COMMIT", NULL, &rc, retry);
        PQclear(r);
    }
    if (!rc && removed) *removed = gone;
    return rc;
}

int ost__pg_sweep(ost__sess *s, uint64_t mark, bool (*keepfn)(void *ud, uint64_t oid), void *ud,
                  uint64_t *removed) {
    if (s->e->read_only)
        return ost__pg_fail(s->e, OST_EREADONLY, "%s: pack: the store is read-only", s->e->shown);
    if (s->snap || s->lazy) ost__pg_snap_end(s);
    int rc;
    for (int tries = 0;; tries++) {
        if ((rc = ost__pg_sess_conn(s))) return rc;
        bool retry = false;
        s->write = true;
        rc = sweep_try(s, mark, keepfn, ud, removed, &retry);
        s->write = false;
        if (rc && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
        if (!rc || !retry || tries >= 5) break;
    }
    return rc;
}

/* The records of [from, to) a page at a time: a page's recviews are valid
 * while fn runs on them (a scan of the whole store would otherwise hold
 * it all in memory). */
int ost__pg_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    if (!to || to > (uint64_t)INT64_MAX) to = (uint64_t)INT64_MAX;
    if (from >= to) return 0;
    uint64_t at = from;
    for (;;) {
        params p = {0};
        p_i64(&p, at);
        p_i64(&p, to);
        p_i64(&p, (uint64_t)PAGE_ROWS);
        PGresult *r = ost__pg_run_as(
            s->e, s->conn, "scanning records",
            "SELECT oid, serial, cid, state FROM ost_records WHERE oid >= $1::bigint "
            "AND oid < $2::bigint ORDER BY oid LIMIT $3::bigint",
            &p, &rc, NULL, "LLIB");
        if (!r) return rc;
        int nt = PQntuples(r);
        uint64_t last = 0;
        for (int i = 0; i < nt && !rc; i++) {
            ost__recview v;
            fill_rec(r, i, 1, &v);
            last = rd64(PQgetvalue(r, i, 0));
            rc = fn(ud, last, &v);
        }
        PQclear(r);
        if (rc || nt < PAGE_ROWS || last + 1 >= to) return rc;
        at = last + 1;
    }
}

/* ---- raw access ------------------------------------------------------------------- */

int ost__pg_snap_stat(ost__sess *s, ost_snap_stats *out) {
    memset(out, 0, sizeof *out);
    out->engine = "postgresql";
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    PGresult *r = ost__pg_run_as(s->e, s->conn, "reading the counters",
                      "SELECT format, next_oid, last_serial, next_class, (SELECT count(*) FROM "
                      "ost_records)::bigint, (SELECT count(*) FROM ost_ments)::bigint, "
                      "pg_total_relation_size('ost_ments')::bigint FROM ost_meta WHERE id = 1",
                      NULL, &rc, NULL, "lllllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    out->format = col64(r, 0);
    out->next_oid = col64(r, 1);
    out->last_serial = col64(r, 2);
    out->next_class = col64(r, 3);
    out->records = col64(r, 4);
    out->entries = col64(r, 5);
    out->entry_bytes = col64(r, 6);
    PQclear(r);
    return 0;
}

/* What can be wrong in the rows without the server noticing: counters
 * behind the rows, and records whose class the table does not hold. */
int ost__pg_verify(ost__sess *s, char *first, size_t cap) {
    first[0] = 0;
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    PGresult *r = ost__pg_run_as(s->e, s->conn, "verifying",
                      "SELECT next_oid, last_serial, next_class, (SELECT max(oid) FROM "
                      "ost_records), (SELECT max(serial) FROM ost_records), (SELECT max(serial) "
                      "FROM ost_ments), (SELECT max(id) FROM ost_classes)::bigint, (SELECT count(*) "
                      "FROM ost_records r WHERE NOT EXISTS (SELECT 1 FROM ost_classes c WHERE c.id "
                      "= r.cid))::bigint, (SELECT min(oid) FROM ost_records r WHERE NOT EXISTS "
                      "(SELECT 1 FROM ost_classes c WHERE c.id = r.cid)) FROM ost_meta WHERE id = 1",
                      NULL, &rc, NULL, "lllllllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        snprintf(first, cap, "%s: damaged meta (no row)", s->e->shown);
        return OST_ECORRUPT;
    }
    uint64_t next_oid = col64(r, 0), last = col64(r, 1), next_class = col64(r, 2);
    bool any = !PQgetisnull(r, 0, 3);
    uint64_t top_oid = col64(r, 3), top_rs = col64(r, 4), top_es = col64(r, 5);
    uint64_t top_cid = col64(r, 6), orphans = col64(r, 7), orphan = col64(r, 8);
    PQclear(r);
    char line[4][200];
    int n = 0;
    if (any && next_oid <= top_oid)
        snprintf(line[n++], sizeof line[0], "meta: next_oid %llu is not above oid %llu",
                 (unsigned long long)next_oid, (unsigned long long)top_oid);
    if (last < top_rs || last < top_es)
        snprintf(line[n++], sizeof line[0], "meta: last_serial %llu is below serial %llu",
                 (unsigned long long)last, (unsigned long long)(top_rs > top_es ? top_rs : top_es));
    if (next_class <= top_cid)
        snprintf(line[n++], sizeof line[0], "meta: next_class %llu is not above class id %llu",
                 (unsigned long long)next_class, (unsigned long long)top_cid);
    if (orphans)
        snprintf(line[n++], sizeof line[0],
                 "%llu record%s of a class the class table does not hold (the first: oid %llu)",
                 (unsigned long long)orphans, orphans == 1 ? "" : "s", (unsigned long long)orphan);
    if (!n) return 0;
    snprintf(first, cap, "%s: %s", s->e->shown, line[0]);
    if (n > 1) {
        size_t len = strlen(first);
        snprintf(first + len, cap - len, ", and %d more", n - 1);
    }
    return OST_ECORRUPT;
}
