/* Test knobs: the one entry through which tests and benchmarks steer the
 * library or watch it from inside (issue 32), as SQLite's
 * sqlite3_test_control(op, ...). Internal: not part of the API, never
 * installed; programs of this tree reach it by linking the static library.
 *
 * Caveats:
 * - Compiled in only when meson's option test_knobs is on, which defines
 *   OST_TEST_KNOBS for the whole project (meson_options.txt). Its default,
 *   'auto', turns it on for the build types the tests run in (debug and
 *   debugoptimized: scripts/test.sh, .ci/run, scripts/tsan.sh,
 *   tests/fuzz/run_fuzz.sh) and off for release, minsize and plain.
 *   Without it, store/testctl.c is not built: each setting is a
 *   compile-time constant at its default, counters and hooks compile to
 *   nothing, and ost__testctl below is an inline stub that returns
 *   OST_EUNSUPPORTED, so that tests and benchmarks still build and skip
 *   (or do without) what needs a knob. With the knobs at their defaults
 *   the library behaves the same either way.
 * - Threads: settings are plain ints the library reads without a lock:
 *   set them while no thread of the library may read them (before the
 *   store opens, or between operations). Counters are atomic (relaxed):
 *   read them any time; the difference of two reads counts what happened
 *   in between, when nothing else ran meanwhile. A hook is read at each
 *   place that may run it: set it before the call that should run it,
 *   clear it after.
 * - fork: the knobs are globals of the process: a child inherits them.
 *
 * The knobs, and who uses them:
 *
 * Settings (OST__TC_GET, OST__TC_SET; an int, at least its least value):
 * - PG_PAGE_ROWS (500, at least 1): rows the PostgreSQL engine fetches a
 *   round trip in scans, entry cursors and sweeps (store/pg/). Tests
 *   lower it so that paging shows with a few rows (tests/test_engine.c,
 *   tests/test_maps.c).
 * - PG_COPY_MIN (256, at least 0): new records from which a PostgreSQL
 *   package is written by COPY rather than INSERT (store/pg/commit.c).
 *   bench/bench_engines.c --no-copy puts it out of reach.
 * - PG_MENT_COPY_MIN (256, at least 0): map entries from which a loader's
 *   batch goes to PostgreSQL by COPY rather than a statement each
 *   (store/pg/write.c).
 * - LMDB_FLAT_SPOIL (-1, at least -1): >= 0 makes the next group commit's
 *   flat try on LMDB fail, as a write that failed, after the writes of
 *   package LMDB_FLAT_SPOIL (or the next that writes); the engine then
 *   sets it back to -1 (one shot) and applies the group again, each
 *   package nested (store/lmdb/engine.c, flat_group; tests/test_batch.c).
 *
 * Counters (OST__TC_GET only; they count from 0 at the start of the
 * process, and only while the knobs are compiled in):
 * - PG_TRIPS: round trips to the server that the PostgreSQL engine's
 *   sessions waited for (statements, PREPAREs, pipelines, a parallel
 *   get_many counting once). Tests check that a walk costs a trip per
 *   page, not per entry (tests/test_maps.c); bench/bench_pg.c prints them.
 * - PG_ADOPTED, PG_IMPORTED: views (snapshots) a PostgreSQL commit handed
 *   to the next transaction and that it adopted, and views imported by a
 *   session of their own (tests/test_engine.c).
 * - PG_PAR_GIVEN, PG_PAR_REDONE: records a parallel get_many's helper
 *   connections gave, and records read again on the session's own
 *   connection (newer than its snapshot, not found, or a helper failed)
 *   (tests/test_store.c).
 * - LMDB_FLAT_REDOS: LMDB groups applied again, nested, after their flat
 *   try failed (tests/test_batch.c).
 *
 * Hooks (one op each; NULL, the default, runs nothing; pass NULL as the
 * hook's type, e.g. (ost__tc_fn)0):
 * - OST__TC_MID_WRITE, ost__tc_fn: an engine calls it while it writes a
 *   bulk write, after the rows are written and before they are committed:
 *   LMDB once a package of more than one record has its records in the
 *   write transaction, PostgreSQL once a COPY's rows went out, before the
 *   COPY's end. tests/test_batch.c stops the process there.
 * - OST__TC_LMDB_OPENED, ost__tc_fn: an LMDB open calls it between
 *   mdb_env_open and its first transaction, where tests/test_store.c
 *   grows the map from another process.
 * - OST__TC_PACK_STEP, ost__tc_pack_fn: pack calls it after its mark and
 *   before each round of catching up with the commits made since (step
 *   0, 1, ...), with no snapshot open (store/pack.c; tests/test_store.c,
 *   tests/test_engine.c commit there). */
#ifndef OST_STORE_TESTCTL_H
#define OST_STORE_TESTCTL_H

#include <stdint.h>

#include "ostore/common.h"
#include "ostore/store.h"

/* Settings: X(NAME, field, default, least). */
#define OST__TC_SETTINGS(X)                                                 \
    X(PG_PAGE_ROWS, pg_page_rows, 500, 1)                                   \
    X(PG_COPY_MIN, pg_copy_min, 256, 0)                                     \
    X(PG_MENT_COPY_MIN, pg_ment_copy_min, 256, 0)                           \
    X(LMDB_FLAT_SPOIL, lmdb_flat_spoil, -1, -1)

/* Counters: X(NAME, field). */
#define OST__TC_COUNTERS(X)                                                 \
    X(PG_TRIPS, pg_trips)                                                   \
    X(PG_ADOPTED, pg_adopted)                                               \
    X(PG_IMPORTED, pg_imported)                                             \
    X(PG_PAR_GIVEN, pg_par_given)                                           \
    X(PG_PAR_REDONE, pg_par_redone)                                         \
    X(LMDB_FLAT_REDOS, lmdb_flat_redos)

/* The numeric knobs, settings then counters: OST__K_PG_PAGE_ROWS, ... */
typedef enum {
#define OST__TC_X(K, ...) OST__K_##K,
    OST__TC_SETTINGS(OST__TC_X) OST__TC_COUNTERS(OST__TC_X)
#undef OST__TC_X
    OST__K_COUNT
} ost__knob;

/* Each setting's default: OST__TC_DEF_pg_page_rows, ... */
enum {
#define OST__TC_X(K, f, d, least) OST__TC_DEF_##f = (d),
    OST__TC_SETTINGS(OST__TC_X)
#undef OST__TC_X
};

typedef void (*ost__tc_fn)(void);
typedef void (*ost__tc_pack_fn)(ost_store *st, int step);

/* The operations of ost__testctl, with the arguments each takes after op. */
typedef enum {
    OST__TC_GET = 1,     /* (ost__knob k, int64_t *out): a setting's value or
                          * a counter's count into *out */
    OST__TC_SET,         /* (ost__knob k, int64_t v): a setting to v
                          * (counters cannot be set) */
    OST__TC_MID_WRITE,   /* (ost__tc_fn fn) */
    OST__TC_LMDB_OPENED, /* (ost__tc_fn fn) */
    OST__TC_PACK_STEP,   /* (ost__tc_pack_fn fn) */
} ost__tc_op;

#ifdef OST_TEST_KNOBS

/* The one entry (store/testctl.c): op and its arguments, as the list
 * above says, of exactly those types (use ost__knob_get and ost__knob_set
 * for the numeric knobs: they take the int64_t). Returns 0; OST_EINVAL
 * for an unknown op or knob, a NULL out, a value below a setting's least
 * or above INT_MAX, or a SET of a counter (nothing changed then). */
int ost__testctl(int op, ...);

/* The knobs' storage: the library reads them through the macros below. */
typedef struct {
#define OST__TC_X(K, f, d, least) int f;
    OST__TC_SETTINGS(OST__TC_X)
#undef OST__TC_X
#define OST__TC_X(K, f) uint64_t f;
    OST__TC_COUNTERS(OST__TC_X)
#undef OST__TC_X
    ost__tc_fn mid_write, lmdb_opened;
    ost__tc_pack_fn pack_step;
} ost__tc_state;
extern ost__tc_state ost__tc;

/* A setting's value (an int). */
#define OST__KNOB(f) (ost__tc.f)
/* A setting back to its default (a one-shot setting that fired). */
#define OST__KNOB_RESET(f) ((void)(ost__tc.f = OST__TC_DEF_##f))
/* Adds n to a counter. */
#define OST__COUNT(f, n) ((void)__atomic_fetch_add(&ost__tc.f, (uint64_t)(n), __ATOMIC_RELAXED))
/* Calls hook f with args (parenthesised) when it is set. */
#define OST__HOOK(f, args) (ost__tc.f ? ost__tc.f args : (void)0)

#else /* no knobs: constants, and nothing to count or call */

static inline int ost__testctl(int op, ...) {
    (void)op;
    return OST_EUNSUPPORTED;
}
#define OST__KNOB(f) ((int)OST__TC_DEF_##f)
#define OST__KNOB_RESET(f) ((void)0)
#define OST__COUNT(f, n) ((void)(n))
#define OST__HOOK(f, args) ((void)0)

#endif

/* Typed calls of ost__testctl for the numeric knobs: 0, OST_EINVAL, or
 * OST_EUNSUPPORTED in a build without the knobs (*out untouched then). */
static inline int ost__knob_get(ost__knob k, int64_t *out) {
    return ost__testctl(OST__TC_GET, k, out);
}
static inline int ost__knob_set(ost__knob k, int64_t v) {
    return ost__testctl(OST__TC_SET, k, v);
}

#endif
