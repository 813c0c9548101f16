/* gpu_fp8_parts_bench.c: a GPU trainer rank's parts of shared FP8 bands
 * (docs/FP8.md, "Across trainer ranks") on GPU 0. DeepSeek-V3 experts
 * (2048 x 7168 BF16) under FSDP over many ranks are shared band by band:
 * at 256 ranks a rank holds 8 rows of each expert, each a part of a band 16
 * ranks share. For `parts` such parts (8 x 7168 each, default 768: one
 * layer's 256 experts x 3 matrices), in the same run:
 *   gpu     wsync_fp8_parts_amax_cuda + wsync_fp8_parts_quantize_cuda (two
 *           launches for all parts, descriptors and maxima up and back:
 *           what trainer_side/fp8_amax.c now calls);
 *   host    per part: copy it to the host, wsync_fp8_part_amax_host, then
 *           wsync_fp8_part_quantize_host and copy the codes and scales back
 *           (what a GPU trainer did before);
 *   whole   wsync_fp8_quantize_cuda on the same bytes as unshared bands of
 *           8 rows (one call per part: what a rank pays per band run);
 *   copy    cudaMemcpy device to device of the BF16 bytes (the ceiling).
 * Rates in bytes read + written per second (BF16 read twice and codes
 * written: 5 B per element for gpu and host, 3 B for whole; copy 4 B), host
 * clock, median of `reps` after a warm-up; gpu's and host's codes compared.
 * Usage: gpu_fp8_parts_bench [parts, default 768] [reps, default 5]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/quant/quant.h"

#define ROWS 8
#define COLS 7168

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmpd);
    return v[n / 2];
}

typedef struct {
    size_t np, sc;
    char *d_src, *d_cp;
    uint8_t *d_q;
    float *d_s, *amax;
    wsync_fp8_part_t *parts;
    uint16_t *h_src;
    uint8_t *h_q;
    float *h_s;
} bench_t;

static int run_gpu(bench_t *b)
{
    size_t bp;
    uint64_t be;
    memset(b->amax, 0, b->np * b->sc * sizeof(float));
    return wsync_fp8_parts_amax_cuda(b->parts, b->np, b->amax, b->np * b->sc, &bp, &be, NULL) != WSYNC_OK ||
           wsync_fp8_parts_quantize_cuda(b->parts, b->np, b->amax, b->np * b->sc, NULL) != WSYNC_OK;
}

static int run_host(bench_t *b)
{
    const size_t n = (size_t)ROWS * COLS;
    size_t k;
    for (k = 0; k < b->np; k++) {
        const wsync_fp8_part_t *p = &b->parts[k];
        float *a = b->amax + k * b->sc;
        memset(a, 0, b->sc * sizeof(float));
        if (cudaMemcpy(b->h_src, p->src, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
            wsync_fp8_part_amax_host(b->h_src, WSYNC_QSRC_BF16, p->e0, n, COLS, &p->spec, a, "w") != WSYNC_OK)
            return 1;
        wsync_fp8_part_quantize_host(b->h_src, WSYNC_QSRC_BF16, p->e0, n, COLS, &p->spec, a, b->h_q, b->h_s);
        if (cudaMemcpy(p->q, b->h_q, n, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(p->scale, b->h_s, b->sc * 4, cudaMemcpyHostToDevice) != cudaSuccess)
            return 1;
    }
    return 0;
}

static int run_whole(bench_t *b)
{
    size_t k;
    for (k = 0; k < b->np; k++)
        if (wsync_fp8_quantize_cuda(b->parts[k].src, WSYNC_QSRC_BF16, ROWS, COLS, &b->parts[k].spec, b->parts[k].q,
                                    b->parts[k].scale, "w", NULL) != WSYNC_OK)
            return 1;
    return 0;
}

static int run_copy(bench_t *b)
{
    return cudaMemcpy(b->d_cp, b->d_src, b->np * ROWS * COLS * 2, cudaMemcpyDeviceToDevice) != cudaSuccess ||
           cudaDeviceSynchronize() != cudaSuccess;
}

/* Median seconds of f over reps runs after one warm-up; < 0 on failure. */
static double timed(int (*f)(bench_t *), bench_t *b, int reps)
{
    double t[64];
    int i;
    if (f(b) != 0)
        return -1;
    for (i = 0; i < reps; i++) {
        double t0 = wsync_now_ns() / 1e9;
        if (f(b) != 0)
            return -1;
        t[i] = wsync_now_ns() / 1e9 - t0;
    }
    return med(t, reps);
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    const size_t n = (size_t)ROWS * COLS;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    const wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    uint16_t *src;
    uint8_t *q1, *q2;
    double tg, th, tw, tc, elems;
    size_t i, k;
    int dev = 0;
    b.np = argc > 1 ? (size_t)atol(argv[1]) : 768;
    b.sc = wsync_fp8_scale_cols(&spec, COLS);
    if (b.np < 1 || reps < 1 || reps > 64 || cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
        printf("skipped: needs a CUDA device (usage: gpu_fp8_parts_bench [parts] [reps <= 64])\n");
        return 0;
    }
    elems = (double)b.np * (double)n;
    src = malloc(b.np * n * 2);
    q1 = malloc(b.np * n), q2 = malloc(b.np * n);
    b.amax = calloc(b.np * b.sc, sizeof(float));
    b.parts = calloc(b.np, sizeof(*b.parts));
    b.h_src = malloc(n * 2), b.h_q = malloc(n), b.h_s = malloc(b.sc * 4);
    if (!src || !q1 || !q2 || !b.amax || !b.parts || !b.h_src || !b.h_q || !b.h_s ||
        cudaMalloc((void **)&b.d_src, b.np * n * 2) != cudaSuccess ||
        cudaMalloc((void **)&b.d_cp, b.np * n * 2) != cudaSuccess || cudaMalloc((void **)&b.d_q, b.np * n) ||
        cudaMalloc((void **)&b.d_s, b.np * b.sc * 4) != cudaSuccess) {
        fprintf(stderr, "gpu_fp8_parts_bench: out of memory for %zu parts\n", b.np);
        return 1;
    }
    srand(7);
    for (i = 0; i < b.np * n; i++) /* BF16 of N(0, ~0.02)-like magnitudes over a few binades */
        src[i] = (uint16_t)(0x3c00u + (unsigned)(rand() % 0x0600) + (rand() & 1 ? 0x8000u : 0u));
    cudaMemcpy(b.d_src, src, b.np * n * 2, cudaMemcpyHostToDevice);
    for (k = 0; k < b.np; k++) /* rank 3 of 16 sharing each band: rows 24..31 */
        b.parts[k] =
            (wsync_fp8_part_t){b.d_src + k * n * 2, 24 * (uint64_t)COLS, n, COLS, WSYNC_QSRC_BF16, spec, k * b.sc,
                               b.d_q + k * n,       b.d_s + k * b.sc};
    tg = timed(run_gpu, &b, reps);
    cudaMemcpy(q1, b.d_q, b.np * n, cudaMemcpyDeviceToHost);
    th = timed(run_host, &b, reps);
    cudaMemcpy(q2, b.d_q, b.np * n, cudaMemcpyDeviceToHost);
    tw = timed(run_whole, &b, reps);
    tc = timed(run_copy, &b, reps);
    if (tg < 0 || th < 0 || tw < 0 || tc < 0) {
        fprintf(stderr, "gpu_fp8_parts_bench: a run failed: %s\n", wsync_last_error());
        return 1;
    }
    printf("gpu_fp8_parts_bench: %zu parts of %d x %d BF16 (%.1f MB), parts of bands 16 ranks share, "
           "median of %d\n",
           b.np, ROWS, COLS, elems * 2 / 1e6, reps);
    printf("  gpu   (2 launches for all parts)      %8.2f ms  %7.1f GB/s\n", tg * 1e3, elems * 5 / tg / 1e9);
    printf("  host  (per part: down, quantize, up)  %8.2f ms  %7.1f GB/s\n", th * 1e3, elems * 5 / th / 1e9);
    printf("  whole (one call per 8-row band)       %8.2f ms  %7.1f GB/s\n", tw * 1e3, elems * 3 / tw / 1e9);
    printf("  copy  (cudaMemcpy D2D of the BF16)    %8.2f ms  %7.1f GB/s\n", tc * 1e3, elems * 4 / tc / 1e9);
    printf("  gpu/host speed-up %.1fx; gpu / copy rate %.2f; codes gpu == host: %s\n", th / tg,
           (elems * 5 / tg) / (elems * 4 / tc), memcmp(q1, q2, b.np * n) == 0 ? "yes" : "NO");
    return memcmp(q1, q2, b.np * n) == 0 ? 0 : 1;
}
#else
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 0;
}
#endif
