/* quant_gpu_parts.c: wsync_fp8_parts_amax_cuda and
 * wsync_fp8_parts_quantize_cuda (quant.h), the host side of
 * quant_cuda_parts.cu: the parts' descriptors, their first thread blocks and
 * the maxima go to the device in one buffer, one launch, the maxima (and
 * the NaN check's result) come back. */
#include "common/base/checks.h"
#include "common/quant/quant.h"

#if WSYNC_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include "common/base/cuda_checks.h"
#include "common/quant/quant_cuda.h"

typedef struct {
    char *host; /* descriptors, first blocks, maxima, the flag: as on the device */
    char *dev;
    size_t d_at, f_at, a_at, b_at, len;
    uint64_t nblocks;
} parts_buf_t;

static wsync_status_t check_parts(const wsync_fp8_part_t *parts, size_t nparts, size_t namax)
{
    size_t i;
    if (nparts > UINT32_MAX)
        return wsync_error(WSYNC_ERR_INVALID, "fp8: %zu band parts in one launch: at most %u", nparts, UINT32_MAX);
    for (i = 0; i < nparts; i++) {
        const wsync_fp8_part_t *p = &parts[i];
        if (p->spec.block_cols < 1 || p->spec.block_rows < 1 || p->cols == 0 || p->n == 0 ||
            (p->fmt != WSYNC_QSRC_BF16 && p->fmt != WSYNC_QSRC_F32) || p->n > (1ull << 40) ||
            p->e0 + p->n > (uint64_t)p->spec.block_rows * p->cols ||
            p->amax_at + wsync_fp8_scale_cols(&p->spec, p->cols) > namax)
            return wsync_error(WSYNC_ERR_INVALID,
                               "fp8: band part %zu (elements %llu + %llu of a band of %llu columns, blocks of "
                               "%d x %d, maxima at %zu of %zu) is not a part of one band",
                               i, (unsigned long long)p->e0, (unsigned long long)p->n, (unsigned long long)p->cols,
                               p->spec.block_rows, p->spec.block_cols, p->amax_at, namax);
    }
    return WSYNC_OK;
}

/* The buffer of nparts parts (host and device), amax copied in. */
static wsync_status_t buf_make(const wsync_fp8_part_t *parts, size_t nparts, const float *amax, size_t namax,
                               parts_buf_t *b)
{
    const size_t dsz = wsync_cuda_fp8_part_desc_size();
    uint64_t *first;
    size_t i;
    memset(b, 0, sizeof(*b));
    b->f_at = (nparts * dsz + 15) / 16 * 16;
    b->a_at = b->f_at + (nparts * sizeof(uint64_t) + 15) / 16 * 16;
    b->b_at = b->a_at + (namax * sizeof(float) + 15) / 16 * 16;
    b->len = b->b_at + sizeof(unsigned long long);
    b->host = malloc(b->len);
    WSYNC_CHECK_ALLOC(b->host);
    first = (uint64_t *)(b->host + b->f_at);
    for (i = 0; i < nparts; i++) {
        const wsync_fp8_part_t *p = &parts[i];
        wsync_cuda_fp8_part_desc_set(b->host + b->d_at, i, p->src, p->e0, p->n, p->cols, p->amax_at, p->q,
                                     p->scale, p->fmt == WSYNC_QSRC_F32, p->spec.block_cols,
                                     p->spec.form == WSYNC_SCALE_UE8M0);
        first[i] = b->nblocks;
        b->nblocks += wsync_fp8_scale_cols(&p->spec, p->cols);
    }
    memcpy(b->host + b->a_at, amax, namax * sizeof(float));
    memset(b->host + b->b_at, 0xff, sizeof(unsigned long long));
    if (cudaMalloc((void **)&b->dev, b->len) != cudaSuccess) {
        free(b->host);
        return wsync_error(WSYNC_ERR_NOMEM, "fp8: %zu bytes of GPU memory for %zu band parts", b->len, nparts);
    }
    return WSYNC_OK;
}

static void buf_free(parts_buf_t *b)
{
    cudaFree(b->dev);
    free(b->host);
}

/* Up, one launch, the maxima and the flag back. */
static wsync_status_t run(int quantize, size_t nparts, parts_buf_t *b, cudaStream_t s)
{
    int e;
    CUDA_CHECK(cudaMemcpyAsync(b->dev, b->host, b->len, cudaMemcpyHostToDevice, s));
    e = wsync_cuda_fp8_parts_async(quantize, b->dev + b->d_at, (const uint64_t *)(b->dev + b->f_at),
                                   (uint32_t)nparts, b->nblocks, (float *)(b->dev + b->a_at),
                                   (unsigned long long *)(b->dev + b->b_at), s);
    if (e != 0)
        return wsync_error(WSYNC_ERR_CUDA, "fp8: the band parts' %s kernel did not start: %s",
                           quantize ? "quantization" : "maxima", cudaGetErrorString((cudaError_t)e));
    CUDA_CHECK(cudaMemcpyAsync(b->host + b->a_at, b->dev + b->a_at, b->len - b->a_at, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return WSYNC_OK;
}

wsync_status_t wsync_fp8_parts_amax_cuda(const wsync_fp8_part_t *parts, size_t nparts, float *amax, size_t namax,
                                         size_t *bad_part, uint64_t *bad_elem, void *stream)
{
    parts_buf_t b;
    unsigned long long bad;
    wsync_status_t st;
    WSYNC_CHECK(check_parts(parts, nparts, namax));
    if (nparts == 0)
        return WSYNC_OK;
    WSYNC_CHECK(buf_make(parts, nparts, amax, namax, &b));
    st = run(0, nparts, &b, (cudaStream_t)stream);
    memcpy(&bad, b.host + b.b_at, sizeof(bad));
    if (st == WSYNC_OK && bad != UINT64_MAX) {
        *bad_part = (size_t)(bad >> 40);
        *bad_elem = bad & ((1ull << 40) - 1);
        st = wsync_error(WSYNC_ERR_INVALID, "fp8: band part %zu holds NaN or an infinity at its element %llu",
                         *bad_part, (unsigned long long)*bad_elem);
    } else if (st == WSYNC_OK) {
        memcpy(amax, b.host + b.a_at, namax * sizeof(float));
    }
    buf_free(&b);
    return st;
}

wsync_status_t wsync_fp8_parts_quantize_cuda(const wsync_fp8_part_t *parts, size_t nparts, const float *amax,
                                             size_t namax, void *stream)
{
    parts_buf_t b;
    wsync_status_t st;
    WSYNC_CHECK(check_parts(parts, nparts, namax));
    if (nparts == 0)
        return WSYNC_OK;
    WSYNC_CHECK(buf_make(parts, nparts, amax, namax, &b));
    st = run(1, nparts, &b, (cudaStream_t)stream);
    buf_free(&b);
    return st;
}

#else

wsync_status_t wsync_fp8_parts_amax_cuda(const wsync_fp8_part_t *parts, size_t nparts, float *amax, size_t namax,
                                         size_t *bad_part, uint64_t *bad_elem, void *stream)
{
    (void)parts, (void)nparts, (void)amax, (void)namax, (void)bad_part, (void)bad_elem, (void)stream;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "fp8: band parts on a GPU: this wsync was built without CUDA");
}

wsync_status_t wsync_fp8_parts_quantize_cuda(const wsync_fp8_part_t *parts, size_t nparts, const float *amax,
                                             size_t namax, void *stream)
{
    (void)parts, (void)nparts, (void)amax, (void)namax, (void)stream;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "fp8: band parts on a GPU: this wsync was built without CUDA");
}

#endif
