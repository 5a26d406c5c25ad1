/* Test helper for the programs that write stores for the Python-side tests
 * (tests/make_store.c, tests/cli/make_maps.c): opens a store with a
 * registry holding one persistent class, demo.Item, with the given fields. */
#ifndef OST_TESTS_DEMOSTORE_H
#define OST_TESTS_DEMOSTORE_H

#include <stdbool.h>
#include <stdio.h>

#include "ostore.h"

/* Opens the store at dir (create: making it if it is not there). *reg gets
 * the registry (the caller frees it after closing the store) and *cls the
 * class demo.Item (borrowed from the registry). On failure says why on
 * stderr after "prog: ", frees what it made and returns NULL. */
static inline ost_store *demo_store_open(const char *prog, const char *dir, bool create,
                                         const char *const *fields, size_t nfields,
                                         ost_registry **reg, ost_value *cls) {
    ost_class_def def = {.module = "demo", .name = "Item", .fields = fields,
                         .nfields = nfields, .persistent = true};
    *reg = ost_registry_new();
    if (!*reg || ost_registry_add(*reg, &def, cls)) {
        fprintf(stderr, "%s: cannot register demo.Item\n", prog);
        ost_registry_free(*reg);
        return NULL;
    }
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.registry = *reg;
    ost_store *st = ost_store_new();
    if (!st || ost_store_open(st, dir, &o)) {
        fprintf(stderr, "%s: %s\n", prog, st ? ost_store_errmsg(st) : "out of memory");
        ost_store_close(st);
        ost_registry_free(*reg);
        return NULL;
    }
    return st;
}

#endif
