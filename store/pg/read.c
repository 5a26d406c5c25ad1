/* The PostgreSQL engine's reads (pg.h): a record, many records in one
 * round trip (in parts on several connections when there are many: the
 * prefetch helpers), the commit log, the class table. Each result is kept
 * until the snapshot ends (ost__pg_keep): the views point into it. */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- record reads ---------------------------------------------------------------- */

int ost__pg_get(ost__sess *s, uint64_t oid, ost__recview *v) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, oid);
    PGresult *r = ost__pg_run_ps(s, PS_GET, "reading a record", &p, &rc, NULL);
    if (!r) return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ENOTFOUND, "oid %llu: no such object", (unsigned long long)oid);
    }
    fill_rec(r, 0, 0, v);
    return ost__pg_keep(s, r);
}

/* The records a part of a parallel get_many has at least. */
#define PAR_MIN 128

/* get_many_par's mark of an oid found. */
#define FOUND ((uint64_t)1 << 63)

/* An int8[] parameter of oids[0, n) into a and p: 0 or OST_ENOMEM. */
static int oid_array(ost__engine *e, const uint64_t *oids, size_t n, arr *a, params *p) {
    arr_begin(a, OIDTYPE_INT8);
    for (size_t i = 0; i < n; i++) arr_add_i64(a, oids[i]);
    if (arr_end(a)) return ost__pg_fail(e, OST_ENOMEM, "out of memory");
    *p = (params){0};
    p_bytes(p, a->b, a->n);
    return 0;
}

/* Keeps r (get_many's rows) and calls fn on each. */
static int rows_out(ost__sess *s, PGresult *r, ost__rec_fn fn, void *ud) {
    int rc = ost__pg_res_check(s->e, r, "reading records", ost__pg_ps_shape[PS_GET_MANY]);
    if (rc) {
        PQclear(r);
        return rc;
    }
    rc = ost__pg_keep(s, r);
    for (int i = 0, nt = PQntuples(r); i < nt && !rc; i++) {
        ost__recview v;
        fill_rec(r, i, 1, &v);
        rc = fn(ud, rd64(PQgetvalue(r, i, 0)), &v);
    }
    return rc;
}

/* get_many on the session's connection alone, in one round trip. */
static int get_many_one(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    arr a = {0};
    params p;
    int rc = oid_array(s->e, oids, n, &a, &p);
    if (!rc) {
        PGresult *r = ost__pg_run_ps(s, PS_GET_MANY, "reading records", &p, &rc, NULL);
        if (r) rc = rows_out(s, r, fn, ud);
    }
    arr_free(&a);
    return rc;
}

/* get_many in parts, in parallel: the first on the session's connection,
 * each other one on a helper connection, all sent before any answer is
 * read, so that the server reads them on as many processes at once. A
 * helper reads outside the session's snapshot, as a statement of its own
 * (no transaction to begin, export or import): its snapshot is later than
 * the session's, and serials become visible in commit order (the meta
 * row lock), so a record it finds with a serial the session's snapshot
 * counts (<= last_serial) is the very version the snapshot holds; one
 * with a later serial, or not found (a commit or a pack since), is read
 * again on the session's connection, as are the parts of a helper that
 * failed (which is closed: the session reads alone from then on). 1 when
 * it does not apply (the caller reads alone); else 0 or the failure. */
static int get_many_par(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    ost__engine *e = s->e;
    size_t parts = e->par;
    if (parts > n / PAR_MIN) parts = n / PAR_MIN;
    if (parts < 2 || s->help_off || !s->snap || s->write) return 1;
    int rc = ost__pg_ps_ready(s, PS_GET_MANY);
    if (rc) return rc;
    if (!ost__pg_help_connect(s, parts - 1)) return 1;
    uint64_t last = s->info.last_serial;
    arr a[8] = {{0}};
    params q[8];
    bool sent[8] = {false};
    size_t at[9];
    for (size_t i = 0; i <= parts; i++) at[i] = i * n / parts;
    for (size_t i = 0; i < parts && !rc; i++)
        rc = oid_array(e, oids + at[i], at[i + 1] - at[i], &a[i], &q[i]);
    /* the helpers' parts, then the session's, before reading any answer */
    TRIP();
    for (size_t i = 1; i < parts && !rc; i++)
        sent[i] = PQsendQueryPrepared(s->help[i - 1].conn, ost__pg_ps_name[PS_GET_MANY], q[i].n,
                                      q[i].v, q[i].l, q[i].f, 1);
    bool main_sent = !rc && PQsendQueryPrepared(s->conn, ost__pg_ps_name[PS_GET_MANY], q[0].n,
                                                q[0].v, q[0].l, q[0].f, 1);
    if (!rc && !main_sent) {
        char cause[240];
        ost__pg_cause(s->conn, NULL, cause, sizeof cause);
        rc = ost__pg_fail(e, OST_EIO, "%s: reading records: %s", e->shown, cause);
    }
    if (main_sent) {
        PGresult *r, *rows = NULL;
        while ((r = PQgetResult(s->conn))) {
            if (!rows && PQresultStatus(r) == PGRES_TUPLES_OK) {
                rows = r;
            } else {
                if (!rows && !rc) {
                    char cause[240];
                    ost__pg_cause(s->conn, r, cause, sizeof cause);
                    rc = ost__pg_fail(e, ost__pg_code(s->conn, r), "%s: reading records: %s",
                                      e->shown, cause);
                }
                PQclear(r);
            }
        }
        if (rows && !rc) rc = rows_out(s, rows, fn, ud);
        else PQclear(rows);
    }
    /* the helpers' answers, every one read whatever happened before */
    bool failed = false;
    uint64_t *redo = NULL;
    size_t nredo = 0;
    for (size_t i = 1; i < parts; i++) {
        PGresult *r, *rows = NULL;
        if (sent[i])
            while ((r = PQgetResult(s->help[i - 1].conn))) {
                if (!rows && PQresultStatus(r) == PGRES_TUPLES_OK) rows = r;
                else PQclear(r);
            }
        size_t k = at[i + 1] - at[i];
        if (!rows) failed = true;
        if (rc || (!redo && !(redo = malloc(n * sizeof *redo)))) {
            PQclear(rows);
            if (!rc) rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
            continue;
        }
        if (!rows) { /* the whole part again */
            memcpy(redo + nredo, oids + at[i], k * sizeof *redo);
            nredo += k;
            continue;
        }
        if ((rc = ost__pg_res_check(e, rows, "reading records", ost__pg_ps_shape[PS_GET_MANY]))) {
            PQclear(rows);
            continue;
        }
        if ((rc = ost__pg_keep(s, rows))) continue;
        /* the rows the snapshot holds as they are; the part's other oids
         * again (found: marked by a sorted copy) */
        uint64_t *mine = redo + nredo;
        memcpy(mine, oids + at[i], k * sizeof *mine);
        qsort(mine, k, sizeof *mine, ost__u64_cmp);
        for (int j = 0, nt = PQntuples(rows); j < nt && !rc; j++) {
            uint64_t oid = rd64(PQgetvalue(rows, j, 0));
            if (rd64(PQgetvalue(rows, j, 1)) > last) continue;
            /* found: the top bit marks it (oids stay below 2^63), and the
             * search compares without it, so the copy stays sorted */
            size_t lo = 0, hi = k;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((mine[mid] & ~FOUND) < oid) lo = mid + 1;
                else hi = mid;
            }
            if (lo == k || (mine[lo] & ~FOUND) != oid) continue; /* not asked: cannot be */
            for (size_t m = lo; m < k && (mine[m] & ~FOUND) == oid; m++) mine[m] |= FOUND;
            ost__recview v;
            fill_rec(rows, j, 1, &v);
            rc = fn(ud, oid, &v);
            OST__COUNT(pg_par_given, 1); /* tests: testctl.h */
        }
        for (size_t j = 0; j < k; j++)
            if (!(mine[j] & FOUND)) redo[nredo++] = mine[j];
    }
    if (failed) ost__pg_help_close(s, true);
    if (!rc && nredo) {
        OST__COUNT(pg_par_redone, nredo); /* tests: testctl.h */
        rc = get_many_one(s, redo, nredo, fn, ud);
    }
    free(redo);
    for (size_t i = 0; i < parts; i++) arr_free(&a[i]);
    return rc;
}

int ost__pg_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    if (!n) return 0;
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    if (s->e->par > 1 && (rc = get_many_par(s, oids, n, fn, ud)) != 1) return rc;
    return get_many_one(s, oids, n, fn, ud);
}

int ost__pg_changes(ost__sess *s, uint64_t after, uint64_t upto,
                    void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud,
                    bool *gap) {
    /* an adopted view's rows serve it without importing the view */
    bool covered = s->lazy && s->pre && after >= s->pre_from && upto <= s->pre_to;
    int rc = covered ? 0 : ost__pg_read_ready(s);
    if (rc) return rc;
    ost__snapinfo info = s->info;
    if (!s->snap && !covered && (rc = ost__pg_read_meta(s, &info))) return rc;
    if (gap) *gap = after + 1 < info.low;
    if (upto > (uint64_t)INT64_MAX) upto = (uint64_t)INT64_MAX;
    uint64_t at = after;
    if ((s->snap || covered) && s->pre && after >= s->pre_from && after < s->pre_to) {
        /* read with the snapshot's BEGIN */
        for (int i = 0, nt = PQntuples(s->pre); i < nt; i++) {
            uint64_t serial = rd64(PQgetvalue(s->pre, i, 0));
            if (serial > upto) break;
            if (serial <= after) continue;
            const char *o = PQgetvalue(s->pre, i, 1);
            int n = PQgetlength(s->pre, i, 1);
            for (int j = 0; j + 8 <= n; j += 8) fn(ud, rd64(o + j), serial);
        }
        at = s->pre_to < upto ? s->pre_to : upto;
    }
    while (at < upto) {
        params p = {0};
        p_i64(&p, at);
        p_i64(&p, upto);
        p_i64(&p, (uint64_t)PAGE_ROWS);
        PGresult *r = ost__pg_run_ps(s, PS_CHANGES, "reading the commit log", &p, &rc, NULL);
        if (!r) return rc;
        int nt = PQntuples(r);
        for (int i = 0; i < nt; i++) {
            at = rd64(PQgetvalue(r, i, 0));
            const char *o = PQgetvalue(r, i, 1);
            int n = PQgetlength(r, i, 1);
            for (int j = 0; j + 8 <= n; j += 8) fn(ud, rd64(o + j), at);
        }
        PQclear(r);
        if (nt < PAGE_ROWS) break;
    }
    return 0;
}

int ost__pg_class_get(ost__sess *s, uint32_t id, ost__classview *out) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i32(&p, id);
    PGresult *r = ost__pg_run_as(s->e, s->conn, "reading a class",
                                 "SELECT id, module, name FROM ost_classes WHERE id = $1::int", &p,
                                 &rc, NULL, "ITT");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ENOTFOUND, "%s: class id %u: no such class", s->e->shown, id);
    }
    *out = (ost__classview){id, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
                            (size_t)PQgetlength(r, 0, 1), (size_t)PQgetlength(r, 0, 2)};
    return ost__pg_keep(s, r);
}

int ost__pg_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    PGresult *r = ost__pg_run_as(s->e, s->conn, "reading the classes",
                                 "SELECT id, module, name FROM ost_classes ORDER BY id", NULL, &rc,
                                 NULL, "ITT");
    if (!r) return rc;
    if ((rc = ost__pg_keep(s, r))) return rc;
    for (int i = 0, nt = PQntuples(r); i < nt; i++) {
        ost__classview c = {rd32(PQgetvalue(r, i, 0)), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                            (size_t)PQgetlength(r, i, 1), (size_t)PQgetlength(r, i, 2)};
        if ((rc = fn(ud, &c))) return rc;
    }
    return 0;
}
