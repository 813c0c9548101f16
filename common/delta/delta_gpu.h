/* delta_gpu.h: the delta encoder and decoder on a GPU (common/delta/delta.h
 * gives the wire form; delta_cuda.cu the kernels). Same wire, same checks:
 * a GPU wire is byte for byte the host encoder's, and a wire either side
 * wrote applies on either. Pointers are device memory of the current
 * device, aligned to the element width. Both calls run on `stream` (a
 * cudaStream_t; NULL: the default stream) and return when the work is done
 * (each reads a count back to choose the form or to check the wire). Without
 * CUDA they fail with WSYNC_ERR_UNSUPPORTED. */
#ifndef WSYNC_COMMON_DELTA_GPU_H
#define WSYNC_COMMON_DELTA_GPU_H

#include "common/delta/delta.h"

/* Device scratch bytes either call needs for a piece of `len` bytes (any
 * width). The output of an encode is 8-byte aligned (cudaMalloc's are). */
size_t wsync_delta_gpu_scratch(size_t len, unsigned width);

/* wsync_delta_encode on the GPU: base and next (len bytes) to out (cap >=
 * wsync_delta_bound, device memory, 8-byte aligned), the same wire. By
 * default one pass over both versions (delta_cuda_pass.cu); the host reads
 * the count back, picks the form with delta_form.h's rule and finishes the
 * wire (WSYNC_DELTA_GPU picks other kernels). */
wsync_status_t wsync_delta_gpu_encode(const void *base, const void *next, size_t len, unsigned width, void *out,
                                      size_t cap, size_t *out_len, wsync_delta_stats_t *st, void *scratch,
                                      void *stream);

/* wsync_delta_apply on the GPU: the wire (device memory) applied to dst,
 * which holds the base. Transactional like the host's: the header, the
 * bitmap's popcount and bits past n, and the pairs' indices are checked
 * before any byte of dst is written (on the device: the checks gate the
 * scatter), and a refusal names what was wrong. */
wsync_status_t wsync_delta_gpu_apply(void *dst, size_t len, const void *wire, size_t wire_len, void *scratch,
                                     void *stream);
/* The same with the header already parsed (wsync_delta_parse_header, on
 * the host's copy of the wire: no read-back), the wire in device memory. */
wsync_status_t wsync_delta_gpu_apply_parsed(void *dst, size_t len, const void *wire, const wsync_delta_header_t *h,
                                            void *scratch, void *stream);

#endif
