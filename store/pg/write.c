/* How a PostgreSQL package's rows reach the server (pg.h): records as
 * three array parameters a statement (records_chunk, put_records), and
 * new records or a loader's map entries streamed by COPY in PostgreSQL's
 * binary format. Used by commit.c. */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* Sets p's outcome for a failure of a statement: the code, and the
 * store's message as the package's. */
int ost__pg_pkg_fail(ost__sess *s, ost__pkg *p, int rc) {
    p->rc = rc;
    ost__fmt(p->msg, sizeof p->msg, "%s", s->e->host->errmsg(s->e->st));
    return rc;
}

/* The records of p from *i on that go in one statement (at most 20,000
 * and 64 MiB), as three array parameters; *i moves past them. 0 or
 * OST_ENOMEM. */
int ost__pg_records_chunk(ost__pkg *p, size_t *i, arr *ao, arr *ac, arr *as) {
    arr_begin(ao, OIDTYPE_INT8);
    arr_begin(ac, OIDTYPE_INT4);
    arr_begin(as, OIDTYPE_BYTEA);
    size_t bytes = 0;
    for (; *i < p->nrecs && bytes < (64u << 20) && ao->count < 20000; (*i)++) {
        ost__rec *r = &p->recs[*i];
        arr_add_i64(ao, r->oid);
        arr_add_i32(ac, r->cid);
        arr_add(as, p->bytes + r->off, r->len);
        bytes += r->len + 16;
    }
    if (arr_end(ao) || arr_end(ac) || arr_end(as)) return OST_ENOMEM;
    return 0;
}

/* Writes p's records from index i on under serial, a chunk a statement. */
int ost__pg_put_records(ost__sess *s, ost__pkg *p, size_t i, uint64_t serial) {
    arr ao = {0}, ac = {0}, as = {0};
    int rc = 0;
    while (i < p->nrecs && !rc) {
        if (ost__pg_records_chunk(p, &i, &ao, &ac, &as)) {
            rc = ost__pg_fail(s->e, OST_ENOMEM, "out of memory");
            break;
        }
        params q = {0};
        p_bytes(&q, ao.b, ao.n);
        p_bytes(&q, ac.b, ac.n);
        p_bytes(&q, as.b, as.n);
        p_i64(&q, serial);
        rc = ost__pg_run0(s->e, s->conn, "commit: writing records", UPSERT_RECORDS("$4::bigint"),
                          &q);
    }
    arr_free(&ao);
    arr_free(&ac);
    arr_free(&as);
    return rc;
}

/* ---- COPY of new records ---------------------------------------------------------------
 * A package of new objects only (the loader's batches) writes its records
 * with COPY ost_records FROM STDIN in PostgreSQL's binary format: no SQL
 * to parse and plan per row or per array, no arrays to build and unpack,
 * the pickles streamed as they are. The format: the signature, a flags
 * word and a header extension length (0); per row the field count (int16)
 * and per field its length (int32) and bytes, big-endian; -1 (int16) to
 * end. It runs in the package's transaction: a failure rolls all of it
 * back. */

typedef struct {
    PGconn *c;
    uint8_t *b;
    size_t n, cap;
    bool failed;
} copybuf;

static void cb_flush(copybuf *cb) {
    if (cb->n && !cb->failed && PQputCopyData(cb->c, (const char *)cb->b, (int)cb->n) != 1)
        cb->failed = true;
    cb->n = 0;
}

static void cb_put(copybuf *cb, const void *d, size_t n) {
    if (cb->n + n > cb->cap) cb_flush(cb);
    if (n > cb->cap) { /* a large pickle goes on its own */
        if (!cb->failed && PQputCopyData(cb->c, d, (int)n) != 1) cb->failed = true;
        return;
    }
    memcpy(cb->b + cb->n, d, n);
    cb->n += n;
}

static void cb_u16(copybuf *cb, uint16_t v) {
    uint8_t b[2];
    ost__be16(b, v);
    cb_put(cb, b, 2);
}

static void cb_u32(copybuf *cb, uint32_t v) {
    uint8_t b[4];
    ost__be32(b, v);
    cb_put(cb, b, 4);
}

static void cb_u64(copybuf *cb, uint64_t v) {
    uint8_t b[8];
    ost__be64(b, v);
    cb_put(cb, b, 8);
}

/* Runs one COPY ... FROM STDIN (FORMAT binary) of sql in the open
 * transaction: the signature and header, rows(cb, ud) writes the rows, the
 * trailer, then the server's verdict. what names it in a failure's
 * message. 0 or the failure (the store's message; *retry as ost__pg_retryable). */
static int copy_in(ost__sess *s, const char *sql, const char *what,
                   void (*rows)(copybuf *cb, void *ud), void *ud, bool *retry) {
    ost__engine *e = s->e;
    int rc = 0;
    PGresult *r = PQexec(s->conn, sql);
    if (!r || PQresultStatus(r) != PGRES_COPY_IN) {
        char cause[240];
        ost__pg_cause(s->conn, r, cause, sizeof cause);
        rc = ost__pg_code(s->conn, r);
        if (retry) *retry = ost__pg_retryable(r);
        PQclear(r);
        while ((r = PQgetResult(s->conn))) PQclear(r);
        return ost__pg_fail(e, rc ? rc : OST_EIO, "%s: commit: %s (COPY): %s", e->shown, what,
                            cause);
    }
    PQclear(r);
    copybuf cb = {s->conn, malloc(1u << 20), 0, 1u << 20, false};
    if (!cb.b) {
        PQputCopyEnd(s->conn, "out of memory");
        rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
    } else {
        static const uint8_t sig[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
        cb_put(&cb, sig, sizeof sig);
        cb_u32(&cb, 0); /* flags */
        cb_u32(&cb, 0); /* header extension */
        rows(&cb, ud);
        cb_flush(&cb);
        OST__HOOK(mid_write, ()); /* tests: testctl.h */
        cb_u16(&cb, 0xffff);
        cb_flush(&cb);
        free(cb.b);
        if (PQputCopyEnd(s->conn, cb.failed ? "sending the rows failed" : NULL) != 1)
            cb.failed = true;
    }
    /* the outcome, and nothing left over */
    bool first = true;
    while ((r = PQgetResult(s->conn))) {
        if (first && !rc) {
            ExecStatusType st = PQresultStatus(r);
            if (st != PGRES_COMMAND_OK) {
                char cause[240];
                ost__pg_cause(s->conn, r, cause, sizeof cause);
                rc = ost__pg_code(s->conn, r);
                if (retry) *retry = ost__pg_retryable(r);
                ost__pg_fail(e, rc, "%s: commit: %s (COPY): %s", e->shown, what, cause);
            }
        }
        first = false;
        PQclear(r);
    }
    if (!rc && (first || cb.failed)) {
        char cause[240];
        ost__pg_cause(s->conn, NULL, cause, sizeof cause);
        rc = ost__pg_fail(e, OST_EIO, "%s: commit: %s (COPY): %s", e->shown, what, cause);
    }
    return rc;
}

typedef struct {
    const ost__pkg *p;
    uint64_t serial;
} copy_rows_arg;

/* COPY rows of a package's records: oid, serial, class id, state. */
static void record_rows(copybuf *cb, void *ud) {
    const copy_rows_arg *a = ud;
    for (size_t i = 0; i < a->p->nrecs && !cb->failed; i++) {
        const ost__rec *rec = &a->p->recs[i];
        cb_u16(cb, 4);
        cb_u32(cb, 8);
        cb_u64(cb, rec->oid);
        cb_u32(cb, 8);
        cb_u64(cb, a->serial);
        cb_u32(cb, 4);
        cb_u32(cb, rec->cid);
        cb_u32(cb, (uint32_t)rec->len);
        cb_put(cb, a->p->bytes + rec->off, rec->len);
    }
}

/* Writes p's records under serial with one COPY. */
int ost__pg_copy_records(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry) {
    copy_rows_arg a = {p, serial};
    return copy_in(s, "COPY ost_records (oid, serial, cid, state) FROM STDIN (FORMAT binary)",
                   "writing records", record_rows, &a, retry);
}

/* ---- COPY of a loader's map entries ---------------------------------------------------
 * A loader's batch of map entries (blind puts, no serial checks) goes by
 * COPY into a temporary table of the session (emptied at each commit),
 * then one statement puts them into ost_ments: the last of the batch's
 * puts of a key wins, as one put after another would, and the count of
 * keys each map gained comes back for its record's count. A statement a
 * row took a round trip each: a million entries took 150 s. */

/* Batches with fewer entries go a statement each (the staging table and
 * the COPY cost round trips of their own). 256, a test knob (testctl.h). */
#define MENT_COPY_MIN OST__KNOB(pg_ment_copy_min)

/* COPY rows of a package's map entries: their order, map, key, value. */
static void ment_rows(copybuf *cb, void *ud) {
    const copy_rows_arg *a = ud;
    for (size_t i = 0; i < a->p->nments && !cb->failed; i++) {
        const ost__ment *me = &a->p->ments[i];
        cb_u16(cb, 4);
        cb_u32(cb, 4);
        cb_u32(cb, (uint32_t)i);
        cb_u32(cb, 8);
        cb_u64(cb, me->map);
        cb_u32(cb, (uint32_t)me->klen);
        cb_put(cb, a->p->bytes + me->koff, me->klen);
        cb_u32(cb, (uint32_t)me->vlen);
        cb_put(cb, a->p->bytes + me->voff, me->vlen);
    }
}

/* Whether p's map entries are a loader's batch that goes by COPY. */
bool ost__pg_ments_by_copy(const ost__pkg *p) {
    if (p->nments < (size_t)MENT_COPY_MIN) return false;
    for (size_t i = 0; i < p->nments; i++)
        if (!(p->ments[i].flags & OST__MENT_BLIND)) return false;
    return true;
}

/* Writes p's map entries (all blind puts) under serial and adds to each
 * map's count the keys it gained. */
int ost__pg_copy_ments(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry) {
    ost__engine *e = s->e;
    /* emptied here too: packages of one commit group share a transaction */
    int rc = ost__pg_exec_simple(
        e, s->conn, "commit: map entries (staging table)",
        "CREATE TEMPORARY TABLE IF NOT EXISTS ost_ments_load (seq integer NOT NULL, "
        "map bigint NOT NULL, key bytea NOT NULL, value bytea NOT NULL) ON COMMIT "
        "DELETE ROWS; TRUNCATE ost_ments_load");
    copy_rows_arg a = {p, serial};
    if (!rc)
        rc = copy_in(s, "COPY ost_ments_load (seq, map, key, value) FROM STDIN (FORMAT binary)",
                     "writing map entries", ment_rows, &a, retry);
    if (rc) return rc;
    params q = {0};
    p_i64(&q, serial);
    PGresult *r = ost__pg_run_as(e, s->conn, "commit: writing map entries",
                      "WITH src AS (SELECT DISTINCT ON (map, key) map, key, value FROM "
                      "ost_ments_load ORDER BY map, key, seq DESC), ins AS (INSERT INTO ost_ments "
                      "(map, key, serial, value) SELECT map, key, $1::bigint, value FROM src ON "
                      "CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial, value = "
                      "EXCLUDED.value RETURNING map, (xmax = 0) AS added) SELECT map, count(*) "
                      "FILTER (WHERE added) FROM ins GROUP BY map ORDER BY map",
                      &q, &rc, retry, "LL");
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++)
    {
        uint64_t map = rd64(PQgetvalue(r, i, 0));
        int64_t delta = (int64_t)rd64(PQgetvalue(r, i, 1));
        rc = s->e->host->count_fail(p, map, delta, false,
                                    ost__pg_map_count_add(s, map, delta, serial, false));
    }
    PQclear(r);
    return rc;
}
