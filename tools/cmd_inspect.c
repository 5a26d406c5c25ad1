/* ostore CLI: read-only looks at a store: info, ls, cat, refs. Each opens
 * the store read-only and reads one LMDB snapshot. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Opens db read-only and starts a raw read transaction. */
static int open_ro(const char *db, ost_store **st, raw_txn **t) {
    *t = NULL;
    guard_crashes(db);
    if (open_store(db, false, st)) return EXIT_FAIL;
    if (raw_begin(*st, t)) {
        ost_store_close(*st);
        *st = NULL;
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static void close_ro(ost_store *st, raw_txn *t) {
    raw_end(t);
    ost_store_close(st);
}

static int parse_oid(const cli_cmd *cmd, const char *s, uint64_t *oid) {
    if (!parse_u64(s, oid)) return bad_usage(cmd, "%s: bad OID '%s' (a decimal number)", cmd->name, s);
    return EXIT_OK;
}

/* ---- info ------------------------------------------------------------------- */

/* info lists this many maps; the rest are counted. */
#define INFO_MAPS 20

typedef struct {
    uint64_t oid;
    raw_map m;
    bool bad; /* the record holds no valid kind and count */
} info_map;

static int run_info(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_info, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    ost_snap_stats si;
    int rc = ost_snap_stat(raw_snap(t), &si);
    uint64_t format = si.format, next_oid = si.next_oid, last = si.last_serial;
    if (rc) {
        close_ro(st, t);
        return fail("%s: damaged meta: %s", shown(db), ost_strerror(rc));
    }
    size_t ncls = raw_class_count(t);
    uint64_t *counts = calloc(ncls + 1, sizeof *counts), *bytes = calloc(ncls + 1, sizeof *bytes);
    if (!counts || !bytes) {
        free(counts);
        free(bytes);
        close_ro(st, t);
        return fail("out of memory");
    }
    raw_iter *it;
    uint64_t n = 0, total = 0, damaged = 0, nmaps = 0;
    info_map maps[INFO_MAPS];
    if (raw_iter_open(t, &it)) {
        rc = 1;
    } else {
        raw_rec r;
        int k;
        while ((k = raw_iter_next(it, &r)) > 0) {
            n++;
            total += r.size;
            if (raw_map_class(t, &r) && nmaps++ < INFO_MAPS) {
                info_map *im = &maps[nmaps - 1];
                char why[160];
                im->oid = r.oid;
                im->bad = raw_map_read(t, &r, &im->m, why, sizeof why) != 0;
            }
            size_t ci = ncls; /* "other": damaged header or unknown class */
            ptrdiff_t x = r.bad_header ? -1 : raw_class_index(t, r.cid);
            if (r.bad_header) damaged++;
            if (x >= 0) ci = (size_t)x;
            counts[ci]++;
            bytes[ci] += r.size;
        }
        raw_iter_close(it);
        if (k < 0) rc = 1;
    }
    if (!rc) {
        char a[32], b[32], c[32];
        uint64_t psize = si.page_size, used = si.pages_used, map = si.map_size;
        bool lmdb = !strcmp(si.engine, "lmdb");
        printf("store        %s\n", shown(db));
        printf("engine       %s\n", si.engine);
        printf("format       %llu (this ostore reads formats 1 to %d)\n",
               (unsigned long long)format, OST_STORE_FORMAT);
        printf("objects      %s\n", fmt_count(a, sizeof a, n));
        printf("records      %s (average %llu bytes, 16-byte header included)\n",
               fmt_bytes(b, sizeof b, (double)total),
               (unsigned long long)(n ? (total + n / 2) / n : 0));
        printf("next oid     %s\n", fmt_count(a, sizeof a, next_oid));
        printf("last commit  %s (serial)\n", fmt_count(a, sizeof a, last));
        if (lmdb) { /* the files and the map: LMDB's alone */
            printf("disk         data.mdb %s, lock.mdb %s\n",
                   fmt_bytes(a, sizeof a, (double)file_size(db, "data.mdb")),
                   fmt_bytes(b, sizeof b, (double)file_size(db, "lock.mdb")));
            printf("map          %s, %s used (%.0f%%), %llu-byte pages\n",
                   fmt_bytes(a, sizeof a, (double)map),
                   fmt_bytes(c, sizeof c, (double)(used * psize)),
                   map ? 100.0 * (double)(used * psize) / (double)map : 0.0,
                   (unsigned long long)psize);
        }
        /* a class's own entry with no record of its own, when one of its
         * versions has them, is there for references (format 4): one line,
         * the version's, says it all */
        size_t hidden = 0;
        bool *hide = calloc(ncls ? ncls : 1, sizeof *hide);
        for (size_t i = 0; hide && i < ncls; i++) {
            const char *m, *nm;
            uint32_t id = raw_class_at(t, i, &m, &nm);
            if (raw_class_fields(t, id) || counts[i]) continue;
            char q[512];
            snprintf(q, sizeof q, "%s", raw_class_name(t, id));
            for (size_t j = 0; j < ncls && !hide[i]; j++) {
                const char *m2, *n2;
                uint32_t id2 = raw_class_at(t, j, &m2, &n2);
                hide[i] = j != i && raw_class_fields(t, id2) && counts[j] &&
                          !strcmp(raw_class_name(t, id2), q);
            }
            hidden += hide[i];
        }
        if (hidden)
            printf("classes      %zu (and %zu entries of the class table that only references name)\n",
                   ncls - hidden, hidden);
        else
            printf("classes      %zu\n", ncls);
        for (size_t i = 0; i < ncls; i++) {
            const char *m, *nm;
            uint32_t id = raw_class_at(t, i, &m, &nm);
            /* a class version (format 4) shows as its class, then its fields */
            const char *fl = raw_class_fields(t, id);
            char q[512];
            snprintf(q, sizeof q, "%s", raw_class_name(t, id));
            if (hide && hide[i]) continue;
            printf("  %-36s %12s objects %12s%s%.*s%s\n", q, fmt_count(a, sizeof a, counts[i]),
                   fmt_bytes(b, sizeof b, (double)bytes[i]), fl ? "  positional (" : "",
                   fl ? (int)strlen(fl) - 1 : 0, fl ? fl : "", fl ? ")" : "");
        }
        free(hide);
        if (counts[ncls])
            printf("  %-36s %12s objects %12s\n",
                   damaged ? "(damaged headers, unknown classes)" : "(unknown classes)",
                   fmt_count(a, sizeof a, counts[ncls]), fmt_bytes(b, sizeof b, (double)bytes[ncls]));
        uint64_t ents = si.entries, ebytes = si.entry_bytes;
        printf("maps         %s", fmt_count(a, sizeof a, nmaps));
        if (nmaps || ents)
            printf(" (%s entries in all, %s of %s)", fmt_count(b, sizeof b, ents),
                   fmt_bytes(c, sizeof c, (double)ebytes), lmdb ? "pages" : "table and index");
        printf("\n");
        for (uint64_t i = 0; i < nmaps && i < INFO_MAPS; i++) {
            const info_map *im = &maps[i];
            if (im->bad)
                printf("  %-8llu %s  %-22s %12s\n", (unsigned long long)im->oid,
                       im->m.is_set ? "set" : "map", "?", "(damaged record)");
            else
                printf("  %-8llu %s  %-22s %12s entr%s\n", (unsigned long long)im->oid,
                       im->m.is_set ? "set" : "map", im->m.kind,
                       fmt_count(a, sizeof a, im->m.count), im->m.count == 1 ? "y" : "ies");
        }
        if (nmaps > INFO_MAPS)
            printf("  ... and %s more\n", fmt_count(a, sizeof a, nmaps - INFO_MAPS));
    }
    free(counts);
    free(bytes);
    close_ro(st, t);
    return rc ? EXIT_FAIL : EXIT_OK;
}

const cli_cmd cmd_info = {
    .name = "info",
    .summary = "Show a store's format, objects, sizes, LMDB map use, classes and maps.",
    .usage = "usage: ostore info DB\n",
    .help = "Reads every record header once (the store is opened read-only) and prints:\n"
            "the format version, the number of objects and the bytes of their records,\n"
            "the next oid, the serial of the last commit, the size of data.mdb and\n"
            "lock.mdb, the LMDB map size and how much of it is used, each class\n"
            "with its number of instances and their bytes, and the maps and sets\n"
            "(ostore.maps.OrderedMap, OrderedSet): how many, their entries in all, and\n"
            "the first 20 in oid order, each with its oid, key kind and entry count.\n",
    .run = run_info,
};

/* ---- ls ------------------------------------------------------------------------ */

static int run_ls(int argc, char **argv) {
    const char *cls = NULL, *limit_s = NULL, *pos[1];
    cli_opt opts[] = {{"--class", true, &cls}, {"--limit", true, &limit_s}};
    int prc = parse_args(&cmd_ls, argc, argv, opts, 2, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    uint64_t limit = UINT64_MAX;
    if (limit_s && (!parse_u64(limit_s, &limit) || limit == 0))
        return bad_usage(&cmd_ls, "ls: --limit needs a number of at least 1, not '%s'", limit_s);
    if (cls && !strchr(cls, '.'))
        return bad_usage(&cmd_ls, "ls: --class takes MODULE.NAME, such as shop.Customer");
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    uint32_t want = 0;
    if (cls && !raw_class_id(t, cls, &want)) {
        close_ro(st, t);
        return fail("%s: no class %s in this store ('ostore info %s' lists them)", shown(db), cls,
                    shown(db));
    }
    raw_end(t); /* the listing reads through the public API */
    int rc = EXIT_OK;
    ost_conn *c = NULL;
    ost_value klass = 0;
    ost_iter *it = NULL;
    if (cls) {
        const char *dot = strrchr(cls, '.');
        char module[512];
        snprintf(module, sizeof module, "%.*s", (int)(dot - cls), cls);
        klass = ost_global(module, dot + 1);
    }
    int orc = ost_conn_open(st, &c);
    if (!orc) orc = ost_iter_open(c, klass, &it);
    if (orc) {
        rc = fail("%s: %s", shown(db), c ? ost_conn_errmsg(c) : ost_strerror(orc));
    } else {
        ost_record_info r;
        uint64_t n = 0;
        int k = 0;
        while (n < limit && (k = ost_iter_next(it, &r, NULL)) == 0) {
            char name[600];
            if (r.damaged || !r.cls)
                snprintf(name, sizeof name, "?damaged");
            else
                snprintf(name, sizeof name, "%s.%s", ost_data(ost_global_module(r.cls), NULL),
                         ost_data(ost_global_name(r.cls), NULL));
            printf("%llu %s %zu\n", (unsigned long long)r.oid, name, r.size);
            n++;
        }
        if (n < limit && k != OST_ENOTFOUND)
            rc = fail("%s: %s", shown(db), ost_conn_errmsg(c));
    }
    ost_iter_close(it);
    ost_conn_close(c);
    ost_decref(klass);
    ost_store_close(st);
    return rc;
}

const cli_cmd cmd_ls = {
    .name = "ls",
    .summary = "List objects: oid, class and record size, one per line, in oid order.",
    .usage = "usage: ostore ls DB [--class MODULE.NAME] [--limit N]\n",
    .help = "  --class MODULE.NAME  only instances of this class (e.g. shop.Customer)\n"
            "  --limit N            stop after N lines\n"
            "\nThe size is the whole record: 16-byte header and state pickle. A record\n"
            "whose header is damaged is listed with the class ?damaged.\n",
    .run = run_ls,
};

/* ---- cat ------------------------------------------------------------------------- */

/* The dict of a positional state v (borrowed): v's items zipped with the
 * names of fields, "f1,f2)" (a new reference); 0 when v is no tuple of
 * that many items, or out of memory. */
static ost_value positional_dict(ost_value v, const char *fields) {
    if (ost_typeof(v) != OST_T_TUPLE) return 0;
    size_t n = ost_len(v), i = 0;
    ost_value d = ost_dict_new();
    const char *p = fields;
    while (d && *p && *p != ')') {
        const char *e = p + strcspn(p, ",)");
        if (i >= n || ost_dict_set(d, ost_str(p, (size_t)(e - p)), ost_incref(ost_item(v, i)))) {
            ost_decref(d);
            return 0;
        }
        i++;
        p = *e == ',' ? e + 1 : e;
    }
    if (d && i != n) {
        ost_decref(d);
        return 0;
    }
    return d;
}

static void header(raw_txn *t, const raw_rec *r) {
    printf("oid %llu: %s, serial %llu, %zu bytes\n", (unsigned long long)r->oid,
           raw_class_name(t, r->cid), (unsigned long long)r->serial, r->size);
}

/* The entries cat shows: --from (included), --to (included, as the API's
 * ost_map_range) or --before (excluded), or --prefix; --limit. */
enum { R_FROM, R_TO, R_BEFORE, R_PREFIX, R_N };

typedef struct {
    const char *text[R_N]; /* NULL: not given */
    ost_value key[R_N];
    uint8_t enc[R_N][OST_MAP_KEY_MAX];
    size_t len[R_N];
    /* the end the walk stops at: none, or enc[end] (excluded or not) */
    int end;
    bool end_ex;
    uint64_t limit;
} cat_range;

static void range_free(cat_range *r) {
    for (int i = 0; i < R_N; i++) ost_decref(r->key[i]);
}

/* Parses the range options for the map's kind (a message on failure),
 * and sets where the walk ends: a prefix's end is the first encoding
 * after every key that starts with it (ost_map_prefix_end). */
static int range_parse(const char *db, uint64_t oid, const raw_map *m, cat_range *r) {
    static const char *const opt[R_N] = {"--from", "--to", "--before", "--prefix"};
    for (int i = 0; i < R_N; i++) {
        char why[300];
        if (r->text[i] && raw_key_parse(m->kind, r->text[i], true, &r->key[i], r->enc[i],
                                        &r->len[i], why, sizeof why))
            return fail("%s: %s %llu has keys %s: bad %s '%s': %s (see 'ostore cat --help')",
                        shown(db),
                        m->is_set ? "set" : "map", (unsigned long long)oid, m->kind, opt[i],
                        r->text[i], why);
    }
    r->end = -1;
    if (r->text[R_TO]) r->end = R_TO, r->end_ex = false;
    if (r->text[R_BEFORE]) r->end = R_BEFORE, r->end_ex = true;
    if (r->text[R_PREFIX]) {
        /* the walk starts at the prefix and stops before its end */
        memcpy(r->enc[R_FROM], r->enc[R_PREFIX], r->len[R_PREFIX]);
        r->len[R_FROM] = r->len[R_PREFIX];
        r->len[R_BEFORE] = ost_map_prefix_end(r->enc[R_PREFIX], r->len[R_PREFIX], r->enc[R_BEFORE]);
        if (r->len[R_BEFORE]) r->end = R_BEFORE, r->end_ex = true;
    }
    return EXIT_OK;
}

/* The line before a ranged listing: "entries with 5 <= key <= 9, in key
 * order:". */
static int range_title(const cat_range *r) {
    ost_buf b[R_N] = {{0}};
    int rc = EXIT_OK;
    for (int i = 0; i < R_N && !rc; i++)
        if (r->key[i] && ost_repr(r->key[i], &b[i])) rc = fail("out of memory");
    if (!rc) {
        if (r->text[R_PREFIX]) printf("entries whose key starts with %s", b[R_PREFIX].data);
        else if (r->end < 0) printf("entries with key >= %s", b[R_FROM].data);
        else {
            printf("entries with ");
            if (r->text[R_FROM]) printf("%s <= ", b[R_FROM].data);
            printf("key %s %s", r->end_ex ? "<" : "<=", b[r->end].data);
        }
        printf(", in key order:\n");
    }
    for (int i = 0; i < R_N; i++) ost_buf_free(&b[i]);
    return rc;
}

/* Prints the key (and, for a map, the value) of entry e, indented. */
static int print_entry(const char *db, raw_txn *t, uint64_t oid, const raw_map *m,
                       const raw_ent *e, const ost_repr_options *o, ost_buf *kb, ost_buf *vb) {
    ost_value k = raw_key_decode(m->kind, e->key, e->klen);
    kb->len = 0;
    int rc = k ? ost_repr(k, kb) : 0;
    ost_decref(k);
    if (!k)
        return fail("%s: map %llu: a %zu-byte key that does not decode as %s "
                    "(run 'ostore check %s')",
                    shown(db), (unsigned long long)oid, e->klen, m->kind, shown(db));
    if (rc) return fail("out of memory");
    if (m->is_set) {
        printf("  %s\n", kb->data);
        return EXIT_OK;
    }
    char why[300];
    if (raw_value_repr(t, e->val, e->vlen, o, vb, why, sizeof why))
        return fail("%s: map %llu, key %.200s: the value does not decode: %s", shown(db),
                    (unsigned long long)oid, kb->data, why);
    printf("  %s: %s\n", kb->data, vb->data);
    return EXIT_OK;
}

/* Prints the map's entries in the range, at most limit of them, then how
 * many more the range holds. */
static int cat_entries(const char *db, raw_txn *t, uint64_t oid, const raw_map *m,
                       const cat_range *r, const ost_repr_options *o) {
    char a[32], b[32];
    ost_buf kb = {0}, vb = {0};
    bool ranged = r->text[R_FROM] || r->text[R_TO] || r->text[R_BEFORE] || r->text[R_PREFIX];
    int rc = EXIT_OK;
    if (ranged) {
        if (range_title(r)) return EXIT_FAIL;
    } else if (m->count == 0) {
        printf("no entries\n");
    } else if (m->count <= r->limit) {
        printf("%s entr%s, in key order:\n", fmt_count(a, sizeof a, m->count),
               m->count == 1 ? "y" : "ies");
    } else {
        printf("%s entries; the first %s, in key order:\n", fmt_count(a, sizeof a, m->count),
               fmt_count(b, sizeof b, r->limit));
    }
    raw_ents *c;
    bool from = r->text[R_FROM] || r->text[R_PREFIX];
    if (raw_ents_open(t, oid, from ? r->enc[R_FROM] : NULL, r->len[R_FROM], &c)) return EXIT_FAIL;
    raw_ent e;
    uint64_t shown = 0, more = 0;
    int k;
    while ((k = raw_ents_next(c, &e)) > 0) {
        if (r->end >= 0) {
            int cmp = raw_key_cmp(e.key, e.klen, r->enc[r->end], r->len[r->end]);
            if (cmp > 0 || (cmp == 0 && r->end_ex)) break;
        }
        if (shown == r->limit) {
            more++; /* counted, not decoded */
            continue;
        }
        if ((rc = print_entry(db, t, oid, m, &e, o, &kb, &vb))) break;
        shown++;
    }
    raw_ents_close(c);
    if (!rc && k < 0) rc = EXIT_FAIL;
    if (!rc && ranged && shown == 0) printf("  (none)\n");
    if (!rc && more)
        printf("... and %s more%s (--limit N or --limit all shows more)\n",
               fmt_count(a, sizeof a, more), ranged ? " in the range" : "");
    ost_buf_free(&kb);
    ost_buf_free(&vb);
    return rc;
}

static int run_cat(int argc, char **argv) {
    const char *dis = NULL, *limit_s = NULL, *digits_s = NULL, *max_s = NULL, *pos[2];
    cat_range range = {.limit = 10};
    cli_opt opts[] = {{"--dis", false, &dis},
                      {"--from", true, &range.text[R_FROM]},
                      {"--to", true, &range.text[R_TO]},
                      {"--before", true, &range.text[R_BEFORE]},
                      {"--prefix", true, &range.text[R_PREFIX]},
                      {"--limit", true, &limit_s},
                      {"--int-digits", true, &digits_s},
                      {"--max-output", true, &max_s}};
    int prc = parse_args(&cmd_cat, argc, argv, opts, 8, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    ost_repr_options ro;
    if (repr_options(&cmd_cat, digits_s, max_s, &ro)) return EXIT_USAGE;
    uint64_t oid;
    if (parse_oid(&cmd_cat, pos[1], &oid)) return EXIT_USAGE;
    if (limit_s && strcmp(limit_s, "all") == 0) range.limit = UINT64_MAX;
    else if (limit_s && (!parse_u64(limit_s, &range.limit) || range.limit == 0))
        return bad_usage(&cmd_cat, "cat: --limit needs a number of at least 1, or all, not '%s'",
                         limit_s);
    bool entry_opts = range.text[R_FROM] || range.text[R_TO] || range.text[R_BEFORE] ||
                      range.text[R_PREFIX] || limit_s;
    if (dis && entry_opts)
        return bad_usage(&cmd_cat, "cat: --dis shows the record's pickle only; it takes no --from, "
                                   "--to, --before, --prefix or --limit");
    if (range.text[R_TO] && range.text[R_BEFORE])
        return bad_usage(&cmd_cat, "cat: --to KEY (included) and --before KEY (excluded) both end "
                                   "the range: give one");
    if (range.text[R_PREFIX] && (range.text[R_FROM] || range.text[R_TO] || range.text[R_BEFORE]))
        return bad_usage(&cmd_cat, "cat: --prefix KEY is a range of its own: it takes no --from, "
                                   "--to or --before");
    if (dis && max_s)
        return bad_usage(&cmd_cat, "cat: --dis lists the pickle as it goes; it takes no "
                                   "--max-output");
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    raw_rec r;
    int rc = raw_get(t, oid, &r);
    if (rc) {
        close_ro(st, t);
        if (rc == OST_ENOTFOUND) return fail("%s: oid %llu: no such object", shown(db),
                                             (unsigned long long)oid);
        return fail("%s: oid %llu: %s", shown(db), (unsigned long long)oid, ost_strerror(rc));
    }
    if (r.bad_header) {
        close_ro(st, t);
        return fail("%s: oid %llu: damaged record (%s, %zu bytes)", shown(db), (unsigned long long)oid,
                    r.damage, r.size);
    }
    bool is_map = raw_map_class(t, &r) != 0;
    if (entry_opts && !is_map) {
        rc = fail("%s: oid %llu is a %s, not a map or set: --from, --to, --before, --prefix and "
                  "--limit are for maps",
                  shown(db), (unsigned long long)oid, raw_class_name(t, r.cid));
        close_ro(st, t);
        return rc;
    }
    ost_buf out = {0};
    rc = EXIT_OK;
    if (dis) {
        /* the listing up to a bad opcode is worth seeing: printed, then the error */
        header(t, &r);
        size_t off = 0;
        int drc = ost_pickle_dis_ex(r.pickle, r.len, &ro, write_stdout, NULL, &off);
        fflush(stdout);
        if (drc == OST_EIO)
            rc = fail("write error: %s", strerror(errno));
        else if (drc)
            rc = fail("%s: oid %llu: %s at offset %zu of the pickle", shown(db), (unsigned long long)oid,
                      ost_strerror(drc), off);
    } else {
        ost_reader *rd = ost_reader_new();
        ost_value v = 0;
        int lrc = rd ? OST_OK : OST_ENOMEM;
        if (rd) {
            ost_reader_set_persistent_load(rd, raw_keep_pid, NULL);
            lrc = ost_load(rd, r.pickle, r.len, &v, NULL);
        }
        const char *fl = raw_class_fields(t, r.cid);
        if (!lrc && fl) {
            /* a positional state (format 4): shown as the dict of its
             * fields, what a format-3 record of the object holds */
            ost_value d = positional_dict(v, fl);
            if (d) { /* else: shown as stored (the library says it is damage) */
                ost_release(v);
                v = d;
            }
        }
        raw_map m;
        char why[200];
        if (lrc)
            rc = fail("%s: oid %llu: record does not decode: %s", shown(db),
                      (unsigned long long)oid,
                      rd ? ost_reader_errmsg(rd) : "out of memory");
        else if (ost_repr_ex(v, &out, &ro))
            rc = fail("out of memory");
        else if (is_map && raw_map_read(t, &r, &m, why, sizeof why))
            rc = fail("%s: oid %llu: %s", shown(db), (unsigned long long)oid, why);
        else if (is_map && range_parse(db, oid, &m, &range))
            rc = EXIT_FAIL;
        else {
            header(t, &r);
            printf("%s\n", out.data);
            if (is_map) {
                fflush(stdout); /* entries that fail print their message after these */
                rc = cat_entries(db, t, oid, &m, &range, &ro);
            }
        }
        ost_release(v);
        ost_reader_free(rd);
    }
    range_free(&range);
    ost_buf_free(&out);
    close_ro(st, t);
    return rc;
}

const cli_cmd cmd_cat = {
    .name = "cat",
    .summary = "Print an object's stored state (and a map's entries), or its pickle disassembled.",
    .usage = "usage: ostore cat DB OID [--int-digits N] [--max-output N]\n"
             "       ostore cat DB OID --dis [--int-digits N]\n"
             "       ostore cat DB OID [--from KEY] [--to KEY|--before KEY] [--limit N|all]\n"
             "       ostore cat DB OID --prefix KEY [--limit N|all]   (a map or set)\n",
    .help = "The first line names the oid, class, serial (the commit that wrote it) and\n"
            "record size. Then the state, as Python's BUILD would receive it (for a class\n"
            "with fields, the dict of its set fields), printed like Python's repr, with\n"
            "references to other stored objects shown as persistent(OID). An object the\n"
            "state reaches more than once prints in full once, labelled #N=, then as #N#.\n"
            "\n  --dis           list the state pickle's opcodes instead (like pickletools.dis;\n"
            "                  up to 32 levels of indentation, then the depth as [N])\n"
            "  --int-digits N  an int of more than N decimal digits prints in hexadecimal,\n"
            "                  0x... (default 4300, as Python; 0: always decimal)\n"
            "  --max-output N  cut a printed value after N bytes, marked\n"
            "                  '... (output truncated at N bytes)' (default 64 MiB; 0: no limit)\n"
            "\nOid 0 is the root, a persistent.mapping.PersistentMapping.\n"
            "\nFor a map or set (ostore.maps.OrderedMap, OrderedSet), whose record holds\n"
            "its key kind and count, its entries follow in key order, one a line,\n"
            "KEY: VALUE for a map and KEY for a set; the first 10, unless\n"
            "  --from KEY     starts at KEY (included)\n"
            "  --to KEY       ends at KEY (included, as the API's ost_map_range)\n"
            "  --before KEY   ends before KEY (excluded)\n"
            "  --prefix KEY   shows the keys that start with KEY: for str and bytes\n"
            "                 keys, those that start with that text or those bytes;\n"
            "                 for tuple keys, those whose first elements are KEY's\n"
            "  --limit N|all  shows N entries (default 10), or all of them\n"
            "\nKEY is written as ostore prints keys: an int as a decimal number (-5);\n"
            "a str or bytes as a Python string literal ('a b', b'\\x00') with the\n"
            "escapes \\\\ \\' \\\" \\n \\r \\t \\0 \\xhh (str also \\uXXXX \\UXXXXXXXX), or as\n"
            "bare text taken as it is; a tuple key as its elements separated by\n"
            "commas, in optional parentheses, where bare text ends at a comma and\n"
            "loses the spaces around it. Fewer elements than the kind has make a\n"
            "prefix: for keys (int, str), --prefix 5, shows every key that starts\n"
            "with 5, as does --from 5, --before 6, (--to 5, ends before (5, ''):\n"
            "a shorter tuple sorts first, as in Python).\n",
    .run = run_cat,
};

/* ---- refs ---------------------------------------------------------------------------- */

typedef struct {
    uint64_t *v;
    size_t n, cap;
    bool oom;
} oidvec;

static void oid_push(oidvec *o, uint64_t x) {
    if (ost__reserve((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v, 16)) {
        o->oom = true;
        return;
    }
    o->v[o->n++] = x;
}

static void collect(void *ud, uint64_t oid) { oid_push(ud, oid); }

typedef struct {
    uint64_t target;
    bool hit;
} find_ctx;

static void find_target(void *ud, uint64_t oid) {
    find_ctx *f = ud;
    if (oid == f->target) f->hit = true;
}

static void print_oid_line(raw_txn *t, uint64_t oid) {
    raw_rec r;
    int rc = raw_get(t, oid, &r);
    printf("  %llu %s\n", (unsigned long long)oid,
           rc == OST_ENOTFOUND ? "(missing: no such object)"
           : rc                ? "(unreadable)"
           : r.bad_header      ? "?damaged"
                               : raw_class_name(t, r.cid));
}

/* Maps whose entries reference the target: each with how many entries
 * and the first key (encoded). */
typedef struct {
    uint64_t map;
    uint64_t hits;
    uint8_t *key;
    size_t klen;
} map_hit;

typedef struct {
    raw_txn *t;
    uint64_t target;
    map_hit *v;
    size_t n, cap;
    uint64_t unscanned; /* entries whose values do not scan */
    bool oom;
} hits_ctx;

/* raw_each_map's callback: scans the values of one map's entries. */
static int scan_map(void *ud, uint64_t map) {
    hits_ctx *h = ud;
    raw_ents *c;
    if (raw_ents_open(h->t, map, NULL, 0, &c)) return EXIT_FAIL;
    raw_ents_skip_damaged(c); /* counted as not scanned */
    raw_ent e;
    int k;
    map_hit hit = {.map = map};
    while ((k = raw_ents_next(c, &e)) > 0) {
        if (!e.vlen) continue; /* a set's entry */
        find_ctx f = {h->target, false};
        if (raw_scan_pickle_refs(e.val, e.vlen, find_target, &f)) h->unscanned++;
        if (!f.hit || hit.hits++) continue;
        if ((hit.key = malloc(e.klen ? e.klen : 1))) memcpy(hit.key, e.key, hit.klen = e.klen);
        else h->oom = true;
    }
    h->unscanned += raw_ents_skipped(c);
    raw_ents_close(c);
    if (k < 0) {
        free(hit.key);
        return EXIT_FAIL;
    }
    if (!hit.hits) return 0;
    if (ost__reserve((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v, 8)) {
        free(hit.key);
        h->oom = true;
        return 0;
    }
    h->v[h->n++] = hit;
    return 0;
}

/* "  OID CLASS (key K)" for a map whose entries reference the target. */
static void print_hit_line(raw_txn *t, const map_hit *h) {
    raw_rec r;
    raw_map m;
    char why[160], a[32];
    int rc = raw_get(t, h->map, &r);
    ost_value k = 0;
    ost_buf b = {0};
    if (!rc && raw_map_read(t, &r, &m, why, sizeof why) == 0)
        k = raw_key_decode(m.kind, h->key, h->klen);
    bool shown = k && ost_repr(k, &b) == 0;
    ost_decref(k);
    printf("  %llu %s (%s %s", (unsigned long long)h->map,
           rc == OST_ENOTFOUND ? "(missing: no such object)"
           : rc || r.bad_header ? "?damaged"
                                : raw_class_name(t, r.cid),
           h->hits == 1 ? "key" : "keys", shown ? b.data : "(undecodable)");
    if (h->hits > 1) printf(" and %s more", fmt_count(a, sizeof a, h->hits - 1));
    printf(")\n");
    ost_buf_free(&b);
}

static int run_refs(int argc, char **argv) {
    const char *pos[2];
    int prc = parse_args(&cmd_refs, argc, argv, NULL, 0, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    uint64_t oid;
    if (parse_oid(&cmd_refs, pos[1], &oid)) return EXIT_USAGE;
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    raw_rec r;
    int rc = raw_get(t, oid, &r);
    if (rc && rc != OST_ENOTFOUND) {
        close_ro(st, t);
        return fail("%s: oid %llu: %s", shown(db), (unsigned long long)oid, ost_strerror(rc));
    }
    bool missing = rc == OST_ENOTFOUND;
    oidvec out = {0}, in = {0};
    int src = missing ? 0 : raw_scan_refs(&r, collect, &out);
    if (src) {
        free(out.v);
        close_ro(st, t);
        return fail("%s: oid %llu: record does not decode (%s): its references are unknown",
                    shown(db),
                    (unsigned long long)oid, ost_strerror(src));
    }
    /* a map references what its entries' values reference */
    if (!missing && raw_map_class(t, &r) == 1) {
        raw_ents *c;
        raw_ent e;
        int k = -1;
        if (raw_ents_open(t, oid, NULL, 0, &c) == 0) {
            while ((k = raw_ents_next(c, &e)) > 0)
                if (raw_scan_pickle_refs(e.val, e.vlen, collect, &out)) {
                    k = -2;
                    break;
                }
            raw_ents_close(c);
        }
        if (k < 0) {
            free(out.v);
            close_ro(st, t);
            if (k == -2)
                return fail("%s: map %llu: an entry's value does not decode: its references are "
                            "unknown (run 'ostore check %s')",
                            shown(db), (unsigned long long)oid, shown(db));
            return EXIT_FAIL;
        }
    }
    if (out.n) qsort(out.v, out.n, sizeof *out.v, ost__u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < out.n; i++)
        if (!u || out.v[u - 1] != out.v[i]) out.v[u++] = out.v[i];
    out.n = u;
    char *cls = strdup(missing ? "" : raw_class_name(t, r.cid));
    /* who references it: every record and every map entry is scanned */
    raw_iter *it;
    uint64_t unscanned = 0;
    hits_ctx hits = {.t = t, .target = oid};
    rc = raw_iter_open(t, &it);
    if (!rc) {
        raw_rec x;
        int k;
        while ((k = raw_iter_next(it, &x)) > 0) {
            find_ctx f = {oid, false};
            if (raw_scan_refs(&x, find_target, &f)) unscanned++;
            if (f.hit) oid_push(&in, x.oid);
        }
        if (k < 0) rc = EXIT_FAIL;
        raw_iter_close(it);
    }
    if (!rc) rc = raw_each_map(t, scan_map, &hits);
    if (!rc && (out.oom || in.oom || hits.oom || !cls)) rc = fail("out of memory");
    /* both lists ascend: merged, each oid once */
    size_t nin = 0;
    for (size_t i = 0, j = 0; !rc && (i < in.n || j < hits.n); nin++) {
        if (j == hits.n || (i < in.n && in.v[i] < hits.v[j].map)) i++;
        else if (i == in.n || hits.v[j].map < in.v[i]) j++;
        else i++, j++;
    }
    if (!rc && missing && nin == 0) {
        rc = fail("%s: oid %llu: no such object", shown(db), (unsigned long long)oid);
    } else if (!rc) {
        if (missing)
            printf("oid %llu: no such object\n", (unsigned long long)oid);
        else
            printf("oid %llu (%s) references %zu object%s:\n", (unsigned long long)oid, cls,
                   out.n, out.n == 1 ? "" : "s");
        for (size_t i = 0; i < out.n; i++) print_oid_line(t, out.v[i]);
        printf("oid %llu is referenced by %zu object%s:\n", (unsigned long long)oid, nin,
               nin == 1 ? "" : "s");
        for (size_t i = 0, j = 0; i < in.n || j < hits.n;) {
            if (j == hits.n || (i < in.n && in.v[i] < hits.v[j].map)) {
                print_oid_line(t, in.v[i++]);
            } else {
                print_hit_line(t, &hits.v[j]);
                if (i < in.n && in.v[i] == hits.v[j].map) i++;
                j++;
            }
        }
        if (unscanned)
            printf("note: %llu record%s could not be scanned (damaged); run 'ostore check %s'\n",
                   (unsigned long long)unscanned, unscanned == 1 ? "" : "s", shown(db));
        if (hits.unscanned)
            printf("note: %llu map entr%s could not be scanned (damaged); run 'ostore check %s'\n",
                   (unsigned long long)hits.unscanned, hits.unscanned == 1 ? "y" : "ies",
                   shown(db));
        if (missing)
            rc = fail("%s: oid %llu: no such object, yet %zu object%s it (dangling; "
                      "run 'ostore check %s')",
                      shown(db), (unsigned long long)oid, nin,
                      nin == 1 ? " references" : "s reference", shown(db));
    }
    for (size_t j = 0; j < hits.n; j++) free(hits.v[j].key);
    free(hits.v);
    free(cls);
    free(out.v);
    free(in.v);
    close_ro(st, t);
    return rc;
}

const cli_cmd cmd_refs = {
    .name = "refs",
    .summary = "Show the oids an object references and the oids that reference it.",
    .usage = "usage: ostore refs DB OID\n",
    .help = "References are the persistent ids in the record's pickle; a map's\n"
            "references are those of its entries' values too. Finding the objects that\n"
            "reference OID reads every record and every map entry (no index is kept),\n"
            "so it takes about as long as 'ostore check'. Each oid is listed once, with\n"
            "its class, or (missing) when no record has it; a map whose entries\n"
            "reference OID also names the first such key, and how many more there are.\n",
    .run = run_refs,
};
