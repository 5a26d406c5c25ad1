/* Hooks: class registry with slots, persistent_id in both scopes,
 * persistent_load, transaction hooks; interop with Python for each. */
#include <criterion/criterion.h>
#include <sys/stat.h>

#include "internal.h"
#include "leakcheck.h"
#include "ostore.h"
#include "pyrun.h"

static char moddir[128];

/* A Python module with the classes the tests share with Python. */
static void make_pymod(void) {
    snprintf(moddir, sizeof moddir, "/tmp/ostore-hookmod-%d", (int)getpid());
    mkdir(moddir, 0700);
    char path[256];
    snprintf(path, sizeof path, "%s/hookmod.py", moddir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("class Point:\n"
          "    def __eq__(self, o): return type(o) is Point and vars(self) == vars(o)\n"
          "class Node:\n"
          "    pass\n"
          "class Other:\n"
          "    pass\n",
          f);
    fclose(f);
}

static int python(const char *code, const void *in, size_t n, char **out, size_t *outlen) {
    char env[200];
    snprintf(env, sizeof env, "PYTHONPATH=%s", moddir);
    return py_run(env, code, in, n, out, outlen);
}

static const char *point_fields[] = {"x", "y", "label"};

static ost_registry *point_registry(ost_value *cls) {
    ost_registry *reg = ost_registry_new();
    cr_assert(reg);
    ost_class_def def = {.module = "hookmod", .name = "Point",
                         .fields = point_fields, .nfields = 3};
    cr_assert_eq(ost_registry_add(reg, &def, cls), 0);
    return reg;
}

/* ---- registry --------------------------------------------------------------- */

OST_TEST(registry, add_get_duplicate_and_bad_definitions) {
    ost_value cls;
    ost_registry *reg = point_registry(&cls);
    cr_assert_eq(ost_registry_get(reg, "hookmod", "Point"), cls);
    cr_assert_eq(ost_registry_get(reg, "hookmod", "Nope"), 0);
    cr_assert_eq(ost_registry_count(reg), 1);
    ost_class_def def = {.module = "hookmod", .name = "Point"};
    cr_assert_eq(ost_registry_add(reg, &def, NULL), OST_EEXIST);
    const char *dup[] = {"a", "a"};
    ost_class_def bad = {.module = "m", .name = "Dup", .fields = dup, .nfields = 2};
    cr_assert_eq(ost_registry_add(reg, &bad, NULL), OST_EINVAL);
    const char *holes[] = {"a", NULL};
    ost_class_def bad2 = {.module = "m", .name = "Hole", .fields = holes, .nfields = 2};
    cr_assert_eq(ost_registry_add(reg, &bad2, NULL), OST_EINVAL);
    cr_assert_eq(ost_registry_add(reg, NULL, NULL), OST_EINVAL);
    /* many classes: the table grows */
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "C%d", i);
        ost_class_def d = {.module = "many", .name = name};
        cr_assert_eq(ost_registry_add(reg, &d, NULL), 0);
    }
    cr_assert_eq(ost_registry_count(reg), 201);
    cr_assert_str_eq(ost_data(ost_global_name(ost_registry_get(reg, "many", "C150")), NULL), "C150");
    cr_assert_eq(ost_class_nfields(cls), 3);
    cr_assert_eq(ost_class_field(cls, "label"), 2);
    cr_assert_eq(ost_class_field(cls, "z"), -1);
    ost_registry_free(reg);
}

OST_TEST(registry, slotted_instances) {
    ost_value cls;
    ost_registry *reg = point_registry(&cls);
    ost_value p = ost_instance_new(ost_incref(cls));
    cr_assert(p);
    cr_assert_eq(ost_instance_state(p), 0, "slotted instances have no state dict");
    cr_assert_eq(ost_instance_setattr(p, "x", ost_int(3)), 0);
    cr_assert_eq(ost_instance_setattr(p, "zzz", ost_int(3)), OST_ENOTFOUND);
    cr_assert_eq(ost_instance_set_slot(p, 1, ost_int(4)), 0);
    cr_assert_eq(ost_instance_set_slot(p, 3, ost_int(4)), OST_EINVAL);
    cr_assert_eq(ost_instance_getattr(p, "y"), ost_int(4));
    cr_assert_eq(ost_instance_slot(p, 0), ost_int(3));
    cr_assert_eq(ost_instance_slot(p, 2), 0, "unset slot");
    cr_assert_eq(ost_instance_set_state(p, OST_NONE), OST_EINVAL);
    ost_buf b = {0};
    ost_repr(p, &b);
    cr_assert_str_eq(b.data, "hookmod.Point(x=3, y=4)");
    ost_buf_free(&b);
    ost_decref(p);
    ost_registry_free(reg); /* the class outlives the registry while used */
}

/* ostore writes a slotted instance as Python writes a plain instance. */
OST_TEST(registry, slotted_instance_to_python, .init = make_pymod) {
    ost_value cls;
    ost_registry *reg = point_registry(&cls);
    ost_value p = ost_instance_new(ost_incref(cls));
    ost_instance_setattr(p, "x", ost_int(1));
    ost_instance_setattr(p, "label", ost_str_c("héllo"));
    ost_value q = ost_instance_new(ost_incref(cls)); /* no attributes at all */
    ost_value l = ost_list_new(0);
    ost_list_append(l, ost_incref(p));
    ost_list_append(l, p);
    ost_list_append(l, q);
    ost_writer *w = ost_writer_new();
    for (int proto = 2; proto <= 5; proto++) {
        const void *data;
        size_t len;
        cr_assert_eq(ost_writer_set_protocol(w, proto), 0);
        cr_assert_eq(ost_dump(w, l, &data, &len), 0);
        char *out;
        size_t n;
        int rc = python("import pickle, sys, hookmod\n"
                        "l = pickle.load(open(sys.argv[1], 'rb'))\n"
                        "ok = type(l[0]) is hookmod.Point and vars(l[0]) == {'x': 1, 'label': 'h\\xe9llo'}\n"
                        "ok = ok and l[0] is l[1] and vars(l[2]) == {}\n"
                        "open(sys.argv[2], 'w').write('ok' if ok else repr([vars(x) for x in l]))\n",
                        data, len, &out, &n);
        cr_assert_eq(rc, 0);
        cr_assert_str_eq(out, "ok", "protocol %d: %s", proto, out);
        free(out);
    }
    ost_writer_free(w);
    ost_decref(l);
    ost_registry_free(reg);
}

/* ostore reads what Python writes for the class, at every protocol. */
OST_TEST(registry, python_instances_to_slots, .init = make_pymod) {
    ost_value cls;
    ost_registry *reg = point_registry(&cls);
    ost_registry_set_policy(reg, OST_UNKNOWN_ERROR);
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    char *out;
    size_t n;
    int rc = python("import pickle, sys, hookmod\n"
                    "p = hookmod.Point(); p.x = 5; p.y = [1, 2]\n"
                    "q = hookmod.Point()\n"
                    "with open(sys.argv[2], 'wb') as f:\n"
                    "    for proto in range(6):\n"
                    "        b = pickle.dumps([p, q, p], proto)\n"
                    "        f.write(len(b).to_bytes(4, 'little') + b)\n",
                    NULL, 0, &out, &n);
    cr_assert_eq(rc, 0);
    size_t off = 0;
    int count = 0;
    while (off + 4 <= n) {
        uint32_t len;
        memcpy(&len, out + off, 4);
        off += 4;
        ost_value v;
        int lrc = ost_load(r, out + off, len, &v, NULL);
        cr_assert_eq(lrc, 0, "protocol %d: %s", count, ost_reader_errmsg(r));
        ost_value p = ost_item(v, 0);
        cr_assert_eq(ost_instance_class(p), cls, "resolved through the registry");
        cr_assert(ost__slotted(p));
        cr_assert_eq(ost_instance_getattr(p, "x"), ost_int(5));
        cr_assert_eq(ost_len(ost_instance_getattr(p, "y")), 2);
        cr_assert_eq(ost_instance_getattr(p, "label"), 0, "missing attribute: unset slot");
        cr_assert_eq(ost_item(v, 2), p, "sharing kept");
        cr_assert_eq(ost_instance_slot(ost_item(v, 1), 0), 0);
        ost_decref(v);
        off += len;
        count++;
    }
    cr_assert_eq(count, 6);
    free(out);
    ost_reader_free(r);
    ost_registry_free(reg);
}

OST_TEST(registry, extra_attribute_is_kept_and_unknown_class_is_an_error, .init = make_pymod) {
    ost_value cls;
    ost_registry *reg = point_registry(&cls);
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    char *out;
    size_t n;
    int rc = python("import pickle, sys, hookmod\n"
                    "p = hookmod.Point(); p.x = 1; p.zzz = 2\n"
                    "o = hookmod.Other()\n"
                    "with open(sys.argv[2], 'wb') as f:\n"
                    "    a = pickle.dumps(p, 4); b = pickle.dumps([1, o], 2)\n"
                    "    f.write(len(a).to_bytes(4, 'little') + a + b)\n",
                    NULL, 0, &out, &n);
    cr_assert_eq(rc, 0);
    uint32_t alen;
    memcpy(&alen, out, 4);
    ost_value v;
    /* a field the class does not declare is kept, and written back */
    cr_assert_eq(ost_load(r, out + 4, alen, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_instance_getattr(v, "x"), ost_int(1));
    cr_assert_eq(ost_instance_getattr(v, "zzz"), 0, "not a field");
    cr_assert_eq(ost_len(ost_instance_extra(v)), 1);
    cr_assert_eq(ost_dict_get_c(ost_instance_extra(v), "zzz"), ost_int(2));
    ost_buf txt = {0};
    cr_assert_eq(ost_repr(v, &txt), 0);
    cr_assert_str_eq(txt.data, "hookmod.Point(x=1, zzz=2)");
    ost_buf_free(&txt);
    ost_writer *w = ost_writer_new();
    const void *d;
    size_t dn;
    cr_assert_eq(ost_dump(w, v, &d, &dn), 0);
    char *back;
    size_t backn;
    cr_assert_eq(python("import pickle, sys, hookmod\n"
                        "p = pickle.load(open(sys.argv[1], 'rb'))\n"
                        "assert type(p) is hookmod.Point, type(p)\n"
                        "assert p.__dict__ == {'x': 1, 'zzz': 2}, p.__dict__\n"
                        "open(sys.argv[2], 'w').write('ok')\n",
                        d, dn, &back, &backn),
                 0);
    cr_assert_eq(backn, 2);
    free(back);
    ost_writer_free(w);
    ost_decref(v);
    /* unknown class: generic by default, an error when asked */
    const char *b = out + 4 + alen;
    size_t blen = n - 4 - alen;
    cr_assert_eq(ost_load(r, b, blen, &v, NULL), 0);
    cr_assert_eq(ost_typeof(ost_item(v, 1)), OST_T_INSTANCE);
    cr_assert_str_eq(ost_data(ost_global_name(ost_instance_class(ost_item(v, 1))), NULL), "Other");
    ost_decref(v);
    ost_registry_set_policy(reg, OST_UNKNOWN_ERROR);
    cr_assert_eq(ost_load(r, b, blen, &v, NULL), OST_EUNKNOWNCLASS);
    cr_assert(strstr(ost_reader_errmsg(r), "hookmod.Other"), "%s", ost_reader_errmsg(r));
    cr_assert(strstr(ost_reader_errmsg(r), "at offset "), "%s", ost_reader_errmsg(r));
    cr_assert_gt(ost_reader_erroffset(r), 0);
    free(out);
    ost_reader_free(r);
    ost_registry_free(reg);
}

/* getstate/setstate and getnewargs/setnewargs replace the default state. */
static int gs_calls, ss_calls, gna_calls, sna_calls;
static int vec_getstate(void *ud, ost_value inst, ost_value *state) {
    (void)ud;
    gs_calls++;
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_incref(ost_instance_slot(inst, 0)));
    ost_tuple_set(t, 1, ost_incref(ost_instance_slot(inst, 1)));
    *state = t;
    return 0;
}
static int vec_setstate(void *ud, ost_value inst, ost_value state) {
    (void)ud;
    ss_calls++;
    if (ost_typeof(state) != OST_T_TUPLE || ost_len(state) != 2) return OST_ETYPE;
    ost_instance_set_slot(inst, 0, ost_incref(ost_item(state, 0)));
    ost_instance_set_slot(inst, 1, ost_incref(ost_item(state, 1)));
    return 0;
}
static int vec_getnewargs(void *ud, ost_value inst, ost_value *args) {
    (void)ud;
    (void)inst;
    gna_calls++;
    *args = ost_tuple_new(1);
    ost_tuple_set(*args, 0, ost_int(2));
    return 0;
}
static int vec_setnewargs(void *ud, ost_value inst, ost_value args) {
    (void)ud;
    (void)inst;
    sna_calls++;
    return ost_len(args) == 1 && ost_item(args, 0) == ost_int(2) ? 0 : OST_EINVAL;
}

OST_TEST(registry, custom_state_callbacks_round_trip) {
    const char *f[] = {"a", "b"};
    ost_class_def def = {.module = "geo", .name = "Vec", .fields = f, .nfields = 2,
                         .getstate = vec_getstate, .setstate = vec_setstate,
                         .getnewargs = vec_getnewargs, .setnewargs = vec_setnewargs};
    ost_registry *reg = ost_registry_new();
    ost_value cls;
    cr_assert_eq(ost_registry_add(reg, &def, &cls), 0);
    ost_value v = ost_instance_new(ost_incref(cls));
    ost_instance_set_slot(v, 0, ost_float(1.5));
    ost_instance_set_slot(v, 1, ost_str_c("b"));
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    ost_reader_set_registry(r, reg);
    const void *data;
    size_t len;
    cr_assert_eq(ost_dump(w, v, &data, &len), 0);
    cr_assert_eq(gs_calls, 1);
    cr_assert_eq(gna_calls, 1);
    ost_value back;
    cr_assert_eq(ost_load(r, data, len, &back, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ss_calls, 1);
    cr_assert_eq(sna_calls, 1);
    cr_assert(ost_same_graph(v, back));
    ost_decref(back);
    ost_decref(v);
    ost_writer_free(w);
    ost_reader_free(r);
    ost_registry_free(reg);
}

/* ---- persistent_id ------------------------------------------------------------ */

typedef struct {
    int calls;
    int persistent_every; /* instances made persistent: every Nth call, 0 none */
    int fail_at;          /* call number that fails, 0 never */
} pid_ctx;

static int count_hook(void *ud, ost_value obj, ost_value *pid) {
    pid_ctx *c = ud;
    c->calls++;
    if (c->fail_at && c->calls == c->fail_at) return OST_EHOOK;
    if (c->persistent_every && ost_typeof(obj) == OST_T_INSTANCE &&
        c->calls % c->persistent_every == 0) {
        *pid = ost_int(c->calls);
    }
    return 0;
}

/* A graph of N plain heap objects and K instances: a list holding, per
 * group, a dict {'k': [str, float]} and an instance; instances shared and
 * cyclic through their 'self' and 'next' attributes. */
static ost_value mixed_graph(int groups, size_t *heap_objects) {
    ost_value cls = ost_global("m", "Obj");
    ost_value key = ost_str_c("k");
    ost_value root = ost_list_new(0);
    ost_value prev = 0;
    for (int i = 0; i < groups; i++) {
        ost_value d = ost_dict_new(), l = ost_list_new(0);
        ost_list_append(l, ost_str_c("s"));
        ost_list_append(l, ost_float(i));
        ost_dict_set(d, ost_incref(key), l);
        ost_list_append(root, d);
        ost_value inst = ost_instance_new(ost_incref(cls));
        ost_instance_setattr(inst, "self", ost_incref(inst)); /* cycle */
        if (prev) ost_instance_setattr(inst, "next", ost_incref(prev));
        ost_list_append(root, ost_incref(inst)); /* shared: list and next */
        prev = inst;
        ost_decref(inst);
    }
    ost_decref(key);
    ost_decref(cls);
    /* heap objects reached, counting every reference (memo hits too) */
    if (heap_objects) *heap_objects = 0;
    return root;
}

OST_TEST(persistent_id, instance_scope_counts_each_distinct_instance_once) {
    for (int groups = 1; groups <= 64; groups *= 4) {
        ost_value g = mixed_graph(groups, NULL);
        ost_writer *w = ost_writer_new();
        pid_ctx c = {0};
        ost_writer_set_persistent_id(w, count_hook, &c, OST_PID_INSTANCES);
        const void *data;
        size_t len;
        cr_assert_eq(ost_dump(w, g, &data, &len), 0);
        cr_assert_eq(c.calls, groups, "groups %d: %d calls", groups, c.calls);
        ost_dump_stats st;
        ost_writer_stats(w, &st);
        cr_assert_eq(st.hook_calls, (uint64_t)groups);
        ost_writer_free(w);
        ost_release(g);
    }
}

/* Scope all: every reference to a heap object, before the memo. */
OST_TEST(persistent_id, all_scope_counts_every_heap_reference) {
    ost_value cls = ost_global("m", "Obj");
    ost_value shared = ost_list_new(0);
    ost_value root = ost_list_new(0);
    ost_list_append(root, ost_incref(shared));
    ost_list_append(root, ost_incref(shared));
    ost_list_append(root, ost_int(7));       /* immediate: no call */
    ost_list_append(root, OST_NONE);         /* immediate: no call */
    ost_list_append(root, ost_str_c("text")); /* heap str: one call */
    ost_value inst = ost_instance_new(ost_incref(cls));
    ost_instance_setattr(inst, "a", ost_float(1e300));
    ost_list_append(root, inst);
    ost_list_append(root, ost_float(1.0)); /* immediate float: no call */
    /* root, shared x2, str, inst, inst's class (global) and its module and
     * name strs (protocol 4 writes them as str), inst's dict, key 'a', 1e300 */
    ost_writer *w = ost_writer_new();
    pid_ctx c = {0};
    ost_writer_set_persistent_id(w, count_hook, &c, OST_PID_ALL);
    cr_assert_eq(ost_dump(w, root, NULL, NULL), 0);
    cr_assert_eq(c.calls, 11, "calls %d", c.calls);
    c.calls = 0;
    ost_writer_set_persistent_id(w, count_hook, &c, OST_PID_INSTANCES);
    cr_assert_eq(ost_dump(w, root, NULL, NULL), 0);
    cr_assert_eq(c.calls, 1);
    ost_writer_free(w);
    ost_decref(root);
    ost_decref(shared);
    ost_decref(cls);
}

OST_TEST(persistent_id, hook_error_stops_the_dump_and_is_returned) {
    ost_value g = mixed_graph(10, NULL);
    ost_writer *w = ost_writer_new();
    pid_ctx c = {.fail_at = 4};
    ost_writer_set_persistent_id(w, count_hook, &c, OST_PID_INSTANCES);
    const void *data = (void *)1;
    size_t len = 1;
    cr_assert_eq(ost_dump(w, g, &data, &len), OST_EHOOK);
    cr_assert_eq(c.calls, 4, "no call after the failing one");
    cr_assert_null(data);
    cr_assert_eq(len, 0);
    cr_assert(strstr(ost_writer_errmsg(w), "persistent_id"));
    /* the writer is usable again */
    c = (pid_ctx){0};
    cr_assert_eq(ost_dump(w, g, &data, &len), 0);
    ost_writer_free(w);
    ost_release(g);
}

/* A persistent instance reached twice is one hook call and one BINPERSID;
 * Python's Unpickler.persistent_load sees each pid once per reference. */
static int oid_hook(void *ud, ost_value obj, ost_value *pid) {
    int *calls = ud;
    (*calls)++;
    ost_value name = ost_instance_getattr(obj, "name");
    if (name) {
        ost_value t = ost_tuple_new(2);
        ost_tuple_set(t, 0, ost_str_c("blob"));
        ost_tuple_set(t, 1, ost_incref(name));
        *pid = t;
    }
    return 0;
}

OST_TEST(persistent_id, python_reads_ostore_pids, .init = make_pymod) {
    ost_value cls = ost_global("hookmod", "Node");
    ost_value a = ost_instance_new(ost_incref(cls));
    ost_instance_setattr(a, "name", ost_str_c("a.bin"));
    ost_value plain = ost_instance_new(ost_incref(cls));
    ost_instance_setattr(plain, "v", ost_int(1));
    ost_value root = ost_list_new(0);
    ost_list_append(root, ost_incref(a));
    ost_list_append(root, a);
    ost_list_append(root, plain);
    int calls = 0;
    ost_writer *w = ost_writer_new();
    ost_writer_set_persistent_id(w, oid_hook, &calls, OST_PID_INSTANCES);
    for (int proto = 2; proto <= 5; proto++) {
        calls = 0;
        ost_writer_set_protocol(w, proto);
        const void *data;
        size_t len;
        cr_assert_eq(ost_dump(w, root, &data, &len), 0);
        cr_assert_eq(calls, 2);
        char *out;
        size_t n;
        int rc = python("import pickle, sys, hookmod\n"
                        "seen = []\n"
                        "class U(pickle.Unpickler):\n"
                        "    def persistent_load(self, pid):\n"
                        "        seen.append(pid); return ('loaded', pid)\n"
                        "l = U(open(sys.argv[1], 'rb')).load()\n"
                        "ok = l[0] == ('loaded', ('blob', 'a.bin')) and l[0] is l[1]\n"
                        "ok = ok and seen == [('blob', 'a.bin')] and vars(l[2]) == {'v': 1}\n"
                        "open(sys.argv[2], 'w').write('ok' if ok else repr((l, seen)))\n",
                        data, len, &out, &n);
        cr_assert_eq(rc, 0);
        cr_assert_str_eq(out, "ok", "protocol %d: %s", proto, out);
        free(out);
    }
    ost_writer_free(w);
    ost_decref(root);
    ost_decref(cls);
}

/* ---- persistent_load ------------------------------------------------------------ */

typedef struct {
    int calls;
    int fail;
    ost_value table; /* dict pid -> object */
} load_ctx;

static int table_load(void *ud, ost_value pid, ost_value *obj) {
    load_ctx *c = ud;
    c->calls++;
    if (c->fail) return OST_ENOTFOUND;
    ost_value v = ost_dict_get(c->table, pid);
    if (!v) return OST_ENOTFOUND;
    *obj = ost_incref(v);
    return 0;
}

/* persistent_load that keeps each pid: the object is a persref of it. */
static int keep_load(void *ud, ost_value pid, ost_value *obj) {
    (*(int *)ud)++;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* persistent_load that keeps nothing: the object is the pid's sum. */
static int sum_load(void *ud, ost_value pid, ost_value *obj) {
    (*(int *)ud)++;
    int64_t a, b;
    cr_assert_eq(ost_typeof(pid), OST_T_TUPLE);
    cr_assert_eq(ost_int_value(ost_item(pid, 0), &a), 0);
    cr_assert_eq(ost_int_value(ost_item(pid, 1), &b), 0);
    *obj = ost_int(a + b);
    return 0;
}

/* A pair pid (a TUPLE2 of two ints right before BINPERSID, as a store's
 * references are written) reaches the hook as a tuple like any other: a
 * hook that keeps it keeps its own (the reader lends the hook one tuple
 * it reuses while the hook keeps none), a hook that does not sees each
 * pair's values, and a pair under a MARK or of non-immediates still works. */
OST_TEST(persistent_load, pair_pids_reach_the_hook_as_tuples_of_their_own) {
    /* [(1, 2) pid, (3, 4) pid, (1, 2) pid, ('a', 5) pid] */
    static const uint8_t p[] = {0x80, 4, ']', '(', 'K', 1, 'K', 2, 0x86, 'Q', 'K', 3, 'K', 4, 0x86,
                                'Q', 'K', 1, 'K', 2, 0x86, 'Q', 0x8c, 1, 'a', 'K', 5, 0x86, 'Q',
                                'e', '.'};
    ost_reader *r = ost_reader_new();
    int calls = 0;
    ost_reader_set_persistent_load(r, keep_load, &calls);
    ost_value v;
    cr_assert_eq(ost_load(r, p, sizeof p, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(calls, 4);
    ost_buf b = {0};
    ost_repr(v, &b);
    cr_assert_str_eq(b.data, "[persistent((1, 2)), persistent((3, 4)), persistent((1, 2)), "
                             "persistent(('a', 5))]");
    ost_buf_free(&b);
    ost_decref(v);
    calls = 0;
    ost_reader_set_persistent_load(r, sum_load, &calls);
    static const uint8_t q[] = {0x80, 4, ']', '(', 'K', 1, 'K', 2, 0x86, 'Q', 'K', 3, 'K', 4,
                                0x86, 'Q', 'M', 0, 1, 'K', 2, 0x86, 'Q', 'e', '.'};
    cr_assert_eq(ost_load(r, q, sizeof q, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(calls, 3);
    ost_repr(v, &b);
    cr_assert_str_eq(b.data, "[3, 7, 258]");
    ost_buf_free(&b);
    ost_decref(v);
    /* an empty tuple pid after two ints is the empty tuple, the ints stay */
    static const uint8_t e[] = {0x80, 4, ']', '(', 'K', 1, 'K', 2, ')', 'Q', 'e', '.'};
    ost_reader_set_persistent_load(r, keep_load, &calls);
    cr_assert_eq(ost_load(r, e, sizeof e, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    ost_repr(v, &b);
    cr_assert_str_eq(b.data, "[1, 2, persistent(())]");
    ost_buf_free(&b);
    ost_decref(v);
    ost_reader_free(r);
}

OST_TEST(persistent_load, python_pids_resolve_through_the_hook) {
    char *out;
    size_t n;
    int rc = py_run(NULL,
                    "import pickle, sys, io\n"
                    "class P(pickle.Pickler):\n"
                    "    def persistent_id(self, obj):\n"
                    "        return ('ref', obj[1:]) if isinstance(obj, str) and obj.startswith('@') else None\n"
                    "with open(sys.argv[2], 'wb') as f:\n"
                    "    for proto in range(6):\n"
                    "        b = io.BytesIO(); P(b, proto).dump(['@x', {'k': '@y'}, 'plain', '@x'])\n"
                    "        b = b.getvalue(); f.write(len(b).to_bytes(4, 'little') + b)\n",
                    NULL, 0, &out, &n);
    cr_assert_eq(rc, 0);
    load_ctx c = {.table = ost_dict_new()};
    for (const char *k = "xy"; *k; k++) {
        ost_value pid = ost_tuple_new(2);
        ost_tuple_set(pid, 0, ost_str_c("ref"));
        ost_tuple_set(pid, 1, ost_str(k, 1));
        ost_value obj = ost_list_new(0);
        ost_list_append(obj, ost_str(k, 1));
        ost_dict_set(c.table, pid, obj);
    }
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, table_load, &c);
    size_t off = 0;
    int protos = 0;
    while (off + 4 <= n) {
        uint32_t len;
        memcpy(&len, out + off, 4);
        off += 4;
        ost_value v;
        c.calls = 0;
        if (protos == 0) {
            /* protocol 0 writes PERSID with a str pid: not in the table */
            cr_assert_eq(ost_load(r, out + off, len, &v, NULL), OST_ENOTFOUND);
            cr_assert(strstr(ost_reader_errmsg(r), "persistent_load"));
        } else {
            cr_assert_eq(ost_load(r, out + off, len, &v, NULL), 0, "%s", ost_reader_errmsg(r));
            cr_assert_eq(c.calls, 3);
            ost_buf b = {0};
            ost_repr(v, &b);
            cr_assert_str_eq(b.data, "[#1=['x'], {'k': ['y']}, 'plain', #1#]");
            cr_assert_eq(ost_item(v, 0), ost_item(v, 3), "the hook's object, shared");
            ost_buf_free(&b);
            ost_decref(v);
            /* a failing hook: its code, everything freed */
            c.fail = 1;
            ost_alloc_stats st0, st1;
            ost_alloc_stats_get(&st0);
            cr_assert_eq(ost_load(r, out + off, len, &v, NULL), OST_ENOTFOUND);
            ost_alloc_stats_get(&st1);
            cr_assert_eq(st0.live_objects, st1.live_objects, "nothing leaked");
            c.fail = 0;
        }
        off += len;
        protos++;
    }
    cr_assert_eq(protos, 6);
    free(out);
    ost_reader_free(r);
    ost_decref(c.table);
}

/* ---- transaction hooks ----------------------------------------------------- */

static char order[64];
static void note(char c) {
    size_t n = strlen(order);
    order[n] = c;
    order[n + 1] = 0;
}
static int before_a(void *ud, ost_txn_hooks *h) { (void)ud; (void)h; note('a'); return 0; }
static int before_b(void *ud, ost_txn_hooks *h) { (void)ud; (void)h; note('b'); return 0; }
static int before_veto(void *ud, ost_txn_hooks *h) { (void)ud; (void)h; note('v'); return OST_EVETO; }
static int before_adds(void *ud, ost_txn_hooks *h) {
    (void)ud;
    note('+');
    ost_txn_hooks_before_commit(h, before_b, NULL);
    return 0;
}
static void after_c(void *ud, bool ok, ost_txn_hooks *h) { (void)h; (void)ud; note(ok ? 'C' : 'F'); }
static void after_x(void *ud, ost_txn_hooks *h) { (void)ud; (void)h; note('X'); }

OST_TEST(txn_hooks, order_once_and_nested_registration) {
    ost_txn_hooks *h = ost_txn_hooks_new();
    order[0] = 0;
    ost_txn_hooks_before_commit(h, before_a, NULL);
    ost_txn_hooks_before_commit(h, before_adds, NULL);
    ost_txn_hooks_after_commit(h, after_c, NULL);
    ost_txn_hooks_after_abort(h, after_x, NULL);
    cr_assert_eq(ost_txn_hooks_pending(h), 4);
    cr_assert_eq(ost_txn_hooks_run_before_commit(h), 0);
    cr_assert_str_eq(order, "a+b", "registration order; nested one fires in the same run");
    ost_txn_hooks_run_after_commit(h, true);
    cr_assert_str_eq(order, "a+bC");
    cr_assert_eq(ost_txn_hooks_pending(h), 0, "each fires once; abort hooks dropped");
    cr_assert_eq(ost_txn_hooks_run_before_commit(h), 0);
    cr_assert_str_eq(order, "a+bC");
    ost_txn_hooks_free(h);
}

OST_TEST(txn_hooks, veto_stops_later_hooks) {
    ost_txn_hooks *h = ost_txn_hooks_new();
    order[0] = 0;
    ost_txn_hooks_before_commit(h, before_a, NULL);
    ost_txn_hooks_before_commit(h, before_veto, NULL);
    ost_txn_hooks_before_commit(h, before_b, NULL);
    ost_txn_hooks_after_commit(h, after_c, NULL);
    cr_assert_eq(ost_txn_hooks_run_before_commit(h), OST_EVETO);
    cr_assert_str_eq(order, "av");
    ost_txn_hooks_run_after_commit(h, false);
    cr_assert_str_eq(order, "avF", "after-commit hooks learn the commit failed");
    ost_txn_hooks_after_abort(h, after_x, NULL);
    ost_txn_hooks_before_commit(h, before_a, NULL);
    ost_txn_hooks_run_after_abort(h);
    cr_assert_str_eq(order, "avFX");
    cr_assert_eq(ost_txn_hooks_pending(h), 0);
    cr_assert_eq(ost_txn_hooks_before_commit(h, NULL, NULL), OST_EINVAL);
    ost_txn_hooks_free(h);
}
