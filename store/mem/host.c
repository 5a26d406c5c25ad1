/* What the in-memory engine asks of the store (host.h): the one file of
 * store/mem/ that sees store_internal.h, each function a thin call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store_internal.h"
#include "host.h"

/* Sets st's message for the calling thread to text; returns code. */
int mem_host_fail(ost_store *st, int code, const char *text) {
    return ost__st_fail(st, code, "%s", text);
}

/* The count of p's records. */
size_t mem_host_nrecs(const ost__pkg *p) { return p->nrecs; }

/* Record i of p into *r (borrowed views into p's bytes). */
void mem_host_rec(const ost__pkg *p, size_t i, mem_hrec *r) {
    const ost__rec *x = &p->recs[i];
    *r = (mem_hrec){x->oid, x->read_serial, x->cid, p->bytes + x->off, x->len};
}

/* The references p's records make to stored objects. */
size_t mem_host_nrefs(const ost__pkg *p) { return p->nrefs; }
uint64_t mem_host_ref(const ost__pkg *p, size_t i) { return p->refs[i]; }

/* The meta.low (pack mark) p's connection checked its cache at. */
uint64_t mem_host_low(const ost__pkg *p) { return p->low; }

/* The count of p's map entries. */
size_t mem_host_nments(const ost__pkg *p) { return p->nments; }

/* Clears p's outcome before it is applied. */
void mem_host_begin(ost__pkg *p) {
    p->rc = 0;
    p->msg[0] = 0;
}

/* Sets p's outcome (rc, serial), with a message for a failure that has
 * none. */
void mem_host_outcome(ost__pkg *p, const char *shown, int rc, uint64_t serial) {
    p->rc = rc;
    p->serial = rc ? 0 : serial;
    if (rc && !p->msg[0])
        snprintf(p->msg, sizeof p->msg, "%s: commit failed: %s", shown, ost_strerror(rc));
}

/* Sets p's message. */
void mem_host_msg(ost__pkg *p, const char *text) { snprintf(p->msg, sizeof p->msg, "%s", text); }

/* p's conflict on oid, in the store's words (ost__pkg_conflict). */
int mem_host_conflict(ost__pkg *p, int why, uint64_t oid) {
    return ost__pkg_conflict(p, why == MEM_CONFL_REMOVED ? OST__CONFL_REMOVED : OST__CONFL_REF_GONE,
                             oid, 0, 0);
}

/* The store's resolver run on record i of p (ost__pkg_resolve). */
int mem_host_resolve(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n) {
    return ost__pkg_resolve(st, p, i, cur, cid, pickle, n);
}

/* p's map entries applied through ops on s (ost__maps_apply). */
int mem_host_apply_maps(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t serial) {
    return ost__maps_apply(ops, s, p, serial);
}

/* A map's or counter's count moved by delta (ost__record_count_add). */
int mem_host_count_add(uint8_t *p, size_t n, int64_t delta, bool counter) {
    return ost__record_count_add(p, n, delta, counter);
}

/* The root's class names and state (ost__root_dump), as LMDB writes it
 * in a new store: the store's root class, or one of its own when the
 * engine's open is called without ost_store_open (the conformance
 * suite). */
int mem_host_root(ost_store *st, const char **module, const char **name, uint8_t **out,
                  size_t *len) {
    static const ost_class_def rdef = {.module = "persistent.mapping",
                                       .name = "PersistentMapping", .persistent = true};
    *module = rdef.module;
    *name = rdef.name;
    *out = NULL;
    ost_value cls = st->root_cls ? ost_incref(st->root_cls) : ost_class_new(&rdef);
    ost_writer *w = ost_writer_new();
    ost_value inst = 0;
    const void *p;
    size_t n;
    int rc = cls && w ? ost__root_dump(cls, w, &inst, &p, &n) : OST_ENOMEM;
    if (!rc && !(*out = malloc(n ? n : 1))) rc = OST_ENOMEM;
    if (!rc) {
        memcpy(*out, p, n);
        *len = n;
    }
    ost_decref(inst);
    ost_decref(cls);
    ost_writer_free(w);
    return rc ? OST_ENOMEM : 0;
}

/* Tells the store its format and shown address. */
void mem_host_opened(ost_store *st, uint64_t format, const char *shown) {
    __atomic_store_n(&st->format, format, __ATOMIC_RELAXED);
    snprintf(st->shown, sizeof st->shown, "%s", shown);
}

/* Whether st has connections open. */
bool mem_host_conns_open(ost_store *st) {
    uv_mutex_lock(&st->lock);
    bool any = st->conns != NULL;
    uv_mutex_unlock(&st->lock);
    return any;
}
