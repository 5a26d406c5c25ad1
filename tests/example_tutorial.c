/* The program of docs/tutorial.md, run as a test (it prints what the
 * tutorial shows and fails if any step does not do what the text says). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ostore.h"
#include "rmtree.h"

#define CHECK(x)                                                        \
    do {                                                                \
        if (!(x)) {                                                     \
            fprintf(stderr, "tutorial: %s failed (line %d)\n", #x, __LINE__); \
            exit(1);                                                    \
        }                                                               \
    } while (0)

static ost_registry *classes(ost_value *Account) {
    /* 1. Classes: accounts are persistent objects with three fields. */
    static const char *fields[] = {"owner", "balance", "history"};
    ost_class_def def = {.module = "bank", .name = "Account",
                         .fields = fields, .nfields = 3, .persistent = true};
    ost_registry *reg = ost_registry_new();
    CHECK(ost_registry_add(reg, &def, Account) == 0);
    return reg;
}

static ost_store *open_store(const char *path, ost_registry *reg) {
    /* 2. Open (and create) the store. */
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    ost_store *st = ost_store_new();
    if (ost_store_open(st, path, &o) != 0) {
        fprintf(stderr, "%s\n", ost_store_errmsg(st));
        exit(1);
    }
    return st;
}

int main(int argc, char **argv) {
    char tmp[] = "/tmp/ostore-tutorial-XXXXXX";
    const char *path = argc > 1 ? argv[1] : mkdtemp(tmp);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bank.ostore", path);
    ost_value Account;
    ost_registry *reg = classes(&Account);
    ost_store *st = open_store(dir, reg);

    /* 3. Store a graph under the root. */
    ost_conn *c;
    CHECK(ost_conn_open(st, &c) == 0);
    ost_value accounts = ost_dict_new();
    const char *owners[] = {"ada", "bob"};
    for (int i = 0; i < 2; i++) {
        ost_value a = ost_instance_new(ost_incref(Account));
        ost_instance_setattr(a, "owner", ost_str_c(owners[i]));
        ost_instance_setattr(a, "balance", ost_int(100));
        ost_instance_setattr(a, "history", ost_list_new(0));
        ost_dict_set(accounts, ost_str_c(owners[i]), a);
    }
    CHECK(ost_root_set(c, ost_str_c("accounts"), accounts) == 0);
    CHECK(ost_commit(c) == 0);
    printf("stored 2 accounts\n");
    ost_conn_close(c);
    ost_store_close(st);

    /* 4. Reopen: objects come back as ghosts and load when used. */
    st = open_store(dir, reg);
    CHECK(ost_conn_open(st, &c) == 0);
    ost_value key = ost_str_c("accounts");
    ost_value accts = ost_root_get(c, key);
    ost_value ada = ost_dict_get_c(accts, "ada");
    printf("ada is a ghost: %s\n", ost_is_ghost(ada) ? "yes" : "no");
    int64_t bal;
    CHECK(ost_int_value(ost_instance_getattr(ada, "balance"), &bal) == 0 && bal == 100);
    printf("ada's balance: %lld (oid %llu)\n", (long long)bal, (unsigned long long)ost_oid(c, ada));

    /* 5. Change: setters mark the object changed; a plain list inside it
     * needs ost_changed. */
    ost_instance_setattr(ada, "balance", ost_int(bal - 30));
    ost_list_append(ost_instance_getattr(ada, "history"), ost_int(-30));
    ost_changed(ada);
    CHECK(ost_commit(c) == 0);

    /* 6. A conflict: two connections change the same account. */
    ost_conn *c2;
    CHECK(ost_conn_open(st, &c2) == 0);
    ost_value bob1 = ost_dict_get_c(ost_root_get(c, key), "bob");
    ost_value bob2 = ost_dict_get_c(ost_root_get(c2, key), "bob");
    ost_instance_setattr(bob1, "balance", ost_int(150));
    ost_instance_setattr(bob2, "balance", ost_int(90));
    CHECK(ost_commit(c) == 0);
    int rc = ost_commit(c2);
    printf("second commit: %s: %s\n", ost_err_name(rc), ost_conn_errmsg(c2));
    CHECK(rc == OST_ECONFLICT);
    ost_abort(c2); /* bob2 reloads: the first commit won */
    CHECK(ost_int_value(ost_instance_getattr(bob2, "balance"), &bal) == 0 && bal == 150);
    ost_conn_close(c2);

    /* 7. Pack: an account no longer reachable from the root goes away. */
    ost_value bob = ost_str_c("bob");
    CHECK(ost_dict_del(accts, bob) == 0); /* keys given to lookups are borrowed */
    ost_decref(bob);
    ost_changed(ost_conn_root(c)); /* the dict lives in the root's state */
    CHECK(ost_commit(c) == 0);
    uint64_t removed;
    CHECK(ost_store_pack(st, &removed) == 0);
    printf("pack removed %llu object(s)\n", (unsigned long long)removed);
    CHECK(removed == 1);
    CHECK(ost_store_check(st, NULL, NULL, NULL) == 0);

    ost_decref(key);
    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    if (argc == 1) rmtree(path);
    return 0;
}
