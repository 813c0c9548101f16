/* colocated.h: trainer and engine ranks sharing one GPU, as separate
 * processes, through the two paths a colocated RL set-up can take; shared
 * by bench/gpu_colocated_bench (timing) and tests/gpu/colocated_test
 * (every received byte against its source).
 *
 *   packed IPC  what vLLM's ipc weight-transfer backend and SGLang's
 *               update_weights_from_tensor do: the trainer shares one
 *               CUDA buffer once (cudaIpcGetMemHandle); per step it packs
 *               every parameter into it (one copy per tensor), signals, and
 *               each engine rank copies every tensor out into its own
 *               parameters and signals back. No verification.
 *   wsync       a publisher (one trainer rank, its weights one buffer) and
 *               1 or 2 receivers of one engine node on the same GPU, through
 *               a control endpoint in the parent and the local transport;
 *               publish() -> every rank's pull returned, digests on. Routes:
 *               zero_copy = 1 (single copy: the engine copies straight out of
 *               the trainer's weights) or 0 (slot: publish copies into a
 *               publish slot first); receiver staged or in place.
 *
 * Each step the trainer writes fresh bytes (wsync_fill_pattern of the image
 * offset, seeded by the version) once the engines hold the previous one.
 * The parent stays CUDA-free: it forks the ranks (each initializes CUDA
 * after the fork and reads the WSYNC_* environment again, so a caller may
 * change a setting between configurations) and runs the control endpoint. With `check`, each engine
 * rank copies every tensor back after every step and compares it with the
 * pattern computed on the CPU. */
#ifndef WSYNC_BENCH_COLOCATED_H
#define WSYNC_BENCH_COLOCATED_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/mem/mem.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define COLO_MAXV 16
#define COLO_MAXL 2

typedef struct colo_cfg {
    const wsync_manifest_t *m;
    const char *manifest_json;
    int ranks;      /* engine ranks on the GPU: 1 or 2 */
    int packed;     /* 1: the packed-IPC path; 0: wsync */
    int in_place;   /* wsync: receiver mode */
    int zero_copy;  /* wsync: 1 single-copy route, 0 slot route */
    int versions;   /* steps, <= COLO_MAXV */
    int check;      /* compare every received byte with its source */
    int timeout_ms; /* wsync: each engine pull's timeout (0: 120 s) */
} colo_cfg_t;

typedef struct colo_shared {
    volatile int failed;
    volatile int go;                       /* the parent's control endpoint is up */
    volatile int engines_up;               /* engine ranks set up (packed: mapped the buffer) */
    volatile int sent[COLO_MAXV + 1];      /* packed: the trainer packed step v */
    volatile int ready[COLO_MAXV + 1];     /* engine ranks holding step v */
    volatile int handle_set;               /* packed: ipc handle below is valid */
    unsigned char handle[64];              /* packed: the trainer's cudaIpcMemHandle_t */
    uint64_t t0[COLO_MAXV + 1];            /* step v starts (trainer) */
    uint64_t t1[COLO_MAXV + 1][COLO_MAXL]; /* step v held by engine rank r */
    char why[1024];                        /* first failure */
} colo_shared_t;

static colo_shared_t *colo_sh;
static const colo_cfg_t *colo_c;
static char colo_url[96];

static inline void colo_fail(const char *who, const char *what)
{
    if (!__atomic_exchange_n(&colo_sh->failed, 1, __ATOMIC_ACQ_REL))
        snprintf(colo_sh->why, sizeof(colo_sh->why), "%s: %s", who, what);
}

/* Waits until *v >= want; 0, or -1 once anyone failed. */
static inline int colo_wait(volatile int *v, int want)
{
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < want)
        if (__atomic_load_n(&colo_sh->failed, __ATOMIC_ACQUIRE))
            return -1;
    return 0;
}

static inline uint64_t colo_seed(int v)
{
    return 1000 + (uint64_t)v;
}

/* Engine side of `check`: `len` bytes at device `ptr` are the pattern of
 * image offset `off` for step v. */
static inline int colo_check_bytes(const void *ptr, uint64_t len, uint64_t off, int v, char *host, char *want)
{
    if (wsync_mem_cuda.copy(host, ptr, len) != WSYNC_OK)
        return -1;
    wsync_fill_pattern(want, len, off, colo_seed(v));
    return memcmp(host, want, len) == 0 ? 0 : -1;
}

/* ---- wsync ---------------------------------------------------------- */

/* The layout's chunk size: COLO_CHUNK_MB in the environment (a bench knob,
 * to time how the chunk size moves a colocated version), else wsync's
 * default (0). */
static inline uint64_t colo_chunk_bytes(void)
{
    const char *e = getenv("COLO_CHUNK_MB");
    return e && atoi(e) > 0 ? (uint64_t)atoi(e) << 20 : 0;
}

static inline int colo_wsync_trainer(void)
{
    const colo_cfg_t *c = colo_c;
    const wsync_mem_ops_t *mem = &wsync_mem_cuda;
    wsync_publisher_config_t pc = {.rank = 0,
                                   .world = 1,
                                   .manifest_json = c->manifest_json,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .device = "cuda:0",
                                   .zero_copy = c->zero_copy,
                                   .control_url = colo_url,
                                   .chunk_size = colo_chunk_bytes()};
    wsync_publisher_t *p = NULL;
    wsync_owned_t owned[8];
    int n = 0, i, v;
    if (mem->init(0) != WSYNC_OK ||
        wsync_publisher_owned_extents(c->manifest_json, WSYNC_LAYOUT_EVEN, 1, 0, owned, 8, &n) != WSYNC_OK || n > 8)
        goto fail;
    for (i = 0; i < n; i++)
        if (mem->alloc(owned[i].len, (void **)&owned[i].ptr) != WSYNC_OK)
            goto fail;
    pc.owned = owned;
    pc.nowned = n;
    if (wsync_publisher_create(&pc, &p) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= c->versions; v++) {
        /* the engines hold v - 1 (nothing else runs), then fresh bytes */
        if (colo_wait(&colo_sh->ready[v - 1], v > 1 ? c->ranks : 0) != 0)
            break;
        for (i = 0; i < n; i++)
            if (mem->fill((void *)owned[i].ptr, owned[i].len, owned[i].offset, colo_seed(v)) != WSYNC_OK)
                goto fail;
        colo_sh->t0[v] = wsync_now_ns();
        if (wsync_publisher_publish(p, (uint64_t)v) != WSYNC_OK)
            goto fail;
    }
    colo_wait(&colo_sh->ready[c->versions], c->ranks);
    wsync_publisher_destroy(p);
    return colo_sh->failed;
fail:
    colo_fail("trainer", wsync_last_error());
    wsync_publisher_destroy(p);
    return 1;
}

static inline int colo_wsync_engine(int rank)
{
    const colo_cfg_t *c = colo_c;
    wsync_receiver_config_t rc = {.control_url = colo_url,
                                  .engine_id = "colocated",
                                  .local_rank = rank,
                                  .local_world = c->ranks,
                                  .device = "cuda:0",
                                  .mode = c->in_place ? WSYNC_MODE_IN_PLACE : WSYNC_MODE_STAGED,
                                  .transport = "local",
                                  .bind_host = "127.0.0.1"};
    wsync_receiver_t *r = NULL;
    char *host = NULL, *want = NULL, what[900];
    int v;
    if (c->check && ((host = malloc(c->m->image_size)) == NULL || (want = malloc(c->m->image_size)) == NULL)) {
        colo_fail("engine", "no host memory for the check");
        goto out;
    }
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK) {
        colo_fail("engine", wsync_last_error());
        goto out;
    }
    for (v = 1; v <= c->versions && !colo_sh->failed; v++) {
        uint64_t got = 0;
        size_t i;
        if (wsync_receiver_pull(r, 0, c->timeout_ms > 0 ? c->timeout_ms : 120000, &got) != WSYNC_OK ||
            got != (uint64_t)v) {
            snprintf(what, sizeof(what), "rank %d, step %d (got %llu): %s", rank, v, (unsigned long long)got,
                     wsync_last_error());
            colo_fail("engine", what);
            break;
        }
        colo_sh->t1[v][rank] = wsync_now_ns();
        for (i = 0; c->check && i < wsync_receiver_tensor_count(r); i++) {
            wsync_tensor_info_t ti;
            void *ptr;
            if (wsync_receiver_tensor_at(r, i, &ptr, &ti) != WSYNC_OK ||
                colo_check_bytes(ptr, ti.size, ti.offset, v, host, want) != 0) {
                snprintf(what, sizeof(what), "rank %d, step %d: tensor %s differs from the trainer's bytes", rank,
                         v, ti.name ? ti.name : "?");
                colo_fail("engine", what);
                break;
            }
        }
        __atomic_add_fetch(&colo_sh->ready[v], 1, __ATOMIC_ACQ_REL);
    }
out:
    wsync_receiver_destroy(r);
    free(host);
    free(want);
    return colo_sh->failed;
}

/* ---- packed IPC ----------------------------------------------------- */

#if WSYNC_HAVE_CUDA
#define COLO_CU(call, who)                                                     \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            char m_[200];                                                      \
            snprintf(m_, sizeof(m_), "%s: %s", #call, cudaGetErrorString(e_)); \
            colo_fail(who, m_);                                                \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* Packed offsets: tensors back to back at 256-byte alignment (as the
 * frameworks' buckets), which is the manifest's own layout here. */
static inline int colo_packed_trainer(void)
{
    const colo_cfg_t *c = colo_c;
    const wsync_manifest_t *m = c->m;
    char *weights, *buf;
    cudaStream_t s;
    cudaIpcMemHandle_t h;
    size_t i;
    int v;
    COLO_CU(cudaSetDevice(0), "trainer");
    COLO_CU(cudaMalloc((void **)&weights, m->image_size), "trainer");
    COLO_CU(cudaMalloc((void **)&buf, m->image_size), "trainer");
    COLO_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "trainer");
    COLO_CU(cudaIpcGetMemHandle(&h, buf), "trainer");
    if (wsync_mem_cuda.init(0) != WSYNC_OK) {
        colo_fail("trainer", wsync_last_error());
        return 1;
    }
    memcpy(colo_sh->handle, &h, sizeof(h));
    __atomic_store_n(&colo_sh->handle_set, 1, __ATOMIC_RELEASE);
    if (colo_wait(&colo_sh->engines_up, c->ranks) != 0)
        return 1;
    for (v = 1; v <= c->versions; v++) {
        if (colo_wait(&colo_sh->ready[v - 1], v > 1 ? c->ranks : 0) != 0)
            return 1;
        if (wsync_mem_cuda.fill(weights, m->image_size, 0, colo_seed(v)) != WSYNC_OK) {
            colo_fail("trainer", wsync_last_error());
            return 1;
        }
        colo_sh->t0[v] = wsync_now_ns();
        for (i = 0; i < m->ntensors; i++)
            COLO_CU(cudaMemcpyAsync(buf + m->tensors[i].offset, weights + m->tensors[i].offset, m->tensors[i].size,
                                    cudaMemcpyDeviceToDevice, s),
                    "trainer");
        COLO_CU(cudaStreamSynchronize(s), "trainer");
        __atomic_store_n(&colo_sh->sent[v], 1, __ATOMIC_RELEASE);
    }
    colo_wait(&colo_sh->ready[c->versions], c->ranks);
    return colo_sh->failed;
}

static inline int colo_packed_engine(int rank)
{
    const colo_cfg_t *c = colo_c;
    const wsync_manifest_t *m = c->m;
    char *params, *buf = NULL, *host = NULL, *want = NULL, what[200];
    cudaStream_t s;
    cudaIpcMemHandle_t h;
    size_t i;
    int v;
    COLO_CU(cudaSetDevice(0), "engine");
    COLO_CU(cudaMalloc((void **)&params, m->image_size), "engine");
    COLO_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "engine");
    if (colo_wait(&colo_sh->handle_set, 1) != 0)
        return 1;
    memcpy(&h, colo_sh->handle, sizeof(h));
    COLO_CU(cudaIpcOpenMemHandle((void **)&buf, h, cudaIpcMemLazyEnablePeerAccess), "engine");
    if (c->check && ((host = malloc(m->image_size)) == NULL || (want = malloc(m->image_size)) == NULL)) {
        colo_fail("engine", "no host memory for the check");
        return 1;
    }
    __atomic_add_fetch(&colo_sh->engines_up, 1, __ATOMIC_ACQ_REL);
    for (v = 1; v <= c->versions; v++) {
        if (colo_wait(&colo_sh->sent[v], 1) != 0)
            break;
        for (i = 0; i < m->ntensors; i++)
            COLO_CU(cudaMemcpyAsync(params + m->tensors[i].offset, buf + m->tensors[i].offset, m->tensors[i].size,
                                    cudaMemcpyDeviceToDevice, s),
                    "engine");
        COLO_CU(cudaStreamSynchronize(s), "engine");
        colo_sh->t1[v][rank] = wsync_now_ns();
        for (i = 0; c->check && i < m->ntensors; i++)
            if (colo_check_bytes(params + m->tensors[i].offset, m->tensors[i].size, m->tensors[i].offset, v, host,
                                 want) != 0) {
                snprintf(what, sizeof(what), "rank %d, step %d: tensor %s differs from the trainer's bytes", rank,
                         v, m->tensors[i].name);
                colo_fail("engine", what);
                break;
            }
        __atomic_add_fetch(&colo_sh->ready[v], 1, __ATOMIC_ACQ_REL);
    }
    cudaIpcCloseMemHandle(buf);
    free(host);
    free(want);
    return colo_sh->failed;
}
#else
static inline int colo_packed_trainer(void)
{
    colo_fail("trainer", "not built with CUDA");
    return 1;
}
static inline int colo_packed_engine(int rank)
{
    (void)rank;
    colo_fail("engine", "not built with CUDA");
    return 1;
}
#endif

/* ---- the run -------------------------------------------------------- */

static inline int colo_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double colo_median(const double *v, int n)
{
    double s[COLO_MAXV];
    memcpy(s, v, (size_t)n * sizeof(double));
    qsort(s, (size_t)n, sizeof(double), colo_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* CUDA devices, counted in a throw-away child (CUDA does not survive fork,
 * and the ranks are forked after this). */
static inline int colo_gpu_count(void)
{
    int fds[2], n = 0;
    pid_t pid;
    if (pipe(fds) != 0)
        return 0;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        n = wsync_cuda_device_count();
        _exit(write(fds[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
    }
    close(fds[1]);
    if (read(fds[0], &n, sizeof(n)) != sizeof(n))
        n = 0;
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n;
}

static inline pid_t colo_fork(int rank) /* rank -1: the trainer */
{
    pid_t pid;
    /* what this process printed so far must not be printed again by a child */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int rc;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* the parent resolved the settings for an earlier configuration:
         * read the environment the caller set for this one */
        if (wsync_settings_reload() != WSYNC_OK) {
            colo_fail(rank < 0 ? "trainer" : "engine", wsync_last_error());
            _exit(1);
        }
        if (colo_wait(&colo_sh->go, 1) != 0)
            _exit(1);
        if (rank < 0)
            rc = colo_c->packed ? colo_packed_trainer() : colo_wsync_trainer();
        else
            rc = colo_c->packed ? colo_packed_engine(rank) : colo_wsync_engine(rank);
        fflush(stdout);
        _exit(rc ? 1 : 0);
    }
    return pid;
}

/* Runs one configuration; times[v - 1] = step v's seconds (start to the
 * last engine rank holding it). 0, or 1 with the reason in why. */
static inline int colo_run(const colo_cfg_t *c, double *times, char *why, size_t whylen)
{
    wsync_control_server_t *srv = NULL;
    pid_t pids[1 + COLO_MAXL];
    char listen[64];
    int i, v, fd, port, status, bad = 0;
    if (c->ranks < 1 || c->ranks > COLO_MAXL || c->versions < 1 || c->versions > COLO_MAXV) {
        snprintf(why, whylen, "1..%d engine ranks and 1..%d steps", COLO_MAXL, COLO_MAXV);
        return 1;
    }
    colo_sh = mmap(NULL, sizeof(*colo_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (colo_sh == MAP_FAILED) {
        snprintf(why, whylen, "mmap: %s", strerror(errno));
        return 1;
    }
    memset(colo_sh, 0, sizeof(*colo_sh));
    colo_c = c;
    if (!c->packed) {
        /* the port is picked before the ranks fork (no threads yet) */
        if (wsync_tcp_listen("127.0.0.1", 0, &fd, &port) != WSYNC_OK) {
            snprintf(why, whylen, "%s", wsync_last_error());
            munmap(colo_sh, sizeof(*colo_sh));
            return 1;
        }
        close(fd);
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
        snprintf(colo_url, sizeof(colo_url), "http://127.0.0.1:%d", port);
    }
    for (i = 0; i < c->ranks; i++)
        pids[1 + i] = colo_fork(i);
    pids[0] = colo_fork(-1);
    if (!c->packed &&
        wsync_control_server_start(&(wsync_control_server_config_t){.listen = listen}, &srv) != WSYNC_OK)
        colo_fail("control endpoint", wsync_last_error());
    __atomic_store_n(&colo_sh->go, 1, __ATOMIC_RELEASE);
    for (i = 0; i <= c->ranks; i++) {
        if (pids[i] < 0 || waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad = 1;
    }
    wsync_control_server_stop(srv);
    if (bad || colo_sh->failed) {
        snprintf(why, whylen, "%s", colo_sh->failed ? colo_sh->why : "a rank died");
        munmap(colo_sh, sizeof(*colo_sh));
        return 1;
    }
    for (v = 1; v <= c->versions; v++) {
        uint64_t t1 = 0;
        for (i = 0; i < c->ranks; i++)
            if (colo_sh->t1[v][i] > t1)
                t1 = colo_sh->t1[v][i];
        times[v - 1] = (double)(t1 - colo_sh->t0[v]) / 1e9;
    }
    munmap(colo_sh, sizeof(*colo_sh));
    return 0;
}

#endif
