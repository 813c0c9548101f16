/* gpu_colocated_bench.c: trainer and engine on one GPU (bench/colocated.h):
 * the packed CUDA-IPC path (one shared buffer; per step pack every tensor,
 * signal, unpack into the engine's parameters) against wsync (publish ->
 * ready on every engine rank, digests on) for 1 and 2 engine ranks, staged
 * and in place, single-copy (zero_copy) and slot routes, on the
 * Qwen2.5-7B tensor list (bench/qwen7b.h, 15.23 GB) and on the same list
 * scaled to ~0.95 GB. Every rank is its own process. Prints the median
 * step of each after warm-up steps, and the ratios to the packed path and
 * to one D2D copy of the image measured in the same run.
 *   gpu_colocated_bench [7b|1g|all]   (default all) */
#include <stdio.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
#include "bench/colocated.h"
#include "bench/qwen7b.h"

#define STEPS 7
#define WARMUP 2

/* One D2D copy of `len` bytes, median of 7 (in a child: the parent stays
 * CUDA-free); seconds, or -1. */
static double d2d_copy(size_t len)
{
    int fds[2];
    double t = -1;
    pid_t pid;
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char *a, *b;
        cudaEvent_t e0, e1;
        double ts[7];
        float ms;
        int i;
        if (cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&a, len) != cudaSuccess ||
            cudaMalloc((void **)&b, len) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
            cudaEventCreate(&e1) != cudaSuccess || cudaMemset(a, 0x5a, len) != cudaSuccess)
            _exit(1);
        for (i = -1; i < 7; i++) {
            if (cudaEventRecord(e0, 0) != cudaSuccess ||
                cudaMemcpyAsync(b, a, len, cudaMemcpyDeviceToDevice, 0) != cudaSuccess ||
                cudaEventRecord(e1, 0) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
                _exit(1);
            if (i >= 0)
                ts[i] = ms / 1e3;
        }
        t = colo_median(ts, 7);
        if (write(fds[1], &t, sizeof(t)) != sizeof(t))
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &t, sizeof(t)) != sizeof(t))
        t = -1;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return t;
}

static int one_model(int64_t div)
{
    wsync_manifest_t *m = NULL;
    json_t *mj = NULL;
    char *mjs = NULL, why[1024];
    double copy, packed[COLO_MAXL + 1] = {0}, times[STEPS];
    int l, ip, zc, sh, rc = 0;
    if (qwen7b_manifest_scaled(div, &m) != WSYNC_OK || wsync_manifest_to_json(m, &mj) != WSYNC_OK ||
        (mjs = json_dumps(mj, JSON_COMPACT)) == NULL) {
        fprintf(stderr, "gpu_colocated_bench: manifest: %s\n", wsync_last_error());
        return 1;
    }
    copy = d2d_copy(m->image_size);
    printf("model: Qwen2.5-7B tensor list%s, %zu tensors, %.3f GB; one GPU; median of %d steps after %d warm-up\n",
           div > 1 ? " scaled" : "", m->ntensors, (double)m->image_size / 1e9, STEPS - WARMUP, WARMUP);
    printf("  one D2D copy of the image (cudaMemcpyAsync)      %8.2f ms  %7.1f GB/s\n", copy * 1e3,
           (double)m->image_size / 1e9 / copy);
    for (l = 1; l <= COLO_MAXL; l++) {
        colo_cfg_t c = {.m = m, .manifest_json = mjs, .ranks = l, .packed = 1, .versions = STEPS};
        if (colo_run(&c, times, why, sizeof(why)) != 0) {
            printf("  packed IPC, %d engine rank%s: FAILED: %s\n", l, l > 1 ? "s" : "", why);
            rc = 1;
            continue;
        }
        packed[l] = colo_median(times + WARMUP, STEPS - WARMUP);
        printf("  packed IPC, %d engine rank%s (pack + unpack)    %8.2f ms  %.2fx one copy\n", l,
               l > 1 ? "s" : " ", packed[l] * 1e3, packed[l] / copy);
    }
    printf("  floor for 2 ranks: each rank's image written once and read once at the D2D rate %8.2f ms\n",
           2 * copy * 1e3);
    for (l = 1; l <= COLO_MAXL; l++)
        for (zc = 1; zc >= 0; zc--)
            for (ip = 0; ip <= 1; ip++)
                for (sh = 1; sh >= (l > 1 && !ip ? 0 : 1); sh--) {
                    colo_cfg_t c = {.m = m,
                                    .manifest_json = mjs,
                                    .ranks = l,
                                    .in_place = ip,
                                    .zero_copy = zc,
                                    .versions = STEPS};
                    double t;
                    char name[96];
                    snprintf(name, sizeof(name), "%s %s %d rank%s%s", zc ? "single-copy" : "slot",
                             ip ? "in-place" : "staged", l, l > 1 ? "s" : " ",
                             sh ? "" : " (gpu_shared_landing=0: land + fan-out)");
                    setenv("WSYNC_GPU_SHARED_LANDING", sh ? "1" : "0", 1);
                    if (colo_run(&c, times, why, sizeof(why)) != 0) {
                        printf("  wsync %s: FAILED: %s\n", name, why);
                        rc = 1;
                        continue;
                    }
                    t = colo_median(times + WARMUP, STEPS - WARMUP);
                    printf("  wsync %-30s publish->ready %8.2f ms  wsync/packed %.2f  wsync/copy %.2f%s", name,
                           t * 1e3, packed[l] > 0 ? t / packed[l] : 0.0, t / copy, l > 1 ? "" : "\n");
                    if (l > 1)
                        printf("  wsync/floor %.2f\n", t / (2 * copy));
                }
    setenv("WSYNC_GPU_SHARED_LANDING", "1", 1);
    free(mjs);
    json_decref(mj);
    wsync_manifest_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int rc = 0, all = strcmp(which, "all") == 0;
    if (!all && strcmp(which, "7b") != 0 && strcmp(which, "1g") != 0) {
        fprintf(stderr, "usage: [COLO_CHUNK_MB=N] gpu_colocated_bench [7b|1g|all]\n");
        return 2;
    }
    setenv("WSYNC_LOCAL_TRANSPORT", "1", 0);
    if (colo_gpu_count() < 1) {
        printf("gpu_colocated_bench: skipped: no CUDA device\n");
        return 0;
    }
    if (all || strcmp(which, "1g") == 0)
        rc |= one_model(4);
    if (all || strcmp(which, "7b") == 0)
        rc |= one_model(1);
    return rc;
}

#else
int main(void)
{
    printf("gpu_colocated_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
