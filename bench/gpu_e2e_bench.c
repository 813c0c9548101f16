/* gpu_e2e_bench.c: the whole GPU data path on the Qwen2.5-7B-shaped model
 * (bench/qwen7b.h, 15.23 GB of bf16): 2 trainer ranks publishing from GPU
 * memory -> one engine node of 2 ranks receiving into GPU memory, through the
 * control endpoint, with digests on both sides. Times publish (snapshot +
 * digests + report) to ready on every engine rank, per version, median after
 * two warm-up versions; compares with the floor: the bytes that must cross between GPUs
 * over 397 GB/s and over the peer-copy bandwidth measured in the same run.
 *   gpu_e2e_bench [colocated|split] [tcp|nccl|local]
 * colocated: trainer rank i and engine rank i on GPU i (default: tcp; NCCL
 * refuses a pair of ranks on one GPU). split: both trainers on GPU 0, both
 * engine ranks on GPU 1 (default: nccl). Every rank here shares one host id,
 * so receivers would pick "local" for every trainer on their own; a transport
 * other than local is measured with that choice off (WSYNC_LOCAL_TRANSPORT=0). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include <sys/mman.h>

#include "bench/gpu_pair.h"
#include "bench/qwen7b.h"
#include "common/base/log.h"
#include "common/mem/mem.h"
#include "common/proto/msg.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define W 2
#define L 2
#define VERSIONS 6
#define WARMUP 2       /* staged: each image slot's first pull opens connections and maps it */
#define LINK_GBS 397.0 /* measured peer copy GPU0 -> GPU1, one way, two-H200 host */

typedef struct shared {
    volatile int go; /* control endpoint is up */
    volatile int failed;
    volatile int pub_arrive[VERSIONS + 1];  /* trainers at the publish barrier */
    volatile int ready_count[VERSIONS + 1]; /* engine ranks holding v */
    uint64_t t_pub[VERSIONS + 1][W];
    uint64_t t_ready[VERSIONS + 1][L];
} shared_t;

static shared_t *sh;
static char url[128], *manifest_json;
static int tdev[W], edev[L];
static const char *transport;

static void wait_for(volatile int *v, int want)
{
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < want && !sh->failed)
        usleep(50);
}

static int trainer_main(int rank)
{
    const wsync_mem_ops_t *mem = &wsync_mem_cuda;
    wsync_publisher_config_t pc = {.rank = rank,
                                   .world = W,
                                   .manifest_json = manifest_json,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1"};
    wsync_owned_t owned[64];
    wsync_publisher_t *p = NULL;
    char dev[16];
    int n = 0, i, v;

    snprintf(dev, sizeof(dev), "cuda:%d", tdev[rank]);
    pc.device = dev;
    pc.control_url = url;
    if (mem->init(tdev[rank]) != WSYNC_OK ||
        wsync_publisher_owned_extents(manifest_json, WSYNC_LAYOUT_EVEN, W, rank, owned, 64, &n) != WSYNC_OK ||
        n > 64)
        goto fail;
    for (i = 0; i < n; i++)
        if (mem->alloc(owned[i].len, (void **)&owned[i].ptr) != WSYNC_OK)
            goto fail;
    pc.owned = owned;
    pc.nowned = n;
    if (wsync_publisher_create(&pc, &p) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= VERSIONS; v++) {
        /* The engines hold v-1 (so nothing else runs), fresh content, then
         * both ranks start publishing together. */
        wait_for(&sh->ready_count[v - 1], v > 1 ? L : 0);
        for (i = 0; i < n; i++)
            if (mem->fill((void *)owned[i].ptr, owned[i].len, owned[i].offset, 1000 + (uint64_t)v) != WSYNC_OK)
                goto fail;
        __atomic_add_fetch(&sh->pub_arrive[v], 1, __ATOMIC_ACQ_REL);
        wait_for(&sh->pub_arrive[v], W);
        sh->t_pub[v][rank] = wsync_now_ns();
        wsync_trace("trainer rank %d: publish(%d) starts", rank, v);
        if (wsync_publisher_publish(p, (uint64_t)v) != WSYNC_OK)
            goto fail;
        wsync_trace("trainer rank %d: publish(%d) returned", rank, v);
        if (sh->failed)
            break;
    }
    wait_for(&sh->ready_count[VERSIONS], L);
    wsync_publisher_destroy(p);
    return sh->failed;
fail:
    fprintf(stderr, "trainer rank %d: %s\n", rank, wsync_last_error());
    sh->failed = 1;
    wsync_publisher_destroy(p);
    return 1;
}

static int engine_main(int rank)
{
    wsync_receiver_config_t rc = {.control_url = url,
                                  .engine_id = "bench",
                                  .local_rank = rank,
                                  .local_world = L,
                                  .mode = WSYNC_MODE_STAGED,
                                  .transport = transport,
                                  .bind_host = "127.0.0.1"};
    wsync_receiver_t *r = NULL;
    char dev[16];
    int v;

    snprintf(dev, sizeof(dev), "cuda:%d", edev[rank]);
    rc.device = dev;
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= VERSIONS; v++) {
        uint64_t got = 0;
        if (wsync_receiver_pull(r, 0, 300000, &got) != WSYNC_OK || got != (uint64_t)v)
            goto fail;
        sh->t_ready[v][rank] = wsync_now_ns();
        __atomic_add_fetch(&sh->ready_count[v], 1, __ATOMIC_ACQ_REL);
    }
    wsync_receiver_destroy(r);
    return 0;
fail:
    fprintf(stderr, "engine rank %d: %s\n", rank, wsync_last_error());
    sh->failed = 1;
    wsync_receiver_destroy(r);
    return 1;
}

/* Peer copies of `bytes` on 2 GPUs: one way (0 -> 1) and both ways at once;
 * and the GPU digest of `dbytes` on GPU 0. Seconds, medians of 5. */
static int ceilings(size_t bytes, size_t dbytes, double *one, double *both, double *dig)
{
    void *a0, *b0, *a1, *b1;
    cudaStream_t s0, s1;
    cudaEvent_t e[4];
    double t1[5], t2[5], t3[5];
    uint64_t sum;
    int i, k;
    pair_rank = 0;
    CU(cudaSetDevice(1));
    CU(cudaMalloc(&a1, bytes));
    CU(cudaMalloc(&b1, bytes));
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    if (cudaDeviceEnablePeerAccess(0, 0) != cudaSuccess)
        cudaGetLastError();
    CU(cudaSetDevice(0));
    CU(cudaMalloc(&a0, bytes));
    CU(cudaMalloc(&b0, bytes));
    CU(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    if (cudaDeviceEnablePeerAccess(1, 0) != cudaSuccess)
        cudaGetLastError();
    for (k = 0; k < 4; k++)
        CU(cudaEventCreate(&e[k]));
    if (wsync_mem_cuda.init(0) != WSYNC_OK || wsync_mem_cuda.fill(a0, bytes, 0, 7) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaSetDevice(1));
    CU(cudaMemset(a1, 0x5a, bytes));
    CU(cudaDeviceSynchronize());
    CU(cudaSetDevice(0));
    for (i = -1; i < 5; i++) {
        float ms;
        int at = i < 0 ? 0 : i;
        CU(cudaEventRecord(e[0], s0));
        CU(cudaMemcpyPeerAsync(b1, 1, a0, 0, bytes, s0));
        CU(cudaEventRecord(e[1], s0));
        CU(cudaEventSynchronize(e[1]));
        CU(cudaEventElapsedTime(&ms, e[0], e[1]));
        t1[at] = ms / 1e3;
        {
            double t0 = wsync_now_s();
            CU(cudaMemcpyPeerAsync(b1, 1, a0, 0, bytes, s0));
            CU(cudaMemcpyPeerAsync(b0, 0, a1, 1, bytes, s1));
            CU(cudaStreamSynchronize(s0));
            CU(cudaStreamSynchronize(s1));
            t2[at] = wsync_now_s() - t0;
        }
        {
            double t0 = wsync_now_s();
            size_t done = 0;
            while (done < dbytes) {
                size_t n = dbytes - done < bytes ? dbytes - done : bytes;
                if (wsync_mem_cuda.digest_sum(a0, n, 0, &sum) != WSYNC_OK)
                    DIE("%s", wsync_last_error());
                done += n;
            }
            t3[at] = wsync_now_s() - t0;
        }
    }
    *one = median(t1, 5);
    *both = median(t2, 5);
    *dig = median(t3, 5);
    return 0;
}

static int run_child(int (*fn)(int), int arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        wait_for(&sh->go, 1);
        _exit(sh->failed ? 1 : fn(arg));
    }
    return pid;
}

int main(int argc, char **argv)
{
    const char *placement = argc > 1 ? argv[1] : "colocated";
    wsync_manifest_t *m = NULL;
    wsync_control_server_t *srv = NULL;
    json_t *mj = NULL;
    pid_t pids[W + L];
    char listen[64];
    double times[VERSIONS], one = 0, both = 0, dig = 0, cross = 0, dir[2] = {0, 0};
    uint64_t need[2] = {0, 0};
    int i, v, port, fd, status, failed = 0, split;

    split = strcmp(placement, "split") == 0;
    transport = argc > 2 ? argv[2] : split ? "nccl" : "tcp";
    if (strcmp(transport, "local") != 0)
        setenv("WSYNC_LOCAL_TRANSPORT", "0", 1);
    if (!split && strcmp(placement, "colocated") != 0) {
        fprintf(stderr, "usage: gpu_e2e_bench [colocated|split] [tcp|nccl|local]\n");
        return 2;
    }
    if (pair_gpus() < 2) {
        printf("gpu_e2e_bench: skipped: needs 2 CUDA devices\n");
        return 0;
    }
    for (i = 0; i < W; i++)
        tdev[i] = split ? 0 : i;
    for (i = 0; i < L; i++)
        edev[i] = split ? 1 : i;
    if (qwen7b_manifest(&m) != WSYNC_OK || wsync_manifest_to_json(m, &mj) != WSYNC_OK ||
        (manifest_json = json_dumps(mj, JSON_COMPACT)) == NULL) {
        fprintf(stderr, "gpu_e2e_bench: manifest: %s\n", wsync_last_error());
        return 1;
    }
    {
        /* Bytes that must cross: for each GPU holding an engine rank, the
         * image bytes no trainer on that GPU owns (they land once per GPU). */
        wsync_owned_t ext[64];
        int g, n, k, has_engine[2] = {0, 0};
        for (i = 0; i < L; i++)
            has_engine[edev[i]] = 1;
        for (i = 0; i < W; i++) {
            uint64_t own = 0;
            if (wsync_publisher_owned_extents(manifest_json, WSYNC_LAYOUT_EVEN, W, i, ext, 64, &n) != WSYNC_OK)
                return 1;
            for (k = 0; k < n; k++)
                own += ext[k].len;
            for (g = 0; g < 2; g++)
                if (has_engine[g] && tdev[i] != g)
                    need[g] += own;
        }
        dir[0] = (double)need[1] / 1e9; /* into GPU 1, from GPU 0 */
        dir[1] = (double)need[0] / 1e9;
        cross = dir[0] + dir[1];
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof(*sh));
    /* The endpoint runs in this process; its port is picked before the
     * CUDA-using ranks fork (no threads yet), and they wait for it. */
    if (wsync_tcp_listen("127.0.0.1", 0, &fd, &port) != WSYNC_OK)
        return 1;
    close(fd);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    for (i = 0; i < L; i++)
        pids[W + i] = run_child(engine_main, i);
    for (i = 0; i < W; i++)
        pids[i] = run_child(trainer_main, i);
    if (wsync_control_server_start(&(wsync_control_server_config_t){.listen = listen}, &srv) != WSYNC_OK) {
        fprintf(stderr, "gpu_e2e_bench: control endpoint: %s\n", wsync_last_error());
        sh->failed = 1;
    }
    __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
    for (i = 0; i < W + L; i++) {
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    wsync_control_server_stop(srv);
    if (failed || sh->failed) {
        printf("gpu_e2e_bench: FAILED (see the messages above)\n");
        return 1;
    }
    for (v = 1; v <= VERSIONS; v++) {
        uint64_t t0 = sh->t_pub[v][0], t1 = 0;
        for (i = 1; i < W; i++)
            if (sh->t_pub[v][i] < t0)
                t0 = sh->t_pub[v][i];
        for (i = 0; i < L; i++)
            if (sh->t_ready[v][i] > t1)
                t1 = sh->t_ready[v][i];
        times[v - 1] = (double)(t1 - t0) / 1e9;
    }
    {
        /* The ceilings in a child: CUDA stays out of this process. */
        int fds[2];
        double res[3];
        if (pipe(fds) != 0)
            return 1;
        if (fork() == 0) {
            ceilings((size_t)(need[1] > need[0] ? need[1] : need[0]) & ~(size_t)0xfff, (size_t)m->image_size,
                     &res[0], &res[1], &res[2]);
            if (write(fds[1], res, sizeof(res)) != sizeof(res))
                _exit(1);
            _exit(0);
        }
        close(fds[1]);
        if (read(fds[0], res, sizeof(res)) != sizeof(res)) {
            printf("gpu_e2e_bench: the ceiling measurement failed\n");
            return 1;
        }
        wait(NULL);
        one = res[0];
        both = res[1];
        dig = res[2];
    }
    {
        double t = median(times + WARMUP, VERSIONS - WARMUP), dmax = dir[0] > dir[1] ? dir[0] : dir[1];
        double floor_brief = cross / LINK_GBS, floor_dir = dmax / LINK_GBS;
        double peer_one = dmax / one, peer_both = 2 * dmax / both;
        double floor_meas = dir[0] > 0 && dir[1] > 0 ? both : one;
        printf("gpu_e2e_bench: Qwen2.5-7B shape, %zu tensors, %.2f GB bf16; %d trainer ranks (GPU %d,%d) -> 1 "
               "engine "
               "node x %d ranks (GPU %d,%d), %s, staged, 64 MiB chunks; publish (snapshot + digests + report) to "
               "ready on every rank, median of %d after %d warm-up versions\n",
               m->ntensors, (double)m->image_size / 1e9, W, tdev[0], tdev[1], L, edev[0], edev[1], transport,
               VERSIONS - WARMUP, WARMUP);
        printf("  warm-up (first pull into each image slot):");
        for (v = 0; v < WARMUP; v++)
            printf(" %.1f ms", times[v] * 1e3);
        printf("\n  versions:");
        for (v = WARMUP; v < VERSIONS; v++)
            printf(" %.1f ms", times[v] * 1e3);
        printf("\n  wsync publish -> ready            %9.1f ms  (%.1f GB/s of model per engine rank)\n", t * 1e3,
               (double)m->image_size / 1e9 / t);
        printf("  bytes that must cross GPUs: %.2f GB (%.2f GB GPU0->GPU1, %.2f GB GPU1->GPU0)\n", cross, dir[0],
               dir[1]);
        printf("  floor, all crossing bytes / 397 GB/s  %9.1f ms   ratio %.2fx (target <= 1.25)\n",
               floor_brief * 1e3, t / floor_brief);
        printf("  floor, busiest direction / 397 GB/s   %9.1f ms   ratio %.2fx\n", floor_dir * 1e3, t / floor_dir);
        printf("  measured peer copy of %.2f GB: one way %.1f ms (%.1f GB/s), both ways at once %.1f ms "
               "(%.1f GB/s total)\n",
               dmax, one * 1e3, peer_one, both * 1e3, peer_both);
        printf("  floor, measured peer copy (same run)  %9.1f ms   ratio %.2fx\n", floor_meas * 1e3, t / floor_meas);
        printf("  GPU digest of %.2f GB on one GPU: %.1f ms (each engine rank verifies the whole image; "
               "%.1f%% of publish->ready)\n",
               (double)m->image_size / 1e9, dig * 1e3, 100 * dig / t);
    }
    free(manifest_json);
    json_decref(mj);
    wsync_manifest_free(m);
    return 0;
}

#else
int main(void)
{
    printf("gpu_e2e_bench: skipped: not built with CUDA and NCCL\n");
    return 0;
}
#endif
