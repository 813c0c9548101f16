/* fp8_bands.h: an FP8 destination cut into bands, the unit a trainer rank
 * quantizes while it packs (docs/FP8.md, issue 29 step 4). A band is whole
 * quantization-block rows of one 2-D slice of the destination (one expert
 * of a stacked [E, R, C] tensor, or the whole [R, C]): its FP8 bytes and
 * its scale rows are each one contiguous range of the destination image,
 * and quantizing it needs no byte outside it, so bands are quantized, sent
 * and digested independently and their bytes equal the same rows of
 * wsync_target_fill_host. The node plan does not use them: the wire
 * quantizes bands of the source tensors instead (fp8_wire.h), whose rows
 * are contiguous in a trainer's image. Pure, thread-safe on distinct
 * outputs. */
#ifndef WSYNC_COMMON_FP8_BANDS_H
#define WSYNC_COMMON_FP8_BANDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/targets/target.h"

typedef struct wsync_fp8_band {
    size_t dest;           /* the FP8 destination's index in the target */
    uint64_t slice;        /* index over its leading dimensions (0 for 2-D) */
    uint64_t row0, rows;   /* destination rows [row0, row0 + rows) of the slice */
    uint64_t q_off, q_len; /* its FP8 bytes in the destination image */
    uint64_t s_off, s_len; /* its scale rows (F32) in the destination image */
} wsync_fp8_band_t;

/* The bands of FP8 destination `di` of `t`: slices in order, each cut into
 * bands of as many whole block rows as fit in max_q_bytes of FP8 bytes (at
 * least one block row). Caller frees *bands. */
wsync_status_t wsync_fp8_bands(const wsync_target_t *t, size_t di, uint64_t max_q_bytes, wsync_fp8_band_t **bands,
                               size_t *n);

/* The source runs of band `b` over the trainer's image: rows in the source
 * dtype (*fmt: BF16 or F32) with dst_off relative to the band's first
 * element, so gathering them (wsync_pack_host, wsync_pack_cuda_start) into
 * a zeroed buffer of rows x cols elements gives the band's input to
 * wsync_fp8_quantize_host or _cuda. Caller frees *runs. */
wsync_status_t wsync_fp8_band_runs(const wsync_target_t *t, const wsync_manifest_t *m, const wsync_fp8_band_t *b,
                                   wsync_run2d_t **runs, size_t *n, wsync_quant_src_t *fmt);

/* Quantizes band `b` on the host from the trainer's image: its FP8 bytes
 * (b->q_len) into q_out and its scales (b->s_len bytes) into scale_out.
 * Destination bytes no block writes count as zeros. A NaN or infinity fails
 * naming the source tensor, row and column. Blocking. */
wsync_status_t wsync_fp8_band_pack_host(const wsync_target_t *t, const wsync_manifest_t *m,
                                        const wsync_fp8_band_t *b, const void *src_image, uint8_t *q_out,
                                        float *scale_out);

#endif
