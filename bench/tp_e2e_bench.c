/* tp_e2e_bench.c: the Qwen2.5-7B tensor list (bench/qwen7b.h) from 2 trainer
 * ranks to one engine node of 2 ranks with tp_size 2, publish to ready, per
 * version (median of MEASURED after WARMUP), against
 *   (a) the baseline, what engines do today: every rank pulls the whole image
 *       (the identity target) and then slices its TP tensors out of it locally
 *       (host: a memcpy per row of a column slice, one per row chunk; GPU: one
 *       cudaMemcpy2DAsync per column slice, one cudaMemcpyAsync per row
 *       chunk or replicated tensor, one stream, one synchronize) — the
 *       slicing is counted in the baseline's time;
 *   (b) the floor: a rank's held bytes over the copy bandwidth measured in the
 *       same run (host memcpy, or cudaMemcpy D2D, of that many bytes).
 * wsync runs staged and in place, the baseline too (each compared with its
 * own mode); and wsync into the engine's own tensors (config.dests: staged,
 * copied after verification; in place, written through during the pull).
 * Each engine rank's peak resident memory (VmHWM) is printed per
 * configuration (host memory: the images and, with dests or the baseline,
 * the rank's own tensors). After the last version every rank's destination bytes are
 * compared with slices this file computes on its own (the vLLM rules of
 * docs/ENGINE_LAYOUTS.md, written again here from the source pattern).
 *   tp_e2e_bench cpu [SIZE=1G]    host memory, TCP, trainers on another host id.
 *       SIZE picks the scale: every size of the model (hidden, intermediate,
 *       KV width, vocab) is divided by the power of 2 that brings 15.23 GB
 *       nearest to SIZE (1G: divided by 4, 0.95 GB, the same 339 tensors).
 *   tp_e2e_bench gpu [SIZE=15G] [TRANSPORT=auto]   all 4 ranks on cuda:0
 *       (one host id: auto picks the local transport, CUDA IPC windows).
 *   ... single-copy: the trainers publish single-copy (no slot copy).
 *   ... no-baseline: wsync's configurations alone (the baseline's whole
 *       image on each rank, staged, needs ~76 GB more than a GPU of 80 GB
 *       holds beside the trainers). These words come last, in any order.
 * A rank that fails ends its configuration at once (the others are killed)
 * and the bench exits 1. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/qwen7b.h"
#include "bench/tp_rules.h"
#include "common/mem/mem.h"
#include "common/proto/msg.h"
#include "common/net/sock.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#include "bench/tp_xops.h"

#define W 2
#define L 2
#define TP 2
#define WARMUP 2
#define MEASURED 5
#define NV (WARMUP + MEASURED)
#define MAX_DEST 512
#define MAX_OWNED 64
#define TIMEOUT_MS 300000
#define QWEN_BYTES 15231233024.0 /* bench/qwen7b.h at div 1 */

typedef struct shared {
    volatile int go, failed;
    int waiting[NV + 1], pub_arrive[NV + 1], ready[NV + 1];
    uint64_t t_pub[NV + 1][W], t_ready[NV + 1][L];
    uint64_t hwm_kb[L]; /* each engine rank's VmHWM at its end */
} shared_t;

typedef struct run_cfg {
    const char *name, *id;
    int tp; /* 2: wsync's target; 0: whole image, then the bench slices */
    wsync_mode_t mode;
    int dests; /* with tp: the receiver writes the rank's own tensors (config.dests) */
} run_cfg_t;

static shared_t *S;
static wsync_manifest_t *M;
static char *manifest_json, url[128];
static const char *device = "host", *transport = "tcp";
static int gpu, single_copy, no_baseline;
static const wsync_mem_ops_t *mem;
static const xops_t *xo;
static dest_t dests[L][MAX_DEST];
static int ndests[L];
static uint64_t held[L];

/* --- ranks --------------------------------------------------------------- */

static void fail(const char *who, int rank, const char *what)
{
    fprintf(stderr, "tp_e2e_bench: %s %d: %s: %s\n", who, rank, what, wsync_last_error());
    S->failed = 1;
}

static void wait_for(int *v, int want)
{
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < want && !S->failed)
        usleep(100);
}

static int trainer_main(int rank)
{
    wsync_publisher_config_t pc = {.control_url = url,
                                   .rank = rank,
                                   .world = W,
                                   .manifest_json = manifest_json,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .device = device,
                                   .zero_copy = single_copy,
                                   .host_id = gpu ? "bench-host" : "bench-trainer-host"};
    wsync_owned_t owned[MAX_OWNED];
    wsync_publisher_t *p = NULL;
    int n = 0, i, v;

    if (mem->init(0) != WSYNC_OK ||
        wsync_publisher_owned_extents(manifest_json, WSYNC_LAYOUT_EVEN, W, rank, owned, MAX_OWNED, &n) != WSYNC_OK ||
        n > MAX_OWNED)
        goto fail;
    for (i = 0; i < n; i++)
        if (mem->alloc(owned[i].len, (void **)&owned[i].ptr) != WSYNC_OK)
            goto fail;
    pc.owned = owned;
    pc.nowned = n;
    if (wsync_publisher_create(&pc, &p) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= NV; v++) {
        /* Nothing else runs: the node holds v-1, fresh content, the engine
         * ranks long-poll, then both trainer ranks publish together. */
        wait_for(&S->ready[v - 1], v > 1 ? L : 0);
        for (i = 0; i < n; i++)
            if (mem->fill((void *)owned[i].ptr, owned[i].len, owned[i].offset, 1000 + (uint64_t)v) != WSYNC_OK)
                goto fail;
        wait_for(&S->waiting[v], L);
        usleep(20000);
        __atomic_add_fetch(&S->pub_arrive[v], 1, __ATOMIC_ACQ_REL);
        wait_for(&S->pub_arrive[v], W);
        S->t_pub[v][rank] = wsync_now_ns();
        if (wsync_publisher_publish(p, (uint64_t)v) != WSYNC_OK)
            goto fail;
        if (S->failed)
            break;
    }
    wait_for(&S->ready[NV], L);
    wsync_publisher_destroy(p);
    return S->failed;
fail:
    fail("trainer rank", rank, "setup or publish");
    wsync_publisher_destroy(p);
    return 1;
}

/* Every destination tensor of rank k equals the independent slice of
 * version v's source pattern; returns 0 when all do. */
static int verify(int k, wsync_receiver_t *r, char **own, uint64_t v)
{
    uint64_t max_src = 0, max_dst = 0;
    char *src = NULL, *want = NULL, *h_want = NULL, *h_got = NULL;
    size_t i;
    int d, j, bad = 0;
    for (i = 0; i < M->ntensors; i++)
        max_src = M->tensors[i].size > max_src ? M->tensors[i].size : max_src;
    for (d = 0; d < ndests[k]; d++)
        max_dst = dests[k][d].nbytes > max_dst ? dests[k][d].nbytes : max_dst;
    if (mem->alloc(max_src, (void **)&src) != WSYNC_OK || mem->alloc(max_dst, (void **)&want) != WSYNC_OK ||
        (h_want = malloc(max_dst)) == NULL || (h_got = malloc(max_dst)) == NULL) {
        fail("engine rank", k, "verify: allocation");
        bad = 1;
    }
    for (d = 0; d < ndests[k] && !bad; d++) {
        const dest_t *x = &dests[k][d];
        void *got = own ? own[d] : NULL;
        wsync_tensor_info_t info;
        if (!own && (wsync_receiver_tensor(r, x->name, &got, &info) != WSYNC_OK || info.size != x->nbytes)) {
            fprintf(stderr, "tp_e2e_bench: rank %d: destination %s missing or of %llu bytes, want %llu\n", k,
                    x->name, (unsigned long long)(got ? info.size : 0), (unsigned long long)x->nbytes);
            bad = 1;
            break;
        }
        xo->zero(want, x->nbytes);
        for (j = 0; j < x->n; j++) {
            const wsync_tensor_t *t = &M->tensors[x->b[j].src];
            if (mem->fill(src, t->size, t->offset, 1000 + v) != WSYNC_OK)
                bad = 1;
            xo->copy2d(want + x->b[j].dst_off, src + x->b[j].col, x->b[j].spitch, x->b[j].width, x->b[j].height);
            xo->sync();
        }
        if (bad || mem->copy(h_want, want, x->nbytes) != WSYNC_OK ||
            mem->copy(h_got, got, x->nbytes) != WSYNC_OK || memcmp(h_want, h_got, x->nbytes) != 0) {
            fprintf(stderr, "tp_e2e_bench: rank %d: destination %s differs from its slice of version %llu\n", k,
                    x->name, (unsigned long long)v);
            bad = 1;
        }
    }
#if WSYNC_HAVE_CUDA
    bad |= cuda_bad;
#endif
    free(h_want);
    free(h_got);
    if (src)
        mem->free(src);
    if (want)
        mem->free(want);
    return bad;
}

/* This process's VmHWM in kB (0 if unreadable). */
static uint64_t hwm_kb(void)
{
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int engine_main(const run_cfg_t *c, int k)
{
    wsync_receiver_config_t rc = {.control_url = url,
                                  .engine_id = c->id,
                                  .local_rank = k,
                                  .local_world = L,
                                  .device = device,
                                  .mode = c->mode,
                                  .transport = transport,
                                  .bind_host = "127.0.0.1",
                                  .host_id = gpu ? "bench-host" : "bench-engine-host",
                                  .tp_size = c->tp};
    wsync_receiver_t *r = NULL;
    char *own[MAX_DEST] = {0};
    wsync_dest_tensor_t dt[MAX_DEST];
    const int owns = c->tp == 0 || c->dests;
    int d, v, bad = 0;

    if (mem->init(0) != WSYNC_OK) {
        fail("engine rank", k, "create");
        return 1;
    }
    for (d = 0; owns && d < ndests[k]; d++) {
        /* The engine's own parameters: sliced into after every pull
         * (baseline), or the receiver's dests. */
        if (mem->alloc(dests[k][d].nbytes, (void **)&own[d]) != WSYNC_OK) {
            fail("engine rank", k, "alloc");
            return 1;
        }
        xo->zero(own[d], dests[k][d].nbytes);
        dt[d] = (wsync_dest_tensor_t){.name = dests[k][d].name, .ptr = own[d], .nbytes = dests[k][d].nbytes};
    }
    xo->sync();
    if (c->dests) {
        rc.dests = dt;
        rc.ndests = ndests[k];
    }
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK) {
        fail("engine rank", k, "create");
        bad = 1;
    }
    for (v = 1; v <= NV && !bad; v++) {
        uint64_t got = 0;
        __atomic_add_fetch(&S->waiting[v], 1, __ATOMIC_ACQ_REL);
        if (wsync_receiver_pull(r, 0, TIMEOUT_MS, &got) != WSYNC_OK || got != (uint64_t)v) {
            fail("engine rank", k, "pull");
            bad = 1;
            break;
        }
        if (c->tp == 0) {
            void *img = NULL;
            size_t len = 0;
            if (wsync_receiver_image(r, &img, &len) != WSYNC_OK) {
                fail("engine rank", k, "image");
                bad = 1;
                break;
            }
            slice_image(M, dests[k], ndests[k], img, own, xo->copy2d);
            xo->sync();
        }
        S->t_ready[v][k] = wsync_now_ns();
        __atomic_add_fetch(&S->ready[v], 1, __ATOMIC_ACQ_REL);
    }
#if WSYNC_HAVE_CUDA
    bad |= cuda_bad;
#endif
    if (!bad && !S->failed)
        bad = verify(k, r, owns ? own : NULL, NV);
    S->hwm_kb[k] = hwm_kb();
    for (d = 0; d < MAX_DEST; d++)
        if (own[d])
            mem->free(own[d]);
    wsync_receiver_destroy(r);
    if (bad)
        S->failed = 1;
    return bad;
}

/* --- the parent ---------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Children wait for `go` (the endpoint is up: it starts after the fork so no
 * thread of it is forked). */
static pid_t start_child(const run_cfg_t *c, int role, int rank)
{
    pid_t pid = fork();
    if (pid == 0) {
        while (!S->go && !S->failed)
            usleep(200);
        _exit(S->failed ? 1 : role == 0 ? trainer_main(rank) : engine_main(c, rank));
    }
    return pid;
}

/* One configuration; the median publish-to-ready in *med (seconds). */
static int run_config(const run_cfg_t *c, double *med)
{
    wsync_control_server_t *srv = NULL;
    pid_t pids[W + L];
    double t[NV];
    char listen[64];
    int i, v, fd, port, status, bad = 0;

    memset(S, 0, sizeof(*S));
    if (wsync_tcp_listen("127.0.0.1", 0, &fd, &port) != WSYNC_OK)
        return 1;
    close(fd);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    for (i = 0; i < L; i++)
        pids[W + i] = start_child(c, 1, i);
    for (i = 0; i < W; i++)
        pids[i] = start_child(c, 0, i);
    if (wsync_control_server_start(&(wsync_control_server_config_t){.listen = listen}, &srv) != WSYNC_OK) {
        fprintf(stderr, "tp_e2e_bench: control endpoint: %s\n", wsync_last_error());
        S->failed = 1;
    }
    S->go = 1;
    for (i = 0; i < W + L; i++) { /* the first to fail ends the others: they would wait for it until timeouts */
        pid_t pid = wait(&status);
        int k;
        for (k = 0; k < W + L; k++)
            if (pids[k] == pid)
                pids[k] = 0; /* reaped: never killed below */
        if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad = 1;
            for (k = 0; k < W + L; k++)
                if (pids[k] > 0)
                    kill(pids[k], SIGKILL);
        }
    }
    wsync_control_server_stop(srv);
    if (bad || S->failed) {
        printf("tp_e2e_bench: %s: FAILED (messages above)\n", c->name);
        return 1;
    }
    for (v = 1; v <= NV; v++) {
        uint64_t t0 = S->t_pub[v][0] < S->t_pub[v][1] ? S->t_pub[v][0] : S->t_pub[v][1];
        uint64_t t1 = S->t_ready[v][0] > S->t_ready[v][1] ? S->t_ready[v][0] : S->t_ready[v][1];
        t[v - 1] = (double)(t1 - t0) / 1e9;
    }
    printf("  %-34s versions:", c->name);
    for (v = 0; v < NV; v++)
        printf(" %.1f%s", t[v] * 1e3, v == WARMUP - 1 ? " |" : "");
    *med = median(t + WARMUP, MEASURED);
    printf(" ms; median %.1f ms; every rank's bytes verified; VmHWM %.1f / %.1f MiB\n", *med * 1e3,
           S->hwm_kb[0] / 1024.0, S->hwm_kb[1] / 1024.0);
    fflush(stdout);
    return 0;
}

/* A child: fills *out with the median seconds of a copy of `len` bytes
 * (host memcpy, or D2D on cuda:0), or -1. Also counts the GPUs (gpu mode). */
static double copy_seconds(uint64_t len)
{
    int fds[2];
    double res = -1;
    if (pipe(fds) != 0)
        return -1;
    if (fork() == 0) {
        char *a = NULL, *b = NULL;
        double ts[5];
        int i;
        res = -1;
        if (mem->init(0) == WSYNC_OK && mem->alloc(len, (void **)&a) == WSYNC_OK &&
            mem->alloc(len, (void **)&b) == WSYNC_OK && mem->fill(a, len, 0, 7) == WSYNC_OK &&
            mem->fill(b, len, 0, 8) == WSYNC_OK) {
            for (i = -1; i < 5; i++) {
                double t0 = wsync_now_s();
                if (mem->copy(b, a, len) != WSYNC_OK)
                    break;
                if (i >= 0)
                    ts[i] = wsync_now_s() - t0;
            }
            if (i == 5)
                res = median(ts, 5);
        }
        if (write(fds[1], &res, sizeof(res)) != sizeof(res))
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &res, sizeof(res)) != sizeof(res))
        res = -1;
    close(fds[0]);
    wait(NULL);
    return res;
}

#if WSYNC_HAVE_CUDA
/* GPUs seen by a child (CUDA stays out of this process, which forks). */
static int gpu_count(void)
{
    int status;
    pid_t pid = fork();
    if (pid == 0)
        _exit(wsync_cuda_device_count() > 0 ? 0 : 1);
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif

int main(int argc, char **argv)
{
    static const run_cfg_t runs[] = {
        {"wsync --tp 2, staged", "tp-staged", TP, WSYNC_MODE_STAGED, 0},
        {"baseline whole image + slice, staged", "whole-staged", 0, WSYNC_MODE_STAGED, 0},
        {"wsync --tp 2, in-place", "tp-in-place", TP, WSYNC_MODE_IN_PLACE, 0},
        {"baseline whole image + slice, in-place", "whole-in-place", 0, WSYNC_MODE_IN_PLACE, 0},
        {"wsync --tp 2 into own tensors, staged", "tp-dests-staged", TP, WSYNC_MODE_STAGED, 1},
        {"wsync --tp 2 into own tensors, in-place", "tp-dests-in-place", TP, WSYNC_MODE_IN_PLACE, 1},
    };
    double med[6] = {0}, copy[6], copy_s, floor_rank, floor_dev;
    int ncopy = 0;
    uint64_t size = 0, hmax;
    int64_t div = 1;
    json_t *mj = NULL;
    size_t i;
    int k;

    if (argc < 2 || (strcmp(argv[1], "cpu") != 0 && strcmp(argv[1], "gpu") != 0) ||
        (argc > 2 && wsync_parse_size(argv[2], "the model size", &size) != WSYNC_OK)) {
        fprintf(stderr,
                "tp_e2e_bench: %s\nusage: tp_e2e_bench cpu [SIZE=1G] | gpu [SIZE=15G] [TRANSPORT=auto] "
                "[single-copy]\n",
                argc < 2 || (strcmp(argv[1], "cpu") != 0 && strcmp(argv[1], "gpu") != 0)
                    ? "the first argument says where the ranks hold memory: cpu or gpu"
                    : wsync_last_error());
        return 2;
    }
    gpu = strcmp(argv[1], "gpu") == 0;
    while (argc > 3 && (strcmp(argv[argc - 1], "single-copy") == 0 || strcmp(argv[argc - 1], "no-baseline") == 0)) {
        if (strcmp(argv[--argc], "single-copy") == 0)
            single_copy = 1;
        else
            no_baseline = 1;
    }
    if (size == 0)
        size = gpu ? (uint64_t)QWEN_BYTES : 1ull << 30;
    while (div < 256 && QWEN_BYTES / (double)(div * div) > 1.41 * (double)size)
        div *= 2;
    if (gpu) {
#if WSYNC_HAVE_CUDA
        if (!gpu_count()) {
            printf("tp_e2e_bench: skipped: no CUDA device\n");
            return 0;
        }
        device = "cuda:0";
        transport = argc > 3 ? argv[3] : "auto";
        mem = &wsync_mem_cuda;
        xo = &cuda_x;
#else
        printf("tp_e2e_bench: skipped: not built with CUDA\n");
        return 0;
#endif
    } else {
        mem = &wsync_mem_host;
        xo = &host_x;
    }
    S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED)
        return 1;
    if (qwen7b_manifest_scaled(div, &M) != WSYNC_OK || wsync_manifest_to_json(M, &mj) != WSYNC_OK ||
        (manifest_json = json_dumps(mj, JSON_COMPACT)) == NULL) {
        fprintf(stderr, "tp_e2e_bench: manifest: %s\n", wsync_last_error());
        return 1;
    }
    json_decref(mj);
    hmax = 0;
    for (k = 0; k < L; k++) {
        int d;
        ndests[k] = rank_dests(M, k, TP, dests[k], MAX_DEST);
        for (d = 0; d < ndests[k]; d++)
            held[k] += dests[k][d].nbytes;
        hmax = held[k] > hmax ? held[k] : hmax;
    }
    printf("tp_e2e_bench %s: Qwen2.5-7B tensor list%s, %zu tensors, %.3f GB bf16%s; %d trainer ranks (even) -> "
           "1 node x %d ranks, %s, transport %s%s, 64 MiB chunks; publish to ready on both ranks, %d warm-up + "
           "median of %d\n",
           argv[1], div > 1 ? " scaled" : "", M->ntensors, (double)M->image_size / 1e9,
           div > 1 ? "" : " (full size)", W, L, device, transport, single_copy ? ", trainers single-copy" : "",
           WARMUP, MEASURED);
    if (div > 1)
        printf("  scaled: hidden %lld, intermediate %lld, KV width %lld, vocab %lld (each Qwen2.5-7B size / "
               "%lld)\n",
               (long long)(3584 / div), (long long)(18944 / div), (long long)(512 / div),
               (long long)(152064 / div), (long long)div);
    printf("  each TP rank holds %d destination tensors: rank 0 %.3f GB, rank 1 %.3f GB\n", ndests[0],
           held[0] / 1e9, held[1] / 1e9);
    /* The copy is measured again right before every configuration (on a
     * shared machine a figure taken minutes apart swings by tens of %); the
     * floor takes their median. */
    for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        if (no_baseline && runs[i].tp == 0)
            continue;
        if ((copy[ncopy++] = copy_seconds(hmax)) <= 0) {
            fprintf(stderr, "tp_e2e_bench: the copy bandwidth measurement failed\n");
            return 1;
        }
        if (run_config(&runs[i], &med[i]) != 0)
            return 1;
    }
    printf("  copy bandwidth (%s of %.3f GB, median of 5, before each configuration):",
           gpu ? "cudaMemcpy D2D" : "host memcpy", hmax / 1e9);
    for (i = 0; i < (size_t)ncopy; i++)
        printf(" %.1f", hmax / copy[i] / 1e9);
    copy_s = median(copy, ncopy);
    printf(" GB/s; median %.1f GB/s\n", hmax / copy_s / 1e9);
    floor_rank = copy_s;
    floor_dev = copy_s * (double)(held[0] + held[1]) / (double)hmax;
    printf("  floor, a rank's held bytes / copy bandwidth:      %8.1f ms\n", floor_rank * 1e3);
    printf("  floor, both ranks' held bytes / copy bandwidth:   %8.1f ms (they share one %s)\n", floor_dev * 1e3,
           gpu ? "GPU" : "memory system");
    for (i = 0; i < 2; i++) {
        const double w = med[2 * i], b = med[2 * i + 1];
        printf("  %-9s wsync %.1f ms, ", i ? "in-place:" : "staged:", w * 1e3);
        if (no_baseline)
            printf("baseline not run (no-baseline)");
        else
            printf("baseline %.1f ms: wsync/baseline %.2f", b * 1e3, w / b);
        printf("; wsync/floor %.2f (both ranks: %.2f)\n", w / floor_rank, w / floor_dev);
    }
    printf("  into own tensors (dests): staged %.1f ms (%.2f of wsync staged), in-place %.1f ms (%.2f of wsync "
           "in-place)\n",
           med[4] * 1e3, med[4] / med[0], med[5] * 1e3, med[5] / med[2]);
    free(manifest_json);
    wsync_manifest_free(M);
    munmap(S, sizeof(*S));
    return 0;
}
