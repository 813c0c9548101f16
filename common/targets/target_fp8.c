/* target_fp8.c: FP8 destinations (docs/FP8.md, docs/TARGETS.md): marking a
 * destination FP8 with its scale tensor, and checking its blocks: sources
 * that quantize (BF16, F32), and boxes on the quantization block grid, so
 * every block of the destination is one whole block of one source (as an
 * engine that loads a TP slice of an FP8 checkpoint holds it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target.h"
#include "common/targets/target_internal.h"

wsync_status_t wsync_target_set_fp8(wsync_target_t *t, const wsync_fp8_spec_t *spec, const char *scale_name)
{
    char name[4096];
    int64_t shape[WSYNC_MAX_DIMS];
    wsync_dest_t *d;
    size_t di;
    int n;

    if (t->ndests == 0)
        return wsync_error(WSYNC_ERR_INVALID, "target: FP8 was asked for before any destination tensor");
    di = t->ndests - 1;
    d = &t->dests[di];
    if (d->is_fp8 || d->is_scale)
        return wsync_error(WSYNC_ERR_INVALID, "target: destination '%s' is already FP8 or a scale tensor", d->name);
    if (d->dtype != WSYNC_DTYPE_F8_E4M3 || d->ndim < 2)
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination '%s' is %s with %d dimensions: an FP8 destination is F8_E4M3 "
                           "(float8_e4m3fn) with 2 or more",
                           d->name, wsync_dtype_name(d->dtype), d->ndim);
    if (spec->block_rows < 1 || spec->block_cols < 1 ||
        (spec->form != WSYNC_SCALE_FP32 && spec->form != WSYNC_SCALE_UE8M0))
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination '%s': FP8 blocks of %d x %d with scale form %d: blocks must be "
                           "at least 1 x 1 and the form fp32 or ue8m0",
                           d->name, spec->block_rows, spec->block_cols, (int)spec->form);
    n = scale_name ? snprintf(name, sizeof(name), "%s", scale_name)
                   : snprintf(name, sizeof(name), "%s_scale_inv", d->name);
    if (n < 0 || (size_t)n >= sizeof(name))
        return wsync_error(WSYNC_ERR_INVALID, "target: destination '%s': its scale tensor's name is too long",
                           d->name);
    memcpy(shape, d->shape, sizeof(shape));
    shape[d->ndim - 2] = (int64_t)wsync_fp8_scale_rows(spec, (uint64_t)d->shape[d->ndim - 2]);
    shape[d->ndim - 1] = (int64_t)wsync_fp8_scale_cols(spec, (uint64_t)d->shape[d->ndim - 1]);
    WSYNC_CHECK(wsync_target_add_dest(t, name, WSYNC_DTYPE_F32, d->ndim, shape));
    d = &t->dests[di]; /* add_dest may have moved the array */
    d->is_fp8 = 1;
    d->fp8 = *spec;
    d->scale_dest = t->ndests - 1;
    t->dests[t->ndests - 1].is_scale = 1;
    t->dests[t->ndests - 1].scale_dest = di;
    return WSYNC_OK;
}

/* Block bi of FP8 destination d cuts no quantization block in destination
 * dimension j (source dimension i) of block size B. */
static wsync_status_t on_grid(const wsync_manifest_t *m, const wsync_dest_t *d, const wsync_block_t *b, size_t bi,
                              int j, int i, int64_t B)
{
    const wsync_tensor_t *s = &m->tensors[b->src];
    int64_t lo = b->src_start[i], hi = b->src_stop[i], at = b->dst_start[j], ext = hi - lo;
    const char *what = j == d->ndim - 2 ? "rows" : "columns";
    int ends = hi == s->shape[i] && at + ext == d->shape[j];
    if (lo % B == 0 && at % B == 0 && (ext % B == 0 || ends))
        return WSYNC_OK;
    return wsync_error(WSYNC_ERR_INVALID,
                       "target: FP8 destination '%s' (dim %d, blocks of %lld %s) takes %s [%lld, %lld) of '%s' "
                       "(dim %d) to [%lld, %lld), cutting a %lld-%s block: a rank's slice must be whole blocks "
                       "(with TP, each rank's %s a multiple of %lld); choose a TP size that keeps slices on the "
                       "grid, or keep this tensor BF16",
                       d->name, j, (long long)B, what, what, (long long)lo, (long long)hi, s->name, i,
                       (long long)at, (long long)(at + ext), (long long)B, j == d->ndim - 2 ? "row" : "column",
                       what, (long long)B);
}

wsync_status_t tgt_fp8_check(const wsync_target_t *t, const wsync_manifest_t *m, size_t di, uint64_t *covered)
{
    const wsync_dest_t *d = &t->dests[di];
    wsync_dest_t shadow = *d;
    tgt_runs_t v = {0};
    wsync_status_t st = WSYNC_OK;
    size_t bi, k;

    if (d->nblocks == 0) {
        *covered = t->dests[d->scale_dest].size;
        return WSYNC_OK;
    }
    for (bi = 0; bi < d->nblocks; bi++) {
        const wsync_block_t *b = &t->blocks[d->first_block + bi];
        const wsync_tensor_t *s;
        int lead;
        if (b->src >= m->ntensors)
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: destination '%s' block %zu: source tensor %u does not exist", d->name, bi,
                               b->src);
        s = &m->tensors[b->src];
        if (s->dtype != WSYNC_DTYPE_BF16 && s->dtype != WSYNC_DTYPE_F32)
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: FP8 destination '%s' block %zu reads %s tensor '%s': only BF16 and F32 "
                               "sources are quantized",
                               d->name, bi, wsync_dtype_name(s->dtype), s->name);
        if (s->dtype != m->tensors[t->blocks[d->first_block].src].dtype)
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: FP8 destination '%s' mixes source dtypes (block %zu, '%s')", d->name, bi,
                               s->name);
        lead = d->ndim - s->ndim;
        if (s->ndim < 2 || lead < 0)
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: FP8 destination '%s' block %zu: source '%s' has %d dimensions: it needs 2 "
                               "or more, and at most the destination's %d",
                               d->name, bi, s->name, s->ndim, d->ndim);
        if (b->src_stop[s->ndim - 2] <= b->src_start[s->ndim - 2] ||
            b->src_stop[s->ndim - 1] <= b->src_start[s->ndim - 1])
            continue; /* empty: tgt_block_runs names it */
        WSYNC_CHECK(on_grid(m, d, b, bi, d->ndim - 2, s->ndim - 2, d->fp8.block_rows));
        WSYNC_CHECK(on_grid(m, d, b, bi, d->ndim - 1, s->ndim - 1, d->fp8.block_cols));
    }
    /* The boxes in the source's element size at offset 0: the same checks
     * and overlap test as any destination. */
    shadow.dtype = m->tensors[t->blocks[d->first_block].src].dtype;
    shadow.offset = 0;
    for (bi = 0; bi < d->nblocks && st == WSYNC_OK; bi++)
        st = tgt_block_runs(m, &shadow, &t->blocks[d->first_block + bi], bi, &v);
    if (st == WSYNC_OK)
        st = tgt_runs_disjoint(&shadow, &v);
    *covered = 0;
    for (k = 0; st == WSYNC_OK && k < v.n; k++)
        *covered += wsync_run2d_bytes(&v.runs[k]) * 8 / wsync_dtype_bits(shadow.dtype);
    *covered += t->dests[d->scale_dest].size;
    free(v.runs);
    return st;
}
