/* pull_reply_test.c: the answer to a pull request keeps the bytes the
 * trainer ranks and relays sent before it was a module (compared with
 * literal JSON text), survives the round trip, and every malformed field is
 * refused naming it. */
#include <stdlib.h>
#include <string.h>

#include "common/proto/pull_reply.h"
#include "tests/test.h"

static void text_is(const json_t *j, const char *want)
{
    char *got = json_dumps(j, JSON_COMPACT); /* as wsync_msg_send frames it */
    CHECK_STR(got, want);
    free(got);
}

static void served_reply_has_the_old_bytes(void)
{
    wsync_pull_reply_t r = {.pieces = 12, .bytes = 805306368};
    json_t *j = wsync_pull_reply_to_json(&r);
    text_is(j, "{\"ok\":true,\"pieces\":12,\"bytes\":805306368}");
    json_decref(j);
}

static void target_reply_carries_segment_digests(void)
{
    wsync_pull_reply_t r = {.pieces = 3, .bytes = 4096}, back;
    json_t *segs = json_object(), *j;
    CHECK_EQ(wsync_pull_reply_add_segment(segs, 7, 0x0123456789abcdefULL), 0);
    CHECK_EQ(wsync_pull_reply_add_segment(segs, 0, 0xffffffffffffffffULL), 0);
    CHECK_EQ(wsync_pull_reply_add_segment(segs, 4000000000u, 1), 0);
    r.segments = segs;
    j = wsync_pull_reply_to_json(&r);
    text_is(j, "{\"ok\":true,\"segments\":{\"7\":\"0123456789abcdef\",\"0\":\"ffffffffffffffff\","
               "\"4000000000\":\"0000000000000001\"},\"pieces\":3,\"bytes\":4096}");
    CHECK_OK(wsync_pull_reply_from_json(j, &back));
    CHECK_STR(back.error, "");
    CHECK_EQ(back.pieces, 3);
    CHECK_EQ(back.bytes, 4096);
    CHECK_EQ(back.nsegments, 3);
    CHECK(back.segment_ids[0] == 7 && back.segment_digests[0] == 0x0123456789abcdefULL);
    CHECK(back.segment_ids[1] == 0 && back.segment_digests[1] == 0xffffffffffffffffULL);
    CHECK(back.segment_ids[2] == 4000000000u && back.segment_digests[2] == 1);
    wsync_pull_reply_clear(&back);
    CHECK(back.segments == NULL && back.segment_ids == NULL && back.nsegments == 0);
    json_decref(j);
    json_decref(segs);
}

/* Asked for put digests (pull_request.h put_digests): "puts" instead. */
static void target_reply_carries_put_digests(void)
{
    wsync_pull_reply_t r = {.pieces = 2, .bytes = 64}, back;
    json_t *puts = json_object(), *j;
    CHECK_EQ(wsync_pull_reply_add_segment(puts, 12, 0xfedcba9876543210ULL), 0);
    CHECK_EQ(wsync_pull_reply_add_segment(puts, 3, 5), 0);
    r.puts = puts;
    j = wsync_pull_reply_to_json(&r);
    text_is(j, "{\"ok\":true,\"puts\":{\"12\":\"fedcba9876543210\",\"3\":\"0000000000000005\"},\"pieces\":2,"
               "\"bytes\":64}");
    CHECK_OK(wsync_pull_reply_from_json(j, &back));
    CHECK(back.segments == NULL && back.nsegments == 0);
    CHECK_EQ(back.nputs, 2);
    CHECK(back.put_ids[0] == 12 && back.put_digests[0] == 0xfedcba9876543210ULL);
    CHECK(back.put_ids[1] == 3 && back.put_digests[1] == 5);
    wsync_pull_reply_clear(&back);
    CHECK(back.puts == NULL && back.put_ids == NULL && back.nputs == 0);
    json_decref(j);
    json_decref(puts);
}

static void failed_reply_is_the_error_alone(void)
{
    wsync_pull_reply_t back;
    json_t *j = json_object();
    wsync_pull_reply_write_error(j, "trainer rank %d no longer holds version %d (newest: %d)", 1, 5, 9);
    text_is(j, "{\"error\":\"trainer rank 1 no longer holds version 5 (newest: 9)\"}");
    CHECK_OK(wsync_pull_reply_from_json(j, &back));
    CHECK_STR(back.error, "trainer rank 1 no longer holds version 5 (newest: 9)");
    CHECK(back.segments == NULL);
    json_decref(j);
    /* a struct with an error writes that alone, whatever else it holds */
    {
        wsync_pull_reply_t r = {.pieces = 4};
        snprintf(r.error, sizeof(r.error), "relay of engine e1: gone");
        j = wsync_pull_reply_to_json(&r);
        text_is(j, "{\"error\":\"relay of engine e1: gone\"}");
        json_decref(j);
    }
}

/* A reply to a pull that named a base: the base and every delta piece
 * (piece, form, bytes, at, and a put's digest when it has one) survive;
 * none written when none was asked. */
static void delta_reply_round_trip(void)
{
    wsync_pull_delta_t d[2] = {{.piece = 3, .form = WSYNC_DELTA_PAIRS, .bytes = 100, .at = 0},
                               {.piece = 9,
                                .form = WSYNC_DELTA_BITMAP,
                                .bytes = 4000,
                                .at = 104,
                                .has_digest = 1,
                                .digest = 0xfedcba9876543210ULL}};
    wsync_pull_reply_t r = {.pieces = 5, .bytes = 9000, .has_base = 1, .base = 6, .deltas = d, .ndeltas = 2}, out;
    json_t *j = wsync_pull_reply_to_json(&r);
    CHECK_OK(wsync_pull_reply_from_json(j, &out));
    CHECK(out.has_base && out.base == 6 && out.ndeltas == 2);
    CHECK(out.deltas[0].piece == 3 && out.deltas[0].form == WSYNC_DELTA_PAIRS && out.deltas[0].bytes == 100 &&
          out.deltas[0].at == 0);
    CHECK(out.deltas[1].piece == 9 && out.deltas[1].form == WSYNC_DELTA_BITMAP && out.deltas[1].bytes == 4000 &&
          out.deltas[1].at == 104);
    CHECK(!out.deltas[0].has_digest && out.deltas[1].has_digest && out.deltas[1].digest == 0xfedcba9876543210ULL);
    CHECK(json_object_get(json_array_get(json_object_get(j, "deltas"), 0), "digest") == NULL);
    wsync_pull_reply_clear(&out);
    CHECK(out.deltas == NULL);
    json_decref(j);
    r.has_base = 0;
    j = wsync_pull_reply_to_json(&r);
    CHECK(json_object_get(j, "base") == NULL && json_object_get(j, "deltas") == NULL);
    json_decref(j);
}

static void refused(const char *text, const char *needle)
{
    wsync_pull_reply_t out;
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    CHECK(j != NULL);
    CHECK_FAILS(wsync_pull_reply_from_json(j, &out), WSYNC_ERR_FORMAT, needle);
    CHECK(out.segments == NULL && out.segment_ids == NULL && out.puts == NULL && out.put_ids == NULL);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    refused("[1]", "not a JSON object");
    refused("{}", "field 'ok'");
    refused("{\"ok\":false,\"pieces\":1,\"bytes\":1}", "field 'ok'");
    refused("{\"error\":7}", "field 'error'");
    refused("{\"error\":\"\"}", "field 'error'");
    refused("{\"ok\":true,\"bytes\":1}", "field 'pieces'");
    refused("{\"ok\":true,\"pieces\":-1,\"bytes\":1}", "field 'pieces'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":\"1\"}", "field 'bytes'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":[]}", "field 'segments'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"x1\":\"0123456789abcdef\"}}", "key 'x1'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"01\":\"0123456789abcdef\"}}", "key '01'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"4294967296\":\"0123456789abcdef\"}}",
            "key '4294967296'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"3\":\"0123456789ABCDEF\"}}", "entry '3'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"2\":\"0123\"}}", "entry '2'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"segments\":{\"2\":5}}", "entry '2'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"puts\":[]}", "field 'puts'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"puts\":{\"p1\":\"0123456789abcdef\"}}",
            "field 'puts' key 'p1'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"puts\":{\"1\":\"0123\"}}", "field 'puts' entry '1'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"deltas\":[]}", "field 'base'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":{}}", "field 'deltas'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":0,\"deltas\":[{\"piece\":1,\"form\":\"pairs\","
            "\"bytes\":40,\"at\":0}]}",
            "field 'base' is 0");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":-1,\"form\":\"pairs\","
            "\"bytes\":40,\"at\":0}]}",
            "entry 0: 'piece'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":1,\"form\":\"full\","
            "\"bytes\":40,\"at\":0}]}",
            "entry 0: 'form'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":1,\"form\":\"bitmap\","
            "\"bytes\":4,\"at\":0}]}",
            "entry 0: 'bytes'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":1,\"form\":\"bitmap\","
            "\"bytes\":40,\"at\":9223372036854775800}]}",
            "entry 0: 'bytes'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":1,\"form\":\"bitmap\","
            "\"bytes\":40,\"at\":0,\"digest\":\"0123\"}]}",
            "entry 0: 'digest'");
    refused("{\"ok\":true,\"pieces\":1,\"bytes\":1,\"base\":2,\"deltas\":[{\"piece\":1,\"form\":\"bitmap\","
            "\"bytes\":40,\"at\":0,\"digest\":7}]}",
            "entry 0: 'digest'");
}

int main(void)
{
    RUN(served_reply_has_the_old_bytes);
    RUN(target_reply_carries_segment_digests);
    RUN(target_reply_carries_put_digests);
    RUN(failed_reply_is_the_error_alone);
    RUN(delta_reply_round_trip);
    RUN(malformed_fields_are_named);
    TEST_EXIT();
}
