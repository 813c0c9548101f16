/* plan.h: who sends what to whom. A pure function of (manifest or image size,
 * trainer layout, engine nodes, chunk size): every party computes the same
 * plan, so a publish needs no negotiation.
 *
 * Vocabulary. The image is cut into chunks of `chunk_size` bytes (the last may
 * be short). The trainer layout says which byte extents of the image each
 * trainer rank owns; together they cover the image exactly once. A *piece* is
 * the intersection of one chunk with one owned extent: the unit that crosses
 * hosts and that is digested. Piece byte ranges, ids and source ranks are the
 * same for every engine node; only the landing local rank depends on the node
 * (each node's L ranks take whole chunks round-robin: chunk c lands on local
 * rank c % L, so no rank lands more than its fair share plus one chunk). The
 * node's other ranks then copy each chunk out of its landing rank's window. */
#ifndef WSYNC_COMMON_PLAN_H
#define WSYNC_COMMON_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/model/manifest.h"

#define WSYNC_DEFAULT_CHUNK (64ULL << 20)

typedef struct wsync_extent {
    uint64_t offset;
    uint64_t len;
} wsync_extent_t;

/* Which extents of the image each of `world` trainer ranks owns. Extents of a
 * rank are sorted and disjoint; over all ranks they tile [0, image_size). */
typedef struct wsync_layout {
    int world;
    uint64_t image_size;
    size_t *nextents;         /* [world] */
    wsync_extent_t **extents; /* [world][nextents[r]] */
} wsync_layout_t;

/* W even contiguous shards: rank r owns [r*S, (r+1)*S) with S = ceil(size/W)
 * rounded up to WSYNC_ALIGN (later ranks may own less, or nothing). */
wsync_status_t wsync_layout_even(uint64_t image_size, int world, wsync_layout_t **out);
/* FSDP-style: every tensor split along dim 0 into W row ranges (rank r owns
 * rows [r*ceil(d0/W), ...)); padding between tensors and scalars/0-d tensors
 * go to rank 0. Extents of one rank are merged when adjacent. */
wsync_status_t wsync_layout_fsdp(const wsync_manifest_t *m, int world, wsync_layout_t **out);
/* Explicit extents (copied); fails, naming the rank and offset, unless they
 * tile the image exactly once. */
wsync_status_t wsync_layout_explicit(uint64_t image_size, int world, const size_t *nextents,
                                     const wsync_extent_t *const *extents, wsync_layout_t **out);
void wsync_layout_free(wsync_layout_t *l);

typedef struct wsync_piece {
    uint32_t id;     /* index in wsync_plan_t.pieces: the wire tag */
    uint32_t chunk;  /* offset / chunk_size */
    int src_rank;    /* trainer rank that owns and sends it */
    uint64_t offset; /* in the image */
    uint64_t len;
} wsync_piece_t;

typedef struct wsync_plan {
    uint64_t image_size;
    uint64_t chunk_size;
    uint32_t nchunks;
    int world;
    size_t npieces;
    wsync_piece_t *pieces;  /* sorted by offset; ids 0..npieces-1 */
    uint32_t *chunk_first;  /* [nchunks+1]: pieces of chunk c are [chunk_first[c], chunk_first[c+1]) */
    size_t *rank_npieces;   /* [world] */
    uint32_t **rank_pieces; /* [world][rank_npieces[r]]: ids a rank sends, in send order */
} wsync_plan_t;

/* Pieces = every non-empty intersection of a chunk with an owned extent,
 * sorted by offset; each rank's list in send (offset) order. Fails with
 * WSYNC_ERR_INVALID for a chunk size below 4096 or not a multiple of
 * WSYNC_ALIGN. Pure and deterministic: the same inputs give the same plan on
 * every party. Free with wsync_plan_free (NULL is fine). */
wsync_status_t wsync_plan_build(const wsync_layout_t *layout, uint64_t chunk_size, wsync_plan_t **out);
void wsync_plan_free(wsync_plan_t *p);

/* Local rank (of `local_ranks`) on which chunk `chunk` lands in a node. */
static inline int wsync_plan_land_rank(const wsync_plan_t *p, uint32_t chunk, int local_ranks)
{
    (void)p;
    return (int)(chunk % (uint32_t)local_ranks);
}

/* Bytes / pieces trainer rank `rank` sends to one node, and bytes local rank
 * `local_rank` lands in a node of `local_ranks`. */
uint64_t wsync_plan_rank_send_bytes(const wsync_plan_t *p, int rank);
uint64_t wsync_plan_land_bytes(const wsync_plan_t *p, int local_rank, int local_ranks);

#endif
