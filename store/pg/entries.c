/* The PostgreSQL engine's map entries (pg.h, store/entries.h): reads and
 * writes of ost_ments and ost_mapdels in the session's transaction, and
 * the entry cursor, which fetches a page of entries a round trip. */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- map entries ------------------------------------------------------------------- */

struct ost__ecur {
    ost__sess *s;
    uint64_t map;
    PGresult *page; /* rows in the order of the fetch */
    int row, nrows;
    bool page_rev; /* the page was fetched backwards */
    bool full;     /* the page had as many rows as asked: there may be more */
    bool on;
    bool keys_only;  /* fetch pages without values (ost__pg_ecur_keys_only) */
    bool page_keys;  /* the page in hand was fetched so */
    uint8_t *kbuf; /* the current key, while a new page is fetched */
    size_t kcap;
};

int ost__pg_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *out) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r = ost__pg_run_ps(s, PS_ENT_GET, "reading a map entry", &p, &rc, NULL);
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ENOTFOUND;
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    return ost__pg_keep(s, r);
}

/* The entry of (map, key) as ost__pg_ent_get, and in the same round trip the
 * record of the object its value refers to when the value is a lone
 * reference in the form ostore writes: *ref gets its oid (UINT64_MAX:
 * none found) and *rec the record, kept until the snapshot ends. */
int ost__pg_ent_get_ref(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        ost__entry *out, uint64_t *ref, ost__recview *rec) {
    *ref = UINT64_MAX;
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r = ost__pg_run_ps(s, PS_ENT_REF, "reading a map entry", &p, &rc, NULL);
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ENOTFOUND;
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    if (!PQgetisnull(r, 0, 2) && !PQgetisnull(r, 0, 3) && !PQgetisnull(r, 0, 4) &&
        !PQgetisnull(r, 0, 5)) {
        *ref = rd64(PQgetvalue(r, 0, 2));
        fill_rec(r, 0, 3, rec);
    }
    return ost__pg_keep(s, r);
}

/* The entry and, when it is absent, its deletion record, in one round
 * trip (one row always: both sides of the outer joins may be NULL). Called
 * inside commit (ost__maps_apply) after the package took the meta row's
 * lock with its serial, which every package holds until it commits: a
 * package that deleted the key has committed before this statement
 * begins, and a READ COMMITTED statement sees every commit before it
 * (GetTransactionSnapshot in src/backend/utils/time/snapmgr.c takes a new
 * snapshot per statement unless IsolationUsesXactSnapshot()), as for the
 * entries themselves. tests/test_maps.c's every-history test runs on a
 * server as maps-pg. */
int ost__pg_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        ost__entry *out, uint64_t *deleted) {
    *deleted = 0;
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r =
        ost__pg_run(s->e, s->conn, "reading a map entry",
                    "SELECT m.serial, m.value, d.serial FROM (SELECT $1::bigint AS map, "
                    "$2::bytea AS key) q LEFT JOIN ost_ments m ON m.map = q.map AND m.key = q.key "
                    "LEFT JOIN ost_mapdels d ON d.map = q.map AND d.key = q.key",
                    &p, &rc, NULL);
    if (!r) return rc;
    if (PQntuples(r) != 1 || PQnfields(r) != 3) {
        int rows = PQntuples(r);
        PQclear(r);
        return ost__pg_fail(s->e, OST_ECORRUPT, "%s: reading a map entry: %d rows", s->e->shown,
                            rows);
    }
    if (PQgetisnull(r, 0, 0)) {
        if (!PQgetisnull(r, 0, 2)) {
            if (PQgetlength(r, 0, 2) != 8) {
                PQclear(r);
                return ost__pg_fail(s->e, OST_ECORRUPT,
                                    "%s: map %llu: a deletion record's serial is not a bigint",
                                    s->e->shown, (unsigned long long)map);
            }
            *deleted = rd64(PQgetvalue(r, 0, 2));
        }
        PQclear(r);
        return OST_ENOTFOUND;
    }
    if (PQgetlength(r, 0, 0) != 8) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ECORRUPT, "%s: map %llu: an entry's serial is not a bigint",
                            s->e->shown, (unsigned long long)map);
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    return ost__pg_keep(s, r);
}

int ost__pg_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, uint64_t serial,
                    const void *data, size_t len, bool *existed, bool *append) {
    (void)append; /* a hint LMDB uses; PostgreSQL's B-tree needs none */
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    p_i64(&p, serial);
    p_bytes(&p, data, len);
    /* xmax is 0 in a row the statement inserted, not in one it updated */
    PGresult *r =
        ost__pg_run_as(s->e, s->conn, "writing a map entry",
                       "INSERT INTO ost_ments VALUES ($1::bigint, $2::bytea, $3::bigint, "
                       "$4::bytea) ON CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial, "
                       "value = EXCLUDED.value RETURNING (xmax = 0)",
                       &p, &rc, NULL, "Z");
    if (!r) return rc;
    if (existed) *existed = PQntuples(r) == 1 && !PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    return 0;
}

/* Removes the entry and records its deletion by commit serial in one
 * statement: the count it reports is the INSERT's, one row when the
 * DELETE removed one. */
int ost__pg_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                    uint64_t serial) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    p_i64(&p, serial);
    PGresult *r =
        ost__pg_run(s->e, s->conn, "removing a map entry",
                    "WITH d AS (DELETE FROM ost_ments WHERE map = $1::bigint AND key = $2::bytea "
                    "RETURNING map, key) INSERT INTO ost_mapdels SELECT map, key, $3::bigint FROM "
                    "d ON CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial",
                    &p, &rc, NULL);
    if (!r) return rc;
    rc = strcmp(PQcmdTuples(r), "0") ? 0 : OST_ENOTFOUND;
    PQclear(r);
    return rc;
}

int ost__pg_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    PGresult *r = ost__pg_run(s->e, s->conn, "removing a map's entries",
                              "DELETE FROM ost_ments WHERE map = $1::bigint", &p, &rc, NULL);
    if (!r) return rc;
    if (n) *n = strtoull(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return ost__pg_run0(s->e, s->conn, "removing a map's deletion records",
                        "DELETE FROM ost_mapdels WHERE map = $1::bigint", &p);
}

/* The maps with entries, in oid order, one index probe each; fn's 1
 * removes the map's entries (entries.h). */
int ost__pg_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    uint64_t at = 0;
    bool first = true;
    for (;;) {
        params p = {0};
        p_i64(&p, at);
        PGresult *r = ost__pg_run_as(
            s->e, s->conn, "listing maps",
            first ? "SELECT map FROM ost_ments WHERE map >= $1::bigint ORDER BY map LIMIT 1"
                  : "SELECT map FROM ost_ments WHERE map > $1::bigint ORDER BY map LIMIT 1",
            &p, &rc, NULL, "L");
        if (!r) return rc;
        if (!PQntuples(r)) {
            PQclear(r);
            return 0;
        }
        at = rd64(PQgetvalue(r, 0, 0));
        first = false;
        PQclear(r);
        int frc = fn(ud, at);
        if (frc < 0) return frc;
        if (frc == 1 && (rc = ost__pg_ent_drop_map(s, at, NULL))) return rc;
        if (frc > 1) return frc;
    }
}

/* Reads the record of map in the commit's transaction, locked. */
int ost__pg_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                          bool counter) {
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    PGresult *r = ost__pg_run_as(s->e, s->conn, "reading a map's record",
                                 "SELECT state FROM ost_records WHERE oid = $1::bigint FOR UPDATE",
                                 &p, &rc, NULL, "B");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ECONFLICT;
    }
    size_t n = (size_t)PQgetlength(r, 0, 0);
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ENOMEM, "out of memory");
    }
    memcpy(copy, PQgetvalue(r, 0, 0), n);
    PQclear(r);
    rc = ost__record_count_add(copy, n, delta, counter);
    if (rc) {
        free(copy);
        return rc;
    }
    params q = {0};
    p_i64(&q, map);
    p_i64(&q, serial);
    p_bytes(&q, copy, n);
    rc = ost__pg_run0(
        s->e, s->conn, "updating a map's record",
        "UPDATE ost_records SET serial = $2::bigint, state = $3::bytea WHERE oid = $1::bigint", &q);
    free(copy);
    return rc;
}

/* ---- the entry cursor -------------------------------------------------------------- */

int ost__pg_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out) {
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return ost__pg_fail(s->e, OST_ENOMEM, "out of memory");
    ec->s = s;
    ec->map = map;
    *out = ec;
    return 0;
}

/* Fetches a page of the map's entries from key (NULL: the map's start or
 * end) in the direction asked, strictly past key when strict: one
 * prepared statement (PS_EC_*), with the values unless the cursor walks
 * keys only (ost__pg_ecur_keys_only). */
static int ecur_fetch(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse, bool strict) {
    ost__sess *s = ec->s;
    int rc = ost__pg_read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, ec->map);
    p_i64(&p, (uint64_t)PAGE_ROWS);
    uint8_t vals = !ec->keys_only;
    p_bytes(&p, &vals, 1); /* bool's binary form: one byte */
    int which;
    if (!key) {
        which = reverse ? PS_EC_LAST : PS_EC_FIRST;
    } else {
        p_bytes(&p, key, klen);
        which = reverse ? (strict ? PS_EC_LT : PS_EC_LE) : (strict ? PS_EC_GT : PS_EC_GE);
    }
    PGresult *r = ost__pg_run_ps(s, which, "reading map entries", &p, &rc, NULL);
    if (!r) {
        ec->on = false;
        return rc;
    }
    PQclear(ec->page);
    ec->page = r;
    ec->nrows = PQntuples(r);
    ec->row = 0;
    ec->page_rev = reverse;
    ec->page_keys = ec->keys_only;
    ec->full = ec->nrows >= PAGE_ROWS;
    ec->on = ec->nrows > 0;
    return ec->on ? 0 : OST_ENOTFOUND;
}

int ost__pg_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    return ecur_fetch(ec, key, klen, reverse, false);
}

int ost__pg_ecur_step(ost__ecur *ec, bool reverse) {
    if (!ec->on) return OST_ENOTFOUND;
    if (reverse == ec->page_rev) {
        if (ec->row + 1 < ec->nrows) {
            ec->row++;
            return 0;
        }
        if (!ec->full) {
            ec->on = false;
            return OST_ENOTFOUND;
        }
    } else if (ec->row > 0) {
        ec->row--; /* back over the page */
        return 0;
    }
    /* a new page from the current key on */
    size_t kl = (size_t)PQgetlength(ec->page, ec->row, 0);
    if (ost__reserve((void **)&ec->kbuf, &ec->kcap, kl ? kl : 1, 1, 64))
        return ost__pg_fail(ec->s->e, OST_ENOMEM, "out of memory");
    memcpy(ec->kbuf, PQgetvalue(ec->page, ec->row, 0), kl);
    return ecur_fetch(ec, ec->kbuf, kl, reverse, true);
}

int ost__pg_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    if (!ec->on) return OST_ENOTFOUND;
    *key = (const uint8_t *)PQgetvalue(ec->page, ec->row, 0);
    *klen = (size_t)PQgetlength(ec->page, ec->row, 0);
    e->serial = rd64(PQgetvalue(ec->page, ec->row, 1));
    e->data = (const uint8_t *)PQgetvalue(ec->page, ec->row, 2);
    e->len = (size_t)PQgetlength(ec->page, ec->row, 2);
    return 0;
}

/* The entries of the page in hand from the current one on, in the
 * direction asked, without a round trip: fn for each (it stops the walk
 * by returning non-zero). Returns how many fn was given. */
int ost__pg_ecur_ahead(ost__ecur *ec, bool reverse,
                       int (*fn)(void *ud, const uint8_t *key, size_t klen, const ost__entry *e),
                       void *ud) {
    if (!ec->on) return 0;
    int n = 0, step = reverse == ec->page_rev ? 1 : -1;
    for (int i = ec->row; i >= 0 && i < ec->nrows; i += step) {
        ost__entry e = {rd64(PQgetvalue(ec->page, i, 1)),
                        (const uint8_t *)PQgetvalue(ec->page, i, 2),
                        (size_t)PQgetlength(ec->page, i, 2)};
        n++;
        if (fn(ud, (const uint8_t *)PQgetvalue(ec->page, i, 0),
               (size_t)PQgetlength(ec->page, i, 0), &e))
            break;
    }
    return n;
}

/* Whether the cursor's next pages carry values (see engine.h); true when
 * the page in hand was fetched without them. */
bool ost__pg_ecur_keys_only(ost__ecur *ec, bool on) {
    ec->keys_only = on;
    return ec->on && ec->page_keys;
}

void ost__pg_ecur_close(ost__ecur *ec) {
    if (!ec) return;
    PQclear(ec->page);
    free(ec->kbuf);
    free(ec);
}
