/* interop_helper: the C side of the Python interop tests (tests/py).
 *
 *   interop_helper write DIR   builds value graphs with the value API and
 *                              writes each at protocols 2 to 5, framed,
 *                              unframed and through a sink, as
 *                              DIR/<case>.p<N>.<frame|noframe|sink>.pkl;
 *                              checks in C that the sink output equals the
 *                              buffer output and that every pickle loads
 *                              back as an ost_same_graph copy.
 *   interop_helper chain [N]   a chain of N (default 1,000,000) instances,
 *                              each one's attribute 'next' the following:
 *                              dumps it at protocols 2 to 5, loads it back,
 *                              compares, frees both chains with ost_decref
 *                              of their heads, checks that no value is left.
 *   interop_helper serve       repickles pickles sent on stdin (below).
 *
 * The serve protocol, all integers little-endian. A request is
 *   u8 protocol (2..5), u8 flags (1: no framing, 2: sink mode),
 *   u64 length, then length bytes of pickle.
 * The answer is
 *   u8 status, u64 length, then length bytes:
 *   status 0: the pickle ostore wrote at that protocol;
 *   status 1: ost_load failed, the bytes are the reader's message;
 *   status 2: ost_dump failed, the bytes are the writer's message;
 *   status 3: ostore's own output did not load back as an ost_same_graph
 *             copy of what it read (the bytes say why).
 * End of input before a request ends the loop; exit status 0.
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad usage. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ostore.h"

static int failures;

#define FAILF(...)                                  \
    do {                                            \
        fprintf(stderr, "interop_helper: " __VA_ARGS__); \
        fputc('\n', stderr);                        \
        failures++;                                 \
    } while (0)

/* Aborts on a failed construction: the test cannot go on without it. */
static ost_value must(ost_value v, const char *what) {
    if (!v) {
        fprintf(stderr, "interop_helper: cannot build %s\n", what);
        exit(1);
    }
    return v;
}
static void must_ok(int rc, const char *what) {
    if (rc) {
        fprintf(stderr, "interop_helper: %s: %s\n", what, ost_err_name(rc));
        exit(1);
    }
}

/* ---- a growable byte buffer for sinks and stdin ---------------------------- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
    size_t calls;
} bytebuf;

static int bb_append(bytebuf *b, const void *p, size_t n) {
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) return OST_ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int sink(void *ud, const void *data, size_t len) {
    bytebuf *b = ud;
    b->calls++;
    return bb_append(b, data, len);
}

/* Without a store, a persistent id loads as a persistent reference. */
static int keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* ---- small builders ---------------------------------------------------------- */

static ost_value str(const char *s) { return must(ost_str_c(s), s); }
static ost_value strn(const char *s, size_t n) { return must(ost_str(s, n), "str"); }
static ost_value gl(const char *m, const char *n) { return must(ost_global(m, n), n); }

static ost_value list_of(size_t n, const ost_value *items) {
    ost_value l = must(ost_list_new(n), "list");
    for (size_t i = 0; i < n; i++) must_ok(ost_list_append(l, must(items[i], "item")), "append");
    return l;
}
#define LIST(...) list_of(sizeof((ost_value[]){__VA_ARGS__}) / sizeof(ost_value), \
                          (ost_value[]){__VA_ARGS__})

static ost_value tuple_of(size_t n, const ost_value *items) {
    ost_value t = must(ost_tuple_new(n), "tuple");
    for (size_t i = 0; i < n; i++) must_ok(ost_tuple_set(t, i, must(items[i], "item")), "tuple_set");
    return t;
}
#define TUPLE(...) tuple_of(sizeof((ost_value[]){__VA_ARGS__}) / sizeof(ost_value), \
                            (ost_value[]){__VA_ARGS__})

static void dset(ost_value d, ost_value k, ost_value v) {
    must_ok(ost_dict_set(d, must(k, "key"), must(v, "value")), "dict_set");
}
static void attr(ost_value inst, const char *name, ost_value v) {
    must_ok(ost_instance_setattr(inst, name, must(v, name)), "setattr");
}
static ost_value inst(const char *cls) {
    return must(ost_instance_new(gl("interop_classes", cls)), cls);
}
static ost_value bigint(const uint8_t *le, size_t n) {
    return must(ost_int_from_bytes(le, n), "bigint");
}
static ost_value flt(double d) { return must(ost_float(d), "float"); }
static ost_value i64(int64_t i) { return must(ost_int(i), "int"); }

/* 2**(8*zeros) * top, as little-endian two's complement bytes. */
static ost_value pow256(size_t zeros, uint8_t top, uint8_t low) {
    uint8_t *b = calloc(zeros + 1, 1);
    if (!b) exit(1);
    b[0] = low;
    b[zeros] = top;
    ost_value v = bigint(b, zeros + 1);
    free(b);
    return v;
}

static ost_value pattern_bytes(int type, size_t n, unsigned mul, unsigned mod) {
    unsigned char *b = malloc(n ? n : 1);
    if (!b) exit(1);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((i * mul) % mod);
    ost_value v = type == OST_T_BYTES ? ost_bytes(b, n) : ost_bytearray(b, n);
    free(b);
    return must(v, "bytes");
}

/* ---- the cases (tests/py/test_from_c.py builds the same in Python) ---------- */

static ost_value c_none(void) { return OST_NONE; }
static ost_value c_bools(void) { return LIST(OST_TRUE, OST_FALSE); }

static ost_value c_ints(void) {
    return LIST(i64(0), i64(1), i64(-1), i64(255), i64(256), i64(65535), i64(65536),
                i64(-32768), i64(INT32_MAX), i64(INT32_MIN), i64((int64_t)INT32_MAX + 1),
                i64((int64_t)INT32_MIN - 1), i64(OST_SMALLINT_MAX), i64(OST_SMALLINT_MIN),
                i64(OST_SMALLINT_MAX + 1), i64(OST_SMALLINT_MIN - 1), i64(INT64_MAX),
                i64(INT64_MIN));
}

static ost_value c_bigints(void) {
    static const char pos[] = "123456789012345678901234567890123456789";
    static const char neg[] = "-98765432109876543210987654321";
    static const uint8_t five[] = {5, 0, 0, 0}, minus1[] = {0xff, 0xff, 0xff};
    return LIST(pow256(8, 1, 0),        /* 2**64 */
                pow256(8, 0xff, 0),     /* -2**64 */
                pow256(25, 0xff, 0),    /* -2**200 */
                pow256(300, 1, 7),      /* 2**2400 + 7: LONG4 */
                pow256(300, 0xff, 0),   /* -(2**2400) */
                must(ost_int_from_decimal(pos, strlen(pos)), "decimal"),
                must(ost_int_from_decimal(neg, strlen(neg)), "decimal"),
                bigint(five, sizeof five),     /* not minimal: 5 */
                bigint(minus1, sizeof minus1)); /* not minimal: -1 */
}

static ost_value c_floats(void) {
    return LIST(flt(0.0), flt(-0.0), flt(1.5), flt(NAN), flt(-NAN), flt(INFINITY),
                flt(-INFINITY), flt(1e300), flt(5e-324), flt(0.1));
}

static ost_value c_strs(void) {
    static const char nul[] = "quote'\"\\\n\0end";
    char x300[301];
    memset(x300, 'x', 300);
    x300[300] = 0;
    return LIST(str(""), str("ascii"), str("caf\xc3\xa9"),
                str("\xe2\x82\xac\xe4\xb8\xad\xe6\x96\x87"), str("\xf0\x9f\x98\x80"),
                str("\xed\xa0\x80"), str("\xed\xbf\xbf"), str("a\xed\xa0\x80" "b"),
                str("\xed\xa0\x80\xed\xbf\xbf"), str(x300), strn(nul, sizeof nul - 1));
}

static ost_value c_bigstr(void) {
    static const char unit[] = "ab\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\x80"; /* 12 bytes */
    size_t n = 10000, u = sizeof unit - 1;
    char *s = malloc(n * u);
    if (!s) exit(1);
    for (size_t i = 0; i < n; i++) memcpy(s + i * u, unit, u);
    ost_value v = strn(s, n * u);
    free(s);
    return v;
}

static ost_value c_bytes(void) {
    return LIST(must(ost_bytes("", 0), "b"), must(ost_bytes("abc", 3), "b"),
                pattern_bytes(OST_T_BYTES, 256, 1, 256), pattern_bytes(OST_T_BYTES, 300, 0, 1));
}
static ost_value c_bigbytes(void) { return pattern_bytes(OST_T_BYTES, 100 * 1024, 7, 256); }
static ost_value c_bytearrays(void) {
    return LIST(must(ost_bytearray("", 0), "ba"), must(ost_bytearray("xyz", 3), "ba"),
                pattern_bytes(OST_T_BYTEARRAY, 300, 0, 1));
}
static ost_value c_bigbytearray(void) {
    return pattern_bytes(OST_T_BYTEARRAY, 100 * 1024, 13, 251);
}

static ost_value c_tuples(void) {
    ost_value ten = must(ost_tuple_new(10), "tuple");
    for (size_t i = 0; i < 10; i++) must_ok(ost_tuple_set(ten, i, i64((int64_t)i)), "set");
    return LIST(must(ost_tuple_new(0), "()"), TUPLE(i64(1)), TUPLE(i64(1), i64(2)),
                TUPLE(i64(1), i64(2), i64(3)), TUPLE(i64(1), i64(2), i64(3), i64(4)), ten,
                TUPLE(must(ost_tuple_new(0), "()"), TUPLE(str("a"))));
}

static ost_value c_lists(void) {
    ost_value big = must(ost_list_new(0), "list");
    for (int64_t i = 0; i < 2500; i++) must_ok(ost_list_append(big, i64(i)), "append");
    return LIST(must(ost_list_new(0), "[]"), LIST(i64(1)), LIST(LIST(must(ost_list_new(0), "[]"))),
                big);
}

static ost_value c_dicts(void) {
    ost_value mixed = must(ost_dict_new(), "dict"), big = must(ost_dict_new(), "dict");
    ost_value a = must(ost_dict_new(), "dict"), nested = must(ost_dict_new(), "dict");
    dset(a, str("a"), i64(1));
    dset(mixed, i64(1), str("int"));
    dset(mixed, flt(2.5), str("float"));
    dset(mixed, TUPLE(i64(1), i64(2)), str("tuple"));
    dset(mixed, OST_NONE, str("none"));
    dset(mixed, must(ost_bytes("k", 1), "b"), str("bytes"));
    dset(mixed, pow256(8, 1, 0), str("big"));
    dset(nested, str("x"), LIST(i64(1), must(ost_dict_new(), "{}")));
    dset(mixed, str("nested"), nested);
    for (int i = 0; i < 1500; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", i);
        dset(big, str(k), i64(i));
    }
    return LIST(must(ost_dict_new(), "{}"), a, mixed, big);
}

static ost_value c_key_collide(void) {
    ost_value d1 = must(ost_dict_new(), "d"), d2 = must(ost_dict_new(), "d");
    ost_value d3 = must(ost_dict_new(), "d"), d4 = must(ost_dict_new(), "d");
    dset(d1, i64(1), str("a"));
    dset(d1, flt(1.0), str("b"));
    dset(d1, OST_TRUE, str("c"));
    dset(d2, OST_TRUE, str("a"));
    dset(d2, i64(1), str("b"));
    dset(d3, pow256(8, 1, 0), str("a"));
    dset(d3, flt(18446744073709551616.0), str("b"));
    dset(d4, i64(-1), str("a"));
    dset(d4, flt(-1.0), str("b"));
    return LIST(d1, d2, d3, d4);
}

static ost_value c_sets(void) {
    ost_value s123 = must(ost_set_new(), "set"), fs = must(ost_frozenset_new(), "fs");
    ost_value fs1 = must(ost_frozenset_new(), "fs"), sfs = must(ost_set_new(), "set");
    ost_value mix = must(ost_set_new(), "set");
    for (int i = 1; i <= 3; i++) must_ok(ost_set_add(s123, i64(i)), "add");
    must_ok(ost_set_add(fs, str("x")), "add");
    must_ok(ost_set_add(fs, TUPLE(i64(1), i64(2))), "add");
    must_ok(ost_set_add(fs1, i64(1)), "add");
    must_ok(ost_set_add(sfs, fs1), "add");
    must_ok(ost_set_add(mix, str("a")), "add");
    must_ok(ost_set_add(mix, must(ost_bytes("a", 1), "b")), "add");
    must_ok(ost_set_add(mix, OST_NONE), "add");
    must_ok(ost_set_add(mix, flt(2.5)), "add");
    return LIST(must(ost_set_new(), "set"), s123, must(ost_frozenset_new(), "fs"), fs, sfs, mix);
}

static ost_value c_instances(void) {
    ost_value p = inst("Plain"), n = inst("Node"), ws = inst("WithState");
    attr(p, "a", i64(1));
    attr(p, "b", str("x"));
    attr(n, "data", i64(5));
    attr(n, "next", OST_NONE);
    must_ok(ost_instance_set_state(ws, TUPLE(i64(3), i64(4))), "set_state");
    return LIST(p, inst("Empty"), n, inst("Plain"), ws);
}

static ost_value c_globals(void) {
    return LIST(gl("interop_classes", "Plain"), gl("builtins", "len"),
                gl("collections", "OrderedDict"));
}

/* Dotted names: STACK_GLOBAL at protocols 4-5, getattr(Outer, 'Inner')
 * below (Python finds no dotted name in a GLOBAL). */
static ost_value c_nested_class(void) {
    ost_value i = must(ost_instance_new(gl("interop_classes", "Outer.Inner")), "inner");
    attr(i, "x", i64(1));
    return LIST(gl("interop_classes", "Outer.Inner.Deep"), i, gl("interop_classes", "Outer.Inner"));
}

static ost_value c_shared(void) {
    ost_value x = LIST(i64(1), i64(2)), d = must(ost_dict_new(), "d");
    dset(d, str("k"), ost_incref(x));
    ost_value t = TUPLE(ost_incref(x), str("tt"));
    ost_value s = str("shared");
    ost_value i = inst("Plain");
    attr(i, "v", ost_incref(x));
    ost_value big = pow256(12, 1, 0);
    ost_value l = LIST(ost_incref(x), x, ost_incref(d), d, ost_incref(t), t,
                       ost_incref(s), s, ost_incref(i), i, ost_incref(big), big);
    return l;
}

static ost_value c_cycle_list(void) {
    ost_value l = must(ost_list_new(0), "l");
    must_ok(ost_list_append(l, ost_incref(l)), "append");
    return l;
}

static ost_value c_cycle_dict_inst(void) {
    ost_value d = must(ost_dict_new(), "d"), i = inst("Plain");
    attr(i, "d", ost_incref(d));
    dset(d, str("i"), i);
    return d;
}

static ost_value c_cycle_inst_self(void) {
    ost_value n = inst("Node");
    attr(n, "data", i64(1));
    attr(n, "next", ost_incref(n));
    return n;
}

static ost_value c_cycle_tuple(void) {
    ost_value l = must(ost_list_new(0), "l");
    ost_value t = TUPLE(ost_incref(l), i64(1));
    must_ok(ost_list_append(l, ost_incref(t)), "append");
    ost_decref(l);
    return t;
}

static ost_value c_cycle_multi(void) {
    ost_value a = must(ost_list_new(0), "a"), b = must(ost_dict_new(), "b"), c = inst("Plain");
    must_ok(ost_list_append(a, ost_incref(b)), "append");
    dset(b, str("c"), ost_incref(c));
    attr(c, "a", ost_incref(a));
    attr(c, "me", ost_incref(c));
    return LIST(ost_incref(a), ost_incref(b), ost_incref(c), TUPLE(a, b, c));
}

static ost_value c_reduce_call(void) {
    return must(ost_reduce_new(OST_REDUCE_CALL, gl("interop_classes", "Reduced"),
                               TUPLE(i64(1), str("two"))), "reduce");
}

static ost_value c_reduce_state(void) {
    ost_value r = must(ost_reduce_new(OST_REDUCE_CALL, gl("interop_classes", "Reduced"),
                                      TUPLE(i64(3), i64(4))), "reduce");
    ost_value st = must(ost_dict_new(), "d");
    dset(st, str("extra"), LIST(i64(5)));
    must_ok(ost_reduce_set_state(r, st), "set_state");
    return r;
}

static ost_value c_reduce_odict(void) {
    ost_value r = must(ost_reduce_new(OST_REDUCE_CALL, gl("collections", "OrderedDict"),
                                      must(ost_tuple_new(0), "()")), "reduce");
    must_ok(ost_reduce_setitem(r, str("a"), i64(1)), "setitem");
    must_ok(ost_reduce_setitem(r, str("b"), LIST(i64(2))), "setitem");
    return r;
}

static ost_value c_reduce_newobj_ex(void) {
    ost_value r = must(ost_reduce_new(OST_REDUCE_NEWOBJ_EX, gl("interop_classes", "KwOnly"),
                                      TUPLE(i64(5))), "reduce");
    ost_value kw = must(ost_dict_new(), "kw");
    dset(kw, str("b"), i64(6));
    must_ok(ost_reduce_set_kwargs(r, kw), "kwargs");
    return r;
}

static ost_value c_reduce_newobj(void) {
    return must(ost_reduce_new(OST_REDUCE_NEWOBJ, gl("interop_classes", "KwOnly"),
                               TUPLE(i64(7))), "reduce");
}

static ost_value c_reduce_date(void) {
    return must(ost_reduce_new(OST_REDUCE_CALL, gl("datetime", "date"),
                               TUPLE(must(ost_bytes("\x07\xe8\x01\x02", 4), "b"))), "reduce");
}

static ost_value c_reduce_bag(void) {
    ost_value r = must(ost_reduce_new(OST_REDUCE_CALL, gl("interop_classes", "Bag"),
                                      must(ost_tuple_new(0), "()")), "reduce");
    must_ok(ost_reduce_append(r, i64(1)), "append");
    must_ok(ost_reduce_append(r, str("two")), "append");
    must_ok(ost_reduce_setitem(r, str("k"), str("v")), "setitem");
    return r;
}

static ost_value c_persistent(void) {
    return LIST(must(ost_persref(str("oid-1")), "p"), must(ost_persref(i64(42)), "p"),
                must(ost_persref(TUPLE(str("x"), i64(1))), "p"));
}

static ost_value c_nested(void) {
    ost_value d = must(ost_dict_new(), "d"), k = must(ost_dict_new(), "d");
    ost_value fs = must(ost_frozenset_new(), "fs");
    must_ok(ost_set_add(fs, i64(4)), "add");
    dset(k, str("k"), fs);
    dset(d, str("list"), LIST(i64(1), TUPLE(i64(2), i64(3)), k));
    ost_value outer = inst("Plain"), inner = inst("Plain");
    attr(inner, "y", must(ost_tuple_new(0), "()"));
    attr(outer, "x", LIST(inner));
    dset(d, str("inst"), outer);
    return d;
}

static ost_value c_deep_list(void) {
    ost_value x = must(ost_list_new(0), "l");
    for (int i = 0; i < 10000; i++) x = LIST(x);
    return x;
}

static ost_value c_deep_chain(void) {
    ost_value head = OST_NONE;
    for (int i = 0; i < 10000; i++) {
        ost_value n = inst("Node");
        attr(n, "data", i64(i));
        attr(n, "next", head);
        head = n;
    }
    return head;
}

static ost_value c_million(void) {
    ost_value l = must(ost_list_new(1000000), "l");
    for (int64_t i = 0; i < 1000000; i++) must_ok(ost_list_append(l, i64(i)), "append");
    return l;
}

typedef struct {
    const char *name;
    ost_value (*build)(void);
} icase;

static const icase cases[] = {
    {"none", c_none},
    {"bools", c_bools},
    {"ints", c_ints},
    {"bigints", c_bigints},
    {"floats", c_floats},
    {"strs", c_strs},
    {"bigstr", c_bigstr},
    {"bytes", c_bytes},
    {"bigbytes", c_bigbytes},
    {"bytearrays", c_bytearrays},
    {"bigbytearray", c_bigbytearray},
    {"tuples", c_tuples},
    {"lists", c_lists},
    {"dicts", c_dicts},
    {"key_collide", c_key_collide},
    {"sets", c_sets},
    {"instances", c_instances},
    {"globals", c_globals},
    {"nested_class", c_nested_class},
    {"shared", c_shared},
    {"cycle_list", c_cycle_list},
    {"cycle_dict_inst", c_cycle_dict_inst},
    {"cycle_inst_self", c_cycle_inst_self},
    {"cycle_tuple", c_cycle_tuple},
    {"cycle_multi", c_cycle_multi},
    {"reduce_call", c_reduce_call},
    {"reduce_state", c_reduce_state},
    {"reduce_odict", c_reduce_odict},
    {"reduce_newobj_ex", c_reduce_newobj_ex},
    {"reduce_newobj", c_reduce_newobj},
    {"reduce_date", c_reduce_date},
    {"reduce_bag", c_reduce_bag},
    {"persistent", c_persistent},
    {"nested", c_nested},
    {"deep_list", c_deep_list},
    {"deep_chain", c_deep_chain},
    {"million", c_million},
};

/* ---- write ---------------------------------------------------------------------- */

static int write_file(const char *dir, const char *name, int proto, const char *variant,
                      const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.p%d.%s.pkl", dir, name, proto, variant);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        FAILF("%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Loads data and checks it is an ost_same_graph copy of v. */
static void check_reload(ost_reader *r, ost_value v, const void *data, size_t len,
                         const char *what) {
    ost_value back;
    size_t used;
    int rc = ost_load(r, data, len, &back, &used);
    if (rc) {
        FAILF("%s: ostore cannot load its own output: %s", what, ost_reader_errmsg(r));
        return;
    }
    if (used != len) FAILF("%s: load consumed %zu of %zu bytes", what, used, len);
    if (!ost_same_graph(v, back)) FAILF("%s: reloaded graph is not ost_same_graph", what);
    ost_release(back);
}

static int cmd_write(const char *dir) {
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    if (!w || !r) return 1;
    ost_reader_set_persistent_load(r, keep_pid, NULL);
    size_t files = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ost_value v = cases[c].build();
        for (int proto = 2; proto <= 5; proto++) {
            char what[128];
            const void *data;
            size_t len;
            must_ok(ost_writer_set_protocol(w, proto), "set_protocol");
            /* framing off */
            ost_writer_set_sink(w, NULL, NULL);
            ost_writer_set_framing(w, false);
            snprintf(what, sizeof what, "%s protocol %d noframe", cases[c].name, proto);
            int rc = ost_dump(w, v, &data, &len);
            if (rc) {
                FAILF("%s: dump failed: %s", what, ost_writer_errmsg(w));
                continue;
            }
            check_reload(r, v, data, len, what);
            if (write_file(dir, cases[c].name, proto, "noframe", data, len) == 0) files++;
            /* sink mode, framing on */
            bytebuf sb = {0};
            size_t slen;
            ost_writer_set_framing(w, true);
            ost_writer_set_sink(w, sink, &sb);
            snprintf(what, sizeof what, "%s protocol %d sink", cases[c].name, proto);
            rc = ost_dump(w, v, &data, &slen);
            if (rc) FAILF("%s: dump failed: %s", what, ost_writer_errmsg(w));
            else if (data != NULL || slen != sb.len)
                FAILF("%s: sink mode returned data %p and length %zu for %zu bytes", what,
                      data, slen, sb.len);
            else if (write_file(dir, cases[c].name, proto, "sink", sb.p, sb.len) == 0)
                files++;
            /* buffer mode, framing on: the same bytes as the sink got */
            ost_writer_set_sink(w, NULL, NULL);
            snprintf(what, sizeof what, "%s protocol %d frame", cases[c].name, proto);
            rc = ost_dump(w, v, &data, &len);
            if (rc) {
                FAILF("%s: dump failed: %s", what, ost_writer_errmsg(w));
                free(sb.p);
                continue;
            }
            if (len != sb.len || memcmp(data, sb.p, len) != 0)
                FAILF("%s: buffer output (%zu bytes) differs from sink output (%zu bytes)",
                      what, len, sb.len);
            if (len > 200000 && sb.calls < 2)
                FAILF("%s: %zu bytes reached the sink in %zu call(s)", what, len, sb.calls);
            free(sb.p);
            check_reload(r, v, data, len, what);
            if (write_file(dir, cases[c].name, proto, "frame", data, len) == 0) files++;
        }
        ost_release(v);
    }
    ost_writer_free(w);
    ost_reader_free(r);
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    if (st.live_objects != 0)
        FAILF("%llu values still alive after freeing every case",
              (unsigned long long)st.live_objects);
    printf("interop_helper: %zu cases, %zu files, %d failures\n",
           sizeof cases / sizeof cases[0], files, failures);
    return failures ? 1 : 0;
}

/* ---- chain -------------------------------------------------------------------- */

static size_t live_objects(void) {
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    return (size_t)st.live_objects;
}

/* The chain is built once; each protocol dumps it, loads it back, compares
 * and frees the loaded chain with ost_decref of its head; at the end
 * ost_decref of the built head frees the original. Both frees must leave
 * exactly the values that were alive before. */
static int cmd_chain(size_t n) {
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    if (!w || !r) return 1;
    size_t live0 = live_objects();
    ost_value cls = gl("interop_classes", "Node");
    ost_value head = OST_NONE;
    for (size_t i = 0; i < n; i++) {
        ost_value node = must(ost_instance_new(ost_incref(cls)), "node");
        attr(node, "next", head); /* steals the previous head */
        head = node;
    }
    ost_decref(cls);
    size_t live1 = live_objects();
    for (int proto = 2; proto <= 5; proto++) {
        const void *data;
        size_t len;
        must_ok(ost_writer_set_protocol(w, proto), "set_protocol");
        int rc = ost_dump(w, head, &data, &len);
        if (rc) {
            FAILF("chain of %zu, protocol %d: dump failed: %s", n, proto, ost_writer_errmsg(w));
            continue;
        }
        ost_value back;
        rc = ost_load(r, data, len, &back, NULL);
        if (rc) {
            FAILF("chain of %zu, protocol %d: load failed: %s", n, proto, ost_reader_errmsg(r));
            continue;
        }
        if (!ost_same_graph(head, back))
            FAILF("chain of %zu, protocol %d: loaded chain is not ost_same_graph", n, proto);
        /* the last node's next is None: walk the loaded chain */
        size_t k = 0;
        for (ost_value x = back; ost_typeof(x) == OST_T_INSTANCE;
             x = ost_instance_getattr(x, "next"))
            k++;
        if (k != n) FAILF("chain of %zu, protocol %d: loaded %zu nodes", n, proto, k);
        ost_decref(back); /* frees the whole loaded chain, iteratively */
        if (live_objects() != live1)
            FAILF("chain of %zu, protocol %d: %zu values alive after ost_decref of the "
                  "loaded head, %zu before the load", n, proto, live_objects(), live1);
        printf("chain of %zu, protocol %d: %zu bytes, loaded and freed\n", n, proto, len);
    }
    ost_decref(head); /* frees the whole built chain */
    if (live_objects() != live0)
        FAILF("chain of %zu: %zu values alive after ost_decref of the head, %zu before", n,
              live_objects(), live0);
    ost_writer_free(w);
    ost_reader_free(r);
    return failures ? 1 : 0;
}

/* ---- serve ---------------------------------------------------------------------- */

static int read_full(void *p, size_t n) {
    size_t k = fread(p, 1, n, stdin);
    return k == n ? 0 : (k == 0 && feof(stdin)) ? 1 : -1;
}

static int reply(int status, const void *data, size_t len) {
    unsigned char h[9];
    h[0] = (unsigned char)status;
    for (int k = 0; k < 8; k++) h[1 + k] = (unsigned char)((uint64_t)len >> (8 * k));
    if (fwrite(h, 1, 9, stdout) != 9 || (len && fwrite(data, 1, len, stdout) != len) ||
        fflush(stdout))
        return -1;
    return 0;
}

static int reply_msg(int status, const char *msg) { return reply(status, msg, strlen(msg)); }

static int cmd_serve(void) {
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    if (!w || !r) return 1;
    ost_reader_set_persistent_load(r, keep_pid, NULL);
    unsigned char *in = NULL;
    size_t incap = 0, served = 0;
    int rc = 0;
    for (;;) {
        unsigned char h[10];
        int e = read_full(h, 10);
        if (e == 1) break; /* clean end of input */
        if (e < 0) {
            fprintf(stderr, "interop_helper: truncated request header\n");
            rc = 1;
            break;
        }
        int proto = h[0], flags = h[1];
        uint64_t n = 0;
        for (int k = 0; k < 8; k++) n |= (uint64_t)h[2 + k] << (8 * k);
        if (n > incap) {
            unsigned char *q = realloc(in, n);
            if (!q) {
                fprintf(stderr, "interop_helper: request of %llu bytes: out of memory\n",
                        (unsigned long long)n);
                rc = 1;
                break;
            }
            in = q;
            incap = n;
        }
        if (n && read_full(in, n) != 0) {
            fprintf(stderr, "interop_helper: truncated request\n");
            rc = 1;
            break;
        }
        served++;
        ost_value v;
        if (ost_load(r, in, n, &v, NULL)) {
            if (reply_msg(1, ost_reader_errmsg(r))) goto io;
            continue;
        }
        bytebuf sb = {0};
        const void *data;
        size_t len;
        int drc = ost_writer_set_protocol(w, proto);
        ost_writer_set_framing(w, !(flags & 1));
        ost_writer_set_sink(w, (flags & 2) ? sink : NULL, &sb);
        if (!drc) drc = ost_dump(w, v, &data, &len);
        if (drc) {
            ost_release(v);
            free(sb.p);
            if (reply_msg(2, ost_writer_errmsg(w))) goto io;
            continue;
        }
        if (flags & 2) data = sb.p;
        /* ostore's own check: its output reads back as the same graph */
        ost_value back;
        char why[512] = "";
        if (ost_load(r, data, len, &back, NULL))
            snprintf(why, sizeof why, "own output does not load: %s", ost_reader_errmsg(r));
        else {
            if (!ost_same_graph(v, back))
                snprintf(why, sizeof why, "own output loads as a different graph");
            ost_release(back);
        }
        ost_release(v);
        e = why[0] ? reply_msg(3, why) : reply(0, data, len);
        free(sb.p);
        if (e) goto io;
    }
    goto done;
io:
    fprintf(stderr, "interop_helper: write error\n");
    rc = 1;
done:
    free(in);
    ost_writer_free(w);
    ost_reader_free(r);
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    if (st.live_objects != 0) {
        fprintf(stderr, "interop_helper: %llu values leaked after %zu requests\n",
                (unsigned long long)st.live_objects, served);
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) return cmd_write(argv[2]);
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "chain") == 0) {
        size_t n = 1000000;
        if (argc == 3) {
            char *end;
            unsigned long long v = strtoull(argv[2], &end, 10);
            if (*end || end == argv[2] || v == 0) goto usage;
            n = (size_t)v;
        }
        return cmd_chain(n);
    }
    if (argc == 2 && strcmp(argv[1], "serve") == 0) return cmd_serve();
usage:
    fputs("usage: interop_helper write DIR | chain [N] | serve\n", stderr);
    return 2;
}
