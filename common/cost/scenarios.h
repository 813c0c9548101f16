/* scenarios.h: the reference scenarios of docs/COST_MODEL.md, costed on a
 * links file: the weight-sync shapes of a transfer executor between two
 * hosts of G GPUs each (trainer GPUs 0..G-1 on one host, engine GPUs on the
 * other), every transfer staged (NCCL send/recv) or by puts, the stages run
 * one after the other; and incast (k senders on one host into one GPU of
 * the other). They check the model against published measurements of such
 * a machine; wsync's own plans are costed by cost_predict. */
#ifndef WSYNC_COMMON_COST_SCENARIOS_H
#define WSYNC_COMMON_COST_SCENARIOS_H

#include "common/cost/cost.h"

typedef enum cost_scenario {
    COST_SC_DIRECT_ONE,        /* every engine GPU gets the whole model from trainer GPU 0 */
    COST_SC_RELAY_ONE,         /* GPU 0 -> engine GPU 0 across, then it -> the other G-1 inside */
    COST_SC_SHARDED_DIRECT,    /* trainer GPU i sends its 1/G shard to every engine GPU */
    COST_SC_SHARDED_WINDOWS,   /* shard i -> engine GPU i, then an intra-node plan (windows for puts) */
    COST_SC_SHARDED_ALLGATHER, /* shard i -> engine GPU i, then an all-gather inside the engine host */
    COST_SC_INCAST,            /* k senders of one host, `bytes` each, into one GPU of the other */
    COST_SC_COUNT
} cost_scenario_t;

typedef struct cost_ref_shape {
    int gpus;       /* GPUs per host (both hosts) */
    uint64_t bytes; /* the model (incast: per sender) */
    int tensors;    /* messages per model: its tensors (a shard sends its part of each) */
    int senders;    /* incast only */
} cost_ref_shape_t;

/* "direct-one-gpu", "relay-one-gpu", "sharded-direct", "sharded-windows",
 * "sharded-allgather", "incast"; NULL for a bad id. */
const char *cost_scenario_name(cost_scenario_t sc);

/* `method`: COST_NET_STAGED or COST_NET_PUT. Fails naming a link class the
 * file lacks. */
wsync_status_t cost_scenario(const cost_links_t *links, cost_scenario_t sc, cost_net_t method,
                             const cost_ref_shape_t *shape, cost_plan_t *out);

#endif
