/* tcp_bounce.h: receiving a put's payload into memory the socket cannot write
 * (GPU): through two host buffers, so the network fills one while a copier
 * thread moves the other with the region's memory ops. */
#ifndef WSYNC_COMMON_TCP_BOUNCE_H
#define WSYNC_COMMON_TCP_BOUNCE_H

#include <stdint.h>

#include "common/mem/mem.h"

typedef struct tcp_bounce tcp_bounce_t;

/* Reads exactly `len` bytes from `fd` into `dst` (memory of `ops`' kind),
 * `slice` bytes at a time. *b is created on first use (slice only counts
 * then) and kept for the connection's next puts. Returns when every byte is
 * in `dst`: 0, or -1 if the socket broke or a copy failed (errno-free; the
 * reason is logged). */
int tcp_bounce_recv(tcp_bounce_t **b, size_t slice, int fd, const wsync_mem_ops_t *ops, char *dst, uint64_t len);
/* Stops the copier thread and frees the buffers; NULL is fine. */
void tcp_bounce_free(tcp_bounce_t *b);

#endif
