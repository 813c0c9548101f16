/* pack_cuda.h: the GPU gather kernel, callable from C. Only built with CUDA
 * (WSYNC_HAVE_CUDA); callers go through wsync_pack_cuda_start (pack_gpu.c),
 * which says so otherwise. */
#ifndef WSYNC_COMMON_PACK_CUDA_H
#define WSYNC_COMMON_PACK_CUDA_H

#include <stddef.h>

#include "common/pack/pack_task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the n tasks (a table in device memory) from src_base into dst_base,
 * one block per task, asynchronously on `stream` (a cudaStream_t). Returns a
 * cudaError_t as int (0 = launched). */
int wsync_cuda_pack_async(void *dst_base, const void *src_base, const wsync_pack_task_t *tasks_dev, size_t n,
                          void *stream);

#ifdef __cplusplus
}
#endif

#endif
