/* ostore CLI: check and pack. */
#include <stdlib.h>
#include <string.h>

#include "../store/oidset.h"
#include "../store/store_internal.h"
#include "cli.h"

/* ---- check ------------------------------------------------------------------- */

typedef struct {
    uint64_t problems;
    uint64_t last_holder; /* to count objects with problems */
    uint64_t holders;
} check_out;

static void note_holder(check_out *o, uint64_t oid) {
    if (o->problems == 0 || oid != o->last_holder) o->holders++;
    o->last_holder = oid;
    o->problems++;
}

static void report(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    (void)missing;
    (void)err;
    note_holder(ud, oid);
    printf("problem: %s\n", msg);
}

/* Reachability from the root over the references of the records: a flag
 * per record in an oid set sized by the records themselves (never by
 * meta.next_oid, which damage can make anything), and an explicit stack. */
typedef struct {
    ost__oidset oids; /* flag 0: reached */
    size_t *stack;    /* places in oids */
    size_t len, cap;
    bool oom;
} reach_ctx;

static void reach_ref(void *ud, uint64_t oid) {
    reach_ctx *c = ud;
    int64_t i = ost__oidset_index(&c->oids, oid);
    if (i < 0 || ost__oidset_set(&c->oids, 0, (size_t)i)) return; /* no record, or seen */
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        size_t *n = realloc(c->stack, cap * sizeof *n);
        if (!n) {
            c->oom = true;
            return;
        }
        c->stack = n;
        c->cap = cap;
    }
    c->stack[c->len++] = (size_t)i;
}

/* A map reaches what its entries' values reference. */
static int reach_entries(raw_txn *t, uint64_t map, reach_ctx *c) {
    raw_ents *ec;
    if (raw_ents_open(t, map, NULL, 0, &ec)) return EXIT_FAIL;
    raw_ent e;
    int k;
    while ((k = raw_ents_next(ec, &e)) > 0)
        raw_scan_pickle_refs(e.val, e.vlen, reach_ref, c); /* a bad value: check reports it */
    raw_ents_close(ec);
    return k < 0 ? EXIT_FAIL : EXIT_OK;
}

/* Counts the records reachable from the root and checks the counters of
 * meta against the records (an oid at or past next_oid would be given to a
 * new object and overwritten; a serial past last_serial breaks conflict
 * detection). Returns EXIT_OK or EXIT_FAIL (message printed). */
static int reach(const char *db, raw_txn *t, check_out *o, uint64_t *reachable, uint64_t *records) {
    uint64_t next_oid = 0, last = 0, next_class = 0;
    if (raw_meta(t, "next_oid", &next_oid) || raw_meta(t, "last_serial", &last) ||
        raw_meta(t, "next_class", &next_class))
        return fail("%s: damaged meta (counters)", shown(db));
    /* counters past what a store can hold wrap when handed out */
    if (next_oid > OST__OID_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_oid %llu is past 2^63, the largest a store has (the next "
               "new object's oid would wrap)\n",
               (unsigned long long)next_oid);
    }
    if (last >= OST__SERIAL_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta last_serial %llu is past 2^63 - 1, the largest a store has\n",
               (unsigned long long)last);
    }
    if (next_class == 0 || next_class > OST__CLASS_LIMIT) {
        note_holder(o, 0);
        printf("problem: meta next_class %llu is not a 32-bit class id from 1 (the next class "
               "would get a wrong id)\n",
               (unsigned long long)next_class);
    }
    reach_ctx c = {0};
    int orc = ost__oidset_init(&c.oids, raw_mdb_txn(t), raw_store(t)->recs);
    if (orc)
        return orc == OST_ENOMEM ? fail("%s: out of memory for the oids of the records", shown(db))
                                 : fail("%s: reading the records: %s", shown(db),
                                        mdb_strerror(orc));
    raw_iter *it;
    int rc = raw_iter_open(t, &it);
    if (!rc) {
        raw_rec r;
        int k;
        while ((k = raw_iter_next(it, &r)) > 0) {
            (*records)++;
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
    if (!rc) {
        reach_ref(&c, 0);
        while (c.len && !c.oom) {
            uint64_t oid = ost__oidset_oid(&c.oids, c.stack[--c.len]);
            raw_rec r;
            if (raw_get(t, oid, &r) == 0) {
                (*reachable)++;
                raw_scan_refs(&r, reach_ref, &c); /* a bad record: check reported it */
                if (raw_map_class(t, &r) == 1 && reach_entries(t, oid, &c)) {
                    rc = EXIT_FAIL;
                    break;
                }
            }
        }
        if (c.oom) rc = fail("out of memory");
    }
    ost__oidset_free(&c.oids);
    free(c.stack);
    return rc;
}

static int run_check(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_check, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    guard_crashes(db);
    ost_store *st;
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
    raw_txn *t;
    uint64_t reachable = 0, counted = 0, entries, entry_bytes;
    if (raw_begin(st, &t)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    rc = reach(db, t, &o, &reachable, &counted);
    raw_ents_stat(t, &entries, &entry_bytes);
    raw_end(t);
    ost_store_close(st);
    if (rc) return rc;
    double dt = now_s() - t0;
    char a[32], b[32], c[32];
    if (entries)
        printf("checked %s records and %s map entries in %.2f s\n", fmt_count(a, sizeof a, records),
               fmt_count(b, sizeof b, entries), dt);
    else
        printf("checked %s records in %.2f s\n", fmt_count(a, sizeof a, records), dt);
    printf("reachable from the root: %s objects; unreachable: %s%s\n",
           fmt_count(b, sizeof b, reachable), fmt_count(c, sizeof c, counted - reachable),
           counted > reachable ? " ('ostore pack' removes them)" : "");
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
            "that holds it. Then it counts the objects reachable from the root (oid 0),\n"
            "following the references of records and of map entries' values; the\n"
            "others are garbage 'ostore pack' removes.\n"
            "\nExit status: 0 when the store is sound, 1 when problems were found (or the\n"
            "store cannot be read), 2 bad usage.\n",
    .run = run_check,
};

/* ---- pack ------------------------------------------------------------------------- */

/* The number of map entries in the store now: 0, or EXIT_FAIL after a
 * message. */
static int map_entries(ost_store *st, uint64_t *n) {
    raw_txn *t;
    uint64_t bytes;
    if (raw_begin(st, &t)) return EXIT_FAIL;
    raw_ents_stat(t, n, &bytes);
    raw_end(t);
    return EXIT_OK;
}

static int run_pack(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_pack, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    guard_crashes(db);
    ost_store *st;
    if (lock_store(db) || open_store(db, true, &st)) return EXIT_FAIL;
    ost_store_stats before, after;
    uint64_t removed = 0, ents_before = 0, ents_after = 0;
    double t0 = now_s();
    int rc = ost_store_stat(st, &before);
    if (!rc) rc = map_entries(st, &ents_before);
    if (!rc) rc = ost_store_pack(st, &removed);
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
           fmt_bytes(b, sizeof b, (double)(before.bytes - after.bytes)), now_s() - t0);
    e[0] = 0;
    if (ents_after)
        snprintf(e, sizeof e, " and %s map entr%s", fmt_count(c, sizeof c, ents_after),
                 ents_after == 1 ? "y" : "ies");
    printf("%s objects%s remain (%s of records); data.mdb is %s: LMDB keeps freed pages "
           "for new records, the file does not shrink\n",
           fmt_count(a, sizeof a, after.records), e, fmt_bytes(b, sizeof b, (double)after.bytes),
           fmt_bytes(c, sizeof c, (double)file_size(db, "data.mdb")));
    return EXIT_OK;
}

const cli_cmd cmd_pack = {
    .name = "pack",
    .summary = "Remove the objects the root no longer reaches.",
    .usage = "usage: ostore pack DB\n",
    .help = "Marks every object reachable from the root (oid 0) by following the\n"
            "references in the records and in the values of map entries, then deletes\n"
            "the other records, and the entries of the maps among them, in one\n"
            "transaction, and prints how many objects (and map entries) and bytes of\n"
            "records went. The invalidation log is emptied too (other processes' caches\n"
            "reload).\n"
            "\nDo not pack while a program is still bulk-loading objects it has not yet\n"
            "linked to the root: they are unreachable until then. ostore takes an\n"
            "exclusive lock on DB/data.mdb, so a pack, import or demo of another ostore\n"
            "process on the same store fails at once with 'store is locked'.\n",
    .run = run_pack,
};
