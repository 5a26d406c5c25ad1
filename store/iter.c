/* Iterators over the records of a connection's snapshot, in oid order,
 * all of them or the instances of one class (ost_iter_open).
 *
 * Each step asks the engine for the first record at or after the first oid
 * not returned yet (ops->scan, stopped at the first match), so nothing is
 * held between calls: an engine that reopens its snapshot meanwhile
 * (LMDB's map resize) needs no repair here.
 *
 * An engine whose snapshots never move (no OST__ENG_SNAP_MAY_MOVE:
 * PostgreSQL) would pay a query per step that way, each fetching a page
 * of rows to use one: there a step takes the next BATCH matches at once
 * (their oid, serial, class and size; no pickle) and the next steps
 * return them, one scan per BATCH records. */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

struct ost_iter {
    ost_conn *c;
    uint64_t txn_gen;  /* the transaction it belongs to */
    uint64_t next;     /* the first oid not returned yet */
    bool done;
    bool by_class;     /* instances of class id cid only */
    bool no_such;      /* the class has no id in the store: nothing matches */
    uint32_t cid;
    bool has_cid;      /* the class itself has an id (cid) */
    uint32_t *vcids;   /* the ids of its versions (format 4), which match too */
    size_t nvcids, capvcids;
    bool nomem;
    const char *m, *n; /* the class's module and name while versions are gathered */
    size_t ml, nl;
    ost_value cls; /* the class last reported without an object (a reference) */
    struct iter_hit *hits; /* batched matches (snapshots that never move) */
    size_t nhits, at;
    bool last_batch;  /* the scan that filled hits reached the end */
};

#define BATCH 4096

/* A record a batched scan matched: what a step reports of it. */
struct iter_hit {
    uint64_t oid, serial;
    uint32_t cid;
    size_t len;
    bool dmg;
};

/* class_each's callback: notes the ids of the versions of the class,
 * entries named `Name(...)` of its module. */
static int note_version(void *ud, const ost__classview *cv) {
    ost_iter *it = ud;
    if (cv->mlen != it->ml || memcmp(cv->module, it->m, it->ml) || cv->nlen < it->nl + 2 ||
        memcmp(cv->name, it->n, it->nl) || cv->name[it->nl] != '(' || cv->name[cv->nlen - 1] != ')')
        return 0;
    if (ost__reserve((void **)&it->vcids, &it->capvcids, it->nvcids + 1, sizeof *it->vcids, 8)) {
        it->nomem = true;
        return 1;
    }
    it->vcids[it->nvcids++] = cv->id;
    return 0;
}

/* Whether a record of class id cid is an instance of the iterator's class. */
static bool cid_match(const ost_iter *it, uint32_t cid) {
    if (it->has_cid && cid == it->cid) return true;
    for (size_t i = 0; i < it->nvcids; i++)
        if (it->vcids[i] == cid) return true;
    return false;
}

int ost_iter_open(ost_conn *c, ost_value cls, ost_iter **out) {
    if (out) *out = NULL;
    if (!c || !out) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (cls && ost_typeof(cls) != OST_T_GLOBAL)
        return ost__c_fail(c, OST_ETYPE, "ost_iter_open: the class is a %s, not a class",
                           ost_type_name(ost_typeof(cls)));
    ost_iter *it = calloc(1, sizeof *it);
    if (!it) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    it->c = c;
    int rc = ost__conn_pin(c); /* the transaction starts here if it has not */
    if (!rc) ost__conn_unpin(c);
    if (!rc && cls) {
        it->by_class = true;
        size_t ml, nl;
        const char *m = ost_data(ost_global_module(cls), &ml);
        const char *n = ost_data(ost_global_name(cls), &nl);
        int mrc = c->st->ops->class_id(c->st->eng, m, ml, n, nl, false, &it->cid);
        it->has_cid = mrc == 0;
        if (mrc && mrc != OST_ENOTFOUND && mrc != OST_EINVAL)
            rc = ost__c_fail(c, mrc, "reading the class table: %s", ost_store_errmsg(c->st));
        /* its versions, in the snapshot: the class ids of the records it
         * holds were made before them */
        it->m = m, it->n = n, it->ml = ml, it->nl = nl;
        if (!rc && m && n && !(rc = ost__conn_pin(c))) {
            int erc = c->st->ops->class_each(c->sess, note_version, it);
            ost__conn_unpin(c);
            if (it->nomem) rc = ost__c_fail(c, OST_ENOMEM, "out of memory");
            else if (erc)
                rc = ost__c_fail(c, erc, "reading the class table: %s", ost_store_errmsg(c->st));
        }
        it->m = it->n = NULL;
        if (!rc && !it->has_cid && !it->nvcids) it->no_such = true;
    }
    it->txn_gen = c->txn_gen;
    if (rc) {
        free(it->vcids);
        free(it);
        return rc;
    }
    *out = it;
    return 0;
}

/* The first record the iterator matches, as the scan meets it. */
typedef struct {
    ost_iter *it;
    bool found;
    uint64_t oid;
    ost__recview r;
} first_match;

static int match_fn(void *ud, uint64_t oid, const ost__recview *r) {
    first_match *fm = ud;
    bool dmg = r->len == 0 && !r->pickle;
    /* a damaged record may be one of the class: reported, never skipped */
    if (fm->it->by_class && !dmg && !cid_match(fm->it, r->cid)) return 0;
    fm->found = true;
    fm->oid = oid;
    fm->r = *r;
    return 1; /* stop */
}

/* The batched scan's callback: keeps up to BATCH matches in it->hits. */
static int batch_fn(void *ud, uint64_t oid, const ost__recview *r) {
    ost_iter *it = ud;
    bool dmg = r->len == 0 && !r->pickle;
    if (it->by_class && !dmg && !cid_match(it, r->cid)) return 0;
    if (it->nhits == BATCH) return 1; /* stop: full */
    it->hits[it->nhits++] = (struct iter_hit){oid, r->serial, r->cid, r->len, dmg};
    return 0;
}

/* The next match of a batching iterator into *fm (fm->found false at the
 * end): from the batch, or a new scan from it->next. */
static int batch_next(ost_iter *it, first_match *fm) {
    ost_conn *c = it->c;
    if (it->at == it->nhits && !it->last_batch) {
        if (!it->hits && !(it->hits = malloc(BATCH * sizeof *it->hits)))
            return ost__c_fail(c, OST_ENOMEM, "out of memory");
        it->nhits = it->at = 0;
        int rc = c->st->ops->scan(c->sess, it->next, 0, batch_fn, it);
        if (rc && rc != 1) return ost__c_fail(c, rc, "reading the records: %s", ost_store_errmsg(c->st));
        it->last_batch = rc != 1;
    }
    if (it->at == it->nhits) return 0;
    const struct iter_hit *h = &it->hits[it->at++];
    fm->found = true;
    fm->oid = h->oid;
    fm->r = (ost__recview){.serial = h->serial, .cid = h->cid, .len = h->dmg ? 0 : h->len,
                           .pickle = h->dmg ? NULL : (const uint8_t *)""};
    return 0;
}

int ost_iter_next(ost_iter *it, ost_record_info *info, ost_value *obj) {
    if (obj) *obj = 0;
    if (info) memset(info, 0, sizeof *info);
    if (!it) return OST_EINVAL;
    ost_conn *c = it->c;
    if (!c->st) return ost__conn_dead(c);
    if (it->txn_gen != c->txn_gen)
        return ost__c_fail(c, OST_ETXN, "iterator: its transaction has ended (commit or abort): "
                                        "open a new one");
    if (it->done || it->no_such) return OST_ENOTFOUND;
    int rc = ost__conn_pin(c);
    if (rc) return rc;
    first_match fm = {it, false, 0, {0}};
    if (!(c->st->ops->flags & OST__ENG_SNAP_MAY_MOVE)) {
        rc = batch_next(it, &fm);
    } else {
        rc = c->st->ops->scan(c->sess, it->next, 0, match_fn, &fm);
        if (rc == 1) rc = 0;
        else if (rc) rc = ost__c_fail(c, rc, "reading the records: %s", ost_store_errmsg(c->st));
    }
    if (!rc && !fm.found) {
        it->done = true;
        rc = OST_ENOTFOUND;
    }
    if (!rc) {
        uint64_t oid = fm.oid;
        bool dmg = fm.r.len == 0 && !fm.r.pickle;
        it->next = oid + 1;
        if (oid == UINT64_MAX) it->done = true;
        if (info) {
            info->oid = oid;
            info->size = dmg ? 0 : fm.r.len + OST_HDR_SIZE;
            info->serial = dmg ? 0 : fm.r.serial;
            info->damaged = dmg;
        }
        if (!dmg && obj) {
            rc = ost__conn_get_locked(c, oid, obj);
            if (!rc && info) info->cls = ost_instance_class(*obj);
        } else if (!dmg && info) {
            /* no object asked for: no ghost is made (a listing of a big
             * store would fill the cache) */
            ost_value k;
            int crc = ost__conn_class_of(c, fm.r.cid, &k);
            if (!crc) {
                ost_decref(it->cls);
                it->cls = k; /* kept until the next call: info->cls is borrowed */
                info->cls = k;
            } else
                rc = crc;
        }
        if (rc == OST_ECORRUPT && info) { /* a class id not in the class table */
            info->damaged = true;
            info->cls = 0;
            info->serial = 0;
            rc = 0;
        }
    }
    ost__conn_unpin(c);
    return rc;
}

void ost_iter_close(ost_iter *it) {
    if (!it) return;
    ost_decref(it->cls);
    free(it->hits);
    free(it->vcids);
    free(it);
}
