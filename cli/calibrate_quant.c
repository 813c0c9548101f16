/* calibrate_quant.c: the FP8 classes of `wsync calibrate`: block FP8
 * quantization (docs/FP8.md; common/quant/quant.h) of a bf16 matrix with
 * 128 x 128 blocks and fp32 scales, on one CPU thread and on GPU 0 when
 * there is one, in bytes of the bf16 source per second. */
#include <stdlib.h>
#include <string.h>

#include "cli/calibrate.h"
#include "common/base/util.h"
#include "common/quant/quant.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define QUANT_COLS 7168 /* DeepSeek-V3's hidden size: 56 blocks across */
#define QUANT_GPU_BYTES ((size_t)448 << 20)

static const wsync_fp8_spec_t spec = {.block_rows = 128, .block_cols = 128, .form = WSYNC_SCALE_FP32};

/* Finite bf16 values of varied magnitude (no NaN: the quantizer refuses it). */
static void fill_bf16(uint16_t *v, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = (uint16_t)(((x >> 20) & 0x8000) | (0x3800 + (x & 0x0fff))); /* |v| in [2^-15, 2^-7) */
    }
}

static void calib_quant_host(calib_t *cb, const uint16_t *src, uint64_t rows)
{
    uint8_t *q = malloc(rows * QUANT_COLS);
    float *sc = malloc(wsync_fp8_scale_rows(&spec, rows) * wsync_fp8_scale_cols(&spec, QUANT_COLS) * sizeof(float));
    double r[64];
    if (q == NULL || sc == NULL) {
        calib_absent(cb, COST_QUANT_HOST, "out of memory");
        goto out;
    }
    for (int i = -1; i < cb->reps; i++) {
        uint64_t t0 = wsync_now_ns();
        if (wsync_fp8_quantize_host(src, WSYNC_QSRC_BF16, rows, QUANT_COLS, &spec, q, sc, "calibrate") != WSYNC_OK)
            goto out;
        if (i >= 0)
            r[i] = (double)(rows * QUANT_COLS * 2) / ((wsync_now_ns() - t0) / 1e9);
    }
    calib_set(cb, COST_QUANT_HOST, r, cb->reps, 0, "FP8 quantization on one thread, bf16, 128 x 128 blocks");
out:
    free(q);
    free(sc);
}

#if WSYNC_HAVE_CUDA
static void calib_quant_gpu(calib_t *cb, const uint16_t *src, uint64_t rows)
{
    size_t len = rows * QUANT_COLS * 2;
    size_t slen = wsync_fp8_scale_rows(&spec, rows) * wsync_fp8_scale_cols(&spec, QUANT_COLS) * sizeof(float);
    void *ds = NULL, *dq = NULL, *dsc = NULL;
    double r[64];
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        calib_absent(cb, COST_QUANT_GPU, "skipped: no CUDA device");
        return;
    }
    if (cudaSetDevice(0) || cudaMalloc(&ds, len) || cudaMalloc(&dq, len / 2) || cudaMalloc(&dsc, slen) ||
        cudaMemcpy(ds, src, len, cudaMemcpyHostToDevice)) {
        calib_absent(cb, COST_QUANT_GPU, "GPU 0: could not allocate the buffers");
        goto out;
    }
    for (int i = -1; i < cb->reps; i++) {
        uint64_t t0 = wsync_now_ns();
        if (wsync_fp8_quantize_cuda(ds, WSYNC_QSRC_BF16, rows, QUANT_COLS, &spec, dq, dsc, "calibrate", NULL) !=
            WSYNC_OK)
            goto out;
        if (i >= 0)
            r[i] = (double)len / ((wsync_now_ns() - t0) / 1e9);
    }
    calib_set(cb, COST_QUANT_GPU, r, cb->reps, 0, "GPU 0: FP8 quantization kernel, bf16, 128 x 128 blocks");
out:
    cudaFree(ds), cudaFree(dq), cudaFree(dsc);
}
#endif

void calib_quant(calib_t *cb)
{
    /* whole block rows of the calibration size (at least one), and a bigger
     * matrix for the GPU, whose kernel a small one would not fill */
    uint64_t rows = cb->bytes / (QUANT_COLS * 2) / 128 * 128, grows = QUANT_GPU_BYTES / (QUANT_COLS * 2);
    uint16_t *src;
    if (rows == 0)
        rows = 128;
    if (grows < rows)
        grows = rows;
    src = malloc(grows * QUANT_COLS * 2);
    if (src == NULL) {
        fprintf(cb->log, "calibrate: quant: out of memory for %llu bytes\n",
                (unsigned long long)(grows * QUANT_COLS * 2));
        return;
    }
    fill_bf16(src, grows * QUANT_COLS);
    calib_quant_host(cb, src, rows);
#if WSYNC_HAVE_CUDA
    calib_quant_gpu(cb, src, grows);
#else
    calib_absent(cb, COST_QUANT_GPU, "skipped: built without CUDA");
#endif
    free(src);
}
