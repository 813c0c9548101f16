/* fetch_relay.c: which node is this one's parent under relay:F (or auto
 * choosing it: relay_tree.h says who that is), the relay pull's request,
 * and the fall back to the trainer ranks (pull.h): a relay that fails, or
 * lands nothing here for relay_stall_ms, is given up, named in the log,
 * and every unit still missing is asked of the trainer ranks under a new
 * request id, after this rank's transports were reset (none of the relay's
 * puts can land after that). What is asked of a relay is the fetch's
 * (fetch_relay_puts.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "common/proto/relay_registration.h"
#include "engine_side/pull.h"
#include "engine_side/plan_choice.h"
#include "engine_side/relay_tree.h"

/* The distinct hosts of the trainer ranks in `st` (GET /v1/status), at least 1. */
static int trainer_hosts(const json_t *st)
{
    json_t *trainers = json_object_get(st, "trainers"), *t;
    size_t i, k;
    int n = 0;
    json_array_foreach(trainers, i, t)
    {
        const char *h = json_string_value(json_object_get(t, "host")), *o;
        int seen = 0;
        for (k = 0; h && k < i && !seen; k++)
            seen = (o = json_string_value(json_object_get(json_array_get(trainers, k), "host"))) &&
                   strcmp(o, h) == 0;
        n += h && !seen;
    }
    return n > 0 ? n : 1;
}

/* The relaying nodes the control endpoint knows, which hold v, and how many
 * hosts the trainer ranks run on. */
static wsync_status_t relay_nodes(wsync_receiver_t *r, uint64_t v, relay_node_t **out, size_t *n, int *thosts)
{
    json_t *st = NULL, *engines, *e;
    relay_node_t *nodes;
    size_t i;
    WSYNC_CHECK(wsync_control_status(r->control, &st));
    *thosts = trainer_hosts(st);
    engines = json_object_get(st, "engines");
    nodes = calloc(json_array_size(engines) + 1, sizeof(*nodes));
    if (nodes == NULL) {
        json_decref(st);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    *n = 0;
    json_array_foreach(engines, i, e)
    {
        /* A status entry holds the node's registration (id, host, ranks,
         * endpoint): its relay, when it registered one, is read as such. */
        wsync_relay_registration_t reg;
        relay_node_t *nd = &nodes[*n];
        if (wsync_relay_registration_from_json(e, &reg) != WSYNC_OK)
            continue;
        if (reg.relay[0] && strlen(reg.id) < sizeof(nd->id) && strlen(reg.relay) < sizeof(nd->addr)) {
            snprintf(nd->id, sizeof(nd->id), "%s", reg.id);
            snprintf(nd->addr, sizeof(nd->addr), "%s", reg.relay);
            nd->holds = (uint64_t)json_integer_value(json_object_get(e, "version")) == v;
            (*n)++;
        }
        wsync_relay_registration_clear(&reg);
    }
    json_decref(st);
    *out = nodes;
    return WSYNC_OK;
}

/* plan auto with a links file: the cost model's choice for this version,
 * from what every node sees alike (the version's plan, the registered
 * relays, the trainers' hosts). */
static wsync_plan_spec_t choose_for_version(const wsync_receiver_t *r, uint64_t v, int world, uint64_t image,
                                            uint64_t chunk, size_t nodes, int thosts)
{
    cost_deploy_t d;
    plan_choice_input_t in = {.relay_capable = r->node.relay_capable, .links = r->node.links, .deploy = &d};
    wsync_plan_spec_t s;
    char name[32];
    cost_deploy_init(&d, world, thosts, nodes > 0 ? (int)nodes : 1, r->cfg.local_world, image, chunk,
                     r->mem->kind == WSYNC_MEM_CUDA ? COST_MEM_GPU : COST_MEM_HOST, COST_NET_TCP);
    d.tcp_conns = (int)wsync_setting_int(WSYNC_SET_TCP_CONNS);
    /* A node holding a version may pull this one as deltas, direct or from a
     * relay (relays serve them: relay_delta.h): both costed at the
     * delta_density setting's wire, which every node reads alike (delta
     * auto, delta_land.c, then decides per rank with what it measured). */
    d.delta = wsync_setting_int(WSYNC_SET_DELTA) == 2 || r->held.version == 0 ? COST_DELTA_OFF
              : wsync_setting_int(WSYNC_SET_DELTA) == 1                       ? COST_DELTA_ON
                                                                              : COST_DELTA_AUTO;
    d.delta_wire = plan_choice_delta_wire();
    d.delta_base_copy = r->images.nslots == 2;
    s = plan_choice_resolve(&r->node.asked, &in);
    wsync_trace("engine %s rank %d: plan auto chose %s for version %llu (%zu nodes, %d trainer hosts)",
                r->engine_id, r->cfg.local_rank, wsync_plan_spec_name(&s, name, sizeof(name)),
                (unsigned long long)v, nodes, thosts);
    return s;
}

int recv_relay_parent(wsync_receiver_t *r, uint64_t v, int world, uint64_t image, uint64_t chunk, char *id,
                      size_t idlen, char *addr, size_t addrlen)
{
    relay_node_t *nodes = NULL;
    wsync_plan_spec_t plan = r->node.plan;
    size_t n = 0;
    int parent, thosts = 1;
    if (plan.kind != WSYNC_PLAN_RELAY && !recv_plan_auto(&r->node))
        return 0;
    if (relay_nodes(r, v, &nodes, &n, &thosts) != WSYNC_OK) {
        LOG_WARN("engine %s rank %d: no list of relay nodes (%s): version %llu from the trainer ranks",
                 r->engine_id, r->cfg.local_rank, wsync_last_error(), (unsigned long long)v);
        return 0;
    }
    if (recv_plan_auto(&r->node))
        plan = choose_for_version(r, v, world, image, chunk, n, thosts);
    parent = plan.kind == WSYNC_PLAN_RELAY ? relay_tree_parent(nodes, n, r->engine_id, plan.fanout) : -1;
    if (parent >= 0) {
        snprintf(id, idlen, "%s", nodes[parent].id);
        snprintf(addr, addrlen, "%s", nodes[parent].addr);
    }
    free(nodes);
    return parent >= 0;
}

wsync_status_t recv_relay_pull_send(recv_relay_pull_t *rp, wsync_receiver_t *r, json_t *msg, uint64_t deadline)
{
    memset(&rp->req, 0, sizeof(rp->req));
    snprintf(rp->req.who, sizeof(rp->req.who), "relay of engine %s", rp->id);
    rp->req.connect_ms = (int)wsync_setting_int(WSYNC_SET_RELAY_STALL_MS);
    WSYNC_CHECK(recv_request_start(&rp->req, &r->transports.pull_conns, &r->auth, -1, rp->addr, msg, deadline));
    rp->on = 1;
    return WSYNC_OK;
}

int recv_relay_pull_gone(const recv_relay_pull_t *rp, uint64_t last_landed, int missing, char *why, size_t len)
{
    const int stall_ms = (int)wsync_setting_int(WSYNC_SET_RELAY_STALL_MS);
    if (!rp->on)
        return 0;
    if (recv_request_failed(&rp->req)) {
        snprintf(why, len, "%s", rp->req.error);
        return 1;
    }
    if (missing && wsync_now_ns() - last_landed > (uint64_t)stall_ms * 1000000ULL) {
        snprintf(why, len, "no piece landed for %d ms (relay_stall_ms)", stall_ms);
        return 1;
    }
    return 0;
}

void recv_relay_pull_end(recv_relay_pull_t *rp)
{
    if (!rp->on)
        return;
    recv_request_abort(&rp->req); /* its answer is no longer needed */
    recv_request_end(&rp->req);
    rp->on = 0;
}

/* 1 while some chunk asked for here still misses units. */
static int missing_units(const recv_pull_t *p)
{
    uint32_t c;
    for (c = 0; c < p->nchunks; c++)
        if (recv_pull_is_mine(p, c) && p->remaining[c] > 0)
            return 1;
    return 0;
}

/* Gives the relay up; what is missing comes from the trainer ranks. */
static wsync_status_t fall_back(recv_pull_t *p, const char *why)
{
    uint32_t c, n = 0;
    int t;
    LOG_WARN("engine %s rank %d: relay of engine %s at %s given up (%s); the missing %s of version %llu come "
             "from the trainer ranks",
             p->r->engine_id, p->me, p->relay.id, p->relay.addr, why, p->ops->unit, (unsigned long long)p->v);
    recv_relay_pull_end(&p->relay);
    if (p->ops->relay_gone)
        WSYNC_CHECK(p->ops->relay_gone(p));
    for (t = 0; p->ops->reask_all && t < p->world; t++) { /* asked again below */
        recv_request_abort(&p->reqs[t]);
        recv_request_end(&p->reqs[t]);
        memset(&p->reqs[t], 0, sizeof(p->reqs[t]));
    }
    recv_transport_reset(p->r); /* the relay's connections go: none of its puts lands from here */
    p->reqid = recv_new_reqid(p->reqid);
    for (c = 0; c < p->nchunks; c++) {
        size_t first;
        if (!recv_pull_is_mine(p, c))
            continue;
        if (p->remaining[c] == 0) { /* complete: verified, or being verified */
            p->mine[c / 8] &= (unsigned char)~(1u << (c % 8));
            continue;
        }
        p->remaining[c] = (uint32_t)p->ops->chunk_units(p, c, &first); /* landed parts count no more */
        if (p->ops->chunk_reasked)
            p->ops->chunk_reasked(p, c);
        n++;
    }
    p->last_landed = wsync_now_ns();
    for (t = 0; t < p->world && (n > 0 || p->ops->reask_all); t++)
        WSYNC_CHECK(p->ops->request_rank(p, t));
    return WSYNC_OK;
}

wsync_status_t recv_pull_relay_watch(recv_pull_t *p)
{
    char why[500];
    return recv_relay_pull_gone(&p->relay, p->last_landed, missing_units(p), why, sizeof(why)) ? fall_back(p, why)
                                                                                               : WSYNC_OK;
}
