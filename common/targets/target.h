/* target.h: what one engine rank holds. A target lists destination tensors
 * (name, dtype, shape, place in the rank's destination image), each assembled
 * from block copies out of the trainer's image; the plan (target_plan.h) moves
 * exactly those bytes. The JSON form is documented in docs/TARGETS.md.
 *
 * A block copy takes the box [src_start[i], src_stop[i]) of every dimension i
 * of one source tensor (a manifest tensor) and writes it into its destination
 * tensor at dst_start[j] of every destination dimension j. The destination may
 * have more leading dimensions than the source (its source dimension i is
 * destination dimension i + (dst ndim - src ndim)); a block spans one index of
 * each extra leading dimension, which is how experts stack. Source and
 * destination dtypes are equal (no conversion). Destination bytes no block
 * covers (vocabulary padding) are zero in the engine and never sent.
 *
 * The identity target is the whole image: one destination tensor per
 * manifest tensor at the manifest's own offsets, and its byte mapping is the
 * image itself, the alignment padding between tensors included, so it moves
 * today's image byte for byte (and cuts into today's pieces: see
 * target_plan.h).
 *
 * Targets are plain data, immutable once built; every function here is pure
 * and thread-safe on distinct outputs. */
#ifndef WSYNC_COMMON_TARGET_H
#define WSYNC_COMMON_TARGET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/run2d.h"
#include "common/model/manifest.h"
#include "common/quant/quant.h"

typedef struct wsync_block {
    uint32_t src;                      /* manifest tensor index */
    int64_t src_start[WSYNC_MAX_DIMS]; /* per source dimension */
    int64_t src_stop[WSYNC_MAX_DIMS];  /* exclusive; stop > start */
    int64_t dst_start[WSYNC_MAX_DIMS]; /* per destination dimension */
} wsync_block_t;

typedef struct wsync_dest {
    char *name;
    wsync_dtype_t dtype;
    int ndim;
    int64_t shape[WSYNC_MAX_DIMS];
    uint64_t offset;             /* in the rank's destination image; multiple of WSYNC_ALIGN */
    uint64_t size;               /* bytes (no padding) */
    size_t first_block, nblocks; /* its blocks: t->blocks[first_block ..] */
    /* FP8 (docs/FP8.md): an F8_E4M3 destination whose blocks copy BF16 or
     * F32 source bytes quantized by blocks of fp8.block_rows x block_cols of
     * its last two dimensions; its scales are the F32 destination
     * dests[scale_dest], right after it, which no block writes (is_scale). */
    int is_fp8, is_scale;
    wsync_fp8_spec_t fp8;
    size_t scale_dest; /* is_fp8: its scale tensor; is_scale: its FP8 tensor */
} wsync_dest_t;

typedef struct wsync_target {
    size_t ndests;
    wsync_dest_t *dests; /* destination order: offsets increase */
    size_t nblocks;
    wsync_block_t *blocks;  /* grouped by destination, in destination order */
    uint64_t image_size;    /* end of the last destination, padded to WSYNC_ALIGN */
    int whole_image;        /* the identity target: the mapping is the image itself */
    uint64_t covered_bytes; /* destination bytes some block writes (the rank's held bytes) */
    uint8_t digest[16];     /* XXH3-128 of the canonical JSON (big-endian high64, low64) */
    char digest_hex[33];    /* the same, 32 hex digits: the target's name */
    json_t *by_name_;       /* private to target.c: name -> index */
} wsync_target_t;

/* The whole image of `m` (today's behaviour). */
wsync_status_t wsync_target_identity(const wsync_manifest_t *m, wsync_target_t **out);

/* Building a target by hand (rules and tests do): create, add destinations
 * in order (each at the next aligned offset), add each destination's blocks
 * right after it, then finish, which validates everything against `m` (see
 * wsync_target_from_json for the checks) and computes the digest. A target
 * that failed to finish must still be freed. */
wsync_status_t wsync_target_create(wsync_target_t **out);
wsync_status_t wsync_target_add_dest(wsync_target_t *t, const char *name, wsync_dtype_t dtype, int ndim,
                                     const int64_t *shape);
/* Appends a block to the last destination added. */
wsync_status_t wsync_target_add_block(wsync_target_t *t, const wsync_block_t *b);
/* Makes the last destination added (dtype F8_E4M3, 2 or more dimensions,
 * its blocks already added) FP8, quantized as `spec` says, and appends its
 * scale tensor: F32, the destination's shape with the last two dimensions
 * divided by the block (rounded up), named `scale_name` (NULL:
 * "<name>_scale_inv"). Its blocks must read BF16 or F32 sources, all one
 * dtype, and start and end on the block grid of both source and
 * destination in those two dimensions (or end at the end of both): a TP
 * slice that cuts a block is refused by finish, naming the tensor, the
 * dimension and the block. */
wsync_status_t wsync_target_set_fp8(wsync_target_t *t, const wsync_fp8_spec_t *spec, const char *scale_name);
wsync_status_t wsync_target_finish(wsync_target_t *t, const wsync_manifest_t *m);
void wsync_target_free(wsync_target_t *t);

/* Index of the destination named `name`, or -1. Constant time. */
long wsync_target_find(const wsync_target_t *t, const char *name);

/* JSON form (docs/TARGETS.md). from_json validates against `m`: known source
 * names, equal dtypes, dims, every box inside its source and destination,
 * sub-byte dtypes cut on whole bytes, offsets (when given) equal to the next
 * aligned ones, no duplicate destination names, and no destination byte
 * written twice; the error names the destination tensor (and block) and the
 * problem. to_json returns a new reference (the canonical form the digest is
 * computed over). */
wsync_status_t wsync_target_from_json(const wsync_manifest_t *m, const char *json, size_t len, wsync_target_t **out);
wsync_status_t wsync_target_from_json_obj(const wsync_manifest_t *m, const json_t *j, wsync_target_t **out);
wsync_status_t wsync_target_to_json(const wsync_target_t *t, const wsync_manifest_t *m, json_t **out);

/* The target's byte mapping as 2-D runs (a target with FP8 destinations
 * has none: WSYNC_ERR_UNSUPPORTED until the plan moves quantized bytes), sorted by destination offset, with
 * dst_off absolute in the destination image. A block whose inner dimensions
 * are whole in source and destination is one contiguous row; a column slice
 * is one run of many rows; anything else is a run per contiguous row. The
 * identity target gives one run per manifest tensor, each up to the next
 * tensor (its padding included), the last up to image_size. Runs never
 * overlap in the destination. Caller frees *runs. */
wsync_status_t wsync_target_runs(const wsync_target_t *t, const wsync_manifest_t *m, wsync_run2d_t **runs,
                                 size_t *nruns);

/* The destination image of rank `t` (t->image_size bytes at dst_image) made
 * on the host from the trainer's image (m->image_size bytes): every block
 * copied, bytes no block writes zero, FP8 destinations quantized with their
 * scales (docs/FP8.md). A NaN or infinity that an FP8 destination would
 * quantize fails with WSYNC_ERR_INVALID naming the source tensor, its row
 * and column. Blocking; allocates one source-dtype copy of the largest FP8
 * destination. What an engine rank holds once a version has landed. */
wsync_status_t wsync_target_fill_host(const wsync_target_t *t, const wsync_manifest_t *m, const void *src_image,
                                      void *dst_image);

#endif
