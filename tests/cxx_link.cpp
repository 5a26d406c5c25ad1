// A C++ program using the C API: it compiles with the public headers and
// links against libostore only because the headers declare their
// functions extern "C" (without it, g++ looks for mangled names).
#include <ostore.h>

#include <cstdio>
#include <cstring>

int main() {
    if (ost_version() != OST_VERSION_HEX) {
        std::fprintf(stderr, "header and library disagree\n");
        return 1;
    }
    ost_value d = ost_dict_new();
    if (!d || ost_dict_set(d, ost_str_c("k"), ost_int(42)) != 0) return 1;
    ost_writer *w = ost_writer_new();
    const void *data = nullptr;
    size_t n = 0;
    int rc = ost_dump(w, d, &data, &n);
    if (rc != 0 || n == 0) {
        std::fprintf(stderr, "dumps: %s\n", ost_strerror(rc));
        return 1;
    }
    ost_buf b{};
    ost_repr(d, &b);
    bool ok = std::strcmp(b.data, "{'k': 42}") == 0;
    std::printf("%s %s\n", ost_version_string(), b.data);
    ost_buf_free(&b);
    ost_writer_free(w);
    ost_decref(d);
    return ok ? 0 : 1;
}
