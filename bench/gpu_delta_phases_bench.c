/* gpu_delta_phases_bench.c: where the GPU delta encoder's and decoder's time
 * goes, kernel by kernel (delta_cuda.h), against cudaMemcpy device to device
 * of the same piece in the same run. gpu_delta_bench times whole calls; this
 * one runs each pipeline on the stream with an event between its kernels and
 * reports the median of each stretch over REPS runs:
 *   v2 encode: compare (mask_fast), scan, gather (compact, pairs layout);
 *   v3l encode: the one pass;
 *   v5 encode: count (stream_count), scan, write (stream_write, the form it picks);
 *   bitmap apply: counts, scan, scatter.
 * Usage: gpu_delta_phases_bench [SIZE_MIB [WIDTH [PERMILLE]]] (default 1024 2 20;
 * the bitmap apply is timed on a wire of 10% changed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/delta/delta.h"
#include "common/delta/delta_gpu.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/delta/delta_cuda.h"

#define REPS 10
#define MARKS 4

typedef unsigned long long ull;

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void *dev(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        fprintf(stderr, "gpu_delta_phases_bench: out of GPU memory for %zu bytes\n", bytes);
        exit(1);
    }
    cudaMemset(p, 0, bytes ? bytes : 16);
    return p;
}

typedef struct buf {
    unsigned char *base, *next, *wire, *dst;
    uint32_t *words;
    ull *counts, *seg, *total, *state;
    unsigned char *held;
    uint64_t n, len;
    unsigned w;
} buf_t;

/* One pipeline (which), events ev[0..k] around its k stretches. */
static int run_once(buf_t *b, int which, cudaEvent_t *ev, const wsync_delta_header_t *h)
{
    uint64_t tiles = wsync_delta_cuda_blocks(b->n), wch = wsync_delta_cuda_wchunks(b->len);
    unsigned char *pay = b->wire + WSYNC_DELTA_HEADER;
    int e = 0;
    if (which == 3)
        cudaMemcpy(b->dst, b->base, b->len, cudaMemcpyDeviceToDevice);
    if (which == 1)
        cudaMemsetAsync(b->state, 0,
                        (2 + wsync_delta_cuda_chunks(b->len, 2 * WSYNC_DELTA_CUDA_CHUNK)) * sizeof(ull), NULL);
    cudaEventRecord(ev[0], NULL);
    switch (which) {
    case 0: /* v2 encode */
        e |= wsync_delta_cuda_mask_fast(b->base, b->next, b->n, b->w, b->words, b->counts, NULL);
        cudaEventRecord(ev[1], NULL);
        e |= wsync_delta_cuda_scan_fast(b->counts, tiles, b->seg, b->total, NULL);
        cudaEventRecord(ev[2], NULL);
        e |= wsync_delta_cuda_compact(b->next, b->n, b->w, b->words, b->counts, b->seg, NULL, pay, 4,
                                      pay + b->n / 50 * 4, NULL);
        cudaEventRecord(ev[3], NULL);
        return e ? -1 : 3;
    case 1: /* v3l */
        e |= wsync_delta_cuda_encode_pass(b->base, b->next, b->n, b->w, 2 * WSYNC_DELTA_CUDA_CHUNK, b->words,
                                          b->state, pay, 4, b->n / 8, pay + b->n / 2, NULL);
        cudaEventRecord(ev[1], NULL);
        return e ? -1 : 1;
    case 2: /* v5 encode */
        e |= wsync_delta_cuda_stream_count(b->base, b->next, b->n, b->w, b->words, b->counts, b->held,
                                           (unsigned *)(b->total + 1), NULL);
        cudaEventRecord(ev[1], NULL);
        e |= wsync_delta_cuda_scan_one(b->counts, wch, b->seg, b->total, (unsigned *)(b->total + 1) + 1, NULL);
        cudaEventRecord(ev[2], NULL);
        e |= wsync_delta_cuda_stream_write(b->next, b->n, b->w, b->words, b->counts, b->seg, b->total, b->held,
                                           b->wire, (unsigned *)(b->total + 1), NULL, NULL);
        cudaEventRecord(ev[3], NULL);
        return e ? -1 : 3;
    default: /* bitmap apply */
        e |= wsync_delta_cuda_bitmap_counts_fast(pay, b->n, b->counts, (unsigned *)(b->total + 1), NULL);
        cudaEventRecord(ev[1], NULL);
        e |= wsync_delta_cuda_scan_fast(b->counts, tiles, b->seg, b->total, NULL);
        cudaEventRecord(ev[2], NULL);
        e |= wsync_delta_cuda_scatter_bitmap(b->dst, b->n, b->w, pay, b->counts, b->seg, pay + (b->n + 7) / 8,
                                             NULL, NULL, h->changed, NULL);
        cudaEventRecord(ev[3], NULL);
        return e ? -1 : 3;
    }
}

static void phases(buf_t *b, int which, const char *name, const char *const *stretch, double mc_ms,
                   const wsync_delta_header_t *h)
{
    cudaEvent_t ev[MARKS];
    float t[MARKS - 1][REPS], all[REPS];
    int k = 0;
    for (int i = 0; i < MARKS; i++)
        cudaEventCreate(&ev[i]);
    run_once(b, which, ev, h); /* warm-up */
    for (int r = 0; r < REPS; r++) {
        if ((k = run_once(b, which, ev, h)) < 0 || cudaEventSynchronize(ev[k]) != cudaSuccess) {
            fprintf(stderr, "gpu_delta_phases_bench: %s failed: %s\n", name, cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
        for (int s = 0; s < k; s++)
            cudaEventElapsedTime(&t[s][r], ev[s], ev[s + 1]);
        cudaEventElapsedTime(&all[r], ev[0], ev[k]);
    }
    qsort(all, REPS, sizeof(float), cmp_f);
    printf("%-14s total %7.3f ms (%.2fx of the copy):", name, all[REPS / 2], mc_ms / all[REPS / 2]);
    for (int s = 0; s < k; s++) {
        qsort(t[s], REPS, sizeof(float), cmp_f);
        printf(" %s %.3f", stretch[s], t[s][REPS / 2]);
    }
    printf("\n");
    for (int i = 0; i < MARKS; i++)
        cudaEventDestroy(ev[i]);
}

/* The whole call (wsync_delta_gpu_encode under WSYNC_DELTA_GPU=kern), as
 * gpu_delta_bench times it: the kernels plus the read-back, the host's
 * choice, the finish and the waits. */
static double call_ms(buf_t *b, const char *kern, void *scratch)
{
    cudaEvent_t a, z;
    float t[REPS];
    size_t wl = 0;
    setenv("WSYNC_DELTA_GPU", kern, 1);
    cudaEventCreate(&a), cudaEventCreate(&z);
    for (int r = -1; r < REPS; r++) {
        cudaEventRecord(a, NULL);
        if (wsync_delta_gpu_encode(b->base, b->next, b->len, b->w, b->wire, wsync_delta_bound(b->len, b->w), &wl,
                                   NULL, scratch, NULL) != WSYNC_OK) {
            fprintf(stderr, "gpu_delta_phases_bench: encode %s: %s\n", kern, wsync_last_error());
            exit(1);
        }
        cudaEventRecord(z, NULL);
        cudaEventSynchronize(z);
        if (r >= 0)
            cudaEventElapsedTime(&t[r], a, z);
    }
    unsetenv("WSYNC_DELTA_GPU");
    qsort(t, REPS, sizeof(float), cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(z);
    return t[REPS / 2];
}

static double copy_ms(buf_t *b)
{
    cudaEvent_t a, z;
    float t[REPS];
    cudaEventCreate(&a), cudaEventCreate(&z);
    cudaMemcpy(b->dst, b->next, b->len, cudaMemcpyDeviceToDevice);
    for (int r = 0; r < REPS; r++) {
        cudaEventRecord(a, NULL);
        cudaMemcpyAsync(b->dst, b->next, b->len, cudaMemcpyDeviceToDevice, NULL);
        cudaEventRecord(z, NULL);
        cudaEventSynchronize(z);
        cudaEventElapsedTime(&t[r], a, z);
    }
    qsort(t, REPS, sizeof(float), cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(z);
    return t[REPS / 2];
}

/* next = base with each element's low bit flipped at permille/1000. */
static void make_next(buf_t *b, unsigned char *host, unsigned permille)
{
    uint64_t x = 88172645463325252ULL;
    cudaMemcpy(host, b->base, b->len, cudaMemcpyDeviceToHost);
    for (uint64_t e = 0; e < b->n; e++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (x % 1000 < permille)
            host[e * b->w] ^= 1;
    }
    cudaMemcpy(b->next, host, b->len, cudaMemcpyHostToDevice);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    unsigned w = argc > 2 ? (unsigned)atoi(argv[2]) : 2, permille = argc > 3 ? (unsigned)atoi(argv[3]) : 20;
    static const char *const enc2[] = {"compare", "scan", "gather"}, *const enc3[] = {"pass"},
                             *const enc5[] = {"count", "scan", "write"}, *const app[] = {"counts", "scan", "scatter"};
    buf_t b = {0};
    wsync_delta_header_t h;
    size_t wl = 0;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_delta_phases_bench: skipped: no CUDA device\n");
        return 0;
    }
    if (w != 1 && w != 2 && w != 4 && w != 8) {
        fprintf(stderr, "gpu_delta_phases_bench: width %u is not 1, 2, 4 or 8\n", w);
        return 2;
    }
    b.w = w, b.len = mib << 20, b.n = b.len / w;
    unsigned char *host = malloc(b.len), *scratch;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    if (host == NULL)
        return 1;
    b.base = dev(b.len), b.next = dev(b.len), b.dst = dev(b.len), b.wire = dev(wsync_delta_bound(b.len, w));
    b.words = dev((b.n + 31) / 32 * 4 + 16);
    b.counts = dev((wsync_delta_cuda_blocks(b.n) + wsync_delta_cuda_wchunks(b.len)) * sizeof(ull));
    b.seg = dev((wsync_delta_cuda_segs(wsync_delta_cuda_wchunks(b.len)) + 16) * sizeof(ull));
    b.total = dev(4 * sizeof(ull));
    b.state = dev((2 + wsync_delta_cuda_chunks(b.len, WSYNC_DELTA_CUDA_CHUNK)) * sizeof(ull));
    b.held = dev(wsync_delta_cuda_held_bytes(b.len));
    scratch = dev(wsync_delta_gpu_scratch(b.len, w));
    for (size_t i = 0; i < b.len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        host[i] = (unsigned char)x;
    }
    cudaMemcpy(b.base, host, b.len, cudaMemcpyHostToDevice);
    make_next(&b, host, permille);
    double mc = copy_ms(&b);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("gpu_delta_phases_bench: %s, %zu MiB, width %u, %.1f%% changed, median of %d (ms); D2D copy %.3f ms "
           "(%.1f GB/s of the piece)\n",
           prop.name, mib, w, permille / 10.0, REPS, mc, (double)b.len / mc / 1e6);
    phases(&b, 0, "encode v2", enc2, mc, NULL);
    phases(&b, 1, "encode v3l", enc3, mc, NULL);
    phases(&b, 2, "encode v5", enc5, mc, NULL);
    printf("whole calls (wsync_delta_gpu_encode):");
    for (int k = 0; k < 3; k++) {
        static const char *const kern[] = {"v2", "v3l", "v5"};
        double ms = call_ms(&b, kern[k], scratch);
        printf(" %s %.3f ms (%.2fx)", kern[k], ms, mc / ms);
    }
    printf("\n");
    make_next(&b, host, 100);
    if (wsync_delta_gpu_encode(b.base, b.next, b.len, w, b.wire, wsync_delta_bound(b.len, w), &wl, NULL, scratch,
                               NULL) != WSYNC_OK ||
        cudaMemcpy(host, b.wire, WSYNC_DELTA_HEADER, cudaMemcpyDeviceToHost) != cudaSuccess ||
        wsync_delta_parse_header(host, wl, b.len, &h) != WSYNC_OK || h.form != WSYNC_DELTA_BITMAP) {
        fprintf(stderr, "gpu_delta_phases_bench: no bitmap wire at 10%%: %s\n", wsync_last_error());
        return 1;
    }
    printf("bitmap apply of a 10%% wire (%.4f of full):\n", (double)wl / (double)b.len);
    phases(&b, 3, "apply", app, mc, &h);
    return 0;
}
#else
int main(void)
{
    printf("gpu_delta_phases_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
