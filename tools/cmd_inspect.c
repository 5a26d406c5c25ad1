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

static int run_info(int argc, char **argv) {
    const char *pos[1];
    int prc = parse_args(&cmd_info, argc, argv, NULL, 0, pos, 1, 1, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    uint64_t format = 0, next_oid = 0, last = 0, next_class = 0;
    int rc = raw_meta(t, "format", &format);
    if (!rc) rc = raw_meta(t, "next_oid", &next_oid);
    if (!rc) rc = raw_meta(t, "last_serial", &last);
    if (!rc) rc = raw_meta(t, "next_class", &next_class);
    if (rc) {
        close_ro(st, t);
        return fail("%s: damaged meta: %s", db, ost_strerror(rc));
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
    uint64_t n = 0, total = 0, damaged = 0;
    if (raw_iter_open(t, &it)) {
        rc = 1;
    } else {
        raw_rec r;
        int k;
        while ((k = raw_iter_next(it, &r)) > 0) {
            n++;
            total += r.size;
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
        uint64_t psize, used, map;
        raw_env(t, &psize, &used, &map);
        if (recorded_map_size()) map = recorded_map_size();
        printf("store        %s\n", db);
        printf("format       %llu (this ostore reads format %d)\n", (unsigned long long)format,
               OST_STORE_FORMAT);
        printf("objects      %s\n", fmt_count(a, sizeof a, n));
        printf("records      %s (average %llu bytes, 16-byte header included)\n",
               fmt_bytes(b, sizeof b, (double)total),
               (unsigned long long)(n ? (total + n / 2) / n : 0));
        printf("next oid     %s\n", fmt_count(a, sizeof a, next_oid));
        printf("last commit  %s (serial)\n", fmt_count(a, sizeof a, last));
        printf("disk         data.mdb %s, lock.mdb %s\n",
               fmt_bytes(a, sizeof a, (double)file_size(db, "data.mdb")),
               fmt_bytes(b, sizeof b, (double)file_size(db, "lock.mdb")));
        printf("map          %s, %s used (%.0f%%), %llu-byte pages\n",
               fmt_bytes(a, sizeof a, (double)map), fmt_bytes(c, sizeof c, (double)(used * psize)),
               map ? 100.0 * (double)(used * psize) / (double)map : 0.0, (unsigned long long)psize);
        printf("classes      %zu\n", ncls);
        for (size_t i = 0; i < ncls; i++) {
            const char *m, *nm;
            raw_class_at(t, i, &m, &nm);
            char q[512];
            snprintf(q, sizeof q, "%s.%s", m, nm);
            printf("  %-36s %12s objects %12s\n", q, fmt_count(a, sizeof a, counts[i]),
                   fmt_bytes(b, sizeof b, (double)bytes[i]));
        }
        if (counts[ncls])
            printf("  %-36s %12s objects %12s\n",
                   damaged ? "(damaged headers, unknown classes)" : "(unknown classes)",
                   fmt_count(a, sizeof a, counts[ncls]), fmt_bytes(b, sizeof b, (double)bytes[ncls]));
    }
    free(counts);
    free(bytes);
    close_ro(st, t);
    return rc ? EXIT_FAIL : EXIT_OK;
}

const cli_cmd cmd_info = {
    .name = "info",
    .summary = "Show a store's format, object count, sizes, map use and classes.",
    .usage = "usage: ostore info DB\n",
    .help = "Reads every record header once (the store is opened read-only) and prints:\n"
            "the format version, the number of objects and the bytes of their records,\n"
            "the next oid, the serial of the last commit, the size of data.mdb and\n"
            "lock.mdb, the LMDB map size and how much of it is used, and each class\n"
            "with its number of instances and their bytes.\n",
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
        return fail("%s: no class %s in this store ('ostore info %s' lists them)", db, cls, db);
    }
    raw_iter *it;
    int rc = raw_iter_open(t, &it);
    if (!rc) {
        raw_rec r;
        int k = 0;
        uint64_t shown = 0;
        while (shown < limit && (k = raw_iter_next(it, &r)) > 0) {
            if (cls && (r.bad_header || r.cid != want)) continue;
            printf("%llu %s %zu\n", (unsigned long long)r.oid,
                   r.bad_header ? "?damaged" : raw_class_name(t, r.cid), r.size);
            shown++;
        }
        if (shown < limit && k < 0) rc = EXIT_FAIL;
        raw_iter_close(it);
    }
    close_ro(st, t);
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

/* References print as persistent(oid): the state is shown as stored. */
static int keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

static void header(raw_txn *t, const raw_rec *r) {
    printf("oid %llu: %s, serial %llu, %zu bytes\n", (unsigned long long)r->oid,
           raw_class_name(t, r->cid), (unsigned long long)r->serial, r->size);
}

static int run_cat(int argc, char **argv) {
    const char *dis = NULL, *pos[2];
    cli_opt opts[] = {{"--dis", false, &dis}};
    int prc = parse_args(&cmd_cat, argc, argv, opts, 1, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    uint64_t oid;
    if (parse_oid(&cmd_cat, pos[1], &oid)) return EXIT_USAGE;
    const char *db = pos[0];
    ost_store *st;
    raw_txn *t;
    if (open_ro(db, &st, &t)) return EXIT_FAIL;
    raw_rec r;
    int rc = raw_get(t, oid, &r);
    if (rc) {
        close_ro(st, t);
        if (rc == OST_ENOTFOUND) return fail("%s: oid %llu: no such object", db, (unsigned long long)oid);
        return fail("%s: oid %llu: %s", db, (unsigned long long)oid, ost_strerror(rc));
    }
    if (r.bad_header) {
        close_ro(st, t);
        return fail("%s: oid %llu: damaged record header (%zu bytes)", db, (unsigned long long)oid,
                    r.size);
    }
    ost_buf out = {0};
    rc = EXIT_OK;
    if (dis) {
        /* the listing up to a bad opcode is worth seeing: printed, then the error */
        header(t, &r);
        size_t off = 0;
        int drc = ost_pickle_dis(r.pickle, r.len, &out, &off);
        if (out.len) fwrite(out.data, 1, out.len, stdout);
        if (drc)
            rc = fail("%s: oid %llu: %s at offset %zu of the pickle", db, (unsigned long long)oid,
                      ost_strerror(drc), off);
    } else {
        ost_reader *rd = ost_reader_new();
        ost_value v = 0;
        int lrc = rd ? OST_OK : OST_ENOMEM;
        if (rd) {
            ost_reader_set_persistent_load(rd, keep_pid, NULL);
            lrc = ost_load(rd, r.pickle, r.len, &v, NULL);
        }
        if (lrc)
            rc = fail("%s: oid %llu: record does not decode: %s", db, (unsigned long long)oid,
                      rd ? ost_reader_errmsg(rd) : "out of memory");
        else if (ost_repr(v, &out))
            rc = fail("out of memory");
        else {
            header(t, &r);
            printf("%s\n", out.data);
        }
        ost_release(v);
        ost_reader_free(rd);
    }
    ost_buf_free(&out);
    close_ro(st, t);
    return rc;
}

const cli_cmd cmd_cat = {
    .name = "cat",
    .summary = "Print an object's stored state, Python-like, or its pickle disassembled.",
    .usage = "usage: ostore cat DB OID [--dis]\n",
    .help = "The first line names the oid, class, serial (the commit that wrote it) and\n"
            "record size. Then the state, as Python's BUILD would receive it (for a class\n"
            "with fields, the dict of its set fields), printed like Python's repr, with\n"
            "references to other stored objects shown as persistent(OID).\n"
            "\n  --dis   list the state pickle's opcodes instead (like pickletools.dis)\n"
            "\nOid 0 is the root, a persistent.mapping.PersistentMapping.\n",
    .run = run_cat,
};

/* ---- refs ---------------------------------------------------------------------------- */

typedef struct {
    uint64_t *v;
    size_t n, cap;
    bool oom;
} oidvec;

static void oid_push(oidvec *o, uint64_t x) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        uint64_t *n = realloc(o->v, cap * sizeof *n);
        if (!n) {
            o->oom = true;
            return;
        }
        o->v = n;
        o->cap = cap;
    }
    o->v[o->n++] = x;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
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
        return fail("%s: oid %llu: %s", db, (unsigned long long)oid, ost_strerror(rc));
    }
    bool missing = rc == OST_ENOTFOUND;
    oidvec out = {0}, in = {0};
    int src = missing ? 0 : raw_scan_refs(&r, collect, &out);
    if (src) {
        free(out.v);
        close_ro(st, t);
        return fail("%s: oid %llu: record does not decode (%s): its references are unknown", db,
                    (unsigned long long)oid, ost_strerror(src));
    }
    if (out.n) qsort(out.v, out.n, sizeof *out.v, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < out.n; i++)
        if (!u || out.v[u - 1] != out.v[i]) out.v[u++] = out.v[i];
    out.n = u;
    char *cls = strdup(missing ? "" : raw_class_name(t, r.cid));
    /* who references it: every record is scanned */
    raw_iter *it;
    uint64_t unscanned = 0;
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
    if (!rc && (out.oom || in.oom || !cls)) rc = fail("out of memory");
    if (!rc && missing && in.n == 0) {
        rc = fail("%s: oid %llu: no such object", db, (unsigned long long)oid);
    } else if (!rc) {
        if (missing)
            printf("oid %llu: no such object\n", (unsigned long long)oid);
        else
            printf("oid %llu (%s) references %zu object%s:\n", (unsigned long long)oid, cls,
                   out.n, out.n == 1 ? "" : "s");
        for (size_t i = 0; i < out.n; i++) print_oid_line(t, out.v[i]);
        printf("oid %llu is referenced by %zu object%s:\n", (unsigned long long)oid, in.n,
               in.n == 1 ? "" : "s");
        for (size_t i = 0; i < in.n; i++) print_oid_line(t, in.v[i]);
        if (unscanned)
            printf("note: %llu record%s could not be scanned (damaged); run 'ostore check %s'\n",
                   (unsigned long long)unscanned, unscanned == 1 ? "" : "s", db);
        if (missing)
            rc = fail("%s: oid %llu: no such object, yet %zu object%s it (dangling; "
                      "run 'ostore check %s')",
                      db, (unsigned long long)oid, in.n, in.n == 1 ? " references" : "s reference",
                      db);
    }
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
    .help = "References are the persistent ids in the record's pickle. Finding the\n"
            "objects that reference OID reads every record (no index is kept), so it\n"
            "takes about as long as 'ostore check'. Each oid is listed once, with its\n"
            "class, or (missing) when no record has it.\n",
    .run = run_refs,
};
