/* The in-memory engine's writes (mem.h): class ids, oid blocks, commits of
 * packages with exactly LMDB's checks (store/lmdb/engine.c, apply), and
 * the sweep of a pack. A commit is one write transaction for its group:
 * each package's versions are pushed with the undo log's mark before it,
 * and a package that fails is undone back to its mark, so nothing of it
 * is seen, while the packages before it stay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../testctl.h"
#include "host.h"
#include "mem.h"

/* ---- class ids and oid blocks ------------------------------------------------------ */

/* The class of (module, name) in db (any version), or NULL. */
static const mem_class *class_find(const mem_db *db, const char *module, size_t mlen,
                                   const char *name, size_t nlen) {
    for (size_t i = 0; i < db->ncls; i++) {
        const mem_class *c = &db->cls[i];
        if (c->mlen == mlen && c->nlen == nlen && !memcmp(c->module, module, mlen) &&
            !memcmp(c->name, name, nlen))
            return c;
    }
    return NULL;
}

int ost__mem_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                      size_t nlen, bool create, uint32_t *id) {
    mem_db *db = e->db;
    if (!module || !name || !mlen || !nlen || mlen + nlen + 2 > 1000)
        return mem_fail(e, OST_EINVAL, "%s: bad class name", e->shown);
    pthread_rwlock_rdlock(&db->lock);
    const mem_class *c = class_find(db, module, mlen, name, nlen);
    if (c) *id = c->id;
    pthread_rwlock_unlock(&db->lock);
    if (c) return 0;
    if (!create)
        return mem_fail(e, OST_ENOTFOUND, "%s: no class %.*s.%.*s", e->shown, (int)mlen, module,
                        (int)nlen, name);
    if (e->read_only)
        return mem_fail(e, OST_EREADONLY, "%s: read-only: cannot add class %.*s.%.*s", e->shown,
                        (int)mlen, module, (int)nlen, name);
    int rc = 0;
    pthread_mutex_lock(&db->wlock); /* a write transaction of its own */
    pthread_rwlock_wrlock(&db->lock);
    if ((c = class_find(db, module, mlen, name, nlen))) { /* added meanwhile */
        *id = c->id;
    } else if (db->meta.next_class >= UINT32_MAX) {
        rc = OST_ELIMIT;
    } else {
        /* a transaction of its own: snapshots from now on see the class */
        uint32_t nid = (uint32_t)db->meta.next_class;
        if (!(rc = mem_class_add(db, nid, db->ver + 1, module, mlen, name, nlen))) {
            db->ver++;
            db->meta.next_class++;
            *id = nid;
        }
    }
    pthread_rwlock_unlock(&db->lock);
    pthread_mutex_unlock(&db->wlock);
    if (rc)
        return mem_fail(e, rc, "%s: class %.*s.%.*s: %s", e->shown, (int)mlen, module, (int)nlen,
                        name, ost_strerror(rc));
    return 0;
}

int ost__mem_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first) {
    mem_db *db = e->db;
    if (e->read_only) return OST_EREADONLY;
    pthread_mutex_lock(&db->wlock);
    pthread_rwlock_wrlock(&db->lock);
    uint64_t next = db->meta.next_oid;
    bool ok = want <= OST__OID_LIMIT - next;
    if (ok) {
        db->meta.next_oid = next + want;
        *first = next;
    }
    pthread_rwlock_unlock(&db->lock);
    pthread_mutex_unlock(&db->wlock);
    if (!ok)
        return mem_fail(e, OST_ELIMIT, "%s: no %llu more oids below 2^63", e->shown,
                        (unsigned long long)want);
    return 0;
}

/* ---- commits ------------------------------------------------------------------------ */

/* Pushes record version (serial, cid, data[0, len)) of oid in s's write
 * transaction. 0 or OST_ENOMEM. */
static int put_record(ost__sess *s, uint64_t oid, uint64_t serial, uint32_t cid, const void *data,
                      size_t len) {
    uint8_t k[8];
    ost__be64(k, oid);
    return mem_write(s, &s->db->recs, k, 8, mem_ver_new(s->ver, serial, cid, false, data, len));
}

/* The record of oid as the write transaction sees it (NULL: none). */
static const mem_ver *wrec(ost__sess *s, uint64_t oid) {
    uint8_t k[8];
    ost__be64(k, oid);
    mem_node *n = mem_list_find(&s->db->recs, k, 8);
    return n ? mem_see(n, s->ver) : NULL;
}

/* The checks of a package before it writes anything, as LMDB's apply
 * makes them: each record read at a serial still has it (or its class's
 * resolver merges), and after a pack every referenced object still
 * exists. 0 or a code with p's message set. */
static int check_pkg(ost__sess *s, ost__pkg *p) {
    for (size_t i = 0; i < p->nrecs; i++) {
        const ost__rec *r = &p->recs[i];
        if (!r->read_serial) continue;
        const mem_ver *v = wrec(s, r->oid);
        if (!v) return mem_host_conflict(s->e, p, OST__CONFL_REMOVED, r->oid);
        if (v->serial != r->read_serial) {
            /* the class's resolver may merge it (nothing of p is written
             * yet); it changes p->recs[i] when it does */
            int rc = mem_host_resolve(s->e, p, i, v->serial, v->cid, v->data, v->len);
            if (rc) return rc;
        }
    }
    if (s->meta.low != p->low)
        for (size_t i = 0; i < p->nrefs; i++)
            if (!wrec(s, p->refs[i]))
                return mem_host_conflict(s->e, p, OST__CONFL_REF_GONE, p->refs[i]);
    return 0;
}

/* Appends commit serial's line to the commit log: the oids of p's records
 * that replaced stored ones. 0 or OST_ENOMEM. */
static int log_pkg(ost__sess *s, ost__pkg *p, uint64_t serial) {
    size_t n = 0;
    uint64_t *oids = NULL;
    for (size_t i = 0; i < p->nrecs; i++) {
        if (!p->recs[i].read_serial) continue;
        if (!oids && !(oids = malloc(p->nrecs * sizeof *oids))) return OST_ENOMEM;
        oids[n++] = p->recs[i].oid;
    }
    return n ? mem_log_add(s, serial, oids, n) : 0;
}

/* Applies package p in s's write transaction: its checks, its records,
 * its map entries (host->apply_maps, which calls back the ent_*
 * operations on s), its line of the commit log, last_serial. 0 with
 * *serial set, or a code with p's message set (the caller undoes). */
static int apply(ost__sess *s, ost__pkg *p, uint64_t *serial) {
    *serial = 0;
    if (!p->nrecs && !p->nments) return 0; /* changed ghosts only: no commit */
    if (s->meta.last_serial >= OST__SERIAL_LIMIT - 1) return OST_ELIMIT;
    uint64_t ser = s->meta.last_serial + 1;
    int rc = check_pkg(s, p);
    for (size_t i = 0; !rc && i < p->nrecs; i++) {
        const ost__rec *r = &p->recs[i];
        rc = put_record(s, r->oid, ser, r->cid, p->bytes + r->off, r->len);
    }
    if (!rc && p->nrecs > 1) OST__HOOK(mid_write, ()); /* tests: testctl.h, as LMDB calls it */
    if (!rc && p->nments) rc = mem_host_apply_maps(s->e, s->e->ops, s, p, ser);
    if (!rc) rc = log_pkg(s, p, ser);
    if (rc) return rc;
    s->meta.last_serial = ser;
    *serial = ser;
    return 0;
}

/* Sets p's outcome: rc and serial, and a message for a failure that has
 * none. */
static void outcome(ost__engine *e, ost__pkg *p, int rc, uint64_t serial) {
    p->rc = rc;
    p->serial = rc ? 0 : serial;
    if (rc && !p->msg[0])
        snprintf(p->msg, sizeof p->msg, "%s: commit failed: %s", e->shown, ost_strerror(rc));
}

int ost__mem_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    ost__engine *e = s->e;
    if (!n) return 0;
    if (s->in_snap || s->in_commit)
        return mem_fail(e, OST_EINVAL, "%s: commit with a snapshot open", e->shown);
    if (e->read_only) {
        for (size_t i = 0; i < n; i++) {
            pkgs[i]->msg[0] = 0;
            outcome(e, pkgs[i], OST_EREADONLY, 0);
        }
        return mem_fail(e, OST_EREADONLY, "%s: opened read-only", e->shown);
    }
    mem_wbegin(s);
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        p->rc = 0;
        p->msg[0] = 0;
        size_t mark = s->nundo, nlog = s->db->nlog;
        mem_meta meta = s->meta;
        uint64_t serial;
        int rc = apply(s, p, &serial);
        if (rc) { /* nothing of it stays */
            mem_undo(s, mark);
            mem_log_cut(s, nlog);
            s->meta = meta;
        }
        outcome(e, p, rc, serial);
    }
    mem_wend(s, true);
    return 0;
}

/* ---- pack ---------------------------------------------------------------------------- */

/* Tombstones, in s's write transaction, every record keep refuses that no
 * commit after mark wrote; *gone counts them. 0 or OST_ENOMEM. */
static int sweep_records(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid),
                         void *ud, uint64_t *gone) {
    for (mem_node *x = mem_list_first(&s->db->recs); x; x = x->next[0]) {
        const mem_ver *v = mem_see(x, s->ver);
        if (!v || v->serial > mark) continue; /* written after the mark: kept */
        if (keep(ud, ost__rd_be64(x->key))) continue;
        int rc = mem_push(s, &s->db->recs, x, mem_ver_new(s->ver, 0, 0, true, NULL, 0));
        if (rc) return rc;
        (*gone)++;
    }
    return 0;
}

/* The entries of maps the mark did not keep and whose record is gone (or
 * never was), and the deletion records of maps without a record. */
static int sweep_maps(ost__sess *s, bool (*keep)(void *ud, uint64_t oid), void *ud) {
    uint64_t *maps;
    size_t n;
    int rc = mem_maps_of(s, &s->db->ents, &maps, &n);
    for (size_t i = 0; !rc && i < n; i++)
        if (!keep(ud, maps[i]) && !wrec(s, maps[i]))
            rc = mem_drop_keys(s, &s->db->ents, maps[i], NULL);
    free(maps);
    if (rc) return rc;
    rc = mem_maps_of(s, &s->db->dels, &maps, &n);
    for (size_t i = 0; !rc && i < n; i++)
        if (!wrec(s, maps[i])) rc = mem_drop_keys(s, &s->db->dels, maps[i], NULL);
    free(maps);
    return rc;
}

int ost__mem_sweep(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid), void *ud,
                   uint64_t *removed) {
    ost__engine *e = s->e;
    *removed = 0;
    if (e->read_only) return mem_fail(e, OST_EREADONLY, "%s: read-only", e->shown);
    if (s->in_snap || s->in_commit)
        return mem_fail(e, OST_EINVAL, "%s: sweep with a snapshot open", e->shown);
    mem_wbegin(s);
    uint64_t gone = 0;
    int rc = sweep_records(s, mark, keep, ud, &gone);
    if (!rc) rc = sweep_maps(s, keep, ud);
    if (!rc) {
        /* the commit log goes for snapshots from now on */
        mem_log_trim_all(s);
        s->meta.low = s->meta.last_serial + 1;
    }
    mem_wend(s, rc == 0);
    if (rc) return mem_fail(e, rc, "%s: pack: %s", e->shown, ost_strerror(rc));
    *removed = gone;
    return 0;
}
