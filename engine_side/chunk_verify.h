/* chunk_verify.h: a pull's chunks verified one by one where the fetch
 * (pull.h) verifies against the record: the whole image and a node of
 * identity targets. Each unit of a chunk (a piece of the whole image, a put
 * of an identity target: the same bytes) has a published digest of its bytes,
 * keyed at its image offset. When a chunk is complete here, its units' sums
 * (the sums the landing's puts brought along, where every one did: the local
 * transport's copy inside one GPU digests what it writes; else one digest
 * pass; or a fan-out copy's digests) are compared with them; while the
 * version's digests are late (late_digests.h) they are kept, and compared
 * once the digests are in. A chunk whose units match goes to the fetch's
 * chunk_verified op; a mismatch names the unit, its bytes, its tensor and
 * its trainer rank. */
#ifndef WSYNC_ENGINE_CHUNK_VERIFY_H
#define WSYNC_ENGINE_CHUNK_VERIFY_H

#include "engine_side/late_digests.h"
#include "engine_side/pull.h"

typedef struct recv_verify {
    const uint64_t *digests; /* [units] by unit id: the published ones; NULL while late */
    size_t nunits;
    /* per unit: the word sum its put brought along, if it did */
    uint64_t *put_sum;
    unsigned char *has_put_sum;
    /* one chunk's units: their digest ranges in the image, and their sums */
    wsync_digest_range_t *rg;
    uint64_t *sums;

    /* late digests: until they are in (digests NULL), chunks summed here
     * wait with their units' sums */
    recv_late_t *late;
    uint64_t *late_sum;     /* [units] */
    uint32_t *waiting;      /* chunks summed, not compared yet */
    unsigned char *wlanded; /* [chunks]: landed here (else copied in) */
    uint32_t nwaiting;
} recv_verify_t;

/* Room for p's units (nunits of them, at most maxunits in one chunk) and
 * chunks; `digests` by unit id, or, `late`, none yet: a thread waits for
 * them (the record's by piece id: units are pieces). */
wsync_status_t recv_verify_begin(recv_verify_t *v, const recv_pull_t *p, size_t nunits, size_t maxunits,
                                 const uint64_t *digests, int late);
/* Unit `id` landed (the land phase's unit_landed): its put's sum, if any. */
void recv_verify_unit_landed(recv_verify_t *v, uint32_t id, const wsync_completion_t *cp);
/* The units first..first+n-1 are asked for again: their put sums count no more. */
void recv_verify_reasked(recv_verify_t *v, size_t first, size_t n);
/* The digest ranges of chunk c's units in `image` (into v->rg); their count. */
size_t recv_verify_ranges(const recv_pull_t *p, recv_verify_t *v, uint32_t c, const char *image);
/* Chunk c's units' sums that their puts brought along, or NULL where one
 * brought none (v's, valid until the units are asked for again). */
const uint64_t *recv_verify_put_sums(const recv_pull_t *p, const recv_verify_t *v, uint32_t c);
/* Chunk c's last unit landed in `image`: summed (its puts' sums where every
 * one brought one, else one digest pass), then recv_verify_summed. */
wsync_status_t recv_verify_landed(recv_pull_t *p, recv_verify_t *v, uint32_t c, const char *image);
/* Chunk c's units summed to `sums` (landed here, or copied in): compared with
 * the digests now (a match: the ops' chunk_verified), or, while they are late,
 * kept until they are in. */
wsync_status_t recv_verify_summed(recv_pull_t *p, recv_verify_t *v, uint32_t c, int landed, const uint64_t *sums);
/* Late digests: once they are in, every chunk waiting for them compared. */
wsync_status_t recv_verify_late_poll(recv_pull_t *p, recv_verify_t *v, int *progressed);
/* 1: every chunk wanted here has its sums (compared, or waiting for late digests). */
int recv_verify_all_summed(const recv_pull_t *p, const recv_verify_t *v);
/* Late digests that never came: whose, and how many chunks waited ("; ..."), or nothing. */
void recv_verify_waiting(const recv_pull_t *p, const recv_verify_t *v, char *out, size_t len);
void recv_verify_end(recv_verify_t *v);

#endif
