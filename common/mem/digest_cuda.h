/* digest_cuda.h: the GPU side of the piece digest and of the fill pattern,
 * callable from C. Only built with CUDA (WSYNC_HAVE_CUDA); callers go through
 * wsync_mem_cuda, which stubs them out otherwise. */
#ifndef WSYNC_COMMON_DIGEST_CUDA_H
#define WSYNC_COMMON_DIGEST_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "common/mem/digest_runs.h"
#include "common/mem/mem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds wsync_digest_sum(ptr, len, off) into the device word `*dsum` (mod 2^64)
 * on `stream` (a cudaStream_t). Asynchronous; ptr is device memory of the
 * current device; any alignment. Returns a cudaError_t as int (0 = launched). */
int wsync_cuda_digest_sum_async(const void *ptr, size_t len, uint64_t off, uint64_t *dsum, void *stream);

/* Adds wsync_digest_sum(r[i].ptr, r[i].len, r[i].off) into dsum[i] for each
 * of the n ranges, asynchronously on `stream`: 16-byte aligned ranges of 16
 * bytes or more up to 64 to a launch, any other alone. Returns a
 * cudaError_t as int (0 = launched). */
int wsync_cuda_digest_batch_async(const wsync_digest_range_t *r, size_t n, uint64_t *dsum, void *stream);

/* digest_runs.h's kernel: adds each of the n device tasks' word sums into
 * dsum[task.seg] (device words), reading from src_base, asynchronously on
 * `stream`. One block per task. Returns a cudaError_t as int. */
int wsync_cuda_digest_tasks_async(const wsync_digest_task_t *dev_tasks, size_t n, const void *src_base,
                                  uint64_t *dsum, void *stream);

/* wsync_fill_pattern(dst, len, off, seed) on the GPU, asynchronous on `stream`. */
int wsync_cuda_fill_async(void *dst, size_t len, uint64_t off, uint64_t seed, void *stream);

#ifdef __cplusplus
}
#endif

#endif
