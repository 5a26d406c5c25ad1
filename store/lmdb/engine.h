/* The LMDB engine's objects (store/engine.h), for the files of store/ that
 * still reach LMDB themselves while the store moves onto the interface:
 * the group committer and ost__pkg_apply_direct commit through
 * ost__lmdb_engine.commit, map entries apply through the table. */
#ifndef OST_STORE_LMDB_ENGINE_H
#define OST_STORE_LMDB_ENGINE_H

#include <lmdb.h>

#include "../engine.h"

struct ost__engine {
    ost_store *st;
    bool owns_store; /* open opened st (close closes it) */
    ost__sess *sessions; /* those with a read transaction (under st->lock) */
};

struct ost__sess {
    ost__engine *e;
    ost_store *st;
    MDB_txn *rtxn;  /* the read snapshot (reset when not live) */
    bool live;      /* rtxn is open */
    bool in_snap;   /* between snap_begin and snap_end */
    bool moved;     /* reopened inside the snapshot (a map resize closed it) */
    bool began;     /* the snapshot has been opened once since snap_begin */
    bool listed;    /* in e->sessions */
    unsigned pins;  /* nesting of pins (the maplock is held while > 0) */
    uint64_t gen;   /* counts the (re)openings of rtxn */
    MDB_cursor *rcur; /* on the records, for get, valid while rcur_gen == gen */
    uint64_t rcur_gen;
    uint64_t rcur_oid; /* the key rcur is on, when rcur_at */
    bool rcur_at;
    MDB_txn *wtxn;  /* the write transaction inside commit (NULL: none) */
    int mdb_rc;     /* the last LMDB result a write op translated */
    uint64_t apply_ns, commit_ns; /* commit: time applying and committing */
    ost__sess *next;
};

/* Closes every open read transaction of st's engine sessions: the map is
 * being resized (st->maplock held for writing). They reopen at next use. */
void ost__lmdb_sess_reset_all(ost_store *st);
/* Makes the engine object of an open store, and frees it. */
int ost__lmdb_engine_attach(ost_store *st);
void ost__lmdb_engine_detach(ost_store *st);

#endif
