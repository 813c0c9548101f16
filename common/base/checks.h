/* checks.h: the check macros every file uses to propagate wsync_status_t. */
#ifndef WSYNC_COMMON_CHECKS_H
#define WSYNC_COMMON_CHECKS_H

#include <errno.h>
#include <string.h>

#include "common/base/log.h"
#include "common/base/status.h"

/* Return the status of `call` from the enclosing function if it failed. */
#define WSYNC_CHECK(call)                  \
    do {                                   \
        wsync_status_t check_st_ = (call); \
        if (check_st_ != WSYNC_OK)         \
            return check_st_;              \
    } while (0)

/* Store the status of `call` in `st` and jump to `label` if it failed. */
#define WSYNC_CHECK_GOTO(call, st, label) \
    do {                                  \
        (st) = (call);                    \
        if ((st) != WSYNC_OK)             \
            goto label;                   \
    } while (0)

/* Run a system call that returns -1 on failure, retrying on EINTR; on failure
 * record "<what>: <strerror>" and return WSYNC_ERR_IO. */
#define SYS_CHECK(call, what)                                                    \
    do {                                                                         \
        int sys_rc_;                                                             \
        do {                                                                     \
            sys_rc_ = (int)(call);                                               \
        } while (sys_rc_ == -1 && errno == EINTR);                               \
        if (sys_rc_ == -1)                                                       \
            return wsync_error(WSYNC_ERR_IO, "%s: %s", (what), strerror(errno)); \
    } while (0)

/* Allocation check: record and return WSYNC_ERR_NOMEM when `ptr` is NULL. */
#define WSYNC_CHECK_ALLOC(ptr)                                                                 \
    do {                                                                                       \
        if ((ptr) == NULL)                                                                     \
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory at %s:%d", __FILE__, __LINE__); \
    } while (0)

#define WSYNC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Recover the enclosing backend struct from its embedded generic member. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
