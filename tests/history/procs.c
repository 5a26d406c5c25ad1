#include "history.h"
int procs_main(const char *addr, uint64_t first, unsigned count, unsigned nops) {
    (void)addr; (void)first; (void)count; (void)nops;
    return 77;
}
