/* delta_mem.h: delta encode and apply where a version's bytes live (host
 * memory or a GPU, common/mem/mem.h), the wire always in host memory (it
 * travels over tcp from there). On the host they are wsync_delta_encode and
 * wsync_delta_apply; on a GPU the kernels of delta_gpu.h, through a device
 * buffer (scratch and the wire) kept in a wsync_delta_dev_t and grown on
 * demand, on the calling thread's stream. Same wire either way. */
#ifndef WSYNC_COMMON_DELTA_MEM_H
#define WSYNC_COMMON_DELTA_MEM_H

#include "common/delta/delta.h"
#include "common/mem/mem.h"

/* Device buffers for one user (one lock: callers on several threads take
 * turns). NULL until the first GPU call. */
typedef struct wsync_delta_dev wsync_delta_dev_t;

/* base and next (len bytes of `mem`'s memory) to out (host, cap >=
 * wsync_delta_bound), as wsync_delta_encode. *dev: created on the first GPU
 * call. */
wsync_status_t wsync_delta_mem_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                      const void *next, size_t len, unsigned width, void *out, size_t cap,
                                      size_t *out_len);

/* The wire (host memory) applied to dst (len bytes of `mem`'s memory, which
 * hold the base), as wsync_delta_apply: refused before a byte of dst is
 * written. */
wsync_status_t wsync_delta_mem_apply(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, void *dst, size_t len,
                                     const void *wire, size_t wire_len);

/* Frees the device buffers (NULL: nothing). */
void wsync_delta_dev_free(const wsync_mem_ops_t *mem, wsync_delta_dev_t *dev);

#endif
