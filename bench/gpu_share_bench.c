/* gpu_share_bench.c: what one GPU shared by processes costs the copy, with
 * no wsync protocol around it: the ceiling of tp_e2e_bench gpu's layout (two
 * trainer processes, each putting its half of the model into two engine
 * processes' windows over CUDA IPC, after a digest pass over its half).
 * SIZE bytes (default 15.2 GB, the Qwen2.5-7B image) cross in every row:
 *
 *   floor     one process, cudaMemcpyAsync of SIZE bytes (no IPC)
 *   SxR copy  S sender processes each copy SIZE/S bytes, SIZE/(S*R) into each
 *             of R receiver processes' IPC-mapped buffers, in 64 MiB
 *             cudaMemcpyAsync pieces on a stream per receiver
 *   +digest   each sender first digests its SIZE/S bytes on its own stream
 *             (the library's digest kernel: the trainer's digest pass),
 *             launched together with the copies
 *   fused     the copies by the library's fused copy-digest kernel (the
 *             local transport's put), after the digest pass as above
 *   16 MiB    the fused row in 16 MiB launches (wsync's gathered puts of a
 *             TP=2 node are ~130 launches of 3-67 MB per trainer rank)
 *   pokes     the fused row while each receiver launches a 4 KiB memset
 *             every 300 us (an engine rank's copies in from another local
 *             rank during the puts): what switching the GPU between
 *             processes costs
 *
 * Each row: time from the start of the first sender to the end of the last,
 * median of 5 after 1 warm-up, and its ratio to the floor. Every process is
 * forked before CUDA is initialised; the parent does no CUDA.
 *   gpu_share_bench [SIZE]   (default 15200M) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/mem/copy_digest_cuda.h"
#include "common/mem/digest_cuda.h"

#define REPS 6 /* the first is warm-up */
#define PIECE (64ull << 20)
#define POKE_US 300
#define MAXP 2

#define CU(call)                                                                         \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "gpu_share_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
            _exit(1);                                                                    \
        }                                                                                \
    } while (0)

enum { COPY, DIGEST_COPY, DIGEST_FUSED };

typedef struct {
    cudaIpcMemHandle_t h[MAXP];
    int nh, ready, go, done, quit;
    double t0[MAXP][REPS], t1[MAXP][REPS];
} shared_t;

static shared_t *S;
static pid_t kids[2 * MAXP]; /* the current layout's processes; 0 once reaped */
static int nkids, kids_bad;

/* Reaps the children that ended (block: all of them); 1 once one failed. */
static int reap(int block)
{
    int i, status;
    for (i = 0; i < nkids; i++)
        if (kids[i] > 0 && waitpid(kids[i], &status, block ? 0 : WNOHANG) == kids[i]) {
            kids[i] = 0;
            kids_bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        }
    return kids_bad;
}

/* Until *v reaches n; 0, or -1 when a child failed first (the others are
 * killed: they would wait for it for ever). */
static int wait_at_least(int *v, int n)
{
    int i;
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < n) {
        if (reap(0)) {
            for (i = 0; i < nkids; i++)
                if (kids[i] > 0)
                    kill(kids[i], SIGKILL);
            reap(1);
            return -1;
        }
        usleep(50);
    }
    return 0;
}

static void receiver(int r, uint64_t len, int poke)
{
    void *p;
    CU(cudaSetDevice(0));
    CU(cudaMalloc(&p, len));
    CU(cudaIpcGetMemHandle(&S->h[r], p));
    __atomic_add_fetch(&S->nh, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&S->quit, __ATOMIC_ACQUIRE)) {
        if (poke) { /* a small kernel of its own, as a copy in would be */
            CU(cudaMemsetAsync(p, 0, 4096, 0));
            CU(cudaStreamSynchronize(0));
        }
        usleep(poke ? POKE_US : 1000);
    }
    cudaFree(p);
}

/* Sender s of ns into nr receivers: its SIZE/ns bytes, SIZE/(ns*nr) into
 * each, at offset s * that in the receiver's buffer. */
static void sender(int s, int ns, int nr, uint64_t size, int mode, uint64_t piece)
{
    const uint64_t mine = size / (uint64_t)ns, each = mine / (uint64_t)nr;
    char *src, *dst[MAXP];
    cudaStream_t st[MAXP], ds;
    uint64_t *dsum;
    int r, rep;
    CU(cudaSetDevice(0));
    CU(cudaMalloc((void **)&src, mine));
    CU(cudaMemset(src, 0x5a + s, mine));
    CU(cudaMalloc((void **)&dsum, 2 * MAXP * sizeof(uint64_t)));
    CU(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
    for (r = 0; r < nr; r++) {
        CU(cudaIpcOpenMemHandle((void **)&dst[r], S->h[r], cudaIpcMemLazyEnablePeerAccess));
        CU(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
    }
    CU(cudaDeviceSynchronize());
    for (rep = 0; rep < REPS; rep++) {
        uint64_t off;
        __atomic_add_fetch(&S->ready, 1, __ATOMIC_RELEASE);
        wait_at_least(&S->go, rep + 1);
        S->t0[s][rep] = wsync_now_s();
        if (mode != COPY && wsync_cuda_digest_sum_async(src, mine, 0, dsum, ds) != 0)
            _exit(1);
        for (off = 0; off < each; off += piece) /* the receivers' pieces alternate */
            for (r = 0; r < nr; r++) {
                const uint64_t n = each - off < piece ? each - off : piece;
                char *to = dst[r] + (uint64_t)s * each + off;
                const char *from = src + (uint64_t)r * each + off;
                if (mode == DIGEST_FUSED) {
                    if (wsync_cuda_copy_digest_async(to, from, n, off, dsum + MAXP + r, st[r]) != 0)
                        _exit(1);
                } else {
                    CU(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, st[r]));
                }
            }
        CU(cudaDeviceSynchronize());
        S->t1[s][rep] = wsync_now_s();
        __atomic_add_fetch(&S->done, 1, __ATOMIC_RELEASE);
    }
    for (r = 0; r < nr; r++)
        cudaIpcCloseMemHandle(dst[r]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int wait_children(int n)
{
    int bad = 0, status;
    while (n-- > 0)
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad = 1;
    return bad;
}

/* One layout and mode: seconds (median of the measured reps), or -1. */
static double run(int ns, int nr, uint64_t size, int mode, uint64_t piece, int poke)
{
    double t[REPS];
    int i, rep;
    memset(S, 0, sizeof(*S));
    nkids = kids_bad = 0;
    for (i = 0; i < nr; i++)
        if ((kids[nkids++] = fork()) == 0) {
            receiver(i, size / (uint64_t)nr, poke);
            _exit(0);
        }
    if (wait_at_least(&S->nh, nr) != 0)
        return -1;
    for (i = 0; i < ns; i++)
        if ((kids[nkids++] = fork()) == 0) {
            sender(i, ns, nr, size, mode, piece);
            _exit(0);
        }
    for (rep = 0; rep < REPS; rep++) {
        double a = 1e30, b = 0;
        if (wait_at_least(&S->ready, ns * (rep + 1)) != 0)
            return -1;
        __atomic_store_n(&S->go, rep + 1, __ATOMIC_RELEASE);
        if (wait_at_least(&S->done, ns * (rep + 1)) != 0)
            return -1;
        for (i = 0; i < ns; i++) {
            a = S->t0[i][rep] < a ? S->t0[i][rep] : a;
            b = S->t1[i][rep] > b ? S->t1[i][rep] : b;
        }
        t[rep] = b - a;
    }
    __atomic_store_n(&S->quit, 1, __ATOMIC_RELEASE);
    if (reap(1))
        return -1;
    qsort(t + 1, REPS - 1, sizeof(double), cmp_double);
    return t[1 + (REPS - 1) / 2];
}

/* The floor, in a child of its own: one process, one cudaMemcpyAsync. */
static double floor_copy(uint64_t size)
{
    int p[2];
    double t = -1;
    if (pipe(p) != 0)
        return -1;
    if (fork() == 0) {
        double v[REPS];
        char *a, *b;
        int rep;
        CU(cudaSetDevice(0));
        CU(cudaMalloc((void **)&a, size));
        CU(cudaMalloc((void **)&b, size));
        CU(cudaMemset(a, 1, size));
        for (rep = 0; rep < REPS; rep++) {
            double t0 = wsync_now_s();
            CU(cudaMemcpyAsync(b, a, size, cudaMemcpyDeviceToDevice, 0));
            CU(cudaDeviceSynchronize());
            v[rep] = wsync_now_s() - t0;
        }
        qsort(v + 1, REPS - 1, sizeof(double), cmp_double);
        t = v[1 + (REPS - 1) / 2];
        _exit(write(p[1], &t, sizeof(t)) == sizeof(t) ? 0 : 1);
    }
    close(p[1]);
    if (read(p[0], &t, sizeof(t)) != sizeof(t) || wait_children(1))
        t = -1;
    close(p[0]);
    return t;
}

static int gpu_present(void)
{
    int n = 0, p[2];
    if (pipe(p) != 0)
        return 0;
    if (fork() == 0) {
        if (cudaGetDeviceCount(&n) != cudaSuccess)
            n = 0;
        _exit(write(p[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
    }
    close(p[1]);
    if (read(p[0], &n, sizeof(n)) != sizeof(n))
        n = 0;
    close(p[0]);
    wait_children(1);
    return n;
}

int main(int argc, char **argv)
{
    static const struct {
        int ns, nr, mode;
        uint64_t piece;
        int poke;
        const char *name;
    } rows[] = {{1, 1, COPY, PIECE, 0, "1 sender -> 1 receiver, copy"},
                {2, 1, COPY, PIECE, 0, "2 senders -> 1 receiver, copy"},
                {2, 2, COPY, PIECE, 0, "2 senders -> 2 receivers, copy"},
                {2, 1, DIGEST_COPY, PIECE, 0, "2 senders -> 1 receiver, digest + copy"},
                {2, 2, DIGEST_COPY, PIECE, 0, "2 senders -> 2 receivers, digest + copy"},
                {2, 2, DIGEST_FUSED, PIECE, 0, "2 senders -> 2 receivers, digest + fused copy-digest"},
                {2, 2, DIGEST_FUSED, PIECE / 4, 0, "  the same in 16 MiB launches"},
                {2, 2, DIGEST_FUSED, PIECE, 1, "  the same, receivers poking the GPU"}};
    uint64_t size = 15200ull << 20;
    double fl;
    size_t i;
    if (argc > 1 && wsync_parse_size(argv[1], "the size", &size) != WSYNC_OK) {
        fprintf(stderr, "gpu_share_bench: %s\nusage: gpu_share_bench [SIZE=15200M]\n", wsync_last_error());
        return 2;
    }
    size &= ~((uint64_t)4 * PIECE - 1); /* whole pieces for every sender and receiver */
    if (!gpu_present()) {
        printf("gpu_share_bench: skipped: no CUDA device\n");
        return 0;
    }
    S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED)
        return 1;
    if ((fl = floor_copy(size)) <= 0)
        return 1;
    printf("gpu_share_bench: %.3f GB across processes sharing GPU 0, median of %d after 1 warm-up\n", size / 1e9,
           REPS - 1);
    printf("  %-52s %8.2f ms  %7.1f GB/s  1.00x\n", "floor: one process, cudaMemcpy", fl * 1e3, size / fl / 1e9);
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        double t = run(rows[i].ns, rows[i].nr, size, rows[i].mode, rows[i].piece, rows[i].poke);
        if (t <= 0) {
            fprintf(stderr, "gpu_share_bench: %s failed\n", rows[i].name);
            return 1;
        }
        printf("  %-52s %8.2f ms  %7.1f GB/s  %.2fx\n", rows[i].name, t * 1e3, size / t / 1e9, t / fl);
    }
    munmap(S, sizeof(*S));
    return 0;
}
#else
int main(void)
{
    printf("gpu_share_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
