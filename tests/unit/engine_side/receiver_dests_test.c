/* receiver_dests_test.c: a receiver with a target (tp_size 2, TP rank 0)
 * brings each verified version into the caller's destination tensors
 * (config.dests), staged (copied after verification) and in place (written
 * through during the pull, the caller's bytes verified), the vocabulary
 * padding zero in the caller's tensor either way (they start as 0xff here),
 * and refuses destinations that are not the target's. One
 * process: the control endpoint, a publisher (1 rank, host memory) and the
 * receiver (1 local rank) over tcp on loopback. The expected bytes are cut
 * out of the source image here, by hand: o_proj's first half of each row
 * (a column slice), embed_tokens' first Vp/2 rows of the vocabulary padded to
 * a multiple of 64 (rows past V zero).
 *
 * In place with every tensor of the target given, the image is sparse
 * (engine_side/fetch.c, phase release): after the pull the
 * receiver's memfd image holds under a quarter of its pages, the hand-cut
 * slices are right, and a version with a corrupted byte in a packed
 * run (WSYNC_TEST_CORRUPT_PACKED) fails naming the tensor, its trainer rank
 * and the engine rank; the next clean version lands. A transport that
 * refuses to land bytes in the caller's tensors (WSYNC_TEST_REFUSE_REDIRECT)
 * leaves them landing in the image and copied on, as right. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/base/fault.h"
#include "common/model/manifest.h"
#include "common/targets/rules.h"
#include "common/targets/target.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "tests/unit/rig.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define IMAGE (8u << 20)
#define CHUNK (1u << 20)
#define O_PROJ "model.layers.0.self_attn.o_proj.weight"
#define EMBED "model.embed_tokens.weight"

typedef test_rig_t rig_t;

typedef struct pull_job {
    wsync_receiver_t *recv;
    wsync_status_t st;
    char error[512];
} pull_job_t;

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    j->st = wsync_receiver_pull(j->recv, 0, 20000, NULL);
    snprintf(j->error, sizeof(j->error), "%s", j->st == WSYNC_OK ? "" : wsync_last_error());
    return NULL;
}

static int rig_up(rig_t *g)
{
    const test_rig_opts_t o = {.name = "dests", .image = IMAGE, .chunk = CHUNK, .fill_version = 7};
    return test_rig_up(g, &o);
}

/* A receiver for TP rank 0 of 2 with `dests`; pulls the next version while
 * the publisher publishes `v`. Returns the pull's status. */
static wsync_status_t pull_mode(rig_t *g, const char *engine, wsync_mode_t mode, int K,
                                const wsync_dest_tensor_t *dests, int n, uint64_t v, wsync_receiver_t **out,
                                char *error, size_t errlen)
{
    char host_id[64];
    wsync_receiver_config_t rc = {.engine_id = engine,
                                  .mode = mode,
                                  .local_rank = 0,
                                  .local_world = 1,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1",
                                  .host_id = test_rig_host_id("dests-engine", host_id, sizeof(host_id)),
                                  .tp_size = 2,
                                  .dests = dests,
                                  .ndests = n};
    pull_job_t j = {0};
    pthread_t th;
    char *tj = NULL;
    rc.control_url = wsync_control_server_url(g->server);
    if (K > 0) { /* TP rank K of 2 on a lone local rank: its target, given */
        wsync_target_t *t = NULL;
        json_t *j_ = NULL;
        if (wsync_target_from_rules(g->m, wsync_rules_builtin(), 2, K, &t) == WSYNC_OK &&
            wsync_target_to_json(t, g->m, &j_) == WSYNC_OK)
            tj = json_dumps(j_, JSON_COMPACT);
        json_decref(j_);
        wsync_target_free(t);
        rc.tp_size = 0;
        rc.target_json = tj;
    }
    if (wsync_receiver_create(&rc, &j.recv) != WSYNC_OK) {
        free(tj);
        snprintf(error, errlen, "%s", wsync_last_error());
        return WSYNC_ERR_INVALID;
    }
    pthread_create(&th, NULL, pull_main, &j);
    usleep(200000);
    wsync_fill_pattern(g->src, g->m->image_size, 0, 100 + v);
    if (wsync_publisher_publish(g->pub, v) != WSYNC_OK)
        fprintf(stderr, "  publish: %s\n", wsync_last_error());
    pthread_join(th, NULL);
    free(tj);
    snprintf(error, errlen, "%s", j.error);
    *out = j.recv;
    return j.st;
}

static wsync_status_t pull_with(rig_t *g, const char *engine, const wsync_dest_tensor_t *dests, int n, uint64_t v,
                                wsync_receiver_t **out, char *error, size_t errlen)
{
    return pull_mode(g, engine, WSYNC_MODE_STAGED, 0, dests, n, v, out, error, errlen);
}

static void caller_tensors_get_the_verified_slices(wsync_mode_t mode, int K, const char *engine)
{
    rig_t g;
    const wsync_tensor_t *o, *e;
    wsync_receiver_t *r = NULL;
    wsync_dest_tensor_t d[2];
    char *o_buf, *e_buf, *o_want, *e_want, err[512];
    uint64_t H, Hc, V, Vp, W, rows, i, o_bytes, e_bytes, k = (uint64_t)K;
    void *ptr = NULL;
    wsync_tensor_info_t info;

    if (rig_up(&g) != 0) {
        fprintf(stderr, "  set-up: %s\n", wsync_last_error());
        CHECK(!"set-up");
        test_rig_down(&g);
        return;
    }
    o = &g.m->tensors[wsync_manifest_find(g.m, O_PROJ)];
    e = &g.m->tensors[wsync_manifest_find(g.m, EMBED)];
    H = (uint64_t)o->shape[0];
    Hc = (uint64_t)o->shape[1] / 2; /* TP rank K of 2: half K of the columns */
    V = (uint64_t)e->shape[0];
    W = (uint64_t)e->shape[1];
    Vp = (V + 63) / 64 * 64;
    rows = Vp / 2; /* rows [K Vp/2, (K+1) Vp/2) of the padded vocabulary */
    o_bytes = H * Hc * 2;
    e_bytes = rows * W * 2;
    o_buf = malloc(o_bytes);
    e_buf = malloc(e_bytes);
    memset(o_buf, 0xff, o_bytes);
    memset(e_buf, 0xff, e_bytes); /* the padding rows must come out zero */
    o_want = calloc(1, o_bytes);
    e_want = calloc(1, e_bytes);
    d[0] = (wsync_dest_tensor_t){.name = O_PROJ, .ptr = o_buf, .nbytes = o_bytes};
    d[1] = (wsync_dest_tensor_t){.name = EMBED, .ptr = e_buf, .nbytes = e_bytes};
    CHECK(K == 0 || V < 2 * rows); /* TP rank 1's slice has padding rows */
    CHECK_OK(pull_mode(&g, engine, mode, K, d, 2, 1, &r, err, sizeof(err)));
    if (err[0])
        fprintf(stderr, "  pull: %s\n", err);
    for (i = 0; i < H; i++)
        memcpy(o_want + i * Hc * 2, g.src + o->offset + (i * (uint64_t)o->shape[1] + k * Hc) * 2, Hc * 2);
    if (V > k * rows) /* the real rows of the slice; the rest stays zero */
        memcpy(e_want, g.src + e->offset + k * rows * W * 2, ((k + 1) * rows < V ? rows : V - k * rows) * W * 2);
    CHECK(memcmp(o_buf, o_want, o_bytes) == 0);
    CHECK(memcmp(e_buf, e_want, e_bytes) == 0);
    /* The accessors give the held destination tensors, the same bytes (when
     * the receiver started: else the failure above says why). */
    if (r != NULL) {
        CHECK_OK(wsync_receiver_tensor(r, O_PROJ, &ptr, &info));
        CHECK(ptr && info.size == o_bytes && info.ndim == 2 && info.shape[1] == (int64_t)Hc &&
              memcmp(ptr, o_want, o_bytes) == 0);
        CHECK_FAILS(wsync_receiver_tensor(r, "model.layers.0.self_attn.q_proj.weight", &ptr, &info),
                    WSYNC_ERR_NOT_FOUND, "in this rank's target");
        CHECK_OK(wsync_receiver_tensor(r, "model.layers.0.self_attn.qkv_proj.weight", &ptr, &info));
    }
    if (r != NULL && mode == WSYNC_MODE_IN_PLACE) { /* verified by put, bytes landing straight: a bad one is caught */
        setenv("WSYNC_TEST_CORRUPT_PACKED", "1", 1);
        wsync_faults_reload();
        wsync_fill_pattern(g.src, g.m->image_size, 0, 102);
        CHECK_OK(wsync_publisher_publish(g.pub, 2));
        CHECK_FAILS(wsync_receiver_pull(r, 2, 20000, NULL), WSYNC_ERR_DIGEST, "failed verification");
        CHECK(strstr(wsync_last_error(), "from trainer rank 0") != NULL);
        unsetenv("WSYNC_TEST_CORRUPT_PACKED");
        wsync_faults_reload();
    }
    wsync_receiver_destroy(r);
    free(o_buf);
    free(e_buf);
    free(o_want);
    free(e_want);
    test_rig_down(&g);
}

/* How many of this process's memfd images ("wsync-image") hold under a
 * quarter of their pages (the publisher's and dense images hold all). */
static int sparse_images(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], link[300];
        struct stat st;
        ssize_t k;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        k = readlink(path, link, sizeof(link) - 1);
        if (k <= 0)
            continue;
        link[k] = '\0';
        if (strncmp(link, "/memfd:wsync-image", 18) == 0 && stat(path, &st) == 0 && st.st_size > 0 &&
            (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 4)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void every_tensor_in_place_sparse_image_and_a_corrupted_run(void)
{
    rig_t g;
    wsync_target_t *t = NULL;
    wsync_receiver_t *r = NULL;
    wsync_dest_tensor_t *d = NULL;
    const wsync_tensor_t *o;
    char err[512], *o_want = NULL;
    uint64_t H, Hc, i, o_bytes = 0;
    size_t k, n = 0, io = 0;
    if (rig_up(&g) != 0 || wsync_target_from_rules(g.m, wsync_rules_builtin(), 2, 0, &t) != WSYNC_OK) {
        CHECK(!"set-up");
        test_rig_down(&g);
        return;
    }
    n = t->ndests;
    d = calloc(n, sizeof(*d));
    for (k = 0; d && k < n; k++) {
        d[k] = (wsync_dest_tensor_t){.name = t->dests[k].name,
                                     .ptr = malloc(t->dests[k].size),
                                     .nbytes = t->dests[k].size};
        if (d[k].ptr)
            memset(d[k].ptr, 0xff, d[k].nbytes);
        if (strcmp(d[k].name, O_PROJ) == 0)
            io = k;
    }
    o = &g.m->tensors[wsync_manifest_find(g.m, O_PROJ)];
    H = (uint64_t)o->shape[0];
    Hc = (uint64_t)o->shape[1] / 2;
    o_bytes = H * Hc * 2;
    o_want = malloc(o_bytes);
    CHECK(d != NULL && o_want != NULL && strcmp(d[io].name, O_PROJ) == 0 && d[io].nbytes == o_bytes);
    if (d == NULL || o_want == NULL)
        goto out;

    CHECK_OK(pull_mode(&g, "dests-sparse", WSYNC_MODE_IN_PLACE, 0, d, (int)n, 1, &r, err, sizeof(err)));
    if (err[0])
        fprintf(stderr, "  pull: %s\n", err);
    for (i = 0; i < H; i++) /* TP rank 0: the first half of each row */
        memcpy(o_want + i * Hc * 2, g.src + o->offset + i * (uint64_t)o->shape[1] * 2, Hc * 2);
    CHECK(memcmp(d[io].ptr, o_want, o_bytes) == 0);
    CHECK(sparse_images() >= 1);

    if (r == NULL)
        goto out;
    setenv("WSYNC_TEST_CORRUPT_PACKED", "1", 1);
    wsync_faults_reload();
    wsync_fill_pattern(g.src, g.m->image_size, 0, 102);
    CHECK_OK(wsync_publisher_publish(g.pub, 2));
    CHECK_FAILS(wsync_receiver_pull(r, 2, 20000, NULL), WSYNC_ERR_DIGEST, "failed verification");
    snprintf(err, sizeof(err), "%s", wsync_last_error());
    unsetenv("WSYNC_TEST_CORRUPT_PACKED");
    wsync_faults_reload();
    CHECK(strstr(err, "tensor model.layers.") && strstr(err, "from trainer rank 0") &&
          strstr(err, "engine dests-sparse rank 0"));

    wsync_fill_pattern(g.src, g.m->image_size, 0, 103);
    CHECK_OK(wsync_publisher_publish(g.pub, 3));
    CHECK_OK(wsync_receiver_pull(r, 3, 20000, NULL));
    for (i = 0; i < H; i++)
        memcpy(o_want + i * Hc * 2, g.src + o->offset + i * (uint64_t)o->shape[1] * 2, Hc * 2);
    CHECK(memcmp(d[io].ptr, o_want, o_bytes) == 0);
out:
    wsync_receiver_destroy(r);
    for (k = 0; d && k < n; k++)
        free(d[k].ptr);
    free(d);
    free(o_want);
    wsync_target_free(t);
    test_rig_down(&g);
}

static void destinations_not_in_the_target_are_refused(void)
{
    rig_t g;
    wsync_receiver_t *r = NULL;
    char buf[64], err[512];
    wsync_dest_tensor_t unknown = {.name = "model.layers.0.self_attn.q_proj.weight", .ptr = buf, .nbytes = 64};
    wsync_dest_tensor_t wrong = {.name = O_PROJ, .ptr = buf, .nbytes = 64};
    if (rig_up(&g) != 0) {
        CHECK(!"set-up");
        test_rig_down(&g);
        return;
    }
    CHECK(pull_with(&g, "dests-unknown", &unknown, 1, 1, &r, err, sizeof(err)) != WSYNC_OK);
    CHECK(strstr(err, "q_proj.weight' is not a tensor of this rank's target") != NULL);
    wsync_receiver_destroy(r);
    r = NULL;
    CHECK(pull_with(&g, "dests-wrong", &wrong, 1, 2, &r, err, sizeof(err)) != WSYNC_OK);
    CHECK(strstr(err, "o_proj.weight' has 64 bytes") != NULL);
    if (!strstr(err, "has 64 bytes"))
        fprintf(stderr, "  got: %s\n", err);
    wsync_receiver_destroy(r);
    test_rig_down(&g);
}

static void staged_caller_tensors_get_the_verified_slices(void)
{
    caller_tensors_get_the_verified_slices(WSYNC_MODE_STAGED, 0, "dests-ok");
    caller_tensors_get_the_verified_slices(WSYNC_MODE_STAGED, 1, "dests-ok-k1");
}

static void in_place_caller_tensors_get_the_verified_slices(void)
{
    caller_tensors_get_the_verified_slices(WSYNC_MODE_IN_PLACE, 0, "dests-ok-inplace");
    caller_tensors_get_the_verified_slices(WSYNC_MODE_IN_PLACE, 1, "dests-ok-inplace-k1");
}

/* In place, a transport that refuses to land bytes in the caller's tensors
 * (as local refuses memory CUDA cannot export; here tcp, by the test hook):
 * the receiver says so and the bytes land in the image and are copied on,
 * still right, and a corrupted run is still caught. Its stderr is read
 * back from a file (and echoed) for the warning. */
static void in_place_refused_redirect_copies_on(void)
{
    char path[] = "/tmp/wsync-refused-XXXXXX", *log = calloc(1, 1 << 16);
    int fd = mkstemp(path), saved = dup(2);
    ssize_t got = 0;
    CHECK(fd >= 0 && saved >= 0 && log != NULL);
    if (fd < 0 || saved < 0 || log == NULL)
        return;
    setenv("WSYNC_TEST_REFUSE_REDIRECT", "1", 1);
    wsync_faults_reload();
    fflush(stderr);
    dup2(fd, 2);
    caller_tensors_get_the_verified_slices(WSYNC_MODE_IN_PLACE, 0, "dests-refused");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("WSYNC_TEST_REFUSE_REDIRECT");
    wsync_faults_reload();
    got = pread(fd, log, (1 << 16) - 1, 0);
    close(fd);
    unlink(path);
    fputs(got > 0 ? log : "", stderr);
    CHECK(got > 0 && strstr(log, "cannot take the bytes straight") != NULL &&
          strstr(log, "WSYNC_TEST_REFUSE_REDIRECT") != NULL);
    free(log);
}

int main(void)
{
    RUN(staged_caller_tensors_get_the_verified_slices);
    RUN(in_place_caller_tensors_get_the_verified_slices);
    RUN(in_place_refused_redirect_copies_on);
    RUN(destinations_not_in_the_target_are_refused);
    RUN(every_tensor_in_place_sparse_image_and_a_corrupted_run);
    TEST_EXIT();
}
