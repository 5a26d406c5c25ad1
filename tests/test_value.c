/* Unit tests of values: constructors, containers, Python key semantics,
 * equality, hashing, repr, reference counting and allocation failures
 * (serializer/value.c, compare.c, repr.c, alloc.c). A few results are
 * checked against /usr/bin/python3 itself at test time. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "leakcheck.h"
#include "ostore.h"
#include "pyeval.h"
#include "valbuild.h"

/* ---- helpers -------------------------------------------------------------- */

static uint64_t live(void) {
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    return st.live_objects;
}


static char *repr_of(ost_value v) {
    ost_buf b = {0};
    cr_assert_eq(ost_repr(v, &b), 0);
    char *s = strdup(b.data);
    ost_buf_free(&b);
    return s;
}

#define assert_repr(v, expected)                                           \
    do {                                                                   \
        char *r_ = repr_of(v);                                             \
        cr_expect_str_eq(r_, expected, "repr: got %s, want %s", r_, expected); \
        free(r_);                                                          \
    } while (0)

static ost_value dec(const char *s) {
    ost_value v = ost_int_from_decimal(s, strlen(s));
    cr_assert(v, "bad decimal %s", s);
    return v;
}

static ost_value S(const char *s) { return ost_str_c(s); }

static bool same_hash(ost_value a, ost_value b) {
    uint64_t x, y;
    cr_assert_eq(ost_hash(a, &x), 0);
    cr_assert_eq(ost_hash(b, &y), 0);
    return x == y;
}

/* ---- immediates ------------------------------------------------------------ */

OST_TEST(value, small_int_edges_are_immediates_and_one_beyond_is_heap) {
    uint64_t base = live();
    ost_value mx = ost_int(OST_SMALLINT_MAX), mn = ost_int(OST_SMALLINT_MIN);
    cr_assert(ost_is_immediate(mx));
    cr_assert(ost_is_immediate(mn));
    cr_assert_eq(ost_refcount(mx), 0);
    cr_assert_eq(ost_typeof(mx), OST_T_INT);
    cr_assert_eq(ost_typeof(mn), OST_T_INT);
    int64_t x;
    cr_assert_eq(ost_int_value(mx, &x), 0);
    cr_assert_eq(x, OST_SMALLINT_MAX);
    cr_assert_eq(ost_int_value(mn, &x), 0);
    cr_assert_eq(x, OST_SMALLINT_MIN);
    cr_assert_eq(ost_incref(mx), mx);
    ost_decref(mx);
    cr_assert_eq(live(), base, "immediates allocate nothing");

    ost_value above = ost_int(OST_SMALLINT_MAX + 1), below = ost_int(OST_SMALLINT_MIN - 1);
    cr_assert(!ost_is_immediate(above));
    cr_assert(!ost_is_immediate(below));
    cr_assert_eq(ost_typeof(above), OST_T_INT);
    cr_assert_eq(ost_refcount(above), 1);
    cr_assert_eq(live(), base + 2);
    cr_assert_eq(ost_int_value(above, &x), 0);
    cr_assert_eq(x, OST_SMALLINT_MAX + 1);
    cr_assert_eq(ost_int_value(below, &x), 0);
    cr_assert_eq(x, OST_SMALLINT_MIN - 1);
    assert_repr(above, "4611686018427387904");
    assert_repr(below, "-4611686018427387905");
    assert_repr(mn, "-4611686018427387904");
    /* the same number from bytes: equal, and the edge stays immediate */
    uint8_t b[8];
    cr_assert_eq(ost_int_to_bytes(mx, b, 8), 8);
    cr_assert_eq(ost_int_from_bytes(b, 8), mx);
    ost_incref(above);
    cr_assert_eq(ost_refcount(above), 2);
    ost_decref(above);
    ost_decref(above);
    ost_decref(below);
    cr_assert_eq(live(), base);
}

OST_TEST(value, none_true_false_have_no_refcount) {
    uint64_t base = live();
    ost_value v[3] = {OST_NONE, OST_TRUE, OST_FALSE};
    for (int i = 0; i < 3; i++) {
        cr_assert(ost_is_immediate(v[i]));
        cr_assert_eq(ost_refcount(v[i]), 0);
        cr_assert_eq(ost_incref(v[i]), v[i]);
        ost_decref(v[i]);
        ost_release(v[i]);
    }
    cr_assert_eq(ost_typeof(OST_NONE), OST_T_NONE);
    cr_assert_eq(ost_typeof(OST_TRUE), OST_T_BOOL);
    cr_assert_eq(ost_typeof(OST_FALSE), OST_T_BOOL);
    cr_assert_eq(ost_typeof(OST_NOVALUE), OST_T_INVALID);
    cr_assert_str_eq(ost_type_name(OST_T_NONE), "NoneType");
    cr_assert_str_eq(ost_type_name(OST_T_BOOL), "bool");
    cr_assert_str_eq(ost_type_name(OST_T_DICT), "dict");
    cr_assert_eq(ost_bool(true), OST_TRUE);
    cr_assert_eq(ost_bool(false), OST_FALSE);
    int64_t x = 7;
    cr_assert_eq(ost_int_value(OST_TRUE, &x), 0);
    cr_assert_eq(x, 1);
    cr_assert_eq(ost_int_value(OST_FALSE, &x), 0);
    cr_assert_eq(x, 0);
    cr_assert_eq(ost_int_value(OST_NONE, &x), OST_ETYPE);
    cr_assert_eq(live(), base);
}

/* ---- ints and floats -------------------------------------------------------- */

static void assert_bytes(ost_value v, const uint8_t *want, size_t n) {
    uint8_t got[64];
    memset(got, 0xAA, sizeof got);
    cr_assert_eq(ost_int_to_bytes(v, got, sizeof got), n);
    cr_assert_arr_eq(got, want, n);
}

OST_TEST(value, heap_ints_from_bytes_use_minimal_encoding) {
    uint64_t base = live();
    /* 2**64 with redundant zero bytes */
    static const uint8_t p64[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    ost_value v = ost_int_from_bytes(p64, sizeof p64);
    cr_assert(!ost_is_immediate(v));
    assert_bytes(v, p64, 9);
    assert_repr(v, "18446744073709551616");
    ost_value w = dec("18446744073709551616");
    cr_assert(ost_equal(v, w));
    cr_assert(ost_same_graph(v, w));
    ost_decref(w);
    ost_decref(v);

    /* -(2**64) with redundant 0xff bytes */
    static const uint8_t m64[] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff};
    v = ost_int_from_bytes(m64, sizeof m64);
    assert_bytes(v, m64, 9);
    assert_repr(v, "-18446744073709551616");
    w = dec("-18446744073709551616");
    assert_bytes(w, m64, 9);
    ost_decref(w);
    ost_decref(v);

    /* redundant sign bytes that leave a small int */
    static const uint8_t one[] = {1, 0, 0, 0};
    static const uint8_t minus1[] = {0xff, 0xff, 0xff};
    static const uint8_t m128[] = {0x80, 0xff};
    static const uint8_t p128[] = {0x80, 0x00};
    cr_assert_eq(ost_int_from_bytes(one, 4), ost_int(1));
    cr_assert_eq(ost_int_from_bytes(minus1, 3), ost_int(-1));
    cr_assert_eq(ost_int_from_bytes(m128, 2), ost_int(-128));
    cr_assert_eq(ost_int_from_bytes(p128, 2), ost_int(128));
    cr_assert_eq(ost_int_from_bytes(NULL, 0), ost_int(0));
    assert_bytes(ost_int(-128), m128, 1);
    assert_bytes(ost_int(128), p128, 2);
    assert_bytes(ost_int(-1), minus1, 1);
    cr_assert_eq(ost_int_to_bytes(ost_int(0), NULL, 0), 0);
    cr_assert_eq(ost_int_to_bytes(OST_TRUE, NULL, 0), 1);

    /* 2**63 needs 9 bytes; the buffer is left alone when too small */
    static const uint8_t p63[] = {0, 0, 0, 0, 0, 0, 0, 0x80, 0};
    v = dec("9223372036854775808");
    uint8_t small[4] = {9, 9, 9, 9};
    cr_assert_eq(ost_int_to_bytes(v, small, sizeof small), 9);
    cr_assert_eq(small[0], 9);
    assert_bytes(v, p63, 9);
    ost_decref(v);

    /* big decimal text, both signs, as Python's int.to_bytes(13, 'little') */
    static const uint8_t big[] = {0xd2, 0x0a, 0x3f, 0x4e, 0xee, 0xe0, 0x73,
                                  0xc3, 0xf6, 0x0f, 0xe9, 0x8e, 0x01};
    static const uint8_t nbig[] = {0x2e, 0xf5, 0xc0, 0xb1, 0x11, 0x1f, 0x8c,
                                   0x3c, 0x09, 0xf0, 0x16, 0x71, 0xfe};
    v = dec("123456789012345678901234567890");
    assert_bytes(v, big, sizeof big);
    assert_repr(v, "123456789012345678901234567890");
    ost_decref(v);
    v = dec("-123456789012345678901234567890");
    assert_bytes(v, nbig, sizeof nbig);
    assert_repr(v, "-123456789012345678901234567890");
    ost_decref(v);
    cr_assert_eq(live(), base);
}

OST_TEST(value, int_from_decimal_accepts_signs_and_rejects_bad_text) {
    uint64_t base = live();
    cr_assert_eq(dec("+7"), ost_int(7));
    cr_assert_eq(dec("-0"), ost_int(0));
    cr_assert_eq(dec("0000000000000000000000000000000042"), ost_int(42));
    cr_assert_eq(dec("-4611686018427387904"), ost_int(OST_SMALLINT_MIN));
    const char *bad[] = {"", "-", "+", "12a", " 1", "1 ", "1_000", "0x10", "--1", "1.0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(ost_int_from_decimal(bad[i], strlen(bad[i])), OST_NOVALUE, "%s", bad[i]);
    /* only n bytes are read */
    cr_assert_eq(ost_int_from_decimal("12345", 2), ost_int(12));
    cr_assert_eq(live(), base);
}

OST_TEST(value, int_value_reports_overflow_and_wrong_types) {
    int64_t x;
    ost_value v = dec("9223372036854775807");
    cr_assert_eq(ost_int_value(v, &x), 0);
    cr_assert_eq(x, INT64_MAX);
    ost_decref(v);
    v = dec("-9223372036854775808");
    cr_assert_eq(ost_int_value(v, &x), 0);
    cr_assert_eq(x, INT64_MIN);
    ost_decref(v);
    const char *over[] = {"9223372036854775808", "-9223372036854775809",
                          "18446744073709551616", "-1000000000000000000000000000"};
    for (size_t i = 0; i < 4; i++) {
        v = dec(over[i]);
        cr_assert_eq(ost_int_value(v, &x), OST_ELIMIT, "%s", over[i]);
        ost_decref(v);
    }
    ost_value s = S("1"), f = ost_float(1.0);
    cr_assert_eq(ost_int_value(s, &x), OST_ETYPE);
    cr_assert_eq(ost_int_value(f, &x), OST_ETYPE);
    ost_decref(s);
    ost_decref(f);
    v = ost_int(INT64_MIN);
    cr_assert_eq(ost_int_value(v, &x), 0);
    cr_assert_eq(x, INT64_MIN);
    ost_decref(v);
}

OST_TEST(value, floats_hold_doubles_and_ints_convert) {
    uint64_t base = live();
    ost_value f = ost_float(1.5);
    cr_assert_eq(ost_typeof(f), OST_T_FLOAT);
    cr_assert(ost_is_immediate(f), "1.5 is kept in the value word");
    cr_assert_eq(ost_refcount(f), 0);
    cr_assert_eq(ost_float_value(f), 1.5);
    ost_decref(f);
    f = ost_float(1e300);
    cr_assert_eq(ost_typeof(f), OST_T_FLOAT);
    cr_assert_eq(ost_refcount(f), 1, "out of the immediate range: a heap float");
    cr_assert_eq(ost_float_value(f), 1e300);
    ost_decref(f);
    f = ost_float(-0.0);
    cr_assert(signbit(ost_float_value(f)));
    ost_decref(f);
    cr_assert_eq(ost_float_value(ost_int(3)), 3.0);
    cr_assert_eq(ost_float_value(OST_TRUE), 1.0);
    ost_value b = dec("1180591620717411303424"); /* 2**70 */
    cr_assert_eq(ost_float_value(b), ldexp(1, 70));
    ost_decref(b);
    b = dec("-1180591620717411303424");
    cr_assert_eq(ost_float_value(b), -ldexp(1, 70));
    ost_decref(b);
    ost_value s = S("x");
    cr_assert(isnan(ost_float_value(s)));
    cr_assert(isnan(ost_float_value(OST_NONE)));
    ost_decref(s);
    cr_assert_eq(live(), base);
}

/* ---- text ------------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t n;
    int ok;
    size_t bad;
} utf8_case;

#define U(lit, ok, bad) {lit, sizeof(lit) - 1, ok, bad}
static const utf8_case utf8_cases[] = {
    U("plain ascii", 1, 0),
    U("h\xc3\xa9llo", 1, 0),                      /* é */
    U("\xe2\x82\xac", 1, 0),                      /* € */
    U("\xf0\x9f\x98\x80", 1, 0),                  /* astral 😀 */
    U("\xf4\x8f\xbf\xbf", 1, 0),                  /* U+10FFFF */
    U("\xed\xa0\x80", 1, 0),                      /* lone high surrogate */
    U("x\xed\xbf\xbf", 1, 0),                     /* lone low surrogate */
    U("\xed\xa0\xbd\xed\xb8\x80", 1, 0),          /* a pair, as two */
    U("a\0b", 1, 0),                              /* NUL is text */
    U("\xc0\x80", 0, 0),                          /* overlong NUL */
    U("ab\xc1\xbf", 0, 2),                        /* overlong 2-byte */
    U("\xe0\x80\xaf", 0, 0),                      /* overlong 3-byte */
    U("\xf0\x80\x80\xaf", 0, 0),                  /* overlong 4-byte */
    U("\xf4\x90\x80\x80", 0, 0),                  /* above U+10FFFF */
    U("\xf5\x80\x80\x80", 0, 0),                  /* bad lead */
    U("\xff", 0, 0),
    U("a\x80", 0, 1),                             /* stray continuation */
    U("\xe2\x28\xa1", 0, 0),                      /* bad continuation */
    U("\xe2\x82\x41", 0, 0),                      /* bad third byte */
    U("\xe2\x82", 0, 0),                          /* truncated */
    U("xy\xf0\x9f\x98", 0, 2),                    /* truncated astral */
    U("0123456789abcdefghij\xff", 0, 20),         /* after an ASCII run */
    U("0123456789abcdef\xc3\xa9\xc3", 0, 18),
};

OST_TEST(value, utf8_check_accepts_surrogatepass_and_reports_bad_offset) {
    for (size_t i = 0; i < sizeof utf8_cases / sizeof *utf8_cases; i++) {
        const utf8_case *c = &utf8_cases[i];
        size_t bad = 12345;
        int rc = ost_utf8_check(c->s, c->n, &bad);
        if (c->ok) {
            cr_expect_eq(rc, 0, "case %zu should be valid", i);
            ost_value v = ost_str(c->s, c->n);
            cr_expect(v, "case %zu", i);
            cr_expect_eq(ost_len(v), c->n);
            ost_decref(v);
        } else {
            cr_expect_eq(rc, OST_EUTF8, "case %zu should be invalid", i);
            cr_expect_eq(bad, c->bad, "case %zu: bad offset %zu, want %zu", i, bad, c->bad);
            cr_expect_eq(ost_str(c->s, c->n), OST_NOVALUE, "case %zu", i);
            cr_expect_eq(ost_utf8_check(c->s, c->n, NULL), OST_EUTF8);
        }
    }
}

OST_TEST(value, utf8_check_agrees_with_python_surrogatepass) {
    ost_buf in = {0};
    size_t n = sizeof utf8_cases / sizeof *utf8_cases;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < utf8_cases[i].n; k++)
            ost__buf_printf(&in, "%02x", (uint8_t)utf8_cases[i].s[k]);
        ost__buf_printf(&in, "\n");
    }
    char *out = py_run("import sys\n"
                       "for line in open(sys.argv[1]):\n"
                       "    b = bytes.fromhex(line.strip())\n"
                       "    try:\n"
                       "        b.decode('utf-8', 'surrogatepass'); print('ok')\n"
                       "    except UnicodeDecodeError as e:\n"
                       "        print(e.start)\n",
                       in.data, in.len);
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    for (size_t i = 0; i < n; i++, line = strtok_r(NULL, "\n", &save)) {
        cr_assert(line, "python printed too few lines");
        size_t bad = 0;
        int rc = ost_utf8_check(utf8_cases[i].s, utf8_cases[i].n, &bad);
        if (strcmp(line, "ok") == 0) cr_expect_eq(rc, 0, "case %zu: python accepts it", i);
        else {
            cr_expect_eq(rc, OST_EUTF8, "case %zu: python rejects it", i);
            cr_expect_eq(bad, (size_t)atol(line), "case %zu: offset %zu, python %s", i, bad, line);
        }
    }
    free(out);
    ost_buf_free(&in);
}

OST_TEST(value, str_bytes_and_bytearray_copy_their_data) {
    uint64_t base = live();
    ost_value s = ost_str("a\0b", 3);
    size_t n = 99;
    const char *p = ost_data(s, &n);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(p, "a\0b", 4), 0, "copied and NUL terminated");
    cr_assert_eq(ost_typeof(s), OST_T_STR);
    ost_value e = ost_str_c("h\xc3\xa9");
    cr_assert_eq(ost_len(e), 3);
    char buf[4] = "xyz";
    ost_value b = ost_bytes(buf, 3), ba = ost_bytearray(buf, 3);
    buf[0] = 'Q';
    cr_assert_str_eq(ost_data(b, NULL), "xyz");
    cr_assert_str_eq(ost_data(ba, NULL), "xyz");
    cr_assert_eq(ost_typeof(b), OST_T_BYTES);
    cr_assert_eq(ost_typeof(ba), OST_T_BYTEARRAY);
    ost_value empty = ost_bytes("", 0);
    cr_assert_eq(ost_len(empty), 0);
    cr_assert_str_eq(ost_data(empty, NULL), "");
    n = 5;
    cr_assert_null(ost_data(ost_int(5), &n));
    cr_assert_eq(n, 0);
    cr_assert_eq(ost_str_c("\xff"), OST_NOVALUE);
    ost_decref(s);
    ost_decref(e);
    ost_decref(b);
    ost_decref(ba);
    ost_decref(empty);
    cr_assert_eq(live(), base);
}

/* ---- tuples and lists -------------------------------------------------------- */

OST_TEST(value, tuples_start_as_none_and_steal_items) {
    uint64_t base = live();
    ost_value t = ost_tuple_new(3);
    cr_assert_eq(ost_len(t), 3);
    for (size_t i = 0; i < 3; i++) cr_assert_eq(ost_item(t, i), OST_NONE);
    ost_value x = S("x");
    cr_assert_eq(ost_tuple_set(t, 1, ost_incref(x)), 0);
    cr_assert_eq(ost_refcount(x), 2);
    cr_assert_eq(ost_item(t, 1), x);
    cr_assert_eq(ost_item(t, 3), OST_NOVALUE);
    /* failures release the stolen reference */
    cr_assert_eq(ost_tuple_set(t, 3, ost_incref(x)), OST_EINVAL);
    cr_assert_eq(ost_refcount(x), 2);
    ost_value l = ost_list_new(0);
    cr_assert_eq(ost_tuple_set(l, 0, ost_incref(x)), OST_EINVAL);
    cr_assert_eq(ost_refcount(x), 2);
    cr_assert_eq(ost_tuple_set(t, 0, OST_NOVALUE), OST_EINVAL);
    /* replacing releases the old item */
    cr_assert_eq(ost_tuple_set(t, 1, ost_int(5)), 0);
    cr_assert_eq(ost_refcount(x), 1);
    ost_value empty = ost_tuple_new(0);
    cr_assert_eq(ost_len(empty), 0);
    ost_decref(empty);
    ost_decref(l);
    ost_decref(x);
    ost_decref(t);
    cr_assert_eq(live(), base);
}

OST_TEST(value, lists_append_set_item_and_release_on_failure) {
    uint64_t base = live();
    ost_value l = ost_list_new(2);
    for (int i = 0; i < 1000; i++) cr_assert_eq(ost_list_append(l, ost_int(i)), 0);
    cr_assert_eq(ost_len(l), 1000);
    for (int i = 0; i < 1000; i++) cr_assert_eq(ost_item(l, (size_t)i), ost_int(i));
    cr_assert_eq(ost_item(l, 1000), OST_NOVALUE);
    ost_value x = S("x");
    cr_assert_eq(ost_list_set(l, 10, ost_incref(x)), 0);
    cr_assert_eq(ost_item(l, 10), x);
    cr_assert_eq(ost_refcount(x), 2);
    cr_assert_eq(ost_list_set(l, 1000, ost_incref(x)), OST_EINVAL);
    cr_assert_eq(ost_refcount(x), 2, "a failed set releases the item");
    ost_value t = ost_tuple_new(1);
    cr_assert_eq(ost_list_append(t, ost_incref(x)), OST_ETYPE);
    cr_assert_eq(ost_refcount(x), 2, "a failed append releases the item");
    cr_assert_eq(ost_list_append(l, OST_NOVALUE), OST_ETYPE);
    cr_assert_eq(ost_len(l), 1000);
    cr_assert_eq(ost_list_set(l, 10, ost_int(10)), 0);
    cr_assert_eq(ost_refcount(x), 1, "replacing releases the old item");
    /* appending a value made by a failed constructor is safe */
    cr_assert_eq(ost_list_append(l, ost_str_c("\xff")), OST_ETYPE);
    ost_decref(t);
    ost_decref(x);
    ost_decref(l);
    cr_assert_eq(live(), base);
}

/* ---- dicts ------------------------------------------------------------------- */

static void dict_keys_are(ost_value d, size_t n, const ost_value *keys) {
    size_t pos = 0, i = 0;
    ost_value k, v;
    while (ost_dict_next(d, &pos, &k, &v)) {
        cr_assert(i < n, "too many keys");
        cr_assert(ost_same_graph(k, keys[i]), "key %zu out of order", i);
        i++;
    }
    cr_assert_eq(i, n);
    cr_assert_eq(ost_len(d), n);
}

OST_TEST(value, dict_keeps_insertion_order_and_replaces_values) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    const char *names[] = {"zeta", "alpha", "mid", "beta"};
    for (int i = 0; i < 4; i++) cr_assert_eq(ost_dict_set(d, S(names[i]), ost_int(i)), 0);
    ost_value keys[4];
    for (int i = 0; i < 4; i++) keys[i] = S(names[i]);
    dict_keys_are(d, 4, keys);
    cr_assert_eq(ost_dict_set(d, S("alpha"), ost_int(100)), 0);
    dict_keys_are(d, 4, keys);
    cr_assert_eq(ost_dict_get_c(d, "alpha"), ost_int(100));
    cr_assert_eq(ost_dict_get(d, keys[0]), ost_int(0));
    cr_assert_eq(ost_dict_get_c(d, "nope"), OST_NOVALUE);
    for (int i = 0; i < 4; i++) ost_decref(keys[i]);
    ost_decref(d);
    cr_assert_eq(live(), base);
}

OST_TEST(value, dict_one_key_for_1_and_1_0_and_true_keeps_first_key) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    cr_assert_eq(ost_dict_set(d, ost_float(1.0), S("a")), 0);
    cr_assert_eq(ost_dict_set(d, ost_int(1), S("b")), 0);
    cr_assert_eq(ost_dict_set(d, OST_TRUE, S("c")), 0);
    cr_assert_eq(ost_len(d), 1);
    size_t pos = 0;
    ost_value k, v;
    cr_assert(ost_dict_next(d, &pos, &k, &v));
    cr_assert_eq(ost_typeof(k), OST_T_FLOAT, "the first key object stays");
    cr_assert_str_eq(ost_data(v, NULL), "c");
    cr_assert_eq(ost_dict_get(d, ost_int(1)), v);
    cr_assert_eq(ost_dict_get(d, OST_TRUE), v);
    assert_repr(d, "{1.0: 'c'}");
    ost_decref(d);

    d = ost_dict_new();
    cr_assert_eq(ost_dict_set(d, OST_TRUE, S("x")), 0);
    cr_assert_eq(ost_dict_set(d, ost_float(1.0), S("y")), 0);
    cr_assert_eq(ost_dict_set(d, ost_int(0), S("zero")), 0);
    cr_assert_eq(ost_dict_set(d, OST_FALSE, S("false")), 0);
    cr_assert_eq(ost_dict_set(d, ost_float(-0.0), S("negzero")), 0);
    assert_repr(d, "{True: 'y', 0: 'negzero'}");
    /* a big int and the float of the same value are one key too */
    cr_assert_eq(ost_dict_set(d, dec("18446744073709551616"), S("big")), 0);
    ost_value f = ost_float(ldexp(1, 64));
    cr_assert_eq(ost_dict_set(d, ost_incref(f), S("bigf")), 0);
    cr_assert_eq(ost_len(d), 3);
    assert_repr(ost_dict_get(d, f), "'bigf'");
    ost_decref(f);
    ost_decref(d);
    cr_assert_eq(live(), base);
}

OST_TEST(value, dict_str_and_bytes_differ_and_tuples_are_keys) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    cr_assert_eq(ost_dict_set(d, S("a"), ost_int(1)), 0);
    cr_assert_eq(ost_dict_set(d, ost_bytes("a", 1), ost_int(2)), 0);
    cr_assert_eq(ost_len(d), 2);
    cr_assert_eq(ost_dict_get_c(d, "a"), ost_int(1));
    ost_value b = ost_bytes("a", 1);
    cr_assert_eq(ost_dict_get(d, b), ost_int(2));
    ost_decref(b);
    cr_assert_eq(ost_dict_set(d, tuple_of(2, ost_int(1), S("x")), S("t")), 0);
    ost_value probe = tuple_of(2, ost_float(1.0), S("x"));
    assert_repr(ost_dict_get(d, probe), "'t'");
    ost_decref(probe);
    probe = tuple_of(2, ost_int(1), ost_bytes("x", 1));
    cr_assert_eq(ost_dict_get(d, probe), OST_NOVALUE);
    ost_decref(probe);
    ost_value fs = ost_frozenset_new();
    ost_set_add(fs, ost_int(3));
    cr_assert_eq(ost_dict_set(d, fs, S("fs")), 0);
    cr_assert_eq(ost_len(d), 4);
    ost_decref(d);
    cr_assert_eq(live(), base);
}

OST_TEST(value, dict_unhashable_keys_fail_with_etype_and_release_both) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    ost_value val = S("value");
    ost_value keys[5];
    keys[0] = ost_list_new(0);
    keys[1] = ost_dict_new();
    keys[2] = ost_set_new();
    keys[3] = ost_bytearray("a", 1);
    keys[4] = tuple_of(2, ost_int(1), ost_list_new(0));
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(ost_dict_set(d, keys[i], ost_incref(val)), OST_ETYPE, "key %d", i);
        cr_assert_eq(ost_refcount(val), 1, "value released, key %d", i);
    }
    cr_assert_eq(ost_len(d), 0);
    cr_assert_eq(ost_dict_set(d, OST_NOVALUE, ost_incref(val)), OST_EINVAL);
    ost_value l = ost_list_new(0);
    cr_assert_eq(ost_dict_set(l, S("k"), ost_incref(val)), OST_EINVAL);
    cr_assert_eq(ost_refcount(val), 1);
    ost_decref(l);
    ost_decref(val);
    ost_decref(d);
    cr_assert_eq(live(), base, "rejected keys were released");
}

OST_TEST(value, dict_delete_keeps_order_of_the_rest) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    const char *names[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) ost_dict_set(d, S(names[i]), ost_int(i));
    ost_value kb = S("b");
    cr_assert_eq(ost_dict_del(d, kb), 0);
    cr_assert_eq(ost_dict_del(d, kb), OST_ENOTFOUND);
    cr_assert_eq(ost_dict_get(d, kb), OST_NOVALUE);
    ost_value rest[3] = {S("a"), S("c"), S("d")};
    dict_keys_are(d, 3, rest);
    cr_assert_eq(ost_dict_set(d, ost_incref(kb), ost_int(9)), 0);
    assert_repr(d, "{'a': 0, 'c': 2, 'd': 3, 'b': 9}");
    ost_value l = ost_list_new(0);
    cr_assert_eq(ost_dict_del(d, l), OST_ENOTFOUND, "unhashable: not found");
    ost_decref(l);
    for (int i = 0; i < 3; i++) ost_decref(rest[i]);
    ost_decref(kb);
    ost_decref(d);
    cr_assert_eq(live(), base);
}

static ost_value key_for(int i) {
    if (i % 2) return ost_int((int64_t)i * 1000003);
    char b[32];
    snprintf(b, sizeof b, "key-%d", i);
    return S(b);
}

OST_TEST(value, dict_grows_past_linear_threshold_to_thousands_of_keys) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    enum { N = 6000 };
    /* every lookup right while crossing the linear-search threshold */
    for (int i = 0; i < 3 * OST__DICT_LINEAR; i++) {
        cr_assert_eq(ost_dict_set(d, key_for(i), ost_int(i)), 0);
        for (int j = 0; j <= i; j++) {
            ost_value k = key_for(j);
            cr_assert_eq(ost_dict_get(d, k), ost_int(j), "key %d after %d inserts", j, i + 1);
            ost_decref(k);
        }
        ost_value k = key_for(i + 1);
        cr_assert_eq(ost_dict_get(d, k), OST_NOVALUE);
        ost_decref(k);
    }
    for (int i = 3 * OST__DICT_LINEAR; i < N; i++)
        cr_assert_eq(ost_dict_set(d, key_for(i), ost_int(i)), 0);
    cr_assert_eq(ost_len(d), N);
    for (int i = 0; i < N; i++) {
        ost_value k = key_for(i);
        cr_assert_eq(ost_dict_get(d, k), ost_int(i), "key %d", i);
        ost_decref(k);
    }
    for (int i = N; i < N + 200; i++) {
        ost_value k = key_for(i);
        cr_assert_eq(ost_dict_get(d, k), OST_NOVALUE);
        ost_decref(k);
    }
    /* iteration in insertion order */
    size_t pos = 0;
    ost_value k, v;
    for (int i = 0; i < N; i++) {
        cr_assert(ost_dict_next(d, &pos, &k, &v));
        cr_assert_eq(v, ost_int(i));
    }
    cr_assert(!ost_dict_next(d, &pos, &k, &v));
    /* delete two thirds, re-add some, add new ones */
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) continue;
        ost_value kk = key_for(i);
        cr_assert_eq(ost_dict_del(d, kk), 0, "del %d", i);
        ost_decref(kk);
    }
    cr_assert_eq(ost_len(d), N / 3);
    for (int i = 0; i < N; i++) {
        ost_value kk = key_for(i);
        cr_assert_eq(ost_dict_get(d, kk), i % 3 ? OST_NOVALUE : ost_int(i), "key %d", i);
        ost_decref(kk);
    }
    for (int i = N; i < 2 * N; i++) cr_assert_eq(ost_dict_set(d, key_for(i), ost_int(i)), 0);
    for (int i = 1; i < N; i += 3) cr_assert_eq(ost_dict_set(d, key_for(i), ost_int(-i)), 0);
    pos = 0;
    int expect_count = 0;
    int64_t prev_new = N - 1;
    bool in_readded = false;
    while (ost_dict_next(d, &pos, &k, &v)) {
        int64_t x;
        cr_assert_eq(ost_int_value(v, &x), 0);
        if (x < 0) in_readded = true;
        else if (x >= N) {
            cr_assert(!in_readded, "new keys come before the re-added ones");
            cr_assert_eq(x, prev_new + 1, "new keys in order");
            prev_new = x;
        } else {
            cr_assert(!in_readded && prev_new == N - 1, "old survivors come first");
            cr_assert_eq(x % 3, 0);
        }
        expect_count++;
    }
    cr_assert_eq((size_t)expect_count, ost_len(d));
    cr_assert_eq(ost_len(d), N / 3 + N + (N - 1 + 2) / 3);
    for (int i = 0; i < 2 * N; i++) {
        ost_value kk = key_for(i);
        ost_value want = i >= N || i % 3 == 0 ? ost_int(i) : i % 3 == 1 ? ost_int(-i) : OST_NOVALUE;
        cr_assert_eq(ost_dict_get(d, kk), want, "key %d", i);
        ost_decref(kk);
    }
    ost_decref(d);
    cr_assert_eq(live(), base);
}

OST_TEST(value, dict_deleting_every_key_of_a_big_dict_then_refilling) {
    uint64_t base = live();
    ost_value d = ost_dict_new();
    enum { N = 20000 };
    for (int i = 0; i < N; i++) ost_dict_set(d, ost_int(i), OST_NONE);
    for (int i = 0; i < N; i++) cr_assert_eq(ost_dict_del(d, ost_int(i)), 0);
    cr_assert_eq(ost_len(d), 0);
    size_t pos = 0;
    cr_assert(!ost_dict_next(d, &pos, NULL, NULL));
    for (int i = N; i < 2 * N; i++) ost_dict_set(d, ost_int(i), ost_int(i));
    for (int i = 0; i < 2 * N; i++)
        cr_assert_eq(ost_dict_get(d, ost_int(i)), i < N ? OST_NOVALUE : ost_int(i));
    ost_decref(d);
    cr_assert_eq(live(), base);
}

/* ---- sets ---------------------------------------------------------------------- */

OST_TEST(value, sets_and_frozensets_use_python_equality) {
    uint64_t base = live();
    ost_value s = ost_set_new(), fs = ost_frozenset_new();
    ost_value all[2] = {s, fs};
    for (int i = 0; i < 2; i++) {
        ost_value x = all[i];
        cr_assert_eq(ost_set_add(x, ost_int(1)), 0);
        cr_assert_eq(ost_set_add(x, ost_float(1.0)), 0);
        cr_assert_eq(ost_set_add(x, OST_TRUE), 0);
        cr_assert_eq(ost_set_add(x, S("a")), 0);
        cr_assert_eq(ost_set_add(x, ost_bytes("a", 1)), 0);
        cr_assert_eq(ost_set_add(x, S("a")), 0);
        cr_assert_eq(ost_len(x), 3);
        cr_assert(ost_set_contains(x, OST_TRUE));
        ost_value f = ost_float(1.0);
        cr_assert(ost_set_contains(x, f));
        ost_decref(f);
        cr_assert(!ost_set_contains(x, ost_int(2)));
        cr_assert_eq(ost_set_add(x, ost_list_new(0)), OST_ETYPE);
        cr_assert_eq(ost_len(x), 3);
        size_t pos = 0, n = 0;
        ost_value k, v = 123;
        while (ost_dict_next(x, &pos, &k, &v)) {
            cr_assert_eq(v, OST_NOVALUE, "sets have no values");
            n++;
        }
        cr_assert_eq(n, 3);
    }
    assert_repr(s, "{1, 'a', b'a'}");
    assert_repr(fs, "frozenset({1, 'a', b'a'})");
    cr_assert(ost_equal(s, fs), "set == frozenset with the same items");
    ost_value a = S("a");
    cr_assert_eq(ost_dict_del(s, a), 0);
    cr_assert(!ost_set_contains(s, a));
    ost_decref(a);
    ost_value d = ost_dict_new();
    cr_assert_eq(ost_set_add(d, ost_int(1)), OST_EINVAL);
    cr_assert(!ost_set_contains(d, ost_int(1)));
    ost_decref(d);
    ost_decref(s);
    ost_decref(fs);
    cr_assert_eq(live(), base);
}

/* ---- globals, instances, reduce, persistent --------------------------------- */

OST_TEST(value, globals_name_a_module_and_a_name) {
    uint64_t base = live();
    ost_value g = ost_global("collections", "OrderedDict");
    cr_assert_eq(ost_typeof(g), OST_T_GLOBAL);
    cr_assert_str_eq(ost_data(ost_global_module(g), NULL), "collections");
    cr_assert_str_eq(ost_data(ost_global_name(g), NULL), "OrderedDict");
    cr_assert_eq(ost_global_module(ost_int(1)), OST_NOVALUE);
    assert_repr(g, "collections.OrderedDict");
    ost_value g2 = ost_global("collections", "OrderedDict");
    cr_assert(ost_equal(g, g2));
    cr_assert(same_hash(g, g2));
    ost_decref(g2);
    ost_decref(g);
    cr_assert_eq(ost_global("bad\xff", "x"), OST_NOVALUE);
    cr_assert_eq(ost_global("m", "\xc0\x80"), OST_NOVALUE);
    cr_assert_eq(live(), base);
}

OST_TEST(value, instances_get_and_set_attributes) {
    uint64_t base = live();
    ost_value inst = ost_instance_new(ost_global("myapp", "Point"));
    cr_assert_eq(ost_typeof(inst), OST_T_INSTANCE);
    cr_assert_eq(ost_instance_state(inst), OST_NONE);
    cr_assert_str_eq(ost_data(ost_global_name(ost_instance_class(inst)), NULL), "Point");
    cr_assert_eq(ost_instance_getattr(inst, "x"), OST_NOVALUE);
    cr_assert_eq(ost_instance_setattr(inst, "x", ost_int(3)), 0);
    cr_assert_eq(ost_instance_setattr(inst, "y", S("four")), 0);
    cr_assert_eq(ost_instance_setattr(inst, "x", ost_int(5)), 0);
    cr_assert_eq(ost_instance_getattr(inst, "x"), ost_int(5));
    cr_assert_str_eq(ost_data(ost_instance_getattr(inst, "y"), NULL), "four");
    cr_assert_eq(ost_instance_getattr(inst, "z"), OST_NOVALUE);
    cr_assert_eq(ost_typeof(ost_instance_state(inst)), OST_T_DICT);
    cr_assert_eq(ost_len(ost_instance_state(inst)), 2);
    assert_repr(inst, "myapp.Point(x=5, y='four')");
    /* a non-dict state: setattr is a type error and releases the value */
    ost_value other = ost_instance_new(ost_global("myapp", "Point"));
    cr_assert_eq(ost_instance_set_state(other, tuple_of(1, ost_int(1))), 0);
    ost_value v = S("v");
    cr_assert_eq(ost_instance_setattr(other, "x", ost_incref(v)), OST_ETYPE);
    cr_assert_eq(ost_refcount(v), 1);
    cr_assert_eq(ost_instance_setattr(ost_int(1), "x", ost_incref(v)), OST_EINVAL);
    cr_assert_eq(ost_refcount(v), 1);
    ost_decref(v);
    ost_decref(other);
    /* the class must be a global; a bad one is released */
    cr_assert_eq(ost_instance_new(S("notaclass")), OST_NOVALUE);
    cr_assert_eq(ost_instance_class(ost_int(1)), OST_NOVALUE);
    ost_decref(inst);
    cr_assert_eq(live(), base);
}

OST_TEST(value, reduce_values_keep_kwargs_state_listitems_dictitems) {
    uint64_t base = live();
    ost_value r = ost_reduce_new(OST_REDUCE_NEWOBJ_EX, ost_global("m", "K"),
                                 tuple_of(1, ost_int(1)));
    cr_assert_eq(ost_typeof(r), OST_T_REDUCE);
    cr_assert_eq(ost_reduce_kind_of(r), OST_REDUCE_NEWOBJ_EX);
    cr_assert_eq(ost_typeof(ost_reduce_callable(r)), OST_T_GLOBAL);
    cr_assert_eq(ost_item(ost_reduce_args(r), 0), ost_int(1));
    cr_assert_eq(ost_reduce_kwargs(r), OST_NOVALUE);
    cr_assert_eq(ost_reduce_state(r), OST_NOVALUE);
    cr_assert_eq(ost_reduce_listitems(r), OST_NOVALUE);
    cr_assert_eq(ost_reduce_dictitems(r), OST_NOVALUE);
    ost_value kw = ost_dict_new();
    ost_dict_set(kw, S("flag"), OST_TRUE);
    cr_assert_eq(ost_reduce_set_kwargs(r, kw), 0);
    cr_assert_eq(ost_reduce_set_state(r, S("st")), 0);
    cr_assert_eq(ost_reduce_set_state(r, S("state")), 0);
    cr_assert_eq(ost_reduce_append(r, ost_int(10)), 0);
    cr_assert_eq(ost_reduce_append(r, ost_int(11)), 0);
    cr_assert_eq(ost_reduce_setitem(r, S("k"), ost_int(12)), 0);
    cr_assert_eq(ost_reduce_kwargs(r), kw);
    cr_assert_str_eq(ost_data(ost_reduce_state(r), NULL), "state");
    assert_repr(ost_reduce_listitems(r), "[10, 11]");
    assert_repr(ost_reduce_dictitems(r), "[('k', 12)]");
    assert_repr(r, "m.K.__new__(1, **{'flag': True}).extend([10, 11]).update([('k', 12)])"
                   ".__setstate__('state')");
    /* bad arguments are released */
    cr_assert_eq(ost_reduce_new((ost_reduce_kind)7, ost_global("m", "K"), ost_tuple_new(0)),
                 OST_NOVALUE);
    cr_assert_eq(ost_reduce_new(OST_REDUCE_CALL, ost_global("m", "K"), OST_NOVALUE),
                 OST_NOVALUE);
    cr_assert_eq(ost_reduce_set_state(ost_int(1), S("x")), OST_EINVAL);
    cr_assert_eq(ost_reduce_append(ost_int(3), ost_int(1)), OST_EINVAL);
    cr_assert_eq(ost_reduce_callable(ost_int(1)), OST_NOVALUE);
    cr_assert_eq(ost_reduce_kind_of(ost_int(1)), OST_REDUCE_CALL);
    ost_value r2 = ost_reduce_new(OST_REDUCE_CALL, ost_global("m", "f"), ost_tuple_new(0));
    cr_assert_eq(ost_reduce_kind_of(r2), OST_REDUCE_CALL);
    assert_repr(r2, "m.f()");
    cr_assert(!ost_equal(r, r2));
    ost_decref(r2);
    ost_decref(r);
    cr_assert_eq(live(), base, "everything rejected was released");
}

OST_TEST(value, persistent_refs_hold_their_pid) {
    uint64_t base = live();
    ost_value p = ost_persref(S("oid-1"));
    cr_assert_eq(ost_typeof(p), OST_T_PERSREF);
    cr_assert_str_eq(ost_data(ost_persref_pid(p), NULL), "oid-1");
    cr_assert_eq(ost_persref_pid(ost_int(1)), OST_NOVALUE);
    cr_assert_eq(ost_persref(OST_NOVALUE), OST_NOVALUE);
    assert_repr(p, "persistent('oid-1')");
    ost_value q = ost_persref(S("oid-1"));
    cr_assert(ost_equal(p, q));
    cr_assert(same_hash(p, q));
    ost_decref(q);
    ost_decref(p);
    cr_assert_eq(live(), base);
}

/* ---- equality --------------------------------------------------------------- */

static void eq(ost_value a, ost_value b, bool want, const char *what) {
    cr_expect_eq(ost_equal(a, b), want, "%s", what);
    cr_expect_eq(ost_equal(b, a), want, "%s (swapped)", what);
    ost_decref(a);
    ost_decref(b);
}

OST_TEST(value, equal_compares_numbers_across_types) {
    uint64_t base = live();
    eq(ost_int(1), ost_float(1.0), true, "1 == 1.0");
    eq(ost_int(1), OST_TRUE, true, "1 == True");
    eq(ost_float(1.0), OST_TRUE, true, "1.0 == True");
    eq(ost_int(0), OST_FALSE, true, "0 == False");
    eq(ost_float(-0.0), ost_int(0), true, "-0.0 == 0");
    eq(ost_float(0.5), ost_int(0), false, "0.5 != 0");
    eq(OST_TRUE, OST_FALSE, false, "True != False");
    eq(OST_NONE, OST_FALSE, false, "None != False");
    eq(ost_int(OST_SMALLINT_MAX + 1), ost_float(ldexp(1, 62)), true, "2**62");
    eq(dec("1180591620717411303424"), ost_float(ldexp(1, 70)), true, "2**70 == float(2**70)");
    eq(dec("-1180591620717411303424"), ost_float(-ldexp(1, 70)), true, "-2**70");
    eq(dec("1180591620717411303425"), ost_float(ldexp(1, 70)), false, "2**70+1");
    eq(dec("18446744073709551616"), ost_float(ldexp(1, 64)), true, "2**64");
    eq(ost_int(INT64_MIN), ost_float(-ldexp(1, 63)), true, "-2**63 == float(-2**63)");
    eq(dec("9223372036854775808"), ost_float(ldexp(1, 63)), true, "2**63");
    eq(ost_int(9007199254740993), ost_float(9007199254740992.0), false, "2**53+1");
    eq(dec("1180591620717411303424"), ost_float(INFINITY), false, "big != inf");
    eq(dec("1180591620717411303424"), dec("1180591620717411303424"), true, "big ints");
    eq(dec("1180591620717411303424"), dec("-1180591620717411303424"), false, "signs");
    eq(ost_float(NAN), ost_float(NAN), false, "nan != nan");
    ost_value n = ost_float(NAN);
    cr_expect(ost_equal(n, n), "an object equals itself");
    eq(list_of(1, ost_incref(n)), list_of(1, ost_incref(n)), true, "[x] == [x] for x nan");
    eq(list_of(1, ost_incref(n)), list_of(1, ost_float(NAN)), false, "[nan] != [nan2]");
    ost_decref(n);
    cr_assert_eq(live(), base);
}

OST_TEST(value, equal_compares_containers_like_python) {
    uint64_t base = live();
    eq(S("a"), ost_bytes("a", 1), false, "'a' != b'a'");
    eq(ost_bytes("ab", 2), ost_bytearray("ab", 2), true, "b'ab' == bytearray(b'ab')");
    eq(list_of(1, ost_int(1)), tuple_of(1, ost_int(1)), false, "[1] != (1,)");
    eq(list_of(2, ost_int(1), S("x")), list_of(2, ost_float(1.0), S("x")), true, "lists");
    eq(list_of(1, ost_int(1)), list_of(2, ost_int(1), ost_int(2)), false, "lengths");
    ost_value d1 = ost_dict_new(), d2 = ost_dict_new();
    ost_dict_set(d1, S("a"), ost_int(1));
    ost_dict_set(d1, S("b"), ost_int(2));
    ost_dict_set(d2, S("b"), ost_float(2.0));
    ost_dict_set(d2, S("a"), OST_TRUE);
    cr_expect(ost_equal(d1, d2), "same items in another order");
    ost_dict_set(d2, S("a"), ost_int(5));
    cr_expect(!ost_equal(d1, d2));
    ost_decref(d1);
    ost_decref(d2);
    ost_value s = ost_set_new(), fs = ost_frozenset_new();
    ost_set_add(s, ost_int(1));
    ost_set_add(s, S("x"));
    ost_set_add(fs, S("x"));
    ost_set_add(fs, ost_float(1.0));
    cr_expect(ost_equal(s, fs), "set == frozenset");
    ost_set_add(fs, ost_int(2));
    cr_expect(!ost_equal(s, fs));
    ost_decref(s);
    ost_decref(fs);
    ost_value i1 = ost_instance_new(ost_global("m", "C"));
    ost_value i2 = ost_instance_new(ost_global("m", "C"));
    ost_instance_setattr(i1, "a", ost_int(1));
    ost_instance_setattr(i2, "a", ost_float(1.0));
    cr_expect(ost_equal(i1, i2));
    ost_instance_setattr(i2, "a", ost_int(2));
    cr_expect(!ost_equal(i1, i2));
    ost_value i3 = ost_instance_new(ost_global("m", "D"));
    ost_instance_setattr(i3, "a", ost_int(1));
    cr_expect(!ost_equal(i1, i3), "other class");
    ost_decref(i1);
    ost_decref(i2);
    ost_decref(i3);
    cr_assert_eq(live(), base);
}

OST_TEST(value, equal_terminates_on_cycles_on_both_sides) {
    uint64_t base = live();
    ost_value a = list_of(1, ost_int(1)), b = list_of(1, ost_int(1)), c = list_of(1, ost_int(2));
    ost_list_append(a, ost_incref(a));
    ost_list_append(b, ost_incref(b));
    ost_list_append(c, ost_incref(c));
    cr_expect(ost_equal(a, b));
    cr_expect(!ost_equal(a, c));
    /* a cycle of two against a cycle of one */
    ost_value x = list_of(1, ost_int(1)), y = list_of(1, ost_int(1));
    ost_list_append(x, ost_incref(y));
    ost_list_append(y, ost_incref(x));
    cr_expect(ost_equal(a, x));
    cr_expect(!ost_same_graph(a, x), "but not the same graph");
    ost_value d1 = ost_dict_new(), d2 = ost_dict_new();
    ost_dict_set(d1, S("me"), ost_incref(d1));
    ost_dict_set(d2, S("me"), ost_incref(d2));
    cr_expect(ost_equal(d1, d2));
    cr_expect(ost_same_graph(d1, d2));
    ost_release(a);
    ost_release(b);
    ost_release(c);
    ost_release(x);
    ost_release(y);
    ost_release(d1);
    ost_release(d2);
    cr_assert_eq(live(), base);
}

OST_TEST(value, same_graph_requires_same_types_bits_and_sharing) {
    uint64_t base = live();
    ost_value a = list_of(1, ost_int(1));
    ost_value x = list_of(2, ost_incref(a), ost_incref(a));
    ost_value y = list_of(2, list_of(1, ost_int(1)), list_of(1, ost_int(1)));
    ost_value a2 = list_of(1, ost_int(1));
    ost_value z = list_of(2, ost_incref(a2), ost_incref(a2));
    cr_expect(ost_equal(x, y), "[a, a] == [a, b] with a == b");
    cr_expect(!ost_same_graph(x, y), "sharing differs");
    cr_expect(!ost_same_graph(y, x));
    cr_expect(ost_same_graph(x, z), "same sharing");
    ost_value u = ost_int(1), f = ost_float(1.0);
    cr_expect(!ost_same_graph(u, f), "1 is not 1.0");
    cr_expect(!ost_same_graph(u, OST_TRUE), "1 is not True");
    ost_decref(f);
    ost_value p = ost_float(0.0), m = ost_float(-0.0);
    cr_expect(ost_equal(p, m));
    cr_expect(!ost_same_graph(p, m), "float bits differ");
    ost_value n1 = ost_float(NAN), n2 = ost_float(NAN);
    cr_expect(ost_same_graph(n1, n2), "same bits");
    ost_value d1 = ost_dict_new(), d2 = ost_dict_new();
    ost_dict_set(d1, S("a"), ost_int(1));
    ost_dict_set(d1, S("b"), ost_int(2));
    ost_dict_set(d2, S("b"), ost_int(2));
    ost_dict_set(d2, S("a"), ost_int(1));
    cr_expect(ost_equal(d1, d2));
    cr_expect(!ost_same_graph(d1, d2), "order of items is part of the graph");
    ost_value t1 = tuple_of(2, ost_incref(a), ost_incref(a2));
    ost_value t2 = tuple_of(2, ost_incref(a2), ost_incref(a));
    cr_expect(ost_same_graph(t1, t2), "one-to-one mapping of objects");
    ost_value t3 = tuple_of(2, ost_incref(a), ost_incref(a));
    cr_expect(!ost_same_graph(t1, t3));
    ost_decref(t1);
    ost_decref(t2);
    ost_decref(t3);
    ost_decref(d1);
    ost_decref(d2);
    ost_decref(n1);
    ost_decref(n2);
    ost_decref(p);
    ost_decref(m);
    ost_decref(a);
    ost_decref(a2);
    ost_decref(x);
    ost_decref(y);
    ost_decref(z);
    cr_assert_eq(live(), base);
}

/* ---- hashing ------------------------------------------------------------------ */

OST_TEST(value, equal_values_hash_equal) {
    uint64_t base = live();
    ost_value pairs[][2] = {
        {ost_int(1), ost_float(1.0)},
        {OST_TRUE, ost_float(1.0)},
        {OST_TRUE, ost_int(1)},
        {OST_FALSE, ost_float(-0.0)},
        {ost_int(-1), ost_float(-1.0)},
        {ost_int(OST_SMALLINT_MAX + 1), ost_float(ldexp(1, 62))},
        {dec("18446744073709551616"), ost_float(ldexp(1, 64))},
        {dec("-1180591620717411303424"), ost_float(-ldexp(1, 70))},
        {ost_int(INT64_MIN), ost_float(-ldexp(1, 63))},
        {dec("9223372036854775808"), ost_float(ldexp(1, 63))},
        {ost_int(OST_SMALLINT_MIN), ost_float(-ldexp(1, 62))},
        {S("h\xc3\xa9llo"), S("h\xc3\xa9llo")},
        {ost_bytes("xy", 2), ost_bytes("xy", 2)},
        {tuple_of(2, ost_int(1), S("a")), tuple_of(2, ost_float(1.0), S("a"))},
        {tuple_of(1, tuple_of(1, OST_TRUE)), tuple_of(1, tuple_of(1, ost_int(1)))},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        cr_expect(ost_equal(pairs[i][0], pairs[i][1]), "pair %zu equal", i);
        cr_expect(same_hash(pairs[i][0], pairs[i][1]), "pair %zu hashes equal", i);
        ost_decref(pairs[i][0]);
        ost_decref(pairs[i][1]);
    }
    /* frozensets hash by content, whatever the insertion order */
    ost_value f1 = ost_frozenset_new(), f2 = ost_frozenset_new();
    for (int i = 0; i < 20; i++) {
        ost_set_add(f1, ost_int(i));
        ost_set_add(f2, ost_float(19 - i));
    }
    cr_expect(ost_equal(f1, f2));
    cr_expect(same_hash(f1, f2));
    ost_decref(f1);
    ost_decref(f2);
    /* hashes are not all alike */
    ost_value a = S("a"), b = S("b");
    cr_expect(!same_hash(a, b));
    cr_expect(!same_hash(ost_int(1), ost_int(2)));
    ost_decref(a);
    ost_decref(b);
    cr_assert_eq(live(), base);
}

OST_TEST(value, unhashable_values_return_etype) {
    uint64_t h;
    ost_value v[] = {ost_list_new(0), ost_dict_new(), ost_set_new(), ost_bytearray("x", 1),
                     tuple_of(2, ost_int(1), ost_list_new(0)),
                     tuple_of(1, tuple_of(1, ost_dict_new()))};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        cr_expect_eq(ost_hash(v[i], &h), OST_ETYPE, "value %zu", i);
        ost_decref(v[i]);
    }
    ost_value ok[] = {OST_NONE, ost_int(5), ost_float(2.5), ost_tuple_new(0), ost_frozenset_new()};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_expect_eq(ost_hash(ok[i], &h), 0, "value %zu", i);
        ost_decref(ok[i]);
    }
}

OST_TEST(value, hash_of_a_million_deep_tuple_does_not_recurse) {
    uint64_t base = live();
    ost_value t = ost_int(1), u = ost_float(1.0);
    for (int i = 0; i < 1000000; i++) {
        t = tuple_of(1, t);
        u = tuple_of(1, u);
    }
    uint64_t h1, h2;
    cr_assert_eq(ost_hash(t, &h1), 0);
    cr_assert_eq(ost_hash(u, &h2), 0);
    cr_assert_eq(h1, h2, "equal nested tuples hash equal");
    cr_assert(ost_equal(t, u));
    /* as a dict key, found by an equal key */
    ost_value d = ost_dict_new();
    cr_assert_eq(ost_dict_set(d, ost_incref(t), S("deep")), 0);
    cr_assert_str_eq(ost_data(ost_dict_get(d, u), NULL), "deep");
    ost_decref(d);
    ost_decref(t);
    ost_decref(u);
    cr_assert_eq(live(), base);
}

/* ---- repr --------------------------------------------------------------------- */

OST_TEST(value, repr_of_ints_is_decimal) {
    assert_repr(ost_int(0), "0");
    assert_repr(ost_int(-1), "-1");
    assert_repr(ost_int(OST_SMALLINT_MAX), "4611686018427387903");
    ost_value v[] = {dec("18446744073709551616"), dec("-18446744073709551616"),
                     dec("1000000000000000000000000000000"), ost_int(INT64_MIN),
                     dec("9223372036854775808"), dec("-340282366920938463463374607431768211456")};
    const char *want[] = {"18446744073709551616", "-18446744073709551616",
                          "1000000000000000000000000000000", "-9223372036854775808",
                          "9223372036854775808", "-340282366920938463463374607431768211456"};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        assert_repr(v[i], want[i]);
        ost_decref(v[i]);
    }
    assert_repr(OST_TRUE, "True");
    assert_repr(OST_NONE, "None");
}

static const double repr_doubles[] = {0.1, 1e16, 1e-05, 1.5, -0.0, INFINITY, -INFINITY, NAN,
                                      1e300, 123456789.123, 1e15, 0.0001, 2.0, 1.0 / 3,
                                      5e-324, 1.7976931348623157e308, 1e22, 0.0, -2.5e-7,
                                      9007199254740993.0, 100.0, 1234567890123456.7};

OST_TEST(value, repr_of_floats_matches_python) {
    const char *want[] = {"0.1", "1e+16", "1e-05", "1.5", "-0.0", "inf", "-inf", "nan",
                          "1e+300", "123456789.123", "1000000000000000.0", "0.0001", "2.0",
                          "0.3333333333333333", "5e-324", "1.7976931348623157e+308", "1e+22",
                          "0.0", "-2.5e-07", "9007199254740992.0", "100.0",
                          "1234567890123456.8"};
    for (size_t i = 0; i < sizeof repr_doubles / sizeof *repr_doubles; i++) {
        ost_value f = ost_float(repr_doubles[i]);
        assert_repr(f, want[i]);
        ost_decref(f);
    }
}

OST_TEST(value, repr_of_text_quotes_and_escapes_like_python) {
    struct {
        const char *in;
        size_t n;
        const char *want;
    } c[] = {
        {"it's", 4, "\"it's\""},
        {"it's \"q\"", 8, "'it\\'s \"q\"'"},
        {"say \"hi\"", 8, "'say \"hi\"'"},
        {"a\nb\r\tc", 6, "'a\\nb\\r\\tc'"},
        {"\0", 1, "'\\x00'"},
        {"\x7f\x1b", 2, "'\\x7f\\x1b'"},
        {"back\\slash", 10, "'back\\\\slash'"},
        {"h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10, "'h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'"},
        {"\xed\xa0\x80", 3, "'\\ud800'"},
        {"\xc2\xa0\xc2\xad", 4, "'\\xa0\\xad'"},
        {"\xe2\x80\xa8", 3, "'\\u2028'"},
        {"", 0, "''"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        ost_value s = ost_str(c[i].in, c[i].n);
        cr_assert(s, "case %zu", i);
        assert_repr(s, c[i].want);
        ost_decref(s);
    }
    ost_value b = ost_bytes("ab\0\xff'", 5);
    assert_repr(b, "b\"ab\\x00\\xff'\"");
    ost_decref(b);
    b = ost_bytearray("x'\"", 3);
    assert_repr(b, "bytearray(b'x\\'\"')");
    ost_decref(b);
    b = ost_bytearray("'", 1);
    assert_repr(b, "bytearray(b\"\\'\")");
    ost_decref(b);
    b = ost_bytes("", 0);
    assert_repr(b, "b''");
    ost_decref(b);
    b = ost_bytes("\t\n\\\x80", 4);
    assert_repr(b, "b'\\t\\n\\\\\\x80'");
    ost_decref(b);
}

OST_TEST(value, repr_of_containers_and_cycles) {
    uint64_t base = live();
    ost_value v = ost_tuple_new(0);
    assert_repr(v, "()");
    ost_decref(v);
    v = tuple_of(1, ost_int(1));
    assert_repr(v, "(1,)");
    ost_decref(v);
    v = tuple_of(2, ost_int(1), S("a"));
    assert_repr(v, "(1, 'a')");
    ost_decref(v);
    v = ost_set_new();
    assert_repr(v, "set()");
    ost_decref(v);
    v = ost_frozenset_new();
    assert_repr(v, "frozenset()");
    ost_decref(v);
    v = list_of(0);
    assert_repr(v, "[]");
    ost_decref(v);
    v = ost_dict_new();
    assert_repr(v, "{}");
    ost_decref(v);
    ost_value d = ost_dict_new();
    ost_dict_set(d, S("a"), OST_NONE);
    ost_dict_set(d, ost_int(2), list_of(2, OST_TRUE, OST_FALSE));
    v = list_of(3, ost_int(1), list_of(2, ost_int(2), tuple_of(1, ost_int(3))), d);
    assert_repr(v, "[1, [2, (3,)], {'a': None, 2: [True, False]}]");
    ost_decref(v);
    /* cycles */
    ost_value l = list_of(1, ost_int(1));
    ost_list_append(l, ost_incref(l));
    assert_repr(l, "[1, [...]]");
    ost_release(l);
    d = ost_dict_new();
    ost_dict_set(d, S("self"), ost_incref(d));
    assert_repr(d, "{'self': {...}}");
    ost_release(d);
    d = ost_dict_new();
    ost_dict_set(d, S("l"), list_of(1, ost_incref(d)));
    assert_repr(d, "{'l': [{...}]}");
    ost_release(d);
    /* a shared list prints once, labelled, then as a back-reference */
    ost_value a = list_of(1, ost_int(7));
    v = list_of(2, ost_incref(a), ost_incref(a));
    assert_repr(v, "[#1=[7], #1#]");
    ost_decref(v);
    ost_decref(a);
    cr_assert_eq(live(), base);
}

OST_TEST(value, repr_agrees_with_python_itself) {
    /* one line per value: kind and hex, printed back by Python as repr */
    ost_buf in = {0};
    ost_value vals[64];
    size_t n = 0;
    for (size_t i = 0; i < sizeof repr_doubles / sizeof *repr_doubles; i++) {
        uint8_t b[8];
        memcpy(b, &repr_doubles[i], 8);
        ost__buf_printf(&in, "f ");
        for (int k = 0; k < 8; k++) ost__buf_printf(&in, "%02x", b[k]);
        ost__buf_printf(&in, "\n");
        vals[n++] = ost_float(repr_doubles[i]);
    }
    const char *texts[] = {"it's", "it's \"q\"", "a\nb\x01", "\x7f", "h\xc3\xa9\xe2\x82\xac",
                           "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xed\xb3\xbf", "\xc2\xa0",
                           "\\", "\xe2\x80\x8b"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        ost__buf_printf(&in, "s ");
        for (const char *p = texts[i]; *p; p++) ost__buf_printf(&in, "%02x", (uint8_t)*p);
        ost__buf_printf(&in, "\n");
        vals[n++] = S(texts[i]);
    }
    const char *raw[] = {"ab\x00\xff'", "\"", "'\"", "\t\r\n", "'"};
    size_t rawn[] = {5, 1, 2, 3, 1};
    for (size_t i = 0; i < 5; i++) {
        for (int ba = 0; ba < 2; ba++) {
            ost__buf_printf(&in, "%c ", ba ? 'y' : 'b');
            for (size_t k = 0; k < rawn[i]; k++) ost__buf_printf(&in, "%02x", (uint8_t)raw[i][k]);
            ost__buf_printf(&in, "\n");
            vals[n++] = ba ? ost_bytearray(raw[i], rawn[i]) : ost_bytes(raw[i], rawn[i]);
        }
    }
    const char *ints[] = {"0", "-1", "4611686018427387904", "-4611686018427387905",
                          "123456789012345678901234567890123456789",
                          "-99999999999999999999999999999999999999999999"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        ost__buf_printf(&in, "i %s\n", ints[i]);
        vals[n++] = dec(ints[i]);
    }
    char *out = py_run("import sys, struct\n"
                       "for line in open(sys.argv[1]):\n"
                       "    k, _, h = line.rstrip('\\n').partition(' ')\n"
                       "    if k == 'f': v = struct.unpack('<d', bytes.fromhex(h))[0]\n"
                       "    elif k == 's': v = bytes.fromhex(h).decode('utf-8', 'surrogatepass')\n"
                       "    elif k == 'b': v = bytes.fromhex(h)\n"
                       "    elif k == 'y': v = bytearray.fromhex(h)\n"
                       "    else: v = int(h)\n"
                       "    sys.stdout.buffer.write(repr(v).encode('utf-8') + b'\\n')\n",
                       in.data, in.len);
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    for (size_t i = 0; i < n; i++, line = strtok_r(NULL, "\n", &save)) {
        cr_assert(line, "python printed too few lines");
        char *mine = repr_of(vals[i]);
        cr_expect_str_eq(mine, line, "value %zu: ostore %s, python %s", i, mine, line);
        free(mine);
        ost_decref(vals[i]);
    }
    free(out);
    ost_buf_free(&in);
}

/* ---- reference counting and cycles ------------------------------------------ */

OST_TEST(value, decref_of_a_million_long_chain_does_not_recurse) {
    uint64_t base = live();
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 1000000; i++) l = list_of(1, l);
    cr_assert_eq(live(), base + 1000001);
    ost_decref(l);
    cr_assert_eq(live(), base);
    /* the same through dicts, tuples and instances */
    ost_value v = OST_NONE;
    for (int i = 0; i < 300000; i++) {
        ost_value d = ost_dict_new();
        ost_dict_set(d, S("next"), v);
        ost_value inst = ost_instance_new(ost_global("m", "Node"));
        ost_instance_set_state(inst, d);
        v = tuple_of(1, inst);
    }
    ost_decref(v);
    cr_assert_eq(live(), base);
}

OST_TEST(value, release_frees_a_list_containing_itself) {
    uint64_t base = live();
    ost_value l = list_of(1, S("payload"));
    ost_list_append(l, ost_incref(l));
    cr_assert_eq(ost_refcount(l), 2);
    cr_assert_eq(live(), base + 2);
    ost_release(l);
    cr_assert_eq(live(), base);
}

OST_TEST(value, release_frees_two_dicts_referencing_each_other) {
    uint64_t base = live();
    ost_value d1 = ost_dict_new(), d2 = ost_dict_new();
    ost_dict_set(d1, S("other"), ost_incref(d2));
    ost_dict_set(d2, S("other"), ost_incref(d1));
    ost_dict_set(d2, S("data"), list_of(2, ost_float(1.5), dec("18446744073709551616")));
    ost_decref(d2); /* only d1's handle remains */
    cr_assert_eq(live(), base + 7, "1.5 is an immediate");
    ost_release(d1);
    cr_assert_eq(live(), base);
}

OST_TEST(value, release_keeps_a_cycle_still_referenced_from_outside) {
    uint64_t base = live();
    ost_value a = list_of(1, S("a")), b = list_of(1, S("b"));
    ost_list_append(a, ost_incref(b));
    ost_list_append(b, ost_incref(a));
    /* we hold a and b; release a: b (and through it a) stay alive */
    ost_release(a);
    cr_assert_eq(live(), base + 4);
    cr_assert_eq(ost_refcount(a), 1);
    cr_assert_eq(ost_refcount(b), 2);
    cr_assert_eq(ost_item(b, 1), a);
    cr_assert_eq(ost_item(a, 1), b);
    assert_repr(b, "['b', ['a', [...]]]");
    ost_release(b);
    cr_assert_eq(live(), base);

    /* garbage that points at a live object gives its reference back */
    ost_value keep = S("keep");
    ost_value c = list_of(1, ost_incref(keep));
    ost_list_append(c, ost_incref(c));
    cr_assert_eq(ost_refcount(keep), 2);
    ost_release(c);
    cr_assert_eq(ost_refcount(keep), 1);
    cr_assert_str_eq(ost_data(keep, NULL), "keep");
    ost_decref(keep);

    /* an acyclic graph with a shared child held from outside */
    ost_value child = list_of(1, ost_int(1));
    ost_value parent = list_of(2, ost_incref(child), ost_incref(child));
    ost_release(parent);
    cr_assert_eq(ost_refcount(child), 1);
    ost_decref(child);

    /* releasing one of several references only drops that one */
    ost_value cyc = list_of(0);
    ost_list_append(cyc, ost_incref(cyc));
    ost_incref(cyc);
    ost_release(cyc);
    cr_assert_eq(ost_refcount(cyc), 2);
    ost_release(cyc);
    cr_assert_eq(live(), base);
}

OST_TEST(value, release_of_a_long_chain_ending_in_a_cycle) {
    uint64_t base = live();
    ost_value tail = list_of(0);
    ost_list_append(tail, ost_incref(tail));
    ost_value l = tail;
    for (int i = 0; i < 200000; i++) l = list_of(1, l);
    ost_release(l);
    cr_assert_eq(live(), base);
}

/* ---- allocation failures ------------------------------------------------------- */

#include "failalloc.h"

/* Builds a graph touching every constructor; returns 0 or the first error,
 * freeing everything on failure. *out receives the graph on success. */
static int build_graph(ost_value *out) {
    int rc = 0;
    *out = 0;
    ost_value root = ost_list_new(0);
    if (!root) return OST_ENOMEM;
#define CHECK(x)                              \
    do {                                      \
        if ((rc = (x)) != 0) goto fail;       \
    } while (0)
    ost_value d = ost_dict_new();
    CHECK(ost_list_append(root, d));
    for (int i = 0; i < 40; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK(ost_dict_set(d, ost_str_c(k), ost_int(OST_SMALLINT_MAX + 1 + i)));
    }
    ost_value k0 = ost_str_c("k0");
    if (!k0) CHECK(OST_ENOMEM);
    rc = ost_dict_del(d, k0);
    ost_decref(k0);
    CHECK(rc);
    /* deletions then insertions: the entries are compacted */
    ost_value d2 = ost_dict_new();
    CHECK(ost_list_append(root, d2));
    for (int i = 0; i < 20; i++) CHECK(ost_dict_set(d2, ost_int(i), ost_int(i)));
    for (int i = 0; i < 18; i++) CHECK(ost_dict_del(d2, ost_int(i)));
    for (int i = 20; i < 60; i++) CHECK(ost_dict_set(d2, ost_int(i), ost_int(i)));
    for (int i = 0; i < 60; i++)
        if (ost_dict_get(d2, ost_int(i)) != (i < 18 ? OST_NOVALUE : ost_int(i))) CHECK(OST_EINVAL);
    static const uint8_t big[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    CHECK(ost_list_append(root, ost_int_from_bytes(big, sizeof big)));
    for (int i = 0; i < 30; i++) CHECK(ost_list_append(root, ost_float(i)));
    ost_value t = ost_tuple_new(3);
    CHECK(ost_list_append(root, t));
    CHECK(ost_tuple_set(t, 0, ost_bytes("abc", 3)));
    CHECK(ost_tuple_set(t, 1, ost_bytearray("abc", 3)));
    CHECK(ost_tuple_set(t, 2, ost_str_c("\xc3\xa9t\xc3\xa9")));
    ost_value s = ost_set_new();
    CHECK(ost_list_append(root, s));
    ost_value fs = ost_frozenset_new();
    CHECK(ost_list_append(root, fs));
    for (int i = 0; i < 12; i++) {
        CHECK(ost_set_add(s, ost_int(i)));
        CHECK(ost_set_add(fs, ost_float(i)));
    }
    ost_value inst = ost_instance_new(ost_global("m", "C"));
    CHECK(ost_list_append(root, inst));
    CHECK(ost_instance_setattr(inst, "a", ost_int(1)));
    CHECK(ost_instance_setattr(inst, "b", ost_str_c("bee")));
    ost_value r = ost_reduce_new(OST_REDUCE_NEWOBJ, ost_global("m", "R"), ost_tuple_new(0));
    CHECK(ost_list_append(root, r));
    CHECK(ost_reduce_append(r, ost_int(1)));
    CHECK(ost_reduce_setitem(r, ost_str_c("k"), ost_int(2)));
    CHECK(ost_reduce_set_state(r, ost_dict_new()));
    CHECK(ost_reduce_set_kwargs(r, ost_dict_new()));
    CHECK(ost_list_append(root, ost_persref(ost_str_c("oid"))));
    CHECK(ost_list_append(root, ost_incref(d)));
#undef CHECK
    *out = root;
    return 0;
fail:
    ost_decref(root);
    return rc;
}

OST_TEST(value, dict_stays_consistent_when_an_insert_fails) {
    ost_allocator a = {fail_malloc, fail_realloc, fail_free};
    ost_set_allocator(&a);
    int failures = 0;
    for (long n = 1; n < 40; n++) {
        bool present[200] = {false};
        ost_value d = ost_dict_new();
        cr_assert(d);
        g_count = 0;
        g_fail_at = n;
        /* grow, delete most (tombstones), grow again: compaction, reindex */
        for (int round = 0; round < 3; round++) {
            int lo = round * 60, hi = lo + 60;
            for (int i = lo; i < hi; i++) present[i] = ost_dict_set(d, ost_int(i), ost_int(i)) == 0;
            for (int i = lo; i < hi - 4; i++)
                if (present[i]) {
                    cr_assert_eq(ost_dict_del(d, ost_int(i)), 0, "del %d, failing allocation %ld",
                                 i, n);
                    present[i] = false;
                }
        }
        g_fail_at = 0;
        failures += g_count >= n;
        size_t count = 0;
        for (int i = 0; i < 200; i++) {
            count += present[i];
            cr_assert_eq(ost_dict_get(d, ost_int(i)), present[i] ? ost_int(i) : OST_NOVALUE,
                         "key %d after failing allocation %ld", i, n);
        }
        cr_assert_eq(ost_len(d), count);
        size_t pos = 0, seen = 0;
        ost_value k;
        while (ost_dict_next(d, &pos, &k, NULL)) {
            int64_t x;
            cr_assert_eq(ost_int_value(k, &x), 0);
            cr_assert(present[x], "key %lld listed but absent", (long long)x);
            seen++;
        }
        cr_assert_eq(seen, count);
        ost_decref(d);
    }
    cr_assert(failures > 5, "allocations were failed (%d)", failures);
    cr_assert_eq(g_blocks, 0);
    ost_set_allocator(NULL);
}

OST_TEST(value, failing_the_nth_allocation_leaks_nothing) {
    uint64_t base = live();
    ost_allocator a = {fail_malloc, fail_realloc, fail_free};
    ost_set_allocator(&a);
    /* a reference graph, built without failures */
    g_fail_at = 0;
    g_count = 0;
    ost_value ref;
    cr_assert_eq(build_graph(&ref), 0);
    long total = g_count;
    cr_assert(total > 50, "the graph needs many allocations (%ld)", total);
    for (long n = 1; n <= total + 1; n++) {
        g_fail_at = n;
        g_count = 0;
        g_failed = 0;
        long blocks = g_blocks;
        uint64_t objs = live();
        ost_value v;
        int rc = build_graph(&v);
        g_fail_at = 0; /* the checks below allocate too */
        if (g_failed) {
            cr_assert_neq(rc, 0, "allocation %ld failed but the build succeeded", n);
            cr_assert_eq(v, OST_NOVALUE);
        } else {
            cr_assert_eq(rc, 0);
            cr_assert(ost_equal(v, ref));
            cr_assert(ost_same_graph(v, ref));
            ost_decref(v);
        }
        cr_assert_eq(live(), objs, "objects leaked when failing allocation %ld", n);
        cr_assert_eq(g_blocks, blocks, "blocks leaked when failing allocation %ld", n);
    }
    /* repr and release also fail cleanly */
    g_fail_at = 0;
    ost_value cyc = ost_list_new(0);
    ost_list_append(cyc, ost_incref(cyc));
    ost_list_append(cyc, ost_incref(ref));
    g_count = 0;
    g_fail_at = 1;
    ost_buf b = {0};
    cr_assert_eq(ost_repr(cyc, &b), OST_ENOMEM);
    ost_buf_free(&b);
    g_fail_at = 0;
    ost_release(cyc);
    ost_decref(ref);
    cr_assert_eq(g_blocks, 0, "every block was freed");
    cr_assert_eq(live(), base);
    ost_set_allocator(NULL);
    /* the default allocator works again */
    ost_value v;
    cr_assert_eq(build_graph(&v), 0);
    ost_decref(v);
    cr_assert_eq(live(), base);
}

/* ---- messages: paths and long messages (serializer/error.c) -------------------- */

static const char *path_shown(char *buf, size_t cap, const char *path) {
    return ost__path_show(buf, cap, path);
}

OST_TEST(value, path_show_escapes_what_would_break_the_line) {
    char b[OST__PATH_SHOWN];
    cr_assert_str_eq(path_shown(b, sizeof b, "/tmp/plain.ostore"), "/tmp/plain.ostore");
    cr_assert_str_eq(path_shown(b, sizeof b, "a\nb\rc\td"), "a\\nb\\rc\\td");
    cr_assert_str_eq(path_shown(b, sizeof b, "esc\x1b[31m del\x7f"), "esc\\x1b[31m del\\x7f");
    cr_assert_str_eq(path_shown(b, sizeof b, "back\\slash"), "back\\\\slash");
    /* valid UTF-8 stays, bytes that are not UTF-8 (a stray continuation, a
     * lone lead byte, an overlong form, an encoded surrogate) become \xhh */
    cr_assert_str_eq(path_shown(b, sizeof b, "caf\xc3\xa9 \xe2\x82\xac"),
                     "caf\xc3\xa9 \xe2\x82\xac");
    cr_assert_str_eq(path_shown(b, sizeof b, "a\xff\x80z"), "a\\xff\\x80z");
    cr_assert_str_eq(path_shown(b, sizeof b, "lead\xc3"), "lead\\xc3");
    cr_assert_str_eq(path_shown(b, sizeof b, "\xc0\xaf"), "\\xc0\\xaf");
    cr_assert_str_eq(path_shown(b, sizeof b, "\xed\xa0\x80"), "\\xed\\xa0\\x80");
    /* code points Python's repr escapes: C1 controls, line separators */
    cr_assert_str_eq(path_shown(b, sizeof b, "c1\xc2\x9b" "ls\xe2\x80\xa8"), "c1\\x9bls\\u2028");
    cr_assert_str_eq(path_shown(b, sizeof b, ""), "");
}

OST_TEST(value, path_show_shortens_the_middle_and_never_cuts_an_escape) {
    char path[5000], b[OST__PATH_SHOWN];
    size_t n = 0;
    n += (size_t)snprintf(path + n, sizeof path - n, "/start");
    while (n < 4000) n += (size_t)snprintf(path + n, sizeof path - n, "/d\n\xc3\xa9\xff");
    snprintf(path + n, sizeof path - n, "/the-name.dump");
    path_shown(b, sizeof b, path);
    cr_assert_leq(strlen(b), OST__PATH_SHOWN - 1);
    cr_assert(strncmp(b, "/start/d\\n", 10) == 0, "the start stays: %s", b);
    cr_assert(strstr(b, "...") != NULL, "the middle goes: %s", b);
    size_t len = strlen(b);
    cr_assert_str_eq(b + len - 14, "/the-name.dump", "the end stays: %s", b);
    /* around "...", whole units: an escape starts after it, and before it
     * the last unit is whole (no lone backslash, no split character) */
    const char *dots = strstr(b, "...");
    cr_assert(dots[3] == '/' || dots[3] == 'd' || dots[3] == '\\' || (uint8_t)dots[3] == 0xc3,
              "after ...: %s", dots);
    cr_assert(dots[-1] != '\\' && (uint8_t)dots[-1] != 0xc3, "before ...: %s", b);
    cr_assert_eq(ost_utf8_check(b, len, NULL), 0, "the shown path is UTF-8");
    for (size_t i = 0; i < len; i++) cr_assert((uint8_t)b[i] >= 0x20, "a control at %zu", i);
    /* a small buffer still has both ends */
    char s[16];
    cr_assert_str_eq(path_shown(s, sizeof s, "/0123456789/abcdefghij"), "/012...cdefghij");
}

static void fmt_into(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(dst, cap, fmt, ap);
    va_end(ap);
}

OST_TEST(value, a_long_message_keeps_its_end) {
    char msg[64], path[300];
    memset(path, 'p', sizeof path - 1);
    path[sizeof path - 1] = 0;
    fmt_into(msg, sizeof msg, "%s: cannot open: %s", "/short", "File name too long");
    cr_assert_str_eq(msg, "/short: cannot open: File name too long");
    fmt_into(msg, sizeof msg, "/%s: cannot open: %s", path, "File name too long");
    cr_assert_eq(strlen(msg), sizeof msg - 1);
    cr_assert(msg[0] == '/' && strstr(msg, "...") != NULL, "%s", msg);
    cr_assert(strstr(msg, "cannot open: File name too long") != NULL, "the cause is kept: %s", msg);
    /* a cut never splits a UTF-8 character */
    char big[3000];
    size_t n = 0;
    while (n + 2 < sizeof big) n += (size_t)snprintf(big + n, sizeof big - n, "\xc3\xa9");
    fmt_into(msg, sizeof msg, "%s!", big);
    cr_assert_eq(ost_utf8_check(msg, strlen(msg), NULL), 0, "%s", msg);
    cr_assert_eq(msg[strlen(msg) - 1], '!');
}

/* Memory of small values, by the pools' own count (a chunk is 64 KiB): a
 * float of ordinary magnitude takes none, a 10-byte str 32 bytes (header,
 * length, text and NUL, in 8-byte size classes). */
OST_TEST(value, small_floats_take_no_memory_and_short_strs_32_bytes) {
    enum { N = 20000 };
    static ost_value keep[N];
    ost_alloc_stats a, b;
    ost_alloc_stats_get(&a);
    for (int i = 0; i < N; i++) keep[i] = ost_float(i * 0.5 + 1);
    ost_alloc_stats_get(&b);
    cr_assert_eq(b.live_objects, a.live_objects, "immediates");
    cr_assert_eq(b.pool_bytes, a.pool_bytes);
    for (int i = 0; i < N; i++) {
        char s[16];
        snprintf(s, sizeof s, "item%06d", i); /* 10 bytes */
        keep[i] = ost_str_c(s);
    }
    ost_alloc_stats_get(&b);
    cr_assert_eq(b.live_objects, a.live_objects + N);
    if (b.pool_bytes) /* pooled (not under ASan, which sees every object) */
        cr_assert_leq(b.pool_bytes - a.pool_bytes, (uint64_t)N * 32 + 64 * 1024,
                      "%llu bytes for %d strs", (unsigned long long)(b.pool_bytes - a.pool_bytes),
                      N);
    for (int i = 0; i < N; i++) ost_decref(keep[i]);
}

/* Immediate floats: which doubles are immediates, and that every path that
 * looks at a float (value, compare, hash, repr, writer, reader) treats an
 * immediate and a heap float alike. */
OST_TEST(value, immediate_floats_keep_their_bits_through_every_path) {
    static const double imm[] = {0.0, 1.0, -1.0, 0.5, 2.5, -1234.5678, 1e-18, 3.6e19,
                                 ldexp(1, -62), ldexp(1.999, 64), -ldexp(1, 64)};
    static const double heap[] = {-0.0, ldexp(1, -63), ldexp(1, 65), 1e300, -1e-300, 5e-324,
                                  INFINITY, -INFINITY, NAN};
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    for (int k = 0; k < 2; k++) {
        const double *ds = k ? heap : imm;
        size_t n = k ? sizeof heap / sizeof *heap : sizeof imm / sizeof *imm;
        for (size_t i = 0; i < n; i++) {
            ost_value f = ost_float(ds[i]);
            cr_assert(f);
            cr_assert_eq(ost_is_immediate(f), k == 0, "%g", ds[i]);
            cr_assert_eq(ost_typeof(f), OST_T_FLOAT);
            double back = ost_float_value(f);
            cr_assert_eq(memcmp(&back, &ds[i], 8), 0, "bits of %g", ds[i]);
            /* through a pickle: BINFLOAT, and back to the same kind */
            const void *d;
            size_t len;
            cr_assert_eq(ost_dump(w, f, &d, &len), 0);
            ost_value g;
            cr_assert_eq(ost_load(r, d, len, &g, NULL), 0);
            cr_assert(ost_same_graph(f, g), "%g", ds[i]);
            cr_assert_eq(ost_is_immediate(g), k == 0);
            if (!isnan(ds[i])) cr_assert(ost_equal(f, g));
            ost_decref(g);
            /* numbers compare and hash as in Python */
            if (ds[i] == floor(ds[i]) && fabs(ds[i]) < 1e15) {
                ost_value iv = ost_int((int64_t)ds[i]);
                uint64_t hf, hi;
                cr_assert(ost_equal(f, iv));
                cr_assert_eq(ost_hash(f, &hf), 0);
                cr_assert_eq(ost_hash(iv, &hi), 0);
                cr_assert_eq(hf, hi, "hash(%g) == hash(int)", ds[i]);
            }
            ost_decref(f);
        }
    }
    /* repr and dict keys */
    ost_value l = ost_list_new(0);
    ost_list_append(l, ost_float(2.5));
    ost_list_append(l, ost_float(1e300));
    ost_list_append(l, ost_float(-0.0));
    ost_buf b = {0};
    cr_assert_eq(ost_repr(l, &b), 0);
    cr_assert_str_eq(b.data, "[2.5, 1e+300, -0.0]");
    ost_buf_free(&b);
    ost_value dct = ost_dict_new();
    cr_assert_eq(ost_dict_set(dct, ost_float(3.0), ost_int(1)), 0);
    cr_assert_eq(ost_dict_get(dct, ost_int(3)), ost_int(1), "3.0 and 3 are one key");
    ost_decref(dct);
    ost_decref(l);
    ost_reader_free(r);
    ost_writer_free(w);
}

/* ost_same_graph looks at an instance's state and extra fields, not only
 * its class (an instance's fields are not right after its header). */
OST_TEST(value, same_graph_compares_instance_states) {
    ost_value a = ost_instance_new(ost_global("m", "C")), b = ost_instance_new(ost_global("m", "C"));
    ost_instance_setattr(a, "x", ost_int(1));
    ost_instance_setattr(b, "x", ost_int(2));
    cr_assert(!ost_same_graph(a, b));
    cr_assert(!ost_equal(a, b));
    ost_instance_setattr(b, "x", ost_int(1));
    cr_assert(ost_same_graph(a, b));
    ost_decref(a);
    ost_decref(b);
}

OST_TEST(value, the_pools_reuse_what_is_freed) {
    /* A freed object's link overwrites its header, size class included:
     * the free list it goes to must be chosen before (a build that read
     * the class after the link put every freed object on list 0, where no
     * allocation looks, and the pools grew without end). Under ASan the
     * pools are off and both counts stay 0. */
    ost_value w = ost_str("warm", 4);
    ost_decref(w);
    ost_alloc_stats a0, a1;
    ost_alloc_stats_get(&a0);
    for (int i = 0; i < 100000; i++) {
        ost_value s = ost_str("abcdefghijk", 11);
        ost_value t = ost_str("abcdefghijklmnopqrstuvwxyz0123456789", 36);
        cr_assert(s && t);
        ost_decref(s);
        ost_decref(t);
    }
    ost_alloc_stats_get(&a1);
    cr_assert_eq(a1.live_objects, a0.live_objects);
    cr_assert_leq(a1.pool_bytes, a0.pool_bytes + 2 * 65536, "pools grew from %llu to %llu bytes",
                  (unsigned long long)a0.pool_bytes, (unsigned long long)a1.pool_bytes);
}

/* ---- the shorter calls: ost_tuple_of, ost_instance_of, ost_instance_get_int */

OST_TEST(value, tuple_of_steals_its_items_and_releases_them_on_failure) {
    uint64_t before = live();
    ost_value t = ost_tuple_of(3, ost_str_c("proj-07"), ost_int(5), ost_float(1.5));
    cr_assert(t);
    assert_repr(t, "('proj-07', 5, 1.5)");
    ost_decref(t);
    t = ost_tuple_of(0);
    assert_repr(t, "()");
    ost_decref(t);
    /* a missing item (a failed constructor's 0): no tuple, nothing kept */
    cr_assert_null(ost_tuple_of(3, ost_str_c("a"), (ost_value)0, ost_str_c("b")));
    cr_assert(strstr(ost_value_errmsg(), "tuple_of"), "%s", ost_value_errmsg());
    cr_assert_eq(live(), before, "every item released");
}

OST_TEST(value, instance_of_fills_fields_in_order_and_checks_the_count) {
    static const char *fields[] = {"number", "title", "priority", "tags"};
    ost_value dflt[] = {OST_NOVALUE, OST_NOVALUE, ost_int(3), OST_NOVALUE};
    ost_class_def def = {.module = "tracker", .name = "Issue", .fields = fields, .nfields = 4,
                         .defaults = dflt};
    ost_value Issue = ost_class_new(&def);
    cr_assert(Issue, "%s", ost_value_errmsg());
    uint64_t before = live();
    ost_value it = ost_instance_of(ost_incref(Issue), 2,
                                   (ost_value[]){ost_int(7), ost_str_c("crash")});
    cr_assert(it, "%s", ost_value_errmsg());
    int64_t n;
    cr_assert_eq(ost_instance_get_int(it, "number", &n), 0);
    cr_assert_eq(n, 7);
    cr_assert_str_eq(ost_data(ost_instance_getattr(it, "title"), NULL), "crash");
    cr_assert_eq(ost_instance_get_int(it, "priority", &n), 0, "the default");
    cr_assert_eq(n, 3);
    cr_assert_null(ost_instance_slot(it, 3), "unset");
    ost_decref(it);
    /* more values than fields: refused, all released */
    cr_assert_null(ost_instance_of(ost_incref(Issue), 5,
                                   (ost_value[]){ost_int(1), ost_int(2), ost_int(3), ost_int(4),
                                                 ost_str_c("five")}));
    cr_assert(strstr(ost_value_errmsg(), "5 values for a class of 4 fields"), "%s",
              ost_value_errmsg());
    /* a missing value */
    cr_assert_null(ost_instance_of(ost_incref(Issue), 3,
                                   (ost_value[]){ost_str_c("x"), (ost_value)0, ost_str_c("y")}));
    cr_assert(strstr(ost_value_errmsg(), "value 1 is missing"), "%s", ost_value_errmsg());
    cr_assert_eq(live(), before, "nothing kept on failure");
    ost_decref(Issue);
}

OST_TEST(value, instance_get_int_tells_unset_wrong_type_and_too_big) {
    static const char *fields[] = {"n", "s", "big", "flag", "unset"};
    ost_class_def def = {.module = "m", .name = "C", .fields = fields, .nfields = 5};
    ost_value C = ost_class_new(&def);
    ost_value big = ost_int_from_decimal("18446744073709551616", 20);
    ost_value it = ost_instance_of(ost_incref(C), 4,
                                   (ost_value[]){ost_int(-9), ost_str_c("x"), big, OST_TRUE});
    cr_assert(it);
    int64_t v = 99;
    cr_assert_eq(ost_instance_get_int(it, "n", &v), 0);
    cr_assert_eq(v, -9);
    cr_assert_eq(ost_instance_get_int(it, "flag", &v), 0);
    cr_assert_eq(v, 1, "a bool is an int");
    cr_assert_eq(ost_instance_get_int(it, "s", &v), OST_ETYPE);
    cr_assert_eq(v, 0);
    cr_assert(strstr(ost_value_errmsg(), "'s' is a str, not an int"), "%s", ost_value_errmsg());
    cr_assert_eq(ost_instance_get_int(it, "big", &v), OST_ELIMIT);
    cr_assert_eq(ost_instance_get_int(it, "unset", &v), OST_ENOTFOUND);
    cr_assert(strstr(ost_value_errmsg(), "'unset' is not set"), "%s", ost_value_errmsg());
    cr_assert_eq(ost_instance_get_int(it, "nosuch", &v), OST_ENOTFOUND);
    cr_assert(strstr(ost_value_errmsg(), "has no field 'nosuch'"), "%s", ost_value_errmsg());
    cr_assert_eq(ost_instance_get_int(ost_int(3), "n", &v), OST_ETYPE);
    cr_assert_eq(ost_instance_get_int(it, "n", NULL), OST_EINVAL);
    ost_decref(it);
    ost_decref(C);
}
