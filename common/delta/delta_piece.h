/* delta_piece.h: one piece of a version as a delta wire against its base,
 * the way every sender of deltas decides it (a trainer rank out of its
 * publish slots, trainer_side/delta_serve.c; a relay out of its node's
 * image slots, engine_side/relay_delta.c): the element width the piece's
 * tensors give, a quick look for pieces that changed nearly everywhere, and
 * the wire only when it is smaller than the piece. */
#ifndef WSYNC_COMMON_DELTA_PIECE_H
#define WSYNC_COMMON_DELTA_PIECE_H

#include "common/delta/delta_mem.h"
#include "common/model/manifest.h"

/* The element width image bytes [off, end) use: their tensors' dtype width
 * when they share one and it divides the length, else 1 (delta.h). */
unsigned wsync_delta_piece_width(const wsync_manifest_t *m, uint64_t off, uint64_t end);

/* Piece bytes next (len of `mem`'s memory) against base: *wire gets a
 * malloc'd wire of *wire_len bytes (the caller frees it), or NULL when the
 * piece goes full: its wire would not be smaller, or (host memory) most of
 * 256 elements spread over it changed, so no encoding pass is spent.
 * *wire_len is then the full form's length. Fails for memory or the
 * encoder's error (the piece then goes full too). */
wsync_status_t wsync_delta_piece_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                        const void *next, uint64_t len, unsigned width, unsigned char **wire,
                                        uint64_t *wire_len);

#endif
