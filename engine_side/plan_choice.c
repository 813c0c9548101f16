/* plan_choice.c: `plan auto` and the nodes that cannot relay (plan_choice.h).
 * This is the one place the automatic choice is made. */
#include "engine_side/plan_choice.h"

wsync_plan_spec_t plan_choice_resolve(const wsync_plan_spec_t *asked, const plan_choice_input_t *in)
{
    wsync_plan_spec_t s = *asked;
    /* auto: the cost model's choice (common/cost: cost_choose()) is wired in
     * here by the coordinator once it has landed; until then auto is
     * today's behaviour, direct. */
    if (s.kind == WSYNC_PLAN_AUTO)
        s = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
    if (s.kind == WSYNC_PLAN_RELAY && !in->relay_capable)
        s = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
    return s;
}
