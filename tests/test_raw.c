/* Raw access (include/ostore/raw.h), what the CLI reads and writes stores
 * with: snapshots of records, classes, counters and map entries as
 * stored; the import of such records into a new store; the public key
 * codec, pickle reference scan, path display and store address. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "leakcheck.h"
#include "ostore.h"
#include "storetest.h"

static struct {
    char tmp[64];
    char dir[128];
    char dir2[128];
    ost_registry *reg;
    ost_value item; /* inv.Item: persistent, fields sku, qty */
} F;

static const char *item_fields[] = {"sku", "qty"};

static void setup(void) {
    strcpy(F.tmp, "/tmp/ostore-raw-XXXXXX");
    F.reg = fixture_setup(F.tmp, F.dir, sizeof F.dir);
    snprintf(F.dir2, sizeof F.dir2, "%s/db2", F.tmp);
    ost_class_def item = {.module = "inv", .name = "Item", .fields = item_fields, .nfields = 2,
                          .persistent = true};
    cr_assert_eq(ost_registry_add(F.reg, &item, &F.item), 0);
}

static void teardown(void) { fixture_teardown(F.tmp, &F.reg); }

TestSuite(raw, .init = setup, .fini = teardown, .timeout = 120);

/* Makes the store at F.dir: root["items"] = a list of n items, root["by"]
 * = a map of kind int with keys 0, 10, 20, ... (n entries) whose values
 * are the items. Returns the map's oid. */
static uint64_t make_store(int n) {
    ost_store_options o = options_for(F.reg, true);
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_value list = ost_list_new(0), m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0);
    for (int i = 0; i < n; i++) {
        ost_value it = ost_instance_new(ost_incref(F.item));
        char sku[16];
        snprintf(sku, sizeof sku, "sku-%d", i);
        cr_assert_eq(ost_instance_setattr(it, "sku", ost_str_c(sku)), 0);
        cr_assert_eq(ost_instance_setattr(it, "qty", ost_int(i)), 0);
        cr_assert_eq(ost_map_set(c, m, ost_int(10 * i), ost_incref(it)), 0);
        cr_assert_eq(ost_list_append(list, it), 0);
    }
    root_set(c, "items", list);
    root_set(c, "by", ost_incref(m));
    uint64_t moid = ost_oid(c, m);
    commit_ok(c);
    ost_conn_close(c);
    ost_store_close(st);
    return moid;
}

/* References load as persistent(oid) values. */
static int keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

static ost_snap *snap_of(ost_store *st) {
    ost_snap *s = NULL;
    int rc = ost_snap_open(st, &s);
    cr_assert_eq(rc, 0, "snap_open: %s: %s", ost_err_name(rc), ost_store_errmsg(st));
    return s;
}

OST_TEST(raw, snapshot_records_classes_counters) {
    uint64_t moid = make_store(5);
    ost_store *st = open_read_only(F.dir, F.reg);
    ost_snap *s = snap_of(st);
    ost_snap_stats si;
    cr_assert_eq(ost_snap_stat(s, &si), 0, "%s", ost_snap_errmsg(s));
    cr_assert_str_eq(si.engine, "lmdb");
    cr_assert_eq(si.format, OST_STORE_FORMAT);
    cr_assert_eq(si.records, 7); /* root, map, 5 items */
    cr_assert_eq(si.entries, 5);
    cr_assert_gt(si.next_oid, moid);
    cr_assert_eq(si.last_serial, stats(st).last_serial);
    cr_assert_gt(si.page_size, 0);

    /* classes in ascending id order, with the names the store uses */
    bool saw_item = false, saw_map = false;
    uint32_t id, prev = 0;
    const char *m, *n;
    size_t i;
    for (i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++) {
        cr_assert_gt(id, prev);
        prev = id;
        /* the items have every field set: written under the class version
         * that names their fields (format 4) */
        if (!strcmp(m, "inv") && !strcmp(n, "Item(sku,qty)")) saw_item = true;
        if (!strcmp(m, "ostore.maps") && !strcmp(n, "OrderedMap")) saw_map = true;
    }
    cr_assert(saw_item && saw_map);
    cr_assert_eq(ost_snap_class(s, i, &id, &m, &n), OST_ENOTFOUND);

    /* records in oid order; each pickle loads; the items hold their qty */
    ost_snap_cursor *cur;
    cr_assert_eq(ost_snap_records(s, 0, &cur), 0);
    ost_raw_record r;
    uint64_t count = 0, last = 0, qty_sum = 0;
    ost_reader *rd = ost_reader_new();
    ost_reader_set_persistent_load(rd, keep_pid, NULL);
    int rc;
    while ((rc = ost_snap_next(cur, &r)) == 0) {
        cr_assert_null(r.damage);
        cr_assert(count == 0 || r.oid > last, "oids ascend");
        cr_assert_eq(r.size, r.len + 16);
        last = r.oid;
        count++;
        ost_value v = 0;
        cr_assert_eq(ost_load(rd, r.pickle, r.len, &v, NULL), 0, "%s", ost_reader_errmsg(rd));
        if (ost_typeof(v) == OST_T_TUPLE && ost_len(v) == 2) { /* (sku, qty) */
            int64_t x;
            if (ost_int_value(ost_item(v, 1), &x) == 0) qty_sum += (uint64_t)x;
        }
        ost_release(v);
    }
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert_eq(count, 7);
    cr_assert_eq(qty_sum, 0 + 1 + 2 + 3 + 4);
    ost_snap_cursor_close(cur);
    /* a cursor from an oid starts there */
    cr_assert_eq(ost_snap_records(s, moid + 1, &cur), 0);
    cr_assert_eq(ost_snap_next(cur, &r), 0);
    cr_assert_gt(r.oid, moid);
    ost_snap_cursor_close(cur);
    ost_reader_free(rd);

    /* the root by oid; a missing oid */
    cr_assert_eq(ost_snap_get(s, 0, &r), 0);
    cr_assert_eq(r.oid, 0);
    cr_assert_eq(ost_snap_get(s, si.next_oid + 5, &r), OST_ENOTFOUND);
    cr_assert(strstr(ost_snap_errmsg(s), "no such object"), "%s", ost_snap_errmsg(s));
    cr_assert_eq(ost_snap_verify(s), 0, "%s", ost_snap_errmsg(s));
    ost_snap_close(s);
    ost_store_close(st);
}

OST_TEST(raw, snapshot_does_not_see_later_commits) {
    make_store(2);
    ost_store_options o = options_for(F.reg, false);
    ost_store *st = open_with(F.dir, &o);
    ost_snap *s = snap_of(st);
    ost_snap_stats before;
    cr_assert_eq(ost_snap_stat(s, &before), 0);
    ost_conn *c = conn_of(st);
    ost_value it = ost_instance_new(ost_incref(F.item));
    root_set(c, "late", it);
    commit_ok(c);
    uint64_t late = ost_oid(c, root_get(c, "late"));
    ost_snap_stats after;
    cr_assert_eq(ost_snap_stat(s, &after), 0);
    cr_assert_eq(after.records, before.records);
    cr_assert_eq(after.last_serial, before.last_serial);
    ost_raw_record r;
    cr_assert_eq(ost_snap_get(s, late, &r), OST_ENOTFOUND);
    ost_snap_close(s);
    s = snap_of(st);
    cr_assert_eq(ost_snap_get(s, late, &r), 0);
    ost_snap_close(s);
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(raw, map_entries_as_stored) {
    uint64_t moid = make_store(6);
    ost_store *st = open_read_only(F.dir, F.reg);
    ost_snap *s = snap_of(st);
    uint64_t map = 0;
    cr_assert_eq(ost_snap_next_map(s, 0, &map), 0);
    cr_assert_eq(map, moid);
    cr_assert_eq(ost_snap_next_map(s, moid, &map), OST_ENOTFOUND);

    /* every entry, in key order, with keys that decode to 0, 10, ... */
    ost_entry_cursor *ec;
    cr_assert_eq(ost_snap_entries(s, moid, NULL, 0, &ec), 0);
    ost_raw_entry e;
    int64_t want = 0;
    int rc;
    while ((rc = ost_raw_entry_next(ec, &e)) == 0) {
        cr_assert_null(e.damage);
        cr_assert_gt(e.vlen, 0);
        ost_value k = ost_map_key_decode("int", e.key, e.klen);
        int64_t x = -1;
        cr_assert(k && ost_int_value(k, &x) == 0);
        cr_assert_eq(x, want);
        ost_decref(k);
        want += 10;
    }
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert_eq(want, 60);
    ost_entry_cursor_close(ec);

    /* from a key: the first key >= 25 is 30 */
    uint8_t kb[OST_MAP_KEY_MAX];
    size_t kl;
    char err[128];
    ost_value k25 = ost_int(25);
    cr_assert_eq(ost_map_key_encode("int", k25, false, kb, &kl, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ost_snap_entries(s, moid, kb, kl, &ec), 0);
    cr_assert_eq(ost_raw_entry_next(ec, &e), 0);
    ost_value k = ost_map_key_decode("int", e.key, e.klen);
    int64_t x;
    cr_assert_eq(ost_int_value(k, &x), 0);
    cr_assert_eq(x, 30);
    ost_decref(k);
    ost_entry_cursor_close(ec);

    /* an oid that is no map: an empty cursor */
    cr_assert_eq(ost_snap_entries(s, 0, NULL, 0, &ec), 0);
    cr_assert_eq(ost_raw_entry_next(ec, &e), OST_ENOTFOUND);
    ost_entry_cursor_close(ec);
    /* a bound longer than any key */
    cr_assert_eq(ost_snap_entries(s, moid, kb, OST_MAP_KEY_MAX + 1, &ec), OST_EINVAL);
    cr_assert_null(ec);
    ost_snap_close(s);
    ost_store_close(st);
}

OST_TEST(raw, damaged_record_is_reported_not_loaded) {
    make_store(1);
    /* oid 0's record: a header with a wrong checksum */
    uint8_t key[8] = {0}, val[20] = {0};
    val[0] = 1;
    val[8] = 1;
    memcpy(val + 16, "\x80\x04N.", 4);
    raw_put(F.dir, "records", key, 8, val, sizeof val);
    ost_store *st = open_read_only(F.dir, F.reg);
    ost_snap *s = snap_of(st);
    ost_raw_record r;
    cr_assert_eq(ost_snap_get(s, 0, &r), 0);
    cr_assert_not_null(r.damage);
    cr_assert(strstr(r.damage, "checksum"), "%s", r.damage);
    cr_assert_null(r.pickle);
    cr_assert_eq(r.serial, 0);
    cr_assert_eq(r.size, sizeof val);
    ost_snap_close(s);
    ost_store_close(st);
}

/* Copies every class, record and entry of snapshot s into st2 with the
 * raw import, as ostore copy does. */
static void copy_into(ost_snap *s, ost_store *st2) {
    ost_snap_stats si;
    cr_assert_eq(ost_snap_stat(s, &si), 0);
    ost_import *im;
    int rc = ost_import_begin(st2, 0, &im);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_store_errmsg(st2));
    uint32_t id;
    const char *m, *n;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++)
        cr_assert_eq(ost_import_class(im, id, m, strlen(m), n, strlen(n)), 0, "%s",
                     ost_store_errmsg(st2));
    ost_snap_cursor *cur;
    cr_assert_eq(ost_snap_records(s, 0, &cur), 0);
    ost_raw_record r;
    while (ost_snap_next(cur, &r) == 0)
        cr_assert_eq(ost_import_record(im, r.oid, r.serial, r.class_id, r.pickle, r.len), 0,
                     "%s", ost_store_errmsg(st2));
    ost_snap_cursor_close(cur);
    uint64_t map = 0;
    while (ost_snap_next_map(s, map, &map) == 0) {
        ost_entry_cursor *ec;
        cr_assert_eq(ost_snap_entries(s, map, NULL, 0, &ec), 0);
        ost_raw_entry e;
        while (ost_raw_entry_next(ec, &e) == 0)
            cr_assert_eq(ost_import_entry(im, map, e.key, e.klen, e.serial, e.value, e.vlen), 0,
                         "%s", ost_store_errmsg(st2));
        ost_entry_cursor_close(ec);
    }
    rc = ost_import_commit(im, si.format, si.next_oid, si.last_serial, si.next_class);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_store_errmsg(st2));
}

OST_TEST(raw, import_rebuilds_a_store_byte_for_byte) {
    make_store(20);
    ost_store *st = open_read_only(F.dir, F.reg);
    ost_snap *s = snap_of(st);
    ost_store_options o = options_for(F.reg, true);
    ost_store *st2 = open_with(F.dir2, &o);
    copy_into(s, st2);

    /* every record and entry the same bytes, serials and classes kept */
    ost_snap *s2 = snap_of(st2);
    ost_snap_cursor *a, *b;
    cr_assert_eq(ost_snap_records(s, 0, &a), 0);
    cr_assert_eq(ost_snap_records(s2, 0, &b), 0);
    ost_raw_record ra, rb;
    size_t n = 0;
    while (ost_snap_next(a, &ra) == 0) {
        cr_assert_eq(ost_snap_next(b, &rb), 0);
        cr_assert_eq(ra.oid, rb.oid);
        cr_assert_eq(ra.serial, rb.serial);
        cr_assert_eq(ra.class_id, rb.class_id);
        cr_assert_eq(ra.len, rb.len);
        cr_assert_eq(memcmp(ra.pickle, rb.pickle, ra.len), 0);
        n++;
    }
    cr_assert_eq(ost_snap_next(b, &rb), OST_ENOTFOUND);
    cr_assert_eq(n, 22);
    ost_snap_cursor_close(a);
    ost_snap_cursor_close(b);
    ost_snap_stats x, y;
    cr_assert_eq(ost_snap_stat(s, &x), 0);
    cr_assert_eq(ost_snap_stat(s2, &y), 0);
    cr_assert_eq(x.entries, y.entries);
    cr_assert_eq(x.next_oid, y.next_oid);
    cr_assert_eq(x.last_serial, y.last_serial);
    ost_snap_close(s2);
    /* the copy works as a store: the objects load, check passes */
    ost_conn *c = conn_of(st2);
    ost_value items = root_get(c, "items");
    cr_assert_eq(ost_len(items), 20);
    ost_conn_close(c);
    check_clean(st2, 22);

    /* a store that is not new refuses an import */
    ost_import *im;
    cr_assert_eq(ost_import_begin(st2, 0, &im), OST_EEXIST);
    cr_assert_null(im);
    ost_store_close(st2);
    ost_snap_close(s);
    ost_store_close(st);
}

OST_TEST(raw, failed_import_leaves_the_store_as_it_was) {
    ost_store_options o = options_for(F.reg, true);
    ost_store *st = open_with(F.dir2, &o);
    ost_store_stats before = stats(st);
    ost_import *im;
    cr_assert_eq(ost_import_begin(st, 0, &im), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(ost_import_class(im, 0, "m", 1, "n", 1), OST_EINVAL, "class id 0");
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "n", 1), 0);
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "o", 1), OST_EEXIST, "id twice");
    cr_assert_eq(ost_import_record(im, 5, 1, 1, "\x80\x04N.", 4), 0);
    cr_assert_eq(ost_import_record(im, 3, 1, 1, "\x80\x04N.", 4), OST_EINVAL, "oids ascend");
    /* counters below what was imported: refused, nothing written */
    cr_assert_eq(ost_import_commit(im, OST_STORE_FORMAT, 4, 1, 2), OST_EINVAL);
    ost_store_stats after = stats(st);
    cr_assert_eq(after.records, before.records);
    cr_assert_eq(after.next_oid, before.next_oid);
    /* an aborted import too */
    cr_assert_eq(ost_import_begin(st, 0, &im), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "n", 1), 0);
    ost_import_abort(im);
    after = stats(st);
    cr_assert_eq(after.records, before.records);
    ost_store_close(st);
}

typedef struct {
    uint64_t v[4];
    size_t n;
} refs;

static void note_ref(void *ud, uint64_t oid) {
    refs *r = ud;
    if (r->n < 4) r->v[r->n++] = oid;
}

OST_TEST(raw, key_codec_and_pickle_refs) {
    char canon[64], err[128];
    cr_assert_eq(ost_map_kind_canon(" ( int ,str) ", canon, sizeof canon), 0);
    cr_assert_str_eq(canon, "(int, str)");
    cr_assert_eq(ost_map_kind_canon("float", canon, sizeof canon), OST_EINVAL);
    uint8_t a[OST_MAP_KEY_MAX], b[OST_MAP_KEY_MAX];
    size_t al, bl;
    /* the encoding orders as the keys do, and decodes back */
    ost_value ka = ost_int(-3), kb = ost_int(7);
    cr_assert_eq(ost_map_key_encode("int", ka, false, a, &al, err, sizeof err), 0);
    cr_assert_eq(ost_map_key_encode("int", kb, false, b, &bl, err, sizeof err), 0);
    cr_assert_lt(memcmp(a, b, al), 0);
    ost_value back = ost_map_key_decode("int", a, al);
    int64_t x;
    cr_assert_eq(ost_int_value(back, &x), 0);
    cr_assert_eq(x, -3);
    ost_decref(back);
    ost_value s = ost_str_c("x");
    cr_assert_eq(ost_map_key_encode("int", s, false, a, &al, err, sizeof err), OST_ETYPE);
    cr_assert_neq(err[0], 0);
    cr_assert_eq(ost_map_key_encode("nope", s, false, a, &al, err, sizeof err), OST_EINVAL);
    cr_assert(strstr(err, "nope"), "%s", err);
    ost_decref(s);
    cr_assert_eq(ost_map_key_decode("int", a, 3), 0, "3 bytes are no int key");

    /* the references of a pickle: BININT1 5, BINPERSID; BININT1 9, BINPERSID */
    static const uint8_t p[] = {0x80, 4, ']', '(', 'K', 5, 'Q', 'K', 9, 'Q', 'e', '.'};
    refs r = {{0}, 0};
    cr_assert_eq(ost_pickle_refs(p, sizeof p, note_ref, &r), 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.v[0], 5);
    cr_assert_eq(r.v[1], 9);
    cr_assert_neq(ost_pickle_refs(p, 5, note_ref, &r), 0, "a truncated pickle");
}

OST_TEST(raw, store_path_and_path_show) {
    make_store(1);
    ost_store *st = open_read_only(F.dir, F.reg);
    char real[PATH_MAX];
    cr_assert(realpath(F.dir, real));
    cr_assert_str_eq(ost_store_path(st), real);
    ost_store_close(st);
    cr_assert_str_eq(ost_store_path(NULL), "");
    char buf[OST_PATH_SHOWN];
    cr_assert_str_eq(ost_path_show(buf, sizeof buf, "a\nb\\c"), "a\\nb\\\\c");
    char lng[600];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = 0;
    ost_path_show(buf, sizeof buf, lng);
    cr_assert_eq(strlen(buf), OST_PATH_SHOWN - 1);
    cr_assert(strstr(buf, "..."));
    cr_assert_str_eq(ost_file_kind(S_IFIFO), "a FIFO");
    cr_assert(ost_store_addr_is_path("/tmp/x"));
    cr_assert(ost_store_addr_is_path("relative/postgres:"));
    cr_assert(!ost_store_addr_is_path("postgresql:///db?host=/tmp"));
    cr_assert(!ost_store_addr_is_path("postgres://u@h/db"));
    cr_assert(!ost_store_addr_is_path("postgres:dbname=x"));
    cr_assert(!ost_store_addr_is_path(NULL));
}

OST_TEST(raw, truncated_file_is_refused_at_open) {
    make_store(50);
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(truncate(path, sb.st_size / 2), 0);
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = ost_store_new();
    int rc = ost_store_open(st, F.dir, &o);
    cr_assert_eq(rc, OST_ECORRUPT, "%s", ost_err_name(rc));
    cr_assert(strstr(ost_store_errmsg(st), "beyond the end of the file"), "%s",
              ost_store_errmsg(st));
    ost_store_close(st);
}
