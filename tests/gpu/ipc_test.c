/* ipc_test.c: a CUDA IPC window across two processes: the child maps the
 * parent's window (a second map hits the cache and gives the same address),
 * reads it with the copy engines, and writes into it; both sides compare
 * every byte with its source. */
#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/util.h"
#include "common/window/window.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#define WIN_LEN ((size_t)64 << 20)

static int ngpu;

static int child(int in, int out)
{
    wsync_blob_t blob;
    void *a = NULL, *b = NULL, *mine = NULL;
    int ok = 1;
    unsigned char *host = malloc(WIN_LEN), *want = malloc(WIN_LEN);
    if (read_full(in, &blob, sizeof(blob)) != 0 || wsync_mem_cuda.init(ngpu > 1 ? 1 : 0) != WSYNC_OK)
        return 1;
    if (wsync_window_cuda_ipc.map(&blob, -1, WIN_LEN, &a) != WSYNC_OK ||
        wsync_window_cuda_ipc.map(&blob, -1, WIN_LEN, &b) != WSYNC_OK || a != b) {
        fprintf(stderr, "  child: map: %s\n", wsync_last_error());
        ok = 0;
    }
    if (ok && (wsync_mem_cuda.alloc(WIN_LEN, &mine) != WSYNC_OK || wsync_mem_cuda.copy(mine, a, WIN_LEN) != WSYNC_OK ||
               wsync_mem_cuda.copy(host, mine, WIN_LEN) != WSYNC_OK))
        ok = 0;
    wsync_fill_pattern(want, WIN_LEN, 0, 5);
    if (ok && memcmp(host, want, WIN_LEN) != 0) {
        fprintf(stderr, "  child: the mapped window differs from the parent's bytes\n");
        ok = 0;
    }
    /* write the second half: pattern 6 */
    if (ok && (wsync_mem_cuda.fill(mine, WIN_LEN / 2, WIN_LEN / 2, 6) != WSYNC_OK ||
               wsync_mem_cuda.copy((char *)a + WIN_LEN / 2, mine, WIN_LEN / 2) != WSYNC_OK))
        ok = 0;
    wsync_window_cuda_ipc.unmap(b, WIN_LEN);
    wsync_window_cuda_ipc.unmap(a, WIN_LEN);
    wsync_mem_cuda.free(mine);
    if (write_full(out, &ok, sizeof(ok)) != 0)
        return 1;
    return ok ? 0 : 1;
}

static void test_window_across_processes(void)
{
    int p2c[2], c2p[2], ok = 0, status = 0;
    pid_t pid;
    wsync_window_t w = {0};
    wsync_blob_t blob;
    unsigned char *host, *want;
    if (ngpu == 0)
        SKIP("no CUDA device");
    CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
    pid = fork();
    if (pid == 0)
        _exit(child(p2c[0], c2p[1]));
    host = malloc(WIN_LEN);
    want = malloc(WIN_LEN);
    CHECK_OK(wsync_mem_cuda.init(0));
    CHECK_OK(wsync_window_cuda_ipc.alloc(WIN_LEN, &w));
    CHECK_OK(wsync_mem_cuda.fill(w.ptr, WIN_LEN, 0, 5));
    memset(&blob, 0, sizeof(blob));
    CHECK_OK(wsync_window_cuda_ipc.export_blob(&w, &blob));
    CHECK(write_full(p2c[1], &blob, sizeof(blob)) == 0);
    CHECK(read_full(c2p[0], &ok, sizeof(ok)) == 0);
    CHECK(ok == 1);
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* first half as written here, second half as the child wrote it */
    wsync_fill_pattern(want, WIN_LEN / 2, 0, 5);
    wsync_fill_pattern(want + WIN_LEN / 2, WIN_LEN / 2, WIN_LEN / 2, 6);
    CHECK_OK(wsync_mem_cuda.copy(host, w.ptr, WIN_LEN));
    CHECK(memcmp(host, want, WIN_LEN) == 0);
    /* our own blob maps to our own pointer */
    {
        void *self = NULL;
        CHECK_OK(wsync_window_cuda_ipc.map(&blob, -1, WIN_LEN, &self));
        CHECK(self == w.ptr);
        wsync_window_cuda_ipc.unmap(self, WIN_LEN);
    }
    wsync_window_cuda_ipc.free(&w);
    free(host);
    free(want);
    close(p2c[0]);
    close(p2c[1]);
    close(c2p[0]);
    close(c2p[1]);
}

static void test_bad_blob_is_refused(void)
{
    wsync_blob_t blob = {.len = 3};
    void *p = NULL;
    if (ngpu == 0)
        SKIP("no CUDA device");
    CHECK_FAILS(wsync_window_cuda_ipc.map(&blob, -1, 10, &p), WSYNC_ERR_FORMAT, "cuda_ipc");
}

int main(void)
{
    ngpu = gpu_count_forked();
    RUN(test_window_across_processes);
    RUN(test_bad_blob_is_refused);
    TEST_EXIT();
}
