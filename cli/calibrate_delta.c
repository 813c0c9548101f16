/* calibrate_delta.c: the delta classes of `wsync calibrate`: the encoder
 * and the apply (common/delta/delta.h), on one CPU thread and on GPU 0 when
 * there is one, in bytes of the version per second, on bf16 elements of
 * which 2% changed (RL steps change 1-4%; docs/DELTA.md). */
#include <stdlib.h>
#include <string.h>

#include "cli/calibrate.h"
#include "common/base/util.h"
#include "common/delta/delta.h"
#include "common/delta/delta_gpu.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define DELTA_PERMILLE 20
#define DELTA_GPU_BYTES ((size_t)256 << 20)

static void make_pair(unsigned char *base, unsigned char *next, size_t len)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        base[i] = (unsigned char)x;
    }
    memcpy(next, base, len);
    for (size_t e = 0; e < len / 2; e++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (x % 1000 < DELTA_PERMILLE)
            next[2 * e] ^= 1;
    }
}

static void calib_delta_host(calib_t *cb, const unsigned char *base, const unsigned char *next, size_t len)
{
    size_t cap = wsync_delta_bound(len, 2), wl = 0;
    unsigned char *out = malloc(cap), *dst = malloc(len);
    double enc[64], app[64];
    if (out == NULL || dst == NULL) {
        calib_absent(cb, COST_DELTA_ENCODE_HOST, "out of memory");
        calib_absent(cb, COST_DELTA_APPLY_HOST, "out of memory");
        goto out;
    }
    memcpy(dst, base, len);
    for (int i = -1; i < cb->reps; i++) {
        uint64_t t0 = wsync_now_ns(), t1, t2;
        if (wsync_delta_encode(base, next, len, 2, out, cap, &wl, NULL) != WSYNC_OK)
            goto out;
        t1 = wsync_now_ns();
        if (wsync_delta_apply(dst, len, out, wl) != WSYNC_OK)
            goto out;
        t2 = wsync_now_ns();
        if (i >= 0) {
            enc[i] = len / ((t1 - t0) / 1e9);
            app[i] = len / ((t2 - t1) / 1e9);
        }
    }
    calib_set(cb, COST_DELTA_ENCODE_HOST, enc, cb->reps, 0, "delta encode on one thread, bf16, 2% changed");
    calib_set(cb, COST_DELTA_APPLY_HOST, app, cb->reps, 0, "delta apply on one thread, bf16, 2% changed");
out:
    free(out);
    free(dst);
}

#if WSYNC_HAVE_CUDA
static void calib_delta_gpu(calib_t *cb, const unsigned char *base, const unsigned char *next, size_t len)
{
    unsigned char *db = NULL, *dn = NULL, *dout = NULL, *dd = NULL, *sc = NULL;
    size_t cap = wsync_delta_bound(len, 2), wl = 0;
    double enc[64], app[64];
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        calib_absent(cb, COST_DELTA_ENCODE_GPU, "skipped: no CUDA device");
        calib_absent(cb, COST_DELTA_APPLY_GPU, "skipped: no CUDA device");
        return;
    }
    if (cudaSetDevice(0) || cudaMalloc((void **)&db, len) || cudaMalloc((void **)&dn, len) ||
        cudaMalloc((void **)&dout, cap) || cudaMalloc((void **)&dd, len) ||
        cudaMalloc((void **)&sc, wsync_delta_gpu_scratch(len, 2)) ||
        cudaMemcpy(db, base, len, cudaMemcpyHostToDevice) || cudaMemcpy(dn, next, len, cudaMemcpyHostToDevice) ||
        cudaMemcpy(dd, base, len, cudaMemcpyHostToDevice)) {
        calib_absent(cb, COST_DELTA_ENCODE_GPU, "GPU 0: could not allocate the buffers");
        calib_absent(cb, COST_DELTA_APPLY_GPU, "GPU 0: could not allocate the buffers");
        goto out;
    }
    for (int i = -1; i < cb->reps; i++) {
        uint64_t t0 = wsync_now_ns(), t1, t2;
        if (wsync_delta_gpu_encode(db, dn, len, 2, dout, cap, &wl, NULL, sc, NULL) != WSYNC_OK)
            goto out;
        t1 = wsync_now_ns();
        if (wsync_delta_gpu_apply(dd, len, dout, wl, sc, NULL) != WSYNC_OK)
            goto out;
        t2 = wsync_now_ns();
        if (i >= 0) {
            enc[i] = len / ((t1 - t0) / 1e9);
            app[i] = len / ((t2 - t1) / 1e9);
        }
    }
    calib_set(cb, COST_DELTA_ENCODE_GPU, enc, cb->reps, 0, "GPU 0: delta encode kernels, bf16, 2% changed");
    calib_set(cb, COST_DELTA_APPLY_GPU, app, cb->reps, 0, "GPU 0: delta apply kernels, bf16, 2% changed");
out:
    cudaFree(db), cudaFree(dn), cudaFree(dout), cudaFree(dd), cudaFree(sc);
}
#endif

void calib_delta(calib_t *cb)
{
    size_t len = cb->bytes & ~(size_t)1, glen = DELTA_GPU_BYTES > len ? DELTA_GPU_BYTES : len;
    unsigned char *base = malloc(glen), *next = malloc(glen);
    if (base == NULL || next == NULL) {
        fprintf(cb->log, "calibrate: delta: out of memory for two buffers of %zu bytes\n", glen);
        free(base);
        free(next);
        return;
    }
    make_pair(base, next, glen);
    calib_delta_host(cb, base, next, len);
#if WSYNC_HAVE_CUDA
    calib_delta_gpu(cb, base, next, glen);
#else
    calib_absent(cb, COST_DELTA_ENCODE_GPU, "skipped: built without CUDA");
    calib_absent(cb, COST_DELTA_APPLY_GPU, "skipped: built without CUDA");
#endif
    free(base);
    free(next);
}
