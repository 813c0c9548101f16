/* gpu_pack_bench.c: the GPU gather kernel packing column slices on GPU 0:
 * the row-parallel weights of Qwen2.5-7B (o_proj and down_proj of 28
 * layers, bf16, 4.5 GB: bench/slices.h) as TP rank 1 of T = 2, 4, 8 holds
 * them, against a device-to-device cudaMemcpy of the same number of bytes
 * measured in the same run (target: pack >= 0.8 of the copy). Two ways:
 * the whole rank in one launch, and cut into 64 MiB puts (one launch each,
 * as a sender packs put by put), against 64 MiB copies. Each figure times
 * the task table's upload with the kernel (CUDA events, median of 10 after
 * 2 warm-ups). Every packed byte is compared with the host gather of the
 * same source. Usage: gpu_pack_bench [reps, default 10]. */
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "bench/slices.h"
#include "common/mem/mem.h"
#include "common/pack.h"

#define LAYERS 28
#define PUT_BYTES (64ull << 20)
#define MAX_REPS 64

typedef struct timing {
    cudaStream_t s;
    cudaEvent_t e0, e1;
} timing_t;

static double elapsed(timing_t *t)
{
    float ms;
    CU(cudaEventSynchronize(t->e1));
    CU(cudaEventElapsedTime(&ms, t->e0, t->e1));
    return ms / 1e3;
}

/* Packs the puts (np == 1 with the whole run list: one launch) and returns
 * the seconds from before the first upload to after the last kernel. */
static double time_pack(timing_t *t, char *dst, const char *src, const slices_put_t *puts, size_t np)
{
    wsync_pack_job_t *jobs[4096];
    size_t i;
    if (np > 4096)
        DIE("too many puts");
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_start(dst + puts[i].dst_off, src, puts[i].runs, puts[i].n, t->s, &jobs[i]) != WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    CU(cudaEventRecord(t->e1, t->s));
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_wait(jobs[i]) != WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    return elapsed(t);
}

static double time_copy(timing_t *t, char *dst, const char *src, const slices_put_t *puts, size_t np)
{
    size_t i;
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++)
        CU(cudaMemcpyAsync(dst + puts[i].dst_off, src + puts[i].dst_off, puts[i].len, cudaMemcpyDeviceToDevice, t->s));
    CU(cudaEventRecord(t->e1, t->s));
    return elapsed(t);
}

static int run(int reps)
{
    static const int tps[] = {2, 4, 8};
    uint64_t src_len = slices_src_bytes(LAYERS);
    wsync_run2d_t runs[2 * LAYERS];
    char *src, *dst, *copy_dst, *host_src, *want, *got;
    timing_t t;
    size_t k;
    pair_rank = 0;
    if (wsync_mem_cuda.init(0) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaMalloc((void **)&src, src_len));
    CU(cudaMalloc((void **)&dst, src_len / 2));
    CU(cudaMalloc((void **)&copy_dst, src_len / 2));
    CU(cudaStreamCreateWithFlags(&t.s, cudaStreamNonBlocking));
    CU(cudaEventCreate(&t.e0));
    CU(cudaEventCreate(&t.e1));
    if (wsync_mem_cuda.fill(src, src_len, 0, 4242) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    host_src = malloc(src_len);
    want = malloc(src_len / 2);
    got = malloc(src_len / 2);
    if (!host_src || !want || !got)
        DIE("out of host memory");
    CU(cudaMemcpy(host_src, src, src_len, cudaMemcpyDeviceToHost));
    printf("gpu_pack_bench: column slices of Qwen2.5-7B's o_proj + down_proj (%d layers, bf16, %.2f GB) on GPU 0, "
           "TP rank 1, median of %d\n", LAYERS, (double)src_len / 1e9, reps);
    printf("  %-4s %-9s %9s %6s %10s %10s %10s %6s\n", "TP", "launches", "bytes", "row", "pack GB/s", "D2D GB/s",
           "pack ms", "ratio");
    for (k = 0; k < sizeof(tps) / sizeof(tps[0]); k++) {
        uint64_t len = slices_runs(LAYERS, tps[k], 1, runs);
        slices_put_t whole = {.dst_off = 0, .len = len, .runs = runs, .n = 2 * LAYERS}, *puts = NULL;
        size_t np = slices_cut(runs, 2 * LAYERS, PUT_BYTES, &puts);
        int pass, i;
        if (np == 0)
            DIE("out of memory cutting puts");
        for (pass = 0; pass < 2; pass++) {
            const slices_put_t *p = pass == 0 ? &whole : puts;
            size_t n = pass == 0 ? 1 : np;
            double tp[MAX_REPS], tc[MAX_REPS], mp, mc, gb = (double)len / 1e9;
            for (i = -2; i < reps; i++) {
                double a = time_pack(&t, dst, src, p, n), b = time_copy(&t, copy_dst, src, p, n);
                if (i >= 0) {
                    tp[i] = a;
                    tc[i] = b;
                }
            }
            mp = median(tp, reps);
            mc = median(tc, reps);
            printf("  %-4d %-9s %9.3f %6llu %10.1f %10.1f %10.3f %6.2f\n", tps[k], pass == 0 ? "1" : "64MiB-puts",
                   gb, (unsigned long long)runs[0].row_bytes, gb / mp, gb / mc, mp * 1e3, mc / mp);
            fflush(stdout);
        }
        /* every byte against the host gather */
        CU(cudaMemcpy(got, dst, len, cudaMemcpyDeviceToHost));
        if (wsync_pack_host_threads(want, host_src, runs, 2 * LAYERS, 8) != WSYNC_OK)
            DIE("%s", wsync_last_error());
        if (memcmp(want, got, len) != 0)
            DIE("TP=%d: the GPU pack differs from the host gather", tps[k]);
        slices_free(puts, np);
    }
    printf("  ratio = pack GB/s / D2D GB/s (bytes moved once); every packed byte equals the host gather\n");
    free(host_src);
    free(want);
    free(got);
    return 0;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: gpu_pack_bench [reps 1..%d]\n", MAX_REPS);
        return 2;
    }
    if (pair_gpus() < 1) {
        printf("gpu_pack_bench: skipped: no CUDA device\n");
        return 0;
    }
    return run(reps);
}

#else
int main(void)
{
    printf("gpu_pack_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
