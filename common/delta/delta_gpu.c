/* delta_gpu.c: wsync_delta_gpu_encode and _apply (delta_gpu.h) from the
 * kernels of delta_cuda.cu: the host reads the count back, picks the form
 * with the host's own rule (wsync_delta_stats_from) and writes the header,
 * so both sides make the same wire. */
#include "common/delta/delta_gpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/status.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/delta/delta_cuda.h"

_Static_assert(WSYNC_DELTA_HEADER == 32, "wsync_delta_cuda_put_header writes 32 bytes");

typedef struct scratch {
    uint32_t *words;
    unsigned long long *counts, *total, *flag, *seg; /* seg: the segment offsets, NULL under v1 */
} scratch_t;

/* Which kernels encode (WSYNC_DELTA_GPU, read on each call, cheap next to
 * a kernel launch, so a bench and a test set them in turn in one run):
 * unset or "v5", the two streaming kernels around a scan
 * (delta_cuda_stream.cu; the fastest measured on the H200: 0.79x of a D2D
 * copy at 2% changed, bf16, bench/RESULTS.md); "v3l" the one pass over
 * both versions (delta_cuda_pass.cu) in chunks of 32 KiB (0.56x), "v3" in
 * chunks of 16 KiB; "v2" the compare, scans and gather of
 * delta_cuda_fast.cu; "v1" the first kernels (element loads, the scan in
 * one block). Apply runs v2's kernels unless v1 is asked. The one pass
 * and v5 need both versions 16-byte aligned, else v2 runs. */
typedef enum { KERNELS_PASS, KERNELS_PASS_LARGE, KERNELS_STREAM, KERNELS_V2, KERNELS_V1 } kernels_t;

static kernels_t kernels(void)
{
    static const char *const names[] = {"v3", "v3l", "v5", "v2", "v1"}; /* in kernels_t's order */
    const char *e = getenv("WSYNC_DELTA_GPU");
    for (int k = 0; e != NULL && k < (int)(sizeof(names) / sizeof(names[0])); k++)
        if (strcmp(e, names[k]) == 0)
            return (kernels_t)k;
    return KERNELS_STREAM;
}

static int one_pass(kernels_t k)
{
    return k == KERNELS_PASS || k == KERNELS_PASS_LARGE;
}

static int use_v1(void)
{
    return kernels() == KERNELS_V1;
}

static size_t words_bytes(uint64_t n)
{
    return (size_t)(((n + 31) / 32 * 4 + 7) / 8 * 8);
}

/* The streaming encoder's scratch (v5): the words, the chunk counts and
 * their segments' sums, the total, then each chunk's held values and
 * indices (128-byte aligned), for n elements in len bytes. At base NULL only
 * .bytes is meaningful. */
typedef struct stream_scratch {
    uint32_t *words;
    unsigned long long *counts, *seg, *total;
    unsigned char *held;
    size_t bytes;
} stream_scratch_t;

static stream_scratch_t stream_layout(void *base, uint64_t len, uint64_t n)
{
    stream_scratch_t l;
    uint64_t nch = wsync_delta_cuda_wchunks(len), at = words_bytes(n);
    char *b = base;
    l.words = base;
    l.counts = (unsigned long long *)(b + at);
    at += nch * sizeof(unsigned long long);
    l.seg = (unsigned long long *)(b + at);
    at += wsync_delta_cuda_segs(nch) * sizeof(unsigned long long);
    l.total = (unsigned long long *)(b + at);
    /* the total and the tickets of the write and the scan; then held's
     * chunks in whole sectors */
    at = (at + 2 * sizeof(unsigned long long) + 127) / 128 * 128;
    l.held = (unsigned char *)(b + at);
    l.bytes = (size_t)(at + wsync_delta_cuda_held_bytes(len));
    return l;
}

/* Sized for width 1 (the most elements), whatever the width: a wire to
 * apply names its own width, and a hostile one must not make the apply's
 * counts outgrow the scratch the caller sized. */
size_t wsync_delta_gpu_scratch(size_t len, unsigned width)
{
    uint64_t n = len;
    (void)width;
    uint64_t nblk = wsync_delta_cuda_blocks(n);
    size_t tiles = words_bytes(n) + (nblk + 2 + wsync_delta_cuda_segs(nblk)) * sizeof(unsigned long long);
    size_t stream = stream_layout(NULL, len, n).bytes;
    return tiles > stream ? tiles : stream;
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

/* Compare, count and gather in one pass (delta_cuda_pass.cu): the values
 * land where the bitmap form puts them (pay + bm), the indices where the
 * pairs form does (pay), as many as fit below pay + bm, which is all of
 * them whenever pairs is the smallest form (c * iw < bm); the bitmap words
 * go to the scratch. *c gets the count. */
static wsync_status_t pass_count(const void *base, const void *next, uint64_t n, unsigned width, kernels_t k,
                                 unsigned char *pay, uint64_t bm, unsigned iw, void *scratch,
                                 unsigned long long *c, cudaStream_t s)
{
    unsigned long long *state = (unsigned long long *)((char *)scratch + words_bytes(n));
    unsigned chunk = WSYNC_DELTA_CUDA_CHUNK << (k != KERNELS_PASS);
    uint64_t nstate = 2 + wsync_delta_cuda_chunks(n * width, chunk);
    CU(cudaMemsetAsync(state, 0, nstate * sizeof(*state), s), "clear");
    CU(wsync_delta_cuda_encode_pass(base, next, n, width, chunk, scratch, state, pay, iw, bm / iw, pay + bm, s),
       "compare");
    CU(cudaMemcpyAsync(c, state + 1, sizeof(*c), cudaMemcpyDeviceToHost, s), "count read-back");
    CU(cudaStreamSynchronize(s), "compare");
    return WSYNC_OK;
}

/* The one pass's wire in its chosen form: the bitmap copied in front of
 * the values, or the values moved down behind the indices (through the
 * scratch where the two overlap: c * w < len/32 + 8 for pairs, and the
 * scratch holds at least len/8 bytes, wsync_delta_gpu_scratch). */
static wsync_status_t pass_finish(const wsync_delta_stats_t *st, unsigned char *pay, uint64_t bm, unsigned iw,
                                  void *scratch, cudaStream_t s)
{
    uint64_t moved = st->changed * st->width, to = st->changed * iw;
    if (st->chosen == WSYNC_DELTA_BITMAP)
        CU(cudaMemcpyAsync(pay, scratch, bm, cudaMemcpyDeviceToDevice, s), "bitmap");
    else if (st->chosen == WSYNC_DELTA_PAIRS && moved > 0 && to + moved <= bm)
        CU(cudaMemcpyAsync(pay + to, pay + bm, moved, cudaMemcpyDeviceToDevice, s), "values");
    else if (st->chosen == WSYNC_DELTA_PAIRS && moved > 0) {
        CU(cudaMemcpyAsync(scratch, pay + bm, moved, cudaMemcpyDeviceToDevice, s), "values");
        CU(cudaMemcpyAsync(pay + to, scratch, moved, cudaMemcpyDeviceToDevice, s), "values");
    }
    return WSYNC_OK;
}

/* Host words mapped for the device, where the write kernel tells the
 * host the total when it is done (DONE_SLOTS calls at a time; a call that
 * finds none free, or where mapping failed, reads the total back and
 * waits for the stream instead). */
#define DONE_SLOTS 64
static volatile unsigned long long *done_host;
static unsigned long long *done_dev;
static uint64_t done_used; /* bit k: slot k taken */
static pthread_once_t done_once = PTHREAD_ONCE_INIT;

static void done_map(void)
{
    void *h = NULL, *d = NULL;
    if (cudaHostAlloc(&h, DONE_SLOTS * sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable) !=
        cudaSuccess)
        return;
    if (cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess) {
        cudaFreeHost(h);
        return;
    }
    done_host = h, done_dev = d;
}

static int done_take(void)
{
    pthread_once(&done_once, done_map);
    if (done_host == NULL)
        return -1;
    uint64_t used = __atomic_load_n(&done_used, __ATOMIC_RELAXED);
    while (~used != 0) {
        int k = __builtin_ctzll(~used);
        if (__atomic_compare_exchange_n(&done_used, &used, used | 1ull << k, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return k;
    }
    return -1;
}

static void done_give(int k)
{
    __atomic_fetch_and(&done_used, ~(1ull << k), __ATOMIC_RELEASE);
}

/* The total the write kernel posts in slot k: waits for the word (a
 * failed kernel never posts it: the stream's error or end ends the wait). */
static wsync_status_t done_wait(int k, unsigned long long *c, cudaStream_t s)
{
    wsync_status_t rc = WSYNC_OK;
    unsigned long long v;
    while ((v = done_host[k]) == 0) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaErrorNotReady)
            continue;
        if ((v = done_host[k]) == 0)
            rc = e != cudaSuccess ? cuda_failed((int)e, "gather")
                                  : wsync_error(WSYNC_ERR_CUDA, "delta on the GPU: the write kernel ended without "
                                                                "its total");
        break;
    }
    done_give(k);
    *c = v - 1;
    return rc;
}

/* The streaming encoder (v5): compare, count and hold, the scan of the
 * chunk counts, and the write, which picks the form from the total and
 * writes the header on the device (the full form's copy is the caller's);
 * then one wait: for the total the write kernel posts to mapped host
 * memory when every block is done, or for the stream and the total read
 * back. */
static wsync_status_t stream_encode(const void *base, const void *next, uint64_t n, unsigned width,
                                    unsigned char *out, void *scratch, unsigned long long *c, cudaStream_t s)
{
    stream_scratch_t l = stream_layout(scratch, n * width, n);
    unsigned *ticket = (unsigned *)(l.total + 1);
    int k = done_take(), e;
    if (k >= 0)
        done_host[k] = 0;
    e = wsync_delta_cuda_stream_count(base, next, n, width, l.words, l.counts, l.held, ticket, s);
    if (e == 0)
        e = wsync_delta_cuda_scan_one(l.counts, wsync_delta_cuda_wchunks(n * width), l.seg, l.total, ticket + 1, s);
    if (e == 0)
        e = wsync_delta_cuda_stream_write(next, n, width, l.words, l.counts, l.seg, l.total, l.held, out, ticket,
                                          k >= 0 ? done_dev + k : NULL, s);
    if (e != 0 && k >= 0)
        done_give(k);
    if (e != 0)
        return cuda_failed(e, "encode");
    if (k >= 0)
        return done_wait(k, c, s);
    CU(cudaMemcpyAsync(c, l.total, sizeof(*c), cudaMemcpyDeviceToHost, s), "count read-back");
    CU(cudaStreamSynchronize(s), "compare");
    return WSYNC_OK;
}

/* The earlier kernels: compare and scan, read the count back, then gather
 * the chosen form's values (and indices or bitmap) reading next again. */
static wsync_status_t multi_count(const void *base, const void *next, uint64_t n, unsigned width, scratch_t sc,
                                  unsigned long long *c, cudaStream_t s)
{
    if (sc.seg == NULL) {
        CU(wsync_delta_cuda_mask(base, next, n, width, sc.words, sc.counts, s), "compare");
        CU(wsync_delta_cuda_scan(sc.counts, wsync_delta_cuda_blocks(n), sc.total, s), "scan");
    } else {
        CU(wsync_delta_cuda_mask_fast(base, next, n, width, sc.words, sc.counts, s), "compare");
        CU(wsync_delta_cuda_scan_fast(sc.counts, wsync_delta_cuda_blocks(n), sc.seg, sc.total, s), "scan");
    }
    CU(cudaMemcpyAsync(c, sc.total, sizeof(*c), cudaMemcpyDeviceToHost, s), "count read-back");
    CU(cudaStreamSynchronize(s), "compare and scan");
    return WSYNC_OK;
}

static wsync_status_t multi_finish(const wsync_delta_stats_t *st, const void *next, unsigned char *pay,
                                   uint64_t bm, unsigned iw, scratch_t sc, cudaStream_t s)
{
    uint64_t n = st->elems, c = st->changed;
    unsigned width = st->width;
    if (st->chosen == WSYNC_DELTA_BITMAP)
        CU(wsync_delta_cuda_compact(next, n, width, sc.words, sc.counts, sc.seg, pay, NULL, 0, pay + bm, s),
           "gather");
    else if (st->chosen == WSYNC_DELTA_PAIRS)
        CU(wsync_delta_cuda_compact(next, n, width, sc.words, sc.counts, sc.seg, NULL, pay, iw, pay + c * iw, s),
           "gather");
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
    kernels_t k = kernels();
    uint64_t n, bm, payload;
    unsigned iw;
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
    iw = wsync_delta_index_width(n);
    if ((one_pass(k) || k == KERNELS_STREAM) &&
        ((uintptr_t)base % 16 != 0 || (uintptr_t)next % 16 != 0 || (uintptr_t)scratch % 16 != 0))
        k = KERNELS_V2;
    if (n > 0 && one_pass(k))
        rc = pass_count(base, next, n, width, k, pay, bm, iw, scratch, &c, s);
    else if (n > 0 && k == KERNELS_STREAM)
        rc = stream_encode(base, next, n, width, o, scratch, &c, s);
    else if (n > 0)
        rc = multi_count(base, next, n, width, carve(scratch, n), &c, s);
    if (rc != WSYNC_OK)
        return rc;
    if (st == NULL)
        st = &local;
    wsync_delta_stats_from(n, c, width, st);
    if (st->chosen == WSYNC_DELTA_FULL)
        CU(cudaMemcpyAsync(pay, next, len, cudaMemcpyDeviceToDevice, s), "full copy");
    else if (n > 0 && one_pass(k))
        rc = pass_finish(st, pay, bm, iw, scratch, s);
    else if (n > 0 && k != KERNELS_STREAM)
        rc = multi_finish(st, next, pay, bm, iw, carve(scratch, n), s);
    if (rc != WSYNC_OK)
        return rc;
    payload = st->bytes[st->chosen] - WSYNC_DELTA_HEADER;
    *out_len = WSYNC_DELTA_HEADER + payload;
    if (n > 0 && k == KERNELS_STREAM && st->chosen != WSYNC_DELTA_FULL)
        return WSYNC_OK; /* the write kernel wrote the header, and stream_encode waited */
    wsync_delta_header_bytes(hdr, st->chosen, width, st->chosen == WSYNC_DELTA_PAIRS ? iw : 0, len, c, payload);
    CU(wsync_delta_cuda_put_header(o, hdr, s), "header");
    CU(cudaStreamSynchronize(s), "gather");
    return WSYNC_OK;
}

/* The bitmap form: its counts and their scan, checked against the header
 * on the device, which gates the scatter (a refused wire writes nothing);
 * the host waits once, for the checks' figures (a copy to pageable memory
 * returns when done), to say what was wrong. */
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
    CU(wsync_delta_cuda_scatter_bitmap(dst, n, h->width, pay, sc.counts, sc.seg, pay + bm, sc.total,
                                       (const unsigned *)sc.flag, h->changed, s),
       "scatter");
    CU(cudaMemcpyAsync(back, sc.total, sizeof(back), cudaMemcpyDeviceToHost, s), "count read-back");
    if (back[1] != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: bitmap has bits set past the piece's %llu elements",
                           (unsigned long long)n);
    if (back[0] != h->changed)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: bitmap marks %llu changed elements, the header's count is %llu",
                           back[0], (unsigned long long)h->changed);
    return WSYNC_OK;
}

/* The pairs form: the indices checked on the device, which gates the
 * scatter; the host waits once, for the first bad index. */
static wsync_status_t apply_pairs(unsigned char *dst, const wsync_delta_header_t *h, const unsigned char *pay,
                                  scratch_t sc, cudaStream_t s)
{
    uint64_t n = h->piece_bytes / h->width;
    unsigned long long bad = 0;
    CU(cudaMemsetAsync(sc.flag, 0xff, sizeof(*sc.flag), s), "clear");
    CU(wsync_delta_cuda_check_pairs(pay, h->index_width, h->changed, n, sc.flag, s), "index check");
    CU(wsync_delta_cuda_scatter_pairs(dst, h->width, pay, h->index_width, h->changed,
                                      pay + h->changed * h->index_width, sc.flag, s),
       "scatter");
    CU(cudaMemcpyAsync(&bad, sc.flag, sizeof(bad), cudaMemcpyDeviceToHost, s), "check read-back");
    if (bad != ~0ull)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "delta: pair %llu has an index past the piece's %llu elements or not above the "
                           "previous one: indices must strictly increase below the element count",
                           bad, (unsigned long long)n);
    return WSYNC_OK;
}

wsync_status_t wsync_delta_gpu_apply_parsed(void *dst, size_t len, const void *wire, const wsync_delta_header_t *h,
                                            void *scratch, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned char *pay = (const unsigned char *)wire + WSYNC_DELTA_HEADER;
    if (h->piece_bytes != len)
        return wsync_error(WSYNC_ERR_INVALID, "delta on the GPU: a header for %llu bytes applied to %zu",
                           (unsigned long long)h->piece_bytes, len);
    WSYNC_CHECK(check_ptrs(dst, dst, len, h->width));
    if (h->form == WSYNC_DELTA_FULL)
        CU(cudaMemcpyAsync(dst, pay, len, cudaMemcpyDeviceToDevice, s), "full copy");
    else if (h->form == WSYNC_DELTA_BITMAP)
        WSYNC_CHECK(apply_bitmap(dst, h, pay, carve(scratch, len / h->width), s));
    else
        WSYNC_CHECK(apply_pairs(dst, h, pay, carve(scratch, len / h->width), s));
    CU(cudaStreamSynchronize(s), "apply");
    return WSYNC_OK;
}

wsync_status_t wsync_delta_gpu_apply(void *dst, size_t len, const void *wire, size_t wire_len, void *scratch,
                                     void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char hdr[WSYNC_DELTA_HEADER];
    wsync_delta_header_t h;
    memset(hdr, 0, sizeof(hdr));
    if (wire_len > 0)
        CU(cudaMemcpyAsync(hdr, wire, wire_len < sizeof(hdr) ? wire_len : sizeof(hdr), cudaMemcpyDeviceToHost, s),
           "header read-back");
    CU(cudaStreamSynchronize(s), "header read-back");
    WSYNC_CHECK(wsync_delta_parse_header(hdr, wire_len, len, &h));
    return wsync_delta_gpu_apply_parsed(dst, len, wire, &h, scratch, stream);
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

wsync_status_t wsync_delta_gpu_apply_parsed(void *dst, size_t len, const void *wire, const wsync_delta_header_t *h,
                                            void *scratch, void *stream)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "delta on the GPU: this build has no CUDA (rebuild with CUDA=1)");
}

#endif
