/* rules_test.c: the built-in rules on a Qwen2-shaped model (q/k/v biases,
 * untied lm_head, vocabulary not a multiple of 64) and an MoE model, checked
 * byte by byte against the vLLM conventions computed here from first
 * principles (names and index formulas, not the rule code); the rules file
 * configs/rules/vllm.json gives identical targets; refusals name the tensor. */
#include "common/targets/rules.h"
#include "tests/test.h"
#include "tests/unit/common/targets/target_gen.h"

typedef struct model_dims {
    int64_t H, Q, KV, I, V, E;
    int layers;
    int moe;
} model_dims_t;

static wsync_manifest_t *qwen_model(const model_dims_t *d)
{
    wsync_manifest_t *m;
    char n[128];
    int l, e;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    add_t(m, "model.embed_tokens.weight", 2, d->V, d->H);
    for (l = 0; l < d->layers; l++) {
#define A_(fmt, nd, a, b)                                  \
    do {                                                   \
        snprintf(n, sizeof(n), "model.layers.%d." fmt, l); \
        add_t(m, n, nd, a, b);                             \
    } while (0)
        A_("input_layernorm.weight", 1, d->H, 0);
        A_("self_attn.q_proj.weight", 2, d->Q, d->H);
        A_("self_attn.q_proj.bias", 1, d->Q, 0);
        A_("self_attn.k_proj.weight", 2, d->KV, d->H);
        A_("self_attn.k_proj.bias", 1, d->KV, 0);
        A_("self_attn.v_proj.weight", 2, d->KV, d->H);
        A_("self_attn.v_proj.bias", 1, d->KV, 0);
        A_("self_attn.o_proj.weight", 2, d->H, d->Q);
        A_("post_attention_layernorm.weight", 1, d->H, 0);
        if (d->moe) {
            A_("mlp.gate.weight", 2, d->E, d->H);
            for (e = 0; e < d->E; e++) {
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
                add_t(m, n, 2, d->I, d->H);
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
                add_t(m, n, 2, d->I, d->H);
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
                add_t(m, n, 2, d->H, d->I);
            }
        } else {
            A_("mlp.gate_proj.weight", 2, d->I, d->H);
            A_("mlp.up_proj.weight", 2, d->I, d->H);
            A_("mlp.down_proj.weight", 2, d->H, d->I);
        }
#undef A_
    }
    add_t(m, "model.norm.weight", 1, d->H, 0);
    add_t(m, "lm_head.weight", 2, d->V, d->H);
    return m;
}

/* Byte map of one expected destination tensor: src offset + 1 per byte. */
static void put_elem(const wsync_manifest_t *m, uint32_t *exp, uint64_t dbase, uint64_t didx, const char *src,
                     uint64_t sidx)
{
    long s = wsync_manifest_find(m, src);
    if (s < 0)
        return;
    exp[dbase + didx * 2] = (uint32_t)(m->tensors[s].offset + sidx * 2) + 1;
    exp[dbase + didx * 2 + 1] = (uint32_t)(m->tensors[s].offset + sidx * 2 + 1) + 1;
}

/* Finds `name` in the target with the given 1-3 dim shape; its offset. */
static int expect_dest(const wsync_target_t *t, const char *name, int nd, int64_t a, int64_t b, int64_t c,
                       uint64_t *off)
{
    long i = wsync_target_find(t, name);
    int64_t want[3] = {a, b, c};
    int k;
    if (i < 0) {
        fprintf(stderr, "  destination '%s' missing\n", name);
        return -1;
    }
    if (t->dests[i].ndim != nd || t->dests[i].dtype != WSYNC_DTYPE_BF16) {
        fprintf(stderr, "  destination '%s': %d dims\n", name, t->dests[i].ndim);
        return -1;
    }
    for (k = 0; k < nd; k++)
        if (t->dests[i].shape[k] != want[k]) {
            fprintf(stderr, "  destination '%s' dim %d is %lld, expected %lld\n", name, k,
                    (long long)t->dests[i].shape[k], (long long)want[k]);
            return -1;
        }
    *off = t->dests[i].offset;
    return 0;
}

/* The vLLM layout of TP rank K of T, computed element by element. */
static int expected_map(const wsync_manifest_t *m, const model_dims_t *d, int T, int K, const wsync_target_t *t,
                        uint32_t *exp, int *ndests)
{
    const int64_t H = d->H, Q = d->Q, KV = d->KV, I = d->I, V = d->V, E = d->E;
    const int64_t Vp = (V + 63) / 64 * 64, vr = Vp / T, q = Q / T, kv = KV / T, it = I / T, el = E / T;
    char dn[160], sn[160];
    uint64_t off;
    int64_t r, c, e;
    int l, w, n = 0;
    static const char *const emb[2] = {"model.embed_tokens.weight", "lm_head.weight"};

    memset(exp, 0, t->image_size * sizeof(*exp));
    for (w = 0; w < 2; w++, n++) {
        if (expect_dest(t, emb[w], 2, vr, H, 0, &off))
            return -1;
        for (r = 0; r < vr; r++)
            for (c = 0; c < H; c++)
                if (K * vr + r < V)
                    put_elem(m, exp, off, (uint64_t)(r * H + c), emb[w], (uint64_t)((K * vr + r) * H + c));
    }
    if (expect_dest(t, "model.norm.weight", 1, H, 0, 0, &off))
        return -1;
    for (c = 0; c < H; c++)
        put_elem(m, exp, off, (uint64_t)c, "model.norm.weight", (uint64_t)c);
    n++;
    for (l = 0; l < d->layers; l++) {
        static const char *const norms[2] = {"input_layernorm.weight", "post_attention_layernorm.weight"};
        for (w = 0; w < 2; w++, n++) {
            snprintf(dn, sizeof(dn), "model.layers.%d.%s", l, norms[w]);
            if (expect_dest(t, dn, 1, H, 0, 0, &off))
                return -1;
            for (c = 0; c < H; c++)
                put_elem(m, exp, off, (uint64_t)c, dn, (uint64_t)c);
        }
        /* qkv_proj: q's chunk, k's chunk, v's chunk, weight and bias. */
        for (w = 0; w < 2; w++, n++) {
            int64_t cols = w == 0 ? H : 1;
            snprintf(dn, sizeof(dn), "model.layers.%d.self_attn.qkv_proj.%s", l, w == 0 ? "weight" : "bias");
            if (expect_dest(t, dn, w == 0 ? 2 : 1, q + 2 * kv, H, 0, &off))
                return -1;
            for (r = 0; r < q + 2 * kv; r++) {
                const char *part = r < q ? "q" : r < q + kv ? "k" : "v";
                int64_t sr = r < q ? K * q + r : r < q + kv ? K * kv + (r - q) : K * kv + (r - q - kv);
                snprintf(sn, sizeof(sn), "model.layers.%d.self_attn.%s_proj.%s", l, part,
                         w == 0 ? "weight" : "bias");
                for (c = 0; c < cols; c++)
                    put_elem(m, exp, off, (uint64_t)(r * cols + c), sn, (uint64_t)(sr * cols + c));
            }
        }
        /* o_proj: columns [K*q, (K+1)*q). */
        snprintf(dn, sizeof(dn), "model.layers.%d.self_attn.o_proj.weight", l);
        if (expect_dest(t, dn, 2, H, q, 0, &off))
            return -1;
        for (r = 0; r < H; r++)
            for (c = 0; c < q; c++)
                put_elem(m, exp, off, (uint64_t)(r * q + c), dn, (uint64_t)(r * Q + K * q + c));
        n++;
        if (!d->moe) {
            snprintf(dn, sizeof(dn), "model.layers.%d.mlp.gate_up_proj.weight", l);
            if (expect_dest(t, dn, 2, 2 * it, H, 0, &off))
                return -1;
            for (r = 0; r < 2 * it; r++) {
                snprintf(sn, sizeof(sn), "model.layers.%d.mlp.%s_proj.weight", l, r < it ? "gate" : "up");
                for (c = 0; c < H; c++)
                    put_elem(m, exp, off, (uint64_t)(r * H + c), sn, (uint64_t)((K * it + r % it) * H + c));
            }
            snprintf(dn, sizeof(dn), "model.layers.%d.mlp.down_proj.weight", l);
            if (expect_dest(t, dn, 2, H, it, 0, &off))
                return -1;
            for (r = 0; r < H; r++)
                for (c = 0; c < it; c++)
                    put_elem(m, exp, off, (uint64_t)(r * it + c), dn, (uint64_t)(r * I + K * it + c));
            n += 2;
            continue;
        }
        snprintf(dn, sizeof(dn), "model.layers.%d.mlp.gate.weight", l);
        if (expect_dest(t, dn, 2, E, H, 0, &off))
            return -1;
        for (r = 0; r < E * H; r++)
            put_elem(m, exp, off, (uint64_t)r, dn, (uint64_t)r);
        /* w13 [E/T, 2I, H]: local expert e = global K*E/T + e, gate rows then up rows. */
        snprintf(dn, sizeof(dn), "model.layers.%d.mlp.experts.w13_weight", l);
        if (expect_dest(t, dn, 3, el, 2 * I, H, &off))
            return -1;
        for (e = 0; e < el; e++)
            for (r = 0; r < 2 * I; r++) {
                snprintf(sn, sizeof(sn), "model.layers.%d.mlp.experts.%lld.%s_proj.weight", l,
                         (long long)(K * el + e), r < I ? "gate" : "up");
                for (c = 0; c < H; c++)
                    put_elem(m, exp, off, (uint64_t)((e * 2 * I + r) * H + c), sn, (uint64_t)((r % I) * H + c));
            }
        snprintf(dn, sizeof(dn), "model.layers.%d.mlp.experts.w2_weight", l);
        if (expect_dest(t, dn, 3, el, H, I, &off))
            return -1;
        for (e = 0; e < el; e++) {
            snprintf(sn, sizeof(sn), "model.layers.%d.mlp.experts.%lld.down_proj.weight", l,
                     (long long)(K * el + e));
            for (r = 0; r < H * I; r++)
                put_elem(m, exp, off, (uint64_t)(e * H * I + r), sn, (uint64_t)r);
        }
        n += 3;
    }
    *ndests = n;
    return 0;
}

static void check_model(const model_dims_t *d, int T)
{
    wsync_manifest_t *m = qwen_model(d);
    int K;
    for (K = 0; m && K < T; K++) {
        wsync_target_t *t = NULL;
        uint32_t *exp, *got;
        int n = 0;
        uint64_t o, diff = 0, padding = 0;
        CHECK_OK(wsync_target_from_rules(m, NULL, T, K, &t));
        if (t == NULL)
            break;
        exp = calloc(t->image_size + 1, sizeof(*exp));
        got = calloc(t->image_size + 1, sizeof(*got));
        CHECK_EQ(expected_map(m, d, T, K, t, exp, &n), 0);
        CHECK_EQ(t->ndests, n);
        eval_target(m, t, got);
        for (o = 0; o < t->image_size; o++) {
            diff += exp[o] != got[o];
            padding += exp[o] == 0;
        }
        if (diff)
            fprintf(stderr, "  T=%d rank %d: %llu destination bytes differ from the vLLM layout\n", T, K,
                    (unsigned long long)diff);
        CHECK_EQ(diff, 0);
        CHECK_EQ(t->covered_bytes, t->image_size - padding);
        free(exp);
        free(got);
        wsync_target_free(t);
    }
    wsync_manifest_free(m);
}

static void test_qwen2_shaped(void)
{
    /* Vocabulary 1000 (padded to 1024), untied lm_head, q/k/v biases. */
    model_dims_t d = {64, 64, 32, 96, 1000, 0, 2, 0};
    int T;
    for (T = 1; T <= 4; T *= 2)
        check_model(&d, T);
}

static void test_vocab_all_padding_rank(void)
{
    /* V = 130 pads to 192: with T = 4 rank 3 holds rows [144, 192), all
     * padding, and rank 2 rows [96, 144), partly. */
    model_dims_t d = {64, 64, 32, 96, 130, 0, 1, 0};
    wsync_manifest_t *m = qwen_model(&d);
    wsync_target_t *t = NULL;
    long i;
    check_model(&d, 4);
    CHECK_OK(wsync_target_from_rules(m, NULL, 4, 3, &t));
    i = t ? wsync_target_find(t, "lm_head.weight") : -1;
    CHECK(i >= 0);
    if (i >= 0)
        CHECK_EQ(t->dests[i].nblocks, 0);
    wsync_target_free(t);
    CHECK_OK(wsync_target_from_rules(m, NULL, 4, 2, &t));
    i = t ? wsync_target_find(t, "lm_head.weight") : -1;
    if (i >= 0) {
        CHECK_EQ(t->blocks[t->dests[i].first_block].src_start[0], 96);
        CHECK_EQ(t->blocks[t->dests[i].first_block].src_stop[0], 130);
    }
    wsync_target_free(t);
    wsync_manifest_free(m);
}

static void test_moe(void)
{
    model_dims_t d = {64, 64, 32, 32, 500, 8, 2, 1};
    check_model(&d, 4);
    check_model(&d, 2);
    check_model(&d, 8);
}

static void test_rules_file_matches_builtin(void)
{
    const char *root = getenv("WSYNC_ROOT");
    char path[4096];
    wsync_rules_t *fr = NULL;
    model_dims_t dense = {64, 64, 32, 96, 1000, 0, 2, 0}, moe = {64, 64, 32, 32, 500, 8, 2, 1};
    const model_dims_t *ds[2] = {&dense, &moe};
    int T, K, w;
    snprintf(path, sizeof(path), "%s/configs/rules/vllm.json", root ? root : ".");
    CHECK_OK(wsync_rules_load(path, &fr));
    if (fr == NULL)
        return;
    CHECK_EQ(fr->nrules, wsync_rules_builtin()->nrules);
    for (w = 0; w < 2; w++) {
        wsync_manifest_t *m = qwen_model(ds[w]);
        for (T = 1; T <= 4; T *= 2)
            for (K = 0; K < T; K++) {
                wsync_target_t *a = NULL, *b = NULL;
                CHECK_OK(wsync_target_from_rules(m, NULL, T, K, &a));
                CHECK_OK(wsync_target_from_rules(m, fr, T, K, &b));
                if (a && b)
                    CHECK_STR(a->digest_hex, b->digest_hex);
                wsync_target_free(a);
                wsync_target_free(b);
            }
        wsync_manifest_free(m);
    }
    wsync_rules_free(fr);
}

static void test_refusals(void)
{
    model_dims_t d = {64, 64, 32, 96, 1000, 0, 1, 0}, moe = {64, 64, 32, 32, 500, 8, 1, 1};
    wsync_manifest_t *m = qwen_model(&d), *mm = qwen_model(&moe), *part;
    wsync_target_t *t = NULL;
    int64_t s[2] = {64, 64};
    /* The padded vocabulary (1024) does not divide by 3: the first tensor refused. */
    CHECK_FAILS(wsync_target_from_rules(m, NULL, 3, 0, &t), WSYNC_ERR_INVALID,
                "'model.embed_tokens.weight': the padded vocabulary 1024 (dim 0) does not divide by the TP size "
                "3");
    CHECK_FAILS(wsync_target_from_rules(m, NULL, 2, 2, &t), WSYNC_ERR_INVALID, "TP rank 2 of 2");
    /* A fused part missing. */
    CHECK_OK(wsync_manifest_create(&part));
    add_t(part, "model.layers.0.self_attn.q_proj.weight", 2, 64, 64);
    add_t(part, "model.layers.0.self_attn.k_proj.weight", 2, 32, 64);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 2, 0, &t), WSYNC_ERR_INVALID, "qkv_proj.weight");
    add_t(part, "model.layers.0.self_attn.v_proj.weight", 2, 32, 64);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 3, 0, &t), WSYNC_ERR_INVALID,
                "'model.layers.0.self_attn.q_proj.weight': rows 64 (dim 0) does not divide by the TP size 3");
    wsync_manifest_free(part);
    CHECK_OK(wsync_manifest_create(&part));
    add_t(part, "model.layers.0.mlp.experts.0.down_proj.weight", 2, 64, 32);
    add_t(part, "model.layers.0.mlp.experts.1.down_proj.weight", 2, 64, 32);
    add_t(part, "model.layers.0.mlp.experts.2.down_proj.weight", 2, 64, 32);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 2, 0, &t), WSYNC_ERR_INVALID, "3 experts");
    add_t(part, "model.layers.0.mlp.experts.5.down_proj.weight", 2, 64, 32);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 2, 0, &t), WSYNC_ERR_INVALID, "expert 3");
    wsync_manifest_free(part);
    CHECK_OK(wsync_manifest_create(&part));
    add_t(part, "model.layers.0.self_attn.o_proj.weight", 2, 64, 63);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 2, 0, &t), WSYNC_ERR_INVALID,
                "'model.layers.0.self_attn.o_proj.weight': columns 63");
    wsync_manifest_free(part);
    CHECK_OK(wsync_manifest_create(&part));
    wsync_manifest_add(part, "lm_head.weight", WSYNC_DTYPE_BF16, 2, s);
    CHECK_FAILS(wsync_target_from_rules(part, NULL, 3, 0, &t), WSYNC_ERR_INVALID,
                "'lm_head.weight': the padded vocabulary 64");
    wsync_manifest_free(part);
    CHECK_FAILS(wsync_target_from_rules(mm, NULL, 16, 0, &t), WSYNC_ERR_INVALID, "8 experts");
    wsync_manifest_free(m);
    wsync_manifest_free(mm);
}

static void test_rules_json_malformed(void)
{
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{", "not JSON"},
        {"[]", "expected {\"version\": 1"},
        {"{\"version\":2,\"rules\":[]}", "expected {\"version\": 1"},
        {"{\"version\":1,\"rules\":[{\"split\":\"rows\"}]}", "rule 0 has no \"match\""},
        {"{\"version\":1,\"rules\":[{\"match\":\"a\",\"split\":\"diagonal\"}]}", "\"split\" must be one of"},
        {"{\"version\":1,\"rules\":[{\"match\":\"*.*\",\"split\":\"rows\"}]}", "at most one '*'"},
        {"{\"version\":1,\"rules\":[{\"match\":\"a.{x,y\",\"split\":\"rows\"}]}", "no matching '}'"},
        {"{\"version\":1,\"rules\":[{\"match\":\"a.{x,,y}\",\"split\":\"rows\"}]}", "empty word"},
        {"{\"version\":1,\"rules\":[{\"match\":\"a\",\"into\":\"{x}\",\"split\":\"rows\"}]}", "\"into\" may hold"},
        {"{\"version\":1,\"rules\":[{\"match\":\"a\",\"into\":\"*.b\",\"split\":\"rows\"}]}", "has none to fill"},
        {"{\"version\":1,\"rules\":[{\"match\":\"*.x\",\"into\":\"*.y\",\"split\":\"experts\"}]}", "needs {e}"},
        {"{\"version\":1,\"rules\":[{\"match\":\"x\",\"split\":\"vocab\",\"pad\":0}]}", "\"pad\" must be"},
        {"{\"version\":1,\"rules\":[{\"match\":\"x\",\"split\":\"vocab\",\"pad\":\"8\"}]}", "an integer"},
    };
    size_t i;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wsync_rules_t *r = NULL;
        CHECK_FAILS(wsync_rules_from_json(bad[i].json, strlen(bad[i].json), &r), WSYNC_ERR_FORMAT, bad[i].needle);
        wsync_rules_free(r);
    }
    CHECK_FAILS(wsync_rules_load("/nonexistent/rules.json", &(wsync_rules_t *){NULL}), WSYNC_ERR_IO,
                "/nonexistent/rules.json");
}

/* A rules file of another family: a rename and a rows split of fused parts. */
static void test_custom_rules(void)
{
    const char *json = "{\"version\":1,\"rules\":[{\"match\":\"*.attn.{wq,wk}\",\"into\":\"*.attn.wqk\","
                       "\"split\":\"rows\"},{\"match\":\"*.ffn.w2\",\"split\":\"cols\"}]}";
    wsync_rules_t *r = NULL;
    wsync_manifest_t *m = NULL;
    wsync_target_t *t = NULL;
    long i;
    CHECK_OK(wsync_rules_from_json(json, strlen(json), &r));
    CHECK_OK(wsync_manifest_create(&m));
    add_t(m, "h.0.attn.wk", 2, 8, 4);
    add_t(m, "h.0.attn.wq", 2, 16, 4);
    add_t(m, "h.0.ffn.w2", 2, 4, 8);
    add_t(m, "h.0.norm", 1, 4, 0);
    CHECK_OK(wsync_target_from_rules(m, r, 2, 1, &t));
    if (t) {
        CHECK_EQ(t->ndests, 3);
        i = wsync_target_find(t, "h.0.attn.wqk");
        CHECK(i >= 0);
        if (i >= 0) {
            const wsync_block_t *b = &t->blocks[t->dests[i].first_block];
            CHECK_EQ(t->dests[i].shape[0], 12);
            /* wq first (the list's order), rows [8, 16); then wk rows [4, 8) at row 8. */
            CHECK_STR(m->tensors[b[0].src].name, "h.0.attn.wq");
            CHECK_EQ(b[0].src_start[0], 8);
            CHECK_EQ(b[1].dst_start[0], 8);
            CHECK_EQ(b[1].src_start[0], 4);
        }
        CHECK(wsync_target_find(t, "h.0.norm") >= 0);
    }
    wsync_target_free(t);
    wsync_manifest_free(m);
    wsync_rules_free(r);
}

int main(void)
{
    RUN(test_qwen2_shaped);
    RUN(test_vocab_all_padding_rank);
    RUN(test_moe);
    RUN(test_rules_file_matches_builtin);
    RUN(test_refusals);
    RUN(test_rules_json_malformed);
    RUN(test_custom_rules);
    TEST_EXIT();
}
