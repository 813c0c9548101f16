/* target_fp8_test.c: FP8 destinations (docs/FP8.md, docs/TARGETS.md): a
 * destination made FP8 by hand gets its scale tensor (name, F32, shape
 * rounded up per block, the next aligned offset); the JSON form carries
 * "quant" and gives back the same target and digest; the DeepSeek rules
 * (configs/rules/deepseek-fp8*.json) make every linear weight FP8 with its
 * scale and keep embeddings, norms, router and lm_head BF16, for TP 1, 2
 * and 4, shapes computed here from the TP arithmetic; a TP slice that cuts a
 * block is refused naming the tensor, the dimension and the block; F16
 * sources, 1-D destinations and bad "quant" objects are refused; the plain
 * byte mapping refuses FP8 destinations (fp8_wire_test has theirs); bands (fp8_bands.h) tile every
 * FP8 destination and its scales and, quantized one by one, equal the
 * destination image wsync_target_fill_host makes, a NaN named by its source
 * tensor, row and column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model/manifest.h"
#include "common/targets/fp8_bands.h"
#include "common/targets/rules.h"
#include "common/targets/target.h"
#include "tests/test.h"

static wsync_manifest_t *manifest_2d(const char *name, wsync_dtype_t dt, int64_t r, int64_t c)
{
    wsync_manifest_t *m = NULL;
    int64_t s[2] = {r, c};
    if (wsync_manifest_create(&m) != WSYNC_OK || wsync_manifest_add(m, "norm", WSYNC_DTYPE_BF16, 1, s) != WSYNC_OK ||
        wsync_manifest_add(m, name, dt, 2, s) != WSYNC_OK) {
        wsync_manifest_free(m);
        return NULL;
    }
    return m;
}

static void by_hand_gets_its_scale_tensor(void)
{
    wsync_manifest_t *m = manifest_2d("w", WSYNC_DTYPE_BF16, 300, 200);
    wsync_target_t *t = NULL, *back = NULL;
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    wsync_block_t b = {.src = 1, .src_stop = {300, 200}};
    int64_t shape[2] = {300, 200};
    json_t *j = NULL;
    char *text = NULL;
    CHECK(m != NULL);
    CHECK_OK(wsync_target_create(&t));
    CHECK_OK(wsync_target_add_dest(t, "w", WSYNC_DTYPE_F8_E4M3, 2, shape));
    CHECK_OK(wsync_target_add_block(t, &b));
    CHECK_OK(wsync_target_set_fp8(t, &spec, NULL));
    CHECK_OK(wsync_target_finish(t, m));
    CHECK_EQ(t->ndests, 2);
    CHECK_STR(t->dests[1].name, "w_scale_inv");
    CHECK_EQ(t->dests[1].dtype, WSYNC_DTYPE_F32);
    CHECK_EQ(t->dests[1].shape[0], 3);   /* ceil(300 / 128) */
    CHECK_EQ(t->dests[1].shape[1], 2);   /* ceil(200 / 128) */
    CHECK_EQ(t->dests[1].offset, 60160); /* 300 * 200 = 60000 bytes, aligned up to 256 */
    CHECK_EQ(t->covered_bytes, 60000 + 24);
    CHECK(t->dests[0].is_fp8 && t->dests[1].is_scale && t->dests[0].scale_dest == 1);
    CHECK_OK(wsync_target_to_json(t, m, &j));
    text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(text &&
          strstr(text, "\"quant\":{\"block\":[128,128],\"dtype\":\"float8_e4m3fn\",\"scale\":\"w_scale_inv\","
                       "\"scale_form\":\"fp32\"}"));
    CHECK(text && strstr(text, "\"name\":\"w_scale_inv\"") == NULL); /* implied, not listed */
    CHECK_OK(wsync_target_from_json(m, text, strlen(text), &back));
    CHECK(back && memcmp(back->digest, t->digest, 16) == 0 && back->ndests == 2);
    free(text);
    json_decref(j);
    wsync_target_free(back);
    wsync_target_free(t);
    wsync_manifest_free(m);
}

static wsync_status_t from_json(const wsync_manifest_t *m, const char *quant, int64_t rows, const char *more)
{
    char json[1024];
    wsync_target_t *t = NULL;
    wsync_status_t st;
    snprintf(json, sizeof(json),
             "{\"version\":1,\"tensors\":[{\"name\":\"w\",\"dtype\":\"F8_E4M3\",\"shape\":[%lld,200],\"quant\":%s,"
             "\"blocks\":[{\"src\":\"w\",\"src_start\":[0,0],\"src_stop\":[%lld,200]%s}]}]}",
             (long long)rows, quant, (long long)rows, more);
    st = wsync_target_from_json(m, json, strlen(json), &t);
    wsync_target_free(t);
    return st;
}

static void bad_requests_are_refused_naming_them(void)
{
    wsync_manifest_t *m = manifest_2d("w", WSYNC_DTYPE_BF16, 300, 200),
                     *h = manifest_2d("w", WSYNC_DTYPE_F16, 300, 200);
    const char *q = "{\"dtype\":\"float8_e4m3fn\"}";
    CHECK(m && h);
    CHECK_OK(from_json(m, q, 300, ""));
    CHECK_OK(from_json(m, "{\"dtype\":\"float8_e4m3fn\",\"block\":[1,32],\"scale_form\":\"ue8m0\"}", 300, ""));
    CHECK_FAILS(from_json(h, q, 300, ""), WSYNC_ERR_INVALID, "reads F16 tensor 'w': only BF16 and F32");
    CHECK_FAILS(from_json(m, "{\"dtype\":\"float8_e5m2\"}", 300, ""), WSYNC_ERR_FORMAT, "must be \"float8_e4m3fn\"");
    CHECK_FAILS(from_json(m, "{\"dtype\":\"float8_e4m3fn\",\"block\":[0,128]}", 300, ""), WSYNC_ERR_FORMAT,
                "\"block\" must be [rows, columns]");
    CHECK_FAILS(from_json(m, "{\"dtype\":\"float8_e4m3fn\",\"scale_form\":\"e8m0\"}", 300, ""), WSYNC_ERR_FORMAT,
                "\"scale_form\" must be \"fp32\" or \"ue8m0\"");
    CHECK_FAILS(from_json(m, "{\"dtype\":\"float8_e4m3fn\",\"blocks\":[1,1]}", 300, ""), WSYNC_ERR_FORMAT,
                "unknown key \"blocks\"");
    /* rows [0, 200) of 300 into a 200-row destination: the box ends at the
     * destination's end but not the source's, so block 1 (rows 128..255 of
     * the source) would be cut at 200 */
    CHECK_FAILS(from_json(m, q, 200, ""), WSYNC_ERR_INVALID,
                "FP8 destination 'w' (dim 0, blocks of 128 rows) takes rows [0, 200) of 'w' (dim 0)");
    /* rows from 64: off the grid */
    CHECK_FAILS(from_json(m, q, 236, ",\"src_start\":[64,0],\"src_stop\":[300,200]"), WSYNC_ERR_INVALID,
                "cutting a 128-row block");
    wsync_manifest_free(m);
    wsync_manifest_free(h);
}

/* A DeepSeek-shaped model: H 256, 2 layers, the first dense, the second
 * with 4 experts of I 128 and a router. */
static wsync_manifest_t *deepseek(int64_t q_rows, int64_t kv_rows)
{
    wsync_manifest_t *m = NULL;
    char n[128];
    int l, e;
    int64_t emb[2] = {1000, 256}, norm[1] = {256}, q[2] = {q_rows, 256}, kv[2] = {kv_rows, 256},
            o[2] = {256, q_rows};
    int64_t up[2] = {512, 256}, down[2] = {256, 512}, eu[2] = {128, 256}, ed[2] = {256, 128}, gate[2] = {4, 256};
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
#define ADD(name, nd, shape) (void)(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, nd, shape))
    ADD("model.embed_tokens.weight", 2, emb);
    for (l = 0; l < 2; l++) {
#define L(suffix) (snprintf(n, sizeof(n), "model.layers.%d.%s", l, suffix), n)
        ADD(L("input_layernorm.weight"), 1, norm);
        ADD(L("self_attn.q_proj.weight"), 2, q);
        ADD(L("self_attn.k_proj.weight"), 2, kv);
        ADD(L("self_attn.v_proj.weight"), 2, kv);
        ADD(L("self_attn.o_proj.weight"), 2, o);
        ADD(L("post_attention_layernorm.weight"), 1, norm);
        if (l == 0) {
            ADD(L("mlp.gate_proj.weight"), 2, up);
            ADD(L("mlp.up_proj.weight"), 2, up);
            ADD(L("mlp.down_proj.weight"), 2, down);
            continue;
        }
        ADD(L("mlp.gate.weight"), 2, gate);
        for (e = 0; e < 4; e++) {
            char part[64];
            snprintf(part, sizeof(part), "mlp.experts.%d.gate_proj.weight", e);
            ADD(L(part), 2, eu);
            snprintf(part, sizeof(part), "mlp.experts.%d.up_proj.weight", e);
            ADD(L(part), 2, eu);
            snprintf(part, sizeof(part), "mlp.experts.%d.down_proj.weight", e);
            ADD(L(part), 2, ed);
        }
#undef L
    }
    ADD("model.norm.weight", 1, norm);
    ADD("lm_head.weight", 2, emb);
#undef ADD
    return m;
}

static const wsync_dest_t *dest(const wsync_target_t *t, const char *name)
{
    long i = wsync_target_find(t, name);
    return i < 0 ? NULL : &t->dests[i];
}

static void deepseek_rules_make_linear_weights_fp8(void)
{
    const char *files[2] = {"configs/rules/deepseek-fp8.json", "configs/rules/deepseek-fp8-ue8m0.json"};
    wsync_manifest_t *m = deepseek(512, 256);
    int f, T;
    CHECK(m != NULL);
    for (f = 0; f < 2; f++) {
        wsync_rules_t *r = NULL;
        CHECK_OK(wsync_rules_load(files[f], &r));
        for (T = 1; T <= 2 && r; T *= 2) {
            wsync_target_t *t = NULL;
            const wsync_dest_t *d, *s;
            CHECK_OK(wsync_target_from_rules(m, r, T, T - 1, &t));
            if (t == NULL)
                break;
            /* qkv: 512/T + 256/T + 256/T rows */
            d = dest(t, "model.layers.0.self_attn.qkv_proj.weight");
            s = dest(t, "model.layers.0.self_attn.qkv_proj.weight_scale_inv");
            CHECK(d && s && d->is_fp8 && d->dtype == WSYNC_DTYPE_F8_E4M3 && s->dtype == WSYNC_DTYPE_F32);
            CHECK(d && s && d->shape[0] == 1024 / T && s->shape[0] == 8 / T && s->shape[1] == 2 &&
                  s->offset > d->offset);
            CHECK(d && d->fp8.form == (f ? WSYNC_SCALE_UE8M0 : WSYNC_SCALE_FP32));
            d = dest(t, "model.layers.1.mlp.experts.w13_weight");
            s = dest(t, "model.layers.1.mlp.experts.w13_weight_scale_inv");
            CHECK(d && s && d->is_fp8 && s->ndim == 3 && s->shape[0] == 4 / T && s->shape[1] == 2 &&
                  s->shape[2] == 2);
            s = dest(t, "model.layers.1.mlp.experts.w2_weight_scale_inv");
            CHECK(s && s->shape[0] == 4 / T && s->shape[1] == 2 && s->shape[2] == 1);
            d = dest(t, "model.layers.0.mlp.gate_up_proj.weight");
            CHECK(d && d->is_fp8 && d->shape[0] == 1024 / T);
            d = dest(t, "model.layers.0.mlp.down_proj.weight");
            CHECK(d && d->is_fp8 && d->shape[1] == 512 / T);
            CHECK(dest(t, "model.layers.0.mlp.down_proj.weight_scale_inv")->shape[1] == 4 / T);
            d = dest(t, "model.layers.1.mlp.gate.weight");
            CHECK(d && !d->is_fp8 && d->dtype == WSYNC_DTYPE_BF16);
            CHECK(dest(t, "model.layers.1.mlp.gate.weight_scale_inv") == NULL);
            CHECK(dest(t, "model.embed_tokens.weight")->dtype == WSYNC_DTYPE_BF16);
            CHECK(dest(t, "lm_head.weight")->dtype == WSYNC_DTYPE_BF16);
            CHECK(dest(t, "model.norm.weight")->dtype == WSYNC_DTYPE_BF16);
            wsync_target_free(t);
        }
        wsync_rules_free(r);
    }
    wsync_manifest_free(m);
}

static void tp_that_cuts_a_block_is_refused(void)
{
    wsync_manifest_t *m = deepseek(256, 128);
    wsync_rules_t *r = NULL;
    wsync_target_t *t = NULL;
    wsync_run2d_t *runs = NULL;
    size_t n;
    CHECK(m != NULL);
    CHECK_OK(wsync_rules_load("configs/rules/deepseek-fp8.json", &r));
    /* TP 2: q has 128 rows per rank (whole blocks), k 64: cut */
    CHECK_FAILS(wsync_target_from_rules(m, r, 2, 1, &t), WSYNC_ERR_INVALID,
                "FP8 destination 'model.layers.0.self_attn.qkv_proj.weight' (dim 0, blocks of 128 rows) takes "
                "rows "
                "[64, 128) of 'model.layers.0.self_attn.k_proj.weight'");
    wsync_target_free(t);
    t = NULL;
    /* the built-in (BF16) rules take the same TP */
    CHECK_OK(wsync_target_from_rules(m, NULL, 2, 1, &t));
    wsync_target_free(t);
    t = NULL;
    /* TP 1 builds; its plain byte mapping refuses it (FP8 bytes depend on
     * the trainer layout: fp8_wire_test) */
    CHECK_OK(wsync_target_from_rules(m, r, 1, 0, &t));
    if (t)
        CHECK_FAILS(wsync_target_runs(t, m, &runs, &n), WSYNC_ERR_UNSUPPORTED,
                    "is FP8 (quantized on the way): its bytes depend on the trainer layout");
    free(runs);
    wsync_target_free(t);
    wsync_rules_free(r);
    wsync_manifest_free(m);
}

static void bands_quantized_alone_equal_the_whole_image(void)
{
    wsync_manifest_t *m = deepseek(512, 256);
    wsync_rules_t *r = NULL;
    wsync_target_t *t = NULL;
    unsigned char *src = NULL, *img = NULL, *q = NULL;
    float *sc = NULL;
    uint64_t i, x = 88172645463325252ull;
    size_t di, nb, k;
    int bad = 0, nbands = 0;
    CHECK(m != NULL);
    CHECK_OK(wsync_rules_load("configs/rules/deepseek-fp8-ue8m0.json", &r));
    CHECK_OK(wsync_target_from_rules(m, r, 2, 1, &t));
    if (t == NULL)
        goto out;
    src = malloc(m->image_size);
    img = malloc(t->image_size);
    q = malloc(t->image_size);
    sc = malloc(t->image_size);
    for (i = 0; i + 1 < m->image_size; i += 2) { /* finite BF16 over many binades */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (unsigned char)x;
        src[i + 1] = (unsigned char)(((x >> 8) & 0x80) | (0x20 + (x >> 16) % 0x30));
    }
    CHECK_OK(wsync_target_fill_host(t, m, src, img));
    for (di = 0; di < t->ndests; di++) {
        wsync_fp8_band_t *b = NULL;
        uint64_t qsum = 0, ssum = 0;
        if (!t->dests[di].is_fp8)
            continue;
        CHECK_OK(wsync_fp8_bands(t, di, 40000, &b, &nb));
        for (k = 0; k < nb; k++) {
            CHECK_OK(wsync_fp8_band_pack_host(t, m, &b[k], src, q, sc));
            bad += memcmp(q, img + b[k].q_off, b[k].q_len) != 0 || memcmp(sc, img + b[k].s_off, b[k].s_len) != 0;
            bad += b[k].q_off != t->dests[di].offset + qsum ||
                   b[k].s_off != t->dests[t->dests[di].scale_dest].offset + ssum;
            qsum += b[k].q_len;
            ssum += b[k].s_len;
        }
        CHECK_EQ(qsum, t->dests[di].size);
        CHECK_EQ(ssum, t->dests[t->dests[di].scale_dest].size);
        nbands += (int)nb;
        free(b);
    }
    CHECK_EQ(bad, 0);
    CHECK(nbands > 20);
    /* a NaN in expert 5's up_proj (rank 1 of 2 holds experts 2, 3), then in expert 3's */
    {
        long ti = wsync_manifest_find(m, "model.layers.1.mlp.experts.3.up_proj.weight");
        long wi = wsync_target_find(t, "model.layers.1.mlp.experts.w13_weight");
        wsync_fp8_band_t *b = NULL;
        CHECK(ti >= 0 && wi >= 0);
        if (ti >= 0 && wi >= 0) {
            ((uint16_t *)(void *)(src + m->tensors[ti].offset))[9 * 256 + 17] = 0x7fc0;
            CHECK_OK(wsync_fp8_bands(t, (size_t)wi, 1 << 30, &b, &nb));
            CHECK_EQ(nb, 2); /* one band per local expert */
            if (nb == 2) {
                CHECK_OK(wsync_fp8_band_pack_host(t, m, &b[0], src, q, sc));
                CHECK_FAILS(wsync_fp8_band_pack_host(t, m, &b[1], src, q, sc), WSYNC_ERR_INVALID,
                            "tensor 'model.layers.1.mlp.experts.3.up_proj.weight' holds NaN or an infinity at row "
                            "9, "
                            "column 17, which FP8 destination 'model.layers.1.mlp.experts.w13_weight' quantizes");
            }
            free(b);
        }
    }
out:
    free(src), free(img), free(q), free(sc);
    wsync_target_free(t);
    wsync_rules_free(r);
    wsync_manifest_free(m);
}

int main(void)
{
    RUN(by_hand_gets_its_scale_tensor);
    RUN(bad_requests_are_refused_naming_them);
    RUN(deepseek_rules_make_linear_weights_fp8);
    RUN(tp_that_cuts_a_block_is_refused);
    RUN(bands_quantized_alone_equal_the_whole_image);
    TEST_EXIT();
}
