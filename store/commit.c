/* Commits in two steps: a connection prepares a package (the records of
 * its changed and new objects, as bytes, with the serials it read), then
 * the engine applies it: directly, or with group commit in a group of
 * packages, one write transaction ended by one commit (one fsync), applied
 * by a committing thread or the store's committer thread.
 * The bulk loader sends its batches the same way. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_internal.h"

#ifdef __linux__
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
/* The committers of a group sleep on one futex, the store's gc_epoch, and
 * one FUTEX_WAKE wakes them all: a semaphore post each took the committer
 * thread 7 us a post at 16 threads (the woken thread often took its CPU
 * before the next post), a quarter of a group's time with a fast sync.
 * No lock is taken on waking (each checks its own package's done flag),
 * so they do not queue as on a condition variable's broadcast. */
#define GC_FUTEX 1
/* Sleeps while *epoch is seen, at most wait_ns (0: no limit). */
static void epoch_wait(uint32_t *epoch, uint32_t seen, uint64_t wait_ns) {
    struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
    syscall(SYS_futex, epoch, FUTEX_WAIT_PRIVATE, seen, wait_ns ? &ts : NULL, NULL, 0);
}
static void epoch_wake_all(uint32_t *epoch) {
    syscall(SYS_futex, epoch, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#endif

/* ---- class ids, cached per store -------------------------------------------- */

/* Returns the id of cls, creating it (ops->class_id: a durable transaction
 * of its own) the first time a class is stored. Thread safe. */
int ost__class_id_cached(ost_store *st, ost_value cls, uint32_t *id) {
    size_t ml, nl;
    const char *m = ost_data(ost_global_module(cls), &ml);
    const char *n = ost_data(ost_global_name(cls), &nl);
    if (!m || !n || ml + nl + 1 > 1000) return OST_EINVAL;
    uv_mutex_lock(&st->lock);
    ost__name_slot *e = ost__nametab_get(&st->ctab, m, ml, n, nl);
    if (e) {
        *id = (uint32_t)e->val;
        uv_mutex_unlock(&st->lock);
        return 0;
    }
    uv_mutex_unlock(&st->lock);
    /* not cached: find or create it in the engine */
    int rc = st->ops->class_id(st->eng, m, ml, n, nl, !st->read_only, id);
    if (rc) return rc;
    uv_mutex_lock(&st->lock);
    /* another thread may have cached it meanwhile; a failure to cache
     * costs a lookup next time, nothing else */
    if (!ost__nametab_get(&st->ctab, m, ml, n, nl))
        (void)ost__nametab_put(&st->ctab, m, ml, n, nl, *id);
    uv_mutex_unlock(&st->lock);
    return 0;
}

/* A class with fields and the class id of its current version. */
struct ost__vcid {
    ost_value cls;
    uint32_t cid;
};

/* The class-table name of cls's current version, `Name(f1,f2)`, in
 * buf[cap]; its length, or 0 when it does not fit. */
static size_t version_name(ost_value cls, char *buf, size_t cap) {
    ost__klass *k = ost__klass_of(cls);
    size_t nl;
    const char *n = ost_data(ost_global_name(cls), &nl);
    if (!n || nl + 2 > cap) return 0;
    memcpy(buf, n, nl);
    size_t at = nl;
    buf[at++] = '(';
    for (size_t i = 0; i < k->nfields; i++) {
        size_t fl;
        const char *f = ost_data(k->fields[i], &fl);
        if (at + fl + 2 > cap) return 0;
        if (i) buf[at++] = ',';
        memcpy(buf + at, f, fl);
        at += fl;
    }
    buf[at++] = ')';
    return at;
}

/* The class id of the current version of cls (a class with fields),
 * made the first time. NO_VERSION when the version's name is too long
 * for the class table: the caller writes a dict state. */
#define NO_VERSION 1
static int version_cid(ost_store *st, ost_value cls, uint32_t *id) {
    uv_mutex_lock(&st->lock);
    for (size_t i = 0; i < st->nvcids; i++)
        if (st->vcids[i].cls == cls) {
            *id = st->vcids[i].cid;
            uv_mutex_unlock(&st->lock);
            return 0;
        }
    uv_mutex_unlock(&st->lock);
    size_t ml;
    const char *m = ost_data(ost_global_module(cls), &ml);
    char name[1000];
    /* the engines take module + name + 2 <= 1000 bytes (class_id) */
    if (!m || ml + 2 >= sizeof name) return NO_VERSION;
    size_t nl = version_name(cls, name, sizeof name - ml - 2);
    if (!nl) return NO_VERSION;
    int rc = st->ops->class_id(st->eng, m, ml, name, nl, !st->read_only, id);
    if (rc) return rc;
    uv_mutex_lock(&st->lock);
    bool have = false;
    for (size_t i = 0; i < st->nvcids && !have; i++) have = st->vcids[i].cls == cls;
    /* a failure to cache costs a lookup next time, nothing else */
    if (!have && !ost__reserve((void **)&st->vcids, &st->capvcids, st->nvcids + 1,
                               sizeof *st->vcids, 8))
        st->vcids[st->nvcids++] = (struct ost__vcid){ost_incref(cls), *id};
    uv_mutex_unlock(&st->lock);
    return 0;
}

int ost__record_state(ost_store *st, ost_writer *w, ost_value o, const void **data, size_t *n,
                      uint32_t *cid, bool *wfail) {
    ost_value cls = ost_instance_class(o);
    *wfail = false;
    if (__atomic_load_n(&st->format, __ATOMIC_RELAXED) >= 4 && ost__state_positional(o)) {
        uint32_t vid;
        int rc = version_cid(st, cls, &vid);
        if (!rc) {
            rc = ost__dump_fields(w, o, data, n);
            *wfail = rc != 0;
            if (!rc) *cid = vid;
            return rc;
        }
        if (rc != NO_VERSION) return rc;
    }
    int rc = ost_dump_state(w, o, data, n);
    if (rc) {
        *wfail = true;
        return rc;
    }
    return ost__class_id_cached(st, cls, cid);
}

void ost__class_cache_free(ost_store *st) {
    ost__nametab_free(&st->ctab, NULL);
    for (size_t i = 0; i < st->nvcids; i++) ost_decref(st->vcids[i].cls);
    free(st->vcids);
    st->vcids = NULL;
    st->nvcids = st->capvcids = 0;
}

/* ---- packages ---------------------------------------------------------------- */

/* Makes room for n more bytes in p->bytes. 0 or OST_ENOMEM. */
static int reserve_bytes(ost__pkg *p, size_t n) {
    if (n > SIZE_MAX - p->nbytes) return OST_ENOMEM;
    return ost__reserve((void **)&p->bytes, &p->capbytes, p->nbytes + n, 1, 65536);
}

/* A package and its store part, made and freed as one block. */
typedef struct {
    ost__pkg p;
    struct ost__pkgq q;
} pkg_block;

ost__pkg *ost__pkg_new(void) {
    pkg_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->p.q = &b->q;
    if (uv_sem_init(&b->q.sem, 0)) {
        free(b);
        return NULL;
    }
    return &b->p;
}

/* Drops the class references of p's resolvable records. */
static void resv_clear(ost__pkg *p) {
    for (size_t i = 0; i < p->q->nresv; i++) ost_decref(p->q->resv[i].cls);
    p->q->nresv = 0;
}

void ost__pkg_reset(ost__pkg *p) {
    resv_clear(p);
    p->nrecs = 0;
    p->nrefs = 0;
    p->nbytes = 0;
    p->nments = 0;
    p->rc = 0;
    p->msg[0] = 0;
    p->serial = 0;
    p->since = 0;
    p->q->done = false;
    p->conflict_oid = UINT64_MAX;
}

void ost__pkg_free(ost__pkg *p) {
    if (!p) return;
    uv_sem_destroy(&p->q->sem);
    resv_clear(p);
    free(p->q->resv);
    ost_reader_free(p->q->res_r);
    ost_writer_free(p->q->res_w);
    free(p->recs);
    free(p->bytes);
    free(p->refs);
    free(p->ments);
    free(p);
}

int ost__pkg_conflict(ost__pkg *p, int why, uint64_t oid, uint64_t cur, uint64_t read) {
    if (why == OST__CONFL_CHANGED)
        ost__fmt(p->msg, sizeof p->msg,
                 "conflict on oid %llu: commit %llu changed it after this transaction read it "
                 "(at commit %llu)",
                 (unsigned long long)oid, (unsigned long long)cur, (unsigned long long)read);
    else if (why == OST__CONFL_REMOVED)
        ost__fmt(p->msg, sizeof p->msg,
                 "conflict on oid %llu: it was removed (pack) after this transaction read it",
                 (unsigned long long)oid);
    else
        ost__fmt(p->msg, sizeof p->msg,
                 "conflict on oid %llu: this commit refers to it, and pack removed it after this "
                 "transaction read it",
                 (unsigned long long)oid);
    p->conflict_oid = oid;
    return OST_ECONFLICT;
}

/* ---- conflict resolution (ost_class_def.resolve) ------------------------------ */

int ost__pkg_resv(ost__pkg *p, ost_value cls, uint32_t cid, const void *pickle, size_t n) {
    if (!p->nrecs) return OST_EINVAL;
    if (ost__reserve((void **)&p->q->resv, &p->q->capresv, p->q->nresv + 1, sizeof *p->q->resv, 8) ||
        reserve_bytes(p, n))
        return OST_ENOMEM;
    memcpy(p->bytes + p->nbytes, pickle, n);
    p->q->resv[p->q->nresv++] = (ost__resv){p->nrecs - 1, ost_incref(cls), cid, p->nbytes, n, false};
    p->nbytes += n;
    return 0;
}

/* The resolvable entry of record i of p, or NULL (resv is by rec). */
static ost__resv *resv_of(ost__pkg *p, size_t i) {
    size_t lo = 0, hi = p->q->nresv;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->q->resv[mid].rec < i) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->q->nresv && p->q->resv[lo].rec == i ? &p->q->resv[lo] : NULL;
}

bool ost__pkg_resolvable(const ost__pkg *p, size_t i) {
    return p->q->nresv && resv_of((ost__pkg *)p, i) != NULL;
}

/* persistent_load of a resolution's reader: a reference stays one (the
 * reader's pair pid, kept, is replaced by a new one for the next) */
static int resolve_pload(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* persistent_id of a resolution's writer: a persistent object the
 * resolver put in the merged state has no oid, and none can be given
 * inside the commit */
static int resolve_pid(void *ud, ost_value obj, ost_value *pid) {
    (void)pid;
    if (!ost_class_is_persistent(ost_instance_class(obj))) return 0;
    *(bool *)ud = true;
    return OST_EINVAL;
}

/* A detached instance of cls holding the state pickle[0, n) of a record
 * (a positional tuple, or what ost_load_state reads); *positional says
 * which. 0 or the reader's code (its message says why). */
static int resolve_inst(ost_reader *r, ost_value cls, const void *pickle, size_t n,
                        bool *positional, ost_value *out) {
    *out = 0;
    ost_value state = 0, inst = ost__instance_new_unset(ost_incref(cls));
    if (!inst) return OST_ENOMEM;
    int rc = ost_load(r, pickle, n, &state, NULL);
    const ost__klass *k = ost__klass_of(cls);
    *positional = !rc && ost_typeof(state) == OST_T_TUPLE && ost__slotted(inst) &&
                  !k->def.getstate;
    if (rc) {
        /* the reader's message stays */
    } else if (*positional) {
        if (ost_len(state) != k->nfields) rc = OST_ECORRUPT;
        for (size_t i = 0; !rc && i < k->nfields; i++)
            rc = ost__slots_put(inst, k->fields[i], ost_item(state, i));
        ost_decref(state);
    } else {
        rc = ost__apply_state(r, inst, state); /* steals state */
        if (!rc && ost__slotted(inst)) ost__slots_defaults(inst);
    }
    if (rc) {
        ost_release(inst);
        return rc;
    }
    *out = inst;
    return 0;
}

typedef struct {
    ost__pkg *p;
    int rc;
} resolve_refs;

/* ost__scan_pids's callback: a reference of the merged state to a stored
 * object joins the package's references (an object the package writes
 * new has no record yet, and needs no check) */
static void resolve_ref(void *ud, uint64_t oid) {
    resolve_refs *rr = ud;
    for (size_t i = 0; i < rr->p->nrecs; i++)
        if (rr->p->recs[i].oid == oid) return;
    if (!rr->rc) rr->rc = ost__pkg_ref(rr->p, oid);
}

/* The merged state of record i, written: a failure of the resolution
 * with p->msg set, or 0 with the record pointing at the new bytes. */
static int resolve_write(ost__pkg *p, ost__rec *rec, ost_value mine, bool positional) {
    if (!p->q->res_w) {
        if (!(p->q->res_w = ost_writer_new())) return OST_ENOMEM;
        ost__writer_set_pid_memo(p->q->res_w, false); /* as a connection writes (docs/format.md) */
        ost_writer_set_framing(p->q->res_w, false);
    }
    ost_writer *w = p->q->res_w;
    bool newobj = false;
    ost_writer_set_persistent_id(w, resolve_pid, &newobj, OST_PID_INSTANCES);
    const void *data = NULL;
    size_t n = 0;
    int rc;
    if (positional && !ost__state_positional(mine)) {
        rc = OST_ECONFLICT;
        ost__fmt(p->msg, sizeof p->msg, "the merged state leaves a field unset or adds one the "
                 "class does not declare: it would be a record of another class id");
    } else {
        rc = positional ? ost__dump_fields(w, mine, &data, &n) : ost_dump_state(w, mine, &data, &n);
        if (rc) {
            if (newobj) rc = OST_ECONFLICT;
            ost__fmt(p->msg, sizeof p->msg, "%s",
                     newobj ? "the merged state holds a new persistent object, which a "
                              "resolver cannot add"
                            : ost_writer_errmsg(w));
        }
    }
    resolve_refs rr = {p, 0};
    if (!rc && (rc = ost__scan_pids(data, n, resolve_ref, &rr)) == 0) rc = rr.rc;
    if (!rc && (rc = reserve_bytes(p, n)) == 0) {
        memcpy(p->bytes + p->nbytes, data, n);
        rec->off = p->nbytes;
        rec->len = n;
        p->nbytes += n;
    }
    ost_writer_set_persistent_id(w, NULL, NULL, OST_PID_INSTANCES); /* &newobj dies here */
    return rc;
}

/* Decodes the three states of record i (read, committed, the package's)
 * and runs the resolver on them. */
static int resolve_run(ost_store *st, ost__pkg *p, ost__resv *rv, const void *pickle, size_t n) {
    ost__rec *rec = &p->recs[rv->rec];
    void *ud;
    ost_resolve_fn fn = ost__class_resolver(rv->cls, &ud);
    if (!p->q->res_r) {
        if (!(p->q->res_r = ost_reader_new())) return OST_ENOMEM;
        ost_reader_set_persistent_load(p->q->res_r, resolve_pload, NULL);
        if (st->registry) ost_reader_set_registry(p->q->res_r, st->registry);
    }
    ost_reader *r = p->q->res_r;
    ost_value v[3] = {0, 0, 0};
    bool pos[3];
    static const char *const which[3] = {"read", "committed", "own"};
    const uint8_t *src[3] = {p->bytes + rv->old_off, pickle, p->bytes + rec->off};
    size_t len[3] = {rv->old_len, n, rec->len};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++)
        if ((rc = resolve_inst(r, rv->cls, src[k], len[k], &pos[k], &v[k])))
            ost__fmt(p->msg, sizeof p->msg, "its %s state does not decode: %s", which[k],
                     rc == OST_ECORRUPT ? "a positional state of the wrong length"
                                        : ost_reader_errmsg(r));
    if (!rc && (pos[0] != pos[2] || pos[1] != pos[2])) {
        rc = OST_ECONFLICT;
        ost__fmt(p->msg, sizeof p->msg, "its states are of different forms");
    }
    if (!rc) {
        int urc = fn(ud, v[0], v[1], v[2]);
        if (urc) {
            rc = OST_ECONFLICT;
            ost__fmt(p->msg, sizeof p->msg, "its class's resolver refused (it returned %d)", urc);
        }
    }
    if (!rc) rc = resolve_write(p, rec, v[2], pos[2]);
    for (int k = 0; k < 3; k++) ost_release(v[k]);
    return rc;
}

int ost__pkg_resolve(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n) {
    ost__rec *rec = &p->recs[i];
    ost__resv *rv = p->q->nresv ? resv_of(p, i) : NULL;
    if (!rv) return ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid, cur, rec->read_serial);
    int rc;
    p->msg[0] = 0;
    if (cid != rec->cid || rv->old_cid != rec->cid) {
        rc = OST_ECONFLICT;
        ost__fmt(p->msg, sizeof p->msg, "the states are of different class ids (read %u, "
                 "committed %u, own %u)", rv->old_cid, cid, rec->cid);
    } else {
        size_t off = rec->off, len = rec->len, nbytes = p->nbytes, nrefs = p->nrefs;
        rc = resolve_run(st, p, rv, pickle, n);
        /* the merge is now this transaction's state, read at cur: if the
         * package is applied again (a retried group) and another commit
         * came between, the resolver merges from the committed state, not
         * again from the first (which would count the first merge twice) */
        if (!rc && !(rc = reserve_bytes(p, n))) {
            memcpy(p->bytes + p->nbytes, pickle, n);
            rv->old_off = p->nbytes;
            rv->old_len = n;
            rv->old_cid = cid;
            p->nbytes += n;
        }
        if (rc) { /* record i as it was */
            rec->off = off;
            rec->len = len;
            p->nbytes = nbytes;
            p->nrefs = nrefs;
        }
    }
    if (!rc) {
        rec->read_serial = cur;
        rv->resolved = true;
        return 0;
    }
    char why[sizeof p->msg];
    ost__fmt(why, sizeof why, "%s", p->msg);
    if (rc == OST_ECONFLICT || rc == OST_ECORRUPT) {
        ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid, cur, rec->read_serial);
        size_t at = strlen(p->msg);
        ost__fmt(p->msg + at, sizeof p->msg - at, ", and the conflict was not resolved: %s", why);
    } else {
        ost__fmt(p->msg, sizeof p->msg, "conflict on oid %llu: resolving it failed: %s",
                 (unsigned long long)rec->oid, why[0] ? why : ost_strerror(rc));
        p->conflict_oid = rec->oid;
    }
    return rc;
}

/* Appends a map entry: its key and value bytes go after the records'. */
int ost__pkg_ment(ost__pkg *p, uint64_t map, uint64_t base, const uint8_t *key, size_t klen,
                  const void *val, size_t vlen, uint8_t flags) {
    if (ost__reserve((void **)&p->ments, &p->capments, p->nments + 1, sizeof *p->ments, 64))
        return OST_ENOMEM;
    size_t n = klen + vlen;
    if (reserve_bytes(p, n)) return OST_ENOMEM;
    ost__ment *m = &p->ments[p->nments++];
    *m = (ost__ment){map, base, p->nbytes, p->nbytes + klen, vlen, (uint16_t)klen, flags};
    if (klen) memcpy(p->bytes + p->nbytes, key, klen);
    if (vlen) memcpy(p->bytes + p->nbytes + klen, val, vlen);
    p->nbytes += n;
    return 0;
}

/* Notes that the records refer to stored object oid. */
int ost__pkg_ref(ost__pkg *p, uint64_t oid) {
    if (ost__reserve((void **)&p->refs, &p->caprefs, p->nrefs + 1, sizeof *p->refs, 64))
        return OST_ENOMEM;
    p->refs[p->nrefs++] = oid;
    return 0;
}

/* Appends a record: header room then the pickle. */
int ost__pkg_add(ost__pkg *p, uint64_t oid, uint64_t read_serial, uint32_t cid,
                 const void *pickle, size_t n) {
    if (ost__reserve((void **)&p->recs, &p->caprecs, p->nrecs + 1, sizeof *p->recs, 64))
        return OST_ENOMEM;
    if (reserve_bytes(p, n)) return OST_ENOMEM;
    memcpy(p->bytes + p->nbytes, pickle, n);
    p->recs[p->nrecs++] = (ost__rec){oid, read_serial, p->nbytes, n, cid};
    p->nbytes += n;
    return 0;
}

/* The engine's commit of pkgs[0, n) in session s, after which every
 * package holds its true outcome: engine.h says a failure of the whole
 * call (the disk, the server) is carried by every package too; a package
 * the engine left at rc 0 with something to write although the call
 * failed gets that failure here, so that no member of a failed call is
 * told it committed (a group's member, a loader's batch, an asynchronous
 * commit's callback). */
static void commit_pkgs(ost_store *st, ost__sess *s, ost__pkg **pkgs, size_t n) {
    int rc = st->ops->commit(s, pkgs, n);
    if (!rc) return;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (p->rc || (!p->nrecs && !p->nments)) continue;
        p->rc = rc;
        p->serial = 0;
        ost__fmt(p->msg, sizeof p->msg, "%s", ost_store_errmsg(st));
    }
}

/* Applies one package on the calling thread, in session s (whose
 * snapshot is closed). */
int ost__pkg_apply_direct(ost_store *st, ost__sess *s, ost__pkg *p) {
    commit_pkgs(st, s, &p, 1); /* the outcome is p's */
    p->q->done = true;
    return p->rc;
}

/* ---- group commit ----------------------------------------------------------------- */

/* Packages wait in the store's queue and are applied a group at a time:
 * the whole queue, in one engine commit (one fsync), by the group's leader.
 * A committing thread (ost__pkg_commit) leads the group its own package
 * completes, or whose deadline passes while it waits, so a group costs no
 * hand-off to another thread and back: with one thread committing, its
 * commit is applied on its own thread at once, as without group commit.
 * Packages whose caller goes on meanwhile (the loader's batches,
 * asynchronous commits) are taken by the committer thread. One group at a
 * time (gc_busy). */

/* Queues p (gc_lock held). */
static void enqueue(ost_store *st, ost__pkg *p) {
    p->q->next = NULL;
    p->q->queued = true;
    if (st->gc_tail) {
        st->gc_tail->q->next = p;
    } else {
        st->gc_queue = p;
        uint64_t now = uv_hrtime();
        st->gc_first_ns = now;
        if (!st->gc_busy && now > st->gc_end_ns) st->gc_idle_ns += now - st->gc_end_ns;
    }
    st->gc_tail = p;
    st->gc_qlen++;
}

#ifdef GC_FUTEX
/* When the queue's group stops waiting for more packages (gc_lock held):
 * the threads of the last group come back one by one, and taking the
 * queue at the first arrival split 16 threads into two groups that
 * alternate, each half the size (and twice the syncs). So a group waits
 * for as many packages as the last group had plus those that queued while
 * it was written (gc_want), until a deadline counted from the end of the
 * last group (or the first arrival, if later): the time that group took to
 * apply and commit, or twice the time the last complete group took to
 * gather if that is longer (with a fast sync the gathering is the longer
 * part), and never more than 2 ms. */
static uint64_t gather_deadline(const ost_store *st) {
    uint64_t wait = st->gc_last_ns;
    if (wait < 2 * st->gc_last_gather_ns) wait = 2 * st->gc_last_gather_ns;
    if (wait > 2000000) wait = 2000000;
    uint64_t from = st->gc_first_ns > st->gc_end_ns ? st->gc_first_ns : st->gc_end_ns;
    return from + wait;
}
#endif

/* Applies the whole queue as one group. Called with gc_lock held, by the
 * group's leader, when no group is being applied; releases the lock while
 * the engine applies and commits, and returns with it held, every package
 * of the group done and its committer woken. */
static void run_group(ost_store *st, bool led) {
    uint64_t took = uv_hrtime();
    uint64_t from = st->gc_first_ns > st->gc_end_ns ? st->gc_first_ns : st->gc_end_ns;
    if (took > from) st->gc_gather_ns += took - from;
    if (st->gc_qlen >= st->gc_want && took > from) st->gc_last_gather_ns = took - from;
    ost__pkg *group = st->gc_queue;
    size_t ngroup = st->gc_qlen, nlead = st->gc_qlen - st->gc_nfollow;
    for (ost__pkg *p = group; p; p = p->q->next) p->q->queued = false;
    st->gc_queue = st->gc_tail = NULL;
    st->gc_qlen = 0;
    st->gc_nfollow = 0;
    st->gc_busy = true;
    uv_mutex_unlock(&st->gc_lock);
    /* the engine applies the group in one write transaction and ends it
     * with one commit (one fsync); gc_arr is the busy leader's alone */
    (void)ost__reserve((void **)&st->gc_arr, &st->gc_cap, ngroup, sizeof *st->gc_arr, 16);
    size_t i = 0;
    for (ost__pkg *p = group; p; p = p->q->next) {
        if (i == st->gc_cap) { /* no memory for the array: one by one */
            commit_pkgs(st, st->gc_sess, &p, 1);
            continue;
        }
        st->gc_arr[i++] = p;
    }
    if (i) commit_pkgs(st, st->gc_sess, st->gc_arr, i);
    uint64_t ended = uv_hrtime();
    if (st->ops->commit_split) /* the split of its time (benchmarks) */
        st->ops->commit_split(st->gc_sess, &st->gc_apply_ns, &st->gc_commit_ns);
    uv_mutex_lock(&st->gc_lock);
    st->gc_groups++;
    if (led) st->gc_led++;
    st->gc_busy = false;
    st->gc_end_ns = ended;
    st->gc_last_ns = ended - took;
    /* the committing threads' packages only: the loader's batches and
     * asynchronous commits do not come back to complete a group */
    st->gc_want = nlead + (st->gc_qlen - st->gc_nfollow);
    if (!st->gc_want) st->gc_want = 1;
    /* async packages are done under the lock (ost__pkg_is_done); the
     * waiting committers are woken after it is released: each wake may
     * hand the CPU to the committer it wakes, which would then block on
     * gc_lock to submit its next package */
    ost__pkg *wake = NULL, **wtail = &wake;
    for (ost__pkg *p = group, *next; p; p = next) {
        next = p->q->next; /* an async package may be submitted again once done */
        if (p->q->async) {
            p->q->done = true;
            uv_async_send(p->q->async);
        } else {
            *wtail = p;
            wtail = &p->q->wnext;
        }
    }
    *wtail = NULL;
    if (st->gc_cond_waiters) uv_cond_broadcast(&st->gc_done);
    /* the committer thread's packages that queued meanwhile are its to
     * take now; committing threads that queued meanwhile wait on the
     * epoch, untimed while a group was being applied: they are woken too,
     * to lead the next group or set their deadline */
    if (st->gc_nfollow) uv_cond_signal(&st->gc_cond);
    bool kick = wake || st->gc_qlen > st->gc_nfollow;
    uv_mutex_unlock(&st->gc_lock);
#ifdef GC_FUTEX
    for (ost__pkg *p = wake, *next; p; p = next) {
        next = p->q->wnext; /* p may be gone once its done flag is set */
        __atomic_store_n(&p->q->done, true, __ATOMIC_RELEASE);
    }
    if (kick) {
        __atomic_fetch_add(&st->gc_epoch, 1, __ATOMIC_RELEASE);
        epoch_wake_all(&st->gc_epoch);
    }
#else
    (void)kick;
    for (ost__pkg *p = wake, *next; p; p = next) {
        next = p->q->wnext; /* p may be gone once its committer is woken */
        p->q->done = true;
        uv_sem_post(&p->q->sem);
    }
#endif
    uv_mutex_lock(&st->gc_lock);
}

/* The committer thread: applies the queue when it holds packages whose
 * callers do not wait to lead (the loader's batches, asynchronous
 * commits), at once (they gather by themselves while a group is applied).
 * A submit wakes it only when no group is being applied; the end of a
 * group wakes it when such packages queued meanwhile. */
static void committer_main(void *arg) {
    ost_store *st = arg;
#ifdef __linux__
    pthread_setname_np(pthread_self(), "ost-committer"); /* as top and perf show it */
#endif
    uv_mutex_lock(&st->gc_lock);
    for (;;) {
        if (st->gc_nfollow && !st->gc_busy) {
            run_group(st, false);
            continue;
        }
        if (st->gc_stop && !st->gc_nfollow) break;
        uv_cond_wait(&st->gc_cond, &st->gc_lock);
    }
    uv_mutex_unlock(&st->gc_lock);
}

/* Starts the committer thread unless it runs: 0 or OST_ENOMEM. Thread
 * safe (two loaders may open at once on a store without group_commit). */
static int committer_start_locked(ost_store *st);

int ost__committer_start(ost_store *st) {
    uv_mutex_lock(&st->lock);
    int rc = st->gc_running ? 0 : committer_start_locked(st);
    uv_mutex_unlock(&st->lock);
    return rc;
}

static int committer_start_locked(ost_store *st) {
    if (uv_mutex_init(&st->gc_lock)) return OST_ENOMEM;
    if (uv_cond_init(&st->gc_cond) || uv_cond_init(&st->gc_done)) {
        uv_mutex_destroy(&st->gc_lock);
        return OST_ENOMEM;
    }
    if (st->ops->sess_open(st->eng, &st->gc_sess)) {
        uv_cond_destroy(&st->gc_cond);
        uv_cond_destroy(&st->gc_done);
        uv_mutex_destroy(&st->gc_lock);
        return OST_ENOMEM;
    }
    st->gc_stop = false;
    st->gc_busy = false;
    st->gc_want = 1;
    st->gc_nfollow = 0;
    st->gc_end_ns = uv_hrtime();
    st->gc_cond_waiters = 0;
    if (uv_thread_create(&st->gc_thread, committer_main, st)) {
        st->ops->sess_close(st->gc_sess);
        st->gc_sess = NULL;
        uv_cond_destroy(&st->gc_cond);
        uv_cond_destroy(&st->gc_done);
        uv_mutex_destroy(&st->gc_lock);
        return OST_ENOMEM;
    }
    st->gc_running = true;
    return 0;
}

void ost__committer_stop(ost_store *st) {
    if (!st->gc_running) return;
    uv_mutex_lock(&st->gc_lock);
    st->gc_stop = true;
    uv_cond_signal(&st->gc_cond);
    uv_mutex_unlock(&st->gc_lock);
    uv_thread_join(&st->gc_thread);
    st->ops->sess_close(st->gc_sess);
    st->gc_sess = NULL;
    free(st->gc_arr);
    st->gc_arr = NULL;
    st->gc_cap = 0;
    uv_cond_destroy(&st->gc_cond);
    uv_cond_destroy(&st->gc_done);
    uv_mutex_destroy(&st->gc_lock);
    st->gc_running = false;
}

/* Queues p for the committer thread: its caller goes on meanwhile and
 * waits later (ost__pkg_wait, or p->q->async). */
void ost__pkg_submit(ost_store *st, ost__pkg *p) {
    p->q->done = false;
    uv_mutex_lock(&st->gc_lock);
    enqueue(st, p);
    st->gc_nfollow++;
    if (!st->gc_busy) uv_cond_signal(&st->gc_cond);
    uv_mutex_unlock(&st->gc_lock);
}

/* Queues p and returns its outcome once a group applied it: the calling
 * thread applies the group itself when p completes it or its deadline
 * passes with nobody applying a group (gather_deadline), else it sleeps on
 * the store's epoch until a group has applied p or it has to lead. */
int ost__pkg_commit(ost_store *st, ost__pkg *p) {
#ifdef GC_FUTEX
    p->q->done = false;
    p->q->async = NULL;
    uv_mutex_lock(&st->gc_lock);
    enqueue(st, p);
    for (;;) {
        uint64_t wait_ns = 0; /* 0: until woken */
        if (p->q->queued && !st->gc_busy) {
            uint64_t now = uv_hrtime(), end = gather_deadline(st);
            if (st->gc_qlen >= st->gc_want || now >= end || st->gc_stop) {
                run_group(st, true); /* p is in it */
                uv_mutex_unlock(&st->gc_lock);
                return p->rc;
            }
            /* the first of the queue keeps the deadline; the others
             * sleep until a group ends (or the keeper leads theirs), or
             * they would all wake at once when it passes */
            if (st->gc_queue == p) wait_ns = end - now;
        }
        /* the epoch before the flag: a group done in between changes it,
         * and the wait returns at once */
        uint32_t e = __atomic_load_n(&st->gc_epoch, __ATOMIC_ACQUIRE);
        uv_mutex_unlock(&st->gc_lock);
        if (!__atomic_load_n(&p->q->done, __ATOMIC_ACQUIRE)) epoch_wait(&st->gc_epoch, e, wait_ns);
        if (__atomic_load_n(&p->q->done, __ATOMIC_ACQUIRE)) return p->rc;
        uv_mutex_lock(&st->gc_lock);
    }
#else
    ost__pkg_submit(st, p);
    return ost__pkg_wait(st, p);
#endif
}

/* Waits until the committer has applied p: on p's semaphore, posted once
 * per submit; an async package (a connection closing with its commit
 * pending) on gc_done. */
int ost__pkg_wait(ost_store *st, ost__pkg *p) {
    if (!p->q->async) {
#ifdef GC_FUTEX
        /* the epoch before the flag: a group done in between changes it,
         * and the wait returns at once */
        for (;;) {
            uint32_t e = __atomic_load_n(&st->gc_epoch, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&p->q->done, __ATOMIC_ACQUIRE)) break;
            epoch_wait(&st->gc_epoch, e, 0);
        }
#else
        uv_sem_wait(&p->q->sem);
#endif
        return p->rc;
    }
    uv_mutex_lock(&st->gc_lock);
    st->gc_cond_waiters++;
    while (!p->q->done) uv_cond_wait(&st->gc_done, &st->gc_lock);
    st->gc_cond_waiters--;
    uv_mutex_unlock(&st->gc_lock);
    return p->rc;
}

bool ost__pkg_is_done(ost_store *st, ost__pkg *p) {
    uv_mutex_lock(&st->gc_lock);
    bool d = p->q->done;
    uv_mutex_unlock(&st->gc_lock);
    return d;
}
