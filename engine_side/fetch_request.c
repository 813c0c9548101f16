/* fetch_request.c: the one fetch engine's requests to trainer ranks
 * (fetch_internal.h): the pull request message (the chunks asked, the
 * node's targets and their definitions once per trainer rank, what to
 * verify by), the expects of the puts landing here, and the delta base. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/proto/pull_request.h"
#include "engine_side/delta_land.h"
#include "engine_side/fetch_internal.h"

wsync_status_t fetch_add_targets(fetch_t *f, int t, wsync_pull_request_t *pr)
{
    const int L = f->p.r->cfg.local_world;
    int k;
    pr->ntargets = L;
    pr->targets = calloc((size_t)L, sizeof(*pr->targets));
    WSYNC_CHECK_ALLOC(pr->targets);
    if (t >= 0 && !f->tl->defs_sent[t]) {
        pr->target_defs = json_object();
        WSYNC_CHECK_ALLOC(pr->target_defs);
    }
    for (k = 0; k < L; k++) {
        const wsync_target_t *tg = f->tl->tg[k];
        memcpy(pr->targets[k], tg->digest_hex, 33);
        if (pr->target_defs && json_object_get(pr->target_defs, tg->digest_hex) == NULL) {
            json_t *j = NULL;
            WSYNC_CHECK(wsync_target_to_json(tg, f->p.sl->manifest, &j));
            json_object_set_new(pr->target_defs, tg->digest_hex, j);
        }
    }
    return WSYNC_OK;
}

wsync_status_t fetch_request_msg(fetch_t *f, int t, recv_transport_t *rt, unsigned char *chunks, json_t **out)
{
    wsync_pull_request_t pr;
    wsync_status_t st;
    recv_pull_request_init(&pr, f->p.r, f->p.v, f->p.reqid, rt, f->p.slot, f->p.sl->layout_digest, f->p.deadline);
    pr.chunks = chunks;
    pr.chunk_bytes = (f->np->nchunks + 7) / 8;
    st = f->tl ? fetch_add_targets(f, t, &pr) : WSYNC_OK;
    pr.in_order = f->rl.on && f->ndirect == 0; /* else only edges and fan-out bytes pass through the image */
    if (f->tl) {
        pr.no_segment_digests = f->identity; /* verified against the record's piece digests */
        pr.hint_world = f->tl->hint_world;
        pr.colo = f->tl->colo;
        pr.ncolo = f->tl->ncolo;
    }
    pr.put_digests = f->tp.on;
    *out = st == WSYNC_OK ? wsync_pull_request_to_json(&pr) : NULL;
    pr.chunks = NULL; /* ours, not the request's */
    pr.colo = pr.ncolo = NULL;
    pr.hint_world = 0;
    wsync_pull_request_clear(&pr);
    if (st == WSYNC_OK && *out == NULL)
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    return st;
}

wsync_status_t fetch_request_rank(fetch_t *f, int t, int digests_only)
{
    wsync_receiver_t *r = f->p.r;
    const wsync_node_plan_t *np = f->np;
    recv_transport_t *rt;
    wsync_status_t st;
    size_t k, n = 0;
    json_t *msg = NULL;
    /* The whole image and a node of identity targets ask for puts alone: the
     * record holds the digests they verify against. */
    const int puts_only = f->tl == NULL || f->identity;
    for (k = 0; puts_only && k < np->rank_nputs[t] && n == 0; k++)
        n += recv_pull_is_mine(&f->p, np->puts[np->rank_puts[t][k]].chunk);
    if (puts_only && n == 0)
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, f->p.tnames[t], &rt));
    for (k = 0; k < np->rank_nputs[t] && !digests_only; k++) {
        const wsync_tput_t *pu = &np->puts[np->rank_puts[t][k]];
        if (recv_pull_is_mine(&f->p, pu->chunk))
            WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->p.slot], pu->dst_off, pu->len,
                                        ((uint64_t)f->p.reqid << 32) | pu->id));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    if (f->p.addrs[t][0] == '\0')
        return wsync_error(WSYNC_ERR_NOT_FOUND, "trainer rank %d is not registered at the control endpoint", t);
    st = fetch_request_msg(f, t, rt, digests_only ? f->none : f->p.mine, &msg);
    if (st == WSYNC_OK && !digests_only) /* the base and where its wires go (delta_land.h) */
        st = recv_delta_ask(f, t, rt, msg);
    if (st != WSYNC_OK)
        json_decref(msg);
    WSYNC_CHECK(st);
    return recv_request_start(&f->p.reqs[t], &f->p.r->transports.pull_conns, &f->p.r->auth, t, f->p.addrs[t], msg,
                              f->p.deadline);
}
