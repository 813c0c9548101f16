/* gpu_pack_bench.c: the GPU gather kernel packing column slices on GPU 0:
 * the row-parallel weights of Qwen2.5-7B (o_proj and down_proj of 28
 * layers, bf16, 4.5 GB: bench/slices.h) as TP rank 1 of T = 2, 4, 8 holds
 * them, against device-to-device cudaMemcpy of the same bytes measured in
 * the same run (target: pack >= 0.8 of the copy). What a sender does and
 * pays, apart:
 *   kernel     the whole rank in one launch of a prepared plan (the table
 *              already on the device): the kernel alone, vs one copy;
 *   puts       the rank cut into 64 MiB puts, one prepared plan each,
 *              launched one after another with up to 4 in flight on the
 *              stream (a launch waits for the oldest job when 4 are out,
 *              as a sender recycles its staging), vs 64 MiB copies;
 *   start-1, start-puts   the same through wsync_pack_cuda_start, which
 *              builds and uploads the table with every launch;
 *   puts+sum   the 64 MiB puts' prepared plans through
 *              wsync_pack_cuda_launch_sum, back to back on the stream, each
 *              summing the digest of what it writes (what a GPU trainer's
 *              gathered put does over the local transport); every put's sum
 *              is compared with the CPU digest of the host gather;
 * and the one-off cost of wsync_pack_cuda_prepare (build + upload, host
 * clock) for the whole rank and for all its puts, against the time of one
 * D2D copy of the rank. GPU times are CUDA events on the stream, median of
 * `reps` after 2 warm-ups. After each mode every packed byte is compared
 * with the host gather of the same source. Usage: gpu_pack_bench [reps,
 * default 10]. */
#include <stdint.h>
#include <stdio.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "bench/slices.h"
#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/pack/pack.h"
#include "common/pack/pack_task.h"

#define LAYERS 28
#define PUT_BYTES (64ull << 20)
#define MAX_REPS 64
#define MAX_PUTS 4096
#define IN_FLIGHT 4

typedef struct timing {
    cudaStream_t s;
    cudaEvent_t e0, e1;
} timing_t;

typedef struct rank_data {
    char *src, *dst, *copy_dst;
    const char *want; /* the host gather of the rank */
    char *got;
    uint64_t len;
    int tp;
} rank_data_t;

static double elapsed(timing_t *t)
{
    float ms;
    CU(cudaEventSynchronize(t->e1));
    CU(cudaEventElapsedTime(&ms, t->e0, t->e1));
    return ms / 1e3;
}

/* Launches the prepared plans of np puts back to back, at most IN_FLIGHT
 * jobs out (the oldest waited for before the next launch); the seconds
 * from before the first kernel to after the last. */
static double time_plans(timing_t *t, rank_data_t *r, wsync_pack_plan_t **plans, const slices_put_t *puts, size_t np)
{
    wsync_pack_job_t *jobs[IN_FLIGHT] = {NULL};
    size_t i;
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++) {
        wsync_pack_job_t **slot = &jobs[i % IN_FLIGHT];
        if (wsync_pack_cuda_wait(*slot) != WSYNC_OK ||
            wsync_pack_cuda_launch(plans[i], r->dst + puts[i].dst_off, r->src, t->s, slot) != WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    }
    CU(cudaEventRecord(t->e1, t->s));
    for (i = 0; i < IN_FLIGHT; i++)
        if (wsync_pack_cuda_wait(jobs[i]) != WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    return elapsed(t);
}

/* The same through wsync_pack_cuda_start: the table built and uploaded
 * with each launch, inside the timed window. */
static double time_start(timing_t *t, rank_data_t *r, const slices_put_t *puts, size_t np)
{
    wsync_pack_job_t *jobs[MAX_PUTS];
    size_t i;
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_start(r->dst + puts[i].dst_off, r->src, puts[i].runs, puts[i].n, t->s, &jobs[i]) !=
            WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    CU(cudaEventRecord(t->e1, t->s));
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_wait(jobs[i]) != WSYNC_OK)
            DIE("pack: %s", wsync_last_error());
    return elapsed(t);
}

static double time_copy(timing_t *t, rank_data_t *r, const slices_put_t *puts, size_t np)
{
    size_t i;
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++)
        CU(cudaMemcpyAsync(r->copy_dst + puts[i].dst_off, r->src + puts[i].dst_off, puts[i].len,
                           cudaMemcpyDeviceToDevice, t->s));
    CU(cudaEventRecord(t->e1, t->s));
    return elapsed(t);
}

/* What the summing launches share: the device accumulator and block
 * counter (left at 0 by each launch) and each put's sum, mapped. */
typedef struct sums {
    uint64_t *dacc;
    unsigned int *dcount;
    uint64_t *host, *dev; /* MAX_PUTS words */
} sums_t;

static sums_t sums;

/* The prepared plans of np puts launched back to back with their sums
 * (wsync_pack_cuda_launch_sum, no wait between: stream order); seconds. */
static double time_plans_sum(timing_t *t, rank_data_t *r, wsync_pack_plan_t **plans, const slices_put_t *puts,
                             size_t np)
{
    size_t i;
    CU(cudaEventRecord(t->e0, t->s));
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_launch_sum(plans[i], r->dst + puts[i].dst_off, r->src, puts[i].dst_off, sums.dacc,
                                       sums.dcount, sums.dev + i, t->s) != WSYNC_OK)
            DIE("pack with sum: %s", wsync_last_error());
    CU(cudaEventRecord(t->e1, t->s));
    return elapsed(t);
}

/* Every put's sum equals the CPU digest of its bytes of the host gather. */
static void check_sums(const rank_data_t *r, const slices_put_t *puts, size_t np)
{
    size_t i;
    for (i = 0; i < np; i++)
        if (((volatile uint64_t *)sums.host)[i] !=
            wsync_digest_sum(r->want + puts[i].dst_off, puts[i].len, puts[i].dst_off))
            DIE("TP=%d puts+sum: put %zu's sum differs from the CPU digest of the host gather", r->tp, i);
}

/* Seconds (host clock) to prepare the plans of np puts; *plans keeps them. */
static double time_prepare(rank_data_t *r, const slices_put_t *puts, size_t np, wsync_pack_plan_t **plans)
{
    double t0 = wsync_now_s();
    size_t i;
    for (i = 0; i < np; i++)
        if (wsync_pack_cuda_prepare(puts[i].runs, puts[i].n, (uintptr_t)(r->dst + puts[i].dst_off),
                                    (uintptr_t)r->src, &plans[i]) != WSYNC_OK)
            DIE("prepare: %s", wsync_last_error());
    return wsync_now_s() - t0;
}

static void free_plans(wsync_pack_plan_t **plans, size_t np)
{
    size_t i;
    for (i = 0; i < np; i++) {
        wsync_pack_cuda_plan_free(plans[i]);
        plans[i] = NULL;
    }
}

/* The destination has to equal the host gather, byte for byte. */
static void check_bytes(rank_data_t *r, const char *mode)
{
    CU(cudaMemcpy(r->got, r->dst, r->len, cudaMemcpyDeviceToHost));
    if (memcmp(r->want, r->got, r->len) != 0)
        DIE("TP=%d %s: the GPU pack differs from the host gather", r->tp, mode);
}

/* 0: kernel, 1: puts, 2: start-1, 3: start-puts, 4: puts+sum. Prints one
 * line. */
static void run_mode(timing_t *t, rank_data_t *r, int mode, const slices_put_t *p, size_t n,
                     wsync_pack_plan_t **plans, int reps, double *pack_s)
{
    static const char *names[] = {"kernel", "puts", "start-1", "start-puts", "puts+sum"};
    double tp[MAX_REPS], tc[MAX_REPS], mp, mc, gb = (double)r->len / 1e9;
    int i;
    CU(cudaMemset(r->dst, 0xA5, r->len));
    for (i = -2; i < reps; i++) {
        double a = mode == 4  ? time_plans_sum(t, r, plans, p, n)
                   : mode < 2 ? time_plans(t, r, plans, p, n)
                              : time_start(t, r, p, n),
               b = time_copy(t, r, p, n);
        if (i >= 0) {
            tp[i] = a;
            tc[i] = b;
        }
    }
    check_bytes(r, names[mode]);
    if (mode == 4)
        check_sums(r, p, n);
    mp = median(tp, reps);
    mc = median(tc, reps);
    if (pack_s)
        *pack_s = mp;
    printf("  %-4d %-11s %6zu %9.3f %6llu %10.1f %10.1f %9.3f %9.3f %6.2f\n", r->tp, names[mode], n, gb,
           (unsigned long long)p[0].runs[0].row_bytes, gb / mp, gb / mc, mp * 1e3, mc * 1e3, mc / mp);
    fflush(stdout);
}

static int run(int reps)
{
    static const int tps[] = {2, 4, 8};
    static wsync_pack_plan_t *plans[MAX_PUTS];
    uint64_t src_len = slices_src_bytes(LAYERS);
    wsync_run2d_t runs[2 * LAYERS];
    char *host_src, *want;
    double prep[3][2], d2d_s[3], kernel_s[3];
    size_t ntasks[3][2], nputs[3];
    rank_data_t r = {0};
    timing_t t;
    size_t k;
    pair_rank = 0;
    if (wsync_mem_cuda.init(0) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaMalloc((void **)&r.src, src_len));
    CU(cudaMalloc((void **)&r.dst, src_len / 2));
    CU(cudaMalloc((void **)&r.copy_dst, src_len / 2));
    CU(cudaStreamCreateWithFlags(&t.s, cudaStreamNonBlocking));
    CU(cudaEventCreate(&t.e0));
    CU(cudaEventCreate(&t.e1));
    CU(cudaMalloc((void **)&sums.dacc, sizeof(uint64_t)));
    CU(cudaMalloc((void **)&sums.dcount, sizeof(unsigned int)));
    CU(cudaMemset(sums.dacc, 0, sizeof(uint64_t)));
    CU(cudaMemset(sums.dcount, 0, sizeof(unsigned int)));
    CU(cudaHostAlloc((void **)&sums.host, MAX_PUTS * sizeof(uint64_t), cudaHostAllocMapped));
    CU(cudaHostGetDevicePointer((void **)&sums.dev, sums.host, 0));
    if (wsync_mem_cuda.fill(r.src, src_len, 0, 4242) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    host_src = malloc(src_len);
    want = malloc(src_len / 2);
    r.got = malloc(src_len / 2);
    if (!host_src || !want || !r.got)
        DIE("out of host memory");
    r.want = want;
    CU(cudaMemcpy(host_src, r.src, src_len, cudaMemcpyDeviceToHost));
    printf("gpu_pack_bench: column slices of Qwen2.5-7B's o_proj + down_proj (%d layers, bf16, %.2f GB) on GPU 0, "
           "TP rank 1, median of %d\n",
           LAYERS, (double)src_len / 1e9, reps);
    printf("  %-4s %-11s %6s %9s %6s %10s %10s %9s %9s %6s\n", "TP", "mode", "puts", "GB", "row", "pack GB/s",
           "D2D GB/s", "pack ms", "D2D ms", "ratio");
    for (k = 0; k < sizeof(tps) / sizeof(tps[0]); k++) {
        uint64_t len = slices_runs(LAYERS, tps[k], 1, runs);
        slices_put_t whole = {.dst_off = 0, .len = len, .runs = runs, .n = 2 * LAYERS}, *puts = NULL;
        size_t np = slices_cut(runs, 2 * LAYERS, PUT_BYTES, &puts), i;
        double a[MAX_REPS], b[MAX_REPS], c[MAX_REPS];
        int rep;
        if (np == 0 || np > MAX_PUTS)
            DIE("cutting puts: out of memory or more than %d", MAX_PUTS);
        r.len = len;
        r.tp = tps[k];
        nputs[k] = np;
        if (wsync_pack_host_threads(want, host_src, runs, 2 * LAYERS, 8) != WSYNC_OK)
            DIE("%s", wsync_last_error());

        /* the one-off: build + upload the tables (freeing is not timed) */
        for (rep = -1; rep < reps; rep++) {
            double pw = time_prepare(&r, &whole, 1, plans), pp;
            free_plans(plans, 1);
            pp = time_prepare(&r, puts, np, plans);
            free_plans(plans, np);
            if (rep >= 0) {
                a[rep] = pw;
                b[rep] = pp;
            }
        }
        prep[k][0] = median(a, reps);
        prep[k][1] = median(b, reps);
        ntasks[k][0] = wsync_pack_tasks(runs, 2 * LAYERS, (uintptr_t)r.dst, (uintptr_t)r.src, NULL, 0);
        ntasks[k][1] = 0;
        for (i = 0; i < np; i++)
            ntasks[k][1] += wsync_pack_tasks(puts[i].runs, puts[i].n, (uintptr_t)(r.dst + puts[i].dst_off),
                                             (uintptr_t)r.src, NULL, 0);
        for (rep = 0; rep < reps; rep++)
            c[rep] = time_copy(&t, &r, &whole, 1);
        d2d_s[k] = median(c, reps);

        time_prepare(&r, &whole, 1, plans);
        run_mode(&t, &r, 0, &whole, 1, plans, reps, &kernel_s[k]);
        free_plans(plans, 1);
        time_prepare(&r, puts, np, plans);
        run_mode(&t, &r, 1, puts, np, plans, reps, NULL);
        run_mode(&t, &r, 4, puts, np, plans, reps, NULL);
        free_plans(plans, np);
        run_mode(&t, &r, 2, &whole, 1, NULL, reps, NULL);
        run_mode(&t, &r, 3, puts, np, NULL, reps, NULL);
        slices_free(puts, np);
    }
    printf("  ratio = D2D ms / pack ms (bytes moved once); kernel and puts launch prepared plans (puts: %d in "
           "flight), start-* build and upload the table per launch, puts+sum sum each put's digest on the way "
           "(all "
           "in flight); every packed byte equals the host gather, every sum the CPU digest\n",
           IN_FLIGHT);
    printf("  one-off wsync_pack_cuda_prepare (build + upload, host clock, median of %d)\n", reps);
    printf("  %-4s %-14s %8s %11s %9s %12s %15s\n", "TP", "plans", "tasks", "prepare ms", "D2D ms", "prepare/D2D",
           "first-put ratio");
    for (k = 0; k < sizeof(tps) / sizeof(tps[0]); k++) {
        char what[32];
        snprintf(what, sizeof(what), "%zu puts", nputs[k]);
        /* first-put ratio: a copy against preparing and packing the rank once */
        printf("  %-4d %-14s %8zu %11.3f %9.3f %12.2f %15.2f\n", tps[k], "whole rank", ntasks[k][0],
               prep[k][0] * 1e3, d2d_s[k] * 1e3, prep[k][0] / d2d_s[k], d2d_s[k] / (prep[k][0] + kernel_s[k]));
        printf("  %-4d %-14s %8zu %11.3f %9.3f %12.2f %15s\n", tps[k], what, ntasks[k][1], prep[k][1] * 1e3,
               d2d_s[k] * 1e3, prep[k][1] / d2d_s[k], "");
    }
    printf("  prepare/D2D: the one-off table cost in copies of the rank, paid once per plan, not per version\n");
    free(host_src);
    free(want);
    free(r.got);
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
