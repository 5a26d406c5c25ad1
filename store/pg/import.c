/* The PostgreSQL engine's bulk import (ostore import and copy) and drop
 * (pg.h). */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- bulk import -------------------------------------------------------------------- */

/* An import: one transaction on a connection of its own. Classes are
 * INSERTed; records and entries stream through COPY ... FROM STDIN in
 * PostgreSQL's binary copy format (a header, per row the field count and
 * each field as a length and its bytes, a trailer), buffered here and sent
 * in chunks. A class after records ends the COPY and a later record starts
 * another. */
enum { IMP_IDLE, IMP_RECORDS, IMP_ENTRIES };

#define IMP_CHUNK ((size_t)256 << 10)

struct ost__import {
    ost__engine *e;
    PGconn *c;
    int mode;         /* IMP_*: which COPY is open */
    uint8_t *b;       /* rows not sent yet */
    size_t n, cap;
    bool any_rec, any_ent;
    uint64_t last_oid, last_map;
    uint8_t last_key[OST_MAP_KEY_MAX];
    size_t last_klen;
};

static void imp_free(ost__import *im) {
    if (!im) return;
    if (im->c) PQfinish(im->c);
    free(im->b);
    free(im);
}

/* Rolls back, frees im and returns code (the message is set). */
static int imp_fail(ost__import *im, int code) {
    if (im->c && PQstatus(im->c) == CONNECTION_OK) {
        if (im->mode != IMP_IDLE) {
            PQputCopyEnd(im->c, "import aborted");
            PGresult *r;
            while ((r = PQgetResult(im->c))) PQclear(r);
        }
        PQclear(PQexec(im->c, "ROLLBACK"));
    }
    imp_free(im);
    return code;
}

static int imp_oom(ost__import *im) {
    return ost__pg_fail(im->e, OST_ENOMEM, "%s: import: out of memory", im->e->shown);
}

static int imp_put(ost__import *im, const void *d, size_t n) {
    if (ost__reserve((void **)&im->b, &im->cap, im->n + n, 1, IMP_CHUNK + 1024)) return imp_oom(im);
    if (n) memcpy(im->b + im->n, d, n);
    im->n += n;
    return 0;
}

static int imp_put16(ost__import *im, int v) {
    uint8_t b[2];
    ost__be16(b, (uint16_t)v);
    return imp_put(im, b, 2);
}

static int imp_put_i64(ost__import *im, uint64_t v) {
    uint8_t b[12];
    ost__be32(b, 8);
    ost__be64(b + 4, v);
    return imp_put(im, b, 12);
}

static int imp_put_bytes(ost__import *im, const void *d, size_t n) {
    if (n > 0x3fffffff)
        return ost__pg_fail(im->e, OST_ELIMIT, "%s: import: a value of %zu bytes (PostgreSQL "
                            "holds at most 1 GiB in a field)", im->e->shown, n);
    uint8_t b[4];
    ost__be32(b, (uint32_t)n);
    int rc = imp_put(im, b, 4);
    return rc ? rc : imp_put(im, d, n);
}

/* The server's failure during a COPY, as the store's message. */
static int imp_copy_fail(ost__import *im, const char *what) {
    char cause[240];
    PGresult *r = PQgetResult(im->c);
    ost__pg_cause(im->c, r, cause, sizeof cause);
    int code = ost__pg_code(im->c, r);
    PQclear(r);
    return ost__pg_fail(im->e, code, "%s: import: %s: %s", im->e->shown, what, cause);
}

/* Sends the buffered rows. */
static int imp_flush(ost__import *im) {
    if (!im->n) return 0;
    if (PQputCopyData(im->c, (const char *)im->b, (int)im->n) != 1)
        return imp_copy_fail(im, im->mode == IMP_RECORDS ? "copying records" : "copying entries");
    im->n = 0;
    return 0;
}

/* Ends the open COPY, if any: its trailer, then the server's verdict. */
static int imp_idle(ost__import *im) {
    if (im->mode == IMP_IDLE) return 0;
    const char *what = im->mode == IMP_RECORDS ? "copying records" : "copying entries";
    int rc = imp_put16(im, -1);
    if (!rc) rc = imp_flush(im);
    if (rc) return rc;
    im->mode = IMP_IDLE;
    if (PQputCopyEnd(im->c, NULL) != 1) return imp_copy_fail(im, what);
    PGresult *r = PQgetResult(im->c);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
        char cause[240];
        ost__pg_cause(im->c, r, cause, sizeof cause);
        int code = ost__pg_code(im->c, r);
        PQclear(r);
        while ((r = PQgetResult(im->c))) PQclear(r);
        return ost__pg_fail(im->e, code, "%s: import: %s: %s", im->e->shown, what, cause);
    }
    PQclear(r);
    while ((r = PQgetResult(im->c))) PQclear(r);
    return 0;
}

/* Starts the COPY of mode (ending another one first). */
static int imp_mode(ost__import *im, int mode) {
    if (im->mode == mode) return 0;
    int rc = imp_idle(im);
    if (rc) return rc;
    PGresult *r = PQexec(im->c, mode == IMP_RECORDS
                                    ? "COPY ost_records (oid, serial, cid, state) FROM STDIN "
                                      "(FORMAT binary)"
                                    : "COPY ost_ments (map, key, serial, value) FROM STDIN "
                                      "(FORMAT binary)");
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        char cause[240];
        ost__pg_cause(im->c, r, cause, sizeof cause);
        int code = ost__pg_code(im->c, r);
        PQclear(r);
        return ost__pg_fail(im->e, code, "%s: import: starting a COPY: %s", im->e->shown, cause);
    }
    PQclear(r);
    im->mode = mode;
    static const uint8_t head[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
    return imp_put(im, head, sizeof head); /* signature, flags 0, no extension */
}

/* Checks, in c's open transaction with the tables locked, that the store
 * is new: at most the root that ost_store_open wrote (commit 1) and no
 * commit since, not even of the root alone, no oid handed out, no
 * entries (what LMDB's import.c asks too). 0, or
 * OST_EEXIST with what it holds and then need (what needs it new), or the
 * failure to read. */
static int check_new(ost__engine *e, PGconn *c, const char *need) {
    int rc = 0;
    PGresult *r =
        ost__pg_run_as(e, c, "reading meta",
                       "SELECT (SELECT count(*) FROM ost_records)::bigint, (SELECT count(*) FROM "
                       "ost_records WHERE oid <> 0)::bigint, (SELECT count(*) FROM "
                       "ost_ments)::bigint, next_oid, last_serial FROM ost_meta WHERE id = 1",
                       NULL, &rc, NULL, "lllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t nrec = col64(r, 0), others = col64(r, 1), nent = col64(r, 2), next_oid = col64(r, 3),
             last = col64(r, 4);
    PQclear(r);
    if (others || nent || next_oid != 1 || last > 1)
        return ost__pg_fail(e, OST_EEXIST, "%s: not a new store (%llu objects, last commit %llu); %s",
                            e->shown, (unsigned long long)nrec, (unsigned long long)last, need);
    return 0;
}

int ost__pg_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out) {
    (void)size_hint; /* the server grows its files itself */
    *out = NULL;
    if (e->read_only) return ost__pg_fail(e, OST_EREADONLY, "%s: opened read-only", e->shown);
    ost__import *im = calloc(1, sizeof *im);
    if (!im) return ost__pg_fail(e, OST_ENOMEM, "%s: out of memory", e->shown);
    im->e = e;
    ost__pg_views_end(e); /* their snapshots would hold the tables against TRUNCATE */
    int rc = ost__pg_connect(e, &im->c);
    if (rc) {
        imp_free(im);
        return rc;
    }
    /* other writers wait until the import ends; readers go on */
    rc = ost__pg_run0(e, im->c, "import: begin", "BEGIN", NULL);
    if (!rc)
        rc = ost__pg_run0(e, im->c, "import: locking the tables",
                          "LOCK TABLE ost_meta, ost_records, ost_classes, ost_txlog, ost_ments IN "
                          "EXCLUSIVE MODE",
                          NULL);
    if (rc) return imp_fail(im, rc);
    rc = check_new(e, im->c, "import needs a new or empty store");
    if (rc) return imp_fail(im, rc);
    rc = ost__pg_run0(e, im->c, "import: emptying the store",
                      "TRUNCATE ost_records, ost_classes, ost_txlog, ost_ments", NULL);
    if (rc) return imp_fail(im, rc);
    *out = im;
    return 0;
}

int ost__pg_imp_class(ost__import *im, uint32_t id, const char *module, size_t mlen,
                      const char *name, size_t nlen) {
    int rc = imp_idle(im);
    if (rc) return rc;
    params p = {0};
    p_i32(&p, id);
    p_bytes(&p, module, mlen);
    p_bytes(&p, name, nlen);
    PGresult *r =
        ost__pg_run(im->e, im->c, "import: adding a class",
                    "INSERT INTO ost_classes VALUES ($1::int, $2::text, $3::text) ON CONFLICT DO "
                    "NOTHING",
                    &p, &rc, NULL);
    if (!r) return rc;
    bool added = !strcmp(PQcmdTuples(r), "1");
    PQclear(r);
    if (!added)
        return ost__pg_fail(im->e, OST_EEXIST, "class id %u (%.*s.%.*s) is listed twice", id,
                            (int)mlen, module, (int)nlen, name);
    return 0;
}

int ost__pg_imp_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                       const void *pickle, size_t len) {
    ost__engine *e = im->e;
    if (im->any_rec && oid <= im->last_oid)
        return ost__pg_fail(e, OST_EINVAL, "oid %llu: oids must ascend, each once",
                            (unsigned long long)oid);
    if (oid >= OST__OID_LIMIT || serial >= OST__SERIAL_LIMIT)
        return ost__pg_fail(e, OST_EINVAL, "oid %llu: its %s is past the store's limit",
                            (unsigned long long)oid, oid >= OST__OID_LIMIT ? "oid" : "serial");
    int rc = imp_mode(im, IMP_RECORDS);
    if (!rc) rc = imp_put16(im, 4);
    if (!rc) rc = imp_put_i64(im, oid);
    if (!rc) rc = imp_put_i64(im, serial);
    if (!rc) {
        uint8_t b[8];
        ost__be32(b, 4);
        ost__be32(b + 4, cid);
        rc = imp_put(im, b, 8);
    }
    if (!rc) rc = imp_put_bytes(im, pickle, len);
    if (!rc && im->n >= IMP_CHUNK) rc = imp_flush(im);
    if (rc) return rc;
    im->any_rec = true;
    im->last_oid = oid;
    return 0;
}

int ost__pg_imp_entry(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                      uint64_t serial, const void *value, size_t vlen) {
    ost__engine *e = im->e;
    if (im->any_ent) {
        int c = map < im->last_map ? -1 : map > im->last_map;
        if (!c) {
            size_t m = klen < im->last_klen ? klen : im->last_klen;
            c = m ? memcmp(key, im->last_key, m) : 0;
            if (!c) c = klen < im->last_klen ? -1 : klen > im->last_klen;
        }
        if (c <= 0)
            return ost__pg_fail(e, OST_EINVAL,
                                "map %llu: entries must ascend (by map oid, then by key), each once",
                                (unsigned long long)map);
    }
    if (map >= OST__OID_LIMIT || serial >= OST__SERIAL_LIMIT)
        return ost__pg_fail(e, OST_EINVAL, "map %llu: its %s is past the store's limit",
                            (unsigned long long)map, map >= OST__OID_LIMIT ? "oid" : "serial");
    int rc = imp_mode(im, IMP_ENTRIES);
    if (!rc) rc = imp_put16(im, 4);
    if (!rc) rc = imp_put_i64(im, map);
    if (!rc) rc = imp_put_bytes(im, key, klen);
    if (!rc) rc = imp_put_i64(im, serial);
    if (!rc) rc = imp_put_bytes(im, value, vlen);
    if (!rc && im->n >= IMP_CHUNK) rc = imp_flush(im);
    if (rc) return rc;
    im->any_ent = true;
    im->last_map = map;
    if (klen) memcpy(im->last_key, key, klen);
    im->last_klen = klen;
    return 0;
}

/* The maps' records, checked once all entries are in (LMDB checks each map
 * as its first entry comes; a COPY cannot be asked meanwhile): each map
 * with entries has a record of class ostore.maps.OrderedMap whose entries
 * all have values, or OrderedSet whose entries have none. */
static int imp_check_maps(ost__import *im) {
    int rc = 0;
    PGresult *r = ost__pg_run_as(im->e, im->c, "import: checking the maps",
                      "WITH mm AS (SELECT map, bool_or(octet_length(value) > 0) AS hasv, "
                      "bool_and(octet_length(value) > 0) AS allv FROM ost_ments GROUP BY map) "
                      "SELECT mm.map, c.name, mm.hasv, mm.allv FROM mm LEFT JOIN ost_records r ON "
                      "r.oid = mm.map LEFT JOIN ost_classes c ON c.id = r.cid WHERE c.module IS "
                      "DISTINCT FROM 'ostore.maps' OR c.name NOT IN ('OrderedMap', 'OrderedSet') "
                      "OR (c.name = 'OrderedMap' AND NOT mm.allv) OR (c.name = 'OrderedSet' AND "
                      "mm.hasv) ORDER BY mm.map LIMIT 1",
                      NULL, &rc, NULL, "Ltzz");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return 0;
    }
    unsigned long long map = rd64(PQgetvalue(r, 0, 0));
    const char *name = PQgetisnull(r, 0, 1) ? "" : PQgetvalue(r, 0, 1);
    if (!strcmp(name, "OrderedSet"))
        ost__pg_fail(im->e, OST_EINVAL, "map %llu: an entry of a set has a value", map);
    else if (!strcmp(name, "OrderedMap"))
        ost__pg_fail(im->e, OST_EINVAL, "map %llu: an entry without a value pickle", map);
    else
        ost__pg_fail(im->e, OST_EINVAL,
                     "entries under oid %llu, which has no record of class "
                     "ostore.maps.OrderedMap or OrderedSet",
                     map);
    PQclear(r);
    return OST_EINVAL;
}

int ost__pg_imp_commit(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                       uint64_t next_class) {
    (void)format; /* what is imported has what the current format has */
    int rc = imp_idle(im);
    if (!rc && im->any_ent) rc = imp_check_maps(im);
    if (rc) return imp_fail(im, rc);
    params p = {0};
    p_i64(&p, OST_STORE_FORMAT);
    p_i64(&p, next_oid);
    p_i64(&p, last_serial);
    p_i64(&p, next_class);
    p_i64(&p, last_serial + 1);
    rc = ost__pg_run0(
        im->e, im->c, "import: writing meta",
        "UPDATE ost_meta SET format = $1::bigint, next_oid = $2::bigint, last_serial = "
        "$3::bigint, next_class = $4::bigint, low = $5::bigint WHERE id = 1",
        &p);
    /* the planner's statistics: without them, right after a bulk load, it
     * may sort a whole table for each page of a scan or an entry cursor */
    if (!rc)
        rc = ost__pg_run0(im->e, im->c, "import: analyze",
                          "ANALYZE ost_records, ost_classes, ost_ments", NULL);
    if (!rc) rc = ost__pg_run0(im->e, im->c, "import: commit", "COMMIT", NULL);
    if (rc) return imp_fail(im, rc);
    imp_free(im);
    return 0;
}

void ost__pg_imp_abort(ost__import *im) {
    if (im) imp_fail(im, 0);
}

/* Drops the store's tables (if it is new, when only_new), on a connection
 * of its own: the schema lock and the tables locked against every other
 * session first (a session of this process that holds a snapshot makes
 * the lock time out rather than wait for ever). */
int ost__pg_drop(ost__engine *e, bool only_new) {
    ost__pg_views_end(e); /* their snapshots would hold the tables */
    PGconn *c;
    int rc = ost__pg_connect(e, &c);
    if (rc) return rc;
    rc = ost__pg_run0(e, c, "removing the store: begin", "BEGIN", NULL);
    if (!rc)
        rc = ost__pg_exec_simple(
            e, c, "removing the store: locking the tables",
            "SET LOCAL lock_timeout = '10s'; SELECT pg_advisory_xact_lock(" SCHEMA_LOCK
            "); LOCK TABLE ost_meta, ost_records, ost_classes, ost_txlog, ost_ments "
            "IN ACCESS EXCLUSIVE MODE");
    if (!rc && only_new) rc = check_new(e, c, "only a new store is removed");
    /* missing in a store made before deletion records and opened only
     * read-only since (ost__pg_mapdels_ensure) */
    if (!rc)
        rc = ost__pg_run0(e, c, "removing the store: deletion records",
                          "DROP TABLE IF EXISTS ost_mapdels", NULL);
    if (!rc)
        rc = ost__pg_run0(e, c, "removing the store",
                          "DROP TABLE ost_ments, ost_txlog, ost_classes, ost_records, ost_meta",
                          NULL);
    if (!rc) rc = ost__pg_run0(e, c, "removing the store: commit", "COMMIT", NULL);
    if (rc && PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    PQfinish(c);
    return rc;
}
