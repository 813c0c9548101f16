/* pack_cuda.h: the GPU gather kernel, callable from C. Only built with CUDA
 * (WSYNC_HAVE_CUDA); callers go through wsync_pack_cuda_start (pack_gpu.c),
 * which says so otherwise. */
#ifndef WSYNC_COMMON_PACK_CUDA_H
#define WSYNC_COMMON_PACK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "common/pack/pack_task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the n tasks (a table in device memory) from src_base into dst_base,
 * one block per task, asynchronously on `stream` (a cudaStream_t). Returns a
 * cudaError_t as int (0 = launched). */
int wsync_cuda_pack_async(void *dst_base, const void *src_base, const wsync_pack_task_t *tasks_dev, size_t n,
                          void *stream);

/* Where a put's bytes go (the kernel's argument, by value): the put's
 * bytes from at[i] on (to at[i + 1]) at address base[i] + their offset in
 * the put; at[0] = 0. One part: the put's first byte at base[0]. */
typedef struct wsync_pack_dsts {
    uint32_t n, pad;
    uint64_t at[WSYNC_PACK_MAX_PARTS];
    uint64_t base[WSYNC_PACK_MAX_PARTS];
} wsync_pack_dsts_t;

/* pack_digest_cuda.cu: the n tasks (all of width 8 or 16) of one put from
 * src_base into the put's destination (d: a task writes where its first
 * byte's part puts it), the digest sum of what they write (keyed as bytes
 * at offset key_off + their offset in the put) added as
 * wsync_cuda_copy_digest_out_async does: *acc and *count device words at 0,
 * the grid's last block stores the sum into *hout and puts both back to 0.
 * Asynchronous on `stream`; returns a cudaError_t as int (0 = launched). */
int wsync_cuda_pack_digest_async(const wsync_pack_dsts_t *d, const void *src_base,
                                 const wsync_pack_task_t *tasks_dev, size_t n, uint64_t key_off,
                                 unsigned long long *acc, unsigned int *count, unsigned long long *hout,
                                 void *stream);

/* A batch of packed puts (pack_digest_cuda.cu): each as for
 * wsync_cuda_pack_digest_async, its sum stored into its hout by its own last
 * block; a put of one part lands at dst, one of more in its parts of the
 * batch's table. The kernel's blocks are the puts' tasks in order, put i's
 * from first[i]; put i adds into acc[i] and count[i]. Passed by value
 * (WSYNC_PACK_BATCH_MAX puts and WSYNC_PACK_BATCH_PARTS parts, ~1.9 KB). */
#define WSYNC_PACK_BATCH_MAX WSYNC_PACK_SUM_BATCH /* pack.h's */
typedef struct wsync_pack_batch_put {
    const wsync_pack_task_t *tasks; /* device memory, ntasks >= 1 */
    uint64_t ntasks;
    const unsigned char *src; /* the plan's source base */
    unsigned char *dst;       /* the put's first byte (one part) */
    uint64_t key;             /* wsync_digest_base_key(key_off) */
    unsigned long long *hout; /* where its last block stores the sum */
    uint32_t part0, nparts;   /* more than one part: at[part0 ..], base[part0 ..] of the batch */
} wsync_pack_batch_put_t;
#define WSYNC_PACK_BATCH_PARTS WSYNC_PACK_SUM_BATCH_PARTS /* pack.h's */
typedef struct wsync_pack_batch {
    uint32_t n, pad;
    uint32_t first[WSYNC_PACK_BATCH_MAX + 1]; /* first[n]: every task */
    wsync_pack_batch_put_t p[WSYNC_PACK_BATCH_MAX];
    uint64_t at[WSYNC_PACK_BATCH_PARTS], base[WSYNC_PACK_BATCH_PARTS]; /* as wsync_pack_dsts_t's */
} wsync_pack_batch_t;
int wsync_cuda_pack_digest_batch_async(const wsync_pack_batch_t *b, unsigned long long *acc, unsigned int *count,
                                       void *stream);

#ifdef __cplusplus
}
#endif

#endif
