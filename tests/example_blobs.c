/* The worked example of docs/hooks.md: large byte blobs kept in files and
 * referenced from pickles by a persistent id, with hooks on both sides.
 * Run as a test: it dumps a graph with two blobs, checks the pickle holds
 * only the file names, then loads it back and checks the bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ostore.h"

#define BLOB_MIN 4096 /* bytes objects this large go to files */

typedef struct {
    const char *dir;
    int next; /* file counter */
} blob_store;

/* persistent_id, scope all: big bytes objects become ("blob", name). */
static int blob_pid(void *ud, ost_value obj, ost_value *pid) {
    blob_store *bs = ud;
    size_t n;
    const char *data = ost_data(obj, &n);
    if (ost_typeof(obj) != OST_T_BYTES || n < BLOB_MIN) return 0; /* inline */
    char name[64], path[512];
    snprintf(name, sizeof name, "blob-%d.bin", bs->next++);
    snprintf(path, sizeof path, "%s/%s", bs->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        if (f) fclose(f);
        return OST_EIO; /* stops the dump with this code */
    }
    fclose(f);
    ost_value t = ost_tuple_new(2);
    if (!t) return OST_ENOMEM;
    ost_tuple_set(t, 0, ost_str_c("blob"));
    ost_tuple_set(t, 1, ost_str_c(name));
    *pid = t;
    return 0;
}

/* persistent_load: ("blob", name) reads the file back. */
static int blob_load(void *ud, ost_value pid, ost_value *obj) {
    blob_store *bs = ud;
    ost_value kind = ost_item(pid, 0), name = ost_item(pid, 1);
    if (!kind || strcmp(ost_data(kind, NULL), "blob") || ost_typeof(name) != OST_T_STR)
        return OST_EINVAL;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", bs->dir, ost_data(name, NULL));
    FILE *f = fopen(path, "rb");
    if (!f) return OST_ENOTFOUND;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    *obj = got == (size_t)n ? ost_bytes(buf, (size_t)n) : 0;
    free(buf);
    return *obj ? 0 : OST_EIO;
}

int main(void) {
    char dir[] = "/tmp/ostore-blobs-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    blob_store bs = {dir, 0};

    /* a document with a small inline bytes and two big blobs */
    char *big = malloc(100000);
    memset(big, 'x', 100000);
    ost_value doc = ost_dict_new();
    ost_dict_set(doc, ost_str_c("title"), ost_str_c("scan"));
    ost_dict_set(doc, ost_str_c("thumb"), ost_bytes("tiny", 4));
    ost_dict_set(doc, ost_str_c("page1"), ost_bytes(big, 100000));
    ost_dict_set(doc, ost_str_c("page2"), ost_bytes(big, 50000));

    ost_writer *w = ost_writer_new();
    ost_writer_set_persistent_id(w, blob_pid, &bs, OST_PID_ALL);
    const void *pickle;
    size_t len;
    int rc = ost_dump(w, doc, &pickle, &len);
    printf("dump: %s, %zu bytes, %d blobs written\n", ost_strerror(rc), len, bs.next);
    if (rc || len > 500 || bs.next != 2) return 1;

    ost_reader *r = ost_reader_new();
    ost_reader_set_persistent_load(r, blob_load, &bs);
    ost_value back;
    rc = ost_load(r, pickle, len, &back, NULL);
    printf("load: %s, equal: %s\n", ost_strerror(rc), rc == 0 && ost_equal(doc, back) ? "yes" : "no");
    if (rc || !ost_equal(doc, back)) return 1;

    ost_decref(back);
    ost_decref(doc);
    ost_reader_free(r);
    ost_writer_free(w);
    free(big);
    for (int i = 0; i < bs.next; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/blob-%d.bin", dir, i);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}
