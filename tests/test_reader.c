/* Unit tests of the pickle reader (serializer/reader.c): every opcode of
 * protocols 0 to 5, the builtins it maps to real values, its errors (code,
 * message, offset), truncation at every byte, limits, allocation failure,
 * hooks, and reuse of one reader. Hand-assembled pickles sit next to real
 * ones that Python makes at test time (/usr/bin/python3, or $OSTORE_PYTHON).
 *
 * Hand-assembled pickles are C string literals. A hex escape eats every hex
 * digit that follows it, so a literal is split ("K\x01" "a") wherever an
 * escape is followed by [0-9a-fA-F]. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ostore.h"

/* ---- helpers --------------------------------------------------------------- */

#include "leakcheck.h"

/* A reader test: its body, then the leak check. */
#define READER_TEST(name, ...) OST_TEST(reader, name, ##__VA_ARGS__)

#define B(lit) (lit), (sizeof(lit) - 1)

static uint64_t live(void) {
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    return st.live_objects;
}

/* repr of v, malloc'ed; the caller frees it. */
static char *repr_of(ost_value v) {
    ost_buf b = {0};
    cr_assert_eq(ost_repr(v, &b), 0, "ost_repr failed");
    return b.data;
}

static void assert_repr(ost_value v, const char *want) {
    char *s = repr_of(v);
    cr_assert_str_eq(s, want, "repr is\n  %s\nwant\n  %s", s, want);
    free(s);
}

/* Loads from a heap copy of exactly n bytes, so that ASan sees any read
 * past the end. */
static int load_copy(ost_reader *r, const void *d, size_t n, ost_value *out,
                     size_t *consumed) {
    void *c = malloc(n ? n : 1);
    cr_assert(c);
    if (n) memcpy(c, d, n);
    int rc = ost_load(r, c, n, out, consumed);
    free(c);
    return rc;
}

/* Loads d[0..n) (all of it) and returns the value; the caller releases it. */
static ost_value load_ok_r(ost_reader *r, const char *d, size_t n) {
    ost_value v = 1234;
    size_t used = 99999;
    int rc = load_copy(r, d, n, &v, &used);
    cr_assert_eq(rc, 0, "load failed: %s", ost_reader_errmsg(r));
    cr_assert_neq(v, 0);
    cr_assert_eq(used, n, "consumed %zu of %zu", used, n);
    cr_assert_str_eq(ost_reader_errmsg(r), "");
    return v;
}

static ost_value load_ok(const char *d, size_t n) {
    ost_reader *r = ost_reader_new();
    cr_assert(r);
    ost_value v = load_ok_r(r, d, n);
    ost_reader_free(r);
    return v;
}

static void expect_repr_r(ost_reader *r, const char *d, size_t n, const char *want) {
    uint64_t l0 = live();
    ost_value v = load_ok_r(r, d, n);
    assert_repr(v, want);
    ost_release(v);
    cr_assert_eq(live(), l0, "objects leaked: %llu -> %llu", (unsigned long long)l0,
                 (unsigned long long)live());
}

static void expect_repr(const char *d, size_t n, const char *want) {
    ost_reader *r = ost_reader_new();
    expect_repr_r(r, d, n, want);
    ost_reader_free(r);
}
#define EXPECT_REPR(lit, want) expect_repr(B(lit), (want))

/* Checks a failed load: its code, *out cleared, message naming the code and
 * "at offset N" (and sub, if not NULL), the offset, and no leaked object. */
static void expect_err_r(ost_reader *r, const char *d, size_t n, int code, size_t off,
                         const char *sub) {
    uint64_t l0 = live();
    ost_value v = 1234;
    size_t used = 777;
    int rc = load_copy(r, d, n, &v, &used);
    const char *m = ost_reader_errmsg(r);
    cr_assert_eq(rc, code, "want %s, got %s (%s)", ost_err_name(code), ost_err_name(rc), m);
    cr_assert_eq(v, 0, "*out not cleared on failure");
    cr_assert_eq(used, 0, "*consumed not cleared on failure");
    cr_assert(strstr(m, ost_err_name(code)), "message '%s' lacks %s", m, ost_err_name(code));
    char at[64];
    snprintf(at, sizeof at, "at offset %zu", off);
    cr_assert(strstr(m, at), "message '%s' lacks '%s'", m, at);
    cr_assert_eq(ost_reader_erroffset(r), off, "offset %zu, want %zu (%s)",
                 ost_reader_erroffset(r), off, m);
    if (sub) cr_assert(strstr(m, sub), "message '%s' lacks '%s'", m, sub);
    cr_assert_eq(live(), l0, "objects leaked on failure: %llu -> %llu",
                 (unsigned long long)l0, (unsigned long long)live());
}

static void expect_err(const char *d, size_t n, int code, size_t off, const char *sub) {
    ost_reader *r = ost_reader_new();
    expect_err_r(r, d, n, code, off, sub);
    ost_reader_free(r);
}
#define EXPECT_ERR(lit, code, off, sub) expect_err(B(lit), (code), (off), (sub))

static bool str_is(ost_value v, const char *s) {
    size_t n;
    const char *d = ost_data(v, &n);
    return ost_typeof(v) == OST_T_STR && d && n == strlen(s) && memcmp(d, s, n) == 0;
}

/* An allocator that fails its Nth call (malloc or realloc) and keeps count
 * of the blocks it has handed out and not yet taken back. */
static long g_fail_at, g_calls, g_blocks;
static size_t g_largest; /* largest size asked for */

static void *fi_malloc(size_t n) {
    if (n > g_largest) g_largest = n;
    if (++g_calls == g_fail_at) return NULL;
    void *p = malloc(n);
    if (p) g_blocks++;
    return p;
}
static void *fi_realloc(void *p, size_t n) {
    if (n > g_largest) g_largest = n;
    if (++g_calls == g_fail_at) return NULL;
    void *q = realloc(p, n);
    if (q && !p) g_blocks++;
    return q;
}
static void fi_free(void *p) {
    if (p) {
        g_blocks--;
        free(p);
    }
}
static const ost_allocator fi_alloc = {fi_malloc, fi_realloc, fi_free};

/* ---- hooks used by several tests --------------------------------------------- */

/* persistent_load: mode 0 returns persistent(pid), 1 fails with
 * OST_ENOTFOUND, 2 returns 0 without an object, 3 returns the str
 * "loaded:" + pid. Records the calls and the repr of the last pid. */
typedef struct {
    int mode;
    int calls;
    char last[128];
} pl_ctx;

static int pl_hook(void *ud, ost_value pid, ost_value *obj) {
    pl_ctx *c = ud;
    c->calls++;
    char *s = repr_of(pid);
    snprintf(c->last, sizeof c->last, "%s", s);
    free(s);
    switch (c->mode) {
    case 0: *obj = ost_persref(ost_incref(pid)); return *obj ? 0 : OST_ENOMEM;
    case 1: return OST_ENOTFOUND;
    case 2: return 0;
    default: {
        char buf[160];
        size_t n;
        const char *d = ost_data(pid, &n);
        snprintf(buf, sizeof buf, "loaded:%.*s", (int)n, d ? d : "?");
        *obj = ost_str_c(buf);
        return *obj ? 0 : OST_ENOMEM;
    }
    }
}

static int pl_persref(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* find_global: mode 0 accepts everything as a generic global, 1 swaps
 * mymod.Old for newmod.New, 2 refuses everything with OST_EUNKNOWNCLASS, 3
 * replaces mymod.Const with the str 'replaced', 4 refuses the modules of
 * the builtins the reader knows. Records each call. */
typedef struct {
    int mode;
    int calls;
    char seen[16][96];
} fg_ctx;

static int fg_hook(void *ud, const char *module, const char *name, ost_value *cls) {
    fg_ctx *c = ud;
    if (c->calls < 16) snprintf(c->seen[c->calls], sizeof c->seen[0], "%s.%s", module, name);
    c->calls++;
    if (c->mode == 1 && !strcmp(module, "mymod") && !strcmp(name, "Old")) {
        *cls = ost_global("newmod", "New");
        return *cls ? 0 : OST_ENOMEM;
    }
    if (c->mode == 2) return OST_EUNKNOWNCLASS;
    if (c->mode == 4 && (!strcmp(module, "builtins") || !strcmp(module, "_codecs") ||
                         !strcmp(module, "copyreg") || !strcmp(module, "__builtin__") ||
                         !strcmp(module, "copy_reg")))
        return OST_EUNKNOWNCLASS;
    if (c->mode == 3 && !strcmp(name, "Const")) {
        *cls = ost_str_c("replaced");
        return *cls ? 0 : OST_ENOMEM;
    }
    return 0;
}

/* ---- pickles made by Python at test time ------------------------------------ */

/* The script prints one line per pickle: name, protocol, 1 if FRAME opcodes
 * were stripped, the pickle in hex, and the repr ost_repr must give (in hex,
 * UTF-8 with surrogatepass). Instances print as module.Name(attr=value) via
 * __repr__ methods, as ost_repr does. Where a list or an instance is
 * shared, ost_repr labels it (#1=[1], then #1#) and Python's repr prints it
 * twice, so the case gives its expected text (or a function of the value
 * that makes it). It avoids backslashes and double quotes so it can sit in
 * a C string. */
static const char py_script[] =
    "import pickle, pickletools, io, reprlib\n"
    "class Foo:\n"
    "    def __init__(self):\n"
    "        self.x = 1\n"
    "        self.y = [1, 2]\n"
    "    @reprlib.recursive_repr('...')\n"
    "    def __repr__(self):\n"
    "        return '__main__.Foo(' + ', '.join(k + '=' + repr(v) for k, v in "
    "self.__dict__.items()) + ')'\n"
    "class Red:\n"
    "    def __reduce__(self):\n"
    "        return (Red, (1, 2))\n"
    "    def __repr__(self):\n"
    "        return '__main__.Red(1, 2)'\n"
    "class NA:\n"
    "    def __new__(cls, *a):\n"
    "        return object.__new__(cls)\n"
    "    def __getnewargs__(self):\n"
    "        return (5,)\n"
    "class NX:\n"
    "    def __new__(cls, *a, **k):\n"
    "        return object.__new__(cls)\n"
    "    def __getnewargs_ex__(self):\n"
    "        return ((1,), {'k': 2})\n"
    "class Ref:\n"
    "    def __init__(self, k):\n"
    "        self.k = k\n"
    "    def __repr__(self):\n"
    "        return 'persistent(' + repr(self.k) + ')'\n"
    "class PP(pickle.Pickler):\n"
    "    def persistent_id(self, o):\n"
    "        return o.k if isinstance(o, Ref) else None\n"
    "def cyc():\n"
    "    l = []\n"
    "    l.append(l)\n"
    "    d = {}\n"
    "    d['self'] = d\n"
    "    t = ([],)\n"
    "    t[0].append(t)\n"
    "    f = Foo()\n"
    "    f.me = f\n"
    "    return [l, d, t, f]\n"
    "def deep(n):\n"
    "    v = []\n"
    "    for i in range(n):\n"
    "        v = [i, v]\n"
    "    return v\n"
    "def mix():\n"
    "    a = [1]\n"
    "    f = Foo()\n"
    "    return {'ints': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**62,\n"
    "                     -2**63, 2**64, -2**100],\n"
    "            'f': [1.5, -0.0, 1e300],\n"
    "            's': ['', 'h' + chr(0xe9) + 'llo', chr(0x4e2d), chr(0x1f600),\n"
    "                  'a' + chr(10) + 'b' + chr(92) + chr(13) + chr(0) + chr(34)],\n"
    "            'b': [b'', bytes([0, 255, 10]), bytearray(b'ab')],\n"
    "            't': (1, (2, 3), (4, 5, 6, 7), ()),\n"
    "            'set': {1, 2}, 'fs': frozenset({3}), 'es': set(),\n"
    "            'obj': f, 'obj2': f, 'shared': (a, a), 'none': None,\n"
    "            'bools': [True, False], 'red': Red(), 'cyc': cyc()}\n"
    "def mix_repr(o):\n"
    "    f = repr(o['obj'])\n"
    "    old = ' ' + repr('obj') + ': ' + f + ', ' + repr('obj2') + ': ' + f + ', '\n"
    "    new = ' ' + repr('obj') + ': #1=' + f + ', ' + repr('obj2') + ': #1#, '\n"
    "    r = repr(o).replace(old, new).replace('([1], [1])', '(#2=[1], #2#)')\n"
    "    assert r.count('#') == 6\n"
    "    return r\n"
    "cases = [\n"
    "    ('scalars', lambda: (None, True, False, 0, 1, -1, 255, 256, 65535, 65536,\n"
    "        -2**31, 2**31 - 1, 2**31, 2**62, 2**62 - 1, -2**62, -2**62 - 1,\n"
    "        -2**63, 2**64, -(2**100), 1.5, -0.0, 1e300, 1e-300, float('inf'),\n"
    "        float('-inf'), float('nan'), 0.1), 0, 5, None),\n"
    "    ('text', lambda: ('', 'abc', chr(0xe9), chr(0x4e2d) + chr(0x6587),\n"
    "        chr(0x1f600), 'a' + chr(10) + 'b' + chr(92) + 'c' + chr(34) + chr(39),\n"
    "        chr(0) + chr(26) + chr(13) + chr(9), chr(0xd800),\n"
    "        'x' + chr(0xdfff) + 'y', 'a' * 300), 0, 5, None),\n"
    "    ('bytes', lambda: (b'', b'abc', bytes(range(256)), bytearray(b'xy'),\n"
    "        bytearray(), b'z' * 300), 0, 5, None),\n"
    "    ('containers', lambda: ([], [1, [2, [3]]], (), (1,), (1, 2), (1, 2, 3),\n"
    "        (1, 2, 3, 4), {}, {'a': 1, 2: 'b', (1, 2): [3]}, {1}, frozenset({2}),\n"
    "        set(), frozenset(), {1, 2, 3}), 0, 5, None),\n"
    "    ('biglist', lambda: list(range(2500)), 0, 5, None),\n"
    "    ('bigdict', lambda: {i: str(i) for i in range(1500)}, 0, 5, None),\n"
    "    ('bigset', lambda: set(range(1200)), 0, 5, None),\n"
    "    ('shared', lambda: (lambda a: (a, a, [a]))([1]), 0, 5, '(#1=[1], #1#, [#1#])'),\n"
    "    ('cyclic', cyc, 0, 5, None),\n"
    "    ('deep', lambda: deep(120), 0, 5, None),\n"
    "    ('foo', Foo, 0, 5, None),\n"
    "    ('globals', lambda: (Foo, len, Red, frozenset), 0, 5,\n"
    "        '(__main__.Foo, builtins.len, __main__.Red, builtins.frozenset)'),\n"
    "    ('reduce', Red, 0, 5, None),\n"
    "    ('newargs', NA, 2, 5, '__main__.NA.__new__(5)'),\n"
    "    ('newargs01', NA, 0, 1, '__main__.NA()'),\n"
    "    ('newargs_ex', NX, 4, 5, '__main__.NX.__new__(1, **{' + repr('k') + ': 2})'),\n"
    "    ('pers', lambda: [Ref('oid-1'), 5, Ref('oid-2'), [Ref('oid-1')]], 0, 5, None),\n"
    "    ('mix', mix, 0, 5, mix_repr),\n"
    "]\n"
    "def unframe(data):\n"
    "    ops = list(pickletools.genops(data))\n"
    "    out = b''\n"
    "    for i, (op, arg, pos) in enumerate(ops):\n"
    "        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)\n"
    "        if op.name != 'FRAME':\n"
    "            out += data[pos:end]\n"
    "    return out\n"
    "for name, make, lo, hi, exp in cases:\n"
    "    for proto in range(lo, hi + 1):\n"
    "        obj = make()\n"
    "        f = io.BytesIO()\n"
    "        PP(f, protocol=proto).dump(obj)\n"
    "        data = f.getvalue()\n"
    "        e = exp(obj) if callable(exp) else exp if exp is not None else repr(obj)\n"
    "        e = e.encode('utf-8', 'surrogatepass')\n"
    "        print(name, proto, 0, data.hex(), e.hex())\n"
    "        u = unframe(data)\n"
    "        if u != data:\n"
    "            print(name, proto, 1, u.hex(), e.hex())\n";

typedef struct {
    char name[32];
    int proto;
    int unframed;
    uint8_t *data;
    size_t len;
    char *want;
} py_pickle;

static py_pickle *g_py;
static size_t g_npy;

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static uint8_t *unhex(const char *s, size_t *n) {
    size_t len = strlen(s);
    cr_assert(len % 2 == 0, "odd hex length");
    uint8_t *b = malloc(len / 2 + 1);
    cr_assert(b);
    for (size_t i = 0; i < len / 2; i++) {
        int h = hexval(s[2 * i]), l = hexval(s[2 * i + 1]);
        cr_assert(h >= 0 && l >= 0, "bad hex from python");
        b[i] = (uint8_t)(h << 4 | l);
    }
    b[len / 2] = 0;
    *n = len / 2;
    return b;
}

static void py_free(void) {
    for (size_t i = 0; i < g_npy; i++) {
        free(g_py[i].data);
        free(g_py[i].want);
    }
    free(g_py);
    g_py = NULL;
    g_npy = 0;
}

/* Runs the script once per test process and parses its output. */
static void py_load(void) {
    if (g_py) return;
    const char *py = getenv("OSTORE_PYTHON");
    if (!py || !*py) py = "/usr/bin/python3";
    cr_assert_eq(setenv("OST_READER_TEST_PY", py_script, 1), 0);
    cr_assert_eq(setenv("OST_READER_TEST_EXE", py, 1), 0);
    FILE *f = popen("\"$OST_READER_TEST_EXE\" -c \"$OST_READER_TEST_PY\"", "r");
    cr_assert(f, "popen failed");
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    while (getline(&line, &cap, f) > 0) {
        char name[32], *hexp = malloc(strlen(line) + 1), *hexw = malloc(strlen(line) + 1);
        int proto, unframed;
        cr_assert(hexp && hexw);
        cr_assert_eq(sscanf(line, "%31s %d %d %s %s", name, &proto, &unframed, hexp, hexw),
                     5, "bad line from python: %.80s", line);
        if (g_npy == alloc) {
            alloc = alloc ? alloc * 2 : 64;
            g_py = realloc(g_py, alloc * sizeof *g_py);
            cr_assert(g_py);
        }
        py_pickle *p = &g_py[g_npy++];
        memcpy(p->name, name, sizeof name);
        p->proto = proto;
        p->unframed = unframed;
        p->data = unhex(hexp, &p->len);
        size_t wl;
        p->want = (char *)unhex(hexw, &wl);
        free(hexp);
        free(hexw);
    }
    free(line);
    int st = pclose(f);
    cr_assert_eq(st, 0, "python failed (status %d)", st);
    cr_assert_gt(g_npy, 100, "python made only %zu pickles", g_npy);
    atexit(py_free);
}

static const py_pickle *py_find(const char *name, int proto, int unframed) {
    py_load();
    for (size_t i = 0; i < g_npy; i++)
        if (!strcmp(g_py[i].name, name) && g_py[i].proto == proto &&
            g_py[i].unframed == unframed)
            return &g_py[i];
    cr_assert_fail("no python pickle %s protocol %d", name, proto);
    return NULL;
}

/* ---- hand-assembled pickles shared by the truncation and failure tests ---- */

/* Protocols 0 and 1: text opcodes, INST, OBJ, PERSID, a cycle, POP_MARK. */
static const char hand_text[] =
    "(S'a\\x41\\n'\n"          /* STRING 'aA\n' */
    "I01\n"                    /* True */
    "L12345678901234567890123L\n"
    "F1.5\n"
    "Poid\n"                   /* persistent id */
    "(imymod\nKls\n"           /* INST, no arguments: an instance */
    "(dS'k'\nI1\nsb"           /* BUILD with {'k': 1} */
    "(cmymod\nKls\nI1\no"      /* OBJ with an argument: a reduce value */
    "(lp0\ng0\na"              /* a list holding itself */
    "Vx\\u00e9\\U0001f600\n"   /* UNICODE */
    "p1\n0g1\n"                /* PUT, POP, GET */
    "I7\n(I8\n1"               /* POP_MARK drops 8 */
    "2"                        /* DUP */
    "t.";
static const char hand_text_repr[] =
    "('aA\\n', True, 12345678901234567890123, 1.5, persistent('oid'), "
    "mymod.Kls(k=1), mymod.Kls(1), [[...]], 'x\xc3\xa9\xf0\x9f\x98\x80', "
    "7, 7)";

/* Protocol 5, binary opcodes (no FRAME; hand_framed adds one). */
static const char hand_bin[] =
    "\x80\x05("
    "\x8b\x02\x00\x00\x00\xff\x7f"                     /* LONG4 32767 */
    "T\x02\x00\x00\x00" "ab"                           /* BINSTRING */
    "\x8e\x01\x00\x00\x00\x00\x00\x00\x00" "q"         /* BINBYTES8 */
    "\x96\x01\x00\x00\x00\x00\x00\x00\x00" "r\x98"     /* BYTEARRAY8, READONLY_BUFFER */
    "\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "u"         /* BINUNICODE8 */
    "\x8c\x05" "mymod\x8c\x03" "Cls\x93\x94"           /* STACK_GLOBAL, MEMOIZE */
    ")}\x92"                                           /* NEWOBJ_EX, no args */
    "h\x00" "K\x01\x85}\x8c\x01" "kK\x02s\x92"         /* NEWOBJ_EX (1,) {'k': 2} */
    "h\x00" ")\x81"                                    /* NEWOBJ, no args */
    "\x8f(K\x01K\x02\x90"                              /* EMPTY_SET, ADDITEMS */
    "(K\x03\x91"                                       /* FROZENSET */
    "]\x94(K\x01K\x02" "e"                             /* list, MEMOIZE, APPENDS */
    "h\x01"                                            /* BINGET the list */
    "}(K\x01K\x02u"                                    /* SETITEMS */
    "N\x88\x89"
    "J\xff\xff\xff\xff" "M\xff\xff"
    "G\x3f\xf8\x00\x00\x00\x00\x00\x00"
    "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01"    /* LONG1 2**64 */
    "C\x02" "ab" "B\x01\x00\x00\x00" "z"
    "X\x02\x00\x00\x00\xc3\xa9"
    "U\x01" "x"
    "t.";
static const char hand_bin_repr[] =
    "(32767, 'ab', b'q', bytearray(b'r'), 'u', mymod.Cls(), "
    "mymod.Cls.__new__(1, **{'k': 2}), mymod.Cls(), {1, 2}, frozenset({3}), "
    "#1=[1, 2], #1#, {1: 2}, None, True, False, -1, 65535, 1.5, "
    "18446744073709551616, b'ab', b'z', '\xc3\xa9', 'x')";

/* hand_bin with its body in one FRAME; *n receives the length. */
static char *hand_framed(size_t *n) {
    size_t body = sizeof hand_bin - 1 - 2;
    char *p = malloc(2 + 9 + body);
    cr_assert(p);
    memcpy(p, "\x80\x05\x95", 3);
    for (int k = 0; k < 8; k++) p[3 + k] = (char)(uint8_t)((uint64_t)body >> (8 * k));
    memcpy(p + 11, hand_bin + 2, body);
    *n = 11 + body;
    return p;
}

/* ---- protocol 0 and 1 text opcodes -------------------------------------------- */

READER_TEST(loads_int_and_its_boolean_forms) {
    EXPECT_REPR("I42\n.", "42");
    EXPECT_REPR("I-7\n.", "-7");
    EXPECT_REPR("I+5\n.", "5");
    EXPECT_REPR("I123456789012345678901234567890\n.", "123456789012345678901234567890");
    ost_value t = load_ok(B("I01\n."));
    ost_value f = load_ok(B("I00\n."));
    cr_assert_eq(t, OST_TRUE);
    cr_assert_eq(f, OST_FALSE);
    cr_assert_eq(ost_typeof(t), OST_T_BOOL);
    ost_value one = load_ok(B("I1\n."));
    cr_assert_eq(ost_typeof(one), OST_T_INT);
    int64_t i = 0;
    cr_assert_eq(ost_int_value(one, &i), 0);
    cr_assert_eq(i, 1);
    EXPECT_ERR("I\n.", OST_EBADPICKLE, 0, "INT: bad integer text");
    EXPECT_ERR("K\x01I12a\n.", OST_EBADPICKLE, 2, "bad integer text");
    EXPECT_ERR("I12", OST_ETRUNCATED, 0, "INT: no end of line");
}

READER_TEST(loads_long_with_and_without_trailing_L) {
    EXPECT_REPR("L123L\n.", "123");
    EXPECT_REPR("L0\n.", "0");
    EXPECT_REPR("L-99999999999999999999L\n.", "-99999999999999999999");
    ost_value v = load_ok(B("L4611686018427387904L\n."));
    int64_t i = 0;
    cr_assert_eq(ost_typeof(v), OST_T_INT);
    cr_assert_eq(ost_int_value(v, &i), 0);
    cr_assert_eq(i, (int64_t)1 << 62);
    ost_decref(v);
    v = load_ok(B("L18446744073709551616L\n."));
    cr_assert_eq(ost_int_value(v, &i), OST_ELIMIT);
    ost_decref(v);
    EXPECT_ERR("LL\n.", OST_EBADPICKLE, 0, "LONG: bad integer text");
}

READER_TEST(loads_text_float) {
    EXPECT_REPR("F1.5\n.", "1.5");
    EXPECT_REPR("F-0.25\n.", "-0.25");
    EXPECT_REPR("F1e+300\n.", "1e+300");
    EXPECT_REPR("F3\n.", "3.0");
    EXPECT_REPR("Finf\n.", "inf");
    EXPECT_REPR("F-inf\n.", "-inf");
    ost_value v = load_ok(B("Fnan\n."));
    cr_assert_eq(ost_typeof(v), OST_T_FLOAT);
    cr_assert(isnan(ost_float_value(v)));
    ost_decref(v);
    v = load_ok(B("F0.1\n."));
    cr_assert_eq(ost_float_value(v), 0.1);
    ost_decref(v);
    EXPECT_ERR("Fabc\n.", OST_EBADPICKLE, 0, "FLOAT: bad text");
    EXPECT_ERR("F\n.", OST_EBADPICKLE, 0, "FLOAT");
}

READER_TEST(loads_quoted_string_with_escapes) {
    EXPECT_REPR("S'abc'\n.", "'abc'");
    EXPECT_REPR("S\"it's\"\n.", "\"it's\"");
    EXPECT_REPR("S''\n.", "''");
    /* \n \t \x41 \101 \\ \' */
    EXPECT_REPR("S'a\\nb\\tA\\x41\\101\\\\\\''\n.", "\"a\\nb\\tAAA\\\\'\"");
    /* \xe9 and a raw byte above 0x7f are not ASCII, the default
     * (tests/test_interop.c reads them as latin1 and as bytes) */
    EXPECT_ERR("S'\\xe9'\n.", OST_EDECODE, 0, "byte 0xe9 at index 0");
    EXPECT_ERR("S'\xe9\\q'\n.", OST_EDECODE, 0, "byte 0xe9 at index 0");
    /* unknown escapes stay */
    EXPECT_REPR("S'\\q'\n.", "'\\\\q'");
    ost_value v = load_ok(B("S'\\x00\\x7f'\n."));
    size_t n;
    const char *d = ost_data(v, &n);
    cr_assert_eq(ost_typeof(v), OST_T_STR);
    cr_assert_eq(n, 2);
    cr_assert(d[0] == 0 && d[1] == 0x7f);
    ost_decref(v);
    EXPECT_ERR("S'abc\n.", OST_EBADPICKLE, 0, "STRING argument is not a quoted string");
    EXPECT_ERR("Sabc\n.", OST_EBADPICKLE, 0, "not a quoted string");
    EXPECT_ERR("N0S'\\x4'\n.", OST_EBADPICKLE, 2, "bad \\x escape");
}

READER_TEST(loads_unicode_raw_unicode_escape) {
    EXPECT_REPR("V\\u00e9t\\u4e2d\\U0001f600\n.", "'\xc3\xa9t\xe4\xb8\xad\xf0\x9f\x98\x80'");
    EXPECT_REPR("V\xe9\n.", "'\xc3\xa9'"); /* raw bytes are Latin-1 */
    EXPECT_REPR("Va\\b\n.", "'a\\\\b'");   /* only \u and \U are escapes */
    EXPECT_REPR("V\n.", "''");
    /* a lone surrogate comes out as its three-byte (surrogatepass) form */
    ost_value v = load_ok(B("V\\ud800\n."));
    size_t n;
    const char *d = ost_data(v, &n);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(d, "\xed\xa0\x80", 3), 0);
    ost_decref(v);
    EXPECT_ERR("V\\u12\n.", OST_EBADPICKLE, 0, "bad \\u escape in UNICODE");
    EXPECT_ERR("V\\u12zz\n.", OST_EBADPICKLE, 0, "bad \\u escape");
    EXPECT_ERR("V\\U00110000\n.", OST_EBADPICKLE, 0, "bad \\u escape");
    EXPECT_ERR("Vabc", OST_ETRUNCATED, 0, "UNICODE: no end of line");
}

READER_TEST(text_memo_put_and_get) {
    EXPECT_REPR("(lp0\nI1\naI2\nag0\na.", "[1, 2, [...]]");
    ost_value t = load_ok(B("((I1\nlp0\ng0\nt."));
    assert_repr(t, "(#1=[1], #1#)");
    cr_assert_eq(ost_item(t, 0), ost_item(t, 1), "GET must share, not copy");
    cr_assert_eq(ost_refcount(ost_item(t, 0)), 2);
    ost_release(t);
    /* PUT overwrites an index */
    EXPECT_REPR("I1\np3\n0I2\np3\n0g3\n.", "2");
    EXPECT_ERR("g0\n.", OST_EMEMO, 0, "memo index 0 is not set");
    EXPECT_ERR("I1\np0\ng1\n.", OST_EMEMO, 6, "memo index 1 is not set");
    EXPECT_ERR("p0\n.", OST_EBADPICKLE, 0, "PUT with an empty stack");
    EXPECT_ERR("I1\npx\n.", OST_EBADPICKLE, 3, "bad memo index text");
    EXPECT_ERR("I1\np\n.", OST_EBADPICKLE, 3, "empty memo index");
    EXPECT_ERR("I1\np99999999999999999999999\n.", OST_EBADPICKLE, 3, "bad memo index");
}

READER_TEST(loads_global_as_data_and_maps_python2_modules) {
    ost_value g = load_ok(B("cmymod\nThing\n."));
    cr_assert_eq(ost_typeof(g), OST_T_GLOBAL);
    cr_assert(str_is(ost_global_module(g), "mymod"));
    cr_assert(str_is(ost_global_name(g), "Thing"));
    ost_decref(g);
    EXPECT_REPR("c__builtin__\nlen\n.", "builtins.len");
    EXPECT_REPR("ccopy_reg\n_reconstructor\n.", "copyreg._reconstructor");
    EXPECT_REPR("cos\nsystem\n.", "os.system");
    EXPECT_ERR("cmymod\n", OST_ETRUNCATED, 0, "GLOBAL: no end of line");
    EXPECT_ERR("cmymod\nThing", OST_ETRUNCATED, 0, "GLOBAL: no end of line");
    EXPECT_ERR("c\xff\nx\n.", OST_EUTF8, 0, "invalid UTF-8 in GLOBAL");
    EXPECT_ERR("cmy\x00mod\nX\n.", OST_EBADPICKLE, 0, "global name with a NUL byte");
    EXPECT_ERR("\x8c\x03" "a\x00" "b\x8c\x01" "c\x93.", OST_EBADPICKLE, 8, "NUL byte");
}

READER_TEST(loads_inst_and_obj) {
    ost_value v = load_ok(B("(imymod\nKls\n."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    assert_repr(v, "mymod.Kls()");
    cr_assert(str_is(ost_global_name(ost_instance_class(v)), "Kls"));
    cr_assert_eq(ost_instance_state(v), OST_NONE);
    ost_decref(v);
    v = load_ok(B("(I1\nS'a'\nimymod\nKls\n."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    cr_assert_eq(ost_reduce_kind_of(v), OST_REDUCE_CALL);
    assert_repr(v, "mymod.Kls(1, 'a')");
    ost_decref(v);
    v = load_ok(B("(cmymod\nKls\no."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    assert_repr(v, "mymod.Kls()");
    ost_decref(v);
    v = load_ok(B("(cmymod\nKls\nI1\no."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    assert_repr(v, "mymod.Kls(1)");
    ost_decref(v);
    EXPECT_REPR("(imymod\nKls\n(dS'a'\nI1\nsb.", "mymod.Kls(a=1)");
    /* a second BUILD updates the attributes */
    EXPECT_REPR("(imymod\nKls\n(dS'a'\nI1\nsb(dS'b'\nI2\nsb.", "mymod.Kls(a=1, b=2)");
    EXPECT_ERR("imymod\nKls\n.", OST_EBADPICKLE, 0, "INST without a MARK");
    EXPECT_ERR("(o.", OST_EBADPICKLE, 1, "OBJ without a class");
    EXPECT_ERR("N(imymod\n", OST_ETRUNCATED, 2, "INST: no end of line");
}

READER_TEST(persid_goes_through_persistent_load) {
    pl_ctx c = {0};
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_hook, &c);
    expect_repr_r(r, B("Poid-7\n."), "persistent('oid-7')");
    cr_assert_eq(c.calls, 1);
    cr_assert_str_eq(c.last, "'oid-7'");
    c.mode = 3;
    expect_repr_r(r, B("(Pa\nPb\nl."), "['loaded:a', 'loaded:b']");
    cr_assert_eq(c.calls, 3);
    expect_err_r(r, B("P\xff\n."), OST_EUTF8, 0, "PERSID");
    cr_assert_eq(c.calls, 3, "hook called with a bad pid");
    ost_reader_free(r);
    EXPECT_ERR("N0Poid\n.", OST_ENOPERSLOAD, 2, "no persistent_load hook");
}

READER_TEST(loads_dict_list_tuple_from_marks) {
    EXPECT_REPR("(S'a'\nI1\nS'b'\nI2\nd.", "{'a': 1, 'b': 2}");
    EXPECT_REPR("(d.", "{}");
    EXPECT_REPR("(I1\nI2\nl.", "[1, 2]");
    EXPECT_REPR("(l.", "[]");
    EXPECT_REPR("(I1\nI2\nt.", "(1, 2)");
    EXPECT_REPR("(t.", "()");
    EXPECT_REPR("(I1\nt.", "(1,)");
    EXPECT_REPR("(dI1\nI2\ns.", "{1: 2}");
    EXPECT_REPR("(lI1\naI2\na.", "[1, 2]");
    /* nested marks */
    EXPECT_REPR("((I1\nl(I2\nI3\ndt.", "([1], {2: 3})");
}

READER_TEST(pop_pop_mark_and_dup) {
    EXPECT_REPR("I1\nI2\n0.", "1");
    EXPECT_REPR("I1\n(0.", "1"); /* POP with nothing above the mark drops it */
    EXPECT_REPR("I1\n(I2\nI3\n1.", "1");
    EXPECT_REPR("(I5\n2t.", "(5, 5)");
    EXPECT_REPR("]2a.", "[[...]]");
    EXPECT_ERR("0.", OST_EBADPICKLE, 0, "POP with an empty stack");
    EXPECT_ERR("1.", OST_EBADPICKLE, 0, "POP_MARK without a MARK");
    EXPECT_ERR("2.", OST_EBADPICKLE, 0, "DUP needs 1 value on the stack, found 0");
    EXPECT_ERR("I1\n(2.", OST_EBADPICKLE, 4, "DUP needs 1 value");
}

/* ---- protocol 1 to 5 binary opcodes -------------------------------------------- */

READER_TEST(loads_binary_scalars) {
    cr_assert_eq(load_ok(B("\x80\x02N.")), OST_NONE);
    cr_assert_eq(load_ok(B("\x88.")), OST_TRUE);
    cr_assert_eq(load_ok(B("\x89.")), OST_FALSE);
    EXPECT_REPR("J\xff\xff\xff\xff.", "-1");
    EXPECT_REPR("J\x00\x00\x00\x80.", "-2147483648");
    EXPECT_REPR("J\xff\xff\xff\x7f.", "2147483647");
    EXPECT_REPR("K\xff.", "255");
    EXPECT_REPR("M\xff\xff.", "65535");
    EXPECT_REPR("G\x3f\xf8\x00\x00\x00\x00\x00\x00.", "1.5");
    EXPECT_REPR("G\x80\x00\x00\x00\x00\x00\x00\x00.", "-0.0");
    EXPECT_REPR("\x8a\x00.", "0");
    EXPECT_REPR("\x8a\x01\xff.", "-1");
    EXPECT_REPR("\x8a\x02\x00\x80.", "-32768");
    EXPECT_REPR("\x8a\x03\x00\x80\x00.", "32768");
    EXPECT_REPR("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.", "-9223372036854775808");
    EXPECT_REPR("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", "18446744073709551616");
    EXPECT_REPR("\x8b\x02\x00\x00\x00\xff\x7f.", "32767");
    EXPECT_REPR("\x8b\x00\x00\x00\x00.", "0");
    ost_value v = load_ok(B("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."));
    int64_t i = 0;
    cr_assert_eq(ost_int_value(v, &i), 0);
    cr_assert_eq(i, INT64_MAX);
    ost_decref(v);
    EXPECT_ERR("N\x8b\xff\xff\xff\xff.", OST_EBADPICKLE, 1, "LONG4 with a negative length");
    EXPECT_ERR("\x8a\x05\x01\x02.", OST_ETRUNCATED, 0, "LONG1 needs 5 bytes, 3 left");
    EXPECT_ERR("J\x01\x02", OST_ETRUNCATED, 0, "BININT needs 4 bytes, 2 left");
    EXPECT_ERR("G\x01", OST_ETRUNCATED, 0, "BINFLOAT");
}

READER_TEST(loads_binary_text_and_bytes) {
    EXPECT_REPR("X\x03\x00\x00\x00" "abc.", "'abc'");
    EXPECT_REPR("\x8c\x02\xc3\xa9.", "'\xc3\xa9'");
    EXPECT_REPR("\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "z.", "'z'");
    /* Python 2 str: ASCII by default (tests/test_interop.c: the other modes) */
    EXPECT_REPR("U\x03" "abc.", "'abc'");
    EXPECT_REPR("T\x03\x00\x00\x00" "abc.", "'abc'");
    EXPECT_ERR("U\x03" "ab\xe9.", OST_EDECODE, 0, "byte 0xe9 at index 2");
    EXPECT_REPR("C\x02" "ab.", "b'ab'");
    EXPECT_REPR("B\x01\x00\x00\x00\xff.", "b'\\xff'");
    EXPECT_REPR("\x8e\x01\x00\x00\x00\x00\x00\x00\x00" "q.", "b'q'");
    EXPECT_REPR("C\x00.", "b''");
    ost_value v = load_ok(B("\x96\x02\x00\x00\x00\x00\x00\x00\x00" "xy."));
    cr_assert_eq(ost_typeof(v), OST_T_BYTEARRAY);
    assert_repr(v, "bytearray(b'xy')");
    ost_decref(v);
    /* READONLY_BUFFER leaves the value as it is */
    EXPECT_REPR("\x80\x05\x96\x02\x00\x00\x00\x00\x00\x00\x00" "xy\x98.", "bytearray(b'xy')");
    EXPECT_REPR("\x80\x05" "C\x02" "ab\x98.", "b'ab'");
    EXPECT_ERR("\x80\x05\x98.", OST_EBADPICKLE, 2, "READONLY_BUFFER needs 1 value");
    EXPECT_ERR("\x80\x05\x97.", OST_EUNSUPPORTED, 2, "NEXT_BUFFER");
    EXPECT_ERR("T\xff\xff\xff\xff.", OST_EBADPICKLE, 0, "BINSTRING with a negative length");
    EXPECT_ERR("X\x05\x00\x00\x00" "ab.", OST_ETRUNCATED, 0, "BINUNICODE needs 5 bytes, 3 left");
    EXPECT_ERR("C\x05" "ab.", OST_ETRUNCATED, 0, "SHORT_BINBYTES");
}

READER_TEST(loads_binary_containers) {
    EXPECT_REPR(").", "()");
    EXPECT_REPR("K\x01\x85.", "(1,)");
    EXPECT_REPR("K\x01K\x02\x86.", "(1, 2)");
    EXPECT_REPR("K\x01K\x02K\x03\x87.", "(1, 2, 3)");
    EXPECT_REPR("]K\x01" "a(K\x02K\x03" "e.", "[1, 2, 3]");
    EXPECT_REPR("](e.", "[]");
    EXPECT_REPR("}K\x01K\x02s(K\x03K\x04u.", "{1: 2, 3: 4}");
    EXPECT_REPR("}(u.", "{}");
    EXPECT_REPR("\x8f.", "set()");
    EXPECT_REPR("\x8f(K\x01K\x02\x90.", "{1, 2}");
    EXPECT_REPR("\x8f(K\x01K\x01\x90.", "{1}");
    EXPECT_REPR("(K\x01\x91.", "frozenset({1})");
    EXPECT_REPR("(\x91.", "frozenset()");
    /* keys compare as in Python: 1 and True are one key, the first kept */
    EXPECT_REPR("}K\x01K\x02s\x88K\x03s.", "{1: 3}");
    ost_value s = load_ok(B("\x8f(K\x01\x90."));
    cr_assert_eq(ost_typeof(s), OST_T_SET);
    cr_assert(ost_set_contains(s, ost_int(1)));
    ost_decref(s);
    s = load_ok(B("(K\x01\x91."));
    cr_assert_eq(ost_typeof(s), OST_T_FROZENSET);
    ost_decref(s);
    EXPECT_ERR("\x85.", OST_EBADPICKLE, 0, "TUPLE1 needs 1 value on the stack, found 0");
    EXPECT_ERR("K\x01\x86.", OST_EBADPICKLE, 2, "TUPLE2 needs 2 values on the stack, found 1");
    EXPECT_ERR("(K\x01\x87.", OST_EBADPICKLE, 3, "TUPLE3 needs 3 values");
    EXPECT_ERR("K\x01" "a.", OST_EBADPICKLE, 2, "APPEND needs 2 values");
    EXPECT_ERR("K\x01K\x02" "a.", OST_EBADPICKLE, 4, "APPEND on a int");
    EXPECT_ERR("(K\x01" "e.", OST_EBADPICKLE, 3, "APPENDS with nothing to add to");
    EXPECT_ERR("}(K\x01" "e.", OST_EBADPICKLE, 4, "APPENDS on a dict");
    EXPECT_ERR("}K\x01s.", OST_EBADPICKLE, 3, "SETITEM needs 3 values");
    EXPECT_ERR("(K\x01K\x02u.", OST_EBADPICKLE, 5, "SETITEMS with no dict to fill");
    EXPECT_ERR("](K\x01K\x02u.", OST_EBADPICKLE, 6, "SETITEMS on a list");
    EXPECT_ERR("](K\x01\x90.", OST_EBADPICKLE, 4, "ADDITEMS on a list");
    /* a frozenset is complete once built: ADDITEMS could change it after it
     * became a dict key (this once gave {frozenset({2}): 1, frozenset({2}): 3}) */
    EXPECT_ERR("(\x91(K\x01\x90.", OST_EBADPICKLE, 5, "ADDITEMS on a frozenset (only sets)");
    EXPECT_ERR("}(\x91\x94K\x01sh\x00(K\x02\x90" "0(K\x02\x91K\x03s.", OST_EBADPICKLE, 12,
               "ADDITEMS on a frozenset");
    /* repeated keys keep the first key and the last value, as in Python */
    EXPECT_REPR("(K\x01K\x02K\x01K\x03" "d.", "{1: 3}");
    EXPECT_REPR("}(K\x01K\x02\x88K\x03u.", "{1: 3}");
}

READER_TEST(loads_memo_opcodes) {
    ost_value t = load_ok(B("]q\x00h\x00\x86."));
    assert_repr(t, "(#1=[], #1#)");
    cr_assert_eq(ost_item(t, 0), ost_item(t, 1));
    ost_decref(t);
    t = load_ok(B("]r\x05\x00\x00\x00j\x05\x00\x00\x00\x86."));
    cr_assert_eq(ost_item(t, 0), ost_item(t, 1));
    ost_decref(t);
    /* MEMOIZE numbers entries from 0, immediates included */
    t = load_ok(B("\x80\x04(]\x94K\x07\x94h\x01h\x00t."));
    assert_repr(t, "(#1=[], 7, 7, #1#)");
    cr_assert_eq(ost_item(t, 0), ost_item(t, 3));
    ost_decref(t);
    /* a far index goes to the sparse memo: no 32 GiB array */
    t = load_ok(B("]r\xff\xff\xff\xffj\xff\xff\xff\xff\x86."));
    cr_assert_eq(ost_item(t, 0), ost_item(t, 1));
    ost_decref(t);
    /* PUT overwrites */
    EXPECT_REPR("K\x01q\x00" "0K\x02q\x00" "0h\x00.", "2");
    EXPECT_ERR("h\x05.", OST_EMEMO, 0, "memo index 5 is not set");
    EXPECT_ERR("N0j\x00\x01\x00\x00.", OST_EMEMO, 2, "memo index 256 is not set");
    EXPECT_ERR("q\x00.", OST_EBADPICKLE, 0, "BINPUT with an empty stack");
    EXPECT_ERR("(\x94.", OST_EBADPICKLE, 1, "MEMOIZE with an empty stack");
    EXPECT_ERR("K\x01h", OST_ETRUNCATED, 2, "BINGET needs 1 bytes, 0 left");
}

READER_TEST(loads_stack_global_newobj_newobj_ex_reduce_build) {
    ost_value g = load_ok(B("\x80\x04\x8c\x05" "mymod\x8c\x03" "Cls\x93."));
    cr_assert_eq(ost_typeof(g), OST_T_GLOBAL);
    assert_repr(g, "mymod.Cls");
    ost_decref(g);
    ost_value v = load_ok(B("\x80\x02" "cmymod\nCls\n)\x81."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    assert_repr(v, "mymod.Cls()");
    ost_decref(v);
    v = load_ok(B("\x80\x02" "cmymod\nCls\nK\x01\x85\x81."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    cr_assert_eq(ost_reduce_kind_of(v), OST_REDUCE_NEWOBJ);
    assert_repr(v, "mymod.Cls.__new__(1)");
    cr_assert_eq(ost_reduce_kwargs(v), 0);
    ost_decref(v);
    v = load_ok(B("\x80\x04" "cmymod\nCls\nK\x01\x85}\x8c\x01" "kK\x02s\x92."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    cr_assert_eq(ost_reduce_kind_of(v), OST_REDUCE_NEWOBJ_EX);
    assert_repr(v, "mymod.Cls.__new__(1, **{'k': 2})");
    cr_assert_eq(ost_typeof(ost_reduce_kwargs(v)), OST_T_DICT);
    ost_decref(v);
    EXPECT_REPR("cmymod\nCls\n)}\x92.", "mymod.Cls()");
    v = load_ok(B("cmymod\nf\n(K\x01tR."));
    cr_assert_eq(ost_reduce_kind_of(v), OST_REDUCE_CALL);
    assert_repr(v, "mymod.f(1)");
    cr_assert(str_is(ost_global_name(ost_reduce_callable(v)), "f"));
    ost_decref(v);
    /* REDUCE of an unknown global is data, even with no arguments */
    EXPECT_REPR("cmymod\nf\n)R.", "mymod.f()");
    EXPECT_REPR("cmymod\nf\n)R}b.", "mymod.f().__setstate__({})");
    EXPECT_REPR("cmymod\nf\n)R(K\x01" "e.", "mymod.f().extend([1])");
    EXPECT_REPR("cmymod\nf\n)RK\x01" "a.", "mymod.f().extend([1])");
    EXPECT_REPR("cmymod\nf\n)R(K\x01K\x02u.", "mymod.f().update([(1, 2)])");
    EXPECT_REPR("cmymod\nCls\n)\x81}\x8c\x01" "aK\x01sb.", "mymod.Cls(a=1)");
    EXPECT_ERR("K\x01K\x02\x93.", OST_EBADPICKLE, 4, "STACK_GLOBAL needs two str, got int and int");
    EXPECT_ERR("\x8c\x01" "a\x93.", OST_EBADPICKLE, 3, "STACK_GLOBAL needs 2 values");
    EXPECT_ERR("K\x01)\x81.", OST_EBADPICKLE, 3, "NEWOBJ class is a int, not a global");
    EXPECT_ERR("cm\nC\nK\x01\x81.", OST_EBADPICKLE, 7, "NEWOBJ arguments are a int");
    EXPECT_ERR("cm\nC\n))\x92.", OST_EBADPICKLE, 7, "keyword arguments are not a dict");
    EXPECT_ERR("cm\nf\nK\x01R.", OST_EBADPICKLE, 7, "REDUCE arguments are a int, not a tuple");
    EXPECT_ERR(")R.", OST_EBADPICKLE, 1, "REDUCE needs 2 values");
    EXPECT_ERR("]}b.", OST_EBADPICKLE, 2, "BUILD on a list");
    EXPECT_ERR("}b.", OST_EBADPICKLE, 1, "BUILD needs 2 values");
}

READER_TEST(ext_opcodes_are_unsupported) {
    EXPECT_ERR("\x80\x02\x82\x01.", OST_EUNSUPPORTED, 2, "EXT1");
    EXPECT_ERR("\x83\x01\x00.", OST_EUNSUPPORTED, 0, "EXT2");
    EXPECT_ERR("N0\x84\x01\x00\x00\x00.", OST_EUNSUPPORTED, 2, "EXT4");
}

READER_TEST(proto_and_frame) {
    EXPECT_REPR("\x80\x00K\x01.", "1");
    EXPECT_REPR("\x80\x05K\x01.", "1");
    EXPECT_REPR("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.", "7");
    /* a frame may be shorter than the pickle: frames are only advisory */
    EXPECT_REPR("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00K\x07.", "7");
    EXPECT_ERR("\x80\x06K\x01.", OST_EPROTOCOL, 0, "unsupported protocol 6");
    EXPECT_ERR("K\x01\x80\xff.", OST_EPROTOCOL, 2, "unsupported protocol 255");
    EXPECT_ERR("\x80", OST_ETRUNCATED, 0, "PROTO needs 1 bytes");
    EXPECT_ERR("\x80\x04\x95\x04\x00\x00\x00\x00\x00\x00\x00K\x07.", OST_ETRUNCATED, 2,
               "FRAME of 4 bytes, 3 left");
    EXPECT_ERR("\x80\x04\x95\x00\x00", OST_ETRUNCATED, 2, "FRAME needs 8 bytes, 2 left");
}

/* ---- builtins the reader turns into real values -------------------------------- */

READER_TEST(maps_set_and_frozenset_reduce) {
    ost_value s = load_ok(B("\x80\x02" "c__builtin__\nset\n]K\x01" "aK\x02" "a\x85R."));
    cr_assert_eq(ost_typeof(s), OST_T_SET);
    assert_repr(s, "{1, 2}");
    ost_decref(s);
    s = load_ok(B("c__builtin__\nfrozenset\n((I1\nI2\nltR."));
    cr_assert_eq(ost_typeof(s), OST_T_FROZENSET);
    assert_repr(s, "frozenset({1, 2})");
    ost_decref(s);
    EXPECT_REPR("cbuiltins\nset\n)R.", "set()");
    EXPECT_REPR("cbuiltins\nfrozenset\n)R.", "frozenset()");
    EXPECT_REPR("cbuiltins\nset\nK\x01K\x02\x86\x85R.", "{1, 2}"); /* from a tuple */
    /* a set of something else stays a reduce value */
    EXPECT_REPR("cbuiltins\nset\nK\x01\x85R.", "builtins.set(1)");
    EXPECT_ERR("cbuiltins\nset\n]]a\x85R.", OST_EBADPICKLE, 18, "set item is not hashable");
}

READER_TEST(maps_bytes_forms) {
    ost_value b = load_ok(B("c_codecs\nencode\n(V\xe9" "a\nVlatin1\ntR."));
    cr_assert_eq(ost_typeof(b), OST_T_BYTES);
    assert_repr(b, "b'\\xe9a'");
    ost_decref(b);
    /* what Python 3 writes for bytes in protocols 0 to 2 */
    EXPECT_REPR("c_codecs\nencode\n(V\\u00ff\\u0000\nVlatin1\ntR.", "b'\\xff\\x00'");
    EXPECT_REPR("c_codecs\nencode\nX\x01\x00\x00\x00" "zX\x07\x00\x00\x00" "latin-1\x86R.", "b'z'");
    EXPECT_REPR("cbuiltins\nbytes\n)R.", "b''");
    EXPECT_REPR("c__builtin__\nbytes\n(tR.", "b''");
    EXPECT_REPR("cbuiltins\nbytes\nC\x02" "ab\x85R.", "b'ab'");
    /* beyond Latin-1 cannot be bytes */
    EXPECT_ERR("c_codecs\nencode\n(V\\u0100\nVlatin1\ntR.", OST_EBADPICKLE, 34,
               "beyond Latin-1");
    /* another codec is left as a reduce value */
    EXPECT_REPR("c_codecs\nencode\n(Va\nVutf-8\ntR.", "_codecs.encode('a', 'utf-8')");
}

READER_TEST(maps_bytearray_reduce) {
    ost_value b = load_ok(B("cbuiltins\nbytearray\nC\x02" "ab\x85R."));
    cr_assert_eq(ost_typeof(b), OST_T_BYTEARRAY);
    assert_repr(b, "bytearray(b'ab')");
    ost_decref(b);
    EXPECT_REPR("c__builtin__\nbytearray\n(Vx\xff\nVlatin-1\ntR.", "bytearray(b'x\\xff')");
    EXPECT_REPR("cbuiltins\nbytearray\n)R.", "bytearray(b'')");
}

READER_TEST(maps_copyreg_reconstructor_and_newobj) {
    ost_value v = load_ok(B("ccopy_reg\n_reconstructor\n(cmymod\nK\nc__builtin__\nobject\n"
                            "NtR(dS'a'\nI1\nsb."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    assert_repr(v, "mymod.K(a=1)");
    cr_assert(str_is(ost_global_module(ost_instance_class(v)), "mymod"));
    cr_assert_eq(ost_dict_get_c(ost_instance_state(v), "a"), ost_int(1));
    cr_assert_eq(ost_instance_getattr(v, "a"), ost_int(1));
    ost_decref(v);
    /* a base other than object, dict or list is not an instance */
    EXPECT_REPR("ccopyreg\n_reconstructor\n(cmymod\nK\ncbuiltins\nint\nI5\ntR.",
                "copyreg._reconstructor(mymod.K, builtins.int, 5)");
    /* a list subclass's instance below protocol 2 (more in test_interop.c) */
    EXPECT_REPR("ccopyreg\n_reconstructor\n(cmymod\nK\ncbuiltins\nlist\n(lI1\natR.",
                "mymod.K().extend([1])");
    v = load_ok(B("\x80\x02" "ccopyreg\n__newobj__\ncmymod\nK\n\x85R."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    assert_repr(v, "mymod.K()");
    ost_decref(v);
    v = load_ok(B("\x80\x02" "ccopyreg\n__newobj__\n(cmymod\nK\nK\x01K\x02tR."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    cr_assert_eq(ost_reduce_kind_of(v), OST_REDUCE_NEWOBJ);
    assert_repr(v, "mymod.K.__new__(1, 2)");
    ost_decref(v);
    EXPECT_REPR("ccopy_reg\n__newobj_ex__\n(cmymod\nK\n(I1\nt(dS'k'\nI2\nstR.",
                "mymod.K.__new__(1, **{'k': 2})");
}

READER_TEST(unknown_globals_stay_data) {
    /* os.system named three ways: none of them is ever called */
    ost_value v = load_ok(B("cos\nsystem\n(S'echo pwned'\ntR."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    assert_repr(v, "os.system('echo pwned')");
    ost_decref(v);
    v = load_ok(B("(S'echo pwned'\nios\nsystem\n."));
    cr_assert_eq(ost_typeof(v), OST_T_REDUCE);
    ost_decref(v);
    v = load_ok(B("\x80\x02" "cos\nsystem\n)\x81."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    ost_decref(v);
}

/* ---- errors ------------------------------------------------------------------- */

READER_TEST(truncated_inputs) {
    EXPECT_ERR("", OST_ETRUNCATED, 0, "pickle ends without STOP");
    EXPECT_ERR("\x80\x02K\x01", OST_ETRUNCATED, 4, "pickle ends without STOP");
    EXPECT_ERR("K", OST_ETRUNCATED, 0, "BININT1 needs 1 bytes, 0 left");
    EXPECT_ERR("N\x8c\x05" "ab", OST_ETRUNCATED, 1, "SHORT_BINUNICODE needs 5 bytes, 2 left");
    EXPECT_ERR("\x8e\x01\x00\x00", OST_ETRUNCATED, 0, "BINBYTES8 needs 8 bytes");
}

READER_TEST(unknown_opcodes) {
    static const uint8_t bad[] = {0x00, 0x01, 0x20, 0x2a, 0x33, 0x40, 0x5a, 0x7f,
                                  0x99, 0xa0, 0xc3, 0xff};
    for (size_t i = 0; i < sizeof bad; i++) {
        char p[4] = {'N', '0', (char)bad[i], '.'};
        char sub[40];
        snprintf(sub, sizeof sub, "unknown opcode 0x%02x", bad[i]);
        expect_err(p, sizeof p, OST_EBADOPCODE, 2, sub);
    }
}

READER_TEST(malformed_stacks) {
    EXPECT_ERR(".", OST_EBADPICKLE, 0, "STOP with an empty stack");
    EXPECT_ERR("K\x01(.", OST_EBADPICKLE, 3, "STOP with an empty stack");
    EXPECT_ERR("K\x01t.", OST_EBADPICKLE, 2, "TUPLE without a MARK");
    EXPECT_ERR("K\x01l.", OST_EBADPICKLE, 2, "LIST without a MARK");
    EXPECT_ERR("K\x01K\x02" "d.", OST_EBADPICKLE, 4, "DICT without a MARK");
    EXPECT_ERR("]K\x01" "e.", OST_EBADPICKLE, 3, "APPENDS without a MARK");
    EXPECT_ERR("}K\x01K\x01u.", OST_EBADPICKLE, 5, "SETITEMS without a MARK");
    EXPECT_ERR("\x8fK\x01\x90.", OST_EBADPICKLE, 3, "ADDITEMS without a MARK");
    EXPECT_ERR("K\x01\x91.", OST_EBADPICKLE, 2, "FROZENSET without a MARK");
    EXPECT_ERR("cm\nC\no.", OST_EBADPICKLE, 5, "OBJ without a MARK");
    EXPECT_ERR("}(K\x01u.", OST_EBADPICKLE, 4, "SETITEMS with an odd number of values (1)");
    EXPECT_ERR("(K\x01K\x02K\x03" "d.", OST_EBADPICKLE, 7, "DICT with an odd number");
    EXPECT_ERR("}]K\x01s.", OST_EBADPICKLE, 4, "SETITEM: unhashable key");
    EXPECT_ERR("(]K\x01" "d.", OST_EBADPICKLE, 4, "DICT: unhashable key");
    EXPECT_ERR("}]\x85K\x01s.", OST_EBADPICKLE, 5, "unhashable key"); /* ([],) */
    EXPECT_ERR("}(}K\x01u.", OST_EBADPICKLE, 5, "SETITEMS: unhashable key");
    EXPECT_ERR("\x8f(]\x90.", OST_EBADPICKLE, 3, "ADDITEMS: unhashable item");
    EXPECT_ERR("(]\x91.", OST_EBADPICKLE, 2, "unhashable");
}

READER_TEST(invalid_utf8_and_valid_surrogates) {
    EXPECT_ERR("\x8c\x02\xc3\x28.", OST_EUTF8, 0, "invalid UTF-8 in SHORT_BINUNICODE");
    EXPECT_ERR("N0X\x02\x00\x00\x00\xc0\x80.", OST_EUTF8, 2, "BINUNICODE"); /* overlong */
    EXPECT_ERR("\x8c\x04\xf4\x90\x80\x80.", OST_EUTF8, 0, NULL); /* above U+10FFFF */
    EXPECT_ERR("\x8c\x01\x80.", OST_EUTF8, 0, NULL);             /* lone continuation */
    EXPECT_ERR("\x8c\x02\xe4\xb8.", OST_EUTF8, 0, NULL);         /* cut sequence */
    EXPECT_ERR("\x8d\x01\x00\x00\x00\x00\x00\x00\x00\xff.", OST_EUTF8, 0, "BINUNICODE8");
    EXPECT_ERR("\x8c\x01" "a\x8c\x01\xfe\x93.", OST_EUTF8, 3, NULL);
    /* lone surrogates in three bytes are valid (Python's surrogatepass) */
    ost_value v = load_ok(B("\x8c\x03\xed\xa0\x80."));
    size_t n;
    cr_assert_eq(memcmp(ost_data(v, &n), "\xed\xa0\x80", 3), 0);
    cr_assert_eq(n, 3);
    assert_repr(v, "'\\ud800'");
    ost_decref(v);
    EXPECT_REPR("\x8c\x06\xed\xa0\xbd\xed\xb8\x80.", "'\\ud83d\\ude00'");
    EXPECT_REPR("X\x03\x00\x00\x00\xed\xbf\xbf.", "'\\udfff'");
}

READER_TEST(persistent_id_without_hook) {
    EXPECT_ERR("K\x01Q.", OST_ENOPERSLOAD, 2, "no persistent_load hook");
    EXPECT_ERR("Q.", OST_EBADPICKLE, 0, "BINPERSID needs 1 value");
}

READER_TEST(huge_declared_lengths_fail_without_allocating) {
    static const char *const cases[] = {
        "\x8e\x00\x00\x00\x00\x00\x00\x00\x10.",           /* BINBYTES8 2**60 */
        "\x8d\x00\x00\x00\x00\x00\x00\x00\x10.",           /* BINUNICODE8 2**60 */
        "\x96\xff\xff\xff\xff\xff\xff\xff\xff.",           /* BYTEARRAY8 2**64-1 */
        "B\xff\xff\xff\xff.", "X\xff\xff\xff\xff.", "\x8b\xff\xff\xff\x7f.",
        "T\xff\xff\xff\x7f.",
        "\x95\x00\x00\x00\x00\x00\x00\x00\x10K\x01.",      /* FRAME 2**60 */
    };
    static const size_t lens[] = {10, 10, 10, 6, 6, 6, 6, 12};
    ost_set_allocator(&fi_alloc); /* sees every value allocation */
    ost_reader *r = ost_reader_new();
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        g_largest = 0;
        expect_err_r(r, cases[i], lens[i], OST_ETRUNCATED, 0, NULL);
        cr_assert_lt(g_largest, 4096, "case %zu asked for %zu bytes", i, g_largest);
    }
    ost_reader_free(r);
    ost_set_allocator(NULL);
}

READER_TEST(bad_arguments) {
    ost_reader *r = ost_reader_new();
    ost_value v = 7;
    size_t used = 5;
    cr_assert_eq(ost_load(r, NULL, 3, &v, &used), OST_EINVAL);
    cr_assert_eq(v, 0);
    cr_assert_eq(used, 0);
    cr_assert_eq(ost_load(r, "N.", 2, NULL, NULL), OST_EINVAL);
    cr_assert_eq(ost_load(NULL, "N.", 2, &v, NULL), OST_EINVAL);
    cr_assert_eq(ost_load(r, NULL, 0, &v, NULL), OST_ETRUNCATED);
    ost_reader_free(r);
    ost_reader_free(NULL);
}

/* ---- pickles made by Python ----------------------------------------------------- */

READER_TEST(python_pickles_of_every_protocol_load_as_python_sees_them) {
    py_load();
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_persref, NULL);
    int protos = 0;
    for (size_t i = 0; i < g_npy; i++) {
        const py_pickle *p = &g_py[i];
        uint64_t l0 = live();
        ost_value v = 0;
        size_t used = 0;
        int rc = load_copy(r, p->data, p->len, &v, &used);
        cr_assert_eq(rc, 0, "%s protocol %d%s: %s", p->name, p->proto,
                     p->unframed ? " unframed" : "", ost_reader_errmsg(r));
        cr_assert_eq(used, p->len);
        char *s = repr_of(v);
        cr_assert_str_eq(s, p->want, "%s protocol %d%s:\n  got  %.300s\n  want %.300s",
                         p->name, p->proto, p->unframed ? " unframed" : "", s, p->want);
        free(s);
        ost_release(v);
        cr_assert_eq(live(), l0, "%s protocol %d leaked", p->name, p->proto);
        protos |= 1 << p->proto;
    }
    cr_assert_eq(protos, 0x3f, "not every protocol was seen");
    ost_reader_free(r);
}

READER_TEST(python_values_through_the_value_api) {
    for (int proto = 0; proto <= 5; proto++) {
        const py_pickle *p = py_find("scalars", proto, 0);
        ost_value t = load_ok((const char *)p->data, p->len);
        cr_assert_eq(ost_typeof(t), OST_T_TUPLE);
        cr_assert_eq(ost_len(t), 28);
        cr_assert_eq(ost_item(t, 0), OST_NONE);
        cr_assert_eq(ost_item(t, 1), OST_TRUE);
        cr_assert_eq(ost_item(t, 2), OST_FALSE);
        int64_t want[] = {0, 1, -1, 255, 256, 65535, 65536, INT32_MIN, INT32_MAX,
                          (int64_t)1 << 31, (int64_t)1 << 62, ((int64_t)1 << 62) - 1,
                          -((int64_t)1 << 62), -((int64_t)1 << 62) - 1, INT64_MIN};
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
            int64_t got = 0;
            cr_assert_eq(ost_typeof(ost_item(t, 3 + k)), OST_T_INT);
            cr_assert_eq(ost_int_value(ost_item(t, 3 + k), &got), 0);
            cr_assert_eq(got, want[k], "protocol %d item %zu: %lld", proto, 3 + k,
                         (long long)got);
        }
        int64_t got;
        cr_assert_eq(ost_int_value(ost_item(t, 18), &got), OST_ELIMIT); /* 2**64 */
        cr_assert_eq(ost_typeof(ost_item(t, 20)), OST_T_FLOAT);
        cr_assert_eq(ost_float_value(ost_item(t, 20)), 1.5);
        cr_assert(signbit(ost_float_value(ost_item(t, 21))));
        cr_assert(isinf(ost_float_value(ost_item(t, 24))));
        cr_assert(isnan(ost_float_value(ost_item(t, 26))));
        cr_assert_eq(ost_float_value(ost_item(t, 27)), 0.1);
        ost_decref(t);

        p = py_find("text", proto, 0);
        t = load_ok((const char *)p->data, p->len);
        cr_assert(str_is(ost_item(t, 2), "\xc3\xa9"));
        cr_assert(str_is(ost_item(t, 4), "\xf0\x9f\x98\x80"));
        cr_assert(str_is(ost_item(t, 5), "a\nb\\c\"'"));
        size_t n;
        const char *d = ost_data(ost_item(t, 6), &n);
        cr_assert(n == 4 && memcmp(d, "\0\x1a\r\t", 4) == 0);
        cr_assert(str_is(ost_item(t, 7), "\xed\xa0\x80"), "lone surrogate, protocol %d", proto);
        cr_assert(str_is(ost_item(t, 8), "x\xed\xbf\xbfy"));
        cr_assert_eq(ost_len(ost_item(t, 9)), 300);
        ost_decref(t);

        p = py_find("bytes", proto, 0);
        t = load_ok((const char *)p->data, p->len);
        cr_assert_eq(ost_typeof(ost_item(t, 0)), OST_T_BYTES);
        cr_assert_eq(ost_len(ost_item(t, 0)), 0);
        d = ost_data(ost_item(t, 2), &n);
        cr_assert_eq(ost_typeof(ost_item(t, 2)), OST_T_BYTES);
        cr_assert_eq(n, 256);
        for (size_t k = 0; k < 256; k++) cr_assert_eq((uint8_t)d[k], k);
        cr_assert_eq(ost_typeof(ost_item(t, 3)), OST_T_BYTEARRAY);
        cr_assert_eq(ost_typeof(ost_item(t, 4)), OST_T_BYTEARRAY);
        ost_decref(t);

        p = py_find("shared", proto, 0);
        t = load_ok((const char *)p->data, p->len);
        cr_assert_eq(ost_item(t, 0), ost_item(t, 1));
        cr_assert_eq(ost_item(ost_item(t, 2), 0), ost_item(t, 0));
        ost_decref(t);

        p = py_find("foo", proto, 0);
        t = load_ok((const char *)p->data, p->len);
        cr_assert_eq(ost_typeof(t), OST_T_INSTANCE);
        cr_assert(str_is(ost_global_module(ost_instance_class(t)), "__main__"));
        cr_assert(str_is(ost_global_name(ost_instance_class(t)), "Foo"));
        cr_assert_eq(ost_instance_getattr(t, "x"), ost_int(1));
        cr_assert_eq(ost_typeof(ost_instance_getattr(t, "y")), OST_T_LIST);
        ost_decref(t);

        p = py_find("mix", proto, 0);
        t = load_ok((const char *)p->data, p->len);
        cr_assert_eq(ost_typeof(ost_dict_get_c(t, "set")), OST_T_SET);
        cr_assert_eq(ost_typeof(ost_dict_get_c(t, "fs")), OST_T_FROZENSET);
        cr_assert_eq(ost_dict_get_c(t, "obj"), ost_dict_get_c(t, "obj2"));
        cr_assert_eq(ost_typeof(ost_dict_get_c(t, "red")), OST_T_REDUCE);
        ost_release(t);
    }
}

/* Every proper prefix of a valid pickle is OST_ETRUNCATED, frees what it
 * built, and reads nothing past its end (each prefix is its own heap
 * block, for ASan). */
static size_t truncate_all(ost_reader *r, const char *name, const uint8_t *d, size_t n) {
    for (size_t k = 0; k < n; k++) {
        uint64_t l0 = live();
        ost_value v = 1;
        char *c = malloc(k ? k : 1);
        cr_assert(c);
        if (k) memcpy(c, d, k);
        int rc = ost_load(r, c, k, &v, NULL);
        free(c);
        cr_assert_eq(rc, OST_ETRUNCATED, "%s cut at %zu of %zu: %s (%s)", name, k, n,
                     ost_err_name(rc), ost_reader_errmsg(r));
        cr_assert_eq(v, 0);
        cr_assert_leq(ost_reader_erroffset(r), k);
        cr_assert(strstr(ost_reader_errmsg(r), "OST_ETRUNCATED at offset"));
        cr_assert_eq(live(), l0, "%s cut at %zu leaked %lld objects", name, k,
                     (long long)(live() - l0));
    }
    return n;
}

READER_TEST(truncation_at_every_offset_fails_cleanly, .timeout = 240) {
    py_load();
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_persref, NULL);
    size_t cut = 0, npick = 0;
    bool cyclic = false;
    int protos = 0;
    for (size_t i = 0; i < g_npy; i++) {
        const py_pickle *p = &g_py[i];
        /* the big ones add time, not opcodes */
        if (!strncmp(p->name, "big", 3) || p->len > 4000) continue;
        char name[64];
        snprintf(name, sizeof name, "%s/%d%s", p->name, p->proto, p->unframed ? "u" : "");
        cut += truncate_all(r, name, p->data, p->len);
        npick++;
        protos |= 1 << p->proto;
        cyclic |= !strcmp(p->name, "cyclic");
        /* the reader is still usable after all those failures */
        uint64_t l0 = live();
        ost_value v = load_ok_r(r, (const char *)p->data, p->len);
        ost_release(v);
        cr_assert_eq(live(), l0);
    }
    cut += truncate_all(r, "hand_text", (const uint8_t *)hand_text, sizeof hand_text - 1);
    cut += truncate_all(r, "hand_bin", (const uint8_t *)hand_bin, sizeof hand_bin - 1);
    size_t fl;
    char *framed = hand_framed(&fl);
    cut += truncate_all(r, "hand_framed", (const uint8_t *)framed, fl);
    free(framed);
    cr_assert_eq(protos, 0x3f);
    cr_assert(cyclic);
    cr_assert_gt(npick, 100);
    cr_assert_gt(cut, 20000);
    ost_reader_free(r);
}

READER_TEST(hand_assembled_pickles_load) {
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_persref, NULL);
    expect_repr_r(r, B(hand_text), hand_text_repr);
    expect_repr_r(r, B(hand_bin), hand_bin_repr);
    size_t fl;
    char *framed = hand_framed(&fl);
    expect_repr_r(r, framed, fl, hand_bin_repr);
    free(framed);
    ost_reader_free(r);
}

/* ---- limits --------------------------------------------------------------------- */

static ost_reader *reader_with(size_t depth, size_t memo, size_t container, size_t bytes) {
    ost_reader *r = ost_reader_new();
    ost_limits l = {depth, memo, container, bytes};
    ost_reader_set_limits(r, &l);
    return r;
}

READER_TEST(default_limits) {
    ost_reader *r = ost_reader_new();
    ost_limits l;
    ost_reader_get_limits(r, &l);
    cr_assert_eq(l.max_depth, 10000000);
    cr_assert_eq(l.max_memo, (size_t)1 << 26);
    cr_assert_eq(l.max_container, (size_t)1 << 31);
    cr_assert_eq(l.max_bytes, (size_t)4 << 30);
    /* zero fields keep their value */
    ost_limits z = {0, 7, 0, 0};
    ost_reader_set_limits(r, &z);
    ost_reader_get_limits(r, &l);
    cr_assert_eq(l.max_depth, 10000000);
    cr_assert_eq(l.max_memo, 7);
    cr_assert_eq(l.max_bytes, (size_t)4 << 30);
    ost_reader_free(r);

    /* the defaults take every Python pickle, big ones included */
    py_load();
    r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_persref, NULL);
    for (size_t i = 0; i < g_npy; i++) {
        ost_value v = load_ok_r(r, (const char *)g_py[i].data, g_py[i].len);
        ost_release(v);
    }
    /* and 50000 nested lists */
    size_t depth = 50000;
    char *p = malloc(2 * depth + 1);
    memset(p, '(', depth);
    memset(p + depth, 'l', depth);
    p[2 * depth] = '.';
    uint64_t l0 = live();
    ost_value v = load_ok_r(r, p, 2 * depth + 1);
    ost_value x = v;
    size_t levels = 0;
    while (ost_len(x)) {
        x = ost_item(x, 0);
        levels++;
    }
    cr_assert_eq(levels, depth - 1);
    ost_decref(v);
    cr_assert_eq(live(), l0);
    ost_reader_free(r);

    r = reader_with(1000, 0, 0, 0);
    expect_err_r(r, p, 2 * depth + 1, OST_ELIMIT, 1000,
                 "more than 1000 nested MARKs (limit max_depth)");
    free(p);
    ost_reader_free(r);
}

READER_TEST(limit_max_depth) {
    ost_reader *r = reader_with(3, 0, 0, 0);
    expect_repr_r(r, B("(((ttt."), "(((),),)");
    expect_err_r(r, B("((((tttt."), OST_ELIMIT, 3, "more than 3 nested MARKs (limit max_depth)");
    /* depth counts open marks, not marks in total */
    expect_repr_r(r, B("(t(t(t(t(t\x87\x86."), "((), ((), (), ()))");
    ost_reader_free(r);
}

READER_TEST(limit_max_memo) {
    ost_reader *r = reader_with(0, 2, 0, 0);
    expect_repr_r(r, B("K\x01q\x00q\x01q\x00."), "1"); /* rewriting is not a new entry */
    expect_err_r(r, B("K\x01q\x00q\x01q\x02."), OST_ELIMIT, 6,
                 "more than 2 memo entries (limit max_memo)");
    expect_err_r(r, B("\x80\x04K\x01\x94\x94\x94."), OST_ELIMIT, 6, "limit max_memo");
    expect_err_r(r, B("I1\np0\np1\np2\n."), OST_ELIMIT, 9, "limit max_memo");
    expect_err_r(r, B("]r\x00\x00\x00\x10r\x00\x00\x00\x20r\x00\x00\x00\x30."),
                 OST_ELIMIT, 11, "limit max_memo"); /* sparse indexes count too */
    ost_reader_free(r);
}

READER_TEST(limit_max_container) {
    ost_reader *r = reader_with(0, 0, 3, 0);
    expect_repr_r(r, B("]K\x01" "aK\x02" "aK\x03" "a."), "[1, 2, 3]");
    expect_err_r(r, B("]K\x01" "aK\x02" "aK\x03" "aK\x04" "a."), OST_ELIMIT, 12,
                 "list longer than 3 (limit max_container)");
    expect_err_r(r, B("}K\x01K\x01sK\x02K\x02sK\x03K\x03sK\x04K\x04s."), OST_ELIMIT, 20,
                 "dict larger than 3 (limit max_container)");
    expect_err_r(r, B("\x8f(K\x01\x90(K\x02\x90(K\x03\x90(K\x04\x90."), OST_ELIMIT, 16,
                 "set larger than 3 (limit max_container)");
    /* the stack holds the items of LIST, TUPLE, DICT and FROZENSET */
    expect_repr_r(r, B("K\x01K\x02K\x03\x87."), "(1, 2, 3)");
    expect_err_r(r, B("K\x01K\x02K\x03K\x04."), OST_ELIMIT, 6,
                 "stack longer than 3 (limit max_container)");
    expect_err_r(r, B("(K\x01K\x02K\x03K\x04t."), OST_ELIMIT, 7, "limit max_container");
    expect_err_r(r, B("(K\x01K\x02K\x03K\x04l."), OST_ELIMIT, 7, "limit max_container");
    ost_reader_free(r);

    /* a limit between growth steps of the stack holds exactly */
    r = reader_with(0, 0, 300, 0);
    char p[2 * 301 + 1];
    for (int i = 0; i < 301; i++) {
        p[2 * i] = 'K';
        p[2 * i + 1] = 1;
    }
    p[600] = '.';
    expect_repr_r(r, p, 601, "1");
    p[600] = 'K';
    p[602] = '.';
    expect_err_r(r, p, 603, OST_ELIMIT, 600, "stack longer than 300 (limit max_container)");
    ost_reader_free(r);
}

READER_TEST(limit_max_bytes) {
    ost_reader *r = reader_with(0, 0, 0, 100);
    char p[2 + 200 + 1 + 8];
    p[0] = 'C';
    p[1] = 50;
    memset(p + 2, 'x', 50);
    p[52] = '.';
    for (int i = 0; i < 3; i++) { /* the count starts again with each load */
        ost_value v = load_ok_r(r, p, 53);
        cr_assert_eq(ost_len(v), 50);
        ost_decref(v);
    }
    /* two of them in one load are too many */
    char two[2 * 52 + 2];
    memcpy(two, p, 52);
    memcpy(two + 52, p, 52);
    two[104] = '\x86';
    two[105] = '.';
    expect_err_r(r, two, sizeof two, OST_ELIMIT, 52,
                 "values would take more than 100 bytes (limit max_bytes)");
    char big[5 + 200 + 1];
    memcpy(big, "B\xc8\x00\x00\x00", 5);
    memset(big + 5, 'y', 200);
    big[205] = '.';
    expect_err_r(r, big, sizeof big, OST_ELIMIT, 0, "limit max_bytes");
    ost_reader_free(r);
}

/* ---- allocation failure ------------------------------------------------------ */


/* Loads d with the Nth allocation failing for every N up to what a good
 * load takes: each load succeeds (with the right value) or is OST_ENOMEM,
 * and nothing is left behind. Returns how many ended in OST_ENOMEM. */
static long fail_each_allocation(const char *name, const void *d, size_t n, const char *want) {
    ost_set_allocator(&fi_alloc);
    uint64_t l0 = live();
    g_fail_at = 0;
    g_calls = g_blocks = 0;
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_persref, NULL);
    ost_value v = 0;
    cr_assert_eq(ost_load(r, d, n, &v, NULL), 0, "%s: %s", name, ost_reader_errmsg(r));
    long total = g_calls;
    ost_release(v);
    ost_reader_free(r);
    cr_assert_eq(g_blocks, 0, "%s: %ld blocks left after a good load", name, g_blocks);
    cr_assert_gt(total, 1, "%s: only %ld allocations", name, total);
    long nomem = 0;
    for (long k = 1; k <= total; k++) {
        g_calls = g_blocks = 0;
        g_fail_at = k;
        r = ost_reader_new();
        ost_reader_set_persistent_load(r, pl_persref, NULL);
        v = 1;
        int rc = ost_load(r, d, n, &v, NULL);
        g_fail_at = 0;
        if (rc == 0) {
            char *s = repr_of(v);
            cr_assert_str_eq(s, want, "%s, allocation %ld failed, loaded\n  %s", name, k, s);
            free(s);
            ost_release(v);
        } else {
            cr_assert_eq(rc, OST_ENOMEM, "%s, allocation %ld failed: %s", name, k,
                         ost_reader_errmsg(r));
            cr_assert_eq(v, 0);
            cr_assert(strstr(ost_reader_errmsg(r), "OST_ENOMEM at offset"));
            nomem++;
        }
        ost_reader_free(r);
        cr_assert_eq(g_blocks, 0, "%s, allocation %ld failed: %ld blocks leaked", name, k,
                     g_blocks);
        cr_assert_eq(live(), l0, "%s, allocation %ld failed: %lld objects leaked", name, k,
                     (long long)(live() - l0));
    }
    ost_set_allocator(NULL);
    cr_assert_gt(nomem, 0, "%s: no allocation failure was reported", name);
    return nomem;
}

READER_TEST(allocation_failure_is_enomem_or_success_and_never_leaks, .timeout = 240) {
    py_load();
    for (int proto = 0; proto <= 5; proto++) {
        const py_pickle *p = py_find("mix", proto, 0);
        char name[32];
        snprintf(name, sizeof name, "mix/%d", proto);
        fail_each_allocation(name, p->data, p->len, p->want);
    }
    const py_pickle *p = py_find("pers", 0, 0);
    fail_each_allocation("pers/0", p->data, p->len, p->want);
    p = py_find("newargs_ex", 4, 0);
    fail_each_allocation("newargs_ex/4", p->data, p->len, p->want);
    fail_each_allocation("hand_text", hand_text, sizeof hand_text - 1, hand_text_repr);
    fail_each_allocation("hand_bin", hand_bin, sizeof hand_bin - 1, hand_bin_repr);
    /* far memo indexes use the sparse table, which the allocator serves */
    fail_each_allocation("sparse", B("]r\xff\xff\xff\xffr\x00\x00\x00\x40j\xff\xff\xff\xff\x86."),
                         "(#1=[], #1#)");
}

/* ---- hooks ---------------------------------------------------------------------- */

READER_TEST(find_global_substitutes_and_sees_unknown_globals_only) {
    fg_ctx c = {.mode = 1};
    ost_reader *r = ost_reader_new();
    ost_reader_set_find_global(r, fg_hook, &c);
    ost_value v = load_ok_r(r, B("\x80\x02" "cmymod\nOld\n)\x81}\x8c\x01" "aK\x01sb."));
    cr_assert_eq(ost_typeof(v), OST_T_INSTANCE);
    cr_assert(str_is(ost_global_module(ost_instance_class(v)), "newmod"));
    cr_assert(str_is(ost_global_name(ost_instance_class(v)), "New"));
    assert_repr(v, "newmod.New(a=1)");
    ost_decref(v);
    cr_assert_eq(c.calls, 1);
    cr_assert_str_eq(c.seen[0], "mymod.Old");
    /* accepted as is: a generic global; Python 2 names arrive mapped */
    expect_repr_r(r, B("cmymod\nOther\n."), "mymod.Other");
    expect_repr_r(r, B("c__builtin__\nlen\n."), "builtins.len");
    expect_repr_r(r, B("\x8c\x05" "mymod\x8c\x03" "Old\x93."), "newmod.New");
    expect_repr_r(r, B("(imymod\nOld\n."), "newmod.New()");
    cr_assert_eq(c.calls, 5);
    cr_assert_str_eq(c.seen[1], "mymod.Other");
    cr_assert_str_eq(c.seen[2], "builtins.len");
    cr_assert_str_eq(c.seen[3], "mymod.Old");

    /* the builtins the reader knows never reach the hook */
    c.calls = 0;
    c.mode = 4; /* it would refuse them */
    expect_repr_r(r, B("c__builtin__\nset\n]K\x01" "a\x85R."), "{1}");
    expect_repr_r(r, B("cbuiltins\nfrozenset\n)R."), "frozenset()");
    expect_repr_r(r, B("cbuiltins\nbytearray\n)R."), "bytearray(b'')");
    expect_repr_r(r, B("cbuiltins\nbytes\n)R."), "b''");
    expect_repr_r(r, B("c_codecs\nencode\n(Va\nVlatin1\ntR."), "b'a'");
    expect_repr_r(r, B("ccopy_reg\n_reconstructor\n(c__main__\nK\nc__builtin__\nobject\nNtR."),
                  "__main__.K()");
    cr_assert_eq(c.calls, 1, "hook called %d times for builtins", c.calls);
    cr_assert_str_eq(c.seen[0], "__main__.K"); /* only the user's class */
    ost_reader_free(r);

    c = (fg_ctx){.mode = 3};
    r = ost_reader_new();
    ost_reader_set_find_global(r, fg_hook, &c);
    expect_repr_r(r, B("cmymod\nConst\n."), "'replaced'");
    /* a substitute that is not a global is called as data, never an
     * instance's class (INST once reported this as OST_ENOMEM) */
    expect_repr_r(r, B("(imymod\nConst\n."), "'replaced'()");
    expect_repr_r(r, B("(cmymod\nConst\no."), "'replaced'()");
    expect_repr_r(r, B("(K\x01imymod\nConst\n."), "'replaced'(1)");
    expect_err_r(r, B("cmymod\nConst\n)\x81."), OST_EBADPICKLE, 14, "NEWOBJ class is a str");
    ost_reader_free(r);
}

READER_TEST(find_global_refusal_fails_the_load) {
    fg_ctx c = {.mode = 2};
    ost_reader *r = ost_reader_new();
    ost_reader_set_find_global(r, fg_hook, &c);
    expect_err_r(r, B("K\x01" "cmymod\nEvil\n."), OST_EUNKNOWNCLASS, 2,
                 "global mymod.Evil refused");
    expect_err_r(r, B("]\x8c\x02os\x8c\x06system\x93."), OST_EUNKNOWNCLASS, 13, "os.system");
    expect_err_r(r, B("(S'x'\nios\nsystem\n."), OST_EUNKNOWNCLASS, 6, NULL);
    cr_assert_eq(c.calls, 3);
    ost_reader_free(r);
}

READER_TEST(persistent_load_gets_the_pid_and_its_result_joins_the_graph) {
    pl_ctx c = {0};
    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, pl_hook, &c);
    ost_value v = load_ok_r(r, B("\x80\x02]\x8c\x03" "oidK\x07\x86Q\x94" "ah\x00" "a."));
    cr_assert_eq(c.calls, 1);
    cr_assert_str_eq(c.last, "('oid', 7)");
    assert_repr(v, "[persistent(('oid', 7)), persistent(('oid', 7))]");
    cr_assert_eq(ost_typeof(ost_item(v, 0)), OST_T_PERSREF);
    cr_assert_eq(ost_item(v, 0), ost_item(v, 1), "memoized result is shared");
    ost_decref(v);

    c.mode = 3;
    expect_repr_r(r, B("\x8c\x01" "aQ."), "'loaded:a'");
    cr_assert_str_eq(c.last, "'a'");

    c.mode = 1; /* its error code comes back as is */
    expect_err_r(r, B("N0\x8c\x01" "aQ."), OST_ENOTFOUND, 5, "persistent_load failed");
    expect_err_r(r, B("Pxyz\n."), OST_ENOTFOUND, 0, NULL);
    c.mode = 2; /* success without an object is a hook error */
    expect_err_r(r, B("\x8c\x01" "aQ."), OST_EHOOK, 3, "persistent_load failed");
    ost_reader_free(r);

    /* with Python's persistent ids, protocol 0 (PERSID) and 1+ (BINPERSID) */
    for (int proto = 0; proto <= 5; proto++) {
        pl_ctx c2 = {.mode = 3};
        r = ost_reader_new();
        ost_reader_set_persistent_load(r, pl_hook, &c2);
        const py_pickle *p = py_find("pers", proto, 0);
        expect_repr_r(r, (const char *)p->data, p->len,
                      "['loaded:oid-1', 5, 'loaded:oid-2', ['loaded:oid-1']]");
        cr_assert_eq(c2.calls, 3);
        ost_reader_free(r);
    }
}

/* ---- consumed, reuse ----------------------------------------------------------- */

READER_TEST(consumed_reads_concatenated_pickles_one_by_one) {
    ost_reader *r = ost_reader_new();
    const char buf[] = "K\x01.\x80\x02]K\x02" "a.I3\n.";
    size_t len = sizeof buf - 1, off = 0, used = 0;
    const char *want[] = {"1", "[2]", "3"};
    for (int i = 0; i < 3; i++) {
        ost_value v = 0;
        cr_assert_eq(ost_load(r, buf + off, len - off, &v, &used), 0);
        assert_repr(v, want[i]);
        ost_decref(v);
        off += used;
    }
    cr_assert_eq(off, len);
    ost_value v = 5;
    cr_assert_eq(ost_load(r, buf + off, len - off, &v, &used), OST_ETRUNCATED);
    /* without consumed, and with bytes after STOP */
    cr_assert_eq(ost_load(r, "N.garbage", 9, &v, NULL), 0);
    cr_assert_eq(v, OST_NONE);

    /* two Python pickles back to back */
    const py_pickle *a = py_find("mix", 2, 0), *b = py_find("cyclic", 5, 0);
    uint8_t *two = malloc(a->len + b->len);
    memcpy(two, a->data, a->len);
    memcpy(two + a->len, b->data, b->len);
    uint64_t l0 = live();
    cr_assert_eq(ost_load(r, two, a->len + b->len, &v, &used), 0);
    cr_assert_eq(used, a->len);
    assert_repr(v, a->want);
    ost_release(v);
    cr_assert_eq(ost_load(r, two + used, a->len + b->len - used, &v, &used), 0);
    cr_assert_eq(used, b->len);
    assert_repr(v, b->want);
    ost_release(v);
    cr_assert_eq(live(), l0);
    free(two);
    ost_reader_free(r);
}

READER_TEST(reused_reader_resets_between_loads) {
    ost_reader *r = ost_reader_new();
    /* the memo of one load is not visible in the next */
    expect_repr_r(r, B("]q\x00q\x01." ), "[]");
    expect_err_r(r, B("h\x00."), OST_EMEMO, 0, "memo index 0 is not set");
    expect_err_r(r, B("g1\n."), OST_EMEMO, 0, "memo index 1 is not set");
    /* nor are the stack and marks of a failed load */
    expect_err_r(r, B("((((K\x01]K\x02K\x03"), OST_ETRUNCATED, 11, NULL);
    expect_err_r(r, B("t."), OST_EBADPICKLE, 0, "TUPLE without a MARK");
    expect_err_r(r, B("."), OST_EBADPICKLE, 0, "STOP with an empty stack");
    /* success clears the message and the offset */
    expect_repr_r(r, B("K\x05."), "5");
    cr_assert_str_eq(ost_reader_errmsg(r), "");
    cr_assert_eq(ost_reader_erroffset(r), 0);
    /* many loads through one reader, far memo indexes included */
    for (int i = 0; i < 2000; i++) {
        char p[15] = {']', 'r', (char)(i & 0xff), (char)(i >> 8), 0, 0,
                      'j', (char)(i & 0xff), (char)(i >> 8), 0, 0, '\x86', '.'};
        ost_value v = load_ok_r(r, p, 13);
        cr_assert_eq(ost_item(v, 0), ost_item(v, 1));
        ost_decref(v);
        if (i % 100 == 0) expect_err_r(r, B("j\x00\x00\x00\x00."), OST_EMEMO, 0, NULL);
    }
    /* a huge memo index from an earlier load does not linger either */
    expect_repr_r(r, B("]r\xff\xff\xff\x7f."), "[]");
    expect_err_r(r, B("j\xff\xff\xff\x7f."), OST_EMEMO, 0, NULL);
    ost_reader_free(r);
}

/* BINPUT 93 early in the input goes to the sparse part of the memo (far
 * above the input consumed); BINPUT 104 later grows the dense part over
 * index 93; BINGET 93 must still find the first list. It said "memo index
 * 93 is not set", but only on a reader's first load: later loads kept the
 * dense part's size and put 93 there (found by the fuzzer as "a second
 * load of the same input failed differently"). */
OST_TEST(reader, a_memo_index_put_before_the_dense_memo_grew_over_it_is_found) {
    static const uint8_t p[] = {
        ']', 'q', 93,                                        /* [] as memo 93 */
        ']', '0', ']', '0', ']', '0', ']', '0', ']', '0', ']', '0', ']', '0', ']', '0', ']', '0',
        ']', 'q', 104, '0',                                  /* [] as memo 104 */
        ']', 'h', 93, 'a', '.'};                             /* [memo 93] */
    ost_reader *r = ost_reader_new();
    for (int i = 0; i < 3; i++) {
        ost_value v;
        int rc = ost_load(r, p, sizeof p, &v, NULL);
        cr_assert_eq(rc, 0, "load %d: %s", i + 1, ost_reader_errmsg(r));
        cr_assert_eq(ost_typeof(v), OST_T_LIST);
        cr_assert_eq(ost_len(v), 1, "load %d", i + 1);
        cr_assert_eq(ost_typeof(ost_item(v, 0)), OST_T_LIST);
        ost_release(v);
    }
    ost_reader_free(r);
}

/* ---- ost_load_lent ------------------------------------------------------------ */

typedef struct {
    int calls;
    const void *data;
    size_t len;
} lend_ctx;

static void lend_release(void *ud, const void *data, size_t len) {
    lend_ctx *c = ud;
    c->calls++;
    c->data = data;
    c->len = len;
    free((void *)data);
}

/* A malloc'd pickle (protocol 4) of [bytes of n bytes, the same bytes]. */
static uint8_t *pickle_bytes_pair(size_t n, size_t *len) {
    char *payload = malloc(n);
    for (size_t i = 0; i < n; i++) payload[i] = (char)(i * 7);
    ost_value b = ost_bytes(payload, n);
    ost_value l = ost_list_new(0);
    ost_list_append(l, ost_incref(b));
    ost_list_append(l, b);
    free(payload);
    ost_writer *w = ost_writer_new();
    const void *d;
    cr_assert_eq(ost_dump(w, l, &d, len), 0);
    uint8_t *c = malloc(*len);
    memcpy(c, d, *len);
    ost_writer_free(w);
    ost_decref(l);
    return c;
}

READER_TEST(large_bytes_point_into_a_lent_buffer_released_with_the_last_value) {
    size_t n = OST_LEND_MIN + 10, len;
    uint8_t *p = pickle_bytes_pair(n, &len);
    ost_reader *r = ost_reader_new();
    lend_ctx c = {0};
    ost_value v;
    cr_assert_eq(ost_load_lent(r, p, len, lend_release, &c, &v, NULL), 0, "%s",
                 ost_reader_errmsg(r));
    cr_assert_eq(c.calls, 0, "the buffer is still in use");
    size_t bl;
    const char *d = ost_data(ost_item(v, 0), &bl);
    cr_assert_eq(bl, n);
    cr_assert(d >= (const char *)p && d + bl <= (const char *)p + len, "points into the input");
    cr_assert_eq(d, ost_data(ost_item(v, 1), NULL), "memoized: one value");
    cr_assert_eq((uint8_t)d[n - 1], (uint8_t)((n - 1) * 7));
    ost_value b = ost_incref(ost_item(v, 0));
    uint64_t h1, h2;
    ost_value copy = ost_bytes(d, bl);
    cr_assert_eq(ost_hash(b, &h1), 0);
    cr_assert_eq(ost_hash(copy, &h2), 0);
    cr_assert_eq(h1, h2);
    cr_assert(ost_equal(b, copy));
    ost_decref(copy);
    ost_decref(v);
    cr_assert_eq(c.calls, 0, "one value still points into it");
    /* written back as any bytes value */
    ost_writer *w = ost_writer_new();
    const void *out;
    size_t outlen;
    cr_assert_eq(ost_dump(w, b, &out, &outlen), 0);
    cr_assert(outlen > n);
    cr_assert_eq(memcmp((const char *)out + outlen - n - 1, d, n), 0, "payload, then STOP");
    ost_writer_free(w);
    ost_decref(b);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(c.data, p);
    cr_assert_eq(c.len, len);
    ost_reader_free(r);
}

READER_TEST(lent_buffer_is_released_at_once_when_nothing_points_into_it) {
    size_t len;
    uint8_t *p = pickle_bytes_pair(100, &len); /* below OST_LEND_MIN: copied */
    ost_reader *r = ost_reader_new();
    lend_ctx c = {0};
    ost_value v;
    cr_assert_eq(ost_load_lent(r, p, len, lend_release, &c, &v, NULL), 0);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(ost_len(ost_item(v, 0)), 100);
    ost_decref(v);
    cr_assert_eq(c.calls, 1);
    ost_reader_free(r);
}

READER_TEST(lent_buffer_is_released_once_when_the_load_fails) {
    size_t n = OST_LEND_MIN * 2, len;
    uint8_t *p = pickle_bytes_pair(n, &len);
    ost_reader *r = ost_reader_new();
    lend_ctx c = {0};
    ost_value v;
    /* cut before STOP: the bytes value was built, then dropped */
    cr_assert_eq(ost_load_lent(r, p, len - 1, lend_release, &c, &v, NULL), OST_ETRUNCATED);
    cr_assert_eq(v, 0);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(c.len, len - 1);
    lend_ctx c2 = {0};
    uint8_t *q = malloc(4);
    cr_assert_eq(ost_load_lent(NULL, q, 4, lend_release, &c2, &v, NULL), OST_EINVAL);
    cr_assert_eq(c2.calls, 1);
    ost_reader_free(r);
}

READER_TEST(short_text_with_a_bad_byte_at_any_position_is_refused) {
    /* short ASCII text skips the UTF-8 check: a bad byte anywhere in the
     * first 16 must still be seen, whatever follows the text */
    for (size_t n = 1; n <= 16; n++)
        for (size_t bad = 0; bad < n; bad++) {
            uint8_t p[64];
            size_t k = 0;
            p[k++] = 0x80;
            p[k++] = 4;
            p[k++] = 0x8c; /* SHORT_BINUNICODE */
            p[k++] = (uint8_t)n;
            for (size_t i = 0; i < n; i++) p[k++] = i == bad ? 0xff : 'a';
            p[k++] = 0x94; /* MEMOIZE: a high byte right after the text */
            p[k++] = '.';
            for (int i = 0; i < 16; i++) p[k++] = 0x80;
            ost_reader *r = ost_reader_new();
            ost_value v;
            cr_assert_eq(ost_load(r, p, k, &v, NULL), OST_EUTF8, "n %zu, bad byte %zu", n, bad);
            p[4 + bad] = 'b';
            cr_assert_eq(ost_load(r, p, k, &v, NULL), 0, "n %zu: %s", n, ost_reader_errmsg(r));
            cr_assert_eq(ost_len(v), n);
            ost_decref(v);
            ost_reader_free(r);
        }
}

READER_TEST(empty_setitems_or_appends_on_an_instance_keep_no_items) {
    /* found by the fuzzer: an instance given an empty items dict came back
     * from a round trip without it (the writer writes no empty items) */
    static const char *const in[] = {"(i_\np\n(u.", "(i_\np\n(e."};
    for (int k = 0; k < 2; k++) {
        ost_value v = load_ok(in[k], strlen(in[k]));
        assert_repr(v, "_.p()");
        ost_writer *w = ost_writer_new();
        const void *d;
        size_t n;
        cr_assert_eq(ost_dump(w, v, &d, &n), 0);
        ost_value back = load_ok((const char *)d, n);
        cr_assert(ost_same_graph(v, back));
        ost_decref(back);
        ost_writer_free(w);
        ost_decref(v);
    }
}

/* ---- SHORT_BINUNICODE's word path (issue 12) ----------------------------------
 *
 * Text of under 16 bytes with 16 bytes of input after its length is read
 * as two words, checked for ASCII at once and stored as words into a
 * pooled str; anything else takes the general path. Every length from 0
 * to 20, ASCII or not, with the text at the very end of the input or
 * followed by more, pooled or through a custom allocator (no pools, exact
 * sizes: the word stores must not be used), must give the same str. */

static void short_str_round(ost_reader *r, size_t n, bool ascii, size_t pad) {
    uint8_t in[64];
    char text[32];
    for (size_t i = 0; i < n; i++) text[i] = (char)('a' + i % 26);
    if (!ascii && n >= 2) { /* an é ends it: the ASCII test fails on it */
        text[n - 2] = (char)0xc3;
        text[n - 1] = (char)0xa9;
    }
    size_t k = 0;
    in[k++] = 0x8c; /* SHORT_BINUNICODE */
    in[k++] = (uint8_t)n;
    memcpy(in + k, text, n);
    k += n;
    for (size_t i = 0; i < pad; i++) in[k++] = 'N', in[k++] = '0'; /* NONE, POP */
    in[k++] = '.';
    ost_value v;
    size_t used;
    int rc = ost_load(r, in, k, &v, &used);
    cr_assert_eq(rc, 0, "n %zu ascii %d pad %zu: %s", n, ascii, pad, ost_reader_errmsg(r));
    size_t len;
    const char *d = ost_data(v, &len);
    cr_assert_eq(len, n, "n %zu ascii %d pad %zu", n, ascii, pad);
    cr_assert_eq(memcmp(d, text, n), 0, "n %zu ascii %d pad %zu", n, ascii, pad);
    cr_assert_eq(d[n], 0, "NUL terminated");
    cr_assert_eq(used, k);
    ost_decref(v);
}

static void short_strs_all(void) {
    ost_reader *r = ost_reader_new();
    for (size_t n = 0; n <= 20; n++)
        for (int ascii = 0; ascii < 2; ascii++)
            for (size_t pad = 0; pad <= 9; pad += 3) short_str_round(r, n, ascii, pad);
    /* invalid UTF-8 and a truncated text fail as before, either way */
    expect_err_r(r, "\x8c\x02\xc3\x28N0N0N0N0N0N0N0N0N0.", 23, OST_EUTF8, 0,
                 "invalid UTF-8 in SHORT_BINUNICODE");
    expect_err_r(r, "\x8c\x05" "ab", 4, OST_ETRUNCATED, 0, NULL);
    ost_reader_free(r);
}

READER_TEST(short_strs_read_as_words_equal_their_text_pooled) { short_strs_all(); }

READER_TEST(short_strs_read_as_words_equal_their_text_without_pools) {
    ost_set_allocator(&fi_alloc); /* exact sizes: no word stores */
    short_strs_all();
    ost_set_allocator(NULL);
}

/* ---- the size of one value ----------------------------------------------- */

/* A str, bytes or bytearray holds at most 4 GiB - 1 bytes (its length is 32
 * bits: docs/pickle.md, "Limits"). A pickle naming a longer one fails with
 * OST_ELIMIT at its opcode, before any of its bytes are read: the input
 * here is 4 GiB of untouched anonymous memory. */
READER_TEST(value_longer_than_4_gib_is_refused) {
    size_t n = (size_t)UINT32_MAX + 1, len = 11 + n + 1;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    /* (BINUNICODE8 checks its text's UTF-8 first, which would read it all) */
    static const struct { char op; const char *name; } ops[] = {
        {'\x8e', "BINBYTES8"}, {'\x96', "BYTEARRAY8"}};
    ost_reader *r = reader_with(0, 0, 0, SIZE_MAX);
    for (size_t i = 0; i < 2; i++) {
        memcpy(p, "\x80\x05", 2);
        p[2] = ops[i].op;
        uint64_t le = n;
        memcpy(p + 3, &le, 8); /* little-endian */
        p[len - 1] = '.';
        ost_value v = 0;
        cr_assert_eq(ost_load(r, p, len, &v, NULL), OST_ELIMIT, "%s", ops[i].name);
        cr_assert_eq(v, 0);
        cr_assert_str_eq(ost_reader_errmsg(r),
                         "OST_ELIMIT at offset 2: a value of 4294967296 bytes: a str, bytes "
                         "or bytearray holds at "
                         "most 4294967295");
        cr_assert_eq(ost_reader_erroffset(r), 2);
        /* a lent buffer is refused the same way */
        cr_assert_eq(ost_load_lent(r, p, len, NULL, NULL, &v, NULL), OST_ELIMIT);
    }
    ost_reader_free(r);
    cr_assert_eq(munmap(p, len), 0);
    /* the API refuses it too, without reading the data */
    char one = 'x';
    cr_assert_eq(ost_bytes(&one, n), 0);
    cr_assert_eq(ost_bytearray(&one, n), 0);
}

/* Short texts of every length up to 16 read by the word-at-a-time path
 * (SHORT_BINUNICODE with 16 bytes of input after it) keep exactly their
 * bytes and their NUL, whatever room their size class has. */
READER_TEST(short_texts_keep_their_bytes) {
    for (size_t n = 0; n < 16; n++) {
        char p[2 + 16 + 17];
        memset(p, 'Q', sizeof p);
        p[0] = '\x8c';
        p[1] = (char)n;
        for (size_t i = 0; i < n; i++) p[2 + i] = (char)('a' + i);
        p[2 + n] = '.';
        ost_reader *r = ost_reader_new();
        ost_value v = 0;
        size_t used = 0, got;
        cr_assert_eq(ost_load(r, p, sizeof p, &v, &used), 0, "%s", ost_reader_errmsg(r));
        cr_assert_eq(used, 3 + n);
        ost_reader_free(r);
        const char *d = ost_data(v, &got);
        cr_assert_eq(got, n);
        for (size_t i = 0; i < n; i++) cr_assert_eq(d[i], (char)('a' + i));
        cr_assert_eq(d[n], 0);
        ost_decref(v);
    }
}
