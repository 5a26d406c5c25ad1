/* The pickle writer: protocols 2 to 5, an explicit stack instead of C
 * recursion, a memo by identity, FRAMEs for protocol 4 and later. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "opcodes.h"

enum { K_ITEMS, K_DICT, K_PAIRS, K_TUPLE, K_FROZEN, K_BUILD, K_SLOTS, K_FIELDS };

/* One unfinished object. K_ITEMS walks a list or set (op: APPENDS or
 * ADDITEMS), K_DICT a dict, K_PAIRS a list of 2-tuples, K_TUPLE and K_FROZEN
 * finish with a memo check; K_BUILD saves parts, writes op, then the
 * optional list items, dict items and state. K_FIELDS writes a slotted
 * instance's slots in declared order as a tuple (a positional state). */
typedef struct {
    ost_value obj;      /* the object written, for the memo (0: none) */
    ost_value aux, aux2; /* owned temporaries released at pop */
    ost_value parts[3]; /* K_BUILD: values saved before op */
    ost_value post_list, post_dict, post_state;
    uint8_t kind, op, nparts, nohook;
    uint32_t phase;
    uint32_t memo_at; /* memo_next when the frame was pushed */
    size_t i;        /* next item / entry index */
    size_t left;     /* items not yet written */
    size_t chunk;    /* items left in the current batch */
    size_t batch;    /* size of the current batch */
    size_t cur;      /* K_DICT/K_PAIRS: entry whose value comes next */
    bool open;       /* a batch is open */
    bool half;       /* K_DICT/K_PAIRS/K_SLOTS: key written, value next */
    bool slots;      /* K_BUILD: the state is the instance's slots */
    bool win;        /* this frame opened a memo window (see tracked) */
    bool names;      /* K_DICT: an instance's state: its str keys are names */
} wframe;

/* An attribute name met in this dump (see save_name): a reference to the
 * str, and its memo index once memoized. */
typedef struct {
    ost_value s; /* 0: empty slot */
    uint32_t idx; /* NAME_SEEN: written once in full, not memoized */
    uint32_t hash;
    bool held; /* s is a reference of ours */
} wname;
#define NAME_SEEN UINT32_MAX
#define NAMES_MAX 1024 /* distinct names memoized per dump; more are written in full */

#define OST__MEMO_RECENT 32

struct ost_writer {
    uint32_t magic; /* OST__H_WRITER */
    ost_value recent[OST__MEMO_RECENT]; /* the first objects memoized */
    int proto;
    bool framing;
    ost_write_fn sink;
    void *sink_ud;
    ost_persistent_id_fn pid_fn;
    void *pid_ud;
    ost_pid_scope pid_scope;
    unsigned char *buf;
    size_t len, cap;
    bool buf_mapped; /* buf is an ost__buf_map mapping of cap bytes */
    size_t frame_start; /* offset of the open frame's 9-byte header */
    bool in_frame;
    size_t flushed; /* bytes already given to the sink */
    ost__ptrtab memo;
    uint32_t memo_next;
    size_t window; /* open memo windows (see tracked) */
    bool state_next; /* the next save() is an instance's state (see save_small) */
    bool slow; /* tests: no one-pass path (ost__writer_set_fast_paths) */
    bool pid_nomemo; /* no memo entry after a pid (ost__writer_set_pid_memo) */
    ost_value dead; /* memoized temporaries, kept until the dump ends */
    wframe *st;
    size_t nst, capst;
    ost_dump_stats stats;
    ost_value g_set, g_frozenset, g_bytes, g_bytearray, g_encode, g_newobj_ex;
    ost_value g_getattr;
    ost_value s_latin1;
    wname *names; /* attribute names by content, open addressing */
    uint32_t *names_used; /* the slots in use, so a dump clears only those */
    size_t names_mask, names_count;
    int err;
    char msg[256];
};

static int fail(ost_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(ost_writer *w, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->err = code;
    return code;
}

ost_writer *ost_writer_new(void) {
    ost_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->magic = OST__H_WRITER;
    w->proto = OST_PICKLE_DEFAULT_PROTOCOL;
    w->framing = true;
    if (ost__ptrtab_init(&w->memo, 256)) {
        free(w);
        return NULL;
    }
    return w;
}

static void drop_cached(ost_value *g) {
    if (*g) { /* cached globals carry an extra reference so they memoize */
        ost_decref(*g);
        ost_decref(*g);
        *g = 0;
    }
}

void ost_writer_free(ost_writer *w) {
    if (!w) return;
    drop_cached(&w->g_set);
    drop_cached(&w->g_frozenset);
    drop_cached(&w->g_bytes);
    drop_cached(&w->g_bytearray);
    drop_cached(&w->g_encode);
    drop_cached(&w->g_newobj_ex);
    drop_cached(&w->g_getattr);
    drop_cached(&w->s_latin1);
    ost__ptrtab_free(&w->memo);
    free(w->names);
    free(w->names_used);
    free(w->st);
    if (w->buf_mapped) ost__buf_unmap(w->buf, w->cap);
    else free(w->buf);
    free(w);
}

int ost_writer_set_protocol(ost_writer *w, int protocol) {
    if (protocol < 2 || protocol > OST_PICKLE_HIGHEST_PROTOCOL)
        return fail(w, OST_EPROTOCOL, "protocol %d not supported (2 to 5)",
                    protocol);
    w->proto = protocol;
    return 0;
}

void ost_writer_set_framing(ost_writer *w, bool on) { w->framing = on; }

void ost__writer_set_fast_paths(ost_writer *w, bool on) { w->slow = !on; }

void ost_writer_set_sink(ost_writer *w, ost_write_fn fn, void *ud) {
    w->sink = fn;
    w->sink_ud = ud;
}

void ost__writer_set_pid_memo(ost_writer *w, bool on) { w->pid_nomemo = !on; }

void ost_writer_set_persistent_id(ost_writer *w, ost_persistent_id_fn fn,
                                  void *ud, ost_pid_scope scope) {
    w->pid_fn = fn;
    w->pid_ud = ud;
    w->pid_scope = scope;
}

void ost_writer_stats(const ost_writer *w, ost_dump_stats *st) {
    *st = w->stats;
}

const char *ost_writer_errmsg(const ost_writer *w) { return w->msg; }

/* ---- output ------------------------------------------------------------- */

static bool framed(const ost_writer *w) { return w->framing && w->proto >= 4; }

/* Output buffers from this size on are mappings of huge pages, grown by
 * copying into a new mapping. realloc would move their pages with mremap,
 * and on this project's virtual machines the next pass over moved pages
 * costs nearly as much as faulting them in (a reused writer's second dump
 * of 3 MB: 4 to 13 ms instead of 0.9); huge pages also fault 512 times
 * less often (4 MiB written into fresh memory: 0.5 ms instead of 20). The
 * buffer is kept between dumps, as before. */
#define BUF_MAP_MIN ((size_t)2 << 20)

static int grow(ost_writer *w, size_t n) {
    size_t need = w->len + n;
    if (need < w->len) return fail(w, OST_ENOMEM, "pickle too large");
    if (need >= BUF_MAP_MIN || w->buf_mapped) {
        size_t want = w->cap <= SIZE_MAX / 2 && w->cap * 2 > need ? w->cap * 2 : need, got = 0;
        bool mapped = true;
        unsigned char *p = ost__buf_map(want, &got);
        if (!p) { /* pools off (ASan), or no mapping: malloc, still no realloc */
            mapped = false;
            got = want;
            p = malloc(want);
        }
        if (!p) return fail(w, OST_ENOMEM, "out of memory growing the output to %zu bytes", need);
        if (w->len) memcpy(p, w->buf, w->len);
        if (w->buf_mapped) ost__buf_unmap(w->buf, w->cap);
        else free(w->buf);
        w->buf = p;
        w->cap = got;
        w->buf_mapped = mapped;
        return 0;
    }
    if (ost__grow((void **)&w->buf, &w->cap, need, 1, 4096))
        return fail(w, OST_ENOMEM, "out of memory growing the output to %zu bytes", need);
    return 0;
}

static inline int reserve(ost_writer *w, size_t n) {
    if (OST_LIKELY(w->cap - w->len >= n)) return 0;
    return grow(w, n);
}

static inline void put1(ost_writer *w, unsigned c) { w->buf[w->len++] = (unsigned char)c; }
/* The helpers below write through a local pointer and update len once:
 * stores through unsigned char may alias w, so writing w->buf[w->len++]
 * byte by byte makes the compiler reload both after every byte. */
static inline void put_le(ost_writer *w, uint64_t v, int n) {
    unsigned char *p = w->buf + w->len;
    for (int k = 0; k < n; k++) p[k] = (unsigned char)(v >> (8 * k));
    w->len += (size_t)n;
}
static inline void put_op_le(ost_writer *w, unsigned op, uint64_t v, int n) {
    unsigned char *p = w->buf + w->len;
    p[0] = (unsigned char)op;
    for (int k = 0; k < n; k++) p[1 + k] = (unsigned char)(v >> (8 * k));
    w->len += (size_t)n + 1;
}
static inline void put_bytes(ost_writer *w, const void *p, size_t n) {
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}
/* SHORT_BINUNICODE of n < 256 bytes; the caller reserved n + 2 bytes. */
static inline void put_short_str(ost_writer *w, const char *p, size_t n) {
    unsigned char *o = w->buf + w->len;
    o[0] = OP_SHORT_BINUNICODE;
    o[1] = (unsigned char)n;
    memcpy(o + 2, p, n);
    w->len += n + 2;
}

static int flush(ost_writer *w, size_t upto) {
    if (!w->sink || !upto) return 0;
    int rc = w->sink(w->sink_ud, w->buf, upto);
    if (rc) return fail(w, rc, "the write callback failed: %s", ost_strerror(rc));
    w->flushed += upto;
    memmove(w->buf, w->buf + upto, w->len - upto);
    w->len -= upto;
    if (w->in_frame) w->frame_start -= upto;
    return 0;
}

static int open_frame(ost_writer *w) {
    if (reserve(w, 9)) return w->err;
    w->frame_start = w->len;
    w->len += 9;
    w->in_frame = true;
    return 0;
}

/* Closes the open frame: writes its header, or removes the reserved room
 * when the frame is too small to be worth one (as CPython does). */
static void close_frame(ost_writer *w) {
    if (!w->in_frame) return;
    size_t body = w->len - w->frame_start - 9;
    if (body >= 4) {
        unsigned char *h = w->buf + w->frame_start;
        h[0] = OP_FRAME;
        ost__le64(h + 1, body);
    } else {
        memmove(w->buf + w->frame_start, w->buf + w->frame_start + 9, body);
        w->len -= 9;
    }
    w->in_frame = false;
}

/* At an opcode boundary: end a full frame, hand output to the sink. */
static inline int boundary(ost_writer *w) {
    if (framed(w)) {
        if (OST_LIKELY(w->len - w->frame_start < OST_FRAME_TARGET + 9)) return 0;
        close_frame(w);
        if (flush(w, w->len)) return w->err;
        return open_frame(w);
    }
    if (w->sink && w->len >= OST_FRAME_TARGET) return flush(w, w->len);
    return 0;
}

/* Writes a large payload outside any frame, after its opcode header. */
static int put_payload(ost_writer *w, const void *p, size_t n) {
    if (framed(w) && n >= OST_FRAME_TARGET) {
        close_frame(w);
        if (w->sink) {
            if (flush(w, w->len)) return w->err;
            int rc = w->sink(w->sink_ud, p, n);
            if (rc) return fail(w, rc, "the write callback failed: %s", ost_strerror(rc));
            w->flushed += n;
        } else {
            if (reserve(w, n)) return w->err;
            put_bytes(w, p, n);
        }
        if (open_frame(w)) return w->err;
        return reserve(w, 5); /* the memo PUT that may follow */
    }
    /* and room for the memo PUT that may follow (memoize) */
    if (reserve(w, n + 5)) return w->err;
    put_bytes(w, p, n);
    return 0;
}

/* ---- memo ----------------------------------------------------------------- */

static inline void put_get(ost_writer *w, uint64_t idx) {
    if (idx < 256) put_op_le(w, OP_BINGET, idx, 1);
    else put_op_le(w, OP_LONG_BINGET, idx, 4);
}

/* Records obj in the memo and writes the PUT. Room for 5 bytes is
 * reserved by callers. */
static inline int memoize(ost_writer *w, ost_value obj) {
    uint32_t idx = w->memo_next++;
    if (ost__ptrtab_put(&w->memo, obj, idx))
        return fail(w, OST_ENOMEM, "out of memory growing the memo");
    if (idx < OST__MEMO_RECENT) w->recent[idx] = obj;
    if (w->proto >= 4) put1(w, OP_MEMOIZE);
    else if (idx < 256) {
        put1(w, OP_BINPUT);
        put1(w, idx);
    } else {
        put1(w, OP_LONG_BINPUT);
        put_le(w, idx, 4);
    }
    return 0;
}

static inline bool shared(ost_value v) { return OST__O(v)->refcnt > 1; }

/* Whether v goes through the memo. Shared objects do, and so does
 * everything written while a shared tuple, frozenset or reduce-shaped
 * object is open, before its opcode (a window): its parts can lead back to
 * it through a cycle, and it is then written a second time inside itself,
 * as CPython does. That ends only if the objects on the way back are in
 * the memo, and they need not be shared: in t = ([t], 1) the list is held
 * by t alone. */
static inline bool tracked(const ost_writer *w, ost_value v) {
    return w->window || shared(v);
}
static inline void open_window(ost_writer *w, wframe *f) {
    f->win = true;
    w->window++;
}
static inline void close_window(ost_writer *w, wframe *f) {
    if (f->win) {
        f->win = false;
        w->window--;
    }
}

/* Python 3 names and how Python 3 spells them for protocols 0-2
 * (_compat_pickle's REVERSE_NAME_MAPPING and REVERSE_IMPORT_MAPPING,
 * Python 3.11). */
static const char *const py2_names[][4] = {
    {"_functools", "reduce", "__builtin__", "reduce"},
    {"_socket", "socket", "socket", "_socketobject"},
    {"builtins", "ArithmeticError", "exceptions", "ArithmeticError"},
    {"builtins", "AssertionError", "exceptions", "AssertionError"},
    {"builtins", "AttributeError", "exceptions", "AttributeError"},
    {"builtins", "BaseException", "exceptions", "BaseException"},
    {"builtins", "BrokenPipeError", "exceptions", "OSError"},
    {"builtins", "BufferError", "exceptions", "BufferError"},
    {"builtins", "BytesWarning", "exceptions", "BytesWarning"},
    {"builtins", "ChildProcessError", "exceptions", "OSError"},
    {"builtins", "ConnectionAbortedError", "exceptions", "OSError"},
    {"builtins", "ConnectionError", "exceptions", "OSError"},
    {"builtins", "ConnectionRefusedError", "exceptions", "OSError"},
    {"builtins", "ConnectionResetError", "exceptions", "OSError"},
    {"builtins", "DeprecationWarning", "exceptions", "DeprecationWarning"},
    {"builtins", "EOFError", "exceptions", "EOFError"},
    {"builtins", "EnvironmentError", "exceptions", "EnvironmentError"},
    {"builtins", "Exception", "exceptions", "Exception"},
    {"builtins", "FileExistsError", "exceptions", "OSError"},
    {"builtins", "FileNotFoundError", "exceptions", "OSError"},
    {"builtins", "FloatingPointError", "exceptions", "FloatingPointError"},
    {"builtins", "FutureWarning", "exceptions", "FutureWarning"},
    {"builtins", "GeneratorExit", "exceptions", "GeneratorExit"},
    {"builtins", "IOError", "exceptions", "IOError"},
    {"builtins", "ImportError", "exceptions", "ImportError"},
    {"builtins", "ImportWarning", "exceptions", "ImportWarning"},
    {"builtins", "IndentationError", "exceptions", "IndentationError"},
    {"builtins", "IndexError", "exceptions", "IndexError"},
    {"builtins", "InterruptedError", "exceptions", "OSError"},
    {"builtins", "IsADirectoryError", "exceptions", "OSError"},
    {"builtins", "KeyError", "exceptions", "KeyError"},
    {"builtins", "KeyboardInterrupt", "exceptions", "KeyboardInterrupt"},
    {"builtins", "LookupError", "exceptions", "LookupError"},
    {"builtins", "MemoryError", "exceptions", "MemoryError"},
    {"builtins", "ModuleNotFoundError", "exceptions", "ImportError"},
    {"builtins", "NameError", "exceptions", "NameError"},
    {"builtins", "NotADirectoryError", "exceptions", "OSError"},
    {"builtins", "NotImplementedError", "exceptions", "NotImplementedError"},
    {"builtins", "OSError", "exceptions", "OSError"},
    {"builtins", "OverflowError", "exceptions", "OverflowError"},
    {"builtins", "PendingDeprecationWarning", "exceptions", "PendingDeprecationWarning"},
    {"builtins", "PermissionError", "exceptions", "OSError"},
    {"builtins", "ProcessLookupError", "exceptions", "OSError"},
    {"builtins", "ReferenceError", "exceptions", "ReferenceError"},
    {"builtins", "RuntimeError", "exceptions", "RuntimeError"},
    {"builtins", "RuntimeWarning", "exceptions", "RuntimeWarning"},
    {"builtins", "StopIteration", "exceptions", "StopIteration"},
    {"builtins", "SyntaxError", "exceptions", "SyntaxError"},
    {"builtins", "SyntaxWarning", "exceptions", "SyntaxWarning"},
    {"builtins", "SystemError", "exceptions", "SystemError"},
    {"builtins", "SystemExit", "exceptions", "SystemExit"},
    {"builtins", "TabError", "exceptions", "TabError"},
    {"builtins", "TimeoutError", "exceptions", "OSError"},
    {"builtins", "TypeError", "exceptions", "TypeError"},
    {"builtins", "UnboundLocalError", "exceptions", "UnboundLocalError"},
    {"builtins", "UnicodeDecodeError", "exceptions", "UnicodeDecodeError"},
    {"builtins", "UnicodeEncodeError", "exceptions", "UnicodeEncodeError"},
    {"builtins", "UnicodeError", "exceptions", "UnicodeError"},
    {"builtins", "UnicodeTranslateError", "exceptions", "UnicodeTranslateError"},
    {"builtins", "UnicodeWarning", "exceptions", "UnicodeWarning"},
    {"builtins", "UserWarning", "exceptions", "UserWarning"},
    {"builtins", "ValueError", "exceptions", "ValueError"},
    {"builtins", "Warning", "exceptions", "Warning"},
    {"builtins", "ZeroDivisionError", "exceptions", "ZeroDivisionError"},
    {"builtins", "chr", "__builtin__", "unichr"},
    {"builtins", "filter", "itertools", "ifilter"},
    {"builtins", "int", "__builtin__", "long"},
    {"builtins", "map", "itertools", "imap"},
    {"builtins", "range", "__builtin__", "xrange"},
    {"builtins", "str", "__builtin__", "unicode"},
    {"builtins", "zip", "itertools", "izip"},
    {"collections", "UserDict", "UserDict", "IterableUserDict"},
    {"collections", "UserList", "UserList", "UserList"},
    {"collections", "UserString", "UserString", "UserString"},
    {"dbm", "whichdb", "whichdb", "whichdb"},
    {"functools", "reduce", "__builtin__", "reduce"},
    {"http.server", "CGIHTTPRequestHandler", "CGIHTTPServer", "CGIHTTPRequestHandler"},
    {"http.server", "SimpleHTTPRequestHandler", "SimpleHTTPServer", "SimpleHTTPRequestHandler"},
    {"itertools", "filterfalse", "itertools", "ifilterfalse"},
    {"itertools", "zip_longest", "itertools", "izip_longest"},
    {"multiprocessing.connection", "Connection", "_multiprocessing", "Connection"},
    {"multiprocessing.context", "AuthenticationError", "multiprocessing", "AuthenticationError"},
    {"multiprocessing.context", "BufferTooShort", "multiprocessing", "BufferTooShort"},
    {"multiprocessing.context", "Process", "multiprocessing.process", "Process"},
    {"multiprocessing.context", "ProcessError", "multiprocessing", "ProcessError"},
    {"multiprocessing.context", "TimeoutError", "multiprocessing", "TimeoutError"},
    {"multiprocessing.popen_fork", "Popen", "multiprocessing.forking", "Popen"},
    {"socket", "fromfd", "_socket", "fromfd"},
    {"sys", "intern", "__builtin__", "intern"},
    {"tkinter.filedialog", "FileDialog", "FileDialog", "FileDialog"},
    {"tkinter.filedialog", "LoadFileDialog", "FileDialog", "LoadFileDialog"},
    {"tkinter.filedialog", "SaveFileDialog", "FileDialog", "SaveFileDialog"},
    {"tkinter.simpledialog", "SimpleDialog", "SimpleDialog", "SimpleDialog"},
    {"urllib.error", "ContentTooShortError", "urllib", "ContentTooShortError"},
    {"urllib.error", "HTTPError", "urllib2", "HTTPError"},
    {"urllib.error", "URLError", "urllib2", "URLError"},
    {"urllib.parse", "quote", "urllib", "quote"},
    {"urllib.parse", "quote_plus", "urllib", "quote_plus"},
    {"urllib.parse", "unquote", "urllib", "unquote"},
    {"urllib.parse", "unquote_plus", "urllib", "unquote_plus"},
    {"urllib.parse", "urlencode", "urllib", "urlencode"},
    {"urllib.request", "getproxies", "urllib", "getproxies"},
    {"urllib.request", "pathname2url", "urllib", "pathname2url"},
    {"urllib.request", "url2pathname", "urllib", "url2pathname"},
    {"urllib.request", "urlcleanup", "urllib", "urlcleanup"},
    {"urllib.request", "urlopen", "urllib", "urlopen"},
    {"urllib.request", "urlretrieve", "urllib", "urlretrieve"},
    {"xmlrpc.server", "DocCGIXMLRPCRequestHandler", "DocXMLRPCServer", "DocCGIXMLRPCRequestHandler"},
    {"xmlrpc.server", "DocXMLRPCRequestHandler", "DocXMLRPCServer", "DocXMLRPCRequestHandler"},
    {"xmlrpc.server", "DocXMLRPCServer", "DocXMLRPCServer", "DocXMLRPCServer"},
    {"xmlrpc.server", "ServerHTMLDoc", "DocXMLRPCServer", "ServerHTMLDoc"},
    {"xmlrpc.server", "XMLRPCDocGenerator", "DocXMLRPCServer", "XMLRPCDocGenerator"},
};
static const char *const py2_modules[][2] = {
    {"_bz2", "bz2"},
    {"_dbm", "dbm"},
    {"_dummy_thread", "dummy_thread"},
    {"_functools", "functools"},
    {"_gdbm", "gdbm"},
    {"_markupbase", "markupbase"},
    {"_pickle", "pickle"},
    {"_thread", "thread"},
    {"builtins", "__builtin__"},
    {"collections.abc", "_abcoll"},
    {"configparser", "ConfigParser"},
    {"copyreg", "copy_reg"},
    {"dbm", "anydbm"},
    {"dbm.bsd", "dbhash"},
    {"dbm.dumb", "dumbdbm"},
    {"dbm.gnu", "gdbm"},
    {"dbm.ndbm", "dbm"},
    {"html.entities", "htmlentitydefs"},
    {"html.parser", "HTMLParser"},
    {"http.client", "httplib"},
    {"http.cookiejar", "cookielib"},
    {"http.cookies", "Cookie"},
    {"http.server", "BaseHTTPServer"},
    {"queue", "Queue"},
    {"reprlib", "repr"},
    {"socketserver", "SocketServer"},
    {"subprocess", "commands"},
    {"test.support", "test.test_support"},
    {"tkinter", "Tkinter"},
    {"tkinter.colorchooser", "tkColorChooser"},
    {"tkinter.commondialog", "tkCommonDialog"},
    {"tkinter.constants", "Tkconstants"},
    {"tkinter.dialog", "Dialog"},
    {"tkinter.dnd", "Tkdnd"},
    {"tkinter.filedialog", "tkFileDialog"},
    {"tkinter.font", "tkFont"},
    {"tkinter.messagebox", "tkMessageBox"},
    {"tkinter.scrolledtext", "ScrolledText"},
    {"tkinter.simpledialog", "tkSimpleDialog"},
    {"tkinter.tix", "Tix"},
    {"tkinter.ttk", "ttk"},
    {"urllib.parse", "urlparse"},
    {"urllib.request", "urllib2"},
    {"urllib.robotparser", "robotparser"},
    {"winreg", "_winreg"},
    {"xmlrpc.client", "xmlrpclib"},
    {"xmlrpc.server", "SimpleXMLRPCServer"},
};

/* How Python 3 spells module.name in a pickle of protocol 0-2. */
static void py2_spelling(const char **m, const char **n) {
    for (size_t i = 0; i < sizeof py2_names / sizeof *py2_names; i++)
        if (!strcmp(*m, py2_names[i][0]) && !strcmp(*n, py2_names[i][1])) {
            *m = py2_names[i][2];
            *n = py2_names[i][3];
            return;
        }
    for (size_t i = 0; i < sizeof py2_modules / sizeof *py2_modules; i++)
        if (!strcmp(*m, py2_modules[i][0])) {
            *m = py2_modules[i][1];
            return;
        }
}

/* ---- scalars --------------------------------------------------------------- */

/* Encodes a small int at o (at most 10 bytes) and returns the end. (Byte
 * stores: one wide store per int was slower on list(range(10**6)).) */
static inline unsigned char *enc_int64(unsigned char *o, int64_t i) {
    uint64_t u = (uint64_t)i;
    if (i >= 0 && i <= 0xff) {
        o[0] = OP_BININT1;
        o[1] = (unsigned char)u;
        return o + 2;
    }
    if (i >= 0 && i <= 0xffff) {
        o[0] = OP_BININT2;
        o[1] = (unsigned char)u;
        o[2] = (unsigned char)(u >> 8);
        return o + 3;
    }
    if (i >= INT32_MIN && i <= INT32_MAX) {
        o[0] = OP_BININT;
        for (int k = 0; k < 4; k++) o[1 + k] = (unsigned char)(u >> (8 * k));
        return o + 5;
    }
    uint8_t b[8];
    size_t n = ost_int_to_bytes(ost_int(i), b, 8); /* immediate: no alloc */
    o[0] = OP_LONG1;
    o[1] = (unsigned char)n;
    memcpy(o + 2, b, n);
    return o + 2 + n;
}

static inline void put_int64(ost_writer *w, int64_t i) {
    w->len = (size_t)(enc_int64(w->buf + w->len, i) - w->buf);
}

/* Encodes BINFLOAT of double d at o (9 bytes) and returns the end: the
 * opcode, then the IEEE bits big-endian, stored as one 8-byte word. */
static inline unsigned char *enc_float(unsigned char *o, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    o[0] = OP_BINFLOAT;
    ost__be64(o + 1, bits); /* big-endian in the pickle */
    return o + 9;
}

/* BINFLOAT of float v (immediate or heap); 9 bytes reserved. */
static inline void put_float(ost_writer *w, ost_value v) {
    w->len = (size_t)(enc_float(w->buf + w->len, ost__float_get(v)) - w->buf);
}

static int put_text(ost_writer *w, int type, const char *p, size_t n) {
    /* a large payload and its header go outside frames, as CPython does */
    if (framed(w) && n >= OST_FRAME_TARGET) close_frame(w);
    if (reserve(w, 9 + 5)) return w->err;
    if (type == OST_T_STR) {
        if (n < 256 && w->proto >= 4) {
            if (reserve(w, n + 2 + 5)) return w->err;
            put_short_str(w, p, n);
            return 0;
        } else if (n <= UINT32_MAX) {
            put1(w, OP_BINUNICODE);
            put_le(w, n, 4);
        } else if (w->proto >= 4) {
            put1(w, OP_BINUNICODE8);
            put_le(w, n, 8);
        } else
            return fail(w, OST_EUNSUPPORTED, "str of %zu bytes needs protocol 4", n);
    } else if (type == OST_T_BYTES) {
        if (n < 256) {
            put1(w, OP_SHORT_BINBYTES);
            put1(w, (unsigned)n);
        } else if (n <= UINT32_MAX) {
            put1(w, OP_BINBYTES);
            put_le(w, n, 4);
        } else if (w->proto >= 4) {
            put1(w, OP_BINBYTES8);
            put_le(w, n, 8);
        } else
            return fail(w, OST_EUNSUPPORTED, "bytes of %zu bytes needs protocol 4", n);
    } else {
        put1(w, OP_BYTEARRAY8);
        put_le(w, n, 8);
    }
    if (n < 256) { /* short: stays in the frame */
        if (reserve(w, n + 5)) return w->err;
        put_bytes(w, p, n);
        return 0;
    }
    return put_payload(w, p, n);
}

/* ---- frames ------------------------------------------------------------------ */

static wframe *push(ost_writer *w, int kind, ost_value obj) {
    if (ost__reserve((void **)&w->st, &w->capst, w->nst + 1, sizeof *w->st, 64)) {
        fail(w, OST_ENOMEM, "out of memory: object graph nested too deep");
        return NULL;
    }
    wframe *f = &w->st[w->nst++];
    memset(f, 0, sizeof *f);
    f->kind = (uint8_t)kind;
    f->obj = obj;
    f->memo_at = w->memo_next;
    return f;
}

static ost_value cached_global(ost_writer *w, ost_value *slot, const char *m,
                               const char *n) {
    if (!*slot) {
        *slot = ost_global(m, n);
        if (!*slot) {
            fail(w, OST_ENOMEM, "out of memory");
            return 0;
        }
        ost_incref(*slot); /* refcount 2: always memoized */
    }
    return *slot;
}

/* K_BUILD frame for a reduce-shaped object: parts, then op. */
static wframe *push_build(ost_writer *w, ost_value obj, int op, ost_value p0,
                          ost_value p1, ost_value p2) {
    wframe *f = push(w, K_BUILD, obj);
    if (!f) return NULL;
    f->op = (uint8_t)op;
    f->parts[0] = p0;
    f->parts[1] = p1;
    f->parts[2] = p2;
    f->nparts = (uint8_t)(p2 ? 3 : p1 ? 2 : 1);
    return f;
}

/* (list(items),) for the protocol 2 and 3 spellings of sets. */
static ost_value items_args(ost_value s) {
    ost_value l = ost_list_new(ost_len(s)), t = ost_tuple_new(1);
    size_t pos = 0;
    ost_value k;
    if (!l || !t) goto oom;
    while (ost_dict_next(s, &pos, &k, NULL))
        if (ost_list_append(l, ost_incref(k))) goto oom;
    ost_tuple_set(t, 0, l);
    return t;
oom:
    ost_decref(l);
    ost_decref(t);
    return 0;
}

/* A set or frozenset below protocol 4 (no EMPTY_SET, ADDITEMS,
 * FROZENSET): builtins.set(list) or builtins.frozenset(list), as
 * CPython's save_set writes it then. 0 or the writer's error. */
static int save_set_by_call(ost_writer *w, ost_value v, bool fz, bool sh) {
    ost_value g = fz ? cached_global(w, &w->g_frozenset, "builtins", "frozenset")
                     : cached_global(w, &w->g_set, "builtins", "set");
    ost_value args = g ? items_args(v) : 0;
    wframe *f = args ? push_build(w, v, OP_REDUCE, g, args, 0) : NULL;
    if (!f) {
        ost_decref(args);
        return w->err ? w->err : fail(w, OST_ENOMEM, "out of memory");
    }
    f->aux = args;
    if (sh) open_window(w, f);
    return 0;
}

/* A NEWOBJ_EX reduce below protocol 4 (no NEWOBJ_EX opcode):
 * copyreg.__newobj_ex__(cls, args, kwargs), as CPython writes it. The
 * frame, or NULL (out of memory; w->err may say more). */
static wframe *push_newobj_ex_call(ost_writer *w, ost_value v, const ost_reduce_obj *r) {
    ost_value g = cached_global(w, &w->g_newobj_ex, "copyreg", "__newobj_ex__");
    ost_value args = ost_tuple_new(3), kw = r->kwargs ? ost_incref(r->kwargs) : ost_dict_new();
    if (!g || !args || !kw) {
        ost_decref(args);
        ost_decref(kw);
        return NULL;
    }
    ost_tuple_set(args, 0, ost_incref(r->callable));
    ost_tuple_set(args, 1, ost_incref(r->args));
    ost_tuple_set(args, 2, kw);
    wframe *f = push_build(w, v, OP_REDUCE, g, args, 0);
    if (f) f->aux = args;
    else ost_decref(args);
    return f;
}

static int call_hook(ost_writer *w, ost_value v, bool *done);
static int save(ost_writer *w, ost_value v, bool nohook);

/* ---- attribute names -------------------------------------------------------
 *
 * Python interns attribute names, so its pickles memoize each name once and
 * write a 2-byte GET for every later use. Our instances' names are often
 * distinct str objects of the same text (each setattr makes its key), so
 * names are memoized by content: an instance state's str keys and slotted
 * fields' names. A name is written in full the first time, memoized the
 * second time, fetched from the memo after that: a pickle with one instance
 * (a store record) stays as it was, one with many gets Python's size. */

/* The persistent_id hook sees every heap reference: names go through save. */
static inline bool pid_all(const ost_writer *w) {
    return w->pid_fn && w->pid_scope == OST_PID_ALL;
}

static wname *name_slot(ost_writer *w, const ost_str_obj *s, uint32_t h) {
    size_t i = h & w->names_mask;
    for (;;) {
        wname *e = &w->names[i];
        if (!e->s) return e;
        const ost_str_obj *t = (const ost_str_obj *)e->s;
        if (e->hash == h && t->len == s->len) {
            size_t k = 0; /* names are short: no call to memcmp */
            while (k < s->len && t->data[k] == s->data[k]) k++;
            if (k == s->len) return e;
        }
        i = (i + 1) & w->names_mask;
    }
}

static void names_clear(ost_writer *w) {
    if (!w->names_count) return;
    for (size_t k = 0; k < w->names_count; k++) { /* not the whole table: a dump */
        wname *e = &w->names[w->names_used[k]]; /* uses a few of its 2048 slots */
        if (e->held) ost_decref(e->s);
        e->s = 0;
        e->held = false;
    }
    w->names_count = 0;
}

/* The hash save_name() takes: ost__hash of the name, which a dict entry
 * keeps (so a state dict's keys are not hashed again). */
static inline uint64_t name_hash(ost_value name) {
    uint64_t h = 0;
    ost__hash(name, &h); /* a str: cannot fail */
    return h;
}

/* Writes str name (under 256 bytes) as an attribute name: a GET when
 * memoized, else in full, memoized the second time it is met. Falls back
 * to save() when out of names or memory. hold: the table takes a reference
 * (a state's key, which may be a temporary); a class's field name is not
 * held: its class outlives the dump, and other threads may be counting
 * references to it (the classes of a registry are shared). */
static int save_name(ost_writer *w, ost_value name, bool hold, uint64_t h64) {
    ost_str_obj *s = (ost_str_obj *)name;
    if (OST_UNLIKELY(!w->names)) {
        w->names = calloc(2 * NAMES_MAX, sizeof *w->names);
        w->names_used = malloc(NAMES_MAX * sizeof *w->names_used);
        if (!w->names || !w->names_used) {
            free(w->names);
            free(w->names_used);
            w->names = NULL;
            w->names_used = NULL;
            return save(w, name, false);
        }
        w->names_mask = 2 * NAMES_MAX - 1;
    }
    uint32_t h = (uint32_t)h64;
    wname *e = name_slot(w, s, h);
    if (!e->s) {
        if (w->names_count >= NAMES_MAX) return save(w, name, false);
        e->s = hold ? ost_incref(name) : name; /* a temporary's text must stay */
        e->held = hold;
        e->idx = NAME_SEEN;
        e->hash = h;
        w->names_used[w->names_count++] = (uint32_t)(e - w->names);
    } else if (e->idx != NAME_SEEN) {
        if (reserve(w, 5)) return w->err;
        put_get(w, e->idx);
        w->stats.memo_hits++;
        return 0;
    } else if (w->memo_next < UINT32_MAX - 1) {
        e->idx = w->memo_next++; /* by content only: not in the identity memo */
        if (reserve(w, s->len + 2 + 9 + 5)) return w->err;
        if (put_text(w, OST_T_STR, s->data, s->len)) return w->err;
        w->stats.objects++;
        if (w->proto >= 4) put1(w, OP_MEMOIZE);
        else if (e->idx < 256) put_op_le(w, OP_BINPUT, e->idx, 1);
        else put_op_le(w, OP_LONG_BINPUT, e->idx, 4);
        return 0;
    }
    if (reserve(w, s->len + 2 + 9 + 5)) return w->err;
    w->stats.objects++;
    return put_text(w, OST_T_STR, s->data, s->len);
}

/* True when boundary() would end the frame or flush: the fast loops in
 * step() stop there, so frames split where they would item by item. */
static inline bool boundary_due(const ost_writer *w) {
    if (framed(w)) return w->len - w->frame_start >= OST_FRAME_TARGET + 9;
    return w->sink && w->len >= OST_FRAME_TARGET;
}

/* The output length at which boundary_due() becomes true, for loops that
 * keep it in a register (writes through the buffer may alias w). */
static inline size_t boundary_at(const ost_writer *w) {
    if (framed(w)) return w->frame_start + OST_FRAME_TARGET + 9;
    return w->sink ? OST_FRAME_TARGET : SIZE_MAX;
}

/* The fast path of save() for the items of a list or dict: writes v when
 * it needs no frame, no hook and no new memo entry (an immediate, a
 * shared object already memoized, an unshared float or short str), with
 * the bytes and statistics save() would give. Returns false, writing
 * nothing, for anything else or when the buffer lacks room: save() then
 * does the work. */
static inline bool save_scalar(ost_writer *w, ost_value v) {
    if (OST_UNLIKELY(w->cap - w->len < 32)) return false;
    if (ost__is_small(v)) {
        put_int64(w, ost__small_val(v));
        return true;
    }
    if (!ost__is_heap(v)) {
        if (v == OST_NONE) put1(w, OP_NONE);
        else if (v == OST_TRUE) put1(w, OP_NEWTRUE);
        else if (v == OST_FALSE) put1(w, OP_NEWFALSE);
        else if (ost__is_ifloat(v)) put_float(w, v), w->stats.objects++;
        else return false;
        return true;
    }
    if (w->pid_fn && w->pid_scope == OST_PID_ALL) return false; /* instances never come here */
    ost_obj *o = OST__O(v);
    if (o->refcnt > 1) {
        ost__ptr_slot *s = ost__ptrtab_find(&w->memo, v);
        if (!s->key) return false;
        put_get(w, s->val);
        w->stats.memo_hits++;
        return true;
    }
    if (o->type == OST_T_FLOAT) {
        put_float(w, v);
        w->stats.objects++;
        return true;
    }
    if (o->type == OST_T_STR && w->proto >= 4) {
        ost_str_obj *s = (ost_str_obj *)o;
        if (s->len >= 256 || w->cap - w->len < s->len + 8) return false;
        put_short_str(w, s->data, s->len);
        w->stats.objects++;
        return true;
    }
    return false;
}

/* bytes below protocol 3 and bytearray below 5, spelt as calls as Python
 * does: _codecs.encode(latin-1 text, 'latin1') (or bytes() when empty),
 * bytearray(bytes). Pushes the frame that writes the call. */
static int save_bytes_as_call(ost_writer *w, ost_value v, const ost_str_obj *s, bool ba) {
    ost_value args;
    ost_value g;
    if (!ba && w->proto < 3) {
        if (s->len == 0) {
            g = cached_global(w, &w->g_bytes, "builtins", "bytes");
            args = ost_tuple_new(0);
        } else {
            g = cached_global(w, &w->g_encode, "_codecs", "encode");
            /* latin-1 bytes as a str, and the codec name */
            const uint8_t *b = (const uint8_t *)ost__sdata(s);
            ost_value txt = ost__str_new_uninit(OST_T_STR, ost__latin1_utf8_len(b, s->len));
            args = ost_tuple_new(2);
            if (!w->s_latin1 && (w->s_latin1 = ost_str_c("latin1")))
                ost_incref(w->s_latin1);
            if (!txt || !args || !w->s_latin1) {
                ost_decref(txt);
                ost_decref(args);
                return fail(w, OST_ENOMEM, "out of memory");
            }
            ost__latin1_to_utf8(((ost_str_obj *)txt)->data, b, s->len);
            ost_tuple_set(args, 0, txt);
            ost_tuple_set(args, 1, ost_incref(w->s_latin1));
        }
    } else {
        g = cached_global(w, &w->g_bytearray, "builtins", "bytearray");
        if (s->len == 0) args = ost_tuple_new(0);
        else {
            args = ost_tuple_new(1);
            /* a failed copy must not leave bytearray(None) */
            if (args && ost_tuple_set(args, 0, ost_bytes(ost__sdata(s), s->len))) {
                ost_decref(args);
                args = 0;
            }
        }
    }
    if (!g || !args) {
        ost_decref(args);
        return fail(w, OST_ENOMEM, "out of memory");
    }
    wframe *f = push_build(w, v, OP_REDUCE, g, args, 0);
    if (!f) {
        ost_decref(args);
        return w->err;
    }
    f->aux = args;
    return 0;
}

/* A dotted global name (Outer.Inner) below protocol 4, where Python
 * finds no dotted name in a GLOBAL: builtins.getattr(Outer, 'Inner'), as
 * Python's own pickler spells it. Pushes the frame that writes the call. */
static int save_dotted_global(ost_writer *w, ost_value v, const char *m, const char *n,
                              const char *dot) {
    ost_value ga = cached_global(w, &w->g_getattr, "builtins", "getattr");
    char *pn = malloc((size_t)(dot - n) + 1);
    ost_value args = ga && pn ? ost_tuple_new(2) : 0;
    if (args) {
        memcpy(pn, n, (size_t)(dot - n));
        pn[dot - n] = 0;
        ost_value parent = ost_global(m, pn), last = ost_str_c(dot + 1);
        ost_tuple_set(args, 0, parent ? parent : OST_NONE); /* steals */
        ost_tuple_set(args, 1, last ? last : OST_NONE);
        if (!parent || !last) {
            ost_decref(args);
            args = 0;
        }
    }
    free(pn);
    wframe *f = args ? push_build(w, v, OP_REDUCE, ga, args, 0) : NULL;
    if (!f) {
        ost_decref(args);
        return w->err ? w->err : fail(w, OST_ENOMEM, "out of memory");
    }
    f->aux = args;
    return 0;
}

/* How a global is spelt below protocol 3: Python's fix_imports names
 * (*m, *n become them). Fails for a name that reads back as a builtin the
 * reader builds a value of its own from. */
static int py2_global_name(ost_writer *w, const char **m, const char **n) {
    const char *m3 = *m, *n3 = *n;
    py2_spelling(m, n);
    /* a few spellings read back as another name of the same object in
     * Python (_functools.reduce -> functools.reduce) */
    if (ost__py2_reads_as(*m, *n, m3, n3)) return 0;
    /* but one that reads back as a builtin the reader builds a value of
     * its own from (__builtin__.set -> a set) would come back as another
     * kind of object */
    if (ost__py2_reads_as_builtin(*m, *n))
        return fail(w, OST_EUNSUPPORTED,
                    "global %s.%s reads back as a builtin at protocol %d: "
                    "use protocol 3 or higher",
                    m3, n3, w->proto);
    w->stats.renamed++;
    return 0;
}

/* A global with no dot in its name below protocol 4: GLOBAL with the
 * module and name as lines (save memoizes it when shared). */
static int save_global_text(ost_writer *w, const ost_global_obj *g) {
    const char *m = ((ost_str_obj *)g->module)->data;
    const char *n = ((ost_str_obj *)g->name)->data;
    if (w->proto < 3 && py2_global_name(w, &m, &n)) return w->err;
    size_t ml = strlen(m), nl = strlen(n);
    if (memchr(m, '\n', ml) || memchr(n, '\n', nl))
        return fail(w, OST_EINVAL, "global name with a newline needs protocol 4");
    if (reserve(w, ml + nl + 16)) return w->err;
    put1(w, OP_GLOBAL);
    put_bytes(w, m, ml);
    put1(w, '\n');
    put_bytes(w, n, nl);
    put1(w, '\n');
    return 0;
}

/* The bytes save_scalar writes for v, or 0 when it would not write it. */
static inline size_t scalar_size(ost_writer *w, ost_value v) {
    if (ost__is_small(v)) return 10;
    if (ost__is_ifloat(v)) return 9;
    if (!ost__is_heap(v)) return v == OST_NONE || v == OST_TRUE || v == OST_FALSE;
    ost_obj *o = OST__O(v);
    if (o->refcnt > 1) return ost__ptrtab_find(&w->memo, v)->key ? 5 : 0;
    if (o->type == OST_T_FLOAT) return 9;
    if (o->type == OST_T_STR && w->proto >= 4 && ((ost_str_obj *)o)->len < 256)
        return ((ost_str_obj *)o)->len + 2;
    return 0;
}

/* The fast path of save() for the commonest instance: a plain class (no
 * hooks, no slots) already in the memo, whose state is an unshared dict of
 * up to OST_BATCH attributes named by unshared short str, each value one
 * save_scalar writes, and room in the frame for all of it. Writes what
 * the frames would (the same bytes and statistics) and returns true, or
 * writes nothing and returns false. */
static bool save_plain_instance(ost_writer *w, ost_value v, bool sh) {
    ost_inst_obj *in = (ost_inst_obj *)v;
    ost__klass *k = ost__klass_of(in->cls);
    if ((k && (k->def.getnewargs || k->def.getstate)) || ost__slotted(v) || in->items || w->window ||
        pid_all(w) || ost__type(in->state) != OST_T_DICT || shared(in->state) || w->slow)
        return false;
    ost_dict_obj *d = (ost_dict_obj *)in->state;
    if (d->len == 0 || d->len > OST_BATCH || !ost__is_heap(in->cls) || !shared(in->cls))
        return false;
    ost__ptr_slot *cs = ost__ptrtab_find(&w->memo, in->cls);
    if (!cs->key) return false;
    uint64_t cls_idx = cs->val;
    size_t need = 32;
    for (size_t i = 0; i < d->used; i++) {
        ost_value key = d->entries[i].key;
        if (!key) continue;
        if (ost__type(key) != OST_T_STR || shared(key) || ((ost_str_obj *)key)->len >= 256)
            return false;
        size_t vs = scalar_size(w, d->entries[i].val);
        if (!vs) return false;
        need += ((ost_str_obj *)key)->len + 16 + vs + 32;
    }
    size_t lim = boundary_at(w);
    if (w->len >= lim || lim - w->len <= need) return false;
    if (reserve(w, need)) return false; /* save() fails the same way */
    put_get(w, cls_idx);
    w->stats.memo_hits++;
    put1(w, OP_EMPTY_TUPLE);
    put1(w, OP_NEWOBJ);
    if (sh && memoize(w, v)) return true; /* w->err is set */
    put1(w, OP_EMPTY_DICT);
    w->stats.objects++;
    if (d->len > 1) put1(w, OP_MARK);
    for (size_t i = 0; i < d->used; i++) {
        if (!d->entries[i].key) continue;
        if (save_name(w, d->entries[i].key, true, d->entries[i].hash)) return true;
        if (reserve(w, 32)) return true;
        save_scalar(w, d->entries[i].val);
    }
    if (reserve(w, 2)) return true;
    put1(w, d->len > 1 ? OP_SETITEMS : OP_SETITEM);
    put1(w, OP_BUILD);
    return true;
}

/* ---- small containers in one pass ------------------------------------------
 *
 * Most lists and dicts in a graph are small and hold scalars: a record's
 * fields, a short list of tags. Going through the frames costs a step()
 * per item and per batch opcode; save_small() writes such a container in
 * one pass instead, with the bytes and statistics the frames give: it
 * writes optimistically and, when it meets an item it cannot write here
 * (one that needs a frame, a hook or a new memo entry), or the buffer
 * lacks room, or the container crosses the point where a frame ends or
 * the sink is fed, it takes back what it wrote (the length and the
 * statistics; it changes nothing else) and save() uses the frames. */

/* Writes list or dict v (at most OST_BATCH items, so one batch) and its
 * items, each written by save_scalar() or, at depth 0, an unshared small
 * list or dict written the same way. memo: write the memo opcode of a new
 * entry after the opening opcode (the caller adds the entry). False when
 * it stopped: the caller takes back the output. */
static bool write_small(ost_writer *w, ost_value v, bool memo, int depth) {
    if (w->cap - w->len < 16) return false;
    int t = OST__O(v)->type;
    size_t n = t == OST_T_LIST ? ((ost_list_obj *)v)->len : ((ost_dict_obj *)v)->len;
    if (n > OST_BATCH) return false;
    put1(w, t == OST_T_LIST ? OP_EMPTY_LIST : OP_EMPTY_DICT);
    if (depth) w->stats.objects++; /* save() counted the outer one */
    if (memo) {
        uint32_t idx = w->memo_next;
        if (w->proto >= 4) put1(w, OP_MEMOIZE);
        else if (idx < 256) put_op_le(w, OP_BINPUT, idx, 1);
        else put_op_le(w, OP_LONG_BINPUT, idx, 4);
    }
    if (n == 0) return true;
    if (n > 1) put1(w, OP_MARK);
    if (t == OST_T_LIST) {
        ost_value *items = ((ost_list_obj *)v)->items;
        for (size_t i = 0; i < n; i++) {
            ost_value x = items[i];
            if (save_scalar(w, x)) continue;
            if (depth || !ost__is_heap(x) || shared(x) ||
                (OST__O(x)->type != OST_T_LIST && OST__O(x)->type != OST_T_DICT) ||
                !write_small(w, x, false, 1))
                return false;
        }
    } else {
        ost_entry *e = ((ost_dict_obj *)v)->entries;
        size_t used = ((ost_dict_obj *)v)->used;
        for (size_t i = 0; i < used; i++) {
            if (!e[i].key) continue;
            if (!save_scalar(w, e[i].key)) return false;
            ost_value x = e[i].val;
            if (save_scalar(w, x)) continue;
            if (depth || !ost__is_heap(x) || shared(x) ||
                (OST__O(x)->type != OST_T_LIST && OST__O(x)->type != OST_T_DICT) ||
                !write_small(w, x, false, 1))
                return false;
        }
    }
    if (w->cap - w->len < 1) return false;
    if (n > 1) put1(w, t == OST_T_LIST ? OP_APPENDS : OP_SETITEMS);
    else put1(w, t == OST_T_LIST ? OP_APPEND : OP_SETITEM);
    return true;
}

/* save() of list or dict v, not in the memo, in one pass (see above).
 * sh: v goes into the memo. True when written (w->err set if the memo
 * could not grow), false when nothing was written. */
static bool save_small(ost_writer *w, ost_value v, bool sh) {
    /* an open window memoizes everything; the hook may see every object;
     * an instance's state has its keys memoized by content (save_name) */
    if (w->window || pid_all(w) || w->state_next || w->slow) return false;
    size_t len0 = w->len, lim = boundary_at(w);
    ost_dump_stats st0 = w->stats;
    if (!write_small(w, v, sh, 0) || w->len >= lim) {
        w->len = len0;
        w->stats = st0;
        return false;
    }
    if (sh) {
        uint32_t idx = w->memo_next++;
        if (ost__ptrtab_put(&w->memo, v, idx)) {
            fail(w, OST_ENOMEM, "out of memory growing the memo");
            return true;
        }
        if (idx < OST__MEMO_RECENT) w->recent[idx] = v;
    }
    return true;
}

/* save() of int object o (a big int, past the small-int range): LONG1 or
 * LONG4 and its bytes. Borrows o. Returns 0, or w->err when the buffer
 * could not grow. */
static int save_big_int(ost_writer *w, const ost_int_obj *io) {
    if (reserve(w, io->n + 16)) return w->err;
    if (io->n < 256) {
        put1(w, OP_LONG1);
        put1(w, io->n);
    } else {
        put1(w, OP_LONG4);
        put_le(w, io->n, 4);
    }
    put_bytes(w, io->b, io->n);
    return 0;
}

/* save() of tuple v, not in the memo: EMPTY_TUPLE for (), else a K_TUPLE
 * frame that writes the items (after a MARK past three of them); sh: v
 * opens a memo window. The frame borrows v. Returns 0, or w->err when the
 * frame could not be pushed. */
static int save_tuple(ost_writer *w, ost_value v, bool sh) {
    ost_tuple_obj *t = (ost_tuple_obj *)OST__O(v);
    if (t->len == 0) {
        put1(w, OP_EMPTY_TUPLE);
        return 0; /* never memoized, as in Python */
    }
    wframe *f = push(w, K_TUPLE, v);
    if (!f) return w->err;
    f->left = t->len;
    if (sh) open_window(w, f);
    if (t->len > 3) put1(w, OP_MARK);
    return 0;
}

/* save() of list or dict v (type t), not in the memo: in one pass when
 * save_small can, else EMPTY_LIST or EMPTY_DICT, its memo entry when sh,
 * and a frame (K_ITEMS with APPENDS, K_DICT with SETITEMS) that writes
 * the items; the frame borrows v. Returns 0, or w->err. */
static int save_list_or_dict(ost_writer *w, ost_value v, int t, bool sh) {
    if (save_small(w, v, sh)) return w->err;
    bool list = t == OST_T_LIST;
    put1(w, list ? OP_EMPTY_LIST : OP_EMPTY_DICT);
    if (sh && memoize(w, v)) return w->err;
    size_t n = list ? ((ost_list_obj *)OST__O(v))->len : ((ost_dict_obj *)OST__O(v))->len;
    if (n == 0) return 0;
    wframe *f = push(w, list ? K_ITEMS : K_DICT, v);
    if (!f) return w->err;
    f->op = list ? OP_APPENDS : OP_SETITEMS;
    f->left = n;
    return 0;
}

/* save() of set or frozenset v, not in the memo. Protocol 4 and later: a
 * frozenset is a K_FROZEN frame after a MARK (a memo window when sh), a set
 * EMPTY_SET, its memo entry when sh, and a K_ITEMS frame with ADDITEMS;
 * the frames borrow v. Earlier protocols call set() or frozenset() on a
 * list (save_set_by_call). Returns 0, or w->err. */
static int save_set(ost_writer *w, ost_value v, bool sh) {
    ost_obj *o = OST__O(v);
    bool fz = o->type == OST_T_FROZENSET;
    size_t n = ((ost_dict_obj *)o)->len;
    if (w->proto < 4) return save_set_by_call(w, v, fz, sh);
    if (fz) {
        wframe *f = push(w, K_FROZEN, v);
        if (!f) return w->err;
        f->left = n;
        if (sh) open_window(w, f);
        put1(w, OP_MARK);
        return 0;
    }
    put1(w, OP_EMPTY_SET);
    if (sh && memoize(w, v)) return w->err;
    if (!n) return 0;
    wframe *f = push(w, K_ITEMS, v);
    if (!f) return w->err;
    f->op = OP_ADDITEMS;
    f->left = n;
    return 0;
}

/* The new references *args and *state of instance v of class k from the
 * class's getnewargs and getstate callbacks, each 0 when the class has no
 * such callback. Returns 0, or w->err (with both released and zeroed)
 * when a callback fails or returns what it must not. */
static int instance_parts(ost_writer *w, ost_value v, const ost__klass *k, ost_value *args,
                          ost_value *state) {
    *args = *state = 0;
    if (k && k->def.getnewargs) {
        int rc = k->def.getnewargs(k->def.ud, v, args);
        if (rc || ost__type(*args) != OST_T_TUPLE) {
            ost_decref(*args);
            *args = 0;
            return fail(w, rc ? rc : OST_EINVAL, "getnewargs of %s.%s: %s", k->def.module,
                        k->def.name, rc ? ost_strerror(rc) : "did not return a tuple");
        }
    }
    if (k && k->def.getstate) {
        int rc = k->def.getstate(k->def.ud, v, state);
        if (rc || !*state) {
            ost_decref(*args);
            ost_decref(*state);
            *args = *state = 0;
            return fail(w, rc ? rc : OST_EINVAL, "getstate of %s.%s: %s", k->def.module,
                        k->def.name, rc ? ost_strerror(rc) : "returned no value");
        }
    }
    return 0;
}

/* What K_BUILD frame f writes after NEWOBJ for instance v: its state
 * (given by getstate, else its slots when it has any, else its dict unless
 * None) and its list or dict subclass's items. The frame borrows them. */
static void instance_post(wframe *f, ost_value v, ost_value state) {
    ost_inst_obj *in = (ost_inst_obj *)OST__O(v);
    if (state) {
        if (state != OST_NONE) f->post_state = state;
    } else if (ost__slotted(v)) {
        ost_slots_obj *so = (ost_slots_obj *)in;
        ost_value extra = ost__extra(v);
        if (extra && ost_len(extra)) {
            f->slots = true;
            f->post_state = v;
        }
        for (size_t i = 0, n = ost__nslots(so); i < n && !f->slots; i++)
            if (so->slots[i]) { /* an instance with no attributes has no state */
                f->slots = true;
                f->post_state = v;
                break;
            }
    } else if (in->state != OST_NONE)
        f->post_state = in->state;
    if (!ost__slotted(v) && in->items) { /* a list or dict subclass's */
        if (ost__type(in->items) == OST_T_LIST) f->post_list = in->items;
        else f->post_dict = in->items;
    }
}

/* save() of instance v, not in the memo: in one pass when
 * save_plain_instance can, else a K_BUILD frame that writes the class, the
 * getnewargs tuple, NEWOBJ and then the state and items (instance_post).
 * The frame owns the args and state the callbacks returned (aux, aux2) and
 * borrows the rest; sh with args opens a memo window. Returns 0, or
 * w->err. */
static int save_instance(ost_writer *w, ost_value v, bool sh) {
    if (save_plain_instance(w, v, sh)) return w->err;
    ost_inst_obj *in = (ost_inst_obj *)OST__O(v);
    ost_value args, state;
    if (instance_parts(w, v, ost__klass_of(in->cls), &args, &state)) return w->err;
    wframe *f = push(w, K_BUILD, v);
    if (!f) {
        ost_decref(args);
        ost_decref(state);
        return w->err;
    }
    f->op = OP_NEWOBJ;
    f->parts[0] = in->cls;
    f->parts[1] = args; /* 0: the empty tuple, written inline */
    f->nparts = 2;
    f->aux = args;
    f->aux2 = state;
    if (sh && args) open_window(w, f);
    instance_post(f, v, state);
    return 0;
}

/* save() of global v, not in the memo: STACK_GLOBAL after its module and
 * name (a K_BUILD frame, borrowing them) from protocol 4, else a dotted
 * name through getattr (save_dotted_global) or GLOBAL's text, memoized
 * when sh. Returns 0, or w->err. */
static int save_global(ost_writer *w, ost_value v, bool sh) {
    ost_global_obj *g = (ost_global_obj *)OST__O(v);
    if (w->proto >= 4) {
        if (!push_build(w, v, OP_STACK_GLOBAL, g->module, g->name, 0)) return w->err;
        return 0;
    }
    const char *dot = strrchr(((ost_str_obj *)g->name)->data, '.');
    if (dot)
        return save_dotted_global(w, v, ((ost_str_obj *)g->module)->data,
                                  ((ost_str_obj *)g->name)->data, dot);
    if (save_global_text(w, g)) return w->err;
    if (sh && memoize(w, v)) return w->err;
    return 0;
}

/* save() of reduce value v, not in the memo: a K_BUILD frame that writes
 * the callable and arguments, then REDUCE, NEWOBJ or NEWOBJ_EX (before
 * protocol 4 a call of copyreg.__newobj_ex__), then the list items, dict
 * items and state; the frame borrows them, and owns the arguments tuple
 * push_newobj_ex_call makes. sh opens a memo window. Returns 0, or
 * w->err. */
static int save_reduce(ost_writer *w, ost_value v, bool sh) {
    ost_reduce_obj *r = (ost_reduce_obj *)OST__O(v);
    wframe *f;
    if (r->kind != OST_REDUCE_CALL && ost__type(r->args) != OST_T_TUPLE)
        return fail(w, OST_EINVAL, "NEWOBJ arguments must be a tuple");
    if (r->kind == OST_REDUCE_CALL)
        f = push_build(w, v, OP_REDUCE, r->callable, r->args, 0);
    else if (r->kind == OST_REDUCE_NEWOBJ)
        f = push_build(w, v, OP_NEWOBJ, r->callable, r->args, 0);
    else if (w->proto >= 4)
        f = push_build(w, v, OP_NEWOBJ_EX, r->callable, r->args,
                       r->kwargs ? r->kwargs : OST_NONE);
    else if (!(f = push_newobj_ex_call(w, v, r)))
        return w->err ? w->err : fail(w, OST_ENOMEM, "out of memory");
    if (!f) return w->err;
    if (sh) open_window(w, f);
    f->post_list = r->listitems;
    f->post_dict = r->dictitems;
    f->post_state = r->state;
    return 0;
}

/* save() of persistent reference v, not in the memo: a K_BUILD frame,
 * borrowing its pid, that writes the pid (not offered to the hook) and
 * BINPERSID. Returns 0, or w->err. */
static int save_persref(ost_writer *w, ost_value v, bool sh) {
    /* its opcode follows its pid, as a tuple's its items: a shared one
     * opens a window, or a cycle back to it through its pid would write
     * it inside itself without end */
    wframe *f = push_build(w, v, OP_BINPERSID, ((ost_persref_obj *)OST__O(v))->pid, 0, 0);
    if (!f) return w->err;
    f->nohook = 1;
    if (sh) open_window(w, f);
    return 0;
}

/* Writes v, or pushes a frame that will: scalars and memo hits here, the
 * persistent_id hook's pids through call_hook, each other type through its
 * save_ function above. Borrows v (a frame pushed borrows it until it is
 * popped). nohook: v is not offered to the hook. Returns 0, or w->err. */
static int save(ost_writer *w, ost_value v, bool nohook) {
    if (OST_UNLIKELY(reserve(w, 32))) return w->err;
    if (ost__is_small(v)) {
        put_int64(w, ost__small_val(v));
        return 0;
    }
    if (!ost__is_heap(v)) {
        if (v == OST_NONE) put1(w, OP_NONE);
        else if (v == OST_TRUE) put1(w, OP_NEWTRUE);
        else if (v == OST_FALSE) put1(w, OP_NEWFALSE);
        else if (ost__is_ifloat(v)) put_float(w, v), w->stats.objects++;
        else return fail(w, OST_EINVAL, "no value (OST_NOVALUE) in the graph");
        return 0;
    }
    ost_obj *o = OST__O(v);
    if (OST_UNLIKELY(w->pid_fn != NULL) && !nohook &&
        (w->pid_scope == OST_PID_ALL ||
         (o->type == OST_T_INSTANCE &&
          (w->pid_nomemo || !(tracked(w, v) && ost__ptrtab_find(&w->memo, v)->key))))) {
        bool done;
        if (call_hook(w, v, &done)) return w->err;
        if (done) return 0;
    }
    bool sh = tracked(w, v);
    if (sh) {
        ost__ptr_slot *s = ost__ptrtab_find(&w->memo, v);
        if (s->key) {
            put_get(w, s->val);
            w->stats.memo_hits++;
            return 0;
        }
    }
    w->stats.objects++;
    switch (o->type) {
    case OST_T_FLOAT:
        put_float(w, v);
        break;
    case OST_T_INT:
        if (save_big_int(w, (ost_int_obj *)o)) return w->err;
        break;
    case OST_T_STR: {
        ost_str_obj *s = (ost_str_obj *)o;
        if (OST_LIKELY(s->len < 256 && w->proto >= 4)) { /* the common case */
            if (reserve(w, s->len + 8)) return w->err;
            put_short_str(w, s->data, s->len);
        } else if (put_text(w, OST_T_STR, s->data, s->len))
            return w->err;
        break;
    }
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: {
        ost_str_obj *s = (ost_str_obj *)o;
        bool ba = o->type == OST_T_BYTEARRAY;
        if ((!ba && w->proto >= 3) || (ba && w->proto >= 5)) {
            if (put_text(w, o->type, ost__sdata(s), s->len)) return w->err;
            break;
        }
        return save_bytes_as_call(w, v, s, ba);
    }
    case OST_T_TUPLE: return save_tuple(w, v, sh);
    case OST_T_LIST:
    case OST_T_DICT: return save_list_or_dict(w, v, o->type, sh);
    case OST_T_SET:
    case OST_T_FROZENSET: return save_set(w, v, sh);
    case OST_T_INSTANCE: return save_instance(w, v, sh);
    case OST_T_GLOBAL: return save_global(w, v, sh);
    case OST_T_REDUCE: return save_reduce(w, v, sh);
    case OST_T_PERSREF: return save_persref(w, v, sh);
    default: return fail(w, OST_EINVAL, "bad value in the graph (type %d)", o->type);
    }
    /* the scalars: floats, ints, str and bytes */
    if (sh && memoize(w, v)) return w->err;
    return 0;
}

static int call_hook(ost_writer *w, ost_value v, bool *done) {
    ost_value pid = 0;
    *done = false;
    w->stats.hook_calls++;
    int rc = w->pid_fn(w->pid_ud, v, &pid);
    if (rc) {
        ost_decref(pid);
        return fail(w, rc, "persistent_id hook failed: %s", ost_strerror(rc));
    }
    if (!pid) return 0;
    /* pid then BINPERSID, and a memo entry so a second reference is a GET
     * (unless pid_nomemo: the pid again, as CPython's Pickler writes it) */
    wframe *f = push_build(w, !w->pid_nomemo && tracked(w, v) ? v : 0, OP_BINPERSID, pid, 0, 0);
    if (!f) {
        ost_decref(pid);
        return w->err;
    }
    f->aux = pid;
    f->nohook = 1;
    *done = true;
    return 0;
}

/* Memo check after the parts of a tuple/frozenset/reduce were written: if
 * they reached the object itself, the copy built now is dropped and the
 * memo's fetched, as CPython does. Tuples check before their opcode
 * (op_first false), reduce-shaped objects after it. */
static int finish(ost_writer *w, ost_value v, int op, bool op_first,
                  unsigned npop, bool popmark) {
    if (reserve(w, 16)) return w->err;
    if (op_first) put1(w, (unsigned)op);
    if (v && tracked(w, v)) {
        ost__ptr_slot *s = ost__ptrtab_find(&w->memo, v);
        if (s->key) {
            if (popmark) put1(w, OP_POP_MARK);
            else
                for (unsigned k = 0; k < npop; k++) put1(w, OP_POP);
            put_get(w, s->val);
            return 0;
        }
        if (!op_first) put1(w, (unsigned)op);
        return memoize(w, v);
    }
    if (!op_first) put1(w, (unsigned)op);
    return 0;
}

/* Pops the top frame f, which is done. Releases the temporaries it owns
 * (aux, aux2), or keeps them in w->dead until the dump ends when the memo
 * grew while the frame was open: the memo is keyed by address, so a
 * temporary (an args tuple made here) that went into the memo must outlive
 * the dump, or a later temporary at its address would be written as a GET
 * of it. Returns 0, or w->err (OST_ENOMEM) when w->dead could not grow;
 * the temporaries are released then. */
static inline int pop_frame(ost_writer *w, wframe *f) {
    ost_value aux = f->aux, aux2 = f->aux2;
    bool keep = (aux || aux2) && w->memo_next != f->memo_at;
    w->nst--;
    if (keep) {
        if (!w->dead && !(w->dead = ost_list_new(4))) {
            ost_decref(aux);
            ost_decref(aux2);
            return fail(w, OST_ENOMEM, "out of memory");
        }
        int rc = aux ? ost_list_append(w->dead, aux) : 0;
        int rc2 = aux2 ? ost_list_append(w->dead, aux2) : 0;
        if (rc || rc2) return fail(w, OST_ENOMEM, "out of memory");
        return 0;
    }
    ost_decref(aux);
    ost_decref(aux2);
    return 0;
}

/* The next step of K_DICT or K_PAIRS frame f over a dict (or K_ITEMS over
 * a set), after the batch counters counted the entry at or after f->i:
 * writes its key (an instance state's str key by content, save_name) and,
 * in a fast path for a plain dict, the run of keys and values after it
 * that are scalars, else saves the first that is not. Borrows the
 * entries. Returns 0, or w->err. */
static int step_dict(ost_writer *w, wframe *f) {
    bool pairs = f->kind != K_ITEMS;
    ost_dict_obj *d = (ost_dict_obj *)f->obj;
    while (!d->entries[f->i].key) f->i++;
    f->cur = f->i;
    ost_value item = d->entries[f->i++].key;
    if (pairs) f->half = true;
    /* an unshared name: by content (a shared one: by identity) */
    if (f->names && ost__type(item) == OST_T_STR && !shared(item) && !pid_all(w) &&
        ((ost_str_obj *)item)->len < 256)
        return save_name(w, item, true, d->entries[f->cur].hash);
    /* Fast path for dicts: keys and values, as step_items does for lists. */
    while (f->kind == K_DICT && !f->names && save_scalar(w, item)) {
        if (boundary_due(w)) return 0;
        if (f->half) {
            f->half = false;
            item = d->entries[f->cur].val;
            continue;
        }
        if (!f->chunk) return 0;
        f->left--;
        f->chunk--;
        while (!d->entries[f->i].key) f->i++;
        f->cur = f->i;
        item = d->entries[f->i++].key;
        f->half = true;
    }
    return save(w, item, false);
}

/* A step of K_ITEMS, K_DICT or K_PAIRS frame f: closes a full batch
 * (APPENDS, SETITEMS or ADDITEMS, or APPEND or SETITEM for one item),
 * pops the frame when every item is written, opens a batch (MARK), or
 * writes the next item, value or pair. A list's next item comes with the
 * run of items after it that need no frame (small ints, immediate floats
 * and other scalars), written in a fast path that stops where a step
 * would close the batch or the frame; a dict's or a set's through
 * step_dict. An item that needs a frame goes through save(), which may
 * push one and move the stack. Borrows what f holds. Returns 0, or
 * w->err. The list's fast path stays in this function: moved to a helper
 * of its own, GCC laid out dump()'s loop differently and list(range(10**6))
 * pickled about 7% slower. */
static int step_items(ost_writer *w, wframe *f) {
    if (f->open && f->chunk == 0 && !f->half) { /* close the batch */
        if (reserve(w, 1)) return w->err;
        if (f->op == OP_ADDITEMS || f->batch > 1) put1(w, f->op);
        else put1(w, f->op == OP_APPENDS ? OP_APPEND : OP_SETITEM);
        f->open = false;
        return 0;
    }
    if (f->left == 0 && !f->half) return pop_frame(w, f); /* done */
    if (!f->open) {
        f->chunk = f->batch = f->left < OST_BATCH ? f->left : OST_BATCH;
        f->open = true;
        if (f->batch > 1 || f->op == OP_ADDITEMS) {
            if (reserve(w, 1)) return w->err;
            put1(w, OP_MARK);
        }
    }
    if (f->half) { /* the value of the current pair */
        ost_value item;
        f->half = false;
        if (f->kind == K_DICT) item = ((ost_dict_obj *)f->obj)->entries[f->cur].val;
        else item = ((ost_tuple_obj *)((ost_list_obj *)f->obj)->items[f->cur])->items[1];
        return save(w, item, false);
    }
    f->left--;
    f->chunk--;
    if (f->kind == K_PAIRS) {
        ost_value t = ((ost_list_obj *)f->obj)->items[f->i];
        if (ost__type(t) != OST_T_TUPLE || ost_len(t) != 2)
            return fail(w, OST_EINVAL, "dict items of a reduce value must be 2-tuples");
        f->cur = f->i++;
        f->half = true;
        return save(w, ((ost_tuple_obj *)t)->items[0], false);
    }
    if (ost__type(f->obj) == OST_T_LIST) {
        ost_value *items = ((ost_list_obj *)f->obj)->items;
        /* Fast path: a run of items that need no frame is written here,
         * stopping where a step would close the batch or the frame.
         * The counters live in locals: the frame may alias the output. */
        size_t i = f->i, chunk = f->chunk, due = boundary_at(w);
        bool stop = false;
        ost_value item = items[i++];
        for (;;) {
            if ((ost__is_small(item) || ost__is_ifloat(item)) && w->cap - w->len >= 32) {
                /* Runs of small ints and immediate floats, the
                 * commonest lists, go through a local pointer, with
                 * the room save_scalar wants. */
                unsigned char *b = w->buf, *o = b + w->len, *lim = b + w->cap - 32;
                uint64_t nf = 0;
                bool run = true;
                for (;;) {
                    /* A burst of k items needs no checks: each takes at
                     * most 10 bytes, so k of them end before the frame
                     * end (due) and within the room, and are followed by
                     * another item of the batch. */
                    size_t off = (size_t)(o - b), k = (size_t)(lim - o) / 10;
                    size_t r1 = due > off ? (due - off - 1) / 10 : 0;
                    if (r1 < k) k = r1;
                    if (chunk < k) k = chunk;
                    if (OST_UNLIKELY(w->slow)) k = 0;
                    /* one loop per kind, so a run of ints tests no
                     * float tag and a run of floats no int tag */
                    while (k) {
                        if (ost__is_small(item)) {
                            do {
                                o = enc_int64(o, ost__small_val(item));
                                chunk--;
                                k--;
                                item = items[i++];
                            } while (k && ost__is_small(item));
                        } else if (ost__is_ifloat(item)) {
                            do {
                                o = enc_float(o, ost__ifloat_val(item));
                                nf++;
                                chunk--;
                                k--;
                                item = items[i++];
                            } while (k && ost__is_ifloat(item));
                        } else {
                            run = false;
                            break;
                        }
                    }
                    if (!run || !(ost__is_small(item) || ost__is_ifloat(item)))
                        break; /* item is not written yet */
                    /* then one item with the checks */
                    if (ost__is_small(item)) o = enc_int64(o, ost__small_val(item));
                    else {
                        o = enc_float(o, ost__ifloat_val(item));
                        nf++;
                    }
                    if (!chunk || (size_t)(o - b) >= due) {
                        stop = true;
                        break;
                    }
                    chunk--;
                    item = items[i++];
                    if (!(ost__is_small(item) || ost__is_ifloat(item)) || o > lim) break;
                }
                w->len = (size_t)(o - b);
                w->stats.objects += nf;
                if (stop) break;
                continue; /* item is not written yet */
            }
            if (!save_scalar(w, item)) break;
            if (!chunk || w->len >= due) {
                stop = true;
                break;
            }
            chunk--;
            item = items[i++];
        }
        f->left -= f->chunk - chunk;
        f->chunk = chunk;
        f->i = i;
        if (stop) return 0;
        /* item goes through save(), which may take long (an instance,
         * a container): fetch the memo slot the next item will look up
         * meanwhile, since a big memo table misses the cache on nearly
         * every lookup */
        if (chunk && ost__is_heap(items[i]) && OST__O(items[i])->refcnt > 1)
            __builtin_prefetch(&w->memo.slots[ost__ptr_hash(items[i]) & w->memo.mask]);
        return save(w, item, false);
    }
    return step_dict(w, f);
}

/* A step of K_SLOTS frame f, which writes a slotted instance's set slots
 * as the items of the dict Python would have (after EMPTY_DICT and MARK):
 * the next declared field's name (save_name when it can) or value, then
 * each entry of the fields the class does not declare, then SETITEMS and
 * the pop. Borrows the instance. Returns 0, or w->err. */
static int step_slots(ost_writer *w, wframe *f) {
    ost_slots_obj *so = (ost_slots_obj *)f->obj;
    size_t n = ost__nslots(so);
    if (f->half && f->i < n) {
        f->half = false;
        return save(w, so->slots[f->i++], false);
    }
    while (f->i < n && !so->slots[f->i]) f->i++;
    if (f->i < n) {
        f->half = true;
        ost_str_obj *name = (ost_str_obj *)ost__klass_of(so->cls)->fields[f->i];
        if (f->slots && name->len < 256 && w->proto >= 4) {
            if (!pid_all(w)) return save_name(w, (ost_value)name, false, name_hash((ost_value)name));
            /* the hook sees every reference, but not field names */
            if (reserve(w, name->len + 2)) return w->err;
            put_short_str(w, name->data, name->len);
            return 0;
        }
        return save(w, (ost_value)name, false);
    }
    ost_value extra = ost__extra(f->obj);
    if (extra) {
        /* then the fields the class does not declare, as they were read;
         * f->i - n counts the extra dict's entries */
        ost_dict_obj *d = (ost_dict_obj *)extra;
        size_t j = f->i - n;
        if (f->half) {
            f->half = false;
            f->i++;
            return save(w, d->entries[j].val, false);
        }
        while (j < d->used && !d->entries[j].key) j++, f->i++;
        if (j < d->used) {
            f->half = true;
            return save(w, d->entries[j].key, false);
        }
    }
    if (reserve(w, 1)) return w->err;
    put1(w, OP_SETITEMS);
    return pop_frame(w, f);
}

/* The opcodes that build a tuple of 1, 2 or 3 items off the stack. */
static const uint8_t tuple_ops[4] = {0, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};

/* A step of K_FIELDS frame f: the next slot of the slotted instance, else
 * the tuple opcode and the pop (a positional state, never memoized: no
 * object of its own). Borrows the instance. Returns 0, or w->err. */
static int step_fields(ost_writer *w, wframe *f) {
    ost_slots_obj *so = (ost_slots_obj *)f->obj;
    size_t n = ost__nslots(so);
    if (f->i < n) return save(w, so->slots[f->i++], false);
    if (reserve(w, 1)) return w->err;
    put1(w, n <= 3 ? tuple_ops[n] : OP_TUPLE);
    return pop_frame(w, f);
}

/* A step of K_TUPLE frame f: the next item, else the tuple opcode with the
 * memo check of finish() and the pop. Borrows the tuple. Returns 0, or
 * w->err. */
static int step_tuple(ost_writer *w, wframe *f) {
    ost_tuple_obj *t = (ost_tuple_obj *)f->obj;
    if (f->i < t->len) return save(w, t->items[f->i++], false);
    int op = t->len <= 3 ? tuple_ops[t->len] : OP_TUPLE;
    close_window(w, f);
    if (finish(w, f->obj, op, false, (unsigned)t->len, t->len > 3)) return w->err;
    return pop_frame(w, f);
}

/* A step of K_FROZEN frame f: the next member, else FROZENSET with the
 * memo check of finish() and the pop. Borrows the frozenset. Returns 0, or
 * w->err. */
static int step_frozen(ost_writer *w, wframe *f) {
    ost_dict_obj *d = (ost_dict_obj *)f->obj;
    if (f->left) {
        while (!d->entries[f->i].key) f->i++;
        f->left--;
        return save(w, d->entries[f->i++].key, false);
    }
    close_window(w, f);
    if (finish(w, f->obj, OP_FROZENSET, false, 0, true)) return w->err;
    return pop_frame(w, f);
}

/* The post-state phase of K_BUILD frame f: a slotted instance's slots as
 * a dict (EMPTY_DICT, MARK and a K_SLOTS frame), else its state (an
 * instance's state dict's frame writes its keys as names). Borrows them.
 * Returns 0, or w->err. */
static int build_state(ost_writer *w, wframe *f) {
    if (f->slots) { /* the slots, as the dict Python would have */
        ost_value inst = f->obj;
        if (reserve(w, 2)) return w->err;
        put1(w, OP_EMPTY_DICT);
        put1(w, OP_MARK);
        if (!push(w, K_SLOTS, inst)) return w->err;
        return 0;
    }
    if (f->post_state) {
        size_t at = w->nst;
        ost_value st = f->post_state;
        bool inst = ost__type(f->obj) == OST_T_INSTANCE;
        w->state_next = inst; /* its keys are names: the frames write them */
        int rc = save(w, st, false);
        w->state_next = false;
        if (rc) return w->err;
        /* an instance's state dict: its keys are attribute names */
        if (inst && w->nst == at + 1 && w->st[at].kind == K_DICT && w->st[at].obj == st)
            w->st[at].names = true;
    }
    return 0;
}

/* A step of K_BUILD frame f, by f->phase: the next part (an absent one is
 * the empty tuple), the opcode with the memo check of finish(), a frame
 * for the list items, one for the dict items (K_DICT, or K_PAIRS for a
 * reduce value's list of pairs), the state (build_state), then BUILD when
 * there was a state, and the pop. Borrows the parts. Returns 0, or
 * w->err. */
static int step_build(ost_writer *w, wframe *f) {
    uint32_t np = f->nparts;
    if (f->phase < np) {
        ost_value p = f->parts[f->phase++];
        if (!p) {
            if (reserve(w, 1)) return w->err;
            put1(w, OP_EMPTY_TUPLE);
            return 0;
        }
        return save(w, p, f->nohook && f->phase == 1);
    }
    if (f->phase == np) {
        f->phase++;
        close_window(w, f);
        return finish(w, f->obj, f->op, true, 1, false);
    }
    if (f->phase == np + 1) {
        f->phase++;
        ost_value l = f->post_list;
        if (l && ost_len(l)) {
            wframe *c = push(w, K_ITEMS, l);
            if (!c) return w->err;
            c->op = OP_APPENDS;
            c->left = ost_len(l);
        }
        return 0;
    }
    if (f->phase == np + 2) {
        f->phase++;
        ost_value l = f->post_dict;
        if (l && ost_len(l)) {
            /* a dict: an instance's items; a list of pairs: a reduce
             * value's */
            wframe *c = push(w, ost__type(l) == OST_T_DICT ? K_DICT : K_PAIRS, l);
            if (!c) return w->err;
            c->op = OP_SETITEMS;
            c->left = ost_len(l);
        }
        return 0;
    }
    if (f->phase == np + 3) {
        f->phase++;
        return build_state(w, f);
    }
    if (f->post_state) {
        if (reserve(w, 1)) return w->err;
        put1(w, OP_BUILD);
    }
    return pop_frame(w, f);
}

/* Advances the top frame by one step: writes one item (which may push a
 * frame for it), a closing opcode, or pops the frame, through the step_
 * function of its kind. The frame pointer is not used after save(), which
 * may move the stack. Returns 0, or w->err. */
static int step(ost_writer *w) {
    wframe *f = &w->st[w->nst - 1];
    switch (f->kind) {
    case K_ITEMS:
    case K_DICT:
    case K_PAIRS: return step_items(w, f);
    case K_SLOTS: return step_slots(w, f);
    case K_FIELDS: return step_fields(w, f);
    case K_TUPLE: return step_tuple(w, f);
    case K_FROZEN: return step_frozen(w, f);
    case K_BUILD: return step_build(w, f);
    }
    return pop_frame(w, f);
}

/* Slots of the memo table a writer keeps between dumps (16 bytes each):
 * a reused writer dumping big graphs does not grow it from 256 slots, and
 * fault its pages in, every time. */
#define MEMO_KEEP ((size_t)1 << 19)

static void reset(ost_writer *w) {
    w->len = 0;
    w->flushed = 0;
    w->in_frame = false;
    w->err = 0;
    w->msg[0] = 0;
    memset(&w->stats, 0, sizeof w->stats);
    w->window = 0;
    if (w->memo.mask + 1 > MEMO_KEEP) { /* a huge dump's table: start small again */
        ost__ptrtab_free(&w->memo);
        ost__ptrtab_init(&w->memo, 256);
    } else if (w->memo_next <= OST__MEMO_RECENT && w->memo.count == w->memo_next) {
        /* a small pickle: clear the few slots it used, not the table */
        ost__ptr_slot *used[OST__MEMO_RECENT];
        for (uint32_t i = 0; i < w->memo_next; i++)
            used[i] = ost__ptrtab_find(&w->memo, w->recent[i]);
        for (uint32_t i = 0; i < w->memo_next; i++) used[i]->key = 0;
        w->memo.count = 0;
    } else
        ost__ptrtab_clear(&w->memo);
    w->memo_next = 0;
}

bool ost__state_positional(ost_value inst) {
    if (!inst || ost__type(inst) != OST_T_INSTANCE || !ost__slotted(inst)) return false;
    ost_slots_obj *so = (ost_slots_obj *)inst;
    ost__klass *k = ost__klass_of(so->cls);
    if (!k || !k->nfields || k->def.getstate) return false;
    ost_value extra = ost__extra(inst);
    if (extra && ost_len(extra)) return false;
    for (size_t i = 0, n = ost__nslots(so); i < n; i++)
        if (!so->slots[i]) return false;
    return true;
}

/* Starts the positional state of inst (ost__state_positional holds): its
 * slots in declared order, as a tuple. */
static int save_fields(ost_writer *w, ost_value inst) {
    if (!ost__state_positional(inst))
        return fail(w, OST_EINVAL, "no positional state: the instance has an unset or "
                    "undeclared field, or its class none or a getstate callback");
    if (ost__nslots((ost_slots_obj *)inst) > 3) {
        if (reserve(w, 1)) return w->err;
        put1(w, OP_MARK);
    }
    return push(w, K_FIELDS, inst) ? 0 : w->err;
}

/* Starts the state of inst: what BUILD would receive. */
static int save_state(ost_writer *w, ost_value inst, ost_value *tmp) {
    ost_inst_obj *in = (ost_inst_obj *)inst;
    ost__klass *k = ost__klass_of(in->cls);
    if (k && k->def.getstate) {
        int rc = k->def.getstate(k->def.ud, inst, tmp);
        if (rc || !*tmp)
            return fail(w, rc ? rc : OST_EINVAL, "getstate of %s.%s: %s", k->def.module,
                        k->def.name, rc ? ost_strerror(rc) : "returned no value");
        return save(w, *tmp, false);
    }
    if (ost__slotted(inst)) {
        if (reserve(w, 2)) return w->err;
        put1(w, OP_EMPTY_DICT);
        put1(w, OP_MARK);
        wframe *f = push(w, K_SLOTS, inst);
        if (!f) return w->err;
        f->slots = true; /* names inline: see K_SLOTS */
        return 0;
    }
    if (in->items) /* ost_instance_set_items refuses persistent classes */
        return fail(w, OST_EINVAL, "an instance with items (a list or dict subclass's) "
                    "has no state-only pickle: use ost_dump");
    return save(w, in->state, false);
}

/* state_only: 0 the value, 1 an instance's state, 2 its positional state. */
static int dump(ost_writer *w, ost_value v, int state_only, const void **data,
                size_t *len) {
    ost_value tmp = 0;
    if (data) *data = NULL;
    if (len) *len = 0;
    if (!w) return OST_EINVAL;
    reset(w);
    if (!w->memo.slots && ost__ptrtab_init(&w->memo, 256))
        return fail(w, OST_ENOMEM, "out of memory");
    if (!v) return fail(w, OST_EINVAL, "nothing to pickle (OST_NOVALUE)");
    if (state_only && ost__type(v) != OST_T_INSTANCE)
        return fail(w, OST_ETYPE, "state of a %s: only instances have one",
                    ost_type_name(ost__type(v)));
    if (reserve(w, 2)) goto out;
    put1(w, OP_PROTO);
    put1(w, (unsigned)w->proto);
    if (framed(w) && open_frame(w)) goto out;
    if (state_only == 2 ? save_fields(w, v)
        : state_only    ? save_state(w, v, &tmp)
                        : save(w, v, false))
        goto out;
    while (w->nst) {
        if (step(w)) goto out;
        if (OST_UNLIKELY(boundary(w))) goto out;
    }
    if (reserve(w, 1)) goto out;
    put1(w, OP_STOP);
    close_frame(w);
    if (flush(w, w->len)) goto out;
out:
    while (w->nst) {
        wframe *f = &w->st[--w->nst];
        ost_decref(f->aux);
        ost_decref(f->aux2);
    }
    ost_decref(tmp);
    ost_decref(w->dead);
    w->dead = 0;
    names_clear(w); /* drops the references it took */
    if (w->err) {
        w->len = 0;
        return w->err;
    }
    w->stats.bytes = w->flushed + w->len;
    if (len) *len = w->flushed + w->len;
    if (data && !w->sink) *data = w->buf;
    return 0;
}

int ost_dump(ost_writer *w, ost_value v, const void **data, size_t *len) {
    return dump(w, v, 0, data, len);
}

int ost_dump_state(ost_writer *w, ost_value inst, const void **data, size_t *len) {
    return dump(w, inst, 1, data, len);
}

int ost__dump_fields(ost_writer *w, ost_value inst, const void **data, size_t *len) {
    return dump(w, inst, 2, data, len);
}
