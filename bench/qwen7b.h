/* qwen7b.h: the GPU benchmarks' model: Qwen2.5-7B's real tensor list (28
 * layers, hidden 3584, intermediate 18944, 28 heads / 4 KV heads of dim 128,
 * vocab 152064, bf16, untied lm_head; 339 tensors, 15.23 GB) as a manifest.
 * qwen7b_manifest_scaled(div) keeps the names and the shape ratios with every
 * size (hidden, intermediate, KV width, vocab) divided by `div` (a power of 2
 * up to 256 keeps each of them even): bytes shrink by div^2. */
#ifndef WSYNC_BENCH_QWEN7B_H
#define WSYNC_BENCH_QWEN7B_H

#include <stdio.h>

#include "common/model/manifest.h"

static inline wsync_status_t qwen7b_manifest_scaled(int64_t div, wsync_manifest_t **out)
{
    const int64_t H = 3584 / div, I = 18944 / div, V = 152064 / div, KV = 4 * 128 / div;
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    char n[128];
    int l;
#define QW_ADD(name, nd, ...)                                                          \
    do {                                                                               \
        int64_t sh_[] = {__VA_ARGS__};                                                 \
        if ((st = wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, nd, sh_)) != WSYNC_OK) \
            goto fail;                                                                 \
    } while (0)
#define QW_L(s) (snprintf(n, sizeof(n), "model.layers.%d.%s", l, s), n)
    if ((st = wsync_manifest_create(&m)) != WSYNC_OK)
        return st;
    QW_ADD("model.embed_tokens.weight", 2, V, H);
    for (l = 0; l < 28; l++) {
        QW_ADD(QW_L("input_layernorm.weight"), 1, H);
        QW_ADD(QW_L("self_attn.q_proj.weight"), 2, H, H);
        QW_ADD(QW_L("self_attn.q_proj.bias"), 1, H);
        QW_ADD(QW_L("self_attn.k_proj.weight"), 2, KV, H);
        QW_ADD(QW_L("self_attn.k_proj.bias"), 1, KV);
        QW_ADD(QW_L("self_attn.v_proj.weight"), 2, KV, H);
        QW_ADD(QW_L("self_attn.v_proj.bias"), 1, KV);
        QW_ADD(QW_L("self_attn.o_proj.weight"), 2, H, H);
        QW_ADD(QW_L("post_attention_layernorm.weight"), 1, H);
        QW_ADD(QW_L("mlp.gate_proj.weight"), 2, I, H);
        QW_ADD(QW_L("mlp.up_proj.weight"), 2, I, H);
        QW_ADD(QW_L("mlp.down_proj.weight"), 2, H, I);
    }
    QW_ADD("model.norm.weight", 1, H);
    QW_ADD("lm_head.weight", 2, V, H);
#undef QW_ADD
#undef QW_L
    *out = m;
    return WSYNC_OK;
fail:
    wsync_manifest_free(m);
    return st;
}

static inline wsync_status_t qwen7b_manifest(wsync_manifest_t **out)
{
    return qwen7b_manifest_scaled(1, out);
}

#endif
