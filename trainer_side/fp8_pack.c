/* fp8_pack.c: the GPU FP8 band pack (fp8_pack.h): gather, then quantize. */
#include "trainer_side/fp8_pack.h"

#include <stdlib.h>

#include "common/base/checks.h"
#include "common/pack/pack.h"
#include "common/quant/quant.h"

#if WSYNC_HAVE_CUDA
#include "common/base/cuda_checks.h"
#endif

static uint64_t cols_of(const wsync_dest_t *d)
{
    return (uint64_t)d->shape[d->ndim - 1];
}

uint64_t wsync_fp8_band_scratch_bytes(const wsync_target_t *t, const wsync_manifest_t *m, const wsync_fp8_band_t *b)
{
    const wsync_dest_t *d = &t->dests[b->dest];
    int f32 = d->nblocks > 0 && m->tensors[t->blocks[d->first_block].src].dtype == WSYNC_DTYPE_F32;
    return b->rows * cols_of(d) * (f32 ? 4 : 2);
}

wsync_status_t wsync_fp8_band_pack_cuda(const wsync_target_t *t, const wsync_manifest_t *m,
                                        const wsync_fp8_band_t *b, const void *src_dev_image, void *tmp_dev,
                                        uint8_t *q_dev, float *scale_dev)
{
#if WSYNC_HAVE_CUDA
    const wsync_dest_t *d = &t->dests[b->dest];
    const uint64_t len = wsync_fp8_band_scratch_bytes(t, m, b);
    wsync_run2d_t *runs = NULL;
    wsync_pack_job_t *job = NULL;
    wsync_quant_src_t fmt;
    wsync_status_t st;
    size_t n;

    WSYNC_CHECK(wsync_fp8_band_runs(t, m, b, &runs, &n, &fmt));
    /* Bytes no block writes (none for linear weights) must read as zeros. */
    if (wsync_pack_bytes(runs, n) < len && cudaMemset(tmp_dev, 0, len) != cudaSuccess) {
        free(runs);
        return wsync_error(WSYNC_ERR_CUDA, "fp8: destination '%s': cudaMemset of the band's scratch failed",
                           d->name);
    }
    st = wsync_pack_cuda_start(tmp_dev, src_dev_image, runs, n, NULL, &job);
    free(runs);
    if (st == WSYNC_OK)
        st = wsync_pack_cuda_wait(job);
    WSYNC_CHECK(st);
    return wsync_fp8_quantize_cuda(tmp_dev, fmt, b->rows, cols_of(d), &d->fp8, q_dev, scale_dev, d->name, NULL);
#else
    (void)m, (void)b, (void)src_dev_image, (void)tmp_dev, (void)q_dev, (void)scale_dev;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "fp8: destination '%s': this wsync was built without CUDA",
                       t->dests[b->dest].name);
#endif
}
