/* relay_registration_test.c: an engine node's registration is the JSON the
 * API lists (compared with text written here by hand), parses back, and a
 * malformed field is refused naming it and what it must be. */
#include <string.h>

#include "common/proto/relay_registration.h"
#include "tests/test.h"

static char *text_of(const wsync_relay_registration_t *r)
{
    json_t *j = wsync_relay_registration_to_json(r);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return t;
}

static void builds_the_api_text(void)
{
    wsync_relay_registration_t r = {.local_ranks = 8, .holds = 3};
    char *t;
    snprintf(r.id, sizeof(r.id), "node-1");
    snprintf(r.host, sizeof(r.host), "10.1.0.5");
    snprintf(r.host_id, sizeof(r.host_id), "h-abc");
    snprintf(r.relay, sizeof(r.relay), "10.1.0.5:41234");
    t = text_of(&r);
    CHECK_STR(t, "{\"id\":\"node-1\",\"host\":\"10.1.0.5\",\"local_ranks\":8,\"holds\":3,"
                 "\"endpoint\":{\"host_id\":\"h-abc\",\"relay\":\"10.1.0.5:41234\"}}");
    free(t);
    r.holds = -1;
    r.host_id[0] = r.relay[0] = '\0';
    t = text_of(&r);
    CHECK_STR(t, "{\"id\":\"node-1\",\"host\":\"10.1.0.5\",\"local_ranks\":8}");
    free(t);
}

static void parses_what_it_built(void)
{
    json_t *j = json_loads("{\"id\":\"n2\",\"host\":\"h\",\"local_ranks\":2,\"holds\":0,"
                           "\"endpoint\":{\"transport\":\"tcp\",\"relay\":\"1.2.3.4:5\"}}",
                           0, NULL),
           *back;
    wsync_relay_registration_t r;
    CHECK_OK(wsync_relay_registration_from_json(j, &r));
    CHECK_STR(r.id, "n2");
    CHECK_STR(r.host, "h");
    CHECK_EQ(r.local_ranks, 2);
    CHECK_EQ(r.holds, 0);
    CHECK_STR(r.relay, "1.2.3.4:5");
    CHECK_STR(r.host_id, "");
    /* Keys wsync does not know stay in the endpoint as sent. */
    back = wsync_relay_registration_to_json(&r);
    CHECK(json_equal(back, j));
    json_decref(back);
    wsync_relay_registration_clear(&r);
    CHECK(r.endpoint == NULL);
    json_decref(j);
}

static void refused(const char *text, const char *needle)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    wsync_relay_registration_t r;
    CHECK(j != NULL);
    CHECK_FAILS(wsync_relay_registration_from_json(j, &r), WSYNC_ERR_FORMAT, needle);
    CHECK(r.endpoint == NULL);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    char big[5200];
    int n;
    refused("7", "not a JSON object");
    refused("{\"host\":\"h\",\"local_ranks\":1}", "field 'id' must be a string of 1 to 127 bytes");
    refused("{\"id\":\"a/b\",\"host\":\"h\",\"local_ranks\":1}", "field 'id' must be under 128 printable");
    refused("{\"id\":\"a b\",\"host\":\"h\",\"local_ranks\":1}", "field 'id'");
    refused("{\"id\":\"a\",\"host\":\"\",\"local_ranks\":1}", "field 'host' must be a string of 1 to 127 bytes");
    refused("{\"id\":\"a\",\"host\":\"h\",\"local_ranks\":0}",
            "field 'local_ranks' must be an integer from 1 to 4096");
    refused("{\"id\":\"a\",\"host\":\"h\",\"local_ranks\":1,\"holds\":-1}",
            "field 'holds' must be an integer from 0");
    refused("{\"id\":\"a\",\"host\":\"h\",\"local_ranks\":1,\"endpoint\":[]}",
            "field 'endpoint' must be an object");
    refused("{\"id\":\"a\",\"host\":\"h\",\"local_ranks\":1,\"endpoint\":{\"relay\":5}}", "field 'relay'");
    n = snprintf(big, sizeof(big), "{\"id\":\"a\",\"host\":\"h\",\"local_ranks\":1,\"endpoint\":{\"x\":\"");
    memset(big + n, 'y', 4100);
    snprintf(big + n + 4100, sizeof(big) - (size_t)n - 4100, "\"}}");
    refused(big, "at most 4096 bytes");
}

int main(void)
{
    RUN(builds_the_api_text);
    RUN(parses_what_it_built);
    RUN(malformed_fields_are_named);
    TEST_EXIT();
}
