/* pull_request_test.c: the engine -> trainer pull request survives the round
 * trip through JSON, and every malformed field is refused naming it. */
#include <string.h>

#include "common/proto/pull_request.h"
#include "tests/test.h"

static wsync_pull_request_t sample(unsigned char *map, size_t nmap)
{
    wsync_pull_request_t r = {.version = 42,
                              .local_rank = 1,
                              .local_ranks = 3,
                              .req = 0x1234567,
                              .timeout_ms = 4000,
                              .chunks = map,
                              .chunk_bytes = nmap};
    snprintf(r.engine, sizeof(r.engine), "node-7");
    snprintf(r.transport, sizeof(r.transport), "tcp");
    snprintf(r.layout_digest, sizeof(r.layout_digest), "0123456789abcdef");
    r.addr.len = 5;
    memcpy(r.addr.data, "\x01\x02\x03\x04\x05", 5);
    r.key.len = 3;
    memcpy(r.key.data, "\xff\x00\x7f", 3);
    return r;
}

static void round_trip_keeps_every_field(void)
{
    unsigned char map[2] = {0x81, 0x02}; /* chunks 0, 7, 9 of 10 */
    wsync_pull_request_t in = sample(map, sizeof(map)), out;
    json_t *j = wsync_pull_request_to_json(&in);
    CHECK(j != NULL);
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK_EQ(out.version, 42);
    CHECK_STR(out.engine, "node-7");
    CHECK_EQ(out.local_rank, 1);
    CHECK_EQ(out.local_ranks, 3);
    CHECK_EQ(out.req, 0x1234567);
    CHECK_STR(out.transport, "tcp");
    CHECK(out.addr.len == 5 && memcmp(out.addr.data, in.addr.data, 5) == 0);
    CHECK(out.key.len == 3 && memcmp(out.key.data, in.key.data, 3) == 0);
    CHECK_STR(out.layout_digest, "0123456789abcdef");
    CHECK_EQ(out.timeout_ms, 4000);
    CHECK(out.chunk_bytes == 2 && out.chunks && memcmp(out.chunks, map, 2) == 0);
    CHECK(wsync_pull_request_lands(&out, 0) && wsync_pull_request_lands(&out, 7) &&
          wsync_pull_request_lands(&out, 9));
    CHECK(!wsync_pull_request_lands(&out, 1) && !wsync_pull_request_lands(&out, 8) &&
          !wsync_pull_request_lands(&out, 12));
    wsync_pull_request_clear(&out);
    json_decref(j);
}

static void without_a_map_chunks_land_round_robin(void)
{
    wsync_pull_request_t in = sample(NULL, 0), out;
    json_t *j = wsync_pull_request_to_json(&in);
    CHECK(json_object_get(j, "chunks") == NULL);
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK(out.chunks == NULL);
    CHECK(wsync_pull_request_lands(&out, 1) && wsync_pull_request_lands(&out, 4));
    CHECK(!wsync_pull_request_lands(&out, 0) && !wsync_pull_request_lands(&out, 2));
    json_decref(j);
}

/* `field` set to the JSON `value` (NULL: removed) must fail naming `needle`. */
static void refused(const char *field, const char *value, uint32_t nchunks, const char *needle)
{
    unsigned char map[2] = {1, 0};
    wsync_pull_request_t in = sample(map, sizeof(map)), out;
    json_t *j = wsync_pull_request_to_json(&in);
    if (value)
        json_object_set_new(j, field, json_loads(value, JSON_DECODE_ANY, NULL));
    else
        json_object_del(j, field);
    CHECK_FAILS(wsync_pull_request_from_json(j, nchunks, &out), WSYNC_ERR_FORMAT, needle);
    CHECK(out.chunks == NULL);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    static const struct {
        const char *field, *value; /* value NULL: the field is removed */
        uint32_t nchunks;
        const char *needle;
    } cases[] = {
        {"version", "0", 10, "'version'"},
        {"version", "\"3\"", 10, "'version'"},
        {"engine", NULL, 10, "'engine'"},
        {"engine", "\"\"", 10, "'engine'"},
        {"local_ranks", "0", 10, "'local_ranks'"},
        {"local_rank", "3", 10, "'local_rank'"},
        {"local_rank", "-1", 10, "'local_rank'"},
        {"req", "0", 10, "'req'"},
        {"req", "2147483648", 10, "'req'"},
        {"transport", "\"a-transport-name-too-long\"", 10, "'transport'"},
        {"addr", "\"0g\"", 10, "'addr'"},
        {"key", "7", 10, "'key'"},
        {"layout_digest", NULL, 10, "'layout_digest'"},
        {"timeout_ms", "1.5", 10, "'timeout_ms'"},
        {"chunks", "\"0102\"", 30, "'chunks' has 2 bytes"},
        {"chunks", "\"01x2\"", 10, "'chunks'"},
        {"put_digests", "1", 10, "'put_digests'"},
        {"in_order", "1", 10, "'in_order'"},
        {"no_segment_digests", "\"yes\"", 10, "'no_segment_digests'"},
    };
    wsync_pull_request_t out;
    json_t *a = json_array();
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        refused(cases[i].field, cases[i].value, cases[i].nchunks, cases[i].needle);
    CHECK_FAILS(wsync_pull_request_from_json(a, 10, &out), WSYNC_ERR_FORMAT, "not a JSON object");
    json_decref(a);
}

/* A delta pull: the base and where the wires go survive; without a base
 * none of the fields is written; each malformed one is named. */
static void delta_fields_round_trip(void)
{
    wsync_pull_request_t in = sample(NULL, 0), out;
    json_t *j = wsync_pull_request_to_json(&in);
    CHECK(json_object_get(j, "base") == NULL && json_object_get(j, "delta_key") == NULL);
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK_EQ(out.base, 0);
    json_decref(j);
    in.base = 41;
    in.delta_key.len = 2;
    memcpy(in.delta_key.data, "\x09\x08", 2);
    in.delta_at = 8192;
    in.delta_bytes = 65536;
    j = wsync_pull_request_to_json(&in);
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK_EQ(out.base, 41);
    CHECK(out.delta_key.len == 2 && memcmp(out.delta_key.data, "\x09\x08", 2) == 0);
    CHECK_EQ(out.delta_at, 8192);
    CHECK_EQ(out.delta_bytes, 65536);
    json_object_set_new(j, "base", json_integer(42)); /* not older than the version */
    CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'base'");
    json_object_set_new(j, "base", json_integer(0));
    CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'base'");
    json_object_set_new(j, "base", json_integer(41));
    json_object_del(j, "delta_key");
    CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'delta_key'");
    json_object_set_new(j, "delta_key", json_string("0908"));
    json_object_set_new(j, "delta_bytes", json_integer(-1));
    CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'delta_bytes'");
    json_object_set_new(j, "delta_bytes", json_integer(1));
    json_object_set_new(j, "delta_at", json_string("0"));
    CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'delta_at'");
    json_decref(j);
}

/* A request with targets: digests and definitions survive; the chunk map is
 * checked against the node plan later, by wsync_pull_request_check_chunks. */
static void targets_round_trip(void)
{
    unsigned char map[3] = {0x05, 0x00, 0x01}; /* 17 chunks of the node plan */
    char digests[3][33] = {"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210",
                           "0123456789abcdef0123456789abcdef"};
    wsync_pull_request_t in = sample(map, sizeof(map)), out;
    json_t *j;
    in.ntargets = 3;
    in.targets = digests;
    in.target_defs = json_pack("{s:{s:i}}", digests[1], "version", 1);
    j = wsync_pull_request_to_json(&in);
    CHECK(j != NULL);
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out)); /* 10: the identity plan's, not used */
    CHECK_EQ(out.ntargets, 3);
    CHECK(out.targets && strcmp(out.targets[1], digests[1]) == 0 && strcmp(out.targets[2], digests[0]) == 0);
    CHECK(json_object_get(out.target_defs, digests[1]) != NULL);
    CHECK_OK(wsync_pull_request_check_chunks(&out, 17));
    CHECK_FAILS(wsync_pull_request_check_chunks(&out, 30), WSYNC_ERR_FORMAT, "'chunks' has 3 bytes");
    CHECK(wsync_pull_request_lands(&out, 0) && wsync_pull_request_lands(&out, 2) &&
          wsync_pull_request_lands(&out, 16));
    CHECK(!wsync_pull_request_lands(&out, 1));
    CHECK_EQ(out.hint_world, 0);
    CHECK_EQ(out.put_digests, 0); /* not asked: the field is not written */
    CHECK(json_object_get(j, "put_digests") == NULL);
    CHECK_EQ(out.no_segment_digests, 0);
    CHECK(json_object_get(j, "no_segment_digests") == NULL);
    wsync_pull_request_clear(&out);
    CHECK(out.targets == NULL && out.target_defs == NULL);
    json_decref(j);
    in.put_digests = 1; /* answer with put digests (pull_reply.h "puts") */
    j = wsync_pull_request_to_json(&in);
    CHECK(json_is_true(json_object_get(j, "put_digests")));
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK_EQ(out.put_digests, 1);
    wsync_pull_request_clear(&out);
    json_decref(j);
    in.put_digests = 0;
    /* A node of identity targets asks for no segment digests. */
    in.no_segment_digests = 1;
    j = wsync_pull_request_to_json(&in);
    CHECK(json_is_true(json_object_get(j, "no_segment_digests")));
    CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
    CHECK_EQ(out.no_segment_digests, 1);
    wsync_pull_request_clear(&out);
    json_decref(j);
    in.no_segment_digests = 0;
    {
        /* The colocated landing hint: trainer rank 0 on the GPU of local
         * ranks 2 and 0, rank 1 on none of theirs. */
        int colo[6] = {2, 0, 0, 0, 0, 0}, ncolo[2] = {2, 0};
        in.hint_world = 2;
        in.colo = colo;
        in.ncolo = ncolo;
        j = wsync_pull_request_to_json(&in);
        CHECK_OK(wsync_pull_request_from_json(j, 10, &out));
        CHECK_EQ(out.hint_world, 2);
        CHECK(out.ncolo && out.ncolo[0] == 2 && out.ncolo[1] == 0 && out.colo[0] == 2 && out.colo[1] == 0);
        wsync_pull_request_clear(&out);
        json_object_set_new(j, "land_hint", json_loads("[[0, 3]]", 0, NULL));
        CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'land_hint' entry 0 holds");
        CHECK(out.targets == NULL && out.colo == NULL);
        json_decref(j);
    }
    json_decref(in.target_defs);
}

static void malformed_targets_are_named(void)
{
    static const char *bad[] = {"[\"0123456789abcdef0123456789abcdef\"]", /* 1 digest for 3 ranks */
                                "[\"x\", \"y\", \"z\"]", "7"};
    unsigned char map[2] = {1, 0};
    size_t i;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wsync_pull_request_t in = sample(map, sizeof(map)), out;
        json_t *j = wsync_pull_request_to_json(&in);
        json_object_set_new(j, "targets", json_loads(bad[i], JSON_DECODE_ANY, NULL));
        CHECK_FAILS(wsync_pull_request_from_json(j, 10, &out), WSYNC_ERR_FORMAT, "'targets'");
        CHECK(out.targets == NULL && out.chunks == NULL);
        json_decref(j);
    }
}

int main(void)
{
    RUN(round_trip_keeps_every_field);
    RUN(without_a_map_chunks_land_round_robin);
    RUN(malformed_fields_are_named);
    RUN(delta_fields_round_trip);
    RUN(targets_round_trip);
    RUN(malformed_targets_are_named);
    TEST_EXIT();
}
