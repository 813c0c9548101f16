/* digest_runs_random.h: random segments of whole-word runs for the
 * digest-runs tests (unit and GPU), and the reference they are checked
 * against: pack the runs byte by byte (pack_random.h's gather_bytes), then
 * the plain digest of the packed bytes (digest.h). */
#ifndef WSYNC_TESTS_DIGEST_RUNS_RANDOM_H
#define WSYNC_TESTS_DIGEST_RUNS_RANDOM_H

#include <stdlib.h>

#include "common/digest/digest.h"
#include "common/mem/digest_runs.h"
#include "tests/unit/common/pack/pack_random.h"

#define DR_MAX_RUNS 4096

/* A run of whole words inside SRC_LEN: column slices, long strided rows,
 * contiguous blocks (short and long), single rows, empty runs. */
static inline wsync_run2d_t dr_random_run(void)
{
    wsync_run2d_t r = {0};
    switch (rnd(6)) {
    case 0: /* a bf16 column slice */
        r.row_bytes = 8 * (1 + rnd(600));
        r.src_stride = r.row_bytes * (2 + rnd(4));
        r.rows = 1 + rnd(200);
        break;
    case 1: /* long strided rows: cut into 4 KiB rows */
        r.row_bytes = 8 * (2048 + rnd(12000));
        r.src_stride = r.row_bytes + 8 * rnd(100);
        r.rows = 1 + rnd(4);
        break;
    case 2: /* contiguous rows */
        r.row_bytes = 8 * (1 + rnd(300));
        r.src_stride = r.row_bytes;
        r.rows = 1 + rnd(300);
        break;
    case 3: /* one long row */
        r.row_bytes = 8 * (1 + rnd(200000));
        r.rows = 1;
        break;
    case 4: /* empty */
        r.rows = rnd(2) ? 0 : 3;
        r.row_bytes = r.rows ? 0 : 16;
        r.src_stride = 16;
        break;
    default: /* short rows, many */
        r.row_bytes = 8 * (1 + rnd(6));
        r.src_stride = r.row_bytes + 8 * (1 + rnd(30));
        r.rows = 1 + rnd(2000);
        break;
    }
    if (r.rows == 1)
        r.src_stride = 0;
    {
        uint64_t span = r.rows ? (r.rows - 1) * r.src_stride + r.row_bytes : 0;
        if (span > SRC_LEN) { /* too big: one row of what fits */
            r.rows = 1;
            r.src_stride = 0;
            r.row_bytes = 8 * (1 + rnd(SRC_LEN / 16));
            span = r.row_bytes;
        }
        r.src_off = 8 * rnd((SRC_LEN - span) / 8 + 1);
    }
    return r;
}

/* Up to `max_segs` segments whose runs together pack into at most DST_CAP
 * bytes; runs[] holds them all, each segment's runs back to back in its
 * destination (dst_off inside the segment). Returns the count. */
static inline size_t dr_random_segments(wsync_digest_seg_t *segs, size_t max_segs, wsync_run2d_t *runs)
{
    size_t nseg = 1 + rnd(max_segs), used = 0, s;
    uint64_t total = 0;
    for (s = 0; s < nseg; s++) {
        size_t nr = 1 + rnd(12), k;
        uint64_t at = 0;
        if (used + nr > DR_MAX_RUNS)
            nr = DR_MAX_RUNS - used;
        segs[s].runs = &runs[used];
        segs[s].nruns = nr;
        segs[s].dst_off = rnd(1u << 30);
        for (k = 0; k < nr; k++) {
            wsync_run2d_t r = dr_random_run();
            if (total + at + wsync_run2d_bytes(&r) > DST_CAP)
                r.rows = 0;
            r.dst_off = at;
            at += wsync_run2d_bytes(&r);
            runs[used + k] = r;
        }
        used += nr;
        total += at;
        if (used == DR_MAX_RUNS) {
            s++;
            break;
        }
    }
    return s;
}

/* A random source of SRC_LEN bytes and a packing buffer of DST_CAP, both
 * malloc'd (0 when out of memory). */
static inline int dr_buffers(unsigned char **src, unsigned char **buf)
{
    size_t i;
    *src = malloc(SRC_LEN);
    *buf = malloc(DST_CAP);
    if (*src == NULL || *buf == NULL)
        return 0;
    for (i = 0; i < SRC_LEN; i++)
        (*src)[i] = (unsigned char)rnd(256);
    return 1;
}

/* The reference: segment i's word sum, from its runs packed byte by byte
 * into `buf` (DST_CAP bytes). */
static inline uint64_t dr_reference_sum(const wsync_digest_seg_t *seg, const unsigned char *src, unsigned char *buf)
{
    uint64_t len = 0;
    size_t k;
    for (k = 0; k < seg->nruns; k++)
        len += wsync_run2d_bytes(&seg->runs[k]);
    gather_bytes(buf, src, seg->runs, seg->nruns);
    return wsync_digest_sum(buf, len, seg->dst_off);
}

/* Two ways (wsync_digest_seg2_t) over n random segments: pairs of them
 * share a sum, and about half also go into a second sum, keyed from a
 * random image offset as a range that starts at a random whole word at or
 * before their first source byte. *nsums: 2 n. */
static inline void dr_two_way(const wsync_digest_seg_t *segs, size_t n, wsync_digest_seg2_t *out, size_t *nsums)
{
    size_t i, k;
    for (i = 0; i < n; i++) {
        uint64_t lo = SRC_LEN;
        for (k = 0; k < segs[i].nruns; k++)
            if (segs[i].runs[k].rows && segs[i].runs[k].row_bytes && segs[i].runs[k].src_off < lo)
                lo = segs[i].runs[k].src_off;
        out[i] = (wsync_digest_seg2_t){.seg = segs[i],
                                       .sum = (uint32_t)(i / 2),
                                       .sum2 = rnd(2) ? WSYNC_DIGEST_NO_SUM : (uint32_t)(n + rnd(n)),
                                       .off2 = rnd(1u << 30),
                                       .src2 = 8 * rnd(lo / 8 + 1)};
    }
    *nsums = 2 * n;
}

/* The reference of dr_two_way's segments: sums[sum] += dr_reference_sum,
 * and the second key word by word from the source bytes, little-endian. */
static inline void dr_reference_sums2(const wsync_digest_seg2_t *s, const unsigned char *src, unsigned char *buf,
                                      uint64_t *sums)
{
    size_t k;
    uint64_t r, w, b;
    sums[s->sum] += dr_reference_sum(&s->seg, src, buf);
    for (k = 0; s->sum2 != WSYNC_DIGEST_NO_SUM && k < s->seg.nruns; k++) {
        const wsync_run2d_t *rn = &s->seg.runs[k];
        for (r = 0; r < rn->rows; r++)
            for (w = 0; w < rn->row_bytes / 8; w++) {
                const uint64_t x = rn->src_off + r * rn->src_stride + 8 * w;
                uint64_t word = 0;
                for (b = 0; b < 8; b++)
                    word |= (uint64_t)src[x + b] << (8 * b);
                sums[s->sum2] += wsync_digest_word(word, wsync_digest_base_key(s->off2) +
                                                             (x - s->src2) / 8 * WSYNC_DIGEST_GOLDEN);
            }
    }
}

/* The first of the ns sums of n two-way segments that differs from the
 * reference (said on stderr, naming `round`), or -1. */
static inline long dr_two_way_differs(const wsync_digest_seg2_t *s2, size_t n, size_t ns, const uint64_t *sums,
                                      const unsigned char *src, unsigned char *buf, int round)
{
    uint64_t want[2 * 64 + 1] = {0};
    size_t i;
    for (i = 0; i < n; i++)
        dr_reference_sums2(&s2[i], src, buf, want);
    for (i = 0; i < ns; i++)
        if (sums[i] != want[i]) {
            fprintf(stderr, "  round %d sum %zu of %zu differs\n", round, i, ns);
            return (long)i;
        }
    return -1;
}

#endif
