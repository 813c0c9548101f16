/* delta_gpu.c: wsync_delta_gpu_encode and _apply (delta_gpu.h) from the
 * kernels of delta_cuda.cu: the host reads the count back, picks the form
 * with the host's own rule (wsync_delta_stats_from) and writes the header,
 * so both sides make the same wire. */
#include "common/delta/delta_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/le.h"
#include "common/base/status.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/delta/delta_cuda.h"

typedef struct scratch {
    uint32_t *words;
    unsigned long long *counts, *total, *flag, *seg; /* seg: the segment offsets, NULL under v1 */
} scratch_t;

/* The faster kernels (delta_cuda_fast.cu) run unless WSYNC_DELTA_GPU=v1
 * asks for the first ones (one-element loads, the scan in one block): both
 * give the host's wire byte for byte on the H200, the faster encode at 0.38x
 * of a D2D copy against 0.23x at 2% changed (bench/RESULTS.md). Read on
 * each call (cheap next to a kernel launch), so a bench sets old against
 * new in one run. */
static int use_v1(void)
{
    const char *e = getenv("WSYNC_DELTA_GPU");
    return e != NULL && strcmp(e, "v1") == 0;
}

static size_t words_bytes(uint64_t n)
{
    return (size_t)(((n + 31) / 32 * 4 + 7) / 8 * 8);
}

/* Sized for width 1 (the most elements), whatever the width: a wire to
 * apply names its own width, and a hostile one must not make the apply's
 * counts outgrow the scratch the caller sized. */
size_t wsync_delta_gpu_scratch(size_t len, unsigned width)
{
    uint64_t n = len;
    (void)width;
    uint64_t nblk = wsync_delta_cuda_blocks(n);
    return words_bytes(n) + (nblk + 2 + wsync_delta_cuda_segs(nblk)) * sizeof(unsigned long long);
}

static scratch_t carve(void *scratch, uint64_t n)
{
    scratch_t s;
    s.words = scratch;
    s.counts = (unsigned long long *)((char *)scratch + words_bytes(n));
    s.total = s.counts + wsync_delta_cuda_blocks(n);
    s.flag = s.total + 1;
    s.seg = use_v1() ? NULL : s.flag + 1;
    return s;
}

static wsync_status_t cuda_failed(int err, const char *what)
{
    return wsync_error(WSYNC_ERR_CUDA, "delta on the GPU: %s: %s", what, cudaGetErrorString((cudaError_t)err));
}

#define CU(call, what)                           \
    do {                                         \
        int cu_err_ = (int)(call);               \
        if (cu_err_ != 0)                        \
            return cuda_failed(cu_err_, (what)); \
    } while (0)

static wsync_status_t check_ptrs(const void *a, const void *b, size_t len, unsigned width)
{
    if (width != 1 && width != 2 && width != 4 && width != 8)
        return wsync_error(WSYNC_ERR_INVALID, "delta on the GPU: element width %u is not 1, 2, 4 or 8", width);
    if (len % width != 0 || (uintptr_t)a % width != 0 || (uintptr_t)b % width != 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "delta on the GPU: a piece of %zu bytes at %p / %p is not whole aligned elements of %u "
                           "bytes: use width 1",
                           len, a, b, width);
    return WSYNC_OK;
}

wsync_status_t wsync_delta_gpu_encode(const void *base, const void *next, size_t len, unsigned width, void *out,
                                      size_t cap, size_t *out_len, wsync_delta_stats_t *st, void *scratch,
                                      void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char hdr[WSYNC_DELTA_HEADER], *o = out, *pay = o + WSYNC_DELTA_HEADER;
    unsigned long long c = 0;
    wsync_delta_stats_t local;
    uint64_t n, bm, payload;
    unsigned iw;
    scratch_t sc;
    wsync_status_t rc = check_ptrs(base, next, len, width);
    if (rc != WSYNC_OK)
        return rc;
    if (cap < wsync_delta_bound(len, width))
        return wsync_error(WSYNC_ERR_INVALID, "delta on the GPU: output of %zu bytes is under the bound %zu", cap,
                           wsync_delta_bound(len, width));
    if ((uintptr_t)out % 8 != 0)
        return wsync_error(WSYNC_ERR_INVALID, "delta on the GPU: the output at %p is not 8-byte aligned", out);
    n = len / width;
    bm = (n + 7) / 8;
    iw = n > (uint64_t)UINT32_MAX + 1 ? 8 : 4;
    sc = carve(scratch, n);
    if (sc.seg == NULL) {
        CU(wsync_delta_cuda_mask(base, next, n, width, sc.words, sc.counts, s), "compare");
        CU(wsync_delta_cuda_scan(sc.counts, wsync_delta_cuda_blocks(n), sc.total, s), "scan");
    } else {
        CU(wsync_delta_cuda_mask_fast(base, next, n, width, sc.words, sc.counts, s), "compare");
        CU(wsync_delta_cuda_scan_fast(sc.counts, wsync_delta_cuda_blocks(n), sc.seg, sc.total, s), "scan");
    }
    CU(cudaMemcpyAsync(&c, sc.total, sizeof(c), cudaMemcpyDeviceToHost, s), "count read-back");
    CU(cudaStreamSynchronize(s), "compare and scan");
    if (st == NULL)
        st = &local;
    wsync_delta_stats_from(n, c, width, st);
    switch (st->chosen) {
    case WSYNC_DELTA_FULL:
        CU(cudaMemcpyAsync(pay, next, len, cudaMemcpyDeviceToDevice, s), "full copy");
        payload = len;
        iw = 0;
        break;
    case WSYNC_DELTA_BITMAP:
        CU(wsync_delta_cuda_compact(next, n, width, sc.words, sc.counts, sc.seg, pay, NULL, 0, pay + bm, s),
           "gather");
        payload = bm + c * width;
        iw = 0;
        break;
    default:
        CU(wsync_delta_cuda_compact(next, n, width, sc.words, sc.counts, sc.seg, NULL, pay, iw, pay + c * iw, s),
           "gather");
        payload = c * (iw + width);
        break;
    }
    wsync_put32(hdr, WSYNC_DELTA_MAGIC);
    hdr[4] = (unsigned char)st->chosen;
    hdr[5] = (unsigned char)width;
    hdr[6] = (unsigned char)iw;
    hdr[7] = 0;
    wsync_put64(hdr + 8, len);
    wsync_put64(hdr + 16, c);
    wsync_put64(hdr + 24, payload);
    CU(cudaMemcpyAsync(o, hdr, sizeof(hdr), cudaMemcpyHostToDevice, s), "header");
    CU(cudaStreamSynchronize(s), "gather");
    *out_len = WSYNC_DELTA_HEADER + payload;
    return WSYNC_OK;
}

static wsync_status_t apply_bitmap(unsigned char *dst, const wsync_delta_header_t *h, const unsigned char *pay,
                                   scratch_t sc, cudaStream_t s)
{
    uint64_t n = h->piece_bytes / h->width, bm = (n + 7) / 8;
    unsigned long long back[2] = {0, 0};
    CU(cudaMemsetAsync(sc.flag, 0, sizeof(*sc.flag), s), "clear");
    if (sc.seg == NULL)
        CU(wsync_delta_cuda_bitmap_counts(pay, n, sc.counts, (unsigned *)sc.flag, s), "bitmap count");
    else
        CU(wsync_delta_cuda_bitmap_counts_fast(pay, n, sc.counts, (unsigned *)sc.flag, s), "bitmap count");
    if (sc.seg == NULL)
        CU(wsync_delta_cuda_scan(sc.counts, wsync_delta_cuda_blocks(n), sc.total, s), "scan");
    else
        CU(wsync_delta_cuda_scan_fast(sc.counts, wsync_delta_cuda_blocks(n), sc.seg, sc.total, s), "scan");
    CU(cudaMemcpyAsync(back, sc.total, sizeof(back), cudaMemcpyDeviceToHost, s), "count read-back");
    CU(cudaStreamSynchronize(s), "bitmap check");
    if (back[1] != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: bitmap has bits set past the piece's %llu elements",
                           (unsigned long long)n);
    if (back[0] != h->changed)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: bitmap marks %llu changed elements, the header's count is %llu",
                           back[0], (unsigned long long)h->changed);
    CU(wsync_delta_cuda_scatter_bitmap(dst, n, h->width, pay, sc.counts, sc.seg, pay + bm, s), "scatter");
    return WSYNC_OK;
}

static wsync_status_t apply_pairs(unsigned char *dst, const wsync_delta_header_t *h, const unsigned char *pay,
                                  scratch_t sc, cudaStream_t s)
{
    uint64_t n = h->piece_bytes / h->width;
    unsigned long long bad = 0;
    CU(cudaMemsetAsync(sc.flag, 0xff, sizeof(*sc.flag), s), "clear");
    CU(wsync_delta_cuda_check_pairs(pay, h->index_width, h->changed, n, sc.flag, s), "index check");
    CU(cudaMemcpyAsync(&bad, sc.flag, sizeof(bad), cudaMemcpyDeviceToHost, s), "check read-back");
    CU(cudaStreamSynchronize(s), "index check");
    if (bad != ~0ull)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "delta: pair %llu has an index past the piece's %llu elements or not above the "
                           "previous "
                           "one: indices must strictly increase below the element count",
                           bad, (unsigned long long)n);
    CU(wsync_delta_cuda_scatter_pairs(dst, h->width, pay, h->index_width, h->changed,
                                      pay + h->changed * h->index_width, s),
       "scatter");
    return WSYNC_OK;
}

wsync_status_t wsync_delta_gpu_apply(void *dst, size_t len, const void *wire, size_t wire_len, void *scratch,
                                     void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned char *pay = (const unsigned char *)wire + WSYNC_DELTA_HEADER;
    unsigned char hdr[WSYNC_DELTA_HEADER];
    wsync_delta_header_t h;
    wsync_status_t rc;
    memset(hdr, 0, sizeof(hdr));
    if (wire_len > 0)
        CU(cudaMemcpyAsync(hdr, wire, wire_len < sizeof(hdr) ? wire_len : sizeof(hdr), cudaMemcpyDeviceToHost, s),
           "header read-back");
    CU(cudaStreamSynchronize(s), "header read-back");
    rc = wsync_delta_parse_header(hdr, wire_len, len, &h);
    if (rc == WSYNC_OK)
        rc = check_ptrs(dst, dst, len, h.width);
    if (rc != WSYNC_OK)
        return rc;
    if (h.form == WSYNC_DELTA_FULL)
        CU(cudaMemcpyAsync(dst, pay, len, cudaMemcpyDeviceToDevice, s), "full copy");
    else if (h.form == WSYNC_DELTA_BITMAP)
        rc = apply_bitmap(dst, &h, pay, carve(scratch, len / h.width), s);
    else
        rc = apply_pairs(dst, &h, pay, carve(scratch, len / h.width), s);
    if (rc != WSYNC_OK)
        return rc;
    CU(cudaStreamSynchronize(s), "apply");
    return WSYNC_OK;
}

#else

size_t wsync_delta_gpu_scratch(size_t len, unsigned width)
{
    return 0;
}

wsync_status_t wsync_delta_gpu_encode(const void *base, const void *next, size_t len, unsigned width, void *out,
                                      size_t cap, size_t *out_len, wsync_delta_stats_t *st, void *scratch,
                                      void *stream)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "delta on the GPU: this build has no CUDA (rebuild with CUDA=1)");
}

wsync_status_t wsync_delta_gpu_apply(void *dst, size_t len, const void *wire, size_t wire_len, void *scratch,
                                     void *stream)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "delta on the GPU: this build has no CUDA (rebuild with CUDA=1)");
}

#endif
