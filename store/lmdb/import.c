/* Raw import into a new store, for `ostore import` (see import.h): class
 * table, records, map entries and counters written as given, in one write
 * transaction. The LMDB engine's imp_* operations (store/engine.h);
 * store/snap.c checks class names, counters and format before. Records and entries are appended (MDB_APPEND), since an
 * export lists oids, and each map's keys, in ascending order, which also
 * makes a repeated or unordered oid or key an error. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "entries.h"
#include "import.h"
#include "engine.h"

struct ost__import {
    ost__engine *en;
    MDB_txn *t;
    uint64_t records;
    uint64_t ments;          /* map entries written */
    uint64_t ment_map;       /* the map the last entry belonged to */
    bool ment_map_ok;        /* ... which has a map record */
    bool ment_map_set;       /* ... of a set */
    bool cids_known;         /* map_cid and set_cid looked up */
    uint32_t map_cid, set_cid; /* 0: no such class */
};

/* Ends the transaction after a failure and frees im; returns code. */
static int im_fail(ost__import *im, int code) {
    mdb_txn_abort(im->t);
    uv_rwlock_rdunlock(&im->en->maplock);
    free(im);
    return code;
}

int ost__import_begin(ost__engine *en, uint64_t map_need, ost__import **out) {
    *out = NULL;
    if (!en || !en->env) return OST_EINVAL;
    if (en->read_only) return ost__lmdb_fail(en, OST_EREADONLY, "%s: opened read-only", en->shown);
    MDB_envinfo ei;
    mdb_env_info(en->env, &ei);
    if (map_need > ei.me_mapsize) {
        /* LMDB unmaps the old map before it maps the new one, and a
         * failed mmap leaves the environment with no map at all (mdb.c:
         * mdb_env_set_mapsize, mdb_env_map), which no later call can
         * restore: the next read faults. A size past the address space
         * (the counts of a dump read from a pipe, which has no size to
         * check them against) is refused before LMDB sees it. */
        void *probe = map_need > SIZE_MAX ? MAP_FAILED
                                          : mmap(NULL, (size_t)map_need, PROT_NONE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (probe == MAP_FAILED)
            return ost__lmdb_fail(en, OST_ENOMEM, "%s: cannot grow the map to %llu bytes: %s",
                                en->shown, (unsigned long long)map_need, strerror(ENOMEM));
        munmap(probe, (size_t)map_need);
        uv_rwlock_wrlock(&en->maplock);
        int rc = mdb_env_set_mapsize(en->env, (size_t)map_need);
        ost__lmdb_map_changed(en);
        uv_rwlock_wrunlock(&en->maplock);
        if (rc)
            return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: cannot grow the map to %llu bytes: %s",
                                en->shown, (unsigned long long)map_need, ost__mdb_strerror(en, rc));
    }
    ost__import *im = calloc(1, sizeof *im);
    if (!im) return ost__lmdb_fail(en, OST_ENOMEM, "out of memory");
    im->en = en;
    uv_rwlock_rdlock(&en->maplock);
    int rc = mdb_txn_begin(en->env, NULL, 0, &im->t);
    if (rc) {
        uv_rwlock_rdunlock(&en->maplock);
        free(im);
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: cannot start a write transaction: %s",
                            en->shown, ost__mdb_strerror(en, rc));
    }
    MDB_stat ms;
    uint64_t next_oid = 0, last = 0;
    rc = mdb_stat(im->t, en->recs, &ms);
    if (!rc) rc = ost__lmdb_meta_get(im->t, en->meta, "next_oid", &next_oid);
    if (!rc) rc = ost__lmdb_meta_get(im->t, en->meta, "last_serial", &last);
    if (rc) {
        ost__lmdb_fail(en, ost__mdb_code(rc), "%s: reading meta: %s", en->shown,
                     ost__mdb_strerror(en, rc));
        return im_fail(im, ost__mdb_code(rc));
    }
    if (ms.ms_entries > 1 || next_oid != 1 || last != 1) {
        ost__lmdb_fail(en, OST_EEXIST,
                     "%s: not a new store (%llu objects, last commit %llu); import needs a new "
                     "or empty store",
                     en->shown, (unsigned long long)ms.ms_entries, (unsigned long long)last);
        return im_fail(im, OST_EEXIST);
    }
    rc = mdb_drop(im->t, en->recs, 0);
    if (!rc) rc = mdb_drop(im->t, en->classes, 0);
    if (!rc) rc = mdb_drop(im->t, en->txlog, 0);
    if (!rc) rc = mdb_drop(im->t, en->ments, 0);
    if (rc) {
        ost__lmdb_fail(en, ost__mdb_code(rc), "%s: emptying the store: %s", en->shown,
                     ost__mdb_strerror(en, rc));
        return im_fail(im, ost__mdb_code(rc));
    }
    *out = im;
    return 0;
}

int ost__import_class(ost__import *im, uint32_t id, const char *module, size_t ml,
                      const char *name, size_t nl) {
    ost__engine *en = im->en;
    /* store/snap.c checked the id and the names (ost_import_class) */
    if (ml + nl + 2 > 1000) return ost__lmdb_fail(en, OST_EINVAL, "class id %u: too long", id);
    char key[1024];
    key[0] = 'n';
    memcpy(key + 1, module, ml);
    key[1 + ml] = 0;
    memcpy(key + 2 + ml, name, nl);
    MDB_val k = {ml + nl + 2, key}, v = {4, &id};
    int rc = mdb_put(im->t, en->classes, &k, &v, MDB_NOOVERWRITE);
    if (!rc) {
        char ikey[5];
        ikey[0] = 'i';
        memcpy(ikey + 1, &id, 4);
        MDB_val ik = {5, ikey}, iv = {ml + nl + 1, key + 1};
        rc = mdb_put(im->t, en->classes, &ik, &iv, MDB_NOOVERWRITE);
    }
    if (rc == MDB_KEYEXIST)
        return ost__lmdb_fail(en, OST_EEXIST, "class id %u (%.*s.%.*s) is listed twice", id, (int)ml,
                            module, (int)nl, name);
    if (rc)
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: class id %u: %s", en->shown, id,
                            ost__mdb_strerror(en, rc));
    return 0;
}

int ost__import_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                       const void *pickle, size_t n) {
    ost__engine *en = im->en;
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v = {n + OST_HDR_SIZE, NULL};
    int rc = mdb_put(im->t, en->recs, &k, &v, MDB_APPEND | MDB_RESERVE);
    if (rc == MDB_KEYEXIST)
        return ost__lmdb_fail(en, OST_EINVAL, "oid %llu: oids must ascend, each once",
                            (unsigned long long)oid);
    if (rc)
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: oid %llu: %s", en->shown,
                            (unsigned long long)oid, ost__mdb_strerror(en, rc));
    ost__hdr_write(v.mv_data, serial, cid);
    memcpy((uint8_t *)v.mv_data + OST_HDR_SIZE, pickle, n);
    ost__rec_seal(v.mv_data, v.mv_size, oid);
    im->records++;
    return 0;
}

/* The class id of ostore.maps.<name> in the table imported so far, or 0
 * (class ids start at 1). */
static uint32_t maps_cid(ost__import *im, const char *name) {
    char key[40];
    int n = snprintf(key, sizeof key, "nostore.maps%c%s", 0, name);
    MDB_val k = {(size_t)n, key}, v;
    uint32_t id = 0;
    if (mdb_get(im->t, im->en->classes, &k, &v) == 0 && v.mv_size == 4) memcpy(&id, v.mv_data, 4);
    return id;
}

int ost__import_ment(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *val, size_t vlen) {
    ost__engine *en = im->en;
    if (klen > OST_MAP_KEY_MAX) /* snap.c refused it already; kb below holds no more */
        return ost__lmdb_fail(en, OST_EINVAL, "map %llu: a %zu-byte key (the longest is %d bytes)",
                            (unsigned long long)map, klen, OST_MAP_KEY_MAX);
    if (!im->cids_known) { /* the class table is complete before the first entry */
        im->map_cid = maps_cid(im, "OrderedMap");
        im->set_cid = maps_cid(im, "OrderedSet");
        im->cids_known = true;
    }
    if (im->ments == 0 || map != im->ment_map) {
        uint8_t kb[8];
        ost__be64(kb, map);
        MDB_val k = {8, kb}, v;
        uint64_t s;
        uint32_t cid = 0;
        int rc = mdb_get(im->t, en->recs, &k, &v);
        if (rc && rc != MDB_NOTFOUND)
            return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: map %llu: %s", en->shown,
                                (unsigned long long)map, ost__mdb_strerror(en, rc));
        im->ment_map = map;
        im->ment_map_ok = rc == 0 && ost__rec_open(en, map, &v, &s, &cid) == 0 && cid &&
                          (cid == im->map_cid || cid == im->set_cid);
        im->ment_map_set = im->ment_map_ok && cid == im->set_cid;
    }
    if (!im->ment_map_ok)
        return ost__lmdb_fail(en, OST_EINVAL,
                            "entries under oid %llu, which has no record of class "
                            "ostore.maps.OrderedMap or OrderedSet",
                            (unsigned long long)map);
    if (im->ment_map_set ? vlen != 0 : vlen == 0)
        return ost__lmdb_fail(en, OST_EINVAL, "map %llu: %s", (unsigned long long)map,
                            im->ment_map_set ? "an entry of a set has a value"
                                             : "an entry without a value pickle");
    uint8_t kb[8 + OST_MAP_KEY_MAX];
    ost__be64(kb, map);
    if (klen) memcpy(kb + 8, key, klen);
    MDB_val k = {8 + klen, kb}, v = {ost__ent_vsize(vlen), NULL};
    int rc = mdb_put(im->t, en->ments, &k, &v, MDB_APPEND | MDB_RESERVE);
    if (rc == MDB_KEYEXIST)
        return ost__lmdb_fail(en, OST_EINVAL,
                            "map %llu: entries must ascend (by map oid, then by key), each once",
                            (unsigned long long)map);
    if (rc)
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: map %llu: %s", en->shown,
                            (unsigned long long)map, ost__mdb_strerror(en, rc));
    ost__ent_fill(kb, 8 + klen, v.mv_data, serial, val, vlen);
    im->ments++;
    return 0;
}

int ost__import_commit(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                       uint64_t next_class) {
    ost__engine *en = im->en;
    MDB_txn *t = im->t;
    (void)format; /* store/snap.c checked format and counters against what was added */
    /* what was imported has checksums, whatever the exported store's format */
    int rc = ost__lmdb_meta_put(t, en->meta, "format", OST_STORE_FORMAT);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "next_oid", next_oid);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "last_serial", last_serial);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "next_class", next_class);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "low", last_serial + 1);
    if (rc) {
        ost__lmdb_fail(en, ost__mdb_code(rc), "%s: writing meta: %s", en->shown,
                     ost__mdb_strerror(en, rc));
        return im_fail(im, ost__mdb_code(rc));
    }
    rc = mdb_txn_commit(t);
    uv_rwlock_rdunlock(&en->maplock);
    free(im);
    if (rc)
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: import commit: %s", en->shown,
                            ost__mdb_strerror(en, rc));
    return 0; /* snap.c drops the class ids the store cached */
}

void ost__import_abort(ost__import *im) {
    if (im) im_fail(im, 0);
}
