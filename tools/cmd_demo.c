/* ostore CLI: `ostore demo`, the main job. It builds a shop (customers,
 * their orders, the orders' line items, and products the line items
 * share), bulk-loads about a million objects, links the collections into
 * the root, reopens the store and walks everything from the root checking
 * every count, runs concurrent small commits from four threads through the
 * group committer, checks the store, and prints what it did and how fast.
 *
 * The graph, per customer: 1 to 7 orders (4 on average), each with 1 to 5
 * line items (3 on average); each line item references one of the shared
 * products, each order references its customer back. Customers are grouped
 * in buckets of 100 (shop.CustomerBucket); the root holds the list of
 * buckets, the list of products and the expected counts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "cli.h"

#define MARKER "ostore-demo"
#define PER_BUCKET 100
#define THREADS 4
#define COMMITS_PER_THREAD 200
#define HOT_BUCKETS 2 /* the concurrent commits touch these buckets' customers */

/* ---- the classes ------------------------------------------------------------ */

enum { P_SKU, P_NAME, P_CATEGORY, P_PRICE, P_NFIELDS };
enum { C_NUMBER, C_NAME, C_EMAIL, C_SINCE, C_ORDERS, C_NFIELDS };
enum { O_NUMBER, O_CUSTOMER, O_PLACED, O_STATUS, O_LINES, O_TOTAL, O_NFIELDS };
enum { L_PRODUCT, L_QUANTITY, L_UNIT, L_NFIELDS };
enum { B_FIRST, B_CUSTOMERS, B_NFIELDS };

static const char *const product_fields[] = {"sku", "name", "category", "price_cents"};
static const char *const customer_fields[] = {"number", "name", "email", "since", "orders"};
static const char *const order_fields[] = {"number", "customer", "placed",
                                           "status", "lines",    "total_cents"};
static const char *const line_fields[] = {"product", "quantity", "unit_cents"};
static const char *const bucket_fields[] = {"first", "customers"};

typedef struct {
    ost_registry *reg;
    ost_value product, customer, order, line, bucket; /* borrowed from reg */
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
        {"CustomerBucket", bucket_fields, B_NFIELDS, &s->bucket},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++) {
        ost_class_def d = {.module = "shop", .name = defs[i].name, .fields = defs[i].fields,
                           .nfields = defs[i].n, .persistent = true};
        int rc = ost_registry_add(s->reg, &d, defs[i].out);
        if (rc) return rc;
    }
    return 0;
}

/* ---- data ------------------------------------------------------------------------ */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnd(rng *r) { /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}
static uint64_t rnd_below(rng *r, uint64_t n) { return (rnd(r) >> 11) % n; }

static const char *const first_names[] = {
    "Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Margaret", "Dennis",
    "Ken", "Radia", "Leslie", "Niklaus", "Sophie", "Tony", "Hedy", "Claude", "Katherine", "Guido",
    "Anita", "Bjarne", "Joan", "Linus", "Carol", "Brian", "Shafi", "Butler", "Lynn", "Robin"};
static const char *const last_names[] = {
    "Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy",
    "Hamilton", "Ritchie", "Thompson", "Perlman", "Lamport", "Wirth", "Wilson", "Hoare",
    "Lamarr", "Shannon", "Johnson", "van Rossum", "Borg", "Stroustrup", "Clarke", "Torvalds",
    "Shaw", "Kernighan", "Goldwasser", "Lampson", "Conway", "Milner"};
static const char *const categories[] = {"tools", "garden", "kitchen", "books", "toys",
                                         "office", "sports", "music"};
static const char *const colours[] = {"red", "blue", "green", "black", "white", "steel"};
static const char *const statuses[] = {"paid", "shipped", "delivered", "returned"};

#define NELEM(a) (sizeof(a) / sizeof *(a))

/* What the build made, to check the walk against. */
typedef struct {
    uint64_t products, buckets, customers, orders, lines, cents;
    uint64_t hot_orders; /* orders of the customers of the first HOT_BUCKETS buckets */
    uint64_t objects;    /* all of the above */
} counts;

static ost_value new_product(const shop *s, rng *r, uint64_t i) {
    ost_value p = ost_instance_new(ost_incref(s->product));
    if (!p) return 0;
    char buf[96];
    snprintf(buf, sizeof buf, "SKU-%06llu", (unsigned long long)i);
    ost_instance_set_slot(p, P_SKU, ost_str_c(buf));
    snprintf(buf, sizeof buf, "%s widget %llu (%s)", categories[i % NELEM(categories)],
             (unsigned long long)i, colours[rnd_below(r, NELEM(colours))]);
    ost_instance_set_slot(p, P_NAME, ost_str_c(buf));
    ost_instance_set_slot(p, P_CATEGORY, ost_str_c(categories[i % NELEM(categories)]));
    ost_instance_set_slot(p, P_PRICE, ost_int((int64_t)(99 + rnd_below(r, 20000))));
    return p;
}

/* A line item for a random product, popular ones more often. */
static ost_value new_line(const shop *s, rng *r, ost_value *products, uint64_t np,
                          int64_t *cents) {
    uint64_t a = rnd_below(r, np), b = rnd_below(r, np);
    ost_value prod = products[a < b ? a : b];
    int64_t price = 0, qty = 1 + (int64_t)rnd_below(r, 5);
    ost_int_value(ost_instance_slot(prod, P_PRICE), &price);
    ost_value l = ost_instance_new(ost_incref(s->line));
    if (!l) return 0;
    ost_instance_set_slot(l, L_PRODUCT, ost_incref(prod));
    ost_instance_set_slot(l, L_QUANTITY, ost_int(qty));
    ost_instance_set_slot(l, L_UNIT, ost_int(price));
    *cents = qty * price;
    return l;
}

static ost_value new_order(const shop *s, rng *r, ost_value cust, uint64_t number, int nlines,
                           ost_value *products, uint64_t np, int64_t *total) {
    ost_value o = ost_instance_new(ost_incref(s->order));
    ost_value lines = ost_list_new((size_t)nlines);
    if (!o || !lines) {
        ost_decref(o);
        ost_decref(lines);
        return 0;
    }
    *total = 0;
    for (int i = 0; i < nlines; i++) {
        int64_t c;
        ost_value l = new_line(s, r, products, np, &c);
        if (!l || ost_list_append(lines, l)) {
            ost_decref(o);
            ost_decref(lines);
            return 0;
        }
        *total += c;
    }
    char date[48];
    snprintf(date, sizeof date, "20%02d-%02d-%02d", 15 + (int)rnd_below(r, 10),
             1 + (int)rnd_below(r, 12), 1 + (int)rnd_below(r, 28));
    ost_instance_set_slot(o, O_NUMBER, ost_int((int64_t)number));
    ost_instance_set_slot(o, O_CUSTOMER, ost_incref(cust));
    ost_instance_set_slot(o, O_PLACED, ost_str_c(date));
    ost_instance_set_slot(o, O_STATUS, ost_str_c(statuses[rnd_below(r, NELEM(statuses))]));
    ost_instance_set_slot(o, O_LINES, lines);
    ost_instance_set_slot(o, O_TOTAL, ost_int(*total));
    return o;
}

static ost_value new_customer(const shop *s, rng *r, uint64_t number, ost_value *products,
                              uint64_t np, counts *k, bool hot) {
    ost_value c = ost_instance_new(ost_incref(s->customer));
    int norders = 1 + (int)rnd_below(r, 7);
    ost_value orders = ost_list_new((size_t)norders);
    if (!c || !orders) {
        ost_decref(c);
        ost_decref(orders);
        return 0;
    }
    const char *fn = first_names[rnd_below(r, NELEM(first_names))];
    const char *ln = last_names[rnd_below(r, NELEM(last_names))];
    char buf[128];
    snprintf(buf, sizeof buf, "%s %s", fn, ln);
    ost_instance_set_slot(c, C_NUMBER, ost_int((int64_t)number));
    ost_instance_set_slot(c, C_NAME, ost_str_c(buf));
    snprintf(buf, sizeof buf, "%s.%s.%llu@example.com", fn, ln, (unsigned long long)number);
    for (char *p = buf; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        else if (*p == ' ') *p = '-';
    ost_instance_set_slot(c, C_EMAIL, ost_str_c(buf));
    ost_instance_set_slot(c, C_SINCE, ost_int(2005 + (int64_t)rnd_below(r, 20)));
    k->customers++;
    k->objects++;
    for (int i = 0; i < norders; i++) {
        int nlines = 1 + (int)rnd_below(r, 5);
        int64_t total;
        ost_value o = new_order(s, r, c, k->orders + 1, nlines, products, np, &total);
        if (!o || ost_list_append(orders, o)) {
            ost_instance_set_slot(c, C_ORDERS, orders); /* freed with c below */
            ost_release(c);
            return 0;
        }
        k->orders++;
        k->lines += (uint64_t)nlines;
        k->objects += 1 + (uint64_t)nlines;
        k->cents += (uint64_t)total;
        if (hot) k->hot_orders++;
    }
    ost_instance_set_slot(c, C_ORDERS, orders);
    return c;
}

/* ---- output ----------------------------------------------------------------------- */

typedef struct {
    bool quiet, tty;
} out_mode;

static out_mode g_out;

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

/* Makes dir ready for a new demo store: creates it, or reuses it when it
 * is empty, or removes a previous demo's store (marked by MARKER); refuses
 * anything else. */
static int prepare_dir(const char *dir) {
    struct stat sb;
    char p[PATH_MAX];
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return fail("%s: exists and is not a directory; not touching it", dir);
        snprintf(p, sizeof p, "%s/%s", dir, MARKER);
        bool ours = access(p, F_OK) == 0;
        if (ours) {
            if (lock_store(dir)) return EXIT_FAIL; /* a demo still running there */
            const char *files[] = {"data.mdb", "lock.mdb", MARKER};
            for (size_t i = 0; i < NELEM(files); i++) {
                snprintf(p, sizeof p, "%s/%s", dir, files[i]);
                if (unlink(p) != 0 && errno != ENOENT) return fail("%s: %s", p, strerror(errno));
            }
            if (rmdir(dir) != 0)
                return fail("%s: cannot remove the previous demo store: %s", dir,
                            errno == ENOTEMPTY ? "it holds other files too" : strerror(errno));
            say("removed the previous demo store %s\n", dir);
        } else {
            if (rmdir(dir) != 0) /* only an empty directory goes */
                return fail("%s: exists and is not a demo store (no %s file in it); choose "
                            "another DIR or remove it yourself",
                            dir, MARKER);
        }
    } else if (errno != ENOENT) {
        return fail("%s: %s", dir, strerror(errno));
    }
    if (mkdir(dir, 0755) != 0) return fail("%s: cannot create: %s", dir, strerror(errno));
    snprintf(p, sizeof p, "%s/%s", dir, MARKER);
    FILE *f = fopen(p, "w");
    if (!f) return fail("%s: %s", p, strerror(errno));
    fputs("This store was made by 'ostore demo', which removes and remakes it when run again.\n",
          f);
    if (fclose(f) != 0) return fail("%s: %s", p, strerror(errno));
    return EXIT_OK;
}

/* ---- phase 1: the bulk load ----------------------------------------------------------- */

typedef struct {
    progress bar;
    uint64_t total;
    uint64_t batches;
    uint64_t objects, bytes; /* stored so far: objects, pickle bytes */
} load_ui;

static void on_progress(void *ud, uint64_t objects, uint64_t bytes) {
    load_ui *u = ud;
    u->batches++;
    u->objects = objects;
    u->bytes = bytes;
    progress_update(&u->bar, objects, "objects");
}

static int open_shop_store(const char *dir, shop *s, bool create, bool group, ost_store **out) {
    ost_store *st = ost_store_new();
    if (!st) return fail("out of memory");
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
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

static int load(const char *dir, shop *s, uint64_t target, counts *k) {
    ost_store *st;
    if (open_shop_store(dir, s, true, false, &st)) return EXIT_FAIL;
    if (lock_store(dir)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) {
        ost_store_close(st);
        return fail("%s: %s", dir, ost_strerror(rc));
    }
    memset(k, 0, sizeof *k);
    rng r = {0x9E3779B97F4A7C15ULL};
    uint64_t np = target / 1000;
    if (np < 10) np = 10;
    if (np > 100000) np = 100000;
    ost_value *products = calloc(np, sizeof *products);
    uint64_t *bucket_oids = NULL;
    size_t nbuckets = 0, capbuckets = 0;
    ost_loader *l = NULL;
    load_ui ui = {.total = target};
    progress_start(&ui.bar, g_out.tty && !g_out.quiet, "load", target);
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = target / 20 < 10000 ? 10000 : target / 20;
    lo.progress = on_progress;
    lo.ud = &ui;
    double t0 = now_s();
    int err = EXIT_OK;
    if (!products) {
        err = fail("out of memory");
        goto out;
    }
    if ((rc = ost_loader_open(c, &lo, &l))) {
        err = fail("%s: bulk loader: %s", dir, ost_conn_errmsg(c));
        goto out;
    }
    for (uint64_t i = 0; i < np; i++) {
        products[i] = new_product(s, &r, i);
        if (!products[i]) {
            err = fail("out of memory");
            goto out;
        }
        if ((rc = ost_loader_add(l, products[i], NULL))) {
            err = fail("%s: %s", dir, ost_loader_errmsg(l));
            goto out;
        }
        k->products++;
        k->objects++;
    }
    while (k->objects < target) {
        ost_value b = ost_instance_new(ost_incref(s->bucket));
        ost_value custs = ost_list_new(PER_BUCKET);
        if (!b || !custs) {
            ost_decref(b);
            ost_decref(custs);
            err = fail("out of memory");
            goto out;
        }
        ost_instance_set_slot(b, B_FIRST, ost_int((int64_t)k->customers + 1));
        ost_instance_set_slot(b, B_CUSTOMERS, custs);
        k->buckets++;
        k->objects++;
        bool hot = nbuckets < HOT_BUCKETS;
        for (int j = 0; j < PER_BUCKET && k->objects < target; j++) {
            ost_value cu = new_customer(s, &r, k->customers + 1, products, np, k, hot);
            if (!cu || ost_list_append(custs, cu)) {
                err = fail("out of memory");
                break;
            }
        }
        uint64_t oid = 0;
        if (!err && (rc = ost_loader_add(l, b, &oid)))
            err = fail("%s: %s", dir, ost_loader_errmsg(l));
        /* The bucket and all it reaches are stored (serialized by the add):
         * break each customer <-> order cycle so that dropping the bucket
         * frees its graph (loaded objects count as persistent, and
         * ost_release does not walk into persistent objects). */
        for (size_t j = 0; j < ost_len(custs); j++)
            ost_instance_set_slot(ost_item(custs, j), C_ORDERS, OST_NONE);
        ost_decref(b);
        if (err) goto out;
        if (nbuckets == capbuckets) {
            capbuckets = capbuckets ? capbuckets * 2 : 256;
            uint64_t *n = realloc(bucket_oids, capbuckets * sizeof *n);
            if (!n) {
                err = fail("out of memory");
                goto out;
            }
            bucket_oids = n;
        }
        bucket_oids[nbuckets++] = oid;
    }
    rc = ost_loader_close(l);
    l = NULL;
    double secs = now_s() - t0;
    progress_end(&ui.bar);
    if (rc) {
        err = fail("%s: bulk load failed: %s", dir, ost_conn_errmsg(c));
        goto out;
    }
    if (ui.objects != k->objects) {
        err = fail("%s: the loader stored %llu objects, %llu were added", dir,
                   (unsigned long long)ui.objects, (unsigned long long)k->objects);
        goto out;
    }
    {
        /* whole records: the 16-byte header and the state pickle */
        uint64_t n = ui.objects, bytes = ui.bytes + 16 * n;
        char a[32], b[32];
        say("load:    %s objects in %.2f s: %s objects/s, %.1f MiB/s of records (average %llu "
            "bytes); %llu durable batch commits\n",
            fmt_count(a, sizeof a, n), secs, fmt_count(b, sizeof b, (uint64_t)((double)n / secs)),
            (double)bytes / 1048576.0 / secs, (unsigned long long)(n ? bytes / n : 0),
            (unsigned long long)ui.batches);
    }
    /* the root: the buckets (ghosts, by oid), the products, the counts */
    double t1 = now_s();
    ost_value blist = ost_list_new(nbuckets), plist = ost_list_new(np), kd = ost_dict_new();
    if (!blist || !plist || !kd) {
        ost_decref(blist);
        ost_decref(plist);
        ost_decref(kd);
        err = fail("out of memory");
        goto out;
    }
    for (size_t i = 0; i < nbuckets && !err; i++) {
        ost_value g;
        if ((rc = ost_conn_get(c, bucket_oids[i], &g)))
            err = fail("%s: bucket oid %llu: %s", dir, (unsigned long long)bucket_oids[i],
                       ost_conn_errmsg(c));
        else
            ost_list_append(blist, ost_incref(g));
    }
    for (uint64_t i = 0; i < np; i++) ost_list_append(plist, ost_incref(products[i]));
    ost_dict_set(kd, ost_str_c("products"), ost_int((int64_t)k->products));
    ost_dict_set(kd, ost_str_c("buckets"), ost_int((int64_t)k->buckets));
    ost_dict_set(kd, ost_str_c("customers"), ost_int((int64_t)k->customers));
    ost_dict_set(kd, ost_str_c("orders"), ost_int((int64_t)k->orders));
    ost_dict_set(kd, ost_str_c("line_items"), ost_int((int64_t)k->lines));
    ost_dict_set(kd, ost_str_c("total_cents"), ost_int((int64_t)k->cents));
    if (err) {
        ost_decref(blist);
        ost_decref(plist);
        ost_decref(kd);
        goto out;
    }
    ost_root_set(c, ost_str_c("name"), ost_str_c("ostore demo shop"));
    ost_root_set(c, ost_str_c("customers"), blist);
    ost_root_set(c, ost_str_c("products"), plist);
    ost_root_set(c, ost_str_c("counts"), kd);
    if ((rc = ost_commit(c))) {
        err = fail("%s: committing the root: %s", dir, ost_conn_errmsg(c));
        goto out;
    }
    double troot = now_s() - t1;
    say("root:    customers (%s buckets), products (%s), counts: committed in %.3f s\n",
        fmt_count((char[32]){0}, 32, k->buckets), fmt_count((char[32]){0}, 32, k->products),
        troot);
out:
    if (l) ost_loader_close(l);
    progress_end(&ui.bar);
    for (uint64_t i = 0; products && i < np; i++) ost_decref(products[i]);
    free(products);
    free(bucket_oids);
    ost_conn_close(c);
    ost_store_close(st);
    return err;
}

/* ---- phase 2: the walk ----------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Failure while walking: the connection says why. */
static int walk_fail(ost_conn *c, const char *what) {
    const char *m = ost_conn_errmsg(c);
    return fail("walk: %s%s%s", what, m[0] ? ": " : "", m);
}

static int64_t slot_int(ost_value inst, size_t i) {
    int64_t v = -1;
    ost_int_value(ost_instance_slot(inst, i), &v);
    return v;
}

/* Walks everything from the root of store st and compares with k (and
 * with the counts the root holds). *objects gets the objects visited. */
static int walk(ost_store *st, const shop *s, const counts *k, uint64_t *objects, double *secs) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("walk: %s", ost_strerror(rc));
    ost_conn_set_cache_size(c, 20000);
    double t0 = now_s();
    counts w = {0};
    int err = EXIT_OK;
    uint64_t *poids = NULL, bad_ref = 0, bad_total = 0, bad_class = 0;
    uint8_t *seen = NULL;
    progress bar;
    ost_value root = ost_conn_root(c);
    ost_value key = ost_str_c("customers");
    ost_value blist = root ? ost_root_get(c, key) : 0;
    ost_decref(key);
    key = ost_str_c("products");
    ost_value plist = root ? ost_root_get(c, key) : 0;
    ost_decref(key);
    if (!root || ost_typeof(blist) != OST_T_LIST || ost_typeof(plist) != OST_T_LIST) {
        err = walk_fail(c, "the root has no customers and products lists");
        goto out;
    }
    size_t np = ost_len(plist), nb = ost_len(blist);
    poids = malloc((np + 1) * sizeof *poids);
    seen = calloc(np + 1, 1);
    if (!poids || !seen) {
        err = fail("out of memory");
        goto out;
    }
    for (size_t i = 0; i < np; i++) {
        ost_value p = ost_item(plist, i);
        if (ost_instance_class(p) != s->product) bad_class++;
        poids[i] = ost_oid(c, p);
        if (slot_int(p, P_PRICE) < 0) { /* loads it */
            err = walk_fail(c, "a product does not load");
            goto out;
        }
    }
    qsort(poids, np, sizeof *poids, cmp_u64);
    w.products = np;
    progress_start(&bar, g_out.tty && !g_out.quiet, "walk", nb);
    for (size_t bi = 0; bi < nb && !err; bi++) {
        root = ost_conn_root(c); /* the cache may have been trimmed: look again */
        key = ost_str_c("customers");
        blist = root ? ost_root_get(c, key) : 0;
        ost_decref(key);
        ost_value b = blist ? ost_item(blist, bi) : 0;
        ost_value custs = b ? ost_instance_slot(b, B_CUSTOMERS) : 0;
        if (ost_typeof(custs) != OST_T_LIST) {
            err = walk_fail(c, "a bucket does not load");
            break;
        }
        if (ost_instance_class(b) != s->bucket) bad_class++;
        w.buckets++;
        for (size_t ci = 0; ci < ost_len(custs) && !err; ci++) {
            ost_value cu = ost_item(custs, ci);
            ost_value orders = ost_instance_slot(cu, C_ORDERS);
            if (ost_typeof(orders) != OST_T_LIST) {
                err = walk_fail(c, "a customer does not load");
                break;
            }
            if (ost_instance_class(cu) != s->customer) bad_class++;
            w.customers++;
            for (size_t oi = 0; oi < ost_len(orders) && !err; oi++) {
                ost_value o = ost_item(orders, oi);
                ost_value lines = ost_instance_slot(o, O_LINES);
                if (ost_typeof(lines) != OST_T_LIST) {
                    err = walk_fail(c, "an order does not load");
                    break;
                }
                if (ost_instance_class(o) != s->order) bad_class++;
                if (ost_instance_slot(o, O_CUSTOMER) != cu) bad_ref++; /* the same object */
                w.orders++;
                if (bi < HOT_BUCKETS) w.hot_orders++;
                int64_t sum = 0;
                for (size_t li = 0; li < ost_len(lines); li++) {
                    ost_value ln = ost_item(lines, li);
                    ost_value prod = ost_instance_slot(ln, L_PRODUCT);
                    if (!prod) {
                        err = walk_fail(c, "a line item does not load");
                        break;
                    }
                    if (ost_instance_class(ln) != s->line) bad_class++;
                    w.lines++;
                    sum += slot_int(ln, L_QUANTITY) * slot_int(ln, L_UNIT);
                    uint64_t po = ost_oid(c, prod);
                    uint64_t *hit = bsearch(&po, poids, np, sizeof *poids, cmp_u64);
                    if (!hit) bad_ref++;
                    else seen[hit - poids] = 1;
                }
                if (sum != slot_int(o, O_TOTAL)) bad_total++;
                w.cents += (uint64_t)sum;
            }
        }
        ost_abort(c); /* a transaction boundary: the cache trims itself */
        progress_update(&bar, bi + 1, "buckets");
    }
    progress_end(&bar);
    *secs = now_s() - t0;
    if (err) goto out;
    uint64_t reached = 0;
    for (size_t i = 0; i < np; i++) reached += seen[i];
    /* what the root says it holds */
    root = ost_conn_root(c);
    key = ost_str_c("counts");
    ost_value kd = root ? ost_root_get(c, key) : 0;
    ost_decref(key);
    struct {
        const char *name;
        uint64_t built, walked;
    } checks[] = {
        {"products", k->products, w.products},   {"buckets", k->buckets, w.buckets},
        {"customers", k->customers, w.customers}, {"orders", k->orders, w.orders},
        {"line_items", k->lines, w.lines},        {"total_cents", k->cents, w.cents},
    };
    for (size_t i = 0; i < NELEM(checks) && !err; i++) {
        int64_t stored = -1;
        ost_value v = kd ? ost_dict_get_c(kd, checks[i].name) : 0;
        if (v) ost_int_value(v, &stored);
        if (checks[i].walked != checks[i].built || (uint64_t)stored != checks[i].built)
            err = fail("walk: %s: built %llu, the root says %lld, the walk found %llu",
                       checks[i].name, (unsigned long long)checks[i].built, (long long)stored,
                       (unsigned long long)checks[i].walked);
    }
    if (!err && (bad_ref || bad_total || bad_class))
        err = fail("walk: %llu wrong references, %llu wrong order totals, %llu objects of the "
                   "wrong class",
                   (unsigned long long)bad_ref, (unsigned long long)bad_total,
                   (unsigned long long)bad_class);
    if (!err && w.hot_orders != k->hot_orders)
        err = fail("walk: the first %d buckets hold %llu orders, %llu expected", HOT_BUCKETS,
                   (unsigned long long)w.hot_orders, (unsigned long long)k->hot_orders);
    *objects = 1 + w.products + w.buckets + w.customers + w.orders + w.lines;
    if (!err)
        say("walk:    %s objects from the root in %.2f s: %s objects/s\n"
            "         %s customers, %s orders, %s line items, %s products (%s referenced), "
            "%s buckets: every count matches\n",
            fmt_count((char[32]){0}, 32, *objects), *secs,
            fmt_count((char[32]){0}, 32, (uint64_t)((double)*objects / *secs)),
            fmt_count((char[32]){0}, 32, w.customers), fmt_count((char[32]){0}, 32, w.orders),
            fmt_count((char[32]){0}, 32, w.lines), fmt_count((char[32]){0}, 32, w.products),
            fmt_count((char[32]){0}, 32, reached), fmt_count((char[32]){0}, 32, w.buckets));
out:
    free(poids);
    free(seen);
    ost_conn_close(c);
    return err;
}

/* ---- phase 3: concurrent commits --------------------------------------------------------- */

typedef struct {
    ost_store *st;
    const shop *s;
    int id;
    uint64_t commits, conflicts;
    int rc;
    char msg[600];
    uv_mutex_t *lock;
    uint64_t *done;    /* commits of all threads, for the progress bar */
    int *finished;     /* threads that are done (both under lock) */
} worker;

/* One commit: a new order with one line item, appended to a customer of
 * the first HOT_BUCKETS buckets. Two threads that pick the same customer
 * conflict; the loser aborts and tries again. */
static int one_order(ost_conn *c, const shop *s, rng *r, uint64_t number) {
    ost_value key = ost_str_c("customers");
    ost_value blist = ost_root_get(c, key);
    ost_decref(key);
    key = ost_str_c("products");
    ost_value plist = ost_root_get(c, key);
    ost_decref(key);
    if (!blist || !plist || !ost_len(blist) || !ost_len(plist)) return OST_ECORRUPT;
    size_t nb = ost_len(blist) < HOT_BUCKETS ? ost_len(blist) : HOT_BUCKETS;
    ost_value custs = ost_instance_slot(ost_item(blist, rnd_below(r, nb)), B_CUSTOMERS);
    if (!custs || !ost_len(custs)) return OST_ECORRUPT;
    ost_value cu = ost_item(custs, rnd_below(r, ost_len(custs)));
    ost_value orders = ost_instance_slot(cu, C_ORDERS);
    ost_value prod = ost_item(plist, rnd_below(r, ost_len(plist)));
    int64_t price = slot_int(prod, P_PRICE);
    if (ost_typeof(orders) != OST_T_LIST || price < 0) return OST_ECORRUPT;
    ost_value o = ost_instance_new(ost_incref(s->order));
    ost_value l = ost_instance_new(ost_incref(s->line));
    ost_value lines = ost_list_new(1);
    if (!o || !l || !lines) {
        ost_decref(o);
        ost_decref(l);
        ost_decref(lines);
        return OST_ENOMEM;
    }
    ost_instance_set_slot(l, L_PRODUCT, ost_incref(prod));
    ost_instance_set_slot(l, L_QUANTITY, ost_int(1));
    ost_instance_set_slot(l, L_UNIT, ost_int(price));
    ost_list_append(lines, l);
    ost_instance_set_slot(o, O_NUMBER, ost_int((int64_t)number));
    ost_instance_set_slot(o, O_CUSTOMER, ost_incref(cu));
    ost_instance_set_slot(o, O_PLACED, ost_str_c("2025-01-01"));
    ost_instance_set_slot(o, O_STATUS, ost_str_c("paid"));
    ost_instance_set_slot(o, O_LINES, lines);
    ost_instance_set_slot(o, O_TOTAL, ost_int(price));
    int rc = ost_list_append(orders, o);
    ost_changed(cu); /* a plain list inside its state changed */
    return rc ? rc : ost_commit(c);
}

static void worker_main(void *arg) {
    worker *w = arg;
    ost_conn *c;
    w->rc = ost_conn_open(w->st, &c);
    if (w->rc) {
        snprintf(w->msg, sizeof w->msg, "thread %d: connection: %s", w->id, ost_strerror(w->rc));
        return;
    }
    rng r = {0xD1B54A32D192ED03ULL * (uint64_t)(w->id + 1)};
    for (int i = 0; i < COMMITS_PER_THREAD; i++) {
        uint64_t number = 1000000000ULL * (uint64_t)(w->id + 1) + (uint64_t)i;
        int rc;
        while ((rc = one_order(c, w->s, &r, number)) == OST_ECONFLICT) {
            w->conflicts++;
            ost_abort(c);
        }
        if (rc) {
            w->rc = rc;
            snprintf(w->msg, sizeof w->msg, "thread %d, commit %d: %s: %s", w->id, i,
                     ost_strerror(rc), ost_conn_errmsg(c));
            ost_abort(c);
            break;
        }
        w->commits++;
        uv_mutex_lock(w->lock);
        (*w->done)++;
        uv_mutex_unlock(w->lock);
    }
    ost_conn_close(c);
    uv_mutex_lock(w->lock);
    (*w->finished)++;
    uv_mutex_unlock(w->lock);
}

static int concurrent(ost_store *st, const shop *s, const counts *k, double *secs,
                      uint64_t *conflicts) {
    worker ws[THREADS];
    uv_thread_t th[THREADS];
    uv_mutex_t lock;
    uint64_t done = 0;
    int finished = 0;
    if (uv_mutex_init(&lock)) return fail("cannot make a mutex");
    progress bar;
    progress_start(&bar, g_out.tty && !g_out.quiet, "commits", THREADS * COMMITS_PER_THREAD);
    double t0 = now_s();
    int started = 0;
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (worker){.st = st, .s = s, .id = i, .lock = &lock, .done = &done,
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
    progress_end(&bar);
    uv_mutex_destroy(&lock);
    if (started < THREADS) return fail("cannot start threads");
    *conflicts = 0;
    for (int i = 0; i < THREADS; i++) {
        if (ws[i].rc) return fail("commits: %s", ws[i].msg);
        *conflicts += ws[i].conflicts;
    }
    /* every commit is there: the hot buckets hold 800 more orders */
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) return fail("commits: %s", ost_strerror(rc));
    ost_value key = ost_str_c("customers");
    ost_value blist = ost_root_get(c, key);
    ost_decref(key);
    uint64_t hot = 0, mine = 0;
    for (size_t bi = 0; blist && bi < HOT_BUCKETS && bi < ost_len(blist); bi++) {
        ost_value custs = ost_instance_slot(ost_item(blist, bi), B_CUSTOMERS);
        for (size_t ci = 0; ci < ost_len(custs); ci++) {
            ost_value cu = ost_item(custs, ci);
            ost_value orders = ost_instance_slot(cu, C_ORDERS);
            for (size_t oi = 0; oi < ost_len(orders); oi++) {
                ost_value o = ost_item(orders, oi);
                hot++;
                if (slot_int(o, O_NUMBER) >= 1000000000 && ost_instance_slot(o, O_CUSTOMER) == cu &&
                    ost_len(ost_instance_slot(o, O_LINES)) == 1)
                    mine++;
            }
        }
    }
    ost_conn_close(c);
    uint64_t want = THREADS * COMMITS_PER_THREAD;
    if (hot != k->hot_orders + want || mine != want)
        return fail("commits: the first %d buckets hold %llu orders (%llu new), expected %llu "
                    "(%llu new)",
                    HOT_BUCKETS, (unsigned long long)hot, (unsigned long long)mine,
                    (unsigned long long)(k->hot_orders + want), (unsigned long long)want);
    return EXIT_OK;
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
    const char *objects_s = NULL, *quiet = NULL, *pos[1] = {"demo.ostore"};
    cli_opt opts[] = {{"--objects", true, &objects_s}, {"--quiet", false, &quiet}};
    int prc = parse_args(&cmd_demo, argc, argv, opts, 2, pos, 0, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    uint64_t target = 1000000;
    if (objects_s && (!parse_u64(objects_s, &target) || target < 1000 || target > 100000000))
        return bad_usage(&cmd_demo, "demo: --objects takes a number from 1000 to 100000000, not '%s'",
                         objects_s);
    const char *dir = pos[0];
    g_out.quiet = quiet != NULL;
    g_out.tty = isatty(1);
    double start = now_s();
    char a[32], b[32], c[32];
    say("ostore demo: a shop of %s objects in %s\n", fmt_count(a, sizeof a, target), dir);
    if (prepare_dir(dir)) return EXIT_FAIL;
    shop s;
    if (shop_init(&s)) {
        ost_registry_free(s.reg);
        return fail("out of memory");
    }
    say("classes: shop.Product, shop.Customer, shop.Order, shop.LineItem, shop.CustomerBucket "
        "(persistent, declared fields)\n");
    counts k;
    double twalk = 0, tconc = 0, tcheck = 0;
    uint64_t walked = 0, conflicts = 0, records = 0;
    int err = load(dir, &s, target, &k);
    ost_store *st = NULL;
    if (!err) {
        double t = now_s();
        err = open_shop_store(dir, &s, false, true, &st);
        if (!err) say("reopen:  %.3f s (read-write, group commit)\n", now_s() - t);
    }
    if (!err) err = walk(st, &s, &k, &walked, &twalk);
    if (!err) {
        err = concurrent(st, &s, &k, &tconc, &conflicts);
        if (!err)
            say("commits: %d commits from %d threads (each its own connection; group commit) in "
                "%.2f s: %s commits/s; %llu conflicts, each retried\n",
                THREADS * COMMITS_PER_THREAD, THREADS, tconc,
                fmt_count(a, sizeof a, (uint64_t)(THREADS * COMMITS_PER_THREAD / tconc)),
                (unsigned long long)conflicts);
    }
    if (!err) {
        progress bar;
        progress_start(&bar, g_out.tty && !g_out.quiet, "check", 1);
        progress_note(&bar, "reading and decoding every record...");
        double t = now_s();
        check_ud u = {0};
        int rc = ost_store_check(st, on_problem, &u, &records);
        tcheck = now_s() - t;
        progress_end(&bar);
        uint64_t want = 1 + k.objects + 2 * THREADS * COMMITS_PER_THREAD;
        if (rc) err = fail("check: %s", ost_store_errmsg(st));
        else if (records != want)
            err = fail("check: %llu records, %llu expected", (unsigned long long)records,
                       (unsigned long long)want);
        else
            say("check:   %s records in %.2f s (%s records/s): every record decodes, every "
                "reference resolves\n",
                fmt_count(a, sizeof a, records), tcheck,
                fmt_count(b, sizeof b, (uint64_t)((double)records / tcheck)));
    }
    if (!err) {
        ost_store_stats ss;
        ost_store_stat(st, &ss);
        say("store:   data.mdb %s on disk (records %s, map %s)\n",
            fmt_bytes(a, sizeof a, (double)file_size(dir, "data.mdb")),
            fmt_bytes(b, sizeof b, (double)ss.bytes), fmt_bytes(c, sizeof c, (double)ss.map_size));
        say("done in %.1f s. Look around: ostore info %s; ostore ls %s --limit 5; ostore cat "
            "%s 0\n",
            now_s() - start, dir, dir, dir);
    }
    ost_store_close(st);
    ost_registry_free(s.reg);
    return err;
}

const cli_cmd cmd_demo = {
    .name = "demo",
    .summary = "Build, walk, check and time a store of about a million objects.",
    .usage = "usage: ostore demo [DIR] [--objects N] [--quiet]\n",
    .help = "Makes a store in DIR (default ./demo.ostore) holding a shop: products,\n"
            "customers (in buckets of 100), their orders (1-7 each) and the orders'\n"
            "line items (1-5 each), which reference shared products; each order\n"
            "references its customer back. Then:\n"
            "  1. bulk-loads it with the loader (durable batch commits) and links the\n"
            "     buckets, the products and the expected counts into the root;\n"
            "  2. reopens the store and walks every object from the root, checking the\n"
            "     counts, the order totals and that shared objects are shared;\n"
            "  3. makes 800 small commits from 4 threads, each with its own connection,\n"
            "     through the group committer, retrying on conflicts;\n"
            "  4. checks the whole store (ost_store_check);\n"
            "and prints the rates: objects/s and MiB/s of the load, average record size,\n"
            "walk rate, commits/s, and the size on disk. On a terminal, long steps show a\n"
            "progress bar.\n"
            "\n  --objects N   about N objects (1000 to 100000000; default 1000000)\n"
            "  --quiet       print nothing unless something fails\n"
            "\nDIR is removed and made again if an earlier demo made it (it holds the\n"
            "file ostore-demo); an empty directory is used; anything else is refused.\n"
            "Exit status 1 when any count is off or a step fails.\n",
    .run = run_demo,
};
