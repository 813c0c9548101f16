/* plan_choice.c: `plan auto` and the nodes that cannot relay (plan_choice.h).
 * This is the one place the automatic choice is made. */
#include "engine_side/plan_choice.h"

#include <stdlib.h>

#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/delta/delta.h"

wsync_plan_spec_t plan_choice_resolve(const wsync_plan_spec_t *asked, const plan_choice_input_t *in)
{
    wsync_plan_spec_t s = *asked;
    if (s.kind == WSYNC_PLAN_AUTO) {
        cost_choice_t ch;
        s = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
        /* The cost model's fastest runnable plan ("direct" or "relay:F"). */
        if (in->links && in->deploy && in->relay_capable) {
            cost_deploy_t full = *in->deploy;
            full.delta = COST_DELTA_OFF; /* a links file without the delta classes costs full pulls */
            if (cost_choose(in->links, in->deploy, &ch) != WSYNC_OK &&
                (in->deploy->delta == COST_DELTA_OFF || cost_choose(in->links, &full, &ch) != WSYNC_OK))
                LOG_WARN("plan auto: the cost model cannot choose (%s): direct", wsync_last_error());
            else if (wsync_plan_spec_parse(ch.name, &s) != WSYNC_OK || s.kind == WSYNC_PLAN_AUTO)
                s = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
        }
    }
    if (s.kind == WSYNC_PLAN_RELAY && !in->relay_capable)
        s = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
    return s;
}

int plan_choice_delta(const cost_links_t *links, const cost_deploy_t *d, double *delta_s, double *full_s)
{
    cost_deploy_t one = *d;
    cost_choice_t full, delta;
    one.delta = COST_DELTA_OFF;
    *delta_s = *full_s = 0;
    if (cost_choose(links, &one, &full) != WSYNC_OK) {
        LOG_WARN("delta auto: the cost model cannot cost a full pull (%s): asking for deltas", wsync_last_error());
        return 1;
    }
    one.delta = COST_DELTA_ON;
    if (cost_choose(links, &one, &delta) != WSYNC_OK) {
        LOG_WARN("delta auto: the cost model cannot cost a delta pull (%s): asking for deltas", wsync_last_error());
        return 1;
    }
    *delta_s = delta.predicted_s;
    *full_s = full.predicted_s;
    return delta.predicted_s < full.predicted_s * 0.99;
}

double plan_choice_delta_wire(void)
{
    const uint64_t n = 1u << 20;
    double density = strtod(wsync_setting_str(WSYNC_SET_DELTA_DENSITY), NULL);
    wsync_delta_stats_t st;
    wsync_delta_stats_from(n, (uint64_t)((double)n * density + 0.5), 2, &st);
    return (double)st.bytes[st.chosen] / (double)(n * 2);
}
