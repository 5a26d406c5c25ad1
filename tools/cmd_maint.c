/* ostore CLI: check and pack. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- check ------------------------------------------------------------------- */

typedef struct {
    uint64_t problems;
    uint64_t last_holder; /* to count objects with problems */
    uint64_t holders;
    uint64_t page_problems; /* of the page walk: no oid */
} check_out;

static void note_holder(check_out *o, uint64_t oid) {
    if (o->problems == 0 || oid != o->last_holder) o->holders++;
    o->last_holder = oid;
    o->problems++;
}

static void report(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    (void)missing;
    (void)err;
    check_out *o = ud;
    if (oid == UINT64_MAX && !missing) o->page_problems++;
    note_holder(o, oid);
    printf("problem: %s\n", msg);
}

/* Reachability from the root over the references of the records, from
 * one read of the records in oid order: each record's references are kept
 * as it goes by (a record's place among the oids present, where its
 * references start in one array, and the references themselves), then
 * followed in memory with a flag per place and an explicit stack. A
 * record is never read again by its oid: on a server that was a round
 * trip per reachable object (on PostgreSQL 200,000 objects took 11 s
 * against the check's 0.4 s). Places are sized by the records themselves,
 * never by meta.next_oid, which damage can make anything. A map's entries
 * are read when the map is reached. */
typedef struct {
    uint64_t *oids; /* the oids of the records, ascending */
    size_t *first;  /* per place: where its references start in refs;
                     * first[n] is nrefs */
    size_t n, capn, capfirst;
    uint64_t *refs; /* the oids the records reference, record after record */
    size_t nrefs, caprefs;
    uint8_t *is_map;  /* a bit per place: the record of an OrderedMap */
    size_t capmap;    /* bytes of is_map */
    uint8_t *reached; /* a bit per place */
    size_t *stack;    /* places in oids */
    size_t len, cap;
    uint64_t entries; /* map entries read while following */
    bool oom;
} reach_ctx;

/* Grows *p (of *cap elements of size sz) to hold at least n; false when
 * out of memory (c->oom set). */
static bool grow(reach_ctx *c, void **p, size_t *cap, size_t n, size_t sz) {
    if (n <= *cap) return true;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < n) ncap *= 2;
    void *q = ncap <= SIZE_MAX / sz ? realloc(*p, ncap * sz) : NULL;
    if (!q) {
        c->oom = true;
        return false;
    }
    *p = q;
    *cap = ncap;
    return true;
}

/* The place of oid among the records, or -1 when it has no record. Oids
 * are distinct and ascending, so oids[i] >= i: when the oids are dense
 * (no gaps below oid), oid is its own place. */
static int64_t oid_place(const reach_ctx *c, uint64_t oid) {
    if (oid < c->n && c->oids[oid] == oid) return (int64_t)oid;
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->oids[mid] < oid) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n && c->oids[lo] == oid ? (int64_t)lo : -1;
}

/* raw_scan_refs' callback while reading: one reference of the record
 * last placed. */
static void keep_ref(void *ud, uint64_t oid) {
    reach_ctx *c = ud;
    if (c->oom || !grow(c, (void **)&c->refs, &c->caprefs, c->nrefs + 1, sizeof *c->refs)) return;
    c->refs[c->nrefs++] = oid;
}

static void reach_ref(void *ud, uint64_t oid) {
    reach_ctx *c = ud;
    int64_t i = oid_place(c, oid);
    if (i < 0 || (c->reached[i / 8] >> (i % 8) & 1)) return; /* no record, or seen */
    c->reached[i / 8] |= (uint8_t)(1u << (i % 8));
    if (!grow(c, (void **)&c->stack, &c->cap, c->len + 1, sizeof *c->stack)) return;
    c->stack[c->len++] = (size_t)i;
}

/* A map reaches what its entries' values reference. */
static int reach_entries(raw_txn *t, uint64_t map, reach_ctx *c) {
    raw_ents *ec;
    if (raw_ents_open(t, map, NULL, 0, &ec)) return EXIT_FAIL;
    raw_ents_skip_damaged(ec);
    raw_ent e;
    int k;
    while ((k = raw_ents_next(ec, &e)) > 0) {
        c->entries++;
        raw_scan_pickle_refs(e.val, e.vlen, reach_ref, c); /* a bad value: check reports it */
    }
    raw_ents_close(ec);
    return k < 0 ? EXIT_FAIL : EXIT_OK;
}

/* Counts the records reachable from the root and checks the counters of
 * meta against the records (an oid at or past next_oid would be given to a
 * new object and overwritten; a serial past last_serial breaks conflict
 * detection), in one read of the records (*records gets their count) and
 * of the entries of the maps reached (c->entries). Returns EXIT_OK or
 * EXIT_FAIL (message printed). */
static int reach(const char *db, raw_txn *t, check_out *o, reach_ctx *c, uint64_t *reachable,
                 uint64_t *records) {
    ost_snap_stats si;
    if (ost_snap_stat(raw_snap(t), &si)) return fail("%s: damaged meta (counters)", shown(db));
    uint64_t next_oid = si.next_oid, last = si.last_serial, next_class = si.next_class;
    /* counters past what a store can hold wrap when handed out */
    if (next_oid > OST_OID_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_oid %llu is past 2^63, the largest a store has (the next "
               "new object's oid would wrap)\n",
               (unsigned long long)next_oid);
    }
    if (last >= OST_SERIAL_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta last_serial %llu is past 2^63 - 1, the largest a store has\n",
               (unsigned long long)last);
    }
    if (next_class == 0 || next_class > OST_CLASS_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_class %llu is not a 32-bit class id from 1 (the next class "
               "would get a wrong id)\n",
               (unsigned long long)next_class);
    }
    raw_iter *it;
    int rc = raw_iter_open(t, &it);
    if (!rc) {
        raw_rec r;
        int k;
        while ((k = raw_iter_next(it, &r)) > 0) {
            (*records)++;
            /* in ascending order; a key that is not an oid has no place */
            if (r.oid != UINT64_MAX && !c->oom &&
                grow(c, (void **)&c->oids, &c->capn, c->n + 1, sizeof *c->oids) &&
                grow(c, (void **)&c->first, &c->capfirst, c->n + 2, sizeof *c->first) &&
                grow(c, (void **)&c->is_map, &c->capmap, c->n / 8 + 1, 1)) {
                size_t i = c->n++;
                c->oids[i] = r.oid;
                c->first[i] = c->nrefs;
                if (i % 8 == 0) c->is_map[i / 8] = 0;
                if (raw_map_class(t, &r) == 1) c->is_map[i / 8] |= (uint8_t)(1u << (i % 8));
                raw_scan_refs(&r, keep_ref, c); /* a bad record: check reported it */
            }
            if (r.oid >= next_oid) {
                note_holder(o, r.oid);
                printf("problem: oid %llu is not below meta next_oid %llu (a new object would "
                       "overwrite it)\n",
                       (unsigned long long)r.oid, (unsigned long long)next_oid);
            }
            if (!r.bad_header && r.serial > last) {
                note_holder(o, r.oid);
                printf("problem: oid %llu has serial %llu, past the last commit %llu\n",
                       (unsigned long long)r.oid, (unsigned long long)r.serial,
                       (unsigned long long)last);
            }
        }
        if (k < 0) rc = EXIT_FAIL;
        raw_iter_close(it);
    }
    if (!rc && !c->oom) {
        if (c->first) c->first[c->n] = c->nrefs;
        if (!(c->reached = calloc(c->n / 8 + 1, 1))) c->oom = true;
    }
    if (!rc && c->oom) rc = fail("%s: out of memory for the oids of the records", shown(db));
    if (!rc) {
        reach_ref(c, 0);
        while (c->len && !c->oom) {
            size_t i = c->stack[--c->len];
            (*reachable)++;
            for (size_t k = c->first[i]; k < c->first[i + 1]; k++) reach_ref(c, c->refs[k]);
            if ((c->is_map[i / 8] >> (i % 8) & 1) && reach_entries(t, c->oids[i], c)) {
                rc = EXIT_FAIL;
                break;
            }
        }
        if (c->oom) rc = fail("out of memory");
    }
    return rc;
}

static void reach_free(reach_ctx *c) {
    free(c->oids);
    free(c->first);
    free(c->refs);
    free(c->is_map);
    free(c->reached);
    free(c->stack);
}

/* Whether raw snapshots (ostore/raw.h), which count reachability, map
 * entries and meta's counters here, open on st's engine: always on LMDB;
 * on another engine once it has them. */
static bool raw_ok(ost_store *st) {
    ost_snap *s;
    if (ost_snap_open(st, &s)) return false;
    ost_snap_close(s);
    return true;
}

static int run_check(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_check, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    guard_crashes(db);
    ost_store *st;
    open_store_no_walk(); /* ost_store_check walks the pages and reports what it finds */
    if (open_store(db, false, &st)) return EXIT_FAIL;
    double t0 = now_s();
    check_out o = {0};
    uint64_t records = 0;
    int rc = ost_store_check(st, report, &o, &records);
    if (rc && rc != OST_ECORRUPT) {
        int r = fail("%s", ost_store_errmsg(st));
        ost_store_close(st);
        return r;
    }
    if (o.page_problems) { /* liblmdb must not read these pages: no reachability */
        ost_store_close(st);
        char a[32], b[32];
        printf("checked %s records through ostore's own page reader (liblmdb would trust the "
               "damaged pages)\n",
               fmt_count(a, sizeof a, records));
        printf("%s problem%s, %s of them in the pages\n", fmt_count(a, sizeof a, o.problems),
               o.problems == 1 ? "" : "s", fmt_count(b, sizeof b, o.page_problems));
        return fail("%s: damaged: %llu problem%s found; 'ostore salvage %s NEWSTORE' copies what "
                    "is intact",
                    db, (unsigned long long)o.problems, o.problems == 1 ? "" : "s", db);
    }
    if (!raw_ok(st)) { /* the engine's own check only */
        ost_store_close(st);
        char a[32], b[32];
        printf("checked %s records in %.2f s\n", fmt_count(a, sizeof a, records), now_s() - t0);
        if (o.problems) {
            printf("%s problem%s in %s object%s\n", fmt_count(a, sizeof a, o.problems),
                   o.problems == 1 ? "" : "s", fmt_count(b, sizeof b, o.holders),
                   o.holders == 1 ? "" : "s");
            return fail("%s: damaged: %llu problem%s found", shown(db),
                        (unsigned long long)o.problems, o.problems == 1 ? "" : "s");
        }
        printf("no problems: every record and map entry decodes, every reference resolves, "
               "every map's count matches its entries (reachability is not counted on this "
               "engine)\n");
        return EXIT_OK;
    }
    /* what the library's check does not: a second read of the records
     * (in oid order, no read by oid) for reachability and meta's
     * counters, timed apart so that the output says what it costs */
    double t1 = now_s();
    raw_txn *t;
    uint64_t reachable = 0, counted = 0, entries;
    if (raw_begin(st, &t)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    reach_ctx rx = {0};
    rc = reach(db, t, &o, &rx, &reachable, &counted);
    uint64_t reread_entries = rx.entries;
    reach_free(&rx);
    ost_snap_stats si;
    entries = ost_snap_stat(raw_snap(t), &si) ? 0 : si.entries;
    raw_end(t);
    ost_store_close(st);
    if (rc) return rc;
    double t2 = now_s();
    char a[32], b[32], c[32];
    if (entries)
        printf("checked %s records and %s map entries in %.2f s\n", fmt_count(a, sizeof a, records),
               fmt_count(b, sizeof b, entries), t1 - t0);
    else
        printf("checked %s records in %.2f s\n", fmt_count(a, sizeof a, records), t1 - t0);
    printf("reachable from the root: %s objects; unreachable: %s%s\n",
           fmt_count(b, sizeof b, reachable), fmt_count(c, sizeof c, counted - reachable),
           counted > reachable ? " ('ostore pack' removes them)" : "");
    if (reread_entries)
        printf("read again for reachability and meta's counters: %s records and %s map entries "
               "in %.2f s\n",
               fmt_count(a, sizeof a, counted), fmt_count(b, sizeof b, reread_entries), t2 - t1);
    else
        printf("read again for reachability and meta's counters: %s records in %.2f s\n",
               fmt_count(a, sizeof a, counted), t2 - t1);
    if (o.problems) {
        printf("%s problem%s in %s object%s\n", fmt_count(a, sizeof a, o.problems),
               o.problems == 1 ? "" : "s", fmt_count(b, sizeof b, o.holders),
               o.holders == 1 ? "" : "s");
        return fail("%s: damaged: %llu problem%s found", shown(db), (unsigned long long)o.problems,
                    o.problems == 1 ? "" : "s");
    }
    printf(entries ? "no problems: every record and map entry decodes, every reference resolves, "
                     "every map's count matches its entries\n"
                   : "no problems: every record decodes and every reference resolves\n");
    return EXIT_OK;
}

const cli_cmd cmd_check = {
    .name = "check",
    .summary = "Check a store: every record decodes, every reference resolves.",
    .usage = "usage: ostore check DB\n",
    .help = "Reads every record (the store is opened read-only): its header, its class\n"
            "in the class table, its pickle (decoded in full) and each reference in it\n"
            "(the oid must have a record); every map entry likewise (a key of its map's\n"
            "kind, its value, its references), and each map's count against its\n"
            "entries; also that every oid is below meta next_oid and every serial at\n"
            "most the last commit, and that the counters of meta are within a store's\n"
            "limits. Each problem is printed as a line 'problem: ...' naming the oid\n"
            "that holds it. Then it reads the records again, in oid order, to count the\n"
            "objects reachable from the root (oid 0), following the references of\n"
            "records and of map entries' values (the others are garbage 'ostore pack'\n"
            "removes), and to check meta's counters; a line says what that second read\n"
            "cost, apart from the check's time.\n"
            "\nExit status: 0 when the store is sound, 1 when problems were found (or the\n"
            "store cannot be read), 2 bad usage.\n",
    .run = run_check,
};

/* ---- pack ------------------------------------------------------------------------- */

/* The number of map entries in the store now: 0, or EXIT_FAIL after a
 * message. */
static int map_entries(ost_store *st, uint64_t *n) {
    *n = 0;
    if (!raw_ok(st)) return EXIT_OK; /* not counted on this engine */
    raw_txn *t;
    if (raw_begin(st, &t)) return EXIT_FAIL;
    ost_snap_stats si;
    *n = ost_snap_stat(raw_snap(t), &si) ? 0 : si.entries;
    raw_end(t);
    return EXIT_OK;
}

static int run_pack(int argc, char **argv) {
    const char *pos[1], *force = NULL;
    cli_opt opts[] = {{"--force", false, &force}};
    int prc = parse_args(&cmd_pack, argc, argv, opts, 1, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    guard_crashes(db);
    ost_store *st;
    if (open_store_excl(db, &st)) return EXIT_FAIL;
    ost_store_stats before, after;
    uint64_t removed = 0, ents_before = 0, ents_after = 0;
    double t0 = now_s();
    int rc = ost_store_stat(st, &before);
    if (!rc) rc = map_entries(st, &ents_before);
    if (!rc) rc = ost_store_pack_ex(st, force ? OST_PACK_FORCE : 0, &removed);
    if (!rc) rc = ost_store_stat(st, &after);
    if (!rc) rc = map_entries(st, &ents_after);
    if (rc) {
        int r = rc == EXIT_FAIL ? rc
                                : fail("%s", ost_store_errmsg(st)[0] ? ost_store_errmsg(st)
                                                                     : ost_strerror(rc));
        ost_store_close(st);
        return r;
    }
    ost_store_close(st);
    char a[32], b[32], c[32], e[64] = "";
    if (ents_before > ents_after)
        snprintf(e, sizeof e, " and %s map entr%s",
                 fmt_count(c, sizeof c, ents_before - ents_after),
                 ents_before - ents_after == 1 ? "y" : "ies");
    printf("removed %s object%s%s unreachable from the root, freeing %s of records "
           "(%.2f s)\n",
           fmt_count(a, sizeof a, removed), removed == 1 ? "" : "s", e,
           fmt_bytes(b, sizeof b,
                     before.bytes > after.bytes ? (double)(before.bytes - after.bytes) : 0.0),
           now_s() - t0);
    e[0] = 0;
    if (ents_after)
        snprintf(e, sizeof e, " and %s map entr%s", fmt_count(c, sizeof c, ents_after),
                 ents_after == 1 ? "y" : "ies");
    if (!ost_store_addr_is_path(db)) /* a server: its own storage */
        printf("%s objects%s remain (%s of records)\n", fmt_count(a, sizeof a, after.records), e,
               fmt_bytes(b, sizeof b, (double)after.bytes));
    else
        printf("%s objects%s remain (%s of records); data.mdb is %s: LMDB keeps freed pages "
               "for new records, the file does not shrink\n",
               fmt_count(a, sizeof a, after.records), e,
               fmt_bytes(b, sizeof b, (double)after.bytes),
               fmt_bytes(c, sizeof c, (double)file_size(db, "data.mdb")));
    return EXIT_OK;
}

const cli_cmd cmd_pack = {
    .name = "pack",
    .summary = "Remove the objects the root no longer reaches.",
    .usage = "usage: ostore pack DB [--force]\n",
    .help = "Marks every object reachable from the root (oid 0) by following the\n"
            "references in the records and in the values of map entries, then deletes\n"
            "the other records, and the entries of the maps among them, in one\n"
            "transaction, and prints how many objects (and map entries) and bytes of\n"
            "records went. The invalidation log is emptied too (other processes' caches\n"
            "reload).\n"
            "\nPack removes only what it knows to be unreachable. On a damaged store (a\n"
            "reachable record or map entry that does not decode, a reference to an oid\n"
            "without a record: damage can hide records that way) it removes nothing and\n"
            "exits 1 naming the problem; run 'ostore check', then 'ostore salvage'\n"
            "(docs/recovery.md). --force packs anyway: what only damaged records\n"
            "referred to is then removed for good.\n"
            "\nDo not pack while a program is still bulk-loading objects it has not yet\n"
            "linked to the root: they are unreachable until then. Pack opens the store\n"
            "with its exclusive lock, so a pack, import, copy or demo of another ostore\n"
            "process on the same store fails at once with 'store is locked'.\n",
    .run = run_pack,
};

/* ---- upgrade ---------------------------------------------------------------------- */

/* The store's format, read through a read-only handle: 0, or EXIT_FAIL
 * after a message. */
static int store_format(const char *db, uint64_t *format) {
    ost_store *st;
    *format = 0;
    if (open_store(db, false, &st)) return EXIT_FAIL;
    raw_txn *t;
    int rc = raw_begin(st, &t);
    if (!rc) {
        ost_snap_stats si;
        if (ost_snap_stat(raw_snap(t), &si)) rc = fail("%s: damaged meta (format)", db);
        else *format = si.format;
        raw_end(t);
    }
    ost_store_close(st);
    return rc;
}

static int run_upgrade(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_upgrade, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    guard_crashes(db);
    if (!ost_store_addr_is_path(db))
        return fail("%s: upgrade rewrites an LMDB store's files; a database store is upgraded by "
                    "opening it", shown(db));
    uint64_t from;
    if (store_format(db, &from)) return EXIT_FAIL;
    if (from >= OST_STORE_FORMAT) {
        printf("%s is at format %llu already: nothing to do\n", db, (unsigned long long)from);
        return EXIT_OK;
    }
    double t0 = now_s();
    ost_store *st;
    /* a read-write open upgrades the store, all or nothing */
    if (open_store_excl(db, &st)) return EXIT_FAIL;
    ost_store_stats s;
    int rc = ost_store_stat(st, &s);
    uint64_t ents = 0;
    if (!rc) rc = map_entries(st, &ents);
    ost_store_close(st);
    if (rc) return rc == EXIT_FAIL ? rc : fail("%s: %s", db, ost_strerror(rc));
    char a[32], b[32];
    if (from < 3)
        printf("upgraded %s from format %llu to %d: %s records and %s map entries now carry "
               "checksums (%.2f s)\n",
               db, (unsigned long long)from, OST_STORE_FORMAT, fmt_count(a, sizeof a, s.records),
               fmt_count(b, sizeof b, ents), now_s() - t0);
    else
        printf("upgraded %s from format %llu to %d: its %s records keep their bytes until "
               "rewritten (%.2f s)\n",
               db, (unsigned long long)from, OST_STORE_FORMAT, fmt_count(a, sizeof a, s.records),
               now_s() - t0);
    return EXIT_OK;
}

const cli_cmd cmd_upgrade = {
    .name = "upgrade",
    .summary = "Bring a store of an older format to the current one (4).",
    .usage = "usage: ostore upgrade DB\n",
    .help = "Rewrites every record and map entry of a store of format 1 or 2 with its\n"
            "CRC-32C checksum, and sets the format to 4 (docs/format.md), in one\n"
            "transaction: all or nothing. A format-3 store's records are valid format-4\n"
            "records (dict states): they keep their bytes until rewritten, when an\n"
            "instance of a class with fields is written positionally. A program that\n"
            "opens such a store for writing does the same; this command does it on its\n"
            "own, and says so when there is nothing to do. A damaged record stops it\n"
            "with exit 1 and changes nothing ('ostore check' lists the damage, 'ostore\n"
            "salvage' copies what is intact). Older ostore versions refuse a store of a\n"
            "format newer than theirs: upgrade a store when no older ostore process has\n"
            "it open.\n",
    .run = run_upgrade,
};

/* ---- salvage ---------------------------------------------------------------------- */

static void salvage_line(void *ud, int kind, const char *line) {
    (void)ud;
    static const char *const tag[] = {"damage", "lost", "note"};
    printf("%s: %s\n", tag[kind], line);
}

static int run_salvage(int argc, char **argv) {
    const char *pos[2];
    int prc = parse_args(&cmd_salvage, argc, argv, NULL, 0, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *src = pos[0], *dst = pos[1];
    guard_crashes(src);
    if (!ost_store_addr_is_path(src) || !ost_store_addr_is_path(dst))
        return fail("%s: salvage reads and writes LMDB's files; for a database store use 'ostore "
                    "check' and 'ostore copy'", shown(ost_store_addr_is_path(src) ? dst : src));
    double t0 = now_s();
    ost_salvage_stats s;
    char msg[768];
    int rc = ost_salvage(src, dst, salvage_line, NULL, &s, msg, sizeof msg);
    if (rc) return fail("%s", msg);
    char a[32], b[32], c[32], d[32];
    printf("salvaged %s records (%s of them found outside the B-trees) and %s map entries "
           "into %s (%.2f s)\n",
           fmt_count(a, sizeof a, s.records), fmt_count(b, sizeof b, s.records_scanned),
           fmt_count(c, sizeof c, s.entries), dst, now_s() - t0);
    if (s.lost_records || s.lost_entries || s.dropped_entries || s.root_lost)
        printf("lost: %s records, %s map entries (%s more dropped with their map)%s; %s damage "
               "reports above\n",
               fmt_count(a, sizeof a, s.lost_records), fmt_count(b, sizeof b, s.lost_entries),
               fmt_count(c, sizeof c, s.dropped_entries), s.root_lost ? ", the root" : "",
               fmt_count(d, sizeof d, s.problems));
    else if (s.problems || s.damaged || s.records_scanned || s.entries_scanned)
        printf("nothing lost: %s damaged records and entries, %s damage reports; what they hid "
               "was found intact elsewhere in the file (see the notes)\n",
               fmt_count(a, sizeof a, s.damaged), fmt_count(b, sizeof b, s.problems));
    else
        printf("nothing lost: no damage found\n");
    printf("%s was not changed; check the new store with 'ostore check %s'\n", src, dst);
    return EXIT_OK;
}

const cli_cmd cmd_salvage = {
    .name = "salvage",
    .summary = "Copy what is intact of a damaged store into a new store.",
    .usage = "usage: ostore salvage DAMAGED NEWSTORE\n",
    .help = "Reads DAMAGED with ostore's own checks of LMDB's pages (never with liblmdb,\n"
            "which trusts its file) and copies every record and map entry whose checksum\n"
            "verifies into the new store NEWSTORE (a directory that holds no store; it is\n"
            "made). Records and entries come from the B-trees; when a tree is damaged,\n"
            "every page of the file is scanned for intact copies too (the checksum holds\n"
            "the oid, so a copy cannot land under the wrong one; the newest copy wins).\n"
            "Map counts are recomputed from the entries recovered. It prints each problem\n"
            "of the file ('damage: ...'), each record or entry lost with its class when\n"
            "known ('lost: ...'), how things were recovered ('note: ...'), and a summary.\n"
            "DAMAGED is never written. Stores of formats 1 and 2 have no checksums: their\n"
            "records are taken when their pickles read, and the file is not scanned.\n"
            "\nExit status: 0 when NEWSTORE was written (losses, if any, are listed), 1\n"
            "when nothing could be salvaged or NEWSTORE could not be written, 2 bad usage.\n"
            "See docs/recovery.md.\n",
    .run = run_salvage,
};
