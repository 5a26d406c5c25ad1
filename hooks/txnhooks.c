/* Transaction hooks: three queues of one-shot registrations. */
#include <stdlib.h>

#include "../serializer/internal.h"

enum { BEFORE, AFTER_COMMIT, AFTER_ABORT, KINDS };

typedef struct {
    void (*fn)(void);
    void *ud;
} hook;

typedef struct {
    hook *items;
    size_t len, cap;
} queue;

struct ost_txn_hooks {
    queue q[KINDS];
};

ost_txn_hooks *ost_txn_hooks_new(void) { return calloc(1, sizeof(ost_txn_hooks)); }

void ost_txn_hooks_free(ost_txn_hooks *h) {
    if (!h) return;
    for (int k = 0; k < KINDS; k++) free(h->q[k].items);
    free(h);
}

static int add(ost_txn_hooks *h, int kind, void (*fn)(void), void *ud) {
    if (!h || !fn) return OST_EINVAL;
    queue *q = &h->q[kind];
    if (ost__reserve((void **)&q->items, &q->cap, q->len + 1, sizeof *q->items, 8))
        return OST_ENOMEM;
    q->items[q->len++] = (hook){fn, ud};
    return 0;
}

int ost_txn_hooks_before_commit(ost_txn_hooks *h, ost_before_commit_fn fn, void *ud) {
    return add(h, BEFORE, (void (*)(void))fn, ud);
}
int ost_txn_hooks_after_commit(ost_txn_hooks *h, ost_after_commit_fn fn, void *ud) {
    return add(h, AFTER_COMMIT, (void (*)(void))fn, ud);
}
int ost_txn_hooks_after_abort(ost_txn_hooks *h, ost_after_abort_fn fn, void *ud) {
    return add(h, AFTER_ABORT, (void (*)(void))fn, ud);
}

/* Hooks run by index, so registrations made while firing (which may move
 * the array) are seen in the same run. */
int ost_txn_hooks_run_before_commit(ost_txn_hooks *h) {
    if (!h) return OST_EINVAL;
    queue *q = &h->q[BEFORE];
    int rc = 0;
    for (size_t i = 0; i < q->len && !rc; i++) {
        hook k = q->items[i];
        rc = ((ost_before_commit_fn)k.fn)(k.ud, h);
    }
    q->len = 0;
    return rc;
}

void ost_txn_hooks_run_after_commit(ost_txn_hooks *h, bool committed) {
    if (!h) return;
    queue *q = &h->q[AFTER_COMMIT];
    for (size_t i = 0; i < q->len; i++) {
        hook k = q->items[i];
        ((ost_after_commit_fn)k.fn)(k.ud, committed, h);
    }
    q->len = 0;
    h->q[AFTER_ABORT].len = 0;
}

void ost_txn_hooks_run_after_abort(ost_txn_hooks *h) {
    if (!h) return;
    queue *q = &h->q[AFTER_ABORT];
    for (size_t i = 0; i < q->len; i++) {
        hook k = q->items[i];
        ((ost_after_abort_fn)k.fn)(k.ud, h);
    }
    q->len = 0;
    h->q[BEFORE].len = 0;
    h->q[AFTER_COMMIT].len = 0;
}

size_t ost_txn_hooks_pending(const ost_txn_hooks *h) {
    return h ? h->q[BEFORE].len + h->q[AFTER_COMMIT].len + h->q[AFTER_ABORT].len : 0;
}
