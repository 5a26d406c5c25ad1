/* Fuzz target of the pickle reader.
 *
 * Every input goes through ost_load with a persistent_load hook (so
 * BINPERSID/PERSID load as persistent references) and limits small enough
 * that no input can exhaust memory. An input the reader refuses must be
 * refused cleanly: an error code, a message, an offset inside the input,
 * nothing left allocated. An input it accepts must round-trip: the value
 * is printed with ost_repr, dumped at protocols 2 to 5, and each pickle
 * must load back to the same graph (ost_same_graph: same types, same
 * sharing, same cycles) and dump again to the same bytes. ost_pickle_dis
 * runs on the input and on every pickle the writer makes, and its check
 * alone (ost_pickle_dis_ex without a callback) must agree with it. Loading twice
 * with one reader must give the same result, and no value may outlive the
 * pass (ost_alloc_stats). A second pass does it all again with a
 * find_global hook that turns some globals into classes with declared
 * fields, for the slot paths of reader and writer, reading Python 2 str as
 * latin1; an input the first pass refuses for a Python 2 str that is not
 * ASCII (OST_EDECODE) goes through a third pass that reads it as bytes.
 *
 * Built two ways: with OST_LIBFUZZER, for clang's -fsanitize=fuzzer
 * (tests/fuzz/run_fuzz.sh), and without, linked into the plain smoke
 * driver (smoke.c) that replays seeds and fixed mutations in meson test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_reader.h"
#include "ostore.h"

static const uint8_t *g_data;
static size_t g_len;
static const char *g_pass = "";

/* Reports a broken promise with the input that broke it, and aborts. */
static void bug(const char *what, const char *detail) {
    fprintf(stderr, "\nfuzz_reader: BUG%s: %s%s%s\ninput (%zu bytes):\n", g_pass,
            what, detail && *detail ? ": " : "", detail ? detail : "", g_len);
    for (size_t i = 0; i < g_len; i++)
        fprintf(stderr, "%02x%s", g_data[i], i % 32 == 31 ? "\n" : "");
    fprintf(stderr, "\n");
    abort();
}

static int pers_load(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* The second pass resolves globals named S... to classes with declared
 * fields (instances keep slots, not a dict) and P... to classes without,
 * so the slot paths of reader and writer see the same inputs. */
static int find_global(void *ud, const char *module, const char *name,
                       ost_value *cls) {
    static const char *const fields[] = {"a", "b", "x"};
    (void)ud;
    if (name[0] != 'S' && name[0] != 'P') return 0;
    ost_class_def d = {.module = module, .name = name};
    if (name[0] == 'S') {
        d.fields = fields;
        d.nfields = sizeof fields / sizeof *fields;
    }
    *cls = ost_class_new(&d);
    return *cls ? 0 : OST_ENOMEM;
}

static ost_reader *new_reader(bool classes, ost_py2str py2str) {
    ost_reader *r = ost_reader_new();
    if (!r) bug("ost_reader_new failed", NULL);
    ost_limits lim = {
        .max_depth = 10000,
        .max_memo = (size_t)1 << 20,
        .max_container = (size_t)1 << 20,
        .max_bytes = (size_t)64 << 20,
    };
    ost_reader_set_limits(r, &lim);
    ost_reader_set_persistent_load(r, pers_load, NULL);
    if (classes) ost_reader_set_find_global(r, find_global, NULL);
    if (ost_reader_set_py2str(r, py2str)) bug("ost_reader_set_py2str refused a mode", NULL);
    return r;
}

/* ---- the size of a repr ------------------------------------------------ */

/* ost_repr prints an object the graph reaches more than once in full only
 * once (then #N#), so its text is linear in the graph, except for global
 * names, printed in full at each use: a long class name and many instances
 * of it make a long text. max_len bounds that; the text, with its marker,
 * must never pass it. */
#define REPR_CAP ((size_t)1 << 20)
#define REPR_MARKER_MAX 64 /* "... (output truncated at N bytes)" */

/* ---- the target --------------------------------------------------------- */

/* A failed load must say why and where, and return nothing. */
static void check_refusal(ost_reader *r, int rc, ost_value v, size_t len) {
    if (rc >= 0) bug("ost_load returned a non-negative error", NULL);
    if (v) bug("ost_load failed but returned a value", ost_reader_errmsg(r));
    if (!ost_reader_errmsg(r)[0]) bug("ost_load failed without a message", NULL);
    if (ost_reader_erroffset(r) > len)
        bug("error offset beyond the input", ost_reader_errmsg(r));
    if (!strcmp(ost_err_name(rc), "OST_UNKNOWN"))
        bug("ost_load returned an unknown error code", ost_reader_errmsg(r));
}

/* Disassembles data; returns the code. */
static int dis(const uint8_t *data, size_t len) {
    ost_buf out = {0};
    size_t off = (size_t)-1;
    int rc = ost_pickle_dis(data, len, &out, &off);
    if (rc && off > len) bug("ost_pickle_dis: error offset beyond the input", NULL);
    if (len && !out.data) bug("ost_pickle_dis wrote nothing", NULL);
    ost_buf_free(&out);
    /* without a callback it only checks, with the same result */
    size_t off2 = (size_t)-1;
    if (ost_pickle_dis_ex(data, len, NULL, NULL, NULL, &off2) != rc || (rc && off2 != off))
        bug("ost_pickle_dis_ex without a callback disagrees with the listing", NULL);
    return rc;
}

/* Dumps v with w; returns a malloc'd copy of the pickle (NULL when the
 * writer refused with rc, stored in *rc). */
static uint8_t *dump_copy(ost_writer *w, ost_value v, size_t *n, int *rc) {
    const void *p;
    *rc = ost_dump(w, v, &p, n);
    if (*rc) return NULL;
    uint8_t *c = malloc(*n ? *n : 1);
    if (!c) bug("out of memory in the harness", NULL);
    memcpy(c, p, *n);
    return c;
}

/* The round trip of a loaded value through the writer at one setting. */
static void round_trip(ost_reader *r, ost_writer *w, ost_value v, int proto,
                       bool framing) {
    char what[96];
    if (ost_writer_set_protocol(w, proto)) bug("set_protocol failed", NULL);
    ost_writer_set_framing(w, framing);
    size_t n;
    int rc;
    uint8_t *p = dump_copy(w, v, &n, &rc);
    if (!p) {
        /* Protocols 2 and 3 cannot spell a global whose name holds a
         * newline (GLOBAL is a text opcode), and protocol 2 one that
         * would read back as a builtin the reader builds a value from
         * (__builtin__.set): those are the only refusals. */
        if (proto < 4 && rc == OST_EINVAL && strstr(ost_writer_errmsg(w), "newline"))
            return;
        if (proto < 3 && rc == OST_EUNSUPPORTED && strstr(ost_writer_errmsg(w), "reads back as"))
            return;
        snprintf(what, sizeof what, "ost_dump failed at protocol %d (%s)", proto,
                 ost_err_name(rc));
        bug(what, ost_writer_errmsg(w));
    }
    if (dis(p, n)) {
        snprintf(what, sizeof what, "the writer's protocol %d pickle does not disassemble", proto);
        bug(what, NULL);
    }
    ost_value v2;
    size_t used;
    rc = ost_load(r, p, n, &v2, &used);
    if (rc) {
        snprintf(what, sizeof what, "the writer's protocol %d pickle does not load", proto);
        bug(what, ost_reader_errmsg(r));
    }
    if (used != n) bug("reloading stopped before the end of the writer's pickle", NULL);
    ost_dump_stats st;
    ost_writer_stats(w, &st);
    if (st.renamed) { /* Python 2 spellings that read back as other names */
        free(p);
        ost_release(v2);
        return;
    }
    if (!ost_same_graph(v, v2)) {
        snprintf(what, sizeof what, "round trip at protocol %d%s changed the graph", proto,
                 framing ? "" : " (no frames)");
        bug(what, NULL);
    }
    size_t n2;
    uint8_t *p2 = dump_copy(w, v2, &n2, &rc);
    if (!p2) bug("the reloaded value does not dump", ost_writer_errmsg(w));
    if (n2 != n || memcmp(p, p2, n) != 0) {
        snprintf(what, sizeof what, "protocol %d: dump, load, dump is not a fixed point", proto);
        bug(what, NULL);
    }
    free(p2);
    free(p);
    ost_release(v2);
}

/* One pass over the input; classes: with the find_global hook; py2str:
 * how Python 2 str is read. *code gets the load's result. */
static int run(const uint8_t *data, size_t len, bool classes, ost_py2str py2str, int *code) {
    ost_alloc_stats before, after;
    ost_alloc_stats_get(&before);
    g_pass = classes ? " [pass 2: find_global makes classes, latin1]"
             : py2str == OST_PY2STR_BYTES ? " [pass 3: Python 2 str as bytes]"
                                          : "";

    ost_reader *r = new_reader(classes, py2str);
    ost_value v;
    size_t used;
    int rc = ost_load(r, data, len, &v, &used);
    *code = rc;
    int drc = dis(data, len);
    if (rc) {
        check_refusal(r, rc, v, len);
        /* a reused reader must refuse the same way */
        int rc2 = ost_load(r, data, len, &v, &used);
        if (rc2 != rc) bug("a second load of the same input failed differently", NULL);
        ost_reader_free(r);
        ost_alloc_stats_get(&after);
        if (after.live_objects != before.live_objects)
            bug("values leaked by a failed load", NULL);
        return 0;
    }
    if (!v) bug("ost_load succeeded without a value", NULL);
    if (used == 0 || used > len || data[used - 1] != '.')
        bug("ost_load consumed a wrong number of bytes", NULL);
    if (drc) bug("the reader loads what the disassembler rejects", NULL);

    /* a reused reader gives the same graph */
    ost_value again;
    if (ost_load(r, data, len, &again, NULL))
        bug("a second load of the same input failed", ost_reader_errmsg(r));
    if (!ost_same_graph(v, again)) bug("a second load gave another graph", NULL);
    ost_release(again);

    ost_repr_options ro;
    ost_repr_options_init(&ro);
    ro.max_len = REPR_CAP;
    ost_buf rep = {0};
    if (ost_repr_ex(v, &rep, &ro)) bug("ost_repr failed", NULL);
    if (!rep.data || !rep.len) bug("ost_repr printed nothing", NULL);
    if (rep.len > REPR_CAP + REPR_MARKER_MAX) bug("ost_repr wrote past max_len", NULL);
    ost_buf_free(&rep);

    ost_writer *w = ost_writer_new();
    if (!w) bug("ost_writer_new failed", NULL);
    for (int proto = 2; proto <= OST_PICKLE_HIGHEST_PROTOCOL; proto++)
        round_trip(r, w, v, proto, true);
    round_trip(r, w, v, 4, false);
    ost_writer_free(w);

    ost_release(v);
    ost_reader_free(r);
    ost_alloc_stats_get(&after);
    if (after.live_objects != before.live_objects) bug("values leaked", NULL);
    return 1;
}

int ost_fuzz_reader_one(const uint8_t *data, size_t len) {
    g_data = data;
    g_len = len;
    int rc, rc2;
    int loaded = run(data, len, false, OST_PY2STR_ASCII, &rc);
    run(data, len, true, OST_PY2STR_LATIN1, &rc2);
    if (rc == OST_EDECODE) loaded = run(data, len, false, OST_PY2STR_BYTES, &rc2);
    return loaded;
}

#ifdef OST_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ost_fuzz_reader_one(data, size);
    return 0;
}
#endif
