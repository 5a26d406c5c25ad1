/* ostore CLI: export and import, a versioned dump of a store's records
 * and map entries (docs/cli.md, "Export format"). All integers
 * little-endian:
 *
 *   header   "OSTDUMP\n", u32 dump version (2), u32 store format (1 or 2),
 *            u64 records, u64 pickle bytes (sum of the pickle lengths),
 *            u64 next_oid, u64 last_serial, u64 next_class,
 *            u64 entries, u64 entry bytes (sum of the key and value lengths)
 *   classes  u32 count, then per class: u32 id, u16 len + module,
 *            u16 len + name
 *   records  in ascending oid order: u64 oid, u64 serial, u32 class id,
 *            u32 len + the state pickle
 *   entries  by map oid, then key, ascending: u64 map oid, u16 len + the
 *            encoded key, u64 serial, u32 len + the value pickle (empty
 *            for a set)
 *   trailer  "OSTDEND\n", u32 CRC-32 (zlib's) of every byte before it
 *
 * Version 1 (still read) has neither the two entry counters nor the
 * entries. An import rebuilds the same records, entries, serials, class
 * ids and counters, so exporting the imported store gives the same file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/endian.h"
#include "cli.h"

#define DUMP_MAGIC "OSTDUMP\n"
#define DUMP_END "OSTDEND\n"
#define DUMP_VERSION 2 /* written; versions 1 and 2 are read */
#define MAX_PICKLE (1u << 31)

/* ---- CRC-32 (the polynomial of zlib, gzip and PNG) ------------------------ */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
    while (n--) crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- a checksummed stream ---------------------------------------------------- */

typedef struct {
    FILE *f;
    const char *name;
    uint32_t crc;
    uint64_t off;  /* bytes written or read so far, a short read's included */
    uint64_t size; /* import: the file's size when it is a regular file, else 0 */
    bool err;
} stream;

static void put(stream *s, const void *p, size_t n) {
    if (s->err) return;
    s->crc = crc_update(s->crc, p, n);
    s->off += n;
    if (n && fwrite(p, 1, n, s->f) != n) s->err = true;
}

static void put_u16(stream *s, uint16_t v) {
    uint8_t b[2];
    ost__le16(b, v);
    put(s, b, 2);
}
static void put_u32(stream *s, uint32_t v) {
    uint8_t b[4];
    ost__le32(b, v);
    put(s, b, 4);
}
static void put_u64(stream *s, uint64_t v) {
    uint8_t b[8];
    ost__le64(b, v);
    put(s, b, 8);
}

/* Reads exactly n bytes; false at end of input or on error. A short read
 * still counts the bytes it got in s->off, so that a truncated file's
 * message names its true end. */
static bool get(stream *s, void *p, size_t n) {
    if (s->err) return false;
    size_t got = n ? fread(p, 1, n, s->f) : 0;
    if (got != n) {
        s->off += got;
        s->err = true;
        return false;
    }
    s->crc = crc_update(s->crc, p, n);
    s->off += n;
    return true;
}
static bool get_u16(stream *s, uint16_t *v) {
    uint8_t b[2];
    if (!get(s, b, 2)) return false;
    *v = ost__rd_le16(b);
    return true;
}
static bool get_u32(stream *s, uint32_t *v) {
    uint8_t b[4];
    if (!get(s, b, 4)) return false;
    *v = ost__rd_le32(b);
    return true;
}
static bool get_u64(stream *s, uint64_t *v) {
    uint8_t b[8];
    if (!get(s, b, 8)) return false;
    *v = ost__rd_le64(b);
    return true;
}

/* ---- maps ---------------------------------------------------------------------------- */

/* The map records of a store or dump, in oid order, and how many entries
 * were found for each. Export and import check the same things: each map
 * record holds a kind and a count, every entry belongs to a map record and
 * has a key of its kind and (for a map, not a set) a value, and each map
 * has as many entries as its record counts. */
typedef struct {
    uint64_t oid;
    raw_map m;
    uint64_t seen;
} dump_map;

typedef struct {
    dump_map *v;
    size_t n, cap;
} map_list;

static int maps_add(map_list *l, uint64_t oid, const raw_map *m) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        dump_map *n = realloc(l->v, cap * sizeof *n);
        if (!n) return fail("out of memory");
        l->v = n;
        l->cap = cap;
    }
    l->v[l->n++] = (dump_map){oid, *m, 0};
    return EXIT_OK;
}

static dump_map *maps_find(map_list *l, uint64_t oid) {
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid].oid < oid) lo = mid + 1;
        else hi = mid;
    }
    return lo < l->n && l->v[lo].oid == oid ? &l->v[lo] : NULL;
}

/* Why entry (key, value) cannot be in map d, or NULL when it can. */
static const char *entry_problem(const dump_map *d, const uint8_t *key, size_t klen, size_t vlen) {
    ost_value k = raw_key_decode(d->m.kind, key, klen);
    if (!k) return "a key that does not decode as the map's kind";
    ost_decref(k);
    if (d->m.is_set && vlen) return "an entry of a set with a value";
    if (!d->m.is_set && vlen < 2) return "an entry without a value pickle";
    if (vlen >= MAX_PICKLE) return "a value too large to export";
    return NULL;
}

/* The first map whose record counts other than its entries, or NULL. */
static const dump_map *count_mismatch(const map_list *l) {
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].seen != l->v[i].m.count) return &l->v[i];
    return NULL;
}

typedef struct {
    raw_txn *t;
    const char *db;
    map_list *maps;
    stream *s;             /* NULL: the first pass, which checks and counts */
    uint64_t entries, bytes;
} export_ctx;

/* raw_each_map's callback for export: one map's entries, checked and
 * counted (first pass) or written (second pass). */
static int export_map(void *ud, uint64_t map) {
    export_ctx *x = ud;
    dump_map *d = maps_find(x->maps, map);
    if (!d)
        return fail("%s: entries under oid %llu, which is not a map (no map record): cannot "
                    "export them (run 'ostore check %s')",
                    shown(x->db), (unsigned long long)map, shown(x->db));
    raw_ents *c;
    if (raw_ents_open(x->t, map, NULL, 0, &c)) return EXIT_FAIL;
    raw_ent e;
    int k, rc = EXIT_OK;
    while ((k = raw_ents_next(c, &e)) > 0) {
        if (x->s) {
            put_u64(x->s, map);
            put_u16(x->s, (uint16_t)e.klen);
            put(x->s, e.key, e.klen);
            put_u64(x->s, e.serial);
            put_u32(x->s, (uint32_t)e.vlen);
            put(x->s, e.val, e.vlen);
            continue;
        }
        const char *why = entry_problem(d, e.key, e.klen, e.vlen);
        if (why) {
            rc = fail("%s: map %llu: %s: cannot export it (run 'ostore check %s')", shown(x->db),
                      (unsigned long long)map, why, shown(x->db));
            break;
        }
        d->seen++;
        x->entries++;
        x->bytes += e.klen + e.vlen;
    }
    raw_ents_close(c);
    return rc ? rc : k < 0 ? EXIT_FAIL : EXIT_OK;
}

/* ---- export ---------------------------------------------------------------------- */

static int run_export(int argc, char **argv) {
    const char *pos[2];
    int prc = parse_args(&cmd_export, argc, argv, NULL, 0, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0], *file = pos[1];
    bool to_stdout = strcmp(file, "-") == 0;
    guard_crashes(db);
    ost_store *st;
    raw_txn *t;
    if (open_store(db, false, &st)) return EXIT_FAIL;
    if (raw_begin(st, &t)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    crc_init();
    int rc = EXIT_OK;
    char tmp[PATH_MAX];
    FILE *f = stdout;
    tmp[0] = 0;
    uint64_t next_oid = 0, last = 0, next_class = 0, format = 0, records = 0, bytes = 0;
    map_list maps = {0};
    /* the output first: a path that cannot be written fails before the
     * store is read, and the message names it */
    if (!to_stdout) {
        FILE *o = NULL;
        int n = snprintf(tmp, sizeof tmp, "%s.tmp%ld", file, (long)getpid());
        errno = ENAMETOOLONG;
        if (n < 0 || (size_t)n >= sizeof tmp || !(o = fopen(tmp, "wb"))) {
            rc = fail("%s: cannot write the dump: %s", shown(file), strerror(errno));
            tmp[0] = 0;
            goto out;
        }
        f = o;
    }
    ost_snap_stats si;
    if (ost_snap_stat(raw_snap(t), &si)) {
        rc = fail("%s: damaged meta (counters)", shown(db));
        goto out;
    }
    format = si.format;
    next_oid = si.next_oid;
    last = si.last_serial;
    next_class = si.next_class;
    /* first pass: the sizes for the header, and records that cannot be
     * exported (a damaged header has no class or serial to write) */
    raw_iter *it;
    if (raw_iter_open(t, &it)) {
        rc = EXIT_FAIL;
        goto out;
    }
    raw_rec r;
    int k;
    while ((k = raw_iter_next(it, &r)) > 0) {
        if (raw_map_class(t, &r)) {
            raw_map m;
            char why[200];
            if (raw_map_read(t, &r, &m, why, sizeof why)) {
                rc = fail("%s: oid %llu: %s: cannot export the map (run 'ostore check %s')",
                          shown(db),
                          (unsigned long long)r.oid, why, shown(db));
                break;
            }
            if ((rc = maps_add(&maps, r.oid, &m))) break;
        }
        if (r.bad_header) {
            rc = fail("%s: oid %llu: damaged record (%s): cannot export it ('ostore check %s' "
                      "lists the damage, 'ostore salvage' copies what is intact)",
                      shown(db), (unsigned long long)r.oid, r.damage, shown(db));
            break;
        }
        if (raw_class_index(t, r.cid) < 0) {
            /* its dump would name a class the dump does not hold, and
             * import refuses that: refused here, before any byte */
            rc = fail("%s: oid %llu: class id %u is not in the class table: cannot export it "
                      "('ostore check %s' lists the damage)",
                      shown(db), (unsigned long long)r.oid, r.cid, shown(db));
            break;
        }
        if (r.len >= MAX_PICKLE) {
            rc = fail("%s: oid %llu: a %zu-byte pickle is too large to export", shown(db),
                      (unsigned long long)r.oid, r.len);
            break;
        }
        records++;
        bytes += r.len;
    }
    raw_iter_close(it);
    if (k < 0) rc = EXIT_FAIL;
    if (rc) goto out;
    /* and the entries, checked against the map records */
    export_ctx x = {.t = t, .db = db, .maps = &maps};
    if ((rc = raw_each_map(t, export_map, &x))) goto out;
    const dump_map *bad = count_mismatch(&maps);
    if (bad) {
        rc = fail("%s: map %llu: its record counts %llu entr%s, the store holds %llu: cannot "
                  "export it (run 'ostore check %s')",
                  shown(db), (unsigned long long)bad->oid, (unsigned long long)bad->m.count,
                  bad->m.count == 1 ? "y" : "ies", (unsigned long long)bad->seen, shown(db));
        goto out;
    }

    stream s = {.f = f, .name = file};
    put(&s, DUMP_MAGIC, 8);
    put_u32(&s, DUMP_VERSION);
    put_u32(&s, (uint32_t)format);
    put_u64(&s, records);
    put_u64(&s, bytes);
    put_u64(&s, next_oid);
    put_u64(&s, last);
    put_u64(&s, next_class);
    put_u64(&s, x.entries);
    put_u64(&s, x.bytes);
    size_t ncls = raw_class_count(t);
    put_u32(&s, (uint32_t)ncls);
    for (size_t i = 0; i < ncls; i++) {
        const char *m, *n;
        uint32_t id = raw_class_at(t, i, &m, &n);
        size_t ml = strlen(m), nl = strlen(n);
        put_u32(&s, id);
        put_u16(&s, (uint16_t)ml);
        put(&s, m, ml);
        put_u16(&s, (uint16_t)nl);
        put(&s, n, nl);
    }
    uint64_t written = 0;
    if (raw_iter_open(t, &it)) {
        rc = EXIT_FAIL;
        goto out;
    }
    while (!s.err && (k = raw_iter_next(it, &r)) > 0) {
        put_u64(&s, r.oid);
        put_u64(&s, r.serial);
        put_u32(&s, r.cid);
        put_u32(&s, (uint32_t)r.len);
        put(&s, r.pickle, r.len);
        written++;
    }
    raw_iter_close(it);
    if (k < 0) {
        rc = EXIT_FAIL;
        goto out;
    }
    x.s = &s;
    if (!s.err && (rc = raw_each_map(t, export_map, &x))) goto out;
    put(&s, DUMP_END, 8);
    put_u32(&s, s.crc);
    if (s.err || fflush(f) != 0 || (!to_stdout && fsync(fileno(f)) != 0)) {
        rc = fail("%s: cannot write the dump: %s", shown(file), strerror(errno));
        goto out;
    }
    if (!to_stdout) {
        int cr = fclose(f);
        f = stdout;
        if (cr != 0 || rename(tmp, file) != 0) {
            rc = fail("%s: cannot write the dump: %s", shown(file), strerror(errno));
            goto out;
        }
        tmp[0] = 0;
        char a[32], b[32], c[32];
        if (x.entries)
            printf("exported %s objects and %s map entries (%s) to %s\n",
                   fmt_count(a, sizeof a, written), fmt_count(c, sizeof c, x.entries),
                   fmt_bytes(b, sizeof b, (double)s.off), shown(file));
        else
            printf("exported %s objects (%s) to %s\n", fmt_count(a, sizeof a, written),
                   fmt_bytes(b, sizeof b, (double)s.off), shown(file));
    }
out:
    free(maps.v);
    if (f != stdout) fclose(f);
    if (tmp[0]) unlink(tmp);
    raw_end(t);
    ost_store_close(st);
    return rc;
}

const cli_cmd cmd_export = {
    .name = "export",
    .summary = "Write every record and map entry of a store to a dump file (FILE, or -).",
    .usage = "usage: ostore export DB FILE|-\n",
    .help = "The dump holds the class table, each record's oid, serial, class and state\n"
            "pickle exactly as stored, each map entry's map oid, encoded key, serial and\n"
            "value pickle, and the store's counters, with a CRC-32 at the end;\n"
            "docs/cli.md describes the format (version 2) and has a Python reader.\n"
            "'ostore import' rebuilds the same store from it. The store is read in one\n"
            "snapshot, opened read-only; FILE is written to FILE.tmpPID and renamed when\n"
            "complete.\n",
    .run = run_export,
};

/* ---- import ------------------------------------------------------------------------ */

static int bad_dump(const char *file, stream *s, const char *what) {
    if (s->err && feof(s->f))
        return fail("%s: truncated export: the file ends at byte %llu, inside %s", shown(file),
                    (unsigned long long)s->off, what);
    if (s->err) return fail("%s: read error in %s: %s", shown(file), what, strerror(errno));
    return fail("%s: bad export: %s (at byte %llu)", shown(file), what, (unsigned long long)s->off);
}

/* Whether there is no ostore store at db (an open without create says
 * so with OST_ENOTFOUND: a missing or empty directory, a database without
 * the schema): then the import or copy makes it, and removes it again if
 * it fails. Read-only: an older store is not upgraded by looking. */
static bool db_without_store(const char *db) {
    ost_store *st = ost_store_new();
    if (!st) return false;
    ost_store_options o;
    ost_store_options_init(&o);
    o.read_only = true;
    bool none = ost_store_open(st, db, &o) == OST_ENOTFOUND;
    ost_store_close(st);
    return none;
}

/* Undoes what open_target created, after a failure, and closes st: an
 * LMDB store's files, and its directory if the open made it; a database's
 * tables. Before the import's commit, only if the store is still new
 * (ost_store_drop_new: a writer that came meanwhile keeps it); after it
 * (committed: the copy's check failed), whatever it holds (ost_store_drop:
 * the command made it, and holds its exclusive lock). */
static void undo_created(const char *db, ost_store *st, bool committed) {
    if (st && (committed ? ost_store_drop(st) : ost_store_drop_new(st)))
        fprintf(stderr, "ostore: warning: the store this command made at %s stays: %s\n",
                shown(db), ost_store_errmsg(st));
    ost_store_close(st);
}

/* A destination store for import and copy, at db: created when missing
 * (a path that does not exist, an empty directory, a database without the
 * schema), else opened (ost_import_begin then refuses it unless it is
 * new), with the store's exclusive lock. *created says whether to remove
 * it again on failure (undo_created). A failed open leaves nothing it
 * made (ost_store_open). EXIT_OK with *out, or EXIT_FAIL after the
 * message. */
static int open_target(const char *db, ost_store **out, bool *created) {
    *out = NULL;
    *created = false;
    struct stat sb;
    bool path = ost_store_addr_is_path(db);
    if (path && stat(db, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return fail("%s: not a directory (a store is a directory)", shown(db));
    if (path && stat(db, &sb) != 0 && errno != ENOENT)
        return fail("%s: %s", shown(db), strerror(errno));
    *created = db_without_store(db);
    ost_store *st = ost_store_new();
    if (!st) return fail("out of memory");
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = *created || !path; /* a database's schema is made when missing */
    o.exclusive = true;
    if (ost_store_open(st, db, &o)) {
        int rc = fail("%s", ost_store_errmsg(st));
        ost_store_close(st);
        *created = false;
        return rc;
    }
    *out = st;
    return EXIT_OK;
}

typedef struct {
    uint64_t records, bytes, next_oid, last, next_class;
    uint64_t entries, ebytes; /* version 2 */
    uint32_t version, format;
} dump_header;

/* Reads up to n bytes (fewer at the end of input): how many. */
static size_t get_some(stream *s, void *p, size_t n) {
    size_t got = n ? fread(p, 1, n, s->f) : 0;
    s->crc = crc_update(s->crc, p, got);
    s->off += got;
    if (got < n) s->err = true;
    return got;
}

#define HEADER_V1 56 /* bytes: magic, version, format, five u64 */
#define HEADER_V2 72 /* and the two entry counters */

/* Grows buf to at least n bytes. */
static bool reserve(uint8_t **buf, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    size_t nc = *cap ? *cap : 65536;
    while (nc < n) nc *= 2;
    uint8_t *nb = realloc(*buf, nc);
    if (!nb) return false;
    *buf = nb;
    *cap = nc;
    return true;
}

/* The fewest bytes of each item after the header: a class (u32 id, two
 * u16 lengths), a record (oid, serial, class id, length), an entry (map
 * oid, key length, serial, value length), the trailer. */
#define CLASS_MIN 8
#define RECORD_MIN 24
#define ENTRY_MIN 22
#define TRAILER_LEN 12

/* The fewest bytes a dump holds after header h: the class count, each
 * record's and entry's fixed fields and the bytes the header counts for
 * them, the trailer (the header's limits keep this far from wrapping). */
static uint64_t rest_min(const dump_header *h) {
    return 4 + h->records * RECORD_MIN + h->bytes + h->entries * ENTRY_MIN + h->ebytes +
           TRAILER_LEN;
}

/* Reads n bytes into *buf, growing it (reserve) by at most 1 MiB past
 * what was read at each step, so that a length read from the dump never
 * allocates much more than the bytes really there (a pipe has no size to
 * check it against first). 0, 1 (end of input or a read error: s->err)
 * or -1 (out of memory). */
static int get_buf(stream *s, uint8_t **buf, size_t *cap, size_t n) {
    size_t have = 0;
    do {
        size_t step = n - have < (1u << 20) ? n - have : (1u << 20);
        if (!reserve(buf, cap, have + step ? have + step : 1)) return -1;
        if (!get(s, *buf + have, step)) return 1;
        have += step;
    } while (have < n);
    return 0;
}

/* Reads the header and checks its counters against each other and against
 * the limits of a store (store/lmdb/import.h): what the dump holds is checked
 * against them as it is read. */
static int read_header(const char *file, stream *s, dump_header *h) {
    uint8_t b[HEADER_V2];
    size_t got = get_some(s, b, 12);
    if (got < 12 && ferror(s->f)) return fail("%s: read error: %s", shown(file), strerror(errno));
    if (got == 0) return fail("%s: empty file, not an ostore export", shown(file));
    if (memcmp(b, DUMP_MAGIC, got < 8 ? got : 8) != 0)
        return fail("%s: not an ostore export (bad magic)", shown(file));
    h->version = got < 12 ? 0 : ost__rd_le32(b + 8);
    if (got == 12 && (h->version < 1 || h->version > DUMP_VERSION))
        return fail("%s: export version %u; this ostore reads versions 1 to %d", shown(file),
                    h->version, DUMP_VERSION);
    size_t need = h->version == 1 ? HEADER_V1 : HEADER_V2; /* unknown yet: this version's */
    if (got == 12) got += get_some(s, b + 12, need - 12);
    if (got < need) {
        if (ferror(s->f)) return fail("%s: read error: %s", shown(file), strerror(errno));
        return fail("%s: truncated dump: %zu byte%s, the header needs %zu", shown(file), got,
                    got == 1 ? "" : "s", need);
    }
    h->format = ost__rd_le32(b + 12);
    h->records = ost__rd_le64(b + 16);
    h->bytes = ost__rd_le64(b + 24);
    h->next_oid = ost__rd_le64(b + 32);
    h->last = ost__rd_le64(b + 40);
    h->next_class = ost__rd_le64(b + 48);
    h->entries = h->version >= 2 ? ost__rd_le64(b + 56) : 0;
    h->ebytes = h->version >= 2 ? ost__rd_le64(b + 64) : 0;
    if (h->format < 1 || h->format > OST_STORE_FORMAT)
        return fail("%s: records of store format %u; this ostore reads formats 1 to %d",
                    shown(file),
                    h->format, OST_STORE_FORMAT);
    /* counters a store cannot have: they would wrap when handed out */
    if (h->next_oid > OST_OID_LIMIT)
        return fail("%s: bad export: header next_oid %llu is past the largest a store has "
                    "(2^63: oids are pickled as signed 64-bit ints)",
                    shown(file), (unsigned long long)h->next_oid);
    if (h->last == 0 || h->last >= OST_SERIAL_LIMIT)
        return fail("%s: bad export: header last_serial %llu (a store's is 1 to 2^63 - 1)",
                    shown(file), (unsigned long long)h->last);
    if (h->next_class == 0 || h->next_class > OST_CLASS_LIMIT)
        return fail("%s: bad export: header next_class %llu (class ids are 32-bit: 1 to %llu)",
                    shown(file), (unsigned long long)h->next_class,
                    (unsigned long long)OST_CLASS_LIMIT);
    if (h->records == 0 || h->next_oid < h->records)
        return fail("%s: bad export: header counts %llu records below next_oid %llu (there is "
                    "always the root, and each record has an oid below next_oid)",
                    shown(file), (unsigned long long)h->records, (unsigned long long)h->next_oid);
    if (h->records > (uint64_t)1 << 40 || h->bytes > (uint64_t)1 << 46 ||
        h->entries > (uint64_t)1 << 40 || h->ebytes > (uint64_t)1 << 46)
        return fail("%s: bad export: header counts more records, entries or bytes than a store "
                    "holds (%llu records of %llu bytes, %llu entries of %llu bytes)",
                    shown(file), (unsigned long long)h->records, (unsigned long long)h->bytes,
                    (unsigned long long)h->entries, (unsigned long long)h->ebytes);
    if (h->entries && h->format < 2)
        return fail("%s: bad export: %llu map entries in a dump of a format-%u store (maps came "
                    "with format 2)",
                    shown(file), (unsigned long long)h->entries, h->format);
    /* a regular file's size bounds every count: nothing (the map size the
     * import asks for included) is sized by a count the file cannot hold */
    if (s->size && s->size - s->off < rest_min(h))
        return fail("%s: truncated export or damaged header: the file ends at byte %llu, but "
                    "the header counts %llu records of %llu bytes and %llu entries of %llu "
                    "bytes (at least %llu bytes after the header's %llu)",
                    shown(file), (unsigned long long)s->size, (unsigned long long)h->records,
                    (unsigned long long)h->bytes, (unsigned long long)h->entries,
                    (unsigned long long)h->ebytes, (unsigned long long)rest_min(h),
                    (unsigned long long)s->off);
    return EXIT_OK;
}

/* Reads and imports the entries section of a version-2 dump, checked as
 * export checks a store (see export_map). */
static int import_entries(const char *file, stream *s, const dump_header *h, ost_store *st,
                          ost_import *im, map_list *maps, uint8_t **buf, size_t *cap) {
    uint8_t key[OST_MAP_KEY_MAX], prev[OST_MAP_KEY_MAX];
    size_t prevlen = 0;
    uint64_t prevmap = 0, total = 0;
    for (uint64_t i = 0; i < h->entries; i++) {
        uint64_t map, serial;
        uint16_t klen;
        uint32_t vlen;
        if (!get_u64(s, &map) || !get_u16(s, &klen))
            return bad_dump(file, s, "a map entry");
        if (klen > OST_MAP_KEY_MAX)
            return fail("%s: bad export: map %llu: a %u-byte key (the longest is %d bytes)",
                        shown(file),
                        (unsigned long long)map, klen, OST_MAP_KEY_MAX);
        if (!get(s, key, klen) || !get_u64(s, &serial) || !get_u32(s, &vlen))
            return bad_dump(file, s, "a map entry");
        dump_map *d = maps_find(maps, map);
        if (!d)
            return fail("%s: bad export: entries under oid %llu, which has no map record",
                        shown(file),
                        (unsigned long long)map);
        if (i && (map < prevmap || (map == prevmap && raw_key_cmp(key, klen, prev, prevlen) <= 0)))
            return fail("%s: bad export: map %llu: entries out of order or repeated (they ascend "
                        "by map oid, then by key)",
                        shown(file), (unsigned long long)map);
        if (serial == 0 || serial > h->last)
            return fail("%s: bad export: map %llu: an entry with serial %llu (last commit %llu)",
                        shown(file), (unsigned long long)map, (unsigned long long)serial,
                        (unsigned long long)h->last);
        total += klen + (uint64_t)vlen;
        if (total > h->ebytes)
            return fail("%s: bad export: map %llu: entry lengths do not fit the header",
                        shown(file),
                        (unsigned long long)map);
        int g = get_buf(s, buf, cap, vlen);
        if (g < 0) return fail("out of memory");
        if (g) return bad_dump(file, s, "a map entry's value");
        const char *why = entry_problem(d, key, klen, vlen);
        if (why)
            return fail("%s: bad export: map %llu: %s", shown(file), (unsigned long long)map, why);
        if (ost_import_entry(im, map, key, klen, serial, *buf, vlen))
            return fail("%s: bad export: %s", shown(file), ost_store_errmsg(st));
        d->seen++;
        prevmap = map;
        memcpy(prev, key, klen);
        prevlen = klen;
    }
    if (total != h->ebytes)
        return fail("%s: bad export: the entries hold %llu bytes, the header says %llu",
                    shown(file),
                    (unsigned long long)total, (unsigned long long)h->ebytes);
    const dump_map *bad = count_mismatch(maps);
    if (bad)
        return fail("%s: bad export: map %llu: its record counts %llu entr%s, the dump has %llu",
                    shown(file), (unsigned long long)bad->oid, (unsigned long long)bad->m.count,
                    bad->m.count == 1 ? "y" : "ies", (unsigned long long)bad->seen);
    return EXIT_OK;
}

/* Opens the dump file for reading, never waiting: a regular file (or a
 * symbolic link to one), or a FIFO or pipe that a process writes to
 * (`ostore import DB <(zcat x.gz)`). A FIFO nobody writes to would block
 * the open, and its reads, until a writer came: it is opened without
 * blocking and refused when a first read finds no writer. Devices,
 * directories and sockets are refused. EXIT_OK with *out, or EXIT_FAIL
 * (message printed). */
static int open_dump(const char *file, FILE **out) {
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return fail("%s: %s", shown(file), strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return fail("%s: %s", shown(file), strerror(e));
    }
    if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode)) {
        close(fd);
        return fail("%s: %s, not a dump file (give - to read standard input)", shown(file),
                    ost_file_kind(sb.st_mode));
    }
    int first = EOF; /* a byte the check below read */
    if (S_ISFIFO(sb.st_mode)) {
        uint8_t b;
        ssize_t n = read(fd, &b, 1);
        if (n == 0) { /* no writer: at end of input at once */
            close(fd);
            return fail("%s: a FIFO, and no process writes to it: nothing to import (start the "
                        "writer first, or pipe the dump to 'ostore import DB -')",
                        shown(file));
        }
        if (n < 0 && errno != EAGAIN) {
            int e = errno;
            close(fd);
            return fail("%s: %s", shown(file), strerror(e));
        }
        if (n == 1) first = b;
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return fail("%s: %s", shown(file), strerror(e));
    }
    if (first != EOF) ungetc(first, f);
    *out = f;
    return EXIT_OK;
}

/* What run_import reads a dump into, shared by its steps below. */
typedef struct {
    const char *file; /* the dump's name, as the user gave it */
    stream *s;
    const dump_header *h;
    ost_store *st;
    ost_import *im;
    uint32_t *ids; /* the class ids, ascending; ncls of them (owned) */
    uint32_t ncls;
    bool have_root_class, have_map_cid, have_set_cid;
    uint32_t root_cid, map_cid, set_cid;
    map_list maps; /* the map records read, to check the entries against */
    ost_reader *rd; /* decodes map records; made when the first one comes (owned) */
    uint8_t *buf;   /* a record's pickle, an entry's value (owned) */
    size_t cap;
} importing;

/* Reads the class table of x's dump into x->ids, imports each class, and
 * notes the ids of the root's class and of the map and set classes. The
 * table's count must fit what the file has left. Returns EXIT_OK, or
 * EXIT_FAIL (message printed). */
static int import_classes(importing *x) {
    const char *file = x->file;
    stream *s = x->s;
    if (!get_u32(s, &x->ncls)) return bad_dump(file, s, "the class table");
    uint32_t ncls = x->ncls;
    /* each class takes CLASS_MIN bytes at least, before the rest of what
     * the header counts */
    if (s->size && (uint64_t)ncls * CLASS_MIN > s->size - s->off - (rest_min(x->h) - 4))
        return fail("%s: bad export: the class table counts %u classes (%d bytes each at least), "
                    "more than the file's %llu bytes left hold",
                    shown(file), ncls, CLASS_MIN, (unsigned long long)(s->size - s->off));
    char *mod = malloc(65536), *name = malloc(65536);
    int rc = EXIT_OK;
    if (!mod || !name) {
        rc = fail("out of memory");
        goto out;
    }
    size_t idcap = 0; /* ids grow as classes are read: a pipe has no size to bound ncls */
    for (uint32_t i = 0; i < ncls; i++) {
        uint32_t id;
        uint16_t ml, nl;
        if (!get_u32(s, &id) || !get_u16(s, &ml) || !get(s, mod, ml) || !get_u16(s, &nl) ||
            !get(s, name, nl)) {
            rc = bad_dump(file, s, "the class table");
            goto out;
        }
        if (i && id <= x->ids[i - 1]) {
            rc = fail("%s: bad export: class ids do not ascend (id %u)", shown(file), id);
            goto out;
        }
        if (id == 0 || (uint64_t)id >= x->h->next_class) {
            rc = fail("%s: bad export: class id %u is not between 1 and the header's next_class "
                      "%llu",
                      shown(file), id, (unsigned long long)x->h->next_class);
            goto out;
        }
        if (i == idcap) {
            size_t nc = idcap ? idcap * 2 : 64;
            uint32_t *ni = realloc(x->ids, nc * sizeof *x->ids);
            if (!ni) {
                rc = fail("out of memory");
                goto out;
            }
            x->ids = ni;
            idcap = nc;
        }
        x->ids[i] = id;
        if (ost_import_class(x->im, id, mod, ml, name, nl)) {
            rc = fail("%s: bad export: %s", shown(file), ost_store_errmsg(x->st));
            goto out;
        }
        mod[ml] = 0;
        name[nl] = 0;
        if (strcmp(mod, "persistent.mapping") == 0 && strcmp(name, "PersistentMapping") == 0) {
            x->have_root_class = true;
            x->root_cid = id;
        }
        if (strcmp(mod, "ostore.maps") == 0 && strcmp(name, "OrderedMap") == 0) {
            x->have_map_cid = true;
            x->map_cid = id;
        }
        if (strcmp(mod, "ostore.maps") == 0 && strcmp(name, "OrderedSet") == 0) {
            x->have_set_cid = true;
            x->set_cid = id;
        }
    }
out:
    free(mod);
    free(name);
    return rc;
}

/* Checks record header i of x's dump (oid, serial, class id cid) against
 * the header, the record before it (prev) and the class table. Returns
 * EXIT_OK, or EXIT_FAIL (message printed). */
static int check_record(const importing *x, uint64_t i, uint64_t prev, uint64_t oid,
                        uint64_t serial, uint32_t cid) {
    const char *file = x->file;
    const dump_header *h = x->h;
    if (i == 0 && oid != 0)
        return fail("%s: bad export: the first record is oid %llu, not the root (oid 0)",
                    shown(file), (unsigned long long)oid);
    if (i == 0 && (!x->have_root_class || cid != x->root_cid))
        return fail("%s: bad export: the root is not a persistent.mapping.PersistentMapping",
                    shown(file));
    if (i && oid <= prev)
        return fail("%s: bad export: oid %llu out of order (after oid %llu)", shown(file),
                    (unsigned long long)oid, (unsigned long long)prev);
    if (oid >= h->next_oid)
        return fail("%s: bad export: oid %llu is not below the header's next_oid %llu",
                    shown(file), (unsigned long long)oid, (unsigned long long)h->next_oid);
    if (serial == 0 || serial > h->last)
        return fail("%s: bad export: oid %llu has serial %llu (last commit %llu)", shown(file),
                    (unsigned long long)oid, (unsigned long long)serial,
                    (unsigned long long)h->last);
    size_t lo = 0, hi = x->ncls;
    while (lo < hi) { /* ids ascend: binary search */
        size_t mid = (lo + hi) / 2;
        if (x->ids[mid] < cid) lo = mid + 1;
        else hi = mid;
    }
    if (lo == x->ncls || x->ids[lo] != cid)
        return fail("%s: bad export: oid %llu has class id %u, not in the class table",
                    shown(file), (unsigned long long)oid, cid);
    return EXIT_OK;
}

/* Reads and imports the records of x's dump, each checked (check_record,
 * the pickles' lengths against the header); a map or set record is parsed
 * and kept in x->maps for the entries' checks. Returns EXIT_OK, or
 * EXIT_FAIL (message printed). */
static int import_records(importing *x) {
    const char *file = x->file;
    stream *s = x->s;
    uint64_t prev = 0, total = 0;
    for (uint64_t i = 0; i < x->h->records; i++) {
        uint64_t oid, serial;
        uint32_t cid, len;
        if (!get_u64(s, &oid) || !get_u64(s, &serial) || !get_u32(s, &cid) || !get_u32(s, &len))
            return bad_dump(file, s, "a record header");
        if (check_record(x, i, prev, oid, serial, cid)) return EXIT_FAIL;
        total += len;
        if (len < 2 || total > x->h->bytes)
            return fail("%s: bad export: oid %llu: pickle length %u does not fit the header",
                        shown(file), (unsigned long long)oid, len);
        int g = get_buf(s, &x->buf, &x->cap, len);
        if (g) return g < 0 ? fail("out of memory") : bad_dump(file, s, "a record's pickle");
        if ((x->have_map_cid && cid == x->map_cid) || (x->have_set_cid && cid == x->set_cid)) {
            raw_map m = {.is_set = x->have_set_cid && cid == x->set_cid};
            char why[200];
            if (!x->rd && !(x->rd = ost_reader_new())) return fail("out of memory");
            if (raw_map_parse(x->rd, x->buf, len, &m, why, sizeof why))
                return fail("%s: bad export: oid %llu: %s", shown(file), (unsigned long long)oid,
                            why);
            int rc = maps_add(&x->maps, oid, &m);
            if (rc) return rc;
        }
        if (ost_import_record(x->im, oid, serial, cid, x->buf, len))
            return fail("%s: %s", shown(file), ost_store_errmsg(x->st));
        prev = oid;
    }
    if (total != x->h->bytes)
        return fail("%s: bad export: the pickles hold %llu bytes, the header says %llu",
                    shown(file), (unsigned long long)total, (unsigned long long)x->h->bytes);
    return EXIT_OK;
}

/* Reads the trailer of x's dump from f: the end mark, the CRC-32 of all
 * that came before it, and nothing after. Returns EXIT_OK, or EXIT_FAIL
 * (message printed). */
static int check_trailer(importing *x, FILE *f) {
    const char *file = x->file;
    char end[8];
    if (!get(x->s, end, 8)) return bad_dump(file, x->s, "the trailer");
    if (memcmp(end, DUMP_END, 8) != 0)
        return fail("%s: bad export: no trailer after %llu records", shown(file),
                    (unsigned long long)x->h->records);
    uint32_t want = x->s->crc, got;
    if (!get_u32(x->s, &got)) return bad_dump(file, x->s, "the trailer");
    if (got != want)
        return fail("%s: bad export: CRC-32 mismatch (file says %08x, content gives %08x): the "
                    "file is damaged",
                    shown(file), got, want);
    if (fgetc(f) != EOF) return fail("%s: bad export: bytes after the trailer", shown(file));
    return EXIT_OK;
}

static int run_import(int argc, char **argv) {
    const char *pos[2];
    int prc = parse_args(&cmd_import, argc, argv, NULL, 0, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *db = pos[0], *file = pos[1];
    bool from_stdin = strcmp(file, "-") == 0;
    crc_init();
    FILE *f = stdin;
    if (!from_stdin && open_dump(file, &f)) return EXIT_FAIL;
    stream s = {.f = f, .name = file};
    struct stat fsb;
    if (fstat(fileno(f), &fsb) == 0 && S_ISREG(fsb.st_mode)) s.size = (uint64_t)fsb.st_size;
    dump_header h = {0};
    if (read_header(file, &s, &h)) {
        if (!from_stdin) fclose(f);
        return EXIT_FAIL;
    }
    /* the store: created when missing; an existing one must be new */
    bool created = false;
    ost_store *st = NULL;
    guard_crashes(db);
    if (open_target(db, &st, &created)) {
        if (!from_stdin) fclose(f);
        return EXIT_FAIL;
    }
    int rc = EXIT_OK;
    importing x = {.file = file, .s = &s, .h = &h, .st = st};
    /* room for the records and entries, their B-tree pages and some slack */
    uint64_t need = (h.bytes + h.records * 96) * 2 + (h.ebytes + h.entries * 64) * 2 + (64u << 20);
    if (ost_import_begin(st, need, &x.im)) {
        rc = fail("%s", ost_store_errmsg(st));
        goto out;
    }
    if ((rc = import_classes(&x)) || (rc = import_records(&x)) ||
        (rc = import_entries(file, &s, &h, st, x.im, &x.maps, &x.buf, &x.cap)) ||
        (rc = check_trailer(&x, f)))
        goto out;
    int crc = ost_import_commit(x.im, h.format, h.next_oid, h.last, h.next_class);
    x.im = NULL;
    if (crc) {
        rc = fail("%s", ost_store_errmsg(st));
        goto out;
    }
    char a[32], b[32];
    if (h.entries)
        printf("imported %s objects and %s map entries into %s (last commit %llu, next oid %llu)\n",
               fmt_count(a, sizeof a, h.records), fmt_count(b, sizeof b, h.entries), shown(db),
               (unsigned long long)h.last, (unsigned long long)h.next_oid);
    else
        printf("imported %s objects into %s (last commit %llu, next oid %llu)\n",
               fmt_count(a, sizeof a, h.records), shown(db), (unsigned long long)h.last,
               (unsigned long long)h.next_oid);
out:
    free(x.maps.v);
    ost_reader_free(x.rd);
    ost_import_abort(x.im);
    if (rc && created) undo_created(db, st, false);
    else ost_store_close(st);
    if (!from_stdin) fclose(f);
    free(x.buf);
    free(x.ids);
    return rc;
}

const cli_cmd cmd_import = {
    .name = "import",
    .summary = "Load a dump made by 'ostore export' into a new store (FILE, or - for stdin).",
    .usage = "usage: ostore import DB FILE|-\n",
    .help = "DB must not exist, be an empty directory, or be a new store (nothing\n"
            "committed since it was created). The records and map entries are written\n"
            "as they are in the dump: same oids, keys, serials, class ids, counters and\n"
            "store format, so 'ostore export' of the result gives the same file. Dumps\n"
            "of version 1 (no map entries) and 2 are read. Everything is checked before\n"
            "the one commit (order of oids and keys, classes, lengths, each entry against\n"
            "its map's record, the CRC-32): on any error nothing is written, and a store\n"
            "made by the import (a directory, or a database's schema) is removed again.\n",
    .run = run_import,
};

/* ---- copy ------------------------------------------------------------------------- */

typedef struct {
    uint64_t problems;
    char first[300];
} copy_check;

static void copy_problem(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    (void)oid;
    (void)missing;
    (void)err;
    copy_check *c = ud;
    if (!c->problems++) snprintf(c->first, sizeof c->first, "%s", msg);
}

/* One record or entry that cannot be copied as it is. */
static int copy_damaged(const char *src, const char *what) {
    return fail("%s: %s is damaged: nothing was copied ('ostore check %s' lists the damage, "
                "'ostore salvage' copies what is intact)",
                shown(src), what, src);
}

static int run_copy(int argc, char **argv) {
    const char *pos[2];
    int prc = parse_args(&cmd_copy, argc, argv, NULL, 0, pos, 2, 2, NULL);
    if (prc) return prc < 0 ? EXIT_OK : prc;
    const char *src = pos[0], *dst = pos[1];
    guard_crashes(src);
    ost_store *sst = NULL, *dst_st = NULL;
    raw_txn *t = NULL;
    ost_import *im = NULL;
    ost_snap_cursor *cur = NULL;
    ost_entry_cursor *ec = NULL;
    bool created = false, committed = false;
    int rc = EXIT_OK;
    double t0 = now_s();
    if (open_store(src, false, &sst)) return EXIT_FAIL;
    if (raw_begin(sst, &t)) {
        ost_store_close(sst);
        return EXIT_FAIL;
    }
    ost_snap *s = raw_snap(t);
    ost_snap_stats si;
    if (ost_snap_stat(s, &si)) {
        rc = fail("%s", ost_snap_errmsg(s));
        goto out;
    }
    if (open_target(dst, &dst_st, &created)) {
        rc = EXIT_FAIL;
        goto out;
    }
    uint64_t hint = si.pages_used * si.page_size * 2 + (64u << 20);
    if (ost_import_begin(dst_st, hint, &im)) {
        rc = fail("%s", ost_store_errmsg(dst_st));
        goto out;
    }
    uint32_t id;
    const char *m, *n;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++)
        if (ost_import_class(im, id, m, strlen(m), n, strlen(n))) {
            rc = fail("%s", ost_store_errmsg(dst_st));
            goto out;
        }
    progress bar;
    progress_start(&bar, isatty(2), "copying", si.records + si.entries);
    uint64_t done = 0, records = 0, entries = 0;
    if (ost_snap_records(s, 0, &cur)) {
        rc = fail("%s", ost_snap_errmsg(s));
        goto out_bar;
    }
    ost_raw_record r;
    int k;
    while ((k = ost_snap_next(cur, &r)) == 0) {
        if (r.damage) {
            char what[96];
            snprintf(what, sizeof what, "the record of oid %llu (%s)", (unsigned long long)r.oid,
                     r.damage);
            rc = copy_damaged(src, what);
            goto out_bar;
        }
        if (raw_class_index(t, r.class_id) < 0) {
            /* else the copy would commit, and only its check would find it */
            char what[96];
            snprintf(what, sizeof what, "the record of oid %llu (class id %u is not in the class "
                     "table)", (unsigned long long)r.oid, r.class_id);
            rc = copy_damaged(src, what);
            goto out_bar;
        }
        if (ost_import_record(im, r.oid, r.serial, r.class_id, r.pickle, r.len)) {
            rc = fail("%s", ost_store_errmsg(dst_st));
            goto out_bar;
        }
        records++;
        if (++done % 8192 == 0) progress_update(&bar, done, "records");
    }
    if (k != OST_ENOTFOUND) {
        rc = fail("%s", ost_snap_errmsg(s));
        goto out_bar;
    }
    uint64_t map = 0;
    while ((k = ost_snap_next_map(s, map, &map)) == 0) {
        if (ost_snap_entries(s, map, NULL, 0, &ec)) {
            rc = fail("%s", ost_snap_errmsg(s));
            goto out_bar;
        }
        ost_raw_entry e;
        while ((k = ost_raw_entry_next(ec, &e)) == 0) {
            if (e.damage) {
                char what[96];
                snprintf(what, sizeof what, "an entry of map %llu (%s)", (unsigned long long)map,
                         e.damage);
                rc = copy_damaged(src, what);
                goto out_bar;
            }
            if (ost_import_entry(im, map, e.key, e.klen, e.serial, e.value, e.vlen)) {
                rc = fail("%s", ost_store_errmsg(dst_st));
                goto out_bar;
            }
            entries++;
            if (++done % 8192 == 0) progress_update(&bar, done, "records");
        }
        ost_entry_cursor_close(ec);
        ec = NULL;
        if (k != OST_ENOTFOUND) {
            rc = fail("%s", ost_snap_errmsg(s));
            goto out_bar;
        }
    }
    if (k != OST_ENOTFOUND) {
        rc = fail("%s", ost_snap_errmsg(s));
        goto out_bar;
    }
    progress_note(&bar, "committing");
    int crc = ost_import_commit(im, si.format, si.next_oid, si.last_serial, si.next_class);
    im = NULL;
    if (crc) {
        rc = fail("%s", ost_store_errmsg(dst_st));
        goto out_bar;
    }
    committed = true;
    double copied = now_s() - t0;
    /* the final check, as zodbconvert's users run fsrefs: every record of
     * the copy decodes and every reference resolves */
    progress_note(&bar, "checking");
    copy_check cc = {0};
    uint64_t checked = 0;
    int chk = ost_store_check(dst_st, copy_problem, &cc, &checked);
    progress_end(&bar);
    if (chk == OST_ECORRUPT || (chk == 0 && checked != records)) {
        rc = fail("%s: the copy does not check: %llu problem%s, the first: %s%s", shown(dst),
                  (unsigned long long)cc.problems, cc.problems == 1 ? "" : "s",
                  cc.problems ? cc.first : "a count differs",
                  created ? "" : " (the copy is committed there: remove it by hand)");
        goto out;
    }
    if (chk) {
        rc = fail("%s: checking the copy: %s", shown(dst), ost_store_errmsg(dst_st));
        goto out;
    }
    char a[32], b[32], c[32];
    printf("copied %s objects and %s map entries from %s to %s in %.2f s (%s objects/s)\n",
           fmt_count(a, sizeof a, records), fmt_count(b, sizeof b, entries), shown(src), shown(dst),
           copied, fmt_count(c, sizeof c, (uint64_t)((double)records / (copied > 0 ? copied : 1e-9))));
    printf("checked the copy: %s records decode and every reference resolves (%.2f s)\n",
           fmt_count(a, sizeof a, checked), now_s() - t0 - copied);
    goto out;
out_bar:
    progress_end(&bar);
out:
    ost_entry_cursor_close(ec);
    ost_snap_cursor_close(cur);
    ost_import_abort(im);
    if (rc && created) undo_created(dst, dst_st, committed);
    else ost_store_close(dst_st);
    raw_end(t);
    ost_store_close(sst);
    return rc;
}

const cli_cmd cmd_copy = {
    .name = "copy",
    .summary = "Copy a whole store into a new one, record for record, then check the copy.",
    .usage = "usage: ostore copy SRC DST\n",
    .help = "Reads one snapshot of SRC (opened read-only; commits made meanwhile are\n"
            "not copied) and writes every class, record and map entry into DST as it\n"
            "is: the same oids, serials, class ids, pickles (byte for byte), keys and\n"
            "counters, in one transaction, with a progress bar on a terminal. DST must\n"
            "not exist, be an empty directory, or be a new store. Then it checks DST\n"
            "as 'ostore check' does. A damaged record or entry in SRC stops the copy\n"
            "before anything is written ('ostore salvage' copies what is intact). On\n"
            "any failure DST is left as it was, and a store the copy made (a directory,\n"
            "or a database's schema) is removed again.\n",
    .run = run_copy,
};
