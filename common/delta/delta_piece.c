/* delta_piece.c: a piece's delta wire as every sender decides it (delta_piece.h). */
#include "common/delta/delta_piece.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

unsigned wsync_delta_piece_width(const wsync_manifest_t *m, uint64_t off, uint64_t end)
{
    size_t lo = 0, hi = m->ntensors, i;
    unsigned w = 0;
    while (lo < hi) { /* the first tensor ending after off */
        size_t mid = lo + (hi - lo) / 2;
        if (m->tensors[mid].offset + m->tensors[mid].size <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i < m->ntensors && m->tensors[i].offset < end; i++) {
        unsigned bits = wsync_dtype_bits(m->tensors[i].dtype), tw = bits % 8 == 0 && bits <= 64 ? bits / 8 : 1;
        if (m->tensors[i].size == 0)
            continue;
        if (w != 0 && tw != w)
            return 1;
        w = tw;
    }
    return wsync_delta_width_for(end - off, w ? w : 1);
}

/* 1 if most of 256 elements spread over the piece differ from the base: a
 * wire would not pay (versions that rewrite everything, as synthetic test
 * versions do). */
static int mostly_changed(const unsigned char *base, const unsigned char *next, uint64_t len, unsigned width)
{
    const uint64_t n = len / width, step = n > 256 ? n / 256 : 1;
    uint64_t i, seen = 0, diff = 0;
    for (i = 0; i < n; i += step, seen++)
        diff += memcmp(base + i * width, next + i * width, width) != 0;
    return 2 * diff > seen;
}

wsync_status_t wsync_delta_piece_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                        const void *next, uint64_t len, unsigned width, unsigned char **wire,
                                        uint64_t *wire_len)
{
    const size_t cap = wsync_delta_bound(len, width);
    size_t wl = 0;
    unsigned char *out;
    wsync_status_t st;
    *wire = NULL;
    *wire_len = len + WSYNC_DELTA_HEADER; /* full */
    if (mem->kind == WSYNC_MEM_HOST && mostly_changed(base, next, len, width))
        return WSYNC_OK;
    out = malloc(cap); /* on a GPU the kernels read both versions, the wire comes to host memory */
    WSYNC_CHECK_ALLOC(out);
    st = wsync_delta_mem_encode(mem, dev, base, next, len, width, out, cap, &wl);
    if (st != WSYNC_OK || wl >= len) {
        free(out);
        return st;
    }
    *wire = out;
    *wire_len = wl;
    return WSYNC_OK;
}
