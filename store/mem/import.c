/* The in-memory engine's bulk import (ostore import and copy; mem.h): what
 * is given is staged, checked as it comes (order, limits) and at commit
 * (each map's record), then written in one write transaction that
 * replaces the new store's contents, so a failure or an abort leaves the
 * store as it was. */
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "mem.h"

#define LIMIT OST__OID_LIMIT /* oids and serials: pickle ints (OST__SERIAL_LIMIT too) */

/* A staged record or entry: its list key and its version (NULL once it
 * is in the store). */
typedef struct {
    uint8_t *key;
    size_t klen;
    mem_ver *v;
} staged;

struct ost__import {
    ost__engine *e;
    mem_class *cls; /* staged classes, by arrival */
    size_t ncls, capcls;
    staged *recs, *ents; /* by key ascending (checked) */
    size_t nrecs, caprecs, nents, capents;
};

/* Frees im and everything staged in it (NULL is allowed). */
static void imp_free(ost__import *im) {
    if (!im) return;
    for (size_t i = 0; i < im->ncls; i++) free(im->cls[i].module);
    for (size_t i = 0; i < im->nrecs; i++) free(im->recs[i].key), free(im->recs[i].v);
    for (size_t i = 0; i < im->nents; i++) free(im->ents[i].key), free(im->ents[i].v);
    free(im->cls);
    free(im->recs);
    free(im->ents);
    free(im);
}

/* An import out of memory: OST_ENOMEM with the message set. */
static int oom(ost__import *im) {
    return mem_fail(im->e, OST_ENOMEM, "%s: import: out of memory", im->e->shown);
}

/* Checks that db is new (what imp_begin and drop take): 0 or OST_EEXIST
 * with the message. Lock held. */
static int check_new(ost__engine *e, const mem_meta *m, uint64_t ver) {
    uint64_t nrec;
    if (mem_is_new(e->db, m, ver, &nrec)) return 0;
    return mem_fail(e, OST_EEXIST,
                    "%s: not a new store (%llu objects, last commit %llu); import needs a new or "
                    "empty store",
                    e->shown, (unsigned long long)nrec, (unsigned long long)m->last_serial);
}

int ost__mem_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out) {
    (void)size_hint; /* memory grows as it is used */
    *out = NULL;
    if (e->read_only) return mem_fail(e, OST_EREADONLY, "%s: opened read-only", e->shown);
    pthread_rwlock_rdlock(&e->db->lock);
    int rc = check_new(e, &e->db->meta, e->db->ver);
    pthread_rwlock_unlock(&e->db->lock);
    if (rc) return rc;
    ost__import *im = calloc(1, sizeof *im);
    if (!im) return mem_fail(e, OST_ENOMEM, "%s: out of memory", e->shown);
    im->e = e;
    *out = im;
    return 0;
}

int ost__mem_imp_class(ost__import *im, uint32_t id, const char *module, size_t mlen,
                       const char *name, size_t nlen) {
    for (size_t i = 0; i < im->ncls; i++) {
        const mem_class *c = &im->cls[i];
        if (c->id == id || (c->mlen == mlen && c->nlen == nlen && !memcmp(c->module, module, mlen) &&
                            !memcmp(c->name, name, nlen)))
            return mem_fail(im->e, OST_EEXIST, "class id %u (%.*s.%.*s) is listed twice", id,
                            (int)mlen, module, (int)nlen, name);
    }
    if (mem_grow((void **)&im->cls, &im->capcls, im->ncls + 1, sizeof *im->cls)) return oom(im);
    char *b = malloc(mlen + nlen + 2);
    if (!b) return oom(im);
    memcpy(b, module, mlen);
    b[mlen] = 0;
    memcpy(b + mlen + 1, name, nlen);
    b[mlen + 1 + nlen] = 0;
    im->cls[im->ncls++] = (mem_class){id, 0, b, b + mlen + 1, mlen, nlen};
    return 0;
}

/* Stages (key, version) at the end of *arr. 0 or OST_ENOMEM. */
static int stage(staged **arr, size_t *n, size_t *cap, const uint8_t *key, size_t klen,
                 mem_ver *v) {
    uint8_t *k = malloc(klen);
    if (!v || !k || mem_grow((void **)arr, cap, *n + 1, sizeof **arr)) {
        free(v);
        free(k);
        return OST_ENOMEM;
    }
    memcpy(k, key, klen);
    (*arr)[(*n)++] = (staged){k, klen, v};
    return 0;
}

int ost__mem_imp_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                        const void *pickle, size_t len) {
    if (im->nrecs && oid <= ost__rd_be64(im->recs[im->nrecs - 1].key))
        return mem_fail(im->e, OST_EINVAL, "oid %llu: oids must ascend, each once",
                        (unsigned long long)oid);
    if (oid >= LIMIT || serial >= LIMIT)
        return mem_fail(im->e, OST_EINVAL, "oid %llu: its %s is past the store's limit",
                        (unsigned long long)oid, oid >= LIMIT ? "oid" : "serial");
    uint8_t k[8];
    ost__be64(k, oid);
    if (stage(&im->recs, &im->nrecs, &im->caprecs, k, 8, mem_ver_new(0, serial, cid, false, pickle, len)))
        return oom(im);
    return 0;
}

int ost__mem_imp_entry(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                       uint64_t serial, const void *value, size_t vlen) {
    uint8_t k[MEM_KEYMAX];
    if (klen > OST_MAP_KEY_MAX)
        return mem_fail(im->e, OST_EINVAL, "map %llu: a key of %zu bytes (at most %d)",
                        (unsigned long long)map, klen, OST_MAP_KEY_MAX);
    size_t kl = mem_ekey(k, map, key, klen);
    const staged *last = im->nents ? &im->ents[im->nents - 1] : NULL;
    if (last && mem_kcmp(last->key, last->klen, k, kl) >= 0)
        return mem_fail(im->e, OST_EINVAL,
                        "map %llu: entries must ascend (by map oid, then by key), each once",
                        (unsigned long long)map);
    if (map >= LIMIT || serial >= LIMIT)
        return mem_fail(im->e, OST_EINVAL, "map %llu: its %s is past the store's limit",
                        (unsigned long long)map, map >= LIMIT ? "oid" : "serial");
    if (stage(&im->ents, &im->nents, &im->capents, k, kl, mem_ver_new(0, serial, 0, false, value, vlen)))
        return oom(im);
    return 0;
}

/* The staged class of id (NULL: none). */
static const mem_class *class_of(const ost__import *im, uint32_t id) {
    for (size_t i = 0; i < im->ncls; i++)
        if (im->cls[i].id == id) return &im->cls[i];
    return NULL;
}

/* The staged record of oid (NULL: none): records ascend. */
static const mem_ver *record_of(const ost__import *im, uint64_t oid) {
    size_t lo = 0, hi = im->nrecs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t o = ost__rd_be64(im->recs[mid].key);
        if (o == oid) return im->recs[mid].v;
        if (o < oid) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Each map with entries has a record of class ostore.maps.OrderedMap
 * whose entries all have values, or OrderedSet whose entries have none. */
static int check_maps(ost__import *im) {
    for (size_t i = 0; i < im->nents; i++) {
        uint64_t map = ost__rd_be64(im->ents[i].key);
        if (i && ost__rd_be64(im->ents[i - 1].key) == map) continue;
        const mem_ver *r = record_of(im, map);
        const mem_class *c = r ? class_of(im, r->cid) : NULL;
        bool is_map = c && !strcmp(c->module, "ostore.maps") && !strcmp(c->name, "OrderedMap");
        bool is_set = c && !strcmp(c->module, "ostore.maps") && !strcmp(c->name, "OrderedSet");
        if (!is_map && !is_set)
            return mem_fail(im->e, OST_EINVAL,
                            "entries under oid %llu, which has no record of class "
                            "ostore.maps.OrderedMap or OrderedSet",
                            (unsigned long long)map);
        for (size_t j = i; j < im->nents && ost__rd_be64(im->ents[j].key) == map; j++)
            if (is_map != (im->ents[j].v->len > 0))
                return mem_fail(im->e, OST_EINVAL, is_set ? "map %llu: an entry of a set has a value"
                                                          : "map %llu: an entry without a value pickle",
                                (unsigned long long)map);
    }
    return 0;
}

/* Pushes the staged versions of arr into list l at s->ver. */
static int push_all(ost__sess *s, mem_list *l, staged *arr, size_t n) {
    for (size_t i = 0; i < n; i++) {
        arr[i].v->ver = s->ver;
        int rc = mem_write(s, l, arr[i].key, arr[i].klen, arr[i].v);
        arr[i].v = NULL; /* the list's now, or freed by the write */
        if (rc) return rc;
    }
    return 0;
}

/* Tombstones every key of list l that s->ver sees. */
static int clear_list(ost__sess *s, mem_list *l) {
    for (mem_node *x = mem_list_first(l); x; x = x->next[0]) {
        if (!mem_see(x, s->ver)) continue;
        int rc = mem_push(s, l, x, mem_ver_new(s->ver, 0, 0, true, NULL, 0));
        if (rc) return rc;
    }
    return 0;
}

/* qsort's order of classes: by id. */
static int cmp_class(const void *a, const void *b) {
    uint32_t x = ((const mem_class *)a)->id, y = ((const mem_class *)b)->id;
    return x < y ? -1 : x > y;
}

/* Replaces the class table with the staged one (the old classes are kept
 * until the store goes: a snapshot may hold their views). */
static int swap_classes(ost__import *im, mem_db *db, uint64_t ver) {
    size_t need = db->nold_cls + db->ncls, cap = db->nold_cls;
    if (need && mem_grow((void **)&db->old_cls, &cap, need, sizeof *db->old_cls)) return OST_ENOMEM;
    if (db->ncls) memcpy(db->old_cls + db->nold_cls, db->cls, db->ncls * sizeof *db->cls);
    db->nold_cls = need;
    free(db->cls);
    for (size_t i = 0; i < im->ncls; i++) im->cls[i].ver = ver;
    if (im->ncls) qsort(im->cls, im->ncls, sizeof *im->cls, cmp_class); /* NULL when none (UBSan) */
    db->cls = im->cls;
    db->ncls = im->ncls;
    db->capcls = im->capcls;
    im->cls = NULL;
    im->ncls = im->capcls = 0;
    return 0;
}

/* The import's write transaction on session s: the store still new, its
 * contents replaced, the counters set. */
static int write_all(ost__import *im, ost__sess *s, uint64_t next_oid, uint64_t last_serial,
                     uint64_t next_class) {
    mem_db *db = s->db;
    int rc = check_new(im->e, &s->meta, s->ver);
    if (!rc) rc = clear_list(s, &db->recs);
    if (!rc) rc = clear_list(s, &db->ents);
    if (!rc) rc = clear_list(s, &db->dels);
    if (!rc) rc = push_all(s, &db->recs, im->recs, im->nrecs);
    if (!rc) rc = push_all(s, &db->ents, im->ents, im->nents);
    if (!rc) {
        pthread_rwlock_wrlock(&db->lock);
        rc = swap_classes(im, db, s->ver);
        pthread_rwlock_unlock(&db->lock);
    }
    if (rc) return rc == OST_ENOMEM ? oom(im) : rc;
    mem_log_trim_all(s);
    s->meta = (mem_meta){OST_STORE_FORMAT, next_oid, last_serial, last_serial + 1, next_class};
    return 0;
}

int ost__mem_imp_commit(ost__import *im, uint64_t format, uint64_t next_oid,
                        uint64_t last_serial, uint64_t next_class) {
    (void)format; /* what is imported has what the current format has */
    int rc = check_maps(im);
    ost__sess *s = NULL;
    if (!rc) rc = ost__mem_sess_open(im->e, &s);
    if (!rc) {
        mem_wbegin(s);
        rc = write_all(im, s, next_oid, last_serial, next_class);
        mem_wend(s, rc == 0);
        ost__mem_sess_close(s);
    }
    imp_free(im);
    return rc;
}

void ost__mem_imp_abort(ost__import *im) { imp_free(im); }
