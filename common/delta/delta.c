/* delta.c: the delta wire form (delta.h): sizes and the choice of form, the
 * encoder around the streamed pass, the header parser and the transactional
 * apply. The passes themselves are in delta_simd.c (AVX2) and here (scalar). */
#include "common/delta/delta.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/le.h"
#include "common/base/status.h"
#include "common/delta/delta_form.h"
#include "common/delta/delta_impl.h"

/* --- scalar passes ------------------------------------------------------ */

static inline uint32_t mask32_scalar(const unsigned char *a, const unsigned char *b, unsigned w)
{
    uint32_t m = 0;
    for (unsigned k = 0; k < 32; k++)
        m |= (uint32_t)wsync_delta_elem_differs(a + k * w, b + k * w, w) << k;
    return m;
}

static uint64_t pass_scalar(const unsigned char *base, const unsigned char *next, uint64_t n, unsigned w,
                            unsigned char *bitmap, unsigned char *vals)
{
    WSYNC_DELTA_PASS_BODY(mask32_scalar, wsync_delta_extract_bits);
}

static uint64_t popcount_scalar(const unsigned char *bitmap, uint64_t n)
{
    WSYNC_DELTA_POPCOUNT_BODY;
}

static void scatter_scalar(unsigned char *dst, const unsigned char *bitmap, uint64_t n, unsigned w,
                           const unsigned char *vals)
{
    WSYNC_DELTA_SCATTER_BODY
}

const wsync_delta_ops_t wsync_delta_scalar_ops = {
    .name = "scalar",
    .pass = pass_scalar,
    .popcount = popcount_scalar,
    .scatter = scatter_scalar,
};

/* Picked on first use; racing first calls pick the same one. */
const wsync_delta_ops_t *wsync_delta_ops(void)
{
    static const wsync_delta_ops_t *picked;
    const wsync_delta_ops_t *ops = __atomic_load_n(&picked, __ATOMIC_ACQUIRE);
    if (ops == NULL) {
        const char *force = getenv("WSYNC_DELTA_SIMD");
        ops = (force != NULL && strcmp(force, "scalar") == 0) ? NULL : wsync_delta_avx2_ops();
        if (ops == NULL)
            ops = &wsync_delta_scalar_ops;
        __atomic_store_n(&picked, ops, __ATOMIC_RELEASE);
    }
    return ops;
}

const char *wsync_delta_impl(void)
{
    return wsync_delta_ops()->name;
}

/* --- sizes and choice --------------------------------------------------- */

const char *wsync_delta_form_name(wsync_delta_form_t form)
{
    switch (form) {
    case WSYNC_DELTA_FULL: return "full";
    case WSYNC_DELTA_BITMAP: return "bitmap";
    case WSYNC_DELTA_PAIRS: return "pairs";
    }
    return "unknown";
}

static int width_ok(unsigned w)
{
    return w == 1 || w == 2 || w == 4 || w == 8;
}

unsigned wsync_delta_width_for(size_t len, unsigned elem)
{
    return width_ok(elem) && len % elem == 0 ? elem : 1;
}

void wsync_delta_stats_from(uint64_t elems, uint64_t changed, unsigned width, wsync_delta_stats_t *st)
{
    st->elems = elems;
    st->changed = changed;
    st->width = width;
    st->chosen = (wsync_delta_form_t)wsync_delta_pick(elems, changed, width, st->bytes);
}

static wsync_status_t check_args(size_t len, unsigned width)
{
    if (!width_ok(width))
        return wsync_error(WSYNC_ERR_INVALID, "delta: element width %u is not 1, 2, 4 or 8", width);
    if (len % width != 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "delta: a piece of %zu bytes is not whole elements of %u bytes: use width 1 "
                           "(wsync_delta_width_for)",
                           len, width);
    return WSYNC_OK;
}

wsync_status_t wsync_delta_count(const void *base, const void *next, size_t len, unsigned width,
                                 wsync_delta_stats_t *st)
{
    uint64_t n = len / (width ? width : 1), c;
    wsync_status_t s = check_args(len, width);
    if (s != WSYNC_OK)
        return s;
    c = wsync_delta_ops()->pass(base, next, n, width, NULL, NULL);
    wsync_delta_stats_from(n, c, width, st);
    return WSYNC_OK;
}

size_t wsync_delta_bound(size_t len, unsigned width)
{
    (void)width;
    return WSYNC_DELTA_HEADER + (len + 7) / 8 + len;
}

/* --- encoder ------------------------------------------------------------ */

/* Rewrite the bitmap form at `pay` (bitmap, then c values) as pairs. Pairs
 * are chosen only when c*iw < the bitmap's size, so the indices are first
 * written past the values (the bound leaves room: checked), the values move
 * down, and the indices move to the front. */
static void bitmap_to_pairs(unsigned char *pay, uint64_t n, uint64_t c, unsigned w, unsigned iw)
{
    uint64_t bm = (n + 7) / 8, k = 0;
    unsigned char *tmp = pay + bm + c * w;
    for (uint64_t j = 0; j < bm; j += 8) {
        uint64_t x = 0;
        memcpy(&x, pay + j, bm - j < 8 ? bm - j : 8);
        while (x != 0) {
            uint64_t e = j * 8 + (uint64_t)__builtin_ctzll(x);
            if (iw == 4)
                wsync_put32(tmp + k * 4, (uint32_t)e);
            else
                wsync_put64(tmp + k * 8, e);
            k++;
            x &= x - 1;
        }
    }
    memmove(pay + c * iw, pay + bm, c * w);
    memmove(pay, tmp, c * iw);
}

wsync_status_t wsync_delta_encode(const void *base, const void *next, size_t len, unsigned width, void *out,
                                  size_t cap, size_t *out_len, wsync_delta_stats_t *st)
{
    unsigned char *o = out, *pay = o + WSYNC_DELTA_HEADER;
    wsync_delta_stats_t local;
    uint64_t n, c, bm, payload;
    unsigned iw;
    wsync_status_t s = check_args(len, width);
    if (s != WSYNC_OK)
        return s;
    if (cap < wsync_delta_bound(len, width))
        return wsync_error(WSYNC_ERR_INVALID,
                           "delta: output of %zu bytes is under the bound %zu for a %zu-byte piece", cap,
                           wsync_delta_bound(len, width), len);
    n = len / width;
    bm = (n + 7) / 8;
    iw = wsync_delta_index_width(n);
    c = wsync_delta_ops()->pass(base, next, n, width, pay, pay + bm);
    if (st == NULL)
        st = &local;
    wsync_delta_stats_from(n, c, width, st);
    /* Room for the pairs' scratch indices past the values (always true when
     * pairs win: c*iw < bm <= len/8 + 1); full otherwise. */
    if (st->chosen == WSYNC_DELTA_PAIRS && bm + c * width + c * iw > cap - WSYNC_DELTA_HEADER)
        st->chosen = WSYNC_DELTA_FULL;
    switch (st->chosen) {
    case WSYNC_DELTA_FULL:
        memcpy(pay, next, len);
        payload = len;
        iw = 0;
        break;
    case WSYNC_DELTA_BITMAP:
        payload = bm + c * width;
        iw = 0;
        break;
    default:
        bitmap_to_pairs(pay, n, c, width, iw);
        payload = c * (iw + width);
        break;
    }
    wsync_delta_header_bytes(o, st->chosen, width, iw, len, c, payload);
    *out_len = WSYNC_DELTA_HEADER + payload;
    return WSYNC_OK;
}

/* --- decoder ------------------------------------------------------------ */

wsync_status_t wsync_delta_parse_header(const void *wire, size_t wire_len, uint64_t piece_bytes,
                                        wsync_delta_header_t *out)
{
    const unsigned char *p = wire;
    wsync_delta_header_t h;
    uint64_t n, want, per;
    if (wire_len < WSYNC_DELTA_HEADER)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: truncated: %zu bytes, the header alone is %u", wire_len,
                           WSYNC_DELTA_HEADER);
    if (wsync_get32(p) != WSYNC_DELTA_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: bad magic 0x%08x (want 0x%08x \"WSD1\"): not a delta piece",
                           wsync_get32(p), WSYNC_DELTA_MAGIC);
    if (p[4] > WSYNC_DELTA_PAIRS)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: form %u is not 0 (full), 1 (bitmap) or 2 (pairs)", p[4]);
    h.form = (wsync_delta_form_t)p[4];
    h.width = p[5];
    h.index_width = p[6];
    h.piece_bytes = wsync_get64(p + 8);
    h.changed = wsync_get64(p + 16);
    h.payload = wsync_get64(p + 24);
    if (!width_ok(h.width))
        return wsync_error(WSYNC_ERR_FORMAT, "delta: element width %u is not 1, 2, 4 or 8", h.width);
    if (p[7] != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: reserved byte 7 is %u, not 0", p[7]);
    if (h.piece_bytes != piece_bytes)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: header says the piece has %llu bytes, the piece has %llu",
                           (unsigned long long)h.piece_bytes, (unsigned long long)piece_bytes);
    if (h.piece_bytes % h.width != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: piece bytes %llu are not whole elements of width %u",
                           (unsigned long long)h.piece_bytes, h.width);
    n = h.piece_bytes / h.width;
    if (h.changed > n)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: changed count %llu exceeds the piece's %llu elements",
                           (unsigned long long)h.changed, (unsigned long long)n);
    if (h.form == WSYNC_DELTA_PAIRS ? (h.index_width != 4 && h.index_width != 8) : h.index_width != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: index width %u is wrong for form %s (pairs: 4 or 8; else 0)",
                           h.index_width, wsync_delta_form_name(h.form));
    /* changed <= n and changed*width <= piece bytes; only the pairs' product
     * and the bitmap's sum (for pieces near 2^64 bytes) can overflow. */
    per = h.index_width + h.width;
    want = h.form == WSYNC_DELTA_FULL     ? h.piece_bytes
           : h.form == WSYNC_DELTA_BITMAP ? n / 8 + (n % 8 != 0) + h.changed * h.width
                                          : h.changed * per;
    if ((h.form == WSYNC_DELTA_PAIRS && h.changed != 0 && want / h.changed != per) ||
        (h.form == WSYNC_DELTA_BITMAP && want < h.changed * h.width))
        return wsync_error(WSYNC_ERR_FORMAT, "delta: changed count %llu overflows the payload size",
                           (unsigned long long)h.changed);
    if (h.payload != want)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: payload length %llu, but form %s with %llu changed needs %llu",
                           (unsigned long long)h.payload, wsync_delta_form_name(h.form),
                           (unsigned long long)h.changed, (unsigned long long)want);
    if (h.payload != wire_len - WSYNC_DELTA_HEADER)
        return wsync_error(WSYNC_ERR_FORMAT, "delta: %s: payload is %llu bytes, the wire has %zu after the header",
                           h.payload > wire_len - WSYNC_DELTA_HEADER ? "truncated" : "trailing bytes",
                           (unsigned long long)h.payload, wire_len - WSYNC_DELTA_HEADER);
    *out = h;
    return WSYNC_OK;
}

static uint64_t index_at(const unsigned char *idx, unsigned iw, uint64_t k)
{
    return iw == 4 ? wsync_get32(idx + k * 4) : wsync_get64(idx + k * 8);
}

/* Indices strictly increasing and below n: no element is written twice and
 * none out of the piece. */
static wsync_status_t check_pairs(const unsigned char *idx, unsigned iw, uint64_t c, uint64_t n)
{
    for (uint64_t k = 0; k < c; k++) {
        uint64_t e = index_at(idx, iw, k);
        if (e >= n)
            return wsync_error(WSYNC_ERR_FORMAT, "delta: pair %llu has index %llu, past the piece's %llu elements",
                               (unsigned long long)k, (unsigned long long)e, (unsigned long long)n);
        if (k > 0 && e <= index_at(idx, iw, k - 1))
            return wsync_error(WSYNC_ERR_FORMAT,
                               "delta: pair %llu has index %llu, not above the previous one (%llu): indices must "
                               "strictly increase",
                               (unsigned long long)k, (unsigned long long)e,
                               (unsigned long long)index_at(idx, iw, k - 1));
    }
    return WSYNC_OK;
}

wsync_status_t wsync_delta_apply(void *dst, size_t len, const void *wire, size_t wire_len)
{
    const unsigned char *pay = (const unsigned char *)wire + WSYNC_DELTA_HEADER;
    const wsync_delta_ops_t *ops = wsync_delta_ops();
    unsigned char *d = dst;
    wsync_delta_header_t h;
    uint64_t n, bm, pc;
    wsync_status_t s = wsync_delta_parse_header(wire, wire_len, len, &h);
    if (s != WSYNC_OK)
        return s;
    n = h.piece_bytes / h.width;
    switch (h.form) {
    case WSYNC_DELTA_FULL: memcpy(d, pay, len); return WSYNC_OK;
    case WSYNC_DELTA_BITMAP:
        bm = (n + 7) / 8;
        pc = n == 0 ? 0 : ops->popcount(pay, n);
        if (pc == UINT64_MAX)
            return wsync_error(WSYNC_ERR_FORMAT, "delta: bitmap has bits set past the piece's %llu elements",
                               (unsigned long long)n);
        if (pc != h.changed)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "delta: bitmap marks %llu changed elements, the header's count is %llu",
                               (unsigned long long)pc, (unsigned long long)h.changed);
        ops->scatter(d, pay, n, h.width, pay + bm);
        return WSYNC_OK;
    default:
        s = check_pairs(pay, h.index_width, h.changed, n);
        if (s != WSYNC_OK)
            return s;
        for (uint64_t k = 0; k < h.changed; k++)
            wsync_delta_copy_elem(d + index_at(pay, h.index_width, k) * h.width,
                                  pay + h.changed * h.index_width + k * h.width, h.width);
        return WSYNC_OK;
    }
}
