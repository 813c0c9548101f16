/* quant_cuda.h: the FP8 block quantization kernel, callable from C. Only
 * built with CUDA (WSYNC_HAVE_CUDA); callers go through
 * wsync_fp8_quantize_cuda (quant_gpu.c). */
#ifndef WSYNC_COMMON_QUANT_CUDA_H
#define WSYNC_COMMON_QUANT_CUDA_H

#include <stddef.h>
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

/* quant_cuda_parts.cu: band parts (quant.h's wsync_fp8_parts_*_cuda). The
 * descriptors are an array of wsync_cuda_fp8_part_desc_size() bytes each,
 * filled by _desc_set and copied to the device; first_dev[p] is part p's
 * first thread block (one per block column of its band), nblocks in all.
 * quantize 0: raises amax_dev to the parts' maxima, *bad_dev (set to
 * UINT64_MAX by the caller) the smallest (part << 40 | element) holding a
 * NaN or an infinity; 1: the codes and scales with amax_dev's maxima. */
int wsync_cuda_fp8_parts_async(int quantize, const void *parts_dev, const uint64_t *first_dev, uint32_t nparts,
                               uint64_t nblocks, float *amax_dev, unsigned long long *bad_dev, void *stream);
size_t wsync_cuda_fp8_part_desc_size(void);
void wsync_cuda_fp8_part_desc_set(void *descs, size_t i, const void *src, uint64_t e0, uint64_t n, uint64_t cols,
                                  uint64_t amax_at, uint8_t *q, float *scale, int fmt, int bc, int ue8m0);

#ifdef __cplusplus
}
#endif

#endif
