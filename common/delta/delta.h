/* delta.h: one piece of version v sent as the elements that changed since a
 * base version b the receiver already holds. Lossless: the wire carries the
 * new values, never differences, so applying it to b gives v's bytes
 * exactly, and v's trainer digests check the result as they check a full
 * pull. The encoder picks, per piece, the smallest of three forms.
 *
 * Wire form of one piece: a 32-byte header, then the payload. Every field is
 * little-endian and fixed-width:
 *
 *   offset size field
 *        0    4 magic        "WSD1" (0x31445357)
 *        4    1 form         0 full, 1 bitmap, 2 pairs
 *        5    1 width        element width in bytes: 1, 2, 4 or 8
 *        6    1 index width  pairs: 4 (u32 indices) or 8 (u64); else 0
 *        7    1 reserved     0
 *        8    8 piece bytes  length of the piece; a multiple of width
 *       16    8 changed      elements that differ from the base (n = piece
 *                            bytes / width elements in all); for full, the
 *                            count the encoder saw (informational, <= n)
 *       24    8 payload      bytes after the header
 *
 * Payloads (element i is bytes [i*width, (i+1)*width) of the piece):
 *   full    the piece's new bytes: payload = piece bytes;
 *   bitmap  ceil(n/8) bytes, bit i%8 of byte i/8 set when element i changed
 *           (bits past n are zero), then the new values of the set elements
 *           in index order: payload = ceil(n/8) + changed*width;
 *   pairs   `changed` strictly increasing indices (index width each), then
 *           their new values in the same order: payload = changed*(index
 *           width + width).
 * A width other than the dtype's (odd piece lengths, pieces that straddle
 * tensors of different widths) is the caller's choice: width 1 is always
 * valid. Sizes, for n elements of w bytes and c changed: full n*w, bitmap
 * n/8 + c*w, pairs c*(4+w); for bf16 pairs win below c/n = 1/32, bitmap up
 * to 15/16, full above. */
#ifndef WSYNC_COMMON_DELTA_H
#define WSYNC_COMMON_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "common/delta/delta_form.h" /* WSYNC_DELTA_MAGIC, WSYNC_DELTA_HEADER */
#include "common/wsync.h"

typedef enum wsync_delta_form {
    WSYNC_DELTA_FULL = 0,
    WSYNC_DELTA_BITMAP = 1,
    WSYNC_DELTA_PAIRS = 2,
} wsync_delta_form_t;

/* A parsed header. */
typedef struct wsync_delta_header {
    wsync_delta_form_t form;
    unsigned width;
    unsigned index_width;
    uint64_t piece_bytes;
    uint64_t changed;
    uint64_t payload;
} wsync_delta_header_t;

/* What one piece costs in each form (header included) and which is chosen. */
typedef struct wsync_delta_stats {
    uint64_t elems;   /* n */
    uint64_t changed; /* c */
    unsigned width;
    uint64_t bytes[3]; /* wire bytes per form, indexed by wsync_delta_form_t */
    wsync_delta_form_t chosen;
} wsync_delta_stats_t;

/* "full", "bitmap", "pairs". */
const char *wsync_delta_form_name(wsync_delta_form_t form);

/* 1, 2, 4 or 8; the width a piece of `len` bytes may use when its elements
 * are `elem` bytes wide (elem itself when it divides len, else 1). */
unsigned wsync_delta_width_for(size_t len, unsigned elem);

/* Fill `st` from n, c and the width: each form's size and the smallest (ties
 * go to full, then bitmap: cheaper to apply). */
void wsync_delta_stats_from(uint64_t elems, uint64_t changed, unsigned width, wsync_delta_stats_t *st);

/* Count the elements of width `width` where `base` and `next` differ (bytes
 * compared, so -0.0 vs 0.0 and NaN payloads count as changes). One streamed
 * pass over both; never fails for a valid width (len % width == 0). */
wsync_status_t wsync_delta_count(const void *base, const void *next, size_t len, unsigned width,
                                 wsync_delta_stats_t *st);

/* Bytes `out` must have for any encode of a `len`-byte piece: the header, a
 * bitmap and every value (the pass writes the bitmap form first). */
size_t wsync_delta_bound(size_t len, unsigned width);

/* Encode `next` against `base` (both `len` bytes) into `out` (cap >=
 * wsync_delta_bound). One streamed pass writes the bitmap and the changed
 * values; the form is then chosen on the count, and pairs or full rewrite the
 * payload in place (pairs reread only the bitmap). *out_len is the wire
 * length; `st` (may be NULL) gets every form's size. */
wsync_status_t wsync_delta_encode(const void *base, const void *next, size_t len, unsigned width, void *out,
                                  size_t cap, size_t *out_len, wsync_delta_stats_t *st);

/* Parse and check the header of `wire` against a piece of `piece_bytes`:
 * magic, form, widths, counts and the payload length each form implies, with
 * overflow checked. WSYNC_ERR_FORMAT naming the field otherwise. */
wsync_status_t wsync_delta_parse_header(const void *wire, size_t wire_len, uint64_t piece_bytes,
                                        wsync_delta_header_t *out);

/* Apply `wire` to `dst`, which holds the base's `len` bytes, leaving the new
 * version's bytes. Transactional: the whole wire is checked first (header,
 * bitmap popcount against the count, bits past n, indices in range and
 * strictly increasing), and a refused wire leaves `dst` untouched. Never
 * reads or writes outside `wire` and `dst`. */
wsync_status_t wsync_delta_apply(void *dst, size_t len, const void *wire, size_t wire_len);

/* Which host implementation runs: "avx2" or "scalar". WSYNC_DELTA_SIMD=scalar
 * forces the scalar one (tests compare both). */
const char *wsync_delta_impl(void);

#endif
