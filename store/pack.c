/* Pack and check: walking records by the persistent references their
 * pickles hold, found by scanning opcodes, without building values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* ---- pack ---------------------------------------------------------------- */

typedef struct {
    uint8_t *reach;   /* bit per oid: reachable */
    uint8_t *scanned; /* bit per oid: references followed */
    uint64_t limit;   /* oids below this */
    uint64_t *stack;
    size_t len, cap;
    bool overflow; /* the stack was full: a rescan pass is needed */
} mark_ctx;

#define MARK_STACK_MAX ((size_t)1 << 20)

static bool bit(const uint8_t *m, uint64_t i) { return m[i >> 3] >> (i & 7) & 1; }
static void set_bit(uint8_t *m, uint64_t i) { m[i >> 3] |= (uint8_t)(1u << (i & 7)); }

static void mark_ref(void *ud, uint64_t oid) {
    mark_ctx *m = ud;
    if (oid >= m->limit || bit(m->reach, oid)) return;
    set_bit(m->reach, oid);
    if (m->len == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *n = cap <= MARK_STACK_MAX ? realloc(m->stack, cap * sizeof *n) : NULL;
        if (!n) {
            m->overflow = true; /* found again by a rescan */
            return;
        }
        m->stack = n;
        m->cap = cap;
    }
    m->stack[m->len++] = oid;
}

static int scan_oid(ost_store *st, MDB_txn *t, mark_ctx *m, uint64_t oid) {
    set_bit(m->scanned, oid);
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(t, st->recs, &k, &v);
    if (rc == MDB_NOTFOUND) return 0; /* dangling: check reports it */
    if (rc) return rc;
    /* a reachable record whose references cannot be read: what it refers
     * to is unknown, so nothing may be removed */
    if (v.mv_size < OST_HDR_SIZE + 2 ||
        ost__scan_pids((uint8_t *)v.mv_data + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE,
                       mark_ref, m))
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: pack: oid %llu does not decode, so what it refers to is "
                            "unknown; nothing was removed (see ost_store_check)",
                            st->path, (unsigned long long)oid);
    return 0;
}

/* One attempt; *mdb_rc gets the LMDB code the attempt ended with, so that
 * the caller can grow the map after MDB_MAP_FULL and try again. */
static int pack_once(ost_store *st, uint64_t *removed, int *mdb_rc) {
    if (removed) *removed = 0;
    if (!st || !st->env) return OST_EINVAL;
    if (st->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: read-only", st->path);
    MDB_txn *t;
    int rc = ost__locked_txn_begin(st, 0, &t);
    if (rc) {
        uv_rwlock_rdunlock(&st->maplock);
        return ost__st_fail(st, ost__mdb_code(rc), "%s: %s", st->path, mdb_strerror(rc));
    }
    mark_ctx m = {0};
    MDB_val k = {8, "next_oid"}, v;
    rc = mdb_get(t, st->meta, &k, &v);
    if (rc || v.mv_size != 8) {
        mdb_txn_abort(t);
        uv_rwlock_rdunlock(&st->maplock);
        return ost__st_fail(st, OST_ECORRUPT, "%s: damaged meta", st->path);
    }
    for (int i = 7; i >= 0; i--) m.limit = m.limit << 8 | ((uint8_t *)v.mv_data)[i];
    size_t bytes = (size_t)((m.limit + 7) / 8);
    m.reach = calloc(bytes ? bytes : 1, 1);
    m.scanned = calloc(bytes ? bytes : 1, 1);
    int code = 0;
    uint64_t gone = 0;
    if (!m.reach || !m.scanned) {
        code = ost__st_fail(st, OST_ENOMEM, "out of memory for %zu-byte bitmaps", bytes);
        goto out;
    }
    mark_ref(&m, 0);
    for (;;) {
        while (m.len && !rc) {
            uint64_t oid = m.stack[--m.len];
            rc = scan_oid(st, t, &m, oid);
        }
        if (rc || !m.overflow) break;
        /* the stack overflowed: follow what was marked but not scanned */
        m.overflow = false;
        for (uint64_t oid = 0; oid < m.limit && !rc; oid++)
            if (bit(m.reach, oid) && !bit(m.scanned, oid)) {
                rc = scan_oid(st, t, &m, oid);
                while (m.len && !rc) rc = scan_oid(st, t, &m, m.stack[--m.len]);
            }
        if (!m.overflow) break;
    }
    if (rc < 0) { /* ours, with its message */
        code = rc;
        goto out;
    }
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->path, mdb_strerror(rc));
        goto out;
    }
    MDB_cursor *cur;
    rc = mdb_cursor_open(t, st->recs, &cur);
    if (!rc) {
        while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
            uint64_t oid = k.mv_size == 8 ? ost__rd_be64(k.mv_data) : UINT64_MAX;
            if (oid < m.limit && bit(m.reach, oid)) continue;
            if ((rc = mdb_cursor_del(cur, 0))) break;
            gone++;
        }
        mdb_cursor_close(cur);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
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
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->path, mdb_strerror(rc));
        goto out;
    }
    rc = mdb_txn_commit(t);
    t = NULL;
    if (rc) code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack commit: %s", st->path, mdb_strerror(rc));
    else if (removed) *removed = gone;
out:
    *mdb_rc = rc;
    if (t) mdb_txn_abort(t);
    uv_rwlock_rdunlock(&st->maplock);
    free(m.reach);
    free(m.scanned);
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
                                st->path, mdb_strerror(grc));
        st->msg[0] = 0;
    }
}

/* ---- check ---------------------------------------------------------------- */

typedef struct {
    ost_store *st;
    MDB_txn *t;
    uint64_t holder;
    ost_check_fn report;
    void *ud;
    uint64_t problems;
} check_ctx;

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
    if (!rc) rc = mdb_cursor_open(c.t, st->recs, &cur);
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
        ost_release(val);
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    if (cur) mdb_cursor_close(cur);
    if (c.t) mdb_txn_abort(c.t);
    uv_rwlock_rdunlock(&st->maplock);
    ost_reader_free(r);
    if (records) *records = n;
    if (rc) return ost__st_fail(st, ost__mdb_code(rc), "%s: check: %s", st->path, mdb_strerror(rc));
    if (!root) {
        c.problems++;
        if (report) report(ud, 0, 0, OST_ECORRUPT, "the root (oid 0) is missing");
    }
    if (c.problems)
        return ost__st_fail(st, OST_ECORRUPT, "%s: %llu problems found", st->path,
                            (unsigned long long)c.problems);
    return 0;
}
