/* manifest_test.c: dtypes, building a manifest, the JSON round trip and its
 * validation, the layout digest and the synthetic model. */
#include <jansson.h>

#include "common/model/manifest.h"
#include "tests/test.h"

/* The safetensors spec's dtypes with their bits per element. */
static const struct {
    const char *name;
    unsigned bits;
} spec_dtypes[] = {
    {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},    {"F8_E5M2", 8},
    {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16}, {"BF16", 16}, {"I32", 32},
    {"U32", 32},    {"F32", 32},    {"F64", 64},    {"I64", 64},    {"U64", 64}, {"C64", 64},
};

static void every_spec_dtype_parses_and_names_back(void)
{
    size_t i;
    CHECK_EQ(sizeof(spec_dtypes) / sizeof(spec_dtypes[0]), WSYNC_DTYPE_COUNT);
    for (i = 0; i < sizeof(spec_dtypes) / sizeof(spec_dtypes[0]); i++) {
        wsync_dtype_t d;
        CHECK_EQ(wsync_dtype_parse(spec_dtypes[i].name, &d), 0);
        CHECK_STR(wsync_dtype_name(d), spec_dtypes[i].name);
        CHECK_EQ(wsync_dtype_bits(d), spec_dtypes[i].bits);
        /* 8 elements always pack into whole bytes: bits bytes. */
        CHECK_EQ(wsync_dtype_nbytes(d, 8), spec_dtypes[i].bits);
        CHECK_EQ(wsync_dtype_nbytes(d, 0), 0);
    }
}

static void unknown_dtypes_are_refused(void)
{
    wsync_dtype_t d;
    CHECK_EQ(wsync_dtype_parse("F128", &d), -1);
    CHECK_EQ(wsync_dtype_parse("bf16", &d), -1); /* the spec's names are upper case */
    CHECK_EQ(wsync_dtype_parse("", &d), -1);
    CHECK_EQ(wsync_dtype_parse(NULL, &d), -1);
    CHECK(wsync_dtype_name(WSYNC_DTYPE_COUNT) == NULL);
    CHECK(wsync_dtype_name((wsync_dtype_t)-1) == NULL);
    CHECK_EQ(wsync_dtype_bits(WSYNC_DTYPE_COUNT), 0);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_COUNT, 1), -1);
}

static void sub_byte_counts_must_pack_exactly(void)
{
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F4, 2), 1);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F4, 1), -1);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F4, 3), -1);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F6_E2M3, 4), 3);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F6_E3M2, 2), -1);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F6_E3M2, 12), 9);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_BF16, 3), 6);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_C64, 3), 24);
    CHECK_EQ(wsync_dtype_nbytes(WSYNC_DTYPE_F64, UINT64_MAX / 2), -1); /* overflow */
}

static void add_places_tensors_aligned_in_order(void)
{
    wsync_manifest_t *m = NULL;
    int64_t s1[2] = {3, 5}, s2[1] = {256}, s3[2] = {0, 7}, s4[1] = {4};
    CHECK_OK(wsync_manifest_create(&m));
    CHECK_EQ(m->ntensors, 0);
    CHECK_EQ(m->image_size, 0);
    CHECK_OK(wsync_manifest_add(m, "a", WSYNC_DTYPE_F32, 2, s1));        /* 60 bytes */
    CHECK_OK(wsync_manifest_add(m, "scalar", WSYNC_DTYPE_F64, 0, NULL)); /* 8 bytes */
    CHECK_OK(wsync_manifest_add(m, "b", WSYNC_DTYPE_U8, 1, s2));         /* 256 bytes */
    CHECK_OK(wsync_manifest_add(m, "empty", WSYNC_DTYPE_BF16, 2, s3));   /* 0 bytes */
    CHECK_OK(wsync_manifest_add(m, "c", WSYNC_DTYPE_F4, 1, s4));         /* 2 bytes */
    CHECK_EQ(m->ntensors, 5);
    CHECK_EQ(m->tensors[0].offset, 0);
    CHECK_EQ(m->tensors[0].size, 60);
    CHECK_EQ(m->tensors[1].offset, 256);
    CHECK_EQ(m->tensors[1].size, 8);
    CHECK_EQ(m->tensors[1].ndim, 0);
    CHECK_EQ(m->tensors[2].offset, 512);
    CHECK_EQ(m->tensors[2].size, 256);
    CHECK_EQ(m->tensors[3].offset, 768);
    CHECK_EQ(m->tensors[3].size, 0);
    CHECK_EQ(m->tensors[4].offset, 768);
    CHECK_EQ(m->tensors[4].size, 2);
    CHECK_EQ(m->image_size, 1024);
    CHECK_EQ(wsync_manifest_find(m, "b"), 2);
    CHECK_EQ(wsync_manifest_find(m, "scalar"), 1);
    CHECK_EQ(wsync_manifest_find(m, "nope"), -1);
    wsync_manifest_free(m);
    wsync_manifest_free(NULL);
}

static void add_refuses_bad_tensors(void)
{
    wsync_manifest_t *m = NULL;
    int64_t ok[1] = {4}, neg[2] = {4, -1}, odd[1] = {3}, huge[3] = {INT64_MAX / 2, 4, 4};
    int64_t many[WSYNC_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_OK(wsync_manifest_create(&m));
    CHECK_OK(wsync_manifest_add(m, "x", WSYNC_DTYPE_F32, 1, ok));
    CHECK_FAILS(wsync_manifest_add(m, "x", WSYNC_DTYPE_F32, 1, ok), WSYNC_ERR_INVALID, "'x' appears twice");
    CHECK_FAILS(wsync_manifest_add(m, "neg", WSYNC_DTYPE_F32, 2, neg), WSYNC_ERR_INVALID, "'neg'");
    CHECK_FAILS(wsync_manifest_add(m, "odd", WSYNC_DTYPE_F4, 1, odd), WSYNC_ERR_INVALID, "whole bytes");
    CHECK_FAILS(wsync_manifest_add(m, "huge", WSYNC_DTYPE_F32, 3, huge), WSYNC_ERR_INVALID, "overflows");
    CHECK_FAILS(wsync_manifest_add(m, "deep", WSYNC_DTYPE_F32, WSYNC_MAX_DIMS + 1, many), WSYNC_ERR_INVALID,
                "dimensions");
    CHECK_FAILS(wsync_manifest_add(m, "", WSYNC_DTYPE_F32, 1, ok), WSYNC_ERR_INVALID, "empty");
    CHECK_FAILS(wsync_manifest_add(m, "bad", WSYNC_DTYPE_COUNT, 1, ok), WSYNC_ERR_INVALID, "unknown dtype");
    /* Refusals leave the manifest as it was. */
    CHECK_EQ(m->ntensors, 1);
    CHECK_EQ(m->image_size, 256);
    wsync_manifest_free(m);
}

/* Real MoE checkpoints hold ~100k tensors: add and find must not be quadratic
 * (this would take minutes if they were). */
static void many_tensors_index_by_name(void)
{
    wsync_manifest_t *m = NULL;
    int64_t s[1] = {2};
    char name[64];
    int i, bad = 0;
    CHECK_OK(wsync_manifest_create(&m));
    for (i = 0; i < 200000; i++) {
        snprintf(name, sizeof(name), "model.layers.%d.experts.%d.w", i / 256, i % 256);
        if (wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 1, s) != WSYNC_OK)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(m->ntensors, 200000);
    for (i = 0; i < 200000; i += 997) {
        snprintf(name, sizeof(name), "model.layers.%d.experts.%d.w", i / 256, i % 256);
        if (wsync_manifest_find(m, name) != i)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_FAILS(wsync_manifest_add(m, "model.layers.3.experts.7.w", WSYNC_DTYPE_BF16, 1, s), WSYNC_ERR_INVALID,
                "appears twice");
    wsync_manifest_free(m);
}

/* One tensor of every dtype (a count that packs for all), a scalar, a
 * zero-sized tensor, and metadata. */
static wsync_manifest_t *every_dtype_manifest(void)
{
    wsync_manifest_t *m = NULL;
    int64_t s[2] = {3, 8}, z[3] = {2, 0, 5};
    char name[32];
    int d;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    for (d = 0; d < WSYNC_DTYPE_COUNT; d++) {
        snprintf(name, sizeof(name), "t.%s", wsync_dtype_name((wsync_dtype_t)d));
        CHECK_OK(wsync_manifest_add(m, name, (wsync_dtype_t)d, 2, s));
    }
    CHECK_OK(wsync_manifest_add(m, "scalar", WSYNC_DTYPE_F32, 0, NULL));
    CHECK_OK(wsync_manifest_add(m, "zero", WSYNC_DTYPE_I64, 3, z));
    m->metadata = json_pack("{s:s, s:s}", "format", "pt", "step", "12");
    return m;
}

static int same_layout(const wsync_manifest_t *a, const wsync_manifest_t *b)
{
    size_t i;
    if (a->ntensors != b->ntensors || a->image_size != b->image_size)
        return 0;
    for (i = 0; i < a->ntensors; i++) {
        const wsync_tensor_t *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim || x->offset != y->offset ||
            x->size != y->size || memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof(int64_t)))
            return 0;
    }
    return 1;
}

static void json_round_trip_keeps_everything(void)
{
    wsync_manifest_t *m = every_dtype_manifest(), *back = NULL;
    json_t *j = NULL, *re;
    char *text;
    char d1[33], d2[33];
    json_error_t err;
    CHECK_OK(wsync_manifest_to_json(m, &j));
    text = json_dumps(j, JSON_COMPACT);
    re = json_loads(text, 0, &err);
    CHECK(re != NULL);
    CHECK_OK(wsync_manifest_from_json(re, &back));
    if (back) {
        CHECK(same_layout(m, back));
        CHECK(json_equal(m->metadata, back->metadata));
        wsync_manifest_digest(m, d1);
        wsync_manifest_digest(back, d2);
        CHECK_STR(d1, d2);
        CHECK_EQ(wsync_manifest_find(back, "t.C64"), WSYNC_DTYPE_C64);
    }
    CHECK_EQ(json_integer_value(json_object_get(j, "align")), WSYNC_ALIGN);
    CHECK_EQ(json_integer_value(json_object_get(j, "image_size")), m->image_size);
    free(text);
    json_decref(j);
    json_decref(re);
    wsync_manifest_free(m);
    wsync_manifest_free(back);
}

/* Parse `text` (must be JSON) with from_json; expect FORMAT and `needle`. */
static void refuses(const char *text, const char *needle, int line)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    if (j == NULL) {
        fprintf(stderr, "  line %d: test JSON does not parse: %s\n", line, err.text);
        test_case_failed_ = 1;
        return;
    }
    st = wsync_manifest_from_json(j, &m);
    if (st != WSYNC_ERR_FORMAT || strstr(wsync_last_error(), needle) == NULL) {
        fprintf(stderr, "  line %d: got %s '%s', wanted FORMAT with '%s'\n", line, wsync_status_str(st),
                wsync_last_error(), needle);
        test_case_failed_ = 1;
    }
    CHECK(m == NULL);
    wsync_manifest_free(m);
    json_decref(j);
}
#define REFUSES(text, needle) refuses(text, needle, __LINE__)

#define T(name, dtype, shape, off, size) \
    "{\"name\":\"" name "\",\"dtype\":\"" dtype "\",\"shape\":" shape ",\"offset\":" #off ",\"size\":" #size "}"

static void from_json_refuses_bad_manifests(void)
{
    /* The good one, to show the others fail for their one defect. */
    json_error_t err;
    json_t *j = json_loads("{\"version\":1,\"align\":256,\"image_size\":512,\"tensors\":[" T("a", "F32", "[4]", 0,
                                                                                             16) "," T("b", "BF16",
                                                                                                       "[2,3]", 256,
                                                                                                       12) "]}",
                           0, &err);
    wsync_manifest_t *m = NULL;
    CHECK_OK(wsync_manifest_from_json(j, &m));
    CHECK(m && m->ntensors == 2);
    wsync_manifest_free(m);
    json_decref(j);

    REFUSES("[]", "expected a JSON object");
    REFUSES("{\"image_size\":0}", "'tensors' must be an array");
    REFUSES("{\"image_size\":0,\"tensors\":{}}", "'tensors' must be an array");
    REFUSES("{\"image_size\":0,\"tensors\":[3]}", "tensors[0] is not an object");
    REFUSES("{\"image_size\":256,\"tensors\":[{\"dtype\":\"F32\",\"shape\":[4],\"offset\":0,\"size\":16}]}",
            "tensors[0].name must be a string");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F33", "[4]", 0, 16) "]}",
            "tensor 'a': unknown or missing dtype");
    REFUSES("{\"image_size\":256,\"tensors\":[{\"name\":\"a\",\"shape\":[4],\"offset\":0,\"size\":16}]}",
            "tensor 'a': unknown or missing dtype");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "4", 0, 16) "]}",
            "tensor 'a': shape must be an array");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "[4.5]", 0, 16) "]}", "tensor 'a': shape[0]");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "[2,-4]", 0, 16) "]}", "tensor 'a': shape[1]");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "[\"4\"]", 0, 16) "]}", "tensor 'a': shape[0]");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F4", "[3]", 0, 2) "]}", "'a'");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "[4]", 0, 17) "]}", "tensor 'a': size must be 16");
    REFUSES("{\"image_size\":256,\"tensors\":[{\"name\":\"a\",\"dtype\":\"F32\",\"shape\":[4],\"offset\":0}]}",
            "tensor 'a': size must be 16");
    REFUSES("{\"image_size\":512,\"tensors\":[" T("a", "F32", "[4]", 0, 16) "," T("b", "F32", "[4]", 100, 16) "]}",
            "tensor 'b': offset 100 is not aligned to 256");
    REFUSES("{\"image_size\":512,\"tensors\":[" T("a", "F32", "[100]", 0, 400) "," T("b", "F32", "[4]", 256, 16) "]}",
            "tensor 'b': offset 256 overlaps");
    REFUSES("{\"image_size\":1024,\"tensors\":[" T("a", "F32", "[4]", 0, 16) "," T("b", "F32", "[4]", 768,
                                                                                   16) "]}",
            "tensor 'b': offset 768 leaves a gap");
    REFUSES("{\"image_size\":256,\"tensors\":[" T("a", "F32", "[4]", -256, 16) "]}", "tensor 'a': offset must be");
    REFUSES("{\"image_size\":512,\"tensors\":[" T("a", "F32", "[4]", 0, 16) "," T("a", "F32", "[4]", 256, 16) "]}",
            "tensors[1]: tensor 'a' appears twice");
    REFUSES("{\"image_size\":300,\"tensors\":[" T("a", "F32", "[4]", 0, 16) "]}", "image_size must be 256");
    REFUSES("{\"tensors\":[" T("a", "F32", "[4]", 0, 16) "]}", "image_size must be 256");
    REFUSES("{\"align\":64,\"image_size\":256,\"tensors\":[]}", "align must be 256");
    REFUSES("{\"version\":2,\"image_size\":0,\"tensors\":[]}", "version must be 1");
    REFUSES("{\"image_size\":0,\"tensors\":[],\"metadata\":[1]}", "'metadata' must be an object");
    REFUSES("{\"image_size\":0,\"tensors\":[],\"metadata\":{\"step\":3}}", "metadata['step'] must be a string");
}

static void digest(const wsync_manifest_t *m, char out[33])
{
    wsync_manifest_digest(m, out);
}

/* A two-tensor manifest, with one knob changed per variant. */
static wsync_manifest_t *small(const char *name, wsync_dtype_t dt, int64_t d0, int64_t d1, int swap, int extra)
{
    wsync_manifest_t *m = NULL;
    int64_t s[2] = {d0, d1}, n[1] = {16};
    wsync_manifest_create(&m);
    if (swap)
        wsync_manifest_add(m, "norm", WSYNC_DTYPE_F32, 1, n);
    wsync_manifest_add(m, name, dt, 2, s);
    if (!swap)
        wsync_manifest_add(m, "norm", WSYNC_DTYPE_F32, 1, n);
    if (extra)
        wsync_manifest_add(m, "bias", WSYNC_DTYPE_F32, 0, NULL);
    return m;
}

static void digest_is_stable_and_sensitive(void)
{
    wsync_manifest_t *base = small("w", WSYNC_DTYPE_BF16, 4, 8, 0, 0),
                     *same = small("w", WSYNC_DTYPE_BF16, 4, 8, 0, 0);
    wsync_manifest_t *v[5] = {
        small("x", WSYNC_DTYPE_BF16, 4, 8, 0, 0), /* name */
        small("w", WSYNC_DTYPE_F16, 4, 8, 0, 0),  /* dtype of the same size */
        small("w", WSYNC_DTYPE_BF16, 8, 4, 0, 0), /* shape with the same size */
        small("w", WSYNC_DTYPE_BF16, 4, 8, 1, 0), /* order */
        small("w", WSYNC_DTYPE_BF16, 4, 8, 0, 1), /* one tensor more */
    };
    char a[33], b[33], c[33];
    size_t i, k;
    digest(base, a);
    digest(same, b);
    CHECK_EQ(strlen(a), 32);
    CHECK_EQ(strspn(a, "0123456789abcdef"), 32);
    CHECK_STR(a, b);
    /* Pinned: trainer and engine builds of different ages must agree, so the
     * canonical form may not drift. Change it only with a version bump. */
    CHECK_STR(a, "6419cb14dcb22f86b9c41f0db8ba45a0");
    /* Metadata is not layout. */
    same->metadata = json_pack("{s:s}", "step", "9");
    digest(same, b);
    CHECK_STR(a, b);
    for (i = 0; i < 5; i++) {
        digest(v[i], c);
        if (strcmp(a, c) == 0) {
            fprintf(stderr, "  variant %zu has the base digest\n", i);
            test_case_failed_ = 1;
        }
        for (k = 0; k < i; k++) {
            char e[33];
            digest(v[k], e);
            CHECK(strcmp(c, e) != 0);
        }
    }
    for (i = 0; i < 5; i++)
        wsync_manifest_free(v[i]);
    wsync_manifest_free(base);
    wsync_manifest_free(same);
}

static void synthetic_sizes_track_the_budget(void)
{
    static const uint64_t MiB = 1ull << 20;
    const uint64_t sizes[] =
        {MiB,        2 * MiB,        3 * MiB,         10 * MiB,        48 * MiB,        100 * MiB,
         1024 * MiB, 7 * 1024 * MiB, 16 * 1024 * MiB, 64 * 1024 * MiB, 300 * 1024 * MiB};
    size_t i, k;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        wsync_manifest_t *m = NULL, *again = NULL;
        char d1[33], d2[33];
        long layers;
        CHECK_OK(wsync_manifest_synthetic(sizes[i], &m));
        CHECK_OK(wsync_manifest_synthetic(sizes[i], &again));
        if (m == NULL || again == NULL) {
            wsync_manifest_free(m);
            wsync_manifest_free(again);
            continue;
        }
        if (m->image_size < sizes[i] * 9 / 10 || m->image_size > sizes[i] * 11 / 10) {
            fprintf(stderr, "  budget %llu gave %llu bytes\n", (unsigned long long)sizes[i],
                    (unsigned long long)m->image_size);
            test_case_failed_ = 1;
        }
        digest(m, d1);
        digest(again, d2);
        CHECK_STR(d1, d2);
        /* embed, 9 per layer, norm, lm_head; all BF16, all named as in HF Llama. */
        CHECK_EQ((m->ntensors - 3) % 9, 0);
        layers = (long)(m->ntensors - 3) / 9;
        CHECK(layers >= 2);
        CHECK_EQ(wsync_manifest_find(m, "model.embed_tokens.weight"), 0);
        CHECK_EQ(wsync_manifest_find(m, "lm_head.weight"), (long)m->ntensors - 1);
        CHECK(wsync_manifest_find(m, "model.norm.weight") >= 0);
        CHECK(wsync_manifest_find(m, "model.layers.0.self_attn.q_proj.weight") >= 0);
        CHECK(wsync_manifest_find(m, "model.layers.1.mlp.down_proj.weight") >= 0);
        CHECK(wsync_manifest_find(m, "model.layers.0.post_attention_layernorm.weight") >= 0);
        for (k = 0; k < m->ntensors; k++)
            CHECK_EQ(m->tensors[k].dtype, WSYNC_DTYPE_BF16);
        /* The embedding stays a minor part, as in real models. */
        CHECK(m->tensors[0].size * 2 <= m->image_size / 2);
        wsync_manifest_free(m);
        wsync_manifest_free(again);
    }
}

static void synthetic_refuses_tiny_budgets(void)
{
    wsync_manifest_t *m = NULL;
    CHECK_FAILS(wsync_manifest_synthetic(1000, &m), WSYNC_ERR_INVALID, "too small");
    CHECK(m == NULL);
}

/* Error messages name the tensors a failed byte range touches: checked
 * against offsets computed here (each tensor at the next 256-byte boundary). */
static void describe_range_names_the_tensors(void)
{
    wsync_manifest_t *m = NULL;
    const int64_t small[1] = {10}, big[1] = {1000}; /* 20 and 2000 bytes of BF16 */
    char out[200];
    CHECK_OK(wsync_manifest_create(&m));
    CHECK_OK(wsync_manifest_add(m, "a", WSYNC_DTYPE_BF16, 1, small)); /* [0, 20) */
    CHECK_OK(wsync_manifest_add(m, "b", WSYNC_DTYPE_BF16, 1, big));   /* [256, 2256) */
    CHECK_OK(wsync_manifest_add(m, "c", WSYNC_DTYPE_BF16, 1, small)); /* [2304, 2324) */
    wsync_manifest_describe_range(m, 0, 10, out, sizeof(out));
    CHECK_STR(out, "tensor 'a'");
    wsync_manifest_describe_range(m, 20, 256, out, sizeof(out)); /* padding only */
    CHECK_STR(out, "no tensor");
    wsync_manifest_describe_range(m, 19, 257, out, sizeof(out));
    CHECK_STR(out, "tensors 'a' to 'b' (2)");
    wsync_manifest_describe_range(m, 300, 5000, out, sizeof(out));
    CHECK_STR(out, "tensors 'b' to 'c' (2)");
    wsync_manifest_describe_range(m, 0, 1ULL << 40, out, sizeof(out));
    CHECK_STR(out, "tensors 'a' to 'c' (3)");
    wsync_manifest_describe_range(m, 2324, 2400, out, sizeof(out));
    CHECK_STR(out, "no tensor");
    wsync_manifest_free(m);
}

int main(void)
{
    RUN(every_spec_dtype_parses_and_names_back);
    RUN(unknown_dtypes_are_refused);
    RUN(sub_byte_counts_must_pack_exactly);
    RUN(add_places_tensors_aligned_in_order);
    RUN(add_refuses_bad_tensors);
    RUN(many_tensors_index_by_name);
    RUN(json_round_trip_keeps_everything);
    RUN(from_json_refuses_bad_manifests);
    RUN(digest_is_stable_and_sensitive);
    RUN(synthetic_sizes_track_the_budget);
    RUN(synthetic_refuses_tiny_budgets);
    RUN(describe_range_names_the_tensors);
    TEST_EXIT();
}
