/* ostore CLI: `ostore demo`, the main job. It builds a shop (customers,
 * their orders, the orders' line items, and products the line items
 * share) indexed by three persistent ordered maps (include/ostore/maps.h)
 * that the root holds:
 *
 *   customers  {id: Customer}                    keys "int"
 *   orders     {(customer id, number): Order}    keys "(int, int)"
 *   products   {sku: Product}                    keys "str"
 *
 * The maps are made and committed first; then the loader stores about a
 * million objects and, in the same batches, the maps' entries
 * (ost_loader_map_set). The demo reopens the store and walks every map in
 * key order, a chunk of customers (and, by a tuple prefix range, their
 * orders) per transaction, checking every count against what it built,
 * against the maps' own counts (ost_map_len) and against the counts the
 * root holds; it looks up random customers by id, queries ranges (the
 * orders of customers, products by sku), makes small commits from four
 * threads through the group committer that all insert new orders into the
 * one orders map (different keys: no conflicts), checks the store, and
 * prints what it did and how fast.
 *
 * The graph, per customer: 1 to 7 orders (4 on average), each with 1 to 5
 * line items (3 on average); each line item references one of the shared
 * products, each order references its customer. A customer does not list
 * its orders: the orders map does, under keys that start with the
 * customer's id. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "cli.h"
#include "demo_gen.h"

#define MARKER "ostore-demo"
#define THREADS DEMO_THREADS
#define COMMITS_PER_THREAD DEMO_COMMITS_PER_THREAD
#define WALK_CHUNK 1000             /* customers (and their orders) per walk transaction */
#define LOOKUPS DEMO_LOOKUPS        /* random customers looked up by id */
#define RANGE_QUERIES DEMO_RANGE_QUERIES /* random customers whose orders are read by a range */
#define TXN_READS DEMO_TXN_READS    /* reads per transaction before the cache is trimmed */

/* ---- the classes ------------------------------------------------------------ */

enum { P_SKU, P_NAME, P_CATEGORY, P_PRICE, P_NFIELDS };
enum { C_NUMBER, C_NAME, C_EMAIL, C_SINCE, C_NFIELDS };
enum { O_NUMBER, O_CUSTOMER, O_PLACED, O_STATUS, O_LINES, O_TOTAL, O_NFIELDS };
enum { L_PRODUCT, L_QUANTITY, L_UNIT, L_NFIELDS };

static const char *const product_fields[] = {"sku", "name", "category", "price_cents"};
static const char *const customer_fields[] = {"number", "name", "email", "since"};
static const char *const order_fields[] = {"number", "customer", "placed",
                                           "status", "lines",    "total_cents"};
static const char *const line_fields[] = {"product", "quantity", "unit_cents"};

typedef struct {
    ost_registry *reg;
    ost_value product, customer, order, line; /* borrowed from reg */
} shop;

static int shop_init(shop *s) {
    memset(s, 0, sizeof *s);
    s->reg = ost_registry_new();
    if (!s->reg) return OST_ENOMEM;
    struct {
        const char *name;
        const char *const *fields;
        size_t n;
        ost_value *out;
    } defs[] = {
        {"Product", product_fields, P_NFIELDS, &s->product},
        {"Customer", customer_fields, C_NFIELDS, &s->customer},
        {"Order", order_fields, O_NFIELDS, &s->order},
        {"LineItem", line_fields, L_NFIELDS, &s->line},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++) {
        ost_class_def d = {.module = "shop", .name = defs[i].name, .fields = defs[i].fields,
                           .nfields = defs[i].n, .persistent = true};
        int rc = ost_registry_add(s->reg, &d, defs[i].out);
        if (rc) return rc;
    }
    return 0;
}

/* The three maps of the root: name, key kind, what the values are. */
enum { M_CUSTOMERS, M_ORDERS, M_PRODUCTS, M_COUNT };
static const struct {
    const char *name, *kind, *values;
} maps_def[M_COUNT] = {
    {"customers", "int", "Customer"},
    {"orders", "(int, int)", "Order"},
    {"products", "str", "Product"},
};

/* ---- data ------------------------------------------------------------------------ */

/* The values of every field come from tools/demo_gen.h, which
 * bench/bench_demo_sqlite.c shares: both build the same shop. */
typedef demo_rng rng;
#define rnd_below demo_rnd_below
#define NELEM(a) (sizeof(a) / sizeof *(a))

/* What the build made, to check the walk against. Customer ids are 1 to
 * customers; norders[id - 1] is how many orders customer id has. */
typedef struct {
    uint64_t products, customers, orders, lines, cents;
    uint64_t objects; /* the loaded objects: all of the above but cents */
    uint64_t entries; /* the loaded map entries: products + customers + orders */
    uint8_t *norders;
    size_t capcust;
    uint64_t moids[M_COUNT]; /* the maps' oids */
} counts;

static void sku_of(char *buf, size_t cap, uint64_t i) { demo_sku(buf, cap, i); }

/* A new tuple (a, b) of ints, or 0. */
static ost_value int_pair(int64_t a, int64_t b) {
    ost_value t = ost_tuple_new(2);
    if (!t) return 0;
    if (ost_tuple_set(t, 0, ost_int(a)) || ost_tuple_set(t, 1, ost_int(b))) {
        ost_decref(t);
        return 0;
    }
    return t;
}

/* A new tuple (a,): a prefix bound of the orders map. */
static ost_value int_prefix(int64_t a) {
    ost_value t = ost_tuple_new(1);
    if (t && ost_tuple_set(t, 0, ost_int(a))) {
        ost_decref(t);
        return 0;
    }
    return t;
}

static ost_value new_product(const shop *s, rng *r, uint64_t i) {
    ost_value p = ost_instance_new(ost_incref(s->product));
    if (!p) return 0;
    demo_product d;
    demo_product_make(r, i, &d);
    ost_instance_set_slot(p, P_SKU, ost_str_c(d.sku));
    ost_instance_set_slot(p, P_NAME, ost_str_c(d.name));
    ost_instance_set_slot(p, P_CATEGORY, ost_str_c(d.category));
    ost_instance_set_slot(p, P_PRICE, ost_int(d.price_cents));
    return p;
}

static int64_t slot_int(ost_value inst, size_t i) {
    int64_t v = -1;
    ost_int_value(ost_instance_slot(inst, i), &v);
    return v;
}

/* A line item for product prod. */
static ost_value new_line(const shop *s, ost_value prod, int64_t qty, int64_t *cents) {
    int64_t price = slot_int(prod, P_PRICE);
    ost_value l = ost_instance_new(ost_incref(s->line));
    if (!l) return 0;
    ost_instance_set_slot(l, L_PRODUCT, ost_incref(prod));
    ost_instance_set_slot(l, L_QUANTITY, ost_int(qty));
    ost_instance_set_slot(l, L_UNIT, ost_int(price));
    *cents = qty * price;
    return l;
}

/* A new order of customer cust: nlines line items for random products,
 * popular ones more often (or, with r NULL, one line item for products[0]). */
static ost_value new_order(const shop *s, rng *r, ost_value cust, uint64_t number, int nlines,
                           const ost_value *products, uint64_t np, int64_t *total) {
    ost_value o = ost_instance_new(ost_incref(s->order));
    ost_value lines = ost_list_new((size_t)nlines);
    if (!o || !lines) {
        ost_decref(o);
        ost_decref(lines);
        return 0;
    }
    *total = 0;
    for (int i = 0; i < nlines; i++) {
        int64_t c, qty = 1;
        uint64_t pi = r ? demo_line_make(r, np, &qty) : 0;
        ost_value l = new_line(s, products[pi], qty, &c);
        if (!l || ost_list_append(lines, l)) {
            ost_decref(o);
            ost_decref(lines);
            return 0;
        }
        *total += c;
    }
    demo_order_tail t;
    demo_order_tail_make(r, &t);
    ost_instance_set_slot(o, O_NUMBER, ost_int((int64_t)number));
    ost_instance_set_slot(o, O_CUSTOMER, ost_incref(cust));
    ost_instance_set_slot(o, O_PLACED, ost_str_c(t.placed));
    ost_instance_set_slot(o, O_STATUS, ost_str_c(t.status));
    ost_instance_set_slot(o, O_LINES, lines);
    ost_instance_set_slot(o, O_TOTAL, ost_int(*total));
    return o;
}

static ost_value new_customer(const shop *s, rng *r, uint64_t number) {
    ost_value c = ost_instance_new(ost_incref(s->customer));
    if (!c) return 0;
    demo_customer d;
    demo_customer_make(r, number, &d);
    ost_instance_set_slot(c, C_NUMBER, ost_int((int64_t)number));
    ost_instance_set_slot(c, C_NAME, ost_str_c(d.name));
    ost_instance_set_slot(c, C_EMAIL, ost_str_c(d.email));
    ost_instance_set_slot(c, C_SINCE, ost_int(d.since));
    return c;
}

/* ---- output ----------------------------------------------------------------------- */

typedef struct {
    bool quiet, tty;
} out_mode;

static out_mode g_out;

/* Each phase's wall and CPU seconds, for --stats FILE. */
static demo_stats g_stats;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (g_out.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ---- the directory ------------------------------------------------------------------ */

/* How the demo knows its own store: the file MARKER in the directory,
 * holding MARKER_TEXT, written before the store. A directory is the
 * demo's to remove and remake when it holds MARKER with that text and
 * nothing but data.mdb and lock.mdb besides (the files of an LMDB store,
 * docs/format.md); an empty directory, or none, is fine too; anything
 * else is refused, untouched. The previous store goes with ost_store_drop.
 *
 * Two demos on one DIR: each takes an exclusive flock on the directory
 * itself (an fd of it kept open until the process ends) before it looks
 * inside, and holds it while it removes the old store, makes the new one
 * and runs. The directory is never removed, so every demo locks the same
 * inode; the second one fails at once with "in use". */
#define MARKER_TEXT \
    "This store was made by 'ostore demo', which removes and remakes it when run again.\n"

static int g_dir_fd = -1; /* the locked directory, open for the life of the process */

/* 1 when dir/MARKER holds MARKER_TEXT, 0 when it holds something else. */
static int marker_is_ours(int dfd) {
    int fd = openat(dfd, MARKER, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return 0;
    char buf[sizeof MARKER_TEXT + 1];
    struct stat sb;
    ssize_t n = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, buf, sizeof buf) : -1;
    close(fd);
    return n == (ssize_t)strlen(MARKER_TEXT) && memcmp(buf, MARKER_TEXT, (size_t)n) == 0;
}

/* Makes dir ready for a new demo store, under its lock (see above). */
static int prepare_dir(const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return fail("%s: cannot create: %s", shown(dir), strerror(errno));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOTDIR
                   ? fail("%s: exists and is not a directory; not touching it", shown(dir))
                   : fail("%s: %s", shown(dir), strerror(errno));
    if (flock(dfd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(dfd);
        return e == EWOULDBLOCK
                   ? fail("%s: in use by another 'ostore demo' (it holds the directory's lock); "
                          "wait for it to end, or choose another DIR",
                          shown(dir))
                   : fail("%s: cannot lock: %s", shown(dir), strerror(e));
    }
    g_dir_fd = dfd; /* the lock lasts until exit */
    /* what is in it */
    int lfd = dup(dfd);
    DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
    if (!d) {
        if (lfd >= 0) close(lfd);
        return fail("%s: %s", shown(dir), strerror(errno));
    }
    bool marker = false, store = false;
    char other[256] = "";
    size_t nother = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) continue;
        if (strcmp(n, MARKER) == 0) marker = true;
        else if (strcmp(n, "data.mdb") == 0) store = true;
        else if (strcmp(n, "lock.mdb") == 0) continue; /* alone (a demo killed in its open):
                                                        * the new store's open uses it */
        else if (nother++ < 3) {
            size_t l = strlen(other);
            snprintf(other + l, sizeof other - l, "%s%s", l ? ", " : "", shown(n));
        }
    }
    closedir(d);
    if (marker || store || nother) {
        if (!marker)
            return fail("%s: exists and is not a demo store (no %s file in it); choose another "
                        "DIR or remove it yourself",
                        shown(dir), MARKER);
        if (!marker_is_ours(dfd))
            return fail("%s: exists and is not a demo store (its %s file is not the demo's); "
                        "choose another DIR or remove it yourself",
                        shown(dir), MARKER);
        if (nother)
            return fail("%s: holds files a demo does not make (%s%s); not touching it: choose "
                        "another DIR or remove them yourself",
                        shown(dir), other, nother > 3 ? ", ..." : "");
        if (store) {
            /* with the store's exclusive lock: a pack or import of it
             * that is running makes this fail with "store is locked" */
            ost_store *st = ost_store_new();
            if (!st) return fail("out of memory");
            ost_store_options o;
            ost_store_options_init(&o);
            o.exclusive = true;
            int rc = ost_store_open(st, dir, &o);
            if (!rc) rc = ost_store_drop(st);
            if (rc) {
                int r = rc == OST_EBUSY
                            ? fail("%s", ost_store_errmsg(st))
                            : fail("%s: cannot remove the previous demo store: %s (remove the "
                                   "directory yourself)",
                                   shown(dir), ost_store_errmsg(st));
                ost_store_close(st);
                return r;
            }
            ost_store_close(st);
            say("removed the previous demo store %s\n", shown(dir));
        }
    }
    int fd = openat(dfd, MARKER, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail("%s: %s: %s", shown(dir), MARKER, strerror(errno));
    ssize_t w = write(fd, MARKER_TEXT, strlen(MARKER_TEXT));
    int c = close(fd);
    if (w != (ssize_t)strlen(MARKER_TEXT) || c != 0)
        return fail("%s: %s: %s", shown(dir), MARKER, w < 0 || c ? strerror(errno) : "short write");
    return EXIT_OK;
}


/* ---- the maps of the root ------------------------------------------------------------ */

/* The root's map number i (borrowed; starts a transaction when none is
 * running), or 0 when the root holds no such map with keys of the right
 * kind. */
static ost_value root_map(ost_conn *c, int i) {
    if (!ost_conn_root(c)) return 0;
    ost_value key = ost_str_c(maps_def[i].name);
    ost_value m = key ? ost_root_get(c, key) : 0;
    ost_decref(key);
    const char *kind;
    bool is_set;
    if (!m || !ost_is_map(m) || ost_map_kind(c, m, &kind, &is_set) || is_set ||
        strcmp(kind, maps_def[i].kind) != 0)
        return 0;
    return m;
}

/* Opens a cursor on map m from `from` (inclusive, or exclusive) to `to`
 * (exclusive); a bound of 0 is no bound. Steals the bounds. */
static int range_open(ost_conn *c, ost_value m, ost_value from, bool from_exclusive,
                      ost_value to, bool reverse, ost_map_cursor **cur) {
    ost_map_range r = {.from = from, .to = to, .from_exclusive = from_exclusive,
                       .to_exclusive = true, .reverse = reverse};
    int rc = ost_map_cursor_open(c, m, &r, cur);
    ost_decref(from);
    ost_decref(to);
    return rc;
}

/* Failure of a step: the connection says why. */
static int step_fail(ost_conn *c, const char *step, const char *what) {
    const char *m = ost_conn_errmsg(c);
    return fail("%s: %s%s%s", step, what, m[0] ? ": " : "", m);
}

/* The address as messages show it: a path as shown() shows it; a
 * PostgreSQL address without its password (user:secret@ becomes user@,
 * a password=... parameter or pair becomes password=***). */
static const char *where(const char *addr) {
    if (ost_store_addr_is_path(addr)) return shown(addr);
    static char buf[1024];
    size_t o = 0;
    const char *p = addr, *scheme = strstr(addr, "://");
    const char *auth_end = scheme ? strpbrk(scheme + 3, "@/?") : NULL;
    const char *colon = auth_end && *auth_end == '@' ? memchr(scheme + 3, ':', (size_t)(auth_end - scheme - 3)) : NULL;
    while (*p && o + 16 < sizeof buf) {
        if (p == colon) {
            p = auth_end; /* drop ":secret" */
            continue;
        }
        if (!strncmp(p, "password=", 9) && (p == addr || strchr("?& ", p[-1]))) {
            memcpy(buf + o, "password=***", 12);
            o += 12;
            p += 9;
            while (*p && *p != '&' && *p != ' ') p++;
            continue;
        }
        buf[o++] = *p++;
    }
    buf[o] = 0;
    return buf;
}

/* ---- phase 1: the bulk load ----------------------------------------------------------- */

typedef struct {
    progress bar;
    uint64_t total;
    uint64_t batches;
    uint64_t objects, bytes; /* stored so far: objects and entries, their bytes */
} load_ui;

static void on_progress(void *ud, uint64_t objects, uint64_t bytes) {
    load_ui *u = ud;
    u->batches++;
    u->objects = objects;
    u->bytes = bytes;
    progress_update(&u->bar, objects, "objects and entries");
}

static int open_shop_store(const char *dir, shop *s, bool create, bool group, ost_store **out) {
    ost_store *st = ost_store_new();
    if (!st) return fail("out of memory");
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.exclusive = create; /* the load (a pack meanwhile would remove what it has not linked) */
    o.registry = s->reg;
    o.group_commit = group;
    o.map_size = (size_t)256 << 20;
    int rc = ost_store_open(st, dir, &o);
    if (rc) {
        int r = fail("%s", ost_store_errmsg(st));
        ost_store_close(st);
        return r;
    }
    *out = st;
    return EXIT_OK;
}

/* Notes that customer id (1, 2, ...) has n orders. */
static int note_orders(counts *k, uint64_t id, int n) {
    if (id > k->capcust) {
        size_t cap = k->capcust ? k->capcust * 2 : 4096;
        uint8_t *p = realloc(k->norders, cap);
        if (!p) return OST_ENOMEM;
        k->norders = p;
        k->capcust = cap;
    }
    k->norders[id - 1] = (uint8_t)n;
    return 0;
}

/* Makes the maps, links them into the root and commits; then bulk-loads
 * the shop, objects and map entries in the same loader; then commits the
 * expected counts into the root. */
static int load(const char *dir, shop *s, uint64_t target, counts *k) {
    ost_store *st = NULL;
    if (open_shop_store(dir, s, true, false, &st)) return EXIT_FAIL;
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) {
        ost_store_close(st);
        return fail("%s: %s", where(dir), ost_strerror(rc));
    }
    if (!ost_store_addr_is_path(dir)) {
        /* a server's store is not a directory the demo may remove: it
         * builds in an empty one (the root only) and refuses any other */
        ost_store_stats ss;
        int e = EXIT_OK;
        if ((rc = ost_store_stat(st, &ss)))
            e = fail("%s: %s", where(dir), ost_store_errmsg(st));
        else if (ss.records > 1)
            e = fail("%s: holds a store of %llu records already; the demo builds its shop in an "
                     "empty one (give it a new database or schema); this one was not touched",
                     where(dir), (unsigned long long)ss.records);
        if (e) {
            ost_conn_close(c);
            ost_store_close(st);
            return e;
        }
    }
    memset(k, 0, sizeof *k);
    rng r = {DEMO_SEED_LOAD};
    uint64_t np = demo_nproducts(target);
    ost_value *products = calloc(np, sizeof *products);
    ost_value maps[M_COUNT] = {0};
    uint64_t *moids = k->moids;
    ost_loader *l = NULL;
    /* about 0.3 entries an object: a product, a customer, an order each */
    load_ui ui = {.total = target + target / 10 * 3};
    int err = EXIT_OK;
    if (!products) {
        err = fail("out of memory");
        goto out;
    }
    /* the maps first: the loader fills only maps that are stored */
    double t0 = now_s();
    if (!ost_conn_root(c)) {
        err = fail("%s: the root: %s", where(dir), ost_conn_errmsg(c));
        goto out;
    }
    for (int i = 0; i < M_COUNT && !err; i++) {
        ost_value m;
        if ((rc = ost_map_new(c, maps_def[i].kind, &m))) {
            err = fail("%s: a map of %s keys: %s", where(dir), maps_def[i].kind,
                       ost_conn_errmsg(c));
            break;
        }
        maps[i] = ost_incref(m); /* ours until the end of the load */
        moids[i] = ost_oid(c, m);
        if ((rc = ost_root_set(c, ost_str_c(maps_def[i].name), ost_incref(m))))
            err = fail("%s: the root: %s", where(dir), ost_conn_errmsg(c));
    }
    if (!err && (rc = ost_root_set(c, ost_str_c("name"), ost_str_c("ostore demo shop"))))
        err = fail("%s: the root: %s", where(dir), ost_conn_errmsg(c));
    if (!err && (rc = ost_commit(c)))
        err = fail("%s: committing the maps: %s", where(dir), ost_conn_errmsg(c));
    if (err) goto out;
    say("maps:    customers {int: Customer} (oid %llu), orders {(int, int): Order} (oid %llu), "
        "products {str: Product} (oid %llu): made, linked into the root, committed in %.3f s\n",
        (unsigned long long)moids[M_CUSTOMERS], (unsigned long long)moids[M_ORDERS],
        (unsigned long long)moids[M_PRODUCTS], now_s() - t0);

    progress_start(&ui.bar, g_out.tty && !g_out.quiet, "load", ui.total);
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = ui.total / 20 < 10000 ? 10000 : ui.total / 20;
    lo.progress = on_progress;
    lo.ud = &ui;
    demo_clock clk;
    demo_phase_begin(&clk);
    t0 = now_s();
    if ((rc = ost_loader_open(c, &lo, &l))) {
        err = fail("%s: bulk loader: %s", where(dir), ost_conn_errmsg(c));
        goto out;
    }
    /* the products: products[sku] = product (the entry's value pickle
     * refers to the product, which the same batch stores) */
    for (uint64_t i = 0; i < np; i++) {
        char sku[32];
        sku_of(sku, sizeof sku, i);
        products[i] = new_product(s, &r, i);
        if (!products[i]) {
            err = fail("out of memory");
            goto out;
        }
        rc = ost_loader_map_set(l, maps[M_PRODUCTS], ost_str_c(sku), ost_incref(products[i]));
        if (rc) {
            err = fail("%s: %s", where(dir), ost_loader_errmsg(l));
            goto out;
        }
        k->products++;
        k->objects++;
        k->entries++;
    }
    /* the customers, each with its orders: customers[id] = customer, then
     * orders[(id, number)] = order for each of its orders */
    while (k->objects < target) {
        uint64_t id = k->customers + 1;
        ost_value cu = new_customer(s, &r, id);
        if (!cu) {
            err = fail("out of memory");
            goto out;
        }
        if ((rc = ost_loader_map_set(l, maps[M_CUSTOMERS], ost_int((int64_t)id), ost_incref(cu)))) {
            ost_decref(cu);
            err = fail("%s: %s", where(dir), ost_loader_errmsg(l));
            goto out;
        }
        k->customers++;
        k->objects++;
        k->entries++;
        int norders = demo_norders(&r);
        for (int i = 0; i < norders && !err; i++) {
            int nlines = demo_nlines(&r);
            int64_t total;
            uint64_t number = k->orders + 1;
            ost_value o = new_order(s, &r, cu, number, nlines, products, np, &total);
            ost_value key = o ? int_pair((int64_t)id, (int64_t)number) : 0;
            if (!key) {
                ost_decref(o);
                err = fail("out of memory");
            } else if ((rc = ost_loader_map_set(l, maps[M_ORDERS], key, o))) {
                err = fail("%s: %s", where(dir), ost_loader_errmsg(l));
            } else {
                k->orders++;
                k->lines += (uint64_t)nlines;
                k->objects += 1 + (uint64_t)nlines;
                k->entries++;
                k->cents += (uint64_t)total;
            }
        }
        ost_decref(cu); /* stored: the loader forgets it when it is freed */
        if (!err && note_orders(k, id, norders)) err = fail("out of memory");
        if (err) goto out;
    }
    rc = ost_loader_close(l);
    l = NULL;
    double secs = now_s() - t0;
    demo_phase_end(&g_stats, DEMO_PH_LOAD, &clk, k->objects);
    progress_end(&ui.bar);
    if (rc) {
        err = fail("%s: bulk load failed: %s", where(dir), ost_conn_errmsg(c));
        goto out;
    }
    if (ui.objects != k->objects + k->entries) {
        err = fail("%s: the loader stored %llu objects and map entries, %llu were added",
                   where(dir),
                   (unsigned long long)ui.objects, (unsigned long long)(k->objects + k->entries));
        goto out;
    }
    {
        /* whole records (the 16-byte header and the state pickle) and
         * whole entries (8-byte map oid and key, 8-byte serial and value) */
        uint64_t n = ui.objects, bytes = ui.bytes + 16 * n;
        char a[32], b[32], e[32], f[32];
        say("load:    %s objects and %s map entries in %.2f s: %s objects/s (%s with the entries), "
            "%.1f MiB/s of records and entries (average %llu bytes); %llu durable batch commits\n",
            fmt_count(a, sizeof a, k->objects), fmt_count(b, sizeof b, k->entries), secs,
            fmt_count(e, sizeof e, (uint64_t)((double)k->objects / secs)),
            fmt_count(f, sizeof f, (uint64_t)((double)n / secs)),
            (double)bytes / 1048576.0 / secs, (unsigned long long)(n ? bytes / n : 0),
            (unsigned long long)ui.batches);
    }
    /* the counts the walk checks against */
    double t1 = now_s();
    ost_value kd = ost_dict_new();
    if (!kd) {
        err = fail("out of memory");
        goto out;
    }
    ost_dict_set(kd, ost_str_c("products"), ost_int((int64_t)k->products));
    ost_dict_set(kd, ost_str_c("customers"), ost_int((int64_t)k->customers));
    ost_dict_set(kd, ost_str_c("orders"), ost_int((int64_t)k->orders));
    ost_dict_set(kd, ost_str_c("line_items"), ost_int((int64_t)k->lines));
    ost_dict_set(kd, ost_str_c("total_cents"), ost_int((int64_t)k->cents));
    if ((rc = ost_root_set(c, ost_str_c("counts"), kd)) || (rc = ost_commit(c))) {
        err = fail("%s: committing the root: %s", where(dir), ost_conn_errmsg(c));
        goto out;
    }
    say("root:    name, the 3 maps and the expected counts; counts committed in %.3f s\n",
        now_s() - t1);
out:
    if (l) ost_loader_close(l);
    progress_end(&ui.bar);
    for (uint64_t i = 0; products && i < np; i++) ost_decref(products[i]);
    free(products);
    for (int i = 0; i < M_COUNT; i++) ost_decref(maps[i]);
    ost_conn_close(c);
    ost_store_close(st);
    return err;
}

/* ---- phase 2: the walk ----------------------------------------------------------------- */

typedef struct {
    uint64_t products, customers, orders, lines, cents;
    uint64_t bad_ref;   /* an order's customer or a line item's product is wrong */
    uint64_t bad_total; /* an order's total is not the sum of its line items */
    uint64_t bad_class; /* an object of the wrong class */
    uint64_t bad_key;   /* a key out of order, or not the object's own */
    uint64_t bad_count; /* a customer with more or fewer orders than built */
} walked;

/* The products, in sku order: their oids go to poids (sorted). */
static int walk_products(ost_conn *c, const shop *s, ost_value pm, uint64_t np, uint64_t *poids,
                         walked *w) {
    ost_map_cursor *cur;
    int rc = ost_map_cursor_open(c, pm, NULL, &cur);
    if (rc) return step_fail(c, "walk", "the products map");
    ost_value key, val;
    char prev[64] = "";
    while ((rc = ost_map_cursor_next(cur, &key, &val)) == 0) {
        const char *ks = ost_data(key, NULL);
        ost_value sku = ost_instance_slot(val, P_SKU); /* loads it */
        if (!sku || !ks) {
            ost_map_cursor_close(cur);
            return step_fail(c, "walk", "a product does not load");
        }
        if (ost_instance_class(val) != s->product) w->bad_class++;
        if (strcmp(ost_data(sku, NULL), ks) != 0 || (w->products && strcmp(prev, ks) >= 0))
            w->bad_key++;
        snprintf(prev, sizeof prev, "%s", ks);
        if (w->products < np) poids[w->products] = ost_oid(c, val);
        w->products++;
    }
    ost_map_cursor_close(cur);
    if (rc != OST_ENOTFOUND) return step_fail(c, "walk", "the products map");
    qsort(poids, w->products < np ? w->products : np, sizeof *poids, ost__u64_cmp);
    return 0;
}

/* One order: its key, its customer (the very object the customers map
 * gave for that id, cu), its line items and their products. */
static int walk_order(ost_conn *c, const shop *s, int64_t num, ost_value o, ost_value cu,
                      const uint64_t *poids, uint64_t np, uint8_t *seen, walked *w) {
    ost_value lines = ost_instance_slot(o, O_LINES);
    if (ost_typeof(lines) != OST_T_LIST) return step_fail(c, "walk", "an order does not load");
    if (ost_instance_class(o) != s->order) w->bad_class++;
    if (slot_int(o, O_NUMBER) != num) w->bad_key++;
    if (!cu || ost_instance_slot(o, O_CUSTOMER) != cu) w->bad_ref++;
    w->orders++;
    int64_t sum = 0;
    for (size_t li = 0; li < ost_len(lines); li++) {
        ost_value ln = ost_item(lines, li);
        ost_value prod = ost_instance_slot(ln, L_PRODUCT);
        if (!prod) return step_fail(c, "walk", "a line item does not load");
        if (ost_instance_class(ln) != s->line) w->bad_class++;
        w->lines++;
        sum += slot_int(ln, L_QUANTITY) * slot_int(ln, L_UNIT);
        uint64_t po = ost_oid(c, prod);
        uint64_t *hit = bsearch(&po, poids, np, sizeof *poids, ost__u64_cmp);
        if (!hit) w->bad_ref++;
        else seen[hit - poids] = 1;
    }
    if (sum != slot_int(o, O_TOTAL)) w->bad_total++;
    w->cents += (uint64_t)sum;
    return 0;
}

/* The orders of a walk's chunk (references, with their keys) and their
 * line items (borrowed: the orders hold them). */
typedef struct {
    ost_value *ord;
    int64_t *cid, *num;
    size_t cap;
    ost_value *lines;
    size_t lcap;
} walk_bufs;

static int wb_grow(walk_bufs *b, size_t want) {
    size_t cap;
    if (ost__grow_cap(b->cap, want, sizeof(int64_t), 8192, &cap)) return OST_ENOMEM;
    ost_value *o = realloc(b->ord, cap * sizeof *o);
    if (o) b->ord = o;
    int64_t *c = realloc(b->cid, cap * sizeof *c);
    if (c) b->cid = c;
    int64_t *n = realloc(b->num, cap * sizeof *n);
    if (n) b->num = n;
    if (!o || !c || !n) return OST_ENOMEM;
    b->cap = cap;
    return 0;
}

static int wb_lgrow(walk_bufs *b, size_t want) {
    return ost__grow((void **)&b->lines, &b->lcap, want, sizeof *b->lines, 16384);
}

/* A walk in progress (see walk): what it compares with, what it found,
 * the chunk of customers at hand and the cursors it reads. */
typedef struct {
    ost_conn *c;
    const shop *s;
    const counts *k;
    walked w;
    uint64_t *poids, np; /* the products' oids, ascending (owned) */
    uint8_t *seen;       /* np flags: a line item refers to the product (owned) */
    ost_value chunk[WALK_CHUNK]; /* the chunk's customers (references) */
    int64_t ids[WALK_CHUNK];     /* their keys */
    uint64_t nord[WALK_CHUNK];   /* the orders walked of each */
    size_t n;
    int64_t last;  /* the last customer id of the chunk before */
    bool started;  /* a chunk was walked (last holds) */
    bool end;      /* the customers map has no more */
    int64_t pc, pn; /* the key of the order before */
    walk_bufs wb;
    ost_map_cursor *cc, *oc; /* on the customers and the orders map */
} walk_state;

/* Reads the next chunk of customers from customers map cm, after the last
 * one of the chunk before, into ws->chunk (new references; ws->end when
 * the map has no more), loads them with one ost_prefetch and checks their
 * class and keys. The cursor stays in ws->cc. Returns EXIT_OK, or
 * EXIT_FAIL (message printed). */
static int walk_customers(walk_state *ws, ost_value cm) {
    ost_conn *c = ws->c;
    /* a chunk of customers, after the last one of the chunk before */
    if (range_open(c, cm, ws->started ? ost_int(ws->last) : 0, true, 0, false, &ws->cc))
        return step_fail(c, "walk", "a cursor on the customers map");
    ost_value key, val;
    int rc = 0;
    size_t n = ws->n;
    while (n < WALK_CHUNK && (rc = ost_map_cursor_next(ws->cc, &key, &val)) == 0) {
        int64_t id = -1;
        ost_int_value(key, &id);
        if (n ? id <= ws->ids[n - 1] : ws->started && id <= ws->last) ws->w.bad_key++;
        ws->chunk[n] = ost_incref(val); /* a ghost: the chunk loads at once below */
        ws->ids[n] = id;
        ws->nord[n] = 0;
        n++;
        ws->n = n;
        ws->w.customers++;
    }
    if (rc == OST_ENOTFOUND) ws->end = true;
    else if (rc) return step_fail(c, "walk", "the customers map");
    if (ost_prefetch(c, ws->chunk, n)) return step_fail(c, "walk", "the customers do not load");
    int err = EXIT_OK;
    for (size_t i = 0; i < n && !err; i++) {
        int64_t num = slot_int(ws->chunk[i], C_NUMBER); /* loaded by the prefetch */
        if (num < 0) err = step_fail(c, "walk", "a customer does not load");
        if (ost_instance_class(ws->chunk[i]) != ws->s->customer) ws->w.bad_class++;
        if (num != ws->ids[i]) ws->w.bad_key++;
    }
    return err;
}

/* Walks the orders of ws->oc (the chunk's) and their line items, each set
 * loaded by one ost_prefetch (a round trip or two on a server, not one per
 * object; the products the line items refer to come with them): each
 * order's key must ascend and its customer be the chunk's (counted in
 * ws->nord), and walk_order checks the rest. The references to the orders
 * are released before it returns. Returns EXIT_OK, or EXIT_FAIL (message
 * printed). */
static int walk_orders(walk_state *ws) {
    ost_conn *c = ws->c;
    walk_bufs *wb = &ws->wb;
    ost_value key, val;
    size_t no = 0, nl = 0;
    int rc, err = EXIT_OK;
    while ((rc = ost_map_cursor_next(ws->oc, &key, &val)) == 0) {
        if (no == wb->cap && wb_grow(wb, no + 1)) {
            rc = OST_ENOMEM;
            break;
        }
        ost_int_value(ost_item(key, 0), &wb->cid[no]);
        ost_int_value(ost_item(key, 1), &wb->num[no]);
        wb->ord[no++] = ost_incref(val);
    }
    if (rc != OST_ENOTFOUND) {
        err = rc == OST_ENOMEM ? fail("out of memory") : step_fail(c, "walk", "the orders map");
        goto out;
    }
    if (ost_prefetch(c, wb->ord, no)) {
        err = step_fail(c, "walk", "the orders do not load");
        goto out;
    }
    for (size_t i = 0; i < no && !err; i++) {
        ost_value lines = ost_instance_slot(wb->ord[i], O_LINES);
        for (size_t li = 0; li < ost_len(lines) && !err; li++) {
            if (nl == wb->lcap && wb_lgrow(wb, nl + 1)) err = fail("out of memory");
            else wb->lines[nl++] = ost_item(lines, li); /* the order holds it */
        }
    }
    if (!err && ost_prefetch(c, wb->lines, nl)) err = step_fail(c, "walk", "the line items do not load");
    size_t ci = 0;
    for (size_t i = 0; i < no && !err; i++) {
        int64_t cid = wb->cid[i], num = wb->num[i];
        if (cid < ws->pc || (cid == ws->pc && num <= ws->pn)) ws->w.bad_key++;
        ws->pc = cid, ws->pn = num;
        while (ci < ws->n && ws->ids[ci] < cid) ci++;
        bool mine = ci < ws->n && ws->ids[ci] == cid;
        if (mine) ws->nord[ci]++;
        err = walk_order(c, ws->s, num, wb->ord[i], mine ? ws->chunk[ci] : 0, ws->poids, ws->np,
                         ws->seen, &ws->w);
    }
out:
    for (size_t i = 0; i < no; i++) ost_decref(wb->ord[i]);
    return err;
}

/* Ends ws's chunk: checks each customer's count of orders against the
 * build's, releases the customers, closes the cursors and ends the
 * transaction (a boundary: the cache trims itself). */
static void walk_end_chunk(walk_state *ws, progress *bar) {
    for (size_t i = 0; i < ws->n; i++) {
        if (ws->ids[i] < 1 || (uint64_t)ws->ids[i] > ws->k->customers ||
            ws->nord[i] != ws->k->norders[ws->ids[i] - 1])
            ws->w.bad_count++;
        ost_decref(ws->chunk[i]);
    }
    if (ws->n) ws->last = ws->ids[ws->n - 1], ws->started = true;
    ws->n = 0;
    ost_map_cursor_close(ws->cc);
    ost_map_cursor_close(ws->oc);
    ws->cc = ws->oc = NULL;
    ost_abort(ws->c); /* a transaction boundary: the cache trims itself */
    progress_update(bar, ws->w.customers, "customers");
}

/* After the walk: the counts it found against the build's (ws->k), the
 * maps' (len, by map) and the root's "counts" dict, and no wrong
 * reference, total, class, key or count. Returns EXIT_OK, or EXIT_FAIL
 * (message printed). */
static int walk_check(walk_state *ws, const uint64_t *len) {
    const counts *k = ws->k;
    const walked *w = &ws->w;
    int err = EXIT_OK;
    /* what the root says it holds */
    ost_value root = ost_conn_root(ws->c);
    ost_value key = ost_str_c("counts");
    ost_value kd = root ? ost_root_get(ws->c, key) : 0;
    ost_decref(key);
    struct {
        const char *name;
        uint64_t built, walked, map;
    } checks[] = {
        {"products", k->products, w->products, len[M_PRODUCTS]},
        {"customers", k->customers, w->customers, len[M_CUSTOMERS]},
        {"orders", k->orders, w->orders, len[M_ORDERS]},
        {"line_items", k->lines, w->lines, k->lines},
        {"total_cents", k->cents, w->cents, k->cents},
    };
    for (size_t i = 0; i < NELEM(checks) && !err; i++) {
        int64_t stored = -1;
        ost_value v = kd ? ost_dict_get_c(kd, checks[i].name) : 0;
        if (v) ost_int_value(v, &stored);
        if (checks[i].walked != checks[i].built || checks[i].map != checks[i].built ||
            (uint64_t)stored != checks[i].built)
            err = fail("walk: %s: built %llu, the root says %lld, the map counts %llu, the walk "
                       "found %llu",
                       checks[i].name, (unsigned long long)checks[i].built, (long long)stored,
                       (unsigned long long)checks[i].map, (unsigned long long)checks[i].walked);
    }
    if (!err && (w->bad_ref || w->bad_total || w->bad_class || w->bad_key || w->bad_count))
        err = fail("walk: %llu wrong references, %llu wrong order totals, %llu objects of the "
                   "wrong class, %llu wrong or unordered keys, %llu customers with a wrong number "
                   "of orders",
                   (unsigned long long)w->bad_ref, (unsigned long long)w->bad_total,
                   (unsigned long long)w->bad_class, (unsigned long long)w->bad_key,
                   (unsigned long long)w->bad_count);
    return err;
}

/* Walks the three maps of the root of store st and compares with k, with
 * the maps' counts and with the counts the root holds. The customers go a
 * chunk at a time, each chunk in its own transaction (so the cache trims
 * itself between chunks) with its orders, which a range of the orders map
 * gives: from (first id,) to (last id + 1,) exclusive. *objects and
 * *entries get what was visited. */
__attribute__((noinline)) static int walk(ost_store *st, const shop *s, const counts *k,
                                          uint64_t *objects, uint64_t *entries, double *secs) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("walk: %s", ost_strerror(rc));
    ost_conn_set_cache_size(c, 20000);
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = now_s();
    walk_state state = {.c = c, .s = s, .k = k, .pc = -1, .pn = -1}, *ws = &state;
    int err = EXIT_OK;
    uint64_t len[M_COUNT] = {0};
    progress bar;
    progress_start(&bar, g_out.tty && !g_out.quiet, "walk", k->customers);
    ost_value m[M_COUNT];
    for (int i = 0; i < M_COUNT && !err; i++) {
        if (!(m[i] = root_map(c, i)))
            err = fail("walk: the root holds no map '%s' with %s keys", maps_def[i].name,
                       maps_def[i].kind);
        else if ((rc = ost_map_len(c, m[i], &len[i])))
            err = step_fail(c, "walk", "the count of a map");
    }
    if (err) goto out;
    uint64_t np = len[M_PRODUCTS];
    ws->poids = malloc((np + 1) * sizeof *ws->poids);
    ws->seen = calloc(np + 1, 1);
    if (!ws->poids || !ws->seen) {
        err = fail("out of memory");
        goto out;
    }
    if ((err = walk_products(c, s, m[M_PRODUCTS], np, ws->poids, &ws->w))) goto out;
    if (ws->w.products != np) np = 0; /* the count check below reports it */
    ws->np = np;
    ost_abort(c);
    while (!ws->end && !err) {
        ost_value cm = root_map(c, M_CUSTOMERS), om = root_map(c, M_ORDERS);
        if (!cm || !om) {
            err = step_fail(c, "walk", "the root's maps do not load");
            break;
        }
        if ((err = walk_customers(ws, cm))) break;
        /* their orders: every key from (last + 1,) up to (the chunk's last
         * id + 1,) exclusive; after the last customer, every key left */
        ost_value from = ws->started ? int_prefix(ws->last + 1) : 0;
        ost_value to = !ws->end ? int_prefix(ws->ids[ws->n - 1] + 1) : 0;
        if ((rc = range_open(c, om, from, false, to, false, &ws->oc))) {
            err = step_fail(c, "walk", "a cursor on the orders map");
            break;
        }
        err = walk_orders(ws);
        walk_end_chunk(ws, &bar);
    }
    progress_end(&bar);
    const walked *w = &ws->w;
    *secs = now_s() - t0;
    demo_phase_end(&g_stats, DEMO_PH_WALK, &clk,
                   1 + M_COUNT + w->products + w->customers + w->orders + w->lines);
    if (err) goto out;
    uint64_t reached = 0;
    for (size_t i = 0; i < np; i++) reached += ws->seen[i];
    err = walk_check(ws, len);
    *objects = 1 + M_COUNT + w->products + w->customers + w->orders + w->lines;
    *entries = w->products + w->customers + w->orders;
    if (!err) {
        char a[32], b[32], d[32], e[32], f[32], g[32], h[32], r[32];
        say("walk:    %s objects and %s map entries from the root in %.2f s: %s objects/s\n"
            "         %s customers, %s orders, %s line items, %s products (%s referenced), each "
            "map in key order: every count matches (built, walked, ost_map_len, the root's)\n",
            fmt_count(a, sizeof a, *objects), fmt_count(b, sizeof b, *entries), *secs,
            fmt_count(d, sizeof d, (uint64_t)((double)*objects / *secs)),
            fmt_count(e, sizeof e, w->customers), fmt_count(f, sizeof f, w->orders),
            fmt_count(g, sizeof g, w->lines), fmt_count(h, sizeof h, w->products),
            fmt_count(r, sizeof r, reached));
    }
out:
    for (size_t i = 0; i < ws->n; i++) ost_decref(ws->chunk[i]);
    ost_map_cursor_close(ws->cc);
    ost_map_cursor_close(ws->oc);
    progress_end(&bar);
    free(ws->poids);
    free(ws->seen);
    free(ws->wb.ord);
    free(ws->wb.cid);
    free(ws->wb.num);
    free(ws->wb.lines);
    ost_conn_close(c);
    return err;
}

/* ---- phase 3: point lookups and ranges ------------------------------------------------- */

/* Looks up LOOKUPS random customers by id (each loaded, its number
 * checked), ids that are not there, and the first and last id. The
 * phases (walk, lookups, ranges) are noinline: each a symbol of its own
 * for a profiler (callgrind --toggle-collect='lookups*', docs/benchmarks.md). */
__attribute__((noinline)) static int lookups(ost_store *st, const shop *s, const counts *k) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("lookup: %s", ost_strerror(rc));
    ost_conn_set_cache_size(c, 20000);
    rng r = {DEMO_SEED_LOOKUP};
    uint64_t n = k->customers, bad = 0;
    int err = EXIT_OK;
    ost_value cm = 0;
    progress bar;
    progress_start(&bar, g_out.tty && !g_out.quiet, "lookup", LOOKUPS);
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = now_s();
    for (uint64_t i = 0; i < LOOKUPS && !err; i++) {
        if (i % TXN_READS == 0) {
            ost_abort(c); /* the cache trims itself */
            progress_update(&bar, i, "lookups");
            if (!(cm = root_map(c, M_CUSTOMERS))) {
                err = step_fail(c, "lookup", "the customers map does not load");
                break;
            }
        }
        int64_t id = 1 + (int64_t)rnd_below(&r, n);
        ost_value key = ost_int(id), cu;
        rc = ost_map_get(c, cm, key, &cu);
        ost_decref(key);
        if (rc) {
            err = fail("lookup: customer %lld: %s: %s", (long long)id, ost_err_name(rc),
                       ost_conn_errmsg(c));
            break;
        }
        if (ost_instance_class(cu) != s->customer || slot_int(cu, C_NUMBER) != id) bad++;
    }
    double secs = now_s() - t0;
    demo_phase_end(&g_stats, DEMO_PH_LOOKUP, &clk, LOOKUPS);
    progress_end(&bar);
    ost_abort(c);
    /* ids that are not there, and the ends */
    ost_value first = 0, lastk = 0, none = 0, k0 = ost_int(0), kn = ost_int((int64_t)n + 1);
    int in0 = -1, inn = -1, getn = -1;
    int64_t fid = -1, lid = -1;
    if (!err && !(cm = root_map(c, M_CUSTOMERS)))
        err = step_fail(c, "lookup", "the customers map does not load");
    if (!err) {
        in0 = ost_map_contains(c, cm, k0);
        inn = ost_map_contains(c, cm, kn);
        getn = ost_map_get(c, cm, kn, &none);
        if ((rc = ost_map_first(c, cm, &first)) || (rc = ost_map_last(c, cm, &lastk)))
            err = step_fail(c, "lookup", "the first and last ids");
        ost_int_value(first, &fid);
        ost_int_value(lastk, &lid);
    }
    if (!err && (bad || in0 != 0 || inn != 0 || getn != OST_ENOTFOUND || none || fid != 1 ||
                 lid != (int64_t)n))
        err = fail("lookup: %llu customers that are not the one of their id; ids 0 and %llu: "
                   "contains says %d and %d, get says %s; the first id is %lld, the last %lld",
                   (unsigned long long)bad, (unsigned long long)n + 1, in0, inn,
                   getn ? ost_err_name(getn) : "found", (long long)fid, (long long)lid);
    ost_decref(first);
    ost_decref(lastk);
    ost_decref(k0);
    ost_decref(kn);
    if (!err) {
        char a[32], b[32], d[32], e[32];
        say("lookup:  %s random customer ids in %.2f s: %s lookups/s (each customer loaded and "
            "its number checked); ids 0 and %s are not there; the first id is 1, the last %s\n",
            fmt_count(a, sizeof a, LOOKUPS), secs,
            fmt_count(b, sizeof b, (uint64_t)(LOOKUPS / secs)), fmt_count(d, sizeof d, n + 1),
            fmt_count(e, sizeof e, n));
    }
    ost_conn_close(c);
    return err;
}

/* The orders of customer id (whose object is cu), by the range from
 * (id,) to (id + 1,) exclusive: each loaded and checked. *n gets how
 * many, *lo and *hi the first and last number, *cents their total. */
static int orders_of(ost_conn *c, ost_value om, int64_t id, ost_value cu, uint64_t *n,
                     int64_t *lo, int64_t *hi, int64_t *cents, uint64_t *bad) {
    ost_map_cursor *cur;
    int rc = range_open(c, om, int_prefix(id), false, int_prefix(id + 1), false, &cur);
    if (rc) return rc;
    *n = 0;
    *cents = 0;
    ost_value key, o;
    while ((rc = ost_map_cursor_next(cur, &key, &o)) == 0) {
        int64_t cid = -1, num = -1, total = slot_int(o, O_TOTAL); /* loads it */
        ost_int_value(ost_item(key, 0), &cid);
        ost_int_value(ost_item(key, 1), &num);
        if (cid != id || slot_int(o, O_NUMBER) != num || ost_instance_slot(o, O_CUSTOMER) != cu ||
            total < 0)
            (*bad)++;
        if (!*n) *lo = num;
        *hi = num;
        *cents += total;
        (*n)++;
    }
    ost_map_cursor_close(cur);
    return rc == OST_ENOTFOUND ? 0 : rc;
}

/* Range queries: one customer's orders, shown; the orders of
 * RANGE_QUERIES random customers, counted against what was built; the
 * products of a range of skus, forwards and backwards. */
__attribute__((noinline)) static int ranges(ost_store *st, const counts *k) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("range: %s", ost_strerror(rc));
    ost_conn_set_cache_size(c, 20000);
    int err = EXIT_OK;
    uint64_t bad = 0, n = 0, total = 0;
    int64_t lo = 0, hi = 0, cents = 0;
    char a[32], b[32], d[32], e[32];
    ost_value cm = root_map(c, M_CUSTOMERS), om = root_map(c, M_ORDERS), cu = 0;
    /* one customer, in the middle */
    int64_t id = (int64_t)(k->customers + 1) / 2;
    if (!cm || !om) err = step_fail(c, "range", "the maps do not load");
    else if ((rc = ost_map_get(c, cm, ost_int(id), &cu)) ||
             (rc = orders_of(c, om, id, cu, &n, &lo, &hi, &cents, &bad)))
        err = step_fail(c, "range", "the orders of a customer");
    else if (bad || n != k->norders[id - 1])
        err = fail("range: customer %lld: %llu orders, %u built (%llu wrong)", (long long)id,
                   (unsigned long long)n, k->norders[id - 1], (unsigned long long)bad);
    else
        say("range:   orders of customer %s (%s), keys from (%lld,) to (%lld,) exclusive: %llu "
            "orders, numbers %s to %s, %s cents in all\n",
            fmt_count(a, sizeof a, (uint64_t)id), ost_data(ost_instance_slot(cu, C_NAME), NULL),
            (long long)id, (long long)id + 1, (unsigned long long)n,
            fmt_count(b, sizeof b, (uint64_t)lo), fmt_count(d, sizeof d, (uint64_t)hi),
            fmt_count(e, sizeof e, (uint64_t)cents));
    /* many customers, each with its orders */
    rng r = {DEMO_SEED_RANGE};
    progress bar;
    progress_start(&bar, g_out.tty && !g_out.quiet, "range", RANGE_QUERIES);
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = now_s();
    for (int q = 0; q < RANGE_QUERIES && !err; q++) {
        if (q % (TXN_READS / 10) == 0) {
            ost_abort(c);
            progress_update(&bar, (uint64_t)q, "range queries");
            cm = root_map(c, M_CUSTOMERS);
            om = root_map(c, M_ORDERS);
            if (!cm || !om) {
                err = step_fail(c, "range", "the maps do not load");
                break;
            }
        }
        id = 1 + (int64_t)rnd_below(&r, k->customers);
        if ((rc = ost_map_get(c, cm, ost_int(id), &cu)) ||
            (rc = orders_of(c, om, id, cu, &n, &lo, &hi, &cents, &bad))) {
            err = step_fail(c, "range", "the orders of a customer");
            break;
        }
        if (n != k->norders[id - 1]) bad++;
        total += n;
    }
    double secs = now_s() - t0;
    demo_phase_end(&g_stats, DEMO_PH_RANGE, &clk, RANGE_QUERIES);
    progress_end(&bar);
    if (!err && bad)
        err = fail("range: %llu orders or customers with a wrong count among %d random customers",
                   (unsigned long long)bad, RANGE_QUERIES);
    if (!err)
        say("range:   the orders of %s random customers (%s orders, each loaded) in %.2f s: %s "
            "range queries/s; every customer's count matches\n",
            fmt_count(a, sizeof a, RANGE_QUERIES), fmt_count(b, sizeof b, total), secs,
            fmt_count(d, sizeof d, (uint64_t)(RANGE_QUERIES / secs)));
    /* products by sku, forwards and backwards */
    ost_abort(c);
    uint64_t plo = k->products / 10, phi = plo + (k->products / 10 ? k->products / 10 : 1);
    char from[32], to[32], seen_first[32] = "", seen_last[32] = "";
    sku_of(from, sizeof from, plo);
    sku_of(to, sizeof to, phi);
    ost_value pm = err ? 0 : root_map(c, M_PRODUCTS);
    if (!err && !pm) err = step_fail(c, "range", "the products map does not load");
    uint64_t count[2] = {0, 0};
    for (int rev = 0; rev < 2 && !err; rev++) {
        ost_map_cursor *cur;
        if ((rc = range_open(c, pm, ost_str_c(from), false, ost_str_c(to), rev, &cur))) {
            err = step_fail(c, "range", "a cursor on the products map");
            break;
        }
        ost_value key, p;
        char prev[32] = "";
        while ((rc = ost_map_cursor_next(cur, &key, &p)) == 0) {
            const char *ks = ost_data(key, NULL);
            const char *sku = ost_data(ost_instance_slot(p, P_SKU), NULL);
            if (!ks || !sku || strcmp(ks, sku) != 0 || strcmp(ks, from) < 0 ||
                strcmp(ks, to) >= 0 ||
                (prev[0] && (rev ? strcmp(ks, prev) >= 0 : strcmp(ks, prev) <= 0)))
                bad++;
            snprintf(prev, sizeof prev, "%s", ks);
            if (!rev && !count[0]) snprintf(seen_first, sizeof seen_first, "%s", ks);
            if (!rev) snprintf(seen_last, sizeof seen_last, "%s", ks);
            count[rev]++;
        }
        ost_map_cursor_close(cur);
        if (rc != OST_ENOTFOUND) err = step_fail(c, "range", "the products map");
    }
    if (!err && (bad || count[0] != phi - plo || count[1] != phi - plo))
        err = fail("range: skus from %s to %s exclusive: %llu products forwards, %llu backwards, "
                   "%llu expected (%llu wrong)",
                   from, to, (unsigned long long)count[0], (unsigned long long)count[1],
                   (unsigned long long)(phi - plo), (unsigned long long)bad);
    if (!err)
        say("range:   products with skus from '%s' to '%s' exclusive: %llu, %s to %s, in sku "
            "order (and reversed)\n",
            from, to, (unsigned long long)count[0], seen_first, seen_last);
    ost_conn_close(c);
    return err;
}

/* ---- phase 4: concurrent commits into one map ----------------------------------------- */

typedef struct {
    ost_store *st;
    const shop *s;
    const counts *k;
    int id;
    uint64_t commits, conflicts;
    int rc;
    char msg[600];
    char conflict[600]; /* the first conflict's message */
    int64_t cids[COMMITS_PER_THREAD]; /* the customer of each new order */
    uv_mutex_t *lock;
    uint64_t *done; /* commits of all threads, for the progress bar */
    int *finished;  /* threads that are done (both under lock) */
} worker;

/* The number of thread t's i-th new order: no built order has it, and no
 * other thread's. */
static int64_t new_number(int t, int i) { return demo_new_number(t, i); }

/* One commit: a new order (with one line item) of a random customer, set
 * in the orders map under (customer id, number). The customer and the
 * product are looked up in their maps (reads); the only write is the new
 * key (and the two new objects), so commits never conflict. */
static int one_order(ost_conn *c, const shop *s, const counts *k, rng *r, int64_t number,
                     int64_t *cid) {
    ost_value cm = root_map(c, M_CUSTOMERS), om = root_map(c, M_ORDERS);
    ost_value pm = root_map(c, M_PRODUCTS);
    if (!cm || !om || !pm) {
        /* the root's failure when it did not load (a server that cannot
         * be reached is OST_EIO, not a damaged store) */
        ost_value root;
        int rc = ost_conn_get(c, 0, &root);
        if (!rc) rc = ost_activate(c, root);
        return rc ? rc : OST_ECORRUPT;
    }
    int64_t id = 1 + (int64_t)rnd_below(r, k->customers);
    char sku[32];
    sku_of(sku, sizeof sku, rnd_below(r, k->products));
    ost_value cu, prod, key = ost_str_c(sku);
    int rc = ost_map_get(c, cm, ost_int(id), &cu);
    if (!rc) rc = ost_map_get(c, pm, key, &prod);
    ost_decref(key);
    if (rc) return rc;
    int64_t total;
    ost_value o = new_order(s, NULL, cu, (uint64_t)number, 1, &prod, 1, &total);
    key = int_pair(id, number);
    if (!o || !key) {
        ost_decref(o);
        ost_decref(key);
        return OST_ENOMEM;
    }
    *cid = id;
    rc = ost_map_set(c, om, key, o);
    return rc ? rc : ost_commit(c);
}

static void worker_main(void *arg) {
    worker *w = arg;
    ost_conn *c;
    w->rc = ost_conn_open(w->st, &c);
    if (w->rc) {
        snprintf(w->msg, sizeof w->msg, "thread %d: connection: %s", w->id, ost_strerror(w->rc));
        goto done;
    }
    rng r = {demo_seed_worker(w->id)};
    for (int i = 0; i < COMMITS_PER_THREAD; i++) {
        int rc;
        while ((rc = one_order(c, w->s, w->k, &r, new_number(w->id, i), &w->cids[i])) ==
               OST_ECONFLICT) {
            if (!w->conflicts++)
                snprintf(w->conflict, sizeof w->conflict, "%s", ost_conn_errmsg(c));
            ost_abort(c);
        }
        if (rc) {
            w->rc = rc;
            snprintf(w->msg, sizeof w->msg, "thread %d, commit %d: %s: %s", w->id, i,
                     ost_err_name(rc), ost_conn_errmsg(c));
            ost_abort(c);
            break;
        }
        w->commits++;
        uv_mutex_lock(w->lock);
        (*w->done)++;
        uv_mutex_unlock(w->lock);
    }
    ost_conn_close(c);
done:
    uv_mutex_lock(w->lock);
    (*w->finished)++;
    uv_mutex_unlock(w->lock);
}

/* Checks that every new order is in the orders map under its key, is the
 * order it should be and refers to its customer; and the map's count. */
static int check_new_orders(ost_store *st, const counts *k, const worker *ws) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("commits: %s", ost_strerror(rc));
    int err = EXIT_OK;
    uint64_t len = 0, found = 0, want = THREADS * COMMITS_PER_THREAD;
    ost_value om = root_map(c, M_ORDERS), cm = root_map(c, M_CUSTOMERS);
    if (!om || !cm || ost_map_len(c, om, &len))
        err = step_fail(c, "commits", "the orders map");
    for (int t = 0; t < THREADS && !err; t++)
        for (int i = 0; i < COMMITS_PER_THREAD && !err; i++) {
            ost_value key = int_pair(ws[t].cids[i], new_number(t, i)), o, cu;
            int grc = key ? ost_map_get(c, om, key, &o) : OST_ENOMEM;
            ost_decref(key);
            if (grc == OST_ENOTFOUND) continue;
            if (grc || (grc = ost_map_get(c, cm, ost_int(ws[t].cids[i]), &cu))) {
                err = step_fail(c, "commits", "a new order");
                break;
            }
            if (slot_int(o, O_NUMBER) == new_number(t, i) &&
                ost_instance_slot(o, O_CUSTOMER) == cu &&
                ost_len(ost_instance_slot(o, O_LINES)) == 1)
                found++;
        }
    ost_conn_close(c);
    if (!err && (len != k->orders + want || found != want))
        err = fail("commits: the orders map holds %llu orders, %llu expected; %llu of the %llu "
                   "new orders are there and right",
                   (unsigned long long)len, (unsigned long long)(k->orders + want),
                   (unsigned long long)found, (unsigned long long)want);
    return err;
}

static int concurrent(ost_store *st, const shop *s, const counts *k, double *secs) {
    worker *ws = calloc(THREADS, sizeof *ws);
    uv_thread_t th[THREADS];
    uv_mutex_t lock;
    uint64_t done = 0;
    int finished = 0;
    if (!ws) return fail("out of memory");
    if (uv_mutex_init(&lock)) {
        free(ws);
        return fail("cannot make a mutex");
    }
    progress bar;
    progress_start(&bar, g_out.tty && !g_out.quiet, "commits", THREADS * COMMITS_PER_THREAD);
    demo_clock clk;
    demo_phase_begin(&clk);
    double t0 = now_s();
    int started = 0;
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (worker){.st = st, .s = s, .k = k, .id = i, .lock = &lock, .done = &done,
                         .finished = &finished};
        if (uv_thread_create(&th[i], worker_main, &ws[i]) != 0) break;
        started++;
    }
    while (started == THREADS) { /* the bar, from this thread */
        uv_mutex_lock(&lock);
        uint64_t d = done;
        int f = finished;
        uv_mutex_unlock(&lock);
        progress_update(&bar, d, "commits");
        if (f == THREADS) break;
        usleep(20000);
    }
    for (int i = 0; i < started; i++) uv_thread_join(&th[i]);
    *secs = now_s() - t0;
    demo_phase_end(&g_stats, DEMO_PH_COMMIT, &clk, THREADS * COMMITS_PER_THREAD);
    progress_end(&bar);
    uv_mutex_destroy(&lock);
    int err = EXIT_OK;
    uint64_t conflicts = 0;
    const char *first = NULL;
    if (started < THREADS) err = fail("cannot start threads");
    for (int i = 0; i < THREADS && !err; i++) {
        if (ws[i].rc) err = fail("commits: %s", ws[i].msg);
        if (ws[i].conflicts && !first) first = ws[i].conflict;
        conflicts += ws[i].conflicts;
    }
    /* each commit wrote a key no other commit wrote: a conflict is a bug */
    if (!err && conflicts)
        err = fail("commits: %llu conflicts, though no two commits wrote the same key (the "
                   "first: %s)",
                   (unsigned long long)conflicts, first);
    if (!err) err = check_new_orders(st, k, ws);
    if (!err) {
        char a[32];
        say("commits: %d commits from %d threads (each its own connection; group commit), each a "
            "new order under its own key of the one orders map, in %.2f s: %s commits/s; 0 "
            "conflicts\n",
            THREADS * COMMITS_PER_THREAD, THREADS, *secs,
            fmt_count(a, sizeof a, (uint64_t)(THREADS * COMMITS_PER_THREAD / *secs)));
    }
    free(ws);
    return err;
}

/* ---- the command ------------------------------------------------------------------------ */

typedef struct {
    uint64_t problems;
} check_ud;

static void on_problem(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    (void)oid, (void)missing, (void)err;
    check_ud *u = ud;
    if (u->problems++ < 10) fprintf(stderr, "ostore: check: %s\n", msg);
}

static int run_demo(int argc, char **argv) {
    const char *objects_s = NULL, *quiet = NULL, *stats = NULL, *pos[1] = {"demo.ostore"};
    cli_opt opts[] = {{"--objects", true, &objects_s}, {"--quiet", false, &quiet},
                      {"--stats", true, &stats}};
    int prc = parse_args(&cmd_demo, argc, argv, opts, 3, pos, 0, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    uint64_t target = 1000000;
    if (objects_s && (!parse_u64(objects_s, &target) || target < 1000 || target > 100000000))
        return bad_usage(&cmd_demo, "demo: --objects takes a number from 1000 to 100000000, not '%s'",
                         objects_s);
    if (stats && !stats[0]) return bad_usage(&cmd_demo, "demo: --stats takes a file name");
    const char *dir = pos[0];
    g_out.quiet = quiet != NULL;
    g_out.tty = isatty(1);
    double start = now_s();
    char a[32], b[32], c[32];
    say("ostore demo: a shop of %s objects in %s\n", fmt_count(a, sizeof a, target), where(dir));
    bool is_path = ost_store_addr_is_path(dir);
    /* a FILE that cannot be written fails before the run, the store untouched */
    FILE *sf = !stats ? NULL : strcmp(stats, "-") == 0 ? stdout : fopen(stats, "w");
    if (stats && !sf) return fail("--stats: %s: %s", shown(stats), strerror(errno));
    if (is_path && prepare_dir(dir)) {
        if (sf && sf != stdout) fclose(sf);
        return EXIT_FAIL;
    }
    shop s;
    if (shop_init(&s)) {
        ost_registry_free(s.reg);
        if (sf && sf != stdout) fclose(sf);
        return fail("out of memory");
    }
    say("classes: shop.Product, shop.Customer, shop.Order, shop.LineItem (persistent, declared "
        "fields); ostore.maps.OrderedMap for the maps\n");
    counts k = {0};
    double twalk = 0, tconc = 0, tcheck = 0;
    uint64_t walked = 0, entries = 0, records = 0;
    int err = load(dir, &s, target, &k);
    ost_store *st = NULL;
    if (!err) {
        double t = now_s();
        err = open_shop_store(dir, &s, false, true, &st);
        if (!err) say("reopen:  %.3f s (read-write, group commit)\n", now_s() - t);
    }
    if (!err) err = walk(st, &s, &k, &walked, &entries, &twalk);
    if (!err) err = lookups(st, &s, &k);
    if (!err) err = ranges(st, &k);
    if (!err) err = concurrent(st, &s, &k, &tconc);
    if (!err) {
        progress bar;
        progress_start(&bar, g_out.tty && !g_out.quiet, "check", 1);
        progress_note(&bar, "reading and decoding every record and map entry...");
        demo_clock clk;
        demo_phase_begin(&clk);
        double t = now_s();
        check_ud u = {0};
        int rc = ost_store_check(st, on_problem, &u, &records);
        tcheck = now_s() - t;
        demo_phase_end(&g_stats, DEMO_PH_CHECK, &clk, records);
        progress_end(&bar);
        uint64_t want = 1 + M_COUNT + k.objects + 2 * THREADS * COMMITS_PER_THREAD;
        if (rc) err = fail("check: %s", ost_store_errmsg(st));
        else if (records != want)
            err = fail("check: %llu records, %llu expected", (unsigned long long)records,
                       (unsigned long long)want);
        else
            say("check:   %s records and %s map entries in %.2f s (%s records/s): every record "
                "decodes, every map entry too, every reference resolves, every map's count "
                "matches its entries\n",
                fmt_count(a, sizeof a, records),
                fmt_count(c, sizeof c, entries + THREADS * COMMITS_PER_THREAD), tcheck,
                fmt_count(b, sizeof b, (uint64_t)((double)records / tcheck)));
    }
    if (!err) {
        ost_store_stats ss;
        ost_store_stat(st, &ss);
        if (!is_path) /* a database, or memory (mem:, which ends with the demo) */
            say("store:   %s, %s of records\n", strncmp(dir, "mem:", 4) ? "PostgreSQL" : "in memory",
                fmt_bytes(a, sizeof a, (double)ss.bytes));
        else
            say("store:   data.mdb %s on disk (records %s, map %s)\n",
                fmt_bytes(a, sizeof a, (double)file_size(dir, "data.mdb")),
                fmt_bytes(b, sizeof b, (double)ss.bytes), fmt_bytes(c, sizeof c, (double)ss.map_size));
        if (stats) {
            g_stats.file_bytes = is_path ? file_size(dir, "data.mdb") : ss.bytes;
            g_stats.products = k.products;
            g_stats.customers = k.customers;
            g_stats.orders = k.orders;
            g_stats.lines = k.lines;
            g_stats.cents = k.cents;
            if (demo_stats_write(&g_stats, sf, "ostore", k.objects) != 0)
                err = fail("--stats: %s: %s", shown(stats), strerror(errno));
        }
        if (!err)
            say("done in %.1f s. Look around: ostore info %s; ostore cat %s 0; ostore cat %s "
                "%llu --limit 3\n",
                now_s() - start, where(dir), where(dir), where(dir),
                (unsigned long long)k.moids[M_CUSTOMERS]);
    }
    ost_store_close(st);
    ost_registry_free(s.reg);
    free(k.norders);
    if (sf && sf != stdout && fclose(sf) != 0 && !err)
        err = fail("--stats: %s: %s", shown(stats), strerror(errno));
    return err;
}

const cli_cmd cmd_demo = {
    .name = "demo",
    .summary = "Build, walk, check and time a store of about a million objects.",
    .usage = "usage: ostore demo [DIR | postgresql://...] [--objects N] [--quiet] [--stats FILE]\n",
    .help = "Makes a store in DIR (default ./demo.ostore) holding a shop: products,\n"
            "customers, their orders (1-7 each) and the orders' line items (1-5 each),\n"
            "which reference shared products; each order references its customer.\n"
            "Three persistent ordered maps in the root index them: customers by id,\n"
            "orders by (customer id, order number), products by sku. Then:\n"
            "  1. makes the maps and commits them, then bulk-loads the objects and the\n"
            "     maps' entries with the loader (durable batch commits);\n"
            "  2. reopens the store and walks every map in key order, loading every\n"
            "     object, checking the counts (built, walked, the maps' own, the root's),\n"
            "     the order totals and that shared objects are shared;\n"
            "  3. looks up 100,000 random customers by id, and reads ranges: the orders\n"
            "     of 10,000 random customers, products by sku;\n"
            "  4. makes 800 small commits from 4 threads, each with its own connection,\n"
            "     through the group committer, each a new order into the orders map\n"
            "     under its own key: no conflicts;\n"
            "  5. checks the whole store (ost_store_check);\n"
            "and prints the rates: objects/s and MiB/s of the load, average record size,\n"
            "walk rate, lookups/s, range queries/s, commits/s, and the size on disk. On a\n"
            "terminal, long steps show a progress bar.\n"
            "\n  --objects N   about N objects (1000 to 100000000; default 1000000)\n"
            "  --quiet       print nothing unless something fails\n"
            "  --stats FILE  write each phase's wall and CPU seconds (getrusage, all\n"
            "                threads), the peak anonymous memory and the store's size\n"
            "                as one JSON object to FILE ('-': standard output), for\n"
            "                bench/demo_vs_sqlite.py\n"
            "\nDIR is made when missing and used when empty. A store an earlier demo made\n"
            "(DIR holds the demo's file ostore-demo and nothing but data.mdb and lock.mdb\n"
            "besides) is removed and made again; anything else is refused, untouched.\n"
            "A demo locks DIR while it runs: a second demo on it fails with 'in use'.\n"
            "DIR may be a PostgreSQL address (postgresql://...): the demo then builds in\n"
            "that store, which must be empty (its root only; others are refused,\n"
            "untouched); or mem:NAME (a store in memory, gone when the demo ends: its\n"
            "figures without a disk).\n"
            "Exit status 1 when any count is off or a step fails.\n",
    .run = run_demo,
};
