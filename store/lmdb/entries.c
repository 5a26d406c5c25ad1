/* The entries of maps on LMDB (store/entries.h): the named database
 * "mapents", keyed by map oid (8 bytes big-endian) + encoded key, each
 * value an 8-byte little-endian serial, in format 3 a 4-byte CRC-32C of
 * the whole key, the serial and the pickle, then the value pickle. */
#include <stdlib.h>
#include <string.h>

#include "entries.h"
#include "engine.h"

#define KEYMAX (8 + OST_MAP_KEY_MAX)

/* The LMDB key of (map, key) in buf. */
static MDB_val full_key(uint8_t *buf, uint64_t map, const uint8_t *key, size_t klen) {
    ost__be64(buf, map);
    if (klen) memcpy(buf + 8, key, klen);
    return (MDB_val){8 + klen, buf};
}

/* The bytes before the pickle in an entry's value: the serial and, in
 * format 3, the checksum. Writes always use format 3 (a read-write open
 * upgrades the store). */
#define EHDR 12
static size_t ehdr(ost__engine *en) {
    return __atomic_load_n(&en->format, __ATOMIC_RELAXED) >= 3 ? EHDR : 8;
}

/* The checksum of entry k (the full key: map oid and encoded key) whose
 * value is serial (8 bytes, as stored) and pickle[0, n). */
static uint32_t ent_crc(const MDB_val *k, const uint8_t *serial8, const void *pickle, size_t n) {
    uint32_t crc = ost__crc32c(0, k->mv_data, k->mv_size);
    crc = ost__crc32c(crc, serial8, 8);
    return ost__crc32c(crc, pickle, n);
}

/* Fills in value v of a new entry k from serial and pickle[0, len). */
static void ent_fill(const MDB_val *k, MDB_val *v, uint64_t serial, const void *data, size_t len);

size_t ost__ent_vsize(size_t len) { return EHDR + len; }

void ost__ent_fill(const void *key, size_t klen, void *out, uint64_t serial, const void *data,
                   size_t len) {
    MDB_val k = {klen, (void *)key}, v = {EHDR + len, out};
    ent_fill(&k, &v, serial, data, len);
}

static void ent_fill(const MDB_val *k, MDB_val *v, uint64_t serial, const void *data, size_t len) {
    uint8_t *b = v->mv_data;
    ost__le64(b, serial);
    if (len) memcpy(b + EHDR, data, len);
    uint32_t crc = ent_crc(k, b, b + EHDR, len);
    ost__le32(b + 8, crc);
}

bool ost__ent_crc_ok(const void *key, size_t klen, const void *val, size_t vlen) {
    const uint8_t *b = val;
    MDB_val k = {klen, (void *)key};
    return vlen >= EHDR && ent_crc(&k, b, b + EHDR, vlen - EHDR) == ost__rd_le32(b + 8);
}

/* Checks entry (k, v) as read from the store and fills e: 0 or
 * OST_ECORRUPT (too short, past the end of the file, a wrong checksum;
 * e is then empty). */
static int to_entry(ost__engine *en, const MDB_val *k, const MDB_val *v, ost__entry *e) {
    size_t h = ehdr(en);
    const uint8_t *b = v->mv_data;
    *e = (ost__entry){0, NULL, 0};
    if (v->mv_size < h || !ost__in_file(en, b, v->mv_size)) return OST_ECORRUPT;
    if (h == EHDR && !ost__ent_crc_ok(k->mv_data, k->mv_size, b, v->mv_size)) return OST_ECORRUPT;
    e->serial = ost__rd_le64(b);
    e->data = b + h;
    e->len = v->mv_size - h;
    return 0;
}

int ost__ent_check(ost__engine *en, const void *key, size_t klen, const void *val, size_t vlen,
                   ost__entry *e) {
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    return to_entry(en, &k, &v, e);
}

int ost__ent_upgrade(ost__engine *en, void *txn, uint64_t *n) {
    MDB_cursor *cur;
    *n = 0;
    int rc = mdb_cursor_open(txn, en->ments, &cur);
    if (rc) return rc;
    MDB_val k, v;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (v.mv_size < 8 || k.mv_size < 8) {
            rc = OST_ECORRUPT;
            break;
        }
        size_t len = v.mv_size - 8;
        if (ost__reserve((void **)&buf, &cap, len + EHDR, 1, 4096)) {
            rc = OST_ENOMEM;
            break;
        }
        /* the key and value point into the page the put changes: copies */
        uint8_t kb[KEYMAX];
        if (k.mv_size > sizeof kb) {
            rc = OST_ECORRUPT;
            break;
        }
        memcpy(kb, k.mv_data, k.mv_size);
        MDB_val kc = {k.mv_size, kb}, nv = {len + EHDR, buf};
        ent_fill(&kc, &nv, ost__rd_le64(v.mv_data), (const uint8_t *)v.mv_data + 8, len);
        if ((rc = mdb_cursor_put(cur, &kc, &nv, MDB_CURRENT))) break;
        (*n)++;
    }
    free(buf);
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int ost__ent_get(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 ost__entry *e) {
    if (en->no_ments) return OST_ENOTFOUND;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v;
    int rc = mdb_get(txn, en->ments, &k, &v);
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return rc;
    return to_entry(en, &k, &v, e);
}

/* A guard's result (guard.h) as entries.c's: MDB_NOTFOUND at the end or for
 * no key, OST__PAGE_DAMAGE with the store's message set for damaged pages. */
static int gd_rc(ost__engine *en, ost__gd *gd, int rc) {
    if (rc == OST_ENOTFOUND) return MDB_NOTFOUND;
    if (rc == OST_ECORRUPT) {
        ost__lmdb_fail(en, OST_ECORRUPT,
                     "%s: map entries: damaged store: %s ('ostore check' lists the damage, "
                     "'ostore salvage' copies what is intact)",
                     en->shown, ost__gd_msg(gd));
        return OST__PAGE_DAMAGE;
    }
    return rc;
}

int ost__ent_gget(ost__engine *en, ost__gd *gd, uint64_t map, const uint8_t *key, size_t klen,
                  ost__entry *e) {
    if (en->no_ments) return OST_ENOTFOUND;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v;
    int rc = gd_rc(en, gd, ost__gd_get(gd, OST__GD_MENTS, k.mv_data, k.mv_size, &v));
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return rc;
    return to_entry(en, &k, &v, e);
}

int ost__ent_put(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 uint64_t serial, const void *data, size_t len, bool *existed, bool *append) {
    if (en->no_ments) return OST_EREADONLY;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v = {EHDR + len, NULL};
    int rc = MDB_KEYEXIST;
    if (append && *append) {
        rc = mdb_put(txn, en->ments, &k, &v, MDB_RESERVE | MDB_APPEND);
        if (rc == MDB_KEYEXIST) {
            *append = false; /* not beyond the last key: plain puts from now */
            v = (MDB_val){EHDR + len, NULL};
        } else if (rc) {
            return rc;
        } else if (existed) {
            *existed = false;
        }
    }
    if (rc == MDB_KEYEXIST) {
        /* one descent for a new key: NOOVERWRITE says whether it existed */
        rc = mdb_put(txn, en->ments, &k, &v, MDB_RESERVE | (existed ? MDB_NOOVERWRITE : 0));
        if (existed) *existed = rc == MDB_KEYEXIST;
        if (rc == MDB_KEYEXIST) {
            v = (MDB_val){EHDR + len, NULL};
            rc = mdb_put(txn, en->ments, &k, &v, MDB_RESERVE);
        }
        if (rc) return rc;
    }
    ent_fill(&k, &v, serial, data, len);
    return 0;
}

int ost__ent_del(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen) {
    if (en->no_ments) return OST_ENOTFOUND;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen);
    int rc = mdb_del(txn, en->ments, &k, NULL);
    return rc == MDB_NOTFOUND ? OST_ENOTFOUND : rc;
}

/* ---- deletion records ----------------------------------------------------
 *
 * The database "mapdels" has one record per deleted key: the same key as
 * the entry's (map oid + encoded key), value the serial of the last commit
 * that deleted it (u64 little-endian) and a CRC-32C of the key and those 8
 * bytes (u32 little-endian). A commit reads it only for a key that is
 * absent when it checks (store/maps.c: a key absent at a transaction's
 * first look conflicts when its record is newer than the snapshot), so
 * reads, cursors and the loader never touch it. */

#define DELREC 12

int ost__ent_deleted(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t *serial) {
    *serial = 0;
    if (!en->has_mdels || klen > OST_MAP_KEY_MAX) return 0;
    uint8_t buf[KEYMAX];
    MDB_val k = full_key(buf, map, key, klen), v;
    int rc = mdb_get(txn, en->mdels, &k, &v);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rc;
    const uint8_t *b = v.mv_data;
    if (v.mv_size != DELREC || !ost__in_file(en, b, v.mv_size)) return OST_ECORRUPT;
    uint32_t crc = ost__crc32c(ost__crc32c(0, k.mv_data, k.mv_size), b, 8);
    if (crc != ost__rd_le32(b + 8)) return OST_ECORRUPT;
    *serial = ost__rd_le64(b);
    return 0;
}

int ost__ent_del_record(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial) {
    if (!en->has_mdels) return OST_EREADONLY;
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    uint8_t buf[KEYMAX], b[DELREC];
    MDB_val k = full_key(buf, map, key, klen), v = {DELREC, b};
    ost__le64(b, serial);
    uint32_t crc = ost__crc32c(ost__crc32c(0, k.mv_data, k.mv_size), b, 8);
    ost__le32(b + 8, crc);
    return mdb_put(txn, en->mdels, &k, &v, 0);
}

/* Removes the deletion records of every map for which gone(ud, map) says
 * so (and records whose key is too short to name a map), in one pass. */
int ost__ent_dels_sweep(ost__engine *en, void *txn, bool (*gone)(void *ud, uint64_t map), void *ud) {
    if (!en->has_mdels) return 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, en->mdels, &cur);
    if (rc) return rc;
    MDB_val k, v;
    uint64_t map = 0;
    bool drop = false, have = false;
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    while (rc == 0) {
        uint64_t m = k.mv_size >= 8 ? ost__rd_be64(k.mv_data) : UINT64_MAX;
        if (!have || m != map) {
            map = m;
            have = true;
            drop = k.mv_size < 8 || gone(ud, m);
        }
        if (drop) {
            /* after deleting the last key the cursor has no current entry:
             * seek again from the deleted key */
            uint8_t kb[KEYMAX];
            size_t kl = k.mv_size < sizeof kb ? k.mv_size : sizeof kb;
            memcpy(kb, k.mv_data, kl);
            if ((rc = mdb_cursor_del(cur, 0))) break;
            k = (MDB_val){kl, kb};
            rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        } else {
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        }
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Removes the deletion records of map. */
static int dels_drop_map(ost__engine *en, void *txn, uint64_t map) {
    if (!en->has_mdels) return 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, en->mdels, &cur);
    if (rc) return rc;
    uint8_t buf[8];
    MDB_val k, v;
    for (;;) {
        k = full_key(buf, map, NULL, 0);
        if ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE))) break;
        if (k.mv_size < 8 || ost__rd_be64(k.mv_data) != map) break;
        if ((rc = mdb_cursor_del(cur, 0))) break;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int ost__ent_drop_map(ost__engine *en, void *txn, uint64_t map, uint64_t *n) {
    if (en->no_ments) return OST_EREADONLY;
    if (n) *n = 0;
    int drc = dels_drop_map(en, txn, map);
    if (drc) return drc;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, en->ments, &cur);
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
    ost__engine *en;
    MDB_cursor *cur; /* liblmdb's (a write transaction), or NULL: */
    ost__gd *gd;     /* the guard's cursor gc (a read snapshot) */
    ost__gdcur gc;
    uint64_t map;
    bool on; /* positioned on an entry of the map */
    MDB_val k, v;
};

int ost__ecur_open(ost__engine *en, void *txn, uint64_t map, ost__ecur **out) {
    if (en->no_ments) return OST_ENOTFOUND;
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return OST_ENOMEM;
    int rc = mdb_cursor_open(txn, en->ments, &ec->cur);
    if (rc) {
        free(ec);
        return rc;
    }
    ec->en = en;
    ec->map = map;
    *out = ec;
    return 0;
}

int ost__ecur_gopen(ost__engine *en, ost__gd *gd, uint64_t map, ost__ecur **out) {
    if (en->no_ments) return OST_ENOTFOUND;
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return OST_ENOMEM;
    ec->en = en;
    ec->gd = gd;
    ost__gdcur_init(&ec->gc, gd, OST__GD_MENTS);
    ec->map = map;
    *out = ec;
    return 0;
}

/* One move of the cursor, liblmdb's or the guard's: op is MDB_SET_RANGE
 * (from ec->k), MDB_LAST, MDB_NEXT or MDB_PREV. */
static int cget(ost__ecur *ec, MDB_cursor_op op) {
    if (ec->cur) return mdb_cursor_get(ec->cur, &ec->k, &ec->v, op);
    ost__gdcur *c = &ec->gc;
    int rc = op == MDB_SET_RANGE ? ost__gdcur_seek(c, ec->k.mv_data, ec->k.mv_size, &ec->k, &ec->v)
             : op == MDB_LAST    ? ost__gdcur_last(c, &ec->k, &ec->v)
             : op == MDB_NEXT    ? ost__gdcur_next(c, &ec->k, &ec->v)
             : op == MDB_PREV    ? ost__gdcur_prev(c, &ec->k, &ec->v)
                                 : OST_EINVAL;
    return gd_rc(ec->en, ec->gd, rc);
}

/* Whether the cursor's entry (after a get that returned rc) is the map's.
 * An entry met outside the map ends the walk only when it is intact: a
 * damaged map oid in an entry's key would otherwise end a map's walk early
 * with no error, every entry after it untold. The checksum covers the
 * whole key (format 3), so an intact entry of another map is told from a
 * damaged one of this map. */
static int settle(ost__ecur *ec, int rc) {
    ec->on = rc == 0 && ec->k.mv_size >= 8 && ost__rd_be64(ec->k.mv_data) == ec->map;
    if (rc && rc != MDB_NOTFOUND) return rc;
    if (ec->on) return 0;
    if (rc == 0) {
        ost__entry e;
        bool bad = ec->k.mv_size < 8 || to_entry(ec->en, &ec->k, &ec->v, &e) != 0;
        if (bad) {
            ost__lmdb_fail(ec->en, OST_ECORRUPT,
                         "%s: map %llu: its walk met a damaged entry (%s%llu; its checksum does "
                         "not match its bytes), which may be one of its own: 'ostore check' "
                         "lists the damage",
                         ec->en->shown, (unsigned long long)ec->map,
                         ec->k.mv_size < 8 ? "a key too short for a map oid, " : "a key of map ",
                         ec->k.mv_size < 8 ? 0ULL : (unsigned long long)ost__rd_be64(ec->k.mv_data));
            return OST__PAGE_DAMAGE;
        }
    }
    return OST_ENOTFOUND;
}

int ost__ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    uint8_t buf[KEYMAX];
    if (key && klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    int rc;
    if (!reverse) {
        ec->k = full_key(buf, ec->map, key, key ? klen : 0);
        rc = cget(ec, MDB_SET_RANGE);
        return settle(ec, rc);
    }
    /* reverse: the first entry > key (or the next map's first), then back */
    if (key) {
        ec->k = full_key(buf, ec->map, key, klen);
        rc = cget(ec, MDB_SET_RANGE);
        if (rc == 0 && ec->k.mv_size == 8 + klen && memcmp((uint8_t *)ec->k.mv_data + 8, key, klen) == 0)
            return settle(ec, 0); /* exactly key */
    } else if (ec->map == UINT64_MAX) {
        rc = MDB_NOTFOUND;
    } else {
        ec->k = full_key(buf, ec->map + 1, NULL, 0);
        rc = cget(ec, MDB_SET_RANGE);
    }
    if (rc == MDB_NOTFOUND) rc = cget(ec, MDB_LAST);
    else if (rc == 0) rc = cget(ec, MDB_PREV);
    return settle(ec, rc);
}

int ost__ecur_step(ost__ecur *ec, bool reverse) {
    if (!ec->on) return OST_ENOTFOUND;
    int rc = cget(ec, reverse ? MDB_PREV : MDB_NEXT);
    return settle(ec, rc);
}

int ost__ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    if (!ec->on) return OST_ENOTFOUND;
    *key = (const uint8_t *)ec->k.mv_data + 8;
    *klen = ec->k.mv_size - 8;
    return to_entry(ec->en, &ec->k, &ec->v, e);
}

ost__engine *ost__ecur_engine(ost__ecur *ec) { return ec->en; }

void ost__ecur_close(ost__ecur *ec) {
    if (!ec) return;
    if (ec->cur) mdb_cursor_close(ec->cur);
    free(ec);
}

int ost__ent_each_map(ost__engine *en, void *txn, int (*fn)(void *ud, uint64_t map), void *ud) {
    if (en->no_ments) return 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, en->ments, &cur);
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
            if ((rc = ost__ent_drop_map(en, txn, map, NULL))) break;
            if ((rc = mdb_cursor_open(txn, en->ments, &cur))) break;
        }
        if (map == UINT64_MAX) break;
        uint8_t buf[8];
        k = full_key(buf, map + 1, NULL, 0);
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    if (cur) mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int ost__ent_geach_map(ost__engine *en, ost__gd *gd, int (*fn)(void *ud, uint64_t map), void *ud) {
    if (en->no_ments) return 0;
    ost__gdcur c;
    ost__gdcur_init(&c, gd, OST__GD_MENTS);
    MDB_val k, v;
    int rc = gd_rc(en, gd, ost__gdcur_first(&c, &k, &v));
    while (rc == 0) {
        if (k.mv_size < 8) { /* not an entry key: check reports it */
            rc = gd_rc(en, gd, ost__gdcur_next(&c, &k, &v));
            continue;
        }
        uint64_t map = ost__rd_be64(k.mv_data);
        int frc = fn(ud, map);
        if (frc < 0) return frc;
        if (frc == 1) return OST_EINVAL; /* dropping a map needs the write transaction */
        if (map == UINT64_MAX) return 0;
        uint8_t buf[8];
        ost__be64(buf, map + 1);
        rc = gd_rc(en, gd, ost__gdcur_seek(&c, buf, sizeof buf, &k, &v));
    }
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* ---- the count in a map's record -------------------------------------------- */

static int record(ost__engine *en, void *txn, uint64_t map, MDB_val *v) {
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb};
    int rc = mdb_get(txn, en->recs, &k, v);
    return rc == MDB_NOTFOUND ? OST_ENOTFOUND : rc;
}

int ost__ent_code(int rc) { return OST__OURS(rc) ? rc : ost__mdb_code(rc); }
const char *ost__ent_strerror(int rc) { return OST__OURS(rc) ? ost_strerror(rc) : mdb_strerror(rc); }

int ost__map_count_add(ost__engine *en, void *txn, uint64_t map, int64_t delta, uint64_t serial,
                       bool counter) {
    MDB_val v;
    int rc = record(en, txn, map, &v);
    if (rc == OST_ENOTFOUND) return OST_ECONFLICT;
    if (rc) return rc;
    uint64_t s;
    uint32_t cid;
    if (ost__rec_open(en, map, &v, &s, &cid)) return OST_ECORRUPT;
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb}, nv = {v.mv_size, NULL};
    uint8_t copy[OST_HDR_SIZE + 600];
    if (v.mv_size > sizeof copy) return OST_ECORRUPT;
    memcpy(copy, v.mv_data, v.mv_size); /* a put may move the old bytes */
    rc = ost__record_count_add(copy + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE, delta, counter);
    if (rc) return rc;
    if ((rc = mdb_put(txn, en->recs, &k, &nv, MDB_RESERVE))) return rc;
    memcpy(nv.mv_data, copy, v.mv_size);
    ost__hdr_write(nv.mv_data, serial, cid);
    ost__rec_seal(nv.mv_data, nv.mv_size, map);
    return 0;
}
