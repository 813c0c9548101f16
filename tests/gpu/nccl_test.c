/* nccl_test.c: the nccl transport between two processes, sender on GPU 0 and
 * receiver on GPU 1 (GPU 0 if there is one): pieces of many sizes land in
 * order with their tags and sender id and every byte equals its source; a
 * sender that dies after connecting gives the receiver an ERROR completion
 * (no hang), and the next sender's pieces still land (nothing poisoned). */
#include <signal.h>
#include <sys/prctl.h>

#include "common/digest/digest.h"
#include "common/base/checks.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#define REGION ((size_t)96 << 20)
#define NPIECES 24

static int ngpu;

static void piece(int i, size_t *off, size_t *len)
{
    static const size_t lens[] = {1u << 20, (3u << 20) + 17, 65536, 8u << 20};
    size_t o = 0;
    int k;
    for (k = 0; k < i; k++)
        o += lens[k % 4];
    *off = o;
    *len = lens[i % 4];
}

/* Sender process: connect as `self_id`, put every piece (unless `die`). */
static int sender(int in, int self_id, int die)
{
    const wsync_transport_ops_t *ops = &wsync_transport_nccl;
    wsync_transport_config_t cfg = {.device = 0, .timeout_ms = 20000};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_conn_t *c = NULL;
    wsync_blob_t addr, rkey, key;
    void *src = NULL;
    int i, got = 0;
    if (read_full(in, &addr, sizeof(addr)) != 0 || read_full(in, &rkey, sizeof(rkey)) != 0)
        return 2;
    if (wsync_mem_cuda.init(0) != WSYNC_OK || wsync_mem_cuda.alloc(REGION, &src) != WSYNC_OK ||
        wsync_mem_cuda.fill(src, REGION, 0, 11) != WSYNC_OK || ops->open(&cfg, &t) != WSYNC_OK ||
        ops->reg(t, src, REGION, WSYNC_MEM_CUDA, &r, &key) != WSYNC_OK ||
        ops->connect(t, &addr, self_id, &c) != WSYNC_OK) {
        fprintf(stderr, "  sender: %s\n", wsync_last_error());
        return 3;
    }
    if (die)
        _exit(0); /* connected, then gone without a word */
    for (i = 0; i < NPIECES; i++) {
        size_t off, len;
        piece(i, &off, &len);
        if (ops->put(c, r, off, &rkey, off, len, 100 + i) != WSYNC_OK)
            return 4;
    }
    ops->put_flush(c);
    while (got < NPIECES) {
        wsync_completion_t cs[8];
        int n = 0, k;
        if (ops->poll(t, cs, 8, &n, 20000) != WSYNC_OK || n == 0)
            return 5;
        for (k = 0; k < n; k++) {
            if (cs[k].kind != WSYNC_COMPLETION_SENT || cs[k].tag != (uint64_t)(100 + got))
                return 6;
            got++;
        }
    }
    ops->disconnect(c);
    ops->dereg(r);
    ops->close(t);
    wsync_mem_cuda.free(src);
    return 0;
}

static pid_t start_sender(int *wfd, int self_id, int die)
{
    int fds[2];
    pid_t pid;
    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a receiver that gave up */
        close(fds[1]);
        _exit(sender(fds[0], self_id, die));
    }
    close(fds[0]);
    *wfd = fds[1];
    return pid;
}

/* Receiver side (this process): expect all pieces from `id`, poll them all. */
static int receive_all(const wsync_transport_ops_t *ops, wsync_transport_t *t, wsync_region_t *r, int id)
{
    int i, got = 0;
    for (i = 0; i < NPIECES; i++) {
        size_t off, len;
        piece(i, &off, &len);
        CHECK_OK(ops->expect(t, id, r, off, len, 100 + i));
    }
    ops->expect_flush(t, id);
    while (got < NPIECES) {
        wsync_completion_t cs[8];
        int n = 0, k;
        CHECK_OK(ops->poll(t, cs, 8, &n, 30000));
        if (n == 0) {
            fprintf(stderr, "  receiver: no completion in 30 s after %d pieces\n", got);
            return -1;
        }
        for (k = 0; k < n; k++) {
            size_t off, len;
            piece(got, &off, &len);
            CHECK_EQ(cs[k].kind, WSYNC_COMPLETION_LANDED);
            CHECK_EQ(cs[k].tag, 100 + got);
            CHECK_EQ(cs[k].len, len);
            CHECK_EQ(cs[k].peer, id);
            got++;
        }
    }
    return got;
}

static void body_pieces_land(void)
{
    const wsync_transport_ops_t *ops = &wsync_transport_nccl;
    int dev = 1, wfd = -1, status = 0;
    wsync_transport_config_t cfg = {.device = dev, .timeout_ms = 20000, .bind_host = "127.0.0.1"};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_blob_t addr, key;
    void *dst = NULL;
    unsigned char *host, *want;
    size_t end, len;
    pid_t pid;
    pid = start_sender(&wfd, 3, 0);
    CHECK(pid > 0);
    CHECK_OK(wsync_mem_cuda.init(dev));
    CHECK_OK(wsync_mem_cuda.alloc(REGION, &dst));
    CHECK_OK(wsync_mem_cuda.fill(dst, REGION, 0, 12)); /* not the source's bytes */
    CHECK_OK(ops->open(&cfg, &t));
    CHECK_OK(ops->reg(t, dst, REGION, WSYNC_MEM_CUDA, &r, &key));
    memset(&addr, 0, sizeof(addr));
    CHECK_OK(ops->listen(t, &addr));
    CHECK(write_full(wfd, &addr, sizeof(addr)) == 0 && write_full(wfd, &key, sizeof(key)) == 0);
    CHECK_EQ(receive_all(ops, t, r, 3), NPIECES);
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    piece(NPIECES - 1, &end, &len);
    end += len;
    host = malloc(REGION);
    want = malloc(REGION);
    wsync_fill_pattern(want, end, 0, 11);
    wsync_fill_pattern(want + end, REGION - end, end, 12);
    CHECK_OK(wsync_mem_cuda.copy(host, dst, REGION));
    CHECK(memcmp(host, want, REGION) == 0);
    free(host);
    free(want);
    ops->dereg(r);
    ops->close(t);
    wsync_mem_cuda.free(dst);
    close(wfd);
}

static void body_dead_sender(void)
{
    const wsync_transport_ops_t *ops = &wsync_transport_nccl;
    int dev = 1, wfd = -1, wfd2 = -1, status = 0, errors = 0;
    wsync_transport_config_t cfg = {.device = dev, .timeout_ms = 20000, .bind_host = "127.0.0.1"};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_blob_t addr, key;
    wsync_completion_t c;
    void *dst = NULL;
    int n = 0;
    uint64_t deadline;
    pid_t pid, pid2;
    setenv("WSYNC_NCCL_OP_TIMEOUT_MS", "3000", 1);
    wsync_settings_reload();
    pid = start_sender(&wfd, 5, 1);
    pid2 = start_sender(&wfd2, 6, 0);
    CHECK_OK(wsync_mem_cuda.init(dev));
    CHECK_OK(wsync_mem_cuda.alloc(REGION, &dst));
    CHECK_OK(ops->open(&cfg, &t));
    CHECK_OK(ops->reg(t, dst, REGION, WSYNC_MEM_CUDA, &r, &key));
    memset(&addr, 0, sizeof(addr));
    CHECK_OK(ops->listen(t, &addr));
    CHECK(write_full(wfd, &addr, sizeof(addr)) == 0 && write_full(wfd, &key, sizeof(key)) == 0);
    CHECK_OK(ops->expect(t, 5, r, 0, 1 << 20, 7));
    ops->expect_flush(t, 5);
    deadline = wsync_now_ns() + 60ull * 1000000000ull;
    while (errors == 0 && wsync_now_ns() < deadline) {
        CHECK_OK(ops->poll(t, &c, 1, &n, 1000));
        if (n == 1) {
            CHECK_EQ(c.kind, WSYNC_COMPLETION_ERROR);
            CHECK_EQ(c.tag, 7);
            CHECK_EQ(c.peer, 5);
            errors++;
        }
    }
    CHECK_EQ(errors, 1);
    waitpid(pid, &status, 0);
    /* another sender on the same transport still works */
    CHECK(write_full(wfd2, &addr, sizeof(addr)) == 0 && write_full(wfd2, &key, sizeof(key)) == 0);
    CHECK_EQ(receive_all(ops, t, r, 6), NPIECES);
    waitpid(pid2, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ops->dereg(r);
    ops->close(t);
    wsync_mem_cuda.free(dst);
    close(wfd);
    close(wfd2);
    unsetenv("WSYNC_NCCL_OP_TIMEOUT_MS");
    wsync_settings_reload();
}

/* Each case runs in its own CUDA-free-at-start process: the senders it forks
 * must not inherit an initialized CUDA context (CUDA does not survive fork). */
static void run_forked(void (*body)(void))
{
    int status = 0;
    pid_t pid = fork();
    if (pid == 0) {
        /* A hang fails this case within 45 s (alarms do not cross fork, so
         * the case sets its own) and takes its senders with it. */
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

static void test_pieces_land_in_order_and_intact(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    if (ngpu < 2)
        SKIP("needs 2 CUDA devices (NCCL refuses two ranks of a pair on one GPU)");
    run_forked(body_pieces_land);
}

static void test_dead_sender_fails_without_poisoning_others(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    if (ngpu < 2)
        SKIP("needs 2 CUDA devices (NCCL refuses two ranks of a pair on one GPU)");
    run_forked(body_dead_sender);
}

int main(void)
{
    /* A hang must fail the suite, not stall it: SIGALRM ends this program
     * (run.sh counts that as a failure). */
    alarm(100);
    ngpu = gpu_count_forked();
    RUN(test_pieces_land_in_order_and_intact);
    RUN(test_dead_sender_fails_without_poisoning_others);
    TEST_EXIT();
}
