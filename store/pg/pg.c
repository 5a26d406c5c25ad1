/* The PostgreSQL engine (issue 13, part 2): store/engine.h's operations on
 * libpq. docs/postgresql.md describes the schema and how commits, serials
 * and invalidations work; in short:
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
 * Only this file includes <libpq-fe.h>. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "../engine.h"
#include "../store_internal.h"

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

#define OIDTYPE_INT8 20
#define OIDTYPE_INT4 23
#define OIDTYPE_BYTEA 17

/* A notice processor that drops the notice (PQsetNoticeProcessor with
 * NULL keeps libpq's, which prints to stderr). */
static void quiet_notice(void *arg, const char *msg) {
    (void)arg;
    (void)msg;
}

/* The advisory lock key that serializes schema creation. */
#define SCHEMA_LOCK "7310593858183458126"
/* The exclusive option's session advisory lock: this key and a hash of
 * the store's schema (two stores in one database do not share it). */
#define EXCL_LOCK "pg_try_advisory_lock(731059385, hashtext(coalesce(current_schema(), '')))"

/* The views a commit leaves for its sessions to adopt (snap_adopt): "Views
 * after a commit" below. */
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
    ost_store *st;
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
    bool sent;     /* pipe_send succeeded */
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
    unsigned prepared; /* bit PS_*: that statement is prepared on conn (run_ps) */
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
    bool is_view; /* a view's own session (views_close closes it) */
};

struct ost__ecur {
    ost__sess *s;
    uint64_t map;
    PGresult *page; /* rows in the order of the fetch */
    int row, nrows;
    bool page_rev; /* the page was fetched backwards */
    bool full;     /* the page had as many rows as asked: there may be more */
    bool on;
    bool keys_only;  /* fetch pages without values (pg_ecur_keys_only) */
    bool page_keys;  /* the page in hand was fetched so */
    uint8_t *kbuf; /* the current key, while a new page is fetched */
    size_t kcap;
};

/* ---- small helpers ---------------------------------------------------------- */

static uint64_t rd64(const char *p) { return ost__rd_be64((const uint8_t *)p); }
static uint32_t rd32(const char *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static void wr32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

/* Parameters of one statement, all in binary format. */
#define MAXP 8
typedef struct {
    const char *v[MAXP];
    int l[MAXP], f[MAXP];
    int n;
    uint8_t num[MAXP][8];
} params;

static void p_i64(params *p, uint64_t x) {
    ost__be64(p->num[p->n], x);
    p->v[p->n] = (const char *)p->num[p->n];
    p->l[p->n] = 8;
    p->f[p->n++] = 1;
}
static void p_i32(params *p, uint32_t x) {
    wr32(p->num[p->n], x);
    p->v[p->n] = (const char *)p->num[p->n];
    p->l[p->n] = 4;
    p->f[p->n++] = 1;
}
static void p_bytes(params *p, const void *d, size_t n) {
    p->v[p->n] = n ? d : "";
    p->l[p->n] = (int)n;
    p->f[p->n++] = 1;
}

/* A one-dimensional array parameter in PostgreSQL's binary format
 * (array_recv): ndim, flags, element type, then per dimension its size
 * and lower bound, then per element a length and the bytes. */
typedef struct {
    uint8_t *b;
    size_t n, cap;
    uint32_t count;
    bool nomem;
} arr;

static void arr_put(arr *a, const void *d, size_t n) {
    if (a->nomem) return;
    if (ost__reserve((void **)&a->b, &a->cap, a->n + n, 1, 256)) {
        a->nomem = true;
        return;
    }
    memcpy(a->b + a->n, d, n);
    a->n += n;
}
static void arr_begin(arr *a, uint32_t elemtype) {
    a->n = 0;
    a->count = 0;
    a->nomem = false;
    uint8_t h[20];
    wr32(h, 1);
    wr32(h + 4, 0);
    wr32(h + 8, elemtype);
    wr32(h + 12, 0); /* the size: arr_end */
    wr32(h + 16, 1);
    arr_put(a, h, 20);
}
static void arr_add(arr *a, const void *d, size_t n) {
    uint8_t l[4];
    wr32(l, (uint32_t)n);
    arr_put(a, l, 4);
    if (n) arr_put(a, d, n);
    a->count++;
}
static void arr_add_i64(arr *a, uint64_t v) {
    uint8_t b[8];
    ost__be64(b, v);
    arr_add(a, b, 8);
}
static void arr_add_i32(arr *a, uint32_t v) {
    uint8_t b[4];
    wr32(b, v);
    arr_add(a, b, 4);
}
/* 0 or OST_ENOMEM. An empty array has no dimension. */
static int arr_end(arr *a) {
    if (a->nomem) return OST_ENOMEM;
    if (!a->count) {
        wr32(a->b, 0);
        a->n = 12;
    } else
        wr32(a->b + 12, a->count);
    return 0;
}
static void arr_free(arr *a) { free(a->b); }

/* The first line of a libpq message, without "ERROR:  " and the newline. */
static void first_line(const char *m, char *out, size_t cap) {
    if (!m || !*m) m = "unknown error";
    if (!strncmp(m, "ERROR:  ", 8)) m += 8;
    if (!strncmp(m, "FATAL:  ", 8)) m += 8;
    size_t n = strcspn(m, "\n");
    while (n && (m[n - 1] == ' ' || m[n - 1] == '\r')) n--;
    if (n >= cap) n = cap - 1;
    memcpy(out, m, n);
    out[n] = 0;
}

/* The cause of a failed statement (r may be NULL) in one line. */
static void pg_cause(PGconn *c, const PGresult *r, char *out, size_t cap) {
    const char *m = r ? PQresultErrorMessage(r) : NULL;
    if (!m || !*m) m = c ? PQerrorMessage(c) : NULL;
    first_line(m, out, cap);
    if (c && PQstatus(c) == CONNECTION_BAD && !strstr(out, "connection")) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, " (the connection to the server was lost)");
    }
}

/* The OST_E* code of a failed statement. */
static int pg_code(PGconn *c, const PGresult *r) {
    if (!c || PQstatus(c) == CONNECTION_BAD) return OST_EIO;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!st) return OST_EIO;
    if (!strncmp(st, "08", 2) || !strncmp(st, "57P", 3) || !strncmp(st, "58", 2)) return OST_EIO;
    if (!strcmp(st, "53200")) return OST_ENOMEM;
    if (!strncmp(st, "40", 2)) return OST_ECONFLICT; /* serialization failure, deadlock */
    if (!strcmp(st, "25006") || !strcmp(st, "42501")) return OST_EREADONLY;
    if (!strncmp(st, "23", 2)) return OST_EEXIST;
    if (!strcmp(st, "42P01")) return OST_ECORRUPT; /* a table of the schema is missing */
    return OST_EIO;
}

/* Whether a failed statement may succeed when its transaction runs again:
 * a deadlock between two commits or a serialization failure. */
static bool pg_retryable(const PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return st && (!strcmp(st, "40P01") || !strcmp(st, "40001"));
}

/* Runs sql with the parameters of p (NULL: none), binary results. A result
 * whose status is not TUPLES_OK or COMMAND_OK is cleared and NULL
 * returned, with *res_err (if not NULL) getting its code and the store's
 * message set naming what; retry (if not NULL) says whether it is worth a
 * new try. */
static PGresult *run(ost__engine *e, PGconn *c, const char *what, const char *sql,
                     const params *p, int *code, bool *retry) {
    TRIP();
    PGresult *r = PQexecParams(c, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->l : NULL,
                               p ? p->f : NULL, 1);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) return r;
    char cause[240];
    pg_cause(c, r, cause, sizeof cause);
    int rc = pg_code(c, r);
    if (retry) *retry = pg_retryable(r);
    PQclear(r);
    if (code) *code = rc;
    ost__st_fail(e->st, rc, "%s: %s: %s", e->shown, what, cause);
    return NULL;
}

/* Runs sql, one or more statements without parameters, by the simple
 * query protocol in one round trip: 0 or a code, as run0. */
static int exec_simple(ost__engine *e, PGconn *c, const char *what, const char *sql) {
    TRIP();
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        PQclear(r);
        return 0;
    }
    char cause[240];
    pg_cause(c, r, cause, sizeof cause);
    int rc = pg_code(c, r);
    PQclear(r);
    return ost__st_fail(e->st, rc, "%s: %s: %s", e->shown, what, cause);
}

/* Runs a statement whose result is not needed: 0 or a code. */
static int run0(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p) {
    int rc = 0;
    PGresult *r = run(e, c, what, sql, p, &rc, NULL);
    PQclear(r);
    return r ? 0 : rc;
}

/* The same, saying whether a failure is worth a new try. */
static int run0r(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p,
                 bool *retry) {
    int rc = 0;
    PGresult *r = run(e, c, what, sql, p, &rc, retry);
    PQclear(r);
    return r ? 0 : rc;
}

/* ---- checked reads -------------------------------------------------------------
 * Nothing is decoded from a result before its shape is checked: the
 * number of columns, each column's type (PQftype) and, for the fixed-width
 * types, each value's length (PQgetlength) and whether it is NULL. The
 * schema is checked when the store opens (schema_valid), but a table can
 * change under an open store (ALTER TABLE by someone else), and a value
 * of the wrong width would make rd64 read past it. libpq's PQgetvalue
 * returns the value as the server sent it and PQgetlength its length,
 * checking only the row and column numbers (src/interfaces/libpq/
 * fe-exec.c); the server sends an int in binary as 4 bytes (int4send,
 * src/backend/utils/adt/int.c). Seen before these checks: a database
 * whose ost_meta.format was an int holding 3 opened as "store format
 * 12897402558", the 4 bytes of the int and 4 past them.
 *
 * A shape is a string, one letter a column: L bigint (int8, 8 bytes), I
 * int (int4, 4 bytes), Z boolean (1 byte), B bytea, T text (any length).
 * A lower-case letter allows NULL. */

#define OIDTYPE_BOOL 16
#define OIDTYPE_TEXT 25

static const char *type_name(Oid t) {
    switch (t) {
    case OIDTYPE_INT8: return "bigint";
    case OIDTYPE_INT4: return "integer";
    case 21: return "smallint";
    case OIDTYPE_BYTEA: return "bytea";
    case OIDTYPE_TEXT: return "text";
    case OIDTYPE_BOOL: return "boolean";
    case 1043: return "character varying";
    case 1700: return "numeric";
    default: return NULL;
    }
}

/* Whether r (a result in binary format) has the columns shape says, with
 * a value of the right width in each fixed-width one, non-NULL unless the
 * letter is lower case: 0, or OST_ECORRUPT with the store's message
 * naming the address, what was being done, the column and what is wrong
 * with it. r is not cleared. */
static int res_check(ost__engine *e, const PGresult *r, const char *what, const char *shape) {
    int nf = (int)strlen(shape);
    if (PQnfields(r) != nf)
        return ost__st_fail(e->st, OST_ECORRUPT,
                            "%s: %s: the server's answer has %d columns, ostore reads %d", e->shown,
                            what, PQnfields(r), nf);
    int nt = PQntuples(r);
    for (int j = 0; j < nf; j++) {
        char k = shape[j];
        bool null_ok = k >= 'a' && k <= 'z';
        if (null_ok) k = (char)(k - 'a' + 'A');
        Oid want = k == 'L'   ? OIDTYPE_INT8
                   : k == 'I' ? OIDTYPE_INT4
                   : k == 'Z' ? OIDTYPE_BOOL
                   : k == 'B' ? OIDTYPE_BYTEA
                              : OIDTYPE_TEXT;
        int width = k == 'L' ? 8 : k == 'I' ? 4 : k == 'Z' ? 1 : -1;
        const char *col = PQfname(r, j) ? PQfname(r, j) : "?";
        Oid got = PQftype(r, j);
        if (got != want || PQfformat(r, j) != 1) {
            const char *gn = type_name(got);
            char gbuf[32];
            if (!gn) {
                snprintf(gbuf, sizeof gbuf, "of type oid %u", (unsigned)got);
                gn = gbuf;
            }
            return ost__st_fail(e->st, OST_ECORRUPT,
                                "%s: %s: column %s is %s%s, ostore reads %s", e->shown, what, col,
                                gn, PQfformat(r, j) != 1 ? " (as text)" : "", type_name(want));
        }
        for (int i = 0; i < nt; i++) {
            if (PQgetisnull(r, i, j)) {
                if (null_ok) continue;
                return ost__st_fail(e->st, OST_ECORRUPT, "%s: %s: column %s is NULL (row %d)",
                                    e->shown, what, col, i + 1);
            }
            int len = PQgetlength(r, i, j);
            if (width >= 0 && len != width)
                return ost__st_fail(e->st, OST_ECORRUPT,
                                    "%s: %s: column %s holds %d bytes (row %d), a %s has %d",
                                    e->shown, what, col, len, i + 1, type_name(want), width);
        }
    }
    return 0;
}

/* run, then res_check: the result, or NULL with *code and the message
 * set (r cleared) when the statement failed or the result is not of
 * that shape. */
static PGresult *run_as(ost__engine *e, PGconn *c, const char *what, const char *sql,
                        const params *p, int *code, bool *retry, const char *shape) {
    PGresult *r = run(e, c, what, sql, p, code, retry);
    if (r && (*code = res_check(e, r, what, shape))) {
        if (retry) *retry = false;
        PQclear(r);
        return NULL;
    }
    return r;
}

/* ---- addresses ----------------------------------------------------------------- */

static bool pg_claims(const char *addr) {
    return addr && (!strncmp(addr, "postgresql://", 13) || !strncmp(addr, "postgres://", 11) ||
                    !strncmp(addr, "postgres:", 9));
}

/* What libpq is given: a URI as it is, "postgres:" + a conninfo string
 * without its prefix. */
static const char *conn_string(const char *addr) {
    if (!strncmp(addr, "postgresql://", 13) || !strncmp(addr, "postgres://", 11)) return addr;
    return addr + 9;
}


/* ---- connections ---------------------------------------------------------------- */

/* A new connection to e's database: 0 or OST_EIO with the message set. A
 * connect timeout of 10 s applies unless the address sets one. */
static int connect_db(ost__engine *e, PGconn **out) {
    const char *kw[] = {"connect_timeout", "dbname", "application_name", NULL};
    const char *val[] = {"10", e->conninfo, "ostore", NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c) return ost__st_fail(e->st, OST_ENOMEM, "%s: cannot connect: out of memory", e->shown);
    if (PQstatus(c) != CONNECTION_OK) {
        char cause[300];
        first_line(PQerrorMessage(c), cause, sizeof cause);
        PQfinish(c);
        return ost__st_fail(e->st, OST_EIO, "%s: cannot connect: %s", e->shown, cause);
    }
    /* quiet notices (a library does not write to stderr: a warning or a
     * server's FATAL at a restart shows in the failure's message); the
     * store's durability */
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    PGresult *r = PQexec(c, e->sync_off ? "SET synchronous_commit TO off; SET client_min_messages TO warning"
                                        : "SET synchronous_commit TO on; SET client_min_messages TO warning");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
        char cause[300];
        first_line(PQerrorMessage(c), cause, sizeof cause);
        PQfinish(c);
        return ost__st_fail(e->st, OST_EIO, "%s: cannot set up the connection: %s", e->shown, cause);
    }
    *out = c;
    return 0;
}

static int take_excl(ost__engine *e, PGconn *c);

/* The engine's own connection, under e->lock: (re)connected when needed,
 * with the exclusive lock taken again when the store holds it. */
static int eng_conn(ost__engine *e, PGconn **out) {
    if (e->conn && PQstatus(e->conn) != CONNECTION_OK) {
        PQfinish(e->conn);
        e->conn = NULL;
    }
    if (!e->conn) {
        int rc = connect_db(e, &e->conn);
        if (!rc && e->exclusive) rc = take_excl(e, e->conn);
        if (rc) {
            if (e->conn) PQfinish(e->conn);
            e->conn = NULL;
            return rc;
        }
    }
    *out = e->conn;
    return 0;
}

/* The session's connection: (re)connected when there is none or the last
 * one broke (the server restarted). */
/* Reads the answer to a snapshot's COMMIT that pg_snap_end sent without
 * waiting (a read-only transaction's COMMIT has nothing to report; a
 * broken connection shows in its status). */
static void drain(ost__sess *s) {
    if (!s->end_sent) return;
    s->end_sent = false;
    if (!s->conn) return;
    PGresult *r;
    while ((r = PQgetResult(s->conn))) PQclear(r);
}

/* Closes the helpers; the session reads alone from now on if off. */
static void help_close(ost__sess *s, bool off) {
    for (unsigned i = 0; i < s->nhelp; i++)
        if (s->help[i].conn) PQfinish(s->help[i].conn);
    memset(s->help, 0, sizeof s->help);
    s->nhelp = 0;
    if (off) s->help_off = true;
}

static bool help_connect(ost__sess *s, size_t want);

/* When the store holds the exclusive lock: whether the engine's
 * connection still holds it (a server restart ends the session and the
 * lock with it): asked again on that connection, reconnected and taken
 * again if it broke. 0, or OST_EBUSY when another handle took it, or the
 * failure. A session checks it each time it connects, so that no
 * session writes to a store whose lock went to another handle. */
static int excl_check(ost__engine *e) {
    if (!e->exclusive) return 0;
    pthread_mutex_lock(&e->lock);
    PGconn *c;
    int rc = eng_conn(e, &c);
    /* held: asking again stacks it on the same session, which is fine:
     * the session's end releases every hold */
    if (!rc) {
        rc = take_excl(e, c);
        if (rc == OST_EIO && PQstatus(c) != CONNECTION_OK && !(rc = eng_conn(e, &c)))
            rc = take_excl(e, c);
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int sess_conn(ost__sess *s) {
    drain(s);
    if (s->conn && PQstatus(s->conn) != CONNECTION_OK) {
        PQfinish(s->conn);
        s->conn = NULL;
        s->prepared = 0;
    }
    if (s->conn) return 0;
    int rc = excl_check(s->e);
    return rc ? rc : connect_db(s->e, &s->conn);
}

static void keep_clear(ost__sess *s) {
    for (size_t i = 0; i < s->nkept; i++) PQclear(s->kept[i]);
    s->nkept = 0;
}

static size_t pg_views_mark(ost__sess *s) { return s->nkept; }

static void pg_views_release(ost__sess *s, size_t mark) {
    while (s->nkept > mark) PQclear(s->kept[--s->nkept]);
}

/* Keeps r until the snapshot or the commit ends: 0 or OST_ENOMEM (r is
 * cleared then). */
static int keep(ost__sess *s, PGresult *r) {
    if (ost__reserve((void **)&s->kept, &s->capkept, s->nkept + 1, sizeof *s->kept, 16)) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ENOMEM, "out of memory");
    }
    s->kept[s->nkept++] = r;
    return 0;
}

/* ---- the schema ------------------------------------------------------------------ */

/* The deletion records of map keys (pg_ent_del, pg_ent_get_del): the
 * last commit that deleted each key. Optional in schema_want, so that a
 * database made before it opens; a read-write open makes it when it is
 * missing (mapdels_ensure). */
#define MAPDELS_SQL                                                                                \
    "CREATE TABLE IF NOT EXISTS ost_mapdels (map bigint NOT NULL, key bytea NOT NULL, serial "     \
    "bigint NOT NULL, PRIMARY KEY (map, key))"

static const char schema_sql[] =
    "CREATE TABLE ost_meta (id int PRIMARY KEY CHECK (id = 1), format bigint NOT "
    "NULL, next_oid bigint NOT NULL, last_serial bigint NOT NULL, low bigint NOT NULL, "
    "next_class bigint NOT NULL);"
    "CREATE TABLE ost_records (oid bigint PRIMARY KEY, serial bigint NOT NULL, "
    "cid int NOT NULL, state bytea NOT NULL);"
    "CREATE TABLE ost_classes (id int PRIMARY KEY, module text NOT NULL, name text "
    "NOT NULL, UNIQUE (module, name));"
    "CREATE TABLE ost_txlog (serial bigint PRIMARY KEY, oids bytea NOT NULL);"
    "CREATE TABLE ost_ments (map bigint NOT NULL, key bytea NOT NULL, serial bigint "
    "NOT NULL, value bytea NOT NULL, PRIMARY KEY (map, key));"
    MAPDELS_SQL ";"
    "INSERT INTO ost_meta VALUES (1, 4, 1, 0, 0, 1);";

/* What schema_sql makes, as schema_valid compares it with the catalog:
 * each table's columns in order with their types (format_type's names),
 * its primary key and (ost_classes) the unique key class_id relies on.
 * Every statement of this file names its columns or lists them in this
 * order (INSERT ... VALUES), and ON CONFLICT needs the keys. The first
 * NREQUIRED tables make a store; the last, ost_mapdels, is checked when
 * it is there (a database made before it has none: mapdels_ensure). */
#define NTABLES 6
#define NREQUIRED 5
static const struct {
    const char *name;
    int ncols;
    const char *col[6], *type[6];
    const char *pk, *unique;
} schema_want[NTABLES] = {
    {"ost_meta", 6, {"id", "format", "next_oid", "last_serial", "low", "next_class"},
     {"integer", "bigint", "bigint", "bigint", "bigint", "bigint"}, "id", NULL},
    {"ost_records", 4, {"oid", "serial", "cid", "state"}, {"bigint", "bigint", "integer", "bytea"},
     "oid", NULL},
    {"ost_classes", 3, {"id", "module", "name"}, {"integer", "text", "text"}, "id", "module,name"},
    {"ost_txlog", 2, {"serial", "oids"}, {"bigint", "bytea"}, "serial", NULL},
    {"ost_ments", 4, {"map", "key", "serial", "value"}, {"bigint", "bytea", "bigint", "bytea"},
     "map,key", NULL},
    {"ost_mapdels", 3, {"map", "key", "serial"}, {"bigint", "bytea", "bigint"}, "map,key", NULL},
};

/* The catalog's view of the six tables as the connection's search_path
 * finds them (to_regclass): one row per table and column, in column
 * order (a missing table: one row of NULLs), with the table's primary
 * key and its unique keys (column lists, ';' between keys; partial and
 * expression indexes left out). Text results. */
static const char schema_sql_catalog[] =
    "SELECT t.i, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod), (SELECT "
    "string_agg(pa.attname, ',' ORDER BY k.n) FROM pg_index i CROSS JOIN unnest(i.indkey::int2[]) "
    "WITH ORDINALITY k(att, n) JOIN pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = "
    "k.att WHERE i.indrelid = c.oid AND i.indisprimary), (SELECT string_agg(u.cols, ';') FROM "
    "(SELECT (SELECT string_agg(pa.attname, ',' ORDER BY k.n) FROM unnest(i.indkey::int2[]) WITH "
    "ORDINALITY k(att, n) JOIN pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = k.att) "
    "AS cols FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL) u) "
    "FROM unnest(ARRAY['ost_meta', 'ost_records', 'ost_classes', 'ost_txlog', 'ost_ments', "
    "'ost_mapdels']) WITH "
    "ORDINALITY AS t(name, i) LEFT JOIN pg_class c ON c.oid = to_regclass(t.name) LEFT JOIN "
    "pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY t.i, "
    "a.attnum";

/* Whether the list "a,b;c" holds the key k ("a,b") as one of its items. */
static bool key_listed(const char *list, const char *k) {
    size_t n = strlen(k);
    for (const char *p = list; p && *p;) {
        size_t m = strcspn(p, ";");
        if (m == n && !memcmp(p, k, n)) return true;
        p += m;
        if (*p) p++;
    }
    return false;
}

/* Compares table t of schema_want with its rows [from, to) of r (the
 * catalog's answer, text): 0, or OST_ECORRUPT with the message saying the
 * first difference. */
static int table_valid(ost__engine *e, const PGresult *r, int t, int from, int to) {
    const char *tn = schema_want[t].name;
    const char *kind = PQgetvalue(r, from, 1);
    if (strcmp(kind, "r") && strcmp(kind, "p"))
        return ost__st_fail(e->st, OST_ECORRUPT,
                            "%s: not an ostore schema: %s is not a table (relkind '%s')", e->shown,
                            tn, kind);
    /* every column of ours, of our type */
    for (int k = 0; k < schema_want[t].ncols; k++) {
        int at = -1;
        for (int i = from; i < to && at < 0; i++)
            if (!strcmp(PQgetvalue(r, i, 2), schema_want[t].col[k])) at = i;
        if (at < 0)
            return ost__st_fail(e->st, OST_ECORRUPT,
                                "%s: not an ostore schema: table %s has no column %s", e->shown, tn,
                                schema_want[t].col[k]);
        if (strcmp(PQgetvalue(r, at, 3), schema_want[t].type[k]))
            return ost__st_fail(e->st, OST_ECORRUPT,
                                "%s: not an ostore schema: column %s.%s is %s, ostore's is %s",
                                e->shown, tn, schema_want[t].col[k], PQgetvalue(r, at, 3),
                                schema_want[t].type[k]);
    }
    /* nothing else, and in our order */
    if (to - from != schema_want[t].ncols) {
        for (int i = from; i < to; i++) {
            bool ours = false;
            for (int k = 0; k < schema_want[t].ncols && !ours; k++)
                ours = !strcmp(PQgetvalue(r, i, 2), schema_want[t].col[k]);
            if (!ours)
                return ost__st_fail(e->st, OST_ECORRUPT,
                                    "%s: not an ostore schema: table %s has a column %s that "
                                    "ostore's has not",
                                    e->shown, tn, PQgetvalue(r, i, 2));
        }
    }
    for (int k = 0; k < schema_want[t].ncols; k++)
        if (strcmp(PQgetvalue(r, from + k, 2), schema_want[t].col[k]))
            return ost__st_fail(e->st, OST_ECORRUPT,
                                "%s: not an ostore schema: the columns of table %s are not in "
                                "ostore's order (%s is column %d)",
                                e->shown, tn, schema_want[t].col[k], k + 1);
    const char *pk = PQgetisnull(r, from, 4) ? "" : PQgetvalue(r, from, 4);
    if (strcmp(pk, schema_want[t].pk))
        return ost__st_fail(e->st, OST_ECORRUPT,
                            "%s: not an ostore schema: table %s has %s%s%s, ostore's is (%s)",
                            e->shown, tn, *pk ? "primary key (" : "no primary key", pk,
                            *pk ? ")" : "", schema_want[t].pk);
    const char *uq = PQgetisnull(r, from, 5) ? "" : PQgetvalue(r, from, 5);
    if (schema_want[t].unique && !key_listed(uq, schema_want[t].unique))
        return ost__st_fail(e->st, OST_ECORRUPT,
                            "%s: not an ostore schema: table %s has no unique key (%s)", e->shown,
                            tn, schema_want[t].unique);
    return 0;
}

/* Checks the tables of ostore's names that c's search_path finds against
 * what schema_sql makes (schema_want): 0 with *present the number of them
 * there (0: none, the database has no store), or OST_ECORRUPT ("not an
 * ostore schema: ...", saying what differs: a table missing beside the
 * others, not a table, a column missing, of another type, one more, out
 * of order, another key), or the failure to read the catalog. One round
 * trip (PostgreSQL's catalogs: pg_class, pg_attribute, pg_index). */
static int schema_valid(ost__engine *e, PGconn *c, int *present, bool *dels) {
    *present = 0;
    *dels = false;
    PGresult *r = PQexec(c, schema_sql_catalog);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char cause[240];
        pg_cause(c, r, cause, sizeof cause);
        int rc = pg_code(c, r);
        PQclear(r);
        return ost__st_fail(e->st, rc, "%s: checking the schema: %s", e->shown, cause);
    }
    /* the rows of each table: [at[t], at[t + 1]); a table is there when
     * its first row has a relkind */
    int at[NTABLES + 1], nt = PQntuples(r), row = 0, rc = 0;
    bool there[NTABLES];
    for (int t = 0; t < NTABLES; t++) {
        at[t] = row;
        while (row < nt && atoi(PQgetvalue(r, row, 0)) == t + 1) row++;
        there[t] = row > at[t] && !PQgetisnull(r, at[t], 1);
        if (t < NREQUIRED) *present += there[t];
    }
    at[NTABLES] = row;
    *dels = there[NREQUIRED];
    if (PQnfields(r) != 6 || row != nt) {
        PQclear(r);
        return ost__st_fail(e->st, OST_EIO, "%s: checking the schema: an answer of another shape",
                            e->shown);
    }
    /* the tables that are there first (what is wrong with a table of
     * another program says more than that ours are missing) */
    for (int t = 0; t < NTABLES && !rc; t++)
        if (there[t]) rc = table_valid(e, r, t, at[t], at[t + 1]);
    PQclear(r);
    if (!rc && *present && *present < NREQUIRED) {
        int miss = 0, have = 0;
        while (miss < NREQUIRED - 1 && there[miss]) miss++;
        while (have < NREQUIRED - 1 && !there[have]) have++;
        rc = ost__st_fail(e->st, OST_ECORRUPT,
                          "%s: not an ostore schema: table %s is missing (%s is there)", e->shown,
                          schema_want[miss].name, schema_want[have].name);
    }
    return rc;
}

/* Opens the schema: checks the tables (schema_valid), makes them when
 * none is there and create is set, then checks meta's format. With
 * create, in one transaction under an advisory lock (two creators do not
 * race; a failure leaves nothing made). 0; OST_ENOTFOUND when there is no
 * schema and create is not set; OST_ECORRUPT for tables that are not
 * ostore's (nothing is made then); OST_EVERSION for another format; or a
 * failure of the server. */
static int schema_open(ost__engine *e, PGconn *c, bool create, bool *dels) {
    int rc = 0, present = 0;
    if (create) {
        rc = run0(e, c, "creating the schema", "BEGIN", NULL);
        if (!rc)
            rc = run0(e, c, "creating the schema", "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK ")",
                      NULL);
    }
    if (!rc) rc = schema_valid(e, c, &present, dels);
    if (!rc && !present && !create)
        rc = ost__st_fail(e->st, OST_ENOTFOUND, "no ostore schema at %s (open with create to make one)",
                          e->shown);
    if (!rc && !present) {
        rc = exec_simple(e, c, "cannot create the schema", schema_sql);
        *dels = !rc;
    }
    if (create) {
        if (!rc) rc = run0(e, c, "creating the schema (commit)", "COMMIT", NULL);
        else if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    }
    if (rc) return rc;
    PGresult *r = run_as(e, c, "reading meta", "SELECT format FROM ost_meta WHERE id = 1", NULL, &rc,
                         NULL, "L");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t f = rd64(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (f < 3 || f > OST_STORE_FORMAT)
        return ost__st_fail(e->st, OST_EVERSION, "%s: store format %llu, this library reads 3 to %d",
                            e->shown, (unsigned long long)f, OST_STORE_FORMAT);
    if (f < OST_STORE_FORMAT && !e->read_only) {
        /* format 3's rows are format 4's as they are (dict states under a
         * class's own id): the upgrade sets the format, one statement,
         * all or nothing; a store another session upgraded meanwhile
         * stays as it is */
        params p = {0};
        p_i64(&p, OST_STORE_FORMAT);
        rc = run0(e, c, "upgrading the store's format",
                  "UPDATE ost_meta SET format = $1::bigint WHERE id = 1 AND format < $1::bigint", &p);
        if (rc) return rc;
        f = OST_STORE_FORMAT;
    }
    e->st->format = f;
    return 0;
}

/* Makes ost_mapdels in a database whose schema predates it, under the
 * schema lock: one simple query, which PostgreSQL runs as one implicit
 * transaction (the lock ends with it, a failure undoes it all). */
static int mapdels_ensure(ost__engine *e, PGconn *c) {
    return exec_simple(e, c, "making the table ost_mapdels",
                       "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK "); " MAPDELS_SQL);
}

/* Takes the exclusive option's lock on c, for the life of the session:
 * 0, OST_EBUSY when another session holds it, or the failure. */
static int take_excl(ost__engine *e, PGconn *c) {
    int rc = 0;
    PGresult *r = run_as(e, c, "taking the exclusive lock", "SELECT " EXCL_LOCK, NULL, &rc, NULL, "Z");
    if (!r) return rc;
    bool got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 1;
    PQclear(r);
    if (!got)
        return ost__st_fail(e->st, OST_EBUSY,
                            "%s: store is locked: another handle holds it with the exclusive "
                            "option (an ostore pack, import, copy or demo)",
                            e->shown);
    return 0;
}

/* ---- open, close, stat ---------------------------------------------------------- */

static void views_close(ost__engine *e);

static void eng_free(ost__engine *e) {
    if (!e) return;
    views_close(e);
    if (e->conn) PQfinish(e->conn);
    for (int i = 0; i < NVIEWS; i++) pthread_mutex_destroy(&e->views[i].xlock);
    pthread_mutex_destroy(&e->vlock);
    pthread_mutex_destroy(&e->lock);
    free(e->conninfo);
    free(e);
}

static int pg_open(ost_store *st, const char *addr, const ost_store_options *o,
                   ost__engine **out) {
    *out = NULL;
    if (!pg_claims(addr)) return ost__st_fail(st, OST_EINVAL, "not a PostgreSQL address");
    if (o && ((unsigned)o->durability > OST_SYNC_NONE || (o->create && o->read_only)))
        return ost__st_fail(st, OST_EINVAL, "postgresql store: bad options");
    if (o && o->prefetch_connections > 8)
        return ost__st_fail(st, OST_EINVAL,
                            "postgresql store: prefetch_connections is %u: at most 8 (0 or 1: one)",
                            o->prefetch_connections);
    ost__engine *e = calloc(1, sizeof *e);
    if (!e) return ost__st_fail(st, OST_ENOMEM, "out of memory");
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->vlock, NULL);
    for (int i = 0; i < NVIEWS; i++) pthread_mutex_init(&e->views[i].xlock, NULL);
    e->st = st;
    e->read_only = o && o->read_only;
    e->par = o && o->prefetch_connections > 1 ? o->prefetch_connections : 1;
    if (e->par > 8) e->par = 8;
    e->sync_off = o && o->durability != OST_SYNC_FULL;
    ost__addr_scrub(addr, e->shown, sizeof e->shown);
    e->conninfo = strdup(conn_string(addr));
    if (!e->conninfo) {
        eng_free(e);
        return ost__st_fail(st, OST_ENOMEM, "out of memory");
    }
    PGconn *c;
    int rc = connect_db(e, &c);
    if (rc) {
        eng_free(e);
        return rc;
    }
    e->conn = c;
    bool dels = false;
    rc = schema_open(e, c, o && o->create && !e->read_only, &dels);
    /* only when it is missing: CREATE TABLE IF NOT EXISTS needs the
     * right to create in the schema even when the table is there
     * (RangeVarGetAndCheckCreationNamespace in
     * src/backend/catalog/namespace.c checks ACL_CREATE first), which a
     * role with rights on the tables alone does not have */
    if (!rc && !e->read_only && !dels) rc = mapdels_ensure(e, c);
    if (!rc && o && o->exclusive) {
        rc = take_excl(e, c);
        e->exclusive = !rc;
    }
    if (rc) {
        eng_free(e);
        return rc;
    }
    snprintf(st->shown, sizeof st->shown, "%s", e->shown);
    *out = e;
    return 0;
}

static void pg_close(ost__engine *e) { eng_free(e); }

static int stat_once(ost__engine *e, ost_store_stats *out) {
    pthread_mutex_lock(&e->lock);
    PGconn *c;
    int rc = eng_conn(e, &c);
    PGresult *r = NULL;
    if (!rc) rc = run0(e, c, "stat", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL);
    if (!rc) {
        r = run_as(e, c, "stat",
                   "SELECT (SELECT count(*) FROM ost_records)::bigint, (SELECT "
                   "coalesce(sum(16 + octet_length(state)), 0) FROM ost_records)::bigint, next_oid, "
                   "last_serial FROM ost_meta WHERE id = 1",
                   NULL, &rc, NULL, "LLLL");
        PQclear(PQexec(c, "COMMIT"));
    }
    if (r && PQntuples(r) == 1) {
        memset(out, 0, sizeof *out);
        out->records = rd64(PQgetvalue(r, 0, 0));
        out->bytes = rd64(PQgetvalue(r, 0, 1));
        out->next_oid = rd64(PQgetvalue(r, 0, 2));
        out->last_serial = rd64(PQgetvalue(r, 0, 3));
        out->map_size = 0;
    } else if (r)
        rc = ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    PQclear(r);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* ---- sessions and snapshots ------------------------------------------------------ */

static int pg_sess_open(ost__engine *e, ost__sess **out) {
    ost__sess *s = calloc(1, sizeof *s);
    if (!s) return ost__st_fail(e->st, OST_ENOMEM, "out of memory");
    s->e = e;
    *out = s;
    return 0;
}

/* Ends the snapshot. The COMMIT goes out without waiting for its answer
 * (the server ends the transaction at once, and the session reads the
 * answer at its next statement, drain): one round trip less a
 * transaction. */
static void lazy_end(ost__sess *s);

static void pg_snap_end(ost__sess *s) {
    lazy_end(s);
    s->lost = false;
    if (s->snap && s->conn && PQstatus(s->conn) == CONNECTION_OK) {
        if (PQsendQuery(s->conn, "COMMIT")) s->end_sent = true;
        else PQclear(PQexec(s->conn, "COMMIT"));
    }
    s->snap = false;
    PQclear(s->pre);
    s->pre = NULL;
    keep_clear(s);
}

static void views_end(ost__engine *e);

static void pg_sess_close(ost__sess *s) {
    if (!s) return;
    pg_snap_end(s);
    /* the newest view ends with the connections that could adopt it: a
     * handle whose connections closed holds no snapshot */
    if (!s->is_view) views_end(s->e);
    drain(s);
    help_close(s, true);
    if (s->conn) PQfinish(s->conn);
    free(s->kept);
    free(s);
}

/* Reads meta's counters in the open transaction. */
static int read_meta(ost__sess *s, ost__snapinfo *info) {
    int rc = 0;
    PGresult *r = run_as(s->e, s->conn, "reading meta",
                         "SELECT last_serial, low, next_oid FROM ost_meta WHERE id = 1", NULL, &rc,
                         NULL, "LLL");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    info->last_serial = rd64(PQgetvalue(r, 0, 0));
    info->low = rd64(PQgetvalue(r, 0, 1));
    info->next_oid = rd64(PQgetvalue(r, 0, 2));
    PQclear(r);
    return 0;
}

/* The hot statements, of readers (record reads, the commit log) and of
 * commits (the row locks, the serial with the records and the log), are
 * prepared once per server connection: each then costs the server no
 * parse and no plan (a single-row read by key spends about half its time
 * there otherwise, and a commit runs two of them). */
#define UPSERT_RECORDS(SERIAL)                                                                 \
    "INSERT INTO ost_records (oid, serial, cid, state) SELECT o, " SERIAL ", c, st FROM "      \
    "unnest($1::bigint[], $2::int[], $3::bytea[]) AS u(o, c, st) ON CONFLICT (oid) DO UPDATE " \
    "SET serial = EXCLUDED.serial, cid = EXCLUDED.cid, state = EXCLUDED.state"

enum {
    PS_GET, PS_GET_MANY, PS_CHANGES, PS_LOCK, PS_WRITE, PS_GWRITE, PS_META, PS_META_LOCK,
    PS_ENT_GET, /* a map entry by key (ost_map_get: one round trip, no parse or plan) */
    /* a page of a map's entries (ecur_fetch): from the start or the end,
     * then from a key on, >=, >, <=, < */
    PS_EC_FIRST, PS_EC_LAST, PS_EC_GE, PS_EC_GT, PS_EC_LE, PS_EC_LT,
    PS_ENT_REF, /* an entry by key with the record its value refers to (pg_ent_get_ref) */
    PS_N
};
static const char *const ps_name[PS_N] = {"ost_get",   "ost_get_many", "ost_changes",
                                          "ost_lock",  "ost_write",    "ost_gwrite",
                                          "ost_meta",  "ost_meta_lock", "ost_ent_get",
                                          "ost_ec_first", "ost_ec_last", "ost_ec_ge",
                                          "ost_ec_gt", "ost_ec_le", "ost_ec_lt",
                                          "ost_ent_ref"};
/* An entry page's columns: the key, the serial and, when $3 is true, the
 * value (else an empty value: a walk of keys only reads none). */
#define EC_COLS                                                                           \
    "SELECT key, serial, CASE WHEN $3::bool THEN value ELSE ''::bytea END FROM ost_ments "
#define EC_WHERE "WHERE map = $1::bigint "
static const char *const ps_sql[PS_N] = {
    "SELECT serial, cid, state FROM ost_records WHERE oid = $1::bigint",
    "SELECT oid, serial, cid, state FROM ost_records WHERE oid = ANY($1::bigint[])",
    "SELECT serial, oids FROM ost_txlog WHERE serial > $1::bigint AND serial <= $2::bigint "
    "ORDER BY serial LIMIT $3::bigint",
    "SELECT oid, serial FROM ost_records WHERE oid = ANY($1::bigint[]) ORDER BY oid FOR UPDATE",
    /* takes the serial (which locks the meta row until the commit), writes
     * the first chunk of records and the commit log row, in one statement:
     * the fewer round trips under the lock, the more commits a second */
    "WITH m AS (UPDATE ost_meta SET last_serial = last_serial + 1 WHERE id = 1 RETURNING "
    "last_serial, low), r AS (" UPSERT_RECORDS("(SELECT last_serial FROM m)") "), l AS (INSERT "
    "INTO ost_txlog SELECT last_serial, $4::bytea FROM m WHERE octet_length($4::bytea) > 0) "
    "SELECT last_serial - 1, low FROM m",
    /* a whole group's writes (group_fast): the records, each with its
     * package's serial, the commit log rows and the last serial, the meta
     * row being locked already */
    "WITH m AS (UPDATE ost_meta SET last_serial = $7::bigint WHERE id = 1), r AS (INSERT INTO "
    "ost_records (oid, serial, cid, state) SELECT o, sr, c, st FROM unnest($1::bigint[], "
    "$2::bigint[], $3::int[], $4::bytea[]) AS u(o, sr, c, st) ON CONFLICT (oid) DO UPDATE SET "
    "serial = EXCLUDED.serial, cid = EXCLUDED.cid, state = EXCLUDED.state) INSERT INTO ost_txlog "
    "SELECT sl, lg FROM unnest($5::bigint[], $6::bytea[]) AS t(sl, lg) WHERE octet_length(lg) > 0",
    "SELECT last_serial, low, next_oid FROM ost_meta WHERE id = 1",
    "SELECT last_serial, low FROM ost_meta WHERE id = 1 FOR UPDATE",
    "SELECT serial, value FROM ost_ments WHERE map = $1::bigint AND key = $2::bytea",
    EC_COLS EC_WHERE "ORDER BY key LIMIT $2::bigint",
    EC_COLS EC_WHERE "ORDER BY key DESC LIMIT $2::bigint",
    EC_COLS EC_WHERE "AND key >= $4::bytea ORDER BY key LIMIT $2::bigint",
    EC_COLS EC_WHERE "AND key > $4::bytea ORDER BY key LIMIT $2::bigint",
    EC_COLS EC_WHERE "AND key <= $4::bytea ORDER BY key DESC LIMIT $2::bigint",
    EC_COLS EC_WHERE "AND key < $4::bytea ORDER BY key DESC LIMIT $2::bigint",
    /* the entry, and the record of the oid its value names when the value
     * starts as ostore writes a lone reference (pg_ent_get_ref): PROTO,
     * an optional FRAME, then BININT1, BININT2 or BININT (K, M, J) of the
     * oid; CASE evaluates its branches in order and lazily (AND need not),
     * so get_byte reads inside the value only; OFFSET 0 keeps the subquery
     * whole, so that p is computed once, not at each of its uses */
    "SELECT e.serial, e.value, r.oid, r.serial, r.cid, r.state FROM (SELECT serial, value, CASE "
    "WHEN octet_length(value) < 6 THEN NULL WHEN get_byte(value, 0) = 128 THEN CASE WHEN "
    "get_byte(value, 2) = 149 THEN 11 ELSE 2 END END AS p FROM ost_ments WHERE map = $1::bigint "
    "AND key = $2::bytea OFFSET 0) e LEFT JOIN ost_records r ON r.oid = CASE WHEN "
    "octet_length(e.value) >= e.p + 4 THEN CASE get_byte(e.value, e.p) WHEN 75 THEN "
    "get_byte(e.value, e.p + 1)::bigint WHEN 77 THEN get_byte(e.value, e.p + 1) + 256 * "
    "get_byte(e.value, e.p + 2)::bigint WHEN 74 THEN CASE WHEN octet_length(e.value) >= e.p + 5 "
    "THEN get_byte(e.value, e.p + 1) + 256 * get_byte(e.value, e.p + 2)::bigint + 65536 * "
    "get_byte(e.value, e.p + 3)::bigint + 16777216 * get_byte(e.value, e.p + 4)::bigint END END "
    "END",
};

/* Runs the statement which (PS_*) with the parameters of p, preparing it
 * first on its first use on the connection, as run runs sql: the result
 * or NULL with *code, *retry (if not NULL) and the store's message set. A
 * failed PREPARE (inside a transaction it ends it) is said as such. */
/* The shape of each statement's result (res_check): run_ps checks it. */
static const char *const ps_shape[PS_N] = {"LIB", "LLIB", "LB",  "LL",  "LL",  "",    "LLL", "LL",
                                           "LB",  "BLB",  "BLB", "BLB", "BLB", "BLB", "BLB",
                                           "LBllib"};

static PGresult *run_ps(ost__sess *s, int which, const char *what, const params *p, int *code,
                        bool *retry) {
    PGresult *r = NULL;
    if (!(s->prepared & 1u << which)) {
        TRIP();
        r = PQprepare(s->conn, ps_name[which], ps_sql[which], 0, NULL);
        if (r && PQresultStatus(r) == PGRES_COMMAND_OK) {
            s->prepared |= 1u << which;
            PQclear(r);
            r = NULL;
        }
    }
    if (s->prepared & 1u << which) {
        TRIP();
        r = PQexecPrepared(s->conn, ps_name[which], p->n, p->v, p->l, p->f, 1);
        ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            int rc = res_check(s->e, r, what, ps_shape[which]);
            if (!rc) return r;
            PQclear(r);
            if (retry) *retry = false;
            if (code) *code = rc;
            return NULL;
        }
    }
    char cause[240];
    pg_cause(s->conn, r, cause, sizeof cause);
    int rc = pg_code(s->conn, r);
    if (retry) *retry = pg_retryable(r);
    PQclear(r);
    if (code) *code = rc;
    ost__st_fail(s->e->st, rc, "%s: %s: %s", s->e->shown, what, cause);
    return NULL;
}

/* One statement of a pipeline: a prepared one (ps, PS_*) or sql. */
typedef struct {
    int ps;
    const char *sql;
    const params *p;
} pstmt;

/* Prepares which on s's connection unless it is already: 0 or the code,
 * with the store's message. */
static int ps_ready(ost__sess *s, int which) {
    if (s->prepared & 1u << which) return 0;
    TRIP();
    PGresult *r = PQprepare(s->conn, ps_name[which], ps_sql[which], 0, NULL);
    if (r && PQresultStatus(r) == PGRES_COMMAND_OK) {
        s->prepared |= 1u << which;
        PQclear(r);
        return 0;
    }
    char cause[240];
    pg_cause(s->conn, r, cause, sizeof cause);
    int rc = pg_code(s->conn, r);
    PQclear(r);
    return ost__st_fail(s->e->st, rc, "%s: preparing a statement: %s", s->e->shown, cause);
}

/* Sends st[0, n) on c in one pipeline (pipeline mode, then a sync):
 * false when libpq could not. */
static bool pipe_send(PGconn *c, const pstmt *st, int n) {
    bool ok = PQenterPipelineMode(c);
    for (int i = 0; i < n && ok; i++) {
        const params *p = st[i].p;
        int np = p ? p->n : 0;
        const char *const *v = p ? p->v : NULL;
        const int *l = p ? p->l : NULL, *f = p ? p->f : NULL;
        ok = st[i].ps >= 0 ? PQsendQueryPrepared(c, ps_name[st[i].ps], np, v, l, f, 1)
                           : PQsendQueryParams(c, st[i].sql, np, NULL, v, l, f, 1);
    }
    return ok && PQpipelineSync(c);
}

/* Reads the results of a pipeline of n statements that pipe_send sent
 * (sent: whether it did) and leaves pipeline mode: res[i] gets statement
 * i's result when it succeeded (the caller clears it), NULL otherwise.
 * Returns 0 when all succeeded, else the code of the first failure, with
 * its cause, and *failed its index; n when the pipeline itself failed
 * (every res[i] is then NULL, and c is in no known state: the caller
 * closes it). */
static int pipe_recv(PGconn *c, bool sent, int n, PGresult **res, int *failed, char *cause,
                     size_t cap) {
    int rc = 0;
    bool ok = sent;
    *failed = -1;
    *cause = 0;
    for (int i = 0; i < n; i++) res[i] = NULL;
    for (int i = 0; i < n && ok; i++) {
        PGresult *r = PQgetResult(c);
        if (!r) {
            ok = false;
            break;
        }
        ExecStatusType t = PQresultStatus(r);
        if (t == PGRES_TUPLES_OK || t == PGRES_COMMAND_OK) {
            res[i] = r;
        } else {
            if (*failed < 0 && t != PGRES_PIPELINE_ABORTED) {
                *failed = i;
                pg_cause(c, r, cause, cap);
                rc = pg_code(c, r);
            }
            PQclear(r);
        }
        PGresult *end = PQgetResult(c); /* NULL after each statement's result */
        if (end) {
            PQclear(end);
            ok = false;
        }
    }
    PGresult *sync = ok ? PQgetResult(c) : NULL;
    ok = ok && sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    ok = ok && PQexitPipelineMode(c);
    if (!ok) {
        if (*failed < 0 || !*cause) pg_cause(c, NULL, cause, cap);
        *failed = n;
        rc = OST_EIO;
        for (int i = 0; i < n; i++) {
            PQclear(res[i]);
            res[i] = NULL;
        }
    }
    return rc;
}

/* The failure rc of a pipeline on s's connection (broken: the pipeline
 * itself failed, and the connection is closed), as the store's message:
 * rc. */
static int pipe_fail(ost__sess *s, const char *what, int rc, bool broken, const char *cause) {
    if (broken) {
        /* the session reconnects at its next use */
        PQfinish(s->conn);
        s->conn = NULL;
        s->prepared = 0;
    }
    return ost__st_fail(s->e->st, rc, "%s: %s: %s", s->e->shown, what, cause);
}

/* Sends st[0, n) in one pipeline on s's connection and reads their
 * results: res[i] gets statement i's result when it succeeded (the caller
 * clears it), NULL otherwise. Returns 0 when all succeeded; else the code
 * of the first failure with the store's message naming what, and *failed
 * its index (n: the pipeline itself failed, the connection is then
 * closed, and what the server did is not known). */
static int pipe_run(ost__sess *s, const char *what, const pstmt *st, int n, PGresult **res,
                    int *failed) {
    char cause[240];
    TRIP();
    bool sent = pipe_send(s->conn, st, n);
    int rc = pipe_recv(s->conn, sent, n, res, failed, cause, sizeof cause);
    return rc ? pipe_fail(s, what, rc, *failed == n, cause) : 0;
}

/* pg_snap_begin's first half: sends its round trip without waiting for
 * the answer, which snap_recv reads. 0, or the failure (nothing sent). */
static int snap_send(ost__sess *s, snapsend *ss) {
    lazy_end(s);
    s->lost = false;
    bool end = s->snap; /* the open snapshot's COMMIT goes first */
    if (end) {
        s->snap = false;
        PQclear(s->pre);
        s->pre = NULL;
        keep_clear(s);
    }
    PGconn *was = s->conn;
    int rc = sess_conn(s);
    if (rc) return rc;
    if (s->conn != was) end = false; /* a new connection: nothing to end */
    uint64_t from = s->info.last_serial;
    bool pre = s->had_snap;
    if ((rc = ps_ready(s, PS_META)) || (pre && (rc = ps_ready(s, PS_CHANGES)))) {
        /* ps_ready's message, copied: formatting the store's message
         * from itself wrote over what it read ("beginning a snapshot:"
         * twice, the cause cut) */
        char cause[300];
        const char *m = ost_store_errmsg(s->e->st);
        size_t n = strlen(s->e->shown);
        if (!strncmp(m, s->e->shown, n) && !strncmp(m + n, ": ", 2)) m += n + 2;
        snprintf(cause, sizeof cause, "%s", m);
        return ost__st_fail(s->e->st, rc, "%s: beginning a snapshot: %s", s->e->shown, cause);
    }
    params q = {0};
    p_i64(&q, from);
    p_i64(&q, (uint64_t)INT64_MAX);
    p_i64(&q, (uint64_t)PAGE_ROWS);
    pstmt st[4] = {{-1, "COMMIT", NULL},
                   {-1, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL},
                   {PS_META, NULL, NULL},
                   {PS_CHANGES, NULL, &q}};
    s->snap = true; /* pg_snap_end ends what was begun, whatever fails */
    *ss = (snapsend){end, pre, false, (end ? 1 : 0) + (pre ? 3 : 2), from};
    TRIP();
    ss->sent = pipe_send(s->conn, end ? st : st + 1, ss->n);
    return 0;
}

/* pg_snap_begin's second half: reads the answer to what snap_send sent
 * (ss). 0 or the failure (the snapshot is then ended). */
static int snap_recv(ost__sess *s, const snapsend *ss, ost__snapinfo *info) {
    bool end = ss->end, pre = ss->pre;
    uint64_t from = ss->from;
    PGresult *all[4] = {NULL}, **res = all + 1;
    int failed;
    char cause[240];
    int rc = pipe_recv(s->conn, ss->sent, ss->n, end ? all : res, &failed, cause, sizeof cause);
    if (rc) {
        pipe_fail(s, "beginning a snapshot", rc, failed == ss->n, cause);
        pg_snap_end(s);
        return rc;
    }
    PQclear(all[0]);
    PGresult *r = res[1];
    bool ok = PQntuples(r) == 1;
    int bad = ok ? res_check(s->e, r, "beginning a snapshot (meta)", ps_shape[PS_META]) : 0;
    if (!bad && pre) bad = res_check(s->e, res[2], "beginning a snapshot (the commit log)",
                                     ps_shape[PS_CHANGES]);
    ok = ok && !bad;
    if (ok) {
        /* a negative counter, which only damage writes, becomes the u64
         * of the same bits: the store's checks report it as absurd */
        s->info.last_serial = rd64(PQgetvalue(r, 0, 0));
        s->info.low = rd64(PQgetvalue(r, 0, 1));
        s->info.next_oid = rd64(PQgetvalue(r, 0, 2));
    }
    PQclear(res[0]);
    PQclear(r);
    if (!ok) {
        PQclear(pre ? res[2] : NULL);
        pg_snap_end(s);
        return bad ? bad : ost__st_fail(s->e->st, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    s->had_snap = true;
    /* the helpers of large reads connect with the session's first
     * snapshot, not inside its first prefetch: a connection costs 12-14 ms
     * on the development machine, a tenth of a fresh connection's first
     * 20,000 prefetched reads (a failure only makes the session read
     * alone) */
    if (s->e->par > 1 && !s->help_off) (void)help_connect(s, s->e->par - 1);
    if (pre) {
        /* complete up to the last row when the page is full, else up to
         * the snapshot's last serial */
        int nt = PQntuples(res[2]);
        s->pre = res[2];
        s->pre_from = from;
        s->pre_to = nt == PAGE_ROWS ? rd64(PQgetvalue(res[2], nt - 1, 0)) : s->info.last_serial;
    }
    if (info) *info = s->info;
    return 0;
}

/* Begins the snapshot and reads meta in one round trip (a pipeline of
 * prepared statements), ending the open one first in the same round trip
 * (snap_renew). After a first snapshot, the same round trip reads the
 * commit log rows since the previous one's last serial (a page of them at
 * most), which changes then serves: the rows a REPEATABLE READ snapshot
 * sees are those of the commits meta's last_serial counts, as they commit
 * together. */
static int pg_snap_begin(ost__sess *s, ost__snapinfo *info) {
    snapsend ss;
    int rc = snap_send(s, &ss);
    return rc ? rc : snap_recv(s, &ss, info);
}

/* ---- views after a commit (snap_adopt) -------------------------------------------------
 * Right after a commit, every connection whose package it carried begins
 * its next transaction (store/conn.c, begin_txn). Each used to renew its
 * snapshot on its own server connection: a round trip that, at 16
 * committing threads, cost the server processes about 67 us of CPU per
 * commit, more than the commit itself. Instead, the session that made the
 * commit (the group committer's, most often) polls once for all of them,
 * on a connection of the engine's own: it begins a REPEATABLE READ
 * snapshot there and reads meta and the commit log rows since the last
 * poll, in one round trip (pg_snap_begin), and publishes it as the
 * current view. Each session of the group then adopts that view: it takes
 * the view's counters and log rows (the store's invalidations need no
 * more) and opens nothing on its own connection. Only when the
 * transaction reads from the server does the session begin its own
 * transaction on the view's snapshot (pg_export_snapshot on the view's
 * connection, once a view; SET TRANSACTION SNAPSHOT on the session's): it
 * sees exactly what the view saw, whatever committed since. A view's
 * snapshot stays open while it is current or adopted and not imported;
 * then its transaction ends. NVIEWS views at most: when none is free, no
 * poll is made and the sessions renew as before. */

/* Under e->vlock: ends the view's snapshot once no session may still
 * import it. */
static void view_idle(pgview *v) {
    if (v->refs || v->current || v->busy || !v->s) return;
    if (v->s->snap) pg_snap_end(v->s);
    v->snapid[0] = 0;
}

/* Drops the session's adopted view, if any: its snapshot is no longer the
 * view's. */
static void lazy_end(ost__sess *s) {
    if (s->pre_shared) {
        s->pre = NULL;
        s->pre_shared = false;
    }
    pgview *v = s->lazy;
    if (!v) return;
    s->lazy = NULL;
    pthread_mutex_lock(&s->e->vlock);
    v->refs--;
    view_idle(v);
    pthread_mutex_unlock(&s->e->vlock);
}

/* Ends every view no session holds (a drop or an import must lock the
 * tables, which an open snapshot's table locks would block). */
static void views_end(ost__engine *e) {
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS; i++) {
        e->views[i].current = false;
        view_idle(&e->views[i]);
    }
    e->view_last = 0; /* an import may start the serials over */
    pthread_mutex_unlock(&e->vlock);
}

/* Closes the views' sessions (the engine closes: no session is left). */
static void views_close(ost__engine *e) {
    for (int i = 0; i < NVIEWS; i++) {
        pgview *v = &e->views[i];
        pg_sess_close(v->s);
        v->s = NULL;
        v->refs = 0;
        v->current = v->busy = false;
        v->snapid[0] = 0;
    }
}

/* Marks v, whose poll ended with rc, no longer busy: the current view if
 * the poll succeeded and no newer view came meanwhile, else idle. */
static void view_done(ost__engine *e, pgview *v, int rc) {
    pthread_mutex_lock(&e->vlock);
    v->busy = false;
    if (!rc && v->s->info.last_serial >= e->view_last) {
        for (int i = 0; i < NVIEWS; i++)
            if (e->views[i].current) {
                e->views[i].current = false;
                view_idle(&e->views[i]);
            }
        v->current = true;
        v->snapid[0] = 0;
        e->view_last = v->s->info.last_serial;
    } else
        view_idle(v); /* failed, or a newer view came meanwhile */
    pthread_mutex_unlock(&e->vlock);
}

/* The store's message, kept across a view's poll: a poll's failure is no
 * failure of the commit that made it. */
static void msg_keep(ost__engine *e, char *msg, size_t cap) {
    snprintf(msg, cap, "%s", ost_store_errmsg(e->st));
}

static void msg_back(ost__engine *e, int rc, const char *msg) {
    if (rc && msg[0]) ost__st_fail(e->st, rc, "%s", msg);
    else if (rc) ost__st_clear(e->st);
}

/* After a commit, the first half of a view's poll: takes a free view and
 * sends the beginning of its snapshot (ss), with the commit log rows
 * after `from` (or after the last view's serial, if lower), without
 * waiting for the answer (view_recv reads it). The view, busy; NULL when
 * none is free or the send failed (the sessions then renew). The
 * caller's message of the store is kept. */
static pgview *view_send(ost__engine *e, uint64_t from, snapsend *ss) {
    pgview *v = NULL;
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS && !v; i++) {
        pgview *w = &e->views[i];
        if (!w->busy && !w->current && !w->refs) v = w;
    }
    if (v) {
        v->busy = true;
        if (e->view_last && e->view_last < from) from = e->view_last;
    }
    pthread_mutex_unlock(&e->vlock);
    if (!v) return NULL;
    char msg[512]; /* the store's message buffer's size (store.c) */
    msg_keep(e, msg, sizeof msg);
    int rc = 0;
    if (!v->s && !(rc = pg_sess_open(e, &v->s))) {
        v->s->help_off = true; /* no prefetch helpers */
        v->s->is_view = true;
    }
    if (!rc) {
        v->s->info.last_serial = from; /* its log rows start after from */
        v->s->had_snap = true;
        rc = snap_send(v->s, ss);
        /* not sent: snap_recv closes the connection and ends the snapshot */
        if (!rc && !ss->sent) rc = snap_recv(v->s, ss, NULL);
    }
    if (rc) {
        view_done(e, v, rc);
        v = NULL;
    }
    msg_back(e, rc, msg);
    return v;
}

/* The second half: reads the answer to what view_send sent for v (ss).
 * keep: v becomes the store's current view (views after a commit,
 * above); else the snapshot is read and dropped. The caller's message of
 * the store is kept. */
static void view_recv(ost__engine *e, pgview *v, const snapsend *ss, bool keep) {
    char msg[512];
    msg_keep(e, msg, sizeof msg);
    int rc = snap_recv(v->s, ss, NULL);
    view_done(e, v, rc ? rc : keep ? 0 : OST_ENOTFOUND);
    msg_back(e, rc, msg);
}

/* After a commit: a view of the store as it is now, in one round trip
 * (view_send, view_recv). */
static void view_poll(ost__engine *e, uint64_t from) {
    snapsend ss;
    pgview *v = view_send(e, from, &ss);
    if (v) view_recv(e, v, &ss, true);
}

static int pg_snap_adopt(ost__sess *s, uint64_t serial, uint64_t after, ost__snapinfo *info) {
    ost__engine *e = s->e;
    pgview *v = NULL;
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS && !v; i++)
        if (e->views[i].current) v = &e->views[i];
    /* new enough, and its log rows cover what the store asks changes for
     * (after this session's last snapshot): else renewing costs less than
     * importing the view for the rest of the log */
    const ost__sess *vs = v ? v->s : NULL;
    if (vs && vs->info.last_serial >= serial && vs->info.last_serial >= s->info.last_serial &&
        vs->pre && after >= vs->pre_from && vs->pre_to >= vs->info.last_serial)
        v->refs++;
    else
        v = NULL;
    pthread_mutex_unlock(&e->vlock);
    if (!v) return OST_ENOTFOUND;
    /* the open snapshot ends (its COMMIT is not waited for) */
    pg_snap_end(s);
    /* the view's session changes only when no session holds it */
    s->lazy = v;
    s->pre = v->s->pre;
    s->pre_shared = true;
    s->pre_from = v->s->pre_from;
    s->pre_to = v->s->pre_to;
    s->info = v->s->info;
    s->had_snap = true;
    OST__COUNT(pg_adopted, 1); /* tests: testctl.h */
    if (info) *info = s->info;
    return 0;
}

/* Whether id looks like what pg_export_snapshot returns (hex digits and
 * dashes): it goes into a statement's text. */
static bool snapid_ok(const char *id) {
    if (!*id) return false;
    for (; *id; id++)
        if (!(*id == '-' || (*id >= '0' && *id <= '9') || (*id >= 'A' && *id <= 'F') ||
              (*id >= 'a' && *id <= 'f')))
            return false;
    return true;
}

/* Begins the session's transaction on the snapshot named id: 0 or the
 * failure. A connection the server closed while it sat idle (nothing
 * tells before it is used) is made again once: the view still holds the
 * snapshot. */
static int import_on(ost__sess *s, const char *id) {
    ost__engine *e = s->e;
    char sql[160];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '%s'", id);
    int rc = 0;
    for (int tries = 0; tries < 2; tries++) {
        if ((rc = sess_conn(s))) return rc;
        rc = exec_simple(e, s->conn, "beginning this transaction's snapshot", sql);
        if (!rc) return 0;
        if (PQstatus(s->conn) == CONNECTION_OK) {
            if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
            return rc;
        }
    }
    return rc;
}

/* A read of a session with an adopted view: its own transaction begins
 * on the view's snapshot. Whatever happens, the view is released; on
 * failure the snapshot is lost: reads fail (OST_EIO) until it ends. */
static int view_import(ost__sess *s) {
    ost__engine *e = s->e;
    pgview *v = s->lazy;
    char id[sizeof v->snapid] = "", cause[240] = "the connection to the server was lost";
    /* the session's ref keeps the view's snapshot (and session) as they
     * are; importers of the same view take turns on its connection */
    pthread_mutex_lock(&v->xlock);
    if (!v->snapid[0] && v->s->conn && PQstatus(v->s->conn) == CONNECTION_OK) {
        PGresult *r = PQexec(v->s->conn, "SELECT pg_export_snapshot()");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
            PQgetlength(r, 0, 0) < (int)sizeof v->snapid && snapid_ok(PQgetvalue(r, 0, 0)))
            snprintf(v->snapid, sizeof v->snapid, "%s", PQgetvalue(r, 0, 0));
        else
            pg_cause(v->s->conn, r, cause, sizeof cause);
        PQclear(r);
    }
    snprintf(id, sizeof id, "%s", v->snapid);
    pthread_mutex_unlock(&v->xlock);
    int rc = id[0] ? import_on(s, id) : OST_EIO;
    if (rc && id[0]) snprintf(cause, sizeof cause, "%s", ost_store_errmsg(e->st));
    lazy_end(s); /* imported or lost: the view is not needed */
    if (rc) {
        s->lost = true;
        return ost__st_fail(e->st, rc, "%s: cannot share this transaction's snapshot: %s (abort and retry)",
                            e->shown, cause);
    }
    s->snap = true;
    OST__COUNT(pg_imported, 1); /* tests: testctl.h */
    return 0;
}

static bool pg_snap_moved(ost__sess *s) {
    (void)s;
    return false; /* a REPEATABLE READ snapshot never moves */
}

/* Pins hold nothing more here: the snapshot never reopens by itself, and
 * every view stays valid until snap_end (keep). */
static int pg_pin(ost__sess *s) {
    s->pins++;
    return 0;
}

static void pg_unpin(ost__sess *s) {
    if (s->pins) s->pins--;
}

/* Whether a read may run: in a snapshot, inside commit, or (tools, tests)
 * in autocommit on a live connection. */
static int read_ready(ost__sess *s) {
    if (s->snap || s->write) return 0;
    if (s->lazy) return view_import(s);
    if (s->lost)
        return ost__st_fail(s->e->st, OST_EIO,
                            "%s: this transaction's snapshot was lost: abort and retry", s->e->shown);
    return sess_conn(s);
}

/* ---- record reads ---------------------------------------------------------------- */

static void fill_rec(const PGresult *r, int row, int col, ost__recview *v) {
    v->serial = rd64(PQgetvalue(r, row, col));
    v->cid = rd32(PQgetvalue(r, row, col + 1));
    v->pickle = (const uint8_t *)PQgetvalue(r, row, col + 2);
    v->len = (size_t)PQgetlength(r, row, col + 2);
    v->damage = NULL; /* the server checks its own pages */
    v->stored = 0;
}

static int pg_get(ost__sess *s, uint64_t oid, ost__recview *v) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, oid);
    PGresult *r = run_ps(s, PS_GET, "reading a record", &p, &rc, NULL);
    if (!r) return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ENOTFOUND, "oid %llu: no such object", (unsigned long long)oid);
    }
    fill_rec(r, 0, 0, v);
    return keep(s, r);
}

/* The records a part of a parallel get_many has at least. */
#define PAR_MIN 128
/* get_many_par's mark of an oid found. */
#define FOUND ((uint64_t)1 << 63)

/* An int8[] parameter of oids[0, n) into a and p: 0 or OST_ENOMEM. */
static int oid_array(ost__engine *e, const uint64_t *oids, size_t n, arr *a, params *p) {
    arr_begin(a, OIDTYPE_INT8);
    for (size_t i = 0; i < n; i++) arr_add_i64(a, oids[i]);
    if (arr_end(a)) return ost__st_fail(e->st, OST_ENOMEM, "out of memory");
    *p = (params){0};
    p_bytes(p, a->b, a->n);
    return 0;
}

/* Keeps r (get_many's rows) and calls fn on each. */
static int rows_out(ost__sess *s, PGresult *r, ost__rec_fn fn, void *ud) {
    int rc = res_check(s->e, r, "reading records", ps_shape[PS_GET_MANY]);
    if (rc) {
        PQclear(r);
        return rc;
    }
    rc = keep(s, r);
    for (int i = 0, nt = PQntuples(r); i < nt && !rc; i++) {
        ost__recview v;
        fill_rec(r, i, 1, &v);
        rc = fn(ud, rd64(PQgetvalue(r, i, 0)), &v);
    }
    return rc;
}

/* get_many on the session's connection alone, in one round trip. */
static int get_many_one(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    arr a = {0};
    params p;
    int rc = oid_array(s->e, oids, n, &a, &p);
    if (!rc) {
        PGresult *r = run_ps(s, PS_GET_MANY, "reading records", &p, &rc, NULL);
        if (r) rc = rows_out(s, r, fn, ud);
    }
    arr_free(&a);
    return rc;
}

/* Connects the first `want` helpers of s that are not connected yet, each
 * with get_many prepared: true when they are all there. A failure (the
 * server may allow no more connections) closes them all, and the session
 * reads alone from then on. */
static bool help_connect(ost__sess *s, size_t want) {
    while (s->nhelp < want) {
        ost__help *h = &s->help[s->nhelp];
        if (connect_db(s->e, &h->conn)) {
            help_close(s, true);
            return false;
        }
        PGresult *r = PQprepare(h->conn, ps_name[PS_GET_MANY], ps_sql[PS_GET_MANY], 0, NULL);
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        s->nhelp++;
        if (!ok) {
            help_close(s, true);
            return false;
        }
    }
    return true;
}

/* get_many in parts, in parallel: the first on the session's connection,
 * each other one on a helper connection, all sent before any answer is
 * read, so that the server reads them on as many processes at once. A
 * helper reads outside the session's snapshot, as a statement of its own
 * (no transaction to begin, export or import): its snapshot is later than
 * the session's, and serials become visible in commit order (the meta
 * row lock), so a record it finds with a serial the session's snapshot
 * counts (<= last_serial) is the very version the snapshot holds; one
 * with a later serial, or not found (a commit or a pack since), is read
 * again on the session's connection, as are the parts of a helper that
 * failed (which is closed: the session reads alone from then on). 1 when
 * it does not apply (the caller reads alone); else 0 or the failure. */
static int get_many_par(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    ost__engine *e = s->e;
    size_t parts = e->par;
    if (parts > n / PAR_MIN) parts = n / PAR_MIN;
    if (parts < 2 || s->help_off || !s->snap || s->write) return 1;
    int rc = ps_ready(s, PS_GET_MANY);
    if (rc) return rc;
    if (!help_connect(s, parts - 1)) return 1;
    uint64_t last = s->info.last_serial;
    arr a[8] = {{0}};
    params q[8];
    bool sent[8] = {false};
    size_t at[9];
    for (size_t i = 0; i <= parts; i++) at[i] = i * n / parts;
    for (size_t i = 0; i < parts && !rc; i++)
        rc = oid_array(e, oids + at[i], at[i + 1] - at[i], &a[i], &q[i]);
    /* the helpers' parts, then the session's, before reading any answer */
    TRIP();
    for (size_t i = 1; i < parts && !rc; i++)
        sent[i] = PQsendQueryPrepared(s->help[i - 1].conn, ps_name[PS_GET_MANY], q[i].n, q[i].v,
                                      q[i].l, q[i].f, 1);
    bool main_sent = !rc && PQsendQueryPrepared(s->conn, ps_name[PS_GET_MANY], q[0].n, q[0].v,
                                                 q[0].l, q[0].f, 1);
    if (!rc && !main_sent) {
        char cause[240];
        pg_cause(s->conn, NULL, cause, sizeof cause);
        rc = ost__st_fail(e->st, OST_EIO, "%s: reading records: %s", e->shown, cause);
    }
    if (main_sent) {
        PGresult *r, *rows = NULL;
        while ((r = PQgetResult(s->conn))) {
            if (!rows && PQresultStatus(r) == PGRES_TUPLES_OK) {
                rows = r;
            } else {
                if (!rows && !rc) {
                    char cause[240];
                    pg_cause(s->conn, r, cause, sizeof cause);
                    rc = ost__st_fail(e->st, pg_code(s->conn, r), "%s: reading records: %s",
                                      e->shown, cause);
                }
                PQclear(r);
            }
        }
        if (rows && !rc) rc = rows_out(s, rows, fn, ud);
        else PQclear(rows);
    }
    /* the helpers' answers, every one read whatever happened before */
    bool failed = false;
    uint64_t *redo = NULL;
    size_t nredo = 0;
    for (size_t i = 1; i < parts; i++) {
        PGresult *r, *rows = NULL;
        if (sent[i])
            while ((r = PQgetResult(s->help[i - 1].conn))) {
                if (!rows && PQresultStatus(r) == PGRES_TUPLES_OK) rows = r;
                else PQclear(r);
            }
        size_t k = at[i + 1] - at[i];
        if (!rows) failed = true;
        if (rc || (!redo && !(redo = malloc(n * sizeof *redo)))) {
            PQclear(rows);
            if (!rc) rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
            continue;
        }
        if (!rows) { /* the whole part again */
            memcpy(redo + nredo, oids + at[i], k * sizeof *redo);
            nredo += k;
            continue;
        }
        if ((rc = res_check(e, rows, "reading records", ps_shape[PS_GET_MANY]))) {
            PQclear(rows);
            continue;
        }
        if ((rc = keep(s, rows))) continue;
        /* the rows the snapshot holds as they are; the part's other oids
         * again (found: marked by a sorted copy) */
        uint64_t *mine = redo + nredo;
        memcpy(mine, oids + at[i], k * sizeof *mine);
        qsort(mine, k, sizeof *mine, ost__u64_cmp);
        for (int j = 0, nt = PQntuples(rows); j < nt && !rc; j++) {
            uint64_t oid = rd64(PQgetvalue(rows, j, 0));
            if (rd64(PQgetvalue(rows, j, 1)) > last) continue;
            /* found: the top bit marks it (oids stay below 2^63), and the
             * search compares without it, so the copy stays sorted */
            size_t lo = 0, hi = k;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((mine[mid] & ~FOUND) < oid) lo = mid + 1;
                else hi = mid;
            }
            if (lo == k || (mine[lo] & ~FOUND) != oid) continue; /* not asked: cannot be */
            for (size_t m = lo; m < k && (mine[m] & ~FOUND) == oid; m++) mine[m] |= FOUND;
            ost__recview v;
            fill_rec(rows, j, 1, &v);
            rc = fn(ud, oid, &v);
            OST__COUNT(pg_par_given, 1); /* tests: testctl.h */
        }
        for (size_t j = 0; j < k; j++)
            if (!(mine[j] & FOUND)) redo[nredo++] = mine[j];
    }
    if (failed) help_close(s, true);
    if (!rc && nredo) {
        OST__COUNT(pg_par_redone, nredo); /* tests: testctl.h */
        rc = get_many_one(s, redo, nredo, fn, ud);
    }
    free(redo);
    for (size_t i = 0; i < parts; i++) arr_free(&a[i]);
    return rc;
}

static int pg_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    if (!n) return 0;
    int rc = read_ready(s);
    if (rc) return rc;
    if (s->e->par > 1 && (rc = get_many_par(s, oids, n, fn, ud)) != 1) return rc;
    return get_many_one(s, oids, n, fn, ud);
}

/* The records of [from, to) a page at a time: a page's recviews are valid
 * while fn runs on them (a scan of the whole store would otherwise hold
 * it all in memory). */
static int pg_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud) {
    int rc = read_ready(s);
    if (rc) return rc;
    if (!to || to > (uint64_t)INT64_MAX) to = (uint64_t)INT64_MAX;
    if (from >= to) return 0;
    uint64_t at = from;
    for (;;) {
        params p = {0};
        p_i64(&p, at);
        p_i64(&p, to);
        p_i64(&p, (uint64_t)PAGE_ROWS);
        PGresult *r = run_as(s->e, s->conn, "scanning records",
                             "SELECT oid, serial, cid, state FROM ost_records WHERE oid >= $1::bigint "
                             "AND oid < $2::bigint ORDER BY oid LIMIT $3::bigint",
                             &p, &rc, NULL, "LLIB");
        if (!r) return rc;
        int nt = PQntuples(r);
        uint64_t last = 0;
        for (int i = 0; i < nt && !rc; i++) {
            ost__recview v;
            fill_rec(r, i, 1, &v);
            last = rd64(PQgetvalue(r, i, 0));
            rc = fn(ud, last, &v);
        }
        PQclear(r);
        if (rc || nt < PAGE_ROWS || last + 1 >= to) return rc;
        at = last + 1;
    }
}

static int pg_changes(ost__sess *s, uint64_t after, uint64_t upto,
                      void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud,
                      bool *gap) {
    /* an adopted view's rows serve it without importing the view */
    bool covered = s->lazy && s->pre && after >= s->pre_from && upto <= s->pre_to;
    int rc = covered ? 0 : read_ready(s);
    if (rc) return rc;
    ost__snapinfo info = s->info;
    if (!s->snap && !covered && (rc = read_meta(s, &info))) return rc;
    if (gap) *gap = after + 1 < info.low;
    if (upto > (uint64_t)INT64_MAX) upto = (uint64_t)INT64_MAX;
    uint64_t at = after;
    if ((s->snap || covered) && s->pre && after >= s->pre_from && after < s->pre_to) {
        /* read with the snapshot's BEGIN */
        for (int i = 0, nt = PQntuples(s->pre); i < nt; i++) {
            uint64_t serial = rd64(PQgetvalue(s->pre, i, 0));
            if (serial > upto) break;
            if (serial <= after) continue;
            const char *o = PQgetvalue(s->pre, i, 1);
            int n = PQgetlength(s->pre, i, 1);
            for (int j = 0; j + 8 <= n; j += 8) fn(ud, rd64(o + j), serial);
        }
        at = s->pre_to < upto ? s->pre_to : upto;
    }
    while (at < upto) {
        params p = {0};
        p_i64(&p, at);
        p_i64(&p, upto);
        p_i64(&p, (uint64_t)PAGE_ROWS);
        PGresult *r = run_ps(s, PS_CHANGES, "reading the commit log", &p, &rc, NULL);
        if (!r) return rc;
        int nt = PQntuples(r);
        for (int i = 0; i < nt; i++) {
            at = rd64(PQgetvalue(r, i, 0));
            const char *o = PQgetvalue(r, i, 1);
            int n = PQgetlength(r, i, 1);
            for (int j = 0; j + 8 <= n; j += 8) fn(ud, rd64(o + j), at);
        }
        PQclear(r);
        if (nt < PAGE_ROWS) break;
    }
    return 0;
}

static int pg_class_get(ost__sess *s, uint32_t id, ost__classview *out) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i32(&p, id);
    PGresult *r = run_as(s->e, s->conn, "reading a class",
                         "SELECT id, module, name FROM ost_classes WHERE id = $1::int", &p, &rc, NULL,
                         "ITT");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ENOTFOUND, "%s: class id %u: no such class", s->e->shown, id);
    }
    *out = (ost__classview){id, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
                            (size_t)PQgetlength(r, 0, 1), (size_t)PQgetlength(r, 0, 2)};
    return keep(s, r);
}

static int pg_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud) {
    int rc = read_ready(s);
    if (rc) return rc;
    PGresult *r = run_as(s->e, s->conn, "reading the classes",
                         "SELECT id, module, name FROM ost_classes ORDER BY id", NULL, &rc, NULL,
                         "ITT");
    if (!r) return rc;
    if ((rc = keep(s, r))) return rc;
    for (int i = 0, nt = PQntuples(r); i < nt; i++) {
        ost__classview c = {rd32(PQgetvalue(r, i, 0)), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                            (size_t)PQgetlength(r, i, 1), (size_t)PQgetlength(r, i, 2)};
        if ((rc = fn(ud, &c))) return rc;
    }
    return 0;
}

/* ---- class ids and oid blocks (the engine's connection) --------------------------- */

/* Looks the class up: 0 with *id, OST_ENOTFOUND, or a code. */
static int class_find(ost__engine *e, PGconn *c, const char *m, size_t ml, const char *n,
                      size_t nl, uint32_t *id) {
    params p = {0};
    p_bytes(&p, m, ml);
    p_bytes(&p, n, nl);
    int rc = 0;
    PGresult *r = run_as(e, c, "reading a class",
                         "SELECT id FROM ost_classes WHERE module = $1::text AND name = $2::text",
                         &p, &rc, NULL, "I");
    if (!r) return rc;
    rc = PQntuples(r) ? 0 : OST_ENOTFOUND;
    if (!rc) *id = rd32(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

static int class_id_once(ost__engine *e, const char *module, size_t mlen, const char *name,
                         size_t nlen, bool create, uint32_t *id) {
    pthread_mutex_lock(&e->lock);
    PGconn *c;
    int rc = eng_conn(e, &c);
    for (int tries = 0; !rc; tries++) {
        rc = class_find(e, c, module, mlen, name, nlen, id);
        if (rc != OST_ENOTFOUND) break;
        if (!create) {
            rc = ost__st_fail(e->st, OST_ENOTFOUND, "%s: class %.*s.%.*s: not in the class table",
                              e->shown, (int)mlen, module, (int)nlen, name);
            break;
        }
        if (e->read_only) {
            rc = ost__st_fail(e->st, OST_EREADONLY, "%s: cannot add a class: the store is read-only",
                              e->shown);
            break;
        }
        if (tries == 3) {
            rc = ost__st_fail(e->st, OST_EIO, "%s: class %.*s.%.*s: could not be added", e->shown,
                              (int)mlen, module, (int)nlen, name);
            break;
        }
        /* A new id under the meta row lock; a session racing us for the
         * same class fails on UNIQUE (module, name) and reads it again. */
        if ((rc = run0(e, c, "adding a class", "BEGIN", NULL))) break;
        PGresult *r = run_as(e, c, "adding a class",
                             "SELECT next_class FROM ost_meta WHERE id = 1 FOR UPDATE", NULL, &rc,
                             NULL, "L");
        if (r && PQntuples(r) == 1) {
            uint64_t next = rd64(PQgetvalue(r, 0, 0));
            if (next >= OST__CLASS_LIMIT) {
                rc = ost__st_fail(e->st, OST_ELIMIT, "%s: the class table is full", e->shown);
            } else {
                params p = {0};
                p_i32(&p, (uint32_t)next);
                p_bytes(&p, module, mlen);
                p_bytes(&p, name, nlen);
                PGresult *ir = PQexecParams(c,
                                            "INSERT INTO ost_classes VALUES ($1::int, $2::text, $3::text);"
                                            ,
                                            p.n, NULL, p.v, p.l, p.f, 1);
                if (PQresultStatus(ir) == PGRES_COMMAND_OK) {
                    rc = run0(e, c, "adding a class",
                              "UPDATE ost_meta SET next_class = next_class + 1 WHERE id = 1", NULL);
                    if (!rc) rc = run0(e, c, "adding a class (commit)", "COMMIT", NULL);
                    if (!rc) {
                        *id = (uint32_t)next;
                        PQclear(r);
                        PQclear(ir);
                        break;
                    }
                } else {
                    const char *sqlst = PQresultErrorField(ir, PG_DIAG_SQLSTATE);
                    if (sqlst && !strcmp(sqlst, "23505")) rc = OST_ENOTFOUND; /* raced: read again */
                    else {
                        char cause[240];
                        pg_cause(c, ir, cause, sizeof cause);
                        rc = ost__st_fail(e->st, pg_code(c, ir), "%s: adding a class: %s", e->shown,
                                          cause);
                    }
                }
                PQclear(ir);
            }
        } else if (r)
            rc = ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
        PQclear(r);
        if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
        if (rc != OST_ENOTFOUND) break;
        rc = 0;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int reserve_once(ost__engine *e, uint64_t want, uint64_t *first) {
    if (e->read_only)
        return ost__st_fail(e->st, OST_EREADONLY, "%s: cannot reserve oids: the store is read-only",
                            e->shown);
    pthread_mutex_lock(&e->lock);
    PGconn *c = NULL; /* NULL when eng_conn fails: PQstatus says CONNECTION_BAD */
    int rc = eng_conn(e, &c);
    PGresult *r = NULL;
    if (!rc) rc = run0(e, c, "reserving oids", "BEGIN", NULL);
    if (!rc)
        r = run_as(e, c, "reserving oids", "SELECT next_oid FROM ost_meta WHERE id = 1 FOR UPDATE",
                   NULL, &rc, NULL, "L");
    if (r && PQntuples(r) != 1) rc = ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    if (r && !rc) {
        uint64_t next = rd64(PQgetvalue(r, 0, 0));
        /* next_oid is a bigint: the last oid handed out is 2^63 - 2 */
        if (next > (uint64_t)INT64_MAX)
            rc = ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (next_oid %llu)", e->shown,
                              (unsigned long long)next);
        else if (want > (uint64_t)INT64_MAX - next)
            rc = ost__st_fail(e->st, OST_ELIMIT,
                              "%s: cannot reserve %llu oids: the store's oids would pass 2^63",
                              e->shown, (unsigned long long)want);
        else {
            params p = {0};
            p_i64(&p, next + want);
            rc = run0(e, c, "reserving oids", "UPDATE ost_meta SET next_oid = $1::bigint WHERE id = 1", &p);
            if (!rc) rc = run0(e, c, "reserving oids (commit)", "COMMIT", NULL);
            if (!rc) *first = next;
        }
    }
    PQclear(r);
    if (rc && PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* Whether the engine's connection broke in its last statement (the server
 * restarted): its operations then run once more on a new one. */
static bool eng_lost(ost__engine *e) {
    pthread_mutex_lock(&e->lock);
    bool lost = e->conn && PQstatus(e->conn) != CONNECTION_OK;
    pthread_mutex_unlock(&e->lock);
    return lost;
}

static int pg_stat(ost__engine *e, ost_store_stats *out) {
    int rc = stat_once(e, out);
    if (rc == OST_EIO && eng_lost(e)) rc = stat_once(e, out);
    return rc;
}

static int pg_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                       size_t nlen, bool create, uint32_t *id) {
    int rc = class_id_once(e, module, mlen, name, nlen, create, id);
    if (rc == OST_EIO && eng_lost(e)) rc = class_id_once(e, module, mlen, name, nlen, create, id);
    return rc;
}

static int pg_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first) {
    int rc = reserve_once(e, want, first);
    if (rc == OST_EIO && eng_lost(e)) rc = reserve_once(e, want, first);
    return rc;
}

/* ---- map entries ------------------------------------------------------------------- */

static int pg_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *out) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r = run_ps(s, PS_ENT_GET, "reading a map entry", &p, &rc, NULL);
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ENOTFOUND;
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    return keep(s, r);
}

/* The entry of (map, key) as pg_ent_get, and in the same round trip the
 * record of the object its value refers to when the value is a lone
 * reference in the form ostore writes: *ref gets its oid (UINT64_MAX:
 * none found) and *rec the record, kept until the snapshot ends. */
static int pg_ent_get_ref(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                          ost__entry *out, uint64_t *ref, ost__recview *rec) {
    *ref = UINT64_MAX;
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r = run_ps(s, PS_ENT_REF, "reading a map entry", &p, &rc, NULL);
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ENOTFOUND;
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    if (!PQgetisnull(r, 0, 2) && !PQgetisnull(r, 0, 3) && !PQgetisnull(r, 0, 4) &&
        !PQgetisnull(r, 0, 5)) {
        *ref = rd64(PQgetvalue(r, 0, 2));
        fill_rec(r, 0, 3, rec);
    }
    return keep(s, r);
}

/* The entry and, when it is absent, its deletion record, in one round
 * trip (one row always: both sides of the outer joins may be NULL). Called
 * inside commit (ost__maps_apply) after the package took the meta row's
 * lock with its serial, which every package holds until it commits: a
 * package that deleted the key has committed before this statement
 * begins, and a READ COMMITTED statement sees every commit before it
 * (GetTransactionSnapshot in src/backend/utils/time/snapmgr.c takes a new
 * snapshot per statement unless IsolationUsesXactSnapshot()), as for the
 * entries themselves. tests/test_maps.c's every-history test runs on a
 * server as maps-pg. */
static int pg_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                          ost__entry *out, uint64_t *deleted) {
    *deleted = 0;
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    PGresult *r = run(s->e, s->conn, "reading a map entry",
                      "SELECT m.serial, m.value, d.serial FROM (SELECT $1::bigint AS map, "
                      "$2::bytea AS key) q LEFT JOIN ost_ments m ON m.map = q.map AND m.key = q.key "
                      "LEFT JOIN ost_mapdels d ON d.map = q.map AND d.key = q.key",
                      &p, &rc, NULL);
    if (!r) return rc;
    if (PQntuples(r) != 1 || PQnfields(r) != 3) {
        int rows = PQntuples(r);
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ECORRUPT, "%s: reading a map entry: %d rows", s->e->shown,
                            rows);
    }
    if (PQgetisnull(r, 0, 0)) {
        if (!PQgetisnull(r, 0, 2)) {
            if (PQgetlength(r, 0, 2) != 8) {
                PQclear(r);
                return ost__st_fail(s->e->st, OST_ECORRUPT,
                                    "%s: map %llu: a deletion record's serial is not a bigint",
                                    s->e->shown, (unsigned long long)map);
            }
            *deleted = rd64(PQgetvalue(r, 0, 2));
        }
        PQclear(r);
        return OST_ENOTFOUND;
    }
    if (PQgetlength(r, 0, 0) != 8) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ECORRUPT, "%s: map %llu: an entry's serial is not a bigint",
                            s->e->shown, (unsigned long long)map);
    }
    out->serial = rd64(PQgetvalue(r, 0, 0));
    out->data = (const uint8_t *)PQgetvalue(r, 0, 1);
    out->len = (size_t)PQgetlength(r, 0, 1);
    return keep(s, r);
}

static int pg_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, uint64_t serial,
                      const void *data, size_t len, bool *existed, bool *append) {
    (void)append; /* a hint LMDB uses; PostgreSQL's B-tree needs none */
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    p_i64(&p, serial);
    p_bytes(&p, data, len);
    /* xmax is 0 in a row the statement inserted, not in one it updated */
    PGresult *r = run_as(s->e, s->conn, "writing a map entry",
                         "INSERT INTO ost_ments VALUES ($1::bigint, $2::bytea, $3::bigint, "
                         "$4::bytea) ON CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial, "
                         "value = EXCLUDED.value RETURNING (xmax = 0)",
                         &p, &rc, NULL, "Z");
    if (!r) return rc;
    if (existed) *existed = PQntuples(r) == 1 && !PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    return 0;
}

/* Removes the entry and records its deletion by commit serial in one
 * statement: the count it reports is the INSERT's, one row when the
 * DELETE removed one. */
static int pg_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                      uint64_t serial) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    p_bytes(&p, key, klen);
    p_i64(&p, serial);
    PGresult *r = run(s->e, s->conn, "removing a map entry",
                      "WITH d AS (DELETE FROM ost_ments WHERE map = $1::bigint AND key = $2::bytea "
                      "RETURNING map, key) INSERT INTO ost_mapdels SELECT map, key, $3::bigint FROM "
                      "d ON CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial",
                      &p, &rc, NULL);
    if (!r) return rc;
    rc = strcmp(PQcmdTuples(r), "0") ? 0 : OST_ENOTFOUND;
    PQclear(r);
    return rc;
}

static int pg_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    PGresult *r = run(s->e, s->conn, "removing a map's entries",
                      "DELETE FROM ost_ments WHERE map = $1::bigint", &p, &rc, NULL);
    if (!r) return rc;
    if (n) *n = strtoull(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return run0(s->e, s->conn, "removing a map's deletion records",
                "DELETE FROM ost_mapdels WHERE map = $1::bigint", &p);
}

/* The maps with entries, in oid order, one index probe each; fn's 1
 * removes the map's entries (entries.h). */
static int pg_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud) {
    int rc = read_ready(s);
    if (rc) return rc;
    uint64_t at = 0;
    bool first = true;
    for (;;) {
        params p = {0};
        p_i64(&p, at);
        PGresult *r = run_as(s->e, s->conn, "listing maps",
                             first ? "SELECT map FROM ost_ments WHERE map >= $1::bigint ORDER BY map LIMIT 1"
                                   : "SELECT map FROM ost_ments WHERE map > $1::bigint ORDER BY map LIMIT 1",
                             &p, &rc, NULL, "L");
        if (!r) return rc;
        if (!PQntuples(r)) {
            PQclear(r);
            return 0;
        }
        at = rd64(PQgetvalue(r, 0, 0));
        first = false;
        PQclear(r);
        int frc = fn(ud, at);
        if (frc < 0) return frc;
        if (frc == 1 && (rc = pg_ent_drop_map(s, at, NULL))) return rc;
        if (frc > 1) return frc;
    }
}

/* Reads the record of map in the commit's transaction, locked. */
static int pg_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                            bool counter) {
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, map);
    PGresult *r = run_as(s->e, s->conn, "reading a map's record",
                         "SELECT state FROM ost_records WHERE oid = $1::bigint FOR UPDATE", &p, &rc,
                         NULL, "B");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return OST_ECONFLICT;
    }
    size_t n = (size_t)PQgetlength(r, 0, 0);
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ENOMEM, "out of memory");
    }
    memcpy(copy, PQgetvalue(r, 0, 0), n);
    PQclear(r);
    rc = ost__record_count_add(copy, n, delta, counter);
    if (rc) {
        free(copy);
        return rc;
    }
    params q = {0};
    p_i64(&q, map);
    p_i64(&q, serial);
    p_bytes(&q, copy, n);
    rc = run0(s->e, s->conn, "updating a map's record",
              "UPDATE ost_records SET serial = $2::bigint, state = $3::bytea WHERE oid = $1::bigint", &q);
    free(copy);
    return rc;
}

/* ---- the entry cursor -------------------------------------------------------------- */

static int pg_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out) {
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return ost__st_fail(s->e->st, OST_ENOMEM, "out of memory");
    ec->s = s;
    ec->map = map;
    *out = ec;
    return 0;
}

/* Fetches a page of the map's entries from key (NULL: the map's start or
 * end) in the direction asked, strictly past key when strict: one
 * prepared statement (PS_EC_*), with the values unless the cursor walks
 * keys only (pg_ecur_keys_only). */
static int ecur_fetch(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse, bool strict) {
    ost__sess *s = ec->s;
    int rc = read_ready(s);
    if (rc) return rc;
    params p = {0};
    p_i64(&p, ec->map);
    p_i64(&p, (uint64_t)PAGE_ROWS);
    uint8_t vals = !ec->keys_only;
    p_bytes(&p, &vals, 1); /* bool's binary form: one byte */
    int which;
    if (!key) {
        which = reverse ? PS_EC_LAST : PS_EC_FIRST;
    } else {
        p_bytes(&p, key, klen);
        which = reverse ? (strict ? PS_EC_LT : PS_EC_LE) : (strict ? PS_EC_GT : PS_EC_GE);
    }
    PGresult *r = run_ps(s, which, "reading map entries", &p, &rc, NULL);
    if (!r) {
        ec->on = false;
        return rc;
    }
    PQclear(ec->page);
    ec->page = r;
    ec->nrows = PQntuples(r);
    ec->row = 0;
    ec->page_rev = reverse;
    ec->page_keys = ec->keys_only;
    ec->full = ec->nrows >= PAGE_ROWS;
    ec->on = ec->nrows > 0;
    return ec->on ? 0 : OST_ENOTFOUND;
}

static int pg_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    return ecur_fetch(ec, key, klen, reverse, false);
}

static int pg_ecur_step(ost__ecur *ec, bool reverse) {
    if (!ec->on) return OST_ENOTFOUND;
    if (reverse == ec->page_rev) {
        if (ec->row + 1 < ec->nrows) {
            ec->row++;
            return 0;
        }
        if (!ec->full) {
            ec->on = false;
            return OST_ENOTFOUND;
        }
    } else if (ec->row > 0) {
        ec->row--; /* back over the page */
        return 0;
    }
    /* a new page from the current key on */
    size_t kl = (size_t)PQgetlength(ec->page, ec->row, 0);
    if (ost__reserve((void **)&ec->kbuf, &ec->kcap, kl ? kl : 1, 1, 64))
        return ost__st_fail(ec->s->e->st, OST_ENOMEM, "out of memory");
    memcpy(ec->kbuf, PQgetvalue(ec->page, ec->row, 0), kl);
    return ecur_fetch(ec, ec->kbuf, kl, reverse, true);
}

static int pg_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    if (!ec->on) return OST_ENOTFOUND;
    *key = (const uint8_t *)PQgetvalue(ec->page, ec->row, 0);
    *klen = (size_t)PQgetlength(ec->page, ec->row, 0);
    e->serial = rd64(PQgetvalue(ec->page, ec->row, 1));
    e->data = (const uint8_t *)PQgetvalue(ec->page, ec->row, 2);
    e->len = (size_t)PQgetlength(ec->page, ec->row, 2);
    return 0;
}

/* The entries of the page in hand from the current one on, in the
 * direction asked, without a round trip: fn for each (it stops the walk
 * by returning non-zero). Returns how many fn was given. */
static int pg_ecur_ahead(ost__ecur *ec, bool reverse,
                         int (*fn)(void *ud, const uint8_t *key, size_t klen, const ost__entry *e),
                         void *ud) {
    if (!ec->on) return 0;
    int n = 0, step = reverse == ec->page_rev ? 1 : -1;
    for (int i = ec->row; i >= 0 && i < ec->nrows; i += step) {
        ost__entry e = {rd64(PQgetvalue(ec->page, i, 1)),
                        (const uint8_t *)PQgetvalue(ec->page, i, 2),
                        (size_t)PQgetlength(ec->page, i, 2)};
        n++;
        if (fn(ud, (const uint8_t *)PQgetvalue(ec->page, i, 0),
               (size_t)PQgetlength(ec->page, i, 0), &e))
            break;
    }
    return n;
}

/* Whether the cursor's next pages carry values (see engine.h); true when
 * the page in hand was fetched without them. */
static bool pg_ecur_keys_only(ost__ecur *ec, bool on) {
    ec->keys_only = on;
    return ec->on && ec->page_keys;
}

static void pg_ecur_close(ost__ecur *ec) {
    if (!ec) return;
    PQclear(ec->page);
    free(ec->kbuf);
    free(ec);
}

/* ---- commit ------------------------------------------------------------------------ */


/* Sorts oids ascending (the order rows are locked in). */

/* Sets p's outcome for a failure of a statement: the code, and the
 * store's message as the package's. */
static int pkg_fail(ost__sess *s, ost__pkg *p, int rc) {
    p->rc = rc;
    ost__fmt(p->msg, sizeof p->msg, "%s", ost_store_errmsg(s->e->st));
    return rc;
}

/* The records of p from *i on that go in one statement (at most 20,000
 * and 64 MiB), as three array parameters; *i moves past them. 0 or
 * OST_ENOMEM. */
static int records_chunk(ost__pkg *p, size_t *i, arr *ao, arr *ac, arr *as) {
    arr_begin(ao, OIDTYPE_INT8);
    arr_begin(ac, OIDTYPE_INT4);
    arr_begin(as, OIDTYPE_BYTEA);
    size_t bytes = 0;
    for (; *i < p->nrecs && bytes < (64u << 20) && ao->count < 20000; (*i)++) {
        ost__rec *r = &p->recs[*i];
        arr_add_i64(ao, r->oid);
        arr_add_i32(ac, r->cid);
        arr_add(as, p->bytes + r->off, r->len);
        bytes += r->len + 16;
    }
    if (arr_end(ao) || arr_end(ac) || arr_end(as)) return OST_ENOMEM;
    return 0;
}

/* Writes p's records from index i on under serial, a chunk a statement. */
static int put_records(ost__sess *s, ost__pkg *p, size_t i, uint64_t serial) {
    arr ao = {0}, ac = {0}, as = {0};
    int rc = 0;
    while (i < p->nrecs && !rc) {
        if (records_chunk(p, &i, &ao, &ac, &as)) {
            rc = ost__st_fail(s->e->st, OST_ENOMEM, "out of memory");
            break;
        }
        params q = {0};
        p_bytes(&q, ao.b, ao.n);
        p_bytes(&q, ac.b, ac.n);
        p_bytes(&q, as.b, as.n);
        p_i64(&q, serial);
        rc = run0(s->e, s->conn, "commit: writing records", UPSERT_RECORDS("$4::bigint"), &q);
    }
    arr_free(&ao);
    arr_free(&ac);
    arr_free(&as);
    return rc;
}

/* ---- COPY of new records ---------------------------------------------------------------
 * A package of new objects only (the loader's batches) writes its records
 * with COPY ost_records FROM STDIN in PostgreSQL's binary format: no SQL
 * to parse and plan per row or per array, no arrays to build and unpack,
 * the pickles streamed as they are. The format: the signature, a flags
 * word and a header extension length (0); per row the field count (int16)
 * and per field its length (int32) and bytes, big-endian; -1 (int16) to
 * end. It runs in the package's transaction: a failure rolls all of it
 * back. */

/* Packages with fewer new records go by INSERT: a COPY costs a round trip
 * more (the serial is taken first). 256, a test knob (testctl.h). */
#define COPY_MIN OST__KNOB(pg_copy_min)

typedef struct {
    PGconn *c;
    uint8_t *b;
    size_t n, cap;
    bool failed;
} copybuf;

static void cb_flush(copybuf *cb) {
    if (cb->n && !cb->failed && PQputCopyData(cb->c, (const char *)cb->b, (int)cb->n) != 1)
        cb->failed = true;
    cb->n = 0;
}

static void cb_put(copybuf *cb, const void *d, size_t n) {
    if (cb->n + n > cb->cap) cb_flush(cb);
    if (n > cb->cap) { /* a large pickle goes on its own */
        if (!cb->failed && PQputCopyData(cb->c, d, (int)n) != 1) cb->failed = true;
        return;
    }
    memcpy(cb->b + cb->n, d, n);
    cb->n += n;
}

static void cb_u16(copybuf *cb, uint16_t v) {
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    cb_put(cb, b, 2);
}

static void cb_u32(copybuf *cb, uint32_t v) {
    uint8_t b[4];
    wr32(b, v);
    cb_put(cb, b, 4);
}

static void cb_u64(copybuf *cb, uint64_t v) {
    uint8_t b[8];
    ost__be64(b, v);
    cb_put(cb, b, 8);
}

/* Runs one COPY ... FROM STDIN (FORMAT binary) of sql in the open
 * transaction: the signature and header, rows(cb, ud) writes the rows, the
 * trailer, then the server's verdict. what names it in a failure's
 * message. 0 or the failure (the store's message; *retry as pg_retryable). */
static int copy_in(ost__sess *s, const char *sql, const char *what,
                   void (*rows)(copybuf *cb, void *ud), void *ud, bool *retry) {
    ost__engine *e = s->e;
    int rc = 0;
    PGresult *r = PQexec(s->conn, sql);
    if (!r || PQresultStatus(r) != PGRES_COPY_IN) {
        char cause[240];
        pg_cause(s->conn, r, cause, sizeof cause);
        rc = pg_code(s->conn, r);
        if (retry) *retry = pg_retryable(r);
        PQclear(r);
        while ((r = PQgetResult(s->conn))) PQclear(r);
        return ost__st_fail(e->st, rc ? rc : OST_EIO, "%s: commit: %s (COPY): %s", e->shown, what,
                            cause);
    }
    PQclear(r);
    copybuf cb = {s->conn, malloc(1u << 20), 0, 1u << 20, false};
    if (!cb.b) {
        PQputCopyEnd(s->conn, "out of memory");
        rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
    } else {
        static const uint8_t sig[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
        cb_put(&cb, sig, sizeof sig);
        cb_u32(&cb, 0); /* flags */
        cb_u32(&cb, 0); /* header extension */
        rows(&cb, ud);
        cb_flush(&cb);
        OST__HOOK(mid_write, ()); /* tests: testctl.h */
        cb_u16(&cb, 0xffff);
        cb_flush(&cb);
        free(cb.b);
        if (PQputCopyEnd(s->conn, cb.failed ? "sending the rows failed" : NULL) != 1)
            cb.failed = true;
    }
    /* the outcome, and nothing left over */
    bool first = true;
    while ((r = PQgetResult(s->conn))) {
        if (first && !rc) {
            ExecStatusType st = PQresultStatus(r);
            if (st != PGRES_COMMAND_OK) {
                char cause[240];
                pg_cause(s->conn, r, cause, sizeof cause);
                rc = pg_code(s->conn, r);
                if (retry) *retry = pg_retryable(r);
                ost__st_fail(e->st, rc, "%s: commit: %s (COPY): %s", e->shown, what, cause);
            }
        }
        first = false;
        PQclear(r);
    }
    if (!rc && (first || cb.failed)) {
        char cause[240];
        pg_cause(s->conn, NULL, cause, sizeof cause);
        rc = ost__st_fail(e->st, OST_EIO, "%s: commit: %s (COPY): %s", e->shown, what, cause);
    }
    return rc;
}

typedef struct {
    const ost__pkg *p;
    uint64_t serial;
} copy_rows_arg;

/* COPY rows of a package's records: oid, serial, class id, state. */
static void record_rows(copybuf *cb, void *ud) {
    const copy_rows_arg *a = ud;
    for (size_t i = 0; i < a->p->nrecs && !cb->failed; i++) {
        const ost__rec *rec = &a->p->recs[i];
        cb_u16(cb, 4);
        cb_u32(cb, 8);
        cb_u64(cb, rec->oid);
        cb_u32(cb, 8);
        cb_u64(cb, a->serial);
        cb_u32(cb, 4);
        cb_u32(cb, rec->cid);
        cb_u32(cb, (uint32_t)rec->len);
        cb_put(cb, a->p->bytes + rec->off, rec->len);
    }
}

/* Writes p's records under serial with one COPY. */
static int copy_records(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry) {
    copy_rows_arg a = {p, serial};
    return copy_in(s, "COPY ost_records (oid, serial, cid, state) FROM STDIN (FORMAT binary)",
                   "writing records", record_rows, &a, retry);
}

/* ---- COPY of a loader's map entries ---------------------------------------------------
 * A loader's batch of map entries (blind puts, no serial checks) goes by
 * COPY into a temporary table of the session (emptied at each commit),
 * then one statement puts them into ost_ments: the last of the batch's
 * puts of a key wins, as one put after another would, and the count of
 * keys each map gained comes back for its record's count. A statement a
 * row took a round trip each: a million entries took 150 s. */

/* Batches with fewer entries go a statement each (the staging table and
 * the COPY cost round trips of their own). 256, a test knob (testctl.h). */
#define MENT_COPY_MIN OST__KNOB(pg_ment_copy_min)

/* COPY rows of a package's map entries: their order, map, key, value. */
static void ment_rows(copybuf *cb, void *ud) {
    const copy_rows_arg *a = ud;
    for (size_t i = 0; i < a->p->nments && !cb->failed; i++) {
        const ost__ment *me = &a->p->ments[i];
        cb_u16(cb, 4);
        cb_u32(cb, 4);
        cb_u32(cb, (uint32_t)i);
        cb_u32(cb, 8);
        cb_u64(cb, me->map);
        cb_u32(cb, (uint32_t)me->klen);
        cb_put(cb, a->p->bytes + me->koff, me->klen);
        cb_u32(cb, (uint32_t)me->vlen);
        cb_put(cb, a->p->bytes + me->voff, me->vlen);
    }
}

/* Whether p's map entries are a loader's batch that goes by COPY. */
static bool ments_by_copy(const ost__pkg *p) {
    if (p->nments < (size_t)MENT_COPY_MIN) return false;
    for (size_t i = 0; i < p->nments; i++)
        if (!(p->ments[i].flags & OST__MENT_BLIND)) return false;
    return true;
}

/* Writes p's map entries (all blind puts) under serial and adds to each
 * map's count the keys it gained. */
static int copy_ments(ost__sess *s, ost__pkg *p, uint64_t serial, bool *retry) {
    ost__engine *e = s->e;
    /* emptied here too: packages of one commit group share a transaction */
    int rc = exec_simple(e, s->conn, "commit: map entries (staging table)",
                         "CREATE TEMPORARY TABLE IF NOT EXISTS ost_ments_load (seq integer NOT NULL, "
                         "map bigint NOT NULL, key bytea NOT NULL, value bytea NOT NULL) ON COMMIT "
                         "DELETE ROWS; TRUNCATE ost_ments_load");
    copy_rows_arg a = {p, serial};
    if (!rc)
        rc = copy_in(s, "COPY ost_ments_load (seq, map, key, value) FROM STDIN (FORMAT binary)",
                     "writing map entries", ment_rows, &a, retry);
    if (rc) return rc;
    params q = {0};
    p_i64(&q, serial);
    PGresult *r = run_as(e, s->conn, "commit: writing map entries",
                      "WITH src AS (SELECT DISTINCT ON (map, key) map, key, value FROM "
                      "ost_ments_load ORDER BY map, key, seq DESC), ins AS (INSERT INTO ost_ments "
                      "(map, key, serial, value) SELECT map, key, $1::bigint, value FROM src ON "
                      "CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial, value = "
                      "EXCLUDED.value RETURNING map, (xmax = 0) AS added) SELECT map, count(*) "
                      "FILTER (WHERE added) FROM ins GROUP BY map ORDER BY map",
                      &q, &rc, retry, "LL");
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++)
        rc = ost__maps_count_add(&ost__pg_engine, s, p, rd64(PQgetvalue(r, i, 0)),
                                 (int64_t)rd64(PQgetvalue(r, i, 1)), serial, false);
    PQclear(r);
    return rc;
}

/* Applies p in the open READ COMMITTED transaction: locks, checks, the
 * serial, writes. 0, OST_ECONFLICT (p->msg, p->conflict_oid), another
 * code of ours with p->msg, or a statement's failure (*retry says whether
 * the whole package may run again). */
/* Record i of p, which commit cur replaced after p's transaction read
 * it: its committed state, read in the commit's transaction (the row is
 * locked), goes to the class's resolver (ost__pkg_resolve). 0 when it
 * merged; else the code, p->msg set, nothing written. */
static int pg_resolve(ost__sess *s, ost__pkg *p, size_t i, uint64_t cur, bool *retry) {
    int rc = 0;
    params q = {0};
    p_i64(&q, p->recs[i].oid);
    PGresult *r = run_as(s->e, s->conn, "commit: reading a record to resolve a conflict",
                         "SELECT cid, state FROM ost_records WHERE oid = $1::bigint", &q, &rc, retry,
                         "IB");
    if (!r) {
        ost__fmt(p->msg, sizeof p->msg, "%s", ost_store_errmsg(s->e->st));
        return rc;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pkg_conflict(p, OST__CONFL_REMOVED, p->recs[i].oid, 0, 0);
    }
    rc = ost__pkg_resolve(s->e->st, p, i, cur, rd32(PQgetvalue(r, 0, 0)), PQgetvalue(r, 0, 1),
                          (size_t)PQgetlength(r, 0, 1));
    PQclear(r);
    return rc;
}

static int apply(ost__sess *s, ost__pkg *p, bool *retry) {
    ost__engine *e = s->e;
    int rc = 0;
    /* the rows to lock: records overwritten, maps changed */
    size_t nl = 0;
    uint64_t *lk = malloc((p->nrecs + p->nments + 1) * sizeof *lk);
    if (!lk) return pkg_fail(s, p, ost__st_fail(e->st, OST_ENOMEM, "out of memory"));
    for (size_t i = 0; i < p->nrecs; i++)
        if (p->recs[i].read_serial) lk[nl++] = p->recs[i].oid;
    for (size_t i = 0; i < p->nments; i++)
        if (!nl || p->ments[i].map != lk[nl - 1]) lk[nl++] = p->ments[i].map;
    nl = ost__sort_unique(lk, nl);
    PGresult *r = NULL;
    if (nl) {
        arr a = {0};
        arr_begin(&a, OIDTYPE_INT8);
        for (size_t i = 0; i < nl; i++) arr_add_i64(&a, lk[i]);
        if (arr_end(&a)) rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
        params q = {0};
        p_bytes(&q, a.b, a.n);
        if (!rc)
            r = run_ps(s, PS_LOCK, "commit: locking records", &q, &rc, retry);
        arr_free(&a);
    }
    free(lk);
    if (rc) return pkg_fail(s, p, rc);
    /* the serial checks, in the package's order, against the locked rows
     * (found by binary search: they came sorted) */
    int nt = r ? PQntuples(r) : 0;
    for (size_t i = 0; i < p->nrecs; i++) {
        ost__rec *rec = &p->recs[i];
        if (!rec->read_serial) continue;
        int lo = 0, hi = nt;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (rd64(PQgetvalue(r, mid, 0)) < rec->oid) lo = mid + 1;
            else hi = mid;
        }
        if (lo == nt || rd64(PQgetvalue(r, lo, 0)) != rec->oid) {
            ost__pkg_conflict(p, OST__CONFL_REMOVED, rec->oid, 0, 0);
            PQclear(r);
            return OST_ECONFLICT;
        }
        uint64_t cur = rd64(PQgetvalue(r, lo, 1));
        if (cur != rec->read_serial) {
            int crc = ost__pkg_resolvable(p, i) ? pg_resolve(s, p, i, cur, retry)
                                                : ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid,
                                                                    cur, rec->read_serial);
            if (crc) {
                PQclear(r);
                return crc;
            }
        }
    }
    PQclear(r);
    r = NULL;
    s->wrote = true; /* from here on a failure leaves writes of p behind */
    /* the serial: the meta row stays locked until the commit */
    size_t nlog = 0;
    for (size_t i = 0; i < p->nrecs; i++) nlog += p->recs[i].read_serial != 0;
    size_t next = 0;
    uint64_t last = 0, low = 0;
    if (!nlog && p->nrecs >= (size_t)COPY_MIN) {
        /* new objects only (a loader's batch): the serial, then COPY */
        r = run_as(e, s->conn, "commit: taking a serial",
                   "UPDATE ost_meta SET last_serial = last_serial + 1 WHERE id = 1 RETURNING "
                   "last_serial - 1, low",
                   NULL, &rc, retry, "LL");
        if (!r) return pkg_fail(s, p, rc);
        if (PQntuples(r) != 1) {
            PQclear(r);
            return pkg_fail(s, p, ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)",
                                               e->shown));
        }
        last = rd64(PQgetvalue(r, 0, 0));
        low = rd64(PQgetvalue(r, 0, 1));
        PQclear(r);
        if (last < OST__SERIAL_LIMIT - 1 && (rc = copy_records(s, p, last + 1, retry)))
            return pkg_fail(s, p, rc);
        next = p->nrecs;
        goto have_serial;
    }
    /* One statement takes the serial (which locks the meta row until the
     * commit), writes the first chunk of records and the commit log row:
     * the fewer round trips under the lock, the more commits a second. */
    uint8_t *logb = malloc(nlog * 8 + 1), *o = logb;
    arr ao = {0}, ac = {0}, as = {0};
    if (!logb || records_chunk(p, &next, &ao, &ac, &as))
        rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
    for (size_t i = 0; logb && i < p->nrecs; i++)
        if (p->recs[i].read_serial) {
            ost__be64(o, p->recs[i].oid);
            o += 8;
        }
    if (!rc) {
        params q = {0};
        p_bytes(&q, ao.b, ao.n);
        p_bytes(&q, ac.b, ac.n);
        p_bytes(&q, as.b, as.n);
        p_bytes(&q, logb, nlog * 8);
        r = run_ps(s, PS_WRITE, "commit: writing records", &q, &rc, retry);
    }
    free(logb);
    arr_free(&ao);
    arr_free(&ac);
    arr_free(&as);
    if (!r) return pkg_fail(s, p, rc); /* the statement failed: nothing of it is there */
    if (PQntuples(r) != 1) {
        PQclear(r);
        return pkg_fail(s, p, ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)",
                                           e->shown));
    }
    last = rd64(PQgetvalue(r, 0, 0));
    low = rd64(PQgetvalue(r, 0, 1));
    PQclear(r);
have_serial:
    if (last >= OST__SERIAL_LIMIT - 1)
        return pkg_fail(s, p, ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (last_serial %llu)",
                                           e->shown, (unsigned long long)last));
    uint64_t serial = last + 1;
    /* a pack since the connection checked its cache may have removed an
     * object the records refer to */
    if (low != p->low && p->nrefs) {
        arr a = {0};
        arr_begin(&a, OIDTYPE_INT8);
        for (size_t i = 0; i < p->nrefs; i++) arr_add_i64(&a, p->refs[i]);
        if (arr_end(&a)) rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
        params q = {0};
        p_bytes(&q, a.b, a.n);
        r = rc ? NULL
               : run_as(e, s->conn, "commit: checking references",
                        "SELECT oid FROM ost_records WHERE oid = ANY($1::bigint[]) ORDER BY oid",
                        &q, &rc, retry, "L");
        arr_free(&a);
        if (!r) return pkg_fail(s, p, rc);
        int n = PQntuples(r);
        for (size_t i = 0; i < p->nrefs; i++) {
            int lo = 0, hi = n;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (rd64(PQgetvalue(r, mid, 0)) < p->refs[i]) lo = mid + 1;
                else hi = mid;
            }
            if (lo == n || rd64(PQgetvalue(r, lo, 0)) != p->refs[i]) {
                ost__pkg_conflict(p, OST__CONFL_REF_GONE, p->refs[i], 0, 0);
                PQclear(r);
                return OST_ECONFLICT;
            }
        }
        PQclear(r);
    }
    if (next < p->nrecs && (rc = put_records(s, p, next, serial))) return pkg_fail(s, p, rc);
    if (p->nments) {
        rc = ments_by_copy(p) ? copy_ments(s, p, serial, retry)
                              : ost__maps_apply(&ost__pg_engine, s, p, serial);
        if (rc) {
            if (!p->msg[0]) pkg_fail(s, p, rc);
            return rc;
        }
    }
    p->serial = serial;
    return 0;
}

/* Gives rc (the store's message) to every package of pkgs[from, to) not
 * failed already, and takes back their serials. */
static void fail_range(ost__sess *s, ost__pkg *const *pkgs, size_t from, size_t to, int rc) {
    for (size_t i = from; i < to; i++) {
        ost__pkg *p = pkgs[i];
        if (p->rc || (!p->nrecs && !p->nments)) continue;
        pkg_fail(s, p, rc);
        p->serial = 0;
    }
}

/* Packages in one transaction at most: the row locks of all of them are
 * held until its COMMIT, and a package that spoils it makes the ones
 * before it apply again. */
#define GROUP_MAX 64

/* Whether pkgs[i] takes part in a commit at all. */
static bool pkg_skip(const ost__pkg *p) { return p->rc || (!p->nrecs && !p->nments); }

/* ---- a group in two round trips --------------------------------------------------------
 * A group of plain packages (records only: no map entries, not a loader's
 * batch) skips the statement-per-package path: one pipeline (libpq's
 * pipeline mode: the statements go out together, the results come back
 * together) begins the transaction, locks the rows of every record the
 * group overwrites and the meta row, and reads the serials; the client
 * checks each package in the group's order, as apply does, a package also
 * conflicting with a record an earlier package of the group writes; a
 * second pipeline writes the accepted packages' records with their
 * serials, their commit log rows and the last serial in one statement,
 * commits and waits for the flush. So a group of 16 one-object commits
 * costs 2 round trips instead of 35, and holds the meta row lock for one.
 * Anything it cannot decide (a pack moved meta.low under a package that
 * refers to stored objects, a statement failing before the commit) rolls
 * back and leaves the group to the path above, which gives each package
 * its own outcome; nothing was written then. */

/* The most records and bytes of a group that takes this path. */
#define FAST_RECS 4096
#define FAST_BYTES ((size_t)4 << 20)

/* An oid -> serial table of the records a group's accepted packages
 * write, with the record that writes it last (w: its package and index). */
typedef struct {
    const ost__pkg *p;
    size_t j;
} gwriter;
typedef struct {
    uint64_t *k, *v;
    gwriter *w;
    size_t mask;
} oidset;

/* The slot of oid: its key is oid + 1 (0 is an empty slot; the root's
 * oid is 0) once set. */
static uint64_t *oidset_slot(oidset *t, uint64_t oid) {
    size_t i = (size_t)((oid + 1) * 0x9E3779B97F4A7C15ull >> 20) & t->mask;
    while (t->k[i] && t->k[i] != oid + 1) i = (i + 1) & t->mask;
    return &t->k[i];
}

/* Whether p's map entries are all counters' adds (the fast path applies
 * those, not the entries of maps). */
static bool counts_only(const ost__pkg *p) {
    for (size_t i = 0; i < p->nments; i++)
        if (!(p->ments[i].flags & OST__MENT_COUNT)) return false;
    return true;
}

/* The row of oid in r, whose first column holds oids in ascending order,
 * or -1. */
static int row_of(PGresult *r, uint64_t oid) {
    int lo = 0, hi = r ? PQntuples(r) : 0;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (rd64(PQgetvalue(r, mid, 0)) < oid) lo = mid + 1;
        else hi = mid;
    }
    return r && lo < PQntuples(r) && rd64(PQgetvalue(r, lo, 0)) == oid ? lo : -1;
}

/* A counter a group adds to (group_fast): its record as the group's
 * accepted packages leave it, and the serial of the last of them (0: none
 * added to it yet). */
typedef struct {
    uint64_t oid, serial;
    uint32_t cid;
    uint8_t *state;
    size_t len;
} gcounter;

/* Applies the counters' adds of package p, which takes serial `serial`
 * if they all fit, to ctr[0, nctr) (by oid ascending): all or none. 0;
 * 1 when a counter is not in ctr (the other path decides); or the code
 * with p->msg set (OST_ELIMIT past 64 bits, OST_ECORRUPT, OST_ENOMEM). */
static int group_counts(ost__pkg *p, gcounter *ctr, size_t nctr, uint64_t serial) {
    uint8_t *next[8] = {0};
    size_t at[8], nn = 0;
    int rc = 0;
    for (size_t i = 0; i < p->nments && !rc; i++) {
        const ost__ment *me = &p->ments[i];
        uint64_t raw = 0;
        for (int b = 7; b >= 0; b--) raw = raw << 8 | p->bytes[me->voff + (size_t)b];
        if (!raw) continue;
        size_t lo = 0, hi = nctr;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ctr[mid].oid < me->map) lo = mid + 1;
            else hi = mid;
        }
        if (lo == nctr || ctr[lo].oid != me->map || nn == 8) {
            rc = 1; /* not fetched, or more counters than this path keeps */
            break;
        }
        uint8_t *copy = malloc(ctr[lo].len);
        if (!copy) {
            rc = OST_ENOMEM;
            break;
        }
        memcpy(copy, ctr[lo].state, ctr[lo].len);
        next[nn] = copy;
        at[nn++] = lo;
        rc = ost__record_count_add(copy, ctr[lo].len, (int64_t)raw, true);
        if (rc) rc = ost__maps_count_fail(p, me->map, (int64_t)raw, true, rc);
    }
    for (size_t i = 0; i < nn; i++) {
        if (rc) {
            free(next[i]);
            continue;
        }
        free(ctr[at[i]].state);
        ctr[at[i]].state = next[i];
        ctr[at[i]].serial = serial;
    }
    return rc;
}

/* Record j of package p, read at another serial than cur, the one the
 * store (row r of rf) or an earlier package of the group (w) holds:
 * goes to its class's resolver (ost__pkg_resolve). 0 when it merged,
 * 1 when the committed state is not at hand (the other path decides),
 * else the conflict with p->msg set. */
static int group_resolve(ost__engine *e, ost__pkg *p, size_t j, uint64_t cur, const gwriter *w,
                         PGresult *rf) {
    if (w) {
        const ost__rec *o = &w->p->recs[w->j];
        return ost__pkg_resolve(e->st, p, j, cur, o->cid, w->p->bytes + o->off, o->len);
    }
    int r = row_of(rf, p->recs[j].oid);
    if (r < 0) return 1;
    return ost__pkg_resolve(e->st, p, j, cur, rd32(PQgetvalue(rf, r, 1)), PQgetvalue(rf, r, 2),
                            (size_t)PQgetlength(rf, r, 2));
}

/* Whether the packages of pkgs[0, n) not skipped may take the fast path. */
static bool fast_fits(ost__engine *e, ost__pkg *const *pkgs, size_t n, size_t *nrecs) {
    size_t recs = 0, bytes = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        const ost__pkg *p = pkgs[i];
        if (pkg_skip(p)) continue;
        if (!counts_only(p) || p->nrecs >= (size_t)COPY_MIN) return false;
        recs += p->nrecs;
        bytes += p->nbytes;
        count++;
    }
    *nrecs = recs;
    return count && count <= GROUP_MAX && recs <= FAST_RECS && bytes <= FAST_BYTES && !e->read_only;
}

/* Whether a connection begins its next transaction after one of pkgs[0,
 * n) that committed (not only loader batches did), and then in *first
 * the lowest serial they committed. */
static bool commit_adopters(ost__pkg *const *pkgs, size_t n, uint64_t *first) {
    bool adopters = false;
    *first = 0;
    for (size_t i = 0; i < n; i++)
        if (!pkgs[i]->rc && pkgs[i]->serial) {
            if (!*first || pkgs[i]->serial < *first) *first = pkgs[i]->serial;
            adopters |= pkgs[i]->next_txn; /* not a loader's batch alone */
        }
    return adopters;
}

/* Commits pkgs[0, n) as the comment above says. Returns false, with every
 * package as it came, when the group must take the other path; true with
 * *whole (pg_commit's result) when it is done. */
static bool group_fast(ost__sess *s, ost__pkg *const *pkgs, size_t n, int *whole) {
    ost__engine *e = s->e;
    size_t nrecs;
    if (!fast_fits(e, pkgs, n, &nrecs)) return false;
    if (sess_conn(s) || ps_ready(s, PS_LOCK) || ps_ready(s, PS_GWRITE) || ps_ready(s, PS_META_LOCK))
        return false;
    /* the rows to lock: every record overwritten and every counter added
     * to, sorted, once; of them, the rows whose state the group needs
     * (fe: counters, and records that may resolve a conflict) */
    size_t nments = 0;
    for (size_t i = 0; i < n; i++) nments += pkg_skip(pkgs[i]) ? 0 : pkgs[i]->nments;
    uint64_t *lk = malloc((nrecs + nments + 1) * sizeof *lk);
    uint64_t *fe = malloc((nrecs + nments + 1) * sizeof *fe);
    size_t tcap = 16;
    while (tcap < 2 * nrecs) tcap *= 2;
    oidset done = {calloc(tcap, sizeof(uint64_t)), calloc(tcap, sizeof(uint64_t)),
                   calloc(tcap, sizeof(gwriter)), tcap - 1};
    bool handled = false;
    PGresult *res[5] = {0};
    arr al = {0}, af = {0}, ao = {0}, asr = {0}, ac = {0}, ast = {0}, ls = {0}, lg = {0};
    uint8_t *logb = malloc(nrecs * 8 + 1);
    bool *mine = calloc(n, sizeof *mine); /* the packages this path takes */
    gcounter *ctr = NULL;
    size_t nctr = 0;
    if (!lk || !fe || !done.k || !done.v || !done.w || !logb || !mine) goto out;
    for (size_t i = 0; i < n; i++) mine[i] = !pkg_skip(pkgs[i]);
    size_t nl = 0, nf = 0, ncount = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mine[i]) continue;
        const ost__pkg *p = pkgs[i];
        for (size_t j = 0; j < p->nrecs; j++)
            if (p->recs[j].read_serial) {
                lk[nl++] = p->recs[j].oid;
                if (ost__pkg_resolvable(p, j)) fe[nf++] = p->recs[j].oid;
            }
        for (size_t j = 0; j < p->nments; j++) {
            lk[nl++] = fe[nf++] = p->ments[j].map;
            ncount++;
        }
    }
    nl = ost__sort_unique(lk, nl);
    nf = ost__sort_unique(fe, nf);
    arr_begin(&al, OIDTYPE_INT8);
    for (size_t i = 0; i < nl; i++) arr_add_i64(&al, lk[i]);
    arr_begin(&af, OIDTYPE_INT8);
    for (size_t i = 0; i < nf; i++) arr_add_i64(&af, fe[i]);
    if (arr_end(&al) || arr_end(&af)) goto out;

    /* round trip 1: begin, lock, read the serials and meta, and the
     * states the group needs (the rows are locked by then) */
    params ql = {0}, qf = {0};
    p_bytes(&ql, al.b, al.n);
    p_bytes(&qf, af.b, af.n);
    pstmt st1[5];
    int k = 0, at_lock = -1, at_fetch = -1;
    st1[k++] = (pstmt){-1, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL};
    if (nl) {
        at_lock = k;
        st1[k++] = (pstmt){PS_LOCK, NULL, &ql};
    }
    int at_meta = k;
    st1[k++] = (pstmt){PS_META_LOCK, NULL, NULL};
    if (nf) {
        at_fetch = k;
        st1[k++] = (pstmt){-1, "SELECT oid, cid, state FROM ost_records WHERE oid = "
                               "ANY($1::bigint[]) ORDER BY oid", &qf};
    }
    int failed;
    s->write = true;
    if (pipe_run(s, "commit: locking records", st1, k, res, &failed)) {
        if (s->conn) PQclear(PQexec(s->conn, "ROLLBACK"));
        goto out; /* nothing was written: the other path says what is wrong */
    }
    PGresult *rl = at_lock >= 0 ? res[at_lock] : NULL, *rm = res[at_meta];
    /* the columns checked as run_ps checks them (a pipeline's results do
     * not pass through it); a result of another shape goes to the other
     * path, whose run_ps says what is wrong */
    if (rl && res_check(e, rl, "commit: locking records", ps_shape[PS_LOCK])) goto rollback;
    if (PQntuples(rm) != 1 || PQgetlength(rm, 0, 0) != 8 || PQgetlength(rm, 0, 1) != 8)
        goto rollback;
    uint64_t last = rd64(PQgetvalue(rm, 0, 0)), low = rd64(PQgetvalue(rm, 0, 1));
    if (last >= OST__SERIAL_LIMIT - 1 - GROUP_MAX) goto rollback;
    PGresult *rf = at_fetch >= 0 ? res[at_fetch] : NULL;
    if (rf && res_check(e, rf, "commit: reading states", "LIB")) goto rollback;
    if (ncount) { /* the counters, as stored: a missing one goes the other way */
        if (!(ctr = calloc(ncount, sizeof *ctr))) goto rollback;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; mine[i] && j < pkgs[i]->nments; j++) {
                uint64_t oid = pkgs[i]->ments[j].map;
                bool have = false;
                for (size_t q = 0; q < nctr && !have; q++) have = ctr[q].oid == oid;
                if (have) continue;
                int r = row_of(rf, oid);
                if (r < 0) goto rollback;
                size_t len = (size_t)PQgetlength(rf, r, 2);
                gcounter g = {oid, 0, rd32(PQgetvalue(rf, r, 1)), malloc(len ? len : 1), len};
                if (!g.state) goto rollback;
                memcpy(g.state, PQgetvalue(rf, r, 2), len);
                size_t q = nctr++; /* kept by oid ascending */
                while (q && ctr[q - 1].oid > oid) ctr[q] = ctr[q - 1], q--;
                ctr[q] = g;
            }
    }

    /* the checks, package by package in the group's order */
    int nt = rl ? PQntuples(rl) : 0;
    uint64_t serial = last;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (!mine[i]) continue;
        if (p->nrefs && low != p->low) goto rollback; /* pack: the references need a look */
        int rc = 0;
        for (size_t j = 0; j < p->nrecs && !rc; j++) {
            ost__rec *rec = &p->recs[j];
            if (!rec->read_serial) continue;
            uint64_t *slot = oidset_slot(&done, rec->oid);
            if (*slot) { /* an earlier package of the group writes it */
                uint64_t cur = done.v[slot - done.k];
                if (cur != rec->read_serial && ost__pkg_resolvable(p, j))
                    rc = group_resolve(e, p, j, cur, &done.w[slot - done.k], rf);
                else if (cur != rec->read_serial)
                    rc = ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid, cur, rec->read_serial);
                if (rc == 1) goto rollback;
                continue;
            }
            int lo = 0, hi = nt;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (rd64(PQgetvalue(rl, mid, 0)) < rec->oid) lo = mid + 1;
                else hi = mid;
            }
            if (lo == nt || rd64(PQgetvalue(rl, lo, 0)) != rec->oid)
                rc = ost__pkg_conflict(p, OST__CONFL_REMOVED, rec->oid, 0, 0);
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial && ost__pkg_resolvable(p, j))
                rc = group_resolve(e, p, j, rd64(PQgetvalue(rl, lo, 1)), NULL, rf);
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial)
                rc = ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid,
                                       rd64(PQgetvalue(rl, lo, 1)), rec->read_serial);
            if (rc == 1) goto rollback;
        }
        /* a merge may refer to objects the package did not */
        if (!rc && p->nrefs && low != p->low) goto rollback;
        if (!rc && p->nments) rc = group_counts(p, ctr, nctr, serial + 1);
        if (rc == 1) goto rollback;
        if (rc) {
            p->rc = rc;
            continue;
        }
        p->serial = ++serial;
        for (size_t j = 0; j < p->nrecs; j++) {
            uint64_t *slot = oidset_slot(&done, p->recs[j].oid);
            *slot = p->recs[j].oid + 1;
            done.v[slot - done.k] = p->serial;
            done.w[slot - done.k] = (gwriter){p, j};
        }
    }
    if (serial == last) { /* every package conflicted: nothing to write */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        *whole = 0;
        handled = true;
        goto out;
    }

    /* round trip 2: write, commit, wait for the flush */
    arr_begin(&ao, OIDTYPE_INT8);
    arr_begin(&asr, OIDTYPE_INT8);
    arr_begin(&ac, OIDTYPE_INT4);
    arr_begin(&ast, OIDTYPE_BYTEA);
    arr_begin(&ls, OIDTYPE_INT8);
    arr_begin(&lg, OIDTYPE_BYTEA);
    uint8_t *o = logb;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (!mine[i] || !p->serial) continue;
        uint8_t *l0 = o;
        for (size_t j = 0; j < p->nrecs; j++) {
            ost__rec *r = &p->recs[j];
            arr_add_i64(&ao, r->oid);
            arr_add_i64(&asr, p->serial);
            arr_add_i32(&ac, r->cid);
            arr_add(&ast, p->bytes + r->off, r->len);
            if (r->read_serial) {
                ost__be64(o, r->oid);
                o += 8;
            }
        }
        arr_add_i64(&ls, p->serial);
        arr_add(&lg, l0, (size_t)(o - l0));
    }
    for (size_t q = 0; q < nctr; q++) /* the counters added to: their new records */
        if (ctr[q].serial) {
            arr_add_i64(&ao, ctr[q].oid);
            arr_add_i64(&asr, ctr[q].serial);
            arr_add_i32(&ac, ctr[q].cid);
            arr_add(&ast, ctr[q].state, ctr[q].len);
        }
    if (arr_end(&ao) || arr_end(&asr) || arr_end(&ac) || arr_end(&ast) || arr_end(&ls) ||
        arr_end(&lg))
        goto rollback;
    params qw = {0};
    p_bytes(&qw, ao.b, ao.n);
    p_bytes(&qw, asr.b, asr.n);
    p_bytes(&qw, ac.b, ac.n);
    p_bytes(&qw, ast.b, ast.n);
    p_bytes(&qw, ls.b, ls.n);
    p_bytes(&qw, lg.b, lg.n);
    p_i64(&qw, serial);
    for (int i = 0; i < k; i++) {
        PQclear(res[i]);
        res[i] = NULL;
    }
    /* COMMIT answers once the server flushed its commit record (the
     * session's synchronous_commit: pg_commit's comment) */
    pstmt st2[2] = {{PS_GWRITE, NULL, &qw}, {-1, "COMMIT", NULL}};
    int n2 = 2;
    int rc = pipe_run(s, "commit", st2, n2, res, &failed);
    bool broken = rc && failed == n2;
    if (rc && !broken && failed < 2) {
        /* the write or the COMMIT failed and the server said so: nothing
         * is committed; roll back, the other path takes the group */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        if (PQstatus(s->conn) == CONNECTION_OK) goto restore;
        broken = true;
    }
    if (rc) {
        /* not known committed (the connection broke after the COMMIT
         * went out): each accepted package carries the failure */
        for (size_t i = 0; i < n; i++)
            if (!pkgs[i]->rc && pkgs[i]->serial) {
                pkg_fail(s, pkgs[i], rc);
                pkgs[i]->serial = 0;
            }
        *whole = !broken && s->conn && PQstatus(s->conn) == CONNECTION_OK ? 0 : OST_EIO;
    } else
        *whole = 0;
    handled = true;
    goto out;
rollback:
    PQclear(PQexec(s->conn, "ROLLBACK"));
restore:
    for (size_t i = 0; i < n; i++) /* as they came: the other path decides */
        if (mine[i]) {
            pkgs[i]->rc = 0;
            pkgs[i]->msg[0] = 0;
            pkgs[i]->serial = 0;
            pkgs[i]->conflict_oid = UINT64_MAX;
        }
out:
    s->write = false;
    for (size_t i = 0; i < sizeof res / sizeof *res; i++) PQclear(res[i]);
    arr_free(&al);
    arr_free(&af);
    for (size_t q = 0; q < nctr; q++) free(ctr[q].state);
    free(ctr);
    free(fe);
    arr_free(&ao);
    arr_free(&asr);
    arr_free(&ac);
    arr_free(&ast);
    arr_free(&ls);
    arr_free(&lg);
    free(logb);
    free(mine);
    free(lk);
    free(done.k);
    free(done.v);
    free(done.w);
    return handled;
}

/* Begins the transaction of a commit group on s's connection: READ
 * COMMITTED, its COMMIT as the session's synchronous_commit says (on for
 * full durability: pg_commit). 0 or the failure. */
static int begin_group(ost__engine *e, ost__sess *s) {
    return run0(e, s->conn, "commit: begin", "BEGIN ISOLATION LEVEL READ COMMITTED", NULL);
}

/* Commits a group of packages in one READ COMMITTED transaction (one
 * COMMIT, one flush), as LMDB's group committer does in one write
 * transaction: each package is applied after the ones before it, so its
 * serial checks see their writes, and takes the next serial. A package
 * that fails before writing (a conflict found by its serial checks: the
 * usual failure) drops out and the transaction goes on. One that fails
 * after writing (a reference a pack removed, a map entry conflict, a
 * statement error) spoils the transaction: it is rolled back, that
 * package drops out with its own outcome (or, for a deadlock or a
 * serialization failure, is tried again, 5 times at most), and the
 * packages before it are applied again in a new transaction; none of
 * them was visible meanwhile. So each package commits atomically and on
 * its own, as engine.h asks. With full durability its COMMIT returns
 * once the server flushed it, and no other session saw it before
 * (pg_commit). */
static int commit_call(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    ost__engine *e = s->e;
    int whole = 0;
    if (s->snap || s->lazy) pg_snap_end(s);
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        p->rc = 0;
        p->msg[0] = 0;
        p->serial = 0;
        p->conflict_oid = UINT64_MAX;
        if (e->read_only && (p->nrecs || p->nments)) {
            p->rc = ost__st_fail(e->st, OST_EREADONLY, "%s: commit: the store is read-only", e->shown);
            ost__fmt(p->msg, sizeof p->msg, "%s", ost_store_errmsg(e->st));
        }
    }
    if (group_fast(s, pkgs, n, &whole)) return whole;
    size_t i = 0;
    while (i < n && !whole) {
        while (i < n && pkg_skip(pkgs[i])) i++;
        if (i == n) break;
        size_t first = i, count = 0;
        uint8_t tries[GROUP_MAX] = {0};
        int rc = sess_conn(s);
        if (!rc) rc = begin_group(e, s);
        if (rc) {
            if (s->conn && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
            pkg_fail(s, pkgs[i], rc);
            if (rc == OST_EIO && (!s->conn || PQstatus(s->conn) != CONNECTION_OK)) {
                /* the call ends here: every package not tried yet carries
                 * the failure (none of them is written), not rc 0 */
                whole = rc;
                fail_range(s, pkgs, i + 1, n, rc);
            }
            i++;
            continue;
        }
        s->write = true;
        size_t j = first;
        while (j < n && count < GROUP_MAX && !whole) {
            ost__pkg *p = pkgs[j];
            if (pkg_skip(p)) {
                j++;
                continue;
            }
            p->msg[0] = 0;
            p->serial = 0;
            p->conflict_oid = UINT64_MAX;
            s->wrote = false;
            bool retry = false;
            rc = apply(s, p, &retry);
            keep_clear(s);
            if (!rc) {
                count++;
                j++;
                continue;
            }
            bool live = PQstatus(s->conn) == CONNECTION_OK;
            if (live && !s->wrote && PQtransactionStatus(s->conn) == PQTRANS_INTRANS) {
                p->rc = rc; /* nothing of p was written: the others go on */
                j++;
                continue;
            }
            /* the transaction is spoiled: roll it back, drop p (or try it
             * again) and apply the packages before it again */
            if (live) PQclear(PQexec(s->conn, "ROLLBACK"));
            if (!live || PQstatus(s->conn) != CONNECTION_OK) {
                p->rc = rc;
                whole = rc == OST_EIO ? rc : OST_EIO;
                break;
            }
            if (retry && j - first < GROUP_MAX && tries[j - first] < 5) {
                tries[j - first]++;
                p->rc = 0;
            } else
                p->rc = rc;
            for (size_t k = first; k < j; k++) pkgs[k]->serial = 0;
            rc = begin_group(e, s);
            if (rc) {
                whole = rc;
                break;
            }
            j = first;
            count = 0;
        }
        if (!whole) {
            rc = 0; /* run sets it on failure only */
            PGresult *r = run(e, s->conn, "commit", "COMMIT", NULL, &rc, NULL);
            PQclear(r);
            if (rc == OST_EIO && PQstatus(s->conn) != CONNECTION_OK) whole = rc;
            else if (rc) fail_range(s, pkgs, first, j, rc);
        }
        if (whole) {
            /* nothing of this transaction is known committed */
            if (s->conn && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
            fail_range(s, pkgs, first, n, whole);
        }
        s->write = false;
        i = j;
    }
    return whole;
}

/* pg_commit: commit_call, then, when a connection's package committed,
 * the view its session adopts (snap_adopt), polled now.
 *
 * Durability. With full durability every session has synchronous_commit
 * on (connect), and a group's transaction keeps it: its COMMIT returns
 * only after the server flushed the commit record, and no other session
 * can see the commit before that. CommitTransaction
 * (src/backend/access/transam/xact.c) calls RecordTransactionCommit,
 * which for a transaction that wrote WAL with synchronous_commit on
 * flushes the WAL past its commit record (XLogFlush(XactLastRecEnd)),
 * before ProcArrayEndTransaction takes the xid out of the running set;
 * until then every snapshot holds the transaction as in progress. So a
 * commit lost in a server crash was neither acknowledged nor seen, and
 * its serial, which the next commit after the restart takes again, was
 * never in any connection's cache. Committing with synchronous_commit off
 * and waiting for the flush after COMMIT (what this engine did) made the
 * commit visible first: a reader could cache a commit that the crash then
 * lost, and take the new commit of the same serial for it (a lost update
 * through the cache). The cost is that a group's row locks, the meta
 * row's among them, are held through its flush: groups of different
 * processes flush one after another (PostgreSQL's commit_delay can merge
 * them). docs/postgresql.md, "Durability", says how it is tested. */
static int pg_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    int rc = commit_call(s, pkgs, n);
    uint64_t first = 0;
    bool adopters = !rc && commit_adopters(pkgs, n, &first);
    /* with group commit only: without it, each connection commits on its
     * own session, and its renewal costs the one round trip a poll would */
    if (adopters && s->e->st->group_commit) view_poll(s->e, first - 1);
    return rc;
}

/* ---- sweep --------------------------------------------------------------------------- */

static int sweep_try(ost__sess *s, uint64_t mark, bool (*keepfn)(void *ud, uint64_t oid), void *ud,
                     uint64_t *removed, bool *retry) {
    ost__engine *e = s->e;
    int rc = run0(e, s->conn, "sweep: begin", "BEGIN ISOLATION LEVEL READ COMMITTED", NULL);
    if (rc) return rc;
    /* commits wait: nothing changes under the sweep */
    PGresult *r = run_as(e, s->conn, "sweep: locking meta",
                         "SELECT last_serial FROM ost_meta WHERE id = 1 FOR UPDATE", NULL, &rc,
                         retry, "L");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t last = rd64(PQgetvalue(r, 0, 0));
    PQclear(r);
    uint64_t at = 0, gone = 0;
    bool first = true;
    arr a = {0};
    for (;;) {
        params q = {0};
        p_i64(&q, at);
        p_i64(&q, mark);
        p_i64(&q, (uint64_t)PAGE_ROWS);
        r = run_as(e, s->conn, "sweep: reading records",
                first ? "SELECT oid FROM ost_records WHERE oid >= $1::bigint AND serial <= $2::bigint "
                        "ORDER BY oid LIMIT $3::bigint"
                      : "SELECT oid FROM ost_records WHERE oid > $1::bigint AND serial <= $2::bigint "
                        "ORDER BY oid LIMIT $3::bigint",
                &q, &rc, retry, "L");
        if (!r) break;
        first = false;
        int nt = PQntuples(r);
        arr_begin(&a, OIDTYPE_INT8);
        for (int i = 0; i < nt; i++) {
            at = rd64(PQgetvalue(r, i, 0));
            if (!keepfn(ud, at)) arr_add_i64(&a, at);
        }
        PQclear(r);
        if (arr_end(&a)) {
            rc = ost__st_fail(e->st, OST_ENOMEM, "out of memory");
            break;
        }
        if (a.count) {
            params d = {0};
            p_bytes(&d, a.b, a.n);
            rc = run0r(e, s->conn, "sweep: removing records",
                       "DELETE FROM ost_records WHERE oid = ANY($1::bigint[])", &d, retry);
            if (!rc)
                rc = run0r(e, s->conn, "sweep: removing map entries",
                           "DELETE FROM ost_ments WHERE map = ANY($1::bigint[])", &d, retry);
            if (rc) break;
            gone += a.count;
        }
        if (nt < PAGE_ROWS) break;
    }
    arr_free(&a);
    /* entries of maps that have no record (never reachable, or damage) */
    if (!rc)
        rc = run0(e, s->conn, "sweep: removing map entries",
                  "DELETE FROM ost_ments m WHERE NOT EXISTS (SELECT 1 FROM ost_records r WHERE "
                  "r.oid = m.map)",
                  NULL);
    /* the deletion records of maps that are gone */
    if (!rc)
        rc = run0(e, s->conn, "sweep: removing deletion records",
                  "DELETE FROM ost_mapdels d WHERE NOT EXISTS (SELECT 1 FROM ost_records r WHERE "
                  "r.oid = d.map)",
                  NULL);
    /* the commit log restarts: caches older than now reload everything */
    if (!rc) rc = run0(e, s->conn, "sweep: trimming the commit log", "DELETE FROM ost_txlog", NULL);
    if (!rc) {
        params q = {0};
        p_i64(&q, last + 1);
        rc = run0(e, s->conn, "sweep: writing meta", "UPDATE ost_meta SET low = $1::bigint WHERE id = 1", &q);
    }
    if (!rc) {
        r = run(e, s->conn, "sweep: commit", "COMMIT", NULL, &rc, retry);
        PQclear(r);
    }
    if (!rc && removed) *removed = gone;
    return rc;
}

static int pg_sweep(ost__sess *s, uint64_t mark, bool (*keepfn)(void *ud, uint64_t oid), void *ud,
                    uint64_t *removed) {
    if (s->e->read_only)
        return ost__st_fail(s->e->st, OST_EREADONLY, "%s: pack: the store is read-only", s->e->shown);
    if (s->snap || s->lazy) pg_snap_end(s);
    int rc;
    for (int tries = 0;; tries++) {
        if ((rc = sess_conn(s))) return rc;
        bool retry = false;
        s->write = true;
        rc = sweep_try(s, mark, keepfn, ud, removed, &retry);
        s->write = false;
        if (rc && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
        if (!rc || !retry || tries >= 5) break;
    }
    return rc;
}

/* ---- the table ----------------------------------------------------------------------- */

/* ---- raw access ------------------------------------------------------------------- */

/* A bigint column of row 0, or 0 when NULL (max() over no rows). */
static uint64_t col64(const PGresult *r, int col) {
    return PQgetisnull(r, 0, col) ? 0 : rd64(PQgetvalue(r, 0, col));
}

static int pg_snap_stat(ost__sess *s, ost_snap_stats *out) {
    memset(out, 0, sizeof *out);
    out->engine = "postgresql";
    int rc = read_ready(s);
    if (rc) return rc;
    PGresult *r = run_as(s->e, s->conn, "reading the counters",
                      "SELECT format, next_oid, last_serial, next_class, (SELECT count(*) FROM "
                      "ost_records)::bigint, (SELECT count(*) FROM ost_ments)::bigint, "
                      "pg_total_relation_size('ost_ments')::bigint FROM ost_meta WHERE id = 1",
                      NULL, &rc, NULL, "lllllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__st_fail(s->e->st, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    out->format = col64(r, 0);
    out->next_oid = col64(r, 1);
    out->last_serial = col64(r, 2);
    out->next_class = col64(r, 3);
    out->records = col64(r, 4);
    out->entries = col64(r, 5);
    out->entry_bytes = col64(r, 6);
    PQclear(r);
    return 0;
}

/* What can be wrong in the rows without the server noticing: counters
 * behind the rows, and records whose class the table does not hold. */
static int pg_verify(ost__sess *s, char *first, size_t cap) {
    first[0] = 0;
    int rc = read_ready(s);
    if (rc) return rc;
    PGresult *r = run_as(s->e, s->conn, "verifying",
                      "SELECT next_oid, last_serial, next_class, (SELECT max(oid) FROM "
                      "ost_records), (SELECT max(serial) FROM ost_records), (SELECT max(serial) "
                      "FROM ost_ments), (SELECT max(id) FROM ost_classes)::bigint, (SELECT count(*) "
                      "FROM ost_records r WHERE NOT EXISTS (SELECT 1 FROM ost_classes c WHERE c.id "
                      "= r.cid))::bigint, (SELECT min(oid) FROM ost_records r WHERE NOT EXISTS "
                      "(SELECT 1 FROM ost_classes c WHERE c.id = r.cid)) FROM ost_meta WHERE id = 1",
                      NULL, &rc, NULL, "lllllllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        snprintf(first, cap, "%s: damaged meta (no row)", s->e->shown);
        return OST_ECORRUPT;
    }
    uint64_t next_oid = col64(r, 0), last = col64(r, 1), next_class = col64(r, 2);
    bool any = !PQgetisnull(r, 0, 3);
    uint64_t top_oid = col64(r, 3), top_rs = col64(r, 4), top_es = col64(r, 5);
    uint64_t top_cid = col64(r, 6), orphans = col64(r, 7), orphan = col64(r, 8);
    PQclear(r);
    char line[4][200];
    int n = 0;
    if (any && next_oid <= top_oid)
        snprintf(line[n++], sizeof line[0], "meta: next_oid %llu is not above oid %llu",
                 (unsigned long long)next_oid, (unsigned long long)top_oid);
    if (last < top_rs || last < top_es)
        snprintf(line[n++], sizeof line[0], "meta: last_serial %llu is below serial %llu",
                 (unsigned long long)last, (unsigned long long)(top_rs > top_es ? top_rs : top_es));
    if (next_class <= top_cid)
        snprintf(line[n++], sizeof line[0], "meta: next_class %llu is not above class id %llu",
                 (unsigned long long)next_class, (unsigned long long)top_cid);
    if (orphans)
        snprintf(line[n++], sizeof line[0],
                 "%llu record%s of a class the class table does not hold (the first: oid %llu)",
                 (unsigned long long)orphans, orphans == 1 ? "" : "s", (unsigned long long)orphan);
    if (!n) return 0;
    snprintf(first, cap, "%s: %s", s->e->shown, line[0]);
    if (n > 1) {
        size_t len = strlen(first);
        snprintf(first + len, cap - len, ", and %d more", n - 1);
    }
    return OST_ECORRUPT;
}

/* ---- bulk import -------------------------------------------------------------------- */

/* An import: one transaction on a connection of its own. Classes are
 * INSERTed; records and entries stream through COPY ... FROM STDIN in
 * PostgreSQL's binary copy format (a header, per row the field count and
 * each field as a length and its bytes, a trailer), buffered here and sent
 * in chunks. A class after records ends the COPY and a later record starts
 * another. */
enum { IMP_IDLE, IMP_RECORDS, IMP_ENTRIES };
#define IMP_CHUNK ((size_t)256 << 10)

struct ost__import {
    ost__engine *e;
    PGconn *c;
    int mode;         /* IMP_*: which COPY is open */
    uint8_t *b;       /* rows not sent yet */
    size_t n, cap;
    bool any_rec, any_ent;
    uint64_t last_oid, last_map;
    uint8_t last_key[OST_MAP_KEY_MAX];
    size_t last_klen;
};

static void imp_free(ost__import *im) {
    if (!im) return;
    if (im->c) PQfinish(im->c);
    free(im->b);
    free(im);
}

/* Rolls back, frees im and returns code (the message is set). */
static int imp_fail(ost__import *im, int code) {
    if (im->c && PQstatus(im->c) == CONNECTION_OK) {
        if (im->mode != IMP_IDLE) {
            PQputCopyEnd(im->c, "import aborted");
            PGresult *r;
            while ((r = PQgetResult(im->c))) PQclear(r);
        }
        PQclear(PQexec(im->c, "ROLLBACK"));
    }
    imp_free(im);
    return code;
}

static int imp_oom(ost__import *im) {
    return ost__st_fail(im->e->st, OST_ENOMEM, "%s: import: out of memory", im->e->shown);
}

static int imp_put(ost__import *im, const void *d, size_t n) {
    if (ost__reserve((void **)&im->b, &im->cap, im->n + n, 1, IMP_CHUNK + 1024)) return imp_oom(im);
    if (n) memcpy(im->b + im->n, d, n);
    im->n += n;
    return 0;
}

static int imp_put16(ost__import *im, int v) {
    uint8_t b[2] = {(uint8_t)((unsigned)v >> 8), (uint8_t)v};
    return imp_put(im, b, 2);
}

static int imp_put_i64(ost__import *im, uint64_t v) {
    uint8_t b[12];
    wr32(b, 8);
    ost__be64(b + 4, v);
    return imp_put(im, b, 12);
}

static int imp_put_bytes(ost__import *im, const void *d, size_t n) {
    if (n > 0x3fffffff)
        return ost__st_fail(im->e->st, OST_ELIMIT, "%s: import: a value of %zu bytes (PostgreSQL "
                            "holds at most 1 GiB in a field)", im->e->shown, n);
    uint8_t b[4];
    wr32(b, (uint32_t)n);
    int rc = imp_put(im, b, 4);
    return rc ? rc : imp_put(im, d, n);
}

/* The server's failure during a COPY, as the store's message. */
static int imp_copy_fail(ost__import *im, const char *what) {
    char cause[240];
    PGresult *r = PQgetResult(im->c);
    pg_cause(im->c, r, cause, sizeof cause);
    int code = pg_code(im->c, r);
    PQclear(r);
    return ost__st_fail(im->e->st, code, "%s: import: %s: %s", im->e->shown, what, cause);
}

/* Sends the buffered rows. */
static int imp_flush(ost__import *im) {
    if (!im->n) return 0;
    if (PQputCopyData(im->c, (const char *)im->b, (int)im->n) != 1)
        return imp_copy_fail(im, im->mode == IMP_RECORDS ? "copying records" : "copying entries");
    im->n = 0;
    return 0;
}

/* Ends the open COPY, if any: its trailer, then the server's verdict. */
static int imp_idle(ost__import *im) {
    if (im->mode == IMP_IDLE) return 0;
    const char *what = im->mode == IMP_RECORDS ? "copying records" : "copying entries";
    int rc = imp_put16(im, -1);
    if (!rc) rc = imp_flush(im);
    if (rc) return rc;
    im->mode = IMP_IDLE;
    if (PQputCopyEnd(im->c, NULL) != 1) return imp_copy_fail(im, what);
    PGresult *r = PQgetResult(im->c);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
        char cause[240];
        pg_cause(im->c, r, cause, sizeof cause);
        int code = pg_code(im->c, r);
        PQclear(r);
        while ((r = PQgetResult(im->c))) PQclear(r);
        return ost__st_fail(im->e->st, code, "%s: import: %s: %s", im->e->shown, what, cause);
    }
    PQclear(r);
    while ((r = PQgetResult(im->c))) PQclear(r);
    return 0;
}

/* Starts the COPY of mode (ending another one first). */
static int imp_mode(ost__import *im, int mode) {
    if (im->mode == mode) return 0;
    int rc = imp_idle(im);
    if (rc) return rc;
    PGresult *r = PQexec(im->c, mode == IMP_RECORDS
                                    ? "COPY ost_records (oid, serial, cid, state) FROM STDIN "
                                      "(FORMAT binary)"
                                    : "COPY ost_ments (map, key, serial, value) FROM STDIN "
                                      "(FORMAT binary)");
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        char cause[240];
        pg_cause(im->c, r, cause, sizeof cause);
        int code = pg_code(im->c, r);
        PQclear(r);
        return ost__st_fail(im->e->st, code, "%s: import: starting a COPY: %s", im->e->shown, cause);
    }
    PQclear(r);
    im->mode = mode;
    static const uint8_t head[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
    return imp_put(im, head, sizeof head); /* signature, flags 0, no extension */
}

/* Checks, in c's open transaction with the tables locked, that the store
 * is new: at most the root that ost_store_open wrote (commit 1) and no
 * commit since, not even of the root alone, no oid handed out, no
 * entries (what LMDB's import.c asks too). 0, or
 * OST_EEXIST with what it holds and then need (what needs it new), or the
 * failure to read. */
static int check_new(ost__engine *e, PGconn *c, const char *need) {
    int rc = 0;
    PGresult *r = run_as(e, c, "reading meta",
                         "SELECT (SELECT count(*) FROM ost_records)::bigint, (SELECT count(*) FROM "
                         "ost_records WHERE oid <> 0)::bigint, (SELECT count(*) FROM "
                         "ost_ments)::bigint, next_oid, last_serial FROM ost_meta WHERE id = 1",
                         NULL, &rc, NULL, "lllll");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__st_fail(e->st, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t nrec = col64(r, 0), others = col64(r, 1), nent = col64(r, 2), next_oid = col64(r, 3),
             last = col64(r, 4);
    PQclear(r);
    if (others || nent || next_oid != 1 || last > 1)
        return ost__st_fail(e->st, OST_EEXIST, "%s: not a new store (%llu objects, last commit %llu); %s",
                            e->shown, (unsigned long long)nrec, (unsigned long long)last, need);
    return 0;
}

static int pg_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out) {
    (void)size_hint; /* the server grows its files itself */
    *out = NULL;
    ost_store *st = e->st;
    if (e->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: opened read-only", e->shown);
    if (st->conns) return ost__st_fail(st, OST_EBUSY, "%s: connections are open", e->shown);
    ost__import *im = calloc(1, sizeof *im);
    if (!im) return ost__st_fail(st, OST_ENOMEM, "%s: out of memory", e->shown);
    im->e = e;
    views_end(e); /* their snapshots would hold the tables against TRUNCATE */
    int rc = connect_db(e, &im->c);
    if (rc) {
        imp_free(im);
        return rc;
    }
    /* other writers wait until the import ends; readers go on */
    rc = run0(e, im->c, "import: begin", "BEGIN", NULL);
    if (!rc)
        rc = run0(e, im->c, "import: locking the tables",
                  "LOCK TABLE ost_meta, ost_records, ost_classes, ost_txlog, ost_ments IN "
                  "EXCLUSIVE MODE",
                  NULL);
    if (rc) return imp_fail(im, rc);
    rc = check_new(e, im->c, "import needs a new or empty store");
    if (rc) return imp_fail(im, rc);
    rc = run0(e, im->c, "import: emptying the store",
              "TRUNCATE ost_records, ost_classes, ost_txlog, ost_ments", NULL);
    if (rc) return imp_fail(im, rc);
    *out = im;
    return 0;
}

static int pg_imp_class(ost__import *im, uint32_t id, const char *module, size_t mlen,
                        const char *name, size_t nlen) {
    int rc = imp_idle(im);
    if (rc) return rc;
    params p = {0};
    p_i32(&p, id);
    p_bytes(&p, module, mlen);
    p_bytes(&p, name, nlen);
    PGresult *r = run(im->e, im->c, "import: adding a class",
                      "INSERT INTO ost_classes VALUES ($1::int, $2::text, $3::text) ON CONFLICT DO "
                      "NOTHING",
                      &p, &rc, NULL);
    if (!r) return rc;
    bool added = !strcmp(PQcmdTuples(r), "1");
    PQclear(r);
    if (!added)
        return ost__st_fail(im->e->st, OST_EEXIST, "class id %u (%.*s.%.*s) is listed twice", id,
                            (int)mlen, module, (int)nlen, name);
    return 0;
}

static int pg_imp_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                         const void *pickle, size_t len) {
    ost_store *st = im->e->st;
    if (im->any_rec && oid <= im->last_oid)
        return ost__st_fail(st, OST_EINVAL, "oid %llu: oids must ascend, each once",
                            (unsigned long long)oid);
    if (oid >= OST__OID_LIMIT || serial >= OST__SERIAL_LIMIT)
        return ost__st_fail(st, OST_EINVAL, "oid %llu: its %s is past the store's limit",
                            (unsigned long long)oid, oid >= OST__OID_LIMIT ? "oid" : "serial");
    int rc = imp_mode(im, IMP_RECORDS);
    if (!rc) rc = imp_put16(im, 4);
    if (!rc) rc = imp_put_i64(im, oid);
    if (!rc) rc = imp_put_i64(im, serial);
    if (!rc) {
        uint8_t b[8];
        wr32(b, 4);
        wr32(b + 4, cid);
        rc = imp_put(im, b, 8);
    }
    if (!rc) rc = imp_put_bytes(im, pickle, len);
    if (!rc && im->n >= IMP_CHUNK) rc = imp_flush(im);
    if (rc) return rc;
    im->any_rec = true;
    im->last_oid = oid;
    return 0;
}

static int pg_imp_entry(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial, const void *value, size_t vlen) {
    ost_store *st = im->e->st;
    if (im->any_ent) {
        int c = map < im->last_map ? -1 : map > im->last_map;
        if (!c) {
            size_t m = klen < im->last_klen ? klen : im->last_klen;
            c = m ? memcmp(key, im->last_key, m) : 0;
            if (!c) c = klen < im->last_klen ? -1 : klen > im->last_klen;
        }
        if (c <= 0)
            return ost__st_fail(st, OST_EINVAL,
                                "map %llu: entries must ascend (by map oid, then by key), each once",
                                (unsigned long long)map);
    }
    if (map >= OST__OID_LIMIT || serial >= OST__SERIAL_LIMIT)
        return ost__st_fail(st, OST_EINVAL, "map %llu: its %s is past the store's limit",
                            (unsigned long long)map, map >= OST__OID_LIMIT ? "oid" : "serial");
    int rc = imp_mode(im, IMP_ENTRIES);
    if (!rc) rc = imp_put16(im, 4);
    if (!rc) rc = imp_put_i64(im, map);
    if (!rc) rc = imp_put_bytes(im, key, klen);
    if (!rc) rc = imp_put_i64(im, serial);
    if (!rc) rc = imp_put_bytes(im, value, vlen);
    if (!rc && im->n >= IMP_CHUNK) rc = imp_flush(im);
    if (rc) return rc;
    im->any_ent = true;
    im->last_map = map;
    if (klen) memcpy(im->last_key, key, klen);
    im->last_klen = klen;
    return 0;
}

/* The maps' records, checked once all entries are in (LMDB checks each map
 * as its first entry comes; a COPY cannot be asked meanwhile): each map
 * with entries has a record of class ostore.maps.OrderedMap whose entries
 * all have values, or OrderedSet whose entries have none. */
static int imp_check_maps(ost__import *im) {
    int rc = 0;
    PGresult *r = run_as(im->e, im->c, "import: checking the maps",
                      "WITH mm AS (SELECT map, bool_or(octet_length(value) > 0) AS hasv, "
                      "bool_and(octet_length(value) > 0) AS allv FROM ost_ments GROUP BY map) "
                      "SELECT mm.map, c.name, mm.hasv, mm.allv FROM mm LEFT JOIN ost_records r ON "
                      "r.oid = mm.map LEFT JOIN ost_classes c ON c.id = r.cid WHERE c.module IS "
                      "DISTINCT FROM 'ostore.maps' OR c.name NOT IN ('OrderedMap', 'OrderedSet') "
                      "OR (c.name = 'OrderedMap' AND NOT mm.allv) OR (c.name = 'OrderedSet' AND "
                      "mm.hasv) ORDER BY mm.map LIMIT 1",
                      NULL, &rc, NULL, "Ltzz");
    if (!r) return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return 0;
    }
    unsigned long long map = rd64(PQgetvalue(r, 0, 0));
    const char *name = PQgetisnull(r, 0, 1) ? "" : PQgetvalue(r, 0, 1);
    if (!strcmp(name, "OrderedSet"))
        ost__st_fail(im->e->st, OST_EINVAL, "map %llu: an entry of a set has a value", map);
    else if (!strcmp(name, "OrderedMap"))
        ost__st_fail(im->e->st, OST_EINVAL, "map %llu: an entry without a value pickle", map);
    else
        ost__st_fail(im->e->st, OST_EINVAL,
                     "entries under oid %llu, which has no record of class "
                     "ostore.maps.OrderedMap or OrderedSet",
                     map);
    PQclear(r);
    return OST_EINVAL;
}

static int pg_imp_commit(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                         uint64_t next_class) {
    (void)format; /* what is imported has what the current format has */
    int rc = imp_idle(im);
    if (!rc && im->any_ent) rc = imp_check_maps(im);
    if (rc) return imp_fail(im, rc);
    params p = {0};
    p_i64(&p, OST_STORE_FORMAT);
    p_i64(&p, next_oid);
    p_i64(&p, last_serial);
    p_i64(&p, next_class);
    p_i64(&p, last_serial + 1);
    rc = run0(im->e, im->c, "import: writing meta",
              "UPDATE ost_meta SET format = $1::bigint, next_oid = $2::bigint, last_serial = "
              "$3::bigint, next_class = $4::bigint, low = $5::bigint WHERE id = 1",
              &p);
    /* the planner's statistics: without them, right after a bulk load, it
     * may sort a whole table for each page of a scan or an entry cursor */
    if (!rc) rc = run0(im->e, im->c, "import: analyze", "ANALYZE ost_records, ost_classes, ost_ments", NULL);
    if (!rc) rc = run0(im->e, im->c, "import: commit", "COMMIT", NULL);
    if (rc) return imp_fail(im, rc);
    imp_free(im);
    return 0;
}

static void pg_imp_abort(ost__import *im) {
    if (im) imp_fail(im, 0);
}

/* Drops the store's tables (if it is new, when only_new), on a connection
 * of its own: the schema lock and the tables locked against every other
 * session first (a session of this process that holds a snapshot makes
 * the lock time out rather than wait for ever). */
static int pg_drop(ost__engine *e, bool only_new) {
    views_end(e); /* their snapshots would hold the tables */
    PGconn *c;
    int rc = connect_db(e, &c);
    if (rc) return rc;
    rc = run0(e, c, "removing the store: begin", "BEGIN", NULL);
    if (!rc)
        rc = exec_simple(e, c, "removing the store: locking the tables",
                         "SET LOCAL lock_timeout = '10s'; SELECT pg_advisory_xact_lock(" SCHEMA_LOCK
                         "); LOCK TABLE ost_meta, ost_records, ost_classes, ost_txlog, ost_ments "
                         "IN ACCESS EXCLUSIVE MODE");
    if (!rc && only_new) rc = check_new(e, c, "only a new store is removed");
    /* missing in a store made before deletion records and opened only
     * read-only since (mapdels_ensure) */
    if (!rc)
        rc = run0(e, c, "removing the store: deletion records", "DROP TABLE IF EXISTS ost_mapdels",
                  NULL);
    if (!rc)
        rc = run0(e, c, "removing the store",
                  "DROP TABLE ost_ments, ost_txlog, ost_classes, ost_records, ost_meta", NULL);
    if (!rc) rc = run0(e, c, "removing the store: commit", "COMMIT", NULL);
    if (rc && PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    PQfinish(c);
    return rc;
}

const ost__engine_ops ost__pg_engine = {
    .name = "postgresql",
    .flags = 0,
    .claims = pg_claims,
    .open = pg_open,
    .close = pg_close,
    .stat = pg_stat,
    .sess_open = pg_sess_open,
    .sess_close = pg_sess_close,
    .snap_begin = pg_snap_begin,
    .snap_renew = pg_snap_begin, /* it ends an open snapshot in its own round trip */
    .snap_adopt = pg_snap_adopt,
    .snap_end = pg_snap_end,
    .snap_moved = pg_snap_moved,
    .pin = pg_pin,
    .unpin = pg_unpin,
    .get = pg_get,
    .get_many = pg_get_many,
    .scan = pg_scan,
    .changes = pg_changes,
    .class_get = pg_class_get,
    .class_each = pg_class_each,
    .class_id = pg_class_id,
    .reserve_oids = pg_reserve_oids,
    .commit = pg_commit,
    .sweep = pg_sweep,
    .ent_get = pg_ent_get,
    .ent_put = pg_ent_put,
    .ent_del = pg_ent_del,
    .ent_get_del = pg_ent_get_del,
    .ent_drop_map = pg_ent_drop_map,
    .ecur_open = pg_ecur_open,
    .ecur_seek = pg_ecur_seek,
    .ecur_step = pg_ecur_step,
    .ecur_get = pg_ecur_get,
    .ecur_close = pg_ecur_close,
    .ecur_ahead = pg_ecur_ahead,
    .ecur_keys_only = pg_ecur_keys_only,
    .ent_get_ref = pg_ent_get_ref,
    .ent_each_map = pg_ent_each_map,
    .map_count_add = pg_map_count_add,
    .snap_stat = pg_snap_stat,
    .verify = pg_verify,
    .imp_begin = pg_imp_begin,
    .imp_class = pg_imp_class,
    .imp_record = pg_imp_record,
    .imp_entry = pg_imp_entry,
    .imp_commit = pg_imp_commit,
    .imp_abort = pg_imp_abort,
    .drop = pg_drop,
    .views_mark = pg_views_mark,
    .views_release = pg_views_release,
};
