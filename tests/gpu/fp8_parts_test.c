/* fp8_parts_test.c (GPU): bands that trainer ranks hold in parts, on the GPU
 * (wsync_fp8_parts_amax_cuda, wsync_fp8_parts_quantize_cuda: one launch for
 * many parts). A band is cut at random element offsets (off the row and
 * block grid) into parts; their maxima on the GPU equal the host's part by
 * part, and quantized with the band's merged maxima their codes and scales
 * equal the whole band quantized at once on the host, byte for byte (BF16
 * and F32, fp32 and UE8M0 scales, partial last bands and columns, zero
 * blocks). A NaN or infinity names its part and element; bad parts are
 * refused naming them; without a GPU it says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/quant/quant.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int ngpu;

#if WSYNC_HAVE_CUDA
static uint64_t state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* rows x cols source values of fmt (es bytes each), exact in BF16, over many
 * binades per row, the second block column zero. */
static void fill(unsigned char *src, size_t es, uint64_t rows, uint64_t cols)
{
    uint64_t r, c;
    for (r = 0; r < rows; r++) {
        int e = (int)(rnd() % 30) - 15;
        for (c = 0; c < cols; c++) {
            float v = c >= 128 && c < 256
                          ? 0.0f
                          : ldexpf((float)(rnd() >> 40) / (float)(1 << 24) - 0.5f, e + (int)(rnd() % 4));
            uint32_t b;
            memcpy(&b, &v, 4);
            b &= 0xffff0000u;
            if (es == 2) {
                ((uint16_t *)(void *)src)[r * cols + c] = (uint16_t)(b >> 16);
            } else {
                memcpy(&v, &b, 4);
                ((float *)(void *)src)[r * cols + c] = v;
            }
        }
    }
}

/* One band of rows x cols cut into nparts parts; 1 when the GPU's maxima and
 * bytes equal the host's. */
static int one(uint64_t rows, uint64_t cols, wsync_quant_src_t fmt, wsync_scale_form_t form, size_t nparts)
{
    const size_t es = fmt == WSYNC_QSRC_BF16 ? 2 : 4, n = rows * cols;
    const wsync_fp8_spec_t spec = {128, 128, form};
    const size_t sc = wsync_fp8_scale_cols(&spec, cols);
    unsigned char *src = malloc(n * es + 1), *qh = malloc(n + 1), *qg = malloc(n + 1);
    float *sh = malloc(sc * 4 + 4), *sg = malloc(sc * 4 + 4), *amax = calloc(nparts * sc + 1, 4),
          *ah = calloc(nparts * sc + 1, 4), *band = calloc(sc + 1, 4);
    wsync_fp8_part_t parts[8];
    uint64_t cut[9];
    char *d_src = NULL, *d_q = NULL, *d_s = NULL;
    size_t i, k, bp = 0;
    uint64_t be = 0;
    int ok = 0;

    fill(src, es, rows, cols);
    cut[0] = 0, cut[nparts] = n;
    for (k = 1; k < nparts; k++) /* increasing, off the grid: [k * n / nparts, + cols / 3) */
        cut[k] = k * n / nparts + rnd() % (cols / 3 + 1);
    if (cudaMalloc((void **)&d_src, n * es) || cudaMalloc((void **)&d_q, n) || cudaMalloc((void **)&d_s, sc * 4) ||
        cudaMemcpy(d_src, src, n * es, cudaMemcpyHostToDevice))
        goto out;
    for (k = 0; k < nparts; k++) {
        parts[k] = (wsync_fp8_part_t){d_src + cut[k] * es,
                                      cut[k],
                                      cut[k + 1] - cut[k],
                                      cols,
                                      fmt,
                                      spec,
                                      k * sc,
                                      (uint8_t *)d_q + cut[k],
                                      k == 0 ? (float *)(void *)d_s : NULL};
        if (wsync_fp8_part_amax_host(src + cut[k] * es, fmt, cut[k], cut[k + 1] - cut[k], cols, &spec, ah + k * sc,
                                     "w") != WSYNC_OK)
            goto out;
    }
    if (wsync_fp8_parts_amax_cuda(parts, nparts, amax, nparts * sc, &bp, &be, NULL) != WSYNC_OK ||
        memcmp(amax, ah, nparts * sc * 4) != 0) {
        fprintf(stderr, "  %llu x %llu, %zu parts: GPU maxima differ from the host's (%s)\n",
                (unsigned long long)rows, (unsigned long long)cols, nparts, wsync_last_error());
        goto out;
    }
    for (k = 0; k < nparts; k++) /* the exchange: every part gets the band's maxima */
        for (i = 0; i < sc; i++)
            band[i] = amax[k * sc + i] > band[i] ? amax[k * sc + i] : band[i];
    for (k = 0; k < nparts; k++)
        memcpy(amax + k * sc, band, sc * 4);
    if (wsync_fp8_parts_quantize_cuda(parts, nparts, amax, nparts * sc, NULL) != WSYNC_OK ||
        wsync_fp8_quantize_host(src, fmt, rows, cols, &spec, qh, sh, "w") != WSYNC_OK ||
        cudaMemcpy(qg, d_q, n, cudaMemcpyDeviceToHost) || cudaMemcpy(sg, d_s, sc * 4, cudaMemcpyDeviceToHost))
        goto out;
    ok = memcmp(qh, qg, n) == 0 && memcmp(sh, sg, sc * 4) == 0;
    if (!ok)
        fprintf(stderr, "  %llu x %llu %s %s, %zu parts: GPU codes or scales differ from the whole band's\n",
                (unsigned long long)rows, (unsigned long long)cols, es == 2 ? "bf16" : "f32",
                wsync_scale_form_name(form), nparts);
out:
    cudaFree(d_src), cudaFree(d_q), cudaFree(d_s);
    free(src), free(qh), free(qg), free(sh), free(sg), free(amax), free(ah), free(band);
    return ok;
}
#endif

static void parts_equal_the_whole_band(void)
{
#if WSYNC_HAVE_CUDA
    static const uint64_t shapes[][2] = {{128, 1024}, {128, 300}, {77, 7168}, {5, 515}, {128, 129}};
    size_t i, parts;
    int form, bad = 0, runs = 0;
    if (ngpu == 0)
        SKIP("no CUDA device");
    for (form = 0; form < 2; form++)
        for (i = 0; i < WSYNC_ARRAY_LEN(shapes); i++)
            for (parts = 1; parts <= 5; parts += 2, runs += 2) {
                bad += !one(shapes[i][0], shapes[i][1], WSYNC_QSRC_BF16, (wsync_scale_form_t)form, parts);
                bad += !one(shapes[i][0], shapes[i][1], WSYNC_QSRC_F32, (wsync_scale_form_t)form, parts);
            }
    CHECK_EQ(bad, 0);
    CHECK_EQ(runs, 60);
#else
    SKIP("built without CUDA");
#endif
}

static void nan_named_and_bad_parts_refused(void)
{
#if WSYNC_HAVE_CUDA
    uint16_t h[64 * 300];
    char *d = NULL;
    float amax[3 * 3] = {0};
    const wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    wsync_fp8_part_t p[3];
    size_t bp = 99;
    uint64_t be = 0;
    if (ngpu == 0)
        SKIP("no CUDA device");
    memset(h, 0, sizeof(h));
    h[9000] = 0x7fc0; /* NaN: element 9000 - 7000 of part 1 */
    h[15000] = 0x7f80;
    CHECK(cudaMalloc((void **)&d, sizeof(h)) == cudaSuccess);
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    p[0] = (wsync_fp8_part_t){d, 0, 7000, 300, WSYNC_QSRC_BF16, spec, 0, NULL, NULL};
    p[1] = (wsync_fp8_part_t){d + 7000 * 2, 7000, 7000, 300, WSYNC_QSRC_BF16, spec, 3, NULL, NULL};
    p[2] = (wsync_fp8_part_t){d + 14000 * 2, 14000, 64 * 300 - 14000, 300, WSYNC_QSRC_BF16, spec, 6, NULL, NULL};
    CHECK_FAILS(wsync_fp8_parts_amax_cuda(p, 3, amax, 9, &bp, &be, NULL), WSYNC_ERR_INVALID,
                "band part 1 holds NaN or an infinity at its element 2000");
    CHECK_EQ(bp, 1);
    CHECK_EQ(be, 2000);
    h[9000] = 0;
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_FAILS(wsync_fp8_parts_amax_cuda(p, 3, amax, 9, &bp, &be, NULL), WSYNC_ERR_INVALID, "band part 2");
    CHECK_EQ(be, 1000);
    CHECK_FAILS(wsync_fp8_parts_amax_cuda(p, 3, amax, 8, &bp, &be, NULL), WSYNC_ERR_INVALID,
                "band part 2 (elements 14000 + 5200 of a band of 300 columns, blocks of 128 x 128, maxima at 6 of "
                "8)");
    p[1].e0 = 128 * 300;
    CHECK_FAILS(wsync_fp8_parts_quantize_cuda(p, 3, amax, 9, NULL), WSYNC_ERR_INVALID, "is not a part of one band");
    cudaFree(d);
#else
    SKIP("built without CUDA");
#endif
}

static void without_gpu_it_says_why(void)
{
    wsync_fp8_part_t p = {NULL, 0, 1, 1, WSYNC_QSRC_BF16, {128, 128, WSYNC_SCALE_FP32}, 0, NULL, NULL};
    float amax[1] = {0};
    size_t bp;
    uint64_t be;
    if (ngpu > 0)
        SKIP("a CUDA device is present");
    CHECK(wsync_fp8_parts_amax_cuda(&p, 1, amax, 1, &bp, &be, NULL) != WSYNC_OK);
    CHECK(wsync_last_error()[0] != '\0');
}

int main(void)
{
    ngpu = gpu_count();
    RUN(parts_equal_the_whole_band);
    RUN(nan_named_and_bad_parts_refused);
    RUN(without_gpu_it_says_why);
    TEST_EXIT();
}
