/* The in-memory engine's table of operations (store/engine.h), addressed
 * "mem:" (a private store) and "mem:NAME" (a store shared by the opens of
 * that name in this process): docs/engines.md, "The in-memory engine".
 * The optional operations it leaves NULL: snap_renew and snap_adopt (a
 * snapshot costs no round trip), views_mark/views_release (views live
 * until the snapshot ends and cost nothing to keep), ecur_ahead,
 * ecur_keys_only and ent_get_ref (reads are local), check_pages (no
 * pages), commit_split (no sync to time). */
#include "mem.h"

/* The address as messages show it (the engine's copy, valid until close). */
static const char *mem_shown(ost__engine *e) { return e->shown; }

const ost__engine_ops ost__mem_engine;

/* db.c opens; the engine keeps its table for commit's apply_maps (so that
 * no file below this one names the table). */
static int mem_open(const ost__host *host, ost_store *st, const char *addr,
                    const ost_store_options *o, ost__engine **out) {
    int rc = ost__mem_open(host, st, addr, o, out);
    if (!rc) (*out)->ops = &ost__mem_engine;
    return rc;
}

const ost__engine_ops ost__mem_engine = {
    .version = OST__ENGINE_VERSION,
    .name = "mem",
    /* one writer at a time (the write lock): the store's group committer
     * hands it whole groups; reads cost no round trip; open makes the
     * root as LMDB's does */
    .flags = OST__ENG_ONE_WRITER | OST__ENG_LOCAL_READS | OST__ENG_MAKES_ROOT,
    /* LMDB's limit, so that a store copied to LMDB keeps its keys */
    .open = mem_open,
    .shown = mem_shown,
    .close = ost__mem_close,
    .stat = ost__mem_stat,
    .sess_open = ost__mem_sess_open,
    .sess_close = ost__mem_sess_close,
    .snap_begin = ost__mem_snap_begin,
    .snap_end = ost__mem_snap_end,
    .snap_moved = ost__mem_snap_moved,
    .pin = ost__mem_pin,
    .unpin = ost__mem_unpin,
    .get = ost__mem_get,
    .get_many = ost__mem_get_many,
    .scan = ost__mem_scan,
    .changes = ost__mem_changes,
    .class_get = ost__mem_class_get,
    .class_each = ost__mem_class_each,
    .class_id = ost__mem_class_id,
    .reserve_oids = ost__mem_reserve_oids,
    .commit = ost__mem_commit,
    .sweep = ost__mem_sweep,
    .ent_get = ost__mem_ent_get,
    .ent_put = ost__mem_ent_put,
    .ent_del = ost__mem_ent_del,
    .ent_get_del = ost__mem_ent_get_del,
    .ent_drop_map = ost__mem_ent_drop_map,
    .ecur_open = ost__mem_ecur_open,
    .ecur_seek = ost__mem_ecur_seek,
    .ecur_step = ost__mem_ecur_step,
    .ecur_get = ost__mem_ecur_get,
    .ecur_close = ost__mem_ecur_close,
    .ent_each_map = ost__mem_ent_each_map,
    .map_count_add = ost__mem_map_count_add,
    .snap_stat = ost__mem_snap_stat,
    .verify = ost__mem_verify,
    .imp_begin = ost__mem_imp_begin,
    .imp_class = ost__mem_imp_class,
    .imp_record = ost__mem_imp_record,
    .imp_entry = ost__mem_imp_entry,
    .imp_commit = ost__mem_imp_commit,
    .imp_abort = ost__mem_imp_abort,
    .drop = ost__mem_drop,
};

/* The table of engines' line (store/engines.c): mem: addresses, before
 * LMDB's paths; no files, so no salvage. */
const ost__engine_entry ost__mem_entry = {
    .label = "in-memory",
    .claims = ost__mem_claims,
    .show = ost__mem_show,
    .paths = false,
    .ops = &ost__mem_engine,
    .missing = NULL,
};
