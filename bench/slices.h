/* slices.h: what the pack benchmarks pack: the row-parallel weights of
 * Qwen2.5-7B (28 layers of o_proj [3584, 3584] and down_proj [3584, 18944],
 * bf16, back to back in the source), as TP rank `rank` of `tp` holds them:
 * the chunk of dim 1 of each, i.e. a column slice, one 2-D run per tensor,
 * packed back to back in the destination. Optionally cut into puts of at
 * most `put_bytes` (whole rows), as the plan cuts them. */
#ifndef WSYNC_BENCH_SLICES_H
#define WSYNC_BENCH_SLICES_H

#include <stdint.h>
#include <stdlib.h>

#include "common/pack/pack.h"

#define SLICES_H 3584ull
#define SLICES_I 18944ull

/* Source bytes of `layers` layers. */
static inline uint64_t slices_src_bytes(int layers)
{
    return (uint64_t)layers * SLICES_H * (SLICES_H + SLICES_I) * 2;
}

/* The 2 * layers runs of rank `rank` of `tp`; returns the destination bytes. */
static inline uint64_t slices_runs(int layers, int tp, int rank, wsync_run2d_t *runs)
{
    uint64_t src = 0, dst = 0;
    int l, k;
    for (l = 0; l < layers; l++)
        for (k = 0; k < 2; k++) {
            uint64_t cols = k == 0 ? SLICES_H : SLICES_I, row = cols * 2 / (uint64_t)tp;
            wsync_run2d_t *r = &runs[2 * l + k];
            *r = (wsync_run2d_t){.src_off = src + (uint64_t)rank * row,
                                 .src_stride = cols * 2,
                                 .row_bytes = row,
                                 .rows = SLICES_H,
                                 .dst_off = dst};
            src += SLICES_H * cols * 2;
            dst += SLICES_H * row;
        }
    return dst;
}

/* One put: its destination range and its runs (dst_off relative to it). */
typedef struct slices_put {
    uint64_t dst_off, len;
    wsync_run2d_t *runs;
    size_t n;
} slices_put_t;

/* Cuts the runs (back to back in the destination) into puts of at most
 * put_bytes, at row boundaries (a row longer than put_bytes is a put of its
 * own). Returns the number of puts, *out malloc'ed (free each runs and the
 * array); 0 on allocation failure. */
static inline size_t slices_cut(const wsync_run2d_t *runs, size_t n, uint64_t put_bytes, slices_put_t **out)
{
    size_t cap = 16, np = 0, i;
    slices_put_t *p = calloc(cap, sizeof(*p));
    if (!p)
        return 0;
    for (i = 0; i < n; i++) {
        uint64_t row = 0;
        while (row < runs[i].rows) {
            slices_put_t *cur;
            uint64_t room, take;
            if (np == 0 || p[np - 1].len + runs[i].row_bytes > put_bytes) {
                if (np == cap) {
                    slices_put_t *q = realloc(p, 2 * cap * sizeof(*p));
                    if (!q)
                        return 0;
                    p = q;
                    cap *= 2;
                }
                p[np] = (slices_put_t){.dst_off = runs[i].dst_off + row * runs[i].row_bytes,
                                       .runs = malloc((n + 1) * sizeof(wsync_run2d_t))};
                if (!p[np].runs)
                    return 0;
                np++;
            }
            cur = &p[np - 1];
            room = (put_bytes - cur->len) / runs[i].row_bytes;
            take = room == 0 ? 1 : room;
            if (take > runs[i].rows - row)
                take = runs[i].rows - row;
            cur->runs[cur->n++] = (wsync_run2d_t){.src_off = runs[i].src_off + row * runs[i].src_stride,
                                                  .src_stride = runs[i].src_stride,
                                                  .row_bytes = runs[i].row_bytes,
                                                  .rows = take,
                                                  .dst_off = cur->len};
            cur->len += take * runs[i].row_bytes;
            row += take;
        }
    }
    *out = p;
    return np;
}

static inline void slices_free(slices_put_t *p, size_t np)
{
    size_t i;
    for (i = 0; p && i < np; i++)
        free(p[i].runs);
    free(p);
}

#endif
