/* target_plan.h: the plan of one engine node whose L local ranks hold
 * targets (target.h). A pure function of (manifest, trainer layout, the L
 * targets, chunk size, landing hint): every party derives the identical plan.
 *
 * How it is cut. The distinct source bytes the node needs (the union of its
 * ranks' targets) are cut at the trainer image's chunk boundaries (offset /
 * chunk_bytes, as in plan.h) and, inside a source chunk, by the set of local
 * ranks that need them: each (source chunk, rank set) is one *chunk* of this
 * plan, landed by one rank of the set (the colocated hint's rank when the
 * chunk's dominant trainer rank shares a GPU with one of the set, else the
 * least loaded so far, ties going to the first from source-chunk mod L on).
 * Chunks are numbered in source order. A chunk's bytes cross the network once,
 * in *puts*: a put is one contiguous range of the landing rank's destination
 * image whose bytes one trainer rank owns (from one of its extents), described
 * by 2-D runs over the trainer image (run2d.h), which the trainer packs in
 * destination order. Every other rank of the set (and the landing rank
 * itself, when its target holds the same bytes twice) gets them by *copies*
 * out of the landing rank's destination image (its window), listed per chunk.
 * But where the hint puts every local rank on every trainer rank's GPU (one
 * GPU under the node and its trainers) and a target is not the whole image,
 * the sets are single ranks: each rank lands all it holds, and no rank
 * copies from another (there a copy moves the same bytes through the same
 * memory as a put, after waiting for the other rank's landing).
 *
 * The identity case. When every rank's target is the identity, source
 * chunk c is chunk c, it lands on c mod L (or the colocated hint, as
 * engine_side/landing.c computes it), its puts are exactly plan.h's pieces of
 * chunk c (in the same order) and each other rank copies the chunk in one
 * copy: today's plan, unchanged.
 *
 * FP8 destinations (fp8_wire.h) are runs over quantized source spaces past
 * the image, owned by the trainer rank that holds each band whole, and
 * source rows into the aux area past a rank's destinations where a trainer
 * shard boundary cuts a band; both are cut and landed like any bytes. */
#ifndef WSYNC_COMMON_TARGET_PLAN_H
#define WSYNC_COMMON_TARGET_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/model/manifest.h"
#include "common/model/plan.h"
#include "common/base/run2d.h"
#include "common/targets/fp8_wire.h"
#include "common/targets/target.h"

typedef struct wsync_tput {
    uint32_t id;   /* index in puts[] */
    int src_rank;  /* trainer rank that owns every byte and sends it */
    int land_rank; /* local rank it lands on (its chunk's) */
    uint32_t chunk;
    uint64_t dst_off;        /* in land_rank's destination image */
    uint64_t len;            /* = the sum of its runs' bytes */
    size_t first_run, nruns; /* runs[first_run ..]: dst_off relative to the put, in destination order */
} wsync_tput_t;

typedef struct wsync_tchunk {
    int land_rank;
    uint32_t src_chunk; /* trainer-image chunk (offset / chunk_bytes) its bytes come from */
    uint64_t bytes;     /* bytes landed (the sum of its puts) */
    size_t first_put, nputs;
    size_t first_copy, ncopies;
} wsync_tchunk_t;

typedef struct wsync_tcopy {
    uint32_t chunk;
    int from_rank;     /* the chunk's landing rank */
    uint64_t from_off; /* in from_rank's destination image */
    int to_rank;
    uint64_t to_off; /* in to_rank's destination image */
    uint64_t len;
} wsync_tcopy_t;

/* Optional landing preference, as engine_side/landing.c derives it: for
 * trainer rank t, the local ranks on its GPU are colo[t * L ..], ncolo[t] of
 * them. NULL: none. */
typedef struct wsync_land_hint {
    const int *colo;  /* [world * L] */
    const int *ncolo; /* [world] */
} wsync_land_hint_t;

typedef struct wsync_node_plan {
    int local_ranks;
    int world;
    uint64_t chunk_bytes;
    size_t nputs;
    wsync_tput_t *puts; /* sorted by (chunk, dst_off) */
    size_t nruns;
    wsync_run2d_t *runs;
    uint32_t nchunks;
    wsync_tchunk_t *chunks;
    size_t ncopies;
    wsync_tcopy_t *copies;  /* grouped by chunk */
    size_t *rank_nputs;     /* [world] */
    uint32_t **rank_puts;   /* [world][rank_nputs[r]]: put ids a trainer rank sends, in id order */
    uint64_t network_bytes; /* distinct source bytes into the node (each crosses once) */
    uint64_t *land_bytes;   /* [L]: bytes each local rank lands from the network */
    uint64_t *holds_bytes;  /* [L]: bytes written into each rank's destination (landed + copied in) */
    /* FP8 destinations (fp8_wire.h): the (source tensor, spec) pairs whose
     * quantized spaces runs read; a trainer rank quantizes its bands of
     * them before it packs or digests. */
    size_t nfp8;
    wsync_fp8_use_t *fp8;
} wsync_node_plan_t;

/* targets[L]: one per local rank (the same pointer may repeat). chunk_bytes
 * as for wsync_plan_build (>= 4096, a multiple of WSYNC_ALIGN). Fails on a
 * layout whose image size differs from the manifest's. Free with
 * wsync_node_plan_free (NULL is fine). */
wsync_status_t wsync_node_plan_build(const wsync_manifest_t *m, const wsync_layout_t *layout, int local_ranks,
                                     const wsync_target_t *const *targets, uint64_t chunk_bytes,
                                     const wsync_land_hint_t *hint, wsync_node_plan_t **out);
void wsync_node_plan_free(wsync_node_plan_t *np);

/* The identity case (every rank's target the whole image) built from the
 * whole image's plan, without targets (target_plan_identity.c): put i is
 * piece i at its own offset, chunk c lands on local rank land[c] &
 * rank_mask, and every other rank copies it whole at the same offset,
 * unless also_lands (NULL: none) says rank q lands chunk c itself. With
 * land[c] = c mod L and no also_lands it equals wsync_node_plan_build's
 * plan for identity targets (but rank_puts lists each rank's pieces in the
 * plan's send order). Free with wsync_node_plan_free. */
typedef struct wsync_identity_landing {
    const uint8_t *land; /* [nchunks] */
    uint8_t rank_mask;
    int (*also_lands)(void *arg, uint32_t chunk, int rank);
    void *arg;
} wsync_identity_landing_t;
wsync_status_t wsync_node_plan_identity(const wsync_plan_t *plan, int local_ranks,
                                        const wsync_identity_landing_t *how, wsync_node_plan_t **out);

/* Bytes trainer rank `rank` sends into the node. */
uint64_t wsync_node_plan_send_bytes(const wsync_node_plan_t *np, int rank);

#endif
