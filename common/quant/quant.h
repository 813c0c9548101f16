/* quant.h: block FP8 quantization (issue 29), the one definition of
 * docs/FP8.md: per block of block_rows x block_cols elements of a row-major
 * matrix, amax = max |x| (a block of zeros gets scale 1), scale = amax / 448
 * in fp32 (UE8M0: rounded up to a power of two), q = x / scale in fp32,
 * rounded to the nearest float8_e4m3fn (ties to even) and saturated to
 * +-448. A NaN or an infinity is refused, naming the tensor and the element.
 * The host code here and the CUDA kernel (quant_cuda.cu, quant_gpu.c) give
 * the same bytes. Pure functions, thread-safe. */
#ifndef WSYNC_COMMON_QUANT_H
#define WSYNC_COMMON_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_FP8_E4M3_MAX 448.0f
#define WSYNC_FP8_DEFAULT_BLOCK 128

typedef enum wsync_scale_form {
    WSYNC_SCALE_FP32 = 0,  /* scale = amax / 448 */
    WSYNC_SCALE_UE8M0 = 1, /* scale = amax / 448 rounded up to 2^k (stored as fp32) */
} wsync_scale_form_t;

/* Element formats a quantizer reads. */
typedef enum wsync_quant_src {
    WSYNC_QSRC_BF16 = 0,
    WSYNC_QSRC_F32 = 1,
} wsync_quant_src_t;

typedef struct wsync_fp8_spec {
    int block_rows, block_cols; /* >= 1; 128 x 128 for DeepSeek-V3-style checkpoints */
    wsync_scale_form_t form;
} wsync_fp8_spec_t;

/* "fp32" / "ue8m0", and parsing them (0, or -1 for an unknown name). */
const char *wsync_scale_form_name(wsync_scale_form_t f);
int wsync_scale_form_parse(const char *name, wsync_scale_form_t *out);

/* The e4m3fn byte of a finite x: nearest, ties to even, saturated to +-448
 * (0x7e / 0xfe); the sign of a zero is kept. */
uint8_t wsync_fp8_e4m3_encode(float x);
/* The value of an e4m3fn byte (0x7f / 0xff: NaN). */
float wsync_fp8_e4m3_decode(uint8_t b);
/* The scale of a block whose max |x| is amax (finite, >= 0). */
float wsync_fp8_scale(float amax, wsync_scale_form_t form);

/* Rows of scales for `rows` x `cols`: ceil(rows / block_rows) x ceil(cols / block_cols). */
uint64_t wsync_fp8_scale_rows(const wsync_fp8_spec_t *s, uint64_t rows);
uint64_t wsync_fp8_scale_cols(const wsync_fp8_spec_t *s, uint64_t cols);

/* Quantizes the row-major rows x cols matrix `src` (format fmt, rows back to
 * back) into q (rows x cols bytes) and scale (scale_rows x scale_cols fp32,
 * row-major). A NaN or infinity fails with WSYNC_ERR_INVALID naming `what`
 * (the tensor) and the element's row and column; q and scale are then
 * partly written. Blocking. */
wsync_status_t wsync_fp8_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q, float *scale, const char *what);

/* A block row (a band) that trainer ranks hold in parts (docs/FP8.md,
 * "Across trainer ranks"): elements [e0, e0 + n) of a band of `cols` columns
 * (element 0 its first row's first), src pointing at element e0. part_amax
 * raises amax[c] (ceil(cols / block_cols) of them, the caller's zeros or
 * another part's maxima) to max |x| over the part's elements of block column
 * c; a NaN or infinity fails naming `what` and its row in the band and
 * column. part_quantize quantizes the part with the scales of the whole
 * band's maxima amax into q[n] and, when scale is not NULL, writes those
 * scales: parts quantized with the maxima of every part give exactly
 * wsync_fp8_quantize_host's bytes of the whole band. */
wsync_status_t wsync_fp8_part_amax_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n,
                                        uint64_t cols, const wsync_fp8_spec_t *spec, float *amax, const char *what);
void wsync_fp8_part_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n, uint64_t cols,
                                  const wsync_fp8_spec_t *spec, const float *amax, uint8_t *q, float *scale);

/* The same on a GPU: one kernel launch on `stream` (a cudaStream_t; NULL:
 * the default stream) over device memory src, q and scale, then a wait for
 * it (the NaN check needs its result). Gives the bytes of
 * wsync_fp8_quantize_host. Without CUDA: WSYNC_ERR_UNSUPPORTED. */
wsync_status_t wsync_fp8_quantize_cuda(const void *src_dev, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q_dev, float *scale_dev,
                                       const char *what, void *stream);

/* Many band parts at once on a GPU: wsync_fp8_part_amax_host and
 * wsync_fp8_part_quantize_host for each part, src, q and scale in device
 * memory, one kernel launch for all (a trainer rank of thin FSDP shards
 * holds thousands). amax (host memory, namax floats) holds each part's
 * ceil(cols / block_cols) maxima from amax_at on, ranges not overlapping.
 * parts_amax raises them; a NaN or an infinity fails with
 * WSYNC_ERR_INVALID and *bad_part, *bad_elem (counted from the part's first
 * element) set, for the caller to name the tensor. parts_quantize writes
 * each part's codes and, where scale is not NULL, its scales, with amax's
 * maxima. Blocking. Without CUDA: WSYNC_ERR_UNSUPPORTED. */
typedef struct wsync_fp8_part {
    const void *src;      /* device: the part's first element (element e0 of its band) */
    uint64_t e0, n, cols; /* as wsync_fp8_part_amax_host */
    wsync_quant_src_t fmt;
    wsync_fp8_spec_t spec;
    size_t amax_at; /* its maxima in amax */
    uint8_t *q;     /* device: n codes (parts_quantize) */
    float *scale;   /* device: its scales, or NULL (parts_quantize) */
} wsync_fp8_part_t;

wsync_status_t wsync_fp8_parts_amax_cuda(const wsync_fp8_part_t *parts, size_t nparts, float *amax, size_t namax,
                                         size_t *bad_part, uint64_t *bad_elem, void *stream);
wsync_status_t wsync_fp8_parts_quantize_cuda(const wsync_fp8_part_t *parts, size_t nparts, const float *amax,
                                             size_t namax, void *stream);

#endif
