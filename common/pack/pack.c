/* pack.c: run checks and the host gather. Rows of a column slice are short
 * (a bf16 o_proj row of Qwen2.5-7B over 8 ranks is 896 bytes) and far apart
 * in the source, while the destination is one long contiguous range: each
 * row is read with its successor's first lines prefetched, and written with
 * non-temporal stores, so the destination (larger than the caches) costs no
 * read for ownership and does not evict the source. */
#include "common/pack/pack.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/mem/host_copy.h"

#define STREAM_ROW_MIN 128u         /* shorter rows: plain memcpy */
#define ROW_AHEAD 4                 /* rows prefetched ahead of the one copied */
#define PREFETCH_LINES 8            /* first lines of each row prefetched */
#define THREAD_MIN_BYTES (1u << 20) /* less per thread is not worth a thread */
#define PACK_MAX_THREADS 64

uint64_t wsync_pack_bytes(const wsync_run2d_t *runs, size_t n)
{
    uint64_t total = 0;
    size_t i;
    for (i = 0; i < n; i++)
        total += wsync_run2d_bytes(&runs[i]);
    return total;
}

/* --- checks ------------------------------------------------------------- */

static const wsync_run2d_t *sort_runs;

static int by_dst(const void *a, const void *b)
{
    uint64_t x = sort_runs[*(const size_t *)a].dst_off, y = sort_runs[*(const size_t *)b].dst_off;
    return x < y ? -1 : x > y;
}

static wsync_status_t check_one(const wsync_run2d_t *r, size_t i, uint64_t src_len, uint64_t dst_len)
{
    uint64_t bytes, span, end;
    if (__builtin_mul_overflow(r->row_bytes, r->rows, &bytes))
        return wsync_error(WSYNC_ERR_INVALID, "pack run %zu: %llu rows of %llu bytes overflow 64 bits", i,
                           (unsigned long long)r->rows, (unsigned long long)r->row_bytes);
    if (r->rows > 1 && r->src_stride < r->row_bytes)
        return wsync_error(WSYNC_ERR_INVALID,
                           "pack run %zu: stride %llu is shorter than a row (%llu bytes): "
                           "rows would overlap in the source",
                           i, (unsigned long long)r->src_stride, (unsigned long long)r->row_bytes);
    if (__builtin_mul_overflow(r->rows - 1, r->src_stride, &span) ||
        __builtin_add_overflow(span, r->row_bytes, &span) || __builtin_add_overflow(span, r->src_off, &end) ||
        end > src_len)
        return wsync_error(WSYNC_ERR_INVALID,
                           "pack run %zu: rows at source offset %llu (stride %llu, %llu rows of "
                           "%llu bytes) end past the source's %llu bytes",
                           i, (unsigned long long)r->src_off, (unsigned long long)r->src_stride,
                           (unsigned long long)r->rows, (unsigned long long)r->row_bytes,
                           (unsigned long long)src_len);
    if (__builtin_add_overflow(r->dst_off, bytes, &end) || end > dst_len)
        return wsync_error(WSYNC_ERR_INVALID,
                           "pack run %zu: %llu bytes at destination offset %llu end past the "
                           "destination's %llu bytes",
                           i, (unsigned long long)bytes, (unsigned long long)r->dst_off,
                           (unsigned long long)dst_len);
    return WSYNC_OK;
}

wsync_status_t wsync_pack_check(const wsync_run2d_t *runs, size_t n, uint64_t src_len, uint64_t dst_len)
{
    size_t *order = NULL, i, k = 0;
    wsync_status_t st = WSYNC_OK;
    for (i = 0; i < n; i++)
        if (runs[i].rows != 0 && runs[i].row_bytes != 0)
            WSYNC_CHECK(check_one(&runs[i], i, src_len, dst_len));
    order = malloc((n ? n : 1) * sizeof(*order));
    WSYNC_CHECK_ALLOC(order);
    for (i = 0; i < n; i++)
        if (wsync_run2d_bytes(&runs[i]) != 0)
            order[k++] = i;
    /* qsort has no context argument; the checks are rare and short. */
    sort_runs = runs;
    qsort(order, k, sizeof(*order), by_dst);
    for (i = 1; i < k; i++) {
        const wsync_run2d_t *a = &runs[order[i - 1]], *b = &runs[order[i]];
        if (a->dst_off + wsync_run2d_bytes(a) > b->dst_off) {
            st = wsync_error(WSYNC_ERR_INVALID,
                             "pack runs %zu and %zu both write destination bytes from offset %llu", order[i - 1],
                             order[i], (unsigned long long)b->dst_off);
            break;
        }
    }
    free(order);
    return st;
}

/* --- host gather --------------------------------------------------------- */

static int have_avx2(void)
{
    static int avx2 = -1;
    int have = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (have < 0) {
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2, have, __ATOMIC_RELAXED);
    }
    return have;
}

/* One short row, destination streamed: a head up to 32-byte alignment of d,
 * 32-byte non-temporal stores, a tail. The caller fences. */
__attribute__((target("avx2"))) static void stream_row_avx2(char *d, const char *s, size_t len)
{
    size_t head = (32 - ((uintptr_t)d & 31)) & 31, k;
    if (head > len)
        head = len;
    memcpy(d, s, head);
    for (k = head; k + 32 <= len; k += 32)
        _mm256_stream_si256((__m256i *)(d + k), _mm256_loadu_si256((const __m256i *)(s + k)));
    memcpy(d + k, s + k, len - k);
}

__attribute__((target("avx2"))) static void fence_avx2(void)
{
    _mm_sfence(); /* streamed stores are visible before the pack returns */
}

static void prefetch_row(const char *s, uint64_t len)
{
    uint64_t k, lines = (len + 63) / 64;
    if (lines > PREFETCH_LINES)
        lines = PREFETCH_LINES;
    for (k = 0; k < lines; k++)
        __builtin_prefetch(s + 64 * k, 0, 0);
}

/* Rows [first, first + count) of run r, columns [col, col + width) of each
 * (a thread's share may start and end inside a row). */
static void copy_rows(char *dst, const char *src, const wsync_run2d_t *r, uint64_t first, uint64_t count,
                      uint64_t col, uint64_t width, int avx2)
{
    uint64_t i;
    if (width >= (256u << 10) || !avx2 || width < STREAM_ROW_MIN) {
        for (i = first; i < first + count; i++)
            wsync_host_copy(dst + r->dst_off + i * r->row_bytes + col, src + r->src_off + i * r->src_stride + col,
                            width);
        return;
    }
    for (i = first; i < first + count; i++) {
        if (i + ROW_AHEAD < first + count)
            prefetch_row(src + r->src_off + (i + ROW_AHEAD) * r->src_stride + col, width);
        stream_row_avx2(dst + r->dst_off + i * r->row_bytes + col, src + r->src_off + i * r->src_stride + col,
                        width);
    }
}

/* Bytes [lo, hi) of the runs taken back to back in array order. */
static void pack_span(char *dst, const char *src, const wsync_run2d_t *runs, size_t n, uint64_t lo, uint64_t hi)
{
    uint64_t at = 0;
    int avx2 = have_avx2();
    size_t i;
    for (i = 0; i < n && at < hi; i++) {
        const wsync_run2d_t *r = &runs[i];
        uint64_t bytes = wsync_run2d_bytes(r), a, b;
        if (bytes == 0 || at + bytes <= lo) {
            at += bytes;
            continue;
        }
        a = lo > at ? lo - at : 0; /* run-local range [a, b) */
        b = hi - at < bytes ? hi - at : bytes;
        while (a < b) {
            uint64_t row = a / r->row_bytes, col = a % r->row_bytes;
            if (col != 0 || b - a < r->row_bytes) { /* a share starts or ends inside this row */
                uint64_t end = b - row * r->row_bytes < r->row_bytes ? b - row * r->row_bytes : r->row_bytes;
                copy_rows(dst, src, r, row, 1, col, end - col, avx2);
                a = row * r->row_bytes + end;
            } else {
                uint64_t rows = (b - a) / r->row_bytes;
                copy_rows(dst, src, r, row, rows, 0, r->row_bytes, avx2);
                a += rows * r->row_bytes;
            }
        }
        at += bytes;
    }
    if (avx2)
        fence_avx2();
}

void wsync_pack_host(void *dst, const void *src_base, const wsync_run2d_t *runs, size_t n)
{
    pack_span(dst, src_base, runs, n, 0, wsync_pack_bytes(runs, n));
}

typedef struct share {
    char *dst;
    const char *src;
    const wsync_run2d_t *runs;
    size_t n;
    uint64_t lo, hi;
} share_t;

static void *share_main(void *arg)
{
    share_t *s = arg;
    pack_span(s->dst, s->src, s->runs, s->n, s->lo, s->hi);
    return NULL;
}

wsync_status_t wsync_pack_host_threads(void *dst, const void *src_base, const wsync_run2d_t *runs, size_t n,
                                       int threads)
{
    share_t shares[PACK_MAX_THREADS];
    pthread_t tids[PACK_MAX_THREADS];
    uint64_t total = wsync_pack_bytes(runs, n), per;
    wsync_status_t st = WSYNC_OK;
    int t, started = 0;
    if (threads > PACK_MAX_THREADS)
        threads = PACK_MAX_THREADS;
    if ((uint64_t)threads > total / THREAD_MIN_BYTES)
        threads = (int)(total / THREAD_MIN_BYTES);
    if (threads <= 1) {
        pack_span(dst, src_base, runs, n, 0, total);
        return WSYNC_OK;
    }
    /* Shares of whole 4 KiB of the packed bytes: with runs in destination
     * order, two threads never write one cache line. */
    per = (total / (uint64_t)threads + 4095) / 4096 * 4096;
    for (t = 0; t < threads; t++) {
        uint64_t lo = per * (uint64_t)t, hi = lo + per;
        shares[t] = (share_t){.dst = dst,
                              .src = src_base,
                              .runs = runs,
                              .n = n,
                              .lo = lo < total ? lo : total,
                              .hi = hi < total && t + 1 < threads ? hi : total};
    }
    for (t = 1; t < threads; t++) {
        int rc = pthread_create(&tids[t], NULL, share_main, &shares[t]);
        if (rc != 0) {
            st = wsync_error(WSYNC_ERR_IO, "pack: cannot start thread %d of %d: %s", t, threads, strerror(rc));
            break;
        }
        started = t;
    }
    pack_span(dst, src_base, runs, n, shares[0].lo, shares[0].hi);
    for (t = started + 1; t < threads; t++) /* shares whose thread did not start */
        pack_span(dst, src_base, runs, n, shares[t].lo, shares[t].hi);
    for (t = 1; t <= started; t++)
        pthread_join(tids[t], NULL);
    return st;
}
