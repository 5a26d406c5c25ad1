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

/* Whether raw snapshots (ostore/raw.h), which count map entries for pack,
 * open on st's engine: always on LMDB and PostgreSQL; on another engine
 * once it has them. */
static bool raw_ok(ost_store *st) {
    ost_snap *s;
    if (ost_snap_open(st, &s)) return false;
    ost_snap_close(s);
    return true;
}

/* Checks that the counters of meta are within what a store can hold (they
 * wrap when handed out past it), printing a problem for each that is not,
 * through a raw snapshot (none on an engine without them: its own check
 * only), and sets *entries to the map entries the store counts (those
 * without a map too). EXIT_OK, or EXIT_FAIL after a message when meta
 * cannot be read. */
static int meta_limits(const char *db, ost_store *st, check_out *o, uint64_t *entries) {
    ost_snap *s;
    if (ost_snap_open(st, &s)) return EXIT_OK;
    ost_snap_stats si;
    int rc = ost_snap_stat(s, &si);
    ost_snap_close(s);
    if (rc) return fail("%s: damaged meta (counters)", shown(db));
    *entries = si.entries;
    if (si.next_oid > OST_OID_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_oid %llu is past 2^63, the largest a store has (the next "
               "new object's oid would wrap)\n",
               (unsigned long long)si.next_oid);
    }
    if (si.last_serial >= OST_SERIAL_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta last_serial %llu is past 2^63 - 1, the largest a store has\n",
               (unsigned long long)si.last_serial);
    }
    if (si.next_class == 0 || si.next_class > OST_CLASS_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_class %llu is not a 32-bit class id from 1 (the next class "
               "would get a wrong id)\n",
               (unsigned long long)si.next_class);
    }
    return EXIT_OK;
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
    /* reachability and the records against meta's counters come from the
     * check's own read of the records: the CLI reads nothing twice (it
     * once read every reachable record again by its oid, a round trip
     * each on a server) */
    ost_check_stats cs;
    int rc = ost_store_check_ex(st, OST_CHECK_REACH | OST_CHECK_COUNTERS, report, &o, &cs);
    double dt = now_s() - t0;
    uint64_t records = cs.records;
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
    uint64_t entries = cs.entries;
    if (meta_limits(db, st, &o, &entries)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    ost_store_close(st);
    char a[32], b[32], c[32];
    if (entries)
        printf("checked %s records and %s map entries in %.2f s\n", fmt_count(a, sizeof a, records),
               fmt_count(b, sizeof b, entries), dt);
    else
        printf("checked %s records in %.2f s\n", fmt_count(a, sizeof a, records), dt);
    printf("reachable from the root: %s objects; unreachable: %s%s\n",
           fmt_count(b, sizeof b, cs.reachable), fmt_count(c, sizeof c, records - cs.reachable),
           records > cs.reachable ? " ('ostore pack' removes them)" : "");
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
            "that holds it. From the same read it counts the objects reachable from\n"
            "the root (oid 0), following the references of records and of map\n"
            "entries' values; the others are garbage 'ostore pack' removes.\n"
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
               "for new records, the file does not shrink ('ostore copy DB NEW' writes a "
               "compact copy)\n",
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
