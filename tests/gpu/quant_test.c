/* quant_test.c (GPU): the FP8 quantization kernel equals the host quantizer
 * byte for byte (codes and scales) on BF16 and F32 matrices of many shapes:
 * whole 128 x 128 tiles (the register path), partial edge blocks, column
 * counts off the 8-element vector, unaligned sources, other block shapes,
 * fp32 and UE8M0 scales, values over many binades with zero blocks and
 * outliers, a block of tiny values (amax under 2^-100: the fast kernel
 * divides there); both kernels (the fast one, and WSYNC_QUANT_GPU=v1); a NaN or infinity is refused naming the tensor, row and column;
 * without a GPU it says why. With WSYNC_QUANT_DUMP=DIR it writes one BF16
 * matrix and the kernel's codes and scales there for quant_torch_test.sh,
 * which compares them with torch.float8_e4m3fn. */
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
static int tiny; /* fill: scale one block by 2^-130 (amax under 2^-100) */
static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Values over many binades per row, a zero 128 x 128 tile, one outlier. */
static void fill(float *f, uint64_t rows, uint64_t cols)
{
    uint64_t r, c;
    for (r = 0; r < rows; r++) {
        int e = (int)(rnd() % 40) - 20;
        for (c = 0; c < cols; c++) {
            float v = ldexpf((float)(rnd() >> 40) / (float)(1 << 24) - 0.5f, e + (int)(rnd() % 4));
            uint32_t b;
            memcpy(&b, &v, 4);
            b &= 0xffff0000u; /* exact in BF16 */
            memcpy(&f[r * cols + c], &b, 4);
        }
    }
    for (r = 0; r < rows && r < 128; r++)
        for (c = 128; c < cols && c < 256; c++)
            f[r * cols + c] = 0.0f;
    if (rows > 200 && cols > 3)
        f[200 * cols + 3] = 3e37f;
    for (r = 128; tiny && r < rows && r < 256; r++)
        for (c = 256; c < cols && c < 384; c++)
            f[r * cols + c] = ldexpf(f[r * cols + c], -130);
}

/* Quantizes on both and compares; src_off shifts the device source by bytes. */
static int one(uint64_t rows, uint64_t cols, wsync_quant_src_t fmt, int br, int bc, wsync_scale_form_t form,
               size_t src_off, const char *dump)
{
    const size_t es = fmt == WSYNC_QSRC_BF16 ? 2 : 4, n = rows * cols;
    wsync_fp8_spec_t spec = {br, bc, form};
    const size_t ns = wsync_fp8_scale_rows(&spec, rows) * wsync_fp8_scale_cols(&spec, cols);
    float *f = malloc(n * 4 + 4), *sh = malloc(ns * 4 + 4), *sg = malloc(ns * 4 + 4);
    unsigned char *src = malloc(n * es + 4), *qh = malloc(n + 1), *qg = malloc(n + 1);
    void *d_src = NULL, *d_q = NULL, *d_s = NULL;
    int ok = 0;
    size_t i;

    fill(f, rows, cols);
    for (i = 0; i < n; i++) {
        if (es == 2) {
            uint32_t b;
            memcpy(&b, &f[i], 4);
            ((uint16_t *)(void *)src)[i] = (uint16_t)(b >> 16);
        } else {
            ((float *)(void *)src)[i] = f[i];
        }
    }
    if (cudaMalloc(&d_src, n * es + 64) || cudaMalloc(&d_q, n + 64) || cudaMalloc(&d_s, ns * 4 + 64) ||
        cudaMemcpy((char *)d_src + src_off, src, n * es, cudaMemcpyHostToDevice))
        goto out;
    if (wsync_fp8_quantize_host(src, fmt, rows, cols, &spec, qh, sh, "w") != WSYNC_OK ||
        wsync_fp8_quantize_cuda((char *)d_src + src_off, fmt, rows, cols, &spec, d_q, d_s, "w", NULL) != WSYNC_OK) {
        fprintf(stderr, "  %llu x %llu: %s\n", (unsigned long long)rows, (unsigned long long)cols,
                wsync_last_error());
        goto out;
    }
    if (cudaMemcpy(qg, d_q, n, cudaMemcpyDeviceToHost) || cudaMemcpy(sg, d_s, ns * 4, cudaMemcpyDeviceToHost))
        goto out;
    ok = memcmp(qh, qg, n) == 0 && memcmp(sh, sg, ns * 4) == 0;
    if (!ok) {
        for (i = 0; i < n && qh[i] == qg[i]; i++)
            ;
        fprintf(stderr, "  %llu x %llu %s blocks %dx%d %s +%zu: GPU differs from the host (first code at %zu)\n",
                (unsigned long long)rows, (unsigned long long)cols, es == 2 ? "bf16" : "f32", br, bc,
                wsync_scale_form_name(form), src_off, i);
    }
    if (ok && dump != NULL) {
        char path[4096];
        FILE *fh;
        snprintf(path, sizeof(path), "%s/quant_%s.bin", dump, wsync_scale_form_name(form));
        fh = fopen(path, "wb");
        ok = fh && fprintf(fh, "%llu %llu\n", (unsigned long long)rows, (unsigned long long)cols) > 0 &&
             fwrite(src, es, n, fh) == n && fwrite(qg, 1, n, fh) == n && fwrite(sg, 4, ns, fh) == ns;
        if (fh)
            fclose(fh);
    }
out:
    cudaFree(d_src);
    cudaFree(d_q);
    cudaFree(d_s);
    free(f), free(sh), free(sg), free(src), free(qh), free(qg);
    return ok;
}
#endif

static void kernel_equals_host(void)
{
#if WSYNC_HAVE_CUDA
    static const uint64_t shapes[][2] = {{128, 128}, {1024, 1536}, {300, 200}, {257, 129}, {130, 131}, {7, 5000}};
    const char *dump = getenv("WSYNC_QUANT_DUMP");
    size_t i;
    int form, v, bad = 0;
    if (ngpu == 0)
        SKIP("no CUDA device");
    for (v = 0; v < 2; v++) { /* the fast kernel (WSYNC_QUANT_GPU=v2), then the first (v1) */
        setenv("WSYNC_QUANT_GPU", v == 0 ? "v2" : "v1", 1);
        for (form = 0; form < 2; form++) {
            for (i = 0; i < WSYNC_ARRAY_LEN(shapes); i++) {
                bad += !one(shapes[i][0], shapes[i][1], WSYNC_QSRC_BF16, 128, 128, (wsync_scale_form_t)form, 0,
                            i == 1 && v == 0 ? dump : NULL);
                bad += !one(shapes[i][0], shapes[i][1], WSYNC_QSRC_F32, 128, 128, (wsync_scale_form_t)form, 0, NULL);
            }
            bad += !one(1024, 1536, WSYNC_QSRC_BF16, 128, 128, (wsync_scale_form_t)form, 2, NULL); /* unaligned */
            bad += !one(300, 200, WSYNC_QSRC_BF16, 64, 32, (wsync_scale_form_t)form, 0, NULL);
            bad += !one(300, 200, WSYNC_QSRC_F32, 1, 128, (wsync_scale_form_t)form, 0, NULL);
            tiny = 1;
            bad += !one(300, 400, WSYNC_QSRC_BF16, 128, 128, (wsync_scale_form_t)form, 0, NULL);
            tiny = 0;
        }
        unsetenv("WSYNC_QUANT_GPU");
    }
    CHECK_EQ(bad, 0);
#else
    SKIP("built without CUDA");
#endif
}

static void nan_and_infinity_refused_on_the_gpu(void)
{
#if WSYNC_HAVE_CUDA
    uint16_t h[256 * 256];
    void *d_src = NULL, *d_q = NULL, *d_s = NULL;
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    if (ngpu == 0)
        SKIP("no CUDA device");
    memset(h, 0, sizeof(h));
    h[130 * 256 + 77] = 0x7fc0;  /* NaN, in the register path's tile */
    h[200 * 256 + 250] = 0x7f80; /* +inf, later */
    CHECK(cudaMalloc(&d_src, sizeof(h)) == cudaSuccess && cudaMalloc(&d_q, 256 * 256) == cudaSuccess &&
          cudaMalloc(&d_s, 64) == cudaSuccess);
    CHECK(cudaMemcpy(d_src, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_FAILS(wsync_fp8_quantize_cuda(d_src, WSYNC_QSRC_BF16, 256, 256, &spec, d_q, d_s, "experts.3.w", NULL),
                WSYNC_ERR_INVALID, "'experts.3.w' holds NaN or an infinity at row 130, column 77");
    h[130 * 256 + 77] = 0;
    CHECK(cudaMemcpy(d_src, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_FAILS(wsync_fp8_quantize_cuda(d_src, WSYNC_QSRC_BF16, 256, 256, &spec, d_q, d_s, "w", NULL),
                WSYNC_ERR_INVALID, "at row 200, column 250");
    h[200 * 256 + 250] = 0;
    CHECK(cudaMemcpy(d_src, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_OK(wsync_fp8_quantize_cuda(d_src, WSYNC_QSRC_BF16, 256, 256, &spec, d_q, d_s, "w", NULL));
    cudaFree(d_src);
    cudaFree(d_q);
    cudaFree(d_s);
#else
    SKIP("built without CUDA");
#endif
}

static void without_gpu_it_says_why(void)
{
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    if (ngpu > 0)
        SKIP("a CUDA device is present");
    CHECK(wsync_fp8_quantize_cuda(NULL, WSYNC_QSRC_BF16, 1, 1, &spec, NULL, NULL, "w", NULL) != WSYNC_OK);
    CHECK(wsync_last_error()[0] != '\0');
}

int main(void)
{
    ngpu = gpu_count();
    RUN(kernel_equals_host);
    RUN(nan_and_infinity_refused_on_the_gpu);
    RUN(without_gpu_it_says_why);
    TEST_EXIT();
}
