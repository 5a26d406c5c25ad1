/* Pack and check: walking records by the persistent references their
 * pickles hold, found by scanning opcodes, without building values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entries.h"
#include "lmdb/oidset.h"
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
    bool force;         /* OST_PACK_FORCE: go on past damage */
    uint64_t dangling;  /* references to oids without a record */
    uint64_t first_dangling;
    uint64_t damaged;   /* reachable records or entries that did not decode (force) */
} mark_ctx;

#define MARK_STACK_MAX ((size_t)1 << 20)

static void mark_ref(void *ud, uint64_t oid) {
    mark_ctx *m = ud;
    int64_t i = ost__oidset_index(&m->oids, oid);
    if (i < 0) { /* no record: damage may hide it, and what it refers to is unknown */
        if (!m->dangling++) m->first_dangling = oid;
        return;
    }
    if (ost__oidset_set(&m->oids, REACHED, (size_t)i)) return; /* seen */
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
    if (rc == MDB_NOTFOUND) { /* gone since the set was made: cannot be */
        if (!m->dangling++) m->first_dangling = oid;
        return 0;
    }
    if (rc) return rc;
    /* a reachable record whose references cannot be read: what it refers
     * to is unknown, so nothing may be removed */
    uint64_t serial;
    uint32_t cid;
    if (ost__rec_open(st, oid, &v, &serial, &cid) ||
        ost__scan_pids((uint8_t *)v.mv_data + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE,
                       mark_ref, m)) {
        if (m->force) {
            m->damaged++;
            return 0;
        }
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: pack: oid %llu does not decode, so what it refers to is "
                            "unknown; nothing was removed (see ost_store_check)",
                            st->shown, (unsigned long long)oid);
    }
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
            if (m->force && (rc == 0 || rc == OST_ECORRUPT)) {
                m->damaged++;
                continue;
            }
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
static int pack_once(ost_store *st, unsigned flags, uint64_t *removed, int *mdb_rc) {
    if (removed) *removed = 0;
    if (!st || !st->eng) return OST_EINVAL;
    if (!st->env) return ost__lmdb_only(st, "pack");
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
    m.force = flags & OST_PACK_FORCE;
    /* pack trusts what liblmdb reads, and deleting through damaged pages
     * makes the damage worse (liblmdb overflows its heap): the pages are
     * checked first, and damage stops the pack even when forced */
    char first[400];
    rc = ost__walk_first(st, t, true, first, sizeof first);
    if (rc) {
        mdb_txn_abort(t);
        uv_rwlock_rdunlock(&st->maplock);
        if (rc != OST_ECORRUPT) return rc;
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: pack: the store's pages are damaged (%s); nothing was removed: "
                            "'ostore check' lists the damage, 'ostore salvage' copies what is "
                            "intact",
                            st->shown, first);
    }
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
    if (OST__OURS(rc)) { /* ours, with its message */
        code = rc;
        goto out;
    }
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: pack: %s", st->shown,
                            ost__mdb_strerror(st, rc));
        goto out;
    }
    if (m.dangling && !m.force) {
        code = ost__st_fail(st, OST_ECORRUPT,
                            "%s: pack: %llu reference%s to oids without a record (oid %llu%s): "
                            "damage may hide what they refer to, so nothing was removed "
                            "(ost_store_check lists the problems; OST_PACK_FORCE packs anyway)",
                            st->shown, (unsigned long long)m.dangling, m.dangling == 1 ? "" : "s",
                            (unsigned long long)m.first_dangling,
                            m.dangling > 1 ? " and others" : "");
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
            last = ost__rd_le64(lv.mv_data);
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
int ost_store_pack(ost_store *st, uint64_t *removed) { return ost_store_pack_ex(st, 0, removed); }

int ost_store_pack_ex(ost_store *st, unsigned flags, uint64_t *removed) {
    if (flags & ~OST_PACK_FORCE) {
        if (removed) *removed = 0;
        return st ? ost__st_fail(st, OST_EINVAL, "pack: unknown flags 0x%x", flags) : OST_EINVAL;
    }
    for (int tries = 0;; tries++) {
        int mdb_rc = 0;
        int code = pack_once(st, flags, removed, &mdb_rc);
        if (mdb_rc != MDB_MAP_FULL || tries == 16) return code;
        int grc = ost__grow_map(st);
        if (grc)
            return ost__st_fail(st, ost__mdb_code(grc), "%s: pack: cannot grow the map: %s",
                                st->shown, ost__mdb_strerror(st, grc));
        ost__st_clear(st);
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
            char text[160];
            size_t i;
            for (i = 0; i < kl && i < 20; i++) snprintf(text + 2 * i, 3, "%02x", k[i]);
            snprintf(text + 2 * i, 4, "%s", kl > 20 ? "..." : "");
            ost_value kv = ost__mkey_decode(&cm->kind, k, kl);
            ost_buf b = {0};
            if (kv && ost_repr(kv, &b) == 0) snprintf(text, sizeof text, "%.120s", b.data);
            ost_buf_free(&b);
            ost_decref(kv);
            problem(c, cm->oid, OST_ECORRUPT,
                    "map %llu: the entry of key %s is damaged (its checksum does not match its "
                    "bytes)",
                    (unsigned long long)cm->oid, text);
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

/* Page problems go to the check's report, without an oid. */
typedef struct {
    ost_check_fn report;
    void *ud;
    uint64_t n;
    uint64_t records, entries; /* walked through the pages (damaged store) */
    uint64_t format;
} page_ctx;

static void page_problem(void *ud, const ost__pc_problem *p) {
    page_ctx *pc = ud;
    pc->n++;
    if (!pc->report) return;
    char msg[400];
    ost__problem_text(p, msg, sizeof msg);
    pc->report(pc->ud, UINT64_MAX, 0, OST_ECORRUPT, msg);
}

/* A damaged store: the records and entries that the pages still reach,
 * read through the walker (never liblmdb), each checked against its
 * checksum. */
static int each_record(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                       uint64_t pg) {
    page_ctx *pc = ud;
    (void)pg;
    pc->records++;
    uint64_t oid = kl == 8 ? ost__rd_be64(k) : UINT64_MAX;
    bool ok = kl == 8 && vl >= OST_HDR_SIZE + 2 &&
              (pc->format < 3 || ost__rec_crc_ok(oid, v, vl));
    if (!ok) {
        pc->n++;
        char msg[160];
        snprintf(msg, sizeof msg, "oid %llu: damaged record (%s)", (unsigned long long)oid,
                 kl != 8 ? "its key is not an oid" : "its checksum does not match its bytes");
        if (pc->report) pc->report(pc->ud, oid, 0, OST_ECORRUPT, msg);
    }
    return 0;
}

static int each_entry(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                      uint64_t pg) {
    page_ctx *pc = ud;
    (void)pg;
    pc->entries++;
    bool ok = kl >= 8 && (pc->format >= 3 ? ost__ent_crc_ok(k, kl, v, vl) : vl >= 8);
    if (!ok) {
        pc->n++;
        char msg[160];
        snprintf(msg, sizeof msg, "map %llu: a damaged entry (its checksum does not match its bytes)",
                 (unsigned long long)(kl >= 8 ? ost__rd_be64(k) : UINT64_MAX));
        if (pc->report) pc->report(pc->ud, kl >= 8 ? ost__rd_be64(k) : UINT64_MAX, 0, OST_ECORRUPT,
                                   msg);
    }
    return 0;
}

/* The previous snapshot: liblmdb opens it after a crash that cut the last
 * commit short, so its meta page and pages are checked too. Its pages are
 * not kept for this reader: a writer may reuse them during the walk, so
 * what it finds counts only when no commit happened meanwhile. */
typedef struct {
    page_ctx *pc;
    int meta;
    struct {
        char msg[300];
    } p[64];
    size_t n, more;
} prev_ctx;

static void prev_problem(void *ud, const ost__pc_problem *p) {
    prev_ctx *x = ud;
    if (x->n < sizeof x->p / sizeof *x->p)
        snprintf(x->p[x->n++].msg, sizeof x->p[0].msg, "the previous snapshot (meta page %d): %s",
                 x->meta, p->msg);
    else
        x->more++;
}

static int check_previous(ost_store *st, ost__pc *pc, uint64_t txnid, page_ctx *pcx) {
    uint64_t id;
    int other = -1;
    for (int i = 0; i < 2; i++)
        if (ost__pc_meta_txnid(pc, i, &id) == 0 && id != txnid) other = i;
    if (other < 0 || ost__pc_use_meta(pc, other)) return 0;
    MDB_envinfo before, after;
    mdb_env_info(st->env, &before);
    prev_ctx *x = calloc(1, sizeof *x);
    if (!x) return OST_ENOMEM;
    x->pc = pcx;
    x->meta = other;
    int rc = ost__pc_walk(pc, prev_problem, x, NULL);
    mdb_env_info(st->env, &after);
    if (rc == OST_ECORRUPT && before.me_last_txnid == after.me_last_txnid) {
        for (size_t i = 0; i < x->n; i++) {
            pcx->n++;
            if (pcx->report) pcx->report(pcx->ud, UINT64_MAX, 0, OST_ECORRUPT, x->p[i].msg);
        }
        if (x->more) {
            char m[96];
            snprintf(m, sizeof m, "the previous snapshot: %zu more problems", x->more);
            pcx->n++;
            if (pcx->report) pcx->report(pcx->ud, UINT64_MAX, 0, OST_ECORRUPT, m);
        }
    } else {
        rc = 0; /* a commit came between: the old pages may have been reused */
    }
    free(x);
    return rc == OST_ENOMEM ? rc : rc ? OST_ECORRUPT : 0;
}

int ost_store_check(ost_store *st, ost_check_fn report, void *ud, uint64_t *records) {
    if (records) *records = 0;
    if (!st || !st->eng) return OST_EINVAL;
    if (!st->env) return ost__lmdb_only(st, "check");
    ost_reader *r = ost_reader_new();
    if (!r) return OST_ENOMEM;
    check_ctx c = {.st = st, .report = report, .ud = ud};
    ost_reader_set_persistent_load(r, check_load, &c);
    int rc = ost__locked_txn_begin(st, MDB_RDONLY, &c.t);
    /* first the pages, with checks of our own: liblmdb trusts them */
    if (!rc) {
        page_ctx pcx = {.report = report, .ud = ud, .format = st->format};
        ost__pc *pc = NULL;
        int wrc = ost__walk_snapshot(st, c.t, false, page_problem, &pcx, &pc);
        if (wrc == OST_ECORRUPT && pc) {
            ost__pc_each(pc, "records", each_record, NULL, &pcx);
            ost__pc_each(pc, "mapents", each_entry, NULL, &pcx);
        }
        if (wrc == 0 && pc) {
            /* the current snapshot is sound: liblmdb may read it; problems of
             * the previous one are counted with the rest */
            int prc = check_previous(st, pc, mdb_txn_id(c.t), &pcx);
            if (prc == OST_ENOMEM) wrc = prc;
            c.problems += pcx.n;
        }
        ost__pc_close(pc);
        if (wrc) {
            mdb_txn_abort(c.t);
            uv_rwlock_rdunlock(&st->maplock);
            ost_reader_free(r);
            if (records) *records = pcx.records;
            if (wrc != OST_ECORRUPT) return wrc;
            return ost__st_fail(st, OST_ECORRUPT,
                                "%s: %llu problems found: the store's pages are damaged, so "
                                "records were only checked against their checksums ('ostore "
                                "salvage' copies what is intact)",
                                st->shown, (unsigned long long)pcx.n);
        }
    }
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
        int dmg = k.mv_size != 8 ? -1 : ost__rec_open(st, c.holder, &v, &serial, &cid);
        if (dmg) {
            c.problems++;
            if (dmg < 0)
                snprintf(msg, sizeof msg, "a record under a %zu-byte key (oids have 8)", k.mv_size);
            else
                snprintf(msg, sizeof msg, "oid %llu: damaged record (%s)",
                         (unsigned long long)c.holder, ost__damage_text(dmg));
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
