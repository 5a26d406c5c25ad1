/* Iterators over the records of a connection's snapshot, in oid order,
 * all of them or the instances of one class (ost_iter_open).
 *
 * The iterator keeps an LMDB cursor on the connection's read transaction
 * while that snapshot lives; between calls the store's maplock is
 * released, so a map resize may close the snapshot: the iterator then
 * opens a cursor on the new one and seeks to the first oid it has not
 * returned (the key order is the oid order: oids are big-endian). */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

struct ost_iter {
    ost_conn *c;
    uint64_t txn_gen;  /* the transaction it belongs to */
    uint64_t next;     /* the first oid not returned yet */
    bool done;
    bool by_class;     /* instances of class id cid only */
    bool no_such;      /* the class has no id in the store: nothing matches */
    uint32_t cid;
    MDB_cursor *cur;   /* on c->rtxn as of snap_gen */
    MDB_txn *cur_txn;
    uint64_t snap_gen;
    ost_value cls; /* the class last reported without an object (a reference) */
};

int ost_iter_open(ost_conn *c, ost_value cls, ost_iter **out) {
    if (out) *out = NULL;
    if (!c || !out) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    if (cls && ost_typeof(cls) != OST_T_GLOBAL)
        return ost__c_fail(c, OST_ETYPE, "ost_iter_open: the class is a %s, not a class",
                           ost_type_name(ost_typeof(cls)));
    ost_iter *it = calloc(1, sizeof *it);
    if (!it) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    it->c = c;
    int rc = ost__conn_lock(c); /* the transaction starts here if it has not */
    if (!rc && cls) {
        it->by_class = true;
        int mrc = ost__class_find(c->st, c->rtxn, cls, &it->cid);
        if (mrc == MDB_NOTFOUND) it->no_such = true;
        else if (mrc)
            rc = ost__c_fail(c, ost__mdb_code(mrc), "%s: reading the class table: %s",
                             c->st->shown, ost__mdb_strerror(c->st, mrc));
    }
    it->txn_gen = c->txn_gen;
    uv_rwlock_rdunlock(&c->st->maplock);
    if (rc) {
        free(it);
        return rc;
    }
    *out = it;
    return 0;
}

/* Positions the cursor at the first record at or after it->next on the
 * live snapshot. maplock held. */
static int seek(ost_iter *it, MDB_val *k, MDB_val *v) {
    ost_conn *c = it->c;
    if (it->cur && (it->cur_txn != c->rtxn || it->snap_gen != c->snap_gen)) {
        mdb_cursor_close(it->cur); /* its snapshot ended (a map resize) */
        it->cur = NULL;
    }
    int rc = 0;
    if (!it->cur) {
        rc = mdb_cursor_open(c->rtxn, c->st->recs, &it->cur);
        if (rc) {
            it->cur = NULL;
            return rc;
        }
        it->cur_txn = c->rtxn;
        it->snap_gen = c->snap_gen;
    }
    uint8_t kb[8];
    ost__be64(kb, it->next);
    k->mv_size = 8;
    k->mv_data = kb;
    return mdb_cursor_get(it->cur, k, v, MDB_SET_RANGE);
}

int ost_iter_next(ost_iter *it, ost_record_info *info, ost_value *obj) {
    if (obj) *obj = 0;
    if (info) memset(info, 0, sizeof *info);
    if (!it) return OST_EINVAL;
    ost_conn *c = it->c;
    if (!c->st) return ost__conn_dead(c);
    if (it->txn_gen != c->txn_gen)
        return ost__c_fail(c, OST_ETXN, "iterator: its transaction has ended (commit or abort): "
                                        "open a new one");
    if (it->done || it->no_such) return OST_ENOTFOUND;
    int rc = ost__conn_lock(c);
    MDB_val k, v;
    int mrc = rc ? 0 : seek(it, &k, &v);
    for (; !rc && mrc == 0; mrc = mdb_cursor_get(it->cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 8) continue; /* not an oid: damage that check reports */
        uint64_t oid = ost__rd_be64(k.mv_data), serial = 0;
        uint32_t cid = 0;
        int dmg = ost__rec_open(c->st, oid, &v, &serial, &cid);
        if (it->by_class && (dmg || cid != it->cid)) continue;
        it->next = oid + 1;
        if (oid == UINT64_MAX) it->done = true;
        if (info) {
            info->oid = oid;
            info->size = v.mv_size;
            info->serial = dmg ? 0 : serial;
            info->damaged = dmg != 0;
        }
        if (!dmg && obj) {
            rc = ost__conn_get_locked(c, oid, obj);
            if (!rc && info) info->cls = ost_instance_class(*obj);
        } else if (!dmg && info) {
            /* no object asked for: no ghost is made (a listing of a big
             * store would fill the cache) */
            ost_value k;
            int crc = ost__conn_class_of(c, cid, &k);
            if (!crc) {
                ost_decref(it->cls);
                it->cls = k; /* kept until the next call: info->cls is borrowed */
                info->cls = k;
            } else if (crc == MDB_CORRUPTED || crc == MDB_NOTFOUND)
                rc = OST_ECORRUPT;
            else
                rc = ost__c_fail(c, ost__mdb_code(crc), "%s: reading the class table: %s",
                                 c->st->shown, ost__mdb_strerror(c->st, crc));
        }
        if (rc == OST_ECORRUPT && info) { /* a class id not in the class table */
            info->damaged = true;
            info->cls = 0;
            info->serial = 0;
            rc = 0;
        }
        uv_rwlock_rdunlock(&c->st->maplock);
        return rc;
    }
    if (!rc && mrc == MDB_NOTFOUND) {
        it->done = true;
        rc = OST_ENOTFOUND;
    } else if (!rc)
        rc = ost__c_fail(c, ost__mdb_code(mrc), "%s: reading the records: %s", c->st->shown,
                         ost__mdb_strerror(c->st, mrc));
    uv_rwlock_rdunlock(&c->st->maplock);
    return rc;
}

void ost_iter_close(ost_iter *it) {
    if (!it) return;
    if (it->cur) mdb_cursor_close(it->cur);
    ost_decref(it->cls);
    free(it);
}
