/* The PostgreSQL engine's own objects and functions, for store/pg/ only
 * (issue 13, part 2): the engine-independent part of store/ reaches the
 * engine through the table ost__pg_engine (store/engine.h, engine.c) and
 * never includes this header. Only the files of store/pg/ include
 * <libpq-fe.h>. docs/postgresql.md describes the schema and how commits,
 * serials and invalidations work; in short:
 *
 * - Tables: ost_meta (one row: format, next_oid, last_serial, low,
 *   next_class), ost_records (oid -> serial, class id, state pickle),
 *   ost_classes (id <-> module, name), ost_txlog (serial -> the oids of
 *   existing objects the commit changed, 8 bytes big-endian each, as
 *   LMDB's txlog), ost_ments (map, key -> serial, value). bytea compares
 *   bytewise, shorter first: entries.h's key order.
 * - A session is one PGconn, opened lazily and again after the server
 *   went away. A read snapshot is a REPEATABLE READ READ ONLY transaction;
 *   reads ask for binary results and keep each PGresult until the
 *   snapshot ends, since recviews point into them.
 * - A package commits in a READ COMMITTED transaction of its own: it locks
 *   the rows of the records it overwrites and of the maps it changes (in
 *   oid order, so two packages cannot deadlock on them), checks their
 *   serials, then locks the meta row, takes the next serial, writes and
 *   commits. The meta row lock is held from the serial's choice to the
 *   commit, so serials become visible in order: a snapshot that sees
 *   serial S sees every commit below it, and the commit log read between
 *   two snapshots is complete.
 *
 * The files, bottom up (a file calls only the ones above it in this list):
 *
 * - conn.c: the connection and statement layer: libpq's failures as
 *   OST_E* codes and messages, statements run and their results' shapes
 *   checked (run, run_as, run_ps, res_check), the prepared statements,
 *   pipelines, connections (the engine's, a session's, a session's
 *   prefetch helpers) with the exclusive lock, the results a snapshot
 *   keeps, and the count of round trips.
 * - schema.c: the tables: checked against the catalog, made, upgraded.
 * - snap.c: sessions, snapshots (one round trip each) and the views a
 *   commit leaves for the sessions of its group to adopt.
 * - read.c: reads of records (one, many at once, on several connections
 *   when large), the commit log and the class table.
 * - ids.c: class ids and oid blocks, on the engine's own connection.
 * - entries.c: map entries and the entry cursor.
 * - write.c: how a package's rows reach the server: array parameters,
 *   and binary COPY (new records, a loader's map entries).
 * - group.c: a group of plain packages in two round trips.
 * - commit.c: commits: apply, the group's transaction, ost__pg_commit.
 * - pack.c: what walks the whole store: sweep, scan, the raw snapshot's
 *   counters and verify.
 * - import.c: bulk import by COPY, and drop.
 * - open.c: addresses, open, close, stat.
 * - engine.c: the table of operations.
 *
 * Threads: an ost__sess is used by one thread at a time (engine.h); the
 * engine's connection (e->conn) is used under e->lock, the views under
 * e->vlock. Errors: every function returning int returns 0 or a negative
 * OST_E* code with the store's message set (ost__st_fail), unless its
 * comment says otherwise. */
#ifndef OST_STORE_PG_PG_H
#define OST_STORE_PG_PG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "../../base/endian.h"
#include "../../base/sort.h"
#include "../../serializer/internal.h"
#include "../engine.h"
#include "../maprec.h"
#include "../testctl.h"

/* Rows fetched per round trip by scans, entry cursors and sweeps: 500,
 * a test knob (testctl.h): tests lower it to make the paging visible. */
#define PAGE_ROWS OST__KNOB(pg_page_rows)

/* Round trips to the server that the engine's sessions waited for
 * (statements run, PREPAREs, pipelines, a parallel get_many counting
 * once): tests count them to check that a walk costs a trip per page, not
 * per entry (tests/test_maps.c), and bench_pg prints them. Not exact
 * under threads (a relaxed atomic add), and not an API: a test knob
 * (testctl.h), counted only in builds with them. */
#define TRIP() OST__COUNT(pg_trips, 1)

/* The type oids of the array elements and result columns ostore uses. */
#define OIDTYPE_INT8 20
#define OIDTYPE_INT4 23
#define OIDTYPE_BYTEA 17

/* The advisory lock key that serializes schema creation (schema.c) and a
 * drop (import.c). */
#define SCHEMA_LOCK "7310593858183458126"

/* Packages with fewer new records go by INSERT: a COPY costs a round trip
 * more (the serial is taken first). 256, a test knob (testctl.h). */
#define COPY_MIN OST__KNOB(pg_copy_min)

/* Packages in one transaction at most: the row locks of all of them are
 * held until its COMMIT, and a package that spoils it makes the ones
 * before it apply again. */
#define GROUP_MAX 64

/* ---- the engine, its views, its sessions ------------------------------------ */

/* The views a commit leaves for its sessions to adopt (snap_adopt):
 * "views after a commit" in snap.c. */
#define NVIEWS 4
typedef struct {
    ost__sess *s;    /* a session of its own, whose snapshot is the view */
    unsigned refs;   /* sessions that adopted it and have not imported it */
    bool current;    /* the newest: sessions adopt this one */
    bool busy;       /* a poll is filling it */
    /* pg_export_snapshot()'s name, once an import asked: made and read
     * under xlock (importers hold a ref, so nothing else uses s then) */
    pthread_mutex_t xlock;
    char snapid[64];
} pgview;

struct ost__engine {
    const ost__host *host; /* the store's callbacks (engine.h) */
    ost_store *st;         /* the store handle they take (its messages) */
    bool group_commit;     /* the store commits through its group committer */
    char *conninfo; /* what PQconnectdbParams expands (a URI or key=value) */
    char shown[OST__PATH_SHOWN];
    bool read_only;
    bool sync_off; /* synchronous_commit off: the store's durability is not full */
    pthread_mutex_t lock; /* conn: class ids, oid blocks, stat */
    PGconn *conn;
    unsigned par; /* connections a session's large get_many reads with (1 to 8) */
    bool exclusive; /* conn holds the exclusive lock (ost_store_options.exclusive) */
    pthread_mutex_t vlock; /* views, view_last */
    pgview views[NVIEWS];
    uint64_t view_last; /* the serial of the newest view published (0: none) */
};

/* A helper connection of a session's large get_many (get_many_par). */
typedef struct {
    PGconn *conn;
} ost__help;

/* A snapshot's beginning that snap_send sent and snap_recv reads. */
typedef struct {
    bool end;      /* the old snapshot's COMMIT went first */
    bool pre;      /* the commit log rows were asked for */
    bool sent;     /* ost__pg_pipe_send succeeded */
    int n;         /* statements sent */
    uint64_t from; /* the rows asked for are after it */
} snapsend;

struct ost__sess {
    ost__engine *e;
    PGconn *conn;
    bool snap;  /* a read snapshot is open */
    bool write; /* a commit's transaction is open */
    unsigned pins; /* pin depth: views live until snap_end anyway */
    ost__snapinfo info;
    PGresult **kept; /* results that recviews point into, until snap_end */
    size_t nkept, capkept;
    unsigned prepared; /* bit PS_*: that statement is prepared on conn (ost__pg_run_ps) */
    bool wrote;    /* commit: apply has written (a failure then spoils the transaction) */
    bool end_sent; /* a snapshot's COMMIT is sent, its answer not read yet (drain) */
    bool had_snap; /* info holds an earlier snapshot's counters */
    /* The commit log rows after the previous snapshot's last serial, read
     * with this snapshot's BEGIN (PS_CHANGES's rows): rows (from, to] are
     * all there. changes reads them instead of asking again. */
    PGresult *pre;
    uint64_t pre_from, pre_to;
    /* The helpers of a large get_many (e->par - 1 at most, connected at
     * the first one): each reads a part, get_many_par says how. */
    ost__help help[7];
    unsigned nhelp; /* connected so far */
    bool help_off;  /* a helper failed: the session reads alone from now on */
    /* An adopted view (snap_adopt) that no read has imported yet: the
     * snapshot is the view's, no transaction is open on conn, and pre is
     * the view's (pre_shared: not the session's to clear). lost: an
     * import failed, and reads fail until the snapshot ends. */
    pgview *lazy;
    bool pre_shared, lost;
    bool is_view; /* a view's own session (ost__pg_views_close closes it) */
};

/* ---- small helpers -----------------------------------------------------------
 * Inline: the reads and the commit path use them at every row and every
 * parameter. */

/* A big-endian int8 (rd64) or int4 (rd32) of a binary result. */
static inline uint64_t rd64(const char *p) { return ost__rd_be64((const uint8_t *)p); }
static inline uint32_t rd32(const char *p) { return ost__rd_be32((const uint8_t *)p); }

/* Parameters of one statement, all in binary format. p_i64 and p_i32 copy
 * the number into p; p_bytes points at d, which must outlive the
 * statement's run. At most MAXP a statement (unchecked). */
#define MAXP 8
typedef struct {
    const char *v[MAXP];
    int l[MAXP], f[MAXP];
    int n;
    uint8_t num[MAXP][8];
} params;

static inline void p_i64(params *p, uint64_t x) {
    ost__be64(p->num[p->n], x);
    p->v[p->n] = (const char *)p->num[p->n];
    p->l[p->n] = 8;
    p->f[p->n++] = 1;
}
static inline void p_i32(params *p, uint32_t x) {
    ost__be32(p->num[p->n], x);
    p->v[p->n] = (const char *)p->num[p->n];
    p->l[p->n] = 4;
    p->f[p->n++] = 1;
}
static inline void p_bytes(params *p, const void *d, size_t n) {
    p->v[p->n] = n ? d : "";
    p->l[p->n] = (int)n;
    p->f[p->n++] = 1;
}

/* A one-dimensional array parameter in PostgreSQL's binary format
 * (array_recv): ndim, flags, element type, then per dimension its size
 * and lower bound, then per element a length and the bytes. arr_begin
 * starts one (a zeroed arr, or one to reuse: its buffer is kept), the
 * arr_add calls copy elements in, arr_end completes it, arr_free frees
 * the buffer. A failed allocation is remembered and reported by arr_end. */
typedef struct {
    uint8_t *b;
    size_t n, cap;
    uint32_t count;
    bool nomem;
} arr;

static inline void arr_put(arr *a, const void *d, size_t n) {
    if (a->nomem) return;
    if (ost__reserve((void **)&a->b, &a->cap, a->n + n, 1, 256)) {
        a->nomem = true;
        return;
    }
    memcpy(a->b + a->n, d, n);
    a->n += n;
}
static inline void arr_begin(arr *a, uint32_t elemtype) {
    a->n = 0;
    a->count = 0;
    a->nomem = false;
    uint8_t h[20];
    ost__be32(h, 1);
    ost__be32(h + 4, 0);
    ost__be32(h + 8, elemtype);
    ost__be32(h + 12, 0); /* the size: arr_end */
    ost__be32(h + 16, 1);
    arr_put(a, h, 20);
}
static inline void arr_add(arr *a, const void *d, size_t n) {
    uint8_t l[4];
    ost__be32(l, (uint32_t)n);
    arr_put(a, l, 4);
    if (n) arr_put(a, d, n);
    a->count++;
}
static inline void arr_add_i64(arr *a, uint64_t v) {
    uint8_t b[8];
    ost__be64(b, v);
    arr_add(a, b, 8);
}
static inline void arr_add_i32(arr *a, uint32_t v) {
    uint8_t b[4];
    ost__be32(b, v);
    arr_add(a, b, 4);
}
/* 0 or OST_ENOMEM. An empty array has no dimension. */
static inline int arr_end(arr *a) {
    if (a->nomem) return OST_ENOMEM;
    if (!a->count) {
        ost__be32(a->b, 0);
        a->n = 12;
    } else
        ost__be32(a->b + 12, a->count);
    return 0;
}
static inline void arr_free(arr *a) { free(a->b); }

/* The record view of row of r whose columns col, col + 1 and col + 2 are
 * the serial, the class id and the state: it points into r (the caller
 * keeps r as long as the view is used). */
static inline void fill_rec(const PGresult *r, int row, int col, ost__recview *v) {
    v->serial = rd64(PQgetvalue(r, row, col));
    v->cid = rd32(PQgetvalue(r, row, col + 1));
    v->pickle = (const uint8_t *)PQgetvalue(r, row, col + 2);
    v->len = (size_t)PQgetlength(r, row, col + 2);
    v->damage = NULL; /* the server checks its own pages */
    v->stored = 0;
}

/* A bigint column of row 0, or 0 when NULL (max() over no rows). */
static inline uint64_t col64(const PGresult *r, int col) {
    return PQgetisnull(r, 0, col) ? 0 : rd64(PQgetvalue(r, 0, col));
}

/* Whether pkgs[i] takes part in a commit at all. */
static inline bool pkg_skip(const ost__pkg *p) { return p->rc || (!p->nrecs && !p->nments); }

/* ---- conn.c: failures, statements, connections ------------------------------- */

/* The cause of a failed statement (r may be NULL) in one line, into out. */
void ost__pg_cause(PGconn *c, const PGresult *r, char *out, size_t cap);
/* The OST_E* code of a failed statement (r may be NULL): OST_EIO for a
 * broken connection, OST_ECONFLICT for a serialization failure or a
 * deadlock, and so on by SQLSTATE. Sets no message. */
int ost__pg_code(PGconn *c, const PGresult *r);
/* Whether a failed statement may succeed when its transaction runs again:
 * a deadlock between two commits or a serialization failure. */
bool ost__pg_retryable(const PGresult *r);

/* Runs sql with the parameters of p (NULL: none), binary results: the
 * result (the caller clears it), or NULL with *code (if not NULL) set,
 * the store's message naming what, and *retry (if not NULL) whether a new
 * try may succeed. */
PGresult *ost__pg_run(ost__engine *e, PGconn *c, const char *what, const char *sql,
                      const params *p, int *code, bool *retry);
/* Runs sql, one or more statements without parameters, by the simple
 * query protocol in one round trip: 0 or the code. */
int ost__pg_exec_simple(ost__engine *e, PGconn *c, const char *what, const char *sql);
/* Runs a statement whose result is not needed: 0 or the code. */
int ost__pg_run0(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p);
/* The same, saying in *retry whether a failure is worth a new try. */
int ost__pg_run0r(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p,
                  bool *retry);
/* Whether r (a result in binary format, not cleared) has the columns
 * shape says, one letter a column: L bigint, I int, Z boolean, B bytea,
 * T text; lower case allows NULL. 0, or OST_ECORRUPT with the message
 * naming the column and what is wrong with it. */
int ost__pg_res_check(ost__engine *e, const PGresult *r, const char *what, const char *shape);
/* ost__pg_run, then ost__pg_res_check: the result, or NULL with *code and
 * the message set (r cleared). */
PGresult *ost__pg_run_as(ost__engine *e, PGconn *c, const char *what, const char *sql,
                         const params *p, int *code, bool *retry, const char *shape);

/* The prepared statements (conn.c holds their SQL): their names on a
 * server connection, and the shape of each one's result. */
enum {
    PS_GET, PS_GET_MANY, PS_CHANGES, PS_LOCK, PS_WRITE, PS_GWRITE, PS_META, PS_META_LOCK,
    PS_ENT_GET, /* a map entry by key (ost_map_get: one round trip, no parse or plan) */
    /* a page of a map's entries (ecur_fetch): from the start or the end,
     * then from a key on, >=, >, <=, < */
    PS_EC_FIRST, PS_EC_LAST, PS_EC_GE, PS_EC_GT, PS_EC_LE, PS_EC_LT,
    PS_ENT_REF, /* an entry by key with the record its value refers to (ost__pg_ent_get_ref) */
    PS_N
};
extern const char *const ost__pg_ps_name[PS_N];
extern const char *const ost__pg_ps_shape[PS_N];
/* The records' upsert from three array parameters (oids, class ids,
 * states) under SERIAL, an SQL expression: PS_WRITE and put_records. */
#define UPSERT_RECORDS(SERIAL)                                                                 \
    "INSERT INTO ost_records (oid, serial, cid, state) SELECT o, " SERIAL ", c, st FROM "      \
    "unnest($1::bigint[], $2::int[], $3::bytea[]) AS u(o, c, st) ON CONFLICT (oid) DO UPDATE " \
    "SET serial = EXCLUDED.serial, cid = EXCLUDED.cid, state = EXCLUDED.state"

/* Runs the prepared statement which (PS_*) on s's connection, preparing it
 * at its first use there, and checks its result's shape: the result (the
 * caller clears it) or NULL with *code, *retry (if not NULL) and the
 * store's message set. */
PGresult *ost__pg_run_ps(ost__sess *s, int which, const char *what, const params *p, int *code,
                         bool *retry);
/* Prepares which on s's connection unless it is already: 0 or the code. */
int ost__pg_ps_ready(ost__sess *s, int which);

/* One statement of a pipeline: a prepared one (ps, PS_*) or sql. */
typedef struct {
    int ps;
    const char *sql;
    const params *p;
} pstmt;
/* Sends st[0, n) on c in one pipeline (pipeline mode, then a sync):
 * false when libpq could not. */
bool ost__pg_pipe_send(PGconn *c, const pstmt *st, int n);
/* Reads the results of a pipeline of n statements that ost__pg_pipe_send
 * sent (sent: whether it did) and leaves pipeline mode: res[i] gets
 * statement i's result when it succeeded (the caller clears it), NULL
 * otherwise. 0 when all succeeded, else the code of the first failure,
 * with its cause in cause (no store message), and *failed its index; n
 * when the pipeline itself failed (c is then in no known state: the
 * caller closes it). */
int ost__pg_pipe_recv(PGconn *c, bool sent, int n, PGresult **res, int *failed, char *cause,
                      size_t cap);
/* The failure rc of a pipeline on s's connection as the store's message;
 * broken: the pipeline itself failed, and the connection is closed (the
 * session reconnects at its next use). Returns rc. */
int ost__pg_pipe_fail(ost__sess *s, const char *what, int rc, bool broken, const char *cause);
/* ost__pg_pipe_send and ost__pg_pipe_recv on s's connection, in one round
 * trip, with the store's message set on failure (*failed == n: the
 * connection is closed, what the server did is not known). */
int ost__pg_pipe_run(ost__sess *s, const char *what, const pstmt *st, int n, PGresult **res,
                     int *failed);

/* A new connection to e's database, with the store's durability and
 * notices quieted: 0 and *out (the caller PQfinishes it), or OST_EIO. */
int ost__pg_connect(ost__engine *e, PGconn **out);
/* Takes the exclusive option's lock on c, for the life of the session:
 * 0, OST_EBUSY when another session holds it, or the failure. */
int ost__pg_take_excl(ost__engine *e, PGconn *c);
/* The engine's own connection, under e->lock (the caller holds it):
 * (re)connected when needed, with the exclusive lock taken again when
 * the store holds it. *out is borrowed: e owns it. */
int ost__pg_eng_conn(ost__engine *e, PGconn **out);
/* Whether the engine's connection broke in its last statement (the server
 * restarted): its operations then run once more on a new one. */
bool ost__pg_eng_lost(ost__engine *e);
/* Reads the answer to a snapshot's COMMIT sent without waiting. */
void ost__pg_drain(ost__sess *s);
/* The session's connection: (re)connected when there is none or the last
 * one broke (the server restarted), checking the exclusive lock. */
int ost__pg_sess_conn(ost__sess *s);
/* Closes the prefetch helpers; off: the session reads alone from now on. */
void ost__pg_help_close(ost__sess *s, bool off);
/* Connects the first want helpers of s that are not connected yet, each
 * with get_many prepared: true when they are all there. A failure closes
 * them all, and the session reads alone from then on. */
bool ost__pg_help_connect(ost__sess *s, size_t want);
/* ost__pg_keep keeps r, which recviews point into, until the snapshot or
 * the commit ends: 0 or OST_ENOMEM (r is cleared then). keep_clear clears
 * what was kept. */
void ost__pg_keep_clear(ost__sess *s);
int ost__pg_keep(ost__sess *s, PGresult *r);

/* ---- schema.c ------------------------------------------------------------------ */

/* Opens the schema on c: checks the tables, makes them when none is there
 * and create is set, checks (and upgrades) meta's format into
 * e->st->format; *dels says whether ost_mapdels is there. 0,
 * OST_ENOTFOUND (no schema, no create), OST_ECORRUPT (tables that are not
 * ostore's), OST_EVERSION, or the server's failure. */
int ost__pg_schema_open(ost__engine *e, PGconn *c, bool create, bool *dels);
/* Makes ost_mapdels in a database whose schema predates it. */
int ost__pg_mapdels_ensure(ost__engine *e, PGconn *c);

/* ---- snap.c: sessions, snapshots, views ------------------------------------------- */

/* engine.h's sess_open, sess_close, snap_begin (and snap_renew),
 * snap_adopt, snap_end, snap_moved, pin, unpin, views_mark and
 * views_release. */
int ost__pg_sess_open(ost__engine *e, ost__sess **out);
void ost__pg_sess_close(ost__sess *s);
int ost__pg_snap_begin(ost__sess *s, ost__snapinfo *info);
int ost__pg_snap_adopt(ost__sess *s, uint64_t serial, uint64_t after, ost__snapinfo *info);
void ost__pg_snap_end(ost__sess *s);
bool ost__pg_snap_moved(ost__sess *s);
int ost__pg_pin(ost__sess *s);
void ost__pg_unpin(ost__sess *s);
size_t ost__pg_views_mark(ost__sess *s);
void ost__pg_views_release(ost__sess *s, size_t mark);
/* Whether a read may run: in a snapshot, inside commit, or (tools, tests)
 * in autocommit on a live connection; imports an adopted view first. */
int ost__pg_read_ready(ost__sess *s);
/* Reads meta's counters in the open transaction into *info. */
int ost__pg_read_meta(ost__sess *s, ost__snapinfo *info);
/* Ends every view no session holds (before a drop or an import). */
void ost__pg_views_end(ost__engine *e);
/* Closes the views' sessions (the engine closes). */
void ost__pg_views_close(ost__engine *e);
/* After a commit: a view of the store as it is now, with the commit log
 * rows after from, for the sessions of the group to adopt; a failure is
 * no failure of the commit (the store's message is kept). */
void ost__pg_view_poll(ost__engine *e, uint64_t from);

/* ---- read.c, ids.c, entries.c, pack.c, import.c, open.c, commit.c:
 * engine.h's operations of the same names ---------------------------------------- */

int ost__pg_get(ost__sess *s, uint64_t oid, ost__recview *v);
int ost__pg_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud);
int ost__pg_changes(ost__sess *s, uint64_t after, uint64_t upto,
                    void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud, bool *gap);
int ost__pg_class_get(ost__sess *s, uint32_t id, ost__classview *out);
int ost__pg_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud);

int ost__pg_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                     size_t nlen, bool create, uint32_t *id);
int ost__pg_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first);

int ost__pg_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *out);
int ost__pg_ent_get_ref(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        ost__entry *out, uint64_t *ref, ost__recview *rec);
int ost__pg_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        ost__entry *out, uint64_t *deleted);
int ost__pg_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, uint64_t serial,
                    const void *data, size_t len, bool *existed, bool *append);
int ost__pg_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                    uint64_t serial);
int ost__pg_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n);
int ost__pg_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud);
int ost__pg_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                          bool counter);
int ost__pg_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out);
int ost__pg_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse);
int ost__pg_ecur_step(ost__ecur *ec, bool reverse);
int ost__pg_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e);
int ost__pg_ecur_ahead(ost__ecur *ec, bool reverse,
                       int (*fn)(void *ud, const uint8_t *key, size_t klen, const ost__entry *e),
                       void *ud);
bool ost__pg_ecur_keys_only(ost__ecur *ec, bool on);
void ost__pg_ecur_close(ost__ecur *ec);

int ost__pg_sweep(ost__sess *s, uint64_t mark, bool (*keepfn)(void *ud, uint64_t oid), void *ud,
                  uint64_t *removed);
int ost__pg_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud);
int ost__pg_snap_stat(ost__sess *s, ost_snap_stats *out);
int ost__pg_verify(ost__sess *s, char *first, size_t cap);

int ost__pg_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out);
int ost__pg_imp_class(ost__import *im, uint32_t id, const char *module, size_t mlen,
                      const char *name, size_t nlen);
int ost__pg_imp_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                       const void *pickle, size_t len);
int ost__pg_imp_entry(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                      uint64_t serial, const void *value, size_t vlen);
int ost__pg_imp_commit(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                       uint64_t next_class);
void ost__pg_imp_abort(ost__import *im);
int ost__pg_drop(ost__engine *e, bool only_new);

/* addr.c: the engine's addresses (its line in store/engines.c). */
bool ost__pg_claims(const char *addr);
void ost__pg_show(const char *addr, char *out, size_t cap);
/* Sets the calling thread's message of e's store (host->fail) and
 * returns code. */
int ost__pg_fail(ost__engine *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ost__pg_open(const ost__host *host, ost_store *st, const char *addr,
                 const ost_store_options *o,
                 ost__engine **out);
void ost__pg_close(ost__engine *e);
int ost__pg_stat(ost__engine *e, ost_store_stats *out);

int ost__pg_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n);
/* engine.c: the table of operations. */
extern const ost__engine_ops ost__pg_engine;

/* ---- write.c: a package's rows --------------------------------------------------- */

/* Sets p's outcome for a failure of a statement: p->rc = rc, and the
 * store's message copied as the package's. Returns rc. */
int ost__pg_pkg_fail(ost__sess *s, ost__pkg *p, int rc);
/* The records of p from *i on that go in one statement (at most 20,000
 * and 64 MiB), as three array parameters (oids, class ids, states) begun
 * and ended here; *i moves past them. 0 or OST_ENOMEM (no message). */
int ost__pg_records_chunk(ost__pkg *p, size_t *i, arr *ao, arr *ac, arr *as);
/* Writes p's records from index i on under serial, a chunk a statement. */
int ost__pg_put_records(ost__sess *s, ost__pkg *p, size_t i, uint64_t serial);
/* Writes p's records (new objects only) under serial with one binary
 * COPY in the open transaction; *retry as ost__pg_retryable. */
int ost__pg_copy_records(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry);
/* Whether p's map entries are a loader's batch (blind puts, at least
 * pg_ment_copy_min) that goes by COPY. */
bool ost__pg_ments_by_copy(const ost__pkg *p);
/* Writes p's map entries (all blind puts) under serial through a staging
 * table filled by COPY, and adds to each map's count the keys it gained. */
int ost__pg_copy_ments(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry);

/* ---- group.c -------------------------------------------------------------------- */

/* Commits pkgs[0, n) in two round trips when they are all plain packages
 * (records only, a small group): false, with every package as it came,
 * when the group must take commit.c's path; true with *whole (ost__pg_commit's
 * result) when it is done, each package's outcome set. */
bool ost__pg_group_fast(ost__sess *s, ost__pkg *const *pkgs, size_t n, int *whole);

#endif
