/* ostore values: the in-memory object graph that pickles are made of.
 *
 * An ost_value is one machine word. Small integers (62 bits and a sign), None,
 * True, False and floats of ordinary magnitude (a binary exponent from -62 to
 * 64, about 2.2e-19 to 3.7e19 either sign, and +0.0) are immediates: no
 * allocation, no reference count, never memoized. Everything else is a
 * pointer to a reference-counted heap object.
 * The value 0 (OST_NOVALUE) means "no value" and is what constructors return
 * when they fail (out of memory, or invalid text for strings).
 *
 * Ownership, as in CPython:
 *  - constructors return a NEW reference, which the caller must release with
 *    ost_decref() (or ost_release() when the graph may hold cycles);
 *  - functions that put a value into a container STEAL the reference to it,
 *    even when they fail (the value is released then), so
 *    ost_list_append(l, ost_int(5)) neither leaks nor needs a temporary;
 *  - getters return BORROWED references, valid while the container holds them.
 * Values are not thread-safe: a graph belongs to one thread at a time. */
#ifndef OSTORE_VALUE_H
#define OSTORE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A value: an immediate (small int, None, True, False, a float of
 * ordinary magnitude) or a pointer to a reference-counted heap object;
 * 0 is OST_NOVALUE, "no value" (see the top of this file). */
typedef uintptr_t ost_value;

#define OST_NOVALUE ((ost_value)0)
#define OST_NONE ((ost_value)0x2)
#define OST_FALSE ((ost_value)0x6)
#define OST_TRUE ((ost_value)0xA)

/* Smallest and largest integers held as immediates. */
#define OST_SMALLINT_MIN (-((int64_t)1 << 62))
#define OST_SMALLINT_MAX (((int64_t)1 << 62) - 1)

/* What a value is (ost_typeof): one of Python's types that pickles hold,
 * or one of the kinds of object a pickle builds without running code. */
typedef enum {
    OST_T_INVALID = 0, /* OST_NOVALUE */
    OST_T_NONE,        /* None */
    OST_T_BOOL,        /* True, False */
    OST_T_INT,         /* int, immediate or heap */
    OST_T_FLOAT,       /* float, immediate or heap */
    OST_T_STR,         /* str (UTF-8) */
    OST_T_BYTES,       /* bytes */
    OST_T_BYTEARRAY,   /* bytearray */
    OST_T_TUPLE,       /* tuple */
    OST_T_LIST,        /* list */
    OST_T_DICT,        /* dict */
    OST_T_SET,         /* set */
    OST_T_FROZENSET,   /* frozenset */
    OST_T_INSTANCE,    /* an instance of a class (ost_instance_new) */
    OST_T_GLOBAL,      /* a class or function named by module and name
                        * (ost_global, ost_class_new) */
    OST_T_REDUCE,      /* a reduce value (ost_reduce_new) */
    OST_T_PERSREF,     /* a persistent reference (ost_persref) */
    OST_T__COUNT       /* the number of types above, not a type */
} ost_type;

/* How a reduce value is rebuilt: REDUCE calls callable(*args); NEWOBJ is
 * cls.__new__(cls, *args); NEWOBJ_EX adds keyword arguments (a dict). */
typedef enum {
    OST_REDUCE_CALL = 0,     /* REDUCE: callable(*args) */
    OST_REDUCE_NEWOBJ = 1,   /* NEWOBJ: cls.__new__(cls, *args) */
    OST_REDUCE_NEWOBJ_EX = 2 /* NEWOBJ_EX: cls.__new__(cls, *args, **kwargs) */
} ost_reduce_kind;

/* ---- type, identity, reference counts ---------------------------------- */

/* Returns the type of v; OST_T_INVALID for OST_NOVALUE. */
OST_EXTERN ost_type ost_typeof(ost_value v);
/* Returns the Python name of a type ("int", "dict", "instance", ...). */
OST_EXTERN const char *ost_type_name(ost_type t);
/* True when v carries no heap object (small int, None, True, False, a float
 * in the immediate range). */
static inline bool ost_is_immediate(ost_value v) { return (v & 3) != 0; }

/* Adds a reference to v and returns v. No-op for immediates. */
OST_EXTERN ost_value ost_incref(ost_value v);
/* Drops a reference; frees v and, iteratively (no recursion on the C
 * stack), whatever only it held. Cycles are not found: see ost_release. */
OST_EXTERN void ost_decref(ost_value v);
/* Like ost_decref, and also frees the cycles in the graph reachable from v
 * that become unreachable. Costs time proportional to that graph. */
OST_EXTERN void ost_release(ost_value v);
/* Returns the reference count of a heap value, 0 for immediates. */
OST_EXTERN uint32_t ost_refcount(ost_value v);

/* ---- scalars ------------------------------------------------------------ */

/* True or False (immediates: nothing to release). */
static inline ost_value ost_bool(bool b) { return b ? OST_TRUE : OST_FALSE; }

/* New int; an immediate when it fits, else a heap int. 0 on ENOMEM. */
OST_EXTERN ost_value ost_int(int64_t i);
/* New int from n bytes of little-endian two's complement (pickle's LONG1
 * layout). n == 0 means zero. 0 on ENOMEM. */
OST_EXTERN ost_value ost_int_from_bytes(const uint8_t *le, size_t n);
/* New int parsed from decimal text, optional sign; the whole of s[0..n) must
 * be digits. Returns 0 (OST_NOVALUE) on bad text or ENOMEM. */
OST_EXTERN ost_value ost_int_from_decimal(const char *s, size_t n);
/* Stores the int (or bool) v in *out. Returns 0, OST_ETYPE if v is not an
 * int or bool, OST_ELIMIT if it does not fit in 64 bits. */
OST_EXTERN int ost_int_value(ost_value v, int64_t *out);
/* Writes v's minimal little-endian two's complement bytes to buf (if cap is
 * large enough) and returns how many bytes it needs (0 for zero). */
OST_EXTERN size_t ost_int_to_bytes(ost_value v, uint8_t *buf, size_t cap);

/* New float: an immediate when d is in the immediate range (see the top of
 * this file), else a heap float; either keeps d's bits exactly. 0 on ENOMEM. */
OST_EXTERN ost_value ost_float(double d);
/* Returns the double held by a float (or an int converted), NAN otherwise. */
OST_EXTERN double ost_float_value(ost_value v);

/* ---- text and bytes ------------------------------------------------------ */

/* Checks that s[0..n) is UTF-8 as Python's 'surrogatepass' accepts it
 * (lone surrogates encoded in three bytes allowed). Returns 0 or OST_EUTF8
 * and, on error, the offset of the first bad byte in *bad (if not NULL). */
OST_EXTERN int ost_utf8_check(const char *s, size_t n, size_t *bad);
/* New str copied from s[0..n); returns 0 if the text fails ost_utf8_check,
 * if n is over 4 GiB - 1 (the most a str, bytes or bytearray holds), or on
 * ENOMEM. */
OST_EXTERN ost_value ost_str(const char *s, size_t n);
/* New str from a NUL-terminated C string. */
OST_EXTERN ost_value ost_str_c(const char *s);
/* New bytes / bytearray copied from p[0..n). 0 on ENOMEM or if n is over
 * 4 GiB - 1 (p is not read then). */
OST_EXTERN ost_value ost_bytes(const void *p, size_t n);
OST_EXTERN ost_value ost_bytearray(const void *p, size_t n);
/* Pointer to the contents of a str, bytes or bytearray (borrowed; NUL
 * terminated for convenience) and its length in bytes; NULL for others. */
OST_EXTERN const char *ost_data(ost_value v, size_t *len);

/* ---- containers ------------------------------------------------------------ */

/* Number of items of a str (bytes), bytes, bytearray, tuple, list, dict,
 * set or frozenset; 0 for anything else. */
OST_EXTERN size_t ost_len(ost_value v);

/* New tuple of n items, each None until set. Fill it with ost_tuple_set
 * before sharing it. 0 on ENOMEM. */
OST_EXTERN ost_value ost_tuple_new(size_t n);
/* A new tuple of the n values that follow, in order, each stolen (also on
 * failure): ost_tuple_of(2, ost_str_c("proj-07"), ost_int(5)) for a
 * composite map key, in one line. 0 on ENOMEM or when a value is 0 (a
 * failed constructor's result): the others are released then. */
OST_EXTERN ost_value ost_tuple_of(size_t n, ...);
/* Puts item at index i of tuple t; steals item. OST_EINVAL if out of range
 * or t is not a tuple. */
OST_EXTERN int ost_tuple_set(ost_value t, size_t i, ost_value item);

/* New empty list with room for cap items. 0 on ENOMEM. */
OST_EXTERN ost_value ost_list_new(size_t cap);
/* Appends item to list l; steals item. 0, OST_ENOMEM or OST_ETYPE. */
OST_EXTERN int ost_list_append(ost_value l, ost_value item);
/* Replaces item i of list l; steals item. OST_EINVAL when out of range. */
OST_EXTERN int ost_list_set(ost_value l, size_t i, ost_value item);
/* Item i of a tuple or list (borrowed); 0 when out of range. */
OST_EXTERN ost_value ost_item(ost_value seq, size_t i);

/* New empty dict (insertion ordered; keys compare as in Python, so 1, 1.0
 * and True are one key). 0 on ENOMEM. */
OST_EXTERN ost_value ost_dict_new(void);
/* d[key] = val; steals both. A key that exists keeps its first key object
 * and position. 0, OST_ENOMEM, OST_ETYPE (unhashable key: list, dict, set,
 * bytearray, or a tuple holding one) or OST_EINVAL. */
OST_EXTERN int ost_dict_set(ost_value d, ost_value key, ost_value val);
/* Looks up key (borrowed in, borrowed out); 0 if missing. */
OST_EXTERN ost_value ost_dict_get(ost_value d, ost_value key);
/* Looks up a str key given as a C string; 0 if missing. */
OST_EXTERN ost_value ost_dict_get_c(ost_value d, const char *key);
/* Removes key. 0, or OST_ENOTFOUND. */
OST_EXTERN int ost_dict_del(ost_value d, ost_value key);
/* Iterates a dict, set or frozenset in insertion order: start with *pos =
 * 0; returns true and fills *key and *val (borrowed; *val is 0 for sets)
 * while items remain. Do not change the container while iterating. */
OST_EXTERN bool ost_dict_next(ost_value d, size_t *pos, ost_value *key,
                              ost_value *val);

/* New empty set / frozenset. 0 on ENOMEM. */
OST_EXTERN ost_value ost_set_new(void);
OST_EXTERN ost_value ost_frozenset_new(void);
/* Adds item to a set or frozenset (fill a frozenset before sharing it);
 * steals item. 0, OST_ENOMEM or OST_ETYPE. */
OST_EXTERN int ost_set_add(ost_value s, ost_value item);
/* True when item is in the set or frozenset. */
OST_EXTERN bool ost_set_contains(ost_value s, ost_value item);

/* ---- globals, instances, reduce values, persistent references ----------- */

/* New global (a class or function named by module and name, never
 * imported or called). 0 on ENOMEM or invalid UTF-8. */
OST_EXTERN ost_value ost_global(const char *module, const char *name);
/* Module and name of a global as str values (borrowed), 0 for others. */
OST_EXTERN ost_value ost_global_module(ost_value g);
OST_EXTERN ost_value ost_global_name(ost_value g);

/* ---- classes ------------------------------------------------------------ */

/* Custom state and constructor arguments for a class, all optional.
 * getstate returns a new reference to the state to pickle for inst;
 * setstate receives the unpickled state (borrowed) for inst; getnewargs
 * returns a new tuple written as NEWOBJ's arguments, and setnewargs gets
 * those arguments back (borrowed) when the instance is read. Each returns
 * 0 or a negative code that stops the dump or load. */
typedef int (*ost_getstate_fn)(void *ud, ost_value inst, ost_value *state);
typedef int (*ost_setstate_fn)(void *ud, ost_value inst, ost_value state);
typedef int (*ost_getnewargs_fn)(void *ud, ost_value inst, ost_value *args);
typedef int (*ost_setnewargs_fn)(void *ud, ost_value inst, ost_value args);
/* A persistent class's conflict resolver (ost_class_def.resolve), ZODB's
 * _p_resolveConflict: called at commit when another transaction committed
 * a newer state of an object this transaction changed. old is the object
 * as this transaction read it, committed as the store holds it now, mine
 * as this transaction changed it: three detached instances of the class,
 * made for the call, whose references to other stored objects are
 * persistent references (OST_T_PERSREF: compare them with ost_equal, keep
 * or move them; they cannot be loaded). The resolver changes mine into
 * the merged state (ost_instance_setattr) and returns 0: the commit then
 * writes mine instead of failing. Any other return refuses: the commit
 * fails with OST_ECONFLICT, as without a resolver, its message giving the
 * code. It runs inside the commit, on the committing thread or the group
 * committer's, with the store's write lock held: it must be quick, must
 * not use a store or connection, and is called from several threads for
 * one class. The values it is given are borrowed; a value it puts in mine
 * must not be a new persistent object (the commit then fails). ud is the
 * class's ud. docs/hooks.md, "Resolving conflicts". */
typedef int (*ost_resolve_fn)(void *ud, ost_value old, ost_value committed, ost_value mine);

/* A class, as ost_class_new and ost_registry_add take it (they copy it,
 * strings included): the name it pickles under, its declared fields and
 * its callbacks. Zero it, then set the fields to use. */
typedef struct {
    const char *module; /* e.g. "myapp.model" */
    const char *name;   /* e.g. "Account" */
    /* Declared fields: instances then keep one slot per field and no
     * dict. NULL (nfields 0) for instances with a dict of attributes. */
    const char *const *fields;
    size_t nfields;  /* number of entries of fields */
    bool persistent; /* stored as its own record by the store */
    /* The state written for an instance (NULL: its attribute dict, or
     * its slots as a dict). */
    ost_getstate_fn getstate;
    /* Gives an instance the state read (NULL: the state fills its slots,
     * updates its attribute dict when both are dicts, or else replaces
     * its state). */
    ost_setstate_fn setstate;
    /* NEWOBJ's arguments for an instance (NULL: none, an empty tuple). */
    ost_getnewargs_fn getnewargs;
    /* Receives NEWOBJ's arguments read into a new instance (NULL: a
     * NEWOBJ with arguments reads as a reduce value, not an instance). */
    ost_setnewargs_fn setnewargs;
    void *ud; /* passed to the callbacks */
    /* Former names of fields, for states written before a field was
     * renamed: nfield_aliases pairs {old name, declared field}, so
     * field_aliases[2 * i] reads into the slot of field_aliases[2 * i + 1].
     * Writing uses the declared name. NULL (0) for none. */
    const char *const *field_aliases;
    size_t nfield_aliases; /* number of pairs in field_aliases */
    /* Defaults of declared fields, for schema evolution: NULL (the
     * default) for none, else nfields entries, defaults[i] the value of
     * fields[i] where nothing set it: in a new instance (ost_instance_new)
     * and in an instance read from a state or record that lacks the field
     * (written before the field was added), whichever reader path reads
     * it. OST_NOVALUE for a field without one (it stays unset, as before).
     * A default is None, a bool, an int, a float, a str, bytes, or a tuple
     * of those (nested at most 32 deep); anything else (a list, dict, set,
     * bytearray, instance, ...) is refused: ost_class_new returns 0 and
     * ost_registry_add OST_EINVAL, with ost_value_errmsg naming the field.
     * The class keeps its own copy (the values passed stay the caller's,
     * borrowed); instances share the class's copy, which is immutable and
     * safe to share between threads. A default in a slot is a value like
     * any other: the instance stores it when it is written (docs/hooks.md,
     * "Changing a class"). */
    const ost_value *defaults;
    /* The conflict resolver of a persistent class (see ost_resolve_fn);
     * NULL (the default): a concurrent change to one of its objects is a
     * conflict. Only for persistent classes. */
    ost_resolve_fn resolve;
} ost_class_def;

/* New class: a global value (module.name) that also carries def, copied
 * (strings included). Instances made with it use its fields and callbacks,
 * and pickle as Python pickles an instance of a plain class with those
 * attributes. 0 on ENOMEM, or OST_NOVALUE for bad text, an empty class
 * or field name, a class or field name holding '(', ')' or ',' (a store's
 * class table names a class version `Name(field,field)`: docs/format.md;
 * Python names never hold them), a repeated field,
 * more than UINT32_MAX fields, a field alias that names no declared
 * field or is itself a declared field or a repeated alias, or a default
 * that is not allowed (see ost_class_def.defaults; ost_value_errmsg names
 * the field), or defaults given to a class without fields.
 *
 * A state read into an instance of a class with fields may name fields the
 * class does not declare (written by a version of the program that had
 * them): the instance keeps them, apart from its slots, and writes them
 * back with its declared fields (see ost_instance_extra). */
OST_EXTERN ost_value ost_class_new(const ost_class_def *def);
/* True when cls is a class made by ost_class_new with persistent set. */
OST_EXTERN bool ost_class_is_persistent(ost_value cls);
/* Number of declared fields of a class (0 for plain globals). */
OST_EXTERN size_t ost_class_nfields(ost_value cls);
/* Index of field name in class cls, or -1. */
OST_EXTERN ptrdiff_t ost_class_field(ost_value cls, const char *name);

/* New instance of class cls (a global; stolen) with state None, or, when
 * cls declares fields, every slot holding its field's default
 * (ost_class_def.defaults) or unset when the field has none. */
OST_EXTERN ost_value ost_instance_new(ost_value cls);
/* A new instance of class cls (stolen) whose first n fields get values[0,
 * n) in the class's field order, each stolen (also on failure), the others
 * their defaults: an object of 8 fields in one call,
 *     ost_instance_of(ost_incref(Issue), 3, (ost_value[]){ost_int(7),
 *                     ost_str_c("crash"), ost_int(2)})
 * 0 when cls has fewer than n fields (OST_EINVAL), a value is 0, or on
 * ENOMEM, with ost_value_errmsg saying which. */
OST_EXTERN ost_value ost_instance_of(ost_value cls, size_t n, const ost_value *values);
/* The int in attribute name of inst (a ghost loads first) into *out, in
 * one call: 0; OST_ENOTFOUND (unset, or no such field), OST_ETYPE (not an
 * int; a bool counts as one), OST_ELIMIT (beyond 64 bits), or
 * ost_instance_getattr_ex's codes, with ost_value_errmsg saying which
 * (*out is 0 then). */
OST_EXTERN int ost_instance_get_int(ost_value inst, const char *name, int64_t *out);
/* The class (a global) and the state (often a dict of attributes) of an
 * instance, borrowed; 0 for other types. Instances of a class with
 * fields have no state: their state is 0, use the slots. A store's ghost
 * loads its state first; 0 if that fails (ost_activate says why). */
OST_EXTERN ost_value ost_instance_class(ost_value inst);
OST_EXTERN ost_value ost_instance_state(ost_value inst);
/* Replaces the state of an instance; steals state. 0, OST_EINVAL, or the
 * code loading a store's ghost failed with (the change is not made). */
OST_EXTERN int ost_instance_set_state(ost_value inst, ost_value state);
/* Sets attribute name (the state becomes a dict if it is None; for a class
 * with fields, the slot of that name); steals val. 0, OST_ENOMEM, OST_ETYPE
 * (state is not a dict), OST_ENOTFOUND (no such field: ost_value_errmsg
 * names the field and the class), or the code loading a store's ghost
 * failed with. */
OST_EXTERN int ost_instance_setattr(ost_value inst, const char *name,
                                    ost_value val);
/* Attribute name of an instance whose state is a dict, or slot name of an
 * instance of a class with fields (borrowed), or 0 when absent, also when
 * name is no field of the class or a ghost failed to load:
 * ost_instance_getattr_ex tells these apart. */
OST_EXTERN ost_value ost_instance_getattr(ost_value inst, const char *name);
/* Attribute name of an instance, telling "unset" from "failed" in one
 * call: returns 0 with *out the attribute (borrowed) or 0 when it is not
 * set; or OST_ENOTFOUND when inst's class declares fields and name is not
 * one of them, OST_ETYPE when inst is not an instance (or its state is not
 * a dict of attributes), OST_EINVAL for NULL name or out, or the code
 * loading a store's ghost failed with. On failure ost_value_errmsg says
 * why (the field and the class; for a ghost, the oid and the reason). */
OST_EXTERN int ost_instance_getattr_ex(ost_value inst, const char *name,
                                       ost_value *out);
/* The attributes of an instance of a class with fields that its class
 * does not declare, as read from its state: a dict (borrowed; the instance
 * writes it back as part of its state), or 0 when there are none or inst
 * has no fields. A store's ghost loads its state first. */
OST_EXTERN ost_value ost_instance_extra(ost_value inst);
/* Slot i of an instance of a class with fields (borrowed; 0 when unset or
 * out of range). */
OST_EXTERN ost_value ost_instance_slot(ost_value inst, size_t i);
/* Sets slot i; steals val. 0, OST_EINVAL, or the code loading a store's
 * ghost failed with. */
OST_EXTERN int ost_instance_set_slot(ost_value inst, size_t i, ost_value val);

/* Items of an instance of a list or dict subclass (Python's class L(list)
 * or class D(dict)): a list or a dict kept beside the instance's state.
 * They pickle as Python pickles such an instance: NEWOBJ, then APPENDS or
 * SETITEMS, then BUILD with the state; ost_load keeps them the same way
 * (docs/pickle.md). Returns the list or dict (borrowed), or 0 when inst
 * has none or is not an instance. */
OST_EXTERN ost_value ost_instance_items(ost_value inst);
/* Gives inst its items, a list or a dict (stolen; OST_NOVALUE removes
 * them). 0, OST_ETYPE (items is neither a list nor a dict) or OST_EINVAL
 * (inst is not an instance, or is one of a class with fields or of a
 * persistent class: a store record keeps only the state). On failure
 * items is released and inst is unchanged. The items are part of the
 * instance, as in Python: another reference to the same list or dict in
 * the graph pickles as a separate object. */
OST_EXTERN int ost_instance_set_items(ost_value inst, ost_value items);

/* New reduce value: what a pickle says to build with callable(*args)
 * (or cls.__new__), kept as data and never executed; steals both. */
OST_EXTERN ost_value ost_reduce_new(ost_reduce_kind kind, ost_value callable,
                                    ost_value args);
/* Parts of a reduce value (borrowed; 0 when absent). kwargs is set only for
 * NEWOBJ_EX; listitems is a list and dictitems a list of 2-tuples added by
 * APPENDS/SETITEMS after construction; state is what BUILD gave. */
OST_EXTERN ost_reduce_kind ost_reduce_kind_of(ost_value r);
OST_EXTERN ost_value ost_reduce_callable(ost_value r);
OST_EXTERN ost_value ost_reduce_args(ost_value r);
OST_EXTERN ost_value ost_reduce_kwargs(ost_value r);
OST_EXTERN ost_value ost_reduce_state(ost_value r);
OST_EXTERN ost_value ost_reduce_listitems(ost_value r);
OST_EXTERN ost_value ost_reduce_dictitems(ost_value r);
/* Setters for the optional parts; each steals its argument. */
OST_EXTERN int ost_reduce_set_kwargs(ost_value r, ost_value kwargs);
OST_EXTERN int ost_reduce_set_state(ost_value r, ost_value state);
OST_EXTERN int ost_reduce_append(ost_value r, ost_value item);
OST_EXTERN int ost_reduce_setitem(ost_value r, ost_value key, ost_value val);

/* New persistent reference holding pid (stolen): written as BINPERSID. */
OST_EXTERN ost_value ost_persref(ost_value pid);
/* The pid of a persistent reference (borrowed), 0 for others. */
OST_EXTERN ost_value ost_persref_pid(ost_value p);

/* Message of the last failure of a value function on this thread ("" if
 * none yet): ost_instance_getattr_ex, ost_instance_setattr (a field the
 * class does not declare). Owned by the library, valid until the next
 * such failure on this thread. Never NULL. */
OST_EXTERN const char *ost_value_errmsg(void);

/* ---- comparison, hashing, repr ------------------------------------------ */

/* Python's ==, deep, safe on cycles: 1 == 1.0 == True, nan != nan (but an
 * object equals itself, as Python's containers compare), a str never
 * equals bytes. Instances, globals and reduce values compare by class and
 * contents. Returns true or false. */
OST_EXTERN bool ost_equal(ost_value a, ost_value b);
/* Strict graph identity: same types everywhere (1 is not 1.0), same float
 * bits, and the same sharing (two references to one object in a match two
 * references to one object in b). For tests of round trips. */
OST_EXTERN bool ost_same_graph(ost_value a, ost_value b);
/* Hash of a hashable value, consistent with ost_equal (equal values hash
 * equal; numbers hash as Python's do, so 1, 1.0 and True agree). Returns 0,
 * OST_ETYPE for unhashable values (list, dict, set, bytearray, or a tuple
 * holding one), or OST_ENOMEM for very large graphs of shared tuples.
 * Stable: the hash of a value is the same in every process and run and
 * on every platform (no per-process seed, unlike Python's str hash, so it
 * is not equal to Python's hash() of a str or bytes), and it does not
 * change within a major version (tests/test_api.c pins values), so a
 * program may keep it in its own indexes. A str and the bytes of its
 * UTF-8 text hash alike (they never compare equal). */
OST_EXTERN int ost_hash(ost_value v, uint64_t *out);

/* A growable byte buffer owned by the caller: zero-initialise it, free it
 * with ost_buf_free. */
typedef struct {
    char *data; /* the bytes, data[0, len); NULL until the first append */
    size_t len; /* bytes held */
    size_t cap; /* bytes allocated */
} ost_buf;
/* Frees b's memory and zeroes it (NULL allowed). */
OST_EXTERN void ost_buf_free(ost_buf *b);

/* Appends a Python-like repr of v to out (NUL terminated); out keeps what
 * it held before. Instances print as module.Name(attr=value, ...), cycles
 * as [...] / {...} / (...) / .... An object that v's graph reaches more
 * than once prints in full the first time, after a label #N=, and as #N#
 * afterwards: every list, dict, set, bytearray, instance and reduce value,
 * and an immutable value (str, bytes, int, tuple, frozenset, persistent
 * reference) whose text is longer than 64 bytes or holds a mutable value;
 * shorter immutable values print in full each time, as in Python. So the
 * text grows linearly with the graph, not with the paths through it
 * (docs/pickle.md). An int of more than OST_REPR_INT_DIGITS decimal digits
 * prints in hexadecimal (see ost_repr_options). Returns 0 or OST_ENOMEM
 * (out then holds part of the text). */
OST_EXTERN int ost_repr(ost_value v, ost_buf *out);

/* Default of ost_repr_options.int_digits: CPython's limit on the digits
 * of an int's decimal text (sys.get_int_max_str_digits(), Python 3.11). */
#define OST_REPR_INT_DIGITS 4300

/* How ost_repr_ex prints. Fill it with ost_repr_options_init, then set
 * the fields to change. */
typedef struct {
    /* An int whose decimal text would have more digits prints in
     * hexadecimal instead, as Python's hex() prints it (0x1f, -0x1f), in
     * time linear in its size: decimal text takes time quadratic in the
     * number of digits. 0: no limit, every int in decimal. */
    size_t int_digits;
    /* Bytes of text appended at most. A longer text is cut (at a UTF-8
     * character boundary) and followed by the marker
     * "... (output truncated at N bytes)". 0: no limit. */
    size_t max_len;
    /* v itself, when it is a store's ghost, is loaded first and prints
     * with its state (repr never loads otherwise: a ghost prints as
     * module.Name(<ghost>), and so do the ghosts v refers to, which are
     * other records). If the load fails, ost_repr_ex returns its code and
     * appends nothing. false by default. */
    bool load_ghost;
} ost_repr_options;

/* Fills *o with the defaults: int_digits OST_REPR_INT_DIGITS, max_len 0,
 * load_ghost false (what ost_repr uses). */
OST_EXTERN void ost_repr_options_init(ost_repr_options *o);
/* ost_repr with options o (NULL: the defaults). Returns 0, also when the
 * text was cut at o->max_len (it then ends with the marker), OST_ENOMEM
 * (out then holds part of the text), or with o->load_ghost the code a
 * ghost's load failed with (ost_value_errmsg says why). */
OST_EXTERN int ost_repr_ex(ost_value v, ost_buf *out, const ost_repr_options *o);

/* ---- allocator ------------------------------------------------------------ */

/* An allocator for value memory (ost_set_allocator): three functions with
 * the C library's contracts. */
typedef struct {
    void *(*malloc)(size_t n);          /* as malloc(3) */
    void *(*realloc)(void *p, size_t n); /* as realloc(3) */
    void (*free)(void *p);              /* as free(3) */
} ost_allocator;
/* Replaces the allocator for all value memory (NULL restores the default).
 * With a custom allocator every object goes through it, unpooled, so a test
 * can fail any single allocation. Call it while no values exist. */
OST_EXTERN void ost_set_allocator(const ost_allocator *a);

/* Statistics of the value allocator for the calling thread. */
typedef struct {
    uint64_t live_objects; /* heap values allocated and not yet freed */
    uint64_t pool_bytes;   /* bytes held in pooled chunks */
} ost_alloc_stats;
/* Fills *st with this thread's counts. */
OST_EXTERN void ost_alloc_stats_get(ost_alloc_stats *st);

#ifdef __cplusplus
}
#endif

#endif
