/* gpu_digest_bench.c: the GPU digest kernel's speed on a 4 GiB buffer of
 * GPU 0 (bytes read per second), against a device-to-device copy of the same
 * buffer measured in the same run (its bytes copied per second: about
 * 2120 GB/s on an H200), and that it equals the CPU digest of the same
 * bytes. Then the copy with the digest fused into it (copy_digest_cuda.h)
 * against cudaMemcpyAsync of the same bytes, alternated in the same run:
 * the whole 4 GiB at once and as 64 jobs of 64 MiB (a chunk) queued back
 * to back, in each kernel shape (vectors in flight per thread, blocks per
 * SM); its sum must equal the CPU digest. Last, the digest of runs summed
 * two ways (digest_runs.h: the pass a GPU trainer makes at publish for the
 * record's pieces and a node plan's puts at once) over column slices of
 * 3584 and 18944 bytes (Qwen2.5-7B's o_proj and down_proj rows at TP=2)
 * and over contiguous rows, 2 GiB read each, against the digest kernel
 * over 2 GiB contiguous: both host-timed with their launch and wait; its
 * sums must equal the host's run of the same tasks. */
#include <stdint.h>
#include <stdio.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "common/mem/copy_digest_cuda.h"
#include "common/digest/digest.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/digest_runs.h"
#include "common/mem/mem.h"

#define LEN ((size_t)4 << 30)
#define REPS 10

#define CHUNK ((size_t)64 << 20)

/* One timed pass: the whole buffer (`chunked` = 0) or chunk after chunk,
 * fused (`shape` >= 0: an index into shapes[]) or cudaMemcpyAsync (-1). */
/* unroll, blocks per SM, streaming stores; the first is the default */
static const int shapes[][3] = {{2, 8, 0}, {4, 8, 0}, {4, 4, 0}, {1, 8, 0}, {8, 4, 0}, {2, 8, 1}, {4, 4, 1}};
#define NSHAPES ((int)(sizeof(shapes) / sizeof(shapes[0])))

static double pass(char *dst, const char *src, uint64_t *dsum, int shape, int chunked, cudaStream_t s,
                   cudaEvent_t e0, cudaEvent_t e1)
{
    size_t at, step = chunked ? CHUNK : LEN;
    float ms;
    CU(cudaMemsetAsync(dsum, 0, 8, s));
    CU(cudaEventRecord(e0, s));
    for (at = 0; at < LEN; at += step) {
        if (shape < 0)
            CU(cudaMemcpyAsync(dst + at, src + at, step, cudaMemcpyDeviceToDevice, s));
        else if (wsync_cuda_copy_digest_shape_async(dst + at, src + at, step, at, dsum, s, shapes[shape][0],
                                                    shapes[shape][1], shapes[shape][2]) != 0)
            DIE("copy-digest launch: %s", cudaGetErrorString(cudaGetLastError()));
    }
    CU(cudaEventRecord(e1, s));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    return ms / 1e3;
}

/* Fused against memcpy, alternated REPS times after a warm-up; prints both
 * and their ratio; returns the fused median. */
static double fused_vs_copy(char *dst, const char *src, uint64_t *dsum, int shape, int chunked, cudaStream_t s,
                            cudaEvent_t e0, cudaEvent_t e1)
{
    double tf[REPS], tc[REPS], f, c, gb = (double)LEN / 1e9;
    int i;
    for (i = -2; i < REPS; i++) {
        double a = pass(dst, src, dsum, shape, chunked, s, e0, e1);
        double b = pass(dst, src, dsum, -1, chunked, s, e0, e1);
        if (i >= 0) {
            tf[i] = a;
            tc[i] = b;
        }
    }
    f = median(tf, REPS);
    c = median(tc, REPS);
    printf("  %-10s unroll %d, %d blocks/SM, %s stores: fused %7.3f ms %7.1f GB/s, memcpy %7.3f ms %7.1f GB/s, "
           "fused/memcpy speed %.3f\n",
           chunked ? "64 MiB x64" : "4 GiB", shapes[shape][0], shapes[shape][1],
           shapes[shape][2] ? "streaming" : "plain", f * 1e3, gb / f, c * 1e3, gb / c, c / f);
    return f;
}

/* The fused sum of the whole buffer (one pass, copies src -> dst) against
 * the CPU's digest of src's bytes and the digest kernel's of dst. */
static void check_fused(char *dst, const char *src, const char *host, uint64_t *dsum, int chunked, cudaStream_t s,
                        cudaEvent_t e0, cudaEvent_t e1)
{
    uint64_t fused = 0, after = 0, cpu = 0;
    size_t at, step = chunked ? CHUNK : LEN;
    CU(cudaMemsetAsync(dst, 0, LEN, s));
    (void)pass(dst, src, dsum, 0, chunked, s, e0, e1);
    CU(cudaMemcpy(&fused, dsum, 8, cudaMemcpyDeviceToHost));
    for (at = 0; at < LEN; at += step)
        cpu += wsync_digest_sum(host + at, step, at);
    CU(cudaMemsetAsync(dsum, 0, 8, s));
    for (at = 0; at < LEN; at += step)
        if (wsync_cuda_digest_sum_async(dst + at, step, at, dsum, s) != 0)
            DIE("digest launch");
    CU(cudaStreamSynchronize(s));
    CU(cudaMemcpy(&after, dsum, 8, cudaMemcpyDeviceToHost));
    if (fused != cpu || after != cpu)
        DIE("fused copy-digest %016llx, digest of its copy %016llx, CPU digest %016llx (%s)",
            (unsigned long long)fused, (unsigned long long)after, (unsigned long long)cpu,
            chunked ? "64 MiB jobs" : "4 GiB");
}

/* Seconds (host clock) of one call of f(arg), which launches and waits. */
static double host_timed(void (*f)(void *), void *arg)
{
    double t0 = wsync_now_s();
    f(arg);
    return wsync_now_s() - t0;
}

typedef struct runs_job {
    wsync_digest_runs_plan_t *plan;
    const char *src;
    uint64_t *sums;
    uint64_t *dsum; /* the plain digest's */
} runs_job_t;

static void runs_once(void *arg)
{
    runs_job_t *j = arg;
    if (wsync_digest_runs_start(j->plan, j->src) != WSYNC_OK || wsync_digest_runs_wait(j->plan, j->sums) != WSYNC_OK)
        DIE("digest runs: %s", wsync_last_error());
}

static void plain_once(void *arg)
{
    runs_job_t *j = arg;
    CU(cudaMemset(j->dsum, 0, 8));
    if (wsync_cuda_digest_sum_async(j->src, LEN / 2, 0, j->dsum, NULL) != 0)
        DIE("digest launch");
    CU(cudaDeviceSynchronize());
}

/* The two-way digest of runs of `row` bytes every `stride` bytes (64
 * segments of 32 MiB, each also summed as its 64 MiB piece of the source),
 * against the plain digest of 2 GiB; the sums checked against the host's. */
static void runs_vs_digest(const char *src, const char *host, uint64_t *dsum, uint64_t row, uint64_t stride)
{
    enum { NSEG = 64 };
    static wsync_run2d_t runs[NSEG];
    wsync_digest_seg2_t segs[NSEG];
    wsync_digest_task_t *tasks = NULL;
    uint64_t sums[2 * NSEG], want[2 * NSEG] = {0};
    const uint64_t seg_bytes = (LEN / 2) / NSEG, rows = seg_bytes / row;
    double tr[REPS], tp[REPS], r, pl, gb = (double)(rows * row * NSEG) / 1e9;
    runs_job_t j = {.src = src, .sums = sums, .dsum = dsum};
    size_t ntasks = 0;
    int i;
    for (i = 0; i < NSEG; i++) {
        runs[i] = (wsync_run2d_t){.src_off = (uint64_t)i * (LEN / NSEG),
                                  .src_stride = stride,
                                  .row_bytes = row,
                                  .rows = rows,
                                  .dst_off = 0};
        segs[i] = (wsync_digest_seg2_t){.seg = {.dst_off = (uint64_t)i * seg_bytes, .runs = &runs[i], .nruns = 1},
                                        .sum = (uint32_t)i,
                                        .sum2 = (uint32_t)(NSEG + i),
                                        .off2 = (uint64_t)i * (LEN / NSEG),
                                        .src2 = (uint64_t)i * (LEN / NSEG)};
    }
    if (wsync_digest_runs_prepare2(segs, NSEG, 2 * NSEG, &j.plan) != WSYNC_OK ||
        wsync_digest_tasks2(segs, NSEG, &tasks, &ntasks) != WSYNC_OK)
        DIE("digest runs: %s", wsync_last_error());
    for (i = -2; i < REPS; i++) {
        double a = host_timed(runs_once, &j), b = host_timed(plain_once, &j);
        if (i >= 0) {
            tr[i] = a;
            tp[i] = b;
        }
    }
    wsync_digest_tasks_host(tasks, ntasks, host, want);
    if (memcmp(sums, want, sizeof(want)) != 0)
        DIE("two-way digest of %llu-byte rows: the GPU's sums differ from the host's", (unsigned long long)row);
    r = median(tr, REPS);
    pl = median(tp, REPS);
    printf("  rows of %6llu bytes every %6llu (%zu tasks): two-way runs %7.3f ms %7.1f GB/s, plain digest of 2 "
           "GiB "
           "%7.3f ms %7.1f GB/s, runs/plain speed %.3f\n",
           (unsigned long long)row, (unsigned long long)stride, ntasks, r * 1e3, gb / r, pl * 1e3,
           (double)(LEN / 2) / 1e9 / pl, (gb / r) / ((double)(LEN / 2) / 1e9 / pl));
    free(tasks);
    wsync_digest_runs_free(j.plan);
}

static int run(int unused)
{
    char *a, *b, *host;
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
    host = malloc(LEN);
    if (host == NULL)
        DIE("no host memory for 4 GiB");
    CU(cudaMemcpy(host, a, LEN, cudaMemcpyDeviceToHost));
    if (wsync_digest_sum(host, LEN, 0) != gpu)
        DIE("GPU digest %016llx != CPU digest %016llx", (unsigned long long)gpu,
            (unsigned long long)wsync_digest_sum(host, LEN, 0));
    {
        double d = median(td, REPS), c = median(tc, REPS), gb = (double)LEN / 1e9;
        printf("gpu_digest_bench: 4 GiB on GPU 0, median of %d\n", REPS);
        printf("  GPU digest kernel        %7.3f ms  %7.1f GB/s read (target >= 2000)\n", d * 1e3, gb / d);
        printf("  ceiling: D2D copy        %7.3f ms  %7.1f GB/s copied (%.1f GB/s read+written)\n", c * 1e3,
               gb / c, 2 * gb / c);
        printf("  ratio digest / copy: %.2f; GPU digest == CPU digest\n", (gb / d) / (gb / c));
    }
    check_fused(b, a, host, dsum, 0, s, e0, e1);
    check_fused(b, a, host, dsum, 1, s, e0, e1);
    printf(
        "digest of runs summed two ways (a GPU trainer's publish pass; host clock with launch and wait; sums == "
        "the host's, checked):\n");
    runs_vs_digest(a, host, dsum, 3584, 7168);
    runs_vs_digest(a, host, dsum, 18944, 37888);
    runs_vs_digest(a, host, dsum, 65536, 65536);
    free(host);
    printf("copy with the digest fused (target: fused/memcpy speed >= 0.95; sums == CPU digest, checked):\n");
    for (i = 0; i < NSHAPES; i++) {
        fused_vs_copy(b, a, dsum, i, 0, s, e0, e1);
        fused_vs_copy(b, a, dsum, i, 1, s, e0, e1);
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
