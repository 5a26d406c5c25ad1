/* The object cache's limits: by object count and by record bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakcheck.h"
#include "ostore.h"
#include "rmtree.h"

static char dir[64];
static ost_registry *reg;
static ost_value Blob;

static void setup(void) {
    strcpy(dir, "/tmp/ostore-cache-XXXXXX");
    cr_assert(mkdtemp(dir));
    static const char *fields[] = {"data"};
    ost_class_def def = {.module = "t", .name = "Blob", .fields = fields, .nfields = 1,
                         .persistent = true};
    reg = ost_registry_new();
    cr_assert_eq(ost_registry_add(reg, &def, &Blob), 0);
}

static void teardown(void) {
    ost_registry_free(reg);
    rmtree(dir);
}

/* 200 objects of about 1 KiB each under the root, committed. */
static ost_store *filled_store(void) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    cr_assert_eq(ost_store_open(st, dir, &o), 0, "%s", ost_store_errmsg(st));
    ost_conn *c;
    cr_assert_eq(ost_conn_open(st, &c), 0);
    ost_value l = ost_list_new(0);
    char payload[1000];
    memset(payload, 'p', sizeof payload);
    for (int i = 0; i < 200; i++) {
        ost_value b = ost_instance_new(ost_incref(Blob));
        ost_instance_set_slot(b, 0, ost_bytes(payload, sizeof payload));
        ost_list_append(l, b);
    }
    cr_assert_eq(ost_root_set(c, ost_str_c("blobs"), l), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    return st;
}

static size_t load_all(ost_conn *c) {
    ost_value key = ost_str_c("blobs");
    ost_value l = ost_root_get(c, key);
    ost_decref(key);
    cr_assert_eq(ost_len(l), 200);
    for (size_t i = 0; i < ost_len(l); i++) {
        cr_assert_eq(ost_activate(c, ost_item(l, i)), 0, "%s", ost_conn_errmsg(c));
        cr_assert_eq(ost_len(ost_instance_slot(ost_item(l, i), 0)), 1000);
    }
    size_t active;
    ost_conn_cache_count(c, &active);
    return active;
}

OST_TEST(cache, bytes_limit_ghosts_objects_at_transaction_end, .init = setup, .fini = teardown) {
    ost_store *st = filled_store();
    ost_conn *c;
    cr_assert_eq(ost_conn_open(st, &c), 0);
    ost_conn_set_cache_bytes(c, 20 * 1024);
    cr_assert_eq(load_all(c), 201, "all loaded within the transaction (root included)");
    ost_abort(c);
    size_t active;
    size_t n = ost_conn_cache_count(c, &active);
    cr_assert_eq(n, 201, "ghosts stay cached: the root's list holds them");
    cr_assert_leq(active, 21, "about 20 KiB of records keep state, %zu do", active);
    cr_assert_geq(active, 15);
    /* a ghost reloads */
    cr_assert_eq(load_all(c), 201);
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(cache, object_limit_and_no_limit, .init = setup, .fini = teardown) {
    ost_store *st = filled_store();
    ost_conn *c;
    cr_assert_eq(ost_conn_open(st, &c), 0);
    ost_conn_set_cache_size(c, 50);
    load_all(c);
    cr_assert_eq(ost_commit(c), 0);
    size_t active;
    ost_conn_cache_count(c, &active);
    cr_assert_leq(active, 50);
    ost_conn_set_cache_size(c, 1000);
    load_all(c);
    ost_abort(c);
    ost_conn_cache_count(c, &active);
    cr_assert_eq(active, 201, "under both limits nothing is dropped");
    ost_conn_close(c);
    ost_store_close(st);
}

/* The cache's oid table under churn (entries added, evicted, swapped), and
 * reads through the connection's record cursor across snapshots. */
OST_TEST(cache, oids_find_their_objects_through_eviction_and_new_snapshots, .init = setup,
         .fini = teardown) {
    ost_store *st = filled_store();
    ost_conn *a, *b;
    cr_assert_eq(ost_conn_open(st, &a), 0);
    cr_assert_eq(ost_conn_open(st, &b), 0);
    ost_value key = ost_str_c("blobs");
    ost_value l = ost_root_get(a, key);
    uint64_t oids[200];
    for (size_t i = 0; i < 200; i++) oids[i] = ost_oid(a, ost_item(l, i));
    ost_conn_set_cache_size(a, 7);
    uint64_t x = 12345;
    for (int round = 0; round < 30; round++) {
        for (int k = 0; k < 40; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t i = (size_t)(x % 200);
            ost_value o;
            cr_assert_eq(ost_conn_get(a, oids[i], &o), 0, "%s", ost_conn_errmsg(a));
            cr_assert_eq(ost_oid(a, o), oids[i]);
            ost_value again;
            cr_assert_eq(ost_conn_get(a, oids[i], &again), 0);
            cr_assert_eq(again, o, "one object per oid while it is cached");
            cr_assert_eq(ost_activate(a, o), 0, "%s", ost_conn_errmsg(a));
            cr_assert_eq(ost_len(ost_instance_slot(o, 0)), round == 0 ? 1000 : 10,
                         "round %d", round);
        }
        /* b rewrites every blob; a sees it at its next transaction */
        if (round == 0) {
            ost_value lb = ost_root_get(b, key);
            for (size_t i = 0; i < 200; i++)
                ost_instance_set_slot(ost_item(lb, i), 0, ost_bytes("0123456789", 10));
            cr_assert_eq(ost_commit(b), 0, "%s", ost_conn_errmsg(b));
        }
        ost_abort(a);
        size_t n = ost_conn_cache_count(a, NULL);
        cr_assert_leq(n, 201);
    }
    ost_decref(key);
    ost_conn_close(b);
    ost_conn_close(a);
    ost_store_close(st);
}

/* A boundary that drops many entries at once refills the oid table
 * instead of emptying it slot by slot: the objects the caller still holds
 * stay, found by oid as the same objects; the dropped ones load again as
 * new objects. */
OST_TEST(cache, a_trim_of_many_keeps_held_objects_findable_by_oid, .init = setup, .fini = teardown) {
    ost_store *st = filled_store();
    ost_conn *a, *c;
    cr_assert_eq(ost_conn_open(st, &a), 0);
    ost_value l = ost_root_get_c(a, "blobs");
    uint64_t oids[200];
    for (size_t i = 0; i < 200; i++) oids[i] = ost_oid(a, ost_item(l, i));
    ost_conn_close(a);
    cr_assert_eq(ost_conn_open(st, &c), 0);
    ost_conn_set_cache_size(c, 10);
    enum { HELD = 7 };
    ost_value held[HELD];
    for (int round = 0; round < 3; round++) {
        /* 150 objects only the cache holds, HELD of them held here too */
        for (size_t i = 0; i < 150; i++) {
            ost_value o;
            cr_assert_eq(ost_conn_get(c, oids[i], &o), 0, "%s", ost_conn_errmsg(c));
            cr_assert_eq(ost_activate(c, o), 0, "%s", ost_conn_errmsg(c));
            if (i % 21 == 0 && i / 21 < HELD) held[i / 21] = ost_incref(o);
        }
        cr_assert_geq(ost_conn_cache_count(c, NULL), 150);
        ost_abort(c); /* drops 140 or more: the bulk path */
        size_t n = ost_conn_cache_count(c, NULL);
        cr_assert_leq(n, 10, "round %d: %zu cached", round, n);
        for (int h = 0; h < HELD; h++) {
            ost_value o;
            cr_assert_eq(ost_conn_get(c, oids[h * 21], &o), 0, "%s", ost_conn_errmsg(c));
            cr_assert_eq(o, held[h], "round %d: a held object is found by its oid", round);
        }
        for (size_t i = 1; i < 200; i += 20) {
            ost_value o;
            cr_assert_eq(ost_conn_get(c, oids[i], &o), 0, "%s", ost_conn_errmsg(c));
            cr_assert_eq(ost_oid(c, o), oids[i]);
            cr_assert_eq(ost_activate(c, o), 0, "%s", ost_conn_errmsg(c));
            cr_assert_eq(ost_len(ost_instance_slot(o, 0)), 1000);
        }
        for (int h = 0; h < HELD; h++) ost_decref(held[h]);
        ost_abort(c);
    }
    ost_conn_close(c);
    ost_store_close(st);
}
