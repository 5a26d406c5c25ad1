/* The host table (store/engine.h, ost__host): what the store lends an
 * engine, as SQLite's sqlite3_vfs lends itself to each file. An engine
 * calls these through the pointer its open was given and never links to
 * the store's functions by name, so no call runs from an engine's folder
 * up into store/ (tests/layering_test.py checks it). */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

static int host_fail(ost_store *st, int code, const char *fmt, va_list ap) {
    return ost__st_vfail(st, code, fmt, ap);
}

static void host_set_format(ost_store *st, uint64_t format) {
    __atomic_store_n(&st->format, format, __ATOMIC_RELAXED);
}

static int host_apply_maps(ost_store *st, const ost__engine_ops *ops, ost__sess *s, ost__pkg *p,
                           uint64_t serial) {
    (void)st;
    return ost__maps_apply(ops, s, p, serial);
}

static int host_resolve(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                        const void *pickle, size_t n) {
    return ost__pkg_resolve(st, p, i, cur, cid, pickle, n);
}

/* The root of a new store: the store's root class (the registry's
 * PersistentMapping, or the class ost_store_open made), or a class of its
 * own for an engine opened without ost_store_open (the conformance
 * suite's bare handles). */
static int host_root_state(ost_store *st, uint8_t **out, size_t *len) {
    ost_class_def rdef = {.module = "persistent.mapping", .name = "PersistentMapping",
                          .persistent = true};
    ost_value cls = st->root_cls ? ost_incref(st->root_cls) : ost_class_new(&rdef);
    ost_writer *w = cls ? ost_writer_new() : NULL;
    ost_value inst = 0;
    const void *p = NULL;
    size_t n = 0;
    int rc = w ? ost__root_dump(cls, w, &inst, &p, &n) : OST_ENOMEM;
    *out = NULL;
    if (!rc && !(*out = malloc(n ? n : 1))) rc = OST_ENOMEM;
    if (!rc) {
        memcpy(*out, p, n);
        *len = n;
    }
    ost_decref(inst);
    ost_decref(cls);
    ost_writer_free(w);
    return rc;
}

const ost__host ost__store_host = {
    .version = OST__ENGINE_VERSION,
    .fail = host_fail,
    .clear = ost__st_clear,
    .errmsg = ost_store_errmsg,
    .set_format = host_set_format,
    .apply_maps = host_apply_maps,
    .conflict = ost__pkg_conflict,
    .resolvable = ost__pkg_resolvable,
    .resolve = host_resolve,
    .count_fail = ost__maps_count_fail,
    .root_state = host_root_state,
};
