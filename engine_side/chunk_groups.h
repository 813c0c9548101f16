/* chunk_groups.h: in place with the caller's destination tensors (dests.h),
 * each chunk complete here (landed, or to copy in from its landing rank's
 * window) goes out as a group of jobs (the whole image and a node of
 * identity targets, fetch.c): copies into
 * the caller's tensors and the digests of the caller's bytes where they hold
 * them, the image's elsewhere (dests_jobs.c); at most one group per chunk,
 * RECV_FAN_INFLIGHT of them copying in from peers at once. A finished
 * group's sums are compared (chunk_verify.h); the chunk counts once they
 * match. */
#ifndef WSYNC_ENGINE_CHUNK_GROUPS_H
#define WSYNC_ENGINE_CHUNK_GROUPS_H

#include "engine_side/chunk_fanout.h"
#include "engine_side/chunk_verify.h"
#include "engine_side/dests.h"

typedef struct recv_groups {
    const recv_dests_t *dm;   /* NULL: no groups (not in place with dests) */
    recv_dgroup_t *g;         /* [chunks] */
    uint32_t *inflight;       /* chunks whose group runs */
    uint32_t ninflight, nfan; /* ... and of them, those copying in from a peer */
} recv_groups_t;

/* Room for p's chunks when dm is given (else nothing: every call below is
 * for a fetch whose gs->dm is set). */
wsync_status_t recv_groups_begin(recv_groups_t *gs, const recv_dests_t *dm, uint32_t nchunks);
/* Groups copying in from peers that may still start. */
static inline int recv_groups_room(const recv_groups_t *gs)
{
    return RECV_FAN_INFLIGHT - (int)gs->nfan;
}
/* Chunk c, image bytes [off, off+len), its units' ranges from v
 * (recv_verify_ranges), read from `src` (the image: it `landed` here; else
 * the landing rank's window); `direct`: the destinations' bytes but the ends
 * landed in them already (recv_dgroup_start). */
wsync_status_t recv_groups_start(recv_groups_t *gs, recv_pull_t *p, recv_verify_t *v, char *image, const char *src,
                                 uint64_t off, uint64_t len, uint32_t c, int landed, int direct);
/* The groups that finished: their sums compared (recv_verify_summed). */
wsync_status_t recv_groups_reap(recv_groups_t *gs, recv_pull_t *p, recv_verify_t *v, int *progressed);
/* Every group ended (waits: no copy outlives the attempt), memory freed. */
void recv_groups_end(recv_groups_t *gs, const wsync_mem_ops_t *mem);

#endif
