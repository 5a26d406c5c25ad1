/* The data of `ostore demo`'s shop, apart from how it is stored: the
 * random number generator, its seeds, the names, and the choice of every
 * field's value, plus the phases' counts and the measurements both sides
 * print. Two programs include it: tools/cmd_demo.c (the shop as ostore
 * objects) and bench/bench_demo_sqlite.c (the same shop as SQLite rows),
 * so that both hold identical data and answer identical queries.
 *
 * How the shop is built, in generator order (each step draws from one
 * demo_rng seeded with DEMO_SEED_LOAD, in exactly this order):
 *
 *   1. demo_nproducts(target) products, i = 0, 1, ...: demo_product_make.
 *   2. Customers id = 1, 2, ... while fewer than target objects were made
 *      (a product, a customer, an order, a line item: one object each):
 *      demo_customer_make, then demo_norders orders, each: demo_nlines
 *      lines (drawn before the order's lines), for each line
 *      demo_line_make, then demo_order_tail_make. Orders are numbered 1,
 *      2, ... across all customers; a line item's unit price is its
 *      product's price, an order's total the sum of quantity * unit.
 *
 * Everything here is static inline and holds no state: include it in one
 * file of each program. */
#ifndef OSTORE_DEMO_GEN_H
#define OSTORE_DEMO_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* ---- counts and seeds ---------------------------------------------------------- */

#define DEMO_THREADS 4
#define DEMO_COMMITS_PER_THREAD 200
#define DEMO_LOOKUPS 100000      /* random customers looked up by id */
#define DEMO_RANGE_QUERIES 10000 /* random customers whose orders are read by a range */
#define DEMO_TXN_READS 10000     /* reads per transaction */
#define DEMO_BATCHES 20          /* the load's durable batches */

#define DEMO_SEED_LOAD 0x9E3779B97F4A7C15ULL
#define DEMO_SEED_LOOKUP 0x2545F4914F6CDD1DULL
#define DEMO_SEED_RANGE 0xBF58476D1CE4E5B9ULL

#define DEMO_NELEM(a) (sizeof(a) / sizeof *(a))

/* ---- the generator ------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} demo_rng;

/* The next number of r (xorshift64*). */
static inline uint64_t demo_rnd(demo_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}

/* A number from 0 to n - 1 (n > 0). */
static inline uint64_t demo_rnd_below(demo_rng *r, uint64_t n) { return (demo_rnd(r) >> 11) % n; }

/* The seed of the commit phase's thread t (0 to DEMO_THREADS - 1). */
static inline uint64_t demo_seed_worker(int t) { return 0xD1B54A32D192ED03ULL * (uint64_t)(t + 1); }

/* The number of thread t's i-th new order in the commit phase: no built
 * order has it, and no other thread's. */
static inline int64_t demo_new_number(int t, int i) { return 1000000000LL * (t + 1) + i; }

static const char *const demo_first_names[] = {
    "Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Margaret", "Dennis",
    "Ken", "Radia", "Leslie", "Niklaus", "Sophie", "Tony", "Hedy", "Claude", "Katherine", "Guido",
    "Anita", "Bjarne", "Joan", "Linus", "Carol", "Brian", "Shafi", "Butler", "Lynn", "Robin"};
static const char *const demo_last_names[] = {
    "Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy",
    "Hamilton", "Ritchie", "Thompson", "Perlman", "Lamport", "Wirth", "Wilson", "Hoare",
    "Lamarr", "Shannon", "Johnson", "van Rossum", "Borg", "Stroustrup", "Clarke", "Torvalds",
    "Shaw", "Kernighan", "Goldwasser", "Lampson", "Conway", "Milner"};
static const char *const demo_categories[] = {"tools", "garden", "kitchen", "books", "toys",
                                              "office", "sports", "music"};
static const char *const demo_colours[] = {"red", "blue", "green", "black", "white", "steel"};
static const char *const demo_statuses[] = {"paid", "shipped", "delivered", "returned"};

/* How many products a shop of about target objects has. */
static inline uint64_t demo_nproducts(uint64_t target) {
    uint64_t np = target / 1000;
    if (np < 10) np = 10;
    if (np > 100000) np = 100000;
    return np;
}

/* Product i's sku ("SKU-000042") into buf (cap >= 16). */
static inline void demo_sku(char *buf, size_t cap, uint64_t i) {
    snprintf(buf, cap, "SKU-%06llu", (unsigned long long)i);
}

typedef struct {
    char sku[32];
    char name[96];
    const char *category; /* static */
    int64_t price_cents;
} demo_product;

/* Product i's fields (draws 2 numbers). */
static inline void demo_product_make(demo_rng *r, uint64_t i, demo_product *p) {
    demo_sku(p->sku, sizeof p->sku, i);
    p->category = demo_categories[i % DEMO_NELEM(demo_categories)];
    const char *colour = demo_colours[demo_rnd_below(r, DEMO_NELEM(demo_colours))];
    snprintf(p->name, sizeof p->name, "%s widget %llu (%s)", p->category, (unsigned long long)i,
             colour);
    p->price_cents = (int64_t)(99 + demo_rnd_below(r, 20000));
}

typedef struct {
    char name[128];
    char email[128];
    int64_t since;
} demo_customer;

/* Customer number's fields (draws 3 numbers). */
static inline void demo_customer_make(demo_rng *r, uint64_t number, demo_customer *c) {
    const char *fn = demo_first_names[demo_rnd_below(r, DEMO_NELEM(demo_first_names))];
    const char *ln = demo_last_names[demo_rnd_below(r, DEMO_NELEM(demo_last_names))];
    snprintf(c->name, sizeof c->name, "%s %s", fn, ln);
    snprintf(c->email, sizeof c->email, "%s.%s.%llu@example.com", fn, ln,
             (unsigned long long)number);
    for (char *p = c->email; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        else if (*p == ' ') *p = '-';
    c->since = 2005 + (int64_t)demo_rnd_below(r, 20);
}

/* How many orders a customer has (1 to 7), and lines an order (1 to 5). */
static inline int demo_norders(demo_rng *r) { return 1 + (int)demo_rnd_below(r, 7); }
static inline int demo_nlines(demo_rng *r) { return 1 + (int)demo_rnd_below(r, 5); }

/* A line item of an order: the index of its product among np (popular
 * ones, low indexes, more often) and its quantity (draws 3 numbers). */
static inline uint64_t demo_line_make(demo_rng *r, uint64_t np, int64_t *qty) {
    uint64_t a = demo_rnd_below(r, np);
    uint64_t b = demo_rnd_below(r, np);
    *qty = 1 + (int64_t)demo_rnd_below(r, 5);
    return a < b ? a : b;
}

typedef struct {
    char placed[48];    /* "2019-07-23" */
    const char *status; /* static */
} demo_order_tail;

/* The date and status of an order, after its lines (draws 4 numbers); with
 * r NULL, those of the commit phase's orders ("2025-01-01", "paid"). */
static inline void demo_order_tail_make(demo_rng *r, demo_order_tail *t) {
    if (!r) {
        snprintf(t->placed, sizeof t->placed, "2025-01-01");
        t->status = "paid";
        return;
    }
    /* the draws in this order: day, month, year (the order the demo has
     * always drawn them in) */
    int day = 1 + (int)demo_rnd_below(r, 28);
    int month = 1 + (int)demo_rnd_below(r, 12);
    int year = 15 + (int)demo_rnd_below(r, 10);
    snprintf(t->placed, sizeof t->placed, "20%02d-%02d-%02d", year, month, day);
    t->status = demo_statuses[demo_rnd_below(r, DEMO_NELEM(demo_statuses))];
}

/* ---- measurements ---------------------------------------------------------------- */

/* The phases both programs time, in the order they run. */
enum { DEMO_PH_LOAD, DEMO_PH_WALK, DEMO_PH_LOOKUP, DEMO_PH_RANGE, DEMO_PH_COMMIT, DEMO_PH_CHECK,
       DEMO_PH_COUNT };
static const char *const demo_phase_names[DEMO_PH_COUNT] = {"load",  "walk",   "lookup",
                                                           "range", "commit", "check"};

/* The process's CPU seconds so far, user plus system, all threads. */
static inline double demo_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* A field of /proc/self/status in bytes ("RssAnon", "VmHWM"), or 0. */
static inline uint64_t demo_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(field);
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            sscanf(line + n + 1, "%llu", &kb);
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* What a run measured: per phase the wall and CPU seconds and how many
 * operations (objects, lookups, queries, commits, records); the largest
 * RssAnon seen at the end of a phase; the files' bytes; what was built. */
typedef struct {
    double wall[DEMO_PH_COUNT], cpu[DEMO_PH_COUNT];
    uint64_t ops[DEMO_PH_COUNT];
    uint64_t rss_anon_peak; /* the largest of the samples at each phase's end */
    uint64_t file_bytes;
    /* what the load built, so that a driver can see both sides built the same */
    uint64_t products, customers, orders, lines, cents;
} demo_stats;

/* Wall-clock seconds from an arbitrary start (CLOCK_MONOTONIC). */
static inline double demo_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A phase's start: demo_phase_begin before the phase, demo_phase_end
 * after it, which sets the phase's figures in a demo_stats. */
typedef struct {
    double wall0, cpu0;
} demo_clock;

static inline void demo_phase_begin(demo_clock *c) {
    c->cpu0 = demo_cpu_s();
    c->wall0 = demo_wall_s();
}

/* Sets phase ph of st: the seconds since c began, ops operations; and
 * samples RssAnon into st->rss_anon_peak. */
static inline void demo_phase_end(demo_stats *st, int ph, const demo_clock *c, uint64_t ops) {
    st->wall[ph] = demo_wall_s() - c->wall0;
    st->cpu[ph] = demo_cpu_s() - c->cpu0;
    st->ops[ph] = ops;
    uint64_t a = demo_status_bytes("RssAnon");
    if (a > st->rss_anon_peak) st->rss_anon_peak = a;
}

/* Writes st as one JSON object and a newline to f (which stays open and
 * the caller's) and flushes it. engine names the side ("ostore",
 * "sqlite"), objects the objects loaded. Returns 0, or -1 when f reports
 * an error (errno set). */
static inline int demo_stats_write(const demo_stats *st, FILE *f, const char *engine,
                                   uint64_t objects) {
    fprintf(f, "{\"engine\": \"%s\", \"objects\": %llu, \"phases\": {", engine,
            (unsigned long long)objects);
    for (int i = 0; i < DEMO_PH_COUNT; i++)
        fprintf(f, "%s\"%s\": {\"wall\": %.6f, \"cpu\": %.6f, \"ops\": %llu}", i ? ", " : "",
                demo_phase_names[i], st->wall[i], st->cpu[i], (unsigned long long)st->ops[i]);
    fprintf(f,
            "}, \"built\": {\"products\": %llu, \"customers\": %llu, \"orders\": %llu, "
            "\"line_items\": %llu, \"total_cents\": %llu}",
            (unsigned long long)st->products, (unsigned long long)st->customers,
            (unsigned long long)st->orders, (unsigned long long)st->lines,
            (unsigned long long)st->cents);
    fprintf(f, ", \"rss_anon_peak\": %llu, \"vm_hwm\": %llu, \"file_bytes\": %llu}\n",
            (unsigned long long)st->rss_anon_peak,
            (unsigned long long)demo_status_bytes("VmHWM"), (unsigned long long)st->file_bytes);
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

#endif
