/* fetch_targets_relay.c: the puts of a rank whose node holds targets, from
 * its parent node under relay:F (relay_tree.h says who that is). The parent
 * must hold the same targets on the same local ranks: the same node plan,
 * so each put lands at the offset it has there. The relay sends every put
 * landing here; the trainer ranks are asked, with an empty chunk map, for
 * the digests of this rank's segments alone, so every byte is still checked
 * against the trainers' digests. A relay that fails (it refuses a node of
 * other targets, dies, or does not hold the version), or lands nothing here
 * for relay_stall_ms, is given up and named; the chunks still missing are
 * asked of the trainer ranks under a new request id, after this rank's
 * transports were reset (none of the relay's puts can land after that). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/proto/pull_request.h"
#include "common/base/util.h"
#include "engine_side/fetch_targets_internal.h"

/* The request the relay gets: the one a trainer rank would, without the
 * targets' definitions (a relay plans nothing: it compares digests). */
static wsync_status_t relay_json(tfetch_t *f, const recv_transport_t *rt, json_t **out)
{
    wsync_pull_request_t pr;
    wsync_status_t st;
    recv_pull_request_init(&pr, f->r, f->v, f->reqid, rt, f->slot, f->sl->layout_digest, f->deadline);
    pr.chunks = f->mine;
    pr.chunk_bytes = (f->np->nchunks + 7) / 8;
    st = tf_add_targets(f, -1, &pr);
    *out = st == WSYNC_OK ? wsync_pull_request_to_json(&pr) : NULL;
    pr.chunks = NULL; /* ours, not the request's */
    wsync_pull_request_clear(&pr);
    WSYNC_CHECK(st);
    return *out ? WSYNC_OK : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
}

wsync_status_t tf_relay_request(tfetch_t *f, int *asked)
{
    wsync_receiver_t *r = f->r;
    recv_transport_t *rt;
    json_t *msg;
    *asked = 0;
    /* A node planned with a colocated landing hint has trainer ranks on its
     * GPUs: it pulls from them. */
    if (f->tl->hint_world != 0 ||
        !recv_relay_parent(r, f->v, f->world, f->np->network_bytes, f->np->chunk_bytes, f->relay.id,
                           sizeof(f->relay.id), f->relay.addr, sizeof(f->relay.addr)))
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, "tcp", &rt));
    WSYNC_CHECK(relay_json(f, rt, &msg));
    WSYNC_CHECK(recv_relay_pull_send(&f->relay, r, msg, f->deadline));
    *asked = 1;
    wsync_trace("engine %s rank %d: version %llu from the relay of engine %s at %s (digests from the trainer "
                "ranks)",
                r->engine_id, f->me, (unsigned long long)f->v, f->relay.id, f->relay.addr);
    return WSYNC_OK;
}

/* 1 while some chunk asked for here still misses puts. */
static int missing_puts(const tfetch_t *f)
{
    uint32_t c;
    for (c = 0; c < f->np->nchunks; c++)
        if (tf_is_mine(f, c) && f->remaining[c] > 0)
            return 1;
    return 0;
}

/* Gives the relay up; what is missing comes from the trainer ranks. */
static wsync_status_t fall_back(tfetch_t *f, const char *why)
{
    const wsync_node_plan_t *np = f->np;
    uint32_t c;
    int t;
    LOG_WARN("engine %s rank %d: relay of engine %s at %s given up (%s); the missing puts of version %llu come "
             "from the trainer ranks",
             f->r->engine_id, f->me, f->relay.id, f->relay.addr, why, (unsigned long long)f->v);
    tf_relay_end(f);
    for (t = 0; t < f->world; t++) { /* their digests come again with the new requests */
        recv_request_abort(&f->reqs[t]);
        recv_request_end(&f->reqs[t]);
        memset(&f->reqs[t], 0, sizeof(f->reqs[t]));
    }
    recv_transport_reset(f->r); /* the relay's connections go: none of its puts lands from here */
    f->reqid = recv_new_reqid(f->reqid);
    for (c = 0; c < np->nchunks; c++) {
        if (!tf_is_mine(f, c))
            continue;
        if (f->remaining[c] == 0) /* complete: copied and marked landed */
            f->mine[c / 8] &= (unsigned char)~(1u << (c % 8));
        else
            f->remaining[c] = (uint32_t)np->chunks[c].nputs; /* landed puts count no more */
    }
    f->last_landed = wsync_now_ns();
    for (t = 0; t < f->world; t++)
        WSYNC_CHECK(tf_request_rank(f, t, 0));
    return WSYNC_OK;
}

wsync_status_t tf_relay_watch(tfetch_t *f)
{
    char why[500];
    return recv_relay_pull_gone(&f->relay, f->last_landed, missing_puts(f), why, sizeof(why)) ? fall_back(f, why)
                                                                                              : WSYNC_OK;
}

void tf_relay_end(tfetch_t *f)
{
    recv_relay_pull_end(&f->relay);
}
