/* Internal structures of the store, shared by its files. */
#ifndef OST_STORE_INTERNAL_H
#define OST_STORE_INTERNAL_H

#include <lmdb.h>
#include <uv.h>

#include "../serializer/internal.h"

#define OST_HDR_SIZE 16

struct ost_store {
    MDB_env *env;
    MDB_dbi recs, meta, classes, txlog;
    char *path;
    bool read_only;
    ost_durability durability;
    ost_registry *registry;
    ost_value root_cls;
    uv_mutex_t lock;      /* the connection list */
    uv_rwlock_t maplock;  /* readers: any LMDB txn; writer: map resize */
    ost_conn *conns;
    ost_store *next_open; /* process-wide list of open stores */
    char msg[512];
};

/* One cached persistent object. */
typedef struct {
    uint64_t oid;
    uint64_t serial; /* serial of the record the state came from (0: new) */
    ost_value obj;   /* a reference held by the cache */
} ost__pent;

struct ost_conn {
    ost_store *st;
    ost_conn *next;  /* in the store's list */
    ost_conn *tnext; /* in this thread's list */
    MDB_txn *rtxn;   /* the read snapshot of the transaction */
    bool rtxn_live;
    uint64_t seen_serial; /* invalidations applied up to this commit */
    ost__pent *ents;
    size_t nents, capents;
    ost__ptrtab by_oid; /* oid + 1 -> index in ents */
    ost__ptrtab by_obj; /* object -> index in ents */
    ost_value *changed; /* objects changed in this transaction */
    size_t nchanged, capchanged;
    size_t cache_max;
    ost_writer *w;
    ost_reader *r;
    ost_txn_hooks *hooks;
    /* commit in progress */
    bool committing;
    uint64_t next_oid;
    size_t nnew_start; /* ents index where this commit's new objects begin */
    int hook_err;
    char msg[512];
};

int ost__st_fail(ost_store *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ost__c_fail(ost_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ost__mdb_code(int rc);
void ost__be64(uint8_t *b, uint64_t v);
uint64_t ost__rd_be64(const uint8_t *b);
void ost__hdr_write(uint8_t *h, uint64_t serial, uint32_t class_id);
int ost__hdr_read(const MDB_val *v, uint64_t *serial, uint32_t *class_id);
int ost__class_id(ost_store *st, MDB_txn *t, ost_value cls, uint32_t *id);
int ost__class_of_id(ost_store *st, MDB_txn *t, uint32_t id, ost_value *cls);
int ost__grow_map(ost_store *st);

#endif
