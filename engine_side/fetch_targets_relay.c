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

#include "common/checks.h"
#include "common/log.h"
#include "common/pull_request.h"
#include "common/settings.h"
#include "common/util.h"
#include "engine_side/fetch_targets_internal.h"

/* The request the relay gets: the one a trainer rank would, without the
 * targets' definitions (a relay plans nothing: it compares digests). */
static wsync_status_t relay_json(tfetch_t *f, const recv_transport_t *rt, json_t **out)
{
    const wsync_receiver_t *r = f->r;
    wsync_pull_request_t pr = {.version = f->v,
                               .local_rank = f->me,
                               .local_ranks = r->cfg.local_world,
                               .req = f->reqid,
                               .addr = rt->addr,
                               .key = rt->key[f->slot],
                               .timeout_ms = (int64_t)((f->deadline - wsync_now_ns()) / 1000000ULL),
                               .chunks = f->mine,
                               .chunk_bytes = (f->np->nchunks + 7) / 8};
    wsync_status_t st;
    snprintf(pr.engine, sizeof(pr.engine), "%s", r->engine_id);
    snprintf(pr.transport, sizeof(pr.transport), "%s", rt->ops->name);
    snprintf(pr.layout_digest, sizeof(pr.layout_digest), "%s", f->sl->layout_digest);
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
        !recv_relay_parent(r, f->v, f->world, f->np->network_bytes, f->np->chunk_bytes, f->relay_id,
                           sizeof(f->relay_id), f->relay_addr, sizeof(f->relay_addr)))
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, "tcp", &rt));
    WSYNC_CHECK(relay_json(f, rt, &msg));
    memset(&f->relay_req, 0, sizeof(f->relay_req));
    snprintf(f->relay_req.who, sizeof(f->relay_req.who), "relay of engine %s", f->relay_id);
    f->relay_req.connect_ms = (int)wsync_setting_int(WSYNC_SET_RELAY_STALL_MS);
    WSYNC_CHECK(recv_request_start(&f->relay_req, &r->pull_conns, &r->auth, -1, f->relay_addr, msg, f->deadline));
    f->relay_on = 1;
    *asked = 1;
    wsync_trace("engine %s rank %d: version %llu from the relay of engine %s at %s (digests from the trainer "
                "ranks)",
                r->engine_id, f->me, (unsigned long long)f->v, f->relay_id, f->relay_addr);
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
             f->r->engine_id, f->me, f->relay_id, f->relay_addr, why, (unsigned long long)f->v);
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
    const int stall_ms = (int)wsync_setting_int(WSYNC_SET_RELAY_STALL_MS);
    char why[500];
    if (!f->relay_on)
        return WSYNC_OK;
    if (recv_request_failed(&f->relay_req)) {
        snprintf(why, sizeof(why), "%s", f->relay_req.error);
        return fall_back(f, why);
    }
    if (wsync_now_ns() - f->last_landed > (uint64_t)stall_ms * 1000000ULL && missing_puts(f)) {
        snprintf(why, sizeof(why), "no put landed for %d ms (relay_stall_ms)", stall_ms);
        return fall_back(f, why);
    }
    return WSYNC_OK;
}

void tf_relay_end(tfetch_t *f)
{
    if (!f->relay_on)
        return;
    recv_request_abort(&f->relay_req); /* its answer is no longer needed */
    recv_request_end(&f->relay_req);
    f->relay_on = 0;
}
