/* The page walker's fuzz target (store/lmdb/pagecheck.c), shared by the
 * libFuzzer build (fuzz_pagecheck.c with OST_LIBFUZZER), the plain smoke
 * driver (pc_smoke.c) and the seed maker (make_pc_seeds.c). */
#ifndef OST_FUZZ_PAGECHECK_H
#define OST_FUZZ_PAGECHECK_H

#include <stddef.h>
#include <stdint.h>

/* Runs every entry point of the walker on data[0..len) as a data.mdb file
 * and checks what must hold whatever the bytes: nothing read outside the
 * input (ASan sees it when the input is a heap block of exactly len
 * bytes), entries and problems' keys point into the input, a walk returns
 * 0 exactly when it reported nothing, and on a file that walks clean each
 * gives every database's walked count of entries in key order, and the
 * live byte ranges lie in the file without overlapping. A broken promise
 * prints what broke and calls abort(). Returns 1 when the file walked
 * clean, 0 otherwise. */
int ost_fuzz_pagecheck_one(const uint8_t *data, size_t len);

/* A mutation that knows the format, for the smoke driver and libFuzzer's
 * custom mutator: changes data[0..len) in place (room for max bytes) with
 * the generator seeded by seed: page numbers and sizes planted in page
 * headers and nodes, pages copied over others, truncation at a page
 * boundary, bytes flipped. Returns the new length. */
size_t ost_fuzz_pagecheck_mutate(uint8_t *data, size_t len, size_t max, uint64_t seed);

#endif
