/* fp8_land.c: the FP8 bands an engine rank quantizes itself (docs/FP8.md,
 * "Across trainer ranks"). A band whose source rows two trainer ranks hold
 * (an FSDP shard boundary off the block grid) travels as those rows, BF16
 * or F32, into the aux area past the rank's destination tensors
 * (common/targets/fp8_wire.h); once every segment of the rank's target has
 * verified, they are quantized here, with the one quantizer
 * (common/quant), into the band's FP8 codes and scales: the quantization
 * of the whole block, as a trainer rank holding it whole makes it. Called
 * from the target fetch after verification (fetch.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/quant/quant.h"
#include "engine_side/receiver_internal.h"

/* Quantizes aux band a from image into q (rows x cols) and sc. */
static wsync_status_t quantize(const wsync_receiver_t *r, const wsync_target_t *t, const wsync_fp8_aux_t *a,
                               const char *image, uint8_t *q, float *sc, const char *name)
{
    const wsync_dest_t *d = &t->dests[a->dest];
    if (r->mem->kind == WSYNC_MEM_CUDA)
        return wsync_fp8_quantize_cuda(image + a->aux_off, a->fmt, a->rows, a->cols, &d->fp8, q, sc, name, NULL);
    return wsync_fp8_quantize_host(image + a->aux_off, a->fmt, a->rows, a->cols, &d->fp8, q, sc, name);
}

/* len bytes from src to image offset off: into the image, then through to
 * the caller's tensor holding them (in place); a sparse GPU image backs no
 * destination byte, so there straight into the caller's tensor. */
static wsync_status_t put_bytes(const wsync_receiver_t *r, char *image, uint64_t off, const void *src, uint64_t len)
{
    char *direct = r->images.gpu_sparse && r->run.dm ? recv_dests_ptr(r->run.dm, off) : NULL;
    if (direct)
        return r->mem->copy(direct, src, len);
    WSYNC_CHECK(r->mem->copy(image + off, src, len));
    return recv_dests_write(r->mem, r->run.dm, image, off, len);
}

/* Writes band a's codes (rows of a->cols at the destination's pitch) and
 * its scale row. */
static wsync_status_t place(const wsync_receiver_t *r, const wsync_target_t *t, const wsync_fp8_aux_t *a,
                            char *image, const uint8_t *q, const float *sc)
{
    const wsync_dest_t *d = &t->dests[a->dest], *sd = &t->dests[d->scale_dest];
    const uint64_t DR = (uint64_t)d->shape[d->ndim - 2], DC = (uint64_t)d->shape[d->ndim - 1];
    const uint64_t DSR = (uint64_t)sd->shape[sd->ndim - 2], DSC = (uint64_t)sd->shape[sd->ndim - 1];
    const uint64_t br = (uint64_t)d->fp8.block_rows, bc = (uint64_t)d->fp8.block_cols;
    const uint64_t nsc = wsync_fp8_scale_cols(&d->fp8, a->cols);
    const uint64_t q0 = d->offset + (a->slice * DR + a->row0) * DC + a->col0;
    const uint64_t s0 = sd->offset + 4 * ((a->slice * DSR + a->row0 / br) * DSC + a->col0 / bc);
    uint64_t i;
    if (a->cols == DC)
        WSYNC_CHECK(put_bytes(r, image, q0, q, a->rows * a->cols));
    else
        for (i = 0; i < a->rows; i++)
            WSYNC_CHECK(put_bytes(r, image, q0 + i * DC, q + i * a->cols, a->cols));
    return put_bytes(r, image, s0, sc, 4 * nsc);
}

wsync_status_t recv_fp8_land(wsync_receiver_t *r, const recv_tlayout_t *tl, const wsync_manifest_t *m, char *image,
                             uint64_t v)
{
    const wsync_target_t *t = tl->tg[r->cfg.local_rank];
    uint64_t qcap = 0, scap = 0;
    uint8_t *q = NULL;
    float *sc = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t k;
    for (k = 0; k < tl->naux; k++) {
        const wsync_fp8_aux_t *a = &tl->aux[k];
        uint64_t ql = a->rows * a->cols, sl = 4 * wsync_fp8_scale_cols(&t->dests[a->dest].fp8, a->cols);
        qcap = ql > qcap ? ql : qcap;
        scap = sl > scap ? sl : scap;
    }
    if (tl->naux == 0)
        return WSYNC_OK;
    if (r->mem->alloc(qcap, (void **)&q) != WSYNC_OK || r->mem->alloc(scap, (void **)&sc) != WSYNC_OK) {
        st = wsync_error(WSYNC_ERR_NOMEM, "engine %s rank %d: scratch for FP8 bands: %s", r->engine_id,
                         r->cfg.local_rank, wsync_last_error());
        goto out;
    }
    for (k = 0; k < tl->naux && st == WSYNC_OK; k++) {
        const wsync_fp8_aux_t *a = &tl->aux[k];
        st = quantize(r, t, a, image, q, sc, m->tensors[a->src].name);
        if (st != WSYNC_OK) {
            st = wsync_error(st,
                             "version %llu, engine %s rank %d, FP8 destination '%s': %s (rows counted from row "
                             "%llu of the source matrix)",
                             (unsigned long long)v, r->engine_id, r->cfg.local_rank, t->dests[a->dest].name,
                             wsync_last_error(), (unsigned long long)a->src_row0);
            break;
        }
        st = place(r, t, a, image, q, sc);
    }
out:
    if (q)
        r->mem->free(q);
    if (sc)
        r->mem->free(sc);
    return st;
}

const char *recv_fp8_aux_name(const wsync_target_t *t, const recv_tlayout_t *tl, uint64_t off, char *buf, size_t len)
{
    size_t k;
    for (k = 0; k < tl->naux; k++) {
        const wsync_fp8_aux_t *a = &tl->aux[k];
        const uint64_t es = a->fmt == WSYNC_QSRC_F32 ? 4 : 2;
        if (off >= a->aux_off && off < a->aux_off + a->rows * a->cols * es) {
            snprintf(buf, len, "(the %s rows of FP8 tensor %s, rows %llu..%llu, quantized on this rank)",
                     es == 4 ? "F32" : "BF16", t->dests[a->dest].name, (unsigned long long)a->row0,
                     (unsigned long long)(a->row0 + a->rows));
            return buf;
        }
    }
    return "(padding)";
}
