/* Unit tests of the Python interop gaps of issue 12, with CPython
 * (/usr/bin/python3) as the oracle:
 *   items:   instances of dict and list subclasses (NEWOBJ, then SETITEMS or
 *            APPENDS on the instance, then BUILD), read, inspected through
 *            the C API, written back and loaded by Python as an equal object
 *            of the same class; and built from C with ost_instance_set_items;
 *   py2str:  Python 2 str (STRING, BINSTRING, SHORT_BINSTRING) read as
 *            Python's Unpickler(encoding='ASCII' | 'latin1' | 'bytes');
 *   escapes: protocol 0 STRING escapes as CPython decodes them (a trailing
 *            backslash is an error);
 *   nesting: one limit, max_depth, for containers nested on the stack and
 *            for nested MARKs, at the limit and one past it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "leakcheck.h"
#include "opcodes.h"
#include "ostore.h"
#include "pyeval.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The Python prologue: interop_classes importable, hex pickles in and out. */
#define PY_PROLOGUE                                                      \
    "import os, sys, pickle\n"                                           \
    "sys.path.insert(0, os.path.join(os.environ.get('OSTORE_TESTS_DIR', " \
    "'tests'), 'py'))\n"                                                 \
    "from interop_classes import DictSub, ListSub, same_subclass_object\n"

static char *hexs(const void *p, size_t n) {
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) sprintf(s + 2 * i, "%02x", ((const uint8_t *)p)[i]);
    s[2 * n] = 0;
    return s;
}

static size_t unhex(const char *h, uint8_t *out) {
    size_t n = 0;
    for (; h[0] && h[1] && h[0] != '\n'; h += 2) {
        unsigned b;
        sscanf(h, "%2x", &b);
        out[n++] = (uint8_t)b;
    }
    return n;
}

static void buf_add(ost_buf *b, const char *s) {
    size_t n = strlen(s);
    b->data = realloc(b->data, b->len + n + 1);
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

static const char *str_of(ost_value v) {
    cr_assert_eq(ost_typeof(v), OST_T_STR, "not a str: %s", ost_type_name(ost_typeof(v)));
    return ost_data(v, NULL);
}

static int64_t int_of(ost_value v) {
    int64_t i = 0;
    cr_assert_eq(ost_int_value(v, &i), 0);
    return i;
}

/* Checks the pair (DictSub(a=1, b=[1, 2]) with colour 'red', ListSub([1,
 * 'two']) with name 'l') through the C API. */
static void check_pair(ost_value t, const char *what) {
    cr_assert_eq(ost_typeof(t), OST_T_TUPLE, "%s", what);
    ost_value d = ost_item(t, 0), l = ost_item(t, 1);
    cr_assert_eq(ost_typeof(d), OST_T_INSTANCE, "%s", what);
    cr_assert_str_eq(str_of(ost_global_module(ost_instance_class(d))), "interop_classes");
    cr_assert_str_eq(str_of(ost_global_name(ost_instance_class(d))), "DictSub");
    ost_value items = ost_instance_items(d);
    cr_assert_eq(ost_typeof(items), OST_T_DICT, "%s: items of the dict subclass", what);
    cr_assert_eq(ost_len(items), 2);
    cr_assert_eq(int_of(ost_dict_get_c(items, "a")), 1);
    cr_assert_eq(ost_len(ost_dict_get_c(items, "b")), 2);
    cr_assert_str_eq(str_of(ost_instance_getattr(d, "colour")), "red", "%s", what);
    cr_assert_str_eq(str_of(ost_global_name(ost_instance_class(l))), "ListSub");
    items = ost_instance_items(l);
    cr_assert_eq(ost_typeof(items), OST_T_LIST, "%s: items of the list subclass", what);
    cr_assert_eq(ost_len(items), 2);
    cr_assert_eq(int_of(ost_item(items, 0)), 1);
    cr_assert_str_eq(str_of(ost_item(items, 1)), "two");
    cr_assert_str_eq(str_of(ost_instance_getattr(l, "name")), "l", "%s", what);
}

/* Python loads each hex pickle of `lines` and prints one line per pickle:
 * "ok" when it is an object of the same class, equal, with the same
 * attributes as `expected` (a Python expression), or what it got. */
static void py_check_all(const char *lines, const char *expected) {
    char script[2048];
    snprintf(script, sizeof script,
             PY_PROLOGUE
             "want = %s\n"
             "for line in open(sys.argv[1]):\n"
             "    got = pickle.loads(bytes.fromhex(line.strip()))\n"
             "    ok = type(got) is type(want) and len(got) == len(want) and all(\n"
             "        same_subclass_object(a, b) for a, b in zip(got, want))\n"
             "    print('ok' if ok else 'BAD %%r %%r' %% (got, getattr(got[0], '__dict__', 0)))\n",
             expected);
    char *out = py_run(script, lines, strlen(lines));
    for (char *p = out; *p; p = strchr(p, '\n') + 1)
        cr_assert(strncmp(p, "ok\n", 3) == 0, "python: %s", out);
    free(out);
}

#define PAIR_PY                                                              \
    "(lambda d, l: (d.__dict__.update(colour='red'), l.__dict__.update(name='l'), " \
    "(d, l))[2])(DictSub(a=1, b=[1, 2]), ListSub([1, 'two']))"

/* ---- items ------------------------------------------------------------------ */

OST_TEST(items, python_subclass_instances_round_trip) {
    /* Python writes the pair at protocols 0 to 5 */
    char *out = py_run(PY_PROLOGUE "x = " PAIR_PY "\n"
                       "for p in range(6): print(pickle.dumps(x, p).hex())\n",
                       "", 0);
    ost_reader *r = ost_reader_new();
    ost_writer *w = ost_writer_new();
    ost_buf back = {0};
    uint8_t *pkl = malloc(strlen(out));
    int proto = 0;
    for (char *line = out; *line; line = strchr(line, '\n') + 1, proto++) {
        size_t n = unhex(line, pkl);
        ost_value v;
        cr_assert_eq(ost_load(r, pkl, n, &v, NULL), 0, "protocol %d: %s", proto,
                     ost_reader_errmsg(r));
        char what[32];
        snprintf(what, sizeof what, "protocol %d", proto);
        check_pair(v, what);
        for (int p = 2; p <= 5; p++) {
            const void *data;
            size_t len;
            cr_assert_eq(ost_writer_set_protocol(w, p), 0);
            cr_assert_eq(ost_dump(w, v, &data, &len), 0, "%s", ost_writer_errmsg(w));
            /* ostore reads its own output the same way */
            ost_value again;
            cr_assert_eq(ost_load(r, data, len, &again, NULL), 0, "%s", ost_reader_errmsg(r));
            cr_assert(ost_same_graph(v, again), "protocol %d -> %d", proto, p);
            ost_release(again);
            char *h = hexs(data, len);
            buf_add(&back, h);
            buf_add(&back, "\n");
            free(h);
        }
        ost_release(v);
    }
    cr_assert_eq(proto, 6);
    py_check_all(back.data, PAIR_PY);
    free(back.data);
    free(pkl);
    free(out);
    ost_reader_free(r);
    ost_writer_free(w);
}

OST_TEST(items, built_from_c_load_in_python) {
    ost_value d = ost_instance_new(ost_global("interop_classes", "DictSub"));
    ost_value items = ost_dict_new();
    ost_dict_set(items, ost_str_c("a"), ost_int(1));
    ost_value b = ost_list_new(2);
    ost_list_append(b, ost_int(1));
    ost_list_append(b, ost_int(2));
    ost_dict_set(items, ost_str_c("b"), b);
    cr_assert_eq(ost_instance_set_items(d, items), 0);
    cr_assert_eq(ost_instance_setattr(d, "colour", ost_str_c("red")), 0);
    ost_value l = ost_instance_new(ost_global("interop_classes", "ListSub"));
    ost_value li = ost_list_new(2);
    ost_list_append(li, ost_int(1));
    ost_list_append(li, ost_str_c("two"));
    cr_assert_eq(ost_instance_set_items(l, li), 0);
    cr_assert_eq(ost_instance_setattr(l, "name", ost_str_c("l")), 0);
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, d);
    ost_tuple_set(t, 1, l);
    check_pair(t, "built in C");
    ost_writer *w = ost_writer_new();
    ost_buf lines = {0};
    for (int p = 2; p <= 5; p++) {
        const void *data;
        size_t len;
        ost_writer_set_protocol(w, p);
        cr_assert_eq(ost_dump(w, t, &data, &len), 0, "%s", ost_writer_errmsg(w));
        char *h = hexs(data, len);
        buf_add(&lines, h);
        buf_add(&lines, "\n");
        free(h);
    }
    py_check_all(lines.data, PAIR_PY);
    free(lines.data);
    ost_writer_free(w);
    ost_decref(t);
}

OST_TEST(items, shared_and_self_referencing_items) {
    /* d['me'] is d, and d's attribute 'same' is the list in its items */
    char *out = py_run(PY_PROLOGUE
                       "d = DictSub(); s = [1]; d['me'] = d; d['s'] = s; d.same = s\n"
                       "for p in range(2, 6): print(pickle.dumps(d, p).hex())\n",
                       "", 0);
    ost_reader *r = ost_reader_new();
    ost_writer *w = ost_writer_new();
    ost_buf back = {0};
    uint8_t *pkl = malloc(strlen(out));
    for (char *line = out; *line; line = strchr(line, '\n') + 1) {
        size_t n = unhex(line, pkl);
        ost_value v;
        cr_assert_eq(ost_load(r, pkl, n, &v, NULL), 0, "%s", ost_reader_errmsg(r));
        ost_value items = ost_instance_items(v);
        cr_assert_eq(ost_dict_get_c(items, "me"), v, "the instance holds itself");
        cr_assert_eq(ost_dict_get_c(items, "s"), ost_instance_getattr(v, "same"));
        const void *data;
        size_t len;
        cr_assert_eq(ost_dump(w, v, &data, &len), 0, "%s", ost_writer_errmsg(w));
        char *h = hexs(data, len);
        buf_add(&back, h);
        buf_add(&back, "\n");
        free(h);
        ost_release(v);
    }
    char *res = py_run(PY_PROLOGUE
                       "for line in open(sys.argv[1]):\n"
                       "    d = pickle.loads(bytes.fromhex(line.strip()))\n"
                       "    print(type(d).__name__, d['me'] is d, d['s'] is d.same, d['s'])\n",
                       back.data, back.len);
    cr_assert_str_eq(res, "DictSub True True [1]\nDictSub True True [1]\n"
                          "DictSub True True [1]\nDictSub True True [1]\n");
    free(res);
    free(back.data);
    free(pkl);
    free(out);
    ost_reader_free(r);
    ost_writer_free(w);
}

OST_TEST(items, set_items_checks_its_arguments) {
    ost_value inst = ost_instance_new(ost_global("m", "D"));
    cr_assert_eq(ost_instance_items(inst), 0);
    cr_assert_eq(ost_instance_set_items(inst, ost_int(3)), OST_ETYPE);
    cr_assert_eq(ost_instance_set_items(inst, ost_tuple_new(0)), OST_ETYPE);
    cr_assert_eq(ost_instance_items(inst), 0, "unchanged on failure");
    cr_assert_eq(ost_instance_set_items(ost_int(1), ost_list_new(0)), OST_EINVAL);
    cr_assert_eq(ost_instance_set_items(inst, ost_list_new(0)), 0);
    cr_assert_eq(ost_typeof(ost_instance_items(inst)), OST_T_LIST);
    cr_assert_eq(ost_instance_set_items(inst, OST_NOVALUE), 0, "removes them");
    cr_assert_eq(ost_instance_items(inst), 0);
    /* a class with fields, and a persistent class: their records keep no items */
    const char *fields[] = {"x"};
    ost_class_def def = {.module = "m", .name = "S", .fields = fields, .nfields = 1};
    ost_value slotted = ost_instance_new(ost_class_new(&def));
    cr_assert_eq(ost_instance_set_items(slotted, ost_dict_new()), OST_EINVAL);
    cr_assert_eq(ost_instance_items(slotted), 0);
    ost_class_def pdef = {.module = "m", .name = "P", .persistent = true};
    ost_value pers = ost_instance_new(ost_class_new(&pdef));
    cr_assert_eq(ost_instance_set_items(pers, ost_dict_new()), OST_EINVAL);
    /* a state-only pickle cannot hold items */
    ost_instance_set_items(inst, ost_dict_new());
    ost_writer *w = ost_writer_new();
    const void *data;
    size_t len;
    cr_assert_eq(ost_dump_state(w, inst, &data, &len), OST_EINVAL);
    cr_assert(strstr(ost_writer_errmsg(w), "items"), "%s", ost_writer_errmsg(w));
    ost_writer_free(w);
    ost_decref(inst);
    ost_decref(slotted);
    ost_decref(pers);
}

OST_TEST(items, equality_and_repr_see_the_items) {
    ost_value a = ost_instance_new(ost_global("m", "L")), b = ost_instance_new(ost_global("m", "L"));
    cr_assert(ost_equal(a, b));
    ost_value la = ost_list_new(1);
    ost_list_append(la, ost_int(1));
    ost_instance_set_items(a, la);
    cr_assert(!ost_equal(a, b), "items differ");
    cr_assert(!ost_same_graph(a, b));
    ost_value lb = ost_list_new(1);
    ost_list_append(lb, ost_int(1));
    ost_instance_set_items(b, lb);
    cr_assert(ost_equal(a, b));
    cr_assert(ost_same_graph(a, b));
    ost_instance_setattr(a, "x", ost_int(2));
    ost_buf out = {0};
    cr_assert_eq(ost_repr(a, &out), 0);
    cr_assert_str_eq(out.data, "m.L(x=2).extend([1])");
    ost_buf_free(&out);
    ost_value d = ost_instance_new(ost_global("m", "D"));
    ost_value items = ost_dict_new();
    ost_dict_set(items, ost_str_c("k"), ost_int(1));
    ost_instance_set_items(d, items);
    cr_assert_eq(ost_repr(d, &out), 0);
    cr_assert_str_eq(out.data, "m.D().update({'k': 1})");
    ost_buf_free(&out);
    ost_decref(a);
    ost_decref(b);
    ost_decref(d);
}

static int find_p(void *ud, const char *module, const char *name, ost_value *cls) {
    if (!strcmp(module, "m") && !strcmp(name, "P")) *cls = ost_incref((ost_value)ud);
    return 0;
}

OST_TEST(items, reader_refuses_items_on_a_persistent_class) {
    ost_class_def pdef = {.module = "m", .name = "P", .persistent = true};
    ost_value cls = ost_class_new(&pdef);
    /* NEWOBJ m.P, then 'k' 1 SETITEM */
    static const uint8_t pkl[] = "\x80\x02" "cm\nP\n" ")\x81" "X\x01\x00\x00\x00k" "K\x01" "s.";
    ost_reader *r = ost_reader_new();
    ost_value v;
    /* a generic class takes the item */
    cr_assert_eq(ost_load(r, pkl, sizeof pkl - 1, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_len(ost_instance_items(v)), 1);
    ost_decref(v);
    /* a persistent class's record could not keep it */
    ost_reader_set_find_global(r, find_p, (void *)cls);
    cr_assert_eq(ost_load(r, pkl, sizeof pkl - 1, &v, NULL), OST_EUNSUPPORTED);
    cr_assert(strstr(ost_reader_errmsg(r), "m.P"), "%s", ost_reader_errmsg(r));
    ost_decref(cls);
    ost_reader_free(r);
}

/* ---- Python 2 str ------------------------------------------------------------- */

/* Pickles with Python 2 str, each as Python 2 wrote them. */
static const struct {
    const char *name;
    const char *pkl;
    size_t len;
} py2[] = {
#define P(n, s) {n, s, sizeof s - 1}
    P("STRING latin-1 escape", "S'caf\\xe9'\np0\n."),
    P("STRING raw byte", "S'\xe9t\xe9'\np0\n."),
    P("STRING ascii", "S'plain'\np0\n."),
    P("BINSTRING", "T\x05\x00\x00\x00na\xefve."),
    P("SHORT_BINSTRING utf-8 bytes", "\x80\x02U\x02\xc3\xa9."),
    P("SHORT_BINSTRING nul and 0xff", "U\x03\xff\x00" "a."),
    P("SHORT_BINSTRING empty", "U\x00."),
    P("in a list", "]q\x00(U\x01" "aU\x01\x80" "e."),
#undef P
};

/* What Python's pickle.loads(data, encoding=enc) gives for each pickle of
 * py2: one line each, repr(value) or "ERR <byte> <position>". */
static char *py2_oracle(const char *enc) {
    ost_buf in = {0};
    for (size_t i = 0; i < sizeof py2 / sizeof *py2; i++) {
        char *h = hexs(py2[i].pkl, py2[i].len);
        buf_add(&in, h);
        buf_add(&in, "\n");
        free(h);
    }
    char script[1024];
    snprintf(script, sizeof script,
             "import sys, pickle\n"
             "for line in open(sys.argv[1]):\n"
             "    try: print(repr(pickle.loads(bytes.fromhex(line.strip()), encoding='%s')))\n"
             "    except UnicodeDecodeError as e: print('ERR 0x%%02x' %% e.object[e.start])\n",
             enc);
    char *out = py_run(script, in.data, in.len);
    free(in.data);
    return out;
}

static void check_py2_mode(ost_py2str mode, const char *enc) {
    char *want = py2_oracle(enc);
    ost_reader *r = ost_reader_new();
    cr_assert_eq(ost_reader_set_py2str(r, mode), 0);
    cr_assert_eq(ost_reader_get_py2str(r), mode);
    char *line = want;
    for (size_t i = 0; i < sizeof py2 / sizeof *py2; i++) {
        char *eol = strchr(line, '\n');
        cr_assert(eol, "python printed too few lines");
        *eol = 0;
        ost_value v;
        int rc = ost_load(r, py2[i].pkl, py2[i].len, &v, NULL);
        if (strncmp(line, "ERR ", 4) == 0) {
            cr_assert_eq(rc, OST_EDECODE, "%s (%s): Python fails, ostore: %s", py2[i].name, enc,
                         ost_reader_errmsg(r));
            cr_assert(strstr(ost_reader_errmsg(r), line + 4), "%s: the message names %s: %s",
                      py2[i].name, line + 4, ost_reader_errmsg(r));
            cr_assert(strstr(ost_reader_errmsg(r), "at offset "), "%s", ost_reader_errmsg(r));
        } else {
            cr_assert_eq(rc, 0, "%s (%s): %s", py2[i].name, enc, ost_reader_errmsg(r));
            ost_buf out = {0};
            ost_repr(v, &out);
            cr_assert_str_eq(out.data, line, "%s (%s)", py2[i].name, enc);
            ost_buf_free(&out);
            ost_decref(v);
        }
        line = eol + 1;
    }
    ost_reader_free(r);
    free(want);
}

OST_TEST(py2str, ascii_is_the_default_and_strict_like_python) {
    ost_reader *r = ost_reader_new();
    cr_assert_eq(ost_reader_get_py2str(r), OST_PY2STR_ASCII);
    /* BINSTRING at offset 2, its byte 0xef at index 2 of the text */
    static const char pkl[] = "\x80\x02T\x05\x00\x00\x00na\xefve.";
    ost_value v;
    cr_assert_eq(ost_load(r, pkl, sizeof pkl - 1, &v, NULL), OST_EDECODE);
    cr_assert_eq(v, 0);
    cr_assert_eq(ost_reader_erroffset(r), 2);
    cr_assert(strstr(ost_reader_errmsg(r), "BINSTRING") && strstr(ost_reader_errmsg(r), "0xef") &&
                  strstr(ost_reader_errmsg(r), "index 2"),
              "%s", ost_reader_errmsg(r));
    ost_reader_free(r);
    check_py2_mode(OST_PY2STR_ASCII, "ASCII");
}

OST_TEST(py2str, latin1_as_python) { check_py2_mode(OST_PY2STR_LATIN1, "latin1"); }

OST_TEST(py2str, bytes_as_python) { check_py2_mode(OST_PY2STR_BYTES, "bytes"); }

OST_TEST(py2str, bad_mode_is_refused_and_changes_nothing) {
    ost_reader *r = ost_reader_new();
    cr_assert_eq(ost_reader_set_py2str(r, OST_PY2STR_BYTES), 0);
    cr_assert_eq(ost_reader_set_py2str(r, (ost_py2str)3), OST_EINVAL);
    cr_assert_eq(ost_reader_set_py2str(r, (ost_py2str)-1), OST_EINVAL);
    cr_assert_eq(ost_reader_get_py2str(r), OST_PY2STR_BYTES);
    ost_reader_free(r);
}

/* ---- protocol 0 STRING escapes ---------------------------------------------------- */

OST_TEST(escapes, string_escapes_as_cpython) {
    /* each case is the text between S and the newline */
    static const char *const cases[] = {
        "'\\'",      "'ab\\\\\\'", "'a\\\\'",  "'\\x4'",   "'\\x4g'",  "'\\x41'",
        "'\\777'",   "'\\400'",    "'\\q'",    "'\\0'",    "'\\12a'",  "\"\\\"\"",
        "'\\''",     "'\\N{x}'",   "'\\u1234'", "'\\8'",   "'\\a\\b\\f\\n\\r\\t\\v'",
        "'\\\r'",    "'\\x'",      "'\\'\\'",  "'\\\\'",   "''",       "'",
        "'a\"",      "\"a\"",      "'\\xFf'",  "'\\1234'", "'\\\\\\\\'",
    };
    size_t n = sizeof cases / sizeof *cases;
    ost_buf in = {0};
    for (size_t i = 0; i < n; i++) {
        char pkl[64];
        int len = snprintf(pkl, sizeof pkl, "S%s\n.", cases[i]);
        char *h = hexs(pkl, (size_t)len);
        buf_add(&in, h);
        buf_add(&in, "\n");
        free(h);
    }
    char *want = py_run("import sys, pickle, warnings\n"
                        "warnings.simplefilter('ignore')\n"
                        "for line in open(sys.argv[1]):\n"
                        "    try: print(repr(pickle.loads(bytes.fromhex(line.strip()), "
                        "encoding='bytes')))\n"
                        "    except Exception as e: print('ERR', type(e).__name__)\n",
                        in.data, in.len);
    free(in.data);
    ost_reader *r = ost_reader_new();
    ost_reader_set_py2str(r, OST_PY2STR_BYTES);
    char *line = want;
    for (size_t i = 0; i < n; i++) {
        char *eol = strchr(line, '\n');
        cr_assert(eol);
        *eol = 0;
        char pkl[64];
        int len = snprintf(pkl, sizeof pkl, "S%s\n.", cases[i]);
        ost_value v;
        int rc = ost_load(r, pkl, (size_t)len, &v, NULL);
        if (strncmp(line, "ERR", 3) == 0) {
            cr_assert_eq(rc, OST_EBADPICKLE, "S%s: Python says %s, ostore reads it", cases[i], line);
            cr_assert(strstr(ost_reader_errmsg(r), "STRING"), "%s", ost_reader_errmsg(r));
        } else {
            cr_assert_eq(rc, 0, "S%s: Python reads %s; ostore: %s", cases[i], line,
                         ost_reader_errmsg(r));
            ost_buf out = {0};
            ost_repr(v, &out);
            cr_assert_str_eq(out.data, line, "S%s", cases[i]);
            ost_buf_free(&out);
            ost_decref(v);
        }
        line = eol + 1;
    }
    free(want);
    ost_reader_free(r);
}

OST_TEST(escapes, trailing_backslash_message) {
    static const char pkl[] = "(S'\\'\n.";
    ost_reader *r = ost_reader_new();
    ost_value v;
    cr_assert_eq(ost_load(r, pkl, sizeof pkl - 1, &v, NULL), OST_EBADPICKLE);
    cr_assert_eq(ost_reader_erroffset(r), 1);
    cr_assert(strstr(ost_reader_errmsg(r), "trailing backslash"), "%s", ost_reader_errmsg(r));
    ost_reader_free(r);
}

/* ---- nesting ------------------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bbuf;

static void put(bbuf *b, const void *p, size_t n) {
    if (b->cap - b->len < n) {
        b->cap = (b->cap + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* [[[...[]...]]]: depth lists, each but the last holding the next (EMPTY_LIST
 * each, then APPENDs, as Python writes one-item lists). */
static bbuf list_chain(size_t depth) {
    bbuf b = {0};
    put(&b, "\x80\x02", 2);
    for (size_t i = 0; i < depth; i++) put(&b, "]", 1);
    for (size_t i = 1; i < depth; i++) put(&b, "a", 1);
    put(&b, ".", 1);
    return b;
}

/* {'a': {'a': ... {'a': 1, 'b': 0} ..., 'b': 0}, 'b': 0}: depth dicts, each
 * filled by MARK ... SETITEMS as Python writes dicts of two items. */
static bbuf dict_chain(size_t depth) {
    bbuf b = {0};
    put(&b, "\x80\x02", 2);
    for (size_t i = 0; i < depth; i++) put(&b, "}(X\x01\x00\x00\x00" "a", 8);
    put(&b, "K\x01", 2);
    for (size_t i = 0; i < depth; i++) put(&b, "X\x01\x00\x00\x00" "bK\x00u", 9);
    put(&b, ".", 1);
    return b;
}

/* Python loads the pickle and prints how deep it nests (iteratively). */
static size_t py_depth(const bbuf *b) {
    char *out = py_run("import sys, pickle\n"
                       "x, n = pickle.loads(open(sys.argv[1], 'rb').read()), 0\n"
                       "while isinstance(x, (list, dict)):\n"
                       "    n += 1\n"
                       "    x = (x[0] if x else None) if isinstance(x, list) else x['a']\n"
                       "print(n)\n",
                       b->p, b->len);
    size_t n = strtoul(out, NULL, 10);
    free(out);
    return n;
}

static void check_limit(bbuf (*make)(size_t), size_t limit) {
    ost_reader *r = ost_reader_new();
    ost_limits l = {0};
    l.max_depth = limit;
    ost_reader_set_limits(r, &l);
    bbuf at = make(limit), past = make(limit + 1);
    cr_assert_eq(py_depth(&at), limit, "the pickle nests as Python reads it");
    cr_assert_eq(py_depth(&past), limit + 1);
    ost_value v;
    cr_assert_eq(ost_load(r, at.p, at.len, &v, NULL), 0, "at the limit: %s", ost_reader_errmsg(r));
    ost_decref(v);
    cr_assert_eq(ost_load(r, past.p, past.len, &v, NULL), OST_ELIMIT, "one past the limit");
    char want[64];
    snprintf(want, sizeof want, " %zu ", limit);
    cr_assert(strstr(ost_reader_errmsg(r), want) && strstr(ost_reader_errmsg(r), "(limit max_depth)"),
              "%s", ost_reader_errmsg(r));
    free(at.p);
    free(past.p);
    ost_reader_free(r);
}

OST_TEST(nesting, list_chain_at_and_past_the_limit) { check_limit(list_chain, 1000); }

OST_TEST(nesting, dict_chain_with_marks_at_and_past_the_limit) { check_limit(dict_chain, 1000); }

OST_TEST(nesting, default_limit_reads_a_200000_deep_dict_chain) {
    ost_reader *r = ost_reader_new();
    ost_limits l;
    ost_reader_get_limits(r, &l);
    cr_assert_eq(l.max_depth, 10000000);
    bbuf b = dict_chain(200000);
    ost_value v;
    cr_assert_eq(ost_load(r, b.p, b.len, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    ost_decref(v);
    free(b.p);
    ost_reader_free(r);
}

OST_TEST(nesting, siblings_are_not_nesting) {
    /* a tuple of 5000 empty lists and 5000 MARK-less pairs under a limit of
     * 10: wide, not deep */
    bbuf b = {0};
    put(&b, "\x80\x02(", 3);
    for (int i = 0; i < 5000; i++) put(&b, "]", 1);
    for (int i = 0; i < 5000; i++) put(&b, "K\x01K\x02\x86", 5);
    put(&b, "t.", 2);
    ost_reader *r = ost_reader_new();
    ost_limits l = {.max_depth = 10};
    ost_reader_set_limits(r, &l);
    ost_value v;
    cr_assert_eq(ost_load(r, b.p, b.len, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    cr_assert_eq(ost_len(v), 10000);
    ost_decref(v);
    free(b.p);
    ost_reader_free(r);
}
