/* Test helper for the Criterion suites: runs /usr/bin/python3 (or
 * $OSTORE_PYTHON) on a script with a data file and returns what it printed.
 * Fails the test when Python fails. */
#ifndef OST_TESTS_PYEVAL_H
#define OST_TESTS_PYEVAL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *python(void) {
    const char *p = getenv("OSTORE_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

static void write_file(char *path_template, const void *data, size_t n) {
    int fd = mkstemp(path_template);
    cr_assert(fd >= 0, "mkstemp failed");
    const char *p = data;
    while (n) {
        ssize_t k = write(fd, p, n);
        cr_assert(k > 0, "write failed");
        p += k;
        n -= (size_t)k;
    }
    close(fd);
}

/* Runs a Python script with the path of a file holding data as argv[1];
 * returns what it printed (malloc'd). Fails the test if Python fails. */
static char *py_run(const char *script, const void *data, size_t n) {
    char sp[] = "/tmp/ost_test_py_XXXXXX";
    char dp[] = "/tmp/ost_test_dat_XXXXXX";
    write_file(sp, script, strlen(script));
    write_file(dp, data, n);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s %s", python(), sp, dp);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "popen failed");
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    size_t k;
    while ((k = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (cap - len < 2) out = realloc(out, cap *= 2);
    }
    out[len] = 0;
    int st = pclose(p);
    unlink(sp);
    unlink(dp);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed:\n%s", python(), out);
    return out;
}

#endif
