/* stage.c: the cost model's arithmetic: a load costs alpha per message plus
 * bytes over its rate; a stage lasts as long as its slowest load; serial
 * stages add up, pipelined stages overlap unit by unit (fill and drain cost
 * one unit of each other stage per hop, and a stage that completes its units
 * in waves of w adds w - 1 of the smaller of its and the next stage's unit).
 * And the rate rules of
 * cost_internal.h. */
#include <stdio.h>
#include <string.h>

#include "common/cost/cost_internal.h"
#include "common/base/status.h"

double cost_send_rate(const cost_link_t *l, int peers, int active)
{
    double fan = l->fan_out_bw > l->bw ? l->fan_out_bw : l->bw;
    if (peers <= 1)
        return l->bw;
    return l->bw + (fan - l->bw) / (active > 1 ? active : 1);
}

double cost_recv_rate(const cost_link_t *l, int senders)
{
    if (senders <= 1 || l->fan_in_bw <= 0)
        return l->bw;
    return l->fan_in_bw;
}

double cost_nic_share(const cost_links_t *links, double bw, int users)
{
    int nics = links->host_nics > 0 ? links->host_nics : 1;
    return users > nics ? bw * nics / users : bw;
}

cost_stage_t *cost_plan_stage(cost_plan_t *p, const char *name, int pipelined, double units)
{
    cost_stage_t *s;
    if (p->nstages >= COST_MAX_STAGES)
        return NULL;
    s = &p->stages[p->nstages++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->pipelined = pipelined;
    s->units = units >= 1 ? units : 1;
    s->hops = 1;
    s->wave = 1;
    return s;
}

void cost_plan_bytes(cost_plan_t *p, cost_class_t cls, double bytes)
{
    if ((unsigned)cls < COST_CLASS_COUNT)
        p->bytes_by_class[cls] += bytes;
}

wsync_status_t cost_stage_add(cost_stage_t *s, const cost_links_t *links, cost_class_t cls, const char *what,
                              double bytes, double msgs, double rate)
{
    const cost_link_t *l = (unsigned)cls < COST_CLASS_COUNT ? &links->link[cls] : NULL;
    cost_load_t *ld;
    if (l == NULL || !l->present)
        return wsync_error(WSYNC_ERR_INVALID, "the links file has no '%s' link class, which %s needs",
                           l ? cost_class_name(cls) : "?", what);
    if (!(rate > 0) && bytes > 0)
        return wsync_error(WSYNC_ERR_INVALID, "link class '%s' gives %s no rate (gbps, fan_in_gbps, host_gbps)",
                           cost_class_name(cls), what);
    if (s->nloads >= COST_MAX_LOADS)
        return wsync_error(WSYNC_ERR_INTERNAL, "stage %s: more than %d loads", s->name, COST_MAX_LOADS);
    ld = &s->loads[s->nloads++];
    memset(ld, 0, sizeof(*ld));
    snprintf(ld->what, sizeof(ld->what), "%s", what);
    ld->cls = cls;
    ld->bytes = bytes;
    ld->msgs = msgs;
    ld->rate = rate;
    ld->alpha_s = l->alpha_s;
    ld->seconds = msgs * l->alpha_s + (bytes > 0 ? bytes / rate : 0);
    return WSYNC_OK;
}

/* A stage whose units complete in waves of w hands them to the next
 * pipelined stage w at a time: that stage starts a wave late (w - 1 units of
 * the first, when it is the slower) or ends a wave late (w - 1 of its own,
 * when the first is): w - 1 of the smaller unit. */
static double wave_fill(const cost_plan_t *p, int i)
{
    const cost_stage_t *s = &p->stages[i];
    double unit = s->seconds / s->units;
    int k;
    if (s->wave <= 1)
        return 0;
    for (k = i + 1; k < p->nstages; k++)
        if (p->stages[k].pipelined) {
            double next = p->stages[k].seconds / p->stages[k].units;
            return (s->wave - 1) * (next < unit ? next : unit);
        }
    return 0;
}

void cost_plan_finish(cost_plan_t *p)
{
    double serial = 0, slowest = 0, fill = 0, slowest_unit = 0;
    const cost_stage_t *worst = NULL;
    int i, k;
    for (i = 0; i < p->nstages; i++) {
        cost_stage_t *s = &p->stages[i];
        s->seconds = 0;
        s->bottleneck = 0;
        for (k = 0; k < s->nloads; k++)
            if (s->loads[k].seconds > s->seconds) {
                s->seconds = s->loads[k].seconds;
                s->bottleneck = k;
            }
    }
    for (i = 0; i < p->nstages; i++) {
        cost_stage_t *s = &p->stages[i];
        if (!s->pipelined) {
            serial += s->seconds;
        } else {
            double unit = s->seconds / s->units;
            fill += unit * (s->hops > 0 ? s->hops : 1) + wave_fill(p, i);
            if (s->seconds > slowest) {
                slowest = s->seconds;
                slowest_unit = unit;
            }
        }
        if (worst == NULL || s->seconds > worst->seconds)
            worst = s;
    }
    p->predicted_s = serial + slowest + fill - slowest_unit;
    if (worst != NULL && worst->nloads > 0)
        snprintf(p->bottleneck, sizeof(p->bottleneck), "%s: %s", worst->name, worst->loads[worst->bottleneck].what);
    else
        snprintf(p->bottleneck, sizeof(p->bottleneck), "none");
}
