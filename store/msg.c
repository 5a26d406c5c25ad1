/* The messages of the store's handles: a store's per thread
 * (ost_store_errmsg), a connection's its own (ost_conn_errmsg). The bottom
 * of store/: it calls no other file of the store, and every file above
 * sets and reads messages through it (store/store_internal.h, "Layers"). */
#include <stdlib.h>
#include <uv.h>

#include "../serializer/internal.h"
#include "store_internal.h"

/* A store's message is per thread, as ost_store_errmsg promises. The
 * store keeps one buffer for each thread that failed in it (st->msgs),
 * found by the thread's number (t_tid: never given twice, unlike a
 * pthread_t), and frees them when it closes; so a thread that uses many
 * stores loses none of their messages. The thread remembers the buffer
 * it used last under the store's uid (a number no other handle of the
 * process gets, so a new handle at a freed one's address never finds a
 * freed buffer), which spares the lock on the paths that clear the
 * message before each step. Without memory for a buffer, a thread-local
 * one serves the last store that failed. */
struct ost__msg {
    uint64_t tid;
    struct ost__msg *next;
    char text[512];
};
static uint64_t g_store_uid, g_tid;
static __thread uint64_t t_tid;
static __thread struct {
    uint64_t uid;
    char *text;
} t_last;
static __thread struct {
    uint64_t uid;
    char text[512];
} t_spare;

/* The calling thread's message buffer for st (made when make is true and
 * st has none), or NULL. */
static char *msg_slot(const ost_store *cst, bool make) {
    if (t_last.uid == cst->uid) return t_last.text;
    ost_store *st = (ost_store *)cst; /* the buffers' list is not the store's state */
    if (!t_tid) t_tid = __atomic_add_fetch(&g_tid, 1, __ATOMIC_RELAXED);
    uv_mutex_lock(&st->msg_lock);
    struct ost__msg *m = st->msgs;
    while (m && m->tid != t_tid) m = m->next;
    if (!m && make && (m = malloc(sizeof *m))) {
        m->tid = t_tid;
        m->text[0] = 0;
        m->next = st->msgs;
        st->msgs = m;
    }
    uv_mutex_unlock(&st->msg_lock);
    if (m) {
        t_last.uid = st->uid;
        t_last.text = m->text;
        return m->text;
    }
    if (t_spare.uid == st->uid) return t_spare.text;
    if (!make) return NULL;
    t_spare.uid = st->uid;
    t_spare.text[0] = 0;
    return t_spare.text;
}

void ost__st_clear(ost_store *st) {
    char *m = msg_slot(st, false);
    if (m) m[0] = 0;
}

int ost__st_vfail(ost_store *st, int code, const char *fmt, va_list ap) {
    ost__vfmt(msg_slot(st, true), sizeof t_spare.text, fmt, ap);
    return code;
}

int ost__st_fail(ost_store *st, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__st_vfail(st, code, fmt, ap);
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

int ost__msgs_init(ost_store *st) {
    st->uid = __atomic_add_fetch(&g_store_uid, 1, __ATOMIC_RELAXED);
    return uv_mutex_init(&st->msg_lock) ? OST_ENOMEM : 0;
}

void ost__msgs_free(ost_store *st) {
    for (struct ost__msg *m = st->msgs, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    st->msgs = NULL;
    uv_mutex_destroy(&st->msg_lock);
}
