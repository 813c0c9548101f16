/* gpu_quant_bench.c: the FP8 block quantization kernel (docs/FP8.md) on GPU
 * 0 over DeepSeek-V3-shaped BF16 weights, against device-to-device
 * cudaMemcpy measured in the same run, in bytes read + written per second
 * (quantize: 2 B read + 1 B written per element plus the scales; copy: 2 B
 * read + 2 B written; target: quantize >= 0.8 of the copy):
 *   kernel   wsync_cuda_fp8_quant_async alone (what a pack fused with it
 *            pays): the first kernel (WSYNC_QUANT_GPU=v1) and the fast one
 *            (quant_cuda_v2.cu) with fp32 scales, the fast one with UE8M0;
 *   call     wsync_fp8_quantize_cuda (launch, NaN-flag read back, stream
 *            synchronised: what one call per tensor pays).
 * GPU times are CUDA events, median of `reps` after 2 warm-ups; the host
 * clock for `call`. Both kernels' bytes are compared with the host quantizer
 * on every shape (edge blocks too: 576 rows is 4.5 blocks). Usage: gpu_quant_bench [reps, default 20]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#include <time.h>

#include "common/quant/quant.h"
#include "common/quant/quant_cuda.h"

#define CU(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "gpu_quant_bench: %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *what;
        uint64_t rows, cols;
    } shapes[] = {
        {"w13 expert [4096, 7168] x 8", 8 * 4096, 7168}, {"w2 expert [7168, 2048] x 8", 8 * 7168, 2048},
        {"dense gate_up [36864, 7168]", 36864, 7168},    {"q_b_proj [24576, 1536]", 24576, 1536},
        {"kv_a_proj_with_mqa [576, 7168]", 576, 7168},
    };
    int reps = argc > 1 ? atoi(argv[1]) : 20, i, k, dev = 0;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    unsigned long long *bad;
    float *ms = calloc((size_t)reps + 2, sizeof(float));
    struct cudaDeviceProp prop;

    if (reps < 1 || cudaSetDevice(dev) != cudaSuccess) {
        printf("gpu_quant_bench: skipped: no CUDA device\n");
        return 0;
    }
    CU(cudaGetDeviceProperties(&prop, dev));
    CU(cudaStreamCreate(&s));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    CU(cudaMalloc((void **)&bad, sizeof(*bad)));
    printf("gpu_quant_bench: %s, median of %d\n", prop.name, reps);
    printf("%-32s %9s %10s %10s %10s %10s %6s %6s %10s\n", "shape", "MiB bf16", "copy GB/s", "v1 GB/s",
           "fp32 GB/s", "ue8m0 GB/s", "v1/cp", "ratio", "call GB/s");
    for (i = 0; i < (int)(sizeof(shapes) / sizeof(shapes[0])); i++) {
        const uint64_t R = shapes[i].rows, C = shapes[i].cols, n = R * C;
        const wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
        const uint64_t ns = wsync_fp8_scale_rows(&spec, R) * wsync_fp8_scale_cols(&spec, C);
        double gbs[4], call_t;
        uint16_t *h = malloc(n * 2);
        void *src, *dst, *q, *sc;
        int mode;
        for (k = 0; k < (int)(n < 4096 ? n : 4096); k++) /* a pattern; the kernel's speed does not depend on it */
            h[k] = (uint16_t)(0x3c00 + (rand() & 0x3ff)) ^ (uint16_t)((k & 1) << 15);
        for (; (uint64_t)k < n; k++)
            h[k] = h[k % 4096] + (uint16_t)((k / 4096) & 0x7f);
        CU(cudaMalloc(&src, n * 2));
        CU(cudaMalloc(&dst, n * 2));
        CU(cudaMalloc(&q, n));
        CU(cudaMalloc(&sc, ns * 4));
        CU(cudaMemcpy(src, h, n * 2, cudaMemcpyHostToDevice));
        for (mode = 0; mode < 4; mode++) { /* copy, v1 fp32, fp32, ue8m0 */
            if (mode == 1)
                setenv("WSYNC_QUANT_GPU", "v1", 1);
            else
                setenv("WSYNC_QUANT_GPU", "v2", 1);
            for (k = 0; k < reps + 2; k++) {
                CU(cudaMemsetAsync(bad, 0xff, sizeof(*bad), s));
                CU(cudaEventRecord(e0, s));
                if (mode == 0)
                    CU(cudaMemcpyAsync(dst, src, n * 2, cudaMemcpyDeviceToDevice, s));
                else
                    CU((cudaError_t)wsync_cuda_fp8_quant_async(src, 0, R, C, 128, 128, mode == 3, q, sc, bad, s));
                CU(cudaEventRecord(e1, s));
                CU(cudaEventSynchronize(e1));
                CU(cudaEventElapsedTime(&ms[k], e0, e1));
            }
            qsort(ms + 2, (size_t)reps, sizeof(float), cmpf);
            gbs[mode] = (double)(mode == 0 ? 4 * n : 3 * n + 4 * ns) / (ms[2 + reps / 2] * 1e-3) / 1e9;
        }
        for (mode = 0; mode < 2; mode++) { /* the kernels' bytes are the host's: v1, then the fast one */
            uint8_t *qh = malloc(n), *qg = malloc(n);
            float *sh = malloc(ns * 4), *sg = malloc(ns * 4);
            if (mode == 0)
                setenv("WSYNC_QUANT_GPU", "v1", 1);
            else
                setenv("WSYNC_QUANT_GPU", "v2", 1);
            wsync_fp8_quantize_host(h, WSYNC_QSRC_BF16, R, C, &spec, qh, sh, "bench");
            CU(cudaMemset(q, 0x55, n));
            if (wsync_fp8_quantize_cuda(src, WSYNC_QSRC_BF16, R, C, &spec, q, sc, "bench", s) != 0)
                return 1;
            CU(cudaMemcpy(qg, q, n, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(sg, sc, ns * 4, cudaMemcpyDeviceToHost));
            if (memcmp(qh, qg, n) || memcmp(sh, sg, ns * 4)) {
                fprintf(stderr, "gpu_quant_bench: %s: the %s kernel's bytes differ from the host's\n",
                        shapes[i].what, mode == 0 ? "v1" : "fast");
                return 1;
            }
            free(qh), free(qg), free(sh), free(sg);
        }
        call_t = now_s();
        for (k = 0; k < reps; k++)
            if (wsync_fp8_quantize_cuda(src, WSYNC_QSRC_BF16, R, C, &spec, q, sc, "bench", s) != 0)
                return 1;
        call_t = (now_s() - call_t) / reps;
        printf("%-32s %9.1f %10.0f %10.0f %10.0f %10.0f %6.2f %6.2f %10.0f\n", shapes[i].what,
               (double)n * 2 / (1 << 20), gbs[0], gbs[1], gbs[2], gbs[3], gbs[1] / gbs[0], gbs[2] / gbs[0],
               (double)(3 * n + 4 * ns) / call_t / 1e9);
        cudaFree(src), cudaFree(dst), cudaFree(q), cudaFree(sc);
        free(h);
    }
    free(ms);
    return 0;
}

#else

int main(void)
{
    printf("gpu_quant_bench: skipped: built without CUDA\n");
    return 0;
}

#endif
