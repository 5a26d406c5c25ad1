/* ost_errmsg: the message of any handle, by the kind its first word
 * names. The top of store/: it asks each kind's own file (the
 * serializer's, store/msg.c, store/loader.c, store/snap.c), none of which
 * calls it. */
#include "store_internal.h"

/* The message of handle (a writer, reader, store, connection, loader or
 * snapshot; NULL: the calling thread's value message), as that kind's own
 * errmsg call gives it: borrowed, valid until the handle's next call. */
const char *ost_errmsg(const void *handle) {
    if (!handle) return ost_value_errmsg();
    switch (*(const uint32_t *)handle) {
    case OST__H_WRITER: return ost_writer_errmsg(handle);
    case OST__H_READER: return ost_reader_errmsg(handle);
    case OST__H_STORE: return ost_store_errmsg(handle);
    case OST__H_CONN: return ost_conn_errmsg(handle);
    case OST__H_LOADER: return ost_loader_errmsg(handle);
    case OST__H_SNAP: return ost_snap_errmsg(handle);
    default: return "ost_errmsg: not an ostore handle";
    }
}
