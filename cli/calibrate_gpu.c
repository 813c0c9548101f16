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
#include "common/pack/pack.h"
#include "common/base/util.h"

static const cost_class_t gpu_classes[] = {COST_LOCAL,      COST_GPU_PEER, COST_WINDOW,   COST_HOST_GPU,
                                           COST_DIGEST_GPU, COST_PACK_GPU, COST_FUSED_GPU};

/* GPU classes are timed on at least this many bytes: a 64 MiB copy takes
 * ~30 us on an H200, where a launch and a synchronize add several (the
 * copy read 1567 GB/s there against cudaMemcpyAsync's 2135 on 4 GiB). */
#define GPU_MIN_BYTES (1ULL << 30)
/* The piece the digest and the fused copy are timed in: a default chunk,
 * what the trainer's digest pass and the landing copies work on. */
#define GPU_PIECE (64ULL << 20)
#define GPU_MAX_PIECES 256

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

/* The digest kernel over n bytes in 64 MiB pieces, one batch (the trainer's
 * pass over its pieces), and the fused copy+digest in 64 MiB jobs started
 * back to back, then reaped (the landing's copies). */
static void calib_digests(calib_t *cb, const wsync_mem_ops_t *m, void *a, void *b, size_t n, double *r)
{
    static wsync_digest_range_t rg[GPU_MAX_PIECES];
    static wsync_mem_job_t *jobs[GPU_MAX_PIECES];
    static uint64_t sums[GPU_MAX_PIECES];
    size_t np = n / GPU_PIECE < GPU_MAX_PIECES ? n / GPU_PIECE : GPU_MAX_PIECES, k;
    int i, ok = 1;
    for (k = 0; k < np; k++)
        rg[k] = (wsync_digest_range_t){.ptr = (char *)a + k * GPU_PIECE, .len = GPU_PIECE, .off = k * GPU_PIECE};
    for (i = -1; ok && i < cb->reps; i++) { /* -1: a warm-up */
        uint64_t t0 = wsync_now_ns();
        ok = m->digest_many(rg, np, sums) == WSYNC_OK;
        if (i >= 0)
            r[i] = np * GPU_PIECE / ((wsync_now_ns() - t0) / 1e9);
    }
    if (ok)
        calib_set(cb, COST_DIGEST_GPU, r, cb->reps, 0, "GPU 0: the digest kernel, 64 MiB pieces in one batch");
    for (i = -1; ok && i < cb->reps; i++) {
        uint64_t t0 = wsync_now_ns();
        for (k = 0; ok && k < np; k++) {
            wsync_digest_range_t one = {.ptr = (char *)b + k * GPU_PIECE, .len = GPU_PIECE, .off = k * GPU_PIECE};
            ok = m->copy_digest_start((char *)b + k * GPU_PIECE, rg[k].ptr, GPU_PIECE, &one, 1, &jobs[k]) ==
                 WSYNC_OK;
        }
        for (k = 0; k < np && jobs[k]; k++) {
            int done = 0;
            ok = ok && m->job_poll(jobs[k], 1, &sums[k], &done) == WSYNC_OK && done;
            m->job_free(jobs[k]);
            jobs[k] = NULL;
        }
        if (i >= 0)
            r[i] = np * GPU_PIECE / ((wsync_now_ns() - t0) / 1e9);
    }
    if (ok)
        calib_set(cb, COST_FUSED_GPU, r, cb->reps, 0,
                  "GPU 0: copy computing the digest of what it writes, 64 MiB jobs back to back (the landing)");
    else
        calib_absent(cb, COST_FUSED_GPU, "the fused copy+digest failed on GPU 0");
}

/* The gather kernel: a column slice (4 KiB rows out of 8 KiB rows, what a
 * TP=2 rank's columns are) packed out of n bytes, one launch. */
static void calib_pack_gpu(calib_t *cb, void *a, void *b, size_t n, double *r)
{
    wsync_run2d_t run = {.src_off = 0, .src_stride = 8192, .row_bytes = 4096, .rows = n / 8192, .dst_off = 0};
    int i;
    for (i = -1; i < cb->reps; i++) {
        wsync_pack_job_t *job = NULL;
        uint64_t t0 = wsync_now_ns();
        if (wsync_pack_cuda_start(b, a, &run, 1, NULL, &job) != WSYNC_OK || wsync_pack_cuda_wait(job) != WSYNC_OK) {
            calib_absent(cb, COST_PACK_GPU, "the gather kernel failed on GPU 0");
            return;
        }
        if (i >= 0)
            r[i] = (double)run.rows * run.row_bytes / ((wsync_now_ns() - t0) / 1e9);
    }
    calib_set(cb, COST_PACK_GPU, r, cb->reps, 0, "GPU 0: gather of 4 KiB rows out of 8 KiB rows, one launch");
}

void calib_gpu(calib_t *cb)
{
    const wsync_mem_ops_t *m = &wsync_mem_cuda;
    int ndev = wsync_cuda_device_count();
    void *a = NULL, *b = NULL, *peer = NULL;
    double r[64];
    size_t k, n = cb->bytes > GPU_MIN_BYTES ? cb->bytes : GPU_MIN_BYTES;

    if (ndev == 0) {
        for (k = 0; k < sizeof(gpu_classes) / sizeof(gpu_classes[0]); k++)
            calib_absent(cb, gpu_classes[k], "skipped: no CUDA device");
        return;
    }
    if (m->init(0) != WSYNC_OK || m->alloc(n, &a) != WSYNC_OK || m->alloc(n, &b) != WSYNC_OK) {
        fprintf(cb->log, "calibrate: GPU 0: %s\n", wsync_last_error());
        goto out;
    }
    if (time_copies(m, b, a, n, cb->reps, r) == WSYNC_OK) {
        calib_set(cb, COST_LOCAL, r, cb->reps, 0, "GPU 0: device-to-device copy");
        if (ndev == 1)
            calib_set(cb, COST_WINDOW, r, cb->reps, 0, "one GPU: a window copy is a device-to-device copy");
    }
    m->fill(a, n, 0, 7);
    calib_digests(cb, m, a, b, n, r);
    calib_pack_gpu(cb, a, b, n, r);
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
