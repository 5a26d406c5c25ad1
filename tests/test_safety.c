/* Data safety (docs/format.md, docs/recovery.md): the CRC-32C of records
 * and map entries, checked against the standard vectors and against a
 * bit-by-bit version of its own (tests/storetest.h); a damaged record or
 * entry reads as OST_ECORRUPT naming the oid, never as a wrong object; a
 * record whose stored length runs past the end of the file is reported,
 * not read (it used to end the process with SIGBUS); and the upgrade of
 * format-1 and format-2 stores, all or nothing. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../store/store_internal.h"
#include "leakcheck.h"
#include "ostore.h"
#include "storetest.h"

static struct {
    char tmp[64];
    char dir[128];
    ost_registry *reg;
} F;

static void setup(void) {
    strcpy(F.tmp, "/tmp/ostore-safety-XXXXXX");
    F.reg = fixture_setup(F.tmp, F.dir, sizeof F.dir);
}

static void teardown(void) { fixture_teardown(F.tmp, &F.reg); }

TestSuite(safety, .init = setup, .fini = teardown, .timeout = 240);

/* ---- helpers ------------------------------------------------------------------ */

static ost_store *open_store(bool create) {
    ost_store_options o = options_for(F.reg, create);
    return open_with(F.dir, &o);
}

/* A persistent object of class safety.Item whose state is {'n': n, 'blob':
 * a bytes of blob_len}. */
static ost_value new_item(int64_t n, size_t blob_len) {
    ost_class_def d = {.module = "safety", .name = "Item", .persistent = true};
    ost_value cls = ost_class_new(&d);
    cr_assert(cls);
    ost_value inst = ost_instance_new(cls);
    ost_value state = ost_dict_new();
    cr_assert_eq(ost_dict_set(state, ost_str_c("n"), ost_int(n)), 0);
    char *blob = malloc(blob_len + 1);
    memset(blob, 'b', blob_len);
    cr_assert_eq(ost_dict_set(state, ost_str_c("blob"), ost_bytes(blob, blob_len)), 0);
    free(blob);
    ost_instance_set_state(inst, state);
    return inst;
}

/* A store with the root, items 1..n (item k holds a blob of blob_len
 * bytes) listed in root['items'], and a map root['m'] of kind str with n
 * entries 'k1'.. -> k. The oids of the items go to oids[0..n). */
static uint64_t g_map;
static void make_store(int n, size_t blob_len, uint64_t *oids) {
    ost_store *st = open_store(true);
    ost_conn *c = conn_of(st);
    ost_value list = ost_list_new(0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "str", &m), 0);
    for (int i = 0; i < n; i++) {
        ost_value it = new_item(i + 1, blob_len);
        cr_assert_eq(ost_list_append(list, ost_incref(it)), 0);
        char k[16];
        snprintf(k, sizeof k, "k%d", i + 1);
        cr_assert_eq(ost_map_set(c, m, ost_str_c(k), ost_int(i + 1)), 0);
        ost_decref(it);
    }
    root_set(c, "items", list);
    root_set(c, "m", ost_incref(m)); /* ost_map_new's is borrowed */
    commit_ok(c);
    for (int i = 0; i < n && oids; i++) {
        ost_value items = root_get(c, "items");
        oids[i] = ost_oid(c, ost_item(items, (size_t)i));
    }
    g_map = ost_oid(c, root_get(c, "m"));
    ost_store_close(st);
}

/* m[key] and del m[key] with a key of their own (the calls borrow it). */
static int mget(ost_conn *c, ost_value m, const char *key, ost_value *v) {
    ost_value k = ost_str_c(key);
    int rc = ost_map_get(c, m, k, v);
    ost_decref(k);
    return rc;
}

static int mdel(ost_conn *c, ost_value m, const char *key) {
    ost_value k = ost_str_c(key);
    int rc = ost_map_del(c, m, k);
    ost_decref(k);
    return rc;
}

static uint8_t *read_file(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", path);
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    uint8_t *b = malloc((size_t)sb.st_size);
    cr_assert_eq(pread(fd, b, (size_t)sb.st_size, 0), sb.st_size);
    close(fd);
    *n = (size_t)sb.st_size;
    return b;
}

static void write_at(const char *path, size_t off, const void *b, size_t n) {
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, b, n, (off_t)off), (ssize_t)n);
    close(fd);
}

/* ---- the checksum function ---------------------------------------------------- */

OST_TEST(safety, crc32c_gives_the_standard_values) {
    cr_assert_eq(ost__crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(ost__crc32c_soft(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(ost__crc32c(0, "", 0), 0);
    /* 32 bytes of zeros, of 0xff (RFC 3720, B.4) */
    uint8_t z[32] = {0}, f[32];
    memset(f, 0xff, sizeof f);
    cr_assert_eq(ost__crc32c(0, z, 32), 0x8A9136AAu);
    cr_assert_eq(ost__crc32c(0, f, 32), 0x62A8AB43u);
}

OST_TEST(safety, crc32c_agrees_at_every_length_and_alignment) {
    uint8_t buf[600];
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n + off <= 540; n += n < 40 ? 1 : 37) {
            uint32_t want = t_crc32c(0, buf + off, n);
            REQUIRE(ost__crc32c(0, buf + off, n) == want, "hw: off %zu n %zu", off, n);
            REQUIRE(ost__crc32c_soft(0, buf + off, n) == want, "soft: off %zu n %zu", off, n);
            /* in two pieces */
            uint32_t a = ost__crc32c(0, buf + off, n / 3);
            REQUIRE(ost__crc32c(a, buf + off + n / 3, n - n / 3) == want, "chained: %zu", n);
        }
}

/* ---- what is written ------------------------------------------------------------ */

/* Every record and map entry in the store carries the checksum
 * docs/format.md gives, computed here bit by bit. */
static void expect_all_sealed(void) {
    MDB_env *env = raw_env(F.dir);
    MDB_txn *t;
    MDB_dbi recs, ments;
    MDB_cursor *cur;
    MDB_val k, v;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, "records", 0, &recs), 0);
    cr_assert_eq(mdb_dbi_open(t, "mapents", 0, &ments), 0);
    cr_assert_eq(mdb_cursor_open(t, recs, &cur), 0);
    size_t n = 0;
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        uint8_t *b = malloc(v.mv_size);
        memcpy(b, v.mv_data, v.mv_size);
        uint64_t oid = 0;
        for (int i = 0; i < 8; i++) oid = oid << 8 | ((uint8_t *)k.mv_data)[i];
        seal_record(b, v.mv_size, oid);
        REQUIRE(memcmp(b, v.mv_data, v.mv_size) == 0, "oid %llu: checksum", (unsigned long long)oid);
        free(b);
        n++;
    }
    mdb_cursor_close(cur);
    cr_assert_gt(n, 0);
    cr_assert_eq(mdb_cursor_open(t, ments, &cur), 0);
    n = 0;
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        uint8_t *b = malloc(v.mv_size);
        memcpy(b, v.mv_data, v.mv_size);
        seal_entry(k.mv_data, k.mv_size, b, v.mv_size);
        REQUIRE(memcmp(b, v.mv_data, v.mv_size) == 0, "entry %zu: checksum", n);
        free(b);
        n++;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(t);
    mdb_env_close(env);
}

OST_TEST(safety, commits_loaders_and_count_changes_write_checksums) {
    make_store(20, 3000, NULL); /* records on overflow pages too */
    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    /* a change of an object, a map's count, a deleted entry */
    ost_value m = root_get(c, "m");
    cr_assert_eq(mdel(c, m, "k3"), 0);
    cr_assert_eq(ost_map_set(c, m, ost_str_c("new"), ost_str_c("v")), 0);
    root_set(c, "title", ost_str_c("changed"));
    commit_ok(c);
    /* a bulk loader's objects and entries */
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, NULL, &l), 0);
    for (int i = 0; i < 50; i++) {
        ost_value it = new_item(1000 + i, 10);
        cr_assert_eq(ost_loader_add(l, it, NULL), 0);
        char k[16];
        snprintf(k, sizeof k, "L%03d", i);
        cr_assert_eq(ost_loader_map_set(l, m, ost_str_c(k), it), 0);
    }
    cr_assert_eq(ost_loader_close(l), 0, "%s", ost_conn_errmsg(c));
    commit_ok(c);
    ost_store_close(st);
    expect_all_sealed();
}

/* ---- damage is reported, never read ----------------------------------------------- */

OST_TEST(safety, a_changed_byte_in_a_record_is_corrupt_naming_the_oid) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    uint8_t k[8];
    put_be64(k, oids[1]);
    size_t n;
    uint8_t *rec = raw_get(F.dir, "records", k, 8, &n);
    rec[n - 3] ^= 0x01; /* one bit of the pickle: it still decodes, to another value */
    raw_put(F.dir, "records", k, 8, rec, n);
    free(rec);

    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value obj;
    cr_assert_eq(ost_conn_get(c, oids[1], &obj), OST_ECORRUPT);
    expect_oid_in(ost_conn_errmsg(c), oids[1]);
    cr_assert(strstr(ost_conn_errmsg(c), "checksum"), "%s", ost_conn_errmsg(c));
    /* the others load */
    cr_assert_eq(ost_conn_get(c, oids[0], &obj), 0);
    cr_assert_eq(ost_conn_get(c, oids[2], &obj), 0);
    cr_assert_eq(ost_activate(c, obj), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    /* check lists it, with the oid */
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_geq(r.n, 1);
    cr_assert_eq(r.oid[0], oids[1]);
    cr_assert(strstr(r.msg[0], "checksum"), "%s", r.msg[0]);
    /* pack refuses: what the damaged record refers to is unknown */
    uint64_t removed = 7;
    cr_assert_eq(ost_store_pack(st, &removed), OST_ECORRUPT);
    cr_assert_eq(removed, 0);
    ost_store_close(st);
}

/* A record whose header names another class that exists: the object
 * that refers to it fails to load, naming the damaged oid, instead of
 * making a ghost of the wrong class from the header (a ghost is made only
 * from a record whose checksum holds). safety.Item is no class of the
 * registry, so a format-4 reference's class id is not trusted for it and
 * the record is read (docs/format.md, "References"). */
OST_TEST(safety, a_damaged_class_id_fails_the_referrer_and_makes_no_ghost) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    uint8_t k[8], km[8];
    put_be64(k, oids[1]);
    put_be64(km, g_map);
    size_t n, nm;
    uint8_t *rec = raw_get(F.dir, "records", k, 8, &n);
    uint8_t *map = raw_get(F.dir, "records", km, 8, &nm);
    cr_assert_neq(memcmp(rec + 8, map + 8, 4), 0, "the item and the map have other classes");
    memcpy(rec + 8, map + 8, 4); /* the map's class id, in the item's header */
    raw_put(F.dir, "records", k, 8, rec, n);
    free(rec);
    free(map);

    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value root, obj;
    cr_assert_eq(ost_conn_get(c, 0, &root), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_activate(c, root), OST_ECORRUPT, "the root refers to the damaged item");
    expect_oid_in(ost_conn_errmsg(c), oids[1]);
    cr_assert(strstr(ost_conn_errmsg(c), "checksum"), "%s", ost_conn_errmsg(c));
    cr_assert(ost_is_ghost(root));
    cr_assert_eq(ost_conn_get(c, oids[1], &obj), OST_ECORRUPT, "no ghost of it was kept");
    cr_assert_eq(ost_conn_get(c, oids[2], &obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_activate(c, obj), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(safety, a_record_under_another_oid_fails_its_checksum) {
    uint64_t oids[2];
    make_store(2, 10, oids);
    uint8_t k0[8], k1[8];
    put_be64(k0, oids[0]);
    put_be64(k1, oids[1]);
    size_t n;
    uint8_t *rec = raw_get(F.dir, "records", k0, 8, &n);
    raw_put(F.dir, "records", k1, 8, rec, n); /* a sound record, under the wrong key */
    free(rec);
    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value obj;
    cr_assert_eq(ost_conn_get(c, oids[1], &obj), OST_ECORRUPT);
    expect_oid_in(ost_conn_errmsg(c), oids[1]);
    cr_assert_eq(ost_conn_get(c, oids[0], &obj), 0);
    ost_store_close(st);
}

OST_TEST(safety, a_changed_byte_in_a_map_entry_is_corrupt_naming_map_and_key) {
    make_store(5, 10, NULL);
    uint8_t key[16];
    put_be64(key, g_map);
    memcpy(key + 8, "k2", 2);
    size_t n;
    uint8_t *val = raw_get(F.dir, "mapents", key, 10, &n);
    cr_assert(val);
    val[n - 2] ^= 0x01; /* the int's byte: 2 would read as 3 */
    raw_put(F.dir, "mapents", key, 10, val, n);
    free(val);

    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value m = root_get(c, "m"), v = 0;
    cr_assert_eq(mget(c, m, "k2", &v), OST_ECORRUPT);
    expect_map_oid(ost_conn_errmsg(c), g_map);
    cr_assert(strstr(ost_conn_errmsg(c), "'k2'") && strstr(ost_conn_errmsg(c), "checksum"), "%s",
              ost_conn_errmsg(c));
    cr_assert_eq(mget(c, m, "k1", &v), 0);
    /* a cursor reports it and goes on past it */
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c, m, NULL, &cur), 0);
    ost_value kk;
    cr_assert_eq(ost_map_cursor_next(cur, &kk, NULL), 0); /* k1 */
    cr_assert_eq(ost_map_cursor_next(cur, &kk, NULL), OST_ECORRUPT);
    cr_assert_eq(ost_map_cursor_next(cur, &kk, NULL), 0);
    cr_assert_str_eq(ost_data(kk, NULL), "k3");
    ost_map_cursor_close(cur);
    /* writing over the damaged entry refuses (its serial, which conflict
     * checks need, is unknown): salvage is the way out */
    cr_assert_eq(ost_map_set(c, m, ost_str_c("k2"), ost_int(22)), OST_ECORRUPT);
    cr_assert_eq(mdel(c, m, "k2"), OST_ECORRUPT);
    cr_assert_eq(ost_map_set(c, m, ost_str_c("k9"), ost_int(9)), 0);
    commit_ok(c);
    ost_conn_close(c);
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_eq(r.n, 1, "%s", r.msg[0]);
    expect_map_oid(r.msg[0], g_map);
    ost_store_close(st);
}

/* A record on overflow pages whose stored length was damaged to 1.7 GB:
 * LMDB hands out a pointer and a length that run past the end of the
 * file, and reading them ended the process with SIGBUS. */
OST_TEST(safety, a_record_length_past_the_end_of_the_file_is_reported_not_read) {
    uint64_t oids[2];
    make_store(2, 20000, oids);
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t fn;
    uint8_t *file = read_file(path, &fn);
    /* the leaf node of the record: size (u16 lo, u16 hi), flags F_BIGDATA
     * (1), key size 8, then the key */
    uint8_t pat[12] = {1, 0, 8, 0};
    put_be64(pat + 4, oids[1]);
    int patched = 0;
    for (size_t i = 4; i + sizeof pat <= fn; i++)
        if (memcmp(file + i, pat, sizeof pat) == 0) {
            uint8_t hi[2] = {0x00, 0x65}; /* 0x6500xxxx bytes: about 1.7 GB */
            write_at(path, i - 2, hi, 2);
            patched++;
        }
    free(file);
    cr_assert_gt(patched, 0, "the record's node is in the file");
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_value obj;
    cr_assert_eq(ost_conn_get(c, oids[1], &obj), OST_ECORRUPT);
    expect_oid_in(ost_conn_errmsg(c), oids[1]);
    cr_assert(strstr(ost_conn_errmsg(c), "past the end of the file"), "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_conn_get(c, oids[0], &obj), 0);
    cr_assert_eq(ost_activate(c, obj), 0);
    ost_conn_close(c);
    /* check's walk of the pages finds it first: the page and the oids */
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_geq(r.n, 1);
    cr_assert_eq(r.oid[0], UINT64_MAX, "a page problem has no oid: %s", r.msg[0]);
    cr_assert(strstr(r.msg[0], "records, leaf") && strstr(r.msg[0], "does not fit its overflow run"),
              "%s", r.msg[0]);
    cr_assert(strstr(r.msg[0], "records from oid"), "the oids behind it: %s", r.msg[0]);
    ost_store_close(st);
}

/* ---- reads through damaged pages (issue 30, item 4) ------------------------------------ */

/* Sets byte off of every copy of the 12 bytes pat in dir/data.mdb (the
 * current tree's and older copies in free pages) to v, at offset at from
 * the start of the match; returns how many it changed. */
static int patch_all(const uint8_t *pat, size_t n, size_t at, uint8_t v) {
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t fn;
    uint8_t *file = read_file(path, &fn);
    int patched = 0;
    for (size_t i = 0; i + n <= fn; i++)
        if (memcmp(file + i, pat, n) == 0) {
            write_at(path, i + at, &v, 1);
            patched++;
        }
    free(file);
    return patched;
}

/* One changed byte, the flags of a record's leaf node set to 0xf7
 * (F_BIGDATA | F_SUBDATA | F_DUPDATA and more): liblmdb took the node for
 * duplicates and followed a sub-cursor that a records database does not
 * have (SIGSEGV inside ost_conn_get on a read-only handle). Now that get
 * fails with OST_ECORRUPT naming the oid and the page, and the other
 * records of the page still read. */
OST_TEST(safety, a_node_flags_byte_of_0xf7_is_corrupt_for_that_oid_not_a_crash) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    /* the node: data size (u16, u16), flags 0 (u16), key size 8, the key */
    uint8_t pat[12] = {0, 0, 8, 0};
    put_be64(pat + 4, oids[1]);
    cr_assert_gt(patch_all(pat, sizeof pat, 0, 0xf7), 0, "the record's node is in the file");
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_value obj;
    cr_assert_eq(ost_conn_get(c, oids[1], &obj), OST_ECORRUPT);
    expect_oid_in(ost_conn_errmsg(c), oids[1]);
    cr_assert(strstr(ost_conn_errmsg(c), "records, leaf") && strstr(ost_conn_errmsg(c), "flags 0xf7"),
              "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_conn_get(c, oids[0], &obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_activate(c, obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_conn_get(c, oids[2], &obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_activate(c, obj), 0, "%s", ost_conn_errmsg(c));
    /* an iterator names it as damaged and goes on to the next record */
    ost_iter *it;
    cr_assert_eq(ost_iter_open(c, 0, &it), 0);
    ost_record_info info;
    bool seen[3] = {false, false, false};
    int rc;
    while ((rc = ost_iter_next(it, &info, NULL)) == 0)
        for (int i = 0; i < 3; i++)
            if (info.oid == oids[i]) {
                seen[i] = true;
                cr_assert_eq(info.damaged, i == 1, "oid %llu", (unsigned long long)info.oid);
            }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(c));
    cr_assert(seen[0] && seen[1] && seen[2]);
    ost_iter_close(it);
    /* so does one over the records' class: the damaged record's class
     * cannot be told, and skipping it would be a silent wrong answer */
    ost_value item_cls = ost_global("safety", "Item");
    cr_assert_eq(ost_iter_open(c, item_cls, &it), 0);
    memset(seen, 0, sizeof seen);
    while ((rc = ost_iter_next(it, &info, NULL)) == 0)
        for (int i = 0; i < 3; i++)
            if (info.oid == oids[i]) {
                seen[i] = true;
                cr_assert_eq(info.damaged, i == 1, "oid %llu", (unsigned long long)info.oid);
            }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(c));
    cr_assert(seen[0] && seen[1] && seen[2], "the iterator over the class passed over oid %llu",
              (unsigned long long)oids[1]);
    ost_iter_close(it);
    ost_decref(item_cls);
    ost_conn_close(c);
    /* the store's counters walk every record: refused, not a crash */
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(st, &ss), OST_ECORRUPT);
    cr_assert(strstr(ost_store_errmsg(st), "flags 0xf7"), "%s", ost_store_errmsg(st));
    ost_store_close(st);
}

/* A records leaf page's node count (mp_lower) made one smaller: the page's
 * last node vanishes from every reader, and the rest of the page is still
 * sound and in order, so a get of the hidden record said "no such object"
 * (a wrong answer: its bytes were not touched) and an iterator passed over
 * it. LMDB keeps a page's nodes packed, so the hidden node leaves a hole
 * the guard now sees: every get of an oid of that page is OST_ECORRUPT or
 * the record, never "no such object", and an iterator stops with the
 * error. */
OST_TEST(safety, a_smaller_node_count_is_damage_not_missing_records) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t fn;
    uint8_t *file = read_file(path, &fn);
    /* every leaf page holding oids[1]'s record node (the live one and any
     * older copy): flags 0, key size 8, the oid */
    uint8_t pat[12] = {0, 0, 8, 0};
    put_be64(pat + 4, oids[1]);
    const size_t ps = 4096;
    int patched = 0;
    for (size_t i = 0; i + sizeof pat <= fn; i++)
        if (memcmp(file + i, pat, sizeof pat) == 0) {
            size_t page = i / ps * ps;
            if (file[page + 10] != 0x02) continue; /* P_LEAF */
            unsigned lower = file[page + 12] | file[page + 13] << 8;
            uint8_t b[2] = {(uint8_t)(lower - 2), (uint8_t)((lower - 2) >> 8)};
            write_at(path, page + 12, b, 2);
            patched++;
        }
    free(file);
    cr_assert_gt(patched, 0, "the records leaf is in the file");
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    int corrupt = 0;
    uint64_t all[5] = {0, oids[0], oids[1], oids[2], g_map};
    for (int i = 0; i < 5; i++) {
        ost_value obj;
        int rc = ost_conn_get(c, all[i], &obj);
        cr_assert(rc == 0 || rc == OST_ECORRUPT, "oid %llu: %s: %s", (unsigned long long)all[i],
                  ost_err_name(rc), ost_conn_errmsg(c));
        if (rc) {
            corrupt++;
            cr_assert(strstr(ost_conn_errmsg(c), "do not fill"), "%s", ost_conn_errmsg(c));
        }
    }
    cr_assert_gt(corrupt, 0, "the page's damage was not seen");
    ost_iter *it;
    cr_assert_eq(ost_iter_open(c, 0, &it), 0);
    ost_record_info info;
    int rc;
    while ((rc = ost_iter_next(it, &info, NULL)) == 0) continue;
    cr_assert_eq(rc, OST_ECORRUPT, "the iterator ended with %s", ost_err_name(rc));
    ost_iter_close(it);
    ost_conn_close(c);
    ost_store_close(st);
}

/* One changed byte in the map oid of the last entry's key: the key reads
 * as one of map oid + 1, still in order, so no page check sees it. The
 * cursor ended there as if the map had no more entries (no error, one
 * entry fewer than ost_map_len says); it now checks the checksum of the
 * entry it meets outside its map, and reports the damage. */
OST_TEST(safety, a_damaged_map_oid_in_an_entry_key_is_reported_by_the_cursor) {
    make_store(5, 10, NULL);
    uint8_t pat[10];
    put_be64(pat, g_map);
    memcpy(pat + 8, "k5", 2);
    cr_assert_gt(patch_all(pat, sizeof pat, 7, (uint8_t)(g_map + 1)), 0, "the entry's key is in the file");
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_value m = root_get(c, "m");
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0);
    cr_assert_eq(n, 5);
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c, m, NULL, &cur), 0);
    ost_value k;
    for (int i = 1; i <= 4; i++) {
        cr_assert_eq(ost_map_cursor_next(cur, &k, NULL), 0, "entry %d: %s", i, ost_conn_errmsg(c));
        char want[8];
        snprintf(want, sizeof want, "k%d", i);
        cr_assert_str_eq(ost_data(k, NULL), want);
    }
    cr_assert_eq(ost_map_cursor_next(cur, &k, NULL), OST_ECORRUPT, "the walk must not end quietly");
    expect_map_oid(ost_conn_errmsg(c), g_map);
    cr_assert(strstr(ost_conn_errmsg(c), "checksum"), "%s", ost_conn_errmsg(c));
    ost_map_cursor_close(cur);
    ost_conn_close(c);
    ost_store_close(st);
}

/* The raw snapshot's walk over the maps that have entries (ost_snap_next_map,
 * what export uses) reads the entries' pages through the guard too: a map
 * entry's node flags byte set to 0xf7 made liblmdb follow a sub-database
 * the entries database does not have (SIGSEGV); the walk needs only the
 * keys, which the guard checked, so it now answers right (or, were the
 * node read, would be OST_ECORRUPT naming the page). */
OST_TEST(safety, the_raw_walk_over_maps_survives_a_damaged_entry_node) {
    make_store(5, 10, NULL);
    /* the node of k1, from its flags: flags 0 (u16), key size 10, the key */
    uint8_t pat[14] = {0, 0, 10, 0};
    put_be64(pat + 4, g_map);
    memcpy(pat + 12, "k1", 2);
    cr_assert_gt(patch_all(pat, sizeof pat, 0, 0xf7), 0, "the entry's node is in the file");
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_snap *sn;
    cr_assert_eq(ost_snap_open(st, &sn), 0, "%s", ost_store_errmsg(st));
    uint64_t map;
    int rc = ost_snap_next_map(sn, 0, &map);
    cr_assert(rc == 0 || rc == OST_ECORRUPT, "%s: %s", ost_err_name(rc), ost_store_errmsg(st));
    if (rc == 0) /* the walk needs the keys only, and they are sound */
        cr_assert_eq(map, g_map);
    else
        cr_assert(strstr(ost_store_errmsg(st), "flags 0xf7"), "%s", ost_store_errmsg(st));
    ost_snap_close(sn);
    ost_store_close(st);
}

/* An entry gone from the pages while the map's record still counts it
 * (here deleted through LMDB, so the pages stay sound and every checksum
 * holds): a walk of the whole map met 4 entries and ended without an
 * error while ost_map_len said 5. It now reports the difference. A walk
 * of part of the map cannot tell, and does not. */
OST_TEST(safety, a_whole_map_walk_that_disagrees_with_the_count_reports_damage) {
    make_store(5, 10, NULL);
    uint8_t key[10];
    put_be64(key, g_map);
    memcpy(key + 8, "k3", 2);
    raw_put(F.dir, "mapents", key, 10, NULL, 0);
    ost_store_options o = options_for(F.reg, false);
    o.read_only = true;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_value m = root_get(c, "m");
    for (int reverse = 0; reverse < 2; reverse++) {
        ost_map_range r = {.reverse = reverse};
        ost_map_cursor *cur;
        cr_assert_eq(ost_map_cursor_open(c, m, &r, &cur), 0);
        int got = 0, rc;
        while ((rc = ost_map_cursor_next(cur, NULL, NULL)) == 0) got++;
        cr_assert_eq(got, 4);
        cr_assert_eq(rc, OST_ECORRUPT, "a walk of 4 entries of a map of 5 must say so");
        expect_map_oid(ost_conn_errmsg(c), g_map);
        cr_assert(strstr(ost_conn_errmsg(c), "met 4 entries") && strstr(ost_conn_errmsg(c), "counts 5"),
                  "%s", ost_conn_errmsg(c));
        ost_map_cursor_close(cur);
    }
    /* a range cannot compare with the count: it ends normally */
    ost_value from = ost_str_c("k2");
    ost_map_range r = {.from = from};
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c, m, &r, &cur), 0);
    int got = 0, rc;
    while ((rc = ost_map_cursor_next(cur, NULL, NULL)) == 0) got++;
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(c));
    cr_assert_eq(got, 3);
    ost_map_cursor_close(cur);
    ost_decref(from);
    ost_conn_close(c);
    ost_store_close(st);
}

/* ---- upgrades ------------------------------------------------------------------------ */

static uint64_t meta_format(void) {
    size_t n;
    uint8_t *v = raw_get(F.dir, "meta", "format", 6, &n);
    cr_assert(v && n == 8);
    uint64_t f = get_le64(v);
    free(v);
    return f;
}

/* Reads every item and entry of the store made by make_store(n, ...). */
static void expect_contents(ost_store *st, int n) {
    ost_conn *c = conn_of(st);
    ost_value items = root_get(c, "items"), m = root_get(c, "m");
    cr_assert(items && m, "root items and m: %s", ost_conn_errmsg(c));
    cr_assert_eq(ost_len(items), (size_t)n, "%zu items", ost_len(items));
    for (int i = 0; i < n; i++) {
        ost_value it = ost_item(items, (size_t)i);
        cr_assert_eq(ost_activate(c, it), 0, "%s", ost_conn_errmsg(c));
        int64_t x;
        cr_assert_eq(ost_int_value(ost_instance_getattr(it, "n"), &x), 0);
        cr_assert_eq(x, i + 1);
        char k[16];
        snprintf(k, sizeof k, "k%d", i + 1);
        ost_value v;
        cr_assert_eq(mget(c, m, k, &v), 0, "%s", ost_conn_errmsg(c));
        cr_assert_eq(ost_int_value(v, &x), 0);
        cr_assert_eq(x, i + 1);
    }
    ost_conn_close(c);
}

OST_TEST(safety, a_format2_store_reads_read_only_as_it_is_and_upgrades_on_a_write_open) {
    make_store(30, 3000, NULL);
    make_old_format(F.dir, 2);
    cr_assert_eq(meta_format(), 2);
    ost_store *st = open_read_only(F.dir, F.reg);
    expect_contents(st, 30);
    check_clean(st, 0);
    ost_store_close(st);
    cr_assert_eq(meta_format(), 2, "a read-only open changes nothing");
    st = open_store(false);
    ost_store_close(st);
    cr_assert_eq(meta_format(), OST_STORE_FORMAT, "a read-write open upgrades");
    expect_all_sealed();
    st = open_store(false);
    expect_contents(st, 30);
    check_clean(st, 0);
    ost_store_close(st);
}

OST_TEST(safety, a_format1_store_upgrades) {
    make_store(5, 10, NULL);
    /* format 1 has no maps: drop the map from the root first */
    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    root_set(c, "m", OST_NONE);
    commit_ok(c);
    uint64_t removed;
    cr_assert_eq(ost_store_pack(st, &removed), 0);
    ost_store_close(st);
    make_old_format(F.dir, 1);
    cr_assert_eq(meta_format(), 1);
    st = open_store(false);
    c = conn_of(st);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "maps work after the upgrade");
    root_set(c, "m", ost_incref(m));
    commit_ok(c);
    ost_store_close(st);
    cr_assert_eq(meta_format(), OST_STORE_FORMAT);
    expect_all_sealed();
}

OST_TEST(safety, a_damaged_record_stops_the_upgrade_and_changes_nothing) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    make_old_format(F.dir, 2);
    uint8_t k[8];
    put_be64(k, oids[2]);
    size_t n;
    uint8_t *rec = raw_get(F.dir, "records", k, 8, &n);
    rec[13] = 0x5a; /* a reserved byte: damage in format 2 */
    raw_put(F.dir, "records", k, 8, rec, n);
    free(rec);
    ost_store_options o = options_for(F.reg, false);
    ost_store *st = ost_store_new();
    cr_assert_eq(ost_store_open(st, F.dir, &o), OST_ECORRUPT);
    expect_oid_in(ost_store_errmsg(st), oids[2]);
    cr_assert(strstr(ost_store_errmsg(st), "upgrade"), "%s", ost_store_errmsg(st));
    ost_store_close(st);
    cr_assert_eq(meta_format(), 2, "nothing changed");
    put_be64(k, oids[0]);
    rec = raw_get(F.dir, "records", k, 8, &n);
    cr_assert_eq(rec[12] | rec[13] | rec[14] | rec[15], 0, "records not rewritten");
    free(rec);
    /* read-only, it opens; check names the damage */
    st = open_read_only(F.dir, F.reg);
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_eq(r.oid[0], oids[2]);
    ost_store_close(st);
}

static int upgrade_child(void *arg) {
    (void)arg;
    ost_store_options o = options_for(NULL, false);
    ost_store *st;
    ost_conn *c;
    int rc = child_open(F.dir, &o, &st, &c);
    if (rc) return rc;
    ost_store_close(st);
    return 0;
}

/* A read-only handle opened at format 2 reads on after another process
 * upgraded the store (records then carry checksums where it expected
 * zeros). */
OST_TEST(safety, a_read_only_handle_follows_an_upgrade_by_another_process) {
    make_store(4, 10, NULL);
    make_old_format(F.dir, 2);
    ost_store *st = open_read_only(F.dir, F.reg);
    ost_conn *c = conn_of(st);
    cr_assert(root_get(c, "items"));
    cr_assert_eq(wait_child(spawn(upgrade_child, NULL)), 0);
    cr_assert_eq(meta_format(), OST_STORE_FORMAT);
    ost_abort(c); /* a new snapshot */
    ost_conn_close(c);
    ost_value obj;
    c = conn_of(st);
    cr_assert_eq(ost_conn_get(c, 0, &obj), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    expect_contents(st, 4);
    ost_store_close(st);
}

/* ---- pack never deletes what damage hid ------------------------------------------ */

static uint64_t record_count(ost_store *st) { return stats(st).records; }

/* A changed key byte moves a record under another oid: the root's
 * reference to it dangles, and what only it referred to looks unreachable.
 * Pack used to delete those intact records for good. */
OST_TEST(safety, pack_refuses_when_a_reference_dangles_and_force_packs_anyway) {
    uint64_t oids[3];
    make_store(3, 10, oids);
    /* item 2 refers to a new object X that nothing else refers to */
    ost_store *st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value items = root_get(c, "items");
    ost_value it = ost_item(items, 1), x = new_item(99, 10);
    cr_assert_eq(ost_activate(c, it), 0);
    cr_assert_eq(ost_instance_setattr(it, "x", x), 0);
    commit_ok(c);
    ost_store_close(st);
    /* item 2's record moves to oid 1000 (its key's low byte changed) */
    uint8_t k[8], k2[8];
    put_be64(k, oids[1]);
    put_be64(k2, 1000);
    size_t n;
    uint8_t *rec = raw_get(F.dir, "records", k, 8, &n);
    raw_put(F.dir, "records", k2, 8, rec, n);
    raw_put(F.dir, "records", k, 8, NULL, 0);
    free(rec);

    st = open_store(false);
    uint64_t before = record_count(st), removed = 5;
    cr_assert_eq(ost_store_pack(st, &removed), OST_ECORRUPT);
    cr_assert_eq(removed, 0);
    expect_oid_in(ost_store_errmsg(st), oids[1]);
    cr_assert(strstr(ost_store_errmsg(st), "nothing was removed"), "%s", ost_store_errmsg(st));
    cr_assert_eq(record_count(st), before, "nothing removed");
    cr_assert_eq(ost_store_pack_ex(st, 0x80, &removed), OST_EINVAL);
    /* forced: the moved record and X, which only it referred to, go */
    cr_assert_eq(ost_store_pack_ex(st, OST_PACK_FORCE, &removed), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(removed, 2);
    cr_assert_eq(record_count(st), before - 2);
    ost_store_close(st);
}

/* ---- salvage --------------------------------------------------------------------------- */

#include "../store/lmdb/salvage.h"

typedef struct {
    int n[3];
    char first_lost[512];
} salv_lines;

static void salv_line(void *ud, int kind, const char *line) {
    salv_lines *l = ud;
    if (kind == OST__SALV_LOST && !l->n[kind]) snprintf(l->first_lost, sizeof l->first_lost, "%s", line);
    l->n[kind]++;
}

/* Every record and entry of store a is in store b with the same bytes,
 * except the oids in skip (and, in b, map records' counts may differ). */
static void expect_same_records(const char *a, const char *b, const uint64_t *skip, size_t nskip) {
    MDB_env *ea = raw_env(a), *eb = raw_env(b);
    MDB_txn *ta, *tb;
    MDB_dbi ra, rb;
    cr_assert_eq(mdb_txn_begin(ea, NULL, MDB_RDONLY, &ta), 0);
    cr_assert_eq(mdb_txn_begin(eb, NULL, MDB_RDONLY, &tb), 0);
    cr_assert_eq(mdb_dbi_open(ta, "records", 0, &ra), 0);
    cr_assert_eq(mdb_dbi_open(tb, "records", 0, &rb), 0);
    MDB_cursor *cur;
    MDB_val k, v, w;
    cr_assert_eq(mdb_cursor_open(ta, ra, &cur), 0);
    size_t n = 0;
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        uint64_t oid = 0;
        for (int i = 0; i < 8; i++) oid = oid << 8 | ((uint8_t *)k.mv_data)[i];
        bool skipped = false;
        for (size_t i = 0; i < nskip; i++) skipped |= skip[i] == oid;
        if (skipped) continue;
        REQUIRE(mdb_get(tb, rb, &k, &w) == 0, "oid %llu was not salvaged", (unsigned long long)oid);
        /* serial and class the same; the pickle the same (a map's count aside) */
        REQUIRE(memcmp(v.mv_data, w.mv_data, 12) == 0, "oid %llu: header", (unsigned long long)oid);
        REQUIRE(v.mv_size == w.mv_size, "oid %llu: size", (unsigned long long)oid);
        n++;
    }
    cr_assert_gt(n, 0);
    mdb_cursor_close(cur);
    mdb_txn_abort(ta);
    mdb_txn_abort(tb);
    mdb_env_close(ea);
    mdb_env_close(eb);
}

OST_TEST(safety, salvage_copies_a_sound_store_whole_and_leaves_it_unchanged) {
    make_store(30, 3000, NULL);
    char dst[200], path[256];
    snprintf(dst, sizeof dst, "%s/new", F.tmp);
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t n0;
    uint8_t *before = read_file(path, &n0);
    ost__salvage_stats s;
    salv_lines l = {0};
    char msg[512];
    cr_assert_eq(ost_salvage(F.dir, dst, salv_line, &l, &s, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(l.n[OST__SALV_DAMAGE] + l.n[OST__SALV_LOST], 0, "%s", l.first_lost);
    cr_assert_eq(s.lost_records + s.lost_entries + s.dropped_entries, 0);
    cr_assert_eq(s.entries, 30);
    expect_same_records(F.dir, dst, NULL, 0);
    size_t n1;
    uint8_t *after = read_file(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0, "the source was not written");
    free(before);
    free(after);
    /* the new store opens, checks clean, and reads */
    ost_store_options o = options_for(F.reg, false);
    ost_store *st = open_with(dst, &o);
    check_clean(st, 0);
    expect_contents(st, 30);
    ost_store_close(st);
    /* a second salvage into it refuses: it holds a store */
    cr_assert_eq(ost_salvage(F.dir, dst, NULL, NULL, &s, msg, sizeof msg), OST_EEXIST);
    cr_assert(strstr(msg, "holds a store"), "%s", msg);
    /* no store to salvage */
    snprintf(dst, sizeof dst, "%s/new2", F.tmp);
    cr_assert_eq(ost_salvage(F.tmp, dst, NULL, NULL, &s, msg, sizeof msg), OST_ENOTFOUND, "%s", msg);
    struct stat sb;
    cr_assert_neq(stat(dst, &sb), 0, "a failed salvage leaves no directory");
}

/* Damage of every kind the page checks see, and records whose bytes
 * changed: everything else comes back, the damaged ones are named lost. */
OST_TEST(safety, salvage_recovers_every_record_whose_bytes_were_not_touched) {
    uint64_t oids[40];
    make_store(40, 10, oids);
    char path[256], dst[200];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    snprintf(dst, sizeof dst, "%s/new", F.tmp);
    size_t fn;
    uint8_t *file = read_file(path, &fn);
    /* the store as it was, to compare with */
    char pristine[200], ppath[256];
    snprintf(pristine, sizeof pristine, "%s/pristine", F.tmp);
    cr_assert_eq(mkdir(pristine, 0755), 0);
    snprintf(ppath, sizeof ppath, "%s/data.mdb", pristine);
    int pfd = open(ppath, O_WRONLY | O_CREAT, 0644);
    cr_assert_eq(write(pfd, file, fn), (ssize_t)fn);
    close(pfd);
    /* item 5's record: a pickle byte (its checksum fails); item 9's leaf
     * node: its flags (the page check refuses the node); item 13's key:
     * one byte (the record sits under another oid) */
    size_t at[3] = {0};
    uint64_t targets[3] = {oids[5], oids[9], oids[13]};
    for (int t = 0; t < 3; t++) {
        uint8_t pat[10] = {0, 0, 8, 0};
        put_be64(pat + 2, targets[t]);
        for (size_t i = 4; i + 10 <= fn && !at[t]; i++)
            if (memcmp(file + i, pat + 2, 8) == 0 && file[i - 2] == 8 && file[i - 1] == 0)
                at[t] = i; /* the key, after flags 0 and key size 8 */
        cr_assert(at[t], "the node of oid %llu", (unsigned long long)targets[t]);
    }
    uint8_t b = file[at[0] + 8 + 20] ^ 0x40;
    write_at(path, at[0] + 8 + 20, &b, 1); /* inside item 5's pickle */
    b = 0x40;
    write_at(path, at[1] - 3, &b, 1); /* item 9's node flags: 0x4000 */
    b = file[at[2] + 7] ^ 0x10;
    write_at(path, at[2] + 7, &b, 1); /* item 13's oid, low byte */
    free(file);

    ost__salvage_stats s;
    salv_lines l = {0};
    char msg[512];
    cr_assert_eq(ost_salvage(F.dir, dst, salv_line, &l, &s, msg, sizeof msg), 0, "%s", msg);
    cr_assert_geq(l.n[OST__SALV_DAMAGE], 1, "the page damage is named");
    cr_assert_eq(s.lost_records, 1, "only item 5 is lost: %s", l.first_lost);
    expect_oid_in(l.first_lost, oids[5]);
    cr_assert(strstr(l.first_lost, "safety.Item"), "the class is named: %s", l.first_lost);
    expect_same_records(pristine, dst, &oids[5], 1);
    ost_store_options o = options_for(F.reg, false);
    ost_store *st = open_with(dst, &o);
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_eq(r.n, 1, "only the reference to the lost item: %s", r.msg[0]);
    cr_assert_eq(r.missing[0], oids[5]);
    ost_store_close(st);
}

/* ---- damaged meta pages are refused before liblmdb reads them -------------------------- */

/* Byte 41 of the file is the high byte of meta page 0's page size: 0 made
 * liblmdb divide by zero (SIGFPE) in mdb_env_open. Other meta bytes made
 * it fail an assertion, or report MDB_MAP_RESIZED or ENOMEM. */
OST_TEST(safety, a_damaged_meta_page_is_refused_at_open_naming_page_and_field) {
    make_store(3, 10, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t n;
    uint8_t *orig = read_file(path, &n);
    static const struct {
        size_t off;
        uint8_t val;
        const char *want;
    } cases[] = {
        {41, 0, "page size"},         /* psize 0 */
        {16, 0x00, "magic"},          /* mm_magic */
        {20, 0x07, "version"},        /* mm_version */
        {4096 + 41, 0x30, "page size"}, /* meta page 1: psize 0x3000 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_at(path, 0, orig, n);
        write_at(path, cases[i].off, &cases[i].val, 1);
        for (int ro = 0; ro < 2; ro++) {
            ost_store_options o = options_for(F.reg, false);
            o.read_only = ro;
            ost_store *st = ost_store_new();
            int rc = ost_store_open(st, F.dir, &o);
            cr_assert_eq(rc, OST_ECORRUPT, "byte %zu: %s: %s", cases[i].off, ost_err_name(rc),
                         ost_store_errmsg(st));
            cr_assert(strstr(ost_store_errmsg(st), "meta page") &&
                          strstr(ost_store_errmsg(st), cases[i].want),
                      "byte %zu: %s", cases[i].off, ost_store_errmsg(st));
            ost_store_close(st);
        }
    }
    /* restored, it opens */
    write_at(path, 0, orig, n);
    free(orig);
    ost_store_close(open_store(false));
}

/* A record whose class entry is lost (the class table cut off, here its
 * two keys deleted) keeps its bytes under a stand-in name, reported. */
OST_TEST(safety, salvage_keeps_records_whose_class_is_lost_under_a_stand_in_name) {
    uint64_t oids[4];
    make_store(4, 10, oids);
    size_t n;
    char nkey[64];
    int nl = snprintf(nkey, sizeof nkey, "nsafety%cItem", 0);
    uint8_t *idv = raw_get(F.dir, "classes", nkey, (size_t)nl, &n);
    cr_assert(idv && n == 4);
    uint32_t cid;
    memcpy(&cid, idv, 4);
    free(idv);
    uint8_t ikey[5] = {'i'};
    memcpy(ikey + 1, &cid, 4);
    raw_put(F.dir, "classes", ikey, 5, NULL, 0);
    raw_put(F.dir, "classes", nkey, (size_t)nl, NULL, 0);
    char dst[200];
    snprintf(dst, sizeof dst, "%s/new", F.tmp);
    ost__salvage_stats s;
    salv_lines l = {0};
    char msg[512];
    cr_assert_eq(ost_salvage(F.dir, dst, salv_line, &l, &s, msg, sizeof msg), 0, "%s", msg);
    char want[64];
    snprintf(want, sizeof want, "ostore.salvage.LostClass%u", cid);
    cr_assert(strstr(l.first_lost, want) && strstr(l.first_lost, "4 records"), "%s", l.first_lost);
    cr_assert_eq(s.lost_records, 0);
    ost_store_options o = options_for(F.reg, false);
    ost_store *st = open_with(dst, &o);
    ost_conn *c = conn_of(st);
    ost_value obj;
    cr_assert_eq(ost_conn_get(c, oids[2], &obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_activate(c, obj), 0, "%s", ost_conn_errmsg(c));
    cr_assert_str_eq(ost_data(ost_global_name(ost_instance_class(obj)), NULL), want + 15);
    int64_t x;
    cr_assert_eq(ost_int_value(ost_instance_getattr(obj, "n"), &x), 0);
    cr_assert_eq(x, 3, "the state is intact");
    ost_store_close(st);
}

/* liblmdb falls back on the previous snapshot after a crash that cut the
 * last commit: check walks its meta page and pages too. Here its record of
 * the main database's overflow pages is changed (byte 112 of its page). */
OST_TEST(safety, check_reports_damage_in_the_previous_snapshot) {
    make_store(3, 10, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/data.mdb", F.dir);
    size_t n;
    uint8_t *file = read_file(path, &n);
    uint64_t id0 = get_le64(file + 144), id1 = get_le64(file + 4096 + 144); /* mm_txnid */
    size_t prev = id0 < id1 ? 0 : 4096;
    uint8_t b = 0x01; /* 1 overflow page where there are none: plausible, wrong */
    write_at(path, prev + 112, &b, 1);
    free(file);
    ost_store *st = open_store(false);
    reports r = {0};
    cr_assert_eq(ost_store_check(st, collect, &r, NULL), OST_ECORRUPT);
    cr_assert_eq(r.n, 1, "%s", r.msg[0]);
    cr_assert(strstr(r.msg[0], "the previous snapshot (meta page") && strstr(r.msg[0], "main"), "%s",
              r.msg[0]);
    cr_assert_eq(r.oid[0], UINT64_MAX);
    /* the current snapshot is sound: the store reads */
    expect_contents(st, 3);
    ost_store_close(st);
}
