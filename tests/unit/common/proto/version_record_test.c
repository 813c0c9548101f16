/* version_record_test.c: the version record's JSON is the API's (compared
 * with text written here by hand, not by the module), it survives the round
 * trip, and every malformed field is refused naming it and its range. */
#include <string.h>

#include "common/proto/version_record.h"
#include "tests/test.h"

/* A record as docs/API.md shows it: two pieces of two ranks, the second's
 * digest still to come. */
static const char *const api_text =
    "{\"manifest_digest\":\"bce17534440465a69f0eb6bc7ae9825a\",\"chunk_size\":64,\"layout\":\"even\","
    "\"layout_digest\":\"0123456789abcdef\",\"image_size\":128,\"world\":2,\"version\":7,"
    "\"pieces\":[{\"id\":0,\"offset\":0,\"len\":64,\"digest\":\"00112233445566ff\",\"rank\":0},"
    "{\"id\":1,\"offset\":64,\"len\":64,\"rank\":1}],"
    "\"trainers\":[{\"rank\":0,\"endpoint\":{\"pull\":\"10.0.0.1:41000\"}},"
    "{\"rank\":1,\"endpoint\":{\"pull\":\"10.0.0.2:41000\"}}],"
    "\"published_at\":1764680000.5,\"digests_pending\":1}";

static void parses_the_api_text_and_writes_it_back(void)
{
    json_t *j = json_loads(api_text, 0, NULL), *back;
    wsync_version_record_t r;
    char *text;
    CHECK(j != NULL);
    CHECK_OK(wsync_version_record_from_json(j, &r));
    CHECK_EQ(r.version, 7);
    CHECK_STR(r.manifest_digest, "bce17534440465a69f0eb6bc7ae9825a");
    CHECK_STR(r.layout, "even");
    CHECK_STR(r.layout_digest, "0123456789abcdef");
    CHECK_EQ(r.chunk_size, 64);
    CHECK_EQ(r.image_size, 128);
    CHECK_EQ(r.world, 2);
    CHECK_EQ(r.npieces, 2);
    CHECK(r.npieces == 2 && r.pieces[1].offset == 64 && r.pieces[1].len == 64 && r.pieces[1].rank == 1);
    CHECK_STR(r.pieces[0].digest, "00112233445566ff");
    CHECK_STR(r.pieces[1].digest, "");
    CHECK_EQ(r.digests_pending, 1);
    CHECK_EQ(wsync_version_record_count_late(&r), 1);
    CHECK_EQ(r.ntrainers, 2);
    CHECK(r.ntrainers == 2 &&
          strcmp(json_string_value(json_object_get(r.trainers[1].endpoint, "pull")), "10.0.0.2:41000") == 0);
    CHECK(r.published_at == 1764680000.5);
    CHECK(wsync_version_record_piece(&r, 1) == &r.pieces[1]);
    CHECK(wsync_version_record_piece(&r, 2) == NULL);
    /* Byte for byte what the API shows (fields, order, types). */
    back = wsync_version_record_to_json(&r);
    text = back ? json_dumps(back, JSON_COMPACT) : NULL;
    CHECK_STR(text, api_text);
    free(text);
    json_decref(back);
    wsync_version_record_clear(&r);
    json_decref(j);
}

static void copy_is_deep(void)
{
    json_t *j = json_loads(api_text, 0, NULL);
    wsync_version_record_t r, c;
    CHECK_OK(wsync_version_record_from_json(j, &r));
    CHECK(wsync_version_record_copy(&r, &c) == 0);
    snprintf(c.pieces[1].digest, sizeof(c.pieces[1].digest), "ffffffffffffffff");
    CHECK_STR(r.pieces[1].digest, "");
    CHECK_EQ(wsync_version_record_count_late(&c), 0);
    CHECK(c.trainers[0].endpoint == r.trainers[0].endpoint);
    wsync_version_record_clear(&c);
    wsync_version_record_clear(&r);
    CHECK(r.pieces == NULL && r.trainers == NULL);
    json_decref(j);
}

/* One field replaced (`path`: a top-level key, or "pieces.0.<key>" /
 * "trainers.0.<key>"), parsing must fail naming it. */
static void refused(const char *path, const char *value, const char *needle)
{
    json_t *j = json_loads(api_text, 0, NULL), *where = j;
    const char *key = path;
    wsync_version_record_t r;
    if (strncmp(path, "pieces.0.", 9) == 0 || strncmp(path, "trainers.0.", 11) == 0) {
        where = json_array_get(json_object_get(j, path[0] == 'p' ? "pieces" : "trainers"), 0);
        key = strrchr(path, '.') + 1;
    }
    if (value)
        json_object_set_new(where, key, json_loads(value, JSON_DECODE_ANY, NULL));
    else
        json_object_del(where, key);
    CHECK_FAILS(wsync_version_record_from_json(j, &r), WSYNC_ERR_FORMAT, needle);
    CHECK(r.pieces == NULL && r.trainers == NULL && r.manifest == NULL);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    refused("version", "0", "'version' must be an integer from 1 to 9007199254740991");
    refused("version", NULL, "'version'");
    refused("version", "\"7\"", "'version'");
    refused("manifest_digest", "\"\"", "'manifest_digest' must be a string of 1 to 127");
    refused("chunk_size", "0", "'chunk_size' must be an integer from 1 to 1099511627776");
    refused("layout", "3", "'layout'");
    refused("layout_digest", NULL, "'layout_digest'");
    refused("image_size", "-1", "'image_size'");
    refused("world", "4097", "'world' must be an integer from 1 to 4096");
    refused("published_at", "\"now\"", "'published_at'");
    refused("manifest", "[]", "'manifest'");
    refused("pieces", "{}", "'pieces' must be an array");
    refused("pieces.0.id", "-1", "pieces[0].'id' must be an integer from 0 to 2147483647");
    refused("pieces.0.id", "2", "pieces[1].'id' (1) must not be below the one before it (2)");
    refused("pieces.0.rank", "2", "pieces[0].'rank' must be an integer from 0 to 1");
    refused("pieces.0.offset", "4611686018427387905", "pieces[0].'offset'");
    refused("pieces.0.len", "1.5", "pieces[0].'len'");
    refused("pieces.0.digest", "\"00112233445566ff0\"", "pieces[0].'digest' must be a string of 1 to 16");
    refused("trainers.0.rank", "5", "trainers[0].'rank' must be an integer from 0 to 1");
    refused("trainers.0.endpoint", "\"x\"", "trainers[0].'endpoint' must be an object");
    refused("trainers", "[{},{},{}]", "'trainers' must be an array of at most 'world' (2)");
}

static void records_from_before_are_read(void)
{
    /* Without trainers (endpoints before 25.x) and with the manifest in it. */
    json_t *j = json_loads(api_text, 0, NULL);
    wsync_version_record_t r;
    json_object_del(j, "trainers");
    json_object_set_new(j, "manifest", json_pack("{s:i}", "version", 1));
    CHECK_OK(wsync_version_record_from_json(j, &r));
    CHECK_EQ(r.ntrainers, 0);
    CHECK(json_integer_value(json_object_get(r.manifest, "version")) == 1);
    wsync_version_record_clear(&r);
    json_decref(j);
}

int main(void)
{
    RUN(parses_the_api_text_and_writes_it_back);
    RUN(copy_is_deep);
    RUN(malformed_fields_are_named);
    RUN(records_from_before_are_read);
    TEST_EXIT();
}
