/* Writes a small store for the format test: python reads it with the
 * program of docs/format.md. Usage: make_store DIR */
#include <stdio.h>
#include <stdlib.h>

#include "ostore.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *fields[] = {"n", "name", "score", "prev"};
    ost_class_def def = {.module = "demo", .name = "Item", .fields = fields, .nfields = 4,
                         .persistent = true};
    ost_registry *reg = ost_registry_new();
    ost_value cls;
    if (ost_registry_add(reg, &def, &cls)) return 1;
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    if (ost_store_open(st, argv[1], &o)) {
        fprintf(stderr, "%s\n", ost_store_errmsg(st));
        return 1;
    }
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
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    return rc ? 1 : 0;
}
