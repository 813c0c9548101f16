/* plan_predict.c: `wsync plan --predict`: the deployment given by plan's
 * flags, costed on a links file per candidate plan (common/cost/cost.h):
 * predicted time, the bottleneck, the stages and how they overlap, bytes
 * per link class, and the plan plan=auto picks. `--scenarios` costs the
 * reference scenarios (common/cost/scenarios.h) instead. */
#include "cli/plan_predict.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cost/cost.h"
#include "common/cost/scenarios.h"
#include "common/delta/delta.h"
#include "common/base/settings.h"
#include "common/base/status.h"
#include "common/base/util.h"

static const char *net_name(cost_net_t n)
{
    return n == COST_NET_PUT ? "put" : n == COST_NET_STAGED ? "staged" : n == COST_NET_LOCAL ? "local" : "tcp";
}

static int pick_kinds(const plan_predict_opts_t *o, const cost_links_t *l, cost_mem_t *mem, cost_net_t *net)
{
    if (o->memory == NULL)
        *mem = l->link[COST_DIGEST_GPU].present ? COST_MEM_GPU : COST_MEM_HOST;
    else if (strcmp(o->memory, "gpu") == 0 || strcmp(o->memory, "host") == 0)
        *mem = o->memory[0] == 'g' ? COST_MEM_GPU : COST_MEM_HOST;
    else {
        fprintf(stderr, "wsync plan: --memory: expected 'gpu' or 'host', got '%s'\n", o->memory);
        return 2;
    }
    if (o->net == NULL) {
        *net = *mem == COST_MEM_HOST              ? COST_NET_TCP
               : l->link[COST_NIC_PUT].present    ? COST_NET_PUT
               : l->link[COST_NIC_STAGED].present ? COST_NET_STAGED
                                                  : COST_NET_TCP;
    } else if (strcmp(o->net, "put") == 0) {
        *net = COST_NET_PUT;
    } else if (strcmp(o->net, "staged") == 0) {
        *net = COST_NET_STAGED;
    } else if (strcmp(o->net, "tcp") == 0) {
        *net = COST_NET_TCP;
    } else if (strcmp(o->net, "local") == 0) {
        *net = COST_NET_LOCAL;
    } else {
        fprintf(stderr,
                "wsync plan: --transport: expected 'put' (verbs), 'staged' (nccl), 'tcp' or 'local' (trainers "
                "and engines on one GPU), got '%s'\n",
                o->net);
        return 2;
    }
    return 0;
}

/* A replica of G GPUs holds the image sharded over them: G >= L spans G/L
 * nodes (each node 1/(G/L) of the image, nothing to fan out); G < L puts
 * L/G replicas on a node (the node needs the image, a rank holds 1/G). */
static int apply_replicas(const plan_predict_opts_t *o, cost_deploy_t *d)
{
    int G = o->replica_gpus, L = d->local_ranks;
    uint64_t S = d->image_bytes;
    if (G >= L) {
        int R = G / L;
        if (G % L != 0 || d->engines % R != 0) {
            fprintf(stderr,
                    "wsync plan: --replica-gpus %d: expected a multiple of --local-ranks %d whose nodes (%d) "
                    "divide --engines %d\n",
                    G, L, R, d->engines);
            return 2;
        }
        d->node_bytes = (S + R - 1) / R;
        d->rank_hold_bytes = d->rank_land_bytes = (S + G - 1) / G;
        d->rank_copy_bytes = 0;
        d->node_groups = R;
    } else {
        if (L % G != 0) {
            fprintf(stderr,
                    "wsync plan: --replica-gpus %d: expected a divisor or a multiple of --local-ranks %d\n", G, L);
            return 2;
        }
        d->rank_hold_bytes = (S + G - 1) / G;
        d->rank_copy_bytes = d->rank_hold_bytes > d->rank_land_bytes ? d->rank_hold_bytes - d->rank_land_bytes : 0;
    }
    return 0;
}

/* The fastest runnable delta plan's prediction (0: none costed). */
static double fastest_delta(const cost_plan_t *plans, size_t n)
{
    double best = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (plans[i].runnable && plans[i].delta && (best == 0 || plans[i].predicted_s < best))
            best = plans[i].predicted_s;
    return best;
}

/* --delta and --delta-density: the mode, and the wire's fraction of the
 * bytes for a chunk-sized piece at that density (the chosen form's size,
 * header included, as the encoder would pick it). */
static int apply_delta(const plan_predict_opts_t *o, cost_deploy_t *d)
{
    unsigned w = o->delta_width ? (unsigned)o->delta_width : o->quant ? 1 : 2; /* FP8 deltas diff bytes */
    uint64_t n = d->chunk_bytes / w;
    wsync_delta_stats_t st;
    if (o->delta == NULL)
        d->delta = o->delta_density > 0 ? COST_DELTA_AUTO : COST_DELTA_OFF;
    else if (strcmp(o->delta, "on") == 0 || strcmp(o->delta, "off") == 0 || strcmp(o->delta, "auto") == 0)
        d->delta = o->delta[1] == 'n' ? COST_DELTA_ON : o->delta[1] == 'f' ? COST_DELTA_OFF : COST_DELTA_AUTO;
    else {
        fprintf(stderr, "wsync plan: --delta: expected 'on', 'off' or 'auto', got '%s'\n", o->delta);
        return 2;
    }
    if (d->delta == COST_DELTA_OFF)
        return 0;
    if (!(o->delta_density > 0)) {
        fprintf(stderr,
                "wsync plan: --delta %s needs --delta-density F (the fraction of elements changed since "
                "the engines' base, 0.02 for 2%%)\n",
                o->delta);
        return 2;
    }
    wsync_delta_stats_from(n, (uint64_t)((double)n * o->delta_density + 0.5), w, &st);
    d->delta_wire = (double)st.bytes[st.chosen] / (double)(n * w);
    d->delta_base_copy = 1;
    return 0;
}

/* --quant fp8: the bytes that cross per byte of bf16 published: one byte
 * per two, plus one fp32 scale per 128 x 128 block (docs/FP8.md). */
#define FP8_WIRE_FRACTION (0.5 + 4.0 / (2.0 * 128 * 128))

static uint64_t fp8_bytes(const plan_predict_opts_t *o, uint64_t bf16)
{
    return o->quant ? (uint64_t)((double)bf16 * FP8_WIRE_FRACTION + 0.5) : bf16;
}

static int build_deploy(const plan_predict_opts_t *o, const cost_links_t *l, cost_deploy_t *d)
{
    cost_mem_t mem;
    cost_net_t net;
    int H = o->trainer_hosts, rc = pick_kinds(o, l, &mem, &net);
    if (rc != 0)
        return rc;
    if (o->quant && strcmp(o->quant, "fp8") != 0) {
        fprintf(stderr, "wsync plan: --quant: expected 'fp8' (block FP8, docs/FP8.md), got '%s'\n", o->quant);
        return 2;
    }
    if (H == 0)
        H = mem == COST_MEM_GPU && l->host_gpus > 0 ? (o->trainers + l->host_gpus - 1) / l->host_gpus : 1;
    if (H > o->trainers) {
        fprintf(stderr, "wsync plan: --trainer-hosts %d: more hosts than --trainers %d\n", H, o->trainers);
        return 2;
    }
    cost_deploy_init(d, o->trainers, H, o->engines, o->local_ranks, fp8_bytes(o, o->image), o->chunk, mem, net);
    d->quant_src_bytes = o->quant ? o->image : 0;
    d->tcp_conns = (int)wsync_setting_int(WSYNC_SET_TCP_CONNS);
    if (o->publish != NULL && strcmp(o->publish, "slot") != 0 && strcmp(o->publish, "single") != 0) {
        fprintf(stderr, "wsync plan: --publish: expected 'slot' or 'single' (single copy), got '%s'\n", o->publish);
        return 2;
    }
    d->slot_copy = o->publish != NULL && o->publish[0] == 's' && o->publish[1] == 'l';
    if (o->replica_gpus && o->tp_node) {
        fprintf(stderr, "wsync plan: --replica-gpus and --tp describe the ranks' bytes twice: give one\n");
        return 2;
    }
    if ((rc = apply_delta(o, d)) != 0)
        return rc;
    if (o->replica_gpus)
        return apply_replicas(o, d);
    if (o->tp_node) {
        d->node_bytes = fp8_bytes(o, o->tp_node);
        d->rank_land_bytes = fp8_bytes(o, o->tp_land);
        d->rank_hold_bytes = fp8_bytes(o, o->tp_hold);
        d->rank_copy_bytes = d->rank_hold_bytes > d->rank_land_bytes ? d->rank_hold_bytes - d->rank_land_bytes : 0;
        /* Targets: the trainers pack every put of a node plan into a stage, and a rank verifies its
         * segments once they all landed, against the trainers' segment digests. */
        d->pack_bytes = fp8_bytes(o, o->tp_node) * (uint64_t)o->engines;
        d->verify_after = 1;
    }
    if (net == COST_NET_LOCAL) { /* ranks sharing the trainers' GPU each land all they hold */
        d->rank_land_bytes = d->rank_hold_bytes;
        d->rank_copy_bytes = 0;
    }
    return 0;
}

static json_t *stage_json(const cost_stage_t *s)
{
    json_t *loads = json_array();
    int k;
    for (k = 0; k < s->nloads; k++) {
        const cost_load_t *ld = &s->loads[k];
        json_array_append_new(loads, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f}", "what", ld->what, "class",
                                               cost_class_name(ld->cls), "bytes", ld->bytes, "messages", ld->msgs,
                                               "rate_gbps", ld->rate / 1e9, "seconds", ld->seconds));
    }
    return json_pack("{s:s, s:s, s:f, s:i, s:f, s:s, s:o}", "name", s->name, "overlap",
                     s->pipelined ? "pipelined" : "serial", "units", s->units, "hops", s->hops, "seconds",
                     s->seconds, "bottleneck", s->nloads ? s->loads[s->bottleneck].what : "", "loads", loads);
}

static json_t *plan_json(const cost_plan_t *p)
{
    json_t *stages = json_array(), *bytes = json_object();
    int i;
    for (i = 0; i < p->nstages; i++)
        json_array_append_new(stages, stage_json(&p->stages[i]));
    for (i = 0; i < COST_CLASS_COUNT; i++)
        if (p->bytes_by_class[i] > 0)
            json_object_set_new(bytes, cost_class_name(i), json_real(p->bytes_by_class[i]));
    return json_pack("{s:s, s:f, s:s, s:b, s:b, s:s, s:o, s:o}", "name", p->name, "predicted_s", p->predicted_s,
                     "bottleneck", p->bottleneck, "runnable", p->runnable, "delta", p->delta, "landing",
                     p->landing, "bytes_by_class", bytes, "stages", stages);
}

static void print_plan(const cost_plan_t *p)
{
    double serial = 0;
    int i;
    printf("\n%s: %.1f ms%s, landing %s\n", p->name, p->predicted_s * 1e3,
           p->runnable ? "" : " (for comparison: not a runtime plan)", p->landing);
    printf("  %-9s %-10s %10s  %s\n", "STAGE", "OVERLAP", "TIME", "SLOWEST LOAD (bytes at rate)");
    for (i = 0; i < p->nstages; i++) {
        const cost_stage_t *s = &p->stages[i];
        const cost_load_t *ld = s->nloads ? &s->loads[s->bottleneck] : NULL;
        char ov[24];
        snprintf(ov, sizeof(ov), "%s", s->pipelined ? "pipelined" : "serial");
        if (s->pipelined && s->hops > 1)
            snprintf(ov, sizeof(ov), "pipe x%d", s->hops);
        printf("  %-9s %-10s %7.2f ms  ", s->name, ov, s->seconds * 1e3);
        if (ld && ld->bytes > 0)
            printf("%s: %.3f GB at %.1f GB/s (%s)\n", ld->what, ld->bytes / 1e9, ld->rate / 1e9,
                   cost_class_name(ld->cls));
        else if (ld)
            printf("%s: %.0f x %.0f us (%s)\n", ld->what, ld->msgs, ld->alpha_s * 1e6, cost_class_name(ld->cls));
        else
            printf("-\n");
        if (!s->pipelined)
            serial += s->seconds;
    }
    printf("  = %.2f ms serial (they add up) + %.2f ms pipelined (they overlap chunk by chunk: the slowest,\n"
           "  plus one chunk of each other per hop to fill and drain)\n  bytes by class:",
           serial * 1e3, (p->predicted_s - serial) * 1e3);
    for (i = 0; i < COST_CLASS_COUNT; i++)
        if (p->bytes_by_class[i] > 0)
            printf(" %s %.2f GB", cost_class_name(i), p->bytes_by_class[i] / 1e9);
    printf("\n");
}

static int run_plans(const plan_predict_opts_t *o, const char *path, const cost_links_t *l, const cost_deploy_t *d)
{
    cost_plan_t plans[COST_MAX_PLANS];
    cost_choice_t ch;
    size_t n = 0, i;
    wsync_status_t s = cost_predict(l, d, plans, COST_MAX_PLANS, &n);
    double floor_s = cost_floor_s(l, d);
    char a[32], b[32], c[32], e[32], f[32], g[32];
    if (s == WSYNC_OK)
        s = cost_choose(l, d, &ch);
    if (s != WSYNC_OK) {
        cli_report("plan", path, s);
        return 2;
    }
    if (o->json) {
        json_t *j = json_object(), *arr = json_array();
        char *text;
        for (i = 0; i < n; i++)
            json_array_append_new(arr, plan_json(&plans[i]));
        json_object_set_new(j, "links", json_string(path));
        json_object_set_new(j, "deployment",
                            json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:s, s:s}",
                                      "trainers", d->trainers, "trainer_hosts", d->trainer_hosts, "engines",
                                      d->engines, "local_ranks", d->local_ranks, "image_bytes",
                                      (json_int_t)d->image_bytes, "node_bytes", (json_int_t)d->node_bytes,
                                      "rank_land_bytes", (json_int_t)d->rank_land_bytes, "rank_copy_bytes",
                                      (json_int_t)d->rank_copy_bytes, "rank_hold_bytes",
                                      (json_int_t)d->rank_hold_bytes, "node_groups", d->node_groups, "chunk_bytes",
                                      (json_int_t)d->chunk_bytes, "memory",
                                      d->mem == COST_MEM_GPU ? "gpu" : "host", "transport", net_name(d->net)));
        json_object_set_new(j, "floor_s", json_real(floor_s));
        if (d->quant_src_bytes)
            json_object_set_new(j, "quant",
                                json_pack("{s:s, s:I, s:f}", "form", "fp8", "source_bytes",
                                          (json_int_t)d->quant_src_bytes, "wire_fraction", FP8_WIRE_FRACTION));
        json_object_set_new(j, "plans", arr);
        json_object_set_new(j, "chosen", json_string(ch.name));
        json_object_set_new(j, "chosen_delta", json_boolean(ch.delta));
        if (d->delta != COST_DELTA_OFF)
            json_object_set_new(j, "delta",
                                json_pack("{s:f, s:f, s:f, s:f}", "density", o->delta_density, "wire_fraction",
                                          d->delta_wire, "full_s", ch.full_s, "delta_s", fastest_delta(plans, n)));
        text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
        return 0;
    }
    printf("links       %s (%s)\n", path, l->machine[0] ? l->machine : "no machine named");
    printf("deployment  %d trainer rank%s on %d host%s -> %d engine node%s x %d rank%s, %s memory, %s transport\n",
           d->trainers, d->trainers == 1 ? "" : "s", d->trainer_hosts, d->trainer_hosts == 1 ? "" : "s",
           d->engines, d->engines == 1 ? "" : "s", d->local_ranks, d->local_ranks == 1 ? "" : "s",
           d->mem == COST_MEM_GPU ? "gpu" : "host", net_name(d->net));
    printf("bytes       image %s; a node needs %s, a rank lands %s, copies %s, holds %s; chunks of %s\n",
           wsync_fmt_size(d->image_bytes, a, sizeof(a)), wsync_fmt_size(d->node_bytes, b, sizeof(b)),
           wsync_fmt_size(d->rank_land_bytes, c, sizeof(c)), wsync_fmt_size(d->rank_copy_bytes, e, sizeof(e)),
           wsync_fmt_size(d->rank_hold_bytes, f, sizeof(f)), wsync_fmt_size(d->chunk_bytes, g, sizeof(g)));
    printf("floor       %.1f ms (a node's distinct bytes over its adapters)\n", floor_s * 1e3);
    if (d->quant_src_bytes)
        printf("quant       fp8: the trainers publish %s of bf16 and quantize it (128 x 128 blocks, fp32 "
               "scales); the image above is the FP8 + scales\n",
               wsync_fmt_size(d->quant_src_bytes, a, sizeof(a)));
    if (d->delta != COST_DELTA_OFF)
        printf("delta       %.2f%% of %u-byte elements changed: the wire carries %.4f of the bytes (%s)\n",
               o->delta_density * 100,
               o->delta_width ? o->delta_width
               : o->quant     ? 1
                              : 2,
               d->delta_wire,
               d->delta == COST_DELTA_ON ? "delta plans only" : "full and delta plans, the faster chosen");
    printf("\n");
    printf("%-12s %12s  %s\n", "PLAN", "PREDICTED", "BOTTLENECK");
    for (i = 0; i < n; i++)
        printf("%-12s %9.1f ms  %s%s\n", plans[i].name, plans[i].predicted_s * 1e3, plans[i].bottleneck,
               plans[i].runnable ? "" : " (comparison)");
    for (i = 0; i < n; i++)
        print_plan(&plans[i]);
    printf("\nchosen      %s%s (%.1f ms, %.2fx the floor): what plan=auto runs\n", ch.name,
           ch.delta ? " with delta pulls" : "", ch.predicted_s * 1e3, floor_s > 0 ? ch.predicted_s / floor_s : 0);
    if (d->delta == COST_DELTA_AUTO)
        printf("delta       auto chooses %s: %.1f ms as deltas against %.1f ms full (the fastest runnable plan of "
               "each)\n",
               ch.delta ? "deltas" : "full pieces", fastest_delta(plans, n) * 1e3, ch.full_s * 1e3);
    return 0;
}

static int run_scenarios(const plan_predict_opts_t *o, const char *path, const cost_links_t *l)
{
    json_t *arr = json_array();
    cost_ref_shape_t sh = {.gpus = o->local_ranks,
                           .bytes = o->image,
                           .tensors = (int)((o->image + o->chunk - 1) / o->chunk)};
    int sc, m, k, rc = 0;
    if (!o->json)
        printf("reference scenarios on %s: 2 hosts x %d GPUs, %.2f GB in %d tensors (incast: %.2f GB per sender)\n"
               "%-18s %-7s %-8s %12s  %s\n",
               path, sh.gpus, (double)o->image / 1e9, sh.tensors, (double)o->image / sh.gpus / 1e9, "SCENARIO",
               "METHOD", "SENDERS", "PREDICTED", "BOTTLENECK");
    for (sc = 0; sc < COST_SC_COUNT && rc == 0; sc++)
        for (m = 0; m < 2 && rc == 0; m++)
            for (k = 1; k <= (sc == COST_SC_INCAST ? sh.gpus : 1) && rc == 0; k *= 2) {
                cost_net_t net = m == 0 ? COST_NET_STAGED : COST_NET_PUT;
                cost_ref_shape_t s2 = sh;
                cost_plan_t p;
                double gbps = 0;
                wsync_status_t st;
                if (sc == COST_SC_INCAST) {
                    s2.bytes = o->image / sh.gpus;
                    s2.senders = k;
                    s2.tensors = 1;
                }
                st = cost_scenario(l, sc, net, &s2, &p);
                if (st != WSYNC_OK) {
                    cli_report("plan", path, st);
                    rc = 2;
                    break;
                }
                if (sc == COST_SC_INCAST)
                    gbps = (double)s2.bytes * k / p.predicted_s / 1e9;
                if (o->json)
                    json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:f, s:f, s:s}", "name", p.name,
                                                         "method", net_name(net), "senders",
                                                         sc == COST_SC_INCAST ? k : 0, "predicted_s",
                                                         p.predicted_s, "gbps", gbps, "bottleneck", p.bottleneck));
                else if (sc == COST_SC_INCAST)
                    printf("%-18s %-7s %-8d %7.1f GB/s  %s\n", p.name, net_name(net), k, gbps, p.bottleneck);
                else
                    printf("%-18s %-7s %-8s %9.1f ms  %s\n", p.name, net_name(net), "-", p.predicted_s * 1e3,
                           p.bottleneck);
            }
    if (rc == 0 && o->json) {
        json_t *j = json_pack("{s:s, s:o}", "links", path, "scenarios", arr);
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    } else {
        json_decref(arr);
    }
    return rc;
}

int plan_predict_run(const plan_predict_opts_t *o)
{
    const char *path = o->links ? o->links : wsync_setting_str(WSYNC_SET_LINKS);
    cost_links_t links;
    cost_deploy_t d;
    wsync_status_t s;
    int rc;
    if (path == NULL || path[0] == '\0') {
        fprintf(stderr, "wsync plan: --predict needs a links file: --links FILE (configs/links/, or one "
                        "`wsync calibrate` wrote), or the links setting\n");
        return 2;
    }
    s = cost_links_load(path, &links);
    if (s != WSYNC_OK) {
        cli_report("plan", "--links", s);
        return s == WSYNC_ERR_NOMEM ? 1 : 2;
    }
    if (o->scenarios)
        return run_scenarios(o, path, &links);
    rc = build_deploy(o, &links, &d);
    return rc != 0 ? rc : run_plans(o, path, &links, &d);
}
