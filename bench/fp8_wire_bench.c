/* fp8_wire_bench.c: bytes on the wire per version for an FP8 node (issue
 * 29's target: <= 0.51 of BF16). DeepSeek-V3's tensor list (MLA attention,
 * 3 dense layers, 58 MoE layers of 256 experts and a shared expert, 129280 x
 * 7168 embeddings and lm_head), published in BF16 by W trainer ranks
 * (fsdp), pulled by a node of T ranks with the FP8 rules
 * (configs/rules/deepseek-fp8.json, TP/EP T) and by one with the built-in
 * BF16 rules: the node plan's network bytes of each (what crosses into the
 * node: codes + scales + the BF16 rows of bands an FSDP boundary cuts +
 * the BF16 tensors), and their ratio. The plans are built for the
 * embeddings alone, + one dense layer, + one MoE layer, and scaled to 61
 * layers (every layer of a kind moves the same bytes).
 * Usage: fp8_wire_bench [RULES.json, default configs/rules/deepseek-fp8.json] [T, default 8] [W, default 8]
 *                       [fsdp|even, default fsdp] [full]
 * With `full`, also the node plan of the whole 61-layer list (45k FP8
 * tensors) under the FP8 rules: its bytes, and the time to build the T
 * targets and the plan (CPU time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/model/plan.h"
#include "common/targets/rules.h"
#include "common/targets/target_plan.h"

#define H 7168

static int add(wsync_manifest_t *m, const char *name, int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, c ? 2 : 1, s) != WSYNC_OK;
}

/* The embeddings, then `dense` dense layers and `moe` MoE layers. */
static wsync_manifest_t *deepseek(int dense, int moe)
{
    wsync_manifest_t *m = NULL;
    char n[160];
    int l, e, bad = 0;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    bad |= add(m, "model.embed_tokens.weight", 129280, H);
    for (l = 0; l < dense + moe; l++) {
#define T2(suffix, r, c) (snprintf(n, sizeof(n), "model.layers.%d.%s", l, suffix), bad |= add(m, n, r, c))
        T2("input_layernorm.weight", H, 0);
        T2("self_attn.q_a_proj.weight", 1536, H);
        T2("self_attn.q_a_layernorm.weight", 1536, 0);
        T2("self_attn.q_b_proj.weight", 128 * 192, 1536);
        T2("self_attn.kv_a_proj_with_mqa.weight", 576, H);
        T2("self_attn.kv_a_layernorm.weight", 512, 0);
        T2("self_attn.kv_b_proj.weight", 128 * 256, 512);
        T2("self_attn.o_proj.weight", H, 128 * 128);
        T2("post_attention_layernorm.weight", H, 0);
        if (l < dense) {
            T2("mlp.gate_proj.weight", 18432, H);
            T2("mlp.up_proj.weight", 18432, H);
            T2("mlp.down_proj.weight", H, 18432);
            continue;
        }
        T2("mlp.gate.weight", 256, H);
        for (e = 0; e < 256; e++) {
            char s[80];
            snprintf(s, sizeof(s), "mlp.experts.%d.gate_proj.weight", e);
            T2(s, 2048, H);
            snprintf(s, sizeof(s), "mlp.experts.%d.up_proj.weight", e);
            T2(s, 2048, H);
            snprintf(s, sizeof(s), "mlp.experts.%d.down_proj.weight", e);
            T2(s, H, 2048);
        }
        T2("mlp.shared_experts.gate_proj.weight", 2048, H);
        T2("mlp.shared_experts.up_proj.weight", 2048, H);
        T2("mlp.shared_experts.down_proj.weight", H, 2048);
#undef T2
    }
    bad |= add(m, "model.norm.weight", H, 0);
    bad |= add(m, "lm_head.weight", 129280, H);
    if (bad) {
        fprintf(stderr, "fp8_wire_bench: manifest: %s\n", wsync_last_error());
        wsync_manifest_free(m);
        return NULL;
    }
    return m;
}

/* Network bytes into a node of T ranks with `rules`, W fsdp trainer ranks. */
static int even_layout;

static int node_bytes(const wsync_manifest_t *m, const wsync_rules_t *rules, int T, int W, uint64_t *bytes)
{
    wsync_layout_t *lay = NULL;
    wsync_target_t **tg = calloc((size_t)T, sizeof(*tg));
    wsync_node_plan_t *np = NULL;
    int k, ok = tg != NULL && (even_layout ? wsync_layout_even(m->image_size, W, &lay)
                                           : wsync_layout_fsdp(m, W, &lay)) == WSYNC_OK;
    for (k = 0; ok && k < T; k++)
        ok = wsync_target_from_rules(m, rules, T, k, &tg[k]) == WSYNC_OK;
    ok = ok &&
         wsync_node_plan_build(m, lay, T, (const wsync_target_t *const *)tg, 64ULL << 20, NULL, &np) == WSYNC_OK;
    if (ok)
        *bytes = np->network_bytes;
    else
        fprintf(stderr, "fp8_wire_bench: %s\n", wsync_last_error());
    wsync_node_plan_free(np);
    for (k = 0; tg && k < T; k++)
        wsync_target_free(tg[k]);
    free(tg);
    wsync_layout_free(lay);
    return ok;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        (b = malloc((size_t)n + 1)) == NULL || fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    } else {
        *len = (size_t)n;
    }
    if (f)
        fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "configs/rules/deepseek-fp8.json";
    const int T = argc > 2 ? atoi(argv[2]) : 8, W = argc > 3 ? atoi(argv[3]) : 8;
    const int shapes[3][2] = {{0, 0}, {1, 0}, {1, 1}};
    uint64_t f8[3], bf[3], f8t, bft;
    wsync_rules_t *rules = NULL;
    size_t len = 0;
    char *text = slurp(path, &len);
    int i;
    even_layout = argc > 4 && strcmp(argv[4], "even") == 0;
    if (text == NULL || wsync_rules_from_json(text, len, &rules) != WSYNC_OK) {
        fprintf(stderr, "fp8_wire_bench: rules %s: %s\n", path, text ? wsync_last_error() : "cannot read it");
        return 1;
    }
    for (i = 0; i < 3; i++) {
        wsync_manifest_t *m = deepseek(shapes[i][0], shapes[i][1]);
        if (m == NULL || !node_bytes(m, rules, T, W, &f8[i]) || !node_bytes(m, wsync_rules_builtin(), T, W, &bf[i]))
            return 1;
        printf("%-28s FP8 node %14llu bytes, BF16 node %14llu bytes: %.4f\n",
               i == 0   ? "embeddings, norm, lm_head"
               : i == 1 ? "+ 1 dense layer"
                        : "+ 1 MoE layer",
               (unsigned long long)f8[i], (unsigned long long)bf[i], (double)f8[i] / (double)bf[i]);
        wsync_manifest_free(m);
    }
    f8t = f8[0] + 3 * (f8[1] - f8[0]) + 58 * (f8[2] - f8[1]);
    bft = bf[0] + 3 * (bf[1] - bf[0]) + 58 * (bf[2] - bf[1]);
    printf("dense layer  %.4f of BF16; MoE layer %.4f of BF16\n",
           (double)(f8[1] - f8[0]) / (double)(bf[1] - bf[0]), (double)(f8[2] - f8[1]) / (double)(bf[2] - bf[1]));
    printf("DeepSeek-V3 (61 layers), %d %s trainer ranks -> TP/EP %d node: FP8 %.1f GB, BF16 %.1f GB on the "
           "wire "
           "per version: %.4f of BF16\n",
           W, even_layout ? "even" : "fsdp", T, (double)f8t / 1e9, (double)bft / 1e9, (double)f8t / (double)bft);
    if (argc > 5 && strcmp(argv[5], "full") == 0) {
        wsync_manifest_t *m = deepseek(3, 58);
        struct timespec a, b;
        uint64_t full = 0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        if (m == NULL || !node_bytes(m, rules, T, W, &full))
            return 1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        printf("full list: %zu tensors, FP8 node %.1f GB (scaled above: %.1f GB), targets + plan in %.2f s\n",
               m->ntensors, (double)full / 1e9, (double)f8t / 1e9,
               (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
        wsync_manifest_free(m);
    }
    wsync_rules_free(rules);
    free(text);
    return 0;
}
