/* Batching: the bulk loader (what it stores, a failure in the middle of a
 * load, map growth under it, a process killed while it loads) and the
 * group committer (many threads on one counter, a conflict decided inside
 * one group, asynchronous commits on a real libuv loop). */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "internal.h"
#include "ostore.h"
#include "leakcheck.h"
#include "knobs.h"
#include "storetest.h"
#include "../store/store_internal.h"

/* ---- fixture: a temporary directory and a registry ---------------------- */

static const char *item_fields[] = {"n", "name", "x", "ref"};
static const char *leaf_fields[] = {"v", "back"};
static const char *counter_fields[] = {"value"};

enum { BAD_AT = 550 }; /* the object whose getstate fails */

static int bad_getstate(void *ud, ost_value inst, ost_value *state) {
    (void)ud;
    int64_t n = -1;
    ost_int_value(ost_instance_getattr(inst, "n"), &n);
    if (n == BAD_AT) return OST_EHOOK;
    *state = ost_incref(ost_instance_state(inst));
    return 0;
}

static struct {
    char tmp[64];  /* per-test directory, removed at the end */
    char dir[128]; /* the store: tmp/db */
    ost_registry *reg;
    ost_value item;    /* batchtest.Item: persistent, 4 fields */
    ost_value leaf;    /* batchtest.Leaf: persistent, 2 fields */
    ost_value bad;     /* batchtest.Bad: persistent, getstate fails at n == BAD_AT */
    ost_value counter; /* batchtest.Counter: persistent, 1 field */
    ost_value tally;   /* batchtest.Tally: Counter's field, a resolver that adds */
} F;

/* batchtest.Tally's conflict resolver: both sides' additions count. */
static int tally_resolve(void *ud, ost_value old, ost_value committed, ost_value mine) {
    (void)ud;
    int64_t o, c, m;
    if (ost_instance_get_int(old, "value", &o) || ost_instance_get_int(committed, "value", &c) ||
        ost_instance_get_int(mine, "value", &m))
        return 1;
    return ost_instance_setattr(mine, "value", ost_int(c + (m - o)));
}

static void setup(void) {
    strcpy(F.tmp, "/tmp/ostore-batch-XXXXXX");
    F.reg = fixture_setup(F.tmp, F.dir, sizeof F.dir);
    ost_class_def item = {.module = "batchtest", .name = "Item", .fields = item_fields,
                          .nfields = 4, .persistent = true};
    ost_class_def leaf = {.module = "batchtest", .name = "Leaf", .fields = leaf_fields,
                          .nfields = 2, .persistent = true};
    ost_class_def bad = {.module = "batchtest", .name = "Bad", .persistent = true,
                         .getstate = bad_getstate};
    ost_class_def counter = {.module = "batchtest", .name = "Counter",
                             .fields = counter_fields, .nfields = 1, .persistent = true};
    cr_assert_eq(ost_registry_add(F.reg, &item, &F.item), 0);
    cr_assert_eq(ost_registry_add(F.reg, &leaf, &F.leaf), 0);
    cr_assert_eq(ost_registry_add(F.reg, &bad, &F.bad), 0);
    cr_assert_eq(ost_registry_add(F.reg, &counter, &F.counter), 0);
    ost_class_def tally = {.module = "batchtest", .name = "Tally", .fields = counter_fields,
                           .nfields = 1, .persistent = true, .resolve = tally_resolve};
    cr_assert_eq(ost_registry_add(F.reg, &tally, &F.tally), 0);
}

static void teardown(void) { fixture_teardown(F.tmp, &F.reg); }

TestSuite(batch, .init = setup, .fini = teardown, .timeout = 240);

/* ---- helpers -------------------------------------------------------------- */

static ost_store_options opts_for(bool create, bool group_commit) {
    ost_store_options o = options_for(F.reg, create);
    o.group_commit = group_commit;
    return o;
}

static ost_store *open_store(bool create, bool group_commit) {
    ost_store_options o = opts_for(create, group_commit);
    return open_with(F.dir, &o);
}

static void set(ost_value obj, const char *name, ost_value v) {
    int rc = ost_instance_setattr(obj, name, v);
    REQUIRE(rc == 0, "setattr %s: %s", name, ost_err_name(rc));
}

static int64_t iattr(ost_value obj, const char *name) {
    ost_value v = ost_instance_getattr(obj, name);
    int64_t i;
    REQUIRE(ost_int_value(v, &i) == 0, "attribute %s is not an int", name);
    return i;
}

static ost_value new_item(int64_t i, ost_value ref) {
    ost_value it = ost_instance_new(ost_incref(F.item));
    REQUIRE(it, "out of memory");
    char name[32];
    snprintf(name, sizeof name, "item%lld", (long long)i);
    set(it, "n", ost_int(i));
    set(it, "name", ost_str_c(name));
    set(it, "x", ost_float((double)i * 0.5));
    set(it, "ref", ref);
    return it;
}

/* Checks that obj is item i as new_item made it (ref not checked). */
static void expect_item(ost_conn *c, ost_value obj, int64_t i) {
    int rc = ost_activate(c, obj);
    REQUIRE(rc == 0, "item %lld: %s: %s", (long long)i, ost_err_name(rc), ost_conn_errmsg(c));
    REQUIRE(ost_instance_class(obj) == F.item, "item %lld has class Item", (long long)i);
    REQUIRE(iattr(obj, "n") == i, "item %lld: n is %lld", (long long)i, (long long)iattr(obj, "n"));
    char name[32];
    snprintf(name, sizeof name, "item%lld", (long long)i);
    const char *got = ost_data(ost_instance_getattr(obj, "name"), NULL);
    REQUIRE(got && strcmp(got, name) == 0, "item %lld: name %s", (long long)i, got ? got : "(none)");
    ost_value x = ost_instance_getattr(obj, "x");
    REQUIRE(ost_typeof(x) == OST_T_FLOAT && ost_float_value(x) == (double)i * 0.5,
            "item %lld: x is %g", (long long)i, ost_float_value(x));
}

/* ======================================================================= */
/* 1. what the loader stores                                                */
/* ======================================================================= */

typedef struct {
    uint64_t objects[64], bytes[64];
    int n;
} progress_log;

static void log_progress(void *ud, uint64_t objects, uint64_t bytes) {
    progress_log *p = ud;
    cr_assert_lt(p->n, 64);
    p->objects[p->n] = objects;
    p->bytes[p->n] = bytes;
    p->n++;
}

/* Item i refers to item i / 2; every fifth one through a new Leaf (not
 * added by itself: the loader finds it) whose back is item i / 2. */
enum { LN = 5000, LBATCH = 1000 };
#define LLEAVES ((LN - 1) / 5)

static bool has_leaf(int64_t i) { return i > 0 && i % 5 == 0; }

OST_TEST(batch, loader_stores_every_object_and_reference) {
    ost_store *st = open_store(true, false);
    ost_conn *c = conn_of(st);
    progress_log plog = {0};
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    cr_assert_eq(lo.batch_objects, 100000);
    lo.batch_objects = LBATCH;
    lo.progress = log_progress;
    lo.ud = &plog;
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, &lo, &l), 0);
    static ost_value items[LN];
    static uint64_t oids[LN];
    for (int64_t i = 0; i < LN; i++) {
        ost_value ref = OST_NONE;
        if (i > 0) ref = ost_incref(items[i / 2]);
        if (has_leaf(i)) {
            ost_value leaf = ost_instance_new(ost_incref(F.leaf));
            set(leaf, "v", ost_int(i));
            set(leaf, "back", ref);
            ref = leaf;
        }
        items[i] = new_item(i, ref);
        int rc = ost_loader_add(l, items[i], &oids[i]);
        REQUIRE(rc == 0, "add %lld: %s: %s", (long long)i, ost_err_name(rc), ost_loader_errmsg(l));
        REQUIRE(oids[i] != UINT64_MAX && oids[i] != 0, "item %lld: oid %llu (0 is the root)",
                (long long)i, (unsigned long long)oids[i]);
        for (int64_t j = 0; j < i && i < 50; j++) REQUIRE(oids[j] != oids[i], "oids differ");
    }
    const uint64_t total = LN + LLEAVES;
    uint64_t before_objects = 0, before_bytes = 0, objects = 0, bytes = 0;
    ost_loader_stats(l, &before_objects, &before_bytes);
    cr_assert_lt(before_objects, total, "the batch still filling is not stored before the end");
    int rc = ost_loader_finish(l, &objects, &bytes);
    cr_assert_eq(rc, 0, "close: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    /* the totals after the end: every object, the bytes the last progress
     * report gave */
    cr_assert_eq(objects, total);
    cr_assert_gt(bytes, before_bytes);

    /* progress: one call per batch, increasing, ending at every object */
    cr_assert_geq(plog.n, (int)(total / (LBATCH + 1)));
    for (int i = 0; i < plog.n; i++) {
        uint64_t prev = i ? plog.objects[i - 1] : 0, prevb = i ? plog.bytes[i - 1] : 0;
        cr_assert_gt(plog.objects[i], prev, "progress increases");
        cr_assert_gt(plog.bytes[i], prevb, "bytes increase");
        if (i + 1 < plog.n) /* a batch closes at the first add that fills it */
            cr_assert(plog.objects[i] - prev == LBATCH || plog.objects[i] - prev == LBATCH + 1,
                      "batch %d holds %llu objects", i,
                      (unsigned long long)(plog.objects[i] - prev));
    }
    cr_assert_eq(plog.objects[plog.n - 1], total);
    cr_assert_eq(plog.bytes[plog.n - 1], bytes);

    ost_store_stats s = stats(st);
    cr_assert_eq(s.records, total + 1, "the loaded objects and the root");
    check_clean(st, total + 1);

    /* read back through a new connection, by the oids the loader gave */
    ost_conn *c2 = conn_of(st);
    for (int64_t i = 0; i < LN; i++) {
        ost_value o;
        rc = ost_conn_get(c2, oids[i], &o);
        REQUIRE(rc == 0, "get %llu: %s", (unsigned long long)oids[i], ost_conn_errmsg(c2));
        expect_item(c2, o, i);
        ost_value ref = ost_instance_getattr(o, "ref");
        if (i == 0) {
            cr_assert_eq(ref, OST_NONE);
            continue;
        }
        if (has_leaf(i)) {
            REQUIRE(ost_instance_class(ref) == F.leaf, "item %lld refers to a Leaf", (long long)i);
            uint64_t leaf_oid = ost_oid(c2, ref);
            REQUIRE(leaf_oid != UINT64_MAX, "the leaf of %lld has an oid", (long long)i);
            REQUIRE(leaf_oid == ost_oid(c, ost_instance_getattr(items[i], "ref")),
                    "the loader's connection knows the nested object's oid");
            REQUIRE(iattr(ref, "v") == i, "leaf %lld", (long long)i);
            ref = ost_instance_getattr(ref, "back");
        }
        REQUIRE(ost_oid(c2, ref) == oids[i / 2], "item %lld refers to item %lld", (long long)i,
                (long long)(i / 2));
    }
    ost_conn_close(c2);

    /* the loaded objects belong to the loader's connection now */
    for (int64_t i = 0; i < LN; i++)
        REQUIRE(ost_oid(c, items[i]) == oids[i], "item %lld joined the connection", (long long)i);
    ost_value top = items[LN - 1];
    cr_assert_eq(ost_root_set(c, ost_str_c("top"), ost_incref(top)), 0);
    commit_ok(c);

    /* pack keeps what the root reaches: the chain LN-1, (LN-1)/2, ... 0 */
    uint64_t reachable = 1;
    for (int64_t j = LN - 1;; j /= 2) {
        reachable += 1 + has_leaf(j);
        if (j == 0) break;
    }
    uint64_t removed = 0;
    rc = ost_store_pack(st, &removed);
    cr_assert_eq(rc, 0, "pack: %s", ost_store_errmsg(st));
    cr_assert_eq(removed, total + 1 - reachable);
    cr_assert_eq(stats(st).records, reachable);
    check_clean(st, reachable);

    ost_conn *c3 = conn_of(st);
    ost_value k = ost_str_c("top");
    ost_value o = ost_root_get(c3, k);
    ost_decref(k);
    cr_assert(o);
    cr_assert_eq(ost_oid(c3, o), oids[LN - 1]);
    for (int64_t j = LN - 1;; j /= 2) {
        expect_item(c3, o, j);
        cr_assert_eq(ost_oid(c3, o), oids[j]);
        if (j == 0) break;
        o = ost_instance_getattr(o, "ref");
        if (has_leaf(j)) o = ost_instance_getattr(o, "back");
    }
    ost_value gone;
    cr_assert_eq(ost_conn_get(c3, oids[LN - 2], &gone), OST_ENOTFOUND, "unreachable: packed");
    ost_conn_close(c3);

    for (int64_t i = 0; i < LN; i++) ost_decref(items[i]);
    ost_store_close(st);
}

OST_TEST(batch, loader_misuse) {
    ost_store *st = open_store(true, false);
    ost_conn *c = conn_of(st);
    ost_loader *l = (ost_loader *)1;
    cr_assert_eq(ost_loader_open(NULL, NULL, &l), OST_EINVAL);
    cr_assert_null(l);
    cr_assert_eq(ost_loader_open(c, NULL, NULL), OST_EINVAL);
    cr_assert_eq(ost_loader_add(NULL, OST_NONE, NULL), OST_EINVAL);
    cr_assert_eq(ost_loader_close(NULL), OST_EINVAL);
    uint64_t objects = 7, bytes = 7;
    cr_assert_eq(ost_loader_finish(NULL, &objects, &bytes), OST_EINVAL);
    cr_assert(objects == 0 && bytes == 0);
    /* an object stored already is refused */
    ost_value old = new_item(0, OST_NONE);
    cr_assert_eq(ost_root_set(c, ost_str_c("old"), ost_incref(old)), 0);
    commit_ok(c);
    cr_assert_eq(ost_loader_open(c, NULL, &l), 0);
    cr_assert_eq(ost_loader_add(l, old, NULL), OST_EEXIST);
    cr_assert_eq(ost_loader_close(l), OST_EEXIST);
    cr_assert(strstr(ost_conn_errmsg(c), "stored already"), "%s", ost_conn_errmsg(c));
    ost_decref(old);
    cr_assert_eq(ost_loader_open(c, NULL, &l), 0);
    uint64_t oid = 0;
    cr_assert_eq(ost_loader_add(l, ost_int(3), &oid), OST_EINVAL);
    cr_assert_eq(oid, UINT64_MAX);
    cr_assert(strstr(ost_loader_errmsg(l), "int"), "%s", ost_loader_errmsg(l));
    /* a failure poisons the loader: later calls return the same code */
    ost_value it = new_item(1, OST_NONE);
    cr_assert_eq(ost_loader_add(l, it, &oid), OST_EINVAL);
    cr_assert_eq(ost_loader_close(l), OST_EINVAL);
    cr_assert_eq(stats(st).records, 2, "nothing stored (the root and old)");
    cr_assert_eq(ost_oid(c, it), UINT64_MAX);
    ost_decref(it);
    ost_store_close(st);

    /* read-only store */
    st = open_with(F.dir, &(ost_store_options){.read_only = true, .registry = F.reg});
    c = conn_of(st);
    cr_assert_eq(ost_loader_open(c, NULL, &l), OST_EREADONLY);
    ost_store_close(st);
}

/* ======================================================================= */
/* 2. a failure in the middle of a load                                     */
/* ======================================================================= */

OST_TEST(batch, getstate_failure_keeps_earlier_batches_only) {
    enum { B = 100, N = 700 };
    ost_store *st = open_store(true, false);
    ost_conn *c = conn_of(st);
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = B;
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, &lo, &l), 0);
    static ost_value objs[N];
    static uint64_t oids[N];
    int rc = 0;
    int64_t i;
    for (i = 0; i < N; i++) {
        objs[i] = ost_instance_new(ost_incref(F.bad));
        set(objs[i], "n", ost_int(i));
        set(objs[i], "tag", ost_str_c("bad"));
        rc = ost_loader_add(l, objs[i], &oids[i]);
        if (rc) break;
    }
    cr_assert_eq(i, BAD_AT, "the load fails at object %d", BAD_AT);
    cr_assert_eq(rc, OST_EHOOK, "the getstate code: %s", ost_err_name(rc));
    cr_assert_eq(oids[BAD_AT], UINT64_MAX);
    /* batches are numbered from 1: objects 500-549 fill the sixth */
    cr_assert(strstr(ost_loader_errmsg(l), "batch 6"), "%s", ost_loader_errmsg(l));
    cr_assert_eq(ost_loader_add(l, objs[0], NULL), OST_EHOOK, "later calls fail the same");
    uint64_t stored = 0;
    rc = ost_loader_finish(l, &stored, NULL);
    cr_assert_eq(rc, OST_EHOOK);
    cr_assert_eq(stored, (uint64_t)(BAD_AT / B) * B, "the totals count the stored batches only");
    const char *msg = ost_conn_errmsg(c);
    cr_assert(strstr(msg, "batch 6"), "the message names the batch: %s", msg);
    cr_assert(strstr(msg, "getstate"), "and why: %s", msg);

    const int64_t kept = (BAD_AT / B) * B; /* the five whole batches */
    cr_assert_eq(stats(st).records, (uint64_t)kept + 1);
    check_clean(st, (uint64_t)kept + 1);
    ost_conn *c2 = conn_of(st);
    for (int64_t j = 0; j < BAD_AT; j++) {
        ost_value o;
        rc = ost_conn_get(c2, oids[j], &o);
        if (j < kept) {
            REQUIRE(rc == 0, "object %lld of an earlier batch: %s", (long long)j,
                    ost_conn_errmsg(c2));
            REQUIRE(ost_activate(c2, o) == 0, "activate %lld", (long long)j);
            REQUIRE(iattr(o, "n") == j, "object %lld", (long long)j);
            REQUIRE(ost_oid(c, objs[j]) == oids[j], "kept objects join the connection");
        } else {
            REQUIRE(rc == OST_ENOTFOUND, "object %lld of the failed batch: %s", (long long)j,
                    ost_err_name(rc));
            REQUIRE(ost_oid(c, objs[j]) == UINT64_MAX, "and loses its oid (%lld)", (long long)j);
        }
    }
    ost_conn_close(c2);
    for (int64_t j = 0; j <= BAD_AT; j++) ost_decref(objs[j]);
    ost_store_close(st);
}

/* A 1 MiB map and 200,000 objects: the map grows under the loader. Only
 * the last object is kept alive, so the loader forgets the others. */
OST_TEST(batch, loader_grows_the_map_by_itself) {
    LMDB_ONLY("LMDB's map size");
    enum { N = 200000 };
    ost_store_options o = opts_for(true, false);
    o.map_size = 1u << 20;
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, NULL, &l), 0);
    uint64_t *oids = malloc(N * sizeof *oids);
    ost_value prev = OST_NONE;
    for (int64_t i = 0; i < N; i++) {
        ost_value it = new_item(i, prev); /* steals prev */
        int rc = ost_loader_add(l, it, &oids[i]);
        REQUIRE(rc == 0, "add %lld: %s: %s", (long long)i, ost_err_name(rc), ost_loader_errmsg(l));
        prev = it;
    }
    int rc = ost_loader_close(l);
    cr_assert_eq(rc, 0, "close: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    ost_store_stats s = stats(st);
    cr_assert_eq(s.records, N + 1);
    cr_assert_gt(s.map_size, 1u << 20, "the map grew");
    cr_assert_eq(ost_oid(c, prev), oids[N - 1]);
    ost_decref(prev);
    check_clean(st, N + 1);
    ost_conn *c2 = conn_of(st);
    for (int64_t i = 0; i < N; i += 997) {
        ost_value ob;
        REQUIRE(ost_conn_get(c2, oids[i], &ob) == 0, "get %lld", (long long)i);
        expect_item(c2, ob, i);
        ost_value ref = ost_instance_getattr(ob, "ref");
        REQUIRE(!i || ost_oid(c2, ref) == oids[i - 1], "item %lld refers to the one before",
                (long long)i);
        ost_invalidate(c2, ob);
    }
    free(oids);
    ost_store_close(st);
}

/* ======================================================================= */
/* 3. a process killed while it loads                                       */
/* ======================================================================= */

enum { KBATCH = 1000, KMAX = 1000000 };

typedef struct {
    const char *dir;
    ost_registry *reg;
    ost_value item;
    int fd;               /* progress reports */
    volatile uint64_t *oids; /* shared with the parent: oid of each item */
} kill_arg;

/* The child: loads items until it is killed. Exit codes say what failed. */
static int load_child(kill_arg *ka) {
    ost_store_options o = options_for(ka->reg, false);
    ost_store *st;
    ost_conn *c;
    int rc = child_open(ka->dir, &o, &st, &c);
    if (rc) return rc;
    ost_loader *l;
    if (open_reporting_loader(c, KBATCH, &ka->fd, &l)) return 4;
    ost_value prev = OST_NONE;
    for (int64_t i = 0; i < KMAX; i++) {
        ost_value it = ost_instance_new(ost_incref(ka->item));
        char name[32];
        snprintf(name, sizeof name, "item%lld", (long long)i);
        ost_instance_setattr(it, "n", ost_int(i));
        ost_instance_setattr(it, "name", ost_str_c(name));
        ost_instance_setattr(it, "x", ost_float((double)i * 0.5));
        ost_instance_setattr(it, "ref", prev);
        uint64_t oid;
        if (ost_loader_add(l, it, &oid)) return 5;
        ka->oids[i] = oid;
        prev = it;
    }
    return ost_loader_close(l) ? 6 : 0;
}

/* The parent's view of the oids a child notes as it adds (shared memory,
 * every slot UINT64_MAX: not added). */
static uint64_t *shared_oids(size_t *maplen) {
    *maplen = KMAX * sizeof(uint64_t);
    uint64_t *oids = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(oids, MAP_FAILED);
    memset(oids, 0xff, *maplen);
    return oids;
}

OST_TEST(batch, sigkill_during_a_load_keeps_whole_batches) {
    NOT_IN_MEMORY("a killed process takes its store in memory with it: nothing to recover");
    ost_store *st = open_store(true, false);
    ost_store_close(st);
    size_t maplen;
    uint64_t *oids = shared_oids(&maplen);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    kill_arg ka = {.dir = F.dir, .reg = F.reg, .item = F.item, .fd = fds[1], .oids = oids};
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(fds[0]);
        _exit(load_child(&ka));
    }
    close(fds[1]);
    /* three batches reported, then the kill lands somewhere in the next;
     * one report per batch */
    uint64_t reported = 0;
    int status = kill_after_counts(pid, fds[0], 3, KBATCH, &reported, 0, 0);
    cr_assert_eq(status, 128 + SIGKILL, "the child was killed (status %d)", status);
    close(fds[0]);

    st = open_store(false, false);
    ost_store_stats s = stats(st);
    uint64_t loaded = s.records - 1;
    cr_assert_geq(loaded, reported, "every reported batch is there");
    cr_assert_eq(loaded % KBATCH, 0, "a whole number of batches (%llu objects)",
                 (unsigned long long)loaded);
    check_clean(st, s.records);
    ost_conn *c = conn_of(st);
    for (uint64_t i = 0; i < loaded + KBATCH && i < KMAX; i++) {
        ost_value o;
        if (oids[i] == UINT64_MAX) {
            /* the kill may land between the commit of the batch an add
             * closed and the child noting that add's oid */
            cr_assert_geq(i + 1, loaded, "item %llu was added", (unsigned long long)i);
            break;
        }
        int rc = ost_conn_get(c, oids[i], &o);
        if (i < loaded) {
            REQUIRE(rc == 0, "item %llu of a stored batch: %s", (unsigned long long)i,
                    ost_conn_errmsg(c));
            expect_item(c, o, (int64_t)i);
            ost_value ref = ost_instance_getattr(o, "ref");
            REQUIRE(!i || ost_oid(c, ref) == oids[i - 1], "item %llu refers to the one before",
                    (unsigned long long)i);
            ost_invalidate(c, o);
        } else
            REQUIRE(rc == OST_ENOTFOUND, "item %llu was not stored: %s", (unsigned long long)i,
                    ost_err_name(rc));
    }
    ost_store_close(st);
    munmap(oids, maplen);
}

/* Stopped in the middle of a batch's write: the rows of the third batch
 * are written (in LMDB's write transaction; on PostgreSQL sent in its
 * COPY) but not committed when the kill lands. Exactly the two batches
 * before it are there, whole, and nothing of the third. */
static int g_mid_fd = -1, g_mid_calls;

/* The child's hook: the third bulk write says so on the pipe and waits
 * for the kill. */
static void stop_in_third_write(void) {
    if (++g_mid_calls != 3) return;
    char m = 'M';
    ssize_t n;
    do
        n = write(g_mid_fd, &m, 1);
    while (n < 0 && errno == EINTR);
    for (;;) pause();
}

static int mid_write_child(void *arg) {
    ost__testctl(OST__TC_MID_WRITE, stop_in_third_write); /* checked by the test */
    return load_child(arg);
}

OST_TEST(batch, sigkill_in_the_middle_of_a_batch_write_keeps_the_batches_before_it) {
    NOT_IN_MEMORY("a killed process takes its store in memory with it: nothing to recover");
    knob_hook(OST__TC_MID_WRITE, (ost__tc_fn)0); /* the child sets it: the build has it */
    ost_store *st = open_store(true, false);
    ost_store_close(st);
    size_t maplen;
    uint64_t *oids = shared_oids(&maplen);
    int rep[2], mid[2];
    cr_assert_eq(pipe(rep), 0);
    cr_assert_eq(pipe(mid), 0);
    kill_arg ka = {.dir = F.dir, .reg = F.reg, .item = F.item, .fd = rep[1], .oids = oids};
    g_mid_fd = mid[1];
    pid_t pid = spawn(mid_write_child, &ka);
    close(rep[1]);
    close(mid[1]);
    char m;
    ssize_t got = read(mid[0], &m, 1);
    if (got != 1) kill(pid, SIGKILL);
    cr_assert_eq(got, 1, "the child stopped in its third batch's write (status %d)",
                 got == 1 ? 0 : wait_child(pid));
    kill(pid, SIGKILL);
    cr_assert_eq(wait_child(pid), 128 + SIGKILL);
    close(mid[0]);
    uint64_t n, reported = 0;
    while (read(rep[0], &n, sizeof n) == (ssize_t)sizeof n) reported = n;
    close(rep[0]);
    cr_assert_eq(reported, 2 * KBATCH, "two batches were reported");

    st = open_store(false, false);
    ost_store_stats s = stats(st);
    cr_assert_eq(s.records, 1 + 2 * KBATCH, "the root and the two batches, no more");
    check_clean(st, s.records);
    ost_conn *c = conn_of(st);
    for (uint64_t i = 0; i < 3 * KBATCH; i++) {
        /* the add that closed the third batch may not have noted its oid
         * when the batch's write stopped (the committer thread writes it) */
        if (i >= 2 * KBATCH && oids[i] == UINT64_MAX) continue;
        REQUIRE(oids[i] != UINT64_MAX, "item %llu was added", (unsigned long long)i);
        ost_value o;
        int rc = ost_conn_get(c, oids[i], &o);
        if (i < 2 * KBATCH) {
            REQUIRE(rc == 0, "item %llu: %s", (unsigned long long)i, ost_conn_errmsg(c));
            expect_item(c, o, (int64_t)i);
            ost_invalidate(c, o);
        } else
            REQUIRE(rc == OST_ENOTFOUND, "item %llu of the third batch: %s",
                    (unsigned long long)i, ost_err_name(rc));
    }
    ost_store_close(st);
    munmap(oids, maplen);
}

/* ======================================================================= */
/* 4. group commit                                                          */
/* ======================================================================= */

/* Creates root['counter'] = Counter(value=0); returns its oid. */
static uint64_t make_counter(ost_store *st, const char *key) {
    ost_conn *c = conn_of(st);
    ost_value ctr = ost_instance_new(ost_incref(F.counter));
    set(ctr, "value", ost_int(0));
    cr_assert_eq(ost_root_set(c, ost_str_c(key), ctr), 0);
    commit_ok(c);
    uint64_t oid = ost_oid(c, ctr);
    cr_assert_neq(oid, UINT64_MAX);
    ost_conn_close(c);
    return oid;
}

static int64_t read_counter(ost_store *st, uint64_t oid) {
    ost_conn *c = conn_of(st);
    ost_value o;
    cr_assert_eq(ost_conn_get(c, oid, &o), 0);
    int64_t v = iattr(o, "value");
    ost_conn_close(c);
    return v;
}

typedef struct {
    ost_store *st;
    uint64_t oid;
    int rounds;
    int commits, conflicts, other;
    char msg[200];
} incr_arg;

static void incr_thread(void *arg) {
    incr_arg *a = arg;
    ost_conn *c;
    ost_value ctr;
    int rc = ost_conn_open(a->st, &c);
    if (!rc) rc = ost_conn_get(c, a->oid, &ctr);
    if (!rc) rc = ost_activate(c, ctr);
    if (rc) {
        a->other++;
        return;
    }
    for (int i = 0; i < a->rounds; i++) {
        for (;;) {
            int64_t v;
            if (ost_int_value(ost_instance_getattr(ctr, "value"), &v)) {
                a->other++;
                break;
            }
            ost_instance_setattr(ctr, "value", ost_int(v + 1));
            rc = ost_commit(c);
            if (rc == 0) {
                a->commits++;
                break;
            }
            if (rc != OST_ECONFLICT) {
                snprintf(a->msg, sizeof a->msg, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
                a->other++;
                ost_abort(c);
                break;
            }
            a->conflicts++;
            ost_abort(c); /* the counter becomes a ghost: re-read at the next use */
        }
    }
    ost_conn_close(c);
}

OST_TEST(batch, eight_threads_increment_one_counter) {
    enum { T = 8, R = 100 };
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter");
    uint64_t groups0 = st->gc_groups, led0 = st->gc_led;
    uv_thread_t th[T];
    incr_arg a[T];
    for (int i = 0; i < T; i++) {
        a[i] = (incr_arg){.st = st, .oid = oid, .rounds = R};
        cr_assert_eq(uv_thread_create(&th[i], incr_thread, &a[i]), 0);
    }
    int commits = 0, conflicts = 0;
    for (int i = 0; i < T; i++) {
        uv_thread_join(&th[i]);
        cr_assert_eq(a[i].other, 0, "thread %d: %s", i, a[i].msg);
        cr_assert_eq(a[i].commits, R);
        commits += a[i].commits;
        conflicts += a[i].conflicts;
    }
    cr_assert_eq(commits, T * R);
    cr_assert_eq(read_counter(st, oid), T * R);
    /* every commit went through group commit, each group applied by one
     * of the committing threads (the committer thread takes only the
     * loader's and asynchronous packages) */
    cr_assert_geq(st->gc_groups - groups0, 1);
    cr_assert_leq(st->gc_groups - groups0, (uint64_t)(commits + conflicts));
#ifdef __linux__ /* elsewhere the committer thread applies every group */
    cr_assert_eq(st->gc_led - led0, st->gc_groups - groups0);
#else
    (void)led0;
#endif
    check_clean(st, 2);
    ost_store_close(st);
}

/* With group commit, a thread committing alone applies its commit itself:
 * no hand-off to the committer thread and back. */
OST_TEST(batch, a_lone_commit_with_group_commit_is_applied_by_its_own_thread) {
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter");
    ost_conn *c = conn_of(st);
    ost_value o;
    cr_assert_eq(ost_conn_get(c, oid, &o), 0);
    uint64_t groups0 = st->gc_groups, led0 = st->gc_led;
    for (int i = 1; i <= 5; i++) {
        set(o, "value", ost_int(i));
        commit_ok(c);
    }
    cr_assert_eq(st->gc_groups - groups0, 5, "a group a commit");
#ifdef __linux__ /* elsewhere the committer thread applies every group */
    cr_assert_eq(st->gc_led - led0, 5, "each applied by the committing thread");
#else
    (void)led0;
#endif
    ost_conn_close(c);
    cr_assert_eq(read_counter(st, oid), 5);
    ost_store_close(st);
}

/* Two threads read the counter at the same commit, each sets its own
 * value, and both commit at once: exactly one wins. Repeated, so that the
 * two packages meet in one group as well as in two. */
typedef struct {
    ost_store *st;
    uint64_t oid;
    uv_barrier_t *ready, *done;
    int id;
    int rounds;
    int rc[20];
} duel_arg;

static void duel_thread(void *arg) {
    duel_arg *a = arg;
    ost_conn *c;
    ost_value ctr;
    int rc = ost_conn_open(a->st, &c);
    if (!rc) rc = ost_conn_get(c, a->oid, &ctr);
    for (int r = 0; r < a->rounds; r++) {
        /* a fresh transaction: the counter as the last round left it */
        ost_abort(c);
        int64_t v = -1;
        if (!rc) ost_int_value(ost_instance_getattr(ctr, "value"), &v);
        if (!rc) ost_instance_setattr(ctr, "value", ost_int(1000 * (r + 1) + a->id));
        uv_barrier_wait(a->ready); /* both have read and changed it */
        a->rc[r] = rc ? rc : (v < 0 ? OST_ETYPE : ost_commit(c));
        uv_barrier_wait(a->done); /* the main thread checks the round */
        uv_barrier_wait(a->ready);
    }
    ost_conn_close(c);
}

OST_TEST(batch, concurrent_conflicting_commits_one_wins) {
    enum { ROUNDS = 20 };
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter");
    uv_barrier_t ready, done;
    cr_assert_eq(uv_barrier_init(&ready, 3), 0);
    cr_assert_eq(uv_barrier_init(&done, 3), 0);
    duel_arg a[2];
    uv_thread_t th[2];
    for (int i = 0; i < 2; i++) {
        a[i] = (duel_arg){.st = st, .oid = oid, .ready = &ready, .done = &done, .id = i + 1,
                          .rounds = ROUNDS};
        cr_assert_eq(uv_thread_create(&th[i], duel_thread, &a[i]), 0);
    }
    for (int r = 0; r < ROUNDS; r++) {
        uv_barrier_wait(&ready); /* they commit now */
        uv_barrier_wait(&done);
        int wins = (a[0].rc[r] == 0) + (a[1].rc[r] == 0);
        int conflicts = (a[0].rc[r] == OST_ECONFLICT) + (a[1].rc[r] == OST_ECONFLICT);
        cr_assert_eq(wins, 1, "round %d: %s and %s", r, ost_err_name(a[0].rc[r]),
                     ost_err_name(a[1].rc[r]));
        cr_assert_eq(conflicts, 1, "round %d", r);
        int winner = a[0].rc[r] == 0 ? 1 : 2;
        cr_assert_eq(read_counter(st, oid), 1000 * (r + 1) + winner,
                     "round %d: the stored value is the winner's", r);
        uv_barrier_wait(&ready); /* next round */
    }
    for (int i = 0; i < 2; i++) uv_thread_join(&th[i]);
    uv_barrier_destroy(&ready);
    uv_barrier_destroy(&done);
    check_clean(st, 2);
    ost_store_close(st);
}

/* ---- asynchronous commits on a libuv loop ------------------------------- */

typedef struct {
    int calls;
    int status;
    uv_thread_t thread;
} cb_log;

static void on_commit(void *ud, int status) {
    cb_log *l = ud;
    l->calls++;
    l->status = status;
    l->thread = uv_thread_self();
}

#ifdef OST_HAVE_POSTGRESQL
/* In the lock holder on PostgreSQL: locks the row of ost_meta that every
 * commit updates, so commits wait as they wait for LMDB's write lock. */
static int pg_hold(const char *addr, int held, int go) {
    PGconn *pc = PQconnectdb(addr);
    if (PQstatus(pc) != CONNECTION_OK) return 2;
    PGresult *r = PQexec(pc, "BEGIN; SELECT 1 FROM ost_meta WHERE id = 1 FOR UPDATE");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) return 2;
    PQclear(r);
    char b = 1;
    if (write(held, &b, 1) != 1) return 3;
    while (read(go, &b, 1) < 0 && errno == EINTR) {}
    PQclear(PQexec(pc, "COMMIT"));
    PQfinish(pc);
    return 0;
}
#endif

/* In memory no other process reaches the store: a thread of this one
 * holds its write lock instead, inside a commit of its own handle that
 * the engine's mid-write hook (testctl.h) stops until told to let go.
 * Its package then fails (an entry of a map that is not there), so that
 * it leaves nothing. */
static int g_hold_held = -1, g_hold_go = -1;
static __thread bool tl_holder;
static uv_thread_t g_hold_thread;

static void hold_hook(void) {
    if (!tl_holder) return;
    char b = 1;
    if (write(g_hold_held, &b, 1) != 1) return;
    while (read(g_hold_go, &b, 1) < 0 && errno == EINTR) {}
}

static void mem_holder(void *arg) {
    tl_holder = true;
    ost_store *s = ost_store_new();
    if (!s || ost_store_open(s, arg, NULL)) {
        fprintf(stderr, "lock holder: %s\n", s ? ost_store_errmsg(s) : "out of memory");
        hold_hook(); /* tells the test, which fails on what it finds */
        ost_store_close(s);
        return;
    }
    ost__sess *ss;
    ost__pkg *p = ost__pkg_new();
    if (p && !s->ops->sess_open(s->eng, &ss)) {
        static const uint8_t none[] = {0x80, 0x02, 'N', '.'};
        ost__pkg_reset(p);
        ost__pkg_add(p, (uint64_t)1 << 40, 0, 1, none, sizeof none);
        ost__pkg_add(p, ((uint64_t)1 << 40) + 1, 0, 1, none, sizeof none);
        ost__pkg_ment(p, ((uint64_t)1 << 40) + 2, 0, (const uint8_t *)"k", 1, none, sizeof none, 0);
        s->ops->commit(ss, &p, 1);
        s->ops->sess_close(ss);
    }
    ost__pkg_free(p);
    ost_store_close(s);
}

/* In memory: waits for the holder thread's commit to end (it failed, as
 * meant) and clears the hook. Nothing elsewhere. */
static void holder_join(void) {
    if (!on_mem()) return;
    uv_thread_join(&g_hold_thread);
    knob_hook(OST__TC_MID_WRITE, (ost__tc_fn)0);
    close(g_hold_held);
    close(g_hold_go);
}

/* Holds the LMDB write lock (on PostgreSQL: the row lock every commit
 * takes) from another process until told to let go, so the committer
 * thread stalls and packages queue up behind it. In memory, a thread
 * holds it (mem_holder) and the pid returned is a child that exits
 * when let go, so that the callers wait for both alike. */
static pid_t hold_write_lock(const char *dir, int *release_fd) {
    if (on_mem()) {
        int go[2], held[2], child_go[2];
        cr_assert_eq(pipe(go), 0);
        cr_assert_eq(pipe(held), 0);
        cr_assert_eq(pipe(child_go), 0);
        knob_hook(OST__TC_MID_WRITE, hold_hook);
        g_hold_held = held[1];
        g_hold_go = go[0];
        cr_assert_eq(uv_thread_create(&g_hold_thread, mem_holder, (void *)dir), 0);
        char b;
        cr_assert_eq(read(held[0], &b, 1), 1, "the lock holder started");
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) { /* lets the thread go when the test lets it, then exits */
            close(child_go[1]);
            while (read(child_go[0], &b, 1) < 0 && errno == EINTR) {}
            _exit(write(go[1], &b, 1) == 1 ? 0 : 3);
        }
        close(child_go[0]);
        close(held[0]);
        *release_fd = child_go[1];
        return pid;
    }
    int go[2], held[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(held), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(go[1]);
        close(held[0]);
#ifdef OST_HAVE_POSTGRESQL
        if (on_pg()) _exit(pg_hold(dir, held[1], go[0]));
#endif
        MDB_env *env;
        MDB_txn *t;
        char b = 1;
        if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) || mdb_env_open(env, dir, 0, 0644) ||
            mdb_txn_begin(env, NULL, 0, &t))
            _exit(2);
        if (write(held[1], &b, 1) != 1) _exit(3);
        while (read(go[0], &b, 1) < 0 && errno == EINTR) {}
        mdb_txn_abort(t);
        mdb_env_close(env);
        _exit(0);
    }
    close(go[0]);
    close(held[1]);
    char b;
    cr_assert_eq(read(held[0], &b, 1), 1, "the lock holder started");
    close(held[0]);
    *release_fd = go[1];
    return pid;
}

static bool queue_empty(ost_store *st) {
    uv_mutex_lock(&st->gc_lock);
    bool e = st->gc_queue == NULL;
    uv_mutex_unlock(&st->gc_lock);
    return e;
}

OST_TEST(batch, async_commits_report_on_the_loop_thread) {
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter");
    uint64_t oid2 = make_counter(st, "other");
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);

    /* one commit: the callback runs inside uv_run, on this thread */
    ost_conn *c1 = conn_of(st), *c2 = conn_of(st), *c3 = conn_of(st);
    ost_value a, b, d;
    cr_assert_eq(ost_conn_get(c1, oid, &a), 0);
    set(a, "value", ost_int(5));
    cb_log l1 = {0}, l3 = {0};
    cr_assert_eq(ost_commit_async(c1, &loop, on_commit, &l1), 0);
    /* while it is pending, the connection refuses another commit */
    cr_assert_eq(ost_commit_async(c1, &loop, on_commit, &l3), OST_EBUSY);
    cr_assert_eq(ost_commit(c1), OST_EBUSY);
    cr_assert_eq(l1.calls, 0, "not before the loop runs");
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(l1.calls, 1);
    cr_assert_eq(l1.status, 0);
    cr_assert(uv_thread_equal(&l1.thread, &(uv_thread_t){uv_thread_self()}),
              "the callback ran on the loop's thread");
    cr_assert_eq(l3.calls, 0, "a refused call never runs its callback");
    cr_assert_eq(read_counter(st, oid), 5);

    /* a conflict inside one group: c1 and c2 both change the counter read at
     * the same commit; the committer is stalled behind c3's package so both
     * queue up and are applied in one group, c1's first */
    ost_abort(c2);
    cr_assert_eq(ost_conn_get(c2, oid, &b), 0);
    cr_assert_eq(iattr(b, "value"), 5);
    cr_assert_eq(iattr(a, "value"), 5);
    set(a, "value", ost_int(6));
    set(b, "value", ost_int(7));
    cr_assert_eq(ost_conn_get(c3, oid2, &d), 0);
    set(d, "value", ost_int(1));
    int release;
    pid_t holder = hold_write_lock(F.dir, &release);
    uint64_t groups0 = st->gc_groups;
    cr_assert_eq(ost_commit_async(c3, &loop, on_commit, &l3), 0);
    while (!queue_empty(st)) uv_sleep(1); /* the committer took c3's package */
    cb_log la = {0}, lb = {0};
    cr_assert_eq(ost_commit_async(c1, &loop, on_commit, &la), 0);
    cr_assert_eq(ost_commit_async(c2, &loop, on_commit, &lb), 0);
    char go = 1;
    cr_assert_eq(write(release, &go, 1), 1);
    close(release);
    int status;
    cr_assert_eq(waitpid(holder, &status, 0), holder);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lock holder status %d", status);
    holder_join();
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(l3.calls, 1);
    cr_assert_eq(l3.status, 0);
    cr_assert_eq(la.calls, 1);
    cr_assert_eq(la.status, 0, "the first package of the group wins");
    cr_assert_eq(lb.calls, 1);
    cr_assert_eq(lb.status, OST_ECONFLICT, "the second conflicts: %s", ost_err_name(lb.status));
    cr_assert(uv_thread_equal(&lb.thread, &(uv_thread_t){uv_thread_self()}));
    cr_assert(strstr(ost_conn_errmsg(c2), "conflict"), "%s", ost_conn_errmsg(c2));
    cr_assert_eq(st->gc_groups - groups0, 2, "c3's group, then c1 and c2 in one");
    cr_assert_eq(read_counter(st, oid), 6, "the winner's value");
    cr_assert_eq(read_counter(st, oid2), 1);
    /* the loser aborts, re-reads and commits */
    ost_abort(c2);
    cr_assert_eq(iattr(b, "value"), 6);
    set(b, "value", ost_int(8));
    cr_assert_eq(ost_commit_async(c2, &loop, on_commit, &lb), 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(lb.calls, 2);
    cr_assert_eq(lb.status, 0);
    cr_assert_eq(read_counter(st, oid), 8);
    ost_conn_close(c1);
    ost_conn_close(c2);
    ost_conn_close(c3);
    ost_store_close(st);

    /* without group_commit the call fails at once and never calls back */
    st = open_store(false, false);
    c1 = conn_of(st);
    cr_assert_eq(ost_conn_get(c1, oid, &a), 0);
    set(a, "value", ost_int(9));
    cb_log ln = {0};
    cr_assert_eq(ost_commit_async(c1, &loop, on_commit, &ln), OST_EINVAL);
    cr_assert(strstr(ost_conn_errmsg(c1), "group_commit"), "%s", ost_conn_errmsg(c1));
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(ln.calls, 0);
    commit_ok(c1); /* the changes are still there for a plain commit */
    cr_assert_eq(read_counter(st, oid), 9);
    ost_store_close(st);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A package alone in its group is applied without a nested transaction:
 * a conflict there must store nothing of it either. */
OST_TEST(batch, a_conflicting_package_alone_in_its_group_stores_nothing) {
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter");
    uint64_t oid2 = make_counter(st, "other");
    ost_conn *c1 = conn_of(st), *c2 = conn_of(st);
    ost_value a, b, b2;
    cr_assert_eq(ost_conn_get(c1, oid, &a), 0);
    cr_assert_eq(ost_conn_get(c2, oid, &b), 0);
    cr_assert_eq(ost_conn_get(c2, oid2, &b2), 0);
    cr_assert_eq(iattr(b, "value"), 0, "c2 reads the counter before c1 commits");
    set(a, "value", ost_int(1));
    uint64_t groups0 = st->gc_groups;
    commit_ok(c1);
    set(b2, "value", ost_int(50)); /* no conflict on this one */
    set(b, "value", ost_int(2));
    cr_assert_eq(ost_commit(c2), OST_ECONFLICT);
    cr_assert_eq(st->gc_groups - groups0, 2, "two groups of one package");
    cr_assert(strstr(ost_conn_errmsg(c2), "conflict on oid"), "%s", ost_conn_errmsg(c2));
    cr_assert_eq(read_counter(st, oid), 1);
    cr_assert_eq(read_counter(st, oid2), 0, "nothing of the failed package is stored");
    ost_abort(c2);
    set(b2, "value", ost_int(50));
    set(b, "value", ost_int(iattr(b, "value") + 1));
    commit_ok(c2);
    cr_assert_eq(read_counter(st, oid), 2);
    cr_assert_eq(read_counter(st, oid2), 50);
    check_clean(st, 3);
    ost_store_close(st);
}

/* ---- a group of waiting committers --------------------------------------- */

typedef struct {
    ost_conn *c;
    int rc;
    char msg[400];
} sync_commit_arg;

static void sync_commit_thread(void *arg) {
    sync_commit_arg *a = arg;
    a->rc = ost_commit(a->c);
    snprintf(a->msg, sizeof a->msg, "%s", ost_conn_errmsg(a->c));
}

static size_t queued(ost_store *st) {
    uv_mutex_lock(&st->gc_lock);
    size_t n = st->gc_qlen;
    uv_mutex_unlock(&st->gc_lock);
    return n;
}

/* Commits cs[0, n) as one group: the committer is stalled behind an
 * async commit of stall_oid (its group held by a process holding the
 * write lock) while n threads each call ost_commit on one connection;
 * once all n packages are queued (and, when spoil >= 0 on LMDB, the flat
 * try is set to fail from package spoil on), the lock goes and both
 * groups are applied. a[i] gets commit i's code and message. */
static void commit_as_one_group(ost_store *st, ost_conn **cs, int n, sync_commit_arg *a,
                                uint64_t stall_oid, int spoil) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ost_conn *cstall = conn_of(st);
    ost_value d;
    cr_assert_eq(ost_conn_get(cstall, stall_oid, &d), 0);
    set(d, "value", ost_int(1));
    int release;
    pid_t holder = hold_write_lock(F.dir, &release);
    uint64_t groups0 = st->gc_groups;
    cb_log ls = {0};
    cr_assert_eq(ost_commit_async(cstall, &loop, on_commit, &ls), 0);
    while (!queue_empty(st)) uv_sleep(1);
    uv_thread_t th[16];
    cr_assert_leq(n, 16);
    for (int i = 0; i < n; i++) {
        a[i] = (sync_commit_arg){.c = cs[i]};
        cr_assert_eq(uv_thread_create(&th[i], sync_commit_thread, &a[i]), 0);
    }
    while (queued(st) < (size_t)n) uv_sleep(1);
    if (on_lmdb() && spoil >= 0) knob_set(OST__K_LMDB_FLAT_SPOIL, spoil); /* the group of n only */
    char go = 1;
    cr_assert_eq(write(release, &go, 1), 1);
    close(release);
    int status;
    cr_assert_eq(waitpid(holder, &status, 0), holder);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lock holder status %d", status);
    holder_join();
    for (int i = 0; i < n; i++) uv_thread_join(&th[i]);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(ls.calls, 1);
    cr_assert_eq(ls.status, 0);
    cr_assert_eq(st->gc_groups - groups0, 2, "the stalled group, then the %d commits in one", n);
    cr_assert_eq(read_counter(st, stall_oid), 1);
    ost_conn_close(cstall);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* N threads commit at once (ost_commit, each waiting on its own package)
 * and are applied in one group; one of them changed a counter that a
 * commit outside the group changed after it read it. That one gets
 * OST_ECONFLICT and stores nothing; the others land, each with its own
 * serial, and every waiter is woken. spoil >= 0: the group's flat try
 * fails after the writes of its package spoil (or the next that writes:
 * store/lmdb/engine.c, flat_group). */

static void group_with_one_conflict(int spoil) {
    enum { N = 6, LOSER = 2 };
    if (spoil >= 0 && on_lmdb()) need_knobs(); /* the failure is injected (LMDB's flat try) */
    int64_t redos0 = KNOBS_ON ? knob(OST__K_LMDB_FLAT_REDOS) : 0;
    ost_store *st = open_store(true, true);
    uint64_t oids[N], shared = make_counter(st, "shared"), stall_oid = make_counter(st, "stall");
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "c%d", i);
        oids[i] = make_counter(st, key);
    }
    ost_conn *cs[N];
    ost_value objs[N], lost;
    for (int i = 0; i < N; i++) {
        cs[i] = conn_of(st);
        cr_assert_eq(ost_conn_get(cs[i], oids[i], &objs[i]), 0);
        set(objs[i], "value", ost_int(100 + i));
    }
    /* the loser read the shared counter, then another commit changed it */
    cr_assert_eq(ost_conn_get(cs[LOSER], shared, &lost), 0);
    cr_assert_eq(iattr(lost, "value"), 0);
    ost_conn *other = conn_of(st);
    ost_value o;
    cr_assert_eq(ost_conn_get(other, shared, &o), 0);
    set(o, "value", ost_int(41));
    commit_ok(other);
    set(lost, "value", ost_int(99));
    sync_commit_arg a[N];
    commit_as_one_group(st, cs, N, a, stall_oid, spoil);
    for (int i = 0; i < N; i++) {
        if (i == LOSER) {
            cr_assert_eq(a[i].rc, OST_ECONFLICT, "%s", ost_err_name(a[i].rc));
            cr_assert(strstr(a[i].msg, "conflict on oid"), "%s", a[i].msg);
            cr_assert_eq(read_counter(st, oids[i]), 0,
                         "nothing of the conflicting commit is stored");
        } else {
            cr_assert_eq(a[i].rc, 0, "commit %d: %s: %s", i, ost_err_name(a[i].rc), a[i].msg);
            cr_assert_eq(read_counter(st, oids[i]), 100 + i);
        }
    }
    cr_assert_eq(read_counter(st, shared), 41, "the commit outside the group stands");
    /* the loser aborts, re-reads and commits */
    ost_abort(cs[LOSER]);
    set(objs[LOSER], "value", ost_int(100 + LOSER));
    set(lost, "value", ost_int(iattr(lost, "value") + 1));
    commit_ok(cs[LOSER]);
    cr_assert_eq(read_counter(st, shared), 42);
    cr_assert_eq(read_counter(st, oids[LOSER]), 100 + LOSER);
    for (int i = 0; i < N; i++) ost_conn_close(cs[i]);
    ost_conn_close(other);
    ost_store_close(st);
    if (KNOBS_ON) {
        cr_assert_eq(knob(OST__K_LMDB_FLAT_REDOS) - redos0, spoil >= 0 && on_lmdb() ? 1 : 0,
                     "the group went the nested way only when its flat try failed");
        cr_assert_eq(knob(OST__K_LMDB_FLAT_SPOIL), -1);
    }
}

/* The packages of a group are applied one after another in the group's
 * transaction: the conflicting one is refused before it writes. */
OST_TEST(batch, a_group_of_waiting_commits_with_one_conflict_stores_the_others) {
    group_with_one_conflict(-1);
}

/* A write that fails in that flat try spoils the transaction: the group is
 * applied again, each package in a nested transaction, with the same
 * outcomes (the failure comes after the writes of the fifth package in
 * the queue, or of the sixth when the fifth is the conflicting one). On
 * PostgreSQL, which has no flat try, it runs as the test above. */
OST_TEST(batch, a_group_whose_flat_try_fails_is_applied_again_nested) {
    group_with_one_conflict(4);
}

/* N commits applied in one group all add to one object whose class
 * resolves conflicts, each read at the same serial: each one after the
 * first merges with the state the ones before it in the group left (LMDB:
 * in the flat try, and again when spoil makes that try fail and the
 * group is applied nested; PostgreSQL: from the earlier package's record
 * in the two-round-trip path), so every commit lands and the sum is
 * exact. */
static void group_of_merges(int spoil) {
    enum { N = 6 };
    if (spoil >= 0 && on_lmdb()) need_knobs();
    int64_t redos0 = KNOBS_ON ? knob(OST__K_LMDB_FLAT_REDOS) : 0;
    ost_store *st = open_store(true, true);
    uint64_t stall_oid = make_counter(st, "stall");
    ost_conn *c0 = conn_of(st);
    ost_value t = ost_instance_new(ost_incref(F.tally));
    set(t, "value", ost_int(1000));
    cr_assert_eq(ost_root_set(c0, ost_str_c("tally"), t), 0);
    commit_ok(c0);
    uint64_t tally = ost_oid(c0, t);
    ost_conn_close(c0);
    ost_conn *cs[N];
    for (int i = 0; i < N; i++) {
        ost_value o;
        cs[i] = conn_of(st);
        cr_assert_eq(ost_conn_get(cs[i], tally, &o), 0);
        set(o, "value", ost_int(iattr(o, "value") + i + 1));
    }
    sync_commit_arg a[N];
    commit_as_one_group(st, cs, N, a, stall_oid, spoil);
    for (int i = 0; i < N; i++)
        cr_assert_eq(a[i].rc, 0, "commit %d merges: %s: %s", i, ost_err_name(a[i].rc), a[i].msg);
    cr_assert_eq(read_counter(st, tally), 1000 + N * (N + 1) / 2, "every addition once");
    for (int i = 0; i < N; i++) ost_conn_close(cs[i]);
    check_clean(st, 0);
    ost_store_close(st);
    if (KNOBS_ON)
        cr_assert_eq(knob(OST__K_LMDB_FLAT_REDOS) - redos0, spoil >= 0 && on_lmdb() ? 1 : 0,
                     "the group went the nested way only when its flat try failed");
}

OST_TEST(batch, a_group_of_commits_to_one_object_with_a_resolver_all_merge) {
    group_of_merges(-1);
}

OST_TEST(batch, a_group_of_merges_whose_flat_try_fails_merges_again_nested) {
    group_of_merges(3);
}

/* A group of N commits, each adding to a counter (ost_counter_add) and
 * setting an object of its own; one adds past 64 bits. That one fails
 * with OST_ELIMIT and writes nothing (neither its object nor its add);
 * the others land, each add once. On LMDB the counters' adds are checked
 * before a package writes, so the group takes the flat try, which the
 * failing add spoils, and is applied again nested; PostgreSQL's two-round-
 * trip path applies the adds itself. */
OST_TEST(batch, a_group_of_counter_adds_with_one_past_64_bits_stores_the_others) {
    enum { N = 5, BAD = 2 };
    int64_t redos0 = KNOBS_ON ? knob(OST__K_LMDB_FLAT_REDOS) : 0;
    ost_store *st = open_store(true, true);
    uint64_t stall_oid = make_counter(st, "stall"), objs[N];
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "o%d", i);
        objs[i] = make_counter(st, key);
    }
    ost_conn *c0 = conn_of(st);
    ost_value hot, full;
    cr_assert_eq(ost_counter_new(c0, 0, &hot), 0);
    cr_assert_eq(ost_counter_new(c0, INT64_MAX - 1, &full), 0);
    cr_assert_eq(ost_root_set(c0, ost_str_c("hot"), ost_incref(hot)), 0);
    cr_assert_eq(ost_root_set(c0, ost_str_c("full"), ost_incref(full)), 0);
    commit_ok(c0);
    ost_conn *cs[N];
    for (int i = 0; i < N; i++) {
        ost_value o;
        cs[i] = conn_of(st);
        cr_assert_eq(ost_conn_get(cs[i], objs[i], &o), 0);
        set(o, "value", ost_int(10 + i));
        ost_value ctr = root_get(cs[i], i == BAD ? "full" : "hot");
        cr_assert_eq(ost_counter_add(cs[i], ctr, i == BAD ? 5 : i + 1), 0);
    }
    sync_commit_arg a[N];
    commit_as_one_group(st, cs, N, a, stall_oid, -1);
    for (int i = 0; i < N; i++) {
        if (i == BAD) {
            cr_assert_eq(a[i].rc, OST_ELIMIT, "%s: %s", ost_err_name(a[i].rc), a[i].msg);
            cr_assert(strstr(a[i].msg, "would pass the 64-bit range"), "%s", a[i].msg);
            cr_assert_eq(read_counter(st, objs[i]), 0, "nothing of it is stored");
        } else {
            cr_assert_eq(a[i].rc, 0, "commit %d: %s: %s", i, ost_err_name(a[i].rc), a[i].msg);
            cr_assert_eq(read_counter(st, objs[i]), 10 + i);
        }
    }
    ost_abort(c0);
    int64_t v;
    cr_assert_eq(ost_counter_get(c0, hot, &v), 0);
    cr_assert_eq(v, 1 + 2 + 4 + 5, "each add of the others once");
    cr_assert_eq(ost_counter_get(c0, full, &v), 0);
    cr_assert_eq(v, INT64_MAX - 1, "the refused add is not there");
    if (KNOBS_ON)
        cr_assert_eq(knob(OST__K_LMDB_FLAT_REDOS) - redos0, on_lmdb() ? 1 : 0,
                     "LMDB: the flat try, spoilt by the add past 64 bits, then nested");
    for (int i = 0; i < N; i++) ost_conn_close(cs[i]);
    ost_conn_close(c0);
    check_clean(st, 0);
    ost_store_close(st);
}

/* New objects are appended through a cursor; a commit whose new oids lie
 * below oids another connection stored meanwhile (each connection takes
 * oids from its own block, and the later block was committed first) falls
 * back to plain puts, and every record is stored. */
static void new_oids_below_stored_ones(bool group_commit) {
    enum { M = 12 }; /* c1's first block holds 16 oids: x and these */
    ost_store *st = open_store(true, group_commit);
    uint64_t h1 = make_counter(st, "h1"), h2 = make_counter(st, "h2");
    ost_conn *c1 = conn_of(st), *c2 = conn_of(st);
    ost_value a, b;
    cr_assert_eq(ost_conn_get(c1, h1, &a), 0);
    cr_assert_eq(ost_conn_get(c2, h2, &b), 0);
    /* c1 takes its block, then c2 a higher one, and stores from it */
    ost_value x = ost_instance_new(ost_incref(F.counter));
    set(x, "value", ost_int(1));
    set(a, "value", x);
    commit_ok(c1);
    ost_value y = ost_instance_new(ost_incref(F.counter));
    set(y, "value", ost_int(2));
    set(b, "value", y);
    commit_ok(c2);
    uint64_t xo = ost_oid(c1, x), yo = ost_oid(c2, y);
    cr_assert_lt(xo, yo, "c1's block is below c2's");
    /* now c1 stores M new objects from its block, below y */
    ost_value list = ost_list_new(M), objs[M];
    for (int i = 0; i < M; i++) {
        objs[i] = ost_instance_new(ost_incref(F.counter));
        set(objs[i], "value", ost_int(10 + i));
        cr_assert_eq(ost_list_append(list, ost_incref(objs[i])), 0);
    }
    set(a, "value", list);
    commit_ok(c1);
    for (int i = 0; i < M; i++) {
        uint64_t oid = ost_oid(c1, objs[i]);
        cr_assert_lt(oid, yo);
        cr_assert_eq(read_counter(st, oid), 10 + i);
        ost_decref(objs[i]);
    }
    cr_assert_eq(read_counter(st, yo), 2);
    check_clean(st, 5 + M); /* the root, h1, h2, x, y and the M */
    ost_conn_close(c1);
    ost_conn_close(c2);
    ost_store_close(st);
}

OST_TEST(batch, new_objects_below_stored_oids_are_stored_directly) {
    new_oids_below_stored_ones(false);
}
OST_TEST(batch, new_objects_below_stored_oids_are_stored_by_the_committer) {
    new_oids_below_stored_ones(true);
}

/* Closing a connection whose asynchronous commit is still queued waits for
 * the committer (on the store's condition variable, not the package's
 * semaphore), the commit lands, and its callback never runs. A connection
 * is closed on the thread that opened it: the closing one has its own. */
typedef struct {
    ost_store *st;
    uint64_t oid;
    cb_log log;
    int rc, loop_rc, close_rc;
} closer_arg;

static void closer_thread(void *arg) {
    closer_arg *a = arg;
    uv_loop_t loop;
    ost_conn *c;
    ost_value o;
    a->rc = uv_loop_init(&loop);
    if (a->rc) return;
    if (!(a->rc = ost_conn_open(a->st, &c))) {
        if (!(a->rc = ost_conn_get(c, a->oid, &o)) &&
            !(a->rc = ost_instance_setattr(o, "value", ost_int(7))))
            a->rc = ost_commit_async(c, &loop, on_commit, &a->log);
        ost_conn_close(c); /* waits for the queued commit */
    }
    a->loop_rc = uv_run(&loop, UV_RUN_DEFAULT);
    a->close_rc = uv_loop_close(&loop);
}

static size_t cond_waiters(ost_store *st) {
    uv_mutex_lock(&st->gc_lock);
    size_t n = st->gc_cond_waiters;
    uv_mutex_unlock(&st->gc_lock);
    return n;
}

OST_TEST(batch, closing_a_connection_with_an_async_commit_pending_waits_for_it) {
    ost_store *st = open_store(true, true);
    uint64_t oid = make_counter(st, "counter"), stall_oid = make_counter(st, "stall");
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ost_conn *cstall = conn_of(st);
    ost_value d;
    cr_assert_eq(ost_conn_get(cstall, stall_oid, &d), 0);
    set(d, "value", ost_int(1));
    int release;
    pid_t holder = hold_write_lock(F.dir, &release);
    cb_log ls = {0};
    cr_assert_eq(ost_commit_async(cstall, &loop, on_commit, &ls), 0);
    while (!queue_empty(st)) uv_sleep(1); /* the committer is held up */
    closer_arg a = {.st = st, .oid = oid};
    uv_thread_t th;
    cr_assert_eq(uv_thread_create(&th, closer_thread, &a), 0);
    while (cond_waiters(st) < 1) uv_sleep(1); /* the close waits */
    char go = 1;
    cr_assert_eq(write(release, &go, 1), 1);
    close(release);
    int status;
    cr_assert_eq(waitpid(holder, &status, 0), holder);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lock holder status %d", status);
    holder_join();
    uv_thread_join(&th);
    cr_assert_eq(a.rc, 0, "%s", ost_err_name(a.rc));
    cr_assert_eq(a.loop_rc, 0);
    cr_assert_eq(a.close_rc, 0);
    cr_assert_eq(a.log.calls, 0, "the closed connection's callback does not run");
    cr_assert_eq(cond_waiters(st), 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(ls.calls, 1);
    cr_assert_eq(ls.status, 0);
    cr_assert_eq(read_counter(st, oid), 7, "its commit landed");
    cr_assert_eq(read_counter(st, stall_oid), 1);
    ost_conn_close(cstall);
    ost_store_close(st);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
