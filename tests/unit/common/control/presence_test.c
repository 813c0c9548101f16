/* presence_test.c: trainer ranks and engine nodes seen, gone after the
 * lease, forgotten after forget_after (ctl_sweep with a clock of its own);
 * one engine id, one host; a failed pull in place holds nothing; the
 * state-file journal replays to the same model. */
#include <string.h>

#include "common/base/log.h"
#include "tests/test.h"
#include "common/control/model.h"

static int reg(ctl_model_t *m, const char *id, const char *host, int holds, char *err, size_t errlen)
{
    json_t *b = json_pack("{s:s, s:s, s:i}", "id", id, "host", host, "local_ranks", 2);
    int changed = 0, code;
    if (holds >= 0)
        json_object_set_new(b, "holds", json_integer(holds));
    code = ctl_register_engine(m, b, err, errlen, &changed);
    json_decref(b);
    return code;
}

static int reg_trainer(ctl_model_t *m, int rank, int world, int *changed)
{
    json_t *b = json_pack("{s:i, s:i, s:s, s:{s:s}}", "rank", rank, "world", world, "host", "t", "endpoint",
                          "pull", "t:1");
    char err[256];
    int code = ctl_register_trainer(m, b, err, sizeof(err), changed);
    json_decref(b);
    return code;
}

static int publish1(ctl_model_t *m, int v)
{
    json_t *b = json_pack("{s:i, s:i, s:i, s:{s:s, s:i, s:s, s:s, s:i, s:i, s:{}}, s:[{s:i, s:i, s:i, s:s}]}",
                          "rank", 0, "world", 1, "version", v, "layout", "manifest_digest", "aa", "chunk_size", 4,
                          "layout", "even", "layout_digest", "cd", "image_size", 8, "world", 1, "manifest",
                          "pieces", "id", 0, "offset", 0, "len", 8, "digest", "00");
    json_t *reply = NULL;
    char err[256];
    int changed = 0, code = ctl_publish(m, b, &reply, err, sizeof(err), &changed);
    json_decref(reply);
    json_decref(b);
    return code;
}

static int report(ctl_model_t *m, const char *id, const char *body)
{
    json_t *b = json_loads(body, 0, NULL);
    char err[256];
    int changed = 0, code = ctl_report(m, id, b, err, sizeof(err), &changed);
    json_decref(b);
    return code;
}

static const char *presence(ctl_model_t *m, const char *id, char *buf)
{
    json_t *s = ctl_status_json(m), *e;
    size_t i;
    strcpy(buf, "absent");
    json_array_foreach(json_object_get(s, "engines"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "id")), id) == 0)
            strcpy(buf, json_string_value(json_object_get(e, "presence")));
    }
    json_decref(s);
    return buf;
}

static void test_gone_and_forgotten(void)
{
    ctl_model_t m;
    char err[512], buf[32];
    int changed;
    double t0;
    ctl_model_init(&m);
    m.lease_s = 30;
    m.forget_after_s = 300;
    CHECK_EQ(reg(&m, "a", "h1", -1, err, sizeof(err)), 200);
    CHECK_EQ(reg_trainer(&m, 0, 2, &changed), 200);
    CHECK_EQ(changed, 1);
    CHECK_EQ(reg_trainer(&m, 0, 2, &changed), 200); /* a heartbeat: nothing to save */
    CHECK_EQ(changed, 0);
    t0 = m.engines[0].last_seen;
    CHECK_EQ(ctl_sweep(&m, t0 + 10), 0);
    CHECK_STR(presence(&m, "a", buf), "live");
    CHECK_EQ(ctl_sweep(&m, t0 + 31), 0);
    CHECK_STR(presence(&m, "a", buf), "gone");
    CHECK_EQ(m.trainers[0].gone, 1);
    /* Gone, the id is free for another host, which holds nothing. */
    CHECK_EQ(reg(&m, "a", "h2", -1, err, sizeof(err)), 200);
    CHECK_STR(presence(&m, "a", buf), "live");
    CHECK_STR(m.engines[0].host, "h2");
    /* Live, it is not. */
    CHECK_EQ(reg(&m, "a", "h3", -1, err, sizeof(err)), 409);
    CHECK(strstr(err, "registered from host h2") != NULL);
    CHECK_EQ(ctl_sweep(&m, m.engines[0].last_seen + 301), 1);
    CHECK_STR(presence(&m, "a", buf), "absent");
    CHECK_EQ(m.trainers[0].registered, 0);
    ctl_model_free(&m);
}

static void test_holds_what_it_says(void)
{
    ctl_model_t m;
    char err[512], buf[32];
    ctl_model_init(&m);
    CHECK_EQ(publish1(&m, 1), 200);
    CHECK_EQ(publish1(&m, 2), 200);
    CHECK_EQ(reg(&m, "n", "h", -1, err, sizeof(err)), 200);
    CHECK_EQ(report(&m, "n", "{\"version\":1,\"state\":\"ready\",\"duration_s\":1,\"bytes\":8}"), 200);
    CHECK_EQ(m.engines[0].version, 1);
    /* A failed pull in place: the node says it holds nothing. */
    CHECK_EQ(report(&m, "n", "{\"version\":2,\"state\":\"failed\",\"error\":\"x\",\"holds\":0}"), 200);
    CHECK_EQ(m.engines[0].version, 0);
    CHECK_EQ(m.engines[0].failures, 1);
    CHECK_EQ(report(&m, "n", "{\"version\":2,\"state\":\"ready\",\"duration_s\":1,\"bytes\":8}"), 200);
    /* A heartbeat of a restarted node: holds nothing. */
    CHECK_EQ(reg(&m, "n", "h", 0, err, sizeof(err)), 200);
    CHECK_EQ(m.engines[0].version, 0);
    /* A note on its ranks changes nothing else; exited is gone. */
    CHECK_EQ(report(&m, "n", "{\"version\":0,\"state\":\"pulling\",\"node\":\"local rank 1 was replaced\"}"), 200);
    CHECK_STR(m.engines[0].node, "local rank 1 was replaced");
    CHECK_STR(m.engines[0].state, "ready");
    CHECK_EQ(report(&m, "n", "{\"version\":0,\"state\":\"exited\"}"), 200);
    CHECK_STR(presence(&m, "n", buf), "gone");
    CHECK_EQ(m.engines[0].exited, 1);
    ctl_model_free(&m);
}

static void test_journal_replays(void)
{
    ctl_model_t m, back;
    char err[512];
    json_t *journal, *e, *s1, *s2;
    size_t i;
    int changed;
    ctl_model_init(&m);
    ctl_model_init(&back);
    CHECK_EQ(publish1(&m, 1), 200);
    json_decref(m.journal); /* the publish is in the state file, not the journal */
    m.journal = NULL;
    CHECK_EQ(reg(&m, "a", "h", -1, err, sizeof(err)), 200);
    CHECK_EQ(reg(&m, "b", "h", -1, err, sizeof(err)), 200);
    CHECK_EQ(reg_trainer(&m, 0, 1, &changed), 200);
    CHECK_EQ(report(&m, "a", "{\"version\":1,\"state\":\"ready\",\"duration_s\":1,\"bytes\":8}"), 200);
    CHECK_EQ(ctl_sweep(&m, m.engines[1].last_seen + 1e9), 0); /* no forget_after: kept */
    m.forget_after_s = 10;
    CHECK_EQ(ctl_sweep(&m, m.engines[1].last_seen + 1e9), 1);
    CHECK_EQ(publish1(&back, 1), 200);
    back.replaying = 1;
    journal = m.journal;
    json_array_foreach(journal, i, e) CHECK_EQ(ctl_journal_apply(&back, e, err, sizeof(err)), 0);
    back.replaying = 0;
    CHECK_EQ(back.nengines, 0); /* both forgotten in the end */
    CHECK_EQ(back.trainers[0].registered, 0);
    /* Without the forgets: both there, "a" holding 1. */
    ctl_model_free(&back);
    ctl_model_init(&back);
    CHECK_EQ(publish1(&back, 1), 200);
    back.replaying = 1;
    json_array_foreach(journal, i, e)
    {
        if (strncmp(json_string_value(json_object_get(e, "op")), "forget", 6) != 0)
            CHECK_EQ(ctl_journal_apply(&back, e, err, sizeof(err)), 0);
    }
    back.replaying = 0;
    CHECK_EQ(back.nengines, 2);
    CHECK_EQ(back.engines[0].version, 1);
    s1 = json_object_get(e = ctl_state_json(&back), "engines");
    s2 = json_pack("[{s:s, s:s, s:i, s:i}, {s:s, s:s, s:i, s:i}]", "id", "a", "host", "h", "local_ranks", 2,
                   "version", 1, "id", "b", "host", "h", "local_ranks", 2, "version", 0);
    CHECK(json_equal(s1, s2));
    json_decref(e);
    json_decref(s2);
    e = json_pack("{s:s}", "op", "bogus");
    CHECK(ctl_journal_apply(&back, e, err, sizeof(err)) != 0);
    json_decref(e);
    ctl_model_free(&m);
    ctl_model_free(&back);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    RUN(test_gone_and_forgotten);
    RUN(test_holds_what_it_says);
    RUN(test_journal_replays);
    TEST_EXIT();
}
