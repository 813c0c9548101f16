/* cost_internal.h: the rules the plans and the reference scenarios share:
 * what rate a sender or a receiver gets from a link class, and building a
 * plan stage by stage (common/cost/rates.c, stage.c). */
#ifndef WSYNC_COMMON_COST_INTERNAL_H
#define WSYNC_COMMON_COST_INTERNAL_H

#include "common/cost/cost.h"

/* The rate one sender gets on class `l` sending to `peers` receivers at once
 * while `active` senders of its host (itself included) fan out at the same
 * time. One peer: the link's rate. Several: the fan-out rate, but what it
 * has above one link's rate comes from idle neighbours (NCCL relays over the
 * host's other adapters; other GPUs' copy channels), so the senders that fan
 * out at once share that part: bw + (fan_out_bw - bw) / active. */
double cost_send_rate(const cost_link_t *l, int peers, int active);
/* The rate one receiver gets from `senders` senders at once: the link's rate
 * for one, the fan-in cap for several (the link's rate when the file gives
 * none). */
double cost_recv_rate(const cost_link_t *l, int senders);
/* `bw` of a host's adapters shared by `users` ranks: bw x nics / users when
 * there are fewer adapters than users (nics 0 counts as one). */
double cost_nic_share(const cost_links_t *links, double bw, int users);

/* Appends a stage to `p` (NULL when COST_MAX_STAGES are used: a bug). */
cost_stage_t *cost_plan_stage(cost_plan_t *p, const char *name, int pipelined, double units);
/* Counts `bytes` moved on class `cls` in the plan's breakdown. */
void cost_plan_bytes(cost_plan_t *p, cost_class_t cls, double bytes);

/* Delta pulls (common/cost/delta.c): the wire's fraction of the bytes (1 for
 * a full pull); the trainers' encode stage and the landing ranks' base copy
 * and apply stages (nothing for a full pull). */
double cost_wire_fraction(const cost_plan_t *p, const cost_deploy_t *d);
wsync_status_t cost_add_delta_encode(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d);
wsync_status_t cost_add_delta_apply(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d);

/* FP8 on the way (common/cost/quant.c): each trainer rank quantizes its bf16
 * share before it digests the FP8 bytes and scales it produced (a serial
 * stage; nothing when d->quant_src_bytes is 0). */
wsync_status_t cost_add_quant(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d);

#endif
