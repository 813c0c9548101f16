/* target_json_fuzz.c: libFuzzer target for the engine-layout readers a
 * trainer runs on what any engine sends: a target in JSON (pull requests
 * carry their definitions) and a rules file (engines read --rules, the node
 * board carries them between ranks). The first byte picks the reader; for
 * rules the second gives the TP size. Against a small Qwen-shaped manifest:
 * whatever the bytes, reading fails with a message, or gives a target that
 * survives its own round trip with the same digest and whose byte runs stay
 * inside its destination image (FP8 destinations: it has none yet). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/model/manifest.h"
#include "common/targets/rules.h"
#include "common/targets/target.h"

static const char manifest_json[] =
    "{\"image_size\": 12288, \"tensors\": ["
    "{\"name\": \"model.embed_tokens.weight\", \"dtype\": \"BF16\", \"shape\": [100, 16], \"offset\": 0, "
    "\"size\": 3200},"
    "{\"name\": \"model.layers.0.self_attn.q_proj.weight\", \"dtype\": \"BF16\", \"shape\": [16, 16], \"offset\": "
    "3328,"
    " \"size\": 512},"
    "{\"name\": \"model.layers.0.self_attn.k_proj.weight\", \"dtype\": \"BF16\", \"shape\": [8, 16], \"offset\": "
    "3840,"
    " \"size\": 256},"
    "{\"name\": \"model.layers.0.self_attn.v_proj.weight\", \"dtype\": \"BF16\", \"shape\": [8, 16], \"offset\": "
    "4096,"
    " \"size\": 256},"
    "{\"name\": \"model.layers.0.self_attn.q_proj.bias\", \"dtype\": \"BF16\", \"shape\": [16], \"offset\": 4352, "
    "\"size\": 32},"
    "{\"name\": \"model.layers.0.self_attn.o_proj.weight\", \"dtype\": \"BF16\", \"shape\": [16, 16], \"offset\": "
    "4608,"
    " \"size\": 512},"
    "{\"name\": \"model.layers.0.mlp.gate_proj.weight\", \"dtype\": \"BF16\", \"shape\": [32, 16], \"offset\": "
    "5120,"
    " \"size\": 1024},"
    "{\"name\": \"model.layers.0.mlp.up_proj.weight\", \"dtype\": \"BF16\", \"shape\": [32, 16], \"offset\": 6144,"
    " \"size\": 1024},"
    "{\"name\": \"model.layers.0.mlp.down_proj.weight\", \"dtype\": \"BF16\", \"shape\": [16, 32], \"offset\": "
    "7168,"
    " \"size\": 1024},"
    "{\"name\": \"model.layers.0.mlp.experts.0.gate_proj.weight\", \"dtype\": \"BF16\", \"shape\": [8, 16],"
    " \"offset\": 8192, \"size\": 256},"
    "{\"name\": \"model.layers.0.mlp.experts.1.gate_proj.weight\", \"dtype\": \"BF16\", \"shape\": [8, 16],"
    " \"offset\": 8448, \"size\": 256},"
    "{\"name\": \"model.norm.weight\", \"dtype\": \"F32\", \"shape\": [16], \"offset\": 8704, \"size\": 64},"
    "{\"name\": \"lm_head.weight\", \"dtype\": \"BF16\", \"shape\": [100, 16], \"offset\": 8960, \"size\": "
    "3200}]}";

static wsync_manifest_t *manifest(void)
{
    static wsync_manifest_t *m;
    if (m == NULL) {
        json_t *j = json_loads(manifest_json, 0, NULL);
        if (j == NULL || wsync_manifest_from_json(j, &m) != WSYNC_OK) {
            fprintf(stderr, "target_json_fuzz: its manifest: %s\n", wsync_last_error());
            abort();
        }
        json_decref(j);
    }
    return m;
}

/* An accepted target: the same digest after a round trip; runs inside it. */
static void check_target(const wsync_manifest_t *m, const wsync_target_t *t)
{
    wsync_target_t *back = NULL;
    wsync_run2d_t *runs = NULL;
    size_t n = 0, k;
    int fp8 = 0;
    json_t *j = NULL;
    if (wsync_target_to_json(t, m, &j) != WSYNC_OK || wsync_target_from_json_obj(m, j, &back) != WSYNC_OK ||
        strcmp(back->digest_hex, t->digest_hex) != 0 || back->image_size != t->image_size)
        abort();
    for (k = 0; k < t->ndests; k++)
        fp8 |= t->dests[k].is_fp8;
    if (wsync_target_runs(t, m, &runs, &n) != (fp8 ? WSYNC_ERR_UNSUPPORTED : WSYNC_OK))
        abort(); /* FP8 destinations have no byte runs until the plan moves them */
    for (k = 0; k < n; k++)
        if (runs[k].rows && runs[k].row_bytes &&
            (runs[k].dst_off + runs[k].rows * runs[k].row_bytes > t->image_size ||
             runs[k].src_off + (runs[k].rows - 1) * runs[k].src_stride + runs[k].row_bytes > m->image_size))
            abort();
    free(runs);
    json_decref(j);
    wsync_target_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const wsync_manifest_t *m = manifest();
    wsync_target_t *t = NULL;
    wsync_rules_t *rules = NULL;
    int tp, k;
    if (size < 2)
        return 0;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    if (data[0] % 2 == 0) {
        if (wsync_target_from_json(m, (const char *)data + 1, size - 1, &t) == WSYNC_OK)
            check_target(m, t);
        wsync_target_free(t);
        return 0;
    }
    tp = 1 + data[1] % 8;
    if (wsync_rules_from_json((const char *)data + 2, size - 2, &rules) != WSYNC_OK)
        return 0;
    for (k = 0; k < tp; k++) {
        t = NULL;
        if (wsync_target_from_rules(m, rules, tp, k, &t) == WSYNC_OK)
            check_target(m, t);
        wsync_target_free(t);
    }
    wsync_rules_free(rules);
    return 0;
}
