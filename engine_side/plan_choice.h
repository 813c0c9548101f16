/* plan_choice.h: the plan an engine node pulls by, from the `plan` setting
 * (common/base/plan_spec.h), what the node is, and for `auto` the cost model's
 * choice (common/cost/cost.h) over the machine's links file (the `links`
 * setting). */
#ifndef WSYNC_ENGINE_PLAN_CHOICE_H
#define WSYNC_ENGINE_PLAN_CHOICE_H

#include "common/cost/cost.h"
#include "common/base/plan_spec.h"

typedef struct plan_choice_input {
    /* The node can relay: it pulls over tcp (or auto), since relays put
     * over tcp. Nodes that cannot pull direct whatever the setting says. */
    int relay_capable;
    /* For auto: the machine's links and the deployment of the version
     * being pulled (the node's memory, tcp); either NULL:
     * auto is direct. */
    const cost_links_t *links;
    const cost_deploy_t *deploy;
} plan_choice_input_t;

/* `asked` resolved: auto becomes the cost model's fastest runnable plan
 * (direct without links or a deployment, or when the model cannot cost it),
 * relay becomes direct on a node that cannot relay. Every node given the
 * same inputs makes the same choice. Never fails. */
wsync_plan_spec_t plan_choice_resolve(const wsync_plan_spec_t *asked, const plan_choice_input_t *in);

/* delta=auto: 1 when the cost model over `links` pulls `d`'s version
 * faster as deltas (d->delta_wire of the bytes on the wire, the trainers'
 * encode and the landing ranks' base copy and apply) than full, by at least
 * 1% (a tie goes to the full pull, as in cost_choose). *delta_s and *full_s:
 * the two predictions, the fastest runnable plan of each. A deployment the
 * model cannot cost gives 1 (today's rule: ask; the trainers' answers and
 * the verification decide) with both 0 and a warning. Never fails. */
int plan_choice_delta(const cost_links_t *links, const cost_deploy_t *d, double *delta_s, double *full_s);
/* A delta pull's wire bytes per byte of the version at the delta_density
 * setting's changed fraction of bf16 elements (the encoder's choice of
 * form): what the cost model counts before a pull measured one. */
double plan_choice_delta_wire(void);

#endif
