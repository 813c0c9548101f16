/* status.h: internal side of the status type: recording the last error. */
#ifndef WSYNC_COMMON_STATUS_H
#define WSYNC_COMMON_STATUS_H

#include "common/wsync.h"

#ifndef WSYNC_HAVE_CUDA
#define WSYNC_HAVE_CUDA 0
#endif
#ifndef WSYNC_HAVE_NCCL
#define WSYNC_HAVE_NCCL 0
#endif
#ifndef WSYNC_HAVE_VERBS
#define WSYNC_HAVE_VERBS 0
#endif

/* Records a printf-style detail as this thread's last error and returns
 * `status`, so a failure reads `return wsync_error(WSYNC_ERR_IO, "...")`.
 * Say what failed, on which file/peer/tensor, and what to do if it helps. */
wsync_status_t wsync_error(wsync_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void wsync_error_clear(void);

#endif
