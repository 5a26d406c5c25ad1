/* Connections: the object cache with ghosts, read snapshots, commit and
 * abort. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_internal.h"
#include "../serializer/opcodes.h"

static __thread ost_conn *t_conns; /* connections opened by this thread */
static uv_once_t g_hook_once = UV_ONCE_INIT;
static int pers_activate(ost_value obj);
static int pers_changed(ost_value obj);
static void pers_freed(ost_value obj);
/* the store's side of serializer/internal.h's ost__pers_ops */
static const ost__pers_ops g_pers = {pers_activate, pers_changed, pers_freed};
static void set_hook(void) { ost__pers_register(&g_pers); } /* once: no data race */

typedef struct {
    uv_async_t async;
    ost_conn *c;
    ost_commit_cb cb;
    void *ud;
} async_req;

static void commit_done(ost_conn *c, int rc);

/* ---- the cache -------------------------------------------------------------- */

/* The entry at index i. */
static inline ost__pent *ent(const ost_conn *c, size_t i) {
    return &c->echunks[i >> OST__ECHUNK_BITS][i & (OST__ECHUNK - 1)];
}

/* The oid table: linear probing over entry indexes (+ 1), at most 4/5
 * full. The oid's Fibonacci hash (oids are dense and sequential: the
 * multiply spreads neighbours apart) picks the home slot from its high
 * half, scaled to the table (which need not be a power of 2: sizes step by
 * 4, 5, 6, 7 times a power of 2, so a table is at least 64% full when it
 * has just grown); bits of its low half above the index bits are kept in
 * the slot, so a probe past another oid's slot rarely reads that entry
 * (a cache miss each). Deletion shifts the rest of the cluster back.
 * A cached object costs 4 / load bytes here (5 to 6.25), and its entry
 * 24: an object finds its own entry through its pidx. */
static inline uint64_t oid_hash(uint64_t oid) { return oid * 0x9E3779B97F4A7C15ULL; }

static inline size_t oid_home(const ost_conn *c, uint64_t h) {
    return (size_t)(((h >> 32) * (uint64_t)c->oidcap) >> 32);
}

static inline uint32_t oid_tag(const ost_conn *c, uint64_t h) { return (uint32_t)h & ~c->oididx; }

static uint32_t *oid_slot(ost_conn *c, uint64_t oid) {
    uint64_t h = oid_hash(oid);
    uint32_t tag = oid_tag(c, h);
    size_t i = oid_home(c, h);
    for (;;) {
        uint32_t *s = &c->oidtab[i], v = *s;
        if (!v || ((v & ~c->oididx) == tag && ent(c, (v & c->oididx) - 1)->oid == oid)) return s;
        if (++i == c->oidcap) i = 0;
    }
}

/* Points oid's slot at entry i. */
static void oid_set(ost_conn *c, uint64_t oid, size_t i) {
    *oid_slot(c, oid) = oid_tag(c, oid_hash(oid)) | (uint32_t)(i + 1);
}

/* The next table size: 4, 5, 6, 7, 8 (= 4 of the next power) ... times
 * a power of 2. */
static size_t next_cap(size_t n) {
    unsigned k = 0;
    while ((n >> k) > 7) k++;
    return ((n >> k) + 1) << k;
}

/* Points the slots of an empty oid table at every entry. */
static void oidtab_fill(ost_conn *c) {
    for (size_t i = 0; i < c->nents; i++) oid_set(c, ent(c, i)->oid, i);
}

/* Makes the oid table take at least one more entry. */
static int oidtab_grow(ost_conn *c) {
    size_t n = c->oidtab ? next_cap(c->oidcap) : 512;
    size_t max = n / 5 * 4;
    /* an index + 1 up to max and the home's scaling take 32 bits */
    if (n > ((size_t)1 << 32) || max >= UINT32_MAX) return OST_ENOMEM;
    uint32_t *t = calloc(n, sizeof *t);
    if (!t) return OST_ENOMEM;
    unsigned bits = 1;
    while (bits < 32 && ((uint64_t)1 << bits) <= max) bits++;
    free(c->oidtab);
    c->oidtab = t;
    c->oidcap = n;
    c->oidmax = max;
    c->oididx = bits >= 32 ? UINT32_MAX : ((uint32_t)1 << bits) - 1;
    oidtab_fill(c);
    return 0;
}

static ost__pent *find_oid(ost_conn *c, uint64_t oid) {
    uint32_t s = *oid_slot(c, oid);
    return s ? ent(c, (s & c->oididx) - 1) : NULL;
}

/* Whether the cache holds oid with its record read: a ghost a reference
 * made (OST__SERIAL_UNREAD) still needs its record, for a get and to load. */
static bool holds_record(ost_conn *c, uint64_t oid) {
    ost__pent *e = find_oid(c, oid);
    return e && e->serial != OST__SERIAL_UNREAD;
}

static inline uint32_t *pidx_of(ost_value obj) { return &((ost_inst_obj *)obj)->pidx; }

/* The record bytes the cache's byte limit counts for obj: kept in the
 * instance (32 bits; a larger record counts as 4 GiB - 1). */
static inline size_t pbytes(ost_value obj) { return ((ost_inst_obj *)obj)->pbytes; }
static inline void set_pbytes(ost_value obj, size_t n) {
    ((ost_inst_obj *)obj)->pbytes = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static ost__pent *find_obj(ost_conn *c, ost_value obj) {
    if (!ost__is_heap(obj) || !ost__pers_is(obj, OST__F_PERSISTENT) ||
        OST__O(obj)->type != OST_T_INSTANCE)
        return NULL;
    uint32_t p = *pidx_of(obj);
    /* an object of another connection has no entry here at its index */
    return p && p <= c->nents && ent(c, p - 1)->obj == obj ? ent(c, p - 1) : NULL;
}

/* Adds obj (a new reference is taken) under oid. */
static int cache_add(ost_conn *c, ost_value obj, uint64_t oid, uint64_t serial) {
    if (ost__type(obj) != OST_T_INSTANCE) return OST_EINVAL;
    if (c->nents >= UINT32_MAX - 1) return OST_ENOMEM; /* pidx is 32 bits */
    if (c->nents == c->nechunks * OST__ECHUNK) {
        if (ost__reserve((void **)&c->echunks, &c->capechunks, c->nechunks + 1,
                         sizeof *c->echunks, 8))
            return OST_ENOMEM;
        ost__pent *chunk = malloc(OST__ECHUNK * sizeof *chunk);
        if (!chunk) return OST_ENOMEM;
        c->echunks[c->nechunks++] = chunk;
    }
    if (c->nents + 1 > c->oidmax && oidtab_grow(c)) return OST_ENOMEM;
    size_t i = c->nents;
    *ent(c, i) = (ost__pent){oid, serial, ost_incref(obj)};
    ((ost_inst_obj *)obj)->pbytes = 0;
    c->nents++;
    oid_set(c, oid, i);
    *pidx_of(obj) = (uint32_t)(i + 1);
    ost__pers_mark(obj, OST__F_PERSISTENT, 0);
    return 0;
}

/* Removes oid's slot from the oid table, moving back what follows it in
 * its cluster. */
static void oidtab_del(ost_conn *c, uint64_t oid) {
    uint32_t *s = oid_slot(c, oid);
    if (!*s) return;
    size_t i = (size_t)(s - c->oidtab), j = i;
    *s = 0;
    for (;;) {
        if (++j == c->oidcap) j = 0;
        uint32_t v = c->oidtab[j];
        if (!v) return;
        size_t h = oid_home(c, oid_hash(ent(c, (v & c->oididx) - 1)->oid));
        /* v may fill the hole at i unless its home lies cyclically in (i, j] */
        if (i <= j ? (h > i && h <= j) : (h > i || h <= j)) continue;
        c->oidtab[i] = v;
        c->oidtab[j] = 0;
        i = j;
    }
}

static void old_drop(ost_conn *c, uint64_t oid);

/* Removes entry i (swapping the last one in) and drops the cache's
 * reference; tab: and its slot in the oid table (else the caller
 * rebuilds the table: oidtab_rebuild). */
static void entry_remove(ost_conn *c, size_t i, bool tab) {
    ost__pent e = *ent(c, i);
    if (tab) oidtab_del(c, e.oid);
    size_t last = --c->nents;
    if (i != last) {
        ost__pent *d = ent(c, i);
        *d = *ent(c, last);
        if (tab) oid_set(c, d->oid, i);
        *pidx_of(d->obj) = (uint32_t)(i + 1);
    }
    *pidx_of(e.obj) = 0;
    old_drop(c, e.oid);
    /* a ghost stays one: it can no longer load, and no connection may
     * store it as a new object with an empty state */
    ost__pers_mark(e.obj, 0, OST__F_PERSISTENT | OST__F_CHANGED);
    ost_release(e.obj);
}

static void cache_remove(ost_conn *c, size_t i) { entry_remove(c, i, true); }

/* ---- the records read of objects whose class resolves conflicts ---------- */

/* A record kept in c->olds: the state a transaction read, which a
 * conflict's resolver gets as "old" (ost_class_def.resolve). */
typedef struct {
    uint64_t serial;
    uint32_t cid;
    size_t len;
    uint8_t pickle[];
} ost__old;

/* Forgets the record kept for oid, if any. */
static void old_drop(ost_conn *c, uint64_t oid) {
    if (!c->olds.count) return;
    ost__ptr_slot *s = ost__ptrtab_find(&c->olds, (uintptr_t)(oid + 1));
    if (!s->key) return;
    free((void *)(uintptr_t)s->val);
    ost__ptrtab_del(&c->olds, (uintptr_t)(oid + 1));
}

/* Keeps record v, just loaded into obj, when obj's class resolves
 * conflicts. Without memory the record is not kept: a conflict on obj
 * then stays a conflict, as for a class without a resolver. */
static void old_keep(ost_conn *c, uint64_t oid, ost_value obj, const ost__recview *v) {
    if (!ost__class_resolver(ost_instance_class(obj), NULL)) return;
    old_drop(c, oid);
    ost__old *o = malloc(sizeof *o + v->len);
    if (!o) return;
    *o = (ost__old){v->serial, v->cid, v->len};
    memcpy(o->pickle, v->pickle, v->len);
    if ((c->olds.mask || !ost__ptrtab_init(&c->olds, 8)) &&
        !ost__ptrtab_put(&c->olds, (uintptr_t)(oid + 1), (uint64_t)(uintptr_t)o))
        return;
    free(o);
}

/* Frees every record kept. */
static void olds_free(ost_conn *c) {
    for (size_t i = 0; c->olds.mask && i <= c->olds.mask; i++)
        if (c->olds.slots[i].key) free((void *)(uintptr_t)c->olds.slots[i].val);
    ost__ptrtab_free(&c->olds);
}

/* Gives the package the record oid's transaction read at serial read,
 * when one is kept: a conflict on it can be resolved. 0 or OST_ENOMEM. */
static int old_give(ost_conn *c, ost__pkg *p, uint64_t oid, uint64_t read, ost_value obj) {
    if (!c->olds.count || !read) return 0;
    ost__ptr_slot *s = ost__ptrtab_find(&c->olds, (uintptr_t)(oid + 1));
    const ost__old *o = s->key ? (const ost__old *)(uintptr_t)s->val : NULL;
    if (!o || o->serial != read) return 0;
    return ost__pkg_resv(p, ost_instance_class(obj), o->cid, o->pickle, o->len);
}

/* Refills the oid table from the entries (after entry_remove without it). */
static void oidtab_rebuild(ost_conn *c) {
    memset(c->oidtab, 0, c->oidcap * sizeof *c->oidtab);
    oidtab_fill(c);
}

/* Drops the state of obj: it becomes a ghost. */
static void ghostify(ost_value obj) {
    if (ost__pers_is(obj, OST__F_GHOST)) return;
    ost__pers_mark(obj, OST__F_GHOST, OST__F_CHANGED);
    if (ost__slotted(obj)) {
        ost__slots_clear(obj);
    } else {
        ost_inst_obj *in = (ost_inst_obj *)obj;
        ost_value v = in->state;
        in->state = OST_NONE;
        ost_release(v);
    }
}

/* ---- snapshots -------------------------------------------------------------- */

/* The store's failure, as the engine said it in the store's message, as
 * the connection's. */
static int sfail(ost_conn *c, int rc) {
    return ost__c_fail(c, rc, "%s", ost_store_errmsg(c->st));
}

static void end_snapshot(ost_conn *c) {
    if (c->snap_open) {
        c->st->ops->snap_end(c->sess);
        c->snap_open = false;
    }
}

/* changes' callback: commit `serial` changed oid. An object whose state
 * the cache holds from that commit or a later one (its own commit, most
 * often: a connection need not read back what it wrote) stays. */
static void invalidate_one(void *ud, uint64_t oid, uint64_t serial) {
    ost_conn *c = ud;
    ost__pent *e = find_oid(c, oid);
    if (e && e->serial < serial && !ost__pers_is(e->obj, OST__F_CHANGED)) ghostify(e->obj);
}

/* Makes the connection forget objects other commits changed since it last
 * looked, using the engine's commit log; all unchanged objects if the log
 * has a gap (a pack trimmed it). */
static int apply_invalidations(ost_conn *c, uint64_t last) {
    if (last <= c->seen_serial) return 0;
    bool gap = false;
    int rc = c->st->ops->changes(c->sess, c->seen_serial, last, invalidate_one, c, &gap);
    if (rc) return rc;
    if (gap)
        for (size_t i = 0; i < c->nents; i++) {
            ost_value o = ent(c, i)->obj;
            if (!ost__pers_is(o, OST__F_CHANGED)) ghostify(o);
        }
    c->seen_serial = last;
    return 0;
}

/* After a pack (meta.low moved): objects of the cache whose record pack
 * removed leave the cache as ghosts, which commits refuse to refer to
 * rather than store a dangling reference. Snapshot pinned. */
static void drop_packed(ost_conn *c, uint64_t low) {
    if (low == c->low_seen) return;
    c->low_seen = low;
    for (size_t i = c->nents; i-- > 0;) {
        ost__pent *e = ent(c, i);
        if (!e->serial || ost__pers_is(e->obj, OST__F_CHANGED)) continue;
        ost__recview r;
        if (c->st->ops->get(c->sess, e->oid, &r) != OST_ENOTFOUND) continue;
        ghostify(e->obj);
        cache_remove(c, i);
    }
}

/* How open_snapshot opens: snap_begin, snap_renew (the open snapshot
 * ends in the same engine call), or snap_adopt (the engine's view after
 * the connection's commit). */
enum { SNAP_BEGIN, SNAP_RENEW, SNAP_ADOPT };

/* Opens the snapshot as mode says, pins it and, at a transaction's start,
 * applies invalidations. On failure nothing is open or pinned; except
 * that SNAP_ADOPT returns 1, with nothing changed, when the engine has no
 * view after commit `serial`. */
static int open_snapshot(ost_conn *c, int mode, uint64_t serial) {
    const ost__engine_ops *ops = c->st->ops;
    ost__snapinfo si;
    int rc = mode == SNAP_ADOPT    ? ops->snap_adopt(c->sess, serial, c->seen_serial, &si)
             : mode == SNAP_RENEW ? ops->snap_renew(c->sess, &si)
                                  : ops->snap_begin(c->sess, &si);
    if (mode == SNAP_ADOPT && rc == OST_ENOTFOUND) return 1;
    c->snap_open = false;
    if (rc) return ost__c_fail(c, rc, "cannot start a read transaction: %s",
                               ost_store_errmsg(c->st));
    c->snap_open = true;
    c->snap_gen++; /* data read from earlier snapshots is gone */
    if ((rc = ops->pin(c->sess))) return sfail(c, rc);
    (void)ops->snap_moved(c->sess);
    if (!c->at_boundary) {
        c->snap_moved = true; /* reopened inside a transaction: newer data */
        return 0;
    }
    c->at_boundary = false;
    c->txn_serial = si.last_serial;
    c->snap_moved = false;
    rc = apply_invalidations(c, si.last_serial);
    if (rc) {
        ops->unpin(c->sess);
        return ost__c_fail(c, rc, "reading the commit log: %s", ost_store_errmsg(c->st));
    }
    drop_packed(c, si.low);
    return 0;
}

/* Pins the transaction's snapshot, opening it first if it is not open.
 * Invalidations are applied only when the snapshot starts a transaction:
 * a snapshot reopened inside one (after a loader, or when the engine
 * reopened it: LMDB's map resize) must not turn objects the caller is
 * using into ghosts; the next boundary applies them. On success the
 * caller unpins; on failure nothing is pinned. */
static int pin(ost_conn *c) {
    const ost__engine_ops *ops = c->st->ops;
    if (c->snap_open) {
        int rc = ops->pin(c->sess);
        if (rc) return sfail(c, rc);
        if (ops->snap_moved(c->sess)) {
            c->snap_moved = true; /* newer data; views read before are gone */
            c->snap_gen++;
        }
        return 0;
    }
    return open_snapshot(c, SNAP_BEGIN, 0);
}

static void unpin(ost_conn *c) { c->st->ops->unpin(c->sess); }

/* ---- loading ---------------------------------------------------------------- */

static const ost__recview *pf_get(const ost_conn *c, uint64_t oid);

static int get_record(ost_conn *c, uint64_t oid, ost__recview *r) {
    const ost__recview *pv = c->pf ? pf_get(c, oid) : NULL;
    if (pv) {
        *r = *pv; /* read ahead by ost_prefetch, in this pinned snapshot */
        return 0;
    }
    if (c->hint_gen == c->snap_gen && c->hint_oid == oid && c->hint.pickle) {
        *r = c->hint; /* read in this snapshot (get_locked, ost__conn_hint) */
        return 0;
    }
    int rc = c->st->ops->get(c->sess, oid, r);
    return rc ? sfail(c, rc) : 0;
}

/* ---- class versions (format 4) -------------------------------------------------
 *
 * A class-table entry named `Name(f1,f2,f3)` is a version of class Name:
 * its records' states are tuples, item i the value of field fi. The
 * connection keeps, per version's class id, the field names and where
 * each goes in the current class: slot[i] is the slot of fi (a declared
 * field, or the field an alias of the class renames fi to), or -1 when the
 * current class does not declare it (the value is then kept by name, as a
 * dict state's unknown name is: ost_instance_extra). */
#define FAST_MAX 32 /* load_fast's stack: records of more fields go the general way */
typedef struct ost__cver {
    uint32_t n;
    bool direct;      /* every field has a slot: load_fast may read it */
    ost_value *names; /* n str references */
    int32_t *slot;
    char text[]; /* module.Name(f1,f2), for messages */
} ost__cver;

static void cver_free(ost__cver *v) {
    if (!v) return;
    for (uint32_t i = 0; i < v->n; i++) ost_decref(v->names[i]);
    free(v->names);
    free(v->slot);
    free(v);
}

/* The slot of field name f[fl] in cls's instances, through its aliases; -1
 * when cls declares no such field (or is no class with fields). */
static int32_t field_slot(ost_value cls, const char *f, size_t fl) {
    ost__klass *k = cls && ost__type(cls) == OST_T_GLOBAL ? ost__klass_of(cls) : NULL;
    if (!k) return -1;
    for (size_t i = 0; i < k->nfields; i++) {
        size_t l;
        const char *d = ost_data(k->fields[i], &l);
        if (l == fl && memcmp(d, f, fl) == 0) return (int32_t)i;
    }
    for (size_t a = 0; a < k->naliases; a++) {
        size_t l;
        const char *d = ost_data(k->alias_names[a], &l);
        if (l == fl && memcmp(d, f, fl) == 0) return (int32_t)k->alias_to[a];
    }
    return -1;
}

/* The version a class-table entry's name names, read against class cls;
 * *out NULL for a class's own entry. 0, OST_ENOMEM, or OST_ECORRUPT for
 * a version whose field list is malformed (an empty name). */
static int cver_parse(const ost__classview *cv, ost_value cls, ost__cver **out) {
    *out = NULL;
    const char *nm = cv->name;
    size_t nl = cv->nlen;
    const char *open = nl ? memchr(nm, '(', nl) : NULL;
    if (!open || nm[nl - 1] != ')') return 0;
    const char *p = open + 1, *end = nm + nl - 1;
    uint32_t n = p == end ? 0 : 1;
    for (const char *q = p; q < end; q++) n += *q == ',';
    ost__cver *v = calloc(1, sizeof *v + cv->mlen + nl + 2);
    if (!v) return OST_ENOMEM;
    memcpy(v->text, cv->module, cv->mlen);
    v->text[cv->mlen] = '.';
    memcpy(v->text + cv->mlen + 1, nm, nl);
    v->names = calloc(n ? n : 1, sizeof *v->names);
    v->slot = calloc(n ? n : 1, sizeof *v->slot);
    if (!v->names || !v->slot) {
        cver_free(v);
        return OST_ENOMEM;
    }
    while (v->n < n) {
        const char *q = memchr(p, ',', (size_t)(end - p));
        if (!q) q = end;
        if (q == p) {
            cver_free(v);
            return OST_ECORRUPT;
        }
        if (!(v->names[v->n] = ost_str(p, (size_t)(q - p)))) {
            cver_free(v);
            return OST_ENOMEM;
        }
        v->slot[v->n++] = field_slot(cls, p, (size_t)(q - p));
        p = q + 1;
    }
    v->direct = n <= FAST_MAX;
    for (uint32_t i = 0; i < n; i++) v->direct = v->direct && v->slot[i] >= 0;
    *out = v;
    return 0;
}

/* The class of class id cid (a new reference), and in *ver (when not
 * NULL; borrowed from the connection) the class version it names, or
 * NULL. An id never changes its meaning, so the connection keeps what it
 * found: looking it up costs a read of the class table and of the
 * registry for every ghost made. */
static int class_ver_of(ost_conn *c, uint32_t cid, ost_value *cls, ost__cver **ver) {
    if (cid < c->ncls_by_id && c->cls_by_id[cid]) {
        *cls = ost_incref(c->cls_by_id[cid]);
        if (ver) *ver = c->ver_by_id[cid];
        return 0;
    }
    ost__classview cv;
    int rc = c->st->ops->class_get(c->sess, cid, &cv);
    if (rc == OST_ENOTFOUND) return ost__c_fail(c, OST_ECORRUPT, "class id %u: not in the class table", cid);
    if (rc) return sfail(c, rc);
    if ((rc = ost__class_value(c->st, &cv, cls))) return ost__c_fail(c, rc, "out of memory");
    ost__cver *v;
    if ((rc = cver_parse(&cv, *cls, &v))) {
        ost_decref(*cls);
        *cls = 0;
        return rc == OST_ENOMEM ? ost__c_fail(c, rc, "out of memory")
                                : ost__c_fail(c, rc, "class id %u: a class version with an "
                                              "empty field name: %.*s", cid, (int)cv.nlen, cv.name);
    }
    /* a version must be kept to be used: a class alone need not be */
    if (cid >= 65536 && !v) {
        if (ver) *ver = NULL;
        return 0;
    }
    if (cid >= c->ncls_by_id) {
        size_t was = c->ncls_by_id, vcap = was;
        if (ost__reserve((void **)&c->ver_by_id, &vcap, (size_t)cid + 1, sizeof *c->ver_by_id, 16) ||
            ost__reserve((void **)&c->cls_by_id, &c->ncls_by_id, vcap, sizeof *c->cls_by_id, 16)) {
            cver_free(v); /* not kept, found again next time */
            if (v) {
                ost_decref(*cls);
                *cls = 0;
                return ost__c_fail(c, OST_ENOMEM, "out of memory");
            }
            if (ver) *ver = NULL;
            return 0;
        }
        if (vcap < c->ncls_by_id) { /* both arrays cover ncls_by_id entries */
            if (ost__reserve((void **)&c->ver_by_id, &vcap, c->ncls_by_id, sizeof *c->ver_by_id, 16)) {
                c->ncls_by_id = was; /* what both arrays cover (cls_by_id is only bigger) */
                cver_free(v);
                ost_decref(*cls);
                *cls = 0;
                return ost__c_fail(c, OST_ENOMEM, "out of memory");
            }
        }
        memset(c->cls_by_id + was, 0, (c->ncls_by_id - was) * sizeof *c->cls_by_id);
        memset(c->ver_by_id + was, 0, (c->ncls_by_id - was) * sizeof *c->ver_by_id);
    }
    c->cls_by_id[cid] = ost_incref(*cls);
    c->ver_by_id[cid] = v;
    if (ver) *ver = v;
    return 0;
}

static int class_of(ost_conn *c, uint32_t cid, ost_value *cls) {
    return class_ver_of(c, cid, cls, NULL);
}

/* ---- the fast path of positional records ------------------------------
 * The writer makes a positional record a flat tuple of immediates, text,
 * references (two ints, TUPLE2, BINPERSID: the pair pid) and lists of
 * them. load_fast reads that subset straight into an instance's slots:
 * no reader stack, no state tuple, no persistent_load round trip, no pid
 * tuple. Anything else (another opcode, a memo, a nested tuple, more than
 * FAST_MAX values, text that is not UTF-8, a pid it cannot use, no
 * memory) makes it return FAST_NO with the object untouched: the record
 * is then read by the general reader, which also words any error. Both
 * make the same values. */
enum { FAST_NO = 1 };

static int ghost_of(ost_conn *c, uint64_t oid, uint32_t cid, ost_value *obj);

/* Reads positional record data[len] of class version v into obj, an
 * instance of v's class with slots and no setstate (v->direct: every
 * field has a slot). 0, or FAST_NO (nothing changed: read it the general
 * way). maplock held. */
static int load_fast(ost_conn *c, ost_value obj, const ost__cver *v, const uint8_t *p,
                     size_t len) {
    const uint8_t *end = p + len, *q, *r;
    ost_value st[FAST_MAX];
    uint32_t sp = 0, mark[2], nm = 0;
    if (len < 4 || p[0] != OP_PROTO || p[1] < 2 || p[1] > 5) return FAST_NO;
    p += 2;
    for (;;) {
        if (p >= end) goto no;
        int op = *p;
        ost_value x;
        int64_t a;
        size_t n;
        switch (op) {
        case OP_BININT1:
        case OP_BININT2:
        case OP_BININT:
        case OP_LONG1: {
            uint64_t oid;
            uint32_t cid;
            ost_value o;
            if ((r = ost__flat_ref(p, end, &oid, &cid))) {
                if (ghost_of(c, oid, cid, &o)) goto no;
                x = ost_incref(o);
                p = r;
                break;
            }
            if (!(q = ost__flat_int(p, end, &a))) goto no;
            /* an int as the general reader makes it */
            x = op == OP_LONG1 ? ost_int_from_bytes(p + 2, p[1]) : ost__small(a);
            if (!x) goto no;
            p = q;
            break;
        }
        case OP_NONE: x = OST_NONE, p++; break;
        case OP_NEWTRUE: x = OST_TRUE, p++; break;
        case OP_NEWFALSE: x = OST_FALSE, p++; break;
        case OP_BINFLOAT: {
            if (end - p < 9) goto no;
            uint64_t bits = ost__rd_be64(p + 1);
            double d;
            memcpy(&d, &bits, 8);
            if (!(x = ost_float(d))) goto no;
            p += 9;
            break;
        }
        case OP_SHORT_BINUNICODE:
        case OP_SHORT_BINBYTES:
            if (end - p < 2 || (size_t)(end - p - 2) < (n = p[1])) goto no;
            x = op == OP_SHORT_BINUNICODE ? ost_str((const char *)p + 2, n) : ost_bytes(p + 2, n);
            if (!x) goto no; /* not UTF-8: the general reader says so */
            p += 2 + n;
            break;
        case OP_BINUNICODE:
        case OP_BINBYTES:
            if (end - p < 5 || (size_t)(end - p - 5) < (n = ost__rd_le32(p + 1))) goto no;
            x = op == OP_BINUNICODE ? ost_str((const char *)p + 5, n) : ost_bytes(p + 5, n);
            if (!x) goto no;
            p += 5 + n;
            break;
        case OP_EMPTY_LIST:
            if (!(x = ost_list_new(0))) goto no;
            p++;
            break;
        case OP_MARK:
            if (nm == 2) goto no;
            mark[nm++] = sp;
            p++;
            continue;
        case OP_APPEND:
        case OP_APPENDS: {
            uint32_t base;
            if (!ost__flat_append_at(op, sp, mark, nm, &base)) goto no;
            ost_list_obj *l = (ost_list_obj *)st[base - 1];
            if (ost__type(st[base - 1]) != OST_T_LIST || ost__list_reserve(l, sp - base)) goto no;
            memcpy(l->items + l->len, st + base, (sp - base) * sizeof *st);
            l->len += sp - base;
            sp = base;
            nm -= op == OP_APPENDS;
            p++;
            continue;
        }
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3:
        case OP_TUPLE: {
            /* only the state itself: the whole stack, then STOP, the end */
            if (sp != v->n || !ost__flat_tuple_ends(op, p, end, sp, mark, nm)) goto no;
            ost_slots_obj *so = (ost_slots_obj *)obj;
            for (uint32_t i = 0; i < sp; i++) {
                ost_value old = so->slots[v->slot[i]];
                so->slots[v->slot[i]] = st[i];
                ost_decref(old);
            }
            return 0;
        }
        default: goto no;
        }
        if (sp == FAST_MAX) {
            ost_decref(x);
            goto no;
        }
        st[sp++] = x;
    }
no:
    while (sp) ost_decref(st[--sp]);
    return FAST_NO;
}

int ost__conn_fast_ref(ost_conn *c, const void *data, size_t len, ost_value *out) {
    uint64_t oid;
    uint32_t cid;
    ost_value o;
    if (!ost__flat_lone_ref(data, len, &oid, &cid) || ghost_of(c, oid, cid, &o)) return FAST_NO;
    *out = ost_incref(o);
    return 0;
}

/* Reads a positional record (its class id names version v of class
 * vcls) into ghost obj: the state tuple's item i goes to the slot of v's
 * field i, straight, when obj is an instance of vcls (whose slots v's map
 * was made for), which declares fields and takes no setstate; otherwise
 * (and for a field the class no longer declares) by name, as a dict state
 * would. OST_ECORRUPT when the state is no tuple of v's length. */
static int load_positional(ost_conn *c, uint64_t oid, ost_value obj, ost_value vcls,
                           const ost__cver *v, const void *data, size_t len) {
    ost__klass *k = ost__slotted(obj) && ost_instance_class(obj) == vcls
                        ? ost__klass_of(vcls) : NULL;
    if (k && !k->def.setstate && v->direct && load_fast(c, obj, v, data, len) == 0) return 0;
    ost_value t;
    int rc = ost_load(c->r, data, len, &t, NULL);
    if (rc) {
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg[0] ? c->msg : ost_reader_errmsg(c->r));
        return ost__c_fail(c, rc, "oid %llu: record does not decode: %s", (unsigned long long)oid,
                           inner);
    }
    if (ost__type(t) != OST_T_TUPLE || ost_len(t) != v->n) {
        size_t tn = ost__type(t) == OST_T_TUPLE ? ost_len(t) : 0;
        const char *what = ost_type_name(ost__type(t));
        rc = ost__type(t) == OST_T_TUPLE
                 ? ost__c_fail(c, OST_ECORRUPT,
                               "oid %llu: damaged record: its state is a tuple of %zu items, but "
                               "its class version %s lists %u fields",
                               (unsigned long long)oid, tn, v->text, v->n)
                 : ost__c_fail(c, OST_ECORRUPT,
                               "oid %llu: damaged record: its state is a %s, but its class "
                               "version %s needs a tuple of %u fields",
                               (unsigned long long)oid, what, v->text, v->n);
        ost_release(t);
        return rc;
    }
    ost_tuple_obj *to = (ost_tuple_obj *)t;
    if (k && !k->def.setstate) {
        ost_slots_obj *so = (ost_slots_obj *)obj;
        for (uint32_t i = 0; i < v->n && !rc; i++) {
            if (v->slot[i] >= 0) {
                ost_value old = so->slots[v->slot[i]];
                so->slots[v->slot[i]] = ost_incref(to->items[i]);
                ost_decref(old);
            } else
                rc = ost__slots_put(obj, v->names[i], to->items[i]);
        }
        ost_decref(t);
        return rc ? ost__c_fail(c, rc, "out of memory") : 0;
    }
    /* by name: a dict state, as the record would have been written */
    ost_value d = ost_dict_new();
    for (uint32_t i = 0; d && i < v->n; i++)
        if (ost_dict_set(d, ost_incref(v->names[i]), ost_incref(to->items[i]))) {
            ost_decref(d);
            d = 0;
        }
    ost_decref(t);
    if (!d) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    rc = ost__apply_state(c->r, obj, d);
    if (rc) {
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg[0] ? c->msg : ost_reader_errmsg(c->r));
        return ost__c_fail(c, rc, "oid %llu: record does not decode: %s", (unsigned long long)oid,
                           inner);
    }
    return 0;
}

/* The cached object for oid, or a new ghost of the record's class. A
 * ghost a reference made (its record not read yet) is returned once its
 * record is found: a get promises an object that is stored. */
static int get_locked(ost_conn *c, uint64_t oid, ost_value *obj) {
    ost__pent *e = find_oid(c, oid);
    if (e && e->serial != OST__SERIAL_UNREAD) {
        *obj = e->obj;
        return 0;
    }
    ost__recview v;
    int rc = get_record(c, oid, &v);
    if (rc) return rc;
    if (e) {
        c->hint_oid = oid; /* its activation follows, often */
        c->hint = v;
        c->hint_gen = c->snap_gen;
        *obj = e->obj;
        return 0;
    }
    /* a get is often followed by the activation of the same object */
    c->hint_oid = oid;
    c->hint = v;
    c->hint_gen = c->snap_gen;
    ost_value cls;
    rc = class_of(c, v.cid, &cls);
    if (rc) {
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg);
        return ost__c_fail(c, rc, "oid %llu: %s", (unsigned long long)oid, inner);
    }
    uint64_t serial = v.serial;
    ost_value inst = ost__instance_new_unset(cls); /* a ghost: no defaults until it loads */
    if (!inst) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    ost__pers_mark(inst, OST__F_GHOST, 0);
    rc = cache_add(c, inst, oid, serial);
    ost_decref(inst);
    if (rc) return ost__c_fail(c, rc, "out of memory");
    *obj = inst;
    return 0;
}

int ost__conn_class_of(ost_conn *c, uint32_t cid, ost_value *cls) {
    return class_of(c, cid, cls);
}

int ost__conn_get_locked(ost_conn *c, uint64_t oid, ost_value *obj) {
    return get_locked(c, oid, obj);
}

/* Takes a live object written by a bulk loader into the cache. */
int ost__conn_adopt(ost_conn *c, ost_value obj, uint64_t oid) {
    int rc = pin(c);
    if (rc) return rc;
    ost__recview v;
    rc = get_record(c, oid, &v);
    if (!rc && !find_oid(c, oid)) rc = cache_add(c, obj, oid, v.serial);
    unpin(c);
    return rc;
}

int ost_conn_get(ost_conn *c, uint64_t oid, ost_value *obj) {
    if (obj) *obj = 0;
    if (!c || !obj) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    int rc = pin(c);
    if (rc) return rc;
    rc = get_locked(c, oid, obj);
    unpin(c);
    return rc;
}

/* Whether classes a and b are the same class: the same value, or globals
 * of the same module and name (a class the registry does not know is a
 * new global per class id). */
static bool same_class(ost_value a, ost_value b) {
    if (a == b) return true;
    size_t ml, nl, ml2, nl2;
    const char *m = ost_data(ost_global_module(a), &ml), *n = ost_data(ost_global_name(a), &nl);
    const char *m2 = ost_data(ost_global_module(b), &ml2), *n2 = ost_data(ost_global_name(b), &nl2);
    return m && n && m2 && n2 && ml == ml2 && nl == nl2 && !memcmp(m, m2, ml) && !memcmp(n, n2, nl);
}

/* The ghost of oid for a reference that names its class id: no read of
 * its record. The record is read, and its class checked against cid's,
 * when the ghost loads (activate_locked). A class id whose class is not a
 * persistent class of the registry is not trusted: a class renamed (its
 * records rewritten under the new name, the alias dropped) leaves
 * references naming the old one, so the record is read for the class
 * (get_locked), as for a reference of format 3. */
static int ghost_of(ost_conn *c, uint64_t oid, uint32_t cid, ost_value *obj) {
    ost__pent *e = find_oid(c, oid);
    if (e) {
        *obj = e->obj;
        return 0;
    }
    ost_value cls;
    int rc = class_of(c, cid, &cls);
    if (rc) {
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg);
        return ost__c_fail(c, rc, "reference to oid %llu: %s", (unsigned long long)oid, inner);
    }
    if (!ost_class_is_persistent(cls)) {
        ost_decref(cls);
        return get_locked(c, oid, obj);
    }
    ost_value inst = ost__instance_new_unset(cls); /* steals cls; a ghost: no defaults */
    if (!inst) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    ost__pers_mark(inst, OST__F_GHOST, 0);
    /* serial unknown until it loads; not 0, which marks a new object */
    rc = cache_add(c, inst, oid, OST__SERIAL_UNREAD);
    ost_decref(inst);
    if (rc) return ost__c_fail(c, rc, "out of memory");
    *obj = inst;
    return 0;
}

/* The reader's persistent_load: a pid is an oid of this store, as the
 * tuple (oid, class id) that format 4 writes (ghost_of: the record is not
 * read) or, in records written before it, as an int (get_locked: the
 * record is read for its class). */
static int pers_load(void *ud, ost_value pid, ost_value *obj) {
    ost_conn *c = ud;
    int64_t oid, cid = 0;
    ost_value o;
    int rc;
    if (ost_typeof(pid) == OST_T_TUPLE && ost_len(pid) == 2) {
        if (ost_int_value(ost_item(pid, 0), &oid) || oid < 0 ||
            ost_int_value(ost_item(pid, 1), &cid) || cid <= 0 || cid > UINT32_MAX)
            return ost__c_fail(c, OST_ECORRUPT,
                               "persistent id is a pair but not (oid, class id)");
        rc = ghost_of(c, (uint64_t)oid, (uint32_t)cid, &o);
    } else {
        if (ost_int_value(pid, &oid) || oid < 0)
            return ost__c_fail(c, OST_ECORRUPT, "persistent id is a %s, not an oid",
                               ost_type_name(ost_typeof(pid)));
        rc = get_locked(c, (uint64_t)oid, &o);
    }
    if (rc) return rc;
    *obj = ost_incref(o);
    return 0;
}

int ost__conn_ref_pid(ost_conn *c, ost_value obj, uint64_t oid, ost_value *pid) {
    ost_value cls = ost_instance_class(obj);
    uint32_t cid = 0;
    unsigned i;
    for (i = 0; i < 4 && c->ref_cls[i] != cls; i++) {}
    if (i < 4) cid = c->ref_cid[i];
    else {
        ost__st_clear(c->st);
        int rc = ost__class_id_cached(c->st, cls, &cid);
        if (rc) {
            const char *why = ost_store_errmsg(c->st);
            return ost__c_fail(c, rc, "reference to oid %llu: its class: %s",
                               (unsigned long long)oid, why[0] ? why : ost_strerror(rc));
        }
        i = c->ref_next++ & 3;
        ost_decref(c->ref_cls[i]);
        c->ref_cls[i] = ost_incref(cls);
        c->ref_cid[i] = cid;
    }
    ost_value t = ost_tuple_new(2);
    if (!t) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    ost_tuple_set(t, 0, ost_int((int64_t)oid));
    ost_tuple_set(t, 1, ost_int((int64_t)cid));
    *pid = t;
    return 0;
}

/* Loads the state of ghost e->obj from the snapshot. maplock held. */
static int activate_locked(ost_conn *c, ost__pent *e) {
    ost_value obj = e->obj;
    int rc;
    if (!ost__pers_is(obj, OST__F_GHOST)) return 0; /* pin() may not ghostify it */
    ost__recview v;
    if (c->hint_gen == c->snap_gen && c->hint_oid == e->oid) {
        v = c->hint; /* read and checked by get_locked in this snapshot */
    } else if ((rc = get_record(c, e->oid, &v)))
        return rc;
    uint64_t serial = v.serial;
    uint64_t oid = e->oid;
    if (e->serial == OST__SERIAL_UNREAD) {
        /* made from a reference's class id: the record must agree */
        ost_value cls;
        if ((rc = class_of(c, v.cid, &cls))) {
            char inner[sizeof c->msg];
            ost__fmt(inner, sizeof inner, "%s", c->msg);
            return ost__c_fail(c, rc, "oid %llu: %s", (unsigned long long)oid, inner);
        }
        bool same = same_class(cls, ost_instance_class(obj));
        ost_decref(cls);
        if (!same) {
            ost_value m = ost_global_module(ost_instance_class(obj));
            ost_value n = ost_global_name(ost_instance_class(obj));
            return ost__c_fail(c, OST_ECORRUPT,
                               "oid %llu: a reference made it a %s.%s, its record is of "
                               "class id %u, another class",
                               (unsigned long long)oid, ost_data(m, NULL), ost_data(n, NULL),
                               v.cid);
        }
    }
    c->msg[0] = 0;
    /* While its state loads, the object is no ghost (a setstate callback
     * that uses the public setters would load it again, without end) and
     * is not tracked (what the callback sets is no change): the CHANGED
     * flag keeps the setters from reporting to the connection. */
    ost_value vcls;
    ost__cver *ver;
    if ((rc = class_ver_of(c, v.cid, &vcls, &ver))) {
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg);
        return ost__c_fail(c, rc, "oid %llu: %s", (unsigned long long)oid, inner);
    }
    uint8_t was_changed = ost__pers_is(obj, OST__F_CHANGED) ? OST__F_CHANGED : 0;
    ost__pers_mark(obj, OST__F_CHANGED, OST__F_GHOST);
    if (ver) {
        rc = load_positional(c, oid, obj, vcls, ver, v.pickle, v.len);
        ost_decref(vcls);
        ost__pers_mark(obj, was_changed, OST__F_CHANGED);
        if (rc) {
            ghostify(obj);
            ost__pers_mark(obj, was_changed, 0);
            return rc;
        }
        /* fields the record's version lacks (added since): their defaults,
         * whichever way it was read (load_fast, the general reader) */
        if (ost__slotted(obj)) ost__slots_defaults(obj);
        e = find_oid(c, oid);
        e->serial = serial;
        set_pbytes(e->obj, v.len + OST_HDR_SIZE);
        old_keep(c, oid, obj, &v);
        return 0;
    }
    ost_decref(vcls);
    rc = ost_load_state(c->r, obj, v.pickle, v.len);
    ost__pers_mark(obj, was_changed, OST__F_CHANGED);
    if (rc) {
        ghostify(obj); /* drops what a callback set before failing */
        ost__pers_mark(obj, was_changed, 0);
        /* a hook's message (missing oid) is more precise than the reader's */
        char inner[sizeof c->msg];
        ost__fmt(inner, sizeof inner, "%s", c->msg[0] ? c->msg : ost_reader_errmsg(c->r));
        return ost__c_fail(c, rc, "oid %llu: record does not decode: %s",
                           (unsigned long long)oid, inner);
    }
    e = find_oid(c, oid); /* loading may have grown the cache */
    e->serial = serial;
    set_pbytes(e->obj, v.len + OST_HDR_SIZE);
    old_keep(c, oid, obj, &v);
    return 0;
}

/* activate_locked of e from record view rv (read in this pinned
 * snapshot), or, when rv is NULL, from a read of its own. */
static int activate_from(ost_conn *c, ost__pent *e, const ost__recview *rv) {
    if (rv) {
        c->hint_oid = e->oid;
        c->hint = *rv;
        c->hint_gen = c->snap_gen;
    }
    return activate_locked(c, e);
}

int ost_activate(ost_conn *c, ost_value obj) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    ost__pent *e = find_obj(c, obj);
    if (!e) return ost__c_fail(c, OST_EINVAL, "not a persistent object of this connection");
    if (!ost__pers_is(obj, OST__F_GHOST)) return 0;
    int rc = pin(c);
    if (rc) return rc;
    e = find_obj(c, obj);
    if (e) rc = activate_locked(c, e);
    unpin(c);
    return rc;
}

/* ---- prefetch -------------------------------------------------------------
 * ost_prefetch reads the records of the ghosts it is given with get_many,
 * then, from their pickles (ost__scan_pids, no values built), the records
 * of the objects they refer to that the cache does not hold: loading a
 * state makes a ghost per such reference, and making a ghost reads its
 * record for the class. Both sets go into a table sorted by oid that
 * get_record consults (c->pf), so the states load as ost_activate loads
 * them, without a round trip each. The table stays for the rest of the
 * snapshot (its gen): the records read ahead for references serve the
 * next prefetch (of those very objects, in a walk) and the reads that
 * make ghosts (a map cursor's values). The views stay valid as long as
 * the snapshot (engine.h: PostgreSQL keeps its results until snap_end;
 * LMDB's map stays while the snapshot does, and a reopened one counts as
 * a new gen, as for the one-record hint). */

typedef struct {
    uint64_t oid;
    ost__recview v;
} pf_rec;

struct ost__pf {
    pf_rec *r;
    size_t n, cap;
    size_t sorted; /* r[0, sorted) is in oid order */
    bool nomem;    /* pf_add failed */
    uint64_t gen;  /* the snapshot (c->snap_gen) the views belong to */
};

/* Records kept read ahead at most: past it, a prefetch starts afresh. */
#define PF_KEEP 200000

/* The most oids one get_many asks for. */
#define PF_CHUNK 8192

static int pf_add(void *ud, uint64_t oid, const ost__recview *v) {
    struct ost__pf *p = ud;
    if (ost__reserve((void **)&p->r, &p->cap, p->n + 1, sizeof *p->r, 64)) {
        p->nomem = true;
        return OST_ENOMEM;
    }
    p->r[p->n++] = (pf_rec){oid, *v};
    return 0;
}

static int pf_cmp(const void *a, const void *b) {
    uint64_t x = ((const pf_rec *)a)->oid, y = ((const pf_rec *)b)->oid;
    return x < y ? -1 : x > y;
}

/* Puts p's records in oid order. The records added since the last sort
 * (the tail) are sorted alone, and only if they are not in order already
 * (a fetch of sorted oids gives them sorted on both engines), then merged
 * with the sorted head: sorting the whole table again at each call cost a
 * prefetch of 1,000 records about a tenth of its time. */
static void pf_sort(struct ost__pf *p) {
    size_t h = p->sorted, t = p->n - h;
    if (!t) return;
    pf_rec *tail = p->r + h;
    size_t i = 1;
    while (i < t && tail[i - 1].oid <= tail[i].oid) i++;
    if (i < t) qsort(tail, t, sizeof *tail, pf_cmp);
    if (h && p->r[h - 1].oid > tail[0].oid) {
        pf_rec *tmp = malloc(t * sizeof *tmp);
        if (!tmp) {
            qsort(p->r, p->n, sizeof *p->r, pf_cmp);
        } else {
            /* merge from the end: the head's records move up into place */
            memcpy(tmp, tail, t * sizeof *tmp);
            size_t a = h, b = t, k = p->n;
            while (b) {
                if (a && p->r[a - 1].oid > tmp[b - 1].oid) p->r[--k] = p->r[--a];
                else p->r[--k] = tmp[--b];
            }
            free(tmp);
        }
    }
    p->sorted = p->n;
}

static const ost__recview *pf_find(const struct ost__pf *p, uint64_t oid) {
    /* a binary search without a branch on the comparison (the compiler
     * makes it a conditional move): the table's random lookups took a
     * mispredicted branch at nearly every step, and a prefetch of 1,000
     * looks up each oid four or five times */
    size_t n = p->sorted;
    if (!n) return NULL;
    const pf_rec *b = p->r;
    while (n > 1) {
        size_t half = n / 2;
        b = b[half].oid < oid ? b + half : b;
        n -= half;
    }
    b += b->oid < oid; /* the first record not below oid, or the end */
    return b < p->r + p->sorted && b->oid == oid ? &b->v : NULL;
}

/* The record of oid read ahead in the connection's snapshot, or NULL. */
static const ost__recview *pf_get(const ost_conn *c, uint64_t oid) {
    return c->pf->gen == c->snap_gen ? pf_find(c->pf, oid) : NULL;
}

/* Reads the records of oids[0, n) into p, PF_CHUNK at a time. */
static int pf_fetch(ost_conn *c, struct ost__pf *p, const uint64_t *oids, size_t n) {
    for (size_t i = 0; i < n; i += PF_CHUNK) {
        size_t k = n - i < PF_CHUNK ? n - i : PF_CHUNK;
        int rc = c->st->ops->get_many(c->sess, oids + i, k, pf_add, p);
        if (rc && p->nomem)
            return ost__c_fail(c, rc, "%s: out of memory", c->st->shown);
        if (rc) return sfail(c, rc);
    }
    return 0;
}

/* The oids the prefetched states refer to, to read ahead too. */
typedef struct {
    ost_conn *c;
    uint64_t *oids;
    size_t n, cap;
    bool nomem;
} pf_refs;

static void pf_ref(void *ud, uint64_t oid) {
    pf_refs *w = ud;
    if (w->nomem || holds_record(w->c, oid) || pf_find(w->c->pf, oid)) return;
    if (ost__reserve((void **)&w->oids, &w->cap, w->n + 1, sizeof *w->oids, 256)) {
        w->nomem = true; /* read them one by one later instead */
        return;
    }
    w->oids[w->n++] = oid;
}

/* Reads ahead the records the states in p refer to (one level), for the
 * ghosts their loading makes. Failing to is no failure: get_record then
 * reads them one at a time, and reports what is wrong with them then. */
static void pf_fetch_refs(ost_conn *c, struct ost__pf *p, const uint64_t *oids, size_t n) {
    pf_refs w = {c, NULL, 0, 0, false};
    for (size_t i = 0; i < n && !w.nomem; i++) {
        const ost__recview *v = pf_find(p, oids[i]);
        if (v) (void)ost__scan_pids(v->pickle, v->len, pf_ref, &w);
    }
    if (w.n) {
        size_t u = ost__sort_unique(w.oids, w.n);
        for (size_t i = 0; i < u; i += PF_CHUNK) {
            size_t k = u - i < PF_CHUNK ? u - i : PF_CHUNK;
            if (c->st->ops->get_many(c->sess, w.oids + i, k, pf_add, p)) break;
        }
        pf_sort(p);
    }
    free(w.oids);
}

/* The connection's read-ahead table, ready for `more` records in this
 * snapshot (emptied when it belongs to an earlier one or would grow past
 * PF_KEEP); NULL when out of memory. Snapshot pinned. */
static struct ost__pf *pf_table(ost_conn *c, size_t more) {
    struct ost__pf *p = c->pf;
    if (!p && !(p = c->pf = calloc(1, sizeof *p))) return NULL;
    if (p->gen != c->snap_gen || p->n + more > PF_KEEP) p->n = p->sorted = 0; /* views gone */
    p->gen = c->snap_gen;
    p->nomem = false;
    return p;
}

bool ost__conn_holds(ost_conn *c, uint64_t oid) { return find_oid(c, oid) != NULL; }

void ost__conn_hint(ost_conn *c, uint64_t oid, const ost__recview *r) {
    if (holds_record(c, oid)) return;
    c->hint_oid = oid;
    c->hint = *r;
    c->hint_gen = c->snap_gen;
}

void ost__conn_readahead(ost_conn *c, uint64_t *oids, size_t n) {
    struct ost__pf *p = pf_table(c, n);
    if (!p) return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!holds_record(c, oids[i]) && !pf_find(p, oids[i])) oids[k++] = oids[i];
    k = ost__sort_unique(oids, k);
    for (size_t i = 0; i < k; i += PF_CHUNK) {
        size_t m = k - i < PF_CHUNK ? k - i : PF_CHUNK;
        if (c->st->ops->get_many(c->sess, oids + i, m, pf_add, p)) break;
    }
    pf_sort(p);
}

int ost_conn_get_many(ost_conn *c, const uint64_t *oids, size_t n, ost_value *objs) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (!n) return 0;
    if (!oids || !objs)
        return ost__c_fail(c, OST_EINVAL, "%s: ost_conn_get_many: %s is NULL", c->st->shown,
                           oids ? "objs" : "oids");
    memset(objs, 0, n * sizeof *objs);
    int rc = pin(c);
    if (rc) return rc;
    ost__recview *rv = c->st->ops->flags & OST__ENG_LOCAL_READS ? malloc(n * sizeof *rv) : NULL;
    if (rv) {
        /* A read costs no round trip: the objects are made (every oid
         * checked first, as below), then loaded from the records read for
         * them, without the read-ahead table, whose building and searches
         * made 1,000 random oids slower than as many single reads on LMDB
         * (0.8x to 0.9x in bench_engines). The views stay valid while the
         * snapshot is pinned. */
        for (size_t i = 0; i < n && !rc; i++) {
            rv[i].pickle = NULL;
            ost__pent *e = find_oid(c, oids[i]);
            if (e) objs[i] = e->obj;
            else if (!(rc = get_locked(c, oids[i], &objs[i]))) rv[i] = c->hint;
        }
        if (rc) memset(objs, 0, n * sizeof *objs);
        for (size_t i = 0; i < n && !rc; i++) {
            ost__pent *e = find_obj(c, objs[i]);
            if (!e || !ost__pers_is(objs[i], OST__F_GHOST)) continue;
            /* from the record get_locked read, if it read one */
            rc = activate_from(c, e, rv[i].pickle ? &rv[i] : NULL);
        }
        free(rv);
        unpin(c);
        return rc;
    }
    uint64_t *want = malloc(n * sizeof *want);
    struct ost__pf *p = want ? pf_table(c, n) : NULL;
    if (!p) {
        free(want);
        unpin(c);
        return ost__c_fail(c, OST_ENOMEM, "%s: out of memory", c->st->shown);
    }
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        if (!holds_record(c, oids[i]) && !pf_find(p, oids[i])) want[nw++] = oids[i];
    /* in oid order: the records come back sorted (pf_sort then has
     * nothing to do), LMDB reads neighbours by a cursor step, and an oid
     * asked twice is read once */
    nw = ost__sort_unique(want, nw);
    size_t before = p->n;
    if ((rc = pf_fetch(c, p, want, nw))) p->n = before;
    free(want);
    if (!rc) {
        pf_sort(p);
        /* the ghosts, from the records read ahead (a missing oid goes to
         * the engine again, which says so) */
        for (size_t i = 0; i < n && !rc; i++) rc = get_locked(c, oids[i], &objs[i]);
        if (rc) memset(objs, 0, n * sizeof *objs);
    }
    unpin(c);
    if (!rc) rc = ost_prefetch(c, objs, n);
    return rc;
}

typedef struct {
    uint64_t oid;
    size_t g;
} pf_order;

static int pf_order_cmp(const void *a, const void *b) {
    uint64_t x = ((const pf_order *)a)->oid, y = ((const pf_order *)b)->oid;
    return x < y ? -1 : x > y;
}

/* ost_prefetch where reads cost no round trip (LMDB): the records of the
 * ghosts objs[at[g]] (oids[g]) are read in oid order, so that the
 * engine's last leaf serves the next oid without a descent, and kept as
 * views (valid while the snapshot is pinned); then the ghosts load in
 * objs' order. No read-ahead table: building and searching it cost a
 * tenth of the demo's walk. As ost_prefetch's contract: a record missing
 * or damaged loads nothing. */
static int prefetch_local(ost_conn *c, ost_value *objs, const uint64_t *oids, const size_t *at,
                          size_t ng) {
    ost__recview *rv = malloc(ng * sizeof *rv);
    pf_order *ord = NULL;
    if (!rv) return ost__c_fail(c, OST_ENOMEM, "%s: out of memory", c->st->shown);
    size_t s = 1;
    while (s < ng && oids[s - 1] <= oids[s]) s++;
    if (s < ng) {
        if (!(ord = malloc(ng * sizeof *ord))) {
            free(rv);
            return ost__c_fail(c, OST_ENOMEM, "%s: out of memory", c->st->shown);
        }
        for (size_t g = 0; g < ng; g++) ord[g] = (pf_order){oids[g], g};
        qsort(ord, ng, sizeof *ord, pf_order_cmp);
    }
    int rc = 0;
    for (size_t k = 0; k < ng && !rc; k++) {
        size_t g = ord ? ord[k].g : k;
        rc = get_record(c, oids[g], &rv[g]);
        if (rc == OST_ENOTFOUND)
            rc = ost__c_fail(c, rc, "%s: oid %llu: no such object", c->st->shown,
                             (unsigned long long)oids[g]);
    }
    for (size_t g = 0; g < ng && !rc; g++) {
        ost__pent *e = find_obj(c, objs[at[g]]);
        if (e) rc = activate_from(c, e, &rv[g]);
    }
    free(ord);
    free(rv);
    return rc;
}

int ost_prefetch(ost_conn *c, ost_value *objs, size_t n) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (!n) return 0;
    if (!objs) return ost__c_fail(c, OST_EINVAL, "%s: ost_prefetch: objs is NULL", c->st->shown);
    int rc = pin(c); /* applies invalidations: ghosts are known after it */
    if (rc) return rc;
    uint64_t *oids = NULL, *want = NULL;
    size_t *at = NULL, ng = 0, nw = 0;
    for (size_t i = 0; i < n; i++) {
        ost__pent *e = find_obj(c, objs[i]);
        if (!e) {
            if (ost__is_heap(objs[i]) && ost__pers_is(objs[i], OST__F_PERSISTENT)) {
                rc = ost__c_fail(c, OST_EINVAL,
                                 "%s: ost_prefetch: objs[%zu] is a persistent object of "
                                 "another connection; nothing was loaded",
                                 c->st->shown, i);
                goto out;
            }
            continue; /* not persistent: nothing to load */
        }
        if (!ost__pers_is(objs[i], OST__F_GHOST)) continue;
        if (!oids && (!(oids = malloc(n * sizeof *oids)) || !(at = malloc(n * sizeof *at)) ||
                      !(want = malloc(n * sizeof *want)))) {
            rc = ost__c_fail(c, OST_ENOMEM, "%s: out of memory", c->st->shown);
            goto out;
        }
        oids[ng] = e->oid;
        at[ng++] = i;
    }
    if (!ng) goto out;
    if (c->st->ops->flags & OST__ENG_LOCAL_READS) {
        rc = prefetch_local(c, objs, oids, at, ng);
        goto out;
    }
    struct ost__pf *p = pf_table(c, ng);
    if (!p) {
        rc = ost__c_fail(c, OST_ENOMEM, "%s: out of memory", c->st->shown);
        goto out;
    }
    for (size_t g = 0; g < ng; g++) /* read ahead already (a reference of an earlier one) */
        if (!pf_find(p, oids[g])) want[nw++] = oids[g];
    nw = ost__sort_unique(want, nw); /* as ost_conn_get_many's */
    size_t before = p->n;
    if ((rc = pf_fetch(c, p, want, nw))) {
        p->n = before;
        goto out;
    }
    pf_sort(p);
    for (size_t g = 0; g < ng; g++)
        if (!pf_find(p, oids[g])) {
            rc = ost__c_fail(c, OST_ENOTFOUND, "%s: oid %llu: no such object", c->st->shown,
                             (unsigned long long)oids[g]);
            goto out;
        }
    if (!(c->st->ops->flags & OST__ENG_LOCAL_READS)) pf_fetch_refs(c, p, oids, ng);
    for (size_t g = 0; g < ng && !rc; g++) {
        ost__pent *e = find_obj(c, objs[at[g]]);
        if (e) rc = activate_locked(c, e);
    }
out:
    unpin(c);
    free(oids);
    free(want);
    free(at);
    return rc;
}

bool ost_is_ghost(ost_value obj) {
    return ost__is_heap(obj) && ost__pers_is(obj, OST__F_GHOST);
}

static int note_changed(ost_conn *c, ost_value obj) {
    if (ost__pers_is(obj, OST__F_CHANGED)) return 0;
    if (ost__reserve((void **)&c->changed, &c->capchanged, c->nchanged + 1,
                     sizeof *c->changed, 64))
        return OST_ENOMEM;
    c->changed[c->nchanged++] = obj;
    ost__pers_mark(obj, OST__F_CHANGED, 0);
    return 0;
}

/* Who else forgets a freed persistent object: the bulk loader
 * (store/loader.c, above this file) registers its table of live loaded
 * objects when it opens its first loader (ost__conn_on_freed); until then
 * a freed object costs one load and a branch here. */
static void (*g_on_freed)(ost_value obj);

void ost__conn_on_freed(void (*fn)(ost_value obj)) {
    __atomic_store_n(&g_on_freed, fn, __ATOMIC_RELEASE);
}

/* The value layer's calls (ost__pers_ops): a freed persistent object
 * leaves a bulk loader's queue; a ghost loads its state in the connection
 * that holds it; a change joins that connection's transaction. */
static void pers_freed(ost_value obj) {
    void (*fn)(ost_value) = __atomic_load_n(&g_on_freed, __ATOMIC_ACQUIRE);
    if (fn) fn(obj);
}

static int pers_activate(ost_value obj) {
    for (ost_conn *c = t_conns; c; c = c->tnext) {
        if (!c->st) continue; /* its store closed */
        ost__pent *e = find_obj(c, obj);
        if (!e) continue;
        int rc = pin(c);
        if (!rc) {
            e = find_obj(c, obj);
            if (e) rc = activate_locked(c, e);
            unpin(c);
        }
        /* accessors without a connection tell why through the value
         * message (ost_instance_getattr_ex) */
        if (rc) ost__value_fail(rc, "%s", c->msg);
        return rc;
    }
    return OST_EINVAL;
}

static int pers_changed(ost_value obj) {
    /* a map's record is the store's to write (its count changes by deltas) */
    if (ost__map_class(ost_instance_class(obj))) return 0;
    for (ost_conn *c = t_conns; c; c = c->tnext) {
        if (!c->st) continue; /* its store closed */
        if (find_obj(c, obj)) return note_changed(c, obj);
    }
    return OST_EINVAL;
}

void ost_changed(ost_value obj) {
    if (!ost__is_heap(obj) || ost__type(obj) != OST_T_INSTANCE) return;
    ost__touch(obj);
}

int ost_invalidate(ost_conn *c, ost_value obj) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    ost__pent *e = find_obj(c, obj);
    if (!e) return ost__c_fail(c, OST_EINVAL, "not a persistent object of this connection");
    if (ost__pers_is(obj, OST__F_CHANGED))
        return ost__c_fail(c, OST_EBUSY, "oid %llu has uncommitted changes",
                           (unsigned long long)e->oid);
    ghostify(obj);
    return 0;
}

uint64_t ost_oid(ost_conn *c, ost_value obj) {
    ost__pent *e = c && c->st ? find_obj(c, obj) : NULL;
    return e ? e->oid : UINT64_MAX;
}

/* ---- open and close ------------------------------------------------------ */

int ost_conn_open(ost_store *st, ost_conn **out) {
    if (out) *out = NULL;
    if (!st || !out || !st->eng) return OST_EINVAL;
    ost_conn *c = calloc(1, sizeof *c);
    if (!c) return OST_ENOMEM;
    c->magic = OST__H_CONN;
    if (st->ops->sess_open(st->eng, &c->sess)) {
        free(c);
        return OST_ENOMEM;
    }
    c->st = st;
    c->at_boundary = true;
    c->cache_max = OST_CACHE_SIZE_DEFAULT;
    c->cache_max_bytes = SIZE_MAX;
    c->w = ost_writer_new();
    if (c->w) ost__writer_set_pid_memo(c->w, false); /* docs/format.md, "References" */
    c->r = ost_reader_new();
    c->hooks = ost_txn_hooks_new();
    if (!c->w || !c->r || !c->hooks || oidtab_grow(c) || ost__ptrtab_init(&c->maps, 16)) {
        ost_writer_free(c->w);
        ost_reader_free(c->r);
        ost_txn_hooks_free(c->hooks);
        free(c->oidtab);
        ost__ptrtab_free(&c->maps);
        st->ops->sess_close(c->sess);
        free(c);
        return OST_ENOMEM;
    }
    ost_reader_set_persistent_load(c->r, pers_load, c);
    ost_writer_set_framing(c->w, false); /* records are small: no FRAME */
    if (st->registry) ost_reader_set_registry(c->r, st->registry);
    uv_once(&g_hook_once, set_hook);
    uv_mutex_lock(&st->lock);
    c->next = st->conns;
    st->conns = c;
    uv_mutex_unlock(&st->lock);
    c->tnext = t_conns;
    t_conns = c;
    /* invalidations before this connection existed do not concern it */
    ost__snapinfo si;
    if (st->ops->snap_begin(c->sess, &si) == 0) {
        c->seen_serial = si.last_serial;
        st->ops->snap_end(c->sess);
    }
    *out = c;
    return 0;
}

/* Connections whose store closed before them (ost_store_close): what is
 * left of each is its handle, kept here so that a later ost_conn_close
 * finds valid memory and frees it, as SQLite keeps a zombie handle. */
static uv_mutex_t g_husk_lock;
static uv_once_t g_husk_once = UV_ONCE_INIT;
static ost_conn *g_husks;
static void husk_init(void) { uv_mutex_init(&g_husk_lock); }

/* Takes c out of the list of this thread's connections, if it is there. */
static void thread_forget(ost_conn *c) {
    for (ost_conn **pp = &t_conns; *pp; pp = &(*pp)->tnext)
        if (*pp == c) {
            *pp = c->tnext;
            break;
        }
}

/* Whether the transaction's participant (the maps: c->part) has changes
 * to commit. */
static bool parts_dirty(ost_conn *c) { return c->part && c->part->dirty(c); }

/* The transaction ends (committed or not): cursors and iterators of it
 * become stale (txn_gen), and the participant drops its pending state. */
static void parts_txn_end(ost_conn *c, bool committed) {
    c->txn_gen++;
    if (c->part) c->part->txn_end(c, committed);
}

/* Everything but the handle: the transaction (aborted), the cache, the
 * snapshot, and the place in the store's list. The caller holds no lock. */
static void conn_release(ost_conn *c) {
    if (c->async_pending) { /* wait for it; its callback will not run */
        ost__pkg_wait(c->st, c->pkg);
        ((async_req *)c->pkg->q->async->data)->c = NULL;
        uv_async_send(c->pkg->q->async);
        c->async_pending = false;
        commit_done(c, c->pkg->rc);
    }
    ost_abort(c);
    if (c->part) c->part->free(c);
    ost__ptrtab_free(&c->maps); /* made at open; maps_free frees it too when the maps used it */
    /* the objects stay valid for their holders, as ghosts without a jar */
    for (size_t i = 0; i < c->nents; i++) ghostify(ent(c, i)->obj);
    while (c->nents) cache_remove(c, c->nents - 1);
    ost_store *st = c->st;
    end_snapshot(c);
    st->ops->sess_close(c->sess);
    c->sess = NULL;
    uv_mutex_lock(&st->lock);
    for (ost_conn **pp = &st->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    uv_mutex_unlock(&st->lock);
    c->next = NULL;
}

/* Frees what the connection owns but the handle itself, leaving NULLs
 * (so that it may run twice: a connection its store closed). */
static void conn_free_parts(ost_conn *c) {
    olds_free(c);
    free(c->oidtab);
    c->oidtab = NULL;
    c->oidcap = c->oidmax = 0;
    for (size_t i = 0; i < c->nechunks; i++) free(c->echunks[i]);
    free(c->echunks);
    c->echunks = NULL;
    c->nechunks = c->capechunks = 0;
    free(c->changed);
    ost_writer_free(c->w);
    ost_reader_free(c->r);
    ost_txn_hooks_free(c->hooks);
    ost__pkg_free(c->pkg);
    for (size_t i = 0; i < c->ncls_by_id; i++) {
        ost_decref(c->cls_by_id[i]);
        cver_free(c->ver_by_id[i]);
    }
    free(c->cls_by_id);
    for (unsigned i = 0; i < 4; i++) { /* a store's close frees the parts, and the conn's again */
        ost_decref(c->ref_cls[i]);
        c->ref_cls[i] = 0;
    }
    free(c->ver_by_id);
    c->ver_by_id = NULL;
    if (c->pf) free(c->pf->r);
    free(c->pf);
    c->pf = NULL;
    c->changed = NULL;
    c->nents = c->nchanged = c->capchanged = 0;
    c->w = NULL;
    c->r = NULL;
    c->hooks = NULL;
    c->pkg = NULL;
    c->cls_by_id = NULL;
    c->ncls_by_id = 0;
}

static void conn_free(ost_conn *c) {
    conn_free_parts(c);
    free(c);
}

void ost__conn_detach(ost_conn *c) {
    conn_release(c);
    conn_free_parts(c); /* a handle never closed keeps only itself */
    thread_forget(c); /* when the store closes on the connection's thread */
    c->st = NULL;
    ost__fmt(c->msg, sizeof c->msg, "the connection's store is closed");
    uv_once(&g_husk_once, husk_init);
    uv_mutex_lock(&g_husk_lock);
    c->next = g_husks;
    g_husks = c;
    uv_mutex_unlock(&g_husk_lock);
}

int ost__conn_dead(ost_conn *c) {
    return ost__c_fail(c, OST_EINVAL, "the connection's store is closed: only ost_conn_close "
                                      "and ost_conn_errmsg may be called on it");
}

void ost_conn_close(ost_conn *c) {
    if (!c) return;
    if (!c->st) { /* its store closed first: only the handle is left */
        uv_mutex_lock(&g_husk_lock);
        for (ost_conn **pp = &g_husks; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        uv_mutex_unlock(&g_husk_lock);
        thread_forget(c);
        conn_free(c);
        return;
    }
    conn_release(c);
    thread_forget(c);
    conn_free(c);
}

ost_txn_hooks *ost_conn_hooks(ost_conn *c) { return c && c->st ? c->hooks : NULL; }

/* Starts the next transaction at once, so that objects other commits
 * changed become ghosts now, not when something happens to load: cached
 * objects are used without the connection seeing it. serial: the commit
 * the connection just made (0: none), whose view the engine may hand
 * over (snap_adopt) instead of a new snapshot. If the snapshot cannot
 * open now, the next one applies the invalidations. */
static void begin_txn(ost_conn *c, uint64_t serial) {
    const ost__engine_ops *ops = c->st->ops;
    c->at_boundary = true;
    char keep[sizeof c->msg];
    memcpy(keep, c->msg, sizeof keep);
    int rc = serial && ops->snap_adopt ? open_snapshot(c, SNAP_ADOPT, serial) : 1;
    if (rc == 1) {
        /* an engine that renews a snapshot in one round trip does so */
        bool renew = c->snap_open && ops->snap_renew;
        if (!renew) end_snapshot(c);
        rc = renew ? open_snapshot(c, SNAP_RENEW, 0) : pin(c);
    }
    if (rc) memcpy(c->msg, keep, sizeof keep);
    else unpin(c);
}

void ost_conn_set_cache_size(ost_conn *c, size_t max_objects) {
    if (c) c->cache_max = max_objects ? max_objects : 1;
}

size_t ost_conn_cache_count(const ost_conn *c, size_t *active) {
    if (!c) return 0;
    if (active) {
        *active = 0;
        for (size_t i = 0; i < c->nents; i++)
            *active += !(OST__O(ent(c, i)->obj)->flags & OST__F_GHOST);
    }
    return c->nents;
}

/* At a transaction boundary: beyond the cache size, unchanged objects that
 * only the cache holds are dropped, and others become ghosts. */
static void cache_gc(ost_conn *c) {
    /* nothing to trim, known without a walk: there are no more entries
     * than the limit, so no more loaded ones, and no byte limit */
    if (c->nents <= c->cache_max && c->cache_max_bytes == SIZE_MAX) return;
    if (c->cache_max_bytes == SIZE_MAX) {
        /* no byte limit: drop entries from the end until there are no more
         * than the limit, which bounds the loaded ones too, without a walk
         * of the whole cache (it cost a read of every object's header at
         * every boundary: 11% of a prefetch benchmark's time with 100,000
         * objects cached) */
        /* Many to drop (at least half as many as stay), from a table not
         * far larger than what goes (clearing the table of a cache that
         * once held millions would cost more): the oid table is refilled
         * once, not emptied slot by slot. Each deletion walks its
         * cluster, reading an entry per slot: 14% of bench_store reads'
         * own time, at 1,000 reads and 1,000 cached objects a
         * transaction. */
        size_t excess = c->nents - c->cache_max;
        bool bulk = excess * 2 >= c->cache_max && c->oidcap <= 16 * excess;
        size_t was = c->nents;
        for (size_t i = c->nents; i-- > 0 && c->nents > c->cache_max;) {
            const ost__pent *e = ent(c, i);
            ost_value o = e->obj;
            if (e->oid == 0 || ost__pers_is(o, OST__F_CHANGED)) continue;
            if (OST__O(o)->refcnt == 1) entry_remove(c, i, !bulk);
        }
        if (bulk && c->nents != was) oidtab_rebuild(c);
        if (c->nents <= c->cache_max) return;
    }
    size_t active = 0, bytes = 0;
    for (size_t i = 0; i < c->nents; i++) {
        ost_value o = ent(c, i)->obj;
        if (!ost__pers_is(o, OST__F_GHOST)) {
            active++;
            bytes += pbytes(o);
        }
    }
    if (active <= c->cache_max && bytes <= c->cache_max_bytes && c->nents <= c->cache_max)
        return;
    for (size_t i = c->nents; i-- > 0 && c->nents > c->cache_max;) {
        const ost__pent *e = ent(c, i);
        ost_value o = e->obj;
        if (e->oid == 0 || ost__pers_is(o, OST__F_CHANGED)) continue;
        if (OST__O(o)->refcnt == 1) {
            if (!ost__pers_is(o, OST__F_GHOST)) {
                active--;
                bytes -= pbytes(o);
            }
            cache_remove(c, i);
        }
    }
    for (size_t i = 0; i < c->nents && (active > c->cache_max || bytes > c->cache_max_bytes); i++) {
        const ost__pent *e = ent(c, i);
        ost_value o = e->obj;
        if (e->oid == 0 || ost__pers_is(o, OST__F_CHANGED | OST__F_GHOST)) continue;
        ghostify(o);
        active--;
        bytes -= pbytes(o);
    }
}

void ost_conn_set_cache_bytes(ost_conn *c, size_t max_bytes) {
    if (c) c->cache_max_bytes = max_bytes ? max_bytes : SIZE_MAX;
}

/* ---- the root ------------------------------------------------------------ */

ost_value ost_conn_root(ost_conn *c) {
    ost_value root;
    if (!c || ost_conn_get(c, 0, &root)) return 0;
    if (ost_activate(c, root)) return 0;
    return root;
}

/* The root's 'data' dict (borrowed) in *d, the root in *root: 0, or the
 * failure to load the root (the message says why), OST_ECORRUPT when its
 * state has no such dict. */
static int root_data_rc(ost_conn *c, ost_value *root, ost_value *d) {
    *d = 0;
    int rc = ost_conn_get(c, 0, root);
    if (!rc) rc = ost_activate(c, *root);
    if (rc) return rc;
    ost_value st = ost_instance_state(*root);
    *d = ost__type(st) == OST_T_DICT ? ost_dict_get_c(st, "data") : 0;
    if (ost__type(*d) != OST_T_DICT) {
        *d = 0;
        return ost__c_fail(c, OST_ECORRUPT, "the root's state has no 'data' dict");
    }
    return 0;
}

static ost_value root_data(ost_conn *c, ost_value *root) {
    ost_value d;
    return root_data_rc(c, root, &d) ? 0 : d;
}

int ost_root_set(ost_conn *c, ost_value key, ost_value val) {
    ost_value root, d = 0;
    int rc = !c ? OST_EINVAL : !c->st ? OST_EINVAL : root_data_rc(c, &root, &d);
    if (rc) {
        ost_decref(key);
        ost_decref(val);
        return rc;
    }
    rc = ost_dict_set(d, key, val);
    if (!rc) ost_changed(root);
    return rc;
}

ost_value ost_root_get(ost_conn *c, ost_value key) {
    ost_value root, d = c ? root_data(c, &root) : 0;
    return d ? ost_dict_get(d, key) : 0;
}

int ost_root_set_c(ost_conn *c, const char *key, ost_value val) {
    if (!c || !key) {
        ost_decref(val);
        return c ? ost__c_fail(c, OST_EINVAL, "ost_root_set_c: NULL key") : OST_EINVAL;
    }
    ost_value k = ost_str_c(key);
    if (!k) {
        ost_decref(val);
        return ost__c_fail(c, OST_EINVAL, "ost_root_set_c: the key is not UTF-8 (or no memory)");
    }
    return ost_root_set(c, k, val);
}

ost_value ost_root_get_c(ost_conn *c, const char *key) {
    ost_value root, d = c && key ? root_data(c, &root) : 0;
    return d ? ost_dict_get_c(d, key) : 0;
}

/* ---- commit ---------------------------------------------------------------- */

/* The next oid of the connection's reserved block; blocks double up to
 * 65536 oids, so a connection pays one small reservation commit per block. */
static int new_oid(ost_conn *c, uint64_t *oid) {
    if (c->oid_next == c->oid_end) {
        uint64_t want = c->oid_block ? c->oid_block : 16, first;
        int rc = c->st->ops->reserve_oids(c->st->eng, want, &first);
        if (rc) return ost__c_fail(c, rc, "cannot reserve oids: %s", ost_store_errmsg(c->st));
        c->oid_next = first;
        c->oid_end = first + want;
        c->oid_block = want < 65536 ? want * 2 : want;
    }
    *oid = c->oid_next++;
    return 0;
}

/* The writer's persistent_id during a commit: persistent objects of this
 * connection are referenced by oid; new instances of persistent classes
 * get an oid and join the objects to write. */
static int commit_pid(void *ud, ost_value obj, ost_value *pid) {
    ost_conn *c = ud;
    if (ost__pers_is(obj, OST__F_PERSISTENT | OST__F_GHOST)) {
        ost__pent *e = find_obj(c, obj);
        if (!e)
            return ost__c_fail(c, OST_EINVAL,
                               "an object of another connection (or of a closed one, or "
                               "one that pack removed) is referenced");
        if (e->serial && ost__pkg_ref(c->pkg, e->oid))
            return ost__c_fail(c, OST_ENOMEM, "out of memory");
        return ost__conn_ref_pid(c, obj, e->oid, pid);
    }
    if (!ost_class_is_persistent(ost_instance_class(obj))) return 0;
    uint64_t oid = 0;
    int rc = new_oid(c, &oid);
    if (rc) return rc;
    rc = cache_add(c, obj, oid, 0);
    if (!rc) rc = note_changed(c, obj);
    if (rc) return ost__c_fail(c, rc, "out of memory");
    return ost__conn_ref_pid(c, obj, oid, pid);
}

/* Undoes the oids given during a failed commit. */
static void drop_new(ost_conn *c) {
    while (c->nents > c->nnew_start) {
        ost_value o = ent(c, c->nents - 1)->obj;
        for (size_t i = 0; i < c->nchanged; i++)
            if (c->changed[i] == o) c->changed[i] = 0;
        ost__pers_mark(o, 0, OST__F_CHANGED);
        cache_remove(c, c->nents - 1);
    }
}

/* Serializes every changed object (and the new ones they reach) into the
 * connection's package. */
static int prepare(ost_conn *c) {
    ost_store *st = c->st;
    if (!c->pkg && !(c->pkg = ost__pkg_new())) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    ost__pkg *p = c->pkg;
    ost__pkg_reset(p);
    p->low = c->low_seen;
    p->next_txn = true;
    c->nnew_start = c->nents;
    ost_writer_set_persistent_id(c->w, commit_pid, c, OST_PID_INSTANCES);
    /* map entries first: new objects their values reach join c->changed */
    c->msg[0] = 0;
    int mrc = c->part ? c->part->prepare(c, p) : 0;
    if (mrc) {
        drop_new(c);
        return mrc;
    }
    for (size_t i = 0; i < c->nchanged; i++) {
        ost_value o = c->changed[i];
        if (!o || ost__pers_is(o, OST__F_GHOST)) continue;
        ost__pent *e = find_obj(c, o);
        if (!e) continue;
        uint64_t oid = e->oid, read = e->serial;
        const void *data;
        size_t n;
        c->msg[0] = 0;
        uint32_t cid;
        bool wfail;
        ost__st_clear(st); /* the engine's message, if class_id fails, and no older one */
        int rc = ost__record_state(st, c->w, o, &data, &n, &cid, &wfail);
        if (rc && wfail) {
            if (!c->msg[0]) ost__c_fail(c, rc, "oid %llu: %s", (unsigned long long)oid, ost_writer_errmsg(c->w));
            drop_new(c);
            return rc;
        }
        if (!rc) rc = ost__pkg_add(p, oid, read, cid, data, n);
        if (!rc) rc = old_give(c, p, oid, read, o);
        if (rc) {
            const char *why = ost_store_errmsg(st);
            ost__c_fail(c, rc, "oid %llu: %s", (unsigned long long)oid,
                        why[0] ? why : ost_strerror(rc));
            drop_new(c);
            return rc;
        }
    }
    return 0;
}

/* Appends to a conflict's message what the connection knows: the class
 * of the object, and the commit the transaction's snapshot saw. */
static void conflict_detail(ost_conn *c, uint64_t oid) {
    char cls[160] = "";
    ost__pent *e = oid != UINT64_MAX ? find_oid(c, oid) : NULL;
    ost_value k = e ? ost_instance_class(e->obj) : 0;
    if (k) {
        ost_value m = ost_global_module(k), n = ost_global_name(k);
        snprintf(cls, sizeof cls, "oid %llu is a %s.%s; ", (unsigned long long)oid,
                 m ? ost_data(m, NULL) : "?", n ? ost_data(n, NULL) : "?");
    }
    size_t len = strlen(c->msg);
    ost__fmt(c->msg + len, sizeof c->msg - len,
             " (%sthis transaction's snapshot is commit %llu: abort and retry)", cls,
             (unsigned long long)c->txn_serial);
}

static void commit_done(ost_conn *c, int rc) {
    ost__pkg *p = c->pkg;
    if (rc) c->poisoned = true;
    if (rc) {
        ost__fmt(c->msg, sizeof c->msg, "%s", p->msg[0] ? p->msg : ost_strerror(rc));
        if (rc == OST_ECONFLICT) conflict_detail(c, p->conflict_oid);
        drop_new(c);
        ost_txn_hooks_run_after_commit(c->hooks, false);
        return;
    }
    for (size_t i = 0; i < p->nrecs; i++) {
        ost__pent *e = find_oid(c, p->recs[i].oid);
        if (e) {
            e->serial = p->serial;
            set_pbytes(e->obj, p->recs[i].len + OST_HDR_SIZE);
            /* the state the next transaction reads, for a resolver */
            ost__recview v = {.serial = p->serial, .cid = p->recs[i].cid,
                              .pickle = p->bytes + p->recs[i].off, .len = p->recs[i].len};
            old_keep(c, e->oid, e->obj, &v);
        }
    }
    for (size_t i = 0; i < c->nchanged; i++)
        if (c->changed[i]) ost__pers_mark(c->changed[i], 0, OST__F_CHANGED);
    c->nchanged = 0;
    /* an object whose conflict was resolved was stored merged, not as
     * the cache holds it: it loads again */
    for (size_t i = 0; i < p->q->nresv; i++) {
        ost__pent *e = p->q->resv[i].resolved ? find_oid(c, p->recs[p->q->resv[i].rec].oid) : NULL;
        if (e) ghostify(e->obj);
    }
    parts_txn_end(c, true);
    if (p->serial == c->seen_serial + 1) c->seen_serial = p->serial;
    cache_gc(c);
    begin_txn(c, p->serial); /* ends the snapshot */
    ost_txn_hooks_run_after_commit(c->hooks, true);
}

/* Checks and hooks before a commit; *any says whether there is work. */
static int begin_commit(ost_conn *c, bool *any) {
    c->msg[0] = 0;
    if (c->async_pending) return ost__c_fail(c, OST_EBUSY, "an asynchronous commit is pending");
    if (c->poisoned)
        return ost__c_fail(c, OST_ETXN, "an earlier commit of this transaction failed: abort it first");
    *any = false;
    for (size_t i = 0; i < c->nchanged; i++) *any |= c->changed[i] != 0;
    *any |= parts_dirty(c);
    if (c->st->read_only && *any) {
        ost_txn_hooks_run_after_commit(c->hooks, false);
        return ost__c_fail(c, OST_EREADONLY, "%s: the store is open read-only", c->st->shown);
    }
    int rc = ost_txn_hooks_run_before_commit(c->hooks);
    if (rc) {
        ost_txn_hooks_run_after_commit(c->hooks, false);
        c->poisoned = true;
        /* the commit's code is OST_EVETO whatever the hook returned; the
         * hook's own code is in the message */
        return ost__c_fail(c, OST_EVETO, "commit vetoed by a before-commit hook (it returned %s: %s)",
                           ost_err_name(rc), ost_strerror(rc));
    }
    return 0;
}

int ost_commit(ost_conn *c) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    bool any;
    int rc = begin_commit(c, &any);
    if (rc) return rc;
    if (!any) {
        parts_txn_end(c, true);
        cache_gc(c);
        begin_txn(c, 0); /* ends the snapshot */
        ost_txn_hooks_run_after_commit(c->hooks, true);
        return 0;
    }
    if ((rc = prepare(c))) {
        ost_txn_hooks_run_after_commit(c->hooks, false);
        c->poisoned = true;
        return rc;
    }
    if (c->st->group_commit) {
        rc = ost__pkg_commit(c->st, c->pkg);
    } else {
        /* the session commits in a transaction of its own: the snapshot
         * ends (after a commit, or a failed one, only abort goes on, and
         * both start a new one) */
        end_snapshot(c);
        rc = ost__pkg_apply_direct(c->st, c->sess, c->pkg);
    }
    commit_done(c, rc);
    return rc;
}

static void async_closed(uv_handle_t *h) { free(h->data); }

static void async_fired(uv_async_t *h) {
    async_req *a = h->data;
    ost_conn *c = a->c;
    if (!c) { /* the connection closed meanwhile: no callback */
        uv_close((uv_handle_t *)&a->async, async_closed);
        return;
    }
    if (!ost__pkg_is_done(c->st, c->pkg)) return; /* a spurious wake-up */
    c->async_pending = false;
    c->pkg->q->async = NULL;
    int rc = c->pkg->rc;
    commit_done(c, rc);
    a->cb(a->ud, rc);
    uv_close((uv_handle_t *)&a->async, async_closed);
}

int ost_commit_async(ost_conn *c, uv_loop_t *loop, ost_commit_cb cb, void *ud) {
    if (!c || !loop || !cb) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (!c->st->group_commit)
        return ost__c_fail(c, OST_EINVAL, "asynchronous commits need a store opened with group_commit");
    bool any;
    int rc = begin_commit(c, &any);
    if (rc) return rc;
    async_req *a = calloc(1, sizeof *a);
    if (!a) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    if (any && (rc = prepare(c))) {
        free(a);
        ost_txn_hooks_run_after_commit(c->hooks, false);
        c->poisoned = true;
        return rc;
    }
    if (!any) { /* nothing to write: an empty package still reports */
        if (!c->pkg && !(c->pkg = ost__pkg_new())) {
            free(a);
            return ost__c_fail(c, OST_ENOMEM, "out of memory");
        }
        ost__pkg_reset(c->pkg);
    }
    a->c = c;
    a->cb = cb;
    a->ud = ud;
    if (uv_async_init(loop, &a->async, async_fired)) {
        free(a);
        drop_new(c);
        return ost__c_fail(c, OST_EIO, "uv_async_init failed");
    }
    a->async.data = a;
    c->async_pending = true;
    c->pkg->q->async = &a->async;
    ost__pkg_submit(c->st, c->pkg);
    return 0;
}

void ost_abort(ost_conn *c) {
    if (!c || c->async_pending || !c->st) return;
    c->poisoned = false;
    parts_txn_end(c, false);
    for (size_t i = 0; i < c->nchanged; i++) {
        ost_value o = c->changed[i];
        if (!o) continue;
        ost__pent *e = find_obj(c, o);
        ost__pers_mark(o, 0, OST__F_CHANGED);
        if (e) ghostify(o);
    }
    c->nchanged = 0;
    cache_gc(c);
    begin_txn(c, 0); /* ends the snapshot */
    ost_txn_hooks_run_after_abort(c->hooks);
}

/* ---- for maps.c --------------------------------------------------------------- */

int ost__conn_pin(ost_conn *c) { return pin(c); }
void ost__conn_unpin(ost_conn *c) { unpin(c); }

int ost__conn_new_oid(ost_conn *c, uint64_t *oid) { return new_oid(c, oid); }

/* Adds a new object (serial 0) under oid. */
int ost__conn_cache_add(ost_conn *c, ost_value obj, uint64_t oid) {
    int rc = cache_add(c, obj, oid, 0);
    return rc ? ost__c_fail(c, rc, "out of memory") : 0;
}

/* Drops oid from the cache (a new map that abort undoes). */
void ost__conn_forget(ost_conn *c, uint64_t oid) {
    ost__pent *e = find_oid(c, oid);
    if (e) cache_remove(c, *pidx_of(e->obj) - 1);
}

/* After a bulk load: the next read takes a new snapshot, which sees the
 * loader's batches, as a transaction boundary does. */
void ost__conn_refresh(ost_conn *c) {
    bool clean = true; /* no changed object: this is a transaction boundary */
    for (size_t i = 0; i < c->nchanged && clean; i++) clean = !c->changed[i];
    end_snapshot(c);
    if (clean) c->at_boundary = true;
}

/* ---- running a function in a transaction, with retries ------------------- */

/* The wait after conflicted attempt n of ost_txn_run, in microseconds:
 * uniform in [0, min(OST__BACKOFF_CAP_US, OST__BACKOFF_BASE_US << (n - 1))]
 * ("full jitter"), so that writers who conflicted on one object spread out
 * instead of meeting again at the next commit. */
#define OST__BACKOFF_BASE_US 500u
#define OST__BACKOFF_CAP_US 50000u

static _Thread_local uint64_t t_jitter;

unsigned ost__backoff_us(unsigned n) {
    if (!t_jitter) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t_jitter = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
        t_jitter |= 1;
    }
    t_jitter ^= t_jitter << 13, t_jitter ^= t_jitter >> 7, t_jitter ^= t_jitter << 17;
    uint64_t top = n > 8 ? OST__BACKOFF_CAP_US : (uint64_t)OST__BACKOFF_BASE_US << (n - 1);
    if (top > OST__BACKOFF_CAP_US) top = OST__BACKOFF_CAP_US;
    return (unsigned)(t_jitter % (top + 1));
}

int ost_txn_run(ost_conn *c, unsigned attempts, ost_txn_fn fn, void *ud, unsigned *tried) {
    if (tried) *tried = 0;
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (!fn || !attempts) return ost__c_fail(c, OST_EINVAL, "ost_txn_run: %s",
                                             !fn ? "no function" : "attempts must be 1 or more");
    if (c->async_pending) return ost__c_fail(c, OST_EBUSY, "an asynchronous commit is pending");
    bool dirty = parts_dirty(c);
    for (size_t i = 0; i < c->nchanged && !dirty; i++) dirty = c->changed[i] != 0;
    if (dirty || c->poisoned)
        return ost__c_fail(c, OST_EBUSY, "ost_txn_run: the connection's transaction has %s: "
                                         "commit or abort it first",
                           dirty ? "uncommitted changes" : "a failed commit");
    int rc = 0;
    for (unsigned n = 1; n <= attempts; n++) {
        if (tried) *tried = n;
        ost_abort(c); /* each attempt starts from the newest commit */
        c->msg[0] = 0;
        rc = fn(ud, c);
        if (!rc) rc = ost_commit(c);
        if (!rc) return 0;
        char keep[sizeof c->msg];
        memcpy(keep, c->msg, sizeof keep);
        ost_abort(c);
        if (rc == OST_ECONFLICT && n < attempts) {
            unsigned us = ost__backoff_us(n);
            struct timespec ts = {0, (long)us * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc == OST_ECONFLICT)
            return ost__c_fail(c, rc, "gave up after %u attempts: %s", attempts, keep);
        memcpy(c->msg, keep, sizeof keep);
        return rc;
    }
    return rc;
}
