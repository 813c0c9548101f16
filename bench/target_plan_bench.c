/* target_plan_bench.c: how long the engine-layout steps take on big models:
 * the T targets by the built-in rules and one node's plan over them (T ranks,
 * one TP group), for Qwen2.5-7B's tensor list and for an MoE model of ~100k
 * tensors, under even and fsdp trainer layouts of 8 ranks.
 * Times are the process's CPU time (the build is single-threaded, so on an
 * idle host it is the wall time; on a shared one it leaves out the waiting).
 * Usage: target_plan_bench [T, default 8] [repeats, default 3]; best of repeats. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/qwen7b.h"
#include "common/targets/rules.h"
#include "common/targets/target_plan.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* 24 layers of attention, a router and 1384 experts of [16, 256] / [256, 16]:
 * 99,794 tensors. */
static wsync_status_t moe_manifest(wsync_manifest_t **out)
{
    wsync_manifest_t *m = NULL;
    wsync_status_t st = wsync_manifest_create(&m);
    char n[128];
    int l, e;
#define ADD(nd, a, b)                                                 \
    do {                                                              \
        int64_t sh_[2] = {a, b};                                      \
        if (st == WSYNC_OK)                                           \
            st = wsync_manifest_add(m, n, WSYNC_DTYPE_BF16, nd, sh_); \
    } while (0)
    snprintf(n, sizeof(n), "model.embed_tokens.weight");
    ADD(2, 4096, 256);
    for (l = 0; l < 24; l++) {
        snprintf(n, sizeof(n), "model.layers.%d.input_layernorm.weight", l);
        ADD(1, 256, 0);
        snprintf(n, sizeof(n), "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(2, 256, 256);
        snprintf(n, sizeof(n), "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(2, 64, 256);
        snprintf(n, sizeof(n), "model.layers.%d.self_attn.v_proj.weight", l);
        ADD(2, 64, 256);
        snprintf(n, sizeof(n), "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(2, 256, 256);
        snprintf(n, sizeof(n), "model.layers.%d.mlp.gate.weight", l);
        ADD(2, 1384, 256);
        for (e = 0; e < 1384; e++) {
            snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
            ADD(2, 16, 256);
            snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
            ADD(2, 16, 256);
            snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
            ADD(2, 256, 16);
        }
    }
    snprintf(n, sizeof(n), "lm_head.weight");
    ADD(2, 4096, 256);
#undef ADD
    if (st != WSYNC_OK) {
        wsync_manifest_free(m);
        return st;
    }
    *out = m;
    return WSYNC_OK;
}

static int run(const char *what, const wsync_manifest_t *m, int T, int repeats)
{
    wsync_target_t **t = calloc((size_t)T, sizeof(*t));
    const wsync_target_t **tp = calloc((size_t)T, sizeof(*tp));
    double best_t = 1e30, best_p[2] = {1e30, 1e30};
    wsync_node_plan_t *np[2] = {NULL, NULL};
    int i, r, k;
    for (i = 0; i < repeats; i++) {
        double t0 = now_ms();
        for (r = 0; r < T; r++) {
            wsync_target_free(t[r]);
            if (wsync_target_from_rules(m, NULL, T, r, &t[r]) != WSYNC_OK) {
                fprintf(stderr, "%s: %s\n", what, wsync_last_error());
                return 1;
            }
            tp[r] = t[r];
        }
        if (now_ms() - t0 < best_t)
            best_t = now_ms() - t0;
        for (k = 0; k < 2; k++) {
            wsync_layout_t *l = NULL;
            if ((k ? wsync_layout_fsdp(m, 8, &l) : wsync_layout_even(m->image_size, 8, &l)) != WSYNC_OK)
                return 1;
            wsync_node_plan_free(np[k]);
            t0 = now_ms();
            if (wsync_node_plan_build(m, l, T, tp, WSYNC_DEFAULT_CHUNK, NULL, &np[k]) != WSYNC_OK) {
                fprintf(stderr, "%s: %s\n", what, wsync_last_error());
                return 1;
            }
            if (now_ms() - t0 < best_p[k])
                best_p[k] = now_ms() - t0;
            wsync_layout_free(l);
        }
    }
    printf("%-22s %7zu tensors  T=%-2d  %d targets %8.1f ms CPU", what, m->ntensors, T, T, best_t);
    for (k = 0; k < 2; k++)
        printf("  | plan (%s 8) %7.1f ms CPU: %u chunks %zu puts %zu runs %zu copies", k ? "fsdp" : "even",
               best_p[k], np[k]->nchunks, np[k]->nputs, np[k]->nruns, np[k]->ncopies);
    printf("\n");
    for (k = 0; k < 2; k++)
        wsync_node_plan_free(np[k]);
    for (r = 0; r < T; r++)
        wsync_target_free(t[r]);
    free(t);
    free(tp);
    return 0;
}

int main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 8, repeats = argc > 2 ? atoi(argv[2]) : 3, rc = 0;
    wsync_manifest_t *m = NULL;
    if (T < 1 || repeats < 1) {
        fprintf(stderr, "usage: target_plan_bench [T] [repeats]\n");
        return 2;
    }
    if (qwen7b_manifest(&m) != WSYNC_OK)
        return 1;
    rc |= run("Qwen2.5-7B", m, T, repeats);
    wsync_manifest_free(m);
    if (moe_manifest(&m) != WSYNC_OK)
        return 1;
    rc |= run("MoE, 100k tensors", m, T, repeats);
    wsync_manifest_free(m);
    return rc;
}
