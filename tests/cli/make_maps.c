/* Writes a store with maps for the CLI tests (tests/cli/test_cli.py), or
 * checks through the library that a store made so (or imported from its
 * dump) still works as one.
 *
 *   make_maps DIR          makes the store, prints its oids as JSON
 *   make_maps --use DIR    opens it read-write: counts, a lookup, a new key
 *                          committed and read back; prints "ok"
 *
 * The store: ten demo.Item objects in root['items']; maps in root['maps']:
 * "ints" (int keys, 1,000 entries, some values referencing the items),
 * "pairs" ((int, str) keys; one value is the only reference to the item
 * root['lonely'] holds no more), "triples" ((str, bytes, int) keys), the
 * set "tags" (bytes keys) and 22 small sets of str, so 26 maps in all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../demostore.h"
#include "ostore.h"

#define NSMALL 22

static int die(ost_conn *c, const char *what) {
    fprintf(stderr, "make_maps: %s: %s\n", what, c ? ost_conn_errmsg(c) : "");
    return 1;
}

static ost_value tuple2(ost_value a, ost_value b) {
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, a);
    ost_tuple_set(t, 1, b);
    return t;
}

static ost_value tuple3(ost_value a, ost_value b, ost_value c) {
    ost_value t = ost_tuple_new(3);
    ost_tuple_set(t, 0, a);
    ost_tuple_set(t, 1, b);
    ost_tuple_set(t, 2, c);
    return t;
}

static ost_value item(ost_value cls, int n) {
    char name[16];
    snprintf(name, sizeof name, "item%d", n);
    ost_value it = ost_instance_new(ost_incref(cls));
    ost_instance_setattr(it, "n", ost_int(n));
    ost_instance_setattr(it, "name", ost_str_c(name));
    return it;
}

static int make(ost_conn *c, ost_value cls) {
    ost_value items = ost_list_new(0), maps = ost_list_new(0);
    for (int i = 0; i < 10; i++) ost_list_append(items, item(cls, i));
    ost_value lonely = item(cls, 99);
    ost_value ints, pairs, triples, tags;
    if (ost_map_new(c, "int", &ints) || ost_map_new(c, "(int, str)", &pairs) ||
        ost_map_new(c, "(str, bytes, int)", &triples) || ost_keyset_new(c, "bytes", &tags))
        return die(c, "making the maps");
    int rc = 0;
    for (int i = 0; i < 1000 && !rc; i++) {
        ost_value v;
        if (i % 100 == 0) {
            v = ost_incref(ost_item(items, (size_t)(i / 100)));
        } else if (i % 2) {
            char s[16];
            snprintf(s, sizeof s, "v%d", i);
            v = ost_str_c(s);
        } else {
            v = ost_dict_new();
            ost_dict_set(v, ost_str_c("i"), ost_int(i));
            ost_dict_set(v, ost_str_c("sq"), ost_int((int64_t)i * i));
        }
        rc = ost_map_set(c, ints, ost_int(i * 3 - 1500), v);
    }
    ost_value l12 = ost_list_new(0);
    ost_list_append(l12, ost_int(1));
    ost_list_append(l12, ost_int(2));
    if (!rc)
        rc = ost_map_set(c, pairs, tuple2(ost_int(1), ost_str_c("a")), ost_str_c("x")) ||
             ost_map_set(c, pairs, tuple2(ost_int(1), ost_str_c("b")), lonely) ||
             ost_map_set(c, pairs, tuple2(ost_int(2), ost_str_c("a")), l12) ||
             ost_map_set(c, pairs, tuple2(ost_int(2), ost_str_c("a,b")), ost_str_c("comma")) ||
             ost_map_set(c, pairs, tuple2(ost_int(3), ost_str_c("")), OST_NONE) ||
             ost_map_set(c, pairs, tuple2(ost_int(-1), ost_str_c("\xc3\xa9")),
                         ost_str_c("accent")) ||
             ost_map_set(c, pairs, tuple2(ost_int(1), ost_str("a\0", 2)), ost_str_c("nul"));
    else
        ost_decref(l12), ost_decref(lonely);
    if (!rc)
        rc = ost_map_set(c, triples, tuple3(ost_str_c("k"), ost_bytes("\0", 1), ost_int(1)),
                         ost_float(1.5)) ||
             ost_map_set(c, triples, tuple3(ost_str_c("k"), ost_bytes("", 0), ost_int(2)),
                         ost_incref(OST_TRUE)) ||
             ost_map_set(c, triples, tuple3(ost_str_c("j"), ost_bytes("zz", 2), ost_int(-3)),
                         ost_bytes("raw", 3)) ||
             ost_map_add(c, tags, ost_bytes("", 0)) || ost_map_add(c, tags, ost_bytes("a", 1)) ||
             ost_map_add(c, tags, ost_bytes("\xff\0", 2));
    if (rc) return die(c, "setting entries");
    ost_list_append(maps, ost_incref(ints));
    ost_list_append(maps, ost_incref(pairs));
    ost_list_append(maps, ost_incref(triples));
    ost_list_append(maps, ost_incref(tags));
    for (int i = 0; i < NSMALL; i++) {
        ost_value s;
        char k[16];
        snprintf(k, sizeof k, "x%d", i);
        if (ost_keyset_new(c, "str", &s) || ost_map_add(c, s, ost_str_c(k)))
            return die(c, "a small set");
        ost_list_append(maps, ost_incref(s));
    }
    ost_root_set(c, ost_str_c("items"), ost_incref(items));
    ost_root_set(c, ost_str_c("maps"), ost_incref(maps));
    if (ost_commit(c)) return die(c, "commit");
    printf("{\"ints\": %llu, \"pairs\": %llu, \"triples\": %llu, \"tags\": %llu, \"items\": [",
           (unsigned long long)ost_oid(c, ints), (unsigned long long)ost_oid(c, pairs),
           (unsigned long long)ost_oid(c, triples), (unsigned long long)ost_oid(c, tags));
    for (size_t i = 0; i < 10; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)ost_oid(c, ost_item(items, i)));
    ost_value lv, key = tuple2(ost_int(1), ost_str_c("b")); /* borrowed by ost_map_get */
    int grc = ost_map_get(c, pairs, key, &lv);
    ost_decref(key);
    if (grc) return die(c, "get");
    printf("], \"lonely\": %llu, \"small\": [", (unsigned long long)ost_oid(c, lv));
    for (size_t i = 0; i < NSMALL; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)ost_oid(c, ost_item(maps, 4 + i)));
    printf("]}\n");
    ost_decref(items);
    ost_decref(maps);
    return 0;
}

/* The store works: counts, a lookup, a new key committed and read back. */
static int use(ost_conn *c) {
    ost_value key = ost_str_c("maps");
    ost_value maps = ost_root_get(c, key);
    ost_decref(key);
    if (!maps || ost_len(maps) != 4 + NSMALL) return die(c, "root['maps']");
    ost_value ints = ost_item(maps, 0), pairs = ost_item(maps, 1);
    uint64_t n = 0;
    if (ost_map_len(c, ints, &n) || n != 1000) return die(c, "len(ints) is not 1000");
    ost_value k = ost_int(3 * 7 - 1500), v;
    int rc = ost_map_get(c, ints, k, &v);
    ost_decref(k);
    if (rc || ost_typeof(v) != OST_T_STR) return die(c, "ints[-1479]");
    ost_value gone = tuple2(ost_int(3), ost_str_c("")); /* borrowed by ost_map_del */
    rc = ost_map_set(c, ints, ost_int(1000000), ost_str_c("new")) || ost_map_del(c, pairs, gone) ||
         ost_commit(c);
    ost_decref(gone);
    if (rc) return die(c, "a commit to the maps");
    if (ost_map_len(c, ints, &n) || n != 1001 || ost_map_len(c, pairs, &n) || n != 6)
        return die(c, "counts after the commit");
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    bool use_it = argc == 3 && strcmp(argv[1], "--use") == 0;
    if (argc != 2 && !use_it) {
        fprintf(stderr, "usage: make_maps DIR | make_maps --use DIR\n");
        return 2;
    }
    static const char *const fields[] = {"n", "name"};
    ost_registry *reg;
    ost_value cls;
    ost_store *st = demo_store_open("make_maps", argv[argc - 1], !use_it, fields, 2, &reg, &cls);
    if (!st) return 1;
    ost_conn *c;
    int rc = ost_conn_open(st, &c) ? die(NULL, "ost_conn_open") : use_it ? use(c) : make(c, cls);
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    return rc;
}
