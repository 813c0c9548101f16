/* quant_cuda.h: the FP8 block quantization kernel, callable from C. Only
 * built with CUDA (WSYNC_HAVE_CUDA); callers go through
 * wsync_fp8_quantize_cuda (quant_gpu.c). */
#ifndef WSYNC_COMMON_QUANT_CUDA_H
#define WSYNC_COMMON_QUANT_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Quantizes the row-major rows x cols matrix at src (fmt: 0 bf16, 1 fp32)
 * into q and scale, one thread block per block_rows x block_cols block,
 * asynchronously on `stream`. *bad_dev (set to UINT64_MAX by the caller)
 * becomes the smallest flat index (row * cols + col) of a NaN or infinity.
 * Returns a cudaError_t as int (0 = launched). bf16 in 128 x 128 blocks with
 * cols % 8 == 0, src on 16 bytes and q on 8 takes the fast kernel
 * (quant_cuda_v2.cu) unless WSYNC_QUANT_GPU=v1; anything else the first. */
int wsync_cuda_fp8_quant_async(const void *src, int fmt, uint64_t rows, uint64_t cols, int block_rows,
                               int block_cols, int ue8m0, uint8_t *q, float *scale, unsigned long long *bad_dev,
                               void *stream);

/* The fast kernel alone, under the conditions above (not checked here). */
int wsync_cuda_fp8_quant_v2_async(const void *src, uint64_t rows, uint64_t cols, int ue8m0, uint8_t *q,
                                  float *scale, unsigned long long *bad_dev, void *stream);

#ifdef __cplusplus
}
#endif

#endif
