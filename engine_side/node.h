/* node.h: how this engine node pulls (recv_node_t): the plan setting as
 * given, the plan it pulls by (plan_choice.c; under auto with a links file,
 * chosen again for each version), the machine's links (plan or delta auto
 * with the links setting, else NULL), whether it may relay, and on local
 * rank 0 of a node that may, the relay serving other nodes (relay.h). Owned
 * by the receiver (r->node): set up at create (receiver.c: choose_plan, the
 * relay started on local rank 0); under auto fetch_relay.c chooses again
 * for each version from it; the relay and links go at destroy. */
#ifndef WSYNC_ENGINE_NODE_H
#define WSYNC_ENGINE_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/plan_spec.h"
#include "common/cost/cost.h"
#include "engine_side/relay.h"
#include "engine_side/wsync_receiver.h"

typedef struct recv_node {
    wsync_plan_spec_t asked, plan;
    cost_links_t *links;
    int relay_capable;
    recv_relay_t *relay; /* local rank 0 of a node that may relay, else NULL */
} recv_node_t;

/* 1 when plan=auto has a links file to choose by (it may choose a relay
 * plan, chosen again for each version): n->links is also read by
 * delta=auto alone. */
static inline int recv_plan_auto(const recv_node_t *n)
{
    return n->links != NULL && n->asked.kind == WSYNC_PLAN_AUTO && n->relay_capable;
}

/* 1 if this node may relay (its local rank 0 runs a relay): every rank then
 * keeps its whole image (nothing lands direct, no page is freed), since the
 * relay serves out of the ranks' images. */
static inline int recv_node_relays(const recv_node_t *n)
{
    return n->relay_capable && (n->plan.kind == WSYNC_PLAN_RELAY || recv_plan_auto(n));
}

/* fetch_relay.c: under relay:F (or auto choosing it, costed for a version
 * of `image` bytes in `chunk`-byte chunks from `world` trainer ranks) the
 * relay of this node's parent for version v: 1 with its engine id and
 * address set, 0 when this node pulls from the trainer ranks. Every rank of
 * a node derives the same. */
int recv_relay_parent(wsync_receiver_t *r, uint64_t v, int world, uint64_t image, uint64_t chunk, char *id,
                      size_t idlen, char *addr, size_t addrlen);

#endif
