/* fdpass.h: local Unix sockets in the abstract namespace (nothing on disk to
 * clean up after a crash) and messages that carry a file descriptor. */
#ifndef WSYNC_COMMON_NET_FDPASS_H
#define WSYNC_COMMON_NET_FDPASS_H

#include <stddef.h>

#include "common/wsync.h"

/* Listen on abstract name `name`; fails if another process holds it. */
wsync_status_t wsync_unix_listen(const char *name, int *fd_out);
/* Connect to `name`, retrying until timeout_ms while nobody listens yet. */
wsync_status_t wsync_unix_connect(const char *name, int timeout_ms, int *fd_out);
/* The same, returning WSYNC_ERR_CANCELLED within ~20 ms once wsync_cancelled(cancel)
 * (cancel may be NULL: the process-wide wsync_interrupt alone). */
wsync_status_t wsync_unix_connect_cancellable(const char *name, int timeout_ms, const int *cancel, int *fd_out);
/* Send exactly `len` bytes and, if fd >= 0, the descriptor with them. */
wsync_status_t wsync_fd_send(int sock, const void *msg, size_t len, int fd);
/* Receive exactly `len` bytes; *fd gets a descriptor that came with them, or -1. */
wsync_status_t wsync_fd_recv(int sock, void *msg, size_t len, int *fd);

#endif
