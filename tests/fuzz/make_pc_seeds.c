/* Seed data.mdb files for the page walker's fuzz target and smoke test,
 * written by the library and by liblmdb at build or test time (nothing
 * binary is committed).
 *
 *     make_pc_seeds --dir DIR     one file per seed in DIR (libFuzzer corpus)
 *     make_pc_seeds --pack FILE   every seed in one file for pc_smoke.c
 *
 * The seeds: a new empty store; a small store after three commits (objects,
 * a map, a value over three pages, a free list); an LMDB environment with
 * sorted duplicates (in sub-pages and in sub-databases), fixed-size
 * integer duplicates, integer and reversed keys and overflow values.
 * Each must walk clean (checked). The pack format is "OSTPCSD1", then per
 * seed a little-endian u32 length and the file's bytes. */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_pagecheck.h"
#include "ostore.h"
#include "rmtree.h"

static void die(const char *what, const char *detail) {
    fprintf(stderr, "make_pc_seeds: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static uint8_t *slurp(const char *dir, size_t *len) {
    char p[512];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    FILE *f = fopen(p, "rb");
    if (!f) die(p, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) die(p, "read");
    fclose(f);
    *len = (size_t)n;
    return b;
}

static ost_store *open_store(const char *dir, ost_registry *reg) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    if (!st || ost_store_open(st, dir, &o)) die("open", st ? ost_store_errmsg(st) : "no memory");
    return st;
}

static void ok(ost_conn *c, int rc, const char *what) {
    if (rc) die(what, ost_conn_errmsg(c));
}

static void empty_store(const char *dir, ost_registry *reg) {
    ost_store_close(open_store(dir, reg));
}

static void small_store(const char *dir, ost_registry *reg, ost_value cls) {
    ost_store *st = open_store(dir, reg);
    ost_conn *c;
    if (ost_conn_open(st, &c)) die("conn", NULL);
    ost_value items = ost_list_new(0);
    for (int i = 0; i < 60; i++) {
        ost_value n = ost_instance_new(ost_incref(cls));
        ost_instance_setattr(n, "n", ost_int(i));
        ost_instance_setattr(n, "name", ost_str_c("a small object of the seed store"));
        ost_list_append(items, n);
    }
    ok(c, ost_root_set(c, ost_str_c("items"), items), "root");
    ok(c, ost_commit(c), "commit 1");
    ost_value m; /* borrowed from the connection's cache */
    ok(c, ost_map_new(c, "(int, str)", &m), "map");
    for (int i = 0; i < 40; i++) {
        ost_value k = ost_tuple_new(2);
        ost_tuple_set(k, 0, ost_int(i % 7 - 3));
        char s[16];
        snprintf(s, sizeof s, "k%d", i);
        ost_tuple_set(k, 1, ost_str_c(s));
        ok(c, ost_map_set(c, m, k, ost_int(i)), "map_set");
    }
    ok(c, ost_root_set(c, ost_str_c("index"), ost_incref(m)), "root");
    static uint8_t blob[10000];
    for (size_t i = 0; i < sizeof blob; i++) blob[i] = (uint8_t)(i * 31);
    ok(c, ost_root_set(c, ost_str_c("blob"), ost_bytes(blob, sizeof blob)), "root");
    ok(c, ost_commit(c), "commit 2");
    ost_value key = ost_str_c("items");
    items = ost_root_get(c, key); /* borrowed; the key is not taken */
    ost_decref(key);
    for (int i = 0; i < 10; i++)
        ost_instance_setattr(ost_item(items, (size_t)i), "n", ost_int(-i));
    ok(c, ost_commit(c), "commit 3");
    ost_conn_close(c);
    ost_store_close(st);
}

static void lmdb_env(const char *dir) {
    mkdir(dir, 0755);
    MDB_env *env;
    MDB_txn *t;
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
        mdb_env_open(env, dir, 0, 0644))
        die("lmdb env", dir);
    static const struct {
        const char *name;
        unsigned flags;
    } dbs[] = {{"dups", MDB_DUPSORT},
               {"fixed", MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP},
               {"ints", MDB_INTEGERKEY},
               {"rev", MDB_REVERSEKEY},
               {"big", 0}};
    static uint8_t big[9000];
    for (int round = 0; round < 2; round++) {
        if (mdb_txn_begin(env, NULL, 0, &t)) die("txn", NULL);
        MDB_dbi dbi[5];
        for (int i = 0; i < 5; i++)
            if (mdb_dbi_open(t, dbs[i].name, MDB_CREATE | dbs[i].flags, &dbi[i])) die("dbi", NULL);
        for (int i = 0; i < 400; i++) {
            char kb[16], vb[16];
            uint64_t iv = (uint64_t)(i * 7 + round);
            /* key k1 and f0 get hundreds of duplicates (sub-databases), the
             * others a few (sub-pages) */
            MDB_val k = {(size_t)snprintf(kb, sizeof kb, "k%d", i % 2 ? 1 : i % 40), kb};
            MDB_val v = {(size_t)snprintf(vb, sizeof vb, "v%d", i + round * 1000), vb};
            mdb_put(t, dbi[0], &k, &v, 0);
            MDB_val fv = {8, &iv};
            k.mv_size = (size_t)snprintf(kb, sizeof kb, "f%d", i % 3 ? 0 : i % 20);
            mdb_put(t, dbi[1], &k, &fv, 0);
            if (i < 150 && round == 0) {
                MDB_val ik = {8, &iv};
                mdb_put(t, dbi[2], &ik, &v, 0);
                k.mv_size = (size_t)snprintf(kb, sizeof kb, "%d.r", i * 13 % 97);
                mdb_put(t, dbi[3], &k, &v, 0);
            }
        }
        MDB_val k = {3, "big"}, v = {sizeof big - (size_t)round * 3000, big};
        mdb_put(t, dbi[4], &k, &v, 0);
        if (round == 1) {
            MDB_val dk = {3, "k10"};
            mdb_del(t, dbi[0], &dk, NULL);
        }
        if (mdb_txn_commit(t)) die("commit", NULL);
    }
    mdb_env_close(env);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "--dir") && strcmp(argv[1], "--pack")))
        die("usage: make_pc_seeds --dir DIR | --pack FILE", NULL);
    char tmp[] = "/tmp/ostore-pc-seeds-XXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp", strerror(errno));
    ost_registry *reg = ost_registry_new();
    ost_value cls;
    ost_class_def def = {.module = "seed", .name = "Item", .persistent = true};
    if (!reg || ost_registry_add(reg, &def, &cls)) die("registry", NULL);
    const char *names[] = {"empty", "small", "lmdb"};
    char dirs[3][256];
    for (int i = 0; i < 3; i++) snprintf(dirs[i], sizeof dirs[i], "%s/%s", tmp, names[i]);
    empty_store(dirs[0], reg);
    small_store(dirs[1], reg, cls);
    lmdb_env(dirs[2]);
    ost_registry_free(reg);

    FILE *pack = NULL;
    if (!strcmp(argv[1], "--pack")) {
        pack = fopen(argv[2], "wb");
        if (!pack) die(argv[2], strerror(errno));
        fwrite("OSTPCSD1", 1, 8, pack);
    } else if (mkdir(argv[2], 0755) && errno != EEXIST) {
        die(argv[2], strerror(errno));
    }
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *b = slurp(dirs[i], &n);
        if (ost_fuzz_pagecheck_one(b, n) != 1) die("a seed does not walk clean", names[i]);
        if (pack) {
            uint8_t l[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
            fwrite(l, 1, 4, pack);
            fwrite(b, 1, n, pack);
        } else {
            char p[512];
            snprintf(p, sizeof p, "%s/seed-%s.mdb", argv[2], names[i]);
            FILE *f = fopen(p, "wb");
            if (!f || fwrite(b, 1, n, f) != n) die(p, "write");
            fclose(f);
        }
        free(b);
    }
    if (pack && fclose(pack)) die(argv[2], strerror(errno));
    rmtree(tmp);
    return 0;
}
