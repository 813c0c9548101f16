/* pack_random.h: random runs for the pack tests (unit and GPU): every shape
 * a put's runs take (column slices, odd short rows, long rows, contiguous
 * rows, single rows of any size, empty runs), fitted into a source of
 * SRC_LEN bytes and laid out in destination order, and the independent
 * byte-by-byte gather the tests compare against. */
#ifndef WSYNC_TESTS_PACK_RANDOM_H
#define WSYNC_TESTS_PACK_RANDOM_H

#include <stdint.h>
#include <stddef.h>

#include "common/pack/pack.h"

#define SRC_LEN ((size_t)6 << 20)
#define DST_CAP ((size_t)8 << 20)
#define SENTINEL 0xA5

static uint64_t pack_rng = 0x1234567;

static inline uint64_t rnd(uint64_t n)
{
    pack_rng ^= pack_rng << 13;
    pack_rng ^= pack_rng >> 7;
    pack_rng ^= pack_rng << 17;
    return n ? pack_rng % n : 0;
}

/* The reference: every byte on its own, straight from the run's definition. */
static inline void gather_bytes(unsigned char *dst, const unsigned char *src, const wsync_run2d_t *runs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (uint64_t r = 0; r < runs[i].rows; r++)
            for (uint64_t b = 0; b < runs[i].row_bytes; b++)
                dst[runs[i].dst_off + r * runs[i].row_bytes + b] = src[runs[i].src_off + r * runs[i].src_stride + b];
}

/* A random run shape, fitted into the source. */
static inline wsync_run2d_t random_run(void)
{
    wsync_run2d_t r = {0};
    switch (rnd(7)) {
    case 0: /* a column slice: short aligned rows far apart */
        r.row_bytes = 16 * (1 + rnd(64));
        r.src_stride = r.row_bytes * (2 + rnd(8));
        r.rows = 1 + rnd(300);
        break;
    case 1: /* odd short rows at an odd stride */
        r.row_bytes = 1 + rnd(200);
        r.src_stride = r.row_bytes + rnd(97);
        r.rows = 1 + rnd(500);
        break;
    case 2: /* long rows (one or more tasks each) */
        r.row_bytes = (32u << 10) + rnd(200u << 10);
        r.src_stride = r.row_bytes + rnd(4096);
        r.rows = 1 + rnd(6);
        break;
    case 3: /* contiguous rows (stride == row length) */
        r.row_bytes = 1 + rnd(3000);
        r.src_stride = r.row_bytes;
        r.rows = 1 + rnd(200);
        break;
    case 4: /* one row, any size (the host copy's streaming path too) */
        r.row_bytes = 1 + rnd(rnd(2) ? 1000 : (600u << 10));
        r.rows = 1;
        break;
    case 5: /* empty */
        r.row_bytes = rnd(2) ? 0 : 10;
        r.rows = r.row_bytes ? 0 : 5;
        r.src_stride = 10;
        break;
    default: /* rows around the host's streaming threshold */
        r.row_bytes = 100 + rnd(60);
        r.src_stride = r.row_bytes + 1 + rnd(40);
        r.rows = 1 + rnd(100);
        break;
    }
    if (r.rows == 1)
        r.src_stride = 0;
    {
        uint64_t span = r.rows ? (r.rows - 1) * r.src_stride + r.row_bytes : 0;
        if (span > SRC_LEN) { /* shrink to fit */
            r.rows = 1;
            r.src_stride = 0;
            r.row_bytes = SRC_LEN / 2;
            span = r.row_bytes;
        }
        r.src_off = rnd(SRC_LEN - span + 1);
    }
    return r;
}

/* n random runs, laid out in destination order with random gaps (or none);
 * returns the destination bytes they span. */
static inline uint64_t random_runs(wsync_run2d_t *runs, size_t n, int gaps)
{
    uint64_t at = rnd(64);
    for (size_t i = 0; i < n; i++) {
        runs[i] = random_run();
        if (at + wsync_run2d_bytes(&runs[i]) > DST_CAP - 64) {
            runs[i].rows = 0;
            runs[i].row_bytes = 0;
        }
        runs[i].dst_off = at;
        at += wsync_run2d_bytes(&runs[i]);
        if (gaps && at + 40 < DST_CAP - 128)
            at += rnd(40);
    }
    return at;
}

/* Shuffles the run order (the gather must not depend on destination order). */
static inline void shuffle(wsync_run2d_t *runs, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = rnd(i);
        wsync_run2d_t t = runs[i - 1];
        runs[i - 1] = runs[j];
        runs[j] = t;
    }
}

#endif
