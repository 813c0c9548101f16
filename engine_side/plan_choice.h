/* plan_choice.h: the plan an engine node pulls by, from the `plan` setting
 * (common/plan_spec.h) and what the node is. */
#ifndef WSYNC_ENGINE_PLAN_CHOICE_H
#define WSYNC_ENGINE_PLAN_CHOICE_H

#include "common/plan_spec.h"

typedef struct plan_choice_input {
    /* The node can relay: a whole image (no engine target, no caller
     * destination tensors) in host memory, over tcp. Nodes that cannot
     * pull direct whatever the setting says. */
    int relay_capable;
} plan_choice_input_t;

/* `asked` resolved: auto becomes a named plan, relay becomes direct on a
 * node that cannot relay. Never fails: the setting was checked at start. */
wsync_plan_spec_t plan_choice_resolve(const wsync_plan_spec_t *asked, const plan_choice_input_t *in);

#endif
