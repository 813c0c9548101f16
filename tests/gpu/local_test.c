/* local_test.c: the local transport between two processes of one host: the
 * sender on GPU 0, the receiver on GPU 0 (same GPU) or GPU 1 (across GPUs).
 * Pieces of many sizes put from inside a source allocation into a region that
 * starts inside its allocation land in order with their tags and the sender's
 * id, every byte equal to its source and the bytes around them untouched.
 * The sender works from a thread that made no CUDA call before (as a
 * trainer's request thread does). Host memory is refused with a message that
 * says to use tcp. Inside one GPU each landing carries the digest sum of
 * the bytes written (the copy with the digest fused), equal to the CPU's
 * digest of the bytes that landed; across GPUs it carries none. A sender
 * that outlives its receivers (a trainer while engines restart) gives each
 * one's GPU memory back once its connection closes: it does not keep the
 * dead receiver's allocation mapped. */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#define REGION ((size_t)64 << 20)
#define SLACK ((size_t)1 << 20) /* regions start this far into their allocation */
#define NPIECES 24

static int ngpu;

static void piece(int i, size_t *off, size_t *len)
{
    static const size_t lens[] = {1u << 20, (3u << 20) + 17, 65536, 7};
    size_t o = 0;
    int k;
    for (k = 0; k < i; k++)
        o += lens[k % 4] + 4096; /* gaps between pieces stay as they were */
    *off = o;
    *len = lens[i % 4];
}

typedef struct send_job {
    wsync_blob_t addr, rkey;
    char *src;
    int dev, self_id, rc;
} send_job_t;

/* The sender's transport work, on a thread that made no CUDA call before
 * (as the trainer's request threads): open, register, connect, put every
 * piece, wait for every SENT in order. */
static void *send_main(void *arg)
{
    send_job_t *j = arg;
    const wsync_transport_ops_t *ops = &wsync_transport_local;
    wsync_transport_config_t cfg = {.device = j->dev, .timeout_ms = 20000};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_conn_t *c = NULL;
    wsync_blob_t key;
    int i, got = 0;
    j->rc = 3;
    if (ops->open(&cfg, &t) != WSYNC_OK ||
        ops->reg(t, j->src + SLACK, REGION, WSYNC_MEM_CUDA, &r, &key) != WSYNC_OK ||
        ops->connect(t, &j->addr, j->self_id, &c) != WSYNC_OK) {
        fprintf(stderr, "  sender: %s\n", wsync_last_error());
        return NULL;
    }
    j->rc = 4;
    for (i = 0; i < NPIECES; i++) {
        size_t off, len;
        piece(i, &off, &len);
        if (ops->put(c, r, off, &j->rkey, off, len, 100 + i) != WSYNC_OK) {
            fprintf(stderr, "  sender: %s\n", wsync_last_error());
            return NULL;
        }
    }
    j->rc = 5;
    while (got < NPIECES) {
        wsync_completion_t cs[8];
        int n = 0, k;
        if (ops->poll(t, cs, 8, &n, 20000) != WSYNC_OK || n == 0)
            return NULL;
        for (k = 0; k < n; k++) {
            if (cs[k].kind != WSYNC_COMPLETION_SENT || cs[k].tag != (uint64_t)(100 + got))
                return NULL;
            got++;
        }
    }
    ops->disconnect(c);
    ops->dereg(r);
    ops->close(t);
    j->rc = 0;
    return NULL;
}

/* Sender process on `dev`: source memory prepared here, transport work on
 * a fresh thread. */
static int sender(int in, int dev, int self_id)
{
    send_job_t j = {.dev = dev, .self_id = self_id, .rc = 2};
    pthread_t th;
    if (read_full(in, &j.addr, sizeof(j.addr)) != 0 || read_full(in, &j.rkey, sizeof(j.rkey)) != 0)
        return 2;
    if (wsync_mem_cuda.init(dev) != WSYNC_OK ||
        wsync_mem_cuda.alloc(REGION + 2 * SLACK, (void **)&j.src) != WSYNC_OK ||
        wsync_mem_cuda.fill(j.src + SLACK, REGION, 0, 11) != WSYNC_OK) {
        fprintf(stderr, "  sender: %s\n", wsync_last_error());
        return 3;
    }
    if (pthread_create(&th, NULL, send_main, &j) != 0)
        return 6;
    pthread_join(th, NULL);
    wsync_mem_cuda.free(j.src);
    return j.rc;
}

static pid_t start_sender(int *wfd, int dev, int self_id)
{
    int fds[2];
    pid_t pid;
    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a receiver that gave up */
        close(fds[1]);
        _exit(sender(fds[0], dev, self_id));
    }
    close(fds[0]);
    *wfd = fds[1];
    return pid;
}

/* Receiver (this process) on `dev`, sender on GPU 0. */
static void pieces_land(int dev)
{
    const wsync_transport_ops_t *ops = &wsync_transport_local;
    wsync_transport_config_t cfg = {.device = dev, .timeout_ms = 20000};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_blob_t addr, key;
    char *dst = NULL;
    unsigned char *host, *want;
    uint64_t sums[NPIECES];
    int has_sum[NPIECES];
    int wfd = -1, status = 0, got = 0, i;
    pid_t pid = start_sender(&wfd, 0, 3);
    CHECK(pid > 0);
    CHECK_OK(wsync_mem_cuda.init(dev));
    CHECK_OK(wsync_mem_cuda.alloc(REGION + 2 * SLACK, (void **)&dst));
    CHECK_OK(wsync_mem_cuda.fill(dst, REGION + 2 * SLACK, 0, 12)); /* not the source's bytes */
    CHECK_OK(ops->open(&cfg, &t));
    CHECK_OK(ops->reg(t, dst + SLACK, REGION, WSYNC_MEM_CUDA, &r, &key));
    CHECK_OK(ops->listen(t, &addr));
    CHECK(write_full(wfd, &addr, sizeof(addr)) == 0 && write_full(wfd, &key, sizeof(key)) == 0);
    while (got < NPIECES) {
        wsync_completion_t cs[8];
        int n = 0, k;
        CHECK_OK(ops->poll(t, cs, 8, &n, 30000));
        if (n == 0) {
            fprintf(stderr, "  receiver: no completion in 30 s after %d pieces\n", got);
            CHECK(0);
        }
        for (k = 0; k < n; k++) {
            size_t off, len;
            piece(got, &off, &len);
            CHECK_EQ(cs[k].kind, WSYNC_COMPLETION_LANDED);
            CHECK_EQ(cs[k].tag, 100 + got);
            CHECK_EQ(cs[k].len, len);
            CHECK_EQ(cs[k].peer, 3);
            has_sum[got] = cs[k].has_sum;
            sums[got] = cs[k].sum;
            got++;
        }
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Expected: the receiver's fill everywhere, except each piece's bytes,
     * which are the source's fill at the same offset. */
    host = malloc(REGION + 2 * SLACK);
    want = malloc(REGION + 2 * SLACK);
    CHECK(host && want);
    wsync_fill_pattern(want, REGION + 2 * SLACK, 0, 12);
    for (i = 0; i < NPIECES; i++) {
        size_t off, len;
        piece(i, &off, &len);
        wsync_fill_pattern(want + SLACK + off, len, off, 11);
    }
    CHECK_OK(wsync_mem_cuda.copy(host, dst, REGION + 2 * SLACK));
    CHECK(memcmp(host, want, REGION + 2 * SLACK) == 0);
    /* the sums the landings brought: same GPU only, keyed at the region offset */
    for (i = 0; i < NPIECES; i++) {
        size_t off, len;
        piece(i, &off, &len);
        CHECK_EQ(has_sum[i], dev == 0);
        if (has_sum[i] && sums[i] != wsync_digest_sum(host + SLACK + off, len, off)) {
            fprintf(stderr, "  piece %d (%zu bytes at %zu): landed sum differs from the CPU digest\n", i, len, off);
            CHECK(0);
        }
    }
    free(host);
    free(want);
    ops->dereg(r);
    ops->close(t);
    wsync_mem_cuda.free(dst);
    close(wfd);
}

static void body_same_gpu(void)
{
    pieces_land(0);
}
static void body_across_gpus(void)
{
    pieces_land(1);
}

/* Each case runs in its own CUDA-free-at-start process: the sender it forks
 * must not inherit an initialized CUDA context (CUDA does not survive fork). */
static void run_forked(void (*body)(void))
{
    int status = 0;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(45);
        test_case_failed_ = 0;
        body();
        fflush(stdout);
        fflush(stderr);
        _exit(test_case_failed_ ? 1 : 0);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_same_gpu_pieces_land_intact(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    run_forked(body_same_gpu);
}

static void test_across_gpus_pieces_land_intact(void)
{
    if (ngpu < 2)
        SKIP("needs 2 CUDA devices");
    run_forked(body_across_gpus);
}

#if WSYNC_HAVE_CUDA
#define RESTARTS 3
#define RESTART_REGION ((size_t)2 << 30) /* each receiver's allocation: far above the GPU's own churn */

/* A receiver process (the test binary run again with --receiver IN OUT):
 * a fresh allocation registered and listening; its address and key go out,
 * it waits for one landing, then exits without freeing (as a crashed
 * engine would). */
static int restart_receiver(int in, int out)
{
    const wsync_transport_ops_t *ops = &wsync_transport_local;
    wsync_transport_config_t cfg = {.device = 0, .timeout_ms = 20000};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_blob_t addr, key;
    wsync_completion_t c;
    char *dst = NULL, go;
    int n = 0;
    if (wsync_mem_cuda.init(0) != WSYNC_OK || wsync_mem_cuda.alloc(RESTART_REGION, (void **)&dst) != WSYNC_OK ||
        ops->open(&cfg, &t) != WSYNC_OK || ops->reg(t, dst, RESTART_REGION, WSYNC_MEM_CUDA, &r, &key) != WSYNC_OK ||
        ops->listen(t, &addr) != WSYNC_OK) {
        fprintf(stderr, "  receiver: %s\n", wsync_last_error());
        return 2;
    }
    if (write_full(out, &addr, sizeof(addr)) != 0 || write_full(out, &key, sizeof(key)) != 0)
        return 3;
    if (ops->poll(t, &c, 1, &n, 20000) != WSYNC_OK || n != 1 || c.kind != WSYNC_COMPLETION_LANDED)
        return 4;
    if (read_full(in, &go, 1) != 0) /* the sender saw its put complete */
        return 5;
    return 0;
}

static size_t gpu_free_bytes(void)
{
    size_t fr = 0, total = 0;
    return cudaMemGetInfo(&fr, &total) == cudaSuccess ? fr : 0;
}

/* This process sends to RESTARTS receivers, one after the other, each a
 * new process with its own allocation that exits after one put; the
 * sender disconnects from each (as a trainer drops the connection of an
 * engine rank that came back at a new address). After each, the GPU's
 * free memory is back where it was before that receiver started: the
 * sender no longer holds the dead receiver's allocation. */
static void body_restarts(void)
{
    const wsync_transport_ops_t *ops = &wsync_transport_local;
    wsync_transport_config_t cfg = {.device = 0, .timeout_ms = 20000};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_blob_t skey;
    char *src = NULL;
    size_t before;
    int k;
    CHECK_OK(wsync_mem_cuda.init(0));
    CHECK_OK(wsync_mem_cuda.alloc(REGION, (void **)&src));
    CHECK_OK(wsync_mem_cuda.fill(src, REGION, 0, 11));
    CHECK_OK(ops->open(&cfg, &t));
    CHECK_OK(ops->reg(t, src, REGION, WSYNC_MEM_CUDA, &r, &skey));
    before = gpu_free_bytes();
    for (k = 0; k < RESTARTS; k++) {
        int to[2], from[2], status = 0, n = 0, tries;
        char fa[16], fb[16];
        wsync_blob_t addr, rkey;
        wsync_completion_t c;
        wsync_conn_t *cn = NULL;
        size_t after = 0;
        pid_t pid;
        CHECK(pipe(to) == 0 && pipe(from) == 0);
        pid = fork();
        if (pid == 0) { /* exec: CUDA does not survive fork */
            close(to[1]);
            close(from[0]);
            snprintf(fa, sizeof(fa), "%d", to[0]);
            snprintf(fb, sizeof(fb), "%d", from[1]);
            execl("/proc/self/exe", "local_test", "--receiver", fa, fb, (char *)NULL);
            _exit(9);
        }
        close(to[0]);
        close(from[1]);
        CHECK(read_full(from[0], &addr, sizeof(addr)) == 0 && read_full(from[0], &rkey, sizeof(rkey)) == 0);
        CHECK_OK(ops->connect(t, &addr, 1, &cn));
        CHECK_OK(ops->put(cn, r, 0, &rkey, 0, 1 << 20, 7));
        CHECK_OK(ops->poll(t, &c, 1, &n, 20000));
        CHECK(n == 1 && c.kind == WSYNC_COMPLETION_SENT);
        CHECK(write_full(to[1], "g", 1) == 0);
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ops->disconnect(cn);
        for (tries = 0; tries < 100; tries++) { /* the driver frees a dead process's memory soon after */
            after = gpu_free_bytes();
            if (after + RESTART_REGION / 2 >= before)
                break;
            usleep(20000);
        }
        printf("  receiver %d gone: %zu MiB free (%zu before the first)\n", k, after >> 20, before >> 20);
        if (after + RESTART_REGION / 2 < before)
            fprintf(stderr, "  receiver %d's %zu MiB are still held after it exited and its connection closed\n",
                    k, RESTART_REGION >> 20);
        CHECK(after + RESTART_REGION / 2 >= before);
        close(to[1]);
        close(from[0]);
    }
    ops->dereg(r);
    ops->close(t);
    wsync_mem_cuda.free(src);
}
#endif

static void test_restarted_receivers_memory_given_back(void)
{
#if WSYNC_HAVE_CUDA
    if (ngpu == 0)
        SKIP("no CUDA device");
    run_forked(body_restarts);
#else
    SKIP("built without CUDA");
#endif
}

static void test_host_memory_refused(void)
{
    wsync_transport_config_t cfg = {.device = -1, .timeout_ms = 1000};
    const wsync_transport_ops_t *ops = NULL;
    CHECK_EQ(wsync_transport_local.can_use(&cfg), 0);
    CHECK(strstr(wsync_last_error(), "tcp") != NULL);
    CHECK_FAILS(wsync_transport_get("local", &cfg, &ops), WSYNC_ERR_UNSUPPORTED, "GPU memory only");
    /* never picked by auto */
    CHECK_OK(wsync_transport_get("auto", &cfg, &ops));
    CHECK(strcmp(ops->name, "local") != 0);
}

int main(int argc, char **argv)
{
#if WSYNC_HAVE_CUDA
    if (argc == 4 && strcmp(argv[1], "--receiver") == 0)
        return restart_receiver(atoi(argv[2]), atoi(argv[3]));
#else
    (void)argc, (void)argv;
#endif
    alarm(100);
    ngpu = gpu_count_forked();
    RUN(test_same_gpu_pieces_land_intact);
    RUN(test_across_gpus_pieces_land_intact);
    RUN(test_restarted_receivers_memory_given_back);
    RUN(test_host_memory_refused);
    TEST_EXIT();
}
