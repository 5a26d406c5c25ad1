/* What the in-memory engine asks of the store (host.h): each function a
 * call through the host table e->host that the engine's open was given,
 * for the store handle e->st it was opened for. */
#include "host.h"
#include "mem.h"

/* Sets e's store's message for the calling thread to text; returns code. */
int mem_host_fail(ost__engine *e, int code, const char *text) {
    return ost__eng_fail(e->host, e->st, code, "%s", text);
}

/* p's conflict on oid, worded by the store. */
int mem_host_conflict(ost__engine *e, ost__pkg *p, int why, uint64_t oid) {
    return e->host->conflict(p, why, oid, 0, 0);
}

/* The store's resolver run on record i of p. */
int mem_host_resolve(ost__engine *e, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n) {
    return e->host->resolve(e->st, p, i, cur, cid, pickle, n);
}

/* p's map entries applied through ops on s. */
int mem_host_apply_maps(ost__engine *e, const ost__engine_ops *ops, ost__sess *s, ost__pkg *p,
                        uint64_t serial) {
    return e->host->apply_maps(e->st, ops, s, p, serial);
}

/* A new store's root state, from the store. */
int mem_host_root(ost__engine *e, uint8_t **out, size_t *len) {
    return e->host->root_state(e->st, out, len);
}

/* The store's format, told to the store. */
void mem_host_format(ost__engine *e, uint64_t format) { e->host->set_format(e->st, format); }
