/* The store: LMDB environment, records, connections with an object cache
 * of ghosts, transactions with conflict detection, pack and check.
 *
 * Layout (docs/format.md): named databases "records" (oid, 8 bytes
 * big-endian -> 16-byte header + state pickle), "meta" (format, next oid,
 * last serial, next class id), "classes" ("i" + id -> module NUL name,
 * "n" + module NUL name -> id) and "txlog" (serial -> oids of existing
 * objects that commit changed, for the caches of other connections). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <uv.h>

#include "../serializer/internal.h"
#include "entries.h"
#include "lmdb/engine.h"
#include "store_internal.h"

#define META_MAGIC "ostore"
#define DEFAULT_MAP (64u << 20)
#define ROOT_OID 0

static uv_mutex_t g_open_lock;
static uv_once_t g_once = UV_ONCE_INIT;
static ost_store *g_open; /* stores open in this process, by path */

/* fork: the child inherits the list of the parent's open stores, whose
 * handles it must not use (LMDB forbids it), and would refuse to open its
 * own handle on the same path with OST_EBUSY. The lock is held across the
 * fork so the child's copy of the list is whole, and the child starts with
 * an empty list. */
static void atfork_prepare(void) { uv_mutex_lock(&g_open_lock); }
static void atfork_parent(void) { uv_mutex_unlock(&g_open_lock); }
static void atfork_child(void) {
    g_open = NULL;
    uv_mutex_unlock(&g_open_lock);
}

static void init_once(void) {
    uv_mutex_init(&g_open_lock);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- errors ---------------------------------------------------------------- */

/* A store's message is per thread, as ost_store_errmsg promises: each
 * thread keeps the messages of the last few stores it used, each under the
 * store's uid (a number no other handle of the process gets, so a new
 * handle at a freed one's address never shows the old one's message). */
#define MSG_SLOTS 4
static __thread struct {
    uint64_t uid;
    char text[512];
} t_msgs[MSG_SLOTS];
static __thread unsigned t_msg_next;
static uint64_t g_store_uid;

/* The calling thread's message buffer for st; a slot is taken (the oldest
 * one) when make is true and st has none, else NULL. */
static char *msg_slot(const ost_store *st, bool make) {
    for (unsigned i = 0; i < MSG_SLOTS; i++)
        if (t_msgs[i].uid == st->uid) return t_msgs[i].text;
    if (!make) return NULL;
    unsigned i = t_msg_next++ % MSG_SLOTS;
    t_msgs[i].uid = st->uid;
    t_msgs[i].text[0] = 0;
    return t_msgs[i].text;
}

void ost__st_clear(ost_store *st) {
    char *m = msg_slot(st, false);
    if (m) m[0] = 0;
}

int ost__st_fail(ost_store *st, int code, const char *fmt, ...) {
    char *m = msg_slot(st, true);
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(m, sizeof t_msgs[0].text, fmt, ap);
    va_end(ap);
    return code;
}

int ost__c_fail(ost_conn *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *ost_store_errmsg(const ost_store *st) {
    const char *m = st ? msg_slot(st, false) : NULL;
    return m ? m : "";
}
const char *ost_conn_errmsg(const ost_conn *c) { return c ? c->msg : ""; }

/* ---- little helpers ---------------------------------------------------- */

void ost__be64(uint8_t *b, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (uint8_t)v;
}
uint64_t ost__rd_be64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | b[i];
    return v;
}
int ost__u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
size_t ost__sort_unique(uint64_t *v, size_t n) {
    if (n < 2) return n;
    qsort(v, n, sizeof *v, ost__u64_cmp);
    size_t u = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[u - 1]) v[u++] = v[i];
    return u;
}
void ost__le64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++, v >>= 8) b[i] = (uint8_t)v;
}
uint64_t ost__rd_le64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

void ost__hdr_write(uint8_t *h, uint64_t serial, uint32_t class_id) {
    ost__le64(h, serial);
    for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(class_id >> (8 * i));
    memset(h + 12, 0, 4);
}

/* The checksum record rec[0, n) of oid must carry (n >= OST_HDR_SIZE). */
static uint32_t rec_crc(uint64_t oid, const uint8_t *rec, size_t n) {
    uint8_t kb[8];
    ost__be64(kb, oid);
    uint32_t crc = ost__crc32c(0, kb, 8);
    crc = ost__crc32c(crc, rec, 12);
    return ost__crc32c(crc, rec + OST_HDR_SIZE, n - OST_HDR_SIZE);
}

void ost__rec_seal(uint8_t *rec, size_t n, uint64_t oid) {
    uint32_t crc = rec_crc(oid, rec, n);
    for (int i = 0; i < 4; i++) rec[12 + i] = (uint8_t)(crc >> (8 * i));
}

bool ost__rec_crc_ok(uint64_t oid, const void *rec, size_t n) {
    const uint8_t *h = rec;
    return n >= OST_HDR_SIZE + 2 &&
           rec_crc(oid, h, n) == ((uint32_t)h[12] | (uint32_t)h[13] << 8 |
                                  (uint32_t)h[14] << 16 | (uint32_t)h[15] << 24);
}

bool ost__in_file(ost_store *st, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p, base = st->map_base;
    if (!base || a < base || a - base >= st->map_size) return true; /* not in the map */
    uint64_t end = (uint64_t)(a - base) + n;
    if (end < n) return false;
    if (end <= __atomic_load_n(&st->file_size, __ATOMIC_RELAXED)) return true;
    /* the file may have grown since the size was read */
    int fd;
    struct stat sb;
    if (mdb_env_get_fd(st->env, &fd) || fstat(fd, &sb)) return false;
    __atomic_store_n(&st->file_size, (uint64_t)sb.st_size, __ATOMIC_RELAXED);
    return end <= (uint64_t)sb.st_size;
}

int ost__rec_open(ost_store *st, uint64_t oid, const MDB_val *v, uint64_t *serial,
                  uint32_t *class_id) {
    const uint8_t *h = v->mv_data;
    if (v->mv_size < OST_HDR_SIZE + 2) return OST__DMG_SHORT;
    if (!ost__in_file(st, h, v->mv_size)) return OST__DMG_BEYOND;
    if (__atomic_load_n(&st->format, __ATOMIC_RELAXED) >= 3) {
        if (!ost__rec_crc_ok(oid, h, v->mv_size)) return OST__DMG_CRC;
    } else if (h[12] | h[13] | h[14] | h[15]) {
        return OST__DMG_RESERVED;
    }
    *serial = ost__rd_le64(h);
    *class_id = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 |
                (uint32_t)h[11] << 24;
    return 0;
}

const char *ost__damage_text(int dmg) {
    switch (dmg) {
    case OST__DMG_SHORT: return "too short for its header";
    case OST__DMG_CRC: return "its checksum does not match its bytes";
    case OST__DMG_BEYOND: return "its length runs past the end of the file";
    case OST__DMG_RESERVED: return "reserved header bytes are not zero";
    }
    return "damaged";
}

static int meta_get_u64(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t *out) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(t, dbi, &k, &v);
    if (rc) return rc;
    if (v.mv_size != 8) return MDB_CORRUPTED;
    *out = ost__rd_le64(v.mv_data);
    return 0;
}

static int meta_put_u64(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t val) {
    uint8_t b[8];
    ost__le64(b, val);
    MDB_val k = {strlen(key), (void *)key}, v = {8, b};
    return mdb_put(t, dbi, &k, &v, 0);
}

/* dir/data.mdb in buf. */
static const char *datafile_of(const char *dir, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/data.mdb", dir);
    return buf;
}

/* Notes where LMDB maps the file and how big the file is (after the
 * environment opens and after each resize, under the maplock's write
 * lock or before any other thread uses the store). */
static void map_changed(ost_store *st) {
    int fd;
    struct stat sb;
    st->map_base = 0;
    st->map_size = 0;
    if (mdb_env_get_fd(st->env, &fd) != 0 || fstat(fd, &sb) != 0) return;
    __atomic_store_n(&st->file_size, (uint64_t)sb.st_size, __ATOMIC_RELAXED);
    /* LMDB tells where it maps the file only with MDB_FIXEDMAP: the
     * process's map list tells, the mapping of data.mdb's inode at offset 0 */
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return;
    char line[PATH_MAX + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off, ino;
        char perms[8];
        unsigned maj, min;
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &min,
                   &ino) == 7 &&
            ino == (unsigned long long)sb.st_ino && off == 0) {
            st->map_base = (uintptr_t)lo;
            st->map_size = (size_t)(hi - lo);
            break;
        }
    }
    fclose(f);
}

void ost__format_refresh(ost_store *st, MDB_txn *t) {
    if (__atomic_load_n(&st->format, __ATOMIC_RELAXED) >= OST_STORE_FORMAT) return;
    uint64_t f;
    if (meta_get_u64(t, st->meta, "format", &f) == 0 && f > st->format && f <= OST_STORE_FORMAT)
        __atomic_store_n(&st->format, f, __ATOMIC_RELAXED);
}

int ost__upgrade(ost_store *st, MDB_txn *t, uint64_t from) {
    /* every record is rewritten through liblmdb, which trusts the pages */
    char first[400];
    int rc = ost__walk_first(st, t, true, first, sizeof first);
    if (rc == OST_ECORRUPT)
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: cannot upgrade from format %llu: the store's pages are damaged "
                            "(%s); 'ostore check' says more, 'ostore salvage' copies what is intact",
                            st->shown, (unsigned long long)from, first);
    if (rc) return rc;
    MDB_cursor *cur;
    rc = mdb_cursor_open(t, st->recs, &cur);
    if (rc) return rc;
    MDB_val k, v;
    uint8_t *buf = NULL;
    size_t cap = 0;
    st->format = from; /* records are read as the old format says */
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        uint64_t serial;
        uint32_t cid;
        uint64_t oid = k.mv_size == 8 ? ost__rd_be64(k.mv_data) : 0;
        int dmg = k.mv_size != 8 ? OST__DMG_SHORT : ost__rec_open(st, oid, &v, &serial, &cid);
        if (dmg) {
            rc = ost__st_fail(st, OST_ECORRUPT,
                              "%s: cannot upgrade from format %llu: oid %llu: damaged record (%s); "
                              "'ostore check' says more, 'ostore salvage' copies what is intact",
                              st->path, (unsigned long long)from, (unsigned long long)oid,
                              ost__damage_text(dmg));
            break;
        }
        if (v.mv_size > cap) {
            size_t nc = cap ? cap * 2 : 4096;
            while (nc < v.mv_size) nc *= 2;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                rc = ost__st_fail(st, OST_ENOMEM, "out of memory");
                break;
            }
            buf = nb;
            cap = nc;
        }
        memcpy(buf, v.mv_data, v.mv_size);
        ost__rec_seal(buf, v.mv_size, oid);
        uint8_t kb[8]; /* the key points into the page the put changes */
        ost__be64(kb, oid);
        MDB_val kc = {8, kb}, nv = {v.mv_size, buf};
        if ((rc = mdb_cursor_put(cur, &kc, &nv, MDB_CURRENT))) break;
    }
    free(buf);
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND) return rc;
    uint64_t n;
    rc = ost__ent_upgrade(st, t, &n);
    if (rc == OST_ECORRUPT)
        return ost__st_fail(st, OST_ECORRUPT,
                            "%s: cannot upgrade from format %llu: a damaged map entry; "
                            "'ostore check' says more",
                            st->path, (unsigned long long)from);
    if (OST__OURS(rc))
        return ost__st_fail(st, rc, "%s: upgrading map entries: %s", st->shown, ost_strerror(rc));
    if (rc) return rc;
    return meta_put_u64(t, st->meta, "format", OST_STORE_FORMAT);
}

/* ---- open and close ------------------------------------------------------- */

void ost_store_options_init(ost_store_options *o) {
    memset(o, 0, sizeof *o);
    o->map_size = DEFAULT_MAP;
    o->durability = OST_SYNC_FULL;
    o->max_readers = 126;
}

ost_store *ost_store_new(void) {
    uv_once(&g_once, init_once);
    ost_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->uid = __atomic_add_fetch(&g_store_uid, 1, __ATOMIC_RELAXED);
    uv_mutex_init(&st->lock);
    if (uv_rwlock_init(&st->maplock)) {
        uv_mutex_destroy(&st->lock);
        free(st);
        return NULL;
    }
    return st;
}

/* The state pickle of a new root (*inst keeps it alive until the caller
 * drops it): a PersistentMapping whose state is {'data': {}}. */
static int root_dump(ost_store *st, ost_writer *w, ost_value *inst, const void **p, size_t *n) {
    ost_value state = ost_dict_new(), data = ost_dict_new();
    int rc = !state || !data ? OST_ENOMEM : ost_dict_set(state, ost_str_c("data"), data);
    if (state && data) data = 0; /* the dict took it */
    *inst = rc ? 0 : ost_instance_new(ost_incref(st->root_cls));
    if (!rc && *inst) {
        ost_instance_set_state(*inst, ost_incref(state));
        rc = ost_dump_state(w, *inst, p, n);
    } else if (!rc)
        rc = OST_ENOMEM;
    ost_decref(state);
    ost_decref(data);
    return rc;
}

/* Writes a new, empty store: meta and the root. */
static int init_store(ost_store *st, MDB_txn *t) {
    MDB_val k = {strlen(META_MAGIC), META_MAGIC}, v = {strlen(META_MAGIC), META_MAGIC};
    int rc = mdb_put(t, st->meta, &k, &v, 0);
    if (!rc) rc = meta_put_u64(t, st->meta, "format", OST_STORE_FORMAT);
    if (!rc) rc = meta_put_u64(t, st->meta, "next_oid", 1);
    if (!rc) rc = meta_put_u64(t, st->meta, "last_serial", 1);
    if (!rc) rc = meta_put_u64(t, st->meta, "next_class", 1);
    if (rc) return rc;
    /* the root: a PersistentMapping whose state is {'data': {}} */
    uint32_t cid;
    rc = ost__class_id(st, t, st->root_cls, &cid);
    if (rc) return rc;
    ost_writer *w = ost_writer_new();
    ost_value inst = 0;
    const void *p;
    size_t n;
    int orc = w ? root_dump(st, w, &inst, &p, &n) : OST_ENOMEM;
    if (!orc) {
        uint8_t key[8];
        ost__be64(key, ROOT_OID);
        MDB_val kk = {8, key}, vv = {n + OST_HDR_SIZE, NULL};
        rc = mdb_put(t, st->recs, &kk, &vv, MDB_RESERVE);
        if (!rc) {
            ost__hdr_write(vv.mv_data, 1, cid);
            memcpy((uint8_t *)vv.mv_data + OST_HDR_SIZE, p, n);
            ost__rec_seal(vv.mv_data, vv.mv_size, ROOT_OID);
        }
    }
    ost_decref(inst);
    ost_writer_free(w);
    if (orc) return ENOMEM;
    return rc;
}

/* In a store of another engine: writes the root record (as init_store
 * does on LMDB) when the store has none, in a commit of its own. Another
 * process that creates it at the same time wins alike. */
static int ensure_root(ost_store *st) {
    const ost__engine_ops *ops = st->ops;
    ost__sess *s;
    int rc = ops->sess_open(st->eng, &s);
    if (rc) return rc;
    ost__recview r;
    rc = ops->snap_begin(s, NULL);
    if (!rc) {
        rc = ops->get(s, ROOT_OID, &r);
        ops->snap_end(s);
    }
    if (rc != OST_ENOTFOUND || st->read_only) {
        ops->sess_close(s);
        return rc == OST_ENOTFOUND ? 0 : rc; /* a read-only open reads what is there */
    }
    uint32_t cid;
    ost_writer *w = ost_writer_new();
    ost__pkg *pkg = ost__pkg_new();
    ost_value inst = 0;
    const void *p;
    size_t n;
    rc = !w || !pkg ? OST_ENOMEM : root_dump(st, w, &inst, &p, &n);
    if (!rc) rc = ost__class_id_cached(st, st->root_cls, &cid);
    if (!rc) {
        ost__pkg_reset(pkg);
        rc = ost__pkg_add(pkg, ROOT_OID, 0, cid, p, n);
    }
    if (!rc) {
        (void)ops->commit(s, &pkg, 1);
        rc = pkg->rc;
        if (rc) { /* made meanwhile by another process? */
            int grc = ops->snap_begin(s, NULL);
            if (!grc) {
                if (ops->get(s, ROOT_OID, &r) == 0) rc = 0;
                ops->snap_end(s);
            }
            if (rc) ost__st_fail(st, rc, "%s: cannot create the root: %s", st->shown, pkg->msg);
        }
    } else
        ost__st_fail(st, rc, "%s: cannot create the root: %s", st->shown, ost_strerror(rc));
    ost_decref(inst);
    ost_writer_free(w);
    ost__pkg_free(pkg);
    ops->sess_close(s);
    return rc;
}

/* Makes st->env and opens it on directory real with flags; on failure
 * st->env is closed and NULL again (LMDB's rule after a failed open).
 * Returns LMDB's code. */
static int env_open(ost_store *st, const char *real, const ost_store_options *opts,
                    unsigned flags) {
    int rc = mdb_env_create(&st->env);
    if (rc) {
        st->env = NULL;
        return rc;
    }
    rc = mdb_env_set_maxdbs(st->env, 8);
    if (!rc) rc = mdb_env_set_mapsize(st->env, opts->map_size ? opts->map_size : DEFAULT_MAP);
    if (!rc) rc = mdb_env_set_maxreaders(st->env, opts->max_readers ? opts->max_readers : 126);
    if (!rc) rc = mdb_env_open(st->env, real, flags, 0644);
    if (rc) {
        mdb_env_close(st->env);
        st->env = NULL;
    }
    return rc;
}

static unsigned env_flags(const ost_store_options *o) {
    unsigned f = MDB_NOTLS;
    if (o->read_only) f |= MDB_RDONLY;
    if (o->durability == OST_SYNC_NOMETA) f |= MDB_NOMETASYNC;
    if (o->durability == OST_SYNC_NONE) f |= MDB_NOSYNC;
    return f;
}

/* The engines built in, in the order they are asked to claim an address
 * (store/engine.h): LMDB last, it claims every path. */
static const ost__engine_ops *const g_engines[] = {
#ifdef OST_HAVE_POSTGRESQL
    &ost__pg_engine,
#endif
    &ost__lmdb_engine,
};

/* What every engine's store needs once the engine is open: the classes the
 * store itself knows (the root, maps and sets), the registry, durability
 * and the group committer. 0 or a code with the message set. */
static int store_setup(ost_store *st, const ost_store_options *opts) {
    st->read_only = opts->read_only;
    st->group_commit = opts->group_commit && !opts->read_only;
    st->durability = opts->durability;
    st->registry = opts->registry;
    ost_class_def rdef = {.module = "persistent.mapping", .name = "PersistentMapping",
                          .persistent = true};
    ost_value rc_cls = st->registry ? ost_registry_get(st->registry, rdef.module, rdef.name) : 0;
    st->root_cls = rc_cls ? ost_incref(rc_cls) : ost_class_new(&rdef);
    if (st->root_cls) OST__O(st->root_cls)->flags |= OST__F_SHARED; /* all connections' */
    ost_class_def mdef = {.module = "ostore.maps", .name = "OrderedMap", .persistent = true};
    st->map_cls = ost_class_new(&mdef);
    mdef.name = "OrderedSet";
    st->set_cls = ost_class_new(&mdef);
    if (st->map_cls) OST__O(st->map_cls)->flags |= OST__F_SHARED;
    if (st->set_cls) OST__O(st->set_cls)->flags |= OST__F_SHARED;
    if (!st->root_cls || !st->map_cls || !st->set_cls)
        return ost__st_fail(st, OST_ENOMEM, "out of memory");
    if (st->group_commit && ost__committer_start(st))
        return ost__st_fail(st, OST_ENOMEM, "cannot start the group committer thread");
    return 0;
}

static int lmdb_store_open(ost_store *st, const char *path, const ost_store_options *opts);

int ost__lmdb_only(ost_store *st, const char *what) {
    return ost__st_fail(st, OST_EINVAL, "%s: %s: not available on the %s engine yet (LMDB only)",
                        st->shown, what, st->ops ? st->ops->name : "?");
}

int ost_store_open(ost_store *st, const char *addr, const ost_store_options *opts) {
    ost_store_options def;
    if (!st) return OST_EINVAL;
    ost__st_clear(st);
    if (!addr) return ost__st_fail(st, OST_EINVAL, "no path given");
    if (!opts) {
        ost_store_options_init(&def);
        opts = &def;
    }
    const ost__engine_ops *ops = &ost__lmdb_engine;
    for (size_t i = 0; i < sizeof g_engines / sizeof *g_engines; i++)
        if (g_engines[i]->claims(addr)) {
            ops = g_engines[i];
            break;
        }
    if (ops == &ost__lmdb_engine) return lmdb_store_open(st, addr, opts);
    /* the address may hold a password: the engine makes st->shown */
    if (st->eng || st->env)
        return ost__st_fail(st, OST_EINVAL, "%s store: this handle is open already", ops->name);
    if ((unsigned)opts->durability > OST_SYNC_NONE || (opts->create && opts->read_only))
        return ost__st_fail(st, OST_EINVAL, "%s store: bad options", ops->name);
    if (opts->prefetch_connections > 8)
        return ost__st_fail(st, OST_EINVAL,
                            "%s store: prefetch_connections is %u: at most 8 (0 or 1: one)",
                            ops->name, opts->prefetch_connections);
    ost__engine *e;
    int rc = ops->open(st, addr, opts, &e); /* fills st->shown */
    if (rc) return rc;
    st->ops = ops;
    st->eng = e;
    if ((rc = store_setup(st, opts)) || (rc = ensure_root(st))) {
        ost__store_shut(st);
        return rc;
    }
    return 0;
}

static int lmdb_store_open(ost_store *st, const char *path, const ost_store_options *opts) {
    char shown[OST__PATH_SHOWN]; /* path as messages show it */
    ost__path_show(shown, sizeof shown, path);
    if (st->env || st->eng) return ost__st_fail(st, OST_EINVAL, "%s: this handle is open already", shown);
    if ((unsigned)opts->durability > OST_SYNC_NONE || (opts->create && opts->read_only))
        return ost__st_fail(st, OST_EINVAL, "%s: bad options", shown);
    if (opts->prefetch_connections > 8)
        return ost__st_fail(st, OST_EINVAL, "%s: prefetch_connections is %u: at most 8 (0 or 1: one)",
                            shown, opts->prefetch_connections);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT || !opts->create)
            return ost__st_fail(st, errno == ENOENT ? OST_ENOTFOUND : OST_EIO,
                                "%s: %s", shown, strerror(errno));
        if (mkdir(path, 0755) != 0)
            return ost__st_fail(st, OST_EIO, "%s: cannot create: %s", shown, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        return ost__st_fail(st, OST_EINVAL, "%s: not a directory", shown);
    }
    char real[PATH_MAX];
    if (!realpath(path, real)) return ost__st_fail(st, OST_EIO, "%s: %s", shown, strerror(errno));
    /* LMDB opens data.mdb and lock.mdb as they are: a FIFO would block
     * the open for ever, a directory or a device fail in odd ways. Absent
     * is fine where the store may be created (and lock.mdb always). */
    static const char *const files[2] = {"data.mdb", "lock.mdb"};
    for (int i = 0; i < 2; i++) {
        char file[PATH_MAX + 16];
        snprintf(file, sizeof file, "%s/%s", real, files[i]);
        if (stat(file, &sb) == 0) {
            if (!S_ISREG(sb.st_mode))
                return ost__st_fail(st, OST_ECORRUPT, "%s: %s is not a regular file (%s)", shown,
                                    files[i], ost__file_kind(sb.st_mode));
        } else if (errno != ENOENT) {
            return ost__st_fail(st, OST_EIO, "%s: %s: %s", shown, files[i], strerror(errno));
        } else if (i == 0 && !opts->create) {
            return ost__st_fail(st, OST_ENOTFOUND, "%s: no store here (no data.mdb)", shown);
        }
    }
    /* liblmdb trusts its meta pages (a page size of 0 divides by zero in
     * mdb_env_open): ours are checked first */
    char why[400];
    int mrc = ost__meta_check(real, why, sizeof why);
    if (mrc && mrc != OST_ENOTFOUND)
        return ost__st_fail(st, mrc,
                            "%s: damaged store: %s ('ostore check' says more, 'ostore salvage' "
                            "copies what is intact)",
                            shown, why);

    /* liblmdb makes lock.mdb with ftruncate and writes it through a map:
     * on a full disk the first write of a page that has no block faults
     * (SIGBUS in mdb_env_open). Its blocks are allocated first, so a full
     * disk is an error here. */
    char lockfile[PATH_MAX + 16];
    snprintf(lockfile, sizeof lockfile, "%s/lock.mdb", real);
    int lfd = open(lockfile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (lfd >= 0) {
        struct stat lsb = {0};
        off_t want = ((off_t)(opts->max_readers ? opts->max_readers : 126) * 64 + 8191) & ~(off_t)4095;
        int frc = fstat(lfd, &lsb) == 0 && S_ISREG(lsb.st_mode)
                      ? posix_fallocate(lfd, 0, lsb.st_size > want ? lsb.st_size : want)
                      : 0;
        bool made = lsb.st_size == 0;
        close(lfd);
        if (frc == ENOSPC || frc == EDQUOT) {
            if (made) unlink(lockfile);
            return ost__st_fail(st, OST_EIO, "%s: no space left on the device for lock.mdb (%s)",
                                shown, strerror(frc));
        }
    }

    uv_mutex_lock(&g_open_lock);
    for (ost_store *o = g_open; o; o = o->next_open)
        if (strcmp(o->path, real) == 0) {
            uv_mutex_unlock(&g_open_lock);
            return ost__st_fail(st, OST_EBUSY, "%s: already open in this process", shown);
        }
    st->path = strdup(real);
    ost__path_show(st->shown, sizeof st->shown, real);
    if (!st->path) {
        uv_mutex_unlock(&g_open_lock);
        return ost__st_fail(st, OST_ENOMEM, "out of memory");
    }
    st->next_open = g_open;
    g_open = st;
    uv_mutex_unlock(&g_open_lock);

    int code = OST_EIO;
    int rc = env_open(st, real, opts, env_flags(opts));
    if ((rc == EACCES || rc == EPERM || rc == EROFS) && opts->read_only) {
        /* lock.mdb cannot be written (or made) by this user: read without
         * the lock file, as for a store on read-only media */
        int rc2 = env_open(st, real, opts, env_flags(opts) | MDB_NOLOCK);
        if (!rc2) st->no_lock = true;
        else if (rc2 != EACCES && rc2 != EPERM && rc2 != EROFS) rc = rc2;
        if (!rc2) rc = 0;
    }
    if (rc) {
        const char *hint = rc != EACCES && rc != EPERM && rc != EROFS ? ""
                           : opts->read_only ? " (reading needs read access to data.mdb)"
                                             : " (writing needs write access to the directory, "
                                               "data.mdb and lock.mdb; a read-only open needs "
                                               "read access only)";
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: cannot open the LMDB environment: %s%s",
                            shown, ost__mdb_strerror(st, rc), hint);
        goto fail;
    }
    if (!opts->read_only) {
        /* an upgrade (below, when the store is older) rewrites every page:
         * room for the copy on write of all of them */
        MDB_envinfo ei;
        struct stat dsb;
        char df[PATH_MAX + 16];
        if (stat(datafile_of(real, df, sizeof df), &dsb) == 0 && mdb_env_info(st->env, &ei) == 0 &&
            ei.me_mapsize < (uint64_t)dsb.st_size * 3 + ((uint64_t)64 << 20))
            mdb_env_set_mapsize(st->env, (size_t)dsb.st_size * 3 + ((size_t)64 << 20));
    }
    map_changed(st);
    st->ops = &ost__lmdb_engine;
    if (ost__lmdb_engine_attach(st)) {
        code = ost__st_fail(st, OST_ENOMEM, "%s: out of memory", shown);
        goto fail;
    }
    if ((code = store_setup(st, opts))) goto fail;

    MDB_txn *t;
    rc = mdb_txn_begin(st->env, NULL, st->read_only ? MDB_RDONLY : 0, &t);
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: %s", shown, ost__mdb_strerror(st, rc));
        goto fail;
    }
    unsigned cf = st->read_only ? 0 : MDB_CREATE;
    rc = mdb_dbi_open(t, "meta", cf, &st->meta);
    if (rc == MDB_NOTFOUND) {
        mdb_txn_abort(t);
        code = ost__st_fail(st, OST_ECORRUPT, "%s: not an ostore store (no meta database)", shown);
        goto fail;
    }
    if (!rc) rc = mdb_dbi_open(t, "records", cf, &st->recs);
    if (!rc) rc = mdb_dbi_open(t, "classes", cf, &st->classes);
    if (!rc) rc = mdb_dbi_open(t, "txlog", cf, &st->txlog);
    if (!rc) rc = mdb_dbi_open(t, "mapents", cf, &st->ments);
    if (rc == MDB_NOTFOUND && st->read_only) { /* a format-1 store: no maps */
        rc = 0;
        st->no_ments = true;
    }
    if (rc) {
        mdb_txn_abort(t);
        code = ost__st_fail(st, ost__mdb_code(rc) == OST_ENOTFOUND ? OST_ECORRUPT : ost__mdb_code(rc),
                     "%s: cannot open databases: %s", shown, ost__mdb_strerror(st, rc));
        goto fail;
    }
    MDB_val k = {strlen(META_MAGIC), META_MAGIC}, v;
    rc = mdb_get(t, st->meta, &k, &v);
    if (rc == MDB_NOTFOUND && !st->read_only && opts->create) {
        rc = init_store(st, t);
        if (rc) {
            mdb_txn_abort(t);
            code = ost__st_fail(st, ost__mdb_code(rc), "%s: cannot create the store: %s", shown,
                         ost__mdb_strerror(st, rc));
            goto fail;
        }
    } else if (rc || v.mv_size != strlen(META_MAGIC) || memcmp(v.mv_data, META_MAGIC, v.mv_size)) {
        mdb_txn_abort(t);
        code = ost__st_fail(st, OST_ECORRUPT, "%s: not an ostore store (meta has no magic)", shown);
        goto fail;
    }
    uint64_t fmt;
    rc = meta_get_u64(t, st->meta, "format", &fmt);
    if (rc || fmt < 1 || fmt > OST_STORE_FORMAT) {
        mdb_txn_abort(t);
        if (rc)
            code = ost__st_fail(st, OST_ECORRUPT, "%s: damaged meta (format: %s)", shown,
                                ost__mdb_strerror(st, rc));
        else
            code = ost__st_fail(st, OST_EVERSION, "%s: store format %llu, this library reads %d",
                                shown,
                         (unsigned long long)fmt, OST_STORE_FORMAT);
        goto fail;
    }
    if (fmt < OST_STORE_FORMAT && !st->read_only) {
        rc = ost__upgrade(st, t, fmt);
        if (rc) {
            mdb_txn_abort(t);
            if (OST__OURS(rc)) { /* st->msg says which record */
                code = rc;
                goto fail;
            }
            code = ost__st_fail(st, ost__mdb_code(rc), "%s: upgrading the store from format %llu: %s",
                                path, (unsigned long long)fmt, mdb_strerror(rc));
            goto fail;
        }
        fmt = OST_STORE_FORMAT;
    }
    st->format = fmt;
    uint64_t x;
    if (meta_get_u64(t, st->meta, "next_oid", &x) || meta_get_u64(t, st->meta, "last_serial", &x) ||
        meta_get_u64(t, st->meta, "next_class", &x)) {
        mdb_txn_abort(t);
        code = ost__st_fail(st, OST_ECORRUPT, "%s: damaged meta (counters)", shown);
        goto fail;
    }
    rc = mdb_txn_commit(t);
    if (rc) {
        code = ost__st_fail(st, ost__mdb_code(rc), "%s: %s", shown, ost__mdb_strerror(st, rc));
        goto fail;
    }
    return 0;
fail:
    ost__committer_stop(st);
    ost__lmdb_engine_detach(st);
    if (st->env) mdb_env_close(st->env);
    st->env = NULL;
    st->no_lock = false;
    ost_decref(st->root_cls);
    ost_decref(st->map_cls);
    ost_decref(st->set_cls);
    st->root_cls = st->map_cls = st->set_cls = 0;
    uv_mutex_lock(&g_open_lock);
    for (ost_store **pp = &g_open; *pp; pp = &(*pp)->next_open)
        if (*pp == st) {
            *pp = st->next_open;
            break;
        }
    uv_mutex_unlock(&g_open_lock);
    free(st->path);
    st->path = NULL;
    return code;
}

void ost__store_shut(ost_store *st) {
    while (st->conns) ost__conn_detach(st->conns);
    ost__committer_stop(st);
    if (st->ops && st->ops != &ost__lmdb_engine) {
        ost__engine *e = st->eng;
        st->eng = NULL;
        if (e) st->ops->close(e);
    }
    ost__lmdb_engine_detach(st);
    ost__class_cache_free(st);
    if (st->env) {
        mdb_env_close(st->env);
        st->env = NULL;
        uv_mutex_lock(&g_open_lock);
        for (ost_store **pp = &g_open; *pp; pp = &(*pp)->next_open)
            if (*pp == st) {
                *pp = st->next_open;
                break;
            }
        uv_mutex_unlock(&g_open_lock);
    }
    ost_decref(st->root_cls);
    ost_decref(st->map_cls);
    ost_decref(st->set_cls);
    st->root_cls = st->map_cls = st->set_cls = 0;
    free(st->path);
    st->path = NULL;
}

void ost_store_close(ost_store *st) {
    if (!st) return;
    ost__store_shut(st);
    uv_rwlock_destroy(&st->maplock);
    uv_mutex_destroy(&st->lock);
    free(st);
}

int ost__locked_txn_begin(ost_store *st, unsigned flags, MDB_txn **t) {
    for (int tries = 0;; tries++) {
        uv_rwlock_rdlock(&st->maplock);
        int rc = mdb_txn_begin(st->env, NULL, flags, t);
        if (rc != MDB_MAP_RESIZED || tries == 8) return rc;
        uv_rwlock_rdunlock(&st->maplock);
        int grc = ost__grow_map(st);
        if (grc) {
            uv_rwlock_rdlock(&st->maplock);
            return grc;
        }
    }
}

int ost_store_stat(ost_store *st, ost_store_stats *out) {
    if (!st || !st->eng || !out) return OST_EINVAL;
    if (st->ops != &ost__lmdb_engine) {
        memset(out, 0, sizeof *out);
        return st->ops->stat(st->eng, out);
    }
    memset(out, 0, sizeof *out);
    MDB_txn *t;
    int rc = ost__locked_txn_begin(st, MDB_RDONLY, &t);
    if (!rc) {
        MDB_stat ms;
        MDB_envinfo ei;
        rc = mdb_stat(t, st->recs, &ms);
        if (!rc) out->records = ms.ms_entries;
        if (!rc) rc = meta_get_u64(t, st->meta, "next_oid", &out->next_oid);
        if (!rc) rc = meta_get_u64(t, st->meta, "last_serial", &out->last_serial);
        if (!rc) {
            MDB_cursor *cur;
            MDB_val k, v;
            rc = mdb_cursor_open(t, st->recs, &cur);
            if (!rc) {
                while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) out->bytes += v.mv_size;
                mdb_cursor_close(cur);
            }
        }
        mdb_env_info(st->env, &ei);
        out->map_size = ei.me_mapsize;
        mdb_txn_abort(t);
    }
    uv_rwlock_rdunlock(&st->maplock);
    return rc ? ost__st_fail(st, ost__mdb_code(rc), "%s: %s", st->shown,
                             ost__mdb_strerror(st, rc)) : 0;
}

/* Doubles the map after MDB_MAP_FULL. Every read snapshot of the process
 * must be closed while LMDB remaps: the write lock of maplock waits for
 * them; connections reopen their snapshot on next use. */
static int resize_map(ost_store *st, uint64_t at_least) {
    /* no LMDB call of the process runs under the write lock; a connection
     * that closes aborts its snapshot under the read lock, then leaves the
     * list (ost_conn_close), so the list holds no aborted snapshot here */
    uv_rwlock_wrlock(&st->maplock);
    ost__lmdb_sess_reset_all(st);
    MDB_envinfo ei;
    mdb_env_info(st->env, &ei);
    uint64_t size = ei.me_mapsize * 2;
    while (size < at_least) size *= 2;
    int rc = mdb_env_set_mapsize(st->env, (size_t)size);
    map_changed(st);
    uv_rwlock_wrunlock(&st->maplock);
    return rc;
}

int ost__grow_map(ost_store *st) { return resize_map(st, 0); }

/* Before a write of `items` records and entries of `bytes` bytes: grows
 * the map when the write could fill it, so that a big batch is not
 * written a second time after MDB_MAP_FULL. Copy on write may copy every
 * page the items land on (a batch of random keys, every leaf page), so
 * the room asked for is what is used now plus a page per item, at most
 * the whole used size again. The map is address space: the file grows
 * only by what is written. */
int ost__ensure_room(ost_store *st, size_t bytes, size_t items) {
    MDB_envinfo ei;
    MDB_stat es;
    uv_rwlock_rdlock(&st->maplock); /* they read the map, which a resize replaces */
    int rc = mdb_env_info(st->env, &ei) || mdb_env_stat(st->env, &es);
    uv_rwlock_rdunlock(&st->maplock);
    if (rc) return 0;
    uint64_t ps = es.ms_psize, used = ((uint64_t)ei.me_last_pgno + 1) * ps;
    uint64_t touch = (uint64_t)items * ps;
    if (touch > used) touch = used;
    uint64_t want = used + touch + 2 * (uint64_t)bytes + ((uint64_t)1 << 20);
    if (ei.me_mapsize >= want) return 0;
    return resize_map(st, want);
}

/* ---- classes ------------------------------------------------------------------ */

/* The classes table's key of class (module, name), 'n' module NUL name, in
 * key (cap bytes): its length, or 0 when the names do not fit. */
static size_t class_key(const char *m, size_t ml, const char *n, size_t nl, char *key,
                        size_t cap) {
    if (!m || !n || ml + nl + 2 > cap) return 0;
    key[0] = 'n';
    memcpy(key + 1, m, ml);
    key[1 + ml] = 0;
    memcpy(key + 2 + ml, n, nl);
    return ml + nl + 2;
}

int ost__class_find_name(ost_store *st, MDB_txn *t, const char *m, size_t ml, const char *n,
                         size_t nl, uint32_t *id) {
    char key[1024];
    MDB_val k = {class_key(m, ml, n, nl, key, sizeof key), key}, v;
    if (!k.mv_size) return MDB_NOTFOUND; /* no such name can be stored */
    int rc = mdb_get(t, st->classes, &k, &v);
    if (rc) return rc;
    if (v.mv_size != 4) return MDB_CORRUPTED;
    memcpy(id, v.mv_data, 4);
    return 0;
}

int ost__class_id_name(ost_store *st, MDB_txn *t, const char *m, size_t ml, const char *n,
                       size_t nl, uint32_t *id) {
    char key[1024];
    MDB_val k = {class_key(m, ml, n, nl, key, sizeof key), key};
    if (!k.mv_size) return EINVAL;
    int rc = ost__class_find_name(st, t, m, ml, n, nl, id);
    if (rc != MDB_NOTFOUND) return rc;
    uint64_t next;
    rc = meta_get_u64(t, st->meta, "next_class", &next);
    if (rc) return rc;
    if (next == 0 || next > OST__CLASS_LIMIT) return MDB_CORRUPTED; /* the id would wrap */
    uint32_t nid = (uint32_t)next;
    MDB_val nv = {4, &nid};
    rc = mdb_put(t, st->classes, &k, &nv, 0);
    if (rc) return rc;
    char ikey[5];
    ikey[0] = 'i';
    memcpy(ikey + 1, &nid, 4);
    MDB_val ik = {5, ikey}, iv = {k.mv_size - 1, key + 1};
    rc = mdb_put(t, st->classes, &ik, &iv, 0);
    if (!rc) rc = meta_put_u64(t, st->meta, "next_class", next + 1);
    if (!rc) *id = nid;
    return rc;
}

/* Finds or creates the id of class cls inside write transaction t. */
int ost__class_id(ost_store *st, MDB_txn *t, ost_value cls, uint32_t *id) {
    size_t ml, nl;
    const char *m = ost_data(ost_global_module(cls), &ml);
    const char *n = ost_data(ost_global_name(cls), &nl);
    return ost__class_id_name(st, t, m, ml, n, nl, id);
}

/* The class value of an id (new reference), through the registry. */
int ost__class_of_id(ost_store *st, MDB_txn *t, uint32_t id, ost_value *cls) {
    char ikey[5];
    ikey[0] = 'i';
    memcpy(ikey + 1, &id, 4);
    MDB_val k = {5, ikey}, v;
    int rc = mdb_get(t, st->classes, &k, &v);
    if (rc) return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
    const char *m = v.mv_data;
    const char *z = memchr(m, 0, v.mv_size);
    if (!z || z == m || (size_t)(z - m) + 1 >= v.mv_size) return MDB_CORRUPTED;
    ost__classview cv = {id, m, z + 1, (size_t)(z - m), v.mv_size - (size_t)(z - m) - 1};
    rc = ost__class_value(st, &cv, cls);
    return rc == OST_ENOMEM ? ENOMEM : rc ? MDB_CORRUPTED : 0;
}

int ost__class_value(ost_store *st, const ost__classview *cv, ost_value *cls) {
    char buf[1024]; /* class_id refuses longer names */
    if (cv->mlen + cv->nlen + 2 > sizeof buf) return OST_ECORRUPT;
    char *mod = buf, *name = buf + cv->mlen + 1;
    memcpy(mod, cv->module, cv->mlen);
    mod[cv->mlen] = 0;
    memcpy(name, cv->name, cv->nlen);
    name[cv->nlen] = 0;
    if (strcmp(mod, "persistent.mapping") == 0 && strcmp(name, "PersistentMapping") == 0) {
        *cls = ost_incref(st->root_cls);
        return 0;
    }
    if (strcmp(mod, "ostore.maps") == 0 &&
        (strcmp(name, "OrderedMap") == 0 || strcmp(name, "OrderedSet") == 0)) {
        *cls = ost_incref(name[7] == 'M' ? st->map_cls : st->set_cls);
        return 0;
    }
    ost_value c = st->registry ? ost_registry_get(st->registry, mod, name) : 0;
    *cls = c ? ost_incref(c) : ost_global(mod, name);
    return *cls ? 0 : OST_ENOMEM;
}
