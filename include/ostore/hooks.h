/* ostore hooks: the class registry, and transaction hooks.
 *
 * persistent_id and persistent_load are hooks of the writer and reader
 * (pickle.h); the registry turns the globals a pickle names into classes
 * made with ost_class_new (value.h); transaction hooks are what the store
 * fires around a commit. */
#ifndef OSTORE_HOOKS_H
#define OSTORE_HOOKS_H

#include "pickle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- class registry ---------------------------------------------------- */

/* A class registry (ost_registry_new): an opaque handle. */
typedef struct ost_registry ost_registry;

/* What a registry does with a global not registered in it
 * (ost_registry_set_policy). */
typedef enum {
    /* an unregistered global becomes a generic global/instance/reduce */
    OST_UNKNOWN_GENERIC = 0,
    /* an unregistered global fails the load with OST_EUNKNOWNCLASS */
    OST_UNKNOWN_ERROR = 1
} ost_unknown_policy;

/* New empty registry, policy OST_UNKNOWN_GENERIC. NULL on ENOMEM. */
OST_EXTERN ost_registry *ost_registry_new(void);
/* Drops the registry's references to its classes (instances keep theirs)
 * and frees it. NULL is allowed. */
OST_EXTERN void ost_registry_free(ost_registry *reg);
/* Registers a class made from def (see ost_class_def). *cls, if not NULL,
 * receives the class value, borrowed from the registry. Returns 0,
 * OST_EEXIST if module.name is registered already, OST_EINVAL for a bad
 * def (see ost_class_new: among others, a class or field name holding '(',
 * ')' or ','; for a default that is not allowed, ost_value_errmsg names
 * the field and says why), OST_ENOMEM. */
OST_EXTERN int ost_registry_add(ost_registry *reg, const ost_class_def *def,
                                ost_value *cls);
/* The class registered as module.name, or that module.name is an alias of
 * (borrowed), or 0. */
OST_EXTERN ost_value ost_registry_get(const ost_registry *reg,
                                      const char *module, const char *name);
/* Makes module.name, a former name of class cls, read as cls: a pickle or
 * a store's record that names module.name gets an instance of cls, as
 * ZODB programs do with class aliases after renaming a class. Writing
 * uses cls's own name, so a record moves to the new name when it is next
 * stored. cls must be a class of reg (borrowed; ost_registry_add gives
 * it). Returns 0, OST_EINVAL (NULL names, text that is not UTF-8, a name
 * holding '(', ')' or ',', cls not
 * a class of reg), OST_EEXIST (module.name is a class or an alias
 * already), OST_ENOMEM. Not thread-safe: make aliases before readers use
 * the registry. */
OST_EXTERN int ost_registry_alias(ost_registry *reg, const char *module,
                                  const char *name, ost_value cls);
/* Number of registered classes (aliases not counted). */
OST_EXTERN size_t ost_registry_count(const ost_registry *reg);
/* What the reader does with globals not registered. */
OST_EXTERN void ost_registry_set_policy(ost_registry *reg,
                                        ost_unknown_policy policy);
/* A find_global callback (ud is the registry): registered classes resolve
 * to their class, others follow the policy. */
OST_EXTERN int ost_registry_find_global(void *reg, const char *module,
                                        const char *name, ost_value *cls);
/* Makes reader r resolve globals through reg (which must outlive the
 * loads). */
OST_EXTERN void ost_reader_set_registry(ost_reader *r, ost_registry *reg);

/* ---- transaction hooks ---------------------------------------------- */

/* A set of transaction hooks: a connection's (ost_conn_hooks) or one
 * made by ost_txn_hooks_new. An opaque handle. */
typedef struct ost_txn_hooks ost_txn_hooks;

/* Before commit: return 0, or a negative code to veto the commit (nothing
 * is written then). */
typedef int (*ost_before_commit_fn)(void *ud, ost_txn_hooks *h);
/* After commit: committed says whether the commit succeeded. */
typedef void (*ost_after_commit_fn)(void *ud, bool committed,
                                    ost_txn_hooks *h);
/* After abort. */
typedef void (*ost_after_abort_fn)(void *ud, ost_txn_hooks *h);

/* New empty set of hooks. NULL on ENOMEM. */
OST_EXTERN ost_txn_hooks *ost_txn_hooks_new(void);
/* Frees the hooks without firing them. NULL is allowed. */
OST_EXTERN void ost_txn_hooks_free(ost_txn_hooks *h);

/* Registers a hook; each registration fires once, in registration order,
 * and a hook may register further hooks (of any kind) while it runs: hooks
 * of the kind being fired then fire in the same run. 0 or OST_ENOMEM. */
OST_EXTERN int ost_txn_hooks_before_commit(ost_txn_hooks *h,
                                           ost_before_commit_fn fn, void *ud);
OST_EXTERN int ost_txn_hooks_after_commit(ost_txn_hooks *h,
                                          ost_after_commit_fn fn, void *ud);
OST_EXTERN int ost_txn_hooks_after_abort(ost_txn_hooks *h,
                                         ost_after_abort_fn fn, void *ud);

/* Fires the before-commit hooks in order; stops at the first that fails
 * and returns its code (the veto); the hooks not yet fired are dropped.
 * Every before-commit registration is consumed either way. Returns 0 when
 * all passed. */
OST_EXTERN int ost_txn_hooks_run_before_commit(ost_txn_hooks *h);
/* Fires and consumes the after-commit hooks; drops after-abort hooks. */
OST_EXTERN void ost_txn_hooks_run_after_commit(ost_txn_hooks *h,
                                               bool committed);
/* Fires and consumes the after-abort hooks; drops the other kinds. */
OST_EXTERN void ost_txn_hooks_run_after_abort(ost_txn_hooks *h);
/* Registrations waiting, of all kinds. */
OST_EXTERN size_t ost_txn_hooks_pending(const ost_txn_hooks *h);

#ifdef __cplusplus
}
#endif

#endif
