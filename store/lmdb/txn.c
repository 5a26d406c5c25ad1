/* The one grow-the-map-and-retry loop of the LMDB engine: a write that
 * meets a full map (MDB_MAP_FULL), or a begin that meets a map another
 * process grew (MDB_MAP_RESIZED), grows the map (or adopts the other's
 * size: ost__remap) under the maplock's write lock and runs the whole
 * transaction again from its start. */
#include <lmdb.h>

#include "engine.h"

int ost__lmdb_txn_retry(ost__engine *en, unsigned flags,
                        int (*fn)(ost__engine *en, MDB_txn *t, void *ud), void *ud) {
    uv_rwlock_rdlock(&en->maplock);
    int rc;
    for (;;) {
        MDB_txn *t;
        rc = mdb_txn_begin(en->env, NULL, flags, &t);
        if (!rc) {
            rc = fn(en, t, ud);
            if (rc)
                mdb_txn_abort(t);
            else
                rc = mdb_txn_commit(t);
        }
        if (!OST__REMAP(rc)) break;
        /* the map grows under the write lock, which waits for every reader */
        uv_rwlock_rdunlock(&en->maplock);
        rc = ost__remap(en, rc);
        uv_rwlock_rdlock(&en->maplock);
        if (rc) break;
    }
    uv_rwlock_rdunlock(&en->maplock);
    return rc;
}
