/* The PostgreSQL engine's tables (pg.h): what a new store's schema is,
 * the check of an existing one against the catalog before any statement
 * relies on it, its creation under an advisory lock, and the upgrade of
 * format 3. Called by open.c. */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* The deletion records of map keys (ost__pg_ent_del, ost__pg_ent_get_del): the
 * last commit that deleted each key. Optional in schema_want, so that a
 * database made before it opens; a read-write open makes it when it is
 * missing (ost__pg_mapdels_ensure). */
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
 * it is there (a database made before it has none: ost__pg_mapdels_ensure). */
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
        return ost__pg_fail(e, OST_ECORRUPT,
                            "%s: not an ostore schema: %s is not a table (relkind '%s')", e->shown,
                            tn, kind);
    /* every column of ours, of our type */
    for (int k = 0; k < schema_want[t].ncols; k++) {
        int at = -1;
        for (int i = from; i < to && at < 0; i++)
            if (!strcmp(PQgetvalue(r, i, 2), schema_want[t].col[k])) at = i;
        if (at < 0)
            return ost__pg_fail(e, OST_ECORRUPT,
                                "%s: not an ostore schema: table %s has no column %s", e->shown, tn,
                                schema_want[t].col[k]);
        if (strcmp(PQgetvalue(r, at, 3), schema_want[t].type[k]))
            return ost__pg_fail(e, OST_ECORRUPT,
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
                return ost__pg_fail(e, OST_ECORRUPT,
                                    "%s: not an ostore schema: table %s has a column %s that "
                                    "ostore's has not",
                                    e->shown, tn, PQgetvalue(r, i, 2));
        }
    }
    for (int k = 0; k < schema_want[t].ncols; k++)
        if (strcmp(PQgetvalue(r, from + k, 2), schema_want[t].col[k]))
            return ost__pg_fail(e, OST_ECORRUPT,
                                "%s: not an ostore schema: the columns of table %s are not in "
                                "ostore's order (%s is column %d)",
                                e->shown, tn, schema_want[t].col[k], k + 1);
    const char *pk = PQgetisnull(r, from, 4) ? "" : PQgetvalue(r, from, 4);
    if (strcmp(pk, schema_want[t].pk))
        return ost__pg_fail(e, OST_ECORRUPT,
                            "%s: not an ostore schema: table %s has %s%s%s, ostore's is (%s)",
                            e->shown, tn, *pk ? "primary key (" : "no primary key", pk,
                            *pk ? ")" : "", schema_want[t].pk);
    const char *uq = PQgetisnull(r, from, 5) ? "" : PQgetvalue(r, from, 5);
    if (schema_want[t].unique && !key_listed(uq, schema_want[t].unique))
        return ost__pg_fail(e, OST_ECORRUPT,
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
        ost__pg_cause(c, r, cause, sizeof cause);
        int rc = ost__pg_code(c, r);
        PQclear(r);
        return ost__pg_fail(e, rc, "%s: checking the schema: %s", e->shown, cause);
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
        return ost__pg_fail(e, OST_EIO, "%s: checking the schema: an answer of another shape",
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
        rc = ost__pg_fail(e, OST_ECORRUPT,
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
int ost__pg_schema_open(ost__engine *e, PGconn *c, bool create, bool *dels) {
    int rc = 0, present = 0;
    if (create) {
        rc = ost__pg_run0(e, c, "creating the schema", "BEGIN", NULL);
        if (!rc)
            rc = ost__pg_run0(e, c, "creating the schema",
                              "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK ")", NULL);
    }
    if (!rc) rc = schema_valid(e, c, &present, dels);
    if (!rc && !present && !create)
        rc = ost__pg_fail(e, OST_ENOTFOUND, "no ostore schema at %s (open with create to make one)",
                          e->shown);
    if (!rc && !present) {
        rc = ost__pg_exec_simple(e, c, "cannot create the schema", schema_sql);
        *dels = !rc;
    }
    if (create) {
        if (!rc) rc = ost__pg_run0(e, c, "creating the schema (commit)", "COMMIT", NULL);
        else if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "ROLLBACK"));
    }
    if (rc) return rc;
    PGresult *r = ost__pg_run_as(e, c, "reading meta", "SELECT format FROM ost_meta WHERE id = 1",
                                 NULL, &rc, NULL, "L");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown);
    }
    uint64_t f = rd64(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (f < 3 || f > OST_STORE_FORMAT)
        return ost__pg_fail(e, OST_EVERSION, "%s: store format %llu, this library reads 3 to %d",
                            e->shown, (unsigned long long)f, OST_STORE_FORMAT);
    if (f < OST_STORE_FORMAT && !e->read_only) {
        /* format 3's rows are format 4's as they are (dict states under a
         * class's own id): the upgrade sets the format, one statement,
         * all or nothing; a store another session upgraded meanwhile
         * stays as it is */
        params p = {0};
        p_i64(&p, OST_STORE_FORMAT);
        rc = ost__pg_run0(
            e, c, "upgrading the store's format",
            "UPDATE ost_meta SET format = $1::bigint WHERE id = 1 AND format < $1::bigint", &p);
        if (rc) return rc;
        f = OST_STORE_FORMAT;
    }
    e->host->set_format(e->st, f);
    return 0;
}

/* Makes ost_mapdels in a database whose schema predates it, under the
 * schema lock: one simple query, which PostgreSQL runs as one implicit
 * transaction (the lock ends with it, a failure undoes it all). */
int ost__pg_mapdels_ensure(ost__engine *e, PGconn *c) {
    return ost__pg_exec_simple(e, c, "making the table ost_mapdels",
                               "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK "); " MAPDELS_SQL);
}
