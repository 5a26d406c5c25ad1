/* The example of docs/maps.md, run as a test (meson test example-maps):
 * an inventory of items found by sku, a range of skus, an index of items
 * by (category, sku) kept as a set, and two connections inserting
 * different keys into one map without a conflict. Exits 0 when every
 * step did what the page says. */
#include <ostore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmtree.h"

#define CHECK(cond, c)                                                              \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "example_maps:%d: %s: %s\n", __LINE__, #cond,           \
                    (c) ? ost_conn_errmsg(c) : "");                                 \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static const char *const item_fields[] = {"sku", "name", "qty"};

static ost_value new_item(ost_value cls, const char *sku, const char *name, int qty) {
    ost_value it = ost_instance_new(ost_incref(cls));
    ost_instance_set_slot(it, 0, ost_str_c(sku));
    ost_instance_set_slot(it, 1, ost_str_c(name));
    ost_instance_set_slot(it, 2, ost_int(qty));
    return it;
}

static ost_value pair(const char *a, const char *b) {
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_str_c(a));
    ost_tuple_set(t, 1, ost_str_c(b));
    return t;
}

int main(int argc, char **argv) {
    char tmp[] = "/tmp/ostore-maps-XXXXXX";
    const char *path = argc > 1 ? argv[1] : mkdtemp(tmp);
    CHECK(path != NULL, NULL);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/inventory.ostore", path);
    ost_registry *reg = ost_registry_new();
    ost_class_def def = {.module = "inventory", .name = "Item", .fields = item_fields,
                         .nfields = 3, .persistent = true};
    ost_value Item;
    CHECK(ost_registry_add(reg, &def, &Item) == 0, NULL);
    ost_store *st = ost_store_new();
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    CHECK(ost_store_open(st, dir, &o) == 0, NULL);
    ost_conn *c;
    CHECK(ost_conn_open(st, &c) == 0, NULL);

    /* a map of items by sku, and a set (category, sku) as an index */
    ost_value skus, by_cat;
    CHECK(ost_map_new(c, "str", &skus) == 0, c);
    CHECK(ost_keyset_new(c, "(str, str)", &by_cat) == 0, c);
    CHECK(ost_root_set(c, ost_str_c("by_sku"), ost_incref(skus)) == 0, c);
    CHECK(ost_root_set(c, ost_str_c("by_category"), ost_incref(by_cat)) == 0, c);
    static const struct { const char *sku, *name, *cat; int qty; } items[] = {
        {"A-1001", "bolt", "hardware", 40}, {"A-1002", "nut", "hardware", 3},
        {"A-2001", "glue", "supplies", 12}, {"B-0001", "saw", "tools", 2},
    };
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        ost_value it = new_item(Item, items[i].sku, items[i].name, items[i].qty);
        CHECK(ost_map_set(c, skus, ost_str_c(items[i].sku), it) == 0, c); /* steals both */
        CHECK(ost_map_add(c, by_cat, pair(items[i].cat, items[i].sku)) == 0, c);
    }
    CHECK(ost_commit(c) == 0, c);

    /* a lookup: one B-tree descent, nothing else loaded */
    ost_value key = ost_str_c("A-1002"), it;
    CHECK(ost_map_get(c, skus, key, &it) == 0, c); /* borrowed until the transaction ends */
    ost_decref(key);
    int64_t qty;
    CHECK(ost_int_value(ost_instance_slot(it, 2), &qty) == 0 && qty == 3, c);

    /* a range: every sku from "A-" up to "B-" exclusive, in order */
    ost_map_range r = {.from = ost_str_c("A-"), .to = ost_str_c("B-"), .to_exclusive = true};
    ost_map_cursor *cur;
    CHECK(ost_map_cursor_open(c, skus, &r, &cur) == 0, c);
    ost_value k, v;
    int n = 0;
    while (ost_map_cursor_next(cur, &k, &v) == 0) {
        printf("%s %s\n", ost_data(k, NULL), ost_data(ost_instance_slot(v, 1), NULL));
        n++;
    }
    ost_map_cursor_close(cur);
    ost_decref(r.from);
    ost_decref(r.to);
    CHECK(n == 3, c);

    /* the index: the hardware items, every key that starts with
     * ("hardware",); and the skus that start with "A-" */
    ost_map_range pr = {.prefix = ost_tuple_new(1)};
    ost_tuple_set(pr.prefix, 0, ost_str_c("hardware"));
    CHECK(ost_map_cursor_open(c, by_cat, &pr, &cur) == 0, c);
    n = 0;
    while (ost_map_cursor_next(cur, &k, NULL) == 0) n++;
    ost_map_cursor_close(cur);
    ost_decref(pr.prefix);
    CHECK(n == 2, c);
    ost_map_range ar = {.prefix = ost_str_c("A-")};
    CHECK(ost_map_cursor_open(c, skus, &ar, &cur) == 0, c);
    for (n = 0; ost_map_cursor_next(cur, &k, NULL) == 0; n++) {}
    ost_map_cursor_close(cur);
    ost_decref(ar.prefix);
    CHECK(n == 3, c);

    /* two connections insert different keys into the one map: no conflict */
    ost_conn *c2;
    CHECK(ost_conn_open(st, &c2) == 0, NULL);
    ost_value name = ost_str_c("by_sku");
    ost_value skus2 = ost_root_get(c2, name); /* borrows the key */
    ost_decref(name);
    CHECK(ost_map_set(c, skus, ost_str_c("C-0001"), new_item(Item, "C-0001", "tape", 9)) == 0, c);
    CHECK(ost_map_set(c2, skus2, ost_str_c("C-0002"), new_item(Item, "C-0002", "wire", 5)) == 0, c2);
    CHECK(ost_commit(c) == 0, c);
    CHECK(ost_commit(c2) == 0, c2);
    /* the same key from both: the second commit conflicts, naming it */
    CHECK(ost_map_set(c, skus, ost_str_c("A-1001"), new_item(Item, "A-1001", "bolt", 39)) == 0, c);
    CHECK(ost_map_set(c2, skus2, ost_str_c("A-1001"), new_item(Item, "A-1001", "bolt", 38)) == 0, c2);
    CHECK(ost_commit(c) == 0, c);
    CHECK(ost_commit(c2) == OST_ECONFLICT, c2);
    CHECK(strstr(ost_conn_errmsg(c2), "'A-1001'") != NULL, c2);
    printf("%s\n", ost_conn_errmsg(c2));
    ost_abort(c2);
    uint64_t len;
    CHECK(ost_map_len(c2, skus2, &len) == 0 && len == 6, c2);

    ost_conn_close(c2);
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    if (argc == 1) rmtree(path);
    return 0;
}
