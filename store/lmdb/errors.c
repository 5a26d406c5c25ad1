/* LMDB's results in the store's one error convention (store/engine.h):
 * the OST_E* code of an LMDB or errno result, and its text, which tells a
 * full disk from a failing one. Every LMDB code is translated here, at the
 * engine's boundary. */
#include <errno.h>
#include <stdarg.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine.h"

int ost__lmdb_fail(const ost__engine *en, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    en->host->fail(en->st, code, fmt, ap);
    va_end(ap);
    return code;
}

void ost__lmdb_clear(const ost__engine *en) { en->host->clear(en->st); }

int ost__mdb_code(int rc) {
    switch (rc) {
    case 0: return 0;
    case MDB_NOTFOUND: return OST_ENOTFOUND;
    case MDB_MAP_FULL: return OST_ENOMEM;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID: return OST_ECORRUPT;
    case MDB_VERSION_MISMATCH: return OST_EVERSION;
    case MDB_READERS_FULL:
    case MDB_MAP_RESIZED: return OST_EBUSY;
    case ENOMEM: return OST_ENOMEM;
    case EACCES:
    case EPERM:
    case EROFS: return OST_EREADONLY;
    case ENOENT: return OST_ENOTFOUND;
    default: return OST_EIO;
    }
}

/* Free space below this after a failed write means the disk is full. */
#define FULL_BYTES ((uint64_t)1 << 20)

/* True when the filesystem holding dir has less than FULL_BYTES left (for
 * this user: root may use the reserved blocks). */
static bool fs_full(const char *dir) {
    struct statvfs fs;
    if (!dir || statvfs(dir, &fs) != 0) return false;
    uint64_t avail = (uint64_t)(geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * fs.f_frsize;
    return avail < FULL_BYTES;
}

const char *ost__io_strerror(const char *dir, int rc) {
    if (rc == ENOSPC) return "no space left on device";
    if (rc == EDQUOT) return "disk quota exceeded";
    /* LMDB says EIO when a write was short, as when the disk filled up
     * during it (mdb_page_flush), and MDB_PANIC for every transaction
     * after such a failure: tell a full disk from a failing one by the
     * free space left */
    if (rc == EIO && fs_full(dir))
        return "no space left on device (a write was cut short: Input/output error)";
    if (rc == MDB_PANIC && fs_full(dir))
        return "no space left on device (a write failed before: close the store, make room and "
               "open it again)";
    return mdb_strerror(rc);
}

const char *ost__mdb_strerror(const ost__engine *en, int rc) {
    return ost__io_strerror(en ? en->path : NULL, rc);
}
