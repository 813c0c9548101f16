/* fp8_amax_msg.h: the message between trainer ranks that share FP8 bands
 * (trainer_side/fp8_amax.c, docs/FP8.md "Across trainer ranks"), sent over
 * the asked rank's pull port:
 *   request  {"fp8_amax": {"version": V, "parts": [tensor, block_rows,
 *            block_cols, slice, band, ...]}}: five integers per part of a
 *            band the asker wants the asked rank's maxima of;
 *   answer   {"ok": true, "amax": [bits, ...]}: per part, in order, one
 *            fp32 maximum of |x| per scale column, as its IEEE-754 bits (so
 *            the exact value crosses JSON), or {"error": "..."}.
 * Built and parsed here only; the parsers name the field that is wrong and
 * what it must be. */
#ifndef WSYNC_COMMON_FP8_AMAX_MSG_H
#define WSYNC_COMMON_FP8_AMAX_MSG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_AMAX_MAX_PARTS (1u << 20) /* parts in one request */
#define WSYNC_AMAX_MAX_BLOCK 256        /* a block's rows and columns: 1 .. this */

typedef struct wsync_fp8_amax_part {
    uint32_t tensor;            /* the manifest's index */
    int block_rows, block_cols; /* 1 .. WSYNC_AMAX_MAX_BLOCK */
    uint64_t slice, band;       /* the matrix (leading dimensions) and its band of block_rows rows */
} wsync_fp8_amax_part_t;

typedef struct wsync_fp8_amax_req {
    uint64_t version; /* >= 1 */
    wsync_fp8_amax_part_t *parts;
    size_t nparts; /* 1 .. WSYNC_AMAX_MAX_PARTS */
} wsync_fp8_amax_req_t;

/* The request as the whole message ({"fp8_amax": {...}}; new reference), or NULL without memory. */
json_t *wsync_fp8_amax_req_to_json(const wsync_fp8_amax_req_t *r);
/* Parses the object under "fp8_amax" into *out (its parts allocated: free
 * them with wsync_fp8_amax_req_clear, also after a failure). */
wsync_status_t wsync_fp8_amax_req_from_json(const json_t *j, wsync_fp8_amax_req_t *out);
void wsync_fp8_amax_req_clear(wsync_fp8_amax_req_t *r);

/* The answer's maxima into `reply` ("ok" and "amax"). */
wsync_status_t wsync_fp8_amax_answer_set(json_t *reply, const float *amax, size_t n);
/* The answer's maxima: exactly n of them, each finite and >= 0; the peer's
 * "error" when it sent one. */
wsync_status_t wsync_fp8_amax_answer_get(const json_t *reply, float *amax, size_t n);

#endif
