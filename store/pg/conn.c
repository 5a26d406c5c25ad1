/* The PostgreSQL engine's connection and statement layer (pg.h): libpq's
 * failures turned into OST_E* codes and one-line messages, statements run
 * with binary parameters and results whose shape is checked before
 * anything is decoded (run, run_as, run_ps, res_check), the prepared
 * statements, pipelines, the connections (the engine's own, a session's,
 * a session's prefetch helpers) with the exclusive option's lock, and the
 * results a snapshot keeps for the views into them. Every round trip is
 * counted here (TRIP). Calls no other file of store/pg/. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* A notice processor that drops the notice (PQsetNoticeProcessor with
 * NULL keeps libpq's, which prints to stderr). */
static void quiet_notice(void *arg, const char *msg) {
    (void)arg;
    (void)msg;
}

/* The exclusive option's session advisory lock: this key and a hash of
 * the store's schema (two stores in one database do not share it). */
#define EXCL_LOCK "pg_try_advisory_lock(731059385, hashtext(coalesce(current_schema(), '')))"

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
void ost__pg_cause(PGconn *c, const PGresult *r, char *out, size_t cap) {
    const char *m = r ? PQresultErrorMessage(r) : NULL;
    if (!m || !*m) m = c ? PQerrorMessage(c) : NULL;
    first_line(m, out, cap);
    if (c && PQstatus(c) == CONNECTION_BAD && !strstr(out, "connection")) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, " (the connection to the server was lost)");
    }
}

/* The OST_E* code of a failed statement. */
int ost__pg_code(PGconn *c, const PGresult *r) {
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
bool ost__pg_retryable(const PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return st && (!strcmp(st, "40P01") || !strcmp(st, "40001"));
}

/* Runs sql with the parameters of p (NULL: none), binary results. A result
 * whose status is not TUPLES_OK or COMMAND_OK is cleared and NULL
 * returned, with *res_err (if not NULL) getting its code and the store's
 * message set naming what; retry (if not NULL) says whether it is worth a
 * new try. */
PGresult *ost__pg_run(ost__engine *e, PGconn *c, const char *what, const char *sql,
                      const params *p, int *code, bool *retry) {
    TRIP();
    PGresult *r = PQexecParams(c, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->l : NULL,
                               p ? p->f : NULL, 1);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) return r;
    char cause[240];
    ost__pg_cause(c, r, cause, sizeof cause);
    int rc = ost__pg_code(c, r);
    if (retry) *retry = ost__pg_retryable(r);
    PQclear(r);
    if (code) *code = rc;
    ost__pg_fail(e, rc, "%s: %s: %s", e->shown, what, cause);
    return NULL;
}

/* Runs sql, one or more statements without parameters, by the simple
 * query protocol in one round trip: 0 or a code, as ost__pg_run0. */
int ost__pg_exec_simple(ost__engine *e, PGconn *c, const char *what, const char *sql) {
    TRIP();
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        PQclear(r);
        return 0;
    }
    char cause[240];
    ost__pg_cause(c, r, cause, sizeof cause);
    int rc = ost__pg_code(c, r);
    PQclear(r);
    return ost__pg_fail(e, rc, "%s: %s: %s", e->shown, what, cause);
}

/* Runs a statement whose result is not needed: 0 or a code. */
int ost__pg_run0(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p) {
    int rc = 0;
    PGresult *r = ost__pg_run(e, c, what, sql, p, &rc, NULL);
    PQclear(r);
    return r ? 0 : rc;
}

/* The same, saying whether a failure is worth a new try. */
int ost__pg_run0r(ost__engine *e, PGconn *c, const char *what, const char *sql, const params *p,
                  bool *retry) {
    int rc = 0;
    PGresult *r = ost__pg_run(e, c, what, sql, p, &rc, retry);
    PQclear(r);
    return r ? 0 : rc;
}

int ost__pg_fail(ost__engine *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    e->host->fail(e->st, code, fmt, ap);
    va_end(ap);
    return code;
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
int ost__pg_res_check(ost__engine *e, const PGresult *r, const char *what, const char *shape) {
    int nf = (int)strlen(shape);
    if (PQnfields(r) != nf)
        return ost__pg_fail(e, OST_ECORRUPT,
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
            return ost__pg_fail(e, OST_ECORRUPT,
                                "%s: %s: column %s is %s%s, ostore reads %s", e->shown, what, col,
                                gn, PQfformat(r, j) != 1 ? " (as text)" : "", type_name(want));
        }
        for (int i = 0; i < nt; i++) {
            if (PQgetisnull(r, i, j)) {
                if (null_ok) continue;
                return ost__pg_fail(e, OST_ECORRUPT, "%s: %s: column %s is NULL (row %d)",
                                    e->shown, what, col, i + 1);
            }
            int len = PQgetlength(r, i, j);
            if (width >= 0 && len != width)
                return ost__pg_fail(e, OST_ECORRUPT,
                                    "%s: %s: column %s holds %d bytes (row %d), a %s has %d",
                                    e->shown, what, col, len, i + 1, type_name(want), width);
        }
    }
    return 0;
}

/* run, then ost__pg_res_check: the result, or NULL with *code and the message
 * set (r cleared) when the statement failed or the result is not of
 * that shape. */
PGresult *ost__pg_run_as(ost__engine *e, PGconn *c, const char *what, const char *sql,
                         const params *p, int *code, bool *retry, const char *shape) {
    PGresult *r = ost__pg_run(e, c, what, sql, p, code, retry);
    if (r && (*code = ost__pg_res_check(e, r, what, shape))) {
        if (retry) *retry = false;
        PQclear(r);
        return NULL;
    }
    return r;
}

/* The hot statements, of readers (record reads, the commit log) and of
 * commits (the row locks, the serial with the records and the log), are
 * prepared once per server connection: each then costs the server no
 * parse and no plan (a single-row read by key spends about half its time
 * there otherwise, and a commit runs two of them). */

/* An entry page's columns: the key, the serial and, when $3 is true, the
 * value (else an empty value: a walk of keys only reads none). */
#define EC_COLS                                                                           \
    "SELECT key, serial, CASE WHEN $3::bool THEN value ELSE ''::bytea END FROM ost_ments "
#define EC_WHERE "WHERE map = $1::bigint "

const char *const ost__pg_ps_name[PS_N] = {"ost_get",   "ost_get_many", "ost_changes",
                                           "ost_lock",  "ost_write",    "ost_gwrite",
                                           "ost_meta",  "ost_meta_lock", "ost_ent_get",
                                           "ost_ec_first", "ost_ec_last", "ost_ec_ge",
                                           "ost_ec_gt", "ost_ec_le", "ost_ec_lt",
                                           "ost_ent_ref"};

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
    /* a whole group's writes (ost__pg_group_fast): the records, each with its
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
     * starts as ostore writes a lone reference (ost__pg_ent_get_ref): PROTO,
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

/* The shape of each statement's result (ost__pg_res_check): ost__pg_run_ps checks it. */
const char *const ost__pg_ps_shape[PS_N] = {"LIB", "LLIB", "LB",  "LL",  "LL",  "",    "LLL", "LL",
                                            "LB",  "BLB",  "BLB", "BLB", "BLB", "BLB", "BLB",
                                            "LBllib"};

/* Runs the statement which (PS_*) with the parameters of p, preparing it
 * first on its first use on the connection, as run runs sql: the result
 * or NULL with *code, *retry (if not NULL) and the store's message set. A
 * failed PREPARE (inside a transaction it ends it) is said as such. */
PGresult *ost__pg_run_ps(ost__sess *s, int which, const char *what, const params *p, int *code,
                         bool *retry) {
    PGresult *r = NULL;
    if (!(s->prepared & 1u << which)) {
        TRIP();
        r = PQprepare(s->conn, ost__pg_ps_name[which], ps_sql[which], 0, NULL);
        if (r && PQresultStatus(r) == PGRES_COMMAND_OK) {
            s->prepared |= 1u << which;
            PQclear(r);
            r = NULL;
        }
    }
    if (s->prepared & 1u << which) {
        TRIP();
        r = PQexecPrepared(s->conn, ost__pg_ps_name[which], p->n, p->v, p->l, p->f, 1);
        ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            int rc = ost__pg_res_check(s->e, r, what, ost__pg_ps_shape[which]);
            if (!rc) return r;
            PQclear(r);
            if (retry) *retry = false;
            if (code) *code = rc;
            return NULL;
        }
    }
    char cause[240];
    ost__pg_cause(s->conn, r, cause, sizeof cause);
    int rc = ost__pg_code(s->conn, r);
    if (retry) *retry = ost__pg_retryable(r);
    PQclear(r);
    if (code) *code = rc;
    ost__pg_fail(s->e, rc, "%s: %s: %s", s->e->shown, what, cause);
    return NULL;
}

/* Prepares which on s's connection unless it is already: 0 or the code,
 * with the store's message. */
int ost__pg_ps_ready(ost__sess *s, int which) {
    if (s->prepared & 1u << which) return 0;
    TRIP();
    PGresult *r = PQprepare(s->conn, ost__pg_ps_name[which], ps_sql[which], 0, NULL);
    if (r && PQresultStatus(r) == PGRES_COMMAND_OK) {
        s->prepared |= 1u << which;
        PQclear(r);
        return 0;
    }
    char cause[240];
    ost__pg_cause(s->conn, r, cause, sizeof cause);
    int rc = ost__pg_code(s->conn, r);
    PQclear(r);
    return ost__pg_fail(s->e, rc, "%s: preparing a statement: %s", s->e->shown, cause);
}

/* Sends st[0, n) on c in one pipeline (pipeline mode, then a sync):
 * false when libpq could not. */
bool ost__pg_pipe_send(PGconn *c, const pstmt *st, int n) {
    bool ok = PQenterPipelineMode(c);
    for (int i = 0; i < n && ok; i++) {
        const params *p = st[i].p;
        int np = p ? p->n : 0;
        const char *const *v = p ? p->v : NULL;
        const int *l = p ? p->l : NULL, *f = p ? p->f : NULL;
        ok = st[i].ps >= 0 ? PQsendQueryPrepared(c, ost__pg_ps_name[st[i].ps], np, v, l, f, 1)
                           : PQsendQueryParams(c, st[i].sql, np, NULL, v, l, f, 1);
    }
    return ok && PQpipelineSync(c);
}

/* Reads the results of a pipeline of n statements that ost__pg_pipe_send sent
 * (sent: whether it did) and leaves pipeline mode: res[i] gets statement
 * i's result when it succeeded (the caller clears it), NULL otherwise.
 * Returns 0 when all succeeded, else the code of the first failure, with
 * its cause, and *failed its index; n when the pipeline itself failed
 * (every res[i] is then NULL, and c is in no known state: the caller
 * closes it). */
int ost__pg_pipe_recv(PGconn *c, bool sent, int n, PGresult **res, int *failed, char *cause,
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
                ost__pg_cause(c, r, cause, cap);
                rc = ost__pg_code(c, r);
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
        if (*failed < 0 || !*cause) ost__pg_cause(c, NULL, cause, cap);
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
int ost__pg_pipe_fail(ost__sess *s, const char *what, int rc, bool broken, const char *cause) {
    if (broken) {
        /* the session reconnects at its next use */
        PQfinish(s->conn);
        s->conn = NULL;
        s->prepared = 0;
    }
    return ost__pg_fail(s->e, rc, "%s: %s: %s", s->e->shown, what, cause);
}

/* Sends st[0, n) in one pipeline on s's connection and reads their
 * results: res[i] gets statement i's result when it succeeded (the caller
 * clears it), NULL otherwise. Returns 0 when all succeeded; else the code
 * of the first failure with the store's message naming what, and *failed
 * its index (n: the pipeline itself failed, the connection is then
 * closed, and what the server did is not known). */
int ost__pg_pipe_run(ost__sess *s, const char *what, const pstmt *st, int n, PGresult **res,
                     int *failed) {
    char cause[240];
    TRIP();
    bool sent = ost__pg_pipe_send(s->conn, st, n);
    int rc = ost__pg_pipe_recv(s->conn, sent, n, res, failed, cause, sizeof cause);
    return rc ? ost__pg_pipe_fail(s, what, rc, *failed == n, cause) : 0;
}

/* ---- connections ---------------------------------------------------------------- */

/* A new connection to e's database: 0 or OST_EIO with the message set. A
 * connect timeout of 10 s applies unless the address sets one. */
int ost__pg_connect(ost__engine *e, PGconn **out) {
    const char *kw[] = {"connect_timeout", "dbname", "application_name", NULL};
    const char *val[] = {"10", e->conninfo, "ostore", NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c) return ost__pg_fail(e, OST_ENOMEM, "%s: cannot connect: out of memory", e->shown);
    if (PQstatus(c) != CONNECTION_OK) {
        char cause[300];
        first_line(PQerrorMessage(c), cause, sizeof cause);
        PQfinish(c);
        return ost__pg_fail(e, OST_EIO, "%s: cannot connect: %s", e->shown, cause);
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
        return ost__pg_fail(e, OST_EIO, "%s: cannot set up the connection: %s", e->shown, cause);
    }
    *out = c;
    return 0;
}

/* Takes the exclusive option's lock on c, for the life of the session:
 * 0, OST_EBUSY when another session holds it, or the failure. */
int ost__pg_take_excl(ost__engine *e, PGconn *c) {
    int rc = 0;
    PGresult *r = ost__pg_run_as(e, c, "taking the exclusive lock", "SELECT " EXCL_LOCK, NULL, &rc,
                                 NULL, "Z");
    if (!r) return rc;
    bool got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 1;
    PQclear(r);
    if (!got)
        return ost__pg_fail(e, OST_EBUSY,
                            "%s: store is locked: another handle holds it with the exclusive "
                            "option (an ostore pack, import, copy or demo)",
                            e->shown);
    return 0;
}

/* The engine's own connection, under e->lock: (re)connected when needed,
 * with the exclusive lock taken again when the store holds it. */
int ost__pg_eng_conn(ost__engine *e, PGconn **out) {
    if (e->conn && PQstatus(e->conn) != CONNECTION_OK) {
        PQfinish(e->conn);
        e->conn = NULL;
    }
    if (!e->conn) {
        int rc = ost__pg_connect(e, &e->conn);
        if (!rc && e->exclusive) rc = ost__pg_take_excl(e, e->conn);
        if (rc) {
            if (e->conn) PQfinish(e->conn);
            e->conn = NULL;
            return rc;
        }
    }
    *out = e->conn;
    return 0;
}

/* Whether the engine's connection broke in its last statement (the server
 * restarted): its operations then run once more on a new one. */
bool ost__pg_eng_lost(ost__engine *e) {
    pthread_mutex_lock(&e->lock);
    bool lost = e->conn && PQstatus(e->conn) != CONNECTION_OK;
    pthread_mutex_unlock(&e->lock);
    return lost;
}

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
    int rc = ost__pg_eng_conn(e, &c);
    /* held: asking again stacks it on the same session, which is fine:
     * the session's end releases every hold */
    if (!rc) {
        rc = ost__pg_take_excl(e, c);
        if (rc == OST_EIO && PQstatus(c) != CONNECTION_OK && !(rc = ost__pg_eng_conn(e, &c)))
            rc = ost__pg_take_excl(e, c);
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* Reads the answer to a snapshot's COMMIT that ost__pg_snap_end sent without
 * waiting (a read-only transaction's COMMIT has nothing to report; a
 * broken connection shows in its status). */
void ost__pg_drain(ost__sess *s) {
    if (!s->end_sent) return;
    s->end_sent = false;
    if (!s->conn) return;
    PGresult *r;
    while ((r = PQgetResult(s->conn))) PQclear(r);
}


/* The session's connection: (re)connected when there is none or the last
 * one broke (the server restarted). */
int ost__pg_sess_conn(ost__sess *s) {
    ost__pg_drain(s);
    if (s->conn && PQstatus(s->conn) != CONNECTION_OK) {
        PQfinish(s->conn);
        s->conn = NULL;
        s->prepared = 0;
    }
    if (s->conn) return 0;
    int rc = excl_check(s->e);
    return rc ? rc : ost__pg_connect(s->e, &s->conn);
}

/* Closes the helpers; the session reads alone from now on if off. */
void ost__pg_help_close(ost__sess *s, bool off) {
    for (unsigned i = 0; i < s->nhelp; i++)
        if (s->help[i].conn) PQfinish(s->help[i].conn);
    memset(s->help, 0, sizeof s->help);
    s->nhelp = 0;
    if (off) s->help_off = true;
}

/* Connects the first `want` helpers of s that are not connected yet, each
 * with get_many prepared: true when they are all there. A failure (the
 * server may allow no more connections) closes them all, and the session
 * reads alone from then on. */
bool ost__pg_help_connect(ost__sess *s, size_t want) {
    while (s->nhelp < want) {
        ost__help *h = &s->help[s->nhelp];
        if (ost__pg_connect(s->e, &h->conn)) {
            ost__pg_help_close(s, true);
            return false;
        }
        PGresult *r =
            PQprepare(h->conn, ost__pg_ps_name[PS_GET_MANY], ps_sql[PS_GET_MANY], 0, NULL);
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        s->nhelp++;
        if (!ok) {
            ost__pg_help_close(s, true);
            return false;
        }
    }
    return true;
}

void ost__pg_keep_clear(ost__sess *s) {
    for (size_t i = 0; i < s->nkept; i++) PQclear(s->kept[i]);
    s->nkept = 0;
}

/* Keeps r until the snapshot or the commit ends: 0 or OST_ENOMEM (r is
 * cleared then). */
int ost__pg_keep(ost__sess *s, PGresult *r) {
    if (ost__reserve((void **)&s->kept, &s->capkept, s->nkept + 1, sizeof *s->kept, 16)) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ENOMEM, "out of memory");
    }
    s->kept[s->nkept++] = r;
    return 0;
}
