/* scenarios.c: each reference scenario as a model expression (stages of
 * loads, docs/COST_MODEL.md "How each published row maps"). Staged
 * transfers use nic_staged across hosts and gpu_peer inside one; puts use
 * nic_put across and window copies inside; the all-gather is costed at the
 * window rate (no collective figure is calibrated). Stages are serial: the
 * executor measured runs cross-host, then intra-node. */
#include <stdio.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/cost/cost_internal.h"
#include "common/cost/scenarios.h"

static const char *const names[COST_SC_COUNT] = {
    [COST_SC_DIRECT_ONE] = "direct-one-gpu",           [COST_SC_RELAY_ONE] = "relay-one-gpu",
    [COST_SC_SHARDED_DIRECT] = "sharded-direct",       [COST_SC_SHARDED_WINDOWS] = "sharded-windows",
    [COST_SC_SHARDED_ALLGATHER] = "sharded-allgather", [COST_SC_INCAST] = "incast",
};

const char *cost_scenario_name(cost_scenario_t sc)
{
    return (unsigned)sc < COST_SC_COUNT ? names[sc] : NULL;
}

/* Across hosts: `senders` GPUs of one host each send `each` bytes in `msgs`
 * messages to `peers` GPUs of the other; every receiver gets `in` bytes
 * from `from` senders. */
static wsync_status_t cross(cost_plan_t *p, const cost_links_t *links, cost_class_t nc, int senders, double each,
                            double msgs, int peers, double in, int from, int receivers)
{
    const cost_link_t *l = &links->link[nc];
    cost_stage_t *s = cost_plan_stage(p, "cross", 0, 1);
    WSYNC_CHECK(cost_stage_add(s, links, nc, "sender GPU's adapter", each, msgs,
                               cost_nic_share(links, cost_send_rate(l, peers, senders), senders)));
    WSYNC_CHECK(cost_stage_add(s, links, nc, "receiver GPU's adapter", in, 0, cost_recv_rate(l, from)));
    if (l->host_bw > 0) {
        WSYNC_CHECK(cost_stage_add(s, links, nc, "sending host's adapters", each * senders, 0, l->host_bw));
        WSYNC_CHECK(cost_stage_add(s, links, nc, "receiving host's adapters", in * receivers, 0, l->host_bw));
    }
    cost_plan_bytes(p, nc, each * senders);
    return WSYNC_OK;
}

/* Inside the engine host: `senders` GPUs each send `each` bytes to `peers`
 * others (staged: gpu_peer with its fan caps; puts: window copies, the
 * window rate being one GPU's aggregate either way); every receiver gets
 * `in` bytes from `from` GPUs. */
static wsync_status_t inside(cost_plan_t *p, const cost_links_t *links, cost_class_t ic, const char *name,
                             int senders, double each, double msgs, int peers, double in, int from)
{
    const cost_link_t *l = &links->link[ic];
    cost_stage_t *s = cost_plan_stage(p, name, 0, 1);
    WSYNC_CHECK(cost_stage_add(s, links, ic, "sender GPU, inside the host", each, msgs,
                               ic == COST_WINDOW ? l->bw : cost_send_rate(l, peers, senders)));
    WSYNC_CHECK(cost_stage_add(s, links, ic, "receiver GPU, inside the host", in, 0,
                               ic == COST_WINDOW ? l->bw : cost_recv_rate(l, from)));
    cost_plan_bytes(p, ic, each * senders);
    return WSYNC_OK;
}

wsync_status_t cost_scenario(const cost_links_t *links, cost_scenario_t sc, cost_net_t method,
                             const cost_ref_shape_t *shape, cost_plan_t *out)
{
    cost_class_t nc = method == COST_NET_PUT ? COST_NIC_PUT : COST_NIC_STAGED;
    cost_class_t ic = method == COST_NET_PUT ? COST_WINDOW : COST_GPU_PEER;
    int G = shape->gpus, T = shape->tensors > 0 ? shape->tensors : 1;
    double S = (double)shape->bytes, shard;
    cost_plan_t p;

    if (G < 1 || S <= 0 || (unsigned)sc >= COST_SC_COUNT || (method != COST_NET_PUT && method != COST_NET_STAGED) ||
        (sc == COST_SC_INCAST && (shape->senders < 1 || shape->senders > G)))
        return wsync_error(WSYNC_ERR_INVALID,
                           "reference scenario: bad shape (%d GPUs per host, %g bytes, %d senders)", G, S,
                           shape->senders);
    shard = S / G;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", names[sc]);
    snprintf(p.landing, sizeof(p.landing), "%s", method == COST_NET_PUT ? "put" : "staged");
    switch (sc) {
    case COST_SC_DIRECT_ONE: WSYNC_CHECK(cross(&p, links, nc, 1, S * G, (double)T * G, G, S, 1, G)); break;
    case COST_SC_RELAY_ONE:
        WSYNC_CHECK(cross(&p, links, nc, 1, S, T, 1, S, 1, 1));
        WSYNC_CHECK(inside(&p, links, ic, "inside", 1, S * (G - 1), (double)T * (G - 1), G - 1, S, 1));
        break;
    case COST_SC_SHARDED_DIRECT: WSYNC_CHECK(cross(&p, links, nc, G, shard * G, (double)T * G, G, S, G, G)); break;
    case COST_SC_SHARDED_WINDOWS:
        WSYNC_CHECK(cross(&p, links, nc, G, shard, T, 1, shard, 1, G));
        WSYNC_CHECK(inside(&p, links, ic, "inside", G, shard * (G - 1), (double)T * (G - 1), G - 1,
                           shard * (G - 1), G - 1));
        break;
    case COST_SC_SHARDED_ALLGATHER:
        WSYNC_CHECK(cross(&p, links, nc, G, shard, T, 1, shard, 1, G));
        WSYNC_CHECK(
            inside(&p, links, COST_WINDOW, "all-gather", G, shard * (G - 1), T, G - 1, shard * (G - 1), G - 1));
        break;
    case COST_SC_INCAST:
        WSYNC_CHECK(cross(&p, links, nc, shape->senders, S, 1, 1, S * shape->senders, shape->senders, 1));
        break;
    default: break;
    }
    p.runnable = 0;
    cost_plan_finish(&p);
    *out = p;
    return WSYNC_OK;
}
