/* pull.h: what one pull attempt of an engine rank shares with the phases
 * written around it (the fetch is fetch.c, for a node of targets
 * and for the whole image, its identity target: fetch_whole.c): the
 * attempt's identity, the chunks asked for here and what is missing of them,
 * the requests to the trainer ranks, the parent's relay, and the phases
 * that are written once for both:
 *   join      wait for local rank 0's landing map (and check it, where the
 *             fetch says how), map the peers' windows (pull_join.c);
 *   land      the transports' completions of this attempt, checked and
 *             counted per chunk; a complete chunk goes to the fetch
 *             (pull_land.c);
 *   watch     trainer answers, the relay (given up and fallen back from),
 *             local peers, replaced trainer ranks, the deadline; every
 *             failure names what happened and what was missing: trainer
 *             ranks whose pieces had not come, local ranks whose chunks
 *             had not landed, trainer ranks that had not answered, the
 *             relay the pieces came from (pull_watch.c);
 *   fall back a relay that failed or stalled is given up and what is
 *             missing is asked of the trainer ranks (fetch_relay.c).
 * Per chunk, what the fetch calls where it verifies against the record
 * (the whole image; a node of identity targets, fetch_identity.c):
 *   verify    a chunk's units against the record's digests: the puts'
 *             fused sums, one digest pass, late digests (chunk_verify.h;
 *             the ops unit_off and chunk_verified);
 *   fan out   copies out of the landing rank's window as a ring of copy
 *             (and digest) jobs (chunk_fanout.h: targets' copies too);
 *   groups    in place with the caller's tensors, a chunk written through
 *             and digested as a group of jobs (chunk_groups.h).
 * The fetch embeds recv_pull_t first and fills its ops (one table; the
 * whole image's names its units pieces). */
#ifndef WSYNC_ENGINE_PULL_H
#define WSYNC_ENGINE_PULL_H

#include "engine_side/receiver_internal.h"

typedef struct recv_pull recv_pull_t;

typedef struct recv_pull_ops {
    const char *unit, *unit1; /* what a put carries, for messages: "pieces" ("piece"), "puts" ("put") */
    /* Unit `id` (a put's tag's low half): 1 with its chunk and length, or
     * 0: no such unit. */
    int (*unit_at)(const recv_pull_t *p, uint32_t id, uint32_t *chunk, uint64_t *len);
    /* The image offset unit u lands at on its landing rank (where its
     * digest is keyed: a piece's, an identity put's), for chunk_verify.h;
     * NULL where the fetch verifies otherwise. */
    uint64_t (*unit_off)(const recv_pull_t *p, size_t u);
    /* NULL, or: chunk c's units matched their digests (chunk_verify.h): it
     * is done here (`landed` here, else copied in from its landing rank). */
    wsync_status_t (*chunk_verified)(recv_pull_t *p, uint32_t c, int landed);
    /* NULL, or: unit `id` of a chunk asked for here landed (cp says how). */
    void (*unit_landed)(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp);
    /* The last unit of chunk c landed here. */
    wsync_status_t (*chunk_landed)(recv_pull_t *p, uint32_t c);
    /* The units (pieces, puts) of chunk c that land here with it: their
     * count, from *first on, and the trainer rank unit u comes from. */
    size_t (*chunk_units)(const recv_pull_t *p, uint32_t c, size_t *first);
    int (*unit_src)(const recv_pull_t *p, size_t u);
    /* The local rank chunk c lands on (the landing map's, or the plan's). */
    int (*land_rank)(const recv_pull_t *p, uint32_t c);
    /* NULL, or the landing map checked against what this rank derived
     * (called by recv_pull_join before the windows are mapped). */
    wsync_status_t (*check_landing)(recv_pull_t *p);
    /* The bytes of this rank's image in so far, for the progress line. */
    uint64_t (*bytes_in)(const recv_pull_t *p);
    /* NULL, or more of what the attempt waits for (appended to failures). */
    void (*waiting_more)(const recv_pull_t *p, char *out, size_t len);
    /* NULL, or: chunk c is asked for again from the trainer ranks (its
     * landed units count no more). */
    void (*chunk_reasked)(recv_pull_t *p, uint32_t c);
    /* NULL, or: the delta wire of unit `id` landed in the staging region
     * (a put tagged WSYNC_PULL_DELTA_TAG, delta_land.h). */
    wsync_status_t (*delta_landed)(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp);
    /* NULL, or: the parent's relay is given up, before the transports are
     * reset (delta_land.h: its wires' staging region). */
    wsync_status_t (*relay_gone)(recv_pull_t *p);
    /* NULL, or: chunk c landed here and its units summed to `sums`; before
     * the digests are compared, units applied as delta wires are checked
     * (delta_land.h). *again 1: some failed and are asked again in full
     * (the chunk is not done). */
    wsync_status_t (*landed_check)(recv_pull_t *p, uint32_t c, const uint64_t *sums, int *again);
    /* Ask trainer rank t for its units of the chunks in mine. */
    wsync_status_t (*request_rank)(recv_pull_t *p, int t);
    /* 1: after a relay was given up, every trainer rank is asked again
     * (its answer carries what the fetch needs besides the puts). */
    int reask_all;
} recv_pull_ops_t;

struct recv_pull {
    const recv_pull_ops_t *ops;
    /* the attempt */
    wsync_receiver_t *r;
    const wsync_sync_layout_t *sl;
    const recv_tlayout_t *tl; /* the node's targets, or NULL: the whole image */
    uint64_t gen, v, deadline;
    int slot, me, world;
    uint32_t nchunks;    /* of the plan whose chunks land (the node plan's with targets) */
    uint32_t reqid;      /* tags this attempt's puts */
    const uint8_t *land; /* the board's landing map */

    /* chunks */
    uint32_t *remaining; /* units still to land, per chunk asked for here */
    unsigned char *mine; /* bitmap of the chunks asked for here */
    uint32_t *pending;   /* chunks landing elsewhere that this rank copies from */
    uint32_t npending, nland, nlanded, ndone, nwant;

    /* trainer ranks */
    recv_request_t *reqs;
    char (*addrs)[160];
    const char **tnames;
    uint64_t last_check;     /* when the watch last looked at peers and the deadline */
    uint64_t last_landed;    /* when the last unit of this attempt landed */
    uint64_t last_reg_check; /* when the trainer registrations were last compared (recv_trainer_replaced) */

    /* the parent node under relay:F (fetch_relay.c): while relay.on, every
     * unit landing here comes from its relay */
    recv_relay_pull_t relay;
};

/* Chunk c is asked for here (lands here and, after a relay was given up,
 * is still missing). */
static inline int recv_pull_is_mine(const recv_pull_t *p, uint32_t c)
{
    return (p->mine[c / 8] >> (c % 8)) & 1;
}

/* pull_join.c: the node's side of the attempt: its landing map (p->land),
 * checked, and the peers' windows. */
wsync_status_t recv_pull_join(recv_pull_t *p);
/* The arrays of prepare for p->nchunks chunks and p->world trainer ranks. */
wsync_status_t recv_pull_alloc(recv_pull_t *p);
/* The end of the attempt's shared part: the relay's request ended, and
 * when st failed this rank's transports reset (no stale put of the attempt
 * can land after it); the requests ended (aborted first when st failed: a
 * silent peer's request ends now, not at its deadline); the arrays freed. */
void recv_pull_free(recv_pull_t *p, wsync_status_t st);

/* pull_land.c: take the transports' completions (waiting up to 5 ms on a
 * lone transport unless `busy`: the fetch has other work) while chunks are
 * wanted; *progressed set when a unit of this attempt landed, *got counts
 * the completions. */
wsync_status_t recv_pull_land(recv_pull_t *p, int busy, int *progressed, int *got);

/* pull_watch.c: one look at the trainer answers and the relay (every
 * call), the peers, replaced trainer ranks and the deadline (every 50 ms). */
wsync_status_t recv_pull_watch(recv_pull_t *p);
/* The attempt ends with `st`: `what` happened, and what was missing. */
wsync_status_t recv_pull_fail(const recv_pull_t *p, wsync_status_t st, const char *what);
/* What the attempt still waits for ("; ..." clauses, or ""). */
void recv_pull_waiting_for(const recv_pull_t *p, char *out, size_t len);

/* fetch_relay.c: each watch, a relay that failed or landed nothing for
 * relay_stall_ms while units are missing is given up (named in the log)
 * and what is missing is asked of the trainer ranks under a new request
 * id, after this rank's transports were reset. */
wsync_status_t recv_pull_relay_watch(recv_pull_t *p);

#endif
