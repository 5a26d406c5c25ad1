/* The maps benchmark, C side: one command per measurement, each printing
 * one JSON object on stdout. bench/bench_maps.py runs them and prints the
 * report; run this directly only to look at one figure.
 *
 *   bench_maps load DIR N KEYS BATCH MAPSIZE READS ROUNDS
 *       N entries into one new map through the bulk loader
 *       (ost_loader_map_set, batch_objects = BATCH, durable commits), the
 *       store opened with map_size MAPSIZE (0: the library's default, which
 *       grows by doubling). KEYS is asc (int keys 0..N-1 ascending), rand
 *       (the same keys in a seeded shuffle) or str (random 16-character
 *       ASCII str keys). The value of the i-th entry added is the int i.
 *       With READS > 0, afterwards: ROUNDS full scans with a map cursor and
 *       with a raw LMDB cursor over the same entries, and ROUNDS times READS
 *       random point lookups (ost_map_get) and raw mdb_get of the same keys.
 *   bench_maps raw DIR N KEYS BATCH APPEND OID
 *       the physical reference: the same keys as LMDB keys (8-byte
 *       big-endian OID + the same encoded key as ostore's: int 8 bytes
 *       big-endian with the sign bit flipped, str its 16 bytes), 8-byte
 *       values (i, little-endian), in batches of BATCH: each batch sorted,
 *       then put in one write transaction (APPEND 1: with MDB_APPEND) and
 *       committed durably (mdb_txn_commit with LMDB's default sync).
 *   bench_maps group DIR T SECS GC
 *       T threads, each with its own connection, each doing one-key
 *       durable transactions into one map (each commit sets one new
 *       distinct key) for SECS seconds, with group_commit (GC 1) or
 *       without (GC 0).
 *
 * DIR must not exist; the command creates it and leaves it for the caller
 * to delete. Every store is opened with OST_SYNC_FULL. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_maps"
#include "benchlib.h"
#include "ostore.h"
#include "../store/lmdb/engine.h"
#include "../store/store_internal.h"


#define MILLION 1000000
#define SEED 0x5EEDB0A7C0FFEEULL


static double cpu_clock(clockid_t id) { return clock_seconds(id); }

/* ---- the process: disk writes, file sizes, resident memory --------------- */



/* RssAnon and RssFile of /proc/self/status, in bytes. */
typedef struct {
    uint64_t anon, file;
} rss;

static rss rss_now(void) {
    rss r = {0, 0};
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return r;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "RssAnon:", 8) == 0) r.anon = strtoull(line + 8, NULL, 10) * 1024;
        else if (strncmp(line, "RssFile:", 8) == 0) r.file = strtoull(line + 8, NULL, 10) * 1024;
    }
    fclose(f);
    return r;
}

/* ---- keys ------------------------------------------------------------------- */

typedef enum { K_ASC, K_RAND, K_STR } kmode;

static kmode kmode_of(const char *s) {
    if (strcmp(s, "asc") == 0) return K_ASC;
    if (strcmp(s, "rand") == 0) return K_RAND;
    if (strcmp(s, "str") == 0) return K_STR;
    DIE("keys must be asc, rand or str, not %s", s);
}

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t rng_state = SEED;
static uint64_t rng(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* The keys of a run: the i-th key added (0 <= i < n). */
typedef struct {
    kmode mode;
    uint64_t n;
    int64_t *perm; /* K_RAND: a seeded Fisher-Yates shuffle of 0..n-1 */
} keyset;

static void keys_init(keyset *ks, kmode mode, uint64_t n) {
    ks->mode = mode;
    ks->n = n;
    ks->perm = NULL;
    if (mode != K_RAND) return;
    ks->perm = malloc(n * sizeof *ks->perm);
    if (!ks->perm) DIE("out of memory");
    for (uint64_t i = 0; i < n; i++) ks->perm[i] = (int64_t)i;
    uint64_t s = rng_state;
    rng_state = SEED ^ 0xA5A5A5A5ULL;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = rng() % (i + 1);
        int64_t t = ks->perm[i];
        ks->perm[i] = ks->perm[j];
        ks->perm[j] = t;
    }
    rng_state = s;
}

static void keys_free(keyset *ks) { free(ks->perm); }

static inline int64_t key_int(const keyset *ks, uint64_t i) {
    return ks->mode == K_RAND ? ks->perm[i] : (int64_t)i;
}

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The i-th str key: 16 characters of a 64-letter alphabet (96 random bits,
 * so 10 million keys are distinct but for a chance of about 10^-15). */
static inline void key_str(uint64_t i, char out[16]) {
    uint64_t a = splitmix(SEED ^ i), b = splitmix(SEED ^ i ^ 0x8000000000000000ULL);
    for (int j = 0; j < 10; j++, a >>= 6) out[j] = ALPHABET[a & 63];
    for (int j = 10; j < 16; j++, b >>= 6) out[j] = ALPHABET[b & 63];
}

/* The i-th key as ostore encodes it after the map oid (store/maps.c),
 * with the 8-byte big-endian oid in front: the LMDB key of the entry. */
static inline size_t key_raw(const keyset *ks, uint64_t i, uint64_t oid, uint8_t *out) {
    ost__be64(out, oid);
    if (ks->mode == K_STR) {
        key_str(i, (char *)out + 8);
        return 24;
    }
    ost__be64(out + 8, (uint64_t)key_int(ks, i) ^ ((uint64_t)1 << 63));
    return 16;
}

/* The i-th key as a value (a new reference). */
static inline ost_value key_val(const keyset *ks, uint64_t i) {
    if (ks->mode == K_STR) {
        char s[16];
        key_str(i, s);
        return ost_str(s, 16);
    }
    return ost_int(key_int(ks, i));
}

/* ---- stores ------------------------------------------------------------------ */

static ost_store *open_store(const char *dir, bool group_commit, size_t map_size) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.group_commit = group_commit;
    o.durability = OST_SYNC_FULL;
    if (map_size) o.map_size = map_size;
    ost_store *st = ost_store_new();
    if (!st) DIE("out of memory");
    int rc = ost_store_open(st, dir, &o);
    if (rc) DIE("open %s: %s", dir, ost_store_errmsg(st));
    return st;
}

static ost_conn *conn_of(ost_store *st) {
    ost_conn *c;
    CHECK(ost_conn_open(st, &c), "conn_open");
    return c;
}

/* A new map of kind under root['map'], committed; returns it (borrowed). */
static ost_value new_map(ost_conn *c, const char *kind) {
    ost_value m;
    CHECK(ost_map_new(c, kind, &m), "map_new");
    CHECK(ost_root_set(c, ost_str_c("map"), ost_incref(m)), "root_set");
    int rc = ost_commit(c);
    if (rc) DIE("commit: %s", ost_conn_errmsg(c));
    return m;
}

static void print_list(const char *key, const double *x, size_t n, const char *fmt) {
    printf("\"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        printf("%s", i ? ", " : "");
        printf(fmt, x[i]);
    }
    printf("]");
}

/* Rates per million from the times at which 0, 1, 2, ... million entries
 * were done (marks[0] is the start); the last interval may be shorter. */
static void print_rates(const char *key, const double *marks, size_t nmarks, uint64_t n) {
    double *r = calloc(nmarks, sizeof *r);
    for (size_t i = 1; i < nmarks; i++) {
        uint64_t cnt = i * (uint64_t)MILLION <= n ? MILLION : n - (i - 1) * (uint64_t)MILLION;
        r[i - 1] = (double)cnt / (marks[i] - marks[i - 1]);
    }
    print_list(key, r, nmarks - 1, "%.0f");
    free(r);
}

/* ======================================================================= */
/* The monitor: when each batch became durable, and the memory then         */
/* ======================================================================= */

/* The committer thread counts the groups it committed (st->gc_groups): a
 * loader batch is one group, and the count moves after the group's
 * durable commit. A thread polls it every 0.5 ms and notes the time and
 * the process's resident memory at each change, so the per-million rates
 * are rates of durable entries, not of entries handed to the loader. */
typedef struct {
    double t;
    uint64_t groups;
    rss mem;
} sample;

static struct {
    ost_store *st;
    atomic_bool stop;
    sample *s;
    size_t n, cap;
    uv_thread_t th;
} mon;

static void mon_main(void *arg) {
    (void)arg;
    uint64_t last = __atomic_load_n(&mon.st->gc_groups, __ATOMIC_RELAXED);
    while (!atomic_load(&mon.stop)) {
        usleep(500);
        uint64_t g = __atomic_load_n(&mon.st->gc_groups, __ATOMIC_RELAXED);
        if (g == last) continue;
        last = g;
        if (mon.n == mon.cap) {
            mon.cap = mon.cap ? mon.cap * 2 : 256;
            mon.s = realloc(mon.s, mon.cap * sizeof *mon.s);
            if (!mon.s) DIE("out of memory");
        }
        double t = now();
        mon.s[mon.n++] = (sample){t, g, rss_now()};
    }
}

static uint64_t mon_start(ost_store *st) {
    mon.st = st;
    mon.n = 0;
    atomic_store(&mon.stop, false);
    uint64_t g0 = __atomic_load_n(&st->gc_groups, __ATOMIC_RELAXED);
    if (uv_thread_create(&mon.th, mon_main, NULL)) DIE("thread");
    return g0;
}

static void mon_stop(void) {
    atomic_store(&mon.stop, true);
    uv_thread_join(&mon.th);
}

/* ======================================================================= */
/* load: the bulk loader, then scans and lookups                           */
/* ======================================================================= */

enum { READ_TXN = 1000 };

/* The timed loops, functions of their own for profilers. */
static __attribute__((noinline)) uint64_t scan_map(ost_conn *c, ost_value m, uint64_t *count,
                                                    rss *peak) {
    ost_map_cursor *cur;
    CHECK(ost_map_cursor_open(c, m, NULL, &cur), "cursor_open");
    uint64_t sum = 0, cnt = 0;
    ost_value k, v;
    int rc;
    while ((rc = ost_map_cursor_next(cur, &k, &v)) == 0) {
        sum += (uint64_t)ost__small_val(v) + (k & 0xff);
        if (++cnt % MILLION == 0 && peak) {
            rss r = rss_now();
            if (r.anon > peak->anon) peak->anon = r.anon;
            if (r.file > peak->file) peak->file = r.file;
        }
    }
    if (rc != OST_ENOTFOUND) DIE("cursor_next: %s", ost_conn_errmsg(c));
    ost_map_cursor_close(cur);
    ost_abort(c);
    *count = cnt;
    return sum;
}

static __attribute__((noinline)) uint64_t scan_raw(ost_store *st, uint64_t oid, uint64_t *count) {
    MDB_txn *t;
    MDB_cursor *cur;
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t) || mdb_cursor_open(t, st->eng->ments, &cur))
        DIE("raw scan");
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    uint64_t sum = 0, cnt = 0;
    int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size >= 8 && ost__rd_be64(k.mv_data) == oid) {
        sum += ((const uint8_t *)v.mv_data)[v.mv_size - 2] + ((const uint8_t *)k.mv_data)[k.mv_size - 1];
        cnt++;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(t);
    *count = cnt;
    return sum;
}

static __attribute__((noinline)) uint64_t get_map(ost_conn *c, ost_value m, const ost_value *keys,
                                                   const uint64_t *want, uint64_t r) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < r; i++) {
        ost_value v;
        int rc = ost_map_get(c, m, keys[i], &v);
        if (rc) DIE("map_get: %s", ost_conn_errmsg(c));
        if ((uint64_t)ost__small_val(v) != want[i]) DIE("map_get: wrong value");
        sum += (uint64_t)ost__small_val(v);
        if ((i + 1) % READ_TXN == 0) ost_abort(c);
    }
    ost_abort(c);
    return sum;
}

static __attribute__((noinline)) uint64_t get_raw(ost_store *st, const uint8_t *keys, size_t kl,
                                                   uint64_t r) {
    MDB_txn *t;
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t)) DIE("raw txn");
    uint64_t sum = 0;
    for (uint64_t i = 0; i < r; i++) {
        MDB_val k = {kl, (void *)(keys + i * kl)}, v;
        if (mdb_get(t, st->eng->ments, &k, &v)) DIE("raw get");
        sum += ((const uint8_t *)v.mv_data)[v.mv_size - 2];
        if ((i + 1) % READ_TXN == 0) {
            mdb_txn_reset(t);
            if (mdb_txn_renew(t)) DIE("renew");
        }
    }
    mdb_txn_abort(t);
    return sum;
}

/* The bytes of the map's entries as stored: keys (with the map oid) and
 * values (serial + pickle). */
static void entry_bytes(ost_store *st, uint64_t oid, uint64_t *kbytes, uint64_t *vbytes) {
    MDB_txn *t;
    MDB_cursor *cur;
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t) || mdb_cursor_open(t, st->eng->ments, &cur))
        DIE("entry bytes");
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    *kbytes = *vbytes = 0;
    int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size >= 8 && ost__rd_be64(k.mv_data) == oid) {
        *kbytes += k.mv_size;
        *vbytes += v.mv_size;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(t);
}

static void mapents_stat(ost_store *st, MDB_stat *ms) {
    MDB_txn *t;
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t) || mdb_stat(t, st->eng->ments, ms)) DIE("stat");
    mdb_txn_abort(t);
}

static void reads(ost_store *st, ost_conn *c, ost_value m, uint64_t oid, const keyset *ks,
                  uint64_t r, int rounds) {
    /* warm: every entry once through LMDB, so both sides find the pages mapped */
    uint64_t cnt, sum = 0;
    sum += scan_raw(st, oid, &cnt);
    if (cnt != ks->n) DIE("raw scan: %" PRIu64 " entries, expected %" PRIu64, cnt, ks->n);

    double *scan_o = calloc((size_t)rounds, sizeof(double));
    double *scan_r = calloc((size_t)rounds, sizeof(double));
    double *get_o = calloc((size_t)rounds, sizeof(double));
    double *get_r = calloc((size_t)rounds, sizeof(double));
    rss before = rss_now(), peak = before;
    for (int i = 0; i < rounds; i++) {
        double t0 = now();
        sum += scan_map(c, m, &cnt, i == 0 ? &peak : NULL);
        scan_o[i] = now() - t0;
        if (cnt != ks->n) DIE("map scan: %" PRIu64 " entries, expected %" PRIu64, cnt, ks->n);
        t0 = now();
        sum += scan_raw(st, oid, &cnt);
        scan_r[i] = now() - t0;
    }
    rss after = rss_now();

    /* random lookups: the same keys for both, built beforehand */
    size_t kl = ks->mode == K_STR ? 24 : 16;
    ost_value *kv = malloc(r * sizeof *kv);
    uint64_t *want = malloc(r * sizeof *want);
    uint8_t *kr = malloc(r * kl);
    rng_state = SEED ^ 0x1234567ULL;
    for (uint64_t i = 0; i < r; i++) {
        uint64_t idx = rng() % ks->n;
        kv[i] = key_val(ks, idx);
        want[i] = idx;
        key_raw(ks, idx, oid, kr + i * kl);
    }
    for (int i = 0; i < rounds; i++) {
        double t0 = now();
        sum += get_map(c, m, kv, want, r);
        get_o[i] = now() - t0;
        t0 = now();
        sum += get_raw(st, kr, kl, r);
        get_r[i] = now() - t0;
    }
    for (uint64_t i = 0; i < r; i++) ost_decref(kv[i]);
    free(kv);
    free(want);
    free(kr);
    printf(", \"reads\": %" PRIu64 ", \"rounds\": %d, ", r, rounds);
    print_list("scan_seconds", scan_o, (size_t)rounds, "%.4f");
    printf(", ");
    print_list("raw_scan_seconds", scan_r, (size_t)rounds, "%.4f");
    printf(", ");
    print_list("get_seconds", get_o, (size_t)rounds, "%.4f");
    printf(", ");
    print_list("raw_get_seconds", get_r, (size_t)rounds, "%.4f");
    printf(", \"scan_rss_before\": [%" PRIu64 ", %" PRIu64 "], \"scan_rss_peak\": [%" PRIu64
           ", %" PRIu64 "], \"scan_rss_after\": [%" PRIu64 ", %" PRIu64 "], \"read_checksum\": %" PRIu64,
           before.anon, before.file, peak.anon, peak.file, after.anon, after.file, sum);
    free(scan_o);
    free(scan_r);
    free(get_o);
    free(get_r);
}

/* The timed insert loop. */
static __attribute__((noinline)) void load_entries(ost_loader *l, ost_value m, const keyset *ks) {
    for (uint64_t i = 0; i < ks->n; i++) {
        int rc = ost_loader_map_set(l, m, key_val(ks, i), ost_int((int64_t)i));
        if (rc) DIE("loader_map_set %" PRIu64 ": %s", i, ost_loader_errmsg(l));
    }
}

static void cmd_load(const char *dir, uint64_t n, kmode mode, size_t batch, size_t map_size,
                     uint64_t r, int rounds) {
    ost_store *st = open_store(dir, false, map_size);
    ost_conn *c = conn_of(st);
    ost_value m = new_map(c, mode == K_STR ? "str" : "int");
    uint64_t oid = ost_oid(c, m);
    keyset ks;
    keys_init(&ks, mode, n);

    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = batch;
    uint64_t file0 = dir_file_size(dir, "data.mdb");
    rss mem0 = rss_now();
    uint64_t io0 = io_write_bytes();
    double t0 = now(), cpu0 = cpu_clock(CLOCK_THREAD_CPUTIME_ID),
           pcpu0 = cpu_clock(CLOCK_PROCESS_CPUTIME_ID);
    ost_loader *l;
    CHECK(ost_loader_open(c, &lo, &l), "loader_open");
    uint64_t g0 = mon_start(st);
    load_entries(l, m, &ks);
    int rc = ost_loader_close(l);
    if (rc) DIE("loader_close: %s", ost_conn_errmsg(c));
    double t1 = now(), cpu1 = cpu_clock(CLOCK_THREAD_CPUTIME_ID),
           pcpu1 = cpu_clock(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t io1 = io_write_bytes();
    usleep(2000);
    mon_stop();
    rss mem1 = rss_now();
    uint64_t file1 = dir_file_size(dir, "data.mdb");

    /* durable marks per million from the monitor's samples */
    size_t nm = (size_t)((n + MILLION - 1) / MILLION) + 1;
    double *marks = calloc(nm, sizeof *marks);
    double *anon = calloc(nm, sizeof *anon), *filer = calloc(nm, sizeof *filer);
    marks[0] = t0;
    anon[0] = (double)mem0.anon;
    filer[0] = (double)mem0.file;
    uint64_t peak_anon = mem0.anon, peak_file = mem0.file;
    size_t j = 0;
    for (size_t mi = 1; mi < nm; mi++) {
        uint64_t need = mi * (uint64_t)MILLION < n ? mi * (uint64_t)MILLION : n;
        while (j < mon.n && (mon.s[j].groups - g0) * batch < need) j++;
        if (j == mon.n) {
            /* the last batch's sample may be missing (a partial batch is
             * counted as a whole): the close's return is the mark */
            marks[mi] = t1;
            anon[mi] = (double)mem1.anon;
            filer[mi] = (double)mem1.file;
        } else {
            marks[mi] = mon.s[j].t;
            anon[mi] = (double)mon.s[j].mem.anon;
            filer[mi] = (double)mon.s[j].mem.file;
        }
    }
    for (size_t i = 0; i < mon.n; i++) {
        if (mon.s[i].mem.anon > peak_anon) peak_anon = mon.s[i].mem.anon;
        if (mon.s[i].mem.file > peak_file) peak_file = mon.s[i].mem.file;
    }
    marks[nm - 1] = t1; /* the last mark is the close's return */

    ost_abort(c);
    uint64_t count;
    CHECK(ost_map_len(c, m, &count), "map_len");
    if (count != n) DIE("the map holds %" PRIu64 " entries, expected %" PRIu64, count, n);
    MDB_stat ms;
    mapents_stat(st, &ms);
    uint64_t key_bytes, value_bytes;
    entry_bytes(st, oid, &key_bytes, &value_bytes);
    ost_store_stats s;
    CHECK(ost_store_stat(st, &s), "stat");

    printf("{\"entries\": %" PRIu64 ", \"keys\": \"%s\", \"batch\": %zu, \"map_oid\": %" PRIu64
           ", \"seconds\": %.4f, \"caller_cpu\": %.4f, \"process_cpu\": %.4f, ",
           n, mode == K_ASC ? "asc" : mode == K_RAND ? "rand" : "str", batch, oid, t1 - t0,
           cpu1 - cpu0, pcpu1 - pcpu0);
    print_rates("per_million", marks, nm, n);
    printf(", ");
    print_list("rss_anon", anon, nm, "%.0f");
    printf(", ");
    print_list("rss_file", filer, nm, "%.0f");
    printf(", \"rss_peak\": [%" PRIu64 ", %" PRIu64 "], \"batches_seen\": %zu, \"io_bytes\": %" PRIu64
           ", \"file_growth\": %" PRIu64 ", \"file_bytes\": %" PRIu64 ", \"key_bytes\": %" PRIu64 ", \"value_bytes\": %" PRIu64
           ", \"map_size\": %" PRIu64 ", \"map_size_option\": %zu, \"depth\": %u, \"branch_pages\": %zu"
           ", \"leaf_pages\": %zu, \"page_size\": %u",
           peak_anon, peak_file, mon.n, io1 - io0, file1 - file0, file1, key_bytes, value_bytes, s.map_size,
           map_size, ms.ms_depth, ms.ms_branch_pages, ms.ms_leaf_pages, ms.ms_psize);
    if (r) reads(st, c, m, oid, &ks, r, rounds);
    printf("}\n");
    ost_conn_close(c);
    ost_store_close(st);
    keys_free(&ks);
    free(marks);
    free(anon);
    free(filer);
    free(mon.s);
}

/* ======================================================================= */
/* raw: LMDB puts of the same keys                                          */
/* ======================================================================= */

static size_t g_reclen, g_keylen;

static int rec_cmp(const void *a, const void *b) { return memcmp(a, b, g_keylen); }

static void cmd_raw(const char *dir, uint64_t n, kmode mode, size_t batch, bool append,
                    uint64_t oid) {
    if (mkdir(dir, 0755)) DIE("mkdir %s: %s", dir, strerror(errno));
    MDB_env *env;
    MDB_dbi dbi;
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4) ||
        mdb_env_set_mapsize(env, (size_t)32 << 30) || mdb_env_open(env, dir, MDB_NOTLS, 0644))
        DIE("raw env %s", dir);
    {
        MDB_txn *t;
        if (mdb_txn_begin(env, NULL, 0, &t) || mdb_dbi_open(t, "mapents", MDB_CREATE, &dbi) ||
            mdb_txn_commit(t))
            DIE("raw dbi");
    }
    keyset ks;
    keys_init(&ks, mode, n);
    g_keylen = mode == K_STR ? 24 : 16;
    g_reclen = g_keylen + 8;
    uint8_t *recs = malloc(batch * g_reclen);
    if (!recs) DIE("out of memory");
    size_t nm = (size_t)((n + MILLION - 1) / MILLION) + 1;
    double *marks = calloc(nm, sizeof *marks);
    double put_time = 0, sort_time = 0, fill_time = 0;
    uint64_t done = 0, file0 = dir_file_size(dir, "data.mdb");
    rss mem0 = rss_now(), peak = mem0;
    uint64_t io0 = io_write_bytes();
    while (done < n) {
        size_t m = n - done < batch ? (size_t)(n - done) : batch;
        double a = now();
        for (size_t j = 0; j < m; j++) {
            uint8_t *p = recs + j * g_reclen;
            key_raw(&ks, done + j, oid, p);
            uint64_t v = done + j;
            memcpy(p + g_keylen, &v, 8); /* little-endian on this machine */
        }
        double b = now();
        if (!append) qsort(recs, m, g_reclen, rec_cmp);
        double c = now();
        MDB_txn *t;
        if (mdb_txn_begin(env, NULL, 0, &t)) DIE("raw txn");
        for (size_t j = 0; j < m; j++) {
            uint8_t *p = recs + j * g_reclen;
            MDB_val k = {g_keylen, p}, v = {8, p + g_keylen};
            int prc = mdb_put(t, dbi, &k, &v, append ? MDB_APPEND : 0);
            if (prc) DIE("raw put: %s", mdb_strerror(prc));
        }
        int crc = mdb_txn_commit(t);
        if (crc) DIE("raw commit: %s", mdb_strerror(crc));
        double d = now();
        fill_time += b - a;
        sort_time += c - b;
        put_time += d - c;
        uint64_t before = done;
        done += m;
        if (done / MILLION != before / MILLION || done == n)
            marks[(done + MILLION - 1) / MILLION] = put_time;
        rss r = rss_now();
        if (r.anon > peak.anon) peak.anon = r.anon;
        if (r.file > peak.file) peak.file = r.file;
    }
    uint64_t io1 = io_write_bytes();
    MDB_stat ms;
    {
        MDB_txn *t;
        if (mdb_txn_begin(env, NULL, MDB_RDONLY, &t) || mdb_stat(t, dbi, &ms)) DIE("raw stat");
        mdb_txn_abort(t);
    }
    mdb_env_close(env);
    uint64_t file1 = dir_file_size(dir, "data.mdb");
    if (ms.ms_entries != n) DIE("raw: %zu entries, expected %" PRIu64, ms.ms_entries, n);
    printf("{\"entries\": %" PRIu64 ", \"keys\": \"%s\", \"batch\": %zu, \"append\": %s, "
           "\"seconds\": %.4f, \"sort_seconds\": %.4f, \"fill_seconds\": %.4f, ",
           n, mode == K_ASC ? "asc" : mode == K_RAND ? "rand" : "str", batch,
           append ? "true" : "false", put_time, sort_time, fill_time);
    print_rates("per_million", marks, nm, n);
    printf(", \"io_bytes\": %" PRIu64 ", \"file_growth\": %" PRIu64 ", \"rss_start\": [%" PRIu64
           ", %" PRIu64 "], \"rss_peak\": [%" PRIu64 ", %" PRIu64 "], \"depth\": %u, "
           "\"leaf_pages\": %zu}\n",
           io1 - io0, file1 - file0, mem0.anon, mem0.file, peak.anon, peak.file, ms.ms_depth,
           ms.ms_leaf_pages);
    free(recs);
    free(marks);
    keys_free(&ks);
}

/* ======================================================================= */
/* group: one-key transactions from many threads                           */
/* ======================================================================= */

static atomic_bool g_stop;

typedef struct {
    ost_store *st;
    uint64_t oid;
    int id, nthreads;
    uv_barrier_t *start;
    uint64_t commits, conflicts;
    int err;
    char msg[512];
} gc_arg;

static void gc_thread(void *arg) {
    gc_arg *a = arg;
    ost_conn *c;
    ost_value m = 0;
    int rc = ost_conn_open(a->st, &c);
    if (!rc) rc = ost_conn_get(c, a->oid, &m);
    uint64_t len;
    if (!rc) rc = ost_map_len(c, m, &len); /* loads the map before the start */
    uv_barrier_wait(a->start);
    uint64_t i = 0;
    while (!rc && !atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        /* key i * T + id: distinct keys, the threads' side by side in one
         * region of the map (they share leaf pages, never a key) */
        int64_t key = (int64_t)(i * (uint64_t)a->nthreads + (uint64_t)a->id);
        rc = ost_map_set(c, m, ost_int(key), ost_int((int64_t)i));
        if (rc) break;
        rc = ost_commit(c);
        if (rc == OST_ECONFLICT) {
            a->conflicts++;
            ost_abort(c);
            rc = 0; /* the same key again */
            continue;
        }
        if (!rc) {
            a->commits++;
            i++;
        }
    }
    a->err = rc;
    if (rc) snprintf(a->msg, sizeof a->msg, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
}

static void cmd_group(const char *dir, int nthreads, double secs, bool gc) {
    ost_store *st = open_store(dir, gc, 0);
    ost_conn *c = conn_of(st);
    ost_value m = new_map(c, "int");
    uint64_t oid = ost_oid(c, m);
    ost_conn_close(c);
    uv_barrier_t start;
    uv_barrier_init(&start, (unsigned)nthreads + 1);
    atomic_store(&g_stop, false);
    gc_arg *args = calloc((size_t)nthreads, sizeof *args);
    uv_thread_t *th = calloc((size_t)nthreads, sizeof *th);
    for (int i = 0; i < nthreads; i++) {
        args[i] = (gc_arg){.st = st, .oid = oid, .id = i, .nthreads = nthreads, .start = &start};
        if (uv_thread_create(&th[i], gc_thread, &args[i])) DIE("thread");
    }
    uint64_t groups0 = st->gc_groups, io0 = io_write_bytes();
    uv_barrier_wait(&start);
    double t0 = now();
    while (now() - t0 < secs) usleep(10000);
    atomic_store(&g_stop, true);
    uint64_t commits = 0, conflicts = 0;
    for (int i = 0; i < nthreads; i++) {
        uv_thread_join(&th[i]);
        if (args[i].err)
            DIE("thread %d: %s: %s", i, ost_err_name(args[i].err), args[i].msg);
        commits += args[i].commits;
        conflicts += args[i].conflicts;
    }
    double t1 = now();
    uint64_t groups = st->gc_groups - groups0, io1 = io_write_bytes();
    uv_barrier_destroy(&start);
    /* every commit's key is there */
    c = conn_of(st);
    ost_value m2;
    uint64_t len;
    CHECK(ost_conn_get(c, oid, &m2), "conn_get");
    CHECK(ost_map_len(c, m2, &len), "map_len");
    if (len != commits) DIE("the map holds %" PRIu64 " entries, %" PRIu64 " commits", len, commits);
    ost_conn_close(c);
    ost_store_close(st);
    printf("{\"threads\": %d, \"group_commit\": %s, \"seconds\": %.4f, \"commits\": %" PRIu64
           ", \"conflicts\": %" PRIu64 ", \"groups\": %" PRIu64 ", \"io_bytes\": %" PRIu64 "}\n",
           nthreads, gc ? "true" : "false", t1 - t0, commits, conflicts, groups, io1 - io0);
    free(args);
    free(th);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_maps load|raw|group DIR N ... (see the top of bench_maps.c)\n");
        return 2;
    }
    const char *cmd = argv[1], *dir = argv[2];
    uint64_t n = strtoull(argv[3], NULL, 10);
    if (strcmp(cmd, "load") == 0 && argc == 9)
        cmd_load(dir, n, kmode_of(argv[4]), (size_t)strtoull(argv[5], NULL, 10),
                 (size_t)strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10), atoi(argv[8]));
    else if (strcmp(cmd, "raw") == 0 && argc == 8)
        cmd_raw(dir, n, kmode_of(argv[4]), (size_t)strtoull(argv[5], NULL, 10), atoi(argv[6]) != 0,
                strtoull(argv[7], NULL, 10));
    else if (strcmp(cmd, "group") == 0 && argc == 6)
        cmd_group(dir, (int)n, atof(argv[4]), atoi(argv[5]) != 0);
    else {
        fprintf(stderr, "bench_maps: bad command or arguments\n");
        return 2;
    }
    return 0;
}
