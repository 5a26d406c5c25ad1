/* The job of `ostore demo` (tools/cmd_demo.c) on SQLite, as a C
 * programmer who reaches for SQLite first would write it (issue 31): the
 * peer that bench/demo_vs_sqlite.py runs beside the demo.
 *
 *   bench_demo_sqlite DIR [--objects N] [--quiet] [--stats FILE] [--foreign-keys on|off]
 *
 * The same shop from the same generator and seeds (tools/demo_gen.h), so
 * both hold identical data and answer identical queries, in one file
 * DIR/shop.db by SQLite's book:
 *
 *   - journal_mode=WAL, synchronous=FULL: every commit is durable when it
 *     returns (WAL's FULL syncs the log at each commit), as ostore's
 *     durable default syncs at each commit;
 *   - foreign_keys=ON (--foreign-keys off: the references declared but
 *     not checked at each insert, as ostore does not check them), a 64 MiB
 *     page cache (cache_size=-65536), prepared
 *     statements for everything run more than once;
 *   - tables: products (INTEGER PRIMARY KEY, sku UNIQUE), customers
 *     (INTEGER PRIMARY KEY: the customer's id), orders ((customer, number)
 *     PRIMARY KEY, WITHOUT ROWID), line_items ((customer, number, position)
 *     PRIMARY KEY, WITHOUT ROWID), with foreign keys for the references
 *     (an order's customer, a line item's order and product), and shop
 *     (the counts the walk checks against, as the demo's root holds them).
 *
 * The phases, as the demo's:
 *
 *   load    the shop in DEMO_BATCHES transactions (the demo's loader makes
 *           as many durable batch commits), the counts after (not timed);
 *   walk    every row from the start in key order (products by sku;
 *           customers by id; orders by (customer, number), each with its
 *           line items and each line item's product), one read
 *           transaction, checking every count and total as the demo does;
 *   lookup  DEMO_LOOKUPS random customers by id (row read, id checked), a
 *           read transaction per DEMO_TXN_READS; ids 0 and n + 1 absent,
 *           the first and last id;
 *   range   one customer's orders shown; the orders of DEMO_RANGE_QUERIES
 *           random customers (customer row, then each order row), counted
 *           against what was built; products from a sku to another,
 *           forwards and backwards;
 *   commit  DEMO_THREADS threads, each its own connection (busy_timeout
 *           set), DEMO_COMMITS_PER_THREAD transactions each inserting a new
 *           order (and its one line item) of a random customer, the
 *           customer and product read first, as the demo's commits do;
 *   check   PRAGMA integrity_check and PRAGMA foreign_key_check.
 *
 * Then a checkpoint (wal_checkpoint(TRUNCATE)), and the size of shop.db
 * plus its log. --stats FILE writes the phases' wall and CPU seconds (the
 * process's, all threads: getrusage) in the JSON of `ostore demo --stats`
 * (tools/demo_gen.h). Exit status 1 when a count is off or a step fails,
 * 2 for bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "demo_gen.h"

#define DB_NAME "shop.db"

static bool g_quiet;
static bool g_foreign_keys = true; /* --foreign-keys off: declared, not enforced */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (g_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Prints "bench_demo_sqlite: ..." and returns 1. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bench_demo_sqlite: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* A failed SQLite call: what, and SQLite's message. */
static int db_fail(sqlite3 *db, const char *what) {
    return fail("%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

static int exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int r = fail("%s: %s", sql, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

/* The text of column i of the current row, read as a program reads it
 * (sqlite3_column_text, which makes it a string), and its length. */
static uint64_t text_len(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (uint64_t)sqlite3_column_bytes(st, i) : 0;
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return fail("%s: %s", sql, sqlite3_errmsg(db));
    return 0;
}

/* Runs a prepared statement that returns no row, and resets it. */
static int step_done(sqlite3 *db, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(db, what);
}

/* Opens DIR/shop.db with the settings every connection has. */
static int open_db(const char *path, bool create, sqlite3 **out) {
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        int r = db_fail(db, path);
        sqlite3_close(db);
        return r;
    }
    sqlite3_busy_timeout(db, 60000);
    if (exec(db, g_foreign_keys ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                                  "PRAGMA foreign_keys=ON; PRAGMA cache_size=-65536;"
                                : "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                                  "PRAGMA foreign_keys=OFF; PRAGMA cache_size=-65536;")) {
        sqlite3_close(db);
        return 1;
    }
    *out = db;
    return 0;
}

/* ---- phase 1: the load ----------------------------------------------------------------- */

/* What the load built, to check the walk against. norders[id - 1] is how
 * many orders customer id has. */
typedef struct {
    uint64_t products, customers, orders, lines, cents, objects, commits;
    uint8_t *norders;
    size_t cap;
} built;

static const char *const schema =
    "CREATE TABLE products(id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, "
    "  name TEXT NOT NULL, category TEXT NOT NULL, price_cents INTEGER NOT NULL);"
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, "
    "  since INTEGER NOT NULL);"
    "CREATE TABLE orders(customer INTEGER NOT NULL REFERENCES customers(id), "
    "  number INTEGER NOT NULL, placed TEXT NOT NULL, status TEXT NOT NULL, "
    "  total_cents INTEGER NOT NULL, PRIMARY KEY(customer, number)) WITHOUT ROWID;"
    "CREATE TABLE line_items(customer INTEGER NOT NULL, number INTEGER NOT NULL, "
    "  position INTEGER NOT NULL, product INTEGER NOT NULL REFERENCES products(id), "
    "  quantity INTEGER NOT NULL, unit_cents INTEGER NOT NULL, "
    "  PRIMARY KEY(customer, number, position), "
    "  FOREIGN KEY(customer, number) REFERENCES orders(customer, number)) WITHOUT ROWID;"
    "CREATE TABLE shop(key TEXT PRIMARY KEY, value) WITHOUT ROWID;";

enum { S_PRODUCT, S_CUSTOMER, S_ORDER, S_LINE, S_BEGIN, S_COMMIT, S_NSTMT };

static int load(sqlite3 *db, uint64_t target, built *b, demo_stats *stats) {
    if (exec(db, schema)) return 1;
    static const char *const sql[S_NSTMT] = {
        "INSERT INTO products VALUES (?1, ?2, ?3, ?4, ?5)",
        "INSERT INTO customers VALUES (?1, ?2, ?3, ?4)",
        "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5)",
        "INSERT INTO line_items VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        "BEGIN",
        "COMMIT",
    };
    sqlite3_stmt *st[S_NSTMT] = {0};
    int err = 0;
    for (int i = 0; i < S_NSTMT && !err; i++) err = prepare(db, sql[i], &st[i]);
    uint64_t np = demo_nproducts(target);
    int64_t *price = calloc(np, sizeof *price);
    /* an order's lines, bound after the order (its total comes first) */
    struct {
        uint64_t product;
        int64_t qty;
    } lines[8];
    if (!price) err = fail("out of memory");
    demo_rng r = {DEMO_SEED_LOAD};
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    uint64_t next_commit = target / DEMO_BATCHES, batch = 0;
    if (!err) err = step_done(db, st[S_BEGIN], "BEGIN");
    for (uint64_t i = 0; i < np && !err; i++) {
        demo_product p;
        demo_product_make(&r, i, &p);
        price[i] = p.price_cents;
        sqlite3_stmt *s = st[S_PRODUCT];
        sqlite3_bind_int64(s, 1, (int64_t)i + 1);
        sqlite3_bind_text(s, 2, p.sku, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, p.name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, p.category, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, p.price_cents);
        err = step_done(db, s, "a product");
        b->products++;
        b->objects++;
    }
    while (!err && b->objects < target) {
        uint64_t id = b->customers + 1;
        demo_customer c;
        demo_customer_make(&r, id, &c);
        sqlite3_stmt *s = st[S_CUSTOMER];
        sqlite3_bind_int64(s, 1, (int64_t)id);
        sqlite3_bind_text(s, 2, c.name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, c.email, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, c.since);
        if ((err = step_done(db, s, "a customer"))) break;
        b->customers++;
        b->objects++;
        int norders = demo_norders(&r);
        for (int o = 0; o < norders && !err; o++) {
            int nlines = demo_nlines(&r);
            uint64_t number = b->orders + 1;
            int64_t total = 0;
            for (int li = 0; li < nlines; li++) {
                lines[li].product = demo_line_make(&r, np, &lines[li].qty);
                total += lines[li].qty * price[lines[li].product];
            }
            demo_order_tail t;
            demo_order_tail_make(&r, &t);
            s = st[S_ORDER];
            sqlite3_bind_int64(s, 1, (int64_t)id);
            sqlite3_bind_int64(s, 2, (int64_t)number);
            sqlite3_bind_text(s, 3, t.placed, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 4, t.status, -1, SQLITE_STATIC);
            sqlite3_bind_int64(s, 5, total);
            if ((err = step_done(db, s, "an order"))) break;
            s = st[S_LINE];
            for (int li = 0; li < nlines && !err; li++) {
                sqlite3_bind_int64(s, 1, (int64_t)id);
                sqlite3_bind_int64(s, 2, (int64_t)number);
                sqlite3_bind_int(s, 3, li);
                sqlite3_bind_int64(s, 4, (int64_t)lines[li].product + 1);
                sqlite3_bind_int64(s, 5, lines[li].qty);
                sqlite3_bind_int64(s, 6, price[lines[li].product]);
                err = step_done(db, s, "a line item");
            }
            b->orders++;
            b->lines += (uint64_t)nlines;
            b->objects += 1 + (uint64_t)nlines;
            b->cents += (uint64_t)total;
        }
        if (err) break;
        if (id > b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 4096;
            uint8_t *n = realloc(b->norders, cap);
            if (!n) {
                err = fail("out of memory");
                break;
            }
            b->norders = n;
            b->cap = cap;
        }
        b->norders[id - 1] = (uint8_t)norders;
        /* a durable commit each time a twentieth of the objects is in */
        if (b->objects >= next_commit && batch + 1 < DEMO_BATCHES) {
            if ((err = step_done(db, st[S_COMMIT], "COMMIT"))) break;
            b->commits++;
            batch++;
            next_commit = target / DEMO_BATCHES * (batch + 1);
            err = step_done(db, st[S_BEGIN], "BEGIN");
        }
    }
    if (!err && !(err = step_done(db, st[S_COMMIT], "COMMIT"))) b->commits++;
    double secs = demo_wall_s() - t0;
    demo_phase_end(stats, DEMO_PH_LOAD, &clk, b->objects);
    for (int i = 0; i < S_NSTMT; i++) sqlite3_finalize(st[i]);
    free(price);
    if (err) return err;
    say("load:    %" PRIu64 " rows (%" PRIu64 " products, %" PRIu64 " customers, %" PRIu64
        " orders, %" PRIu64 " line items) in %.2f s: %.0f rows/s; %" PRIu64
        " durable commits\n",
        b->objects, b->products, b->customers, b->orders, b->lines, secs,
        (double)b->objects / secs, b->commits);
    /* the counts the walk checks against, as the demo's root holds them */
    char ins[512];
    snprintf(ins, sizeof ins,
             "INSERT INTO shop VALUES ('name', 'ostore demo shop'), ('products', %" PRIu64
             "), ('customers', %" PRIu64 "), ('orders', %" PRIu64 "), ('line_items', %" PRIu64
             "), ('total_cents', %" PRIu64 ")",
             b->products, b->customers, b->orders, b->lines, b->cents);
    return exec(db, ins);
}

/* ---- phase 2: the walk ----------------------------------------------------------------- */

/* One integer of a query that returns one (the shop's counts, counts). */
static int query_int(sqlite3 *db, const char *sql, int64_t *v) {
    sqlite3_stmt *st;
    if (prepare(db, sql, &st)) return 1;
    int rc = sqlite3_step(st);
    *v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(db, sql);
}

typedef struct {
    uint64_t products, customers, orders, lines, cents, text_bytes;
    uint64_t bad_ref, bad_total, bad_key, bad_count;
} walked;

static int walk(sqlite3 *db, const built *b, demo_stats *stats) {
    sqlite3_stmt *ps = NULL, *cs = NULL, *os = NULL, *ls = NULL;
    int err = prepare(db, "SELECT id, sku, name, category, price_cents FROM products ORDER BY sku",
                      &ps);
    if (!err)
        err = prepare(db, "SELECT id, name, email, since FROM customers ORDER BY id", &cs);
    if (!err)
        err = prepare(db,
                      "SELECT customer, number, placed, status, total_cents FROM orders "
                      "ORDER BY customer, number",
                      &os);
    if (!err)
        err = prepare(db,
                      "SELECT customer, number, position, product, quantity, unit_cents "
                      "FROM line_items ORDER BY customer, number, position",
                      &ls);
    uint8_t *seen = calloc(b->products + 1, 1);
    if (!err && !seen) err = fail("out of memory");
    walked w = {0};
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    if (!err) err = exec(db, "BEGIN");
    /* the products, in sku order */
    char prev[64] = "";
    int rc = SQLITE_DONE;
    while (!err && (rc = sqlite3_step(ps)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(ps, 0);
        const char *sku = (const char *)sqlite3_column_text(ps, 1);
        char want[32];
        demo_sku(want, sizeof want, (uint64_t)id - 1);
        if (!sku || strcmp(sku, want) != 0 || (w.products && strcmp(prev, sku) >= 0)) w.bad_key++;
        snprintf(prev, sizeof prev, "%s", sku ? sku : "");
        w.text_bytes +=
            text_len(ps, 2) + text_len(ps, 3);
        w.products++;
    }
    if (!err && rc != SQLITE_DONE) err = db_fail(db, "walk: the products");
    /* the customers in id order, each with its orders and their line
     * items: three scans in key order, merged */
    int orc = err ? SQLITE_ERROR : sqlite3_step(os);
    int lrc = err ? SQLITE_ERROR : sqlite3_step(ls);
    int64_t prev_id = 0;
    while (!err && (rc = sqlite3_step(cs)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(cs, 0);
        if (id <= prev_id) w.bad_key++;
        prev_id = id;
        w.text_bytes +=
            text_len(cs, 1) + text_len(cs, 2);
        if (sqlite3_column_int64(cs, 3) < 2005) w.bad_key++;
        w.customers++;
        uint64_t nord = 0;
        while (orc == SQLITE_ROW && sqlite3_column_int64(os, 0) <= id) {
            int64_t cid = sqlite3_column_int64(os, 0), num = sqlite3_column_int64(os, 1);
            if (cid != id) w.bad_ref++; /* an order of a customer the walk did not meet */
            w.text_bytes +=
                text_len(os, 2) + text_len(os, 3);
            int64_t total = sqlite3_column_int64(os, 4), sum = 0;
            int64_t pos = -1;
            while (lrc == SQLITE_ROW && sqlite3_column_int64(ls, 0) == cid &&
                   sqlite3_column_int64(ls, 1) == num) {
                int64_t lp = sqlite3_column_int64(ls, 2), prod = sqlite3_column_int64(ls, 3);
                if (lp != pos + 1) w.bad_key++;
                pos = lp;
                if (prod < 1 || (uint64_t)prod > b->products) w.bad_ref++;
                else seen[prod] = 1;
                sum += sqlite3_column_int64(ls, 4) * sqlite3_column_int64(ls, 5);
                w.lines++;
                lrc = sqlite3_step(ls);
            }
            if (pos < 0 || sum != total) w.bad_total++;
            w.cents += (uint64_t)sum;
            w.orders++;
            nord++;
            orc = sqlite3_step(os);
        }
        if (id < 1 || (uint64_t)id > b->customers || nord != b->norders[id - 1]) w.bad_count++;
    }
    if (!err && (rc != SQLITE_DONE || (orc != SQLITE_DONE && orc != SQLITE_ROW) ||
                 (lrc != SQLITE_DONE && lrc != SQLITE_ROW)))
        err = db_fail(db, "walk");
    if (!err && (orc == SQLITE_ROW || lrc == SQLITE_ROW)) w.bad_ref++; /* rows left over */
    if (w.text_bytes < w.products + w.customers + w.orders) w.bad_key++; /* no text read */
    double secs = demo_wall_s() - t0;
    uint64_t rows = w.products + w.customers + w.orders + w.lines;
    demo_phase_end(stats, DEMO_PH_WALK, &clk, rows);
    sqlite3_finalize(ps);
    sqlite3_finalize(cs);
    sqlite3_finalize(os);
    sqlite3_finalize(ls);
    uint64_t reached = 0;
    for (uint64_t i = 1; seen && i <= b->products; i++) reached += seen[i];
    free(seen);
    /* what the shop table says, and what the tables count */
    struct {
        const char *name, *count;
        uint64_t built, walked;
    } checks[] = {
        {"products", "SELECT count(*) FROM products", b->products, w.products},
        {"customers", "SELECT count(*) FROM customers", b->customers, w.customers},
        {"orders", "SELECT count(*) FROM orders", b->orders, w.orders},
        {"line_items", "SELECT count(*) FROM line_items", b->lines, w.lines},
        {"total_cents", NULL, b->cents, w.cents},
    };
    for (size_t i = 0; i < DEMO_NELEM(checks) && !err; i++) {
        char sql[128];
        int64_t stored = -1, counted = (int64_t)checks[i].built;
        snprintf(sql, sizeof sql, "SELECT value FROM shop WHERE key = '%s'", checks[i].name);
        err = query_int(db, sql, &stored);
        if (!err && checks[i].count) err = query_int(db, checks[i].count, &counted);
        if (!err && (checks[i].walked != checks[i].built || (uint64_t)stored != checks[i].built ||
                     (uint64_t)counted != checks[i].built))
            err = fail("walk: %s: built %" PRIu64 ", the shop table says %" PRId64
                       ", count(*) %" PRId64 ", the walk found %" PRIu64,
                       checks[i].name, checks[i].built, stored, counted, checks[i].walked);
    }
    if (!err) err = exec(db, "COMMIT");
    if (!err && (w.bad_ref || w.bad_total || w.bad_key || w.bad_count))
        err = fail("walk: %" PRIu64 " wrong references, %" PRIu64 " wrong order totals, %" PRIu64
                   " wrong or unordered keys, %" PRIu64 " customers with a wrong number of orders",
                   w.bad_ref, w.bad_total, w.bad_key, w.bad_count);
    if (!err)
        say("walk:    %" PRIu64 " rows in key order in %.2f s: %.0f rows/s\n"
            "         %" PRIu64 " customers, %" PRIu64 " orders, %" PRIu64 " line items, %" PRIu64
            " products (%" PRIu64 " referenced): every count matches (built, walked, count(*), "
            "the shop table's)\n",
            rows, secs, (double)rows / secs, w.customers, w.orders, w.lines, w.products, reached);
    return err;
}

/* ---- phase 3: lookups and ranges ---------------------------------------------------------- */

static const char *const customer_by_id =
    "SELECT id, name, email, since FROM customers WHERE id = ?1";

static int lookups(sqlite3 *db, const built *b, demo_stats *stats) {
    sqlite3_stmt *cs, *begin, *commit;
    if (prepare(db, customer_by_id, &cs)) return 1;
    if (prepare(db, "BEGIN", &begin) || prepare(db, "COMMIT", &commit)) return 1;
    demo_rng r = {DEMO_SEED_LOOKUP};
    uint64_t n = b->customers, bad = 0, text = 0;
    int err = 0;
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    for (uint64_t i = 0; i < DEMO_LOOKUPS && !err; i++) {
        if (i % DEMO_TXN_READS == 0) {
            if (i) err = step_done(db, commit, "COMMIT");
            if (!err) err = step_done(db, begin, "BEGIN");
            if (err) break;
        }
        int64_t id = 1 + (int64_t)demo_rnd_below(&r, n);
        sqlite3_bind_int64(cs, 1, id);
        int rc = sqlite3_step(cs);
        if (rc == SQLITE_ROW) {
            if (sqlite3_column_int64(cs, 0) != id) bad++;
            text += text_len(cs, 1) + text_len(cs, 2);
            if (sqlite3_column_int64(cs, 3) < 2005) bad++;
        } else if (rc == SQLITE_DONE) {
            bad++;
        } else {
            err = db_fail(db, "lookup");
        }
        sqlite3_reset(cs);
    }
    if (!err) err = step_done(db, commit, "COMMIT");
    double secs = demo_wall_s() - t0;
    demo_phase_end(stats, DEMO_PH_LOOKUP, &clk, DEMO_LOOKUPS);
    if (text < DEMO_LOOKUPS) bad++; /* every customer has a name and an email */
    /* ids that are not there, and the ends */
    int found[2] = {-1, -1};
    int64_t ids[2] = {0, (int64_t)n + 1}, lo = -1, hi = -1;
    for (int i = 0; i < 2 && !err; i++) {
        sqlite3_bind_int64(cs, 1, ids[i]);
        int rc = sqlite3_step(cs);
        found[i] = rc == SQLITE_ROW;
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) err = db_fail(db, "lookup");
        sqlite3_reset(cs);
    }
    if (!err) err = query_int(db, "SELECT min(id) FROM customers", &lo);
    if (!err) err = query_int(db, "SELECT max(id) FROM customers", &hi);
    sqlite3_finalize(cs);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    if (!err && (bad || found[0] || found[1] || lo != 1 || hi != (int64_t)n))
        err = fail("lookup: %" PRIu64 " customers that are not the one of their id; ids 0 and %"
                   PRIu64 " found: %d and %d; the first id is %" PRId64 ", the last %" PRId64,
                   bad, n + 1, found[0], found[1], lo, hi);
    if (!err)
        say("lookup:  %d random customer ids in %.2f s: %.0f lookups/s (each row read and its id "
            "checked); ids 0 and %" PRIu64 " are not there; the first id is 1, the last %" PRIu64
            "\n",
            DEMO_LOOKUPS, secs, DEMO_LOOKUPS / secs, n + 1, n);
    return err;
}

/* The orders of customer id: each row read and checked. */
static int orders_of(sqlite3 *db, sqlite3_stmt *os, int64_t id, uint64_t *n, int64_t *lo,
                     int64_t *hi, int64_t *cents, uint64_t *bad) {
    *n = 0;
    *cents = 0;
    sqlite3_bind_int64(os, 1, id);
    int rc;
    int64_t prev = 0;
    while ((rc = sqlite3_step(os)) == SQLITE_ROW) {
        int64_t num = sqlite3_column_int64(os, 0), total = sqlite3_column_int64(os, 4);
        if (sqlite3_column_int64(os, 1) != id || num <= prev || total < 0 ||
            text_len(os, 2) != 10 || text_len(os, 3) < 4)
            (*bad)++;
        prev = num;
        if (!*n) *lo = num;
        *hi = num;
        *cents += total;
        (*n)++;
    }
    sqlite3_reset(os);
    return rc == SQLITE_DONE ? 0 : db_fail(db, "range: the orders of a customer");
}

static int ranges(sqlite3 *db, const built *b, demo_stats *stats) {
    sqlite3_stmt *cs = NULL, *os = NULL, *begin = NULL, *commit = NULL, *ps[2] = {0};
    int err = prepare(db, customer_by_id, &cs);
    if (!err)
        err = prepare(db,
                      "SELECT number, customer, placed, status, total_cents FROM orders "
                      "WHERE customer = ?1 ORDER BY number",
                      &os);
    if (!err) err = prepare(db, "BEGIN", &begin);
    if (!err) err = prepare(db, "COMMIT", &commit);
    if (!err)
        err = prepare(db,
                      "SELECT sku, name, price_cents FROM products WHERE sku >= ?1 AND sku < ?2 "
                      "ORDER BY sku",
                      &ps[0]);
    if (!err)
        err = prepare(db,
                      "SELECT sku, name, price_cents FROM products WHERE sku >= ?1 AND sku < ?2 "
                      "ORDER BY sku DESC",
                      &ps[1]);
    uint64_t bad = 0, n = 0, total = 0;
    int64_t lo = 0, hi = 0, cents = 0;
    /* one customer, in the middle */
    int64_t id = (int64_t)(b->customers + 1) / 2;
    char name[128] = "";
    if (!err) {
        sqlite3_bind_int64(cs, 1, id);
        if (sqlite3_step(cs) == SQLITE_ROW)
            snprintf(name, sizeof name, "%s", (const char *)sqlite3_column_text(cs, 1));
        else
            bad++;
        sqlite3_reset(cs);
        err = orders_of(db, os, id, &n, &lo, &hi, &cents, &bad);
    }
    if (!err && (bad || n != b->norders[id - 1]))
        err = fail("range: customer %" PRId64 ": %" PRIu64 " orders, %u built (%" PRIu64 " wrong)",
                   id, n, b->norders[id - 1], bad);
    if (!err)
        say("range:   orders of customer %" PRId64 " (%s): %" PRIu64 " orders, numbers %" PRId64
            " to %" PRId64 ", %" PRId64 " cents in all\n",
            id, name, n, lo, hi, cents);
    /* many customers, each with its orders */
    demo_rng r = {DEMO_SEED_RANGE};
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    for (int q = 0; q < DEMO_RANGE_QUERIES && !err; q++) {
        if (q % (DEMO_TXN_READS / 10) == 0) {
            if (q) err = step_done(db, commit, "COMMIT");
            if (!err) err = step_done(db, begin, "BEGIN");
            if (err) break;
        }
        id = 1 + (int64_t)demo_rnd_below(&r, b->customers);
        sqlite3_bind_int64(cs, 1, id);
        int rc = sqlite3_step(cs);
        if (rc == SQLITE_DONE || (rc == SQLITE_ROW && sqlite3_column_int64(cs, 0) != id)) bad++;
        else if (rc != SQLITE_ROW) err = db_fail(db, "range: a customer");
        sqlite3_reset(cs);
        if (!err) err = orders_of(db, os, id, &n, &lo, &hi, &cents, &bad);
        if (n != b->norders[id - 1]) bad++;
        total += n;
    }
    if (!err) err = step_done(db, commit, "COMMIT");
    double secs = demo_wall_s() - t0;
    demo_phase_end(stats, DEMO_PH_RANGE, &clk, DEMO_RANGE_QUERIES);
    if (!err && bad)
        err = fail("range: %" PRIu64 " orders or customers with a wrong count among %d random "
                   "customers",
                   bad, DEMO_RANGE_QUERIES);
    if (!err)
        say("range:   the orders of %d random customers (%" PRIu64 " orders, each row read) in "
            "%.2f s: %.0f range queries/s; every customer's count matches\n",
            DEMO_RANGE_QUERIES, total, secs, DEMO_RANGE_QUERIES / secs);
    /* products by sku, forwards and backwards */
    uint64_t plo = b->products / 10, phi = plo + (b->products / 10 ? b->products / 10 : 1);
    char from[32], to[32];
    demo_sku(from, sizeof from, plo);
    demo_sku(to, sizeof to, phi);
    uint64_t count[2] = {0, 0};
    for (int rev = 0; rev < 2 && !err; rev++) {
        sqlite3_bind_text(ps[rev], 1, from, -1, SQLITE_STATIC);
        sqlite3_bind_text(ps[rev], 2, to, -1, SQLITE_STATIC);
        char prev[32] = "";
        int rc;
        while ((rc = sqlite3_step(ps[rev])) == SQLITE_ROW) {
            const char *ks = (const char *)sqlite3_column_text(ps[rev], 0);
            if (!ks || strcmp(ks, from) < 0 || strcmp(ks, to) >= 0 ||
                (prev[0] && (rev ? strcmp(ks, prev) >= 0 : strcmp(ks, prev) <= 0)))
                bad++;
            snprintf(prev, sizeof prev, "%s", ks ? ks : "");
            count[rev]++;
        }
        sqlite3_reset(ps[rev]);
        if (rc != SQLITE_DONE) err = db_fail(db, "range: the products");
    }
    if (!err && (bad || count[0] != phi - plo || count[1] != phi - plo))
        err = fail("range: skus from %s to %s exclusive: %" PRIu64 " products forwards, %" PRIu64
                   " backwards, %" PRIu64 " expected (%" PRIu64 " wrong)",
                   from, to, count[0], count[1], phi - plo, bad);
    if (!err)
        say("range:   products with skus from '%s' to '%s' exclusive: %" PRIu64
            ", in sku order (and reversed)\n",
            from, to, count[0]);
    sqlite3_finalize(cs);
    sqlite3_finalize(os);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_finalize(ps[0]);
    sqlite3_finalize(ps[1]);
    return err;
}

/* ---- phase 4: concurrent commits ------------------------------------------------------------ */

typedef struct {
    const char *path;
    const built *b;
    int id;
    int rc;
    uint64_t commits, busy;
    int64_t cids[DEMO_COMMITS_PER_THREAD];
    char msg[512];
} worker;

enum { W_BEGIN, W_CUSTOMER, W_PRODUCT, W_ORDER, W_LINE, W_COMMIT, W_ROLLBACK, W_NSTMT };

/* One commit: a new order (with one line item) of a random customer, the
 * customer and the product read first, in one IMMEDIATE transaction (the
 * writer's lock taken at BEGIN: a transaction that reads, then writes,
 * never fails with SQLITE_BUSY half-way). SQLITE_BUSY after the busy
 * timeout comes back to be retried. */
static int one_order(sqlite3_stmt **st, const built *b, demo_rng *r, int64_t number,
                     int64_t *cid) {
    int64_t id = 1 + (int64_t)demo_rnd_below(r, b->customers);
    char sku[32];
    demo_sku(sku, sizeof sku, demo_rnd_below(r, b->products));
    int rc = sqlite3_step(st[W_BEGIN]);
    sqlite3_reset(st[W_BEGIN]);
    if (rc != SQLITE_DONE) return rc;
    sqlite3_bind_int64(st[W_CUSTOMER], 1, id);
    rc = sqlite3_step(st[W_CUSTOMER]);
    sqlite3_reset(st[W_CUSTOMER]);
    int64_t prod = -1, price = -1;
    if (rc == SQLITE_ROW) {
        sqlite3_bind_text(st[W_PRODUCT], 1, sku, -1, SQLITE_STATIC);
        rc = sqlite3_step(st[W_PRODUCT]);
        if (rc == SQLITE_ROW) {
            prod = sqlite3_column_int64(st[W_PRODUCT], 0);
            price = sqlite3_column_int64(st[W_PRODUCT], 1);
        }
        sqlite3_reset(st[W_PRODUCT]);
    }
    if (rc == SQLITE_ROW) {
        demo_order_tail t;
        demo_order_tail_make(NULL, &t);
        sqlite3_stmt *s = st[W_ORDER];
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, number);
        sqlite3_bind_text(s, 3, t.placed, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 4, t.status, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, price);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
    }
    if (rc == SQLITE_DONE) {
        sqlite3_stmt *s = st[W_LINE];
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, number);
        sqlite3_bind_int(s, 3, 0);
        sqlite3_bind_int64(s, 4, prod);
        sqlite3_bind_int64(s, 5, 1);
        sqlite3_bind_int64(s, 6, price);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
    }
    if (rc == SQLITE_DONE) {
        rc = sqlite3_step(st[W_COMMIT]);
        sqlite3_reset(st[W_COMMIT]);
    }
    if (rc != SQLITE_DONE) {
        sqlite3_step(st[W_ROLLBACK]);
        sqlite3_reset(st[W_ROLLBACK]);
        return rc == SQLITE_ROW ? SQLITE_NOTFOUND : rc;
    }
    *cid = id;
    return SQLITE_OK;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    sqlite3 *db = NULL;
    sqlite3_stmt *st[W_NSTMT] = {0};
    static const char *const sql[W_NSTMT] = {
        "BEGIN IMMEDIATE",
        "SELECT id FROM customers WHERE id = ?1",
        "SELECT id, price_cents FROM products WHERE sku = ?1",
        "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5)",
        "INSERT INTO line_items VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        "COMMIT",
        "ROLLBACK",
    };
    if (open_db(w->path, false, &db)) {
        w->rc = 1;
        snprintf(w->msg, sizeof w->msg, "thread %d: cannot open %s", w->id, w->path);
        return NULL;
    }
    for (int i = 0; i < W_NSTMT; i++)
        if (sqlite3_prepare_v3(db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i], NULL)) {
            w->rc = 1;
            snprintf(w->msg, sizeof w->msg, "thread %d: %s: %s", w->id, sql[i], sqlite3_errmsg(db));
            goto out;
        }
    demo_rng r = {demo_seed_worker(w->id)};
    for (int i = 0; i < DEMO_COMMITS_PER_THREAD; i++) {
        demo_rng again = r;
        int rc;
        while ((rc = one_order(st, w->b, &r, demo_new_number(w->id, i), &w->cids[i])) ==
               SQLITE_BUSY) {
            w->busy++;
            r = again; /* the same order, once more */
        }
        if (rc != SQLITE_OK) {
            w->rc = 1;
            snprintf(w->msg, sizeof w->msg, "thread %d, commit %d: %s", w->id, i,
                     rc == SQLITE_NOTFOUND ? "the customer or product is missing"
                                           : sqlite3_errmsg(db));
            break;
        }
        w->commits++;
    }
out:
    for (int i = 0; i < W_NSTMT; i++) sqlite3_finalize(st[i]);
    sqlite3_close(db);
    return NULL;
}

static int concurrent(const char *path, sqlite3 *db, const built *b, demo_stats *stats) {
    worker *ws = calloc(DEMO_THREADS, sizeof *ws);
    pthread_t th[DEMO_THREADS];
    if (!ws) return fail("out of memory");
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    int started = 0, err = 0;
    for (int i = 0; i < DEMO_THREADS; i++) {
        ws[i] = (worker){.path = path, .b = b, .id = i};
        if (pthread_create(&th[i], NULL, worker_main, &ws[i]) != 0) break;
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double secs = demo_wall_s() - t0;
    demo_phase_end(stats, DEMO_PH_COMMIT, &clk, DEMO_THREADS * DEMO_COMMITS_PER_THREAD);
    uint64_t busy = 0;
    if (started < DEMO_THREADS) err = fail("cannot start threads");
    for (int i = 0; i < DEMO_THREADS && !err; i++) {
        if (ws[i].rc) err = fail("commits: %s", ws[i].msg);
        busy += ws[i].busy;
    }
    /* every new order is there, with its line item */
    sqlite3_stmt *os = NULL;
    uint64_t found = 0;
    if (!err)
        err = prepare(db,
                      "SELECT o.total_cents, l.unit_cents FROM orders o JOIN line_items l "
                      "USING (customer, number) WHERE customer = ?1 AND number = ?2",
                      &os);
    for (int t = 0; t < DEMO_THREADS && !err; t++)
        for (int i = 0; i < DEMO_COMMITS_PER_THREAD && !err; i++) {
            sqlite3_bind_int64(os, 1, ws[t].cids[i]);
            sqlite3_bind_int64(os, 2, demo_new_number(t, i));
            int rc = sqlite3_step(os);
            if (rc == SQLITE_ROW && sqlite3_column_int64(os, 0) == sqlite3_column_int64(os, 1) &&
                sqlite3_step(os) == SQLITE_DONE)
                found++;
            else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                err = db_fail(db, "commits: a new order");
            sqlite3_reset(os);
        }
    sqlite3_finalize(os);
    int64_t orders = -1;
    uint64_t want = DEMO_THREADS * DEMO_COMMITS_PER_THREAD;
    if (!err) err = query_int(db, "SELECT count(*) FROM orders", &orders);
    if (!err && ((uint64_t)orders != b->orders + want || found != want))
        err = fail("commits: orders holds %" PRId64 " rows, %" PRIu64 " expected; %" PRIu64
                   " of the %" PRIu64 " new orders are there and right",
                   orders, b->orders + want, found, want);
    if (!err)
        say("commits: %d commits from %d threads (each its own connection, BEGIN IMMEDIATE, "
            "synchronous=FULL), each a new order, in %.2f s: %.0f commits/s; %" PRIu64
            " busy retries\n",
            DEMO_THREADS * DEMO_COMMITS_PER_THREAD, DEMO_THREADS, secs,
            DEMO_THREADS * DEMO_COMMITS_PER_THREAD / secs, busy);
    free(ws);
    return err;
}

/* ---- phase 5: the check ------------------------------------------------------------------- */

static int check(sqlite3 *db, demo_stats *stats, uint64_t *rows) {
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = demo_wall_s();
    sqlite3_stmt *st;
    int err = prepare(db, "PRAGMA integrity_check", &st);
    char first[256] = "";
    int nrows = 0;
    if (!err) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            if (nrows++ == 0)
                snprintf(first, sizeof first, "%s", (const char *)sqlite3_column_text(st, 0));
        if (rc != SQLITE_DONE) err = db_fail(db, "PRAGMA integrity_check");
        sqlite3_finalize(st);
    }
    if (!err && (nrows != 1 || strcmp(first, "ok") != 0))
        err = fail("check: integrity_check: %s (%d lines)", first, nrows);
    int fk = 0;
    if (!err && !(err = prepare(db, "PRAGMA foreign_key_check", &st))) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) fk++;
        if (rc != SQLITE_DONE) err = db_fail(db, "PRAGMA foreign_key_check");
        sqlite3_finalize(st);
    }
    double secs = demo_wall_s() - t0;
    demo_phase_end(stats, DEMO_PH_CHECK, &clk, 0);
    int64_t n = 0;
    if (!err)
        err = query_int(db,
                        "SELECT (SELECT count(*) FROM products) + (SELECT count(*) FROM customers)"
                        " + (SELECT count(*) FROM orders) + (SELECT count(*) FROM line_items)",
                        &n);
    *rows = (uint64_t)n;
    stats->ops[DEMO_PH_CHECK] = *rows;
    if (!err && fk) err = fail("check: foreign_key_check: %d references to no row", fk);
    if (!err)
        say("check:   integrity_check ok, foreign_key_check found nothing, in %.2f s (%" PRIu64
            " rows)\n",
            secs, *rows);
    return err;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int usage(void) {
    fputs("usage: bench_demo_sqlite DIR [--objects N] [--quiet] [--stats FILE] "
          "[--foreign-keys on|off]\n",
          stderr);
    return 2;
}

static uint64_t file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *stats_path = NULL;
    uint64_t target = 1000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quiet") == 0) g_quiet = true;
        else if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 1000 || v > 100000000) return usage();
            target = v;
        } else if (strcmp(argv[i], "--foreign-keys") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "on") == 0 || strcmp(argv[i + 1], "off") == 0))
            g_foreign_keys = strcmp(argv[++i], "on") == 0;
        else if (strcmp(argv[i], "--stats") == 0 && i + 1 < argc && argv[i + 1][0])
            stats_path = argv[++i];
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else
            return usage();
    }
    if (!dir) return usage();
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return fail("%s: %s", dir, strerror(errno));
    char path[4096], wal[4200], shm[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DB_NAME);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    FILE *sf = !stats_path ? NULL : strcmp(stats_path, "-") == 0 ? stdout : fopen(stats_path, "w");
    if (stats_path && !sf) return fail("--stats: %s: %s", stats_path, strerror(errno));
    /* a fresh file: an earlier run's goes */
    unlink(path);
    unlink(wal);
    unlink(shm);
    say("bench_demo_sqlite: a shop of %" PRIu64 " objects in %s (SQLite %s, WAL, "
        "synchronous=FULL, foreign_keys=%s)\n",
        target, path, sqlite3_libversion(), g_foreign_keys ? "ON" : "OFF");
    demo_stats stats = {0};
    built b = {0};
    sqlite3 *db = NULL;
    uint64_t rows = 0;
    int err = open_db(path, true, &db);
    if (!err) err = load(db, target, &b, &stats);
    if (!err) err = walk(db, &b, &stats);
    if (!err) err = lookups(db, &b, &stats);
    if (!err) err = ranges(db, &b, &stats);
    if (!err) err = concurrent(path, db, &b, &stats);
    if (!err) err = check(db, &stats, &rows);
    if (!err) err = exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    if (!err) {
        stats.file_bytes = file_bytes(path) + file_bytes(wal);
        say("store:   %s %.1f MiB on disk (with its log, after a checkpoint)\n", DB_NAME,
            (double)stats.file_bytes / 1048576.0);
    }
    if (!err && sf) {
        stats.products = b.products;
        stats.customers = b.customers;
        stats.orders = b.orders;
        stats.lines = b.lines;
        stats.cents = b.cents;
        if (demo_stats_write(&stats, sf, "sqlite", b.objects) != 0)
            err = fail("--stats: %s: %s", stats_path, strerror(errno));
    }
    if (sf && sf != stdout && fclose(sf) != 0 && !err)
        err = fail("--stats: %s: %s", stats_path, strerror(errno));
    if (sqlite3_close(db) != SQLITE_OK && !err) err = fail("close: %s", sqlite3_errmsg(db));
    free(b.norders);
    return err ? 1 : 0;
}
