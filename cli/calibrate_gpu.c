/* calibrate_gpu.c: the GPU classes of `wsync calibrate`, through the memory
 * backend's ops (common/mem/mem.h), so this file needs no CUDA headers: a
 * copy inside GPU 0 (local, and the window rate when there is one GPU),
 * GPU 0 -> GPU 1 (gpu_peer and window with two or more), the digest
 * kernel; and pinned host memory <-> GPU 0 (host_gpu: the one CUDA call
 * here, cudaMallocHost). Without a device every class says "skipped: no
 * CUDA device". */
#include <stdio.h>
#include <string.h>

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "cli/calibrate.h"
#include "common/mem/mem.h"
#include "common/util.h"

static const cost_class_t gpu_classes[] = {COST_LOCAL,    COST_GPU_PEER,   COST_WINDOW,
                                           COST_HOST_GPU, COST_DIGEST_GPU, COST_PACK_GPU};

/* GPU classes are timed on at least this many bytes: a 64 MiB copy takes
 * ~30 us on an H200, where a launch and a synchronize add several (the
 * copy read 1567 GB/s there against cudaMemcpyAsync's 2135 on 4 GiB). */
#define GPU_MIN_BYTES (1ULL << 30)

/* `reps` timed copies of n bytes after a warm-up: rates into r. */
static wsync_status_t time_copies(const wsync_mem_ops_t *m, void *dst, const void *src, size_t n, int reps,
                                  double *r)
{
    int i;
    if (m->copy(dst, src, n) != WSYNC_OK) /* warm-up */
        return WSYNC_ERR_CUDA;
    for (i = 0; i < reps; i++) {
        uint64_t t0 = wsync_now_ns();
        wsync_status_t s = m->copy(dst, src, n);
        if (s != WSYNC_OK)
            return s;
        r[i] = n / ((wsync_now_ns() - t0) / 1e9);
    }
    return WSYNC_OK;
}

/* Pinned host memory -> GPU 0 and back; the class takes the slower
 * direction's figures (the note gives the other). */
static void calib_pinned(calib_t *cb, const wsync_mem_ops_t *m, void *dev, double *r)
{
#if WSYNC_HAVE_CUDA
    void *host = NULL;
    double back[64], hm, bm;
    char note[CALIB_NOTE_LEN];
    int i;
    if (cudaMallocHost(&host, cb->bytes) != cudaSuccess) {
        calib_absent(cb, COST_HOST_GPU, "cudaMallocHost failed: no pinned host memory");
        return;
    }
    memset(host, 0x11, cb->bytes);
    if (time_copies(m, dev, host, cb->bytes, cb->reps, r) == WSYNC_OK &&
        time_copies(m, host, dev, cb->bytes, cb->reps, back) == WSYNC_OK) {
        for (i = 0, hm = 0, bm = 0; i < cb->reps; i++) {
            hm += r[i] / cb->reps;
            bm += back[i] / cb->reps;
        }
        snprintf(note, sizeof(note),
                 "pinned host <-> GPU 0: the slower way (mean host->GPU %.1f, GPU->host %.1f GB/s)", hm / 1e9,
                 bm / 1e9);
        calib_set(cb, COST_HOST_GPU, hm <= bm ? r : back, cb->reps, 0, note);
    }
    cudaFreeHost(host);
#else
    (void)m;
    (void)dev;
    (void)r;
    calib_absent(cb, COST_HOST_GPU, "not built with CUDA");
#endif
}

void calib_gpu(calib_t *cb)
{
    const wsync_mem_ops_t *m = &wsync_mem_cuda;
    int ndev = wsync_cuda_device_count(), i;
    void *a = NULL, *b = NULL, *peer = NULL;
    double r[64];
    uint64_t sum;
    size_t k, n = cb->bytes > GPU_MIN_BYTES ? cb->bytes : GPU_MIN_BYTES;

    if (ndev == 0) {
        for (k = 0; k < sizeof(gpu_classes) / sizeof(gpu_classes[0]); k++)
            calib_absent(cb, gpu_classes[k], "skipped: no CUDA device");
        return;
    }
    calib_absent(cb, COST_PACK_GPU, "not measured by calibrate (bench/gpu_pack_bench measures the gather kernel)");
    if (m->init(0) != WSYNC_OK || m->alloc(n, &a) != WSYNC_OK || m->alloc(n, &b) != WSYNC_OK) {
        fprintf(cb->log, "calibrate: GPU 0: %s\n", wsync_last_error());
        goto out;
    }
    if (time_copies(m, b, a, n, cb->reps, r) == WSYNC_OK) {
        calib_set(cb, COST_LOCAL, r, cb->reps, 0, "GPU 0: device-to-device copy");
        if (ndev == 1)
            calib_set(cb, COST_WINDOW, r, cb->reps, 0, "one GPU: a window copy is a device-to-device copy");
    }
    for (i = m->digest_sum(a, n, 0, &sum) == WSYNC_OK ? 0 : cb->reps + 1; i < cb->reps; i++) { /* after a warm-up */
        uint64_t t0 = wsync_now_ns();
        if (m->digest_sum(a, n, 0, &sum) != WSYNC_OK)
            break;
        r[i] = n / ((wsync_now_ns() - t0) / 1e9);
    }
    if (i == cb->reps)
        calib_set(cb, COST_DIGEST_GPU, r, cb->reps, 0, "GPU 0: the digest kernel");
    calib_pinned(cb, m, a, r);
    if (ndev < 2) {
        calib_absent(cb, COST_GPU_PEER, "skipped: one CUDA device");
    } else if (m->init(1) == WSYNC_OK && m->alloc(n, &peer) == WSYNC_OK && m->init(0) == WSYNC_OK &&
               time_copies(m, peer, a, n, cb->reps, r) == WSYNC_OK) {
        calib_set(cb, COST_GPU_PEER, r, cb->reps, 0, "GPU 0 -> GPU 1, one copy (no fan caps measured)");
        calib_set(cb, COST_WINDOW, r, cb->reps, 0, "GPU 0 -> GPU 1 copy: what a window copy moves over");
    }
out:
    if (peer) {
        m->init(1);
        m->free(peer);
        m->init(0);
    }
    if (a)
        m->free(a);
    if (b)
        m->free(b);
}
