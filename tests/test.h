/* test.h: the unit-test harness. Each test program runs its cases with RUN()
 * and prints one line per case: "PASS name", "FAIL name" or "SKIP name: why";
 * tests/run.sh counts them. A failed CHECK prints where and why, and the case
 * carries on so one run shows every broken assertion. */
#ifndef WSYNC_TESTS_TEST_H
#define WSYNC_TESTS_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wsync.h"

static int test_case_failed_;
static int test_case_skipped_;
static int test_failures_;
static char test_skip_reason_[256];

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            test_case_failed_ = 1;                                                     \
        }                                                                              \
    } while (0)

#define CHECK_EQ(a, b)                                                                                         \
    do {                                                                                                       \
        long long ca_ = (long long)(a), cb_ = (long long)(b);                                                  \
        if (ca_ != cb_) {                                                                                      \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, ca_, cb_); \
            test_case_failed_ = 1;                                                                             \
        }                                                                                                      \
    } while (0)

#define CHECK_STR(a, b)                                                                             \
    do {                                                                                            \
        const char *ca_ = (a), *cb_ = (b);                                                          \
        if (ca_ == NULL || cb_ == NULL || strcmp(ca_, cb_) != 0) {                                  \
            fprintf(stderr, "  %s:%d: %s == %s failed: '%s' != '%s'\n", __FILE__, __LINE__, #a, #b, \
                    ca_ ? ca_ : "(null)", cb_ ? cb_ : "(null)");                                    \
            test_case_failed_ = 1;                                                                  \
        }                                                                                           \
    } while (0)

/* The call must succeed; on failure print its status and last error. */
#define CHECK_OK(call)                                                                                   \
    do {                                                                                                 \
        wsync_status_t co_ = (call);                                                                     \
        if (co_ != WSYNC_OK) {                                                                           \
            fprintf(stderr, "  %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, wsync_status_str(co_), \
                    wsync_last_error());                                                                 \
            test_case_failed_ = 1;                                                                       \
        }                                                                                                \
    } while (0)

/* The call must fail with `want`, and its message must contain `needle`. */
#define CHECK_FAILS(call, want, needle)                                                          \
    do {                                                                                         \
        wsync_status_t cf_ = (call);                                                             \
        if (cf_ != (want)) {                                                                     \
            fprintf(stderr, "  %s:%d: %s -> %s, wanted %s (%s)\n", __FILE__, __LINE__, #call,    \
                    wsync_status_str(cf_), wsync_status_str(want), wsync_last_error());          \
            test_case_failed_ = 1;                                                               \
        } else if ((needle) != NULL && strstr(wsync_last_error(), (needle)) == NULL) {           \
            fprintf(stderr, "  %s:%d: %s: message '%s' lacks '%s'\n", __FILE__, __LINE__, #call, \
                    wsync_last_error(), (const char *)(needle));                                 \
            test_case_failed_ = 1;                                                               \
        }                                                                                        \
    } while (0)

/* Mark the running case skipped, with the reason, and leave it. */
#define SKIP(...)                                                            \
    do {                                                                     \
        snprintf(test_skip_reason_, sizeof(test_skip_reason_), __VA_ARGS__); \
        test_case_skipped_ = 1;                                              \
        return;                                                              \
    } while (0)

#define RUN(fn)                                                          \
    do {                                                                 \
        test_case_failed_ = 0;                                           \
        test_case_skipped_ = 0;                                          \
        fn();                                                            \
        if (test_case_skipped_ && !test_case_failed_)                    \
            printf("SKIP %s: skipped: %s\n", #fn, test_skip_reason_);    \
        else                                                             \
            printf("%s %s\n", test_case_failed_ ? "FAIL" : "PASS", #fn); \
        fflush(stdout);                                                  \
        test_failures_ += test_case_failed_;                             \
    } while (0)

#define TEST_EXIT() return test_failures_ ? 1 : 0

#endif
