/* Test helper: removes a temporary directory and everything in it. */
#ifndef OST_TESTS_RMTREE_H
#define OST_TESTS_RMTREE_H

#include <ftw.h>
#include <stdio.h>

static int rmtree_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

static void rmtree(const char *dir) { nftw(dir, rmtree_one, 16, FTW_DEPTH | FTW_PHYS); }

#endif
