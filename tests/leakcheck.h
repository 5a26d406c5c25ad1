/* Criterion ignores what LeakSanitizer reports when a worker process
 * exits, so under ASan each test asks LeakSanitizer itself before it
 * ends: OST_TEST(suite, name, ...) is Test() plus that check. */
#ifndef OST_TESTS_LEAKCHECK_H
#define OST_TESTS_LEAKCHECK_H

#include <criterion/criterion.h>

#if defined(__SANITIZE_ADDRESS__)
#define OST_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OST_TEST_LSAN 1
#endif
#endif

#ifdef OST_TEST_LSAN
#include <sanitizer/lsan_interface.h>
static inline void ost_test_check_no_leaks(void) {
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (see stderr)");
}
#else
static inline void ost_test_check_no_leaks(void) {}
#endif

#define OST_TEST(suite, name, ...)                    \
    static void suite##_##name##_body(void);           \
    Test(suite, name, ##__VA_ARGS__) {                 \
        suite##_##name##_body();                       \
        ost_test_check_no_leaks();                     \
    }                                                  \
    static void suite##_##name##_body(void)

#endif
