/* Unit tests of how ostore prints values and pickles on hostile input:
 * ost_repr (serializer/repr.c) on graphs that share objects, on huge ints,
 * and with a cap on its text. Its output on ordinary values is checked
 * against Python's repr in test_value.c and test_reader.c. Every check
 * here is on the text or its size, never on time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "leakcheck.h"
#include "ostore.h"
#include "pyeval.h"

/* ---- helpers -------------------------------------------------------------- */

static uint64_t live(void) {
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    return st.live_objects;
}

static ost_value load_ok(const void *data, size_t n) {
    ost_reader *r = ost_reader_new();
    ost_value v = 0;
    cr_assert_eq(ost_load(r, data, n, &v, NULL), 0, "%s", ost_reader_errmsg(r));
    ost_reader_free(r);
    return v;
}

/* repr of v, malloc'ed. */
static char *repr_of(ost_value v) {
    ost_buf b = {0};
    cr_assert_eq(ost_repr(v, &b), 0);
    return b.data;
}

#define assert_repr(v, want)                                                 \
    do {                                                                     \
        char *r_ = repr_of(v);                                               \
        cr_assert_str_eq(r_, want, "repr is\n  %s\nwant\n  %s", r_, want);   \
        free(r_);                                                            \
    } while (0)

/* The "billion laughs" pickle: level 0 is an empty list, level i a tuple
 * holding level i-1 twice (fetched with BINGET), levels memoized with
 * MEMOIZE. A naive repr of level n has 2^n empty lists. */
static uint8_t *laughs(int levels, size_t *n) {
    uint8_t *p = malloc(8 + 6 * (size_t)levels);
    size_t k = 0;
    p[k++] = 0x80;
    p[k++] = 4;
    p[k++] = ']';
    p[k++] = 0x94; /* MEMOIZE: 0 */
    for (int i = 0; i < levels; i++) {
        p[k++] = 'h'; /* BINGET i */
        p[k++] = (uint8_t)i;
        p[k++] = 'h';
        p[k++] = (uint8_t)i;
        p[k++] = 0x86; /* TUPLE2 */
        p[k++] = 0x94; /* MEMOIZE: i + 1 */
    }
    p[k++] = '.';
    *n = k;
    return p;
}

/* ---- shared objects --------------------------------------------------------- */

OST_TEST(repr, billion_laughs_prints_each_level_once) {
    uint64_t base = live();
    size_t n;
    uint8_t *p = laughs(20, &n);
    ost_value v = load_ok(p, n);
    char *s = repr_of(v);
    /* (#1=(#2=(...(#19=([], []), #19#)..., #2#), #1#) */
    ost_buf want = {0};
    for (int i = 1; i < 20; i++) ost__buf_printf(&want, "(#%d=", i);
    ost__buf_printf(&want, "(#20=[], #20#)");
    for (int i = 19; i >= 1; i--) ost__buf_printf(&want, ", #%d#)", i);
    cr_assert_eq(strlen(s), want.len, "%zu bytes, want %zu", strlen(s), want.len);
    cr_assert_str_eq(s, want.data);
    ost_buf_free(&want);
    free(s);
    ost_decref(v);
    free(p);

    /* 63 levels, a 383-byte pickle: 2^63 lists printed naively (the cap
     * keeps a regression from eating the machine) */
    p = laughs(63, &n);
    v = load_ok(p, n);
    ost_repr_options o;
    ost_repr_options_init(&o);
    o.max_len = 1 << 20;
    ost_buf b = {0};
    cr_assert_eq(ost_repr_ex(v, &b, &o), 0);
    s = b.data;
    size_t len = strlen(s);
    cr_assert_null(strstr(s, "truncated"), "%.200s", s);
    cr_assert_lt(len, 4 * n, "%zu bytes of repr for a %zu-byte pickle", len, n);
    cr_assert(strstr(s, "(#63=[], #63#)"), "%s", s);
    cr_assert(strstr(s, ", #1#)"), "%s", s);
    free(s);
    ost_decref(v);
    free(p);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, shared_mutable_values_print_once_with_a_label) {
    uint64_t base = live();
    ost_value l = ost_list_new(0), d = ost_dict_new(), e = ost_list_new(0);
    cr_assert_eq(ost_list_append(l, ost_int(1)), 0);
    cr_assert_eq(ost_dict_set(d, ost_str_c("k"), ost_incref(l)), 0);
    ost_value t = ost_tuple_new(6);
    ost_tuple_set(t, 0, ost_incref(l));
    ost_tuple_set(t, 1, ost_incref(d));
    ost_tuple_set(t, 2, ost_incref(l));
    ost_tuple_set(t, 3, ost_incref(e));
    ost_tuple_set(t, 4, ost_incref(d));
    ost_tuple_set(t, 5, ost_incref(e));
    /* labels number in the order their objects first print */
    assert_repr(t, "(#1=[1], #2={'k': #1#}, #1#, #3=[], #2#, #3#)");
    ost_decref(t);
    ost_decref(l);
    ost_decref(d);
    ost_decref(e);
    /* a list held only by a shared tuple prints once, inside it */
    ost_value inner = ost_list_new(0), holder = ost_tuple_new(1);
    cr_assert_eq(ost_list_append(inner, ost_int(5)), 0);
    ost_tuple_set(holder, 0, inner);
    t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_incref(holder));
    ost_tuple_set(t, 1, holder);
    assert_repr(t, "(#1=([5],), #1#)");
    ost_decref(t);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, short_immutable_values_print_in_full_each_time) {
    uint64_t base = live();
    ost_value pair = ost_tuple_new(2), s = ost_str_c("sixteen bytes ok");
    ost_value big = ost_int_from_decimal("123456789012345678901234567890", 30);
    ost_tuple_set(pair, 0, ost_int(1));
    ost_tuple_set(pair, 1, ost_int(2));
    ost_value pr = ost_persref(ost_incref(pair));
    ost_value t = ost_tuple_new(8);
    ost_tuple_set(t, 0, ost_incref(pair));
    ost_tuple_set(t, 1, ost_incref(pair));
    ost_tuple_set(t, 2, ost_incref(s));
    ost_tuple_set(t, 3, ost_incref(s));
    ost_tuple_set(t, 4, ost_incref(big));
    ost_tuple_set(t, 5, ost_incref(big));
    ost_tuple_set(t, 6, ost_incref(pr));
    ost_tuple_set(t, 7, ost_incref(pr));
    assert_repr(t, "((1, 2), (1, 2), 'sixteen bytes ok', 'sixteen bytes ok', "
                   "123456789012345678901234567890, 123456789012345678901234567890, "
                   "persistent((1, 2)), persistent((1, 2)))");
    ost_decref(t);
    ost_decref(pr);
    ost_decref(pair);
    ost_decref(s);
    ost_decref(big);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, long_or_mutable_holding_immutable_values_are_labelled) {
    uint64_t base = live();
    char text[80];
    memset(text, 'a', 65);
    text[65] = 0;
    ost_value s = ost_str_c(text);          /* 67 bytes of text with its quotes */
    ost_value l = ost_list_new(0);
    ost_value holds = ost_tuple_new(1);     /* ([],): short, but holds a list */
    ost_tuple_set(holds, 0, ost_incref(l));
    ost_value t = ost_tuple_new(5);
    ost_tuple_set(t, 0, ost_incref(s));
    ost_tuple_set(t, 1, ost_incref(s));
    ost_tuple_set(t, 2, ost_incref(holds));
    ost_tuple_set(t, 3, ost_incref(holds));
    ost_tuple_set(t, 4, ost_incref(l));
    char want[300];
    snprintf(want, sizeof want, "(#1='%s', #1#, #2=(#3=[],), #2#, #3#)", text);
    assert_repr(t, want);
    ost_decref(t);
    ost_decref(s);
    ost_decref(holds);
    ost_decref(l);
    /* a tuple of one 20-byte str of control characters: 85 bytes of text */
    ost_value ctl = ost_tuple_new(1);
    ost_tuple_set(ctl, 0, ost_str("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                                  "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01", 20));
    t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_incref(ctl));
    ost_tuple_set(t, 1, ctl);
    char *r = repr_of(t);
    cr_assert_eq(strncmp(r, "(#1=('\\x01", 10), 0, "%s", r);
    cr_assert_eq(strcmp(r + strlen(r) - 9, "',), #1#)"), 0, "%s", r);
    free(r);
    ost_decref(t);
    /* 62 bytes of text: short, printed twice */
    text[60] = 0;
    s = ost_str_c(text);
    t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_incref(s));
    ost_tuple_set(t, 1, s);
    snprintf(want, sizeof want, "('%s', '%s')", text, text);
    assert_repr(t, want);
    ost_decref(t);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, cycles_print_as_python_and_shared_cycles_get_labels) {
    uint64_t base = live();
    ost_value l = ost_list_new(0);
    cr_assert_eq(ost_list_append(l, ost_incref(l)), 0);
    assert_repr(l, "[[...]]");
    ost_value t = ost_tuple_new(2);
    ost_tuple_set(t, 0, ost_incref(l));
    ost_tuple_set(t, 1, ost_incref(l));
    assert_repr(t, "(#1=[[...]], #1#)");
    ost_decref(t);
    ost_release(l);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, shared_instance_state_and_reduce_arguments_print_whole) {
    uint64_t base = live();
    /* two instances with one state dict: inline, as x=1, the dict would
     * print at each instance */
    ost_value cls = ost_global("m", "C");
    ost_value st = ost_dict_new();
    cr_assert_eq(ost_dict_set(st, ost_str_c("x"), ost_int(1)), 0);
    ost_value a = ost_instance_new(ost_incref(cls)), b = ost_instance_new(ost_incref(cls));
    cr_assert_eq(ost_instance_set_state(a, ost_incref(st)), 0);
    cr_assert_eq(ost_instance_set_state(b, ost_incref(st)), 0);
    ost_value c = ost_instance_new(ost_incref(cls));
    cr_assert_eq(ost_instance_setattr(c, "y", ost_int(2)), 0);
    ost_value t = ost_tuple_new(4);
    ost_tuple_set(t, 0, a);
    ost_tuple_set(t, 1, b);
    ost_tuple_set(t, 2, c);
    ost_tuple_set(t, 3, ost_instance_new(ost_incref(cls)));
    assert_repr(t, "(m.C(__state__=#1={'x': 1}), m.C(__state__=#1#), m.C(y=2), m.C())");
    ost_decref(t);
    ost_decref(st);

    /* two reduce values with one argument tuple: a short one prints inline
     * each time, a long one (it holds a list) as *#N=(...) */
    ost_value args = ost_tuple_new(2);
    ost_tuple_set(args, 0, ost_int(1));
    ost_tuple_set(args, 1, ost_int(2));
    ost_value l = ost_list_new(0);
    ost_value largs = ost_tuple_new(1);
    ost_tuple_set(largs, 0, l);
    t = ost_tuple_new(4);
    ost_tuple_set(t, 0, ost_reduce_new(OST_REDUCE_CALL, ost_incref(cls), ost_incref(args)));
    ost_tuple_set(t, 1, ost_reduce_new(OST_REDUCE_CALL, ost_incref(cls), args));
    ost_tuple_set(t, 2, ost_reduce_new(OST_REDUCE_NEWOBJ, ost_incref(cls), ost_incref(largs)));
    ost_tuple_set(t, 3, ost_reduce_new(OST_REDUCE_CALL, ost_incref(cls), largs));
    assert_repr(t, "(m.C(1, 2), m.C(1, 2), m.C.__new__(*#1=([],)), m.C(*#1#))");
    ost_decref(t);
    ost_decref(cls);
    cr_assert_eq(live(), base);
}

/* ---- ints ------------------------------------------------------------------- */

/* A LONG4 pickle of the n bytes at le. */
static uint8_t *long4(const uint8_t *le, size_t n, size_t *len) {
    uint8_t *p = malloc(n + 8);
    p[0] = 0x8b;
    for (int i = 0; i < 4; i++) p[1 + i] = (uint8_t)(n >> (8 * i));
    memcpy(p + 5, le, n);
    p[5 + n] = '.';
    *len = n + 6;
    return p;
}

OST_TEST(repr, an_int_past_4300_digits_prints_in_hex_in_linear_size) {
    uint64_t base = live();
    /* 256 KiB of 0x5a (631,306 decimal digits): 9 s of decimal conversion */
    size_t n = 256 * 1024, len;
    uint8_t *le = malloc(n);
    memset(le, 0x5a, n);
    uint8_t *p = long4(le, n, &len);
    ost_value v = load_ok(p, len);
    char *s = repr_of(v);
    cr_assert_eq(strlen(s), 2 + 2 * n);
    cr_assert_eq(strncmp(s, "0x5a5a", 6), 0, "%.40s", s);
    cr_assert_eq(strspn(s + 2, "5a"), 2 * n);
    free(s);
    ost_decref(v);
    free(p);
    /* negative: 0xa5... is -(0x5a...5b) */
    memset(le, 0xa5, n);
    p = long4(le, n, &len);
    v = load_ok(p, len);
    s = repr_of(v);
    cr_assert_eq(strlen(s), 3 + 2 * n);
    cr_assert_eq(strncmp(s, "-0x5a5a", 7), 0, "%.40s", s);
    cr_assert_eq(strcmp(s + 3 + 2 * n - 4, "5a5b"), 0, "%s", s + 2 * n - 4);
    free(s);
    ost_decref(v);
    free(p);
    free(le);
    cr_assert_eq(live(), base);
}

/* Python prints the pickle of a list of ints in hex, then each int as
 * ostore must print it: repr(x), or hex(x) past 4300 digits. */
static const char ints_script[] =
    "import pickle, sys\n"
    "sys.set_int_max_str_digits(0)\n"
    "xs = [0, -1, 2**62 - 1, -2**62, 2**62, -2**62 - 1, 2**64, -2**64, 10**100, -10**100,\n"
    "      2**14284, 10**4299, 10**4300 - 1, -(10**4300 - 1), 10**4300, -10**4300,\n"
    "      2**14285 - 1, -2**14285, 7 * 16**5000, -(16**5000), 255 << 100000]\n"
    "print(pickle.dumps(xs, 4).hex())\n"
    "for x in xs:\n"
    "    s = repr(x)\n"
    "    print(s if len(s.lstrip('-')) <= 4300 else hex(x))\n";

static uint8_t *unhex(const char *h, size_t n) {
    uint8_t *b = malloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned x;
        cr_assert_eq(sscanf(h + 2 * i, "%2x", &x), 1);
        b[i] = (uint8_t)x;
    }
    return b;
}

OST_TEST(repr, ints_print_as_python_prints_them_up_to_the_limit) {
    uint64_t base = live();
    char *py = py_run(ints_script, "", 0);
    char *save = NULL, *line = strtok_r(py, "\n", &save);
    size_t hn = strlen(line);
    uint8_t *p = unhex(line, hn);
    ost_value xs = load_ok(p, hn / 2);
    size_t i = 0;
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
        cr_assert_lt(i, ost_len(xs));
        char *s = repr_of(ost_item(xs, i));
        cr_assert_str_eq(s, line, "int %zu: %.60s... (%zu bytes), want %.60s... (%zu bytes)", i, s,
                         strlen(s), line, strlen(line));
        free(s);
    }
    cr_assert_eq(i, ost_len(xs));
    ost_decref(xs);
    free(p);
    free(py);
    cr_assert_eq(live(), base);
}

OST_TEST(repr, int_digits_sets_the_limit_and_zero_lifts_it) {
    uint64_t base = live();
    ost_repr_options o;
    ost_repr_options_init(&o);
    cr_assert_eq(o.int_digits, OST_REPR_INT_DIGITS);
    cr_assert_eq(o.int_digits, 4300);
    cr_assert_eq(o.max_len, 0);
    ost_value t = ost_tuple_new(4);
    ost_tuple_set(t, 0, ost_int(12345));
    ost_tuple_set(t, 1, ost_int(-123456));
    ost_tuple_set(t, 2, ost_int_from_decimal("-18446744073709551616", 21));
    char big[5002];
    memset(big, '9', 5001);
    big[5001] = 0;
    ost_tuple_set(t, 3, ost_int_from_decimal(big, 5001));
    o.int_digits = 5;
    ost_buf b = {0};
    cr_assert_eq(ost_repr_ex(ost_item(t, 0), &b, &o), 0);
    cr_assert_eq(ost_repr_ex(ost_item(t, 1), &b, &o), 0);
    cr_assert_eq(ost_repr_ex(ost_item(t, 2), &b, &o), 0);
    cr_assert_str_eq(b.data, "12345-0x1e240-0x10000000000000000");
    ost_buf_free(&b);
    /* 0: every int in decimal */
    o.int_digits = 0;
    cr_assert_eq(ost_repr_ex(ost_item(t, 3), &b, &o), 0);
    cr_assert_str_eq(b.data, big);
    ost_buf_free(&b);
    /* the default prints it in hex */
    char *s = repr_of(ost_item(t, 3));
    cr_assert_eq(strncmp(s, "0x", 2), 0, "%.40s", s);
    free(s);
    ost_decref(t);
    cr_assert_eq(live(), base);
}

/* ---- the cap on the text ---------------------------------------------------- */

OST_TEST(repr, max_len_cuts_the_text_and_says_so) {
    uint64_t base = live();
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 1000; i++) cr_assert_eq(ost_list_append(l, ost_int(i)), 0);
    char *full = repr_of(l);
    ost_repr_options o;
    ost_repr_options_init(&o);
    o.max_len = 50;
    ost_buf b = {0};
    ost__buf_printf(&b, ">"); /* what out held is kept and not counted */
    cr_assert_eq(ost_repr_ex(l, &b, &o), 0);
    char want[200];
    snprintf(want, sizeof want, ">%.50s... (output truncated at 50 bytes)", full);
    cr_assert_str_eq(b.data, want);
    ost_buf_free(&b);
    /* a text that fits is whole, with no marker */
    o.max_len = strlen(full);
    cr_assert_eq(ost_repr_ex(l, &b, &o), 0);
    cr_assert_str_eq(b.data, full);
    ost_buf_free(&b);
    free(full);
    ost_decref(l);
    /* never inside a UTF-8 character: the quote and one two-byte 'é' fit */
    ost_value t = ost_str_c("\xc3\xa9\xc3\xa9\xc3\xa9");
    o.max_len = 4;
    cr_assert_eq(ost_repr_ex(t, &b, &o), 0);
    cr_assert_str_eq(b.data, "'\xc3\xa9... (output truncated at 4 bytes)");
    ost_buf_free(&b);
    ost_decref(t);
    /* an int's text is cut too */
    size_t n = 1 << 20, len;
    uint8_t *le = malloc(n);
    memset(le, 0x11, n);
    uint8_t *p = long4(le, n, &len);
    ost_value v = load_ok(p, len);
    o.max_len = 10;
    cr_assert_eq(ost_repr_ex(v, &b, &o), 0);
    cr_assert_str_eq(b.data, "0x11111111... (output truncated at 10 bytes)");
    ost_buf_free(&b);
    ost_decref(v);
    free(p);
    free(le);
    cr_assert_eq(live(), base);
}

/* ---- disassembly ------------------------------------------------------------ */

/* PROTO 4, n MARKs, EMPTY_TUPLE, STOP: n nested MARKs that never close. */
static uint8_t *marks(size_t n, size_t *len) {
    uint8_t *p = malloc(n + 4);
    p[0] = 0x80;
    p[1] = 4;
    memset(p + 2, '(', n);
    p[n + 2] = ')';
    p[n + 3] = '.';
    *len = n + 4;
    return p;
}

/* What ost_pickle_dis_ex hands its callback. */
typedef struct {
    size_t calls, total, biggest;
    ost_buf text; /* kept when keep is set */
    bool keep;
    int fail_at; /* the call that returns -123 (0: none) */
} sink;

static int to_sink(void *ud, const void *data, size_t len) {
    sink *s = ud;
    s->calls++;
    s->total += len;
    if (len > s->biggest) s->biggest = len;
    if (s->keep) cr_assert_eq(ost__buf_append(&s->text, data, len), 0);
    return s->fail_at && (int)s->calls == s->fail_at ? -123 : 0;
}

OST_TEST(repr, dis_of_nested_marks_is_linear_and_caps_the_indentation) {
    /* 5,000 MARKs: 25 MB of blanks when each level indented 2 more */
    size_t n, off = 0;
    uint8_t *p = marks(5000, &n);
    ost_buf out = {0};
    cr_assert_eq(ost_pickle_dis(p, n, &out, &off), 0);
    cr_assert_lt(out.len, 100 * n, "%zu bytes of listing for %zu of pickle", out.len, n);
    /* up to 32 levels the indentation is 2 blanks a level, as before */
    char want[200];
    snprintf(want, sizeof want, "\n   34: (    %64sMARK            \n", "");
    cr_assert(strstr(out.data, want), "no level-32 MARK line");
    snprintf(want, sizeof want, "\n   35: (    %64sMARK            \n", "[33] ");
    cr_assert(strstr(out.data, want), "no level-33 MARK line");
    snprintf(want, sizeof want, "\n 5002: )    %64sEMPTY_TUPLE     \n 5003: .    %64sSTOP            \n",
             "[5000] ", "[5000] ");
    cr_assert(strstr(out.data, want), "%s", out.data + out.len - 200);
    /* every line is short */
    size_t longest = 0;
    for (char *l = out.data, *e; *l; l = e + 1) {
        e = strchr(l, '\n');
        cr_assert(e);
        if ((size_t)(e - l) > longest) longest = (size_t)(e - l);
    }
    cr_assert_leq(longest, 100);
    ost_buf_free(&out);
    free(p);
}

OST_TEST(repr, dis_streams_its_listing_in_bounded_pieces) {
    /* 30,000 MARKs, a 30 KB pickle: its listing took 0.9 GB of memory */
    size_t n, off = 0;
    uint8_t *p = marks(30000, &n);
    sink s = {0};
    cr_assert_eq(ost_pickle_dis_ex(p, n, NULL, to_sink, &s, &off), 0);
    cr_assert_gt(s.calls, 100);
    cr_assert_leq(s.biggest, 8192, "a piece of %zu bytes", s.biggest);
    cr_assert_lt(s.total, 100 * n);
    /* the same text as the buffer version */
    ost_buf out = {0};
    cr_assert_eq(ost_pickle_dis(p, n, &out, &off), 0);
    cr_assert_eq(out.len, s.total);
    ost_buf_free(&out);
    /* a failing callback stops the listing with its code */
    sink f = {.fail_at = 3};
    cr_assert_eq(ost_pickle_dis_ex(p, n, NULL, to_sink, &f, &off), -123);
    cr_assert_eq(f.calls, 3);
    free(p);
}

OST_TEST(repr, dis_without_a_callback_only_checks) {
    /* the same code and offset as the listing, for good and bad input */
    size_t n;
    uint8_t *p = marks(100, &n);
    for (size_t cut = 0; cut <= n; cut++) {
        size_t o1 = 999, o2 = 999;
        sink s = {.keep = true};
        int r1 = ost_pickle_dis_ex(p, cut, NULL, to_sink, &s, &o1);
        int r2 = ost_pickle_dis_ex(p, cut, NULL, NULL, NULL, &o2);
        cr_assert_eq(r1, r2, "cut at %zu: %d, %d", cut, r1, r2);
        cr_assert_eq(o1, o2, "cut at %zu", cut);
        cr_assert_eq(r1 == 0, cut == n);
        ost_buf_free(&s.text);
    }
    p[50] = 0xff;
    size_t off = 0;
    cr_assert_eq(ost_pickle_dis_ex(p, n, NULL, NULL, NULL, &off), OST_EBADOPCODE);
    cr_assert_eq(off, 50);
    free(p);
    static const char bad_utf8[] = "\x80\x04\x8c\x02\xff\xfe.";
    cr_assert_eq(ost_pickle_dis_ex(bad_utf8, 7, NULL, NULL, NULL, &off), OST_EUTF8);
    cr_assert_eq(off, 2);
}

OST_TEST(repr, dis_prints_a_long_int_argument_in_hex_past_the_limit) {
    uint64_t base = live();
    size_t n = 256 * 1024, len, off;
    uint8_t *le = malloc(n);
    memset(le, 0x5a, n);
    uint8_t *body = long4(le, n, &len);
    uint8_t *p = malloc(len + 2);
    p[0] = 0x80;
    p[1] = 4;
    memcpy(p + 2, body, len);
    sink s = {.keep = true};
    cr_assert_eq(ost_pickle_dis_ex(p, len + 2, NULL, to_sink, &s, &off), 0);
    cr_assert(strstr(s.text.data, "    2: \\x8b LONG4            0x5a5a5a"), "%.80s", s.text.data);
    cr_assert_lt(s.text.len, 2 * n + 200);
    ost_buf_free(&s.text);
    /* a small limit applies to small ints too */
    static const char small[] = "\x80\x04\x8a\x02\x39\x30.";
    ost_repr_options o;
    ost_repr_options_init(&o);
    o.int_digits = 4;
    sink t = {.keep = true};
    cr_assert_eq(ost_pickle_dis_ex(small, 7, &o, to_sink, &t, &off), 0);
    cr_assert(strstr(t.text.data, "LONG1            0x3039\n"), "%s", t.text.data);
    ost_buf_free(&t.text);
    free(p);
    free(body);
    free(le);
    cr_assert_eq(live(), base);
}
