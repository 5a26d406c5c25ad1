/* Test helper: runs /usr/bin/python3 on a script with an input file and
 * captures its standard output. For the Criterion suites. */
#ifndef OST_TESTS_PYRUN_H
#define OST_TESTS_PYRUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes input to a temporary file, runs python with `code` (argv[1] is the
 * input path, argv[2] an output path), returns the exit status; the output
 * file's bytes go to *out (malloc'd, NUL terminated) and *outlen. extra_env
 * is prepended to the command (for example "PYTHONPATH=/tmp/x"). */
static int py_run(const char *extra_env, const char *code, const void *in, size_t inlen,
                  char **out, size_t *outlen) {
    char dir[] = "/tmp/ostore-py-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char inp[256], outp[256], codep[256], cmd[1024];
    snprintf(inp, sizeof inp, "%s/in", dir);
    snprintf(outp, sizeof outp, "%s/out", dir);
    snprintf(codep, sizeof codep, "%s/code.py", dir);
    FILE *f = fopen(inp, "wb");
    if (!f) return -1;
    if (inlen) fwrite(in, 1, inlen, f);
    fclose(f);
    f = fopen(codep, "w");
    if (!f) return -1;
    fputs(code, f);
    fclose(f);
    const char *py = getenv("OSTORE_PYTHON");
    snprintf(cmd, sizeof cmd, "%s %s %s %s %s", extra_env ? extra_env : "",
             py ? py : "/usr/bin/python3", codep, inp, outp);
    int rc = system(cmd);
    *out = NULL;
    *outlen = 0;
    f = fopen(outp, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        *out = malloc((size_t)n + 1);
        *outlen = fread(*out, 1, (size_t)n, f);
        (*out)[*outlen] = 0;
        fclose(f);
    }
    unlink(inp);
    unlink(outp);
    unlink(codep);
    rmdir(dir);
    return rc;
}

#endif
