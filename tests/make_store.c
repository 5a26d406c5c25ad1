/* Writes a small store for the format test: python reads it with the
 * program of docs/format.md. The first commit stores the root and three
 * items; the second adds a map with composite keys (one value a reference
 * to an item) and a set. Usage: make_store DIR
 *
 * make_store DIR --churn N: then commits N more times to the store (the
 * root's key 'churn'), printing "ready" after the first, so that a
 * reader can run while it writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demostore.h"
#include "ostore.h"

static int fail(ost_conn *c, const char *what) {
    fprintf(stderr, "make_store: %s: %s\n", what, ost_conn_errmsg(c));
    return 1;
}

/* The map's key (i, s): s may hold NUL bytes, so its length is given. */
static ost_value key2(int64_t i, const char *s, size_t n) {
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_int(i));
    ost_tuple_set(t, 1, ost_str(s, n));
    return t;
}

static int add_maps(ost_conn *c) {
    ost_value m, s, name = ost_str_c("items");
    ost_value items = ost_root_get(c, name); /* borrowed */
    ost_decref(name);
    if (!items || ost_len(items) != 3) return fail(c, "root items");
    if (ost_map_new(c, "(int, str)", &m)) return fail(c, "ost_map_new");
    ost_value list = ost_list_new(0);
    ost_list_append(list, ost_int(1));
    ost_list_append(list, ost_float(2.5));
    ost_list_append(list, OST_NONE);
    if (ost_map_set(c, m, key2(1, "b", 1), ost_incref(ost_item(items, 1))) ||
        ost_map_set(c, m, key2(1, "a", 1), ost_str_c("first")) ||
        ost_map_set(c, m, key2(-5, "neg", 3), list) ||
        ost_map_set(c, m, key2(0, "a\0b", 3), ost_bytes("\x00\xff", 2)) ||
        ost_map_set(c, m, key2(2, "", 0), OST_NONE))
        return fail(c, "ost_map_set");
    if (ost_keyset_new(c, "str", &s)) return fail(c, "ost_keyset_new");
    if (ost_map_add(c, s, ost_str_c("red")) || ost_map_add(c, s, ost_str_c("green")) ||
        ost_map_add(c, s, ost_str_c("blue")))
        return fail(c, "ost_map_add");
    if (ost_root_set(c, ost_str_c("index"), ost_incref(m)) ||
        ost_root_set(c, ost_str_c("colours"), ost_incref(s)))
        return fail(c, "ost_root_set");
    return ost_commit(c) ? fail(c, "second commit") : 0;
}

/* Commits root['churn'] = i for i in 1..n; "ready" after the first. */
static int churn(ost_conn *c, long n) {
    for (long i = 1; i <= n; i++) {
        if (ost_root_set_c(c, "churn", ost_int(i)) || ost_commit(c)) return fail(c, "churn");
        if (i == 1) {
            printf("ready\n");
            fflush(stdout);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[2], "--churn") == 0) {
        static const char *const fields[] = {"n", "name", "score", "prev"};
        ost_registry *reg;
        ost_value cls;
        ost_store *st = demo_store_open("make_store", argv[1], false, fields, 4, &reg, &cls);
        if (!st) return 1;
        ost_conn *c;
        int rc = ost_conn_open(st, &c) ? 1 : churn(c, atol(argv[3]));
        ost_conn_close(c);
        ost_store_close(st);
        ost_registry_free(reg);
        return rc;
    }
    if (argc != 2) return 2;
    static const char *const fields[] = {"n", "name", "score", "prev"};
    ost_registry *reg;
    ost_value cls;
    ost_store *st = demo_store_open("make_store", argv[1], true, fields, 4, &reg, &cls);
    if (!st) return 1;
    ost_conn *c;
    if (ost_conn_open(st, &c)) return 1;
    ost_value items = ost_list_new(0), prev = OST_NONE;
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "item%d", i);
        ost_value it = ost_instance_new(ost_incref(cls));
        ost_instance_setattr(it, "n", ost_int(i));
        ost_instance_setattr(it, "name", ost_str_c(name));
        ost_instance_setattr(it, "score", ost_float(i * 1.5));
        ost_instance_setattr(it, "prev", prev);
        ost_list_append(items, ost_incref(it));
        prev = it;
    }
    ost_decref(prev);
    ost_root_set(c, ost_str_c("items"), items);
    ost_root_set(c, ost_str_c("title"), ost_str_c("format test"));
    int rc = ost_commit(c);
    if (rc) fprintf(stderr, "%s\n", ost_conn_errmsg(c));
    if (!rc) rc = add_maps(c);
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    return rc ? 1 : 0;
}
