/* fp8_amax_msg_test.c: the FP8 block maxima request between trainer ranks
 * is the JSON docs/FP8.md shows (compared with text written here by hand),
 * parses back, a malformed field is refused naming it, and the answer
 * carries each maximum's exact bits and refuses what is not one. */
#include <math.h>
#include <string.h>

#include "common/proto/fp8_amax_msg.h"
#include "tests/test.h"

static void builds_the_documented_text(void)
{
    wsync_fp8_amax_part_t parts[2] = {{7, 128, 128, 0, 3}, {9, 128, 64, 2, 0}};
    wsync_fp8_amax_req_t r = {12, parts, 2}, back;
    json_t *j = wsync_fp8_amax_req_to_json(&r);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    CHECK_STR(t, "{\"fp8_amax\":{\"version\":12,\"parts\":[7,128,128,0,3,9,128,64,2,0]}}");
    CHECK_OK(wsync_fp8_amax_req_from_json(json_object_get(j, "fp8_amax"), &back));
    CHECK_EQ(back.version, 12);
    CHECK_EQ(back.nparts, 2);
    CHECK(back.nparts == 2 && memcmp(back.parts, parts, sizeof(parts)) == 0);
    wsync_fp8_amax_req_clear(&back);
    free(t);
    json_decref(j);
}

static void refuses(const char *text, const char *needle)
{
    wsync_fp8_amax_req_t r;
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    CHECK(j != NULL);
    CHECK_FAILS(wsync_fp8_amax_req_from_json(j, &r), WSYNC_ERR_FORMAT, needle);
    wsync_fp8_amax_req_clear(&r);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    refuses("[1]", "must be an object");
    refuses("{\"parts\":[0,128,128,0,0]}", "version must be");
    refuses("{\"version\":0,\"parts\":[0,128,128,0,0]}", "version must be");
    refuses("{\"version\":1}", "5 integers per part");
    refuses("{\"version\":1,\"parts\":[]}", "5 integers per part");
    refuses("{\"version\":1,\"parts\":[0,128,128,0]}", "5 integers per part");
    refuses("{\"version\":1,\"parts\":[-1,128,128,0,0]}", "part 0's tensor");
    refuses("{\"version\":1,\"parts\":[4294967295,128,128,0,0]}", "part 0's tensor");
    refuses("{\"version\":1,\"parts\":[0,128,128,0,0,1,0,128,0,0]}", "part 1's block_rows");
    refuses("{\"version\":1,\"parts\":[0,128,257,0,0]}", "part 0's block_cols");
    refuses("{\"version\":1,\"parts\":[0,128,128,-1,0]}", "part 0's slice");
    refuses("{\"version\":1,\"parts\":[0,128,128,0,\"3\"]}", "part 0's band");
}

static void answers_carry_exact_bits(void)
{
    /* independent of the module: the bits of 3.0f and of 2^-126 (the least normal), written out */
    const float in[3] = {3.0f, 0.0f, ldexpf(1.0f, -126)};
    float out[3];
    json_t *reply = json_object(), *bad;
    char *t;
    CHECK_OK(wsync_fp8_amax_answer_set(reply, in, 3));
    t = json_dumps(json_object_get(reply, "amax"), JSON_COMPACT);
    CHECK_STR(t, "[1077936128,0,8388608]");
    free(t);
    CHECK_OK(wsync_fp8_amax_answer_get(reply, out, 3));
    CHECK(memcmp(in, out, sizeof(in)) == 0);
    CHECK_FAILS(wsync_fp8_amax_answer_get(reply, out, 2), WSYNC_ERR_PEER, "list of 2 maxima, got 3");
    bad = json_loads("{\"amax\":[2143289344]}", 0, NULL); /* a NaN's bits */
    CHECK_FAILS(wsync_fp8_amax_answer_get(bad, out, 1), WSYNC_ERR_PEER, "maximum 0 is not");
    json_decref(bad);
    bad = json_loads("{\"amax\":[3212836864]}", 0, NULL); /* -1.0f */
    CHECK_FAILS(wsync_fp8_amax_answer_get(bad, out, 1), WSYNC_ERR_PEER, "maximum 0 is not");
    json_decref(bad);
    bad = json_loads("{\"error\":\"trainer rank 1: refused\"}", 0, NULL);
    CHECK_FAILS(wsync_fp8_amax_answer_get(bad, out, 1), WSYNC_ERR_PEER, "trainer rank 1: refused");
    json_decref(bad);
    json_decref(reply);
}

int main(void)
{
    RUN(builds_the_documented_text);
    RUN(malformed_fields_are_named);
    RUN(answers_carry_exact_bits);
    TEST_EXIT();
}
