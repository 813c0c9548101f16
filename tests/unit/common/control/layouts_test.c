/* layouts_test.c: layouts on a real in-process control endpoint through the
 * C client: POST /v1/layouts/<digest> validates the manifest against the
 * digest and is idempotent, GET gives it back; versions name it by digest
 * (rank 0 naming an unknown one is refused; the record carries no
 * manifest); with a state file each layout is a file of its own, listed by
 * the state file, read back on restart, removed once dropped; a state file
 * from before layouts (manifests inside the records) is taken over; a
 * listed layout whose file is gone stops the endpoint with its name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/control/client.h"
#include "common/model/manifest.h"
#include "tests/test.h"
#include "common/control/control_server.h"

static char tmpdir[256];

static wsync_control_server_t *start(const char *state)
{
    wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .state_file = state};
    wsync_control_server_t *s = NULL;
    if (wsync_control_server_start(&cfg, &s) != WSYNC_OK) {
        fprintf(stderr, "  server start: %s\n", wsync_last_error());
        return NULL;
    }
    return s;
}

static wsync_control_t *client(wsync_control_server_t *s)
{
    wsync_control_t *c = NULL;
    if (s == NULL || wsync_control_open(wsync_control_server_url(s), NULL, &c) != WSYNC_OK)
        return NULL;
    return c;
}

/* A manifest of `n` tensors, its JSON and digest. */
static json_t *manifest(int n, int64_t width, char digest[33])
{
    wsync_manifest_t *m = NULL;
    json_t *j = NULL;
    char name[32];
    int i;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    for (i = 0; i < n; i++) {
        int64_t shape[2] = {i + 1, width};
        snprintf(name, sizeof(name), "layer.%d.weight", i);
        if (wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 2, shape) != WSYNC_OK)
            break;
    }
    wsync_manifest_digest(m, digest);
    wsync_manifest_to_json(m, &j);
    wsync_manifest_free(m);
    return j;
}

static long post(wsync_control_t *c, const char *digest, json_t *body, json_t **reply)
{
    char path[128];
    long http = 0;
    snprintf(path, sizeof(path), "/v1/layouts/%s", digest);
    if (wsync_control_request(c, "POST", path, body, 10000, &http, reply) != WSYNC_OK)
        return -1;
    return http;
}

static const char *message(const json_t *reply)
{
    const char *m = json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
    return m ? m : "";
}

/* Rank r of 2 reports version v naming manifest `digest` (no manifest sent). */
static wsync_status_t report(wsync_control_t *c, int rank, uint64_t v, const char *digest)
{
    json_t *l = json_pack("{s:s, s:i, s:s, s:s, s:i, s:i}", "manifest_digest", digest, "chunk_size", 4096,
                          "layout", "even", "layout_digest", "00ff", "image_size", 8192, "world", 2);
    json_t *p = json_pack("[{s:i, s:i, s:i, s:s}]", "id", rank, "offset", rank * 4096, "len", 4096, "digest",
                          "0123456789abcdef");
    wsync_status_t st = wsync_control_publish(c, rank, 2, v, l, p);
    json_decref(l);
    json_decref(p);
    return st;
}

static void post_validates_and_is_idempotent(void)
{
    wsync_control_server_t *s = start(NULL);
    wsync_control_t *c = client(s);
    char d[33], other[33];
    json_t *m = manifest(3, 64, d), *m2 = manifest(2, 64, other), *body, *reply = NULL, *got = NULL;
    CHECK(c != NULL && m != NULL);
    if (c == NULL || m == NULL)
        goto out;
    body = json_pack("{s:O}", "manifest", m);
    CHECK_EQ(post(c, d, body, &reply), 201);
    CHECK(json_is_true(json_object_get(reply, "new")));
    json_decref(reply);
    CHECK_EQ(post(c, d, body, &reply), 200); /* again: known */
    CHECK(json_is_false(json_object_get(reply, "new")));
    json_decref(reply);
    CHECK_OK(wsync_control_put_layout(c, d, m)); /* the client's call: no error either */
    CHECK_OK(wsync_control_get_layout(c, d, &got));
    CHECK(json_equal(got, m));
    json_decref(got);
    CHECK_FAILS(wsync_control_get_layout(c, other, &got), WSYNC_ERR_NOT_FOUND, "not registered");
    /* under another digest, a short one, an upper-case one; no manifest; a bad one */
    CHECK_EQ(post(c, other, body, &reply), 422);
    CHECK(strstr(message(reply), "has digest") != NULL);
    json_decref(reply);
    CHECK_EQ(post(c, "abc", body, &reply), 422);
    CHECK(strstr(message(reply), "32 lowercase hex") != NULL);
    json_decref(reply);
    {
        char up[33];
        size_t i;
        for (i = 0; i < 33; i++)
            up[i] = (char)(d[i] >= 'a' && d[i] <= 'f' ? d[i] - 32 : d[i]);
        CHECK_EQ(post(c, up, body, &reply), strcmp(up, d) == 0 ? 200 : 422);
        json_decref(reply);
    }
    json_decref(body);
    body = json_pack("{s:i}", "tensors", 1);
    CHECK_EQ(post(c, other, body, &reply), 422);
    CHECK(strstr(message(reply), "'manifest'") != NULL);
    json_decref(reply);
    json_decref(body);
    json_object_set_new(json_array_get(json_object_get(m2, "tensors"), 1), "offset", json_integer(3));
    body = json_pack("{s:O}", "manifest", m2);
    CHECK_EQ(post(c, other, body, &reply), 422);
    CHECK(strstr(message(reply), "layer.1.weight") != NULL); /* names the tensor */
    json_decref(reply);
    json_decref(body);
out:
    json_decref(m);
    json_decref(m2);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void versions_name_the_layout(void)
{
    wsync_control_server_t *s = start(NULL);
    wsync_control_t *c = client(s);
    char d[33], unknown[33];
    json_t *m = manifest(4, 32, d), *m2 = manifest(5, 32, unknown), *rec = NULL;
    if (c == NULL || m == NULL)
        goto out;
    /* Rank 1 may come first; rank 0 naming an unknown layout is refused. */
    CHECK_OK(report(c, 1, 1, unknown));
    CHECK_FAILS(report(c, 0, 1, unknown), WSYNC_ERR_NOT_FOUND, "POST /v1/layouts/");
    CHECK_OK(wsync_control_put_layout(c, d, m));
    CHECK_OK(report(c, 1, 2, d));
    CHECK_OK(report(c, 0, 2, d));
    CHECK_OK(wsync_control_get_version(c, 2, &rec));
    CHECK(json_object_get(rec, "manifest") == NULL);
    CHECK_STR(json_string_value(json_object_get(rec, "manifest_digest")), d);
    CHECK_EQ(json_array_size(json_object_get(rec, "pieces")), 2);
    json_decref(rec);
out:
    json_decref(m);
    json_decref(m2);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static int file_exists(const char *state, const char *digest)
{
    char path[600];
    snprintf(path, sizeof(path), "%s.layout-%s.json", state, digest);
    return access(path, F_OK) == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long n;
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static void state_keeps_layouts_in_files_of_their_own(void)
{
    char state[300], d[33], spare[8][33];
    wsync_control_server_t *s;
    wsync_control_t *c;
    json_t *m = manifest(6, 128, d), *got = NULL, *sm[8];
    char *text;
    int i;
    snprintf(state, sizeof(state), "%s/state.json", tmpdir);
    s = start(state);
    c = client(s);
    if (c == NULL || m == NULL)
        goto out;
    CHECK_OK(wsync_control_put_layout(c, d, m));
    CHECK_OK(report(c, 1, 1, d));
    CHECK_OK(report(c, 0, 1, d));
    CHECK(file_exists(state, d));
    text = slurp(state);
    CHECK(text != NULL && strstr(text, "\"layouts\":[\"") != NULL && strstr(text, d) != NULL);
    CHECK(text != NULL && strstr(text, "layer.0.weight") == NULL); /* no manifest in the state file */
    free(text);
    wsync_control_close(c);
    wsync_control_server_stop(s);

    /* A restart reads it back. */
    s = start(state);
    c = client(s);
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_get_layout(c, d, &got));
    CHECK(json_equal(got, m));
    json_decref(got);
    /* Spare layouts (no version names them) beyond the 4 kept: the oldest go,
     * files too; the one version 1 names stays. */
    for (i = 0; i < 8; i++) {
        sm[i] = manifest(1 + i, 16, spare[i]);
        CHECK_OK(wsync_control_put_layout(c, spare[i], sm[i]));
    }
    for (i = 0; i < 8; i++) {
        wsync_status_t st = wsync_control_get_layout(c, spare[i], &got);
        CHECK_EQ(st, i < 4 ? WSYNC_ERR_NOT_FOUND : WSYNC_OK);
        CHECK_EQ(file_exists(state, spare[i]), i >= 4);
        if (st == WSYNC_OK)
            json_decref(got);
        json_decref(sm[i]);
    }
    CHECK_OK(wsync_control_get_layout(c, d, &got));
    json_decref(got);
    CHECK(file_exists(state, d));
    wsync_control_close(c);
    wsync_control_server_stop(s);

    /* The file of a listed layout gone: the endpoint refuses to start, naming it. */
    {
        char path[600];
        wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .state_file = state};
        wsync_control_server_t *s2 = NULL;
        snprintf(path, sizeof(path), "%s.layout-%s.json", state, d);
        unlink(path);
        CHECK_FAILS(wsync_control_server_start(&cfg, &s2), WSYNC_ERR_FORMAT, d);
        CHECK(strstr(wsync_last_error(), "missing") != NULL);
    }
    c = NULL;
    s = NULL;
out:
    json_decref(m);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

static void state_from_before_layouts_is_taken_over(void)
{
    char state[300], d[33];
    json_t *m = manifest(3, 256, d), *st, *got = NULL, *rec = NULL;
    wsync_control_server_t *s = NULL;
    wsync_control_t *c = NULL;
    snprintf(state, sizeof(state), "%s/old_state.json", tmpdir);
    st = json_pack("{s:i, s:i, s:f, s:[{s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:O, s:[], s:f}], s:[], s:[]}",
                   "format", 1, "latest_version", 3, "published_at", 1.0, "versions", "version", 3, "world", 1,
                   "image_size", 4096, "chunk_size", 4096, "manifest_digest", d, "layout", "even", "layout_digest",
                   "ab", "manifest", m, "pieces", "published_at", 1.0, "trainers", "engines");
    CHECK(st != NULL && json_dump_file(st, state, 0) == 0);
    json_decref(st);
    s = start(state);
    c = client(s);
    if (c == NULL)
        goto out;
    CHECK_OK(wsync_control_get_layout(c, d, &got));
    CHECK(json_equal(got, m));
    CHECK_OK(wsync_control_get_version(c, 3, &rec));
    CHECK(rec != NULL && json_object_get(rec, "manifest") == NULL);
    /* The next save writes the layout's file. */
    CHECK_OK(wsync_control_register_engine(c, "n0", "h", 1, NULL));
    CHECK(file_exists(state, d));
out:
    json_decref(got);
    json_decref(rec);
    json_decref(m);
    wsync_control_close(c);
    wsync_control_server_stop(s);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/wsync_layouts_test.XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(post_validates_and_is_idempotent);
    RUN(versions_name_the_layout);
    RUN(state_keeps_layouts_in_files_of_their_own);
    RUN(state_from_before_layouts_is_taken_over);
    {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", tmpdir);
    }
    TEST_EXIT();
}
