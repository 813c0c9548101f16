/* delta.c: what a delta pull adds to a plan (docs/DELTA.md): each trainer
 * rank encodes its share against the base (once per version and base, every
 * engine asking from that base gets the same wire), the crossing and relay
 * hops carry delta_wire of the bytes, and each landing rank copies the base
 * into the slot it pulls into (staged) and applies what it landed, chunk by
 * chunk. Verification and the window fan-out are those of a full pull: the
 * result is v's bytes, checked against v's digests. */
#include <math.h>

#include "common/base/checks.h"
#include "common/cost/cost_internal.h"

double cost_wire_fraction(const cost_plan_t *p, const cost_deploy_t *d)
{
    return p->delta && d->delta_wire > 0 ? d->delta_wire : 1.0;
}

static double units(double bytes, uint64_t chunk)
{
    return chunk > 0 ? ceil(bytes / (double)chunk) : 1;
}

wsync_status_t cost_add_delta_encode(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t ec = d->mem == COST_MEM_GPU ? COST_DELTA_ENCODE_GPU : COST_DELTA_ENCODE_HOST;
    int one_gpu = d->net == COST_NET_LOCAL;
    double owned = (double)d->image_bytes / d->trainers, b = one_gpu ? (double)d->image_bytes : owned;
    cost_stage_t *s;
    if (!p->delta)
        return WSYNC_OK;
    s = cost_plan_stage(p, "encode", 1, units(owned, d->chunk_bytes));
    WSYNC_CHECK(cost_stage_add(s, links, ec,
                               one_gpu ? "trainer ranks' delta encodes, one GPU" : "trainer rank's delta encode",
                               b, 0, links->link[ec].bw));
    cost_plan_bytes(p, ec, owned * d->trainers);
    return WSYNC_OK;
}

wsync_status_t cost_add_delta_apply(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t ac = d->mem == COST_MEM_GPU ? COST_DELTA_APPLY_GPU : COST_DELTA_APPLY_HOST;
    cost_class_t cc = d->mem == COST_MEM_GPU ? COST_LOCAL : COST_HOST_MEMCPY;
    /* On one GPU every rank's work shares it. */
    double ranks = d->net == COST_NET_LOCAL ? d->local_ranks : 1, land = (double)d->rank_land_bytes;
    double all = land * d->local_ranks * d->engines;
    cost_stage_t *s;
    if (!p->delta)
        return WSYNC_OK;
    if (d->delta_base_copy) {
        s = cost_plan_stage(p, "base", 1, units(land, d->chunk_bytes));
        WSYNC_CHECK(cost_stage_add(s, links, cc, "rank's copy of the base into the pulled slot", land * ranks, 0,
                                   links->link[cc].bw));
        cost_plan_bytes(p, cc, all);
    }
    s = cost_plan_stage(p, "apply", 1, units(land, d->chunk_bytes));
    WSYNC_CHECK(cost_stage_add(s, links, ac, "rank's apply of what it landed", land * ranks, 0, links->link[ac].bw));
    cost_plan_bytes(p, ac, all);
    return WSYNC_OK;
}
