/* engine_report_test.c: each kind of engine report is the JSON the API
 * lists (compared with text written here by hand), parses back to what was
 * built, and a malformed field is refused naming it and its range. */
#include <string.h>

#include "common/proto/engine_report.h"
#include "tests/test.h"

static void same_text(const wsync_engine_report_t *r, const char *want)
{
    json_t *j = wsync_engine_report_to_json(r);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    wsync_engine_report_t back;
    CHECK_STR(text, want);
    CHECK_OK(wsync_engine_report_from_json(j, &back));
    CHECK(back.version == r->version && back.state == r->state && back.phase == r->phase &&
          back.bytes == r->bytes && back.total == r->total && back.holds == r->holds &&
          back.duration_s == r->duration_s && back.has_error == r->has_error &&
          strcmp(back.error, r->error) == 0 && back.has_node == r->has_node && strcmp(back.node, r->node) == 0 &&
          back.has_delta == r->has_delta && memcmp(&back.delta, &r->delta, sizeof(r->delta)) == 0);
    free(text);
    json_decref(j);
}

static void every_kind_round_trips(void)
{
    wsync_engine_report_t ready = {.version = 3,
                                   .state = WSYNC_REPORT_READY,
                                   .duration_s = 1.5,
                                   .bytes = 4096,
                                   .holds = -1};
    wsync_engine_report_t failed = {.version = 4,
                                    .state = WSYNC_REPORT_FAILED,
                                    .duration_s = 0.25,
                                    .holds = 0,
                                    .has_error = 1};
    wsync_engine_report_t note = {.version = 3, .state = WSYNC_REPORT_PULLING, .holds = -1, .has_node = 1};
    wsync_engine_report_t progress = {.version = 5,
                                      .state = WSYNC_REPORT_PULLING,
                                      .phase = WSYNC_PHASE_LANDING,
                                      .bytes = 10,
                                      .total = 100,
                                      .holds = -1};
    wsync_engine_report_t exited = {.version = 3, .state = WSYNC_REPORT_EXITED, .holds = -1};
    wsync_engine_report_t delta = {.version = 6,
                                   .state = WSYNC_REPORT_READY,
                                   .duration_s = 0.5,
                                   .bytes = 4096,
                                   .holds = -1,
                                   .has_delta = 1,
                                   .delta = {.pieces = 14, .wire_bytes = 100, .piece_bytes = 3000, .refetched = 1}};
    snprintf(failed.error, sizeof(failed.error), "piece 3: digest mismatch");
    snprintf(note.node, sizeof(note.node), "node degraded: local rank 1 (pid 7) is gone");
    same_text(&ready, "{\"version\":3,\"state\":\"ready\",\"duration_s\":1.5,\"bytes\":4096}");
    same_text(&failed, "{\"version\":4,\"state\":\"failed\",\"duration_s\":0.25,\"bytes\":0,"
                       "\"error\":\"piece 3: digest mismatch\",\"holds\":0}");
    same_text(&note,
              "{\"version\":3,\"state\":\"pulling\",\"node\":\"node degraded: local rank 1 (pid 7) is gone\"}");
    same_text(&progress, "{\"version\":5,\"state\":\"pulling\",\"phase\":\"landing\",\"bytes\":10,\"total\":100}");
    same_text(&exited, "{\"version\":3,\"state\":\"exited\"}");
    same_text(&delta,
              "{\"version\":6,\"state\":\"ready\",\"duration_s\":0.5,\"bytes\":4096,\"delta\":{\"pieces\":14,"
              "\"wire_bytes\":100,\"piece_bytes\":3000,\"refetched\":1}}");
}

static void refused(const char *text, const char *needle)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    wsync_engine_report_t r;
    CHECK(j != NULL);
    CHECK_FAILS(wsync_engine_report_from_json(j, &r), WSYNC_ERR_FORMAT, needle);
    json_decref(j);
}

static void malformed_fields_are_named(void)
{
    refused("[]", "not a JSON object");
    refused("{\"state\":\"ready\"}", "field 'version' must be an integer from 0 to 9007199254740991");
    refused("{\"version\":-1,\"state\":\"ready\"}", "field 'version'");
    refused("{\"version\":1,\"state\":\"done\"}", "field 'state' must be pulling, ready, failed or exited");
    refused("{\"version\":1,\"state\":\"ready\",\"duration_s\":-0.5}",
            "field 'duration_s' must be a finite number from 0 to 1e+07");
    refused("{\"version\":1,\"state\":\"ready\",\"bytes\":1.5}", "field 'bytes' must be an integer from 0 to");
    refused("{\"version\":1,\"state\":\"pulling\",\"phase\":\"copying\"}",
            "field 'phase' must be setup or landing");
    refused("{\"version\":1,\"state\":\"ready\",\"phase\":\"setup\"}",
            "field 'phase' (a progress note) needs state "
            "pulling");
    refused("{\"version\":1,\"state\":\"pulling\",\"total\":-3}", "field 'total'");
    refused("{\"version\":1,\"state\":\"failed\",\"holds\":\"1\"}", "field 'holds'");
    refused("{\"version\":1,\"state\":\"failed\",\"error\":5}", "field 'error' must be a string");
    refused("{\"version\":1,\"state\":\"pulling\",\"node\":[]}", "field 'node'");
    refused("{\"version\":1,\"state\":\"ready\",\"delta\":3}", "field 'delta' must be an object");
    refused("{\"version\":1,\"state\":\"ready\",\"delta\":{\"pieces\":1,\"wire_bytes\":1,\"piece_bytes\":1}}",
            "field 'refetched'");
    refused("{\"version\":1,\"state\":\"ready\",\"delta\":{\"pieces\":1,\"wire_bytes\":9,\"piece_bytes\":1,"
            "\"refetched\":0}}",
            "'wire_bytes' must not exceed");
}

static void long_errors_are_cut_not_refused(void)
{
    char big[2000];
    json_t *j;
    wsync_engine_report_t r;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    j = json_pack("{s:i, s:s, s:s}", "version", 2, "state", "failed", "error", big);
    CHECK_OK(wsync_engine_report_from_json(j, &r));
    CHECK(r.has_error && strlen(r.error) == sizeof(r.error) - 1);
    json_decref(j);
}

int main(void)
{
    RUN(every_kind_round_trips);
    RUN(malformed_fields_are_named);
    RUN(long_errors_are_cut_not_refused);
    TEST_EXIT();
}
