/* The PostgreSQL crash harness (meson test pg-crash): every commit ostore
 * acknowledged survives the server being killed.
 *
 * Run through tests/pg/pgserver.sh with PGSERVER_FSYNC=on (fsync and
 * synchronous_commit on, as a production server):
 *
 *     PGSERVER_FSYNC=on tests/pg/pgserver.sh build/tests/crash_pg
 *
 * It forks two writer processes and one bulk loader process, all on one
 * store in the server's database, then kills the server again and again
 * while they run:
 *
 * - each writer opens the store with group_commit and runs WRITER_THREADS
 *   threads; each thread commits, through ost_txn_run, one-key
 *   transactions: a new object Item(n = key) set as m[key] in the int map
 *   "m"; every 10th also increments the shared counter object's n
 *   (conflicts are retried by ost_txn_run);
 * - the loader adds map entries m[key] = key through ost_loader_map_set
 *   in batches of 200, a loader of 600 entries at a time, 1 s apart;
 * - an acknowledgment is appended to the process' own log file (write(2)
 *   before the next operation: the writer processes are never killed, so
 *   the page cache keeps it) only once ost_txn_run returned 0 ("k KEY",
 *   and "c" for an increment), or once the loader's progress callback
 *   reported the batch (the keys of every batch reported so far); a
 *   failed commit (the server gone) is simply tried again with new keys
 *   once it is back;
 * - the harness (this process) kills the server every 1 to 2 s
 *   (tests/pg/pgkill.h: the postmaster and every backend SIGKILLed, then
 *   started again, crash recovery and all), and every third round instead
 *   terminates every backend of the database (pg_terminate_backend);
 * - after every restart it checks every acknowledgment logged so far:
 *   each acknowledged key is in the map (one cursor over the map), the
 *   object of each writer key acknowledged since the last check has n ==
 *   key, and the counter is at least the acknowledged increments.
 *
 * It fails (exit 1) at the first check that misses an acknowledgment,
 * printing what is missing. Exit 77 (skip) without pgserver.sh.
 *
 * Environment: OST_CRASH_PG_KILLS (default 10, the CI run: 65 s measured
 * in a normal build); OST_CRASH_PG_LONG=1 for the long mode (60 kills:
 * 14 minutes measured, the checks slowing as the map grows);
 * OST_CRASH_PG_KILLS=0 with OST_CRASH_PG_SECONDS=N measures instead: N
 * seconds without kills, then prints commits/s (the writers' transactions
 * and the loader's entries). */

#include <fcntl.h>
#include <ostore.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pgkill.h"

#define WRITERS 2
#define WRITER_THREADS 4
#define LOADER_BATCH 200
#define LOADER_ENTRIES 600
#define LOADER_PAUSE_MS 1000 /* between loaders: the map stays small enough to check in a second */
#define KEY_SPAN 1000000000LL        /* keys of one writer thread */
#define LOADER_BASE 900000000000000LL /* the loader's keys, from here */

static const char *g_addr;
static char g_logdir[256];
static ost_registry *g_reg;
static volatile sig_atomic_t g_stop;

static double now_s(void) {
    struct timeval t;
    gettimeofday(&t, NULL);
    return t.tv_sec + t.tv_usec / 1e6;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "crash_pg[%ld]: %s: %s\n", (long)getpid(), what, why ? why : "");
    exit(2);
}

static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static ost_store *open_store(bool create, bool group) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.registry = g_reg;
    o.group_commit = group;
    ost_store *st = ost_store_new();
    if (!st) die("ost_store_new", "no memory");
    int rc = ost_store_open(st, g_addr, &o);
    if (rc) die("ost_store_open", ost_store_errmsg(st));
    return st;
}

static ost_value g_item;

static ost_value new_item(int64_t n) {
    ost_value it = ost_instance_new(ost_incref(g_item));
    ost_instance_set_slot(it, 0, ost_int(n));
    return it;
}

/* Appends line to the log file fd: the acknowledgment. */
static void ack(int fd, const char *line) {
    size_t n = strlen(line);
    if (write(fd, line, n) != (ssize_t)n) die("writing an acknowledgment", strerror(errno));
}

/* ---- the writers ------------------------------------------------------------------ */

typedef struct {
    ost_store *st;
    int fd;
    int id;
    int64_t key;
    bool incr;
    atomic_llong *done;
} wthread;

static int one_txn(void *ud, ost_conn *c) {
    wthread *w = ud;
    ost_value m = ost_root_get_c(c, "m");
    if (!m) return OST_EIO; /* the root could not be read: the server is gone */
    int rc = ost_map_set(c, m, ost_int(w->key), new_item(w->key));
    if (rc || !w->incr) return rc;
    ost_value ctr = ost_root_get_c(c, "counter");
    if (!ctr) return OST_EIO;
    ost_value v;
    int64_t n;
    if ((rc = ost_instance_getattr_ex(ctr, "n", &v))) return rc;
    if (ost_int_value(v, &n)) return OST_ECORRUPT;
    if ((rc = ost_instance_set_slot(ctr, 0, ost_int(n + 1)))) return rc;
    ost_changed(ctr);
    return 0;
}

static void *writer_thread(void *arg) {
    wthread *w = arg;
    ost_conn *c;
    if (ost_conn_open(w->st, &c)) die("ost_conn_open", ost_store_errmsg(w->st));
    int64_t base = (int64_t)(w->id + 1) * KEY_SPAN, seq = 0;
    char line[64];
    while (!g_stop) {
        w->key = base + seq++;
        w->incr = seq % 10 == 0;
        int rc = ost_txn_run(c, 1000, one_txn, w, NULL);
        if (rc) { /* not acknowledged: the server is away, try again soon */
            ost_abort(c);
            pgkill_sleep_ms(20);
            continue;
        }
        snprintf(line, sizeof line, "k %lld\n%s", (long long)w->key, w->incr ? "c\n" : "");
        ack(w->fd, line);
        atomic_fetch_add(w->done, 1);
    }
    ost_conn_close(c);
    return NULL;
}

static int run_writer(int id, int fd) {
    ost_store *st = open_store(false, true);
    atomic_llong done = 0;
    wthread w[WRITER_THREADS];
    pthread_t t[WRITER_THREADS];
    for (int i = 0; i < WRITER_THREADS; i++) {
        w[i] = (wthread){st, fd, id * WRITER_THREADS + i, 0, false, &done};
        pthread_create(&t[i], NULL, writer_thread, &w[i]);
    }
    for (int i = 0; i < WRITER_THREADS; i++) pthread_join(t[i], NULL);
    ost_store_close(st);
    printf("writer %d: %lld transactions acknowledged\n", id, (long long)done);
    return 0;
}

/* ---- the loader -------------------------------------------------------------------- */

typedef struct {
    int fd;
    int64_t base;  /* the first key of the current loader */
    int64_t acked; /* entries of it acknowledged */
    long long total;
} lstate;

/* The progress callback: the first `objects` entries of this loader (one
 * object per entry: the values are ints) are stored. */
static void progress(void *ud, uint64_t objects, uint64_t bytes) {
    (void)bytes;
    lstate *L = ud;
    char line[64];
    for (; L->acked < (int64_t)objects; L->acked++) {
        snprintf(line, sizeof line, "k %lld\n", (long long)(L->base + L->acked));
        ack(L->fd, line);
        L->total++;
    }
}

static int run_loader(int fd) {
    ost_store *st = open_store(false, true);
    ost_conn *c;
    if (ost_conn_open(st, &c)) die("ost_conn_open", ost_store_errmsg(st));
    lstate L = {fd, LOADER_BASE, 0, 0};
    int64_t next = LOADER_BASE;
    while (!g_stop) {
        ost_abort(c);
        ost_value m = ost_root_get_c(c, "m");
        if (!m) {
            pgkill_sleep_ms(50);
            continue;
        }
        m = ost_incref(m);
        ost_loader_options o;
        ost_loader_options_init(&o);
        o.batch_objects = LOADER_BATCH;
        o.progress = progress;
        o.ud = &L;
        L.base = next;
        L.acked = 0;
        ost_loader *l;
        if (ost_loader_open(c, &o, &l)) {
            ost_decref(m);
            pgkill_sleep_ms(50);
            continue;
        }
        int rc = 0;
        for (int64_t i = 0; i < LOADER_ENTRIES && !rc && !g_stop; i++)
            rc = ost_loader_map_set(l, m, ost_int(next + i), ost_int(next + i));
        next += LOADER_ENTRIES; /* fresh keys for the next loader, whatever happened */
        (void)ost_loader_close(l);
        ost_decref(m);
        pgkill_sleep_ms(LOADER_PAUSE_MS);
    }
    ost_conn_close(c);
    ost_store_close(st);
    printf("loader: %lld entries acknowledged\n", L.total);
    return 0;
}

/* ---- the checks -------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int64_t *keys;
    size_t n, cap;
    long long incr;
    off_t seen[WRITERS + 1]; /* bytes of each log already checked for objects */
} acks;

/* Reads every acknowledgment logged so far; the writer keys logged since
 * the last check go to fresh[] (their objects are checked). */
static void read_acks(acks *A, int64_t **fresh, size_t *nfresh) {
    A->n = 0;
    A->incr = 0;
    *nfresh = 0;
    size_t fcap = 0;
    for (int w = 0; w <= WRITERS; w++) {
        char path[300];
        snprintf(path, sizeof path, "%s/ack-%d", g_logdir, w);
        FILE *f = fopen(path, "r");
        if (!f) die("reading a log", path);
        char line[64];
        off_t at = 0;
        while (fgets(line, sizeof line, f)) {
            size_t len = strlen(line);
            if (!len || line[len - 1] != '\n') break; /* being written */
            at += (off_t)len;
            if (line[0] == 'c') {
                A->incr++;
                continue;
            }
            long long k = atoll(line + 2);
            if (A->n == A->cap) {
                A->cap = A->cap ? 2 * A->cap : 65536;
                A->keys = realloc(A->keys, A->cap * sizeof *A->keys);
            }
            A->keys[A->n++] = k;
            if (w < WRITERS && at > A->seen[w]) {
                if (*nfresh == fcap) {
                    fcap = fcap ? 2 * fcap : 4096;
                    *fresh = realloc(*fresh, fcap * sizeof **fresh);
                }
                (*fresh)[(*nfresh)++] = k;
            }
        }
        if (w < WRITERS) A->seen[w] = at;
        fclose(f);
    }
}

/* Checks every acknowledgment against the store; prints what is missing.
 * 0 when all are there, 1 when some are missing, -1 when the store could
 * not be read (the server away: try again). */
static int check(ost_conn *c, acks *A, int round) {
    int64_t *fresh = NULL;
    size_t nfresh;
    read_acks(A, &fresh, &nfresh);
    ost_abort(c); /* a new snapshot: it sees every commit before now */
    ost_value m = ost_root_get_c(c, "m"), ctr = ost_root_get_c(c, "counter");
    if (!m || !ctr) {
        free(fresh);
        return -1;
    }
    int64_t *have = NULL;
    size_t nh = 0, hcap = 0;
    ost_map_cursor *cur;
    if (ost_map_cursor_open(c, m, NULL, &cur)) {
        free(fresh);
        return -1;
    }
    ost_value k;
    int rc;
    while ((rc = ost_map_cursor_next(cur, &k, NULL)) == 0) {
        if (nh == hcap) {
            hcap = hcap ? 2 * hcap : 65536;
            have = realloc(have, hcap * sizeof *have);
        }
        int64_t key;
        ost_int_value(k, &key);
        have[nh++] = key;
    }
    ost_map_cursor_close(cur);
    if (rc != OST_ENOTFOUND) {
        free(have);
        free(fresh);
        return -1;
    }
    long missing = 0;
    for (size_t i = 0; i < A->n; i++)
        if (!bsearch(&A->keys[i], have, nh, sizeof *have, cmp_i64)) {
            if (missing < 10)
                fprintf(stderr, "round %d: acknowledged key %lld is missing (%s)\n", round,
                        (long long)A->keys[i],
                        A->keys[i] >= LOADER_BASE ? "the loader's" : "a writer's");
            missing++;
        }
    /* the objects of the writer keys acknowledged since the last check */
    long bad = 0;
    for (size_t i = 0; i < nfresh; i++) {
        if (!bsearch(&fresh[i], have, nh, sizeof *have, cmp_i64)) continue; /* counted */
        ost_value key = ost_int(fresh[i]), v, n;
        int64_t got;
        rc = ost_map_get(c, m, key, &v);
        if (!rc) rc = ost_instance_getattr_ex(v, "n", &n);
        if (rc == OST_EIO) {
            free(have);
            free(fresh);
            return -1;
        }
        if (rc || ost_int_value(n, &got) || got != fresh[i]) {
            if (bad < 10)
                fprintf(stderr, "round %d: the object of acknowledged key %lld is wrong: %s\n",
                        round, (long long)fresh[i], rc ? ost_err_name(rc) : "n differs");
            bad++;
        }
    }
    ost_value cn;
    int64_t counter = -1;
    if (ost_instance_getattr_ex(ctr, "n", &cn) || ost_int_value(cn, &counter)) {
        free(have);
        free(fresh);
        return -1;
    }
    bool low = counter < A->incr;
    if (low)
        fprintf(stderr, "round %d: the counter holds %lld, %lld increments were acknowledged\n",
                round, (long long)counter, A->incr);
    printf("round %d: %zu acknowledged entries (%zu objects new) all checked: %ld missing, %ld "
           "wrong objects; counter %lld >= %lld acknowledged increments: %s\n",
           round, A->n, nfresh, missing, bad, (long long)counter, A->incr, low ? "NO" : "yes");
    fflush(stdout);
    free(have);
    free(fresh);
    ost_abort(c);
    return missing || bad || low ? 1 : 0;
}

/* ---- the harness ------------------------------------------------------------------- */

static pid_t spawn(int who) {
    char path[300];
    snprintf(path, sizeof path, "%s/ack-%d", g_logdir, who);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
    if (fd < 0) die("creating a log", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGTERM, on_term);
        exit(who < WRITERS ? run_writer(who, fd) : run_loader(fd));
    }
    close(fd);
    return pid;
}

int main(void) {
    g_addr = getenv("OST_TEST_PG");
    const char *admin = getenv("OST_TEST_PG_ADMIN");
    char data[600];
    if (!g_addr || !admin || pgkill_datadir(data, sizeof data)) {
        fprintf(stderr, "crash_pg: run it through tests/pg/pgserver.sh\n");
        return 77;
    }
    const char *e = getenv("OST_CRASH_PG_KILLS");
    int kills = e ? atoi(e) : getenv("OST_CRASH_PG_LONG") ? 60 : 10;
    e = getenv("OST_CRASH_PG_SECONDS");
    double measure = e ? atof(e) : 5;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pgkill_adopt()) return 2;
    snprintf(g_logdir, sizeof g_logdir, "/tmp/ostore-crashpg-XXXXXX");
    if (!mkdtemp(g_logdir)) die("mkdtemp", strerror(errno));

    g_reg = ost_registry_new();
    static const char *const fields[] = {"n"};
    ost_class_def def = {.module = "crash", .name = "Item", .fields = fields, .nfields = 1,
                         .persistent = true};
    if (ost_registry_add(g_reg, &def, &g_item)) die("ost_registry_add", "");
    /* the store: the map and the counter (closed before the fork) */
    ost_store *st = open_store(true, false);
    ost_conn *c;
    if (ost_conn_open(st, &c)) die("ost_conn_open", ost_store_errmsg(st));
    ost_value m;
    if (ost_map_new(c, "int", &m) || ost_root_set_c(c, "m", ost_incref(m)) || /* m is borrowed */
        ost_root_set_c(c, "counter", new_item(0)) || ost_commit(c))
        die("making the store", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(st);

    pid_t kids[WRITERS + 1];
    for (int w = 0; w <= WRITERS; w++) kids[w] = spawn(w);
    st = open_store(false, false);
    if (ost_conn_open(st, &c)) die("ost_conn_open", ost_store_errmsg(st));
    acks A = {0};
    int failed = 0, round = 0, nkill = 0, nterm = 0;
    unsigned seed = (unsigned)time(NULL);
    double t0 = now_s();
    if (kills == 0) { /* measure */
        pgkill_sleep_ms((long)(measure * 1000));
    }
    while (nkill < kills && !failed) {
        pgkill_sleep_ms(1000 + rand_r(&seed) % 1000);
        round++;
        if (round % 3 == 0) {
            int n = pgkill_terminate_backends(admin, "ostore");
            printf("round %d: pg_terminate_backend: %d backends\n", round, n);
            nterm++;
        } else {
            double tk = now_s();
            int n = pgkill_server(data);
            if (n < 0 || pgkill_start()) die("killing and starting the server", "");
            printf("round %d: the restart took %.2f s\n", round, now_s() - tk);
            nkill++;
            printf("round %d: kill %d: %d server processes killed, server started again\n", round,
                   nkill, n);
        }
        double tc = now_s();
        int rc;
        for (int t = 0; (rc = check(c, &A, round)) < 0 && t < 50; t++) pgkill_sleep_ms(100);
        if (rc < 0) die("checking", ost_conn_errmsg(c));
        printf("round %d: at %.1f s, the check took %.2f s\n", round, now_s() - t0, now_s() - tc);
        failed = rc;
    }
    double took = now_s() - t0;
    for (int w = 0; w <= WRITERS; w++) kill(kids[w], SIGTERM);
    int bad_exit = 0;
    for (int w = 0; w <= WRITERS; w++) {
        int status;
        waitpid(kids[w], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) bad_exit = 1;
    }
    if (!failed) {
        int rc;
        for (int t = 0; (rc = check(c, &A, round + 1)) < 0 && t < 50; t++) pgkill_sleep_ms(100);
        failed = rc != 0;
    }
    if (kills == 0) {
        long long writer = 0, loader = 0;
        for (size_t i = 0; i < A.n; i++) A.keys[i] >= LOADER_BASE ? loader++ : writer++;
        printf("measured over %.1f s: %.0f writer commits/s (%d processes x %d threads), %.0f "
               "loader entries/s\n",
               took, writer / took, WRITERS, WRITER_THREADS, loader / took);
    } else
        printf("%d server kills, %d pg_terminate_backend rounds in %.1f s; %zu acknowledged "
               "entries, %lld increments: %s\n",
               nkill, nterm, took, A.n, A.incr, failed ? "ACKNOWLEDGED WRITES LOST" : "none lost");
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(g_reg);
    free(A.keys);
    pgkill_stop(data);
    if (!failed) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_logdir);
        (void)system(cmd);
    } else
        fprintf(stderr, "the logs are kept in %s\n", g_logdir);
    return failed ? 1 : bad_exit ? 2 : 0;
}
