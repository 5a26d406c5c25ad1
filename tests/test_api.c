/* The API as a new user meets it (issue 12): connections that outlive
 * their store, iterating over the stored objects, attribute access that
 * tells "unset" from "failed", vetoes, per-thread store messages,
 * conflict messages and ost_txn_run, the _c root calls, repr of a loaded
 * ghost, and the stability of ost_hash. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakcheck.h"
#include "ostore.h"
#include "storetest.h"

static struct {
    char tmp[64];
    char dir[128];
    ost_registry *reg;
    ost_value item;  /* inv.Item: persistent, fields sku, qty */
    ost_value other; /* inv.Other: persistent, attribute dict */
} F;

static const char *item_fields[] = {"sku", "qty"};

static void setup(void) {
    strcpy(F.tmp, "/tmp/ostore-api-XXXXXX");
    F.reg = fixture_setup(F.tmp, F.dir, sizeof F.dir);
    ost_class_def item = {.module = "inv", .name = "Item", .fields = item_fields, .nfields = 2,
                          .persistent = true};
    ost_class_def other = {.module = "inv", .name = "Other", .persistent = true};
    cr_assert_eq(ost_registry_add(F.reg, &item, &F.item), 0);
    cr_assert_eq(ost_registry_add(F.reg, &other, &F.other), 0);
}

static void teardown(void) { fixture_teardown(F.tmp, &F.reg); }

TestSuite(api, .init = setup, .fini = teardown, .timeout = 120);

static ost_store *open_store(bool create) {
    ost_store_options o = options_for(F.reg, create);
    return open_with(F.dir, &o);
}

static ost_value new_item(const char *sku, int64_t qty) {
    ost_value it = ost_instance_new(ost_incref(F.item));
    cr_assert_eq(ost_instance_setattr(it, "sku", ost_str_c(sku)), 0);
    cr_assert_eq(ost_instance_setattr(it, "qty", ost_int(qty)), 0);
    return it;
}

static int64_t qty_of(ost_value it) {
    ost_value q;
    int rc = ost_instance_getattr_ex(it, "qty", &q);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_value_errmsg());
    int64_t n = -1;
    cr_assert_eq(ost_int_value(q, &n), 0);
    return n;
}

/* ---- 1. lifetimes ------------------------------------------------------- */

OST_TEST(api, conn_close_after_store_close_is_safe) {
    ost_store *st = open_store(true);
    ost_conn *a = conn_of(st), *b = conn_of(st);
    cr_assert_eq(ost_root_set_c(a, "item", new_item("x", 1)), 0);
    commit_ok(a);
    ost_value held = ost_incref(ost_root_get_c(b, "item"));
    cr_assert(held);
    cr_assert_eq(ost_root_set_c(b, "pending", ost_int(5)), 0); /* uncommitted */
    ost_store_close(st);
    /* the handles are still valid: calls fail clearly, close frees them */
    ost_value v;
    cr_assert_eq(ost_conn_get(a, 0, &v), OST_EINVAL);
    cr_assert(strstr(ost_conn_errmsg(a), "store is closed"), "%s", ost_conn_errmsg(a));
    cr_assert_eq(ost_commit(b), OST_EINVAL);
    cr_assert_eq(ost_root_get_c(b, "item"), 0);
    cr_assert_eq(ost_root_set_c(b, "k", ost_int(1)), OST_EINVAL);
    ost_iter *it;
    cr_assert_eq(ost_iter_open(a, 0, &it), OST_EINVAL);
    ost_value m;
    cr_assert_eq(ost_map_new(a, "int", &m), OST_EINVAL);
    cr_assert_eq(ost_oid(a, held), UINT64_MAX);
    size_t active;
    cr_assert_eq(ost_conn_cache_count(a, &active), 0u);
    ost_abort(a);
    cr_assert_eq(ost_conn_hooks(a), NULL);
    /* what the caller held is a ghost that can no longer load */
    ost_value out;
    cr_assert_neq(ost_instance_getattr_ex(held, "qty", &out), 0);
    ost_decref(held);
    ost_conn_close(b);
    ost_conn_close(a);
    /* the uncommitted change was aborted */
    st = open_store(false);
    a = conn_of(st);
    cr_assert_eq(ost_root_get_c(a, "pending"), 0);
    ost_conn_close(a);
    ost_store_close(st);
}

OST_TEST(api, store_close_alone_still_closes_connections) {
    ost_store *st = open_store(true);
    ost_conn *a = conn_of(st);
    cr_assert_eq(ost_root_set_c(a, "n", ost_int(1)), 0);
    commit_ok(a);
    ost_store_close(st); /* a is never closed: freed at exit, not a leak */
    st = open_store(false);
    a = conn_of(st);
    int64_t n;
    cr_assert_eq(ost_int_value(ost_root_get_c(a, "n"), &n), 0);
    cr_assert_eq(n, 1);
    ost_conn_close(a);
    ost_store_close(st);
}

/* ---- 2. iterators -------------------------------------------------------- */

OST_TEST(api, iterators_walk_records_in_oid_order_across_the_gaps) {
    ost_store *st = open_store(true);
    ost_conn *a = conn_of(st), *b = conn_of(st);
    /* two connections reserve separate blocks of oids: gaps between them */
    ost_value la = ost_list_new(0), lb = ost_list_new(0);
    for (int i = 0; i < 5; i++) {
        ost_list_append(la, new_item("a", i));
        ost_list_append(lb, new_item("b", i));
    }
    ost_value o = ost_instance_new(ost_incref(F.other));
    ost_list_append(la, o);
    cr_assert_eq(ost_root_set_c(a, "a", la), 0);
    commit_ok(a);
    cr_assert_eq(ost_root_set_c(b, "b", lb), 0);
    commit_ok(b);
    ost_store_stats s = stats(st);
    cr_assert_eq(s.records, 12u); /* root, 10 items, 1 other */
    cr_assert_gt(s.next_oid, 13u, "the blocks leave gaps");
    ost_abort(a); /* a new transaction: its snapshot sees b's commit */

    ost_iter *it;
    cr_assert_eq(ost_iter_open(a, 0, &it), 0);
    ost_record_info info;
    ost_value obj;
    uint64_t n = 0, last = 0;
    int rc;
    while ((rc = ost_iter_next(it, &info, &obj)) == 0) {
        if (n) cr_assert_gt(info.oid, last, "oid order");
        last = info.oid;
        cr_assert_eq(ost_oid(a, obj), info.oid);
        cr_assert_eq(ost_instance_class(obj), info.cls);
        cr_assert_gt(info.size, 16u);
        cr_assert_gt(info.serial, 0u);
        cr_assert(!info.damaged);
        n++;
    }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(a));
    cr_assert_eq(n, 12u, "n=%llu last=%llu", (unsigned long long)n, (unsigned long long)last);
    cr_assert_eq(ost_iter_next(it, &info, NULL), OST_ENOTFOUND, "stays at the end");
    ost_iter_close(it);

    /* by class: the items only, as ghosts until used */
    cr_assert_eq(ost_iter_open(a, F.item, &it), 0);
    n = 0;
    int64_t qsum = 0;
    while ((rc = ost_iter_next(it, NULL, &obj)) == 0) {
        cr_assert_eq(ost_instance_class(obj), F.item);
        qsum += qty_of(obj);
        n++;
    }
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert_eq(n, 10u);
    cr_assert_eq(qsum, 2 * (0 + 1 + 2 + 3 + 4));
    ost_iter_close(it);

    /* a class the store has never seen: nothing */
    ost_value g = ost_global("inv", "Nothing");
    cr_assert_eq(ost_iter_open(a, g, &it), 0);
    cr_assert_eq(ost_iter_next(it, &info, &obj), OST_ENOTFOUND);
    ost_iter_close(it);
    ost_decref(g);
    cr_assert_eq(ost_iter_open(a, ost_int(3), &it), OST_ETYPE);
    cr_assert_eq(it, NULL);

    /* from the snapshot: what b commits later is not seen, and the
     * iterator ends with the transaction */
    cr_assert_eq(ost_iter_open(a, F.other, &it), 0);
    cr_assert_eq(ost_root_set_c(b, "c", ost_instance_new(ost_incref(F.other))), 0);
    commit_ok(b);
    n = 0;
    while (ost_iter_next(it, NULL, NULL) == 0) n++;
    cr_assert_eq(n, 1u);
    ost_abort(a);
    cr_assert_eq(ost_iter_next(it, NULL, NULL), OST_ETXN);
    ost_iter_close(it);
    cr_assert_eq(ost_iter_open(a, F.other, &it), 0);
    n = 0;
    while (ost_iter_next(it, NULL, NULL) == 0) n++;
    cr_assert_eq(n, 2u, "the new transaction sees b's commit");
    ost_iter_close(it);
    ost_iter_close(NULL);
    ost_conn_close(a);
    ost_conn_close(b);
    ost_store_close(st);
}

/* ---- 4. getattr ------------------------------------------------------------ */

static int refuse_state(void *ud, ost_value inst, ost_value state) {
    (void)ud, (void)inst, (void)state;
    return OST_EHOOK;
}

OST_TEST(api, getattr_ex_tells_unset_from_misspelt_from_failed) {
    ost_value it = ost_instance_new(ost_incref(F.item));
    ost_value out = 1;
    cr_assert_eq(ost_instance_getattr_ex(it, "qty", &out), 0);
    cr_assert_eq(out, 0, "unset");
    cr_assert_eq(ost_instance_getattr_ex(it, "qtty", &out), OST_ENOTFOUND);
    cr_assert(strstr(ost_value_errmsg(), "'qtty'") && strstr(ost_value_errmsg(), "inv.Item") &&
                  strstr(ost_value_errmsg(), "sku, qty"),
              "%s", ost_value_errmsg());
    cr_assert_eq(ost_instance_setattr(it, "locaton", ost_int(1)), OST_ENOTFOUND);
    cr_assert(strstr(ost_value_errmsg(), "'locaton'") && strstr(ost_value_errmsg(), "inv.Item"),
              "%s", ost_value_errmsg());
    cr_assert_eq(ost_instance_getattr_ex(ost_int(1), "qty", &out), OST_ETYPE);
    cr_assert_eq(ost_instance_getattr_ex(it, NULL, &out), OST_EINVAL);
    ost_decref(it);
    ost_value d = ost_instance_new(ost_incref(F.other));
    cr_assert_eq(ost_instance_getattr_ex(d, "anything", &out), 0);
    cr_assert_eq(out, 0);
    ost_instance_setattr(d, "x", ost_int(4));
    cr_assert_eq(ost_instance_getattr_ex(d, "x", &out), 0);
    cr_assert_eq(out, ost_int(4));
    ost_decref(d);

    /* a ghost that cannot load: its class's setstate refuses */
    ost_store *st = open_store(true);
    ost_conn *c = conn_of(st);
    cr_assert_eq(ost_root_set_c(c, "item", new_item("x", 3)), 0);
    commit_ok(c);
    ost_store_close(st);
    ost_conn_close(c);
    ost_registry *reg = ost_registry_new();
    ost_class_def bad = {.module = "inv", .name = "Item", .setstate = refuse_state};
    cr_assert_eq(ost_registry_add(reg, &bad, NULL), 0);
    ost_store_options o = options_for(reg, false);
    st = open_with(F.dir, &o);
    c = conn_of(st);
    ost_value g = ost_root_get_c(c, "item");
    cr_assert(ost_is_ghost(g));
    cr_assert_eq(ost_instance_getattr(g, "qty"), 0, "the old call cannot tell");
    int rc = ost_instance_getattr_ex(g, "qty", &out);
    cr_assert_eq(rc, OST_EHOOK, "%s", ost_err_name(rc));
    cr_assert(strstr(ost_value_errmsg(), "oid"), "%s", ost_value_errmsg());
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
}

/* ---- 6. vetoes and per-thread messages ------------------------------------ */

static int veto_io(void *ud, ost_txn_hooks *h) {
    (void)ud, (void)h;
    return OST_EIO;
}

OST_TEST(api, a_veto_returns_eveto_whatever_the_hook_returned) {
    ost_store *st = open_store(true);
    ost_conn *c = conn_of(st);
    cr_assert_eq(ost_root_set_c(c, "n", ost_int(1)), 0);
    cr_assert_eq(ost_txn_hooks_before_commit(ost_conn_hooks(c), veto_io, NULL), 0);
    cr_assert_eq(ost_commit(c), OST_EVETO);
    cr_assert(strstr(ost_conn_errmsg(c), "OST_EIO"), "%s", ost_conn_errmsg(c));
    cr_assert_eq(stats(st).last_serial, 1u, "nothing written");
    ost_abort(c);
    ost_conn_close(c);
    ost_store_close(st);
}

typedef struct {
    ost_store *st;
    int id;
    int bad;
    char seen[256];
} msg_arg;

/* Fails calls on the shared store with a message naming this thread, and
 * checks that the store's message is this thread's each time. */
static void *msg_thread(void *p) {
    msg_arg *m = p;
    char path[64], want[64];
    snprintf(path, sizeof path, "/nonexistent/thread-%d", m->id);
    snprintf(want, sizeof want, "thread-%d:", m->id);
    for (int i = 0; i < 2000; i++) {
        if (ost_store_open(m->st, path, NULL) != OST_EINVAL) m->bad++;
        const char *msg = ost_store_errmsg(m->st);
        if (!strstr(msg, want)) {
            m->bad++;
            snprintf(m->seen, sizeof m->seen, "%s", msg);
        }
    }
    return NULL;
}

OST_TEST(api, store_messages_are_per_thread) {
    ost_store *st = open_store(true);
    pthread_t t[4];
    msg_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (msg_arg){.st = st, .id = i};
        cr_assert_eq(pthread_create(&t[i], NULL, msg_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(a[i].bad, 0, "thread %d saw another's message: %s", i, a[i].seen);
    cr_assert_str_empty(ost_store_errmsg(st), "this thread failed nothing");
    ost_store_close(st);
}

/* ---- 7. conflicts and ost_txn_run ---------------------------------------- */

typedef struct {
    ost_conn *rival; /* commits a change to the item during the first attempts */
    int rival_commits;
    int calls;
    int fail_with;
} bump_arg;

/* One attempt: qty += 1; the rival changes the item in between as long as
 * rival_commits says, a real conflict between two connections. */
static int bump(void *ud, ost_conn *c) {
    bump_arg *b = ud;
    b->calls++;
    if (b->fail_with) return b->fail_with;
    ost_value it = ost_root_get_c(c, "item");
    int64_t q = qty_of(it);
    if (b->rival_commits > 0) {
        b->rival_commits--;
        ost_value r = ost_root_get_c(b->rival, "item");
        cr_assert_eq(ost_instance_setattr(r, "qty", ost_int(qty_of(r) + 100)), 0);
        commit_ok(b->rival);
    }
    return ost_instance_setattr(it, "qty", ost_int(q + 1));
}

OST_TEST(api, conflict_message_names_the_class_and_the_snapshot) {
    ost_store *st = open_store(true);
    ost_conn *a = conn_of(st), *b = conn_of(st);
    cr_assert_eq(ost_root_set_c(a, "item", new_item("x", 0)), 0);
    commit_ok(a); /* commit 2 (1 made the store) */
    ost_abort(b);
    bump_arg arg = {.rival = b, .rival_commits = 1};
    cr_assert_eq(bump(&arg, a), 0);
    cr_assert_eq(ost_commit(a), OST_ECONFLICT);
    const char *m = ost_conn_errmsg(a);
    cr_assert(strstr(m, "is a inv.Item"), "%s", m);
    cr_assert(strstr(m, "snapshot is commit 2"), "%s", m);
    ost_abort(a);
    ost_conn_close(a);
    ost_conn_close(b);
    ost_store_close(st);
}

OST_TEST(api, txn_run_retries_real_conflicts) {
    ost_store *st = open_store(true);
    ost_conn *a = conn_of(st), *b = conn_of(st);
    cr_assert_eq(ost_root_set_c(a, "item", new_item("x", 0)), 0);
    commit_ok(a);
    ost_abort(b);
    /* two conflicts, then the third attempt commits */
    bump_arg arg = {.rival = b, .rival_commits = 2};
    unsigned tried = 0;
    int rc = ost_txn_run(a, 5, bump, &arg, &tried);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(a));
    cr_assert_eq(tried, 3u);
    cr_assert_eq(arg.calls, 3);
    ost_abort(b);
    cr_assert_eq(qty_of(ost_root_get_c(b, "item")), 201, "both rival commits and ours");
    /* every attempt conflicts: gives up, writes nothing of its own */
    arg = (bump_arg){.rival = b, .rival_commits = 2};
    rc = ost_txn_run(a, 2, bump, &arg, &tried);
    cr_assert_eq(rc, OST_ECONFLICT);
    cr_assert_eq(tried, 2u);
    cr_assert(strstr(ost_conn_errmsg(a), "gave up after 2 attempts"), "%s", ost_conn_errmsg(a));
    ost_abort(b);
    cr_assert_eq(qty_of(ost_root_get_c(b, "item")), 401);
    cr_assert_eq(qty_of(ost_root_get_c(a, "item")), 401, "a aborted: it sees the newest");
    /* another failure is not retried */
    arg = (bump_arg){.fail_with = OST_EHOOK};
    cr_assert_eq(ost_txn_run(a, 5, bump, &arg, &tried), OST_EHOOK);
    cr_assert_eq(tried, 1u);
    /* misuse */
    cr_assert_eq(ost_txn_run(a, 0, bump, &arg, NULL), OST_EINVAL);
    cr_assert_eq(ost_txn_run(a, 1, NULL, &arg, NULL), OST_EINVAL);
    cr_assert_eq(ost_root_set_c(a, "pending", ost_int(1)), 0);
    cr_assert_eq(ost_txn_run(a, 1, bump, &arg, NULL), OST_EBUSY);
    cr_assert(ost_root_get_c(a, "pending"), "the pending change is kept");
    ost_abort(a);
    ost_conn_close(a);
    ost_conn_close(b);
    ost_store_close(st);
}

/* ---- 8. small things ------------------------------------------------------ */

OST_TEST(api, root_calls_with_c_string_keys) {
    ost_store *st = open_store(true);
    ost_conn *c = conn_of(st);
    cr_assert_eq(ost_root_set_c(c, "count", ost_int(7)), 0);
    cr_assert_eq(ost_root_get_c(c, "count"), ost_int(7));
    cr_assert_eq(ost_root_get_c(c, "missing"), 0);
    cr_assert_eq(ost_root_get_c(c, NULL), 0);
    cr_assert_eq(ost_root_set_c(c, NULL, ost_int(1)), OST_EINVAL);
    cr_assert_eq(ost_root_set_c(c, "\xff", ost_int(1)), OST_EINVAL);
    commit_ok(c);
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(api, repr_can_load_a_ghost_first) {
    ost_store *st = open_store(true);
    ost_conn *c = conn_of(st);
    cr_assert_eq(ost_root_set_c(c, "item", new_item("abc", 3)), 0);
    commit_ok(c);
    ost_conn_close(c);
    c = conn_of(st);
    ost_value g = ost_root_get_c(c, "item");
    cr_assert(ost_is_ghost(g));
    ost_buf b = {0};
    cr_assert_eq(ost_repr(g, &b), 0);
    cr_assert_str_eq(b.data, "inv.Item(<ghost>)");
    b.len = 0;
    ost_repr_options o;
    ost_repr_options_init(&o);
    cr_assert(!o.load_ghost);
    o.load_ghost = true;
    cr_assert_eq(ost_repr_ex(g, &b, &o), 0);
    cr_assert_str_eq(b.data, "inv.Item(sku='abc', qty=3)");
    ost_buf_free(&b);
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(api, default_cache_size_is_the_documented_one) {
    cr_assert_eq(OST_CACHE_SIZE_DEFAULT, 100000);
}

/* ost_hash is documented stable across processes, runs and platforms (a
 * program may keep it in its own indexes): these values are pinned. */
OST_TEST(api, hash_values_are_pinned) {
    struct {
        ost_value v;
        uint64_t h;
    } cases[] = {
        {ost_str_c(""), 0},
        {ost_str_c("inventory"), 0},
        {ost_str_c("caf\xc3\xa9"), 0},
        {ost_bytes("inventory", 9), 0},
        {ost_int(1), 1},
        {ost_int(-2), (uint64_t)-2},
    };
    /* str and bytes of the same bytes hash alike (they never compare
     * equal, so that is allowed) */
    uint64_t want[] = {0xc3fd67220b16861aull, 0xc4d528e442e221b0ull, 0xba30867945313dd0ull,
                       0xc4d528e442e221b0ull, 1, (uint64_t)-2};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t h;
        cr_assert_eq(ost_hash(cases[i].v, &h), 0);
        cr_assert_eq(h, want[i], "case %zu: 0x%016llx", i, (unsigned long long)h);
        ost_decref(cases[i].v);
    }
}

/* ---- ost_errmsg: one message call for every handle ------------------------ */

OST_TEST(api, errmsg_gives_the_last_failure_of_any_handle) {
    /* a writer and a reader */
    ost_writer *w = ost_writer_new();
    cr_assert_eq(ost_writer_set_protocol(w, 99), OST_EPROTOCOL);
    cr_assert_str_neq(ost_errmsg(w), "");
    cr_assert_eq(ost_errmsg(w), ost_writer_errmsg(w), "the writer's own text");
    ost_writer_free(w);
    ost_reader *r = ost_reader_new();
    ost_value v;
    cr_assert_neq(ost_load(r, "\x80\x02K", 3, &v, NULL), 0);
    cr_assert_str_neq(ost_errmsg(r), "");
    cr_assert_eq(ost_errmsg(r), ost_reader_errmsg(r));
    ost_reader_free(r);
    /* a store that is not there */
    ost_store *st = ost_store_new();
    cr_assert_neq(ost_store_open(st, F.dir, &(ost_store_options){.registry = F.reg}), 0);
    cr_assert(strstr(ost_errmsg(st), "open with create"), "%s", ost_errmsg(st));
    cr_assert_eq(ost_errmsg(st), ost_store_errmsg(st));
    /* a zeroed options struct is the defaults: a compound literal opens */
    cr_assert_eq(ost_store_open(st, F.dir, &(ost_store_options){.create = true, .registry = F.reg}),
                 0, "%s", ost_errmsg(st));
    ost_store_close(st);
    /* a connection, a loader, a snapshot */
    st = open_store(false);
    ost_conn *c = conn_of(st);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "float", &m), OST_EINVAL);
    cr_assert(strstr(ost_errmsg(c), "bad key kind"), "%s", ost_errmsg(c));
    cr_assert_eq(ost_errmsg(c), ost_conn_errmsg(c));
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, NULL, &l), 0);
    cr_assert_eq(ost_loader_add(l, ost_int(3), NULL), OST_EINVAL);
    cr_assert(strstr(ost_errmsg(l), "int"), "%s", ost_errmsg(l));
    cr_assert_eq(ost_errmsg(l), ost_loader_errmsg(l));
    ost_loader_close(l);
    ost_snap *s;
    cr_assert_eq(ost_snap_open(st, &s), 0);
    ost_raw_record rec;
    cr_assert_eq(ost_snap_get(s, 123456, &rec), OST_ENOTFOUND);
    cr_assert_eq(ost_errmsg(s), ost_snap_errmsg(s));
    ost_snap_close(s);
    /* NULL: the value layer's message of this thread */
    ost_value it = new_item("x", 1), got;
    cr_assert_eq(ost_instance_getattr_ex(it, "nosuchfield", &got), OST_ENOTFOUND);
    cr_assert_str_neq(ost_errmsg(NULL), "");
    cr_assert_eq(ost_errmsg(NULL), ost_value_errmsg());
    ost_decref(it);
    /* not a handle */
    static const uint32_t junk[4] = {0x12345678, 0, 0, 0};
    cr_assert_str_eq(ost_errmsg(junk), "ost_errmsg: not an ostore handle");
    ost_store_close(st);
}
