/* identity_dests_test.c: a receiver whose target is the identity (the whole
 * image given as a target, {"whole_image": true}) with the caller's tensors,
 * every one of them, in place: its chunks are written through and digested
 * as groups of jobs and verified one by one against the record's piece
 * digests (engine_side/fetch_identity.c, chunk_groups.c,
 * chunk_verify.c), as the whole image's fetch does; each tensor holds the
 * published bytes; a byte the trainer flips after digesting its piece
 * (WSYNC_TEST_CORRUPT_PIECE) fails the pull naming the put, its tensor, its
 * trainer rank and the engine rank; the next clean version lands. One
 * process: control endpoint, publisher (1 rank, host memory), receiver (1
 * local rank) over tcp on loopback. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/base/fault.h"
#include "tests/unit/rig.h"

#define IMAGE (4u << 20)
#define CHUNK (256u << 10)

typedef struct pull_job {
    wsync_receiver_t *recv;
    wsync_status_t st;
} pull_job_t;

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    j->st = wsync_receiver_pull(j->recv, 0, 20000, NULL);
    return NULL;
}

/* 1 if every destination tensor holds the published image's bytes. */
static int tensors_hold(const test_rig_t *g, const wsync_dest_tensor_t *d, size_t n)
{
    size_t k;
    for (k = 0; k < n; k++) {
        const wsync_tensor_t *t = &g->m->tensors[wsync_manifest_find(g->m, d[k].name)];
        if (memcmp(d[k].ptr, g->src + t->offset, d[k].nbytes) != 0)
            return 0;
    }
    return 1;
}

static void identity_target_in_place_into_caller_tensors(void)
{
    test_rig_t g;
    const test_rig_opts_t o = {.name = "iddests", .image = IMAGE, .chunk = CHUNK, .fill_version = 7};
    wsync_receiver_config_t rc = {.engine_id = "iddests-engine",
                                  .mode = WSYNC_MODE_IN_PLACE,
                                  .local_rank = 0,
                                  .local_world = 1,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1",
                                  .target_json = "{\"version\": 1, \"whole_image\": true}"};
    wsync_dest_tensor_t *d = NULL;
    pull_job_t j = {0};
    pthread_t th;
    char host_id[64], err[512];
    size_t k, n;

    if (!test_rig_ok(&g, &o))
        goto out;
    n = g.m->ntensors;
    d = calloc(n, sizeof(*d));
    CHECK(d != NULL);
    for (k = 0; d && k < n; k++) {
        d[k] = (wsync_dest_tensor_t){.name = g.m->tensors[k].name, .nbytes = g.m->tensors[k].size};
        d[k].ptr = malloc(d[k].nbytes ? d[k].nbytes : 1);
        CHECK(d[k].ptr != NULL);
        if (d[k].ptr)
            memset(d[k].ptr, 0xff, d[k].nbytes);
    }
    if (d == NULL)
        goto out;
    rc.control_url = wsync_control_server_url(g.server);
    rc.host_id = test_rig_host_id("iddests-engine", host_id, sizeof(host_id));
    rc.dests = d;
    rc.ndests = (int)n;
    CHECK_OK(wsync_receiver_create(&rc, &j.recv));
    if (j.recv == NULL)
        goto out;

    pthread_create(&th, NULL, pull_main, &j);
    usleep(200000);
    wsync_fill_pattern(g.src, g.m->image_size, 0, 101);
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    pthread_join(th, NULL);
    CHECK_OK(j.st);
    CHECK(tensors_hold(&g, d, n));

    setenv("WSYNC_TEST_CORRUPT_PIECE", "1", 1);
    wsync_faults_reload();
    wsync_fill_pattern(g.src, g.m->image_size, 0, 102);
    CHECK_OK(wsync_publisher_publish(g.pub, 2));
    CHECK_FAILS(wsync_receiver_pull(j.recv, 2, 20000, NULL), WSYNC_ERR_DIGEST, "failed verification");
    snprintf(err, sizeof(err), "%s", wsync_last_error());
    unsetenv("WSYNC_TEST_CORRUPT_PIECE");
    wsync_faults_reload();
    CHECK(strstr(err, "put 1 (bytes ") && strstr(err, "from trainer rank 0") &&
          strstr(err, "failed verification on engine iddests-engine rank 0"));
    if (!strstr(err, "put 1 (bytes "))
        fprintf(stderr, "  got: %s\n", err);

    wsync_fill_pattern(g.src, g.m->image_size, 0, 103);
    CHECK_OK(wsync_publisher_publish(g.pub, 3));
    CHECK_OK(wsync_receiver_pull(j.recv, 3, 20000, NULL));
    CHECK(tensors_hold(&g, d, n));
out:
    wsync_receiver_destroy(j.recv);
    for (k = 0; d && k < g.m->ntensors; k++)
        free(d[k].ptr);
    free(d);
    test_rig_down(&g);
}

int main(void)
{
    RUN(identity_target_in_place_into_caller_tensors);
    TEST_EXIT();
}
