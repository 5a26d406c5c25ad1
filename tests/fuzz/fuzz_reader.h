/* The pickle reader's fuzz target, shared by the libFuzzer build
 * (fuzz_reader.c with OST_LIBFUZZER) and the plain smoke driver (smoke.c). */
#ifndef OST_FUZZ_READER_H
#define OST_FUZZ_READER_H

#include <stddef.h>
#include <stdint.h>

/* Loads data[0..len) as a pickle and, when it loads, checks everything that
 * must then hold: repr works, the value dumps at protocols 2 to 5, each
 * dump disassembles, loads back to the same graph and dumps again to the
 * same bytes; loading twice with one reader gives the same graph; no value
 * is left alive afterwards. Any broken promise prints the input in hex and
 * calls abort(). Returns 1 when the input loaded, 0 when the reader
 * refused it (cleanly). */
int ost_fuzz_reader_one(const uint8_t *data, size_t len);

#endif
