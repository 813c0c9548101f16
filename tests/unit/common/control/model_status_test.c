/* model_status_test.c: GET /v1/status written from the records
 * (ctl_status_text) is byte for byte what jansson dumps for the same
 * document built as a tree (ctl_status_json_at), over strings that need
 * escaping, figures in every form a real takes, entries that cannot be
 * built, progress, notes and pending versions; and a lease that runs out
 * shows as gone at once, the text saying until when it is true. */
#include <math.h>
#include <string.h>

#include "common/base/log.h"
#include "common/control/model.h"
#include "tests/test.h"

static void reg(ctl_model_t *m, const char *id, const char *host)
{
    json_t *b = json_pack("{s:s, s:s, s:i, s:{s:s, s:s}}", "id", id, "host", host, "local_ranks", 2, "endpoint",
                          "host_id", "h\"1", "relay", "10.0.0.1:7");
    char err[256];
    int changed = 0;
    CHECK_EQ(ctl_register_engine(m, b, err, sizeof(err), &changed), 200);
    json_decref(b);
}

static void reg_trainer(ctl_model_t *m, int rank, int world)
{
    json_t *b = json_pack("{s:i, s:i, s:s, s:{s:s}}", "rank", rank, "world", world, "host", "t\xc3\xa9",
                          "endpoint", "pull", "t:1");
    char err[256];
    int changed = 0;
    CHECK_EQ(ctl_register_trainer(m, b, err, sizeof(err), &changed), 200);
    json_decref(b);
}

/* Both texts at `now`; equal, and the text's validity returned. */
static double same_text(ctl_model_t *m, double now, const char *extra)
{
    json_t *tree = ctl_status_json_at(m, now);
    char *want, *got;
    size_t len = 0;
    double until = 0;
    if (extra) {
        json_t *x = json_loads(extra + strlen("\"state_file\":"), 0, NULL);
        json_object_set_new(tree, "state_file", x);
    }
    want = json_dumps(tree, JSON_COMPACT);
    got = ctl_status_text(m, now, extra, &len, &until);
    CHECK(got != NULL && want != NULL);
    if (got && want && strcmp(got, want) != 0) {
        size_t i = 0;
        while (got[i] && got[i] == want[i])
            i++;
        fprintf(stderr, "  texts differ at byte %zu:\n  want ...%.80s\n  got  ...%.80s\n", i, want + i, got + i);
        test_case_failed_ = 1;
    }
    CHECK(got == NULL || strlen(got) == len);
    if (getenv("STATUS_TEXT_SHOW") && got)
        fprintf(stderr, "%s\n", got);
    free(want);
    free(got);
    json_decref(tree);
    return until;
}

static void same_as_jansson_in_every_form(void)
{
    ctl_model_t m;
    double now = 1796219388.6376109;
    int i;
    ctl_model_init(&m);
    wsync_log_set_level(WSYNC_LOG_ERROR);
    same_text(&m, now, NULL); /* empty */
    reg_trainer(&m, 1, 3);
    reg(&m, "plain", "10.1.0.5");
    reg(&m, "odd", "h\\o\"st\t\x01\x1f\xe2\x80\xa8");
    reg(&m, "figures", "h");
    reg(&m, "broken", "h");
    reg(&m, "progress", "h");
    reg(&m, "nan", "h");
    for (i = 0; i < m.nengines; i++)
        m.engines[i].last_seen = m.engines[i].updated = now - 1;
    m.trainers[1].last_seen = now - 2;
    {
        ctl_engine_t *e = ctl_find_engine_locked(&m, "figures");
        e->last_sync_s = 1e-7;
        e->last_gbps = 5.12e-7;
        e->updated = 1e21;
        e->version = 5;
        e->target = 7;
        e->failures = 3;
        e->exited = 1;
        snprintf(e->last_error, sizeof(e->last_error), "line 1\nline 2 \"quoted\" / caf\xc3\xa9");
        snprintf(e->node, sizeof(e->node), "node degraded: local rank 1 (pid 7) is gone");
        /* large counts (below 2^63, as JSON integers are): the text writer's pieces must hold them */
        e->last_delta = (wsync_report_delta_t){.pieces = 1000000000000000ULL,
                                               .wire_bytes = 4000000000000000000ULL,
                                               .piece_bytes = 9000000000000000000ULL,
                                               .refetched = 1000000000000000ULL};
        e->delta_total = e->last_delta;
    }
    {
        ctl_engine_t *e = ctl_find_engine_locked(&m, "broken");
        memset(e->last_error, 'x', sizeof(e->last_error) - 2);
        e->last_error[sizeof(e->last_error) - 3] = '\xc3'; /* a sequence cut at 511 bytes */
        e->last_error[sizeof(e->last_error) - 2] = '\0';
    }
    {
        ctl_engine_t *e = ctl_find_engine_locked(&m, "progress");
        snprintf(e->state, sizeof(e->state), "pulling");
        snprintf(e->phase, sizeof(e->phase), "landing");
        e->progress_bytes = 123456789012ULL;
        e->progress_total = 1ULL << 40;
    }
    ctl_find_engine_locked(&m, "nan")->last_gbps = NAN; /* what no JSON holds: the error entry */
    m.latest = 9;
    m.latest_at = 1796219000.0;
    m.lease_s = 12.5;
    same_text(&m, now, NULL);
    same_text(&m, now, "\"state_file\":{\"path\":\"/s\",\"ok\":false,\"failed_writes\":2,\"error\":\"disk\"}");
    ctl_model_free(&m);
}

static void an_expired_lease_shows_at_once(void)
{
    ctl_model_t m;
    double now = 1000000.0, until;
    json_t *s;
    ctl_model_init(&m);
    wsync_log_set_level(WSYNC_LOG_ERROR);
    reg(&m, "a", "h");
    reg(&m, "b", "h");
    reg_trainer(&m, 0, 1);
    ctl_find_engine_locked(&m, "a")->last_seen = now - 10;
    ctl_find_engine_locked(&m, "b")->last_seen = now - 20;
    m.trainers[0].last_seen = now - 5;
    until = same_text(&m, now, NULL);
    CHECK(fabs(until - (now - 20 + CTL_LEASE_S)) < 1e-6); /* b's lease ends first */
    /* Past it, no sweep in between: b is gone in what is shown. */
    until = same_text(&m, now + 10.5, NULL);
    CHECK(fabs(until - (now - 10 + CTL_LEASE_S)) < 1e-6);
    s = ctl_status_json_at(&m, now + 10.5);
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(s, "engines"), 1), "presence")),
              "gone");
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(s, "engines"), 0), "presence")),
              "live");
    json_decref(s);
    until = same_text(&m, now + 100, NULL);
    CHECK(isinf(until)); /* nothing live: true until the next change */
    ctl_model_free(&m);
}

int main(void)
{
    RUN(same_as_jansson_in_every_form);
    RUN(an_expired_lease_shows_at_once);
    TEST_EXIT();
}
