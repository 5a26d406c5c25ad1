/* Salvage: copies what still verifies of a damaged store into a new one,
 * for `ostore salvage` (docs/recovery.md). Internal: not part of the API.
 *
 * The damaged store is read with store/lmdb/pagecheck.c alone, never with
 * liblmdb, and never written. Records and map entries come first from the
 * B-trees of the current snapshot, through the pages that pass the page
 * checks; when the walk finds damage in a database, every page of the file
 * that reads as a leaf page is scanned for entries too (free pages hold
 * older copies). A format-3 record or entry is taken only when its
 * checksum verifies (the oid, or the map and key, are in it, so a copy
 * cannot land under the wrong key); a copy found by the scan only for an
 * oid or key the tree did not give, the newest when there are several. In
 * stores of formats 1 and 2 (no checksums) records are taken when their
 * pickle decodes, and the scan is not used: nothing could tell a stale or
 * damaged copy from a good one.
 *
 * Map counts are recomputed from the entries recovered; entries of maps
 * whose record is lost are dropped (and reported); a lost root is replaced
 * by an empty one (reported). Everything recovered is written to the new
 * store in one transaction (ost__import_*), at format 3. */
#ifndef OST_STORE_SALVAGE_H
#define OST_STORE_SALVAGE_H

#include <stdint.h>

#include "ostore.h"
#include "ostore/raw.h"
#include "../engine.h"

typedef ost_salvage_stats ost__salvage_stats; /* include/ostore/raw.h */

/* What salvage tells as it goes: kind OST__SALV_DAMAGE (a page-level
 * problem of the damaged file), OST__SALV_LOST (a record or entry not
 * recovered: the oid, its class when known, why), OST__SALV_NOTE (how
 * something was recovered). line is one line, no newline; valid during
 * the call. */
#define OST__SALV_DAMAGE OST_SALVAGE_DAMAGE
#define OST__SALV_LOST OST_SALVAGE_LOST
#define OST__SALV_NOTE OST_SALVAGE_NOTE
typedef ost_salvage_fn ost__salvage_fn;

/* Salvages the store in directory src into a new store in directory dst
 * (which must not hold a store; it is made, and removed again when
 * salvage fails). 0, or a negative OST_E* code with one line in msg:
 * OST_ENOTFOUND (no data.mdb), OST_ECORRUPT (nothing could be read: both
 * meta pages are beyond use), OST_EEXIST (dst holds a store), OST_EIO,
 * OST_ENOMEM. A store from which some records were lost is a success:
 * stats and the reports say what was lost. */
int ost__salvage(const ost__salvage_api *api, const char *src, const char *dst,
                 ost__salvage_fn report, void *ud, ost__salvage_stats *stats, char *msg,
                 size_t cap);

#endif
