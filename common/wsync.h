/* wsync.h: what every user of wsync sees, whichever side: status codes, the
 * thread-local last error, logging, and the library's version and backends. */
#ifndef WSYNC_H
#define WSYNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WSYNC_API __attribute__((visibility("default")))

#define WSYNC_VERSION "0.1.0"

/* Every function that can fail returns one of these; WSYNC_OK is 0 and every
 * error is negative. wsync_last_error() carries the detail of the most recent
 * failure on the calling thread (what, which file, which peer). */
typedef enum wsync_status {
    WSYNC_OK = 0,
    WSYNC_ERR_INVALID = -1,      /* bad argument or configuration */
    WSYNC_ERR_NOMEM = -2,        /* allocation failed */
    WSYNC_ERR_IO = -3,           /* system call or file error */
    WSYNC_ERR_FORMAT = -4,       /* malformed input (file, JSON, wire data) */
    WSYNC_ERR_NOT_FOUND = -5,    /* no such tensor, version, peer or route */
    WSYNC_ERR_TIMEOUT = -6,      /* deadline passed */
    WSYNC_ERR_PEER = -7,         /* a peer disconnected or failed */
    WSYNC_ERR_DIGEST = -8,       /* bytes failed verification */
    WSYNC_ERR_CONFLICT = -9,     /* version or layout conflict */
    WSYNC_ERR_UNSUPPORTED = -10, /* backend not built in, or no such device */
    WSYNC_ERR_HTTP = -11,        /* control endpoint unreachable or refused */
    WSYNC_ERR_CUDA = -12,        /* CUDA runtime or driver error */
    WSYNC_ERR_NCCL = -13,        /* NCCL error */
    WSYNC_ERR_VERBS = -14,       /* libibverbs error */
    WSYNC_ERR_CANCELLED = -15,   /* operation stopped by close or shutdown */
    WSYNC_ERR_AUTH = -16,        /* missing or wrong bearer token */
    WSYNC_ERR_INTERNAL = -17,    /* a bug: an invariant did not hold */
} wsync_status_t;

/* Short fixed name of a status ("timeout", "digest mismatch"). Never NULL. */
WSYNC_API const char *wsync_status_str(wsync_status_t status);

/* Detail of the last error recorded on this thread; "" if none. The pointer
 * stays valid until the next error on the same thread. */
WSYNC_API const char *wsync_last_error(void);

/* "0.1.0" and the backends compiled in, e.g. "host tcp shm cuda nccl verbs". */
WSYNC_API const char *wsync_version(void);
WSYNC_API const char *wsync_backends(void);

/* Stops every blocking wait of this process's wsync objects -- a control
 * endpoint call being retried, a receiver's pull waiting for a version or
 * for its node, a publisher's waits -- within about 20 ms: each returns
 * WSYNC_ERR_CANCELLED, and so does every later wait. For a process about
 * to exit: call it from a SIGINT/SIGTERM handler (it is async-signal-safe),
 * then destroy the objects as usual (their final reports still go out).
 * One object alone: wsync_receiver_cancel. */
WSYNC_API void wsync_interrupt(void);
/* 1 once wsync_interrupt() was called. */
WSYNC_API int wsync_interrupted(void);

typedef enum wsync_log_level {
    WSYNC_LOG_ERROR = 0,
    WSYNC_LOG_WARN = 1,
    WSYNC_LOG_INFO = 2,
    WSYNC_LOG_DEBUG = 3,
} wsync_log_level_t;

/* Messages at or below `level` go to stderr. Default: WARN, or the value of
 * WSYNC_LOG (error|warn|info|debug) read once at first use. Thread-safe. */
WSYNC_API void wsync_log_set_level(wsync_log_level_t level);

/* Description of one tensor of an image, as the receiver exposes it. */
#define WSYNC_MAX_DIMS 8
typedef struct wsync_tensor_info {
    const char *name;  /* owned by wsync; valid while its owner lives */
    const char *dtype; /* safetensors dtype name: "BF16", "F32", ... */
    int ndim;
    int64_t shape[WSYNC_MAX_DIMS];
    uint64_t offset; /* byte offset in the image (multiple of 256) */
    uint64_t size;   /* bytes */
} wsync_tensor_info_t;

#ifdef __cplusplus
}
#endif
#endif
