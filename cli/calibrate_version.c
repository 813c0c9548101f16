/* calibrate_version.c: the version class of `wsync calibrate`: the fixed
 * cost of one version end to end, publish() start to ready on an engine
 * rank, for a model small enough that its bytes cost next to nothing (1 MiB
 * in 64 tensors). One trainer rank (with its control endpoint) and one
 * engine rank run in this process, the engine on a thread of its own, on
 * loopback: in GPU 0's memory when a CUDA device is present (the local
 * transport, as a colocated deployment), else in host memory (tcp). What
 * it measures is the control path: the digest launch, the report, the long
 * poll's answer, the pull request, the first put, verification, ready. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/calibrate.h"
#include "common/mem/mem.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "trainer_side/wsync_publisher.h"

#define V_WARMUP 3
#define V_TIMED 9
#define V_TENSORS 64
#define V_TENSOR_BYTES (16u << 10)
#define V_TIMEOUT_MS 30000

typedef struct vrun {
    const char *device;
    char url[256];
    int url_ready, held, failed; /* atomics */
    uint64_t t_ready[V_WARMUP + V_TIMED + 1];
    char error[200];
} vrun_t;

static char *manifest_json(void)
{
    size_t cap = 128 + V_TENSORS * 128, n = 0;
    char *s = malloc(cap);
    int i;
    if (s == NULL)
        return NULL;
    n += (size_t)snprintf(s + n, cap - n, "{\"version\":1,\"align\":256,\"image_size\":%u,\"tensors\":[",
                          V_TENSORS * V_TENSOR_BYTES);
    for (i = 0; i < V_TENSORS; i++)
        n += (size_t)snprintf(s + n, cap - n,
                              "%s{\"name\":\"w%d\",\"dtype\":\"BF16\",\"shape\":[%u],\"offset\":%u,\"size\":%u}",
                              i ? "," : "", i, V_TENSOR_BYTES / 2, i * V_TENSOR_BYTES, V_TENSOR_BYTES);
    snprintf(s + n, cap - n, "]}");
    return s;
}

static int wait_for(int *flag, int want, int *failed)
{
    uint64_t end = wsync_now_ns() + (uint64_t)V_TIMEOUT_MS * 1000000ULL;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want && !__atomic_load_n(failed, __ATOMIC_ACQUIRE) &&
           wsync_now_ns() < end)
        usleep(50);
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= want ? 0 : -1;
}

static void *engine_main(void *arg)
{
    vrun_t *vr = arg;
    wsync_receiver_config_t rc = {.engine_id = "calibrate-version",
                                  .local_rank = 0,
                                  .local_world = 1,
                                  .device = vr->device,
                                  .mode = WSYNC_MODE_STAGED,
                                  .bind_host = "127.0.0.1",
                                  .host_id = "calibrate-version-host"};
    wsync_receiver_t *r = NULL;
    int n = 0;
    if (wait_for(&vr->url_ready, 1, &vr->failed) != 0)
        goto fail;
    rc.control_url = vr->url;
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK)
        goto fail;
    while (n < V_WARMUP + V_TIMED) {
        uint64_t got = 0;
        if (wsync_receiver_pull(r, 0, V_TIMEOUT_MS, &got) != WSYNC_OK || got == 0 || got > V_WARMUP + V_TIMED)
            goto fail;
        vr->t_ready[got] = wsync_now_ns();
        n = (int)got;
        __atomic_store_n(&vr->held, n, __ATOMIC_RELEASE);
    }
    wsync_receiver_destroy(r);
    return NULL;
fail:
    snprintf(vr->error, sizeof(vr->error), "engine: %s", wsync_last_error());
    __atomic_store_n(&vr->failed, 1, __ATOMIC_RELEASE);
    wsync_receiver_destroy(r);
    return NULL;
}

/* The trainer side: each version once the engine holds the last one and
 * is back in its long poll; t_pub[v] its publish() start. */
static int publish_all(vrun_t *vr, const wsync_mem_ops_t *mem, void *image, uint64_t *t_pub)
{
    char *mj = manifest_json();
    wsync_publisher_config_t pc = {.rank = 0,
                                   .world = 1,
                                   .manifest_json = mj,
                                   .device = vr->device,
                                   .image = image,
                                   .serve = "127.0.0.1:0",
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .host_id = "calibrate-version-host"};
    wsync_publisher_t *pub = NULL;
    pthread_t th;
    int v, rc = -1, started = 0;
    if (mj == NULL || wsync_publisher_create(&pc, &pub) != WSYNC_OK)
        goto out;
    snprintf(vr->url, sizeof(vr->url), "%s", wsync_publisher_control_url(pub));
    __atomic_store_n(&vr->url_ready, 1, __ATOMIC_RELEASE);
    if (pthread_create(&th, NULL, engine_main, vr) != 0)
        goto out;
    started = 1;
    for (v = 1; v <= V_WARMUP + V_TIMED; v++) {
        if (wait_for(&vr->held, v - 1, &vr->failed) != 0)
            goto out;
        usleep(3000); /* the engine is in its long poll again */
        if (mem->fill(image, V_TENSORS * V_TENSOR_BYTES, 0, (uint64_t)v) != WSYNC_OK)
            goto out;
        t_pub[v] = wsync_now_ns();
        if (wsync_publisher_publish(pub, (uint64_t)v) != WSYNC_OK)
            goto out;
    }
    rc = wait_for(&vr->held, V_WARMUP + V_TIMED, &vr->failed);
out:
    if (rc != 0 && vr->error[0] == '\0')
        snprintf(vr->error, sizeof(vr->error), "trainer: %s", wsync_last_error());
    __atomic_store_n(&vr->failed, rc != 0, __ATOMIC_RELEASE);
    if (started)
        pthread_join(th, NULL);
    wsync_publisher_destroy(pub);
    free(mj);
    return rc;
}

void calib_version(calib_t *cb)
{
    vrun_t vr = {.device = wsync_cuda_device_count() > 0 ? "cuda:0" : "host"};
    const wsync_mem_ops_t *mem = NULL;
    uint64_t t_pub[V_WARMUP + V_TIMED + 1] = {0};
    double t[V_TIMED];
    char what[120];
    void *image = NULL;
    int dev = 0, i;
    if (wsync_mem_get(vr.device, &mem, &dev) != WSYNC_OK || mem->init(dev) != WSYNC_OK ||
        mem->alloc(V_TENSORS * V_TENSOR_BYTES, &image) != WSYNC_OK) {
        calib_absent(cb, COST_VERSION, "no memory for the version's model");
        return;
    }
    if (publish_all(&vr, mem, image, t_pub) != 0) {
        char why[300];
        snprintf(why, sizeof(why), "a version on loopback did not go end to end (%s)", vr.error);
        calib_absent(cb, COST_VERSION, why);
        mem->free(image);
        return;
    }
    mem->free(image);
    for (i = 0; i < V_TIMED; i++)
        t[i] = (double)(vr.t_ready[V_WARMUP + 1 + i] - t_pub[V_WARMUP + 1 + i]) / 1e9;
    snprintf(what, sizeof(what), "median publish() start -> ready, %d versions of %u KiB (%d tensors), %s, staged",
             V_TIMED, V_TENSORS * V_TENSOR_BYTES >> 10, V_TENSORS, vr.device);
    calib_set_time(cb, COST_VERSION, t, V_TIMED, what);
}
