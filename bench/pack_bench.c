/* pack_bench.c: the host gather packing column slices: the row-parallel
 * weights of Qwen2.5-7B (o_proj and down_proj, bf16: bench/slices.h) of a
 * few layers as TP rank 1 of T = 2, 4, 8 holds them, against a memcpy of
 * the same number of contiguous bytes between the same buffers in the same
 * run (single thread each; the gather on 2 threads too). Destination pages
 * are touched before timing; best of the repeats. Every packed byte is
 * compared with a row-by-row memcpy gather.
 * Usage: pack_bench [layers, default 4] [repeats, default 5]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "bench/slices.h"
#include "common/pack/pack.h"
#include "common/base/util.h"

#define MAX_LAYERS 28

static double best_of(double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = v[i] < b ? v[i] : b;
    return b;
}

int main(int argc, char **argv)
{
    static const int tps[] = {2, 4, 8};
    int layers = argc > 1 ? atoi(argv[1]) : 4, reps = argc > 2 ? atoi(argv[2]) : 5;
    wsync_run2d_t runs[2 * MAX_LAYERS];
    uint64_t src_len;
    char *src, *dst, *want;
    size_t k;
    if (layers < 1 || layers > MAX_LAYERS || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: pack_bench [layers 1..%d] [repeats 1..100]\n", MAX_LAYERS);
        return 2;
    }
    src_len = slices_src_bytes(layers);
    src = malloc(src_len);
    dst = malloc(src_len / 2);
    want = malloc(src_len / 2);
    if (!src || !dst || !want) {
        fprintf(stderr, "pack_bench: cannot allocate %llu bytes\n", (unsigned long long)(2 * src_len));
        return 1;
    }
    wsync_fill_pattern(src, src_len, 0, 77);
    memset(dst, 1, src_len / 2);
    memset(want, 1, src_len / 2);
    printf("pack_bench: column slices of Qwen2.5-7B's o_proj + down_proj (%d layers, bf16, %.2f GB) on the host, "
           "TP rank 1, best of %d\n",
           layers, (double)src_len / 1e9, reps);
    printf("  %-3s %9s %6s %13s %13s %13s %11s %11s\n", "TP", "MB", "row", "pack GB/s", "pack 2t GB/s",
           "memcpy GB/s", "ratio 1t", "ratio 2t");
    for (k = 0; k < sizeof(tps) / sizeof(tps[0]); k++) {
        uint64_t len = slices_runs(layers, tps[k], 1, runs);
        double tp[100], t2[100], tc[100], p, p2, c, gb = (double)len / 1e9;
        size_t i, r;
        for (int rep = 0; rep < reps; rep++) {
            double t0 = wsync_now_s();
            wsync_pack_host(dst, src, runs, 2 * (size_t)layers);
            tp[rep] = wsync_now_s() - t0;
            t0 = wsync_now_s();
            if (wsync_pack_host_threads(dst, src, runs, 2 * (size_t)layers, 2) != WSYNC_OK) {
                fprintf(stderr, "pack_bench: %s\n", wsync_last_error());
                return 1;
            }
            t2[rep] = wsync_now_s() - t0;
            t0 = wsync_now_s();
            memcpy(dst, src + 4096, len);
            tc[rep] = wsync_now_s() - t0;
        }
        wsync_pack_host(dst, src, runs, 2 * (size_t)layers);
        for (i = 0; i < 2 * (size_t)layers; i++)
            for (r = 0; r < runs[i].rows; r++)
                memcpy(want + runs[i].dst_off + r * runs[i].row_bytes,
                       src + runs[i].src_off + r * runs[i].src_stride, runs[i].row_bytes);
        if (memcmp(dst, want, len) != 0) {
            fprintf(stderr, "pack_bench: TP=%d: the pack differs from the row-by-row gather\n", tps[k]);
            return 1;
        }
        p = best_of(tp, reps);
        p2 = best_of(t2, reps);
        c = best_of(tc, reps);
        printf("  %-3d %9.1f %6llu %13.2f %13.2f %13.2f %11.2f %11.2f\n", tps[k], gb * 1e3,
               (unsigned long long)runs[0].row_bytes, gb / p, gb / p2, gb / c, c / p, c / p2);
        fflush(stdout);
    }
    printf(
        "  ratio = memcpy time / pack time for the same bytes; every packed byte equals the row-by-row gather\n");
    free(src);
    free(dst);
    free(want);
    return 0;
}
