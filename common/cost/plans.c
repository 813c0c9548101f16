/* plans.c: wsync's candidate plans for a deployment, costed on its links:
 * direct (every node from the trainer ranks), relay:F (the nodes of a group
 * form a tree of fan-out F: the root pulls from the trainer ranks, every
 * other node from its parent node; relay:1 is a chain), and direct+own (each
 * rank pulls everything it holds, no windows: for comparison, not a runtime
 * plan). Each is the stages of wsync's data path: the trainers' digest and
 * announce (serial), then, overlapping chunk by chunk, the crossing from the
 * trainers, the relay hops, the window fan-out inside a node, and every
 * rank's verification. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/cost/cost_internal.h"

void cost_deploy_init(cost_deploy_t *d, int trainers, int trainer_hosts, int engines, int local_ranks,
                      uint64_t image_bytes, uint64_t chunk_bytes, cost_mem_t mem, cost_net_t net)
{
    memset(d, 0, sizeof(*d));
    d->trainers = trainers;
    d->trainer_hosts = trainer_hosts;
    d->engines = engines;
    d->local_ranks = local_ranks;
    d->image_bytes = image_bytes;
    d->node_bytes = image_bytes;
    d->rank_land_bytes = local_ranks > 0 ? (image_bytes + (uint64_t)local_ranks - 1) / (uint64_t)local_ranks : 0;
    d->rank_copy_bytes = image_bytes - (d->rank_land_bytes < image_bytes ? d->rank_land_bytes : image_bytes);
    d->rank_hold_bytes = image_bytes;
    d->node_groups = 1;
    d->chunk_bytes = chunk_bytes;
    d->mem = mem;
    d->net = net;
}

static cost_class_t net_class(const cost_deploy_t *d)
{
    return d->net == COST_NET_PUT      ? COST_NIC_PUT
           : d->net == COST_NET_STAGED ? COST_NIC_STAGED
           : d->net == COST_NET_LOCAL  ? COST_LOCAL
                                       : COST_TCP;
}

/* The class of one side of a crossing: tcp out of a trainer host
 * (tcp_trainer) or into / out of an engine host (tcp_engine), each the
 * file's plain tcp when it has no class of that role. */
static cost_class_t side_class(const cost_links_t *links, const cost_deploy_t *d, int engine_side)
{
    cost_class_t role = engine_side ? COST_TCP_ENGINE : COST_TCP_TRAINER;
    if (d->net != COST_NET_TCP)
        return net_class(d);
    return links->link[role].present ? role : COST_TCP;
}

/* Colocated whole-image ranks verify the sums their landing copies computed
 * (the fused copy+digest): no pass of their own. */
static int fused_landing(const cost_deploy_t *d)
{
    return d->net == COST_NET_LOCAL && d->rank_hold_bytes == d->image_bytes;
}

static cost_class_t window_class(const cost_deploy_t *d)
{
    return d->mem == COST_MEM_GPU ? COST_WINDOW : COST_HOST_MEMCPY;
}

static cost_class_t digest_class(const cost_deploy_t *d)
{
    return d->mem == COST_MEM_GPU ? COST_DIGEST_GPU : COST_DIGEST_HOST;
}

static double ceil_div(double a, double b)
{
    return b > 0 ? ceil(a / b) : 0;
}

static int min_int(double a, int b)
{
    return a < b ? (int)a : b;
}

static wsync_status_t check_deploy(const cost_deploy_t *d)
{
    if (d->trainers < 1 || d->trainer_hosts < 1 || d->trainer_hosts > d->trainers)
        return wsync_error(WSYNC_ERR_INVALID, "deployment: %d trainer ranks on %d hosts (need 1 <= hosts <= ranks)",
                           d->trainers, d->trainer_hosts);
    if (d->engines < 1 || d->local_ranks < 1 || d->node_groups < 1 || d->node_groups > d->engines)
        return wsync_error(WSYNC_ERR_INVALID,
                           "deployment: %d engine nodes x %d ranks in %d groups (need >= 1 each, "
                           "groups <= nodes)",
                           d->engines, d->local_ranks, d->node_groups);
    if (d->image_bytes == 0 || d->chunk_bytes == 0 || d->node_bytes == 0 || d->node_bytes > d->image_bytes ||
        d->rank_land_bytes > d->node_bytes || d->rank_hold_bytes > d->node_bytes)
        return wsync_error(WSYNC_ERR_INVALID,
                           "deployment: bytes do not add up (image %llu, node %llu, rank lands "
                           "%llu, holds %llu, chunk %llu)",
                           (unsigned long long)d->image_bytes, (unsigned long long)d->node_bytes,
                           (unsigned long long)d->rank_land_bytes, (unsigned long long)d->rank_hold_bytes,
                           (unsigned long long)d->chunk_bytes);
    return WSYNC_OK;
}

/* Serial: each trainer rank digests what it owns (on one GPU, colocated,
 * the ranks' digests share it: the whole image at its rate), then the
 * version is announced and the engines fetch its record (two control round
 * trips), or, where the file has it, the machine's measured fixed cost of a
 * version (which holds those round trips, the pull request's connection and
 * the first piece). With engine layouts the trainers copy into the publish
 * slot and pack their puts before any goes. */
static wsync_status_t add_announce(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_stage_t *s;
    int one_gpu = d->net == COST_NET_LOCAL;
    double owned = (double)d->image_bytes / d->trainers;
    cost_class_t dg = digest_class(d);
    WSYNC_CHECK(cost_add_quant(p, links, d));
    s = cost_plan_stage(p, "digest", 0, 1);
    WSYNC_CHECK(
        cost_stage_add(s, links, dg,
                       one_gpu ? "trainer ranks' digests on the one GPU" : "trainer rank's digest of its share",
                       one_gpu ? (double)d->image_bytes : owned, 0, links->link[dg].bw));
    cost_plan_bytes(p, dg, owned * d->trainers);
    if (links->link[COST_VERSION].present) {
        s = cost_plan_stage(p, "version", 0, 1);
        WSYNC_CHECK(
            cost_stage_add(s, links, COST_VERSION, "a version's fixed cost (small model, end to end)", 0, 1, 1));
    } else if (links->link[COST_CONTROL].present) {
        s = cost_plan_stage(p, "announce", 0, 1);
        WSYNC_CHECK(cost_stage_add(s, links, COST_CONTROL, "control round trips (report, record)", 0, 2, 1));
    }
    if (d->slot_copy) {
        cost_class_t cc = d->mem == COST_MEM_GPU ? COST_LOCAL : COST_HOST_MEMCPY;
        s = cost_plan_stage(p, "slot", 0, 1);
        WSYNC_CHECK(cost_stage_add(s, links, cc,
                                   one_gpu ? "trainer ranks' copies into their slots, one GPU"
                                           : "trainer rank's copy into its publish slot",
                                   one_gpu ? (double)d->image_bytes : owned, 0, links->link[cc].bw));
        cost_plan_bytes(p, cc, owned * d->trainers);
    }
    if (d->pack_bytes > 0) {
        cost_class_t pc = d->mem == COST_MEM_GPU ? COST_PACK_GPU : COST_PACK_HOST;
        double b = one_gpu ? (double)d->pack_bytes : (double)d->pack_bytes / d->trainers;
        s = cost_plan_stage(p, "pack", 0, 1);
        WSYNC_CHECK(cost_stage_add(s, links, pc, one_gpu ? "trainer ranks' packs, one GPU" : "trainer rank's pack",
                                   b, 0, links->link[pc].bw));
        cost_plan_bytes(p, pc, (double)d->pack_bytes);
    }
    return WSYNC_OK;
}

/* Trainer ranks -> `nodes` nodes, `per_node` bytes each (each trainer rank
 * owns 1/W of them); every node's ranks land `rank_in` each. */
static wsync_status_t add_cross(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d, int nodes,
                                double per_node, double rank_in, double node_in)
{
    cost_class_t nc = net_class(d), tc = side_class(links, d, 0), ec = side_class(links, d, 1);
    const cost_link_t *lt = &links->link[tc], *le = &links->link[ec];
    cost_stage_t *s = cost_plan_stage(p, "cross", 1, ceil_div(node_in, (double)d->chunk_bytes));
    /* A delta pull puts the same pieces, each delta_wire of its bytes. */
    double wf = cost_wire_fraction(p, d);
    per_node *= wf, rank_in *= wf, node_in *= wf;
    int W = d->trainers, L = d->local_ranks;
    if (d->net == COST_NET_LOCAL) { /* one GPU: every copy into every rank shares its memory */
        int fused = fused_landing(d) && links->link[COST_FUSED_GPU].present;
        cost_class_t lc = fused ? COST_FUSED_GPU : nc;
        WSYNC_CHECK(
            cost_stage_add(s, links, lc,
                           fused ? "the GPU's copies+digests into every rank" : "the GPU's copies into every rank",
                           rank_in * L * nodes, ceil_div(rank_in, (double)d->chunk_bytes) * L * nodes,
                           links->link[lc].bw));
        cost_plan_bytes(p, lc, rank_in * L * nodes);
        return WSYNC_OK;
    }
    int rpt = (int)ceil_div(W, d->trainer_hosts);
    double tb = per_node / W, pieces = ceil_div(tb, (double)d->chunk_bytes) + (W > 1);
    int peers = nodes * min_int(pieces, L);
    int senders = min_int(ceil_div(rank_in, (double)d->chunk_bytes) + 1, W);
    if (lt->present && le->present) {
        WSYNC_CHECK(cost_stage_add(s, links, tc, "trainer rank's adapter", tb * nodes, pieces * nodes,
                                   cost_nic_share(links, cost_send_rate(lt, peers, rpt), rpt)));
        if (lt->host_bw > 0)
            WSYNC_CHECK(cost_stage_add(s, links, tc, "trainer host's adapters", tb * nodes * rpt, 0, lt->host_bw));
        WSYNC_CHECK(cost_stage_add(s, links, ec, "engine rank's adapter", rank_in,
                                   ceil_div(rank_in, (double)d->chunk_bytes),
                                   cost_nic_share(links, cost_recv_rate(le, senders), L)));
        if (le->host_bw > 0)
            WSYNC_CHECK(cost_stage_add(s, links, ec, "engine node's adapters", node_in, 0, le->host_bw));
    } else {
        WSYNC_CHECK(cost_stage_add(s, links, lt->present ? ec : tc, "trainer rank's adapter", tb * nodes, pieces, 0));
    }
    cost_plan_bytes(p, nc, per_node * nodes);
    return WSYNC_OK;
}

/* Depth of the deepest node of a heap-ordered tree of `m` nodes, fan-out F. */
static int tree_depth(int m, int F)
{
    double count = 1, level = 1;
    int depth = 0;
    while (count < m) {
        level *= F;
        count += level;
        depth++;
    }
    return depth;
}

/* Relay nodes forward what they verified to F children: a host-memory node
 * serves from its rank 0 (one process for the node's bytes), a GPU node from
 * every rank (each forwards what it landed). Every hop of the tree's depth
 * adds a unit of this stage to the pipeline's fill. */
static wsync_status_t add_relay(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d, int F, int m)
{
    cost_class_t nc = side_class(links, d, 1);
    const cost_link_t *l = &links->link[nc];
    int L = d->local_ranks, kids = F < m - 1 ? F : m - 1;
    int senders = d->mem == COST_MEM_HOST ? 1 : L;
    double wf = cost_wire_fraction(p, d); /* a relay forwards the deltas it verified the result of */
    double N = (double)d->node_bytes * wf, out = (d->mem == COST_MEM_HOST ? N : (double)d->rank_land_bytes * wf);
    cost_stage_t *s = cost_plan_stage(p, "relay", 1, ceil_div(N, (double)d->chunk_bytes));
    s->hops = tree_depth(m, F);
    WSYNC_CHECK(cost_stage_add(s, links, nc, "relay's adapter out", out * kids,
                               ceil_div(out, (double)d->chunk_bytes) * kids,
                               cost_nic_share(links, cost_send_rate(l, kids, senders), senders)));
    if (l->host_bw > 0)
        WSYNC_CHECK(cost_stage_add(s, links, nc, "relay node's adapters out", N * kids, 0, l->host_bw));
    WSYNC_CHECK(cost_stage_add(s, links, nc, "child rank's adapter in", (double)d->rank_land_bytes * wf, 0,
                               cost_nic_share(links, l->bw, L)));
    cost_plan_bytes(p, nc, N * (d->engines - d->node_groups));
    return WSYNC_OK;
}

static wsync_status_t add_windows(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t wc = window_class(d);
    const cost_link_t *l = &links->link[wc];
    double C = (double)d->rank_copy_bytes;
    cost_stage_t *s;
    if (d->local_ranks < 2 || C <= 0)
        return WSYNC_OK;
    s = cost_plan_stage(p, "windows", 1, ceil_div(C, (double)d->chunk_bytes));
    WSYNC_CHECK(cost_stage_add(s, links, wc, "rank's copies out of peers' windows", C,
                               ceil_div(C, (double)d->chunk_bytes), l->bw));
    if (l->host_bw > 0)
        WSYNC_CHECK(cost_stage_add(s, links, wc, "node's copies together", C * d->local_ranks, 0, l->host_bw));
    cost_plan_bytes(p, wc, C * d->local_ranks * d->engines);
    return WSYNC_OK;
}

/* Every rank verifies what it holds: chunk by chunk as it lands
 * (pipelined), or, for targets' segments, once every piece landed and the
 * trainers computed the segments' digests (serial: both passes). On one GPU
 * the ranks' passes share it. */
static wsync_status_t add_verify(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t dg = digest_class(d);
    double H = (double)d->rank_hold_bytes, all = H * d->local_ranks * d->engines;
    int one_gpu = d->net == COST_NET_LOCAL;
    cost_stage_t *s;
    if (fused_landing(d))
        return WSYNC_OK;
    if (d->verify_after) {
        s = cost_plan_stage(p, "segments", 0, 1);
        WSYNC_CHECK(
            cost_stage_add(s, links, dg,
                           one_gpu ? "trainer ranks' segment digests, one GPU" : "trainer rank's segment digests",
                           one_gpu ? all : all / d->trainers, 0, links->link[dg].bw));
        cost_plan_bytes(p, dg, all);
    }
    s = cost_plan_stage(p, "verify", !d->verify_after, ceil_div(H, (double)d->chunk_bytes));
    WSYNC_CHECK(
        cost_stage_add(s, links, dg,
                       one_gpu ? "ranks' digests of what they hold, one GPU" : "rank's digest of what it holds",
                       one_gpu ? H * d->local_ranks : H, 0, links->link[dg].bw));
    cost_plan_bytes(p, dg, all);
    return WSYNC_OK;
}

static void plan_start(cost_plan_t *p, const cost_deploy_t *d, const char *name, int runnable, const char *landing)
{
    memset(p, 0, sizeof(*p));
    p->delta = d->delta == COST_DELTA_ON;
    snprintf(p->name, sizeof(p->name), "%.24s%s", name, p->delta ? "+delta" : "");
    p->runnable = runnable;
    snprintf(p->landing, sizeof(p->landing), "%s", landing);
}

static wsync_status_t plan_direct(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    plan_start(p, d, "direct", 1, d->local_ranks > 1 && d->rank_copy_bytes ? "windows" : "own");
    WSYNC_CHECK(add_announce(p, links, d));
    WSYNC_CHECK(cost_add_delta_encode(p, links, d));
    WSYNC_CHECK(add_cross(p, links, d, d->engines, (double)d->node_bytes, (double)d->rank_land_bytes,
                          (double)d->node_bytes));
    WSYNC_CHECK(cost_add_delta_apply(p, links, d));
    WSYNC_CHECK(add_windows(p, links, d));
    WSYNC_CHECK(add_verify(p, links, d));
    cost_plan_finish(p);
    return WSYNC_OK;
}

/* Over tcp every trainer rank sends on tcp_conns connections per engine
 * rank, each its own queue of chunks, all at once: a node's chunks do not
 * arrive one after another at the link's rate but W x conns at a time, each
 * at that share of it, and complete together. A relay forwards only chunks
 * it verified: its first hop starts a wave late, or, when the crossing is
 * the slower, ends with a wave still to forward (cost_plan_finish). */
static int cross_wave(const cost_deploy_t *d, double chunks)
{
    double w = (double)d->trainers * (d->tcp_conns > 0 ? d->tcp_conns : 1);
    return (int)(w < chunks ? w : chunks);
}

static wsync_status_t plan_relay(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d, int F)
{
    int m = (d->engines + d->node_groups - 1) / d->node_groups;
    char name[COST_NAME_LEN];
    snprintf(name, sizeof(name), "relay:%d", F);
    plan_start(p, d, name, 1, d->local_ranks > 1 && d->rank_copy_bytes ? "windows" : "own");
    WSYNC_CHECK(add_announce(p, links, d));
    WSYNC_CHECK(cost_add_delta_encode(p, links, d));
    WSYNC_CHECK(add_cross(p, links, d, d->node_groups, (double)d->node_bytes, (double)d->rank_land_bytes,
                          (double)d->node_bytes));
    if (d->net == COST_NET_TCP) { /* the chunks reach a root in waves (see cross_wave) */
        cost_stage_t *cross = &p->stages[p->nstages - 1];
        cross->wave = cross_wave(d, cross->units);
    }
    WSYNC_CHECK(add_relay(p, links, d, F, m));
    WSYNC_CHECK(cost_add_delta_apply(p, links, d));
    WSYNC_CHECK(add_windows(p, links, d));
    WSYNC_CHECK(add_verify(p, links, d));
    cost_plan_finish(p);
    return WSYNC_OK;
}

/* Each rank pulls all it holds from the trainers: the node's adapters carry
 * L times the bytes, and nothing fans out inside it. */
static wsync_status_t plan_own(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    double H = (double)d->rank_hold_bytes, L = d->local_ranks;
    plan_start(p, d, "direct+own", 0, "own");
    WSYNC_CHECK(add_announce(p, links, d));
    WSYNC_CHECK(cost_add_delta_encode(p, links, d));
    WSYNC_CHECK(add_cross(p, links, d, d->engines, H * L, H, H * L));
    WSYNC_CHECK(cost_add_delta_apply(p, links, d));
    WSYNC_CHECK(add_verify(p, links, d));
    cost_plan_finish(p);
    return WSYNC_OK;
}

/* One set of candidate plans for `d`, full or delta as d->delta says. */
static wsync_status_t predict_set(const cost_links_t *links, const cost_deploy_t *d, cost_plan_t *plans,
                                  size_t max, size_t *n)
{
    int m = (d->engines + d->node_groups - 1) / d->node_groups, F;
    size_t k = 0;
    if (max < 1)
        return wsync_error(WSYNC_ERR_INVALID, "cost_predict: no room for a plan");
    WSYNC_CHECK(plan_direct(&plans[k++], links, d));
    for (F = 1; m > 1 && F < m && F <= 64 && k < max; F *= 2)
        WSYNC_CHECK(plan_relay(&plans[k++], links, d, F));
    if (m > 2 && (m - 1) & (m - 2) && m - 1 <= 64 && k < max) /* the star, when it is not a power of 2 */
        WSYNC_CHECK(plan_relay(&plans[k++], links, d, m - 1));
    if (d->local_ranks > 1 && d->rank_copy_bytes > 0 && k < max)
        WSYNC_CHECK(plan_own(&plans[k++], links, d));
    *n = k;
    return WSYNC_OK;
}

wsync_status_t cost_predict(const cost_links_t *links, const cost_deploy_t *d, cost_plan_t *plans, size_t max,
                            size_t *n)
{
    cost_deploy_t one = *d;
    size_t nfull = 0, ndelta = 0;
    WSYNC_CHECK(check_deploy(d));
    if (d->delta != COST_DELTA_OFF && !(d->delta_wire > 0 && d->delta_wire <= 1.5))
        return wsync_error(WSYNC_ERR_INVALID,
                           "deployment: delta pulls need the wire's fraction of the bytes (from the changed "
                           "fraction, --delta-density), got %g",
                           d->delta_wire);
    if (d->delta != COST_DELTA_ON) {
        one.delta = COST_DELTA_OFF;
        WSYNC_CHECK(predict_set(links, &one, plans, max, &nfull));
    }
    if (d->delta != COST_DELTA_OFF) {
        one.delta = COST_DELTA_ON;
        WSYNC_CHECK(predict_set(links, &one, plans + nfull, max - nfull, &ndelta));
    }
    *n = nfull + ndelta;
    return WSYNC_OK;
}

/* The choice among `n` costed plans. */
static wsync_status_t choose_from(const cost_plan_t *plans, size_t n, const cost_deploy_t *d, cost_choice_t *out)
{
    const cost_plan_t *best = NULL;
    size_t i;
    /* Strictly faster by 1% to leave direct: a relay adds hops and a node
     * that can fail under its children, so a tie goes to the simpler plan
     * (and, with delta auto, to a full pull: the full plans come first). */
    for (i = 0; i < n; i++)
        if (plans[i].runnable && (best == NULL || plans[i].predicted_s < best->predicted_s * 0.99))
            best = &plans[i];
    if (best == NULL)
        return wsync_error(WSYNC_ERR_INTERNAL, "cost_choose: no runnable plan");
    memset(out, 0, sizeof(*out));
    /* The runtime name: "relay:1+delta" runs plan relay:1 with delta pulls. */
    snprintf(out->name, sizeof(out->name), "%.*s", (int)strcspn(best->name, "+"), best->name);
    out->delta = best->delta;
    out->predicted_s = best->predicted_s;
    for (i = 0; d->delta == COST_DELTA_AUTO && i < n; i++)
        if (plans[i].runnable && !plans[i].delta && (out->full_s == 0 || plans[i].predicted_s < out->full_s))
            out->full_s = plans[i].predicted_s;
    snprintf(out->bottleneck, sizeof(out->bottleneck), "%s", best->bottleneck);
    return WSYNC_OK;
}

wsync_status_t cost_choose(const cost_links_t *links, const cost_deploy_t *d, cost_choice_t *out)
{
    /* On the heap: 24 plans are ~300 KiB, too much for a small thread stack. */
    cost_plan_t *plans = malloc(sizeof(*plans) * COST_MAX_PLANS);
    size_t n = 0;
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(plans);
    st = cost_predict(links, d, plans, COST_MAX_PLANS, &n);
    if (st == WSYNC_OK)
        st = choose_from(plans, n, d, out);
    free(plans);
    return st;
}

double cost_floor_s(const cost_links_t *links, const cost_deploy_t *d)
{
    const cost_link_t *l = &links->link[side_class(links, d, 1)];
    int nics = links->host_nics > 0 ? links->host_nics : 1;
    if (!l->present || l->bw <= 0)
        return 0;
    return (double)d->node_bytes / (nics * l->bw);
}
