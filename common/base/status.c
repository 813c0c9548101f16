/* status.c: status names, the thread-local last error, version and backends. */
#include "common/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/base/log.h"

static __thread char last_error[1024];

const char *wsync_status_str(wsync_status_t status)
{
    switch (status) {
    case WSYNC_OK: return "ok";
    case WSYNC_ERR_INVALID: return "invalid argument";
    case WSYNC_ERR_NOMEM: return "out of memory";
    case WSYNC_ERR_IO: return "I/O error";
    case WSYNC_ERR_FORMAT: return "malformed input";
    case WSYNC_ERR_NOT_FOUND: return "not found";
    case WSYNC_ERR_TIMEOUT: return "timeout";
    case WSYNC_ERR_PEER: return "peer failed";
    case WSYNC_ERR_DIGEST: return "digest mismatch";
    case WSYNC_ERR_CONFLICT: return "conflict";
    case WSYNC_ERR_UNSUPPORTED: return "unsupported";
    case WSYNC_ERR_HTTP: return "control endpoint error";
    case WSYNC_ERR_CUDA: return "CUDA error";
    case WSYNC_ERR_NCCL: return "NCCL error";
    case WSYNC_ERR_VERBS: return "verbs error";
    case WSYNC_ERR_CANCELLED: return "cancelled";
    case WSYNC_ERR_AUTH: return "unauthorized";
    case WSYNC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *wsync_last_error(void)
{
    return last_error;
}

wsync_status_t wsync_error(wsync_status_t status, const char *fmt, ...)
{
    char msg[sizeof(last_error)];
    va_list ap;
    /* Format into a copy first: callers may pass wsync_last_error() itself
     * as an argument ("...: %s", wsync_last_error()) to add context. */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof(msg));
    wsync_log(WSYNC_LOG_DEBUG, "error (%s): %s", wsync_status_str(status), last_error);
    return status;
}

void wsync_error_clear(void)
{
    last_error[0] = '\0';
}

const char *wsync_version(void)
{
    return WSYNC_VERSION;
}

const char *wsync_backends(void)
{
    return "host tcp shm"
#if WSYNC_HAVE_CUDA
           " cuda cuda_ipc"
#endif
#if WSYNC_HAVE_NCCL
           " nccl"
#endif
#if WSYNC_HAVE_VERBS
           " verbs"
#endif
        ;
}
