/* pull_land.c: an attempt's land phase on any engine rank (pull.h): the
 * transports' completions, those of this attempt's puts checked against
 * the plan (a put of an abandoned attempt is not one of them: its tag
 * carries another request id), counted per chunk; a chunk whose last unit
 * landed goes to the fetch. */
#include "common/base/checks.h"
#include "common/base/util.h"
#include "common/proto/pull_request.h"
#include "engine_side/pull.h"

#define POLL_BATCH 64 /* completions taken per transport poll */

static wsync_status_t land_one(recv_pull_t *p, const wsync_completion_t *cp, int *progressed)
{
    uint32_t id = (uint32_t)cp->tag, c;
    uint64_t len;
    /* Errors of no put of this attempt (a port scan, a sender of an
     * abandoned attempt) are not ours to fail on; a real sender's failure
     * also reaches us through its answer to the request. */
    if (cp->kind == WSYNC_COMPLETION_ERROR && cp->tag != ~0ULL && (uint32_t)(cp->tag >> 32) == p->reqid)
        return wsync_error(cp->status ? cp->status : WSYNC_ERR_PEER, "%s", cp->message);
    if (cp->kind != WSYNC_COMPLETION_LANDED || (uint32_t)(cp->tag >> 32) != p->reqid)
        return WSYNC_OK; /* not of this attempt */
    /* A delta wire (delta_land.h): applied once its place is known. */
    if ((id & WSYNC_PULL_DELTA_TAG) && p->ops->delta_landed) {
        *progressed = 1;
        p->last_landed = wsync_now_ns();
        return p->ops->delta_landed(p, id & ~WSYNC_PULL_DELTA_TAG, cp);
    }
    if (!p->ops->unit_at(p, id, &c, &len) || !recv_pull_is_mine(p, c) || p->remaining[c] == 0 || cp->len != len)
        return wsync_error(WSYNC_ERR_PEER, "unexpected %s %u (%llu bytes) from trainer rank %d", p->ops->unit1, id,
                           (unsigned long long)cp->len, cp->peer);
    *progressed = 1;
    p->last_landed = wsync_now_ns();
    if (p->ops->unit_landed)
        p->ops->unit_landed(p, id, cp);
    if (--p->remaining[c] > 0)
        return WSYNC_OK;
    return p->ops->chunk_landed(p, c);
}

wsync_status_t recv_pull_land(recv_pull_t *p, int busy, int *progressed, int *got)
{
    wsync_receiver_t *r = p->r;
    wsync_completion_t comps[POLL_BATCH];
    /* Only a lone transport may block waiting, or it would starve the other. */
    const int wait_ms = busy || r->transports.ntr > 1 ? 0 : 5;
    int k, i, n = 0;
    for (k = 0; k < r->transports.ntr && p->ndone < p->nwant; k++) {
        WSYNC_CHECK(r->transports.tr[k].ops->poll(r->transports.tr[k].t, comps, POLL_BATCH, &n, wait_ms));
        *got += n;
        for (i = 0; i < n; i++)
            WSYNC_CHECK(land_one(p, &comps[i], progressed));
    }
    return WSYNC_OK;
}
