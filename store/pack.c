/* Pack and check: walking records by the persistent references their
 * pickles hold, found by scanning opcodes, without building values.
 *
 * Both run on any engine, through the engine table (store/engine.h) only:
 * a session of their own, one read snapshot pinned for the whole walk,
 * get_many / scan / the class table / entry cursors to read, and, for
 * pack, the engine's sweep to remove. What only LMDB has (its page walk,
 * which must pass before liblmdb may be trusted with the snapshot, and
 * check's look at the previous meta page) runs on the LMDB engine only,
 * on the snapshot of the same session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oidset.h"
#include "store_internal.h"

/* The class ids of ostore.maps.OrderedMap and OrderedSet (0 when the
 * store has none; class ids start at 1), and the ids the class table
 * holds, ascending (check). */
typedef struct {
    uint32_t id;
    /* the smallest id of the entries of the same persistent class of the
     * store's registry (a class and its versions, a class and the names
     * it has aliases for), or FAM_UNKNOWN for a class the registry does
     * not hold as persistent, whose references are not trusted (conn.c's
     * ghost_of reads the record for its class) */
    uint32_t fam;
    ost_value cls; /* the registry's class, or 0 */
} class_ent;

#define FAM_UNKNOWN UINT32_MAX

typedef struct {
    uint32_t map_cids[2];
    uint32_t *ids;
    class_ent *ents; /* as ids, ascending (check only: want_fams) */
    uint32_t *fam_by_id; /* ents' fam by id, when the ids are below 65536 */
    size_t nfam_by_id;
    size_t n, cap, capents;
    bool want_fams;
    bool nomem;
    ost_store *st;
} class_ctx;

static int note_class(void *ud, const ost__classview *cv) {
    class_ctx *cc = ud;
    if (cv->mlen == 11 && !memcmp(cv->module, "ostore.maps", 11) && cv->nlen == 10) {
        if (!memcmp(cv->name, "OrderedMap", 10)) cc->map_cids[0] = cv->id;
        if (!memcmp(cv->name, "OrderedSet", 10)) cc->map_cids[1] = cv->id;
    }
    if (cc->nomem) return 0;
    if (ost__reserve((void **)&cc->ids, &cc->cap, cc->n + 1, sizeof *cc->ids, 64)) {
        cc->nomem = true;
        return 0;
    }
    if (cc->want_fams) {
        /* the class a reader makes of the entry (a version's is its
         * class's: docs/format.md, "classes") */
        ost_value cls = 0;
        if (ost__reserve((void **)&cc->ents, &cc->capents, cc->n + 1, sizeof *cc->ents, 64)) {
            cc->nomem = true;
            return 0;
        }
        int rc = ost__class_value(cc->st, cv, &cls);
        if (rc == OST_ENOMEM) {
            cc->nomem = true;
            return 0;
        }
        if (rc || !ost_class_is_persistent(cls)) {
            ost_decref(cls);
            cls = 0;
        }
        cc->ents[cc->n] = (class_ent){cv->id, cls ? cv->id : FAM_UNKNOWN, cls};
    }
    cc->ids[cc->n++] = cv->id;
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads the class table of the session's snapshot into cc (and, when
 * want_fams is set, which entries are versions of the same class). 0 or a
 * code with the store's message set. */
static int read_classes(ost_store *st, ost__sess *s, class_ctx *cc, bool want_fams) {
    memset(cc, 0, sizeof *cc);
    cc->want_fams = want_fams;
    cc->st = st;
    int rc = st->ops->class_each(s, note_class, cc);
    if (!rc && cc->nomem) rc = ost__st_fail(st, OST_ENOMEM, "%s: out of memory", st->shown);
    if (!rc) qsort(cc->ids, cc->n, sizeof *cc->ids, cmp_u32);
    if (!rc && want_fams) {
        qsort(cc->ents, cc->n, sizeof *cc->ents, cmp_u32); /* id first */
        for (size_t i = 0; i < cc->n; i++)
            for (size_t j = 0; cc->ents[i].cls && j < i; j++)
                if (cc->ents[j].cls == cc->ents[i].cls) {
                    cc->ents[i].fam = cc->ents[j].fam;
                    break;
                }
        size_t top = cc->n ? (size_t)cc->ents[cc->n - 1].id + 1 : 0;
        if (top && top <= 65536 && (cc->fam_by_id = calloc(top, sizeof *cc->fam_by_id))) {
            cc->nfam_by_id = top;
            for (size_t i = 0; i < cc->n; i++) cc->fam_by_id[cc->ents[i].id] = cc->ents[i].fam;
        }
    }
    return rc;
}

static void free_classes(class_ctx *cc) {
    for (size_t i = 0; cc->ents && i < cc->n; i++) ost_decref(cc->ents[i].cls);
    free(cc->ents);
    free(cc->fam_by_id);
    free(cc->ids);
}

/* The class of class id cid (see class_ent's fam), 0 when the table has
 * no such id. */
static uint32_t family(const class_ctx *cc, uint32_t cid) {
    if (cid < cc->nfam_by_id) return cc->fam_by_id[cid];
    if (cc->nfam_by_id) return 0;
    const class_ent *e = bsearch(&cid, cc->ents, cc->n, sizeof *cc->ents, cmp_u32);
    return e ? e->fam : 0;
}

static bool is_map_cid(const uint32_t ids[2], uint32_t cid) {
    return cid && (cid == ids[0] || cid == ids[1]);
}

/* ---- pack ---------------------------------------------------------------- */

enum { REACHED, SCANNED }; /* the flags of the oid set */

#define MARK_BATCH 256 /* oids read per get_many (one round trip on a server) */

typedef struct {
    ost_store *st;
    ost__sess *s;
    ost__oidset oids; /* the records' oids: reached, scanned */
    size_t *stack;    /* places in oids reached but not scanned yet */
    size_t len, cap;
    bool overflow; /* the stack was full: a rescan pass is needed */
    uint32_t map_cids[2];
    bool force;         /* OST_PACK_FORCE: go on past damage */
    uint64_t dangling;  /* references to oids without a record */
    uint64_t first_dangling;
    uint64_t damaged;   /* reachable records or entries that did not decode (force) */
    uint64_t batch[MARK_BATCH]; /* the oids of one get_many, ascending */
    bool found[MARK_BATCH];
    size_t nb;
    int fn_rc; /* what mark_fn returned last */
} mark_ctx;

#define MARK_STACK_MAX ((size_t)1 << 20)

static void push(mark_ctx *m, size_t place) {
    if (m->len == MARK_STACK_MAX ||
        ost__reserve((void **)&m->stack, &m->cap, m->len + 1, sizeof *m->stack, 1024)) {
        m->overflow = true; /* found again by a rescan */
        return;
    }
    m->stack[m->len++] = place;
}

static void mark_ref(void *ud, uint64_t oid) {
    mark_ctx *m = ud;
    int64_t i = ost__oidset_index(&m->oids, oid);
    if (i < 0) { /* no record: damage may hide it, and what it refers to is unknown */
        if (!m->dangling++) m->first_dangling = oid;
        return;
    }
    if (ost__oidset_set(&m->oids, REACHED, (size_t)i)) return; /* seen */
    push(m, (size_t)i);
}

/* A reachable record that does not decode (or its map's entry): what it
 * refers to is unknown, so nothing may be removed, unless forced. */
static int undecodable(mark_ctx *m, uint64_t oid, bool entry) {
    if (m->force) {
        m->damaged++;
        return 0;
    }
    if (entry)
        return ost__st_fail(m->st, OST_ECORRUPT,
                            "%s: pack: an entry of map %llu does not decode, so what it refers "
                            "to is unknown; nothing was removed (see ost_store_check)",
                            m->st->shown, (unsigned long long)oid);
    return ost__st_fail(m->st, OST_ECORRUPT,
                        "%s: pack: oid %llu does not decode, so what it refers to is unknown; "
                        "nothing was removed (see ost_store_check)",
                        m->st->shown, (unsigned long long)oid);
}

/* Marks what record r of oid refers to, and for a map what its entries'
 * values refer to. */
static int mark_record(mark_ctx *m, uint64_t oid, const ost__recview *r) {
    if (ost__scan_pids(r->pickle, r->len, mark_ref, m)) return undecodable(m, oid, false);
    if (!is_map_cid(m->map_cids, r->cid)) return 0;
    const ost__engine_ops *ops = m->st->ops;
    ost__ecur *ec;
    int rc = ops->ecur_open(m->s, oid, &ec);
    if (rc) return rc == OST_ENOTFOUND ? 0 : rc;
    for (rc = ops->ecur_seek(ec, NULL, 0, false); rc == 0; rc = ops->ecur_step(ec, false)) {
        const uint8_t *k;
        size_t kl;
        ost__entry e;
        int grc = ops->ecur_get(ec, &k, &kl, &e);
        if (grc && grc != OST_ECORRUPT) {
            rc = grc;
            break;
        }
        if (grc || (e.len && ost__scan_pids(e.data, e.len, mark_ref, m))) {
            if ((rc = undecodable(m, oid, true))) break;
        }
    }
    ops->ecur_close(ec);
    if (rc == OST_ENOTFOUND) ost__st_clear(m->st);
    return rc == OST_ENOTFOUND ? 0 : rc;
}

/* get_many's callback: marks from one record of the batch. Its failure
 * is kept in m->fn_rc too, to tell it from the engine's. */
static int mark_fn(void *ud, uint64_t oid, const ost__recview *r) {
    mark_ctx *m = ud;
    size_t lo = 0, hi = m->nb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->batch[mid] < oid) lo = mid + 1;
        else hi = mid;
    }
    if (lo < m->nb && m->batch[lo] == oid) {
        if (m->found[lo]) return 0; /* an engine that gave it twice */
        m->found[lo] = true;
    }
    return m->fn_rc = mark_record(m, oid, r);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads and marks from the records of the batch: in one get_many, or,
 * when a record of it is damaged (get_many stops there), one by one. */
static int mark_batch_read(mark_ctx *m) {
    const ost__engine_ops *ops = m->st->ops;
    int rc = ops->get_many(m->s, m->batch, m->nb, mark_fn, m);
    if (rc && rc == m->fn_rc) return rc; /* the mark's own failure */
    if (rc == OST_ECORRUPT) { /* a damaged record stopped get_many */
        for (size_t i = 0; i < m->nb; i++) {
            if (m->found[i]) continue;
            ost__recview r;
            m->found[i] = true;
            rc = ops->get(m->s, m->batch[i], &r);
            if (rc == OST_ENOTFOUND) {
                if (!m->dangling++) m->first_dangling = m->batch[i];
                continue;
            }
            if (rc == OST_ECORRUPT) rc = undecodable(m, m->batch[i], false);
            else if (!rc) rc = mark_record(m, m->batch[i], &r);
            if (rc) return rc;
        }
        rc = 0;
    }
    if (rc) return rc;
    /* missing: in a dense set every oid below next_oid has a place */
    for (size_t i = 0; i < m->nb; i++)
        if (!m->found[i] && !m->dangling++) m->first_dangling = m->batch[i];
    ost__st_clear(m->st);
    return 0;
}

/* Marks from the records of the batch, each once, in oid order. */
static int mark_batch(mark_ctx *m) {
    const ost__engine_ops *ops = m->st->ops;
    qsort(m->batch, m->nb, sizeof *m->batch, cmp_u64);
    size_t u = 0; /* once each (the catch-up may push an oid twice) */
    for (size_t i = 0; i < m->nb; i++)
        if (!u || m->batch[i] != m->batch[u - 1]) m->batch[u++] = m->batch[i];
    m->nb = u;
    memset(m->found, 0, m->nb * sizeof *m->found);
    m->fn_rc = 0;
    /* the batch's views are done with once marked: an engine that keeps
     * them for the snapshot (PostgreSQL) frees them, else pack would
     * hold the whole store in memory */
    size_t vmark = ops->views_mark ? ops->views_mark(m->s) : 0;
    int rc = mark_batch_read(m);
    if (ops->views_release) ops->views_release(m->s, vmark);
    return rc;
}

/* Scans what the stack holds, MARK_BATCH records at a time. */
static int drain(mark_ctx *m) {
    while (m->len) {
        m->nb = 0;
        while (m->len && m->nb < MARK_BATCH) {
            size_t place = m->stack[--m->len];
            ost__oidset_set(&m->oids, SCANNED, place);
            m->batch[m->nb++] = ost__oidset_oid(&m->oids, place);
        }
        int rc = mark_batch(m);
        if (rc) return rc;
    }
    return 0;
}

/* scan's callbacks that size the oid set: any record at all (stops at the
 * first), and every oid (ascending). */
static int any_record(void *ud, uint64_t oid, const ost__recview *r) {
    (void)ud, (void)oid, (void)r;
    return 1;
}

typedef struct {
    uint64_t *oids;
    size_t n, cap;
} oid_list;

static int list_oid(void *ud, uint64_t oid, const ost__recview *r) {
    oid_list *l = ud;
    (void)r;
    if (l->n && oid <= l->oids[l->n - 1]) return 0; /* not ascending: not an oid we can place */
    if (ost__reserve((void **)&l->oids, &l->cap, l->n + 1, sizeof *l->oids, 1024))
        return OST_ENOMEM;
    l->oids[l->n++] = oid;
    return 0;
}

#define DENSE_MIN_BYTES ((uint64_t)1 << 20) /* as oidset.c */
#define DENSE_BYTES_PER_RECORD 8

/* The oid set of the snapshot, sized by the records, not by meta alone
 * (which damage could make anything; oidset.h): dense below
 * next_oid when that bitmap is small for the records the store holds and
 * no record lies at or above next_oid (one short scan), else the sorted
 * oids of every record (a full scan). */
static int mark_set(ost_store *st, ost__sess *s, const ost__snapinfo *info, ost__oidset *set) {
    uint64_t n = info->next_oid;
    bool dense = n / 8 < DENSE_MIN_BYTES;
    if (!dense) {
        ost_store_stats ss;
        if (ost_store_stat(st, &ss) == 0 && n / 8 < ss.records * DENSE_BYTES_PER_RECORD)
            dense = true;
        ost__st_clear(st);
    }
    int rc;
    if (dense) {
        rc = st->ops->scan(s, n, 0, any_record, NULL);
        if (rc < 0) return rc;
        if (rc == 0) {
            rc = ost__oidset_init_dense(set, n);
            goto out;
        }
    }
    oid_list l = {0};
    rc = st->ops->scan(s, 0, 0, list_oid, &l);
    if (rc) {
        free(l.oids);
        if (rc != OST_ENOMEM) return rc;
    } else {
        rc = ost__oidset_init_sorted(set, l.oids, l.n);
    }
out:
    if (rc == OST_ENOMEM)
        return ost__st_fail(st, rc, "%s: pack: out of memory for the oids of the records",
                            st->shown);
    return rc;
}

/* sweep's callback: what the mark reached stays. */
static bool keep_reached(void *ud, uint64_t oid) {
    mark_ctx *m = ud;
    int64_t i = ost__oidset_index(&m->oids, oid);
    return i >= 0 && ost__oidset_test(&m->oids, REACHED, (size_t)i);
}

/* Follows everything the stack holds, and, when it overflowed, what was
 * reached but not scanned. */
static int mark_all(mark_ctx *m) {
    int rc;
    while (!(rc = drain(m)) && m->overflow) {
        m->overflow = false;
        for (size_t i = 0; i < m->oids.n && !rc; i++)
            if (ost__oidset_test(&m->oids, REACHED, i) && !ost__oidset_test(&m->oids, SCANNED, i)) {
                push(m, i);
                if (m->len >= MARK_BATCH) rc = drain(m);
            }
        if (rc) break;
    }
    return rc;
}

/* The mark, in one pinned snapshot of session s: every record reachable
 * from the root, through references and map entries. *mark gets the
 * snapshot's last serial. 0 or a code with the store's message set. */
static int pack_mark(mark_ctx *m, uint64_t *mark) {
    ost_store *st = m->st;
    ost__snapinfo info;
    int rc = st->ops->snap_begin(m->s, &info);
    if (rc) return rc;
    if ((rc = st->ops->pin(m->s))) {
        st->ops->snap_end(m->s);
        return rc;
    }
    *mark = info.last_serial;
    /* an engine whose reads trust its own structures (LMDB: liblmdb its
     * pages, and deleting through damaged pages makes the damage worse:
     * liblmdb overflows its heap) has them checked first, and damage stops
     * the pack even when forced */
    if (st->ops->flags & OST__ENG_VERIFY_FIRST) {
        char first[400];
        rc = st->ops->verify(m->s, first, sizeof first);
        if (rc == OST_ECORRUPT)
            rc = ost__st_fail(st, OST_ECORRUPT,
                              "%s: pack: the store's pages are damaged (%s); nothing was "
                              "removed: 'ostore check' lists the damage, 'ostore salvage' "
                              "copies what is intact",
                              st->shown, first);
    }
    class_ctx cc = {0};
    if (!rc) rc = read_classes(st, m->s, &cc, false);
    memcpy(m->map_cids, cc.map_cids, sizeof m->map_cids);
    free_classes(&cc);
    if (!rc) rc = mark_set(st, m->s, &info, &m->oids);
    if (!rc) {
        mark_ref(m, 0);
        rc = mark_all(m);
    }
    st->ops->unpin(m->s);
    st->ops->snap_end(m->s);
    return rc;
}

/* Adds oid to the list ud (l->n SIZE_MAX once out of memory). */
static void note_oid(void *ud, uint64_t oid) {
    oid_list *l = ud;
    if (l->n == SIZE_MAX) return;
    if (ost__reserve((void **)&l->oids, &l->cap, l->n + 1, sizeof *l->oids, 256)) {
        l->n = SIZE_MAX; /* out of memory */
        return;
    }
    l->oids[l->n++] = oid;
}

/* changes' callback: the oids of the catch-up. */
static void note_changed(void *ud, uint64_t oid, uint64_t serial) {
    (void)serial;
    note_oid(ud, oid);
}

/* ent_each_map's callback: every map with entries (0: keep them). */
static int note_map(void *ud, uint64_t map) {
    note_oid(ud, map);
    return 0;
}

/* Commits go on during the mark (it reads a snapshot), and one may link
 * again an object the mark found unreachable (a connection that still
 * holds it puts it back): sweep keeps what commits after the mark wrote,
 * but not what they link. So the mark catches up on a newer snapshot:
 * what it reached stays reached, and the objects that commits since
 * changed (the commit log) and that it had reached are scanned again in
 * their new state, which marks what they link now, new objects included.
 * An object reachable in the new snapshot is then marked: the first
 * object on its path from the root that a commit changed was reached
 * before, through objects no commit changed. *mark moves to the new
 * snapshot's last serial. A pack that ran meanwhile (the log has a gap)
 * stops this one: OST_EBUSY, nothing removed. */
static int catch_up(mark_ctx *m, uint64_t *mark, bool *more) {
    ost_store *st = m->st;
    const ost__engine_ops *ops = st->ops;
    ost__snapinfo info;
    *more = false;
    int rc = ops->snap_begin(m->s, &info);
    if (rc) return rc;
    if ((rc = ops->pin(m->s))) {
        ops->snap_end(m->s);
        return rc;
    }
    oid_list changed = {0};
    ost__oidset set = {0};
    bool gap = false;
    if (info.last_serial <= *mark) goto out;
    rc = ops->changes(m->s, *mark, info.last_serial, note_changed, &changed, &gap);
    if (!rc && changed.n == SIZE_MAX)
        rc = ost__st_fail(st, OST_ENOMEM, "%s: pack: out of memory", st->shown);
    if (!rc && gap)
        rc = ost__st_fail(st, OST_EBUSY,
                          "%s: pack: another pack removed records during this one; nothing "
                          "was removed by this one (run it again)",
                          st->shown);
    if (!rc) rc = mark_set(st, m->s, &info, &set);
    if (rc) goto out;
    /* what the mark reached (and scanned) stays so in the new set */
    for (size_t i = 0; i < m->oids.n; i++) {
        if (!ost__oidset_test(&m->oids, REACHED, i)) continue;
        int64_t j = ost__oidset_index(&set, ost__oidset_oid(&m->oids, i));
        if (j < 0) continue; /* gone: cannot be (only a pack removes) */
        ost__oidset_set(&set, REACHED, (size_t)j);
        ost__oidset_set(&set, SCANNED, (size_t)j);
    }
    ost__oidset_free(&m->oids);
    m->oids = set;
    set = (ost__oidset){0};
    m->len = 0;
    for (size_t i = 0; i < changed.n; i++) {
        int64_t j = ost__oidset_index(&m->oids, changed.oids[i]);
        if (j >= 0 && ost__oidset_test(&m->oids, REACHED, (size_t)j)) push(m, (size_t)j);
    }
    /* a commit that changes a map's entries gives its record the new
     * serial, without a line in the log: the reached maps written since */
    changed.n = 0;
    rc = ops->ent_each_map(m->s, note_map, &changed);
    if (!rc && changed.n == SIZE_MAX)
        rc = ost__st_fail(st, OST_ENOMEM, "%s: pack: out of memory", st->shown);
    for (size_t i = 0; !rc && i < changed.n; i++) {
        int64_t j = ost__oidset_index(&m->oids, changed.oids[i]);
        if (j < 0 || !ost__oidset_test(&m->oids, REACHED, (size_t)j)) continue;
        ost__recview r;
        int grc = ops->get(m->s, changed.oids[i], &r);
        if (grc == 0 && r.serial > *mark) push(m, (size_t)j);
        else if (grc && grc != OST_ENOTFOUND && grc != OST_ECORRUPT) rc = grc;
    }
    if (!rc) {
        ost__st_clear(st);
        rc = mark_all(m);
    }
    if (!rc) {
        *mark = info.last_serial;
        *more = true;
    }
out:
    free(changed.oids);
    ost__oidset_free(&set);
    ops->unpin(m->s);
    ops->snap_end(m->s);
    return rc;
}

#define CATCH_UP_ROUNDS 3

int ost_store_pack(ost_store *st, uint64_t *removed) { return ost_store_pack_ex(st, 0, removed); }

int ost_store_pack_ex(ost_store *st, unsigned flags, uint64_t *removed) {
    if (removed) *removed = 0;
    if (!st || !st->eng) return OST_EINVAL;
    if (flags & ~OST_PACK_FORCE)
        return ost__st_fail(st, OST_EINVAL, "pack: unknown flags 0x%x", flags);
    if (st->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: read-only", st->shown);
    mark_ctx *m = calloc(1, sizeof *m);
    if (!m) return ost__st_fail(st, OST_ENOMEM, "%s: out of memory", st->shown);
    m->st = st;
    m->force = flags & OST_PACK_FORCE;
    int rc = st->ops->sess_open(st->eng, &m->s);
    uint64_t mark = 0, gone = 0;
    if (!rc) rc = pack_mark(m, &mark);
    /* a few rounds: each one shortens the time in which a commit can link
     * again what the mark found unreachable */
    for (int round = 0; !rc && round < CATCH_UP_ROUNDS; round++) {
        OST__HOOK(pack_step, (st, round)); /* tests: testctl.h */
        bool more;
        rc = catch_up(m, &mark, &more);
        if (!more) break;
    }
    if (!rc && m->dangling && !m->force)
        rc = ost__st_fail(st, OST_ECORRUPT,
                          "%s: pack: %llu reference%s to oids without a record (oid %llu%s): "
                          "damage may hide what they refer to, so nothing was removed "
                          "(ost_store_check lists the problems; OST_PACK_FORCE packs anyway)",
                          st->shown, (unsigned long long)m->dangling, m->dangling == 1 ? "" : "s",
                          (unsigned long long)m->first_dangling,
                          m->dangling > 1 ? " and others" : "");
    /* the engine removes what the mark did not reach, except what a commit
     * after the mark wrote (the mark could not see what that links) */
    if (!rc) rc = st->ops->sweep(m->s, mark, keep_reached, m, &gone);
    if (!rc && removed) *removed = gone;
    if (m->s) st->ops->sess_close(m->s);
    ost__oidset_free(&m->oids);
    free(m->stack);
    free(m);
    return rc;
}

/* ---- check ---------------------------------------------------------------- */

typedef struct {
    uint64_t oid, count;
    ost__mkind kind;
    bool is_set;
    size_t rbegin, rend; /* OST_CHECK_REACH: its entries' references in refs */
} check_map;

typedef struct {
    uint64_t holder, oid;
    uint32_t cid; /* the class id the reference names (0: an int pid) */
} check_ref;

typedef struct {
    ost_store *st;
    ost__sess *s;
    uint64_t holder;
    ost_check_fn report;
    void *ud;
    uint64_t problems;
    check_map *maps; /* the map records seen, in oid order */
    size_t nmaps, capmaps;
    class_ctx classes;
    ost_reader *r;
    uint64_t *exists; /* the oids of the records read so far, ascending */
    uint32_t *ecids;  /* their class ids */
    size_t nexists, capexists, capecids;
    /* where each oid below ndense is in exists, plus 1 (0: no record):
     * references resolve without a binary search while oids are dense
     * enough (oids ascend, so every record below ndense is in it) */
    uint32_t *dense;
    size_t ndense, capdense;
    bool dense_off; /* a record was left out of dense: it grows no more */
    check_ref *later; /* references to oids above their holder: resolved after the scan */
    size_t nlater, caplater;
    bool scanned; /* every record has been read: exists is complete */
    bool root;
    int fail; /* out of memory in a callback */
    unsigned flags;       /* OST_CHECK_* */
    ost__snapinfo info;   /* the snapshot's counters (OST_CHECK_COUNTERS) */
    uint64_t entries;     /* map entries read */
    /* OST_CHECK_REACH: every reference as it is noted, record after
     * record (the references of the record at place i of exists are
     * refs[rfirst[i]] to refs[rfirst[i + 1]]), then map after map
     * (check_map's rbegin, rend); followed after the check from the root,
     * in memory: no record is read twice */
    uint64_t *refs;
    size_t nrefs, caprefs;
    size_t *rfirst; /* per place in exists, and one past the last */
    size_t caprfirst;
    bool keep_refs; /* the references noted now are kept (the holder has a place) */
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
                             const ost__recview *v) {
    ost_value kv = ost_typeof(val) == OST_T_DICT ? ost_dict_get_c(val, "kind") : 0;
    const char *ks = ost_typeof(kv) == OST_T_STR ? ost_data(kv, NULL) : NULL;
    check_map cm = {.oid = oid, .is_set = is_set};
    if (!ks || ost__mkind_parse(ks, &cm.kind) ||
        ost__map_record_count(v->pickle, v->len, &cm.count)) {
        problem(c, oid, OST_ECORRUPT, "oid %llu: a map record without a valid kind and count",
                (unsigned long long)oid);
        return;
    }
    if (ost__reserve((void **)&c->maps, &c->capmaps, c->nmaps + 1, sizeof *c->maps, 16)) {
        problem(c, oid, OST_ENOMEM, "oid %llu: out of memory: its entries are not checked",
                (unsigned long long)oid);
        return;
    }
    c->maps[c->nmaps++] = cm;
}

static void flat_ref(void *ud, uint64_t oid, uint32_t cid);

/* Reads every entry of map cm: keys decode as its kind, values decode and
 * refer to existing objects, and they add up to its count. */
static int check_entries(check_ctx *c, ost_reader *r, const check_map *cm) {
    const ost__engine_ops *ops = c->st->ops;
    ost__ecur *ec;
    uint64_t n = 0;
    int rc = ops->ecur_open(c->s, cm->oid, &ec);
    if (rc && rc != OST_ENOTFOUND) return rc;
    if (rc) goto count; /* no entries */
    c->holder = cm->oid;
    for (rc = ops->ecur_seek(ec, NULL, 0, false); rc == 0; rc = ops->ecur_step(ec, false)) {
        const uint8_t *k;
        size_t kl;
        ost__entry e;
        n++;
        c->entries++;
        int grc = ops->ecur_get(ec, &k, &kl, &e);
        if (grc && grc != OST_ECORRUPT) {
            rc = grc;
            break;
        }
        if (grc) {
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
        /* the key's text only for a message: its repr for every entry
         * was a sixth of a check */
        ost_buf b = {0};
        if (cm->is_set && e.len) {
            ost_repr(key, &b);
            problem(c, cm->oid, OST_ECORRUPT, "set %llu: key %.200s has a value",
                    (unsigned long long)cm->oid, b.data ? b.data : "");
        }
        uint64_t roid;
        uint32_t rcid;
        if (!cm->is_set && ost__flat_lone_ref(e.data, e.len, &roid, &rcid)) {
            flat_ref(c, roid, rcid); /* a reference: no reader */
        } else if (!cm->is_set) {
            ost_value val;
            int lrc = ost_load(r, e.data, e.len, &val, NULL);
            if (lrc) {
                if (!b.data) ost_repr(key, &b);
                problem(c, cm->oid, lrc, "map %llu: the entry of key %.200s does not decode: %s",
                        (unsigned long long)cm->oid, b.data ? b.data : "", ost_reader_errmsg(r));
            } else
                ost_release(val);
        }
        ost_decref(key);
        ost_buf_free(&b);
    }
    ops->ecur_close(ec);
    if (rc != OST_ENOTFOUND) return rc;
count:
    ost__st_clear(c->st);
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

/* Where oid is in the oids read so far (all of them once the scan is
 * over), or SIZE_MAX when it has no record. */
static size_t exists_at(const check_ctx *c, uint64_t oid) {
    if (oid < c->ndense) return c->dense[oid] ? c->dense[oid] - 1 : SIZE_MAX;
    size_t lo = 0, hi = c->nexists;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->exists[mid] < oid) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->nexists && c->exists[lo] == oid ? lo : SIZE_MAX;
}

static void missing(check_ctx *c, uint64_t holder, uint64_t oid) {
    c->problems++;
    if (!c->report) return;
    char msg[96];
    snprintf(msg, sizeof msg, "oid %llu refers to missing oid %llu", (unsigned long long)holder,
             (unsigned long long)oid);
    c->report(c->ud, holder, oid, OST_ENOTFOUND, msg);
}

/* A reference from holder to oid that names class id cid (0: none):
 * oid must have a record, of the class cid names. */
static void resolve(check_ctx *c, uint64_t holder, uint64_t oid, uint32_t cid) {
    size_t at = exists_at(c, oid);
    if (at == SIZE_MAX) {
        missing(c, holder, oid);
        return;
    }
    /* a damaged record (class id 0 here) is reported as such; a reference
     * or a record whose class the registry does not hold as persistent
     * cannot be judged, and reads fine (the reference is not trusted) */
    uint32_t fr = cid ? family(&c->classes, cid) : 0;
    uint32_t fo = c->ecids[at] ? family(&c->classes, c->ecids[at]) : 0;
    if (!fr || !fo || fr == FAM_UNKNOWN || fo == FAM_UNKNOWN || fr == fo) return;
    c->problems++;
    if (!c->report) return;
    char msg[160];
    snprintf(msg, sizeof msg,
             "oid %llu refers to oid %llu as class id %u, but its record is of class id %u "
             "(another class)",
             (unsigned long long)holder, (unsigned long long)oid, cid, c->ecids[at]);
    c->report(c->ud, holder, oid, OST_ECORRUPT, msg);
}

/* The reader's persistent_load: a reference resolves against the oids
 * read (records come in oid order), or, when it names a higher oid than
 * its holder's, after the scan. A pid is an oid (an int) or, from format
 * 4, the pair (oid, class id), whose class id must be in the class table
 * and be the referenced record's class. */
static void note_ref(check_ctx *c, int64_t oid, int64_t cid, bool pair);

static int check_load(void *ud, ost_value pid, ost_value *obj) {
    check_ctx *c = ud;
    int64_t oid, cid = 0;
    bool pair = ost_typeof(pid) == OST_T_TUPLE && ost_len(pid) == 2;
    *obj = OST_NONE; /* the state is decoded and dropped: the pid need not stay */
    if (pair ? ost_int_value(ost_item(pid, 0), &oid) || oid < 0 ||
                   ost_int_value(ost_item(pid, 1), &cid) || cid <= 0 || cid > UINT32_MAX
             : ost_int_value(pid, &oid) || oid < 0) {
        c->problems++;
        if (c->report)
            c->report(c->ud, c->holder, 0, OST_ECORRUPT,
                      "a persistent id that is not an oid or (oid, class id)");
        return 0;
    }
    note_ref(c, oid, cid, pair);
    return 0;
}

/* A reference of a flat record (ost__flat_scan): as check_load's. */
static void flat_ref(void *ud, uint64_t oid, uint32_t cid) {
    note_ref(ud, (int64_t)oid, cid, true);
}

/* Notes that the record being checked (c->holder) refers to oid, as class
 * id cid when pair: resolved now when oid's record was seen, else later. */
static void note_ref(check_ctx *c, int64_t oid, int64_t cid, bool pair) {
    if (c->keep_refs) {
        if (ost__reserve((void **)&c->refs, &c->caprefs, c->nrefs + 1, sizeof *c->refs, 4096))
            c->fail = OST_ENOMEM;
        else
            c->refs[c->nrefs++] = (uint64_t)oid;
    }
    if (pair && !family(&c->classes, (uint32_t)cid)) {
        c->problems++;
        if (c->report) {
            char msg[128];
            snprintf(msg, sizeof msg, "oid %llu refers to oid %lld as class id %lld, which is not in the class table",
                     (unsigned long long)c->holder, (long long)oid, (long long)cid);
            c->report(c->ud, c->holder, (uint64_t)oid, OST_ECORRUPT, msg);
        }
        cid = 0;
    }
    if (c->scanned || (uint64_t)oid <= c->holder) {
        resolve(c, c->holder, (uint64_t)oid, (uint32_t)cid);
    } else if (ost__reserve((void **)&c->later, &c->caplater, c->nlater + 1, sizeof *c->later,
                            1024)) {
        c->fail = OST_ENOMEM;
    } else {
        c->later[c->nlater++] = (check_ref){c->holder, (uint64_t)oid, (uint32_t)cid};
    }
}

/* The damage a scan reported for a record (its message, "ADDR: oid N:
 * damaged record (WHY)"), without the address. */
static const char *damage_of(ost_store *st) {
    const char *m = ost_store_errmsg(st);
    size_t n = strlen(st->shown);
    if (!strncmp(m, st->shown, n) && !strncmp(m + n, ": ", 2)) m += n + 2;
    return m;
}

/* scan's callback: one record, in oid order. */
static int check_record(void *ud, uint64_t oid, const ost__recview *v) {
    check_ctx *c = ud;
    if (ost__reserve((void **)&c->exists, &c->capexists, c->nexists + 1, sizeof *c->exists,
                     4096) ||
        ost__reserve((void **)&c->ecids, &c->capecids, c->nexists + 1, sizeof *c->ecids, 4096))
        return c->fail = OST_ENOMEM;
    if (!c->nexists || oid > c->exists[c->nexists - 1]) {
        c->ecids[c->nexists] = v->len ? v->cid : 0;
        /* dense while the oids are at most 4 per record (and 1M); once a
         * record is left out (too far, or no memory), dense stops where it
         * is, so that every record below ndense is in it */
        if (!c->dense_off && c->nexists < UINT32_MAX &&
            oid < 4 * (uint64_t)c->nexists + ((uint64_t)1 << 20) &&
            !ost__reserve((void **)&c->dense, &c->capdense, oid + 1, sizeof *c->dense, 65536)) {
            memset(c->dense + c->ndense, 0, (oid - c->ndense) * sizeof *c->dense);
            c->ndense = oid;
            c->dense[c->ndense++] = (uint32_t)c->nexists + 1;
        } else
            c->dense_off = true;
        c->exists[c->nexists++] = oid;
    }
    c->holder = oid;
    if (oid == 0) c->root = true;
    /* a record out of order has no place: what it refers to is not kept */
    c->keep_refs = (c->flags & OST_CHECK_REACH) && c->exists[c->nexists - 1] == oid;
    if (c->keep_refs) {
        if (ost__reserve((void **)&c->rfirst, &c->caprfirst, c->nexists + 1, sizeof *c->rfirst,
                         4096))
            return c->fail = OST_ENOMEM;
        c->rfirst[c->nexists - 1] = c->nrefs;
    }
    if (c->flags & OST_CHECK_COUNTERS) {
        /* an oid at or past next_oid would be given to a new object and
         * overwrite this one; a serial past the last commit breaks the
         * detection of conflicts */
        if (oid >= c->info.next_oid)
            problem(c, oid, OST_ECORRUPT,
                    "oid %llu is not below meta next_oid %llu (a new object would overwrite it)",
                    (unsigned long long)oid, (unsigned long long)c->info.next_oid);
        if (v->len && v->serial > c->info.last_serial)
            problem(c, oid, OST_ECORRUPT, "oid %llu has serial %llu, past the last commit %llu",
                    (unsigned long long)oid, (unsigned long long)v->serial,
                    (unsigned long long)c->info.last_serial);
    }
    char msg[400];
    if (!v->len) { /* damaged: the engine says how */
        snprintf(msg, sizeof msg, "%s", damage_of(c->st));
        c->problems++;
        if (c->report) c->report(c->ud, oid, 0, OST_ECORRUPT, msg);
        return 0;
    }
    if (!bsearch(&v->cid, c->classes.ids, c->classes.n, sizeof *c->classes.ids, cmp_u32)) {
        c->problems++;
        snprintf(msg, sizeof msg, "oid %llu: class id %u is not in the class table",
                 (unsigned long long)oid, v->cid);
        if (c->report) c->report(c->ud, oid, 0, OST_ECORRUPT, msg);
        return 0;
    }
    bool map = is_map_cid(c->classes.map_cids, v->cid);
    /* a positional record, checked and its references noted without
     * building its values (the general reader was 45% of a check) */
    if (!map && ost__flat_scan(v->pickle, v->len, flat_ref, c) == 0) return c->fail ? c->fail : 0;
    ost_value val;
    int lrc = ost_load(c->r, v->pickle, v->len, &val, NULL);
    if (lrc) {
        c->problems++;
        snprintf(msg, sizeof msg, "oid %llu: record does not decode: %s", (unsigned long long)oid,
                 ost_reader_errmsg(c->r));
        if (c->report) c->report(c->ud, oid, 0, lrc, msg);
        return c->fail ? c->fail : 0;
    }
    if (map) check_map_record(c, oid, v->cid == c->classes.map_cids[1], val, v);
    ost_release(val);
    return c->fail ? c->fail : 0;
}

/* OST_CHECK_REACH: the records the root reaches, through the references
 * kept while checking (records' and map values'), with a bit per place in
 * exists and an explicit stack. 0 or OST_ENOMEM. */
static int check_reach(check_ctx *c, uint64_t *reachable) {
    *reachable = 0;
    size_t at = exists_at(c, 0);
    if (at == SIZE_MAX) return 0; /* no root: reported */
    uint8_t *seen = calloc(c->nexists / 8 + 1, 1);
    size_t *stack = NULL, len = 0, cap = 0;
    if (!seen) return OST_ENOMEM;
    int rc = 0;
    seen[at / 8] |= (uint8_t)(1u << (at % 8));
    if (ost__reserve((void **)&stack, &cap, 1, sizeof *stack, 4096)) rc = OST_ENOMEM;
    else stack[len++] = at;
    while (len && !rc) {
        size_t p = stack[--len];
        (*reachable)++;
        size_t b = c->rfirst[p], e = c->rfirst[p + 1];
        /* a map's entries: the maps are in oid order, as exists is */
        size_t mb = 0, me = 0, lo = 0, hi = c->nmaps;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (c->maps[mid].oid < c->exists[p]) lo = mid + 1;
            else hi = mid;
        }
        if (lo < c->nmaps && c->maps[lo].oid == c->exists[p]) {
            mb = c->maps[lo].rbegin;
            me = c->maps[lo].rend;
        }
        for (size_t k = b; !rc && k < e + (me - mb); k++) {
            size_t q = exists_at(c, k < e ? c->refs[k] : c->refs[mb + (k - e)]);
            if (q == SIZE_MAX || (seen[q / 8] >> (q % 8) & 1)) continue; /* missing: reported */
            seen[q / 8] |= (uint8_t)(1u << (q % 8));
            if (ost__reserve((void **)&stack, &cap, len + 1, sizeof *stack, 4096)) rc = OST_ENOMEM;
            else stack[len++] = q;
        }
    }
    free(seen);
    free(stack);
    return rc;
}

int ost_store_check(ost_store *st, ost_check_fn report, void *ud, uint64_t *records) {
    ost_check_stats cs;
    int rc = ost_store_check_ex(st, 0, report, ud, &cs);
    if (records) *records = cs.records;
    return rc;
}

int ost_store_check_ex(ost_store *st, unsigned flags, ost_check_fn report, void *ud,
                       ost_check_stats *out) {
    ost_check_stats dummy;
    if (!out) out = &dummy;
    memset(out, 0, sizeof *out);
    if (!st || !st->eng || (flags & ~(unsigned)(OST_CHECK_REACH | OST_CHECK_COUNTERS)))
        return OST_EINVAL;
    const ost__engine_ops *ops = st->ops;
    check_ctx c = {.st = st, .report = report, .ud = ud, .flags = flags};
    if (!(c.r = ost_reader_new())) return ost__st_fail(st, OST_ENOMEM, "%s: out of memory", st->shown);
    ost_reader_set_persistent_load(c.r, check_load, &c);
    ost__snapinfo info;
    uint64_t n = 0;
    int rc = ops->sess_open(st->eng, &c.s);
    bool snap = false, pinned = false;
    if (!rc && !(rc = ops->snap_begin(c.s, &info))) snap = true;
    if (snap) c.info = info;
    if (!rc && !(rc = ops->pin(c.s))) pinned = true;
    /* first the engine's own structures, where reads trust them (LMDB's
     * pages) */
    if (!rc && ops->check_pages) {
        uint64_t problems = 0;
        rc = ops->check_pages(c.s, report, ud, &problems, &n);
        c.problems += problems;
    }
    if (!rc) rc = read_classes(st, c.s, &c.classes, true);
    if (!rc) rc = ops->scan(c.s, 0, 0, check_record, &c);
    if (!rc) {
        n = c.nexists;
        c.scanned = true;
        for (size_t i = 0; i < c.nlater; i++)
            resolve(&c, c.later[i].holder, c.later[i].oid, c.later[i].cid);
        if ((flags & OST_CHECK_REACH) &&
            ost__reserve((void **)&c.rfirst, &c.caprfirst, c.nexists + 1, sizeof *c.rfirst, 4096))
            rc = c.fail = OST_ENOMEM;
        else if (flags & OST_CHECK_REACH)
            c.rfirst[c.nexists] = c.nrefs;
    }
    c.keep_refs = flags & OST_CHECK_REACH;
    for (size_t i = 0; !rc && i < c.nmaps; i++) {
        c.maps[i].rbegin = c.nrefs;
        rc = check_entries(&c, c.r, &c.maps[i]);
        c.maps[i].rend = c.nrefs;
        if (!rc && c.fail) rc = c.fail;
    }
    if (!rc) rc = ops->ent_each_map(c.s, check_orphans, &c);
    if (!rc && (flags & OST_CHECK_REACH)) {
        c.fail = check_reach(&c, &out->reachable);
        rc = c.fail;
    }
    if (rc == OST_ENOMEM && c.fail) rc = ost__st_fail(st, rc, "%s: check: out of memory", st->shown);
    if (pinned) ops->unpin(c.s);
    if (snap) ops->snap_end(c.s);
    if (c.s) ops->sess_close(c.s);
    free(c.maps);
    free_classes(&c.classes);
    free(c.exists);
    free(c.ecids);
    free(c.dense);
    free(c.later);
    free(c.refs);
    free(c.rfirst);
    ost_reader_free(c.r);
    out->records = n;
    out->entries = c.entries;
    if (rc) return rc;
    if (!c.root) {
        c.problems++;
        if (report) report(ud, 0, 0, OST_ECORRUPT, "the root (oid 0) is missing");
    }
    if (c.problems)
        return ost__st_fail(st, OST_ECORRUPT, "%s: %llu problems found", st->shown,
                            (unsigned long long)c.problems);
    return 0;
}
