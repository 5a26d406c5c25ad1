/* The entries of maps on LMDB (store/entries.h): the named database
 * "mapents", keyed by map oid (8 bytes big-endian) + encoded key, each
 * value an 8-byte little-endian serial followed by the value pickle. */
#include <stdlib.h>
#include <string.h>

#include "entries.h"
#include "store_internal.h"

#define KEYMAX (8 + OST_MAP_KEY_MAX)

/* The LMDB key of (map, key) in buf. */
static MDB_val full_key(uint8_t *buf, uint64_t map, const uint8_t *key, size_t klen) {
    ost__be64(buf, map);
    if (klen) memcpy(buf + 8, key, klen);
    return (MDB_val){8 + klen, buf};
}

static int to_entry(const MDB_val *v, ost__entry *e) {
    if (v->mv_size < 8) return OST_ECORRUPT;
    e->serial = ost__rd_le64(v->mv_data);
    e->data = (const uint8_t *)v->mv_data + 8;
    e->len = v->mv_size - 8;
    return 0;
}

int ost__ent_get(ost_store *st, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 ost__entry *e) {
    if (st->no_ments) return OST_ENOTFOUND;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v;
    int rc = mdb_get(txn, st->ments, &k, &v);
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return rc;
    return to_entry(&v, e);
}

int ost__ent_put(ost_store *st, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 uint64_t serial, const void *data, size_t len, bool *existed, bool *append) {
    if (st->no_ments) return OST_EREADONLY;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v = {8 + len, NULL};
    int rc = MDB_KEYEXIST;
    if (append && *append) {
        rc = mdb_put(txn, st->ments, &k, &v, MDB_RESERVE | MDB_APPEND);
        if (rc == MDB_KEYEXIST) {
            *append = false; /* not beyond the last key: plain puts from now */
            v = (MDB_val){8 + len, NULL};
        } else if (rc) {
            return rc;
        } else if (existed) {
            *existed = false;
        }
    }
    if (rc == MDB_KEYEXIST) {
        /* one descent for a new key: NOOVERWRITE says whether it existed */
        rc = mdb_put(txn, st->ments, &k, &v, MDB_RESERVE | (existed ? MDB_NOOVERWRITE : 0));
        if (existed) *existed = rc == MDB_KEYEXIST;
        if (rc == MDB_KEYEXIST) {
            v = (MDB_val){8 + len, NULL};
            rc = mdb_put(txn, st->ments, &k, &v, MDB_RESERVE);
        }
        if (rc) return rc;
    }
    ost__le64(v.mv_data, serial);
    if (len) memcpy((uint8_t *)v.mv_data + 8, data, len);
    return 0;
}

int ost__ent_del(ost_store *st, void *txn, uint64_t map, const uint8_t *key, size_t klen) {
    if (st->no_ments) return OST_ENOTFOUND;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen);
    int rc = mdb_del(txn, st->ments, &k, NULL);
    return rc == MDB_NOTFOUND ? OST_ENOTFOUND : rc;
}

int ost__ent_drop_map(ost_store *st, void *txn, uint64_t map, uint64_t *n) {
    if (st->no_ments) return OST_EREADONLY;
    if (n) *n = 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, st->ments, &cur);
    if (rc) return rc;
    uint8_t buf[8];
    MDB_val k = full_key(buf, map, NULL, 0), v;
    /* after deleting the database's last key LMDB's cursor has no current
     * entry (EINVAL): each delete seeks again */
    for (;;) {
        k = full_key(buf, map, NULL, 0);
        if ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE))) break;
        if (k.mv_size < 8 || ost__rd_be64(k.mv_data) != map) break;
        if ((rc = mdb_cursor_del(cur, 0))) break;
        if (n) (*n)++;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND || rc == 0 ? 0 : rc;
}

/* ---- cursors ------------------------------------------------------------- */

struct ost__ecur {
    ost_store *st;
    MDB_cursor *cur;
    uint64_t map;
    bool on; /* positioned on an entry of the map */
    MDB_val k, v;
};

int ost__ecur_open(ost_store *st, void *txn, uint64_t map, ost__ecur **out) {
    if (st->no_ments) return OST_ENOTFOUND;
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return OST_ENOMEM;
    int rc = mdb_cursor_open(txn, st->ments, &ec->cur);
    if (rc) {
        free(ec);
        return rc;
    }
    ec->st = st;
    ec->map = map;
    *out = ec;
    return 0;
}

/* Whether the cursor's entry (after a get that returned rc) is the map's. */
static int settle(ost__ecur *ec, int rc) {
    ec->on = rc == 0 && ec->k.mv_size >= 8 && ost__rd_be64(ec->k.mv_data) == ec->map;
    if (rc && rc != MDB_NOTFOUND) return rc;
    return ec->on ? 0 : OST_ENOTFOUND;
}

int ost__ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    uint8_t buf[KEYMAX];
    if (key && klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    int rc;
    if (!reverse) {
        ec->k = full_key(buf, ec->map, key, key ? klen : 0);
        rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, MDB_SET_RANGE);
        return settle(ec, rc);
    }
    /* reverse: the first entry > key (or the next map's first), then back */
    if (key) {
        ec->k = full_key(buf, ec->map, key, klen);
        rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, MDB_SET_RANGE);
        if (rc == 0 && ec->k.mv_size == 8 + klen && memcmp((uint8_t *)ec->k.mv_data + 8, key, klen) == 0)
            return settle(ec, 0); /* exactly key */
    } else if (ec->map == UINT64_MAX) {
        rc = MDB_NOTFOUND;
    } else {
        ec->k = full_key(buf, ec->map + 1, NULL, 0);
        rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, MDB_SET_RANGE);
    }
    if (rc == MDB_NOTFOUND) rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, MDB_LAST);
    else if (rc == 0) rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, MDB_PREV);
    return settle(ec, rc);
}

int ost__ecur_step(ost__ecur *ec, bool reverse) {
    if (!ec->on) return OST_ENOTFOUND;
    int rc = mdb_cursor_get(ec->cur, &ec->k, &ec->v, reverse ? MDB_PREV : MDB_NEXT);
    return settle(ec, rc);
}

int ost__ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    if (!ec->on) return OST_ENOTFOUND;
    *key = (const uint8_t *)ec->k.mv_data + 8;
    *klen = ec->k.mv_size - 8;
    return to_entry(&ec->v, e);
}

void ost__ecur_close(ost__ecur *ec) {
    if (!ec) return;
    mdb_cursor_close(ec->cur);
    free(ec);
}

int ost__ent_each_map(ost_store *st, void *txn, int (*fn)(void *ud, uint64_t map), void *ud) {
    if (st->no_ments) return 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, st->ments, &cur);
    if (rc) return rc;
    MDB_val k, v;
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    while (rc == 0) {
        if (k.mv_size < 8) { /* not an entry key: check reports it */
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
            continue;
        }
        uint64_t map = ost__rd_be64(k.mv_data);
        int frc = fn(ud, map);
        if (frc < 0) {
            rc = frc;
            break;
        }
        if (frc == 1) {
            mdb_cursor_close(cur);
            cur = NULL;
            if ((rc = ost__ent_drop_map(st, txn, map, NULL))) break;
            if ((rc = mdb_cursor_open(txn, st->ments, &cur))) break;
        }
        if (map == UINT64_MAX) break;
        uint8_t buf[8];
        k = full_key(buf, map + 1, NULL, 0);
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    if (cur) mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* ---- the count in a map's record -------------------------------------------- */

static int record(ost_store *st, void *txn, uint64_t map, MDB_val *v) {
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb};
    int rc = mdb_get(txn, st->recs, &k, v);
    return rc == MDB_NOTFOUND ? OST_ENOTFOUND : rc;
}

int ost__map_record_get(ost_store *st, void *txn, uint64_t map, const uint8_t **pickle,
                        size_t *len) {
    MDB_val v;
    int rc = record(st, txn, map, &v);
    if (rc) return rc;
    if (v.mv_size < OST_HDR_SIZE) return OST_ECORRUPT;
    *pickle = (const uint8_t *)v.mv_data + OST_HDR_SIZE;
    *len = v.mv_size - OST_HDR_SIZE;
    return 0;
}

int ost__map_count_get(ost_store *st, void *txn, uint64_t map, uint64_t *count) {
    const uint8_t *p;
    size_t n;
    int rc = ost__map_record_get(st, txn, map, &p, &n);
    return rc ? rc : ost__map_record_count(p, n, count);
}

int ost__ent_code(int rc) { return rc < 0 ? rc : ost__mdb_code(rc); }
const char *ost__ent_strerror(int rc) { return rc < 0 ? ost_strerror(rc) : mdb_strerror(rc); }

int ost__map_count_add(ost_store *st, void *txn, uint64_t map, int64_t delta, uint64_t serial) {
    MDB_val v;
    int rc = record(st, txn, map, &v);
    if (rc == OST_ENOTFOUND) return OST_ECONFLICT;
    if (rc) return rc;
    uint64_t count, s;
    uint32_t cid;
    if (v.mv_size < OST_HDR_SIZE || ost__hdr_read(&v, &s, &cid)) return OST_ECORRUPT;
    size_t n = v.mv_size - OST_HDR_SIZE;
    rc = ost__map_record_count((uint8_t *)v.mv_data + OST_HDR_SIZE, n, &count);
    if (rc) return rc;
    if ((delta < 0 && (uint64_t)-delta > count)) return OST_ECORRUPT;
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb}, nv = {v.mv_size, NULL};
    uint8_t copy[OST_HDR_SIZE + 600];
    if (v.mv_size > sizeof copy) return OST_ECORRUPT;
    memcpy(copy, v.mv_data, v.mv_size); /* a put may move the old bytes */
    if ((rc = mdb_put(txn, st->recs, &k, &nv, MDB_RESERVE))) return rc;
    memcpy(nv.mv_data, copy, v.mv_size);
    ost__hdr_write(nv.mv_data, serial, cid);
    ost__map_record_setcount((uint8_t *)nv.mv_data + OST_HDR_SIZE, n, count + (uint64_t)delta);
    return 0;
}
