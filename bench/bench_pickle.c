/* bench_pickle: the C half of the serializer benchmark.
 *
 * Builds the benchmark cases as ostore values, the same data that
 * bench_pickle.py builds in Python, and times ost_dump and ost_load (plus
 * freeing what was loaded) with one reused writer and one reused reader, as
 * the library is meant to be used. When built with msgpack-c it also packs
 * and unpacks cases (i), (iv) and (v) with msgpack-c, walking the same ostore
 * values: msgpack keeps no identity and no memo, so it is the floor for a
 * serializer of that data.
 *
 * Prints one JSON object on stdout with every repetition's time in
 * nanoseconds (the driver takes medians), and writes each case's pickle to
 * OUTDIR/<case>.pickle so the driver can check that Python loads it equal
 * to its own data. Usage:
 *
 *   bench_pickle [--reps N] [--out OUTDIR] [--only CASE]
 *
 * Run it through bench/bench_pickle.py, which prints the comparison. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ostore.h>

#ifdef OST_BENCH_MSGPACK
#include <msgpack.h>
#endif

/* ---- helpers ------------------------------------------------------------ */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc, const char *msg) {
    fprintf(stderr, "bench_pickle: %s failed: %s (%s)\n", what, ost_err_name(rc),
            msg ? msg : ost_strerror(rc));
    exit(1);
}

static void check(ost_value v, const char *what) {
    if (!v) {
        fprintf(stderr, "bench_pickle: %s: out of memory\n", what);
        exit(1);
    }
}

static void check_rc(int rc, const char *what) {
    if (rc) die(what, rc, NULL);
}

static void print_times(const char *key, const uint64_t *t, int n) {
    printf(",\"%s\":[", key);
    for (int i = 0; i < n; i++) printf("%s%llu", i ? "," : "", (unsigned long long)t[i]);
    printf("]");
}

static uint64_t live_objects(void) {
    ost_alloc_stats st;
    ost_alloc_stats_get(&st);
    return st.live_objects;
}

/* ---- the cases ------------------------------------------------------------ */

#define N_DICTS 100000
#define N_BIG 1000000
#define N_INST 100000
#define BLOB_SIZE (64u << 20)

/* (i) {'id': i, 'name': 'user%d' % i, 'score': i * 1.5, 'tags': ['a', 'b'],
 * 'active': i % 2 == 0}. The keys and 'a', 'b' are one object each, shared
 * like Python's interned strings; every dict gets a fresh tags list. */
static ost_value build_dicts(void) {
    ost_value k_id = ost_str_c("id"), k_name = ost_str_c("name"),
              k_score = ost_str_c("score"), k_tags = ost_str_c("tags"),
              k_active = ost_str_c("active"), a = ost_str_c("a"), b = ost_str_c("b");
    ost_value l = ost_list_new(N_DICTS);
    check(l, "dicts");
    for (int i = 0; i < N_DICTS; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "user%d", i);
        ost_value d = ost_dict_new(), tags = ost_list_new(2);
        check(d, "dicts");
        check(tags, "dicts");
        check_rc(ost_list_append(tags, ost_incref(a)), "list append");
        check_rc(ost_list_append(tags, ost_incref(b)), "list append");
        check_rc(ost_dict_set(d, ost_incref(k_id), ost_int(i)), "dict set");
        check_rc(ost_dict_set(d, ost_incref(k_name), ost_str(name, (size_t)n)), "dict set");
        check_rc(ost_dict_set(d, ost_incref(k_score), ost_float(i * 1.5)), "dict set");
        check_rc(ost_dict_set(d, ost_incref(k_tags), tags), "dict set");
        check_rc(ost_dict_set(d, ost_incref(k_active), ost_bool(i % 2 == 0)), "dict set");
        check_rc(ost_list_append(l, d), "list append");
    }
    ost_decref(k_id);
    ost_decref(k_name);
    ost_decref(k_score);
    ost_decref(k_tags);
    ost_decref(k_active);
    ost_decref(a);
    ost_decref(b);
    return l;
}

/* (ii) [1000] * 10**6: small ints are immediates, as Python shares one. */
static ost_value build_ints_same(void) {
    ost_value l = ost_list_new(N_BIG);
    check(l, "ints");
    for (int i = 0; i < N_BIG; i++) check_rc(ost_list_append(l, ost_int(1000)), "append");
    return l;
}

/* (iii) [1000.0] * 10**6: one float object, referenced a million times. */
static ost_value build_floats_same(void) {
    ost_value l = ost_list_new(N_BIG), f = ost_float(1000.0);
    check(l, "floats");
    check(f, "floats");
    for (int i = 0; i < N_BIG; i++) check_rc(ost_list_append(l, ost_incref(f)), "append");
    ost_decref(f);
    return l;
}

/* (iv) list(range(10**6)). */
static ost_value build_range(void) {
    ost_value l = ost_list_new(N_BIG);
    check(l, "range");
    for (int i = 0; i < N_BIG; i++) check_rc(ost_list_append(l, ost_int(i)), "append");
    return l;
}

/* (v) ['s%d' % i for i in range(10**6)]. */
static ost_value build_strs(void) {
    ost_value l = ost_list_new(N_BIG);
    check(l, "strs");
    for (int i = 0; i < N_BIG; i++) {
        char s[32];
        int n = snprintf(s, sizeof s, "s%d", i);
        ost_value v = ost_str(s, (size_t)n);
        check(v, "strs");
        check_rc(ost_list_append(l, v), "append");
    }
    return l;
}

/* (vi) 100,000 instances of bench.Rec with attributes id (int), name (short
 * str), score (float) and prev (the instance before it, None for the first).
 * One class object is shared, as in Python. */
static ost_value build_instances(void) {
    ost_value cls = ost_global("bench", "Rec");
    ost_value l = ost_list_new(N_INST);
    check(cls, "instances");
    check(l, "instances");
    ost_value prev = OST_NONE;
    for (int i = 0; i < N_INST; i++) {
        char s[32];
        int n = snprintf(s, sizeof s, "rec%d", i);
        ost_value o = ost_instance_new(ost_incref(cls));
        check(o, "instances");
        check_rc(ost_instance_setattr(o, "id", ost_int(i)), "setattr");
        check_rc(ost_instance_setattr(o, "name", ost_str(s, (size_t)n)), "setattr");
        check_rc(ost_instance_setattr(o, "score", ost_float(i * 0.5)), "setattr");
        check_rc(ost_instance_setattr(o, "prev", ost_incref(prev)), "setattr");
        check_rc(ost_list_append(l, o), "append");
        prev = o; /* borrowed: the list holds it */
    }
    ost_decref(cls);
    return l;
}

/* (vii) one 64 MiB bytes object, bytes(range(256)) repeated. */
static ost_value build_blob(void) {
    unsigned char *p = malloc(BLOB_SIZE);
    if (!p) {
        fprintf(stderr, "bench_pickle: blob: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < BLOB_SIZE; i++) p[i] = (unsigned char)i;
    ost_value v = ost_bytes(p, BLOB_SIZE);
    free(p);
    check(v, "blob");
    return v;
}

typedef struct {
    const char *name;
    ost_value (*build)(void);
    int msgpack; /* also packed with msgpack-c */
} bench_case;

static const bench_case cases[] = {
    {"dicts", build_dicts, 1},         {"ints_same", build_ints_same, 0},
    {"floats_same", build_floats_same, 0}, {"range", build_range, 1},
    {"strs", build_strs, 1},           {"instances", build_instances, 0},
    {"blob", build_blob, 0},
};

/* ---- msgpack-c ------------------------------------------------------------ */

#ifdef OST_BENCH_MSGPACK
/* Packs the ostore value v (only the types the msgpack cases hold) through
 * the public ostore API, as an application would. */
static void mp_pack(msgpack_packer *pk, ost_value v) {
    switch (ost_typeof(v)) {
    case OST_T_NONE: msgpack_pack_nil(pk); break;
    case OST_T_BOOL:
        if (v == OST_TRUE) msgpack_pack_true(pk);
        else msgpack_pack_false(pk);
        break;
    case OST_T_INT: {
        int64_t i = 0;
        ost_int_value(v, &i);
        msgpack_pack_int64(pk, i);
        break;
    }
    case OST_T_FLOAT: msgpack_pack_double(pk, ost_float_value(v)); break;
    case OST_T_STR: {
        size_t n;
        const char *s = ost_data(v, &n);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
        break;
    }
    case OST_T_BYTES: {
        size_t n;
        const char *s = ost_data(v, &n);
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, s, n);
        break;
    }
    case OST_T_LIST:
    case OST_T_TUPLE: {
        size_t n = ost_len(v);
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++) mp_pack(pk, ost_item(v, i));
        break;
    }
    case OST_T_DICT: {
        size_t pos = 0;
        ost_value k, x;
        msgpack_pack_map(pk, ost_len(v));
        while (ost_dict_next(v, &pos, &k, &x)) {
            mp_pack(pk, k);
            mp_pack(pk, x);
        }
        break;
    }
    default:
        fprintf(stderr, "bench_pickle: msgpack: unexpected %s\n",
                ost_type_name(ost_typeof(v)));
        exit(1);
    }
}

static void bench_msgpack(ost_value v, int reps) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    uint64_t *tp = calloc((size_t)reps, sizeof *tp), *tu = calloc((size_t)reps, sizeof *tu),
             *tf = calloc((size_t)reps, sizeof *tf);
    if (!tp || !tu || !tf) exit(1);
    for (int r = 0; r < reps; r++) { /* the buffer is reused, as the writer's */
        msgpack_sbuffer_clear(&sb);
        uint64_t t0 = now_ns();
        mp_pack(&pk, v);
        tp[r] = now_ns() - t0;
    }
    for (int r = 0; r < reps; r++) {
        msgpack_unpacked u;
        size_t off = 0;
        msgpack_unpacked_init(&u);
        uint64_t t0 = now_ns();
        msgpack_unpack_return rc = msgpack_unpack_next(&u, sb.data, sb.size, &off);
        uint64_t t1 = now_ns();
        msgpack_unpacked_destroy(&u);
        uint64_t t2 = now_ns();
        if (rc != MSGPACK_UNPACK_SUCCESS || off != sb.size) {
            fprintf(stderr, "bench_pickle: msgpack unpack failed (%d)\n", (int)rc);
            exit(1);
        }
        tu[r] = t1 - t0;
        tf[r] = t2 - t1;
    }
    printf(",\"mp_bytes\":%zu", sb.size);
    print_times("mp_pack_ns", tp, reps);
    print_times("mp_unpack_ns", tu, reps);
    print_times("mp_free_ns", tf, reps);
    msgpack_sbuffer_destroy(&sb);
    free(tp);
    free(tu);
    free(tf);
}
#endif

/* ---- one case --------------------------------------------------------------- */

static void run_case(const bench_case *c, ost_writer *w, ost_reader *r, int reps,
                     const char *outdir, bool first) {
    uint64_t live0 = live_objects();
    uint64_t t0 = now_ns();
    ost_value v = c->build();
    uint64_t build_ns = now_ns() - t0;
    uint64_t nobj = live_objects() - live0;
    int n = reps;
    uint64_t *td = calloc((size_t)n, sizeof *td), *tl = calloc((size_t)n, sizeof *tl),
             *tf = calloc((size_t)n, sizeof *tf);
    if (!td || !tl || !tf) exit(1);

    /* dumps: one warm-up, then n timed */
    const void *data;
    size_t len = 0;
    check_rc(ost_dump(w, v, &data, &len), "ost_dump");
    for (int i = 0; i < n; i++) {
        uint64_t a = now_ns();
        int rc = ost_dump(w, v, &data, &len);
        td[i] = now_ns() - a;
        if (rc) die("ost_dump", rc, ost_writer_errmsg(w));
    }
    ost_dump_stats ds;
    ost_writer_stats(w, &ds);
    unsigned char *pk = malloc(len);
    if (!pk) exit(1);
    memcpy(pk, data, len);
    if (outdir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.pickle", outdir, c->name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(pk, 1, len, f) != len || fclose(f)) {
            fprintf(stderr, "bench_pickle: cannot write %s: %s\n", path, strerror(errno));
            exit(1);
        }
    }

    /* loads: ost_load, then freeing the result, timed apart */
    ost_value out;
    size_t used;
    /* the input is lent (ost_load_lent): pk outlives every value loaded,
     * so a large bytes value may point into it instead of copying it */
    check_rc(ost_load_lent(r, pk, len, NULL, NULL, &out, &used), "ost_load_lent");
    ost_decref(out);
    for (int i = 0; i < n; i++) {
        uint64_t a = now_ns();
        int rc = ost_load_lent(r, pk, len, NULL, NULL, &out, &used);
        uint64_t b = now_ns();
        if (rc) die("ost_load", rc, ost_reader_errmsg(r));
        if (i == 0 && (used != len || !ost_same_graph(out, v))) {
            fprintf(stderr, "bench_pickle: %s: loaded value differs from the dumped one\n",
                    c->name);
            exit(1);
        }
        ost_decref(out);
        tl[i] = b - a;
        tf[i] = now_ns() - b;
    }

    printf("%s{\"case\":\"%s\",\"bytes\":%zu,\"objects\":%llu,\"memo_hits\":%llu,"
           "\"heap_objects\":%llu,\"build_ns\":%llu",
           first ? "" : ",\n", c->name, len, (unsigned long long)ds.objects,
           (unsigned long long)ds.memo_hits, (unsigned long long)nobj,
           (unsigned long long)build_ns);
    print_times("dump_ns", td, n);
    print_times("load_ns", tl, n);
    print_times("free_ns", tf, n);
#ifdef OST_BENCH_MSGPACK
    if (c->msgpack) bench_msgpack(v, n);
#endif
    printf("}");
    fflush(stdout);

    ost_decref(v);
    free(pk);
    free(td);
    free(tl);
    free(tf);
}

/* Building and freeing a graph of about a million heap objects: 250,000
 * records {'id': i, 'name': 'user%d' % i, 'score': i * 1.5, 'tags': [i]},
 * four heap objects each (dict, str, float, list), in one list. */
static void run_graph(int reps, bool first) {
    printf("%s{\"case\":\"graph\"", first ? "" : ",\n");
    uint64_t *tb = calloc((size_t)reps, sizeof *tb), *tf = calloc((size_t)reps, sizeof *tf);
    if (!tb || !tf) exit(1);
    uint64_t nobj = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t live0 = live_objects();
        uint64_t t0 = now_ns();
        ost_value k_id = ost_str_c("id"), k_name = ost_str_c("name"),
                  k_score = ost_str_c("score"), k_tags = ost_str_c("tags");
        ost_value l = ost_list_new(0);
        check(l, "graph");
        for (int i = 0; i < 250000; i++) {
            char name[32];
            int n = snprintf(name, sizeof name, "user%d", i);
            ost_value d = ost_dict_new(), tags = ost_list_new(0);
            check(d, "graph");
            check(tags, "graph");
            check_rc(ost_list_append(tags, ost_int(i)), "append");
            check_rc(ost_dict_set(d, ost_incref(k_id), ost_int(i)), "dict set");
            check_rc(ost_dict_set(d, ost_incref(k_name), ost_str(name, (size_t)n)), "dict set");
            check_rc(ost_dict_set(d, ost_incref(k_score), ost_float(i * 1.5)), "dict set");
            check_rc(ost_dict_set(d, ost_incref(k_tags), tags), "dict set");
            check_rc(ost_list_append(l, d), "append");
        }
        ost_decref(k_id);
        ost_decref(k_name);
        ost_decref(k_score);
        ost_decref(k_tags);
        uint64_t t1 = now_ns();
        nobj = live_objects() - live0;
        ost_decref(l);
        uint64_t t2 = now_ns();
        tb[r] = t1 - t0;
        tf[r] = t2 - t1;
    }
    printf(",\"heap_objects\":%llu", (unsigned long long)nobj);
    print_times("build_ns", tb, reps);
    print_times("free_ns", tf, reps);
    printf("}");
    free(tb);
    free(tf);
}

int main(int argc, char **argv) {
    int reps = 7;
    const char *outdir = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) outdir = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps N] [--out DIR] [--only CASE]\n"
                            "Prints JSON; run bench/bench_pickle.py for the report.\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    ost_writer *w = ost_writer_new();
    ost_reader *r = ost_reader_new();
    if (!w || !r) {
        fprintf(stderr, "bench_pickle: out of memory\n");
        return 1;
    }
    printf("{\"ostore\":\"%s\",\"protocol\":%d,\"msgpack\":", ost_version_string(),
           OST_PICKLE_DEFAULT_PROTOCOL);
#ifdef OST_BENCH_MSGPACK
    printf("\"%s\"", msgpack_version());
#else
    printf("null");
#endif
    printf(",\"reps\":%d,\"cases\":[\n", reps);
    bool first = true;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && strcmp(only, cases[i].name)) continue;
        run_case(&cases[i], w, r, reps, outdir, first);
        first = false;
    }
    if (!only || !strcmp(only, "graph")) run_graph(reps, first);
    printf("]}\n");
    ost_writer_free(w);
    ost_reader_free(r);
    return 0;
}
