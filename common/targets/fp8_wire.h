/* fp8_wire.h: how FP8 destinations travel (docs/FP8.md, "On the wire").
 *
 * The node plan moves source bytes to destination bytes; an FP8 destination
 * has no source bytes of its own. So each quantization (source tensor,
 * spec) gets a *quantized source space* beside the trainer image: the FP8
 * codes of the whole source tensor, quantized on its own block grid, at
 * q(tensor) = base(spec) + tensor offset, one byte per element, row-major as
 * the source, then its scales (F32, ceil(rows/br) x ceil(cols/bc) per
 * matrix) at the next multiple of 16 after the codes. base(spec) is past the
 * image (one image-sized space per spec), so these offsets never meet a
 * trainer byte. Since every block of an FP8 destination is one whole block
 * of one source (target_fp8.c refuses slices that cut one), its codes and
 * scales are 2-D runs over that space like any other bytes, and the plan's
 * cells, chunks, copies and segments work unchanged.
 *
 * Who owns a quantized band (block rows of one matrix of a source tensor):
 * the trainer rank one of whose extents holds every source byte of the
 * band. It quantizes the band while it serves the version and digests the
 * codes and scales it made. A band whose rows several extents share (an
 * FSDP shard boundary off the block grid) is owned in parts: each rank
 * owns the codes of its elements, the rank holding the band's first element
 * its scales, and the ranks exchange their parts' block maxima before they
 * quantize (trainer_side/fp8_amax.c), so the codes equal the whole band's.
 * Only a band whose extents cut an element (a layout file cutting inside a
 * BF16 value) has no owner: its source rows travel as they are into an
 * *aux* area of the landing rank's image after its destination tensors,
 * are verified like any bytes, and the engine quantizes them there
 * (engine_side/fp8_land.c). Pure functions, thread-safe on distinct
 * outputs. */
#ifndef WSYNC_COMMON_FP8_WIRE_H
#define WSYNC_COMMON_FP8_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/model/plan.h"
#include "common/targets/target.h"

/* A (source tensor, spec) some FP8 destination reads. */
typedef struct wsync_fp8_use {
    uint32_t tensor;
    wsync_fp8_spec_t spec;
} wsync_fp8_use_t;

/* Bands [b0, b1) of matrix `slice` of a source tensor that one trainer
 * extent holds whole: rows x cols source elements from src_off (trainer
 * image), codes at q_off (q_len bytes) and scales at s_off (s_len bytes) of
 * the quantized space. Or, with `part`, the part of band b0 (b1 = b0 + 1)
 * that one extent holds of a band several extents share (an FSDP shard
 * boundary off the block grid): its elements [e0, e0 + q_len) counted from
 * the band's first, from src_off, their codes at q_off, and the band's
 * scales (s_len 4 x scale columns) with the part holding element 0 (s_len 0
 * with the others). The band's scales need every part's block maxima:
 * trainer ranks exchange them (trainer_side/fp8_amax.c). */
typedef struct wsync_fp8_brun {
    uint32_t tensor;
    int rank;
    uint64_t slice, b0, b1;
    uint64_t row0, rows, cols; /* row0: the first source row of band b0 in the matrix */
    uint64_t src_off;
    uint64_t q_off, q_len, s_off, s_len;
    int part;
    uint64_t e0;
} wsync_fp8_brun_t;

/* A boundary band of an FP8 destination: its source rows (rows x cols of
 * fmt, back to back) land at aux_off of the image; quantized there, they
 * give rows [row0, row0 + rows) x columns [col0, col0 + cols) of matrix
 * `slice` of destination `dest` and their scales. */
typedef struct wsync_fp8_aux {
    size_t dest;
    uint32_t src; /* the source tensor (named when a NaN is found) */
    uint64_t slice, row0, rows, col0, cols;
    uint64_t src_row0; /* its first row in the source matrix */
    uint64_t aux_off;
    wsync_quant_src_t fmt;
} wsync_fp8_aux_t;

/* Base of spec's quantized space (beyond the image). Fails for blocks over
 * 256 rows or columns, or an image too large to address them. */
wsync_status_t wsync_fp8_space(const wsync_manifest_t *m, const wsync_fp8_spec_t *spec, uint64_t *base);
/* 1 if off is in some quantized space (off >= the image's end). */
int wsync_fp8_is_quantized(const wsync_manifest_t *m, uint64_t off);
/* The element width at quantized offset off: 1 among a tensor's FP8 codes,
 * 4 among its fp32 scales (delta wires encode at it, docs/DELTA.md). */
unsigned wsync_fp8_elem_width(const wsync_manifest_t *m, uint64_t off);

/* The distinct (tensor, spec) pairs the FP8 destinations of targets[0..n)
 * read, sorted. Caller frees *uses. */
wsync_status_t wsync_fp8_uses(const wsync_manifest_t *m, const wsync_target_t *const *targets, size_t n,
                              wsync_fp8_use_t **uses, size_t *nuses);

/* A layout's extents sorted by offset, made once for many band lookups. */
typedef struct wsync_fp8_exts wsync_fp8_exts_t;
wsync_status_t wsync_fp8_exts_make(const wsync_layout_t *layout, wsync_fp8_exts_t **out);
void wsync_fp8_exts_free(wsync_fp8_exts_t *x);

/* The band runs of `use` that trainer rank `rank` owns (-1: every rank's),
 * in source order, appended to *out (n of them, cap allocated; start from
 * NULL, 0, 0). Caller frees *out. */
wsync_status_t wsync_fp8_bruns(const wsync_manifest_t *m, const wsync_fp8_exts_t *x, const wsync_fp8_use_t *use,
                               int rank, wsync_fp8_brun_t **out, size_t *n, size_t *cap);

/* The target's byte mapping under a trainer layout: wsync_target_runs for
 * BF16 destinations, and for FP8 ones runs over the quantized spaces (owned
 * bands) or of source rows into the aux area (boundary bands, listed in
 * *aux, whose bytes start at t->image_size; *aux_len of them, 0 without).
 * Sorted by destination. aux may be NULL. Caller frees *runs and *aux. */
wsync_status_t wsync_target_wire_runs(const wsync_target_t *t, const wsync_manifest_t *m,
                                      const wsync_layout_t *layout, wsync_run2d_t **runs, size_t *nruns,
                                      wsync_fp8_aux_t **aux, size_t *naux, uint64_t *aux_len);

/* The image an engine rank of target t needs under `layout`: its
 * destinations, then the aux area. */
wsync_status_t wsync_target_wire_size(const wsync_target_t *t, const wsync_manifest_t *m,
                                      const wsync_layout_t *layout, uint64_t *len);

#endif
