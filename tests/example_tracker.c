/* The common operations of docs/tutorial.md ("Common operations, a few
 * lines each"), as a small bug tracker: run as a test (example-tracker),
 * it fails if any step does not do what the text says. Each operation the
 * page shows sits between "op:" markers, which the page quotes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ostore.h"
#include "rmtree.h"

/* op: errors -- one check for every call, whatever the handle */
#define CHECK(call, h)                                                        \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_) {                                                            \
            fprintf(stderr, "tracker: line %d: %s: %s\n", __LINE__,           \
                    ost_err_name(rc_), ost_errmsg(h));                        \
            exit(1);                                                          \
        }                                                                     \
    } while (0)
/* end */

#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "tracker: line %d: %s is false\n", __LINE__, #cond);  \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static ost_value Issue;

/* Prints one issue of a range (ost_map_each's callback). */
static int print_issue(void *ud, ost_value key, ost_value issue) {
    int64_t number = 0, prio = 0;
    CHECK(ost_instance_get_int(issue, "number", &number), NULL);
    CHECK(ost_instance_get_int(issue, "priority", &prio), NULL);
    printf("  %s #%lld: %s (priority %lld)\n", ost_data(ost_item(key, 0), NULL),
           (long long)number, ost_data(ost_instance_getattr(issue, "title"), NULL),
           (long long)prio);
    ++*(int *)ud;
    return 0;
}

/* One attempt of a retried update: issue *ud's priority += 1. */
static int bump(void *ud, ost_conn *c) {
    ost_value issue;
    int64_t prio;
    int rc = ost_map_get(c, ost_root_get_c(c, "by_number"), ost_int(*(int64_t *)ud), &issue);
    if (!rc) rc = ost_instance_get_int(issue, "priority", &prio);
    return rc ? rc : ost_instance_setattr(issue, "priority", ost_int(prio + 1));
}

int main(int argc, char **argv) {
    char tmp[] = "/tmp/ostore-tracker-XXXXXX";
    const char *path = argc > 1 ? argv[1] : mkdtemp(tmp);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tracker.ostore", path);

    /* A class of 8 fields, "priority" 3 unless given (docs/tutorial.md, 1). */
    static const char *fields[] = {"number", "project", "title",  "priority",
                                   "state",  "owner",   "opened", "tags"};
    ost_value defaults[8] = {[3] = ost_int(3)};
    ost_registry *reg = ost_registry_new();
    ost_class_def def = {.module = "tracker", .name = "Issue", .fields = fields, .nfields = 8,
                         .persistent = true, .defaults = defaults};
    CHECK(ost_registry_add(reg, &def, &Issue), NULL);

    /* op: open */
    ost_store *st;
    ost_conn *c;
    CHECK(ost_open(dir, &(ost_store_options){.create = true, .registry = reg}, &st, &c), st);
    /* end */

    /* Two indexes and a counter under the root. */
    ost_value by_number, by_project, open_count;
    CHECK(ost_map_new(c, "int", &by_number), c);
    CHECK(ost_map_new(c, "(str, int)", &by_project), c);
    CHECK(ost_counter_new(c, 0, &open_count), c);
    CHECK(ost_root_set_c(c, "by_number", ost_incref(by_number)), c);
    CHECK(ost_root_set_c(c, "by_project", ost_incref(by_project)), c);
    CHECK(ost_root_set_c(c, "open", ost_incref(open_count)), c);

    const char *projects[] = {"proj-07", "proj-070", "proj-06"};
    for (int64_t n = 1; n <= 9; n++) {
        const char *proj = projects[n % 3];
        char title[32];
        snprintf(title, sizeof title, "bug %lld", (long long)n);
        /* op: new object */
        ost_value issue = ost_instance_of(ost_incref(Issue), 8, (ost_value[]){
            ost_int(n), ost_str_c(proj), ost_str_c(title), ost_int(n % 5), ost_str_c("open"),
            ost_str_c("ada"), ost_int(20261207), ost_list_new(0)});
        /* end */
        EXPECT(issue != 0);
        if (n % 2) {
            /* op: composite key */
            ost_value key = ost_tuple_of(2, ost_str_c(proj), ost_int(n));
            CHECK(ost_map_set(c, by_project, key, ost_incref(issue)), c); /* steals key and value */
            /* end */
        } else {
            /* op: index by fields */
            CHECK(ost_map_set_by(c, by_project, "project,number", issue), c); /* key from the fields */
            /* end */
        }
        CHECK(ost_map_set_by(c, by_number, "number", issue), c);
        ost_decref(issue);
        /* op: counter */
        CHECK(ost_counter_add(c, open_count, 1), c);
        /* end */
    }
    CHECK(ost_commit(c), c);

    /* op: lookup */
    ost_value issue;
    CHECK(ost_map_get(c, by_number, ost_int(4), &issue), c); /* borrowed until the transaction ends */
    /* end */
    /* op: read an int field */
    int64_t prio;
    CHECK(ost_instance_get_int(issue, "priority", &prio), NULL);
    /* end */
    EXPECT(prio == 4);

    /* op: range query */
    int shown = 0;
    ost_map_range r = {.prefix = ost_tuple_of(1, ost_str_c("proj-07"))}; /* not "proj-070" */
    CHECK(ost_map_each(c, by_project, &r, print_issue, &shown), c);
    /* end */
    ost_decref(r.prefix);
    EXPECT(shown == 3); /* issues 3, 6 and 9 */

    /* op: retried update */
    CHECK(ost_txn_run(c, 10, bump, &(int64_t){4}, NULL), c);
    /* end */
    CHECK(ost_map_get(c, by_number, ost_int(4), &issue), c);
    CHECK(ost_instance_get_int(issue, "priority", &prio), NULL);
    EXPECT(prio == 5);

    /* op: delete */
    CHECK(ost_map_del_by(c, by_project, "project,number", issue), c); /* only if it maps to issue */
    CHECK(ost_map_del_by(c, by_number, "number", issue), c);
    /* end */
    EXPECT(ost_map_contains(c, by_number, ost_int(4)) == 0);
    CHECK(ost_counter_add(c, open_count, -1), c);
    CHECK(ost_commit(c), c);

    uint64_t n;
    int64_t open;
    CHECK(ost_map_len(c, by_number, &n), c);
    CHECK(ost_counter_get(c, open_count, &open), c);
    printf("%llu issues, %lld open\n", (unsigned long long)n, (long long)open);
    EXPECT(n == 8 && open == 8);

    /* op: bad input says what is wrong */
    ost_value four = ost_str_c("4");
    int rc = ost_map_get(c, by_number, four, &issue);
    printf("%s: %s\n", ost_err_name(rc), ost_errmsg(c));
    /* end */
    ost_decref(four);
    EXPECT(rc == OST_ETYPE && strstr(ost_errmsg(c), "the key is a str, not an int"));

    ost_conn_close(c);
    ost_store_close(st);
    ost_registry_free(reg);
    ost_decref(defaults[3]);
    if (argc == 1) rmtree(path);
    return 0;
}
