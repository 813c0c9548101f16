/* target_plan_internal.h: the steps of the node plan (target_plan.c) that
 * other files implement: the distinct source bytes a node needs, as cells
 * (target_cells.c), and the finished plan's indexes (target_plan_index.c). */
#ifndef WSYNC_COMMON_TARGET_PLAN_INTERNAL_H
#define WSYNC_COMMON_TARGET_PLAN_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

#include "common/base/checks.h"
#include "common/targets/target_plan.h"

/* Appends `item` to a growable array (ptr, n, cap); returns NOMEM on failure. */
#define TP_PUSH(ptr, n, cap, item)                                                      \
    do {                                                                                \
        if ((n) == (cap)) {                                                             \
            size_t tp_nc_ = (cap) ? (cap)*2 : 64;                                       \
            void *tp_np_ = realloc((ptr), tp_nc_ * sizeof(*(ptr)));                     \
            if (tp_np_ == NULL)                                                         \
                return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan"); \
            (ptr) = tp_np_;                                                             \
            (cap) = tp_nc_;                                                             \
        }                                                                               \
        (ptr)[(n)++] = (item);                                                          \
    } while (0)

/* One rank's need: a run of its target (source rows -> back-to-back
 * destination rows). */
typedef struct tp_need {
    uint64_t src, stride, width, rows;
    uint64_t dst;
    int rank;
    uint32_t seq; /* position in the input: a total order for sorting */
} tp_need_t;

/* Where one rank holds a cell: row i, byte j of the cell is at
 * dst + i * dpitch + j of its destination image. */
typedef struct tp_occ {
    int rank;
    uint64_t dst, dpitch;
} tp_occ_t;

/* Distinct source bytes with one set of holders: rows x width bytes at src +
 * i * stride. Cells are disjoint and come out sorted by src. */
typedef struct tp_cell {
    uint64_t src, stride, width, rows;
    size_t first_occ, nocc; /* occurrences, sorted by (rank, dst) */
    uint32_t set;           /* interned set of holder ranks */
} tp_cell_t;

typedef struct tp_cells {
    tp_cell_t *cells;
    size_t n, cap;
    tp_occ_t *occ;
    size_t nocc, capocc;
    /* Interned holder sets: set s is ranks set_ranks[set_first[s] ..
     * + set_len[s]], sorted; found through an open-addressing table. */
    int *set_ranks;
    size_t nset_ranks, capset_ranks;
    size_t *set_first, *set_len;
    size_t nsets, capsets, capsets2;
    uint32_t *hash; /* [hash_cap]: set id + 1, 0 = empty */
    size_t hash_cap;
} tp_cells_t;

/* Cells of the needs (reordered in place); with `apart`, each rank's
 * alone (no cell held by two ranks: cells then come out sorted by (rank,
 * src)). */
wsync_status_t tp_cells_build(tp_need_t *needs, size_t n, int apart, tp_cells_t *out);

/* 1 when the hint puts every one of the L > 1 local ranks on the GPU of
 * every trainer rank: one GPU under the node and its trainers. Each rank
 * then lands all it holds itself, bytes other ranks hold too included
 * (holders apart), unless every target is the whole image (the identity
 * plan shares such landings its own way, engine_side/landing.c): there a
 * copy out of another rank's window moves the
 * same bytes through the same memory as a put, after waiting for that
 * rank's landing (a TP=2 node on one H200 queued its last copy 1.5 ms
 * after both ranks' last landing). */
int tp_one_gpu(const wsync_land_hint_t *hint, int world, int L);
void tp_cells_free(tp_cells_t *c);

/* A part of a region (rows x width at src + i * stride): rows [i, i + rows),
 * bytes [j, j + w) of each. */
typedef struct tp_sub {
    uint64_t i, j, w, rows;
} tp_sub_t;

/* The parts of the region inside the byte interval [a, b) of the image: at
 * most a partial first row, whole rows, a partial last row (in that order). */
int tp_cut(uint64_t src, uint64_t stride, uint64_t width, uint64_t rows, uint64_t a, uint64_t b, tp_sub_t out[3]);

/* Fills each chunk's first_put/nputs/bytes and first_copy/ncopies, each
 * trainer rank's puts (rank_nputs, rank_puts) and the plan's byte counts,
 * from np->puts and np->copies; np->chunks (nchunks + 1 of them, zeroed but
 * for land_rank and src_chunk), land_bytes and holds_bytes are allocated. */
wsync_status_t tp_index(wsync_node_plan_t *np);

/* A put whose runs are all single rows, each continuing the one before it
 * in the source, becomes one run (a plain copy: whole-image pieces are one
 * run). make_puts merges no run across cells; other puts keep their runs cut
 * there, so the tasks of their gather never span two of the receiver's
 * tensors. */
void tp_runs_collapse(wsync_node_plan_t *np);

#endif
