/* The LMDB environment of a store: the engine's open and close (the
 * checks of the directory and its files before liblmdb sees them, the
 * environment and its databases, a new store's meta and root, the upgrade
 * of an older format), the map's resize, the store's counters, and the
 * class table. Layout (docs/format.md): named databases "records" (oid,
 * 8 bytes big-endian -> 16-byte header + state pickle), "meta" (format,
 * next oid, last serial, next class id), "classes" ("i" + id -> module
 * NUL name, "n" + module NUL name -> id), "txlog" (serial -> oids of
 * existing objects that commit changed, for the caches of other
 * connections), "mapents" (map entries: entries.c) and "mapdels" (the
 * last commit that deleted each key: entries.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "entries.h"
#include "engine.h"

#define META_MAGIC "ostore"
#define ROOT_OID 0

/* ---- the process's open stores ------------------------------------------------ */


static uv_mutex_t g_open_lock;
static uv_once_t g_once = UV_ONCE_INIT;
static ost__engine *g_open; /* LMDB stores open in this process, by path */

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

static void open_list_init(void) {
    uv_mutex_init(&g_open_lock);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- records in the map ---------------------------------------------------------- */

bool ost__in_file(ost__engine *en, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p, base = en->map_base;
    if (!base || a < base || a - base >= en->map_size) return true; /* not in the map */
    uint64_t end = (uint64_t)(a - base) + n;
    if (end < n) return false;
    if (end <= __atomic_load_n(&en->file_size, __ATOMIC_RELAXED)) return true;
    /* the file may have grown since the size was read */
    int fd;
    struct stat sb;
    if (mdb_env_get_fd(en->env, &fd) || fstat(fd, &sb)) return false;
    __atomic_store_n(&en->file_size, (uint64_t)sb.st_size, __ATOMIC_RELAXED);
    return end <= (uint64_t)sb.st_size;
}

int ost__rec_open(ost__engine *en, uint64_t oid, const MDB_val *v, uint64_t *serial,
                  uint32_t *class_id) {
    const uint8_t *h = v->mv_data;
    if (v->mv_size < OST_HDR_SIZE + 2) return OST__DMG_SHORT;
    if (!ost__in_file(en, h, v->mv_size)) return OST__DMG_BEYOND;
    if (__atomic_load_n(&en->format, __ATOMIC_RELAXED) >= 3) {
        if (!ost__rec_crc_ok(oid, h, v->mv_size)) return OST__DMG_CRC;
    } else if (h[12] | h[13] | h[14] | h[15]) {
        return OST__DMG_RESERVED;
    }
    *serial = ost__rd_le64(h);
    *class_id = ost__rd_le32(h + 8);
    return 0;
}

int ost__lmdb_meta_get(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t *out) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(t, dbi, &k, &v);
    if (rc) return rc;
    if (v.mv_size != 8) return MDB_CORRUPTED;
    *out = ost__rd_le64(v.mv_data);
    return 0;
}

int ost__lmdb_meta_put(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t val) {
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

int ost__lmdb_map_find(ost__engine *en, size_t min, uintptr_t *base, size_t *size) {
    int fd;
    struct stat sb;
    *base = 0;
    *size = 0;
    if (mdb_env_get_fd(en->env, &fd) != 0 || fstat(fd, &sb) != 0) return OST_EIO;
    __atomic_store_n(&en->file_size, (uint64_t)sb.st_size, __ATOMIC_RELAXED);
    /* LMDB tells where it maps the file only with MDB_FIXEDMAP: the
     * process's map list tells, the mapping of data.mdb's inode at offset 0 */
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return OST_EIO;
    char line[PATH_MAX + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off, ino;
        char perms[8];
        unsigned maj, min_;
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &min_,
                   &ino) == 7 &&
            ino == (unsigned long long)sb.st_ino && off == 0 && hi - lo >= min) {
            *base = (uintptr_t)lo;
            *size = (size_t)(hi - lo);
            break;
        }
    }
    fclose(f);
    return *base ? 0 : OST_EIO;
}

void ost__lmdb_map_changed(ost__engine *en) {
    uintptr_t base;
    size_t size;
    ost__lmdb_map_find(en, 0, &base, &size);
    en->map_base = base;
    en->map_size = size;
}

void ost__format_seen(ost__engine *en, uint64_t f) {
    if (f > __atomic_load_n(&en->format, __ATOMIC_RELAXED) && f <= OST_STORE_FORMAT) {
        __atomic_store_n(&en->format, f, __ATOMIC_RELAXED);
        en->host->set_format(en->st, f);
    }
}

void ost__format_refresh(ost__engine *en, MDB_txn *t) {
    if (__atomic_load_n(&en->format, __ATOMIC_RELAXED) >= OST_STORE_FORMAT) return;
    uint64_t f;
    if (ost__lmdb_meta_get(t, en->meta, "format", &f) == 0) ost__format_seen(en, f);
}

int ost__upgrade(ost__engine *en, MDB_txn *t, uint64_t from) {
    /* format 3's records and entries are format 4's as they are (dict
     * states under a class's own id): only the format changes */
    if (from >= 3) return ost__lmdb_meta_put(t, en->meta, "format", OST_STORE_FORMAT);
    /* every record is rewritten through liblmdb, which trusts the pages */
    char first[400];
    int rc = ost__walk_first(en, t, true, first, sizeof first);
    if (rc == OST_ECORRUPT)
        return ost__lmdb_fail(en, OST_ECORRUPT,
                            "%s: cannot upgrade from format %llu: the store's pages are damaged "
                            "(%s); 'ostore check' says more, 'ostore salvage' copies what is intact",
                            en->shown, (unsigned long long)from, first);
    if (rc) return rc;
    MDB_cursor *cur;
    rc = mdb_cursor_open(t, en->recs, &cur);
    if (rc) return rc;
    MDB_val k, v;
    uint8_t *buf = NULL;
    size_t cap = 0;
    en->format = from; /* records are read as the old format says */
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        uint64_t serial;
        uint32_t cid;
        uint64_t oid = k.mv_size == 8 ? ost__rd_be64(k.mv_data) : 0;
        int dmg = k.mv_size != 8 ? OST__DMG_SHORT : ost__rec_open(en, oid, &v, &serial, &cid);
        if (dmg) {
            rc = ost__lmdb_fail(en, OST_ECORRUPT,
                              "%s: cannot upgrade from format %llu: oid %llu: damaged record (%s); "
                              "'ostore check' says more, 'ostore salvage' copies what is intact",
                              en->path, (unsigned long long)from, (unsigned long long)oid,
                              ost__damage_text(dmg));
            break;
        }
        if (ost__reserve((void **)&buf, &cap, v.mv_size, 1, 4096)) {
            rc = ost__lmdb_fail(en, OST_ENOMEM, "out of memory");
            break;
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
    rc = ost__ent_upgrade(en, t, &n);
    if (rc == OST_ECORRUPT)
        return ost__lmdb_fail(en, OST_ECORRUPT,
                            "%s: cannot upgrade from format %llu: a damaged map entry; "
                            "'ostore check' says more",
                            en->path, (unsigned long long)from);
    if (OST__OURS(rc))
        return ost__lmdb_fail(en, rc, "%s: upgrading map entries: %s", en->shown, ost_strerror(rc));
    if (rc) return rc;
    return ost__lmdb_meta_put(t, en->meta, "format", OST_STORE_FORMAT);
}

/* ---- open and close ------------------------------------------------------------ */

/* Writes a new, empty store: meta and the root. */
static int init_store(ost__engine *en, MDB_txn *t) {
    MDB_val k = {strlen(META_MAGIC), META_MAGIC}, v = {strlen(META_MAGIC), META_MAGIC};
    int rc = mdb_put(t, en->meta, &k, &v, 0);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "format", OST_STORE_FORMAT);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "next_oid", 1);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "last_serial", 1);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "next_class", 1);
    if (rc) return rc;
    /* the root: a PersistentMapping whose state is {'data': {}}, as the
     * store makes it (host->root_state) */
    uint32_t cid;
    rc = ost__class_id_name(en, t, "persistent.mapping", 18, "PersistentMapping", 17, &cid);
    if (rc) return rc;
    uint8_t *p = NULL;
    size_t n = 0;
    if (en->host->root_state(en->st, &p, &n)) return ENOMEM;
    uint8_t key[8];
    ost__be64(key, ROOT_OID);
    MDB_val kk = {8, key}, vv = {n + OST_HDR_SIZE, NULL};
    rc = mdb_put(t, en->recs, &kk, &vv, MDB_RESERVE);
    if (!rc) {
        ost__hdr_write(vv.mv_data, 1, cid);
        memcpy((uint8_t *)vv.mv_data + OST_HDR_SIZE, p, n);
        ost__rec_seal(vv.mv_data, vv.mv_size, ROOT_OID);
    }
    free(p);
    return rc;
}

/* Makes en->env and opens it on directory real with flags; on failure
 * en->env is closed and NULL again (LMDB's rule after a failed open).
 * Returns LMDB's code. */
static int env_open(ost__engine *en, const char *real, const ost_store_options *opts,
                    unsigned flags) {
    int rc = mdb_env_create(&en->env);
    if (rc) {
        en->env = NULL;
        return rc;
    }
    rc = mdb_env_set_maxdbs(en->env, 8);
    if (!rc) rc = mdb_env_set_mapsize(en->env, opts->map_size ? opts->map_size : OST__DEFAULT_MAP);
    if (!rc) rc = mdb_env_set_maxreaders(en->env, opts->max_readers ? opts->max_readers : 126);
    if (!rc) rc = mdb_env_open(en->env, real, flags, 0644);
    if (rc) {
        mdb_env_close(en->env);
        en->env = NULL;
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

/* What ost__lmdb_env_open works on, shared by its steps below. */
typedef struct {
    ost__engine *en;
    const ost_store_options *opts; /* borrowed */
    const char *path;              /* as the caller gave it, borrowed */
    char shown[OST__PATH_SHOWN];   /* path as messages show it */
    char real[PATH_MAX];           /* path resolved (realpath) */
    bool made_dir;                 /* this open made the directory */
    bool absent[2];                /* of env_files: what a failed open removes again */
} opening;

/* The files of an LMDB environment, in opening.absent's order. */
static const char *const env_files[2] = {"data.mdb", "lock.mdb"};

/* The options o->opts must pass before anything is touched: a known
 * durability, not both create and read_only, at most
 * 8 prefetch connections. Returns 0, or OST_EINVAL with en's message. */
static int check_options(const opening *o) {
    ost__engine *en = o->en;
    const ost_store_options *opts = o->opts;
    if ((unsigned)opts->durability > OST_SYNC_NONE || (opts->create && opts->read_only))
        return ost__lmdb_fail(en, OST_EINVAL, "%s: bad options", o->shown);
    if (opts->prefetch_connections > 8)
        return ost__lmdb_fail(en, OST_EINVAL, "%s: prefetch_connections is %u: at most 8 (0 or 1: one)",
                            o->shown, opts->prefetch_connections);
    return 0;
}

/* The store's directory o->path: made when it is absent and create is set
 * (o->made_dir), refused when it is no directory; then o->real gets its
 * real path. Returns 0, or an error with en's message. */
static int find_dir(opening *o) {
    ost__engine *en = o->en;
    struct stat sb;
    if (stat(o->path, &sb) != 0) {
        if (errno == ENOENT && !o->opts->create)
            return ost__lmdb_fail(en, OST_ENOTFOUND, "%s: %s (no store here: open with create, "
                                "ost_store_options.create, to make one)", o->shown, strerror(errno));
        if (errno != ENOENT)
            return ost__lmdb_fail(en, OST_EIO, "%s: %s", o->shown, strerror(errno));
        if (mkdir(o->path, 0755) != 0)
            return ost__lmdb_fail(en, OST_EIO, "%s: cannot create: %s", o->shown, strerror(errno));
        o->made_dir = true;
    } else if (!S_ISDIR(sb.st_mode)) {
        return ost__lmdb_fail(en, OST_EINVAL, "%s: not a directory", o->shown);
    }
    if (!realpath(o->path, o->real))
        return ost__lmdb_fail(en, OST_EIO, "%s: %s", o->shown, strerror(errno));
    return 0;
}

/* LMDB opens data.mdb and lock.mdb as they are: a FIFO would block the
 * open for ever, a directory or a device fail in odd ways. Each must be a
 * regular file, or absent (o->absent) where the store may be created (and
 * lock.mdb always). Then the meta pages of data.mdb are checked, since
 * liblmdb trusts them. Returns 0, or an error with en's message. */
static int check_files(opening *o) {
    ost__engine *en = o->en;
    struct stat sb;
    for (int i = 0; i < 2; i++) {
        char file[PATH_MAX + 16];
        snprintf(file, sizeof file, "%s/%s", o->real, env_files[i]);
        if (stat(file, &sb) == 0) {
            if (!S_ISREG(sb.st_mode))
                return ost__lmdb_fail(en, OST_ECORRUPT, "%s: %s is not a regular file (%s)",
                                    o->shown, env_files[i], ost__file_kind(sb.st_mode));
        } else if (errno != ENOENT) {
            return ost__lmdb_fail(en, OST_EIO, "%s: %s: %s", o->shown, env_files[i], strerror(errno));
        } else if (i == 0 && !o->opts->create) {
            return ost__lmdb_fail(en, OST_ENOTFOUND, "%s: no store here (no data.mdb: open with "
                                "create, ost_store_options.create, to make one)", o->shown);
        } else {
            o->absent[i] = true;
        }
    }
    /* liblmdb trusts its meta pages (a page size of 0 divides by zero in
     * mdb_env_open): ours are checked first */
    char why[400];
    int mrc = ost__meta_check(o->real, why, sizeof why);
    if (mrc && mrc != OST_ENOTFOUND)
        return ost__lmdb_fail(en, mrc,
                            "%s: damaged store: %s ('ostore check' says more, 'ostore salvage' "
                            "copies what is intact)",
                            o->shown, why);
    return 0;
}

/* liblmdb makes lock.mdb with ftruncate and writes it through a map: on a
 * full disk the first write of a page that has no block faults (SIGBUS in
 * mdb_env_open). Its blocks are allocated here first, so a full disk is an
 * error (the lock file this made, and the directory, removed again).
 * Returns 0 (also when the file cannot be opened: liblmdb says why), or
 * OST_EIO with en's message. */
static int reserve_lock_file(const opening *o) {
    char lockfile[PATH_MAX + 16];
    snprintf(lockfile, sizeof lockfile, "%s/lock.mdb", o->real);
    int lfd = open(lockfile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (lfd < 0) return 0;
    struct stat lsb = {0};
    unsigned readers = o->opts->max_readers ? o->opts->max_readers : 126;
    off_t want = ((off_t)readers * 64 + 8191) & ~(off_t)4095;
    int frc = fstat(lfd, &lsb) == 0 && S_ISREG(lsb.st_mode)
                  ? posix_fallocate(lfd, 0, lsb.st_size > want ? lsb.st_size : want)
                  : 0;
    bool made = lsb.st_size == 0;
    close(lfd);
    if (frc == ENOSPC || frc == EDQUOT) {
        if (made) unlink(lockfile);
        if (o->made_dir) (void)rmdir(o->real);
        return ost__lmdb_fail(o->en, OST_EIO, "%s: no space left on the device for lock.mdb (%s)",
                            o->shown, strerror(frc));
    }
    return 0;
}

/* Enters o->en in the process's list of open stores unless one of them
 * has o->real open already (OST_EBUSY), with en->path a copy of o->real
 * and en->shown it as messages show it. Returns 0, or an error with en's
 * message and nothing entered. */
static int register_engine(const opening *o) {
    ost__engine *en = o->en;
    en->made_dir = o->made_dir;
    uv_mutex_lock(&g_open_lock);
    for (ost__engine *x = g_open; x; x = x->next_open)
        if (strcmp(x->path, o->real) == 0) {
            uv_mutex_unlock(&g_open_lock);
            return ost__lmdb_fail(en, OST_EBUSY, "%s: already open in this process", o->shown);
        }
    if (!(en->path = strdup(o->real))) {
        uv_mutex_unlock(&g_open_lock);
        return ost__lmdb_fail(en, OST_ENOMEM, "out of memory");
    }
    ost__path_show(en->shown, sizeof en->shown, o->real);
    en->next_open = g_open;
    g_open = en;
    uv_mutex_unlock(&g_open_lock);
    return 0;
}

/* A new engine object for store st, not open yet: 0 and *out, or
 * OST_ENOMEM with st's message. */
static int engine_new(const ost__host *host, ost_store *st, const opening *o, ost__engine **out) {
    ost__engine *e = calloc(1, sizeof *e);
    if (e && uv_rwlock_init(&e->maplock)) {
        free(e);
        e = NULL;
    }
    if (e && uv_mutex_init(&e->lock)) {
        uv_rwlock_destroy(&e->maplock);
        free(e);
        e = NULL;
    }
    if (!e) return ost__eng_fail(host, st, OST_ENOMEM, "out of memory");
    e->host = host;
    e->st = st;
    e->read_only = o->opts->read_only;
    memcpy(e->shown, o->shown, sizeof e->shown);
    *out = e;
    return 0;
}

/* Opens the LMDB environment en->env; a read-only open that may not
 * write lock.mdb reads without it (en->no_lock), as for a store on
 * read-only media. Returns 0, or an error with en's message (with a hint
 * on the access needed). */
static int open_lmdb(const opening *o) {
    ost__engine *en = o->en;
    const ost_store_options *opts = o->opts;
    int rc = env_open(en, o->real, opts, env_flags(opts));
    if ((rc == EACCES || rc == EPERM || rc == EROFS) && opts->read_only) {
        /* lock.mdb cannot be written (or made) by this user: read without
         * the lock file, as for a store on read-only media */
        int rc2 = env_open(en, o->real, opts, env_flags(opts) | MDB_NOLOCK);
        if (!rc2) en->no_lock = true;
        else if (rc2 != EACCES && rc2 != EPERM && rc2 != EROFS) rc = rc2;
        if (!rc2) rc = 0;
    }
    if (!rc) return 0;
    const char *hint = rc != EACCES && rc != EPERM && rc != EROFS ? ""
                       : opts->read_only ? " (reading needs read access to data.mdb)"
                                         : " (writing needs write access to the directory, "
                                           "data.mdb and lock.mdb; a read-only open needs "
                                           "read access only)";
    return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: cannot open the LMDB environment: %s%s",
                        o->shown, ost__mdb_strerror(en, rc), hint);
}

/* With the exclusive option: an flock of LMDB's own descriptor of
 * data.mdb. It goes with the descriptor, when the environment closes or
 * the process ends; a locked store is refused (OST_EBUSY) before anything
 * is written to it. Returns 0, or an error with en's message. */
static int lock_exclusive(const opening *o) {
    ost__engine *en = o->en;
    if (!o->opts->exclusive) return 0;
    mdb_filehandle_t fd;
    int rc = mdb_env_get_fd(en->env, &fd);
    if (!rc && flock(fd, LOCK_EX | LOCK_NB) != 0) rc = errno;
    if (!rc) return 0;
    return rc == EWOULDBLOCK
               ? ost__lmdb_fail(en, OST_EBUSY,
                              "%s: store is locked: another handle holds it with the "
                              "exclusive option (an ostore pack, import, copy or demo)",
                              o->shown)
               : ost__lmdb_fail(en, OST_EIO, "%s: cannot lock data.mdb: %s", o->shown, strerror(rc));
}

/* A read-write open: an upgrade (when the store is older) rewrites every
 * page, so the map gets room for the copy on write of all of them. */
static void room_for_upgrade(const opening *o) {
    if (o->opts->read_only) return;
    MDB_envinfo ei;
    struct stat dsb;
    char df[PATH_MAX + 16];
    ost__engine *e = o->en;
    if (stat(datafile_of(o->real, df, sizeof df), &dsb) == 0 && mdb_env_info(e->env, &ei) == 0 &&
        ei.me_mapsize < (uint64_t)dsb.st_size * 3 + ((uint64_t)64 << 20))
        mdb_env_set_mapsize(e->env, (size_t)dsb.st_size * 3 + ((size_t)64 << 20));
}

/* Opens the named databases in t (made in a read-write open): meta,
 * records, classes, txlog, mapents (absent in a format-1 store, read
 * only) and, read-write only, mapdels. Aborts t on failure. Returns 0, or
 * an error with en's message (OST_ECORRUPT for a database missing). */
static int open_dbs(const opening *o, MDB_txn *t) {
    ost__engine *en = o->en;
    unsigned cf = en->read_only ? 0 : MDB_CREATE;
    int rc = mdb_dbi_open(t, "meta", cf, &en->meta);
    if (rc == MDB_NOTFOUND) {
        mdb_txn_abort(t);
        return ost__lmdb_fail(en, OST_ECORRUPT, "%s: not an ostore store (no meta database)", o->shown);
    }
    if (!rc) rc = mdb_dbi_open(t, "records", cf, &en->recs);
    if (!rc) rc = mdb_dbi_open(t, "classes", cf, &en->classes);
    if (!rc) rc = mdb_dbi_open(t, "txlog", cf, &en->txlog);
    if (!rc) rc = mdb_dbi_open(t, "mapents", cf, &en->ments);
    if (rc == MDB_NOTFOUND && en->read_only) { /* a format-1 store: no maps */
        rc = 0;
        en->no_ments = true;
    }
    /* the deletion records commits check (entries.c): a read-write handle
     * makes the database in a store made before it, a read-only one never
     * commits and does not open it (docs/format.md) */
    if (!rc && !en->read_only) {
        rc = mdb_dbi_open(t, "mapdels", MDB_CREATE, &en->mdels);
        en->has_mdels = rc == 0;
    }
    if (rc) {
        mdb_txn_abort(t);
        return ost__lmdb_fail(en, ost__mdb_code(rc) == OST_ENOTFOUND ? OST_ECORRUPT : ost__mdb_code(rc),
                     "%s: cannot open databases: %s", o->shown, ost__mdb_strerror(en, rc));
    }
    return 0;
}

/* meta's magic in t: a store without it is made (init_store) when it may
 * be created, else refused; a store another handle made meanwhile stays
 * (o->absent[0] cleared). Aborts t on failure. Returns 0, or an error with
 * en's message. */
static int check_magic(opening *o, MDB_txn *t) {
    ost__engine *en = o->en;
    MDB_val k = {strlen(META_MAGIC), META_MAGIC}, v;
    int rc = mdb_get(t, en->meta, &k, &v);
    if (rc == MDB_NOTFOUND && !en->read_only && o->opts->create) {
        rc = init_store(en, t);
        if (rc) {
            mdb_txn_abort(t);
            return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: cannot create the store: %s", o->shown,
                         ost__mdb_strerror(en, rc));
        }
    } else if (rc || v.mv_size != strlen(META_MAGIC) || memcmp(v.mv_data, META_MAGIC, v.mv_size)) {
        mdb_txn_abort(t);
        return ost__lmdb_fail(en, OST_ECORRUPT, "%s: not an ostore store (meta has no magic)", o->shown);
    } else {
        o->absent[0] = false; /* another handle made the store meanwhile: it stays */
    }
    return 0;
}

/* The store's format from meta in t, upgraded (ost__upgrade) when older
 * and the open is read-write, into en->format; then the counters must be
 * readable. Aborts t on failure. Returns 0, or an error with en's
 * message. */
static int check_format(const opening *o, MDB_txn *t) {
    ost__engine *en = o->en;
    uint64_t fmt;
    int rc = ost__lmdb_meta_get(t, en->meta, "format", &fmt);
    if (rc || fmt < 1 || fmt > OST_STORE_FORMAT) {
        mdb_txn_abort(t);
        if (rc)
            return ost__lmdb_fail(en, OST_ECORRUPT, "%s: damaged meta (format: %s)", o->shown,
                                ost__mdb_strerror(en, rc));
        return ost__lmdb_fail(en, OST_EVERSION, "%s: store format %llu, this library reads %d",
                            o->shown, (unsigned long long)fmt, OST_STORE_FORMAT);
    }
    if (fmt < OST_STORE_FORMAT && !en->read_only) {
        rc = ost__upgrade(en, t, fmt);
        if (rc) {
            mdb_txn_abort(t);
            if (OST__OURS(rc)) return rc; /* en->msg says which record */
            return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: upgrading the store from format %llu: %s",
                                o->path, (unsigned long long)fmt, mdb_strerror(rc));
        }
        fmt = OST_STORE_FORMAT;
    }
    en->format = fmt;
    en->host->set_format(en->st, fmt);
    uint64_t x;
    if (ost__lmdb_meta_get(t, en->meta, "next_oid", &x) ||
        ost__lmdb_meta_get(t, en->meta, "last_serial", &x) ||
        ost__lmdb_meta_get(t, en->meta, "next_class", &x)) {
        mdb_txn_abort(t);
        return ost__lmdb_fail(en, OST_ECORRUPT, "%s: damaged meta (counters)", o->shown);
    }
    return 0;
}

/* The first transaction of the open: its databases, meta's magic (or a
 * new store), the format and counters, committed. Another process may
 * have grown the map since mdb_env_open sized this one (a writer beside a
 * read command): its size is adopted and the transaction begun again
 * (ost__remap). Returns 0, or an error with en's message. */
static int first_txn(opening *o) {
    ost__engine *en = o->en;
    MDB_txn *t;
    int rc;
    for (int tries = 0;; tries++) {
        rc = mdb_txn_begin(en->env, NULL, en->read_only ? MDB_RDONLY : 0, &t);
        if (rc != MDB_MAP_RESIZED || tries == 8 || ost__remap(en, rc)) break;
    }
    if (rc) return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: %s", o->shown, ost__mdb_strerror(en, rc));
    if ((rc = open_dbs(o, t)) || (rc = check_magic(o, t)) || (rc = check_format(o, t))) return rc;
    rc = mdb_txn_commit(t);
    if (rc) return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: %s", o->shown, ost__mdb_strerror(en, rc));
    return 0;
}

int ost__lmdb_env_open(const ost__host *host, ost_store *st, const char *path,
                       const ost_store_options *opts, ost__engine **out) {
    *out = NULL;
    uv_once(&g_once, open_list_init);
    opening o = {.opts = opts, .path = path};
    ost__path_show(o.shown, sizeof o.shown, path);
    int rc = engine_new(host, st, &o, &o.en);
    if (rc) return rc;
    ost__engine *e = o.en, *en = o.en;
    if ((rc = check_options(&o)) || (rc = find_dir(&o)) || (rc = check_files(&o)) ||
        (rc = reserve_lock_file(&o)) || (rc = register_engine(&o))) {
        ost__lmdb_env_close(e);
        return rc;
    }

    int code; /* the error returned */
    if ((code = open_lmdb(&o)) || (code = lock_exclusive(&o))) goto fail;
    room_for_upgrade(&o);
    ost__lmdb_map_changed(en);

    OST__HOOK(lmdb_opened, ()); /* tests: testctl.h */

    /* liblmdb trusts its pages, and the open reads the main database, meta
     * and the class table through it: ostore's own checks of those pages
     * first (store/lmdb/guard.h; it adopts a map another process grew) */
    char gmsg[256];
    if ((rc = ost__gd_check_env(en, gmsg, sizeof gmsg))) {
        code = ost__lmdb_fail(en, rc, "%s: damaged store: %s ('ostore check' lists the damage, "
                            "'ostore salvage' copies what is intact)", o.shown,
                            rc == OST_ECORRUPT ? gmsg : ost_strerror(rc));
        goto fail;
    }
    if ((code = first_txn(&o))) goto fail;
    *out = e;
    return 0;
fail:
    ost__lmdb_env_close(e);
    /* a store this open was making goes again: not when another handle
     * holds it locked or wrote its meta (that one made it meanwhile).
     * Caveat: a process that opened the files between this open's look
     * and its failure, before writing anything, loses them. */
    if (o.absent[0] && code != OST_EBUSY) {
        for (int i = 0; i < 2; i++) {
            char file[PATH_MAX + 16];
            snprintf(file, sizeof file, "%s/%s", o.real, env_files[i]);
            if (o.absent[i]) (void)unlink(file);
        }
        if (o.made_dir) (void)rmdir(o.real);
    }
    return code;
}

int ost__lmdb_drop(ost__engine *e, bool only_new) {
    ost__engine *en = e;
    /* the write transaction keeps every writer of the store, in this
     * process and others, out from the check to the removal */
    MDB_txn *t;
    int rc = ost__locked_txn_begin(en, 0, &t);
    if (rc) {
        uv_rwlock_rdunlock(&e->maplock);
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: cannot start a write transaction: %s",
                            en->shown, ost__mdb_strerror(en, rc));
    }
    int code = 0;
    if (only_new) {
        /* new: what init_store wrote and nothing since (the commit that
         * made the root is serial 1; any later commit, even of the root
         * alone, makes the store not new), as import.c asks */
        MDB_stat rs, ms = {0};
        uint64_t next_oid = 0, last = 0;
        rc = mdb_stat(t, e->recs, &rs);
        if (!rc && !en->no_ments) rc = mdb_stat(t, e->ments, &ms);
        if (!rc) rc = ost__lmdb_meta_get(t, e->meta, "next_oid", &next_oid);
        if (!rc) rc = ost__lmdb_meta_get(t, e->meta, "last_serial", &last);
        if (rc)
            code = ost__lmdb_fail(en, ost__mdb_code(rc), "%s: reading meta: %s", en->shown,
                                ost__mdb_strerror(en, rc));
        else if (rs.ms_entries > 1 || ms.ms_entries || next_oid != 1 || last != 1)
            code = ost__lmdb_fail(en, OST_EEXIST,
                                "%s: not a new store (%llu objects, last commit %llu); only a new "
                                "store is removed",
                                en->shown, (unsigned long long)rs.ms_entries,
                                (unsigned long long)last);
    }
    char file[PATH_MAX + 16];
    if (!code) {
        /* data.mdb first: once it is gone there is no store, and the drop
         * is done; a lock.mdb that cannot go stays (a store made here
         * later uses it), and so does the directory then */
        snprintf(file, sizeof file, "%s/data.mdb", en->path);
        if (unlink(file) != 0)
            code = ost__lmdb_fail(en, OST_EIO, "%s: cannot remove data.mdb: %s", en->shown,
                                strerror(errno));
    }
    if (!code) {
        snprintf(file, sizeof file, "%s/lock.mdb", en->path);
        (void)unlink(file);
        if (e->made_dir) (void)rmdir(en->path); /* when the open made it and it is empty */
    }
    mdb_txn_abort(t);
    uv_rwlock_rdunlock(&e->maplock);
    return code;
}

void ost__lmdb_env_close(ost__engine *e) {
    if (!e) return;
    /* sessions left open are the caller's bug; they are cut loose */
    for (ost__sess *s = e->sessions; s; s = s->next) s->listed = false;
    if (e->env) mdb_env_close(e->env);
    uv_mutex_lock(&g_open_lock);
    for (ost__engine **pp = &g_open; *pp; pp = &(*pp)->next_open)
        if (*pp == e) {
            *pp = e->next_open;
            break;
        }
    uv_mutex_unlock(&g_open_lock);
    uv_rwlock_destroy(&e->maplock);
    ost__gd_free(e->spare_gd);
    uv_mutex_destroy(&e->lock);
    free(e->path); /* open made it */
    free(e);
}


int ost__locked_txn_begin(ost__engine *en, unsigned flags, MDB_txn **t) {
    for (int tries = 0;; tries++) {
        uv_rwlock_rdlock(&en->maplock);
        int rc = mdb_txn_begin(en->env, NULL, flags, t);
        if (rc != MDB_MAP_RESIZED || tries == 8) return rc;
        uv_rwlock_rdunlock(&en->maplock);
        int grc = ost__remap(en, rc);
        if (grc) {
            uv_rwlock_rdlock(&en->maplock);
            return grc;
        }
    }
}

/* Doubles the map after MDB_MAP_FULL. Every read snapshot of the process
 * must be closed while LMDB remaps: the write lock of maplock waits for
 * them; connections reopen their snapshot on next use. */
static int resize_map(ost__engine *en, uint64_t at_least) {
    /* no LMDB call of the process runs under the write lock; a connection
     * that closes aborts its snapshot under the read lock, then leaves the
     * list (ost_conn_close), so the list holds no aborted snapshot here */
    uv_rwlock_wrlock(&en->maplock);
    ost__lmdb_sess_reset_all(en);
    MDB_envinfo ei;
    mdb_env_info(en->env, &ei);
    uint64_t size = ei.me_mapsize * 2;
    while (size < at_least) size *= 2;
    int rc = mdb_env_set_mapsize(en->env, (size_t)size);
    ost__lmdb_map_changed(en);
    uv_rwlock_wrunlock(&en->maplock);
    return rc;
}

int ost__grow_map(ost__engine *en) { return resize_map(en, 0); }

/* After MDB_MAP_RESIZED: another process grew the map and committed data
 * past this process's mapping (LMDB's mdb_txn_renew0, in
 * libraries/liblmdb/mdb.c, fails a begin, read or write, when me_maxpg <
 * mt_next_pgno). lmdb.h, mdb_env_set_mapsize: it "may be called with a
 * size of zero to adopt the new size"; mdb.c's mdb_env_set_mapsize then
 * takes the newest meta page's mm_mapsize, raised to the space in use
 * ((mm_last_pg + 1) pages). A map this process made larger stays as
 * large. Under the maplock's write lock, as resize_map; tested by
 * test_store's map_another_process_grew tests. */
static int adopt_map(ost__engine *en) {
    uv_rwlock_wrlock(&en->maplock);
    ost__lmdb_sess_reset_all(en);
    MDB_envinfo ei;
    mdb_env_info(en->env, &ei);
    size_t before = ei.me_mapsize;
    int rc = mdb_env_set_mapsize(en->env, 0);
    if (!rc && mdb_env_info(en->env, &ei) == 0 && ei.me_mapsize < before)
        rc = mdb_env_set_mapsize(en->env, before);
    ost__lmdb_map_changed(en);
    uv_rwlock_wrunlock(&en->maplock);
    return rc;
}

int ost__remap(ost__engine *en, int mdb_rc) {
    return mdb_rc == MDB_MAP_RESIZED ? adopt_map(en) : resize_map(en, 0);
}

/* Before a write of `items` records and entries of `bytes` bytes: grows
 * the map when the write could fill it, so that a big batch is not
 * written a second time after MDB_MAP_FULL. Copy on write may copy every
 * page the items land on (a batch of random keys, every leaf page), so
 * the room asked for is what is used now plus a page per item, at most
 * the whole used size again. The map is address space: the file grows
 * only by what is written. */
int ost__ensure_room(ost__engine *en, size_t bytes, size_t items) {
    MDB_envinfo ei;
    MDB_stat es;
    uv_rwlock_rdlock(&en->maplock); /* they read the map, which a resize replaces */
    int rc = mdb_env_info(en->env, &ei) || mdb_env_stat(en->env, &es);
    uv_rwlock_rdunlock(&en->maplock);
    if (rc) return 0;
    uint64_t ps = es.ms_psize, used = ((uint64_t)ei.me_last_pgno + 1) * ps;
    uint64_t touch = (uint64_t)items * ps;
    if (touch > used) touch = used;
    uint64_t want = used + touch + 2 * (uint64_t)bytes + ((uint64_t)1 << 20);
    if (ei.me_mapsize >= want) return 0;
    return resize_map(en, want);
}

/* ---- classes ------------------------------------------------------------------------ */

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

int ost__class_find_name(ost__engine *en, MDB_txn *t, const char *m, size_t ml, const char *n,
                         size_t nl, uint32_t *id) {
    char key[1024];
    MDB_val k = {class_key(m, ml, n, nl, key, sizeof key), key}, v;
    if (!k.mv_size) return MDB_NOTFOUND; /* no such name can be stored */
    int rc = mdb_get(t, en->classes, &k, &v);
    if (rc) return rc;
    if (v.mv_size != 4) return MDB_CORRUPTED;
    memcpy(id, v.mv_data, 4);
    return 0;
}

int ost__class_id_name(ost__engine *en, MDB_txn *t, const char *m, size_t ml, const char *n,
                       size_t nl, uint32_t *id) {
    char key[1024];
    MDB_val k = {class_key(m, ml, n, nl, key, sizeof key), key};
    if (!k.mv_size) return EINVAL;
    int rc = ost__class_find_name(en, t, m, ml, n, nl, id);
    if (rc != MDB_NOTFOUND) return rc;
    uint64_t next;
    rc = ost__lmdb_meta_get(t, en->meta, "next_class", &next);
    if (rc) return rc;
    if (next == 0 || next > OST__CLASS_LIMIT) return MDB_CORRUPTED; /* the id would wrap */
    uint32_t nid = (uint32_t)next;
    MDB_val nv = {4, &nid};
    rc = mdb_put(t, en->classes, &k, &nv, 0);
    if (rc) return rc;
    char ikey[5];
    ikey[0] = 'i';
    memcpy(ikey + 1, &nid, 4);
    MDB_val ik = {5, ikey}, iv = {k.mv_size - 1, key + 1};
    rc = mdb_put(t, en->classes, &ik, &iv, 0);
    if (!rc) rc = ost__lmdb_meta_put(t, en->meta, "next_class", next + 1);
    if (!rc) *id = nid;
    return rc;
}



/* ---- the store's counters --------------------------------------------------------- */

int ost__lmdb_stat(ost__engine *e, ost_store_stats *out) {
    ost__engine *en = e;
    memset(out, 0, sizeof *out);
    MDB_txn *t;
    int rc = ost__locked_txn_begin(en, MDB_RDONLY, &t);
    if (!rc) {
        /* every record is read through liblmdb below: its pages are
         * checked first (guard.h) */
        static const int dbs[] = {OST__GD_MAIN, OST__GD_META, OST__GD_RECS};
        char gmsg[256];
        int grc = ost__gd_check_dbs(en, t, dbs, 3, gmsg, sizeof gmsg);
        if (grc) {
            mdb_txn_abort(t);
            uv_rwlock_rdunlock(&en->maplock);
            if (grc == OST_EBUSY)
                return ost__lmdb_fail(en, grc, "%s: stat: %s", en->shown, gmsg);
            return ost__lmdb_fail(en, grc, "%s: damaged store: %s ('ostore check' lists the damage)",
                                en->shown, grc == OST_ECORRUPT ? gmsg : ost_strerror(grc));
        }
    }
    if (!rc) {
        MDB_stat ms;
        MDB_envinfo ei;
        rc = mdb_stat(t, en->recs, &ms);
        if (!rc) out->records = ms.ms_entries;
        if (!rc) rc = ost__lmdb_meta_get(t, en->meta, "next_oid", &out->next_oid);
        if (!rc) rc = ost__lmdb_meta_get(t, en->meta, "last_serial", &out->last_serial);
        if (!rc) {
            MDB_cursor *cur;
            MDB_val k, v;
            rc = mdb_cursor_open(t, en->recs, &cur);
            if (!rc) {
                while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) out->bytes += v.mv_size;
                mdb_cursor_close(cur);
            }
        }
        mdb_env_info(en->env, &ei);
        out->map_size = ei.me_mapsize;
        mdb_txn_abort(t);
    }
    uv_rwlock_rdunlock(&en->maplock);
    return rc ? ost__lmdb_fail(en, ost__mdb_code(rc), "%s: %s", en->shown,
                             ost__mdb_strerror(en, rc)) : 0;
}

