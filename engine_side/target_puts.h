/* target_puts.h: a node of targets (not the identity: fetch_identity.c)
 * verified put by put, with the sums its landing brought along, instead of
 * a second read of every byte after the last one landed.
 *
 * Why per-put digests and not segment digests keyed so that put sums add
 * into them. The local transport's copy inside one GPU digests what it
 * writes keyed at the put's landing offset (transport.h), and a put is the
 * unit both sides already name (its id is in every tag). With the trainer's
 * digests of its puts (pull_request.h put_digests, computed once per node
 * plan and version for all of the node's ranks), a put's fused sum is
 * compared as it is; segment digests would need a key per (segment, word)
 * sent with every put to the transport, and a segment spans puts of several
 * trainer requests. The bytes a rank gets by copies out of another rank's
 * window are digested where they land here, each part keyed at its word of
 * the put it came from (common/mem/digest_key.h), so the parts of a put add
 * up to the put's sum: every rank verifies its own bytes, and a corrupted
 * byte is caught and named on every rank that holds it. What has no sum when
 * the answers are in (the copied parts, chunks landed without sums: tcp)
 * is digested then in one call, not chunk by chunk inside the landing loop;
 * but chunks landed without sums in host memory are digested as they land,
 * while the next ones arrive (the CPU is not shared like one GPU is).
 *
 * A rank verifies this way where its plan allows it (recv_tputs_begin):
 * its copies of each chunk cover the chunk's puts exactly once, cut on whole
 * words of each put; no bytes land twice in it; not a sparse GPU image, not
 * under a relay; in place into the caller's tensors only where bytes land
 * in them directly (a transport's redirect, fetch.c): their puts' sums are
 * then of the caller's bytes, what has no sum is digested where the
 * caller's tensors hold it, and the few bytes written through from the
 * image (edges, bytes other ranks read) are compared with the image's
 * (dests.h recv_dests_verify_writes). In place without direct bytes the
 * segments are digested once, out of the caller's tensors, instead. Else, and when a trainer rank answers
 * without put digests (an older one), segment by segment at the end
 * (recv_tlayout_verify). */
#ifndef WSYNC_ENGINE_TARGET_PUTS_H
#define WSYNC_ENGINE_TARGET_PUTS_H

#include "common/proto/pull_reply.h"
#include "common/targets/target_plan.h"
#include "engine_side/chunk_verify.h"
#include "engine_side/receiver_internal.h"

typedef struct recv_tputs {
    int on; /* this rank verifies put by put */
    const wsync_node_plan_t *np;
    int me;
    unsigned char *state;        /* [chunks]: TPUTS_* */
    uint64_t *sum;               /* [puts]: this rank's word sum of each put's bytes it holds */
    uint64_t *digest;            /* [puts]: the trainers' */
    unsigned char *have;         /* [puts]: the digest is in */
    const wsync_tcopy_t **order; /* scratch [copies]: one chunk's copies here, by source offset */
} recv_tputs_t;

/* What a chunk's sums are here (recv_tputs_t.state). */
enum { TPUTS_NONE, TPUTS_SUMMED, TPUTS_LANDED_RAW, TPUTS_COPIED };

/* Whether rank `me` of node plan np can verify by put (above); allocates
 * then. `allowed` 0 (in place into the caller's tensors, a sparse image, a
 * relay): off. */
wsync_status_t recv_tputs_begin(recv_tputs_t *t, const wsync_node_plan_t *np, int me, int allowed);
/* Chunk c landed here (and was written through to the caller's tensors,
 * in place): its puts' sums kept where every one brought one
 * (chunk_verify.h); else, in host memory (`image` not NULL), its puts
 * digested now, their ranges in ver's scratch (recv_verify_ranges), read
 * where the caller's tensors hold them in place (dm), while the next chunks
 * land (as the identity path's chunks are: tcp brings no sums); else it is
 * digested with the check. No GPU call: a blocking one inside the landing
 * loop waits for the GPU's other processes (one H200 shared by trainers and
 * engines time-slices them). Failure: the digest's. */
wsync_status_t recv_tputs_landed(recv_tputs_t *t, const recv_pull_t *p, recv_verify_t *ver, uint32_t c,
                                 const wsync_mem_ops_t *mem, const recv_dests_t *dm, const char *image);
/* Chunk c's copies into this rank are done: digested with the check. */
void recv_tputs_copied(recv_tputs_t *t, uint32_t c);
/* Trainer rank `src`'s answer: its puts' digests kept (an answer without
 * them turns verification by put off: the caller falls back to segments). */
wsync_status_t recv_tputs_answer(recv_tputs_t *t, int src, const wsync_pull_reply_t *rep);
/* Every put this rank holds bytes of against its digest, after one digest
 * call over what has no sum yet in `image` (chunks landed without their puts'
 * sums, and the parts copied in, each keyed at its word of its put so the
 * parts add up to the put's sum; in place, dm, read where the caller's
 * tensors hold them); a mismatch names the tensor of this rank's
 * target (tl) holding the put's first byte here, the bytes of it, the
 * trainer rank and this rank. */
wsync_status_t recv_tputs_check(recv_tputs_t *t, const recv_pull_t *p, const recv_tlayout_t *tl,
                                const wsync_mem_ops_t *mem, const recv_dests_t *dm, const char *image);
void recv_tputs_end(recv_tputs_t *t);

#endif
