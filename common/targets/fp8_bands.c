/* fp8_bands.c: FP8 destinations cut into bands of whole block rows, and a
 * band quantized on the host (fp8_bands.h). */
#include "common/targets/fp8_bands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target_internal.h"

wsync_status_t wsync_fp8_bands(const wsync_target_t *t, size_t di, uint64_t max_q_bytes, wsync_fp8_band_t **bands,
                               size_t *n)
{
    const wsync_dest_t *d;
    uint64_t rows, cols, srows, scols, slices = 1, per, k, r;
    wsync_fp8_band_t *v;
    size_t cap, i = 0;
    int j;

    if (di >= t->ndests || !t->dests[di].is_fp8)
        return wsync_error(WSYNC_ERR_INVALID, "fp8 bands: destination %zu is not an FP8 destination", di);
    d = &t->dests[di];
    rows = (uint64_t)d->shape[d->ndim - 2];
    cols = (uint64_t)d->shape[d->ndim - 1];
    srows = wsync_fp8_scale_rows(&d->fp8, rows);
    scols = wsync_fp8_scale_cols(&d->fp8, cols);
    for (j = 0; j < d->ndim - 2; j++)
        slices *= (uint64_t)d->shape[j];
    per = cols > 0 ? max_q_bytes / (cols * (uint64_t)d->fp8.block_rows) : 1;
    per = per ? per : 1; /* block rows per band */
    cap = (size_t)(slices * ((srows + per - 1) / per)) + 1;
    v = calloc(cap, sizeof(*v));
    WSYNC_CHECK_ALLOC(v);
    for (k = 0; k < slices; k++)
        for (r = 0; r < srows; r += per) {
            wsync_fp8_band_t *b = &v[i++];
            uint64_t nbr = r + per < srows ? per : srows - r;
            b->dest = di;
            b->slice = k;
            b->row0 = r * (uint64_t)d->fp8.block_rows;
            b->rows = b->row0 + nbr * (uint64_t)d->fp8.block_rows < rows ? nbr * (uint64_t)d->fp8.block_rows
                                                                         : rows - b->row0;
            b->q_off = d->offset + (k * rows + b->row0) * cols;
            b->q_len = b->rows * cols;
            b->s_off = t->dests[d->scale_dest].offset + (k * srows + r) * scols * 4;
            b->s_len = nbr * scols * 4;
        }
    *bands = v;
    *n = i;
    return WSYNC_OK;
}

/* Appends to `out` the parts of runs `v` (shadow space: the destination in
 * its source dtype at offset 0) that fall in [lo, hi), dst_off relative to
 * lo: a run wholly inside as it is, a run that straddles a bound row by
 * row, clipped. */
static wsync_status_t clip_runs(const tgt_runs_t *v, uint64_t lo, uint64_t hi, tgt_runs_t *out)
{
    uint64_t i;
    size_t k;
    for (k = 0; k < v->n; k++) {
        const wsync_run2d_t *r = &v->runs[k];
        uint64_t end = r->dst_off + wsync_run2d_bytes(r);
        if (end <= lo || r->dst_off >= hi)
            continue;
        if (r->dst_off >= lo && end <= hi) {
            wsync_run2d_t c = *r;
            c.dst_off -= lo;
            WSYNC_CHECK(tgt_runs_push(out, &c));
            continue;
        }
        for (i = 0; i < r->rows; i++) {
            uint64_t a = r->dst_off + i * r->row_bytes, b = a + r->row_bytes;
            uint64_t from = a > lo ? a : lo, to = b < hi ? b : hi;
            wsync_run2d_t c = {0, 0, 0, 1, 0};
            if (from >= to)
                continue;
            c.src_off = r->src_off + i * r->src_stride + (from - a);
            c.row_bytes = to - from;
            c.dst_off = from - lo;
            WSYNC_CHECK(tgt_runs_push(out, &c));
        }
    }
    return WSYNC_OK;
}

static uint64_t band_lo(const wsync_dest_t *d, const wsync_fp8_band_t *b, uint64_t es)
{
    return (b->slice * (uint64_t)d->shape[d->ndim - 2] + b->row0) * (uint64_t)d->shape[d->ndim - 1] * es;
}

wsync_status_t wsync_fp8_band_runs(const wsync_target_t *t, const wsync_manifest_t *m, const wsync_fp8_band_t *b,
                                   wsync_run2d_t **runs, size_t *n, wsync_quant_src_t *fmt)
{
    const wsync_dest_t *d = &t->dests[b->dest];
    wsync_dest_t shadow = *d;
    tgt_runs_t out = {0};
    wsync_status_t st = WSYNC_OK;
    uint64_t es, lo;
    size_t bi;

    *fmt = WSYNC_QSRC_BF16;
    if (d->nblocks > 0 && m->tensors[t->blocks[d->first_block].src].dtype == WSYNC_DTYPE_F32)
        *fmt = WSYNC_QSRC_F32;
    es = *fmt == WSYNC_QSRC_F32 ? 4 : 2;
    shadow.dtype = *fmt == WSYNC_QSRC_F32 ? WSYNC_DTYPE_F32 : WSYNC_DTYPE_BF16;
    shadow.offset = 0;
    lo = band_lo(d, b, es);
    for (bi = 0; bi < d->nblocks && st == WSYNC_OK; bi++) {
        tgt_runs_t v = {0};
        st = tgt_block_runs(m, &shadow, &t->blocks[d->first_block + bi], bi, &v);
        if (st == WSYNC_OK)
            st = clip_runs(&v, lo, lo + b->rows * (uint64_t)d->shape[d->ndim - 1] * es, &out);
        free(v.runs);
    }
    if (st != WSYNC_OK) {
        free(out.runs);
        return st;
    }
    *runs = out.runs;
    *n = out.n;
    return WSYNC_OK;
}

/* The source tensor, row and column of element `at` of FP8 destination di
 * (in its source dtype, es bytes each), which is not finite. */
static wsync_status_t name_bad(const wsync_target_t *t, const wsync_manifest_t *m, const wsync_dest_t *shadow,
                               uint64_t at, uint64_t es)
{
    const uint64_t pos = at * es;
    size_t bi, k;
    uint64_t i;
    for (bi = 0; bi < shadow->nblocks; bi++) {
        const wsync_block_t *blk = &t->blocks[shadow->first_block + bi];
        const wsync_tensor_t *s = &m->tensors[blk->src];
        tgt_runs_t v = {0};
        if (tgt_block_runs(m, shadow, blk, bi, &v) != WSYNC_OK)
            continue;
        for (k = 0; k < v.n; k++)
            for (i = 0; i < v.runs[k].rows; i++) {
                uint64_t a = v.runs[k].dst_off + i * v.runs[k].row_bytes, e, cols;
                if (pos < a || pos >= a + v.runs[k].row_bytes)
                    continue;
                e = (v.runs[k].src_off + i * v.runs[k].src_stride + (pos - a) - s->offset) / es;
                cols = (uint64_t)s->shape[s->ndim - 1];
                free(v.runs);
                return wsync_error(WSYNC_ERR_INVALID,
                                   "fp8: tensor '%s' holds NaN or an infinity at row %llu, column %llu, which FP8 "
                                   "destination '%s' quantizes: FP8 cannot carry it; find where the trainer "
                                   "produced it",
                                   s->name, (unsigned long long)(e / cols), (unsigned long long)(e % cols),
                                   shadow->name);
            }
        free(v.runs);
    }
    return wsync_error(WSYNC_ERR_INTERNAL, "fp8: destination '%s': a non-finite element no block wrote",
                       shadow->name);
}

wsync_status_t wsync_fp8_band_pack_host(const wsync_target_t *t, const wsync_manifest_t *m,
                                        const wsync_fp8_band_t *b, const void *src_image, uint8_t *q_out,
                                        float *scale_out)
{
    const wsync_dest_t *d = &t->dests[b->dest];
    const uint64_t cols = (uint64_t)d->shape[d->ndim - 1];
    wsync_dest_t shadow = *d;
    wsync_quant_src_t fmt;
    wsync_run2d_t *runs = NULL;
    uint64_t es, i;
    unsigned char *tmp;
    wsync_status_t st;
    size_t n, k;

    WSYNC_CHECK(wsync_fp8_band_runs(t, m, b, &runs, &n, &fmt));
    es = fmt == WSYNC_QSRC_F32 ? 4 : 2;
    shadow.offset = 0;
    tmp = calloc(1, b->rows * cols * es + 1);
    if (tmp == NULL) {
        free(runs);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (k = 0; k < n; k++)
        for (i = 0; i < runs[k].rows; i++)
            memcpy(tmp + runs[k].dst_off + i * runs[k].row_bytes,
                   (const unsigned char *)src_image + runs[k].src_off + i * runs[k].src_stride, runs[k].row_bytes);
    free(runs);
    st = wsync_fp8_quantize_host(tmp, fmt, b->rows, cols, &d->fp8, q_out, scale_out, d->name);
    if (st == WSYNC_ERR_INVALID) /* a NaN or infinity: name it by its source tensor */
        for (i = 0; i < b->rows * cols; i++) {
            float x;
            if (es == 2) {
                uint32_t w = (uint32_t)((const uint16_t *)(const void *)tmp)[i] << 16;
                memcpy(&x, &w, sizeof(x));
            } else {
                memcpy(&x, tmp + 4 * i, sizeof(x));
            }
            if (!isfinite(x)) {
                shadow.dtype = fmt == WSYNC_QSRC_F32 ? WSYNC_DTYPE_F32 : WSYNC_DTYPE_BF16;
                st = name_bad(t, m, &shadow, band_lo(d, b, es) / es + i, es);
                break;
            }
        }
    free(tmp);
    return st;
}
