/* target_test.c: targets: the identity, runs of column slices and stacked
 * blocks, the JSON round trip, and every malformed or invalid target refused
 * with a message naming the tensor and the problem. */
#include "common/targets/target.h"
#include "tests/test.h"
#include "tests/unit/common/targets/target_gen.h"

static wsync_manifest_t *small_model(void)
{
    wsync_manifest_t *m = NULL;
    int64_t s2[2] = {6, 10}, s1[1] = {5}, f4[2] = {4, 6};
    wsync_manifest_create(&m);
    wsync_manifest_add(m, "w", WSYNC_DTYPE_BF16, 2, s2);  /* 120 bytes at 0 */
    wsync_manifest_add(m, "b", WSYNC_DTYPE_F32, 1, s1);   /* 20 bytes at 256 */
    wsync_manifest_add(m, "q", WSYNC_DTYPE_F4, 2, f4);    /* 12 bytes at 512 */
    wsync_manifest_add(m, "s", WSYNC_DTYPE_F32, 0, NULL); /* scalar at 768 */
    return m;
}

static void test_identity(void)
{
    wsync_manifest_t *m = small_model();
    wsync_target_t *t = NULL;
    wsync_run2d_t *runs = NULL;
    size_t n = 0, i;
    CHECK_OK(wsync_target_identity(m, &t));
    if (t == NULL)
        return;
    CHECK(t->whole_image);
    CHECK_EQ(t->ndests, m->ntensors);
    CHECK_EQ(t->image_size, m->image_size);
    CHECK_EQ(t->covered_bytes, m->image_size);
    for (i = 0; i < t->ndests; i++) {
        CHECK_STR(t->dests[i].name, m->tensors[i].name);
        CHECK_EQ(t->dests[i].offset, m->tensors[i].offset);
        CHECK_EQ(t->dests[i].size, m->tensors[i].size);
    }
    CHECK_OK(wsync_target_runs(t, m, &runs, &n));
    /* A run per tensor, each up to the next one: the image, padding included. */
    CHECK_EQ(n, m->ntensors);
    for (i = 0; i < n; i++) {
        CHECK_EQ(runs[i].src_off, runs[i].dst_off);
        CHECK_EQ(runs[i].src_off, m->tensors[i].offset);
        CHECK_EQ(runs[i].rows, 1);
        CHECK_EQ(runs[i].src_off + runs[i].row_bytes, i + 1 < n ? m->tensors[i + 1].offset : m->image_size);
    }
    free(runs);
    CHECK_EQ(strlen(t->digest_hex), 32);
    wsync_target_free(t);
    wsync_manifest_free(m);
}

/* Columns [4, 8) of w [6, 10]: one run of 6 rows, not 6 runs. */
static void test_column_slice_is_one_run(void)
{
    wsync_manifest_t *m = small_model();
    wsync_target_t *t = NULL;
    wsync_run2d_t *runs = NULL;
    int64_t shape[2] = {6, 4}, st[3] = {3, 6, 10};
    wsync_block_t b = {.src = 0, .src_start = {0, 4}, .src_stop = {6, 8}};
    wsync_block_t s0 = {.src = 0, .src_stop = {6, 10}, .dst_start = {2}};
    size_t n = 0;
    CHECK_OK(wsync_target_create(&t));
    CHECK_OK(wsync_target_add_dest(t, "slice", WSYNC_DTYPE_BF16, 2, shape));
    CHECK_OK(wsync_target_add_block(t, &b));
    /* And w stacked as item 2 of a [3, 6, 10] destination (items 0, 1 zero). */
    CHECK_OK(wsync_target_add_dest(t, "stack", WSYNC_DTYPE_BF16, 3, st));
    CHECK_OK(wsync_target_add_block(t, &s0));
    CHECK_OK(wsync_target_finish(t, m));
    CHECK_OK(wsync_target_runs(t, m, &runs, &n));
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_EQ(runs[0].src_off, 8);
        CHECK_EQ(runs[0].src_stride, 20);
        CHECK_EQ(runs[0].row_bytes, 8);
        CHECK_EQ(runs[0].rows, 6);
        CHECK_EQ(runs[0].dst_off, 0);
        CHECK_EQ(runs[1].dst_off, t->dests[1].offset + 2 * 120);
        CHECK_EQ(runs[1].row_bytes, 120);
        CHECK_EQ(runs[1].rows, 1);
    }
    CHECK_EQ(t->covered_bytes, 48 + 120);
    CHECK_EQ(t->dests[1].size, 360);
    free(runs);
    wsync_target_free(t);
    wsync_manifest_free(m);
}

static char *dump(const wsync_target_t *t, const wsync_manifest_t *m)
{
    json_t *j = NULL;
    char *s;
    if (wsync_target_to_json(t, m, &j) != WSYNC_OK)
        return NULL;
    s = json_dumps(j, JSON_INDENT(1));
    json_decref(j);
    return s;
}

static void test_json_round_trip(void)
{
    int i;
    for (i = 0; i < 300; i++) {
        wsync_manifest_t *m = gen_random_model();
        wsync_target_t *t = i % 10 == 0 ? NULL : gen_random_target(m), *u = NULL;
        char *text;
        size_t k;
        if (t == NULL)
            CHECK_OK(wsync_target_identity(m, &t));
        text = dump(t, m);
        CHECK(text != NULL);
        CHECK_OK(wsync_target_from_json(m, text, strlen(text), &u));
        if (u != NULL) {
            CHECK_STR(u->digest_hex, t->digest_hex);
            CHECK_EQ(u->ndests, t->ndests);
            CHECK_EQ(u->nblocks, t->nblocks);
            CHECK_EQ(u->image_size, t->image_size);
            for (k = 0; k < t->nblocks && k < u->nblocks; k++)
                CHECK(memcmp(&t->blocks[k], &u->blocks[k], sizeof(wsync_block_t)) == 0);
        }
        free(text);
        wsync_target_free(t);
        wsync_target_free(u);
        wsync_manifest_free(m);
        if (test_case_failed_)
            return;
    }
}

static void test_json_defaults(void)
{
    wsync_manifest_t *m = small_model();
    wsync_target_t *t = NULL;
    const char *j = "{\"version\":1,\"tensors\":[{\"name\":\"b2\",\"dtype\":\"F32\",\"shape\":[2,5],"
                    "\"blocks\":[{\"src\":\"b\",\"dst_start\":[1,0]}]}]}";
    CHECK_OK(wsync_target_from_json(m, j, strlen(j), &t));
    if (t) {
        CHECK_EQ(t->blocks[0].src_stop[0], 5);
        CHECK_EQ(t->covered_bytes, 20);
        CHECK_EQ(t->image_size, 256);
    }
    wsync_target_free(t);
    wsync_manifest_free(m);
}

static void test_json_malformed(void)
{
    static const struct {
        const char *json, *needle;
        wsync_status_t st;
    } bad[] = {
        {"{\"version\":1,", "not JSON", WSYNC_ERR_FORMAT},
        {"[1]", "not an object", WSYNC_ERR_FORMAT},
        {"{\"tensors\":[]}", "\"version\" must be 1", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"manifest\":\"00\",\"tensors\":[]}", "made for manifest 00", WSYNC_ERR_CONFLICT},
        {"{\"version\":1,\"image_size\":512,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1]}]}",
         "\"image_size\" must be 256", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"whole_image\":1}", "\"whole_image\" must be true or false", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"whole_image\":true,\"tensors\":[]}", "not both", WSYNC_ERR_FORMAT},
        {"{\"version\":1}", "\"tensors\" must be an array", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[3]}", "tensors[0] is not an object", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"dtype\":\"F32\",\"shape\":[]}]}", "tensors[0] has no \"name\"",
         WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F33\",\"shape\":[]}]}",
         "tensor 'x': \"dtype\" 'F33' is not", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1,-2]}]}",
         "tensor 'x': shape[1] is not an integer >= 0", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1]}]}",
         "tensor 'x': \"shape\" must be an array of at most 8", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1],\"offset\":256}]}",
         "tensor 'x': \"offset\" must be 0", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1]},"
         "{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[1]}]}",
         "'x' appears twice", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":{}}]}",
         "tensor 'x': \"blocks\" must be an array", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[1]}]}",
         "'x' block 0 is not an object", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{}]}]}",
         "'x' block 0 has no \"src\"", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":"
         "\"nope\"}]}]}",
         "source tensor 'nope' is not in the manifest", WSYNC_ERR_NOT_FOUND},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":\"b\","
         "\"src_start\":[0,0]}]}]}",
         "x block 0: \"src_start\" must be an array of 1", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":\"b\","
         "\"src_stop\":[\"5\"]}]}]}",
         "x block 0: \"src_stop\"[0] must be an integer", WSYNC_ERR_FORMAT},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"BF16\",\"shape\":[5],\"blocks\":[{\"src\":\"b\"}"
         "]}]}",
         "'x' is BF16 but block 0 copies F32 tensor 'b'", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"BF16\",\"shape\":[60],\"blocks\":[{\"src\":"
         "\"w\"}]}]}",
         "'x' has 1 dimensions, fewer than its source 'w' (2)", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":\"b\","
         "\"src_start\":[3],\"src_stop\":[3]}]}]}",
         "source 'b' dim 0 range [3, 3) is empty", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":\"b\","
         "\"src_stop\":[6]}]}]}",
         "range [0, 6) is empty or outside [0, 5)", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[5],\"blocks\":[{\"src\":\"b\","
         "\"dst_start\":[1]}]}]}",
         "'x' block 0: dim 0 [1, 6) is outside [0, 5)", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[2,5],\"blocks\":[{\"src\":"
         "\"b\","
         "\"dst_start\":[2,0]}]}]}",
         "'x' block 0: dst_start[0] = 2 is outside", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F32\",\"shape\":[8],\"blocks\":[{\"src\":\"b\"},"
         "{\"src\":\"b\",\"src_start\":[2],\"dst_start\":[3]}]}]}",
         "'x': two blocks write the bytes at offset 12", WSYNC_ERR_INVALID},
        {"{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F4\",\"shape\":[4,3],\"blocks\":[{\"src\":\"q\","
         "\"src_start\":[0,1],\"src_stop\":[4,4]}]}]}",
         "cuts F4 tensor 'q' inside a byte", WSYNC_ERR_INVALID},
    };
    wsync_manifest_t *m = small_model();
    size_t i;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wsync_target_t *t = NULL;
        CHECK_FAILS(wsync_target_from_json(m, bad[i].json, strlen(bad[i].json), &t), bad[i].st, bad[i].needle);
        wsync_target_free(t);
    }
    wsync_manifest_free(m);
}

/* F4 sliced on whole bytes is fine: columns [2, 6) of [4, 6] are 2 bytes a row. */
static void test_sub_byte_whole_bytes(void)
{
    wsync_manifest_t *m = small_model();
    wsync_target_t *t = NULL;
    const char *j = "{\"version\":1,\"tensors\":[{\"name\":\"x\",\"dtype\":\"F4\",\"shape\":[4,4],\"blocks\":[{"
                    "\"src\":\"q\",\"src_start\":[0,2],\"src_stop\":[4,6]}]}]}";
    wsync_run2d_t *runs = NULL;
    size_t n = 0;
    CHECK_OK(wsync_target_from_json(m, j, strlen(j), &t));
    if (t) {
        CHECK_OK(wsync_target_runs(t, m, &runs, &n));
        CHECK_EQ(n, 1);
        if (n == 1) {
            CHECK_EQ(runs[0].src_off, 512 + 1);
            CHECK_EQ(runs[0].src_stride, 3);
            CHECK_EQ(runs[0].row_bytes, 2);
            CHECK_EQ(runs[0].rows, 4);
        }
        free(runs);
    }
    wsync_target_free(t);
    wsync_manifest_free(m);
}

int main(void)
{
    RUN(test_identity);
    RUN(test_column_slice_is_one_run);
    RUN(test_json_round_trip);
    RUN(test_json_defaults);
    RUN(test_json_malformed);
    RUN(test_sub_byte_whole_bytes);
    TEST_EXIT();
}
