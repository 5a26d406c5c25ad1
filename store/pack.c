/* Pack and check: walking records by the persistent references their
 * pickles hold, found by scanning opcodes, without building values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entries.h"
#include "oidset.h"
#include "store_internal.h"

/* The class ids of ostore.maps.OrderedMap and OrderedSet in t (0 when the
 * store has none; class ids start at 1). */
static void map_cids(ost_store *st, MDB_txn *t, uint32_t ids[2]) {
    static const char *const names[2] = {"OrderedMap", "OrderedSet"};
    for (int i = 0; i < 2; i++) {
        char key[40];
        int n = snprintf(key, sizeof key, "nostore.maps%c%s", 0, names[i]);
        MDB_val k = {(size_t)n, key}, v;
        ids[i] = 0;
        if (mdb_get(t, st->classes, &k, &v) == 0 && v.mv_size == 4) memcpy(&ids[i], v.mv_data, 4);
    }
}

static bool is_map_cid(const uint32_t ids[2], uint32_t cid) {
    return cid && (cid == ids[0] || cid == ids[1]);
}

/* ---- pack ---------------------------------------------------------------- */

enum { REACHED, SCANNED }; /* the flags of the oid set */

typedef struct {
    ost__oidset oids; /* the records' oids: reached, scanned */
    size_t *stack;    /* places in oids reached but not scanned yet */
    size_t len, cap;
    bool overflow; /* the stack was full: a rescan pass is needed */
    uint32_t map_cids[2];
} mark_ctx;

#define MARK_STACK_MAX ((size_t)1 << 20)

static void mark_ref(void *ud, uint64_t oid) {
    mark_ctx *m = ud;
    int64_t i = ost__oidset_index(&m->oids, oid);
    if (i < 0 || ost__oidset_set(&m->oids, REACHED, (size_t)i)) return; /* no record, or seen */
    if (m->len == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        size_t *n = cap <= MARK_STACK_MAX ? realloc(m->stack, cap * sizeof *n) : NULL;
        if (!n) {
            m->overflow = true; /* found again by a rescan */
            return;
        }
        m->stack = n;
        m->cap = cap;
    }
    m->stack[m->len++] = (size_t)i;
}

static int scan_oid(ost_store *st, MDB_txn *t, mark_ctx *m, size_t place) {
    ost__oidset_set(&m->oids, SCANNED, place);
    uint64_t oid = ost__oidset_oid(&m->oids, place);
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(t, st->recs, &k, &v);
    if (rc == MDB_NOTFOUND) return 0; /* dangling: check reports it */
    if (rc) return rc;
    /* a reachable record whose references cannot be read: what it refers
     * to is unknown, so nothing may be removed */
    uint64_t serial;
    uint32_t cid;
    if (v.mv_size < OST_HDR_SIZE + 2 || ost__hdr_read(&v, &serial, &cid) ||
        ost__scan_pids((uint8_t *)v.mv_data + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE,
                       mark_ref, m))
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: pack: oid %llu does not decode, so what it refers to is "
                            "unknown; nothing was removed (see ost_store_check)",
                            st->shown, (unsigned long long)oid);
    if (!is_map_cid(m->map_cids, cid)) return 0;
    /* a map: what its entries' values refer to is reachable too */
    ost__ecur *ec;
    if ((rc = ost__ecur_open(st, t, oid, &ec))) return rc == OST_ENOTFOUND ? 0 : rc;
    for (rc = ost__ecur_seek(ec, NULL, 0, false); rc == 0; rc = ost__ecur_step(ec, false)) {
        const uint8_t *k;
        size_t kl;
        ost__entry e;
        if ((rc = ost__ecur_get(ec, &k, &kl, &e)) ||
            (e.len && ost__scan_pids(e.data, e.len, mark_ref, m))) {
            ost__ecur_close(ec);
            return ost__st_fail(st, OST_ECORRUPT,
                                "%s: pack: an entry of map %llu does not decode, so what it "
                                "refers to is unknown; nothing was removed (see ost_store_check)",
                                st->shown, (unsigned long long)oid);
        }
    }
    ost__ecur_close(ec);
    return rc == OST_ENOTFOUND ? 0 : rc;
}

/* ost__ent_each_map's callback: the entries of unreachable maps go. */
static int sweep_map(void *ud, uint64_t map) {
    mark_ctx *m = ud;
    int64_t i = ost__oidset_index(&m->oids, map);
    return i >= 0 && ost__oidset_test(&m->oids, REACHED, (size_t)i) ? 0 : 1;
}

/* One attempt; *mdb_rc gets the LMDB code the attempt ended with, so that
 * the caller can grow the map after MDB_MAP_FULL and try again. */
static int pack_once(ost_store *st, uint64_t *removed, int *mdb_rc) {
    if (removed) *removed = 0;
    if (!st || !st->env) return OST_EINVAL;
    if (st->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: read-only", st->shown);
    MDB_txn *t;
    int rc = ost__locked_txn_begin(st, 0, &t);
    if (rc) {
        uv_rwlock_rdunlock(&st->maplock);
        return ost__st_fail(st, ost__mdb_code(rc), "%s: %s", st->shown, ost__mdb_strerror(st, rc));
    }
    /* a flag per record, sized by the records, not by meta.next_oid
     * (which damage could make anything) */
    mark_ctx m = {0};
    MDB_val k, v;
    int code = 0;
    uint64_t gone = 0;
    rc = ost__oidset_init(&m.oids, t, st->recs);
    if (rc) {
        code = rc == OST_ENOMEM ? ost__st_fail(st, rc, "%s: pack: out of memory for the oids of "
                                               "the records", st->shown)
               : ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->shown,
                              ost__mdb_strerror(st, rc));
        rc = 0;
        goto out;
    }
    map_cids(st, t, m.map_cids);
    mark_ref(&m, 0);
    for (;;) {
        while (m.len && !rc) rc = scan_oid(st, t, &m, m.stack[--m.len]);
        if (rc || !m.overflow) break;
        /* the stack overflowed: follow what was marked but not scanned */
        m.overflow = false;
        for (size_t i = 0; i < m.oids.n && !rc; i++)
            if (ost__oidset_test(&m.oids, REACHED, i) && !ost__oidset_test(&m.oids, SCANNED, i)) {
                rc = scan_oid(st, t, &m, i);
                while (m.len && !rc) rc = scan_oid(st, t, &m, m.stack[--m.len]);
            }
        if (!m.overflow) break;
    }
    if (rc < 0) { /* ours, with its message */
        code = rc;
        goto out;
    }
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->shown,
                            ost__mdb_strerror(st, rc));
        goto out;
    }
    MDB_cursor *cur;
    rc = mdb_cursor_open(t, st->recs, &cur);
    if (!rc) {
        while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
            int64_t i = k.mv_size == 8 ? ost__oidset_index(&m.oids, ost__rd_be64(k.mv_data)) : -1;
            if (i >= 0 && ost__oidset_test(&m.oids, REACHED, (size_t)i)) continue;
            if ((rc = mdb_cursor_del(cur, 0))) break;
            gone++;
        }
        mdb_cursor_close(cur);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    /* the entries of maps that are gone (or were never reachable) */
    if (!rc) rc = ost__ent_each_map(st, t, sweep_map, &m);
    /* the invalidation log restarts: caches older than now reload all */
    if (!rc) rc = mdb_drop(t, st->txlog, 0);
    if (!rc) {
        MDB_val lk = {11, "last_serial"}, lv;
        rc = mdb_get(t, st->meta, &lk, &lv);
        if (!rc && lv.mv_size == 8) {
            uint64_t last = 0;
            for (int i = 7; i >= 0; i--) last = last << 8 | ((uint8_t *)lv.mv_data)[i];
            uint8_t b[8];
            for (int i = 0; i < 8; i++) b[i] = (uint8_t)((last + 1) >> (8 * i));
            MDB_val key = {3, "low"}, val = {8, b};
            rc = mdb_put(t, st->meta, &key, &val, 0);
        }
    }
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->shown,
                            ost__mdb_strerror(st, rc));
        goto out;
    }
    rc = mdb_txn_commit(t);
    t = NULL;
    if (rc) code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack commit: %s", st->shown,
                                ost__mdb_strerror(st, rc));
    else if (removed) *removed = gone;
out:
    *mdb_rc = rc;
    if (t) mdb_txn_abort(t);
    uv_rwlock_rdunlock(&st->maplock);
    ost__oidset_free(&m.oids);
    free(m.stack);
    return code;
}

/* Deleting records allocates pages (copy on write), so a store opened with
 * a map no larger than its data fills the map: grow it and start again, as
 * commits do. */
int ost_store_pack(ost_store *st, uint64_t *removed) {
    for (int tries = 0;; tries++) {
        int mdb_rc = 0;
        int code = pack_once(st, removed, &mdb_rc);
        if (mdb_rc != MDB_MAP_FULL || tries == 16) return code;
        int grc = ost__grow_map(st);
        if (grc)
            return ost__st_fail(st, ost__mdb_code(grc), "%s: pack: cannot grow the map: %s",
                                st->shown, ost__mdb_strerror(st, grc));
        st->msg[0] = 0;
    }
}

/* ---- check ---------------------------------------------------------------- */

typedef struct {
    uint64_t oid, count;
    ost__mkind kind;
    bool is_set;
} check_map;

typedef struct {
    ost_store *st;
    MDB_txn *t;
    uint64_t holder;
    ost_check_fn report;
    void *ud;
    uint64_t problems;
    check_map *maps; /* the map records seen, in oid order */
    size_t nmaps, capmaps;
} check_ctx;

static void problem(check_ctx *c, uint64_t oid, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(check_ctx *c, uint64_t oid, int err, const char *fmt, ...) {
    c->problems++;
    if (!c->report) return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->report(c->ud, oid, 0, err, msg);
}

/* Notes map record oid (its decoded state is val). */
static void check_map_record(check_ctx *c, uint64_t oid, bool is_set, ost_value val,
                             const MDB_val *v) {
    ost_value kv = ost_typeof(val) == OST_T_DICT ? ost_dict_get_c(val, "kind") : 0;
    const char *ks = ost_typeof(kv) == OST_T_STR ? ost_data(kv, NULL) : NULL;
    check_map cm = {.oid = oid, .is_set = is_set};
    if (!ks || ost__mkind_parse(ks, &cm.kind) ||
        ost__map_record_count((uint8_t *)v->mv_data + OST_HDR_SIZE, v->mv_size - OST_HDR_SIZE,
                              &cm.count)) {
        problem(c, oid, OST_ECORRUPT, "oid %llu: a map record without a valid kind and count",
                (unsigned long long)oid);
        return;
    }
    if (c->nmaps == c->capmaps) {
        size_t cap = c->capmaps ? c->capmaps * 2 : 16;
        check_map *n = realloc(c->maps, cap * sizeof *n);
        if (!n) {
            problem(c, oid, OST_ENOMEM, "oid %llu: out of memory: its entries are not checked",
                    (unsigned long long)oid);
            return;
        }
        c->maps = n;
        c->capmaps = cap;
    }
    c->maps[c->nmaps++] = cm;
}

/* Reads every entry of map cm: keys decode as its kind, values decode and
 * refer to existing objects, and they add up to its count. */
static int check_entries(check_ctx *c, ost_reader *r, const check_map *cm) {
    ost__ecur *ec;
    int rc = ost__ecur_open(c->st, c->t, cm->oid, &ec);
    if (rc) return rc == OST_ENOTFOUND ? 0 : rc;
    uint64_t n = 0;
    c->holder = cm->oid;
    for (rc = ost__ecur_seek(ec, NULL, 0, false); rc == 0; rc = ost__ecur_step(ec, false)) {
        const uint8_t *k;
        size_t kl;
        ost__entry e;
        n++;
        if (ost__ecur_get(ec, &k, &kl, &e)) {
            problem(c, cm->oid, OST_ECORRUPT, "map %llu: an entry shorter than its serial",
                    (unsigned long long)cm->oid);
            continue;
        }
        ost_value key = ost__mkey_decode(&cm->kind, k, kl);
        if (!key) {
            problem(c, cm->oid, OST_ECORRUPT, "map %llu: a key of %zu bytes does not decode as %s",
                    (unsigned long long)cm->oid, kl, cm->kind.canon);
            continue;
        }
        ost_buf b = {0};
        ost_repr(key, &b);
        ost_decref(key);
        if (cm->is_set && e.len)
            problem(c, cm->oid, OST_ECORRUPT, "set %llu: key %.200s has a value",
                    (unsigned long long)cm->oid, b.data ? b.data : "");
        if (!cm->is_set) {
            ost_value val;
            int lrc = ost_load(r, e.data, e.len, &val, NULL);
            if (lrc)
                problem(c, cm->oid, lrc, "map %llu: the entry of key %.200s does not decode: %s",
                        (unsigned long long)cm->oid, b.data ? b.data : "", ost_reader_errmsg(r));
            else
                ost_release(val);
        }
        ost_buf_free(&b);
    }
    ost__ecur_close(ec);
    if (rc != OST_ENOTFOUND) return rc;
    if (n != cm->count)
        problem(c, cm->oid, OST_ECORRUPT, "map %llu: its record counts %llu entries, it has %llu",
                (unsigned long long)cm->oid, (unsigned long long)cm->count, (unsigned long long)n);
    return 0;
}

/* ost__ent_each_map's callback: entries whose map has no map record. */
static int check_orphans(void *ud, uint64_t map) {
    check_ctx *c = ud;
    size_t lo = 0, hi = c->nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->maps[mid].oid < map) lo = mid + 1;
        else hi = mid;
    }
    if (lo == c->nmaps || c->maps[lo].oid != map)
        problem(c, map, OST_ECORRUPT, "entries of oid %llu, which is not a map (or has no record)",
                (unsigned long long)map);
    return 0;
}

static int check_load(void *ud, ost_value pid, ost_value *obj) {
    check_ctx *c = ud;
    int64_t oid;
    if (ost_int_value(pid, &oid) || oid < 0) {
        c->problems++;
        if (c->report) c->report(c->ud, c->holder, 0, OST_ECORRUPT, "a persistent id that is not an oid");
        *obj = ost_persref(ost_incref(pid));
        return *obj ? 0 : OST_ENOMEM;
    }
    uint8_t kb[8];
    ost__be64(kb, (uint64_t)oid);
    MDB_val k = {8, kb}, v;
    if (mdb_get(c->t, c->st->recs, &k, &v) != 0) {
        c->problems++;
        if (c->report) {
            char msg[96];
            snprintf(msg, sizeof msg, "oid %llu refers to missing oid %lld",
                     (unsigned long long)c->holder, (long long)oid);
            c->report(c->ud, c->holder, (uint64_t)oid, OST_ENOTFOUND, msg);
        }
    }
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

int ost_store_check(ost_store *st, ost_check_fn report, void *ud, uint64_t *records) {
    if (records) *records = 0;
    if (!st || !st->env) return OST_EINVAL;
    ost_reader *r = ost_reader_new();
    if (!r) return OST_ENOMEM;
    check_ctx c = {.st = st, .report = report, .ud = ud};
    ost_reader_set_persistent_load(r, check_load, &c);
    int rc = ost__locked_txn_begin(st, MDB_RDONLY, &c.t);
    MDB_cursor *cur = NULL;
    uint32_t mcids[2] = {0, 0};
    if (!rc) {
        map_cids(st, c.t, mcids);
        rc = mdb_cursor_open(c.t, st->recs, &cur);
    }
    uint64_t n = 0;
    MDB_val k, v;
    bool root = false;
    while (!rc && (rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        n++;
        c.holder = k.mv_size == 8 ? ost__rd_be64(k.mv_data) : UINT64_MAX;
        if (c.holder == 0) root = true;
        char msg[400];
        uint64_t serial;
        uint32_t cid;
        if (k.mv_size != 8 || ost__hdr_read(&v, &serial, &cid)) {
            c.problems++;
            snprintf(msg, sizeof msg, "oid %llu: bad key or record header (%zu bytes)",
                     (unsigned long long)c.holder, v.mv_size);
            if (report) report(ud, c.holder, 0, OST_ECORRUPT, msg);
            continue;
        }
        ost_value cls;
        int crc = ost__class_of_id(st, c.t, cid, &cls);
        if (crc) {
            c.problems++;
            snprintf(msg, sizeof msg, "oid %llu: class id %u is not in the class table",
                     (unsigned long long)c.holder, cid);
            if (report) report(ud, c.holder, 0, OST_ECORRUPT, msg);
            continue;
        }
        ost_decref(cls);
        ost_value val;
        int lrc = ost_load(r, (uint8_t *)v.mv_data + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE, &val, NULL);
        if (lrc) {
            c.problems++;
            snprintf(msg, sizeof msg, "oid %llu: record does not decode: %s",
                     (unsigned long long)c.holder, ost_reader_errmsg(r));
            if (report) report(ud, c.holder, 0, lrc, msg);
            continue;
        }
        if (is_map_cid(mcids, cid)) check_map_record(&c, c.holder, cid == mcids[1], val, &v);
        ost_release(val);
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    for (size_t i = 0; !rc && i < c.nmaps; i++) rc = check_entries(&c, r, &c.maps[i]);
    if (!rc) rc = ost__ent_each_map(st, c.t, check_orphans, &c);
    free(c.maps);
    if (cur) mdb_cursor_close(cur);
    if (c.t) mdb_txn_abort(c.t);
    uv_rwlock_rdunlock(&st->maplock);
    ost_reader_free(r);
    if (records) *records = n;
    if (rc) return ost__st_fail(st, ost__mdb_code(rc), "%s: check: %s", st->shown,
                                ost__mdb_strerror(st, rc));
    if (!root) {
        c.problems++;
        if (report) report(ud, 0, 0, OST_ECORRUPT, "the root (oid 0) is missing");
    }
    if (c.problems)
        return ost__st_fail(st, OST_ECORRUPT, "%s: %llu problems found", st->shown,
                            (unsigned long long)c.problems);
    return 0;
}
