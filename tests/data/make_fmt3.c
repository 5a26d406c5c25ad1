/* Writes the format-3 store kept, as a hex dump of its data.mdb, in
 * tests/data/fmt3_store.hex: built against the library as it was before
 * format 4 (commit 010920e), it records what that code wrote, for the
 * upgrade test in tests/test_store.c
 * (a_format3_store_from_before_format4_reads_upgrades_and_writes_positionally).
 *
 *   cc -I include tests/data/make_fmt3.c build/libostore.a -llmdb -luv -lm -lpthread
 *   ./a.out DIR && mdb_copy -c DIR DIR2 && xxd -p DIR2/data.mdb > tests/data/fmt3_store.hex
 *
 * The store: root["items"] a list of five persistent shop.Item (declared
 * fields name, qty, next, where), each's next the following one and the
 * last's the first (a cycle), where a non-persistent shop.Pt(x, y);
 * item 3's qty unset (a dict state with a field missing); root["note"] a
 * persistent shop.Note (no declared fields: a dict of attributes), shared
 * with root["notes"], a list holding it twice; root["by_qty"] an
 * int-keyed map from i * 10 to item i. */
#include <stdio.h>
#include <string.h>

#include "ostore.h"

#define CK(x)                                                                       \
    do {                                                                            \
        int rc_ = (x);                                                              \
        if (rc_) {                                                                  \
            fprintf(stderr, "%s: %s\n", #x, ost_strerror(rc_));                     \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    static const char *const item_f[] = {"name", "qty", "next", "where"};
    static const char *const pt_f[] = {"x", "y"};
    ost_registry *reg = ost_registry_new();
    ost_value Item, Note, Pt;
    ost_class_def item = {.module = "shop", .name = "Item", .fields = item_f, .nfields = 4,
                          .persistent = true};
    ost_class_def note = {.module = "shop", .name = "Note", .persistent = true};
    ost_class_def pt = {.module = "shop", .name = "Pt", .fields = pt_f, .nfields = 2};
    CK(ost_registry_add(reg, &item, &Item));
    CK(ost_registry_add(reg, &note, &Note));
    CK(ost_registry_add(reg, &pt, &Pt));
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    CK(ost_store_open(st, argv[1], &o));
    ost_conn *c;
    CK(ost_conn_open(st, &c));
    ost_value items[5], list = ost_list_new(5);
    for (int i = 0; i < 5; i++) items[i] = ost_instance_new(ost_incref(Item));
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "item%d", i);
        CK(ost_instance_setattr(items[i], "name", ost_str_c(name)));
        if (i != 3) CK(ost_instance_setattr(items[i], "qty", ost_int(i * 10)));
        CK(ost_instance_setattr(items[i], "next", ost_incref(items[(i + 1) % 5])));
        ost_value p = ost_instance_new(ost_incref(Pt));
        CK(ost_instance_setattr(p, "x", ost_int(i)));
        CK(ost_instance_setattr(p, "y", ost_float(i + 0.5)));
        CK(ost_instance_setattr(items[i], "where", p));
        ost_list_append(list, ost_incref(items[i]));
    }
    CK(ost_root_set(c, ost_str_c("items"), list));
    ost_value n = ost_instance_new(ost_incref(Note));
    CK(ost_instance_setattr(n, "text", ost_str_c("shared note")));
    ost_value notes = ost_list_new(2);
    ost_list_append(notes, ost_incref(n));
    ost_list_append(notes, ost_incref(n));
    CK(ost_root_set(c, ost_str_c("notes"), notes));
    CK(ost_root_set(c, ost_str_c("note"), n));
    ost_value m;
    CK(ost_map_new(c, "int", &m));
    for (int i = 0; i < 5; i++) CK(ost_map_set(c, m, ost_int(i * 10), ost_incref(items[i])));
    CK(ost_root_set(c, ost_str_c("by_qty"), ost_incref(m))); /* ost_map_new's is borrowed */
    CK(ost_commit(c));
    for (int i = 0; i < 5; i++) ost_decref(items[i]);
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    return 0;
}
