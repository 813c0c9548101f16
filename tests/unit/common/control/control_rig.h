/* control_rig.h: what the control client tests (client_test.c,
 * client_polls_test.c) share: an in-process control server and a client of
 * it, raw requests, a layout and pieces as a trainer reports them, and a
 * publish by every rank. */
#ifndef WSYNC_TESTS_UNIT_CONTROL_RIG_H
#define WSYNC_TESTS_UNIT_CONTROL_RIG_H

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/base/status.h"
#include "common/control/client.h"
#include "common/control/control_server.h"

static inline wsync_control_server_t *start(const char *state, const char *token_file)
{
    wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .state_file = state, .token_file = token_file};
    wsync_control_server_t *s = NULL;
    if (wsync_control_server_start(&cfg, &s) != WSYNC_OK) {
        fprintf(stderr, "  server start: %s\n", wsync_last_error());
        return NULL;
    }
    return s;
}

static inline wsync_control_t *client(wsync_control_server_t *s, const char *token)
{
    wsync_control_t *c = NULL;
    if (s == NULL || wsync_control_open(wsync_control_server_url(s), token, &c) != WSYNC_OK)
        return NULL;
    return c;
}

/* Raw request with a text body; returns the HTTP code, *resp the JSON reply. */
static inline long raw(wsync_control_t *c, const char *method, const char *path, const char *body_text, json_t **resp)
{
    json_t *body = NULL, *r = NULL;
    long http = 0;
    json_error_t e;
    if (body_text)
        body = json_loads(body_text, JSON_DECODE_ANY, &e);
    if (wsync_control_request(c, method, path, body, 5000, &http, &r) != WSYNC_OK)
        http = -1;
    json_decref(body);
    if (resp)
        *resp = r;
    else
        json_decref(r);
    return http;
}

static inline json_t *layout(const char *mdigest, int world, int with_manifest)
{
    json_t *l = json_pack("{s:s, s:i, s:s, s:s, s:i, s:i}", "manifest_digest", mdigest, "chunk_size", 1024,
                          "layout", "even", "layout_digest", "00ff00ff", "image_size", 4096, "world", world);
    if (with_manifest)
        json_object_set_new(l, "manifest", json_pack("{s:[]}", "tensors"));
    return l;
}

static inline json_t *pieces(int first, int n)
{
    json_t *a = json_array();
    int i;
    for (i = first; i < first + n; i++)
        json_array_append_new(a, json_pack("{s:i, s:i, s:i, s:s}", "id", i, "offset", i * 1024, "len", 1024,
                                           "digest", "0123456789abcdef"));
    return a;
}

/* Every rank of a `world`-rank trainer reports `v`; returns the last status. */
static inline wsync_status_t publish_all(wsync_control_t *c, int world, uint64_t v)
{
    wsync_status_t st = WSYNC_OK;
    int r;
    for (r = world - 1; r >= 0 && st == WSYNC_OK; r--) {
        json_t *l = layout("aaaabbbbccccddddaaaabbbbccccdddd", world, r == 0), *p = pieces(r * 2, 2);
        st = wsync_control_publish(c, r, world, v, l, p);
        json_decref(l);
        json_decref(p);
    }
    return st;
}

/* A curl write callback keeping the first 63 bytes of a body in ud. */
static inline size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    strncat((char *)ud, p, sz * n < 63 ? sz * n : 63);
    return sz * n;
}

#endif
