/* fp8_pack.h: a trainer rank's FP8 band pack on the GPU (docs/FP8.md, issue
 * 29 step 4): the band's source rows gathered by the pack kernel
 * (common/pack) into a scratch buffer, then quantized by the FP8 kernel
 * (common/quant) into the band's FP8 bytes and scales, the bytes
 * wsync_fp8_band_pack_host gives. Not yet called by the put loops
 * (pull_targets.c), which wait for the node plan to move FP8 destinations. */
#ifndef WSYNC_TRAINER_FP8_PACK_H
#define WSYNC_TRAINER_FP8_PACK_H

#include <stdint.h>

#include "common/targets/fp8_bands.h"

/* Bytes of scratch band `b` needs (its rows in the source dtype). */
uint64_t wsync_fp8_band_scratch_bytes(const wsync_target_t *t, const wsync_manifest_t *m, const wsync_fp8_band_t *b);

/* Packs and quantizes band `b` from the trainer's image in device memory
 * (src_dev_image) into q_dev (b->q_len bytes) and scale_dev (b->s_len),
 * through tmp_dev (wsync_fp8_band_scratch_bytes). Blocking: returns when
 * the bytes are written (the NaN check reads the kernel's flag). A NaN or
 * infinity fails naming the destination, its row (within the band) and
 * column. Without CUDA: WSYNC_ERR_UNSUPPORTED. */
wsync_status_t wsync_fp8_band_pack_cuda(const wsync_target_t *t, const wsync_manifest_t *m,
                                        const wsync_fp8_band_t *b, const void *src_dev_image, void *tmp_dev,
                                        uint8_t *q_dev, float *scale_dev);

#endif
