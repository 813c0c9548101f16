/* gpu_copy_variants_bench.c: shapes of the copy with the digest fused into
 * it (copy_digest_cuda.h, wsync_cuda_copy_digest_variant_async) against
 * cudaMemcpyAsync of the same bytes, alternated in one run on GPU 0: 4 GiB
 * at once and 64 jobs of 64 MiB queued back to back (what a landing
 * queues). Hand-written copies without the digest are timed too, so the
 * table separates what the access pattern costs from what the digest
 * costs. Every digest variant's sum is checked against the CPU digest of
 * the same bytes (the whole buffer and the 64 jobs, keyed by their
 * offsets), and its copy byte for byte. Prints fused/memcpy speed per
 * variant (issue 17's target: >= 0.95). Last, a pipeline that uses no SM
 * for the copy: the copy engine copies sub-chunks of S MiB on one stream and
 * the digest kernel reads each one's destination on a second stream right
 * after it, while it is still in the 50 MB L2, so the source is read from
 * memory once (the question: does the digest then cost no memory traffic?).
 *   gpu_copy_variants_bench [MiB]   (default 4096) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "common/mem/copy_digest_cuda.h"
#include "common/digest/digest.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/mem.h"

#define REPS 10
#define CHUNK ((size_t)64 << 20)

/* kind, unroll, blocks/SM, streaming stores, L2 hint, copy only */
static const wsync_cd_variant_t variants[] = {
    {0, 2, 8, 0, 0, 0}, {0, 4, 4, 0, 0, 0}, {1, 4, 8, 0, 0, 1}, {1, 4, 8, 0, 0, 0}, {1, 8, 4, 0, 1, 0},
    {1, 4, 8, 1, 0, 0}, {3, 0, 1, 0, 0, 1}, {3, 0, 1, 0, 0, 0}, {3, 1, 2, 0, 0, 1}, {3, 1, 2, 0, 0, 0},
};
#define NVARIANTS ((int)(sizeof(variants) / sizeof(variants[0])))

static size_t LEN;

static double pass(char *dst, const char *src, uint64_t *dsum, int v, int chunked, cudaStream_t s, cudaEvent_t e0,
                   cudaEvent_t e1)
{
    size_t at, step = chunked ? CHUNK : LEN;
    float ms;
    CU(cudaMemsetAsync(dsum, 0, 8, s));
    CU(cudaEventRecord(e0, s));
    for (at = 0; at < LEN; at += step) {
        if (v < 0)
            CU(cudaMemcpyAsync(dst + at, src + at, step, cudaMemcpyDeviceToDevice, s));
        else if (wsync_cuda_copy_digest_variant_async(dst + at, src + at, step, at, dsum, s, &variants[v]) != 0)
            DIE("variant %d launch: %s", v, cudaGetErrorString(cudaGetLastError()));
    }
    CU(cudaEventRecord(e1, s));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    return ms / 1e3;
}

#define CE_EVENTS 64
static const int ce_sub_mib[] = {2, 4, 8, 16};
#define NCE ((int)(sizeof(ce_sub_mib) / sizeof(ce_sub_mib[0])))

/* The copy engine copies sub-chunks of `sub` bytes on s; the digest kernel
 * digests each one's destination on s2 once its copy completed (an event
 * per sub-chunk, a ring of CE_EVENTS). Timed from e0 on s to e1 on s2. */
static double pass_ce(char *dst, const char *src, uint64_t *dsum, size_t sub, cudaStream_t s, cudaStream_t s2,
                      cudaEvent_t e0, cudaEvent_t e1, cudaEvent_t *ev)
{
    size_t at, k = 0;
    float ms;
    CU(cudaMemsetAsync(dsum, 0, 8, s));
    CU(cudaEventRecord(e0, s));
    CU(cudaStreamWaitEvent(s2, e0, 0));
    for (at = 0; at < LEN; at += sub, k++) {
        CU(cudaMemcpyAsync(dst + at, src + at, sub, cudaMemcpyDeviceToDevice, s));
        CU(cudaEventRecord(ev[k % CE_EVENTS], s));
        CU(cudaStreamWaitEvent(s2, ev[k % CE_EVENTS], 0));
        if (wsync_cuda_digest_sum_async(dst + at, sub, at, dsum, s2) != 0)
            DIE("digest launch: %s", cudaGetErrorString(cudaGetLastError()));
    }
    CU(cudaEventRecord(e1, s2));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    return ms / 1e3;
}

static void describe(int v, char *out, size_t n)
{
    const wsync_cd_variant_t *x = &variants[v];
    static const char *kinds[] = {"lib-stride", "tiles-stride", "-", "bulk(TMA)"};
    if (x->kind == 3)
        snprintf(out, n, "bulk(TMA) %d KiB x%d/SM%s", x->unroll ? 16 : 32, x->blocks_per_sm,
                 x->copy_only ? " COPY-ONLY" : "");
    else
        snprintf(out, n, "%s u%d x%d%s%s%s", kinds[x->kind], x->unroll, x->blocks_per_sm,
                 x->streaming_stores ? " stcs" : "", x->l2_hint ? " l2hint" : "", x->copy_only ? " COPY-ONLY" : "");
}

int main(int argc, char **argv)
{
    char *a, *b, *host, *back, name[80];
    uint64_t *dsum, cpu_whole, cpu_jobs = 0, got;
    cudaStream_t s, s2;
    cudaEvent_t e0, e1, ev[CE_EVENTS];
    size_t at;
    int v, c, i;
    if (pair_gpus() < 1) {
        printf("gpu_copy_variants_bench: skipped: no CUDA device\n");
        return 0;
    }
    LEN = (size_t)(argc > 1 ? atoi(argv[1]) : 4096) << 20;
    if (LEN < CHUNK || LEN % CHUNK) {
        fprintf(stderr, "gpu_copy_variants_bench: size must be a multiple of 64 MiB\n");
        return 2;
    }
    pair_rank = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (wsync_mem_cuda.init(0) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaMalloc((void **)&a, LEN));
    CU(cudaMalloc((void **)&b, LEN));
    CU(cudaMalloc((void **)&dsum, 8));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    if (wsync_mem_cuda.fill(a, LEN, 0, 4242) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    host = malloc(LEN);
    back = malloc(LEN);
    if (host == NULL || back == NULL)
        DIE("no host memory");
    CU(cudaMemcpy(host, a, LEN, cudaMemcpyDeviceToHost));
    cpu_whole = wsync_digest_sum(host, LEN, 0);
    for (at = 0; at < LEN; at += CHUNK)
        cpu_jobs += wsync_digest_sum(host + at, CHUNK, at);
    /* correctness of every digest variant, both ways */
    for (v = 0; v < NVARIANTS; v++) {
        for (c = 0; c < 2; c++) {
            CU(cudaMemset(b, 0, LEN));
            (void)pass(b, a, dsum, v, c, s, e0, e1);
            CU(cudaMemcpy(&got, dsum, 8, cudaMemcpyDeviceToHost));
            describe(v, name, sizeof(name));
            if (!variants[v].copy_only && got != (c ? cpu_jobs : cpu_whole))
                DIE("%s (%s): sum %016llx, CPU digest %016llx", name, c ? "jobs" : "whole",
                    (unsigned long long)got, (unsigned long long)(c ? cpu_jobs : cpu_whole));
            CU(cudaMemcpy(back, b, LEN, cudaMemcpyDeviceToHost));
            if (memcmp(back, host, LEN) != 0)
                DIE("%s (%s): the copy differs from the source", name, c ? "jobs" : "whole");
        }
        printf("  checked: %s\n", name);
    }
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (i = 0; i < CE_EVENTS; i++)
        CU(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    for (v = 0; v < NCE; v++) {
        uint64_t want = 0;
        for (at = 0; at < LEN; at += (size_t)ce_sub_mib[v] << 20)
            want += wsync_digest_sum(host + at, (size_t)ce_sub_mib[v] << 20, at);
        CU(cudaMemset(b, 0, LEN));
        (void)pass_ce(b, a, dsum, (size_t)ce_sub_mib[v] << 20, s, s2, e0, e1, ev);
        CU(cudaMemcpy(&got, dsum, 8, cudaMemcpyDeviceToHost));
        if (got != want)
            DIE("copy engine + L2 digest, %d MiB: sum %016llx, CPU digest %016llx", ce_sub_mib[v],
                (unsigned long long)got, (unsigned long long)want);
        CU(cudaMemcpy(back, b, LEN, cudaMemcpyDeviceToHost));
        if (memcmp(back, host, LEN) != 0)
            DIE("copy engine + L2 digest, %d MiB: the copy differs from the source", ce_sub_mib[v]);
        printf("  checked: copy engine + L2 digest, %d MiB sub-chunks\n", ce_sub_mib[v]);
    }
    free(back);
    free(host);
    printf("gpu_copy_variants_bench: %zu MiB on GPU 0, median of %d, each alternated with cudaMemcpyAsync; every "
           "digest variant's sums == CPU digest and every copy == source (checked)\n",
           LEN >> 20, REPS);
    printf("  %-34s %11s %11s %8s   %11s %11s %8s\n", "variant", "whole ms", "memcpy ms", "ratio", "64MiB-jobs",
           "memcpy ms", "ratio");
    for (v = 0; v < NVARIANTS; v++) {
        double r[2][2];
        for (c = 0; c < 2; c++) {
            double tf[REPS], tc[REPS];
            for (i = -2; i < REPS; i++) {
                double x = pass(b, a, dsum, v, c, s, e0, e1);
                double y = pass(b, a, dsum, -1, c, s, e0, e1);
                if (i >= 0) {
                    tf[i] = x;
                    tc[i] = y;
                }
            }
            r[c][0] = median(tf, REPS);
            r[c][1] = median(tc, REPS);
        }
        describe(v, name, sizeof(name));
        printf("  %-34s %11.3f %11.3f %8.3f   %11.3f %11.3f %8.3f\n", name, r[0][0] * 1e3, r[0][1] * 1e3,
               r[0][1] / r[0][0], r[1][0] * 1e3, r[1][1] * 1e3, r[1][1] / r[1][0]);
        fflush(stdout);
    }
    for (v = 0; v < NCE; v++) {
        double tf[REPS], tc[REPS], x, y;
        for (i = -2; i < REPS; i++) {
            x = pass_ce(b, a, dsum, (size_t)ce_sub_mib[v] << 20, s, s2, e0, e1, ev);
            y = pass(b, a, dsum, -1, 0, s, e0, e1);
            if (i >= 0) {
                tf[i] = x;
                tc[i] = y;
            }
        }
        snprintf(name, sizeof(name), "copy engine + L2 digest, %d MiB", ce_sub_mib[v]);
        x = median(tf, REPS);
        y = median(tc, REPS);
        printf("  %-34s %11.3f %11.3f %8.3f\n", name, x * 1e3, y * 1e3, y / x);
        fflush(stdout);
    }
    return 0;
}

#else
int main(void)
{
    printf("gpu_copy_variants_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
