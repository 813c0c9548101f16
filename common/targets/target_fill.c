/* target_fill.c: a rank's destination image made on the host from the
 * trainer's image: every block copied, FP8 destinations quantized
 * (common/quant) with their scales. What an engine rank holds once a version
 * has landed, computed in one place: `wsync target --write` prints it, and
 * tests compare the engine's bytes and an independent quantizer with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target.h"
#include "common/targets/target_internal.h"

static void copy_runs(unsigned char *dst, const unsigned char *src, const tgt_runs_t *v)
{
    size_t k;
    uint64_t i;
    for (k = 0; k < v->n; k++)
        for (i = 0; i < v->runs[k].rows; i++)
            memcpy(dst + v->runs[k].dst_off + i * v->runs[k].row_bytes,
                   src + v->runs[k].src_off + i * v->runs[k].src_stride, v->runs[k].row_bytes);
}

/* A NaN or infinity in the source bytes of block b, named by its source
 * tensor, row and column (the trainer's coordinates). */
static wsync_status_t finite_source(const wsync_manifest_t *m, const wsync_dest_t *d, size_t bi,
                                    const wsync_block_t *b, const unsigned char *src, const tgt_runs_t *v)
{
    const wsync_tensor_t *s = &m->tensors[b->src];
    const uint64_t es = wsync_dtype_bits(s->dtype) / 8, cols = (uint64_t)s->shape[s->ndim - 1];
    size_t k;
    uint64_t i, e;
    for (k = 0; k < v->n; k++)
        for (i = 0; i < v->runs[k].rows; i++) {
            const uint64_t off = v->runs[k].src_off + i * v->runs[k].src_stride;
            for (e = 0; e < v->runs[k].row_bytes / es; e++) {
                float x;
                uint64_t at;
                if (es == 2) {
                    uint32_t w = (uint32_t)((const uint16_t *)(src + off))[e] << 16;
                    memcpy(&x, &w, sizeof(x));
                } else {
                    memcpy(&x, src + off + 4 * e, sizeof(x));
                }
                if (isfinite(x))
                    continue;
                at = (off - s->offset) / es + e;
                return wsync_error(WSYNC_ERR_INVALID,
                                   "fp8: tensor '%s' holds %s at row %llu, column %llu (flat element %llu), which "
                                   "FP8 destination '%s' (block %zu) quantizes: FP8 cannot carry it; find where "
                                   "the "
                                   "trainer produced it",
                                   s->name, isnan(x) ? "NaN" : "an infinity", (unsigned long long)(at / cols),
                                   (unsigned long long)(at % cols), (unsigned long long)at, d->name, bi);
            }
        }
    return WSYNC_OK;
}

/* FP8 destination di: its blocks gathered in the source dtype, then each
 * 2-D slice of its last two dimensions quantized. */
static wsync_status_t fill_fp8(const wsync_target_t *t, const wsync_manifest_t *m, size_t di,
                               const unsigned char *src, unsigned char *dst)
{
    const wsync_dest_t *d = &t->dests[di], *sd = &t->dests[d->scale_dest];
    const uint64_t rows = (uint64_t)d->shape[d->ndim - 2], cols = (uint64_t)d->shape[d->ndim - 1];
    const uint64_t ns = wsync_fp8_scale_rows(&d->fp8, rows) * wsync_fp8_scale_cols(&d->fp8, cols);
    wsync_dest_t shadow = *d;
    wsync_quant_src_t fmt = WSYNC_QSRC_BF16;
    uint64_t slices = 1, k;
    unsigned char *tmp;
    wsync_status_t st = WSYNC_OK;
    size_t bi;
    int j;

    for (j = 0; j < d->ndim - 2; j++)
        slices *= (uint64_t)d->shape[j];
    if (d->nblocks > 0 && m->tensors[t->blocks[d->first_block].src].dtype == WSYNC_DTYPE_F32)
        fmt = WSYNC_QSRC_F32;
    shadow.dtype = fmt == WSYNC_QSRC_F32 ? WSYNC_DTYPE_F32 : WSYNC_DTYPE_BF16;
    shadow.offset = 0;
    tmp = calloc(1, slices * rows * cols * (fmt == WSYNC_QSRC_F32 ? 4 : 2) + 1);
    WSYNC_CHECK_ALLOC(tmp);
    for (bi = 0; bi < d->nblocks && st == WSYNC_OK; bi++) {
        tgt_runs_t v = {0};
        st = tgt_block_runs(m, &shadow, &t->blocks[d->first_block + bi], bi, &v);
        if (st == WSYNC_OK)
            st = finite_source(m, d, bi, &t->blocks[d->first_block + bi], src, &v);
        if (st == WSYNC_OK)
            copy_runs(tmp, src, &v);
        free(v.runs);
    }
    for (k = 0; k < slices && st == WSYNC_OK; k++)
        st = wsync_fp8_quantize_host(tmp + k * rows * cols * (fmt == WSYNC_QSRC_F32 ? 4 : 2), fmt, rows, cols,
                                     &d->fp8, dst + d->offset + k * rows * cols,
                                     (float *)(void *)(dst + sd->offset) + k * ns, d->name);
    free(tmp);
    return st;
}

wsync_status_t wsync_target_fill_host(const wsync_target_t *t, const wsync_manifest_t *m, const void *src_image,
                                      void *dst_image)
{
    const unsigned char *src = src_image;
    unsigned char *dst = dst_image;
    size_t i, bi;

    memset(dst, 0, t->image_size);
    if (t->whole_image) {
        memcpy(dst, src, m->image_size < t->image_size ? m->image_size : t->image_size);
        return WSYNC_OK;
    }
    for (i = 0; i < t->ndests; i++) {
        const wsync_dest_t *d = &t->dests[i];
        if (d->is_scale)
            continue;
        if (d->is_fp8) {
            WSYNC_CHECK(fill_fp8(t, m, i, src, dst));
            continue;
        }
        for (bi = 0; bi < d->nblocks; bi++) {
            tgt_runs_t v = {0};
            wsync_status_t st = tgt_block_runs(m, d, &t->blocks[d->first_block + bi], bi, &v);
            if (st == WSYNC_OK)
                copy_runs(dst, src, &v);
            free(v.runs);
            WSYNC_CHECK(st);
        }
    }
    return WSYNC_OK;
}
