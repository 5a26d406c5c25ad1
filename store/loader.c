/* The bulk loader: new objects at full speed. Each added object (and the
 * new persistent objects it reaches) is serialized at once into the
 * current batch; a full batch goes to the store's committer thread, which
 * writes it in one LMDB transaction (records appended, oids ascending)
 * while the next batch fills. Memory stays flat: the loader remembers
 * only the objects that are still alive, to reference them by oid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

struct ost_loader {
    uint32_t magic; /* OST__H_LOADER (ost_errmsg) */
    ost_conn *c;
    ost_store *st;
    ost_loader_options o;
    ost__pkg *pkg[2]; /* [cur] fills while the other is committed */
    int cur;
    bool inflight;
    uint64_t batch_no;      /* batches submitted */
    uint64_t *batch_first;  /* first oid of each batch */
    size_t nbatch_first, capbatch_first;
    ost__ptrtab oids;       /* live loaded object -> oid */
    ost_value *pending;     /* new objects met while serializing */
    size_t npending, cappending;
    uint64_t oid_next, oid_end;
    uint64_t oid_block;     /* size of the next oid reservation */
    uint64_t done_objects, done_bytes, added;
    uint64_t cur_start;      /* first oid of the batch being filled */
    uint64_t inflight_start; /* first oid of the batch being committed */
    uint64_t good_below;     /* oids from here on are not stored (failure) */
    int err;
    ost__msort *msort;       /* scratch for sorting batches' map entries */
    ost_loader *tnext;
    char msg[400];
};

static __thread ost_loader *t_loaders;

static int lfail(ost_loader *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int lfail(ost_loader *l, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(l->msg, sizeof l->msg, fmt, ap);
    va_end(ap);
    if (!l->err) l->err = code;
    return code;
}

const char *ost_loader_errmsg(const ost_loader *l) { return l ? l->msg : ""; }

/* Called when a loaded object is freed (the connections' ost__pers_ops
 * freed, through ost__conn_on_freed): forget its oid. */
static void loader_forget(ost_value obj) {
    for (ost_loader *l = t_loaders; l; l = l->tnext) {
        ost__ptr_slot *s = ost__ptrtab_find(&l->oids, obj);
        if (s->key) {
            ost__ptrtab_del(&l->oids, obj);
            return;
        }
    }
}

void ost_loader_options_init(ost_loader_options *o) {
    memset(o, 0, sizeof *o);
    o->batch_objects = 100000;
    o->batch_bytes = 64u << 20;
}

int ost_loader_open(ost_conn *c, const ost_loader_options *opts, ost_loader **out) {
    if (out) *out = NULL;
    if (!c || !out) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (c->st->read_only) return ost__c_fail(c, OST_EREADONLY, "%s: read-only", c->st->shown);
    if (ost__maps_touched(c))
        return ost__c_fail(c, OST_EBUSY,
                           "the connection's transaction has used maps: commit or abort it "
                           "before opening a loader");
    ost_loader *l = calloc(1, sizeof *l);
    if (!l) return OST_ENOMEM;
    l->magic = OST__H_LOADER;
    l->c = c;
    l->st = c->st;
    ost_loader_options_init(&l->o);
    if (opts) {
        if (opts->batch_objects) l->o.batch_objects = opts->batch_objects;
        if (opts->batch_bytes) l->o.batch_bytes = opts->batch_bytes;
        l->o.progress = opts->progress;
        l->o.ud = opts->ud;
    }
    l->pkg[0] = ost__pkg_new();
    l->pkg[1] = ost__pkg_new();
    int rc = !l->pkg[0] || !l->pkg[1] ? OST_ENOMEM : ost__ptrtab_init(&l->oids, 1024);
    if (!rc) rc = ost__committer_start(l->st);
    if (rc) {
        ost__pkg_free(l->pkg[0]);
        ost__pkg_free(l->pkg[1]);
        ost__ptrtab_free(&l->oids);
        free(l);
        return rc;
    }
    l->good_below = UINT64_MAX;
    l->cur_start = UINT64_MAX;
    /* A read snapshot left open pins the pages every batch frees, so that
     * LMDB cannot reuse them: the file grows and each batch writes fresh
     * pages (random keys at a third of the rate by the tenth million). The
     * connection's next read opens a new one. */
    ost__conn_refresh(c);
    ost__conn_on_freed(loader_forget); /* the same function each time */
    c->loaders++;
    l->tnext = t_loaders;
    t_loaders = l;
    *out = l;
    return 0;
}

static int next_oid(ost_loader *l, uint64_t *oid) {
    if (l->oid_next == l->oid_end) {
        /* A reservation is a durable write transaction of its own: it
         * waits for the batch being committed and stalls the pipeline, so
         * blocks double (from one batch up to 2^24 oids) to make them few;
         * the unused rest of the last block is not reused. */
        uint64_t first, want = l->oid_block;
        if (!want) want = l->o.batch_objects < 1024 ? 1024 : l->o.batch_objects;
        l->oid_block = want < ((uint64_t)1 << 24) ? want * 2 : want;
        int rc = l->st->ops->reserve_oids(l->st->eng, want, &first);
        if (rc) return lfail(l, rc, "cannot reserve oids: %s", ost_store_errmsg(l->st));
        l->oid_next = first;
        l->oid_end = first + want;
    }
    *oid = l->oid_next++;
    return 0;
}

/* Marks obj loaded under a new oid, to be serialized (taking a reference
 * until it is). */
static int take(ost_loader *l, ost_value obj, uint64_t *oid) {
    int rc = next_oid(l, oid);
    if (rc) return rc;
    if (!l->pkg[l->cur]->nrecs && !l->npending) l->cur_start = *oid;
    if (ost__ptrtab_put(&l->oids, obj, *oid)) return lfail(l, OST_ENOMEM, "out of memory");
    if (ost__reserve((void **)&l->pending, &l->cappending, l->npending + 1,
                     sizeof *l->pending, 64)) {
        ost__ptrtab_del(&l->oids, obj);
        return lfail(l, OST_ENOMEM, "out of memory");
    }
    l->pending[l->npending++] = ost_incref(obj);
    ost__pers_mark(obj, OST__F_PERSISTENT, 0);
    return 0;
}

static int loader_pid(void *ud, ost_value obj, ost_value *pid) {
    ost_loader *l = ud;
    uint64_t oid;
    if (ost__pers_is(obj, OST__F_PERSISTENT)) {
        ost__ptr_slot *s = ost__ptrtab_find(&l->oids, obj);
        if (s->key) oid = s->val;
        else if ((oid = ost_oid(l->c, obj)) == UINT64_MAX)
            return lfail(l, OST_EINVAL, "an object of another connection is referenced");
    } else if (ost_class_is_persistent(ost_instance_class(obj))) {
        int rc = take(l, obj, &oid);
        if (rc) return rc;
    } else
        return 0;
    int rc = ost__conn_ref_pid(l->c, obj, oid, pid);
    return rc ? lfail(l, rc, "%s", l->c->msg) : 0;
}

/* Waits for the batch in flight; reports progress or records its failure. */
static int wait_inflight(ost_loader *l) {
    if (!l->inflight) return 0;
    ost__pkg *p = l->pkg[!l->cur];
    int rc = ost__pkg_wait(l->st, p);
    l->inflight = false;
    if (rc && l->inflight_start < l->good_below) l->good_below = l->inflight_start;
    if (rc)
        return lfail(l, rc, "batch %llu (oids %llu and up) failed: %s",
                     (unsigned long long)l->batch_no,
                     (unsigned long long)l->batch_first[l->batch_no - 1],
                     p->msg[0] ? p->msg : ost_strerror(rc));
    l->done_objects += p->nrecs + p->nments;
    l->done_bytes += p->nbytes;
    if (l->o.progress) l->o.progress(l->o.ud, l->done_objects, l->done_bytes);
    return 0;
}

/* Hands the current batch to the committer. */
static int submit(ost_loader *l) {
    ost__pkg *p = l->pkg[l->cur];
    if (!p->nrecs && !p->nments) return 0;
    /* sorted while the batch before is written: random keys touch each
     * leaf page once, and the committer reads the batch in one sweep */
    if (ost__pkg_sort_ments(p, &l->msort)) return lfail(l, OST_ENOMEM, "out of memory");
    int rc = wait_inflight(l);
    if (rc) return rc;
    if (ost__reserve((void **)&l->batch_first, &l->capbatch_first, l->nbatch_first + 1,
                     sizeof *l->batch_first, 64))
        return lfail(l, OST_ENOMEM, "out of memory");
    l->batch_first[l->nbatch_first++] = p->nrecs ? p->recs[0].oid : l->cur_start;
    l->batch_no++;
    l->inflight_start = l->cur_start;
    ost__pkg_submit(l->st, p);
    l->inflight = true;
    l->cur = !l->cur;
    ost__pkg_reset(l->pkg[l->cur]);
    return 0;
}

/* Serializes the new persistent objects met so far (and those they
 * reach) into the current batch. */
static int flush_pending(ost_loader *l) {
    ost_writer *w = l->c->w;
    ost__pkg *p = l->pkg[l->cur];
    int rc = 0;
    for (size_t i = 0; i < l->npending; i++) {
        ost_value o = l->pending[i];
        ost__ptr_slot *s = ost__ptrtab_find(&l->oids, o);
        uint64_t ooid = s->val;
        const void *data;
        size_t n;
        uint32_t cid;
        bool wfail;
        ost__st_clear(l->st); /* the engine's message, if class_id fails */
        rc = ost__record_state(l->st, w, o, &data, &n, &cid, &wfail);
        if (rc && wfail) {
            if (!l->err)
                lfail(l, rc, "batch %llu (oids %llu and up) failed: oid %llu: %s",
                      (unsigned long long)l->batch_no + 1, (unsigned long long)l->cur_start,
                      (unsigned long long)ooid, ost_writer_errmsg(w));
            break;
        }
        if (rc) {
            char why[512];
            snprintf(why, sizeof why, "%s", ost_store_errmsg(l->st));
            lfail(l, rc, "batch %llu (oids %llu and up) failed: oid %llu: class id: %s",
                  (unsigned long long)l->batch_no + 1, (unsigned long long)l->cur_start,
                  (unsigned long long)ooid, why[0] ? why : ost_strerror(rc));
            break;
        }
        if ((rc = ost__pkg_add(p, ooid, 0, cid, data, n))) {
            lfail(l, rc, "out of memory");
            break;
        }
        l->added++;
    }
    for (size_t i = 0; i < l->npending; i++) ost_decref(l->pending[i]);
    l->npending = 0;
    return rc ? l->err : 0;
}

/* Submits the batch when it is full. */
static int maybe_submit(ost_loader *l) {
    ost__pkg *p = l->pkg[l->cur];
    if (p->nrecs + p->nments >= l->o.batch_objects || p->nbytes >= l->o.batch_bytes)
        return submit(l);
    return 0;
}

int ost_loader_add(ost_loader *l, ost_value obj, uint64_t *oid) {
    if (oid) *oid = UINT64_MAX;
    if (!l) return OST_EINVAL;
    if (l->err) return l->err;
    if (ost_typeof(obj) != OST_T_INSTANCE)
        return lfail(l, OST_EINVAL, "only instances can be stored (got a %s)",
                     ost_type_name(ost_typeof(obj)));
    if (ost__pers_is(obj, OST__F_PERSISTENT))
        return lfail(l, OST_EEXIST, "the object is stored already");
    uint64_t first;
    int rc = take(l, obj, &first);
    if (rc) return rc;
    ost_writer_set_persistent_id(l->c->w, loader_pid, l, OST_PID_INSTANCES);
    /* serialize obj, then the new persistent objects it reached */
    if ((rc = flush_pending(l))) return rc;
    if (oid) *oid = first;
    return maybe_submit(l);
}

int ost_loader_map_set(ost_loader *l, ost_value m, ost_value key, ost_value val) {
    int rc = !l ? OST_EINVAL : l->err;
    uint64_t moid;
    bool is_set;
    uint8_t kb[OST_MAP_KEY_MAX];
    size_t kl;
    if (!rc) {
        l->c->msg[0] = 0;
        rc = ost__map_encode_for(l->c, m, key, &moid, &is_set, kb, &kl);
        if (rc) lfail(l, rc, "%s", l->c->msg);
        if (l->c->snap_open) ost__conn_refresh(l->c); /* the first use of a map reads it */
    }
    if (!rc && is_set && val && val != OST_NONE)
        rc = lfail(l, OST_ETYPE, "map %llu is a set: its entries have no value",
                   (unsigned long long)moid);
    if (!rc && !is_set && !val)
        rc = lfail(l, OST_EINVAL, "map %llu: no value given", (unsigned long long)moid);
    const void *data = NULL;
    size_t n = 0;
    if (!rc && !is_set) {
        ost_writer_set_persistent_id(l->c->w, loader_pid, l, OST_PID_INSTANCES);
        if ((rc = ost_dump(l->c->w, val, &data, &n)))
            lfail(l, rc, "batch %llu: map %llu: value: %s", (unsigned long long)l->batch_no + 1,
                  (unsigned long long)moid, ost_writer_errmsg(l->c->w));
    }
    ost__pkg *p = l ? l->pkg[l->cur] : NULL;
    if (!rc && !p->nrecs && !p->nments && !l->npending) l->cur_start = l->oid_next;
    if (!rc && ost__pkg_ment(p, moid, 0, kb, kl, data, n, OST__MENT_BLIND))
        rc = lfail(l, OST_ENOMEM, "out of memory");
    ost_decref(key);
    ost_release(val);
    if (!rc) rc = flush_pending(l);
    else if (l) { /* objects the value reached are not stored */
        for (size_t i = 0; i < l->npending; i++) ost_decref(l->pending[i]);
        l->npending = 0;
    }
    if (!rc) l->added++;
    return rc ? rc : maybe_submit(l);
}

/* Objects still alive become persistent objects of the connection; after
 * a failure, those of the failed batches lose their oids. */
static void hand_over(ost_loader *l, uint64_t good_below) {
    ost__ptrtab *t = &l->oids;
    for (size_t i = 0; i <= t->mask; i++) {
        ost__ptr_slot *s = &t->slots[i];
        if (!s->key) continue;
        ost_value obj = s->key;
        uint64_t oid = s->val;
        ost__pers_mark(obj, 0, OST__F_PERSISTENT);
        if (oid < good_below) ost__conn_adopt(l->c, obj, oid);
    }
    ost__ptrtab_clear(t);
}

int ost_loader_close(ost_loader *l) { return ost_loader_finish(l, NULL, NULL); }

int ost_loader_finish(ost_loader *l, uint64_t *objects, uint64_t *bytes) {
    if (objects) *objects = 0;
    if (bytes) *bytes = 0;
    if (!l) return OST_EINVAL;
    if (!l->err) submit(l);
    wait_inflight(l);
    /* every batch has been stored or refused: the totals are final */
    ost_loader_stats(l, objects, bytes);
    /* after a failure, the batch being filled is not stored either */
    if (l->err && l->cur_start < l->good_below) l->good_below = l->cur_start;
    ost__conn_refresh(l->c); /* the connection sees what was loaded */
    l->c->loaders--;
    hand_over(l, l->good_below);
    int rc = l->err;
    if (rc) ost__fmt(l->c->msg, sizeof l->c->msg, "%s", l->msg); /* outlives l */
    for (ost_loader **pp = &t_loaders; *pp; pp = &(*pp)->tnext)
        if (*pp == l) {
            *pp = l->tnext;
            break;
        }
    ost__ptrtab_free(&l->oids);
    ost__pkg_free(l->pkg[0]);
    ost__pkg_free(l->pkg[1]);
    ost__msort_free(l->msort);
    free(l->batch_first);
    free(l->pending);
    free(l);
    return rc;
}

void ost_loader_stats(const ost_loader *l, uint64_t *objects, uint64_t *bytes) {
    if (objects) *objects = l ? l->done_objects : 0;
    if (bytes) *bytes = l ? l->done_bytes : 0;
}
