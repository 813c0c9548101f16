/* client_test.c: the control client against a real in-process control
 * server: every route and error code, auth, publish rules, reports, restart
 * from the state file and refusal of a corrupt one. Long polls, cancelling
 * and an endpoint that is away: client_polls_test.c. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/control/client.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "tests/test.h"
#include "common/control/control_server.h"
#include "tests/unit/common/control/control_rig.h"

static char tmpdir[256];

static void test_healthz_status_metrics(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *st = NULL;
    long http = 0;
    CHECK(c != NULL);
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_request(c, "GET", "/healthz", NULL, 0, &http, &st));
    CHECK_EQ(http, 200);
    json_decref(st);
    st = NULL;
    CHECK_OK(wsync_control_status(c, &st));
    CHECK(json_is_integer(json_object_get(st, "latest_version")));
    CHECK(json_is_array(json_object_get(st, "trainers")));
    CHECK(json_is_array(json_object_get(st, "engines")));
    json_decref(st);
    CHECK_EQ(raw(c, "GET", "/metrics", NULL, NULL), 200);
out:
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_register_and_lookup(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *ep0 = json_pack("{s:s, s:s}", "transport", "tcp", "pull", "10.0.0.1:41000");
    json_t *ep1 = json_pack("{s:s, s:[i,i], s:{s:i}}", "transport", "verbs", "gid", 1, 2, "qp", "n", 7);
    json_t *arr = NULL, *st = NULL, *e;
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_register_trainer(c, 1, 2, "hostb", ep1));
    CHECK_OK(wsync_control_register_trainer(c, 0, 2, "hosta", ep0));
    CHECK_OK(wsync_control_trainers(c, &arr));
    CHECK_EQ(json_array_size(arr), 2);
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(arr, 0), "rank")), 0);
    CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 0), "host")), "hosta");
    CHECK(json_equal(json_object_get(json_array_get(arr, 0), "endpoint"), ep0));
    CHECK(json_equal(json_object_get(json_array_get(arr, 1), "endpoint"), ep1)); /* opaque, as sent */
    CHECK_FAILS(wsync_control_register_trainer(c, 2, 2, "x", ep0), WSYNC_ERR_INVALID, "rank");
    CHECK_OK(wsync_control_register_engine(c, "node-a", "enghost", 8, NULL));
    CHECK_OK(wsync_control_register_engine(c, "node-a", "enghost", 4, ep0)); /* re-register updates */
    /* The id of a live node, from another host: refused, naming both. */
    CHECK_FAILS(wsync_control_register_engine(c, "node-a", "enghost2", 4, ep0), WSYNC_ERR_CONFLICT,
                "registered from host enghost");
    CHECK_FAILS(wsync_control_register_engine(c, "bad/id", "h", 1, NULL), WSYNC_ERR_INVALID, "'id'");
    CHECK_FAILS(wsync_control_register_engine(c, "n", "h", 0, NULL), WSYNC_ERR_INVALID, "local_ranks");
    CHECK_OK(wsync_control_status(c, &st));
    CHECK_EQ(json_array_size(json_object_get(st, "engines")), 1);
    e = json_array_get(json_object_get(st, "engines"), 0);
    CHECK_STR(json_string_value(json_object_get(e, "id")), "node-a");
    CHECK_STR(json_string_value(json_object_get(e, "host")), "enghost");
    CHECK_EQ(json_integer_value(json_object_get(e, "local_ranks")), 4);
    CHECK_STR(json_string_value(json_object_get(e, "state")), "idle");
out:
    json_decref(arr);
    json_decref(st);
    json_decref(ep0);
    json_decref(ep1);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_publish_rules(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *rec = NULL, *l, *p, *pc;
    uint64_t v = 99;
    size_t i;
    if (c == NULL)
        goto out;
    /* Rank 1 alone: not yet published. */
    l = layout("aaaabbbbccccddddaaaabbbbccccdddd", 2, 0);
    p = pieces(2, 2);
    CHECK_OK(wsync_control_publish(c, 1, 2, 5, l, p));
    CHECK_OK(wsync_control_wait_version(c, 0, 0, &v));
    CHECK_EQ(v, 0);
    /* Same version from rank 0 with another manifest digest: conflict. */
    json_decref(l);
    l = layout("ffffbbbbccccddddaaaabbbbccccdddd", 2, 1);
    CHECK_FAILS(wsync_control_publish(c, 0, 2, 5, l, p), WSYNC_ERR_CONFLICT, "different layout");
    /* Rank 0 naming a manifest the endpoint does not hold (neither posted to
     * /v1/layouts nor sent along): refused, saying where to post it. */
    json_decref(l);
    l = layout("aaaabbbbccccddddaaaabbbbccccdddd", 2, 0);
    CHECK_FAILS(wsync_control_publish(c, 0, 2, 5, l, p), WSYNC_ERR_NOT_FOUND, "POST /v1/layouts/");
    json_decref(l);
    json_decref(p);
    l = layout("aaaabbbbccccddddaaaabbbbccccdddd", 2, 1);
    p = pieces(0, 2);
    CHECK_OK(wsync_control_publish(c, 0, 2, 5, l, p));
    json_decref(l);
    json_decref(p);
    CHECK_OK(wsync_control_wait_version(c, 0, 0, &v));
    CHECK_EQ(v, 5);
    CHECK_OK(wsync_control_get_version(c, 5, &rec));
    CHECK_EQ(json_integer_value(json_object_get(rec, "version")), 5);
    CHECK_EQ(json_integer_value(json_object_get(rec, "world")), 2);
    /* The record names the manifest; the layout route holds it. */
    CHECK(json_object_get(rec, "manifest") == NULL);
    CHECK_STR(json_string_value(json_object_get(rec, "manifest_digest")), "aaaabbbbccccddddaaaabbbbccccdddd");
    {
        json_t *man = NULL;
        CHECK_OK(wsync_control_get_layout(c, "aaaabbbbccccddddaaaabbbbccccdddd", &man));
        CHECK(json_is_array(json_object_get(man, "tensors")));
        json_decref(man);
    }
    CHECK_EQ(json_array_size(json_object_get(rec, "pieces")), 4);
    json_array_foreach(json_object_get(rec, "pieces"), i, pc)
    {
        CHECK_EQ(json_integer_value(json_object_get(pc, "id")), (long long)i); /* merged, sorted by id */
        CHECK_EQ(json_integer_value(json_object_get(pc, "rank")), (long long)i / 2);
    }
    /* Versions only move forward; the same reports of a published version
     * are that publish again (a retry whose answer was lost). */
    CHECK_OK(publish_all(c, 2, 5));
    CHECK_FAILS(publish_all(c, 2, 3), WSYNC_ERR_CONFLICT, "not newer");
    CHECK_FAILS(wsync_control_get_version(c, 4, &rec), WSYNC_ERR_NOT_FOUND, "version 4");
    CHECK_OK(publish_all(c, 2, 9));
    CHECK_OK(wsync_control_wait_version(c, 5, 1000, &v));
    CHECK_EQ(v, 9);
out:
    json_decref(rec);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_retention(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *rec = NULL;
    uint64_t v;
    if (c == NULL)
        goto out;
    for (v = 1; v <= 12; v++)
        CHECK_OK(publish_all(c, 1, v));
    CHECK_FAILS(wsync_control_get_version(c, 4, &rec), WSYNC_ERR_NOT_FOUND, "no longer retained");
    for (v = 5; v <= 12; v++) { /* the last 8 */
        CHECK_OK(wsync_control_get_version(c, v, &rec));
        json_decref(rec);
        rec = NULL;
    }
out:
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_reports(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *st = NULL, *e;
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_register_engine(c, "n1", "h1", 2, NULL));
    CHECK_FAILS(wsync_control_report(c, "n1", 1, "ready", 1.0, 100, NULL), WSYNC_ERR_CONFLICT, "never published");
    CHECK_FAILS(wsync_control_report(c, "ghost", 1, "pulling", 0, 0, NULL), WSYNC_ERR_NOT_FOUND, "ghost");
    CHECK_FAILS(wsync_control_report(c, "n1", 1, "dancing", 0, 0, NULL), WSYNC_ERR_INVALID, "state");
    CHECK_OK(publish_all(c, 1, 1));
    CHECK_OK(publish_all(c, 1, 2));
    CHECK_OK(wsync_control_report(c, "n1", 1, "pulling", 0, 0, NULL));
    CHECK_OK(wsync_control_status(c, &st));
    e = json_array_get(json_object_get(st, "engines"), 0);
    CHECK_STR(json_string_value(json_object_get(e, "state")), "pulling");
    json_decref(st);
    CHECK_OK(wsync_control_report(c, "n1", 1, "ready", 2.0, 4000000000ULL, NULL));
    CHECK_OK(wsync_control_status(c, &st));
    e = json_array_get(json_object_get(st, "engines"), 0);
    CHECK_STR(json_string_value(json_object_get(e, "state")), "ready");
    CHECK_EQ(json_integer_value(json_object_get(e, "version")), 1);
    CHECK_EQ(json_integer_value(json_object_get(e, "behind")), 1);
    CHECK(json_real_value(json_object_get(e, "last_sync_s")) == 2.0);
    CHECK(json_real_value(json_object_get(e, "last_gbps")) == 2.0);
    json_decref(st);
    CHECK_OK(wsync_control_report(c, "n1", 2, "failed", 0.5, 0, "digest mismatch in piece 3 from rank 0"));
    CHECK_OK(wsync_control_status(c, &st));
    e = json_array_get(json_object_get(st, "engines"), 0);
    CHECK_STR(json_string_value(json_object_get(e, "state")), "failed");
    CHECK_EQ(json_integer_value(json_object_get(e, "version")), 1); /* a failed sync holds the old one */
    CHECK_STR(json_string_value(json_object_get(e, "last_error")), "digest mismatch in piece 3 from rank 0");
out:
    json_decref(st);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

/* Every error code of the API with its JSON error body naming the problem. */
static void expect_error(wsync_control_t *c, const char *method, const char *path, const char *body, long code,
                         const char *needle)
{
    json_t *r = NULL;
    const json_t *err;
    long http = raw(c, method, path, body, &r);
    const char *msg;
    err = json_object_get(r, "error");
    msg = json_string_value(json_object_get(err, "message"));
    if (http != code || json_integer_value(json_object_get(err, "code")) != code || msg == NULL ||
        strstr(msg, needle) == NULL) {
        fprintf(stderr, "  %s %s: HTTP %ld (wanted %ld), message '%s' (wanted '%s')\n", method, path, http, code,
                msg ? msg : "(none)", needle);
        test_case_failed_ = 1;
    }
    json_decref(r);
}

static void test_error_codes(void)
{
    wsync_control_server_t *s = start(NULL, NULL);
    wsync_control_t *c = client(s, NULL);
    json_t *big = NULL;
    long http;
    char *pad;
    if (c == NULL)
        goto out;
    expect_error(c, "GET", "/v2/nothing", NULL, 404, "no such route");
    expect_error(c, "GET", "/v1/versions/abc", NULL, 404, "/v1/versions");
    expect_error(c, "DELETE", "/v1/status", NULL, 405, "method");
    expect_error(c, "GET", "/v1/publish", NULL, 405, "method");
    expect_error(c, "POST", "/v1/engines/register", "[1,2]", 400, "JSON object");
    expect_error(c, "POST", "/v1/engines/register", "{\"id\":\"n\",\"host\":\"h\",\"local_ranks\":\"8\"}", 422,
                 "'local_ranks'");
    expect_error(c, "POST", "/v1/engines/register", "{\"id\":\"n\",\"local_ranks\":8}", 422, "'host' is required");
    expect_error(c, "POST", "/v1/trainers/register", "{\"rank\":-1,\"world\":2,\"host\":\"h\",\"endpoint\":{}}",
                 422, "'rank'");
    expect_error(c, "POST", "/v1/publish", "{\"rank\":0,\"world\":1,\"version\":1,\"layout\":{},\"pieces\":[]}",
                 422, "manifest_digest");
    expect_error(c, "POST", "/v1/engines/n/report", "{\"version\":1,\"state\":\"ready\"}", 404, "not registered");
    expect_error(c, "GET", "/v1/versions/latest?after=-1", NULL, 400, "after");
    expect_error(c, "GET", "/v1/versions/latest?after=1&timeout_ms=x", NULL, 400, "timeout_ms");
    expect_error(c, "GET", "/v1/versions/7", NULL, 404, "version 7");
    CHECK_OK(wsync_control_register_engine(c, "n", "h", 1, NULL));
    expect_error(c, "POST", "/v1/engines/n/report", "{\"version\":3,\"state\":\"ready\"}", 409, "never published");
    /* Malformed JSON text: sent with plain libcurl, as the client only sends valid JSON. */
    {
        CURL *h = curl_easy_init();
        char url[256], reply[128] = "";
        long code = 0;
        snprintf(url, sizeof(url), "%s/v1/engines/register", wsync_control_server_url(s));
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"id\": \"n\", ");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)reply);
        CHECK(curl_easy_perform(h) == CURLE_OK);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        CHECK_EQ(code, 400);
        CHECK(strstr(reply, "\"bad_request\"") != NULL);
        curl_easy_cleanup(h);
    }
    /* Body cap: 64 KiB on ordinary routes... */
    pad = malloc(100000);
    memset(pad, 'x', 99999);
    pad[99999] = '\0';
    big = json_pack("{s:s, s:s, s:i}", "id", "n", "host", pad, "local_ranks", 1);
    CHECK_OK(wsync_control_request(c, "POST", "/v1/engines/register", big, 5000, &http, NULL));
    CHECK_EQ(http, 413);
    json_decref(big);
    free(pad);
    /* ...while a publish carries a 100k-tensor manifest. */
    {
        json_t *l = layout("aaaabbbbccccddddaaaabbbbccccdddd", 1, 0), *tensors = json_array(), *p = pieces(0, 1);
        int i;
        for (i = 0; i < 100000; i++)
            json_array_append_new(tensors, json_pack("{s:s, s:s, s:[i,i], s:I, s:I}", "name",
                                                     "model.layers.00.mlp.experts.000.down_proj.weight", "dtype",
                                                     "bf16", "shape", 128, 64, "offset", (json_int_t)i * 16384,
                                                     "size", (json_int_t)16384));
        json_object_set_new(l, "manifest", json_pack("{s:o}", "tensors", tensors));
        CHECK_OK(wsync_control_publish(c, 0, 1, 1, l, p));
        json_decref(l);
        json_decref(p);
    }
out:
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_auth(void)
{
    char tokpath[300];
    FILE *f;
    wsync_control_server_t *s;
    wsync_control_t *anon = NULL, *wrong = NULL, *good = NULL, *env = NULL;
    json_t *st = NULL;
    snprintf(tokpath, sizeof(tokpath), "%s/token", tmpdir);
    f = fopen(tokpath, "w");
    fprintf(f, "s3cret-token\n");
    fclose(f);
    s = start(NULL, tokpath);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    unsetenv("WSYNC_TOKEN");
    anon = client(s, NULL);
    wrong = client(s, "s3cret-tokem");
    good = client(s, "s3cret-token");
    setenv("WSYNC_TOKEN", "s3cret-token", 1);
    CHECK_OK(wsync_settings_reload());
    env = client(s, NULL);
    unsetenv("WSYNC_TOKEN");
    CHECK_OK(wsync_settings_reload());
    CHECK_FAILS(wsync_control_register_engine(anon, "n", "h", 1, NULL), WSYNC_ERR_AUTH, "bearer token");
    CHECK_FAILS(wsync_control_register_engine(wrong, "n", "h", 1, NULL), WSYNC_ERR_AUTH, "bearer token");
    CHECK_FAILS(publish_all(anon, 1, 1), WSYNC_ERR_AUTH, "bearer token");
    CHECK_FAILS(wsync_control_report(anon, "n", 1, "pulling", 0, 0, NULL), WSYNC_ERR_AUTH, "bearer token");
    CHECK_OK(wsync_control_register_engine(good, "n", "h", 1, NULL));
    CHECK_OK(publish_all(env, 1, 1));
    CHECK_OK(wsync_control_status(anon, &st)); /* reads need no token */
    json_decref(st);
    wsync_control_close(anon);
    wsync_control_close(wrong);
    wsync_control_close(good);
    wsync_control_close(env);
    wsync_control_server_stop(s);
}

static void test_restart_from_state(void)
{
    char path[300];
    wsync_control_server_t *s;
    wsync_control_t *c;
    json_t *st = NULL, *rec = NULL, *ep = json_pack("{s:s}", "pull", "10.0.0.2:41000"), *arr = NULL;
    uint64_t v = 0;
    snprintf(path, sizeof(path), "%s/state.json", tmpdir);
    unlink(path);
    s = start(path, NULL);
    c = client(s, NULL);
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_register_trainer(c, 0, 1, "th", ep));
    CHECK_OK(wsync_control_register_engine(c, "keep", "eh", 4, NULL));
    CHECK_OK(publish_all(c, 1, 7));
    CHECK_OK(wsync_control_report(c, "keep", 7, "ready", 1, 10, NULL));
    wsync_control_close(c);
    wsync_control_server_stop(s);
    CHECK(access(path, F_OK) == 0);

    s = start(path, NULL);
    c = client(s, NULL);
    CHECK(c != NULL);
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_wait_version(c, 0, 0, &v));
    CHECK_EQ(v, 7); /* the counter continues */
    CHECK_OK(wsync_control_get_version(c, 7, &rec));
    CHECK_EQ(json_array_size(json_object_get(rec, "pieces")), 2);
    CHECK_OK(wsync_control_trainers(c, &arr));
    CHECK(json_equal(json_object_get(json_array_get(arr, 0), "endpoint"), ep));
    CHECK_OK(wsync_control_status(c, &st));
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(st, "engines"), 0), "id")), "keep");
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(json_object_get(st, "engines"), 0), "version")), 7);
    CHECK_OK(publish_all(c, 1, 7)); /* resent after the restart: one publish */
    CHECK_FAILS(publish_all(c, 1, 6), WSYNC_ERR_CONFLICT, "not newer");
    CHECK_OK(publish_all(c, 1, 8));
    wsync_control_close(c);
    wsync_control_server_stop(s);
    c = NULL;
    s = start(path, NULL);
    c = client(s, NULL);
    if (c != NULL) {
        CHECK_OK(wsync_control_wait_version(c, 0, 0, &v));
        CHECK_EQ(v, 8);
    }
out:
    json_decref(st);
    json_decref(rec);
    json_decref(arr);
    json_decref(ep);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void test_corrupt_state_refused(void)
{
    static const char *bad[] = {"{\"format\":1,\"latest_version\":3,", "[1,2,3]",
                                "{\"format\":1,\"latest_version\":-4,\"versions\":[],\"trainers\":[],\"engines\":["
                                "]}",
                                "{\"format\":1,\"latest_version\":2,\"versions\":[],\"trainers\":[],"
                                "\"engines\":[{\"id\":7}]}"};
    char path[300];
    size_t i;
    snprintf(path, sizeof(path), "%s/corrupt.json", tmpdir);
    for (i = 0; i < WSYNC_ARRAY_LEN(bad); i++) {
        wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .state_file = path};
        wsync_control_server_t *s = NULL;
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        CHECK_FAILS(wsync_control_server_start(&cfg, &s), WSYNC_ERR_FORMAT, path);
        CHECK(s == NULL);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/wsync-ctl-test.XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(test_healthz_status_metrics);
    RUN(test_register_and_lookup);
    RUN(test_publish_rules);
    RUN(test_retention);
    RUN(test_reports);
    RUN(test_error_codes);
    RUN(test_auth);
    RUN(test_restart_from_state);
    RUN(test_corrupt_state_refused);
    {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", tmpdir);
    }
    TEST_EXIT();
}
