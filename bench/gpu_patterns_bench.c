/* gpu_patterns_bench.c: intra-node transfer patterns among G GPUs (one process
 * per GPU) through CUDA IPC windows, against NCCL on the same buffers:
 * all-gather (vs ncclAllGather), fan-out 0 -> rest (vs ncclBroadcast), fan-in
 * rest -> 0, disjoint pairs both ways, bipartite first half -> second half
 * (the last three vs grouped ncclSend/ncclRecv). Each at several sizes per
 * rank; aggregate GB/s = bytes landed in destinations / time of the slowest
 * rank, median of 5 after 2 warm-ups; every destination region of every run
 * (warm-ups too) is checked against the digest of its source. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_ranks.h"
#include "common/mem/mem.h"
#include "common/window/window.h"

#define MIB ((size_t)1 << 20)
#define WARM 2
#define REPS 5
#define CHUNK (64 * MIB) /* wsync copies a region chunk by chunk */
/* A timed run repeats the pattern until this many bytes per region moved, so
 * that the few tens of microseconds by which the ranks' starts differ (the
 * barrier goes through the parent) do not dominate the small sizes. */
#define BATCH_BYTES (256 * MIB)
#define SEED 0x77a11e5ULL
#define MAX_SIZES 16
#define MAX_EDGES (RANKS_MAX * RANKS_MAX)

#define WS(call)                                      \
    do {                                              \
        if ((call) != WSYNC_OK)                       \
            DIE("%s: %s", #call, wsync_last_error()); \
    } while (0)

enum { PAT_ALLGATHER, PAT_FANOUT, PAT_FANIN, PAT_PAIRS, PAT_BIPARTITE, PAT_COUNT };
static const char *const pat_name[PAT_COUNT] = {"all-gather", "fan-out", "fan-in", "pairs", "bipartite"};

/* Source rank `src`'s data lives at offset src*S of its window and lands at
 * the same offset in `dst`'s window: destination regions never overlap, and
 * no rank's own region is ever written. */
typedef struct edge {
    int src, dst;
} edge_t;

typedef struct rank_ctx {
    int rank;
    char *buf;                     /* own window: G * largest size */
    char *peer[RANKS_MAX];         /* the other ranks' windows, mapped */
    cudaStream_t s0, s[RANKS_MAX]; /* s[p]: copies out of peer p */
    cudaEvent_t t0, t1, done[RANKS_MAX];
    ncclComm_t comm;
    uint64_t ref[RANKS_MAX]; /* digest of region p as filled */
} rank_ctx_t;

static int ngpus;
static size_t sizes[MAX_SIZES] = {4 * MIB, 64 * MIB, 256 * MIB};
static int nsizes = 3;

static int pattern_edges(int pat, int g, edge_t *e, char *shape, size_t shape_len)
{
    int n = 0, h = g / 2, p, q;
    switch (pat) {
    case PAT_ALLGATHER:
        for (p = 0; p < g; p++)
            for (q = 0; q < g; q++)
                if (p != q)
                    e[n++] = (edge_t){p, q};
        snprintf(shape, shape_len, "%dx%d", g, g - 1);
        break;
    case PAT_FANOUT:
        for (q = 1; q < g; q++)
            e[n++] = (edge_t){0, q};
        snprintf(shape, shape_len, "1->%d", g - 1);
        break;
    case PAT_FANIN:
        for (p = 1; p < g; p++)
            e[n++] = (edge_t){p, 0};
        snprintf(shape, shape_len, "%d->1", g - 1);
        break;
    case PAT_PAIRS:
        for (p = 0; p + 1 < g; p += 2) {
            e[n++] = (edge_t){p, p + 1};
            e[n++] = (edge_t){p + 1, p};
        }
        snprintf(shape, shape_len, "%dx2 ways", h);
        break;
    default:
        for (p = 0; p < h; p++)
            for (q = h; q < 2 * h; q++)
                e[n++] = (edge_t){p, q};
        snprintf(shape, shape_len, "%dx%d 1way", h, h);
        break;
    }
    return n;
}

/* Fill G regions of S with the pattern and record each region's digest; the
 * own region keeps these bytes for every pattern of this size. */
static void prepare(rank_ctx_t *c, size_t S)
{
    int p;
    WS(wsync_mem_cuda.fill(c->buf, S * (size_t)ngpus, 0, SEED));
    for (p = 0; p < ngpus; p++)
        WS(wsync_mem_cuda.digest_sum(c->buf + (size_t)p * S, S, (uint64_t)p * S, &c->ref[p]));
}

static void zero_incoming(rank_ctx_t *c, const edge_t *e, int n, size_t S)
{
    int k;
    for (k = 0; k < n; k++)
        if (e[k].dst == c->rank)
            CU(cudaMemsetAsync(c->buf + (size_t)e[k].src * S, 0, S, c->s0));
    CU(cudaStreamSynchronize(c->s0));
}

/* 1 when every destination region of this run, on every rank, equals its source. */
static int check(rank_ctx_t *c, const edge_t *e, int n, size_t S, const char *who)
{
    uint64_t sum;
    int k, ok = 1;
    for (k = 0; k < n; k++) {
        if (e[k].dst != c->rank)
            continue;
        WS(wsync_mem_cuda.digest_sum(c->buf + (size_t)e[k].src * S, S, (uint64_t)e[k].src * S, &sum));
        if (sum != c->ref[e[k].src]) {
            fprintf(stderr,
                    "rank %d: %s, %zu MiB: the region from rank %d differs from its source "
                    "(digest %016llx, expected %016llx)\n",
                    c->rank, who, S / MIB, e[k].src, (unsigned long long)sum, (unsigned long long)c->ref[e[k].src]);
            ok = 0;
        }
    }
    return ranks_all(ok);
}

/* Seconds of one pattern round, from this rank's start to its last byte. */
static double stop_clock(rank_ctx_t *c, int iters)
{
    float ms;
    CU(cudaEventRecord(c->t1, c->s0));
    CU(cudaEventSynchronize(c->t1));
    CU(cudaEventElapsedTime(&ms, c->t0, c->t1));
    return ranks_max(ms / 1e3 / iters);
}

/* wsync: every destination pulls its regions out of the sources' windows,
 * one stream per source (the copy engines), chunk by chunk. */
static double run_wsync(rank_ctx_t *c, const edge_t *e, int n, size_t S, int iters)
{
    size_t off, len;
    int k, it;
    ranks_barrier();
    CU(cudaEventRecord(c->t0, c->s0));
    for (k = 0; k < n; k++)
        if (e[k].dst == c->rank)
            CU(cudaStreamWaitEvent(c->s[e[k].src], c->t0, 0));
    for (it = 0; it < iters; it++)
        for (k = 0; k < n; k++) {
            size_t base = (size_t)e[k].src * S;
            if (e[k].dst != c->rank)
                continue;
            for (off = 0; off < S; off += len) {
                len = S - off < CHUNK ? S - off : CHUNK;
                CU(cudaMemcpyAsync(c->buf + base + off, c->peer[e[k].src] + base + off, len, cudaMemcpyDefault,
                                   c->s[e[k].src]));
            }
        }
    for (k = 0; k < n; k++)
        if (e[k].dst == c->rank) {
            CU(cudaEventRecord(c->done[e[k].src], c->s[e[k].src]));
            CU(cudaStreamWaitEvent(c->s0, c->done[e[k].src], 0));
        }
    return stop_clock(c, iters);
}

/* NCCL on the same buffers: the collective where there is one, else one
 * group of sends and receives per round. */
static double run_nccl(rank_ctx_t *c, int pat, const edge_t *e, int n, size_t S, int iters)
{
    int k, it, mine;
    ranks_barrier();
    CU(cudaEventRecord(c->t0, c->s0));
    for (it = 0; it < iters; it++) {
        if (pat == PAT_ALLGATHER) {
            NC(ncclAllGather(c->buf + (size_t)c->rank * S, c->buf, S, ncclUint8, c->comm, c->s0));
            continue;
        }
        if (pat == PAT_FANOUT) {
            NC(ncclBroadcast(c->buf, c->buf, S, ncclUint8, 0, c->comm, c->s0));
            continue;
        }
        for (k = 0, mine = 0; k < n; k++)
            mine += e[k].src == c->rank || e[k].dst == c->rank;
        if (mine == 0)
            continue;
        NC(ncclGroupStart());
        for (k = 0; k < n; k++) {
            if (e[k].src == c->rank)
                NC(ncclSend(c->buf + (size_t)c->rank * S, S, ncclUint8, e[k].dst, c->comm, c->s0));
            if (e[k].dst == c->rank)
                NC(ncclRecv(c->buf + (size_t)e[k].src * S, S, ncclUint8, e[k].src, c->comm, c->s0));
        }
        NC(ncclGroupEnd());
    }
    return stop_clock(c, iters);
}

static void setup(rank_ctx_t *c, int rank, size_t window_len, wsync_window_t *w)
{
    wsync_blob_t mine, all[RANKS_MAX];
    int p;
    memset(c, 0, sizeof(*c));
    c->rank = rank;
    WS(wsync_mem_cuda.init(rank));
    WS(wsync_window_cuda_ipc.alloc(window_len, w));
    c->buf = w->ptr;
    memset(&mine, 0, sizeof(mine));
    WS(wsync_window_cuda_ipc.export_blob(w, &mine));
    ranks_allgather(&mine, all, sizeof(mine));
    for (p = 0; p < ngpus; p++)
        if (p != rank)
            WS(wsync_window_cuda_ipc.map(&all[p], -1, window_len, (void **)&c->peer[p]));
    CU(cudaStreamCreateWithFlags(&c->s0, cudaStreamNonBlocking));
    CU(cudaEventCreate(&c->t0));
    CU(cudaEventCreate(&c->t1));
    for (p = 0; p < ngpus; p++) {
        CU(cudaStreamCreateWithFlags(&c->s[p], cudaStreamNonBlocking));
        CU(cudaEventCreateWithFlags(&c->done[p], cudaEventDisableTiming));
    }
    c->comm = ranks_comm();
}

static void print_header(void)
{
    struct cudaDeviceProp prop;
    int v = 0, i;
    CU(cudaGetDeviceProperties(&prop, 0));
    NC(ncclGetVersion(&v));
    printf("gpu_patterns_bench: %d x %s, one process per GPU; wsync = pulls out of CUDA IPC windows "
           "(one stream per source, %zu MiB chunks); NCCL %d.%d.%d on the same buffers "
           "(NCCL_NVLS_ENABLE=%s)\n",
           ngpus, prop.name, CHUNK / MIB, v / 10000, v / 100 % 100, v % 100,
           getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "unset");
    printf("  GB/s = bytes landed in destinations (all ranks) / time of the slowest rank; median of %d runs "
           "after %d warm-ups; a run repeats the pattern `batch` times (>= %zu MiB per region); every run "
           "checked\n",
           REPS, WARM, BATCH_BYTES / MIB);
    printf("  sizes (MiB per rank):");
    for (i = 0; i < nsizes; i++)
        printf(" %g", (double)sizes[i] / MIB);
    printf("\n  %-10s %-10s %9s %5s %10s %10s %10s %10s %6s  %s\n", "pattern", "shape", "MiB/rank", "batch",
           "wsync ms", "NCCL ms", "wsync GB/s", "NCCL GB/s", "ratio", "check");
}

static int ranks_main(int rank)
{
    rank_ctx_t c;
    wsync_window_t w;
    edge_t e[MAX_EDGES];
    char shape[32];
    double tw[REPS], tn[REPS], a, b;
    size_t S, window_len = 0;
    int si, pat, n, run, iters, ok, all_ok = 1;

    for (si = 0; si < nsizes; si++)
        window_len = sizes[si] > window_len ? sizes[si] : window_len;
    window_len *= (size_t)ngpus;
    setup(&c, rank, window_len, &w);
    if (rank == 0)
        print_header();
    for (si = 0; si < nsizes; si++) {
        S = sizes[si];
        iters = S >= BATCH_BYTES ? 1 : (int)((BATCH_BYTES + S - 1) / S);
        prepare(&c, S);
        for (pat = 0; pat < PAT_COUNT; pat++) {
            n = pattern_edges(pat, ngpus, e, shape, sizeof(shape));
            ok = 1;
            /* wsync and NCCL alternate, so both see the same conditions. */
            for (run = -WARM; run < REPS; run++) {
                zero_incoming(&c, e, n, S);
                a = run_wsync(&c, e, n, S, iters);
                ok &= check(&c, e, n, S, "wsync");
                zero_incoming(&c, e, n, S);
                b = run_nccl(&c, pat, e, n, S, iters);
                ok &= check(&c, e, n, S, "nccl");
                if (run >= 0) {
                    tw[run] = a;
                    tn[run] = b;
                }
            }
            all_ok &= ok;
            if (rank == 0) {
                double mw = median(tw, REPS), mn = median(tn, REPS), bytes = (double)n * (double)S;
                printf("  %-10s %-10s %9g %5d %10.3f %10.3f %10.1f %10.1f %6.2f  %s\n", pat_name[pat], shape,
                       (double)S / MIB, iters, mw * 1e3, mn * 1e3, bytes / mw / 1e9, bytes / mn / 1e9, mn / mw,
                       ok ? "ok" : "FAIL");
                fflush(stdout);
            }
        }
    }
    if (rank == 0)
        printf("  ratio = NCCL time / wsync time (> 1: wsync faster); checks: %s\n",
               all_ok ? "every destination region of every run equals its source" : "FAILED (details on stderr)");
    fflush(stdout); /* a failing rank's exit ends the others */
    NC(ncclCommDestroy(c.comm));
    for (si = 0; si < ngpus; si++)
        if (si != rank)
            wsync_window_cuda_ipc.unmap(c.peer[si], window_len);
    wsync_window_cuda_ipc.free(&w);
    return all_ok ? 0 : 1;
}

static int parse_args(int argc, char **argv, int *want_gpus)
{
    uint64_t v;
    int i, custom = 0;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
            *want_gpus = atoi(argv[++i]);
            continue;
        }
        if (nsizes >= MAX_SIZES && custom) {
            fprintf(stderr, "gpu_patterns_bench: at most %d sizes\n", MAX_SIZES);
            return 1;
        }
        /* A bare number is MiB; "512K", "1G" are sizes. */
        if (strspn(argv[i], "0123456789") == strlen(argv[i]) && argv[i][0]) {
            v = strtoull(argv[i], NULL, 10) * MIB;
        } else if (wsync_parse_size(argv[i], "size per rank", &v) != WSYNC_OK) {
            fprintf(stderr, "gpu_patterns_bench: %s\n", wsync_last_error());
            return 1;
        }
        if (v == 0) {
            fprintf(stderr,
                    "gpu_patterns_bench: size per rank '%s' is zero; give MiB (e.g. 64) or a size (e.g. 512K)\n",
                    argv[i]);
            return 1;
        }
        if (!custom)
            nsizes = 0;
        custom = 1;
        sizes[nsizes++] = (size_t)v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int want = 0;
    if (parse_args(argc, argv, &want) != 0) {
        fprintf(stderr, "usage: gpu_patterns_bench [--gpus N] [SIZE_PER_RANK...]   (default 4 64 256 MiB)\n");
        return 2;
    }
    /* Keep NVLink multicast off whatever the environment says (the lent GPU hosts ask for it). */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    ngpus = pair_gpus(); /* counted in a child: no CUDA in the parent before fork */
    if (ngpus == 0) {
        printf("gpu_patterns_bench: skipped: no CUDA device\n");
        return 0;
    }
    if (want > 0 && want < ngpus)
        ngpus = want;
    if (ngpus > RANKS_MAX) {
        printf("gpu_patterns_bench: %d GPUs, using the first %d\n", ngpus, RANKS_MAX);
        ngpus = RANKS_MAX;
    }
    if (ngpus < 2) {
        printf("gpu_patterns_bench: skipped: needs 2 CUDA devices, found %d\n", ngpus);
        return 0;
    }
    if (ranks_run(ngpus, ranks_main) != 0) {
        printf("gpu_patterns_bench: FAILED (a check failed or a rank died; see stderr)\n");
        return 1;
    }
    return 0;
}

#else
int main(void)
{
    printf("gpu_patterns_bench: skipped: no CUDA device (not built with CUDA and NCCL)\n");
    return 0;
}
#endif
