/* rig.h: the one-process set-up unit tests of a pull share: a control
 * endpoint on loopback, a publisher of one rank (world 1) serving a
 * synthetic image from host memory, and with opts.receiver a receiver of
 * one local rank (staged, tcp on loopback). Tests that make their own
 * receivers (destinations, targets) leave it off. Header-only: every test
 * program is one file linked against libwsync.a. */
#ifndef WSYNC_TESTS_UNIT_RIG_H
#define WSYNC_TESTS_UNIT_RIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/status.h"
#include "common/control/control_server.h"
#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "trainer_side/wsync_publisher.h"

typedef struct test_rig_opts {
    const char *name; /* names the trainer's host id and the engine id: "<name>-trainer-...", "<name>-engine" */
    uint64_t image, chunk;
    int threads;           /* the publisher's (0: its default) */
    int zero_copy;         /* the publisher's */
    uint64_t fill_version; /* the image holds wsync_fill_pattern of this version; 0: left as malloc gave it */
    int receiver;          /* also a receiver */
    int sent;              /* also g->sent: an image-sized buffer for a copy of what was published */
} test_rig_opts_t;

typedef struct test_rig {
    wsync_control_server_t *server;
    wsync_publisher_t *pub;
    wsync_receiver_t *recv; /* with opts.receiver */
    wsync_manifest_t *m;    /* the synthetic model */
    char *manifest_json;
    char *src; /* the image the publisher serves (its config.image) */
    char *sent;
    size_t size;
    char host_id[64];        /* the trainer's: a receiver with it is on the trainer's host */
    char engine_host_id[64]; /* the receiver's */
    char engine_id[64];      /* the receiver's: "<name>-engine" */
} test_rig_t;

/* A host id of this process's own (pid and a count): the engine's node
 * board is an abstract Unix socket named by host id and engine id, so two
 * runs of a test on one machine, and the cases of one run, stay apart. */
static inline const char *test_rig_host_id(const char *what, char *buf, size_t len)
{
    static int n;
    snprintf(buf, len, "%.32s-%d-%d", what, (int)getpid(), n++);
    return buf;
}

/* 0, or -1 with wsync_last_error() saying why; test_rig_down either way. */
static inline int test_rig_up(test_rig_t *g, const test_rig_opts_t *o)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_publisher_config_t pc = {.rank = 0,
                                   .world = 1,
                                   .chunk_size = o->chunk,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .threads = o->threads,
                                   .zero_copy = o->zero_copy};
    wsync_receiver_config_t rc = {.local_rank = 0,
                                  .local_world = 1,
                                  .mode = WSYNC_MODE_STAGED,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1"};
    char what[64];
    json_t *mj = NULL;

    memset(g, 0, sizeof(*g));
    snprintf(what, sizeof(what), "%.24s-trainer", o->name);
    pc.host_id = test_rig_host_id(what, g->host_id, sizeof(g->host_id));
    if (wsync_manifest_synthetic(o->image, &g->m) != WSYNC_OK || wsync_manifest_to_json(g->m, &mj) != WSYNC_OK ||
        (g->manifest_json = json_dumps(mj, JSON_COMPACT)) == NULL) {
        json_decref(mj);
        return -1;
    }
    json_decref(mj);
    g->size = g->m->image_size;
    if ((g->src = malloc(g->size ? g->size : 1)) == NULL ||
        (o->sent && (g->sent = malloc(g->size ? g->size : 1)) == NULL)) {
        wsync_error(WSYNC_ERR_NOMEM, "rig: out of memory for a %zu-byte image", g->size);
        return -1;
    }
    if (o->fill_version)
        wsync_fill_pattern(g->src, g->size, 0, o->fill_version);
    if (wsync_control_server_start(&sc, &g->server) != WSYNC_OK)
        return -1;
    pc.control_url = wsync_control_server_url(g->server);
    pc.manifest_json = g->manifest_json;
    pc.image = g->src;
    if (wsync_publisher_create(&pc, &g->pub) != WSYNC_OK)
        return -1;
    if (!o->receiver)
        return 0;
    snprintf(what, sizeof(what), "%.24s-engine-host", o->name);
    snprintf(g->engine_id, sizeof(g->engine_id), "%.24s-engine", o->name);
    rc.engine_id = g->engine_id;
    rc.host_id = test_rig_host_id(what, g->engine_host_id, sizeof(g->engine_host_id));
    rc.control_url = pc.control_url;
    return wsync_receiver_create(&rc, &g->recv) == WSYNC_OK ? 0 : -1;
}

/* A rig, or the case fails saying why (take it down either way). */
static inline int test_rig_ok(test_rig_t *g, const test_rig_opts_t *o)
{
    if (test_rig_up(g, o) == 0)
        return 1;
    fprintf(stderr, "  set-up: %s\n", wsync_last_error());
    CHECK(!"set-up");
    return 0;
}

static inline void test_rig_down(test_rig_t *g)
{
    wsync_receiver_destroy(g->recv);
    wsync_publisher_destroy(g->pub);
    wsync_control_server_stop(g->server);
    wsync_manifest_free(g->m);
    free(g->src);
    free(g->sent);
    free(g->manifest_json);
    memset(g, 0, sizeof(*g));
}

#endif
