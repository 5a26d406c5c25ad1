/* Changing a class under a store: fields added, removed and renamed, and a
 * class renamed (docs/hooks.md, "Changing a class"). Each test writes with
 * one version of a class and reads with another, through a store, as two
 * builds of a program would. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakcheck.h"
#include "ostore.h"
#include "pyrun.h"
#include "rmtree.h"

static char dir[64];

static void setup(void) {
    strcpy(dir, "/tmp/ostore-schema-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void) { rmtree(dir); }

/* A registry with one persistent class inventory.<name> of the given
 * fields and field aliases (pairs). */
static ost_registry *reg_of(const char *name, const char *const *fields, size_t n,
                            const char *const *aliases, size_t naliases, ost_value *cls) {
    ost_registry *reg = ost_registry_new();
    cr_assert(reg);
    ost_class_def def = {.module = "inventory", .name = name, .fields = fields, .nfields = n,
                         .persistent = true, .field_aliases = aliases,
                         .nfield_aliases = naliases};
    cr_assert_eq(ost_registry_add(reg, &def, cls), 0);
    return reg;
}

static ost_store *open_with(ost_registry *reg, ost_conn **c) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    cr_assert_eq(ost_store_open(st, dir, &o), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(ost_conn_open(st, c), 0);
    return st;
}

static void close_store(ost_store *st, ost_conn *c) {
    ost_conn_close(c);
    ost_store_close(st);
}

/* The item under root["item"], loaded. */
static ost_value root_item(ost_conn *c) {
    ost_value key = ost_str_c("item");
    ost_value it = ost_root_get(c, key);
    ost_decref(key);
    cr_assert(it);
    cr_assert_eq(ost_activate(c, it), 0, "%s", ost_conn_errmsg(c));
    return it;
}

static bool str_is(ost_value v, const char *s) {
    size_t n;
    const char *d = ost_data(v, &n);
    return d && ost_typeof(v) == OST_T_STR && n == strlen(s) && memcmp(d, s, n) == 0;
}

static const char *abc[] = {"a", "b", "c"};

/* Writes inventory.Item(a=1, b="two", c=[3.5]) under root["item"]. */
static void write_abc(void) {
    ost_value Item;
    ost_registry *reg = reg_of("Item", abc, 3, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = ost_instance_new(ost_incref(Item));
    ost_instance_set_slot(it, 0, ost_int(1));
    ost_instance_set_slot(it, 1, ost_str_c("two"));
    ost_value l = ost_list_new(1);
    ost_list_append(l, ost_float(3.5));
    ost_instance_set_slot(it, 2, l);
    cr_assert_eq(ost_root_set(c, ost_str_c("item"), it), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, old_code_keeps_a_field_it_does_not_know_through_a_store_round_trip,
         .init = setup, .fini = teardown) {
    write_abc();
    /* a build whose Item has a and b only: loads, changes a, stores */
    ost_value Item;
    const char *ab[] = {"a", "b"};
    ost_registry *reg = reg_of("Item", ab, 2, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_item(c);
    cr_assert_eq(ost_instance_slot(it, 0), ost_int(1));
    cr_assert(str_is(ost_instance_slot(it, 1), "two"));
    ost_value extra = ost_instance_extra(it);
    cr_assert_eq(ost_len(extra), 1, "c is kept apart from the slots");
    cr_assert_eq(ost_len(ost_dict_get_c(extra, "c")), 1);
    cr_assert_eq(ost_instance_set_slot(it, 0, ost_int(10)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
    /* the build with a, b and c reads c intact, and a as changed */
    reg = reg_of("Item", abc, 3, NULL, 0, &Item);
    st = open_with(reg, &c);
    it = root_item(c);
    cr_assert_eq(ost_instance_slot(it, 0), ost_int(10));
    cr_assert(str_is(ost_instance_slot(it, 1), "two"));
    ost_value cv = ost_instance_slot(it, 2);
    cr_assert_eq(ost_typeof(cv), OST_T_LIST);
    cr_assert_eq(ost_len(cv), 1);
    cr_assert_eq(ost_float_value(ost_item(cv, 0)), 3.5);
    cr_assert_eq(ost_instance_extra(it), 0, "nothing unknown to this build");
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, a_removed_field_is_kept_after_a_ghost_reloads, .init = setup,
         .fini = teardown) {
    write_abc();
    const char *a_only[] = {"a"};
    ost_value Item;
    ost_registry *reg = reg_of("Item", a_only, 1, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_item(c);
    cr_assert_eq(ost_len(ost_instance_extra(it)), 2);
    cr_assert_eq(ost_invalidate(c, it), 0);
    cr_assert(ost_is_ghost(it));
    cr_assert_eq(ost_len(ost_instance_extra(it)), 2, "the ghost loads again, extras too");
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, an_added_field_is_unset_in_old_records, .init = setup, .fini = teardown) {
    write_abc();
    const char *abcd[] = {"a", "b", "c", "d"};
    ost_value Item;
    ost_registry *reg = reg_of("Item", abcd, 4, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_item(c);
    cr_assert_eq(ost_instance_slot(it, 0), ost_int(1));
    cr_assert_eq(ost_instance_slot(it, 3), 0, "unset: the record has no d");
    cr_assert_eq(ost_instance_extra(it), 0);
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, a_renamed_field_reads_through_its_alias_and_writes_its_new_name,
         .init = setup, .fini = teardown) {
    write_abc();
    /* b was renamed to title */
    const char *renamed[] = {"a", "title", "c"};
    const char *aliases[] = {"b", "title"};
    ost_value Item;
    ost_registry *reg = reg_of("Item", renamed, 3, aliases, 1, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_item(c);
    cr_assert(str_is(ost_instance_getattr(it, "title"), "two"));
    cr_assert_eq(ost_instance_extra(it), 0, "b is not unknown: it is title");
    cr_assert_eq(ost_instance_set_slot(it, 0, ost_int(2)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_writer *w = ost_writer_new();
    const void *d;
    size_t n;
    cr_assert_eq(ost_dump_state(w, it, &d, &n), 0);
    cr_assert(memmem(d, n, "title", 5), "written under its new name");
    cr_assert(!memmem(d, n, "\x8c\x01" "b", 3), "and not the old one");
    ost_writer_free(w);
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, bad_field_aliases_are_refused) {
    const char *f[] = {"a", "b"};
    const char *to_nothing[] = {"x", "nope"};
    const char *is_field[] = {"a", "b"};
    const char *twice[] = {"x", "a", "x", "b"};
    const char *null_name[] = {NULL, "a"};
    const char *const *bad[] = {to_nothing, is_field, twice, null_name};
    size_t nbad[] = {1, 1, 2, 1};
    ost_registry *reg = ost_registry_new();
    for (int i = 0; i < 4; i++) {
        ost_class_def def = {.module = "m", .name = "C", .fields = f, .nfields = 2,
                             .field_aliases = bad[i], .nfield_aliases = nbad[i]};
        cr_assert_eq(ost_class_new(&def), 0, "case %d", i);
        cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EINVAL, "case %d", i);
    }
    ost_class_def no_fields = {.module = "m", .name = "C", .field_aliases = to_nothing,
                               .nfield_aliases = 1};
    cr_assert_eq(ost_registry_add(reg, &no_fields, NULL), OST_EINVAL);
    cr_assert_eq(ost_registry_count(reg), 0, "nothing registered");
    ost_registry_free(reg);
}

OST_TEST(schema, a_renamed_class_reads_through_a_class_alias_and_moves_when_stored,
         .init = setup, .fini = teardown) {
    write_abc();
    /* inventory.Item became stock.Article */
    ost_registry *reg = ost_registry_new();
    ost_value Article;
    ost_class_def def = {.module = "stock", .name = "Article", .fields = abc, .nfields = 3,
                         .persistent = true};
    cr_assert_eq(ost_registry_add(reg, &def, &Article), 0);
    cr_assert_eq(ost_registry_alias(reg, "inventory", "Item", Article), 0);
    cr_assert_eq(ost_registry_get(reg, "inventory", "Item"), Article);
    cr_assert_eq(ost_registry_count(reg), 1, "an alias is no class");
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_item(c);
    cr_assert_eq(ost_instance_class(it), Article);
    cr_assert(str_is(ost_instance_slot(it, 1), "two"));
    cr_assert_eq(ost_instance_set_slot(it, 0, ost_int(5)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
    /* the record now names stock.Article: a registry without the alias
     * reads it as that class */
    reg = ost_registry_new();
    cr_assert_eq(ost_registry_add(reg, &def, &Article), 0);
    st = open_with(reg, &c);
    it = root_item(c);
    cr_assert_eq(ost_instance_class(it), Article);
    cr_assert_eq(ost_instance_slot(it, 0), ost_int(5));
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, class_aliases_refuse_misuse) {
    ost_registry *reg = ost_registry_new(), *other = ost_registry_new();
    ost_value A, B;
    ost_class_def da = {.module = "m", .name = "A"}, db = {.module = "m", .name = "B"};
    cr_assert_eq(ost_registry_add(reg, &da, &A), 0);
    cr_assert_eq(ost_registry_add(other, &db, &B), 0);
    cr_assert_eq(ost_registry_alias(reg, "m", "Old", B), OST_EINVAL, "B is not reg's");
    cr_assert_eq(ost_registry_alias(reg, "m", "A", A), OST_EEXIST, "a class's own name");
    cr_assert_eq(ost_registry_alias(reg, NULL, "x", A), OST_EINVAL);
    cr_assert_eq(ost_registry_alias(reg, "m", "\xff", A), OST_EINVAL);
    cr_assert_eq(ost_registry_alias(reg, "m", "Old", A), 0);
    cr_assert_eq(ost_registry_alias(reg, "m", "Old", A), OST_EEXIST);
    ost_class_def dold = {.module = "m", .name = "Old"};
    cr_assert_eq(ost_registry_add(reg, &dold, NULL), OST_EEXIST, "the alias holds the name");
    /* the reader resolves aliases too */
    ost_value inst = ost_instance_new(ost_global("m", "Old"));
    ost_instance_setattr(inst, "x", ost_int(1));
    ost_writer *w = ost_writer_new();
    const void *d;
    size_t n;
    cr_assert_eq(ost_dump(w, inst, &d, &n), 0);
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    ost_value back;
    cr_assert_eq(ost_load(r, d, n, &back, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_instance_class(back), A);
    ost_decref(back);
    ost_reader_free(r);
    ost_writer_free(w);
    ost_decref(inst);
    ost_registry_free(reg);
    ost_registry_free(other);
}

OST_TEST(schema, a_state_that_is_not_a_dict_names_the_offset_of_its_build) {
    /* protocol 2: NEWOBJ of hookless class m.P, then BUILD with state 5 */
    static const char p[] = "\x80\x02" "cm\nP\n" ")\x81" "K\x05" "b.";
    const char *f[] = {"x"};
    ost_registry *reg = ost_registry_new();
    ost_class_def def = {.module = "m", .name = "P", .fields = f, .nfields = 1};
    cr_assert_eq(ost_registry_add(reg, &def, NULL), 0);
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    ost_value v;
    cr_assert_eq(ost_load(r, p, sizeof p - 1, &v, NULL), OST_EBADPICKLE);
    cr_assert_eq(ost_reader_erroffset(r), sizeof p - 3, "the BUILD opcode: %s",
                 ost_reader_errmsg(r));
    /* a record's state applied by ost_load_state: the offset is its STOP */
    static const char st5[] = "\x80\x02" "K\x05" ".";
    ost_value inst = ost_instance_new(ost_incref(ost_registry_get(reg, "m", "P")));
    cr_assert_eq(ost_load_state(r, inst, st5, sizeof st5 - 1), OST_EBADPICKLE);
    cr_assert_eq(ost_reader_erroffset(r), sizeof st5 - 2, "%s", ost_reader_errmsg(r));
    cr_assert(strstr(ost_reader_errmsg(r), "is a int, not a dict"), "%s", ost_reader_errmsg(r));
    ost_decref(inst);
    ost_reader_free(r);
    ost_registry_free(reg);
}

/* ---- ost_load_state's direct path: slots filled without a dict ---------------- */

static ost_value xy_class(void) {
    static const char *xy[] = {"x", "y"};
    static const char *al[] = {"old_x", "x"};
    ost_class_def def = {.module = "m", .name = "XY", .fields = xy, .nfields = 2,
                         .field_aliases = al, .nfield_aliases = 1};
    ost_value cls = ost_class_new(&def);
    cr_assert(cls);
    return cls;
}

OST_TEST(load_state, fills_slots_aliases_and_extras_as_build_does) {
    ost_value cls = xy_class();
    /* {'old_x': 1, 'y': 'two', 'z': 2.5}, protocol 4, as Python writes it */
    static const char p[] = "\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x05old_x\x94"
                            "K\x01\x8c\x01y\x94\x8c\x03two\x94\x8c\x01z\x94G@\x04\x00\x00\x00\x00"
                            "\x00\x00u.";
    ost_reader *r = ost_reader_new();
    ost_value a = ost_instance_new(ost_incref(cls)); /* empty: the direct path */
    cr_assert_eq(ost_load_state(r, a, p, sizeof p - 1), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_instance_slot(a, 0), ost_int(1), "old_x reads into x");
    cr_assert_eq(ost_len(ost_instance_slot(a, 1)), 3);
    cr_assert_eq(ost_float_value(ost_dict_get_c(ost_instance_extra(a), "z")), 2.5);
    /* an instance with a slot set takes the usual way: the same result */
    ost_value b = ost_instance_new(ost_incref(cls));
    ost_instance_set_slot(b, 1, ost_int(0));
    cr_assert_eq(ost_load_state(r, b, p, sizeof p - 1), 0, "%s", ost_reader_errmsg(r));
    cr_assert(ost_equal(a, b));
    cr_assert(ost_same_graph(a, b));
    ost_decref(a);
    ost_decref(b);
    ost_reader_free(r);
    ost_decref(cls);
}

OST_TEST(load_state, a_dict_that_refers_to_itself_is_read_the_usual_way) {
    ost_value cls = xy_class();
    /* d = {}; d['x'] = d: the memoized dict fetched again by BINGET */
    static const char p[] = "\x80\x04}\x94(\x8c\x01x\x94h\x00u.";
    ost_reader *r = ost_reader_new();
    ost_value a = ost_instance_new(ost_incref(cls));
    cr_assert_eq(ost_load_state(r, a, p, sizeof p - 1), 0, "%s", ost_reader_errmsg(r));
    ost_value d = ost_instance_slot(a, 0);
    cr_assert_eq(ost_typeof(d), OST_T_DICT, "x holds the dict, not the instance");
    cr_assert_eq(ost_dict_get_c(d, "x"), d);
    ost_release(a);
    ost_reader_free(r);
    ost_decref(cls);
}

OST_TEST(load_state, a_failed_load_leaves_the_instance_unchanged) {
    ost_value cls = xy_class();
    ost_reader *r = ost_reader_new();
    static const char trunc[] = "\x80\x04}\x94(\x8c\x01yK\x05\x8c\x01x"; /* cut short */
    ost_value a = ost_instance_new(ost_incref(cls));
    cr_assert_eq(ost_load_state(r, a, trunc, sizeof trunc - 1), OST_ETRUNCATED);
    cr_assert_eq(ost_instance_slot(a, 1), 0, "y was set, then undone");
    cr_assert_eq(ost_instance_extra(a), 0);
    /* the dict inside a tuple: not a state dict, the usual error and offset */
    static const char tup[] = "\x80\x04}(\x8c\x01yK\x05u\x85.";
    cr_assert_eq(ost_load_state(r, a, tup, sizeof tup - 1), OST_EBADPICKLE);
    cr_assert(strstr(ost_reader_errmsg(r), "is a tuple, not a dict"), "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_reader_erroffset(r), sizeof tup - 2);
    cr_assert_eq(ost_instance_slot(a, 1), 0);
    ost_decref(a);
    ost_reader_free(r);
    ost_decref(cls);
}

/* A store's class table names a class version `Name(f1,f2)` (format 4),
 * so a class or field name holding '(', ')' or ',' is refused: it could
 * be read as a version. */
OST_TEST(schema, names_with_parentheses_or_commas_are_refused) {
    ost_registry *reg = ost_registry_new();
    cr_assert(reg);
    static const char *ok[] = {"a", "b"}, *comma[] = {"a", "b,c"}, *paren[] = {"a)"};
    ost_class_def def = {.module = "inventory", .name = "Item(a,b)", .fields = ok, .nfields = 2,
                         .persistent = true};
    cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EINVAL, "a class name with '('");
    def.name = "Item";
    def.fields = comma;
    cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EINVAL, "a field name with ','");
    def.fields = paren;
    def.nfields = 1;
    cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EINVAL, "a field name with ')'");
    def.fields = ok;
    def.nfields = 2;
    ost_value cls;
    cr_assert_eq(ost_registry_add(reg, &def, &cls), 0);
    cr_assert_eq(ost_registry_alias(reg, "inventory", "Old(a)", cls), OST_EINVAL);
    ost_registry_free(reg);
}

/* Records written positionally by one version of a class (every field
 * set: format 4) read by name through that version after a field is
 * removed and one added: the removed one is kept (ost_instance_extra),
 * the added one is unset; written again (a dict by name, since it keeps
 * a field its class does not declare), it reads back the same. */
OST_TEST(schema, a_positional_record_reads_by_name_through_its_version, .init = setup,
         .fini = teardown) {
    write_abc();
    static const char *acd[] = {"a", "c", "d"};
    ost_value Item;
    ost_registry *reg = reg_of("Item", acd, 3, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_snap *s;
    cr_assert_eq(ost_snap_open(st, &s), 0);
    bool v1 = false;
    uint32_t id;
    const char *m, *n;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++) v1 |= strcmp(n, "Item(a,b,c)") == 0;
    ost_snap_close(s);
    cr_assert(v1, "the record was written under its version Item(a,b,c)");
    ost_value it = root_item(c);
    int64_t a = 0;
    cr_assert_eq(ost_int_value(ost_instance_slot(it, 0), &a), 0);
    cr_assert_eq(a, 1);
    cr_assert_eq(ost_typeof(ost_instance_slot(it, 1)), OST_T_LIST, "c, at its new position");
    cr_assert_null(ost_instance_slot(it, 2), "d: added since, unset");
    ost_value extra = ost_instance_extra(it);
    cr_assert(extra && ost_len(extra) == 1, "b: removed since, kept");
    /* every field set, but b kept: written by name */
    cr_assert_eq(ost_instance_set_slot(it, 2, ost_str_c("dee")), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    st = open_with(reg, &c);
    it = root_item(c);
    cr_assert(str_is(ost_instance_slot(it, 2), "dee"));
    cr_assert_eq(ost_len(ost_instance_extra(it)), 1, "b is still kept");
    close_store(st, c);
    ost_registry_free(reg);
}

/* ---- defaults of fields (ost_class_def.defaults) ---------------------------------- */

/* serializer/flat.c: 0 when data[len] is a flat record, which the store
 * reads by hand (store/conn.c, load_fast); 1 when the general reader
 * reads it. Declared here: the test tells which path a record takes. */
int ost__flat_scan(const void *data, size_t len,
                   void (*ref)(void *ud, uint64_t oid, uint32_t cid), void *ud);
static void no_ref(void *ud, uint64_t oid, uint32_t cid) {
    (void)ud, (void)oid, (void)cid;
}

/* The item under root[key], loaded. */
static ost_value root_named(ost_conn *c, const char *key) {
    ost_value k = ost_str_c(key);
    ost_value it = ost_root_get(c, k);
    ost_decref(k);
    cr_assert(it, "no root[%s]", key);
    cr_assert_eq(ost_activate(c, it), 0, "%s", ost_conn_errmsg(c));
    return it;
}

/* How the store reads the record of obj: "fast" (a flat positional
 * record: load_fast), "positional" (a positional record the general
 * reader reads: it has a memo) or "by name" (a dict state: ost_load_state). */
static const char *read_path(ost_store *st, ost_conn *c, ost_value obj) {
    ost_snap *s;
    cr_assert_eq(ost_snap_open(st, &s), 0);
    ost_raw_record r;
    cr_assert_eq(ost_snap_get(s, ost_oid(c, obj), &r), 0);
    const char *name = NULL, *m, *n;
    uint32_t id;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++)
        if (id == r.class_id) name = n;
    cr_assert(name);
    const char *path = !strchr(name, '(') ? "by name"
                       : ost__flat_scan(r.pickle, r.len, no_ref, NULL) == 0 ? "fast"
                                                                           : "positional";
    ost_snap_close(s);
    return path;
}

static const char *ab[] = {"a", "b"};
static const char *abcde[] = {"a", "b", "c", "d", "e"};

/* Version 2 of inventory.Item: a and b as before, and c (default 7), d
 * (default "dflt") and e (default (1, "x")) added. */
static ost_registry *reg_v2(ost_value *Item) {
    ost_value e = ost_tuple_new(2);
    ost_tuple_set(e, 0, ost_int(1));
    ost_tuple_set(e, 1, ost_str_c("x"));
    ost_value d = ost_str_c("dflt");
    const ost_value defaults[] = {0, 0, ost_int(7), d, e};
    ost_registry *reg = ost_registry_new();
    cr_assert(reg);
    ost_class_def def = {.module = "inventory", .name = "Item", .fields = abcde, .nfields = 5,
                         .persistent = true, .defaults = defaults};
    cr_assert_eq(ost_registry_add(reg, &def, Item), 0, "%s", ost_value_errmsg());
    /* the class copied them: the caller's values are still its own */
    cr_assert_eq(ost_refcount(d), 1);
    cr_assert_eq(ost_refcount(e), 1);
    ost_decref(d);
    ost_decref(e);
    return reg;
}

/* Writes, with version 1 of inventory.Item (fields a and b), one record
 * for each path the store reads records by: root["flat"] (a=1, b="bee"),
 * root["memo"] (a and b the same str "shared": memoized) and root["byname"]
 * (a=3, b unset: a dict state). */
static void write_v1(void) {
    ost_value Item;
    ost_registry *reg = reg_of("Item", ab, 2, NULL, 0, &Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value flat = ost_instance_new(ost_incref(Item));
    ost_instance_set_slot(flat, 0, ost_int(1));
    ost_instance_set_slot(flat, 1, ost_str_c("bee"));
    ost_value memo = ost_instance_new(ost_incref(Item));
    ost_value s = ost_str_c("shared");
    ost_instance_set_slot(memo, 0, ost_incref(s));
    ost_instance_set_slot(memo, 1, s);
    ost_value byname = ost_instance_new(ost_incref(Item));
    ost_instance_set_slot(byname, 0, ost_int(3));
    cr_assert_eq(ost_root_set(c, ost_str_c("flat"), flat), 0);
    cr_assert_eq(ost_root_set(c, ost_str_c("memo"), memo), 0);
    cr_assert_eq(ost_root_set(c, ost_str_c("byname"), byname), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
}

/* The fields added since version 1 hold their defaults in obj: through
 * ost_instance_slot, ost_instance_getattr and ost_instance_getattr_ex. */
static void check_defaults(ost_value obj, const char *path) {
    int64_t i = 0;
    cr_assert_eq(ost_int_value(ost_instance_slot(obj, 2), &i), 0, "%s: c is unset", path);
    cr_assert_eq(i, 7, "%s: c", path);
    cr_assert(str_is(ost_instance_getattr(obj, "d"), "dflt"), "%s: d", path);
    ost_value e = 0;
    cr_assert_eq(ost_instance_getattr_ex(obj, "e", &e), 0, "%s", ost_value_errmsg());
    cr_assert_eq(ost_typeof(e), OST_T_TUPLE, "%s: e is a %s", path, ost_type_name(ost_typeof(e)));
    cr_assert_eq(ost_item(e, 0), ost_int(1));
    cr_assert(str_is(ost_item(e, 1), "x"), "%s: e[1]", path);
}

/* Reads root[key], a record written by write_v1, with version 2 of the
 * class: it must take the reader path named path (read_path), and hold
 * the defaults, after a reload (from a ghost) too. */
static void check_old_record(const char *key, const char *path) {
    write_v1();
    ost_value Item;
    ost_registry *reg = reg_v2(&Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value it = root_named(c, key);
    cr_assert_str_eq(read_path(st, c, it), path, "root[%s] is read another way", key);
    check_defaults(it, path);
    cr_assert_eq(ost_instance_extra(it), 0);
    cr_assert_eq(ost_invalidate(c, it), 0);
    cr_assert(ost_is_ghost(it));
    ost_value d = 0;
    cr_assert_eq(ost_instance_getattr_ex(it, "d", &d), 0, "%s", ost_value_errmsg());
    cr_assert(str_is(d, "dflt"), "%s: d after a reload", path);
    check_defaults(it, path);
    /* what the record held is read as before */
    ost_value b = ost_instance_getattr(it, "b");
    if (strcmp(key, "flat") == 0) cr_assert(str_is(b, "bee"));
    if (strcmp(key, "memo") == 0) cr_assert(str_is(b, "shared"));
    if (strcmp(key, "byname") == 0) cr_assert_null(b, "b: never set, no default");
    close_store(st, c);
    ost_registry_free(reg);
}

OST_TEST(schema, an_added_field_reads_its_default_in_old_records_read_by_load_fast,
         .init = setup, .fini = teardown) {
    check_old_record("flat", "fast");
}

OST_TEST(schema, an_added_field_reads_its_default_in_old_records_read_by_the_general_reader,
         .init = setup, .fini = teardown) {
    check_old_record("memo", "positional");
}

OST_TEST(schema, an_added_field_reads_its_default_in_old_dict_records, .init = setup,
         .fini = teardown) {
    check_old_record("byname", "by name");
}

/* A new instance holds the defaults until set; what is set replaces the
 * default and is stored; a default never replaced is stored as the
 * instance's value (the record has the field, and a later default does
 * not change it). */
OST_TEST(schema, a_new_instance_holds_the_defaults_and_a_set_value_is_stored, .init = setup,
         .fini = teardown) {
    ost_value Item;
    ost_registry *reg = reg_v2(&Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value kept = ost_instance_new(ost_incref(Item)), set = ost_instance_new(ost_incref(Item));
    check_defaults(kept, "new");
    cr_assert_null(ost_instance_slot(kept, 0), "a has no default: unset");
    cr_assert_eq(ost_instance_slot(kept, 3), ost_instance_slot(set, 3),
                 "instances share the class's copy");
    cr_assert_eq(ost_instance_set_slot(kept, 0, ost_int(1)), 0);
    cr_assert_eq(ost_instance_set_slot(kept, 1, ost_int(2)), 0);
    cr_assert_eq(ost_instance_set_slot(set, 0, ost_int(1)), 0);
    cr_assert_eq(ost_instance_setattr(set, "c", ost_int(99)), 0);
    cr_assert_eq(ost_instance_setattr(set, "d", ost_str_c("mine")), 0);
    int64_t i = 0;
    cr_assert_eq(ost_int_value(ost_instance_getattr(set, "c"), &i), 0);
    cr_assert_eq(i, 99);
    cr_assert_eq(ost_root_set(c, ost_str_c("kept"), kept), 0);
    cr_assert_eq(ost_root_set(c, ost_str_c("set"), set), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
    /* read by a build whose defaults changed: the stored values stay */
    const ost_value other[] = {0, 0, ost_int(-1), OST_NONE, OST_NONE};
    reg = ost_registry_new();
    ost_class_def def = {.module = "inventory", .name = "Item", .fields = abcde, .nfields = 5,
                         .persistent = true, .defaults = other};
    cr_assert_eq(ost_registry_add(reg, &def, &Item), 0, "%s", ost_value_errmsg());
    st = open_with(reg, &c);
    kept = root_named(c, "kept");
    check_defaults(kept, "stored");
    set = root_named(c, "set");
    cr_assert_eq(ost_int_value(ost_instance_getattr(set, "c"), &i), 0);
    cr_assert_eq(i, 99, "the value set, not a default");
    cr_assert(str_is(ost_instance_getattr(set, "d"), "mine"));
    cr_assert_null(ost_instance_getattr(set, "b"), "b: no default, never set");
    close_store(st, c);
    ost_registry_free(reg);
}

/* Without a store: a pickle of an instance made before the field was
 * added reads, through a registry, with the default (the reader's NEWOBJ
 * and BUILD); and ost_load_state gives it to an instance too. */
OST_TEST(schema, a_pickle_without_the_field_loads_with_its_default) {
    ost_class_def v1 = {.module = "inventory", .name = "Item", .fields = ab, .nfields = 2};
    ost_value old = ost_class_new(&v1);
    cr_assert(old);
    ost_value inst = ost_instance_new(old);
    ost_instance_set_slot(inst, 0, ost_int(1));
    ost_instance_set_slot(inst, 1, ost_str_c("bee"));
    ost_writer *w = ost_writer_new();
    const void *p;
    size_t n;
    cr_assert_eq(ost_dump(w, inst, &p, &n), 0);
    ost_value Item;
    ost_registry *reg = reg_v2(&Item);
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    ost_value got;
    cr_assert_eq(ost_load(r, p, n, &got, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_instance_class(got), Item);
    check_defaults(got, "ost_load");
    cr_assert(str_is(ost_instance_slot(got, 1), "bee"));
    ost_release(got);
    cr_assert_eq(ost_dump_state(w, inst, &p, &n), 0);
    ost_value fresh = ost_instance_new(ost_incref(Item));
    ost_instance_set_slot(fresh, 2, ost_int(8));
    cr_assert_eq(ost_load_state(r, fresh, p, n), 0, "%s", ost_reader_errmsg(r));
    int64_t i = 0;
    cr_assert_eq(ost_int_value(ost_instance_slot(fresh, 2), &i), 0);
    cr_assert_eq(i, 8, "a state that lacks c leaves c as it was");
    cr_assert(str_is(ost_instance_getattr(fresh, "d"), "dflt"));
    ost_release(fresh);
    ost_release(inst);
    ost_reader_free(r);
    ost_writer_free(w);
    ost_registry_free(reg);
}

/* What may be a default: immutable values of the types listed; anything
 * else is refused by ost_registry_add (OST_EINVAL) and ost_class_new (0),
 * with a message that names the field and says why; no class is made. */
OST_TEST(schema, bad_defaults_are_refused_naming_the_field) {
    ost_value deep = ost_tuple_new(0);
    for (int i = 0; i < 33; i++) {
        ost_value t = ost_tuple_new(1);
        ost_tuple_set(t, 0, deep);
        deep = t;
    }
    ost_value in_tuple = ost_tuple_new(2);
    ost_tuple_set(in_tuple, 0, ost_int(1));
    ost_tuple_set(in_tuple, 1, ost_list_new(0));
    ost_value plain = ost_class_new(&(ost_class_def){.module = "m", .name = "P"});
    struct {
        ost_value v;
        const char *why;
    } bad[] = {
        {ost_list_new(0), "is a list"},
        {ost_dict_new(), "is a dict"},
        {ost_bytearray("x", 1), "is a bytearray"},
        {ost_set_new(), "is a set"},
        {ost_instance_new(ost_incref(plain)), "is an instance"},
        {in_tuple, "is a tuple holding a list"},
        {deep, "is a tuple nested more than 32 deep"},
    };
    ost_registry *reg = ost_registry_new();
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const ost_value defaults[] = {OST_NONE, 0, bad[k].v};
        ost_class_def def = {.module = "inventory", .name = "Item", .fields = abcde,
                             .nfields = 3, .defaults = defaults};
        cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EINVAL, "%s", bad[k].why);
        char want[200];
        snprintf(want, sizeof want, "class inventory.Item: the default of field 'c' %s: ",
                 bad[k].why);
        cr_assert(strstr(ost_value_errmsg(), want), "got \"%s\", want \"%s\"",
                  ost_value_errmsg(), want);
        cr_assert_eq(ost_class_new(&def), 0);
        cr_assert(strstr(ost_value_errmsg(), want));
        ost_release(bad[k].v);
    }
    cr_assert_eq(ost_registry_count(reg), 0);
    /* a class without fields has nothing to give a default to */
    const ost_value one[] = {OST_NONE};
    ost_class_def nofields = {.module = "inventory", .name = "Bag", .defaults = one};
    cr_assert_eq(ost_registry_add(reg, &nofields, NULL), OST_EINVAL);
    cr_assert(strstr(ost_value_errmsg(), "inventory.Bag: defaults given, but the class declares "
                                         "no fields"), "%s", ost_value_errmsg());
    /* every kind allowed: None, bools, ints small and big, floats of both
     * kinds, str, bytes, nested tuples; a class made from them, copied */
    ost_value big = ost_int_from_decimal("123456789012345678901234567890", 30);
    ost_value nest = ost_tuple_new(2);
    ost_tuple_set(nest, 0, ost_bytes("\0b", 2));
    ost_value inner = ost_tuple_new(1);
    ost_tuple_set(inner, 0, ost_float(1e300)); /* a heap float */
    ost_tuple_set(nest, 1, inner);
    static const char *f6[] = {"n", "t", "i", "big", "fl", "nest"};
    const ost_value good[] = {OST_NONE, OST_TRUE, ost_int(-5), big, ost_float(0.5), nest};
    ost_class_def def = {.module = "inventory", .name = "All", .fields = f6, .nfields = 6,
                         .defaults = good};
    ost_value All;
    cr_assert_eq(ost_registry_add(reg, &def, &All), 0, "%s", ost_value_errmsg());
    ost_value a = ost_instance_new(ost_incref(All));
    for (size_t i = 0; i < 6; i++) {
        cr_assert(ost_equal(ost_instance_slot(a, i), good[i]), "default of %s", f6[i]);
        cr_assert(ost_is_immediate(good[i]) || ost_instance_slot(a, i) != good[i],
                  "%s: the class's own copy", f6[i]);
    }
    ost_release(a);
    ost_decref(big);
    ost_decref(nest);
    ost_decref(plain);
    ost_registry_free(reg);
}

/* What Python sees (docs/format.md, "Fields added later"): the defaults
 * live in the C class definition only, not in the store, so a record
 * written before the field was added has no value for it; read the way
 * the documented reader reads (a version's tuple zipped with its names)
 * into a Python class that gives the field as a class attribute, as ZODB
 * programs do, the instance answers the default. A record written since
 * has the field, a default kept included. */
static const char py_reads_items[] =
    "import io, pickle, struct, sys, lmdb\n"
    "class Item:\n"
    "    d = 'dflt'  # the default, as a class attribute\n"
    "class Reader(pickle.Unpickler):\n"
    "    def persistent_load(self, pid):\n"
    "        return pid\n"
    "    def find_class(self, module, name):\n"
    "        return Item if (module, name) == ('inventory', 'Item') else dict\n"
    "env = lmdb.open(open(sys.argv[1]).read(), max_dbs=8, readonly=True, lock=True)\n"
    "records, classes = env.open_db(b'records'), env.open_db(b'classes')\n"
    "out = []\n"
    "with env.begin() as txn:\n"
    "    names, fields = {}, {}\n"
    "    for key, value in txn.cursor(db=classes):\n"
    "        if key[:1] == b'i':\n"
    "            cid, = struct.unpack('=I', key[1:5])\n"
    "            name = value.replace(b'\\0', b'.').decode()\n"
    "            if name.endswith(')'):\n"
    "                name, _, flist = name[:-1].partition('(')\n"
    "                fields[cid] = flist.split(',') if flist else []\n"
    "            names[cid] = name\n"
    "    for key, value in txn.cursor(db=records):\n"
    "        serial, cid, crc = struct.unpack('<QII', value[:16])\n"
    "        if names[cid] != 'inventory.Item':\n"
    "            continue\n"
    "        state = Reader(io.BytesIO(value[16:])).load()\n"
    "        if cid in fields:\n"
    "            state = dict(zip(fields[cid], state))\n"
    "        obj = Item.__new__(Item)\n"
    "        obj.__dict__.update(state)  # what pickle's BUILD does\n"
    "        out.append('a=%r d=%r stored=%s' % (obj.a, obj.d, 'd' in obj.__dict__))\n"
    "open(sys.argv[2], 'w').write('\\n'.join(sorted(out)))\n";

OST_TEST(schema, python_sees_an_old_record_without_the_field_a_class_attribute_gives_it,
         .init = setup, .fini = teardown) {
    write_v1();
    ost_value Item;
    ost_registry *reg = reg_v2(&Item);
    ost_conn *c;
    ost_store *st = open_with(reg, &c);
    ost_value kept = ost_instance_new(ost_incref(Item)), set = ost_instance_new(ost_incref(Item));
    ost_instance_set_slot(kept, 0, ost_int(10));
    ost_instance_set_slot(set, 0, ost_int(11));
    ost_instance_setattr(set, "d", ost_str_c("mine"));
    cr_assert_eq(ost_root_set(c, ost_str_c("kept"), kept), 0);
    cr_assert_eq(ost_root_set(c, ost_str_c("set"), set), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    close_store(st, c);
    ost_registry_free(reg);
    char *out;
    size_t n;
    cr_assert_eq(py_run(NULL, py_reads_items, dir, strlen(dir), &out, &n), 0, "python failed");
    cr_assert_str_eq(out, "a='shared' d='dflt' stored=False\n"
                          "a=1 d='dflt' stored=False\n"
                          "a=10 d='dflt' stored=True\n"
                          "a=11 d='mine' stored=True\n"
                          "a=3 d='dflt' stored=False");
    free(out);
}

/* The class's default values are shared by the instances of every thread
 * (a registry's classes serve all connections): their reference counts
 * change atomically, so threads making and dropping instances at once
 * leave each default with the count it had. */
static void *churn_instances(void *cls) {
    for (int i = 0; i < 200000; i++) ost_decref(ost_instance_new(ost_incref((ost_value)cls)));
    return NULL;
}

OST_TEST(schema, defaults_are_shared_safely_by_instances_of_many_threads) {
    ost_value Item;
    ost_registry *reg = reg_v2(&Item);
    ost_value probe = ost_instance_new(ost_incref(Item));
    ost_value d = ost_instance_slot(probe, 3), e = ost_instance_slot(probe, 4);
    uint32_t dn = ost_refcount(d), en = ost_refcount(e);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn_instances, (void *)Item), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    cr_assert_eq(ost_refcount(d), dn, "d: %u references, %u before", ost_refcount(d), dn);
    cr_assert_eq(ost_refcount(e), en, "e: %u references, %u before", ost_refcount(e), en);
    ost_decref(probe);
    ost_registry_free(reg);
}
