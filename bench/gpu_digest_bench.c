/* gpu_digest_bench.c: the GPU digest kernel's speed on a 4 GiB buffer of
 * GPU 0 (bytes read per second), against a device-to-device copy of the same
 * buffer measured in the same run (its bytes copied per second: about
 * 2120 GB/s on an H200), and that it equals the CPU digest of the same
 * bytes. */
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "common/digest.h"
#include "common/digest_cuda.h"
#include "common/mem/mem.h"

#define LEN ((size_t)4 << 30)
#define REPS 10

static int run(int unused)
{
    char *a, *b;
    uint64_t *dsum, gpu = 0;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    double td[REPS], tc[REPS];
    float ms;
    int i;
    pair_rank = 0;
    if (wsync_mem_cuda.init(0) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaMalloc((void **)&a, LEN));
    CU(cudaMalloc((void **)&b, LEN));
    CU(cudaMalloc((void **)&dsum, 8));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    if (wsync_mem_cuda.fill(a, LEN, 0, 31337) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    for (i = -2; i < REPS; i++) {
        CU(cudaMemsetAsync(dsum, 0, 8, s));
        CU(cudaEventRecord(e0, s));
        if (wsync_cuda_digest_sum_async(a, LEN, 0, dsum, s) != 0)
            DIE("digest launch");
        CU(cudaEventRecord(e1, s));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 0)
            td[i] = ms / 1e3;
        CU(cudaEventRecord(e0, s));
        CU(cudaMemcpyAsync(b, a, LEN, cudaMemcpyDeviceToDevice, s));
        CU(cudaEventRecord(e1, s));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 0)
            tc[i] = ms / 1e3;
    }
    CU(cudaMemcpy(&gpu, dsum, 8, cudaMemcpyDeviceToHost));
    {
        char *host = malloc(LEN);
        uint64_t cpu;
        CU(cudaMemcpy(host, a, LEN, cudaMemcpyDeviceToHost));
        cpu = wsync_digest_sum(host, LEN, 0);
        free(host);
        if (cpu != gpu)
            DIE("GPU digest %016llx != CPU digest %016llx", (unsigned long long)gpu, (unsigned long long)cpu);
    }
    {
        double d = median(td, REPS), c = median(tc, REPS), gb = (double)LEN / 1e9;
        printf("gpu_digest_bench: 4 GiB on GPU 0, median of %d\n", REPS);
        printf("  GPU digest kernel        %7.3f ms  %7.1f GB/s read (target >= 2000)\n", d * 1e3, gb / d);
        printf("  ceiling: D2D copy        %7.3f ms  %7.1f GB/s copied (%.1f GB/s read+written)\n", c * 1e3,
               gb / c, 2 * gb / c);
        printf("  ratio digest / copy: %.2f; GPU digest == CPU digest\n", (gb / d) / (gb / c));
    }
    return 0;
}

int main(void)
{
    if (pair_gpus() < 1) {
        printf("gpu_digest_bench: skipped: no CUDA device\n");
        return 0;
    }
    return run(0);
}

#else
int main(void)
{
    printf("gpu_digest_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
