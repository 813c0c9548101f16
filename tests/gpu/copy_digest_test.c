/* copy_digest_test.c: the copy with the digest fused into it
 * (copy_digest_cuda.h) copies exactly the bytes asked, touches none around
 * them, and its sum equals the CPU digest of the source, on random data of
 * many sizes, source and destination alignments and image offsets; and the
 * CUDA memory backend's copy-and-digest jobs (which use it) give the CPU
 * digest of every range, inside the copy or not. The variant that
 * delivers its sum into mapped host memory (the local transport's puts)
 * gives the same sum each time while reusing one accumulator and counter,
 * which it leaves at 0; so does the batch of pieces in one launch, each
 * piece's sum its own. */
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/mem/copy_digest_cuda.h"
#endif

#define MAX ((size_t)(20u << 20))
#define GUARD 64

static int ngpu;

#if WSYNC_HAVE_CUDA
static uint64_t *g_dacc; /* the out variant's accumulator and counter, zeroed once */
static uint64_t *g_hout; /* its sum, mapped pinned host memory */
static uint64_t *g_hdev; /* g_hout as the device addresses it */

/* The out variant of the same copy: 0 if its sum is `want` and it left the
 * accumulator and counter at 0. */
static int one_copy_out(unsigned char *dsrc, unsigned char *ddst, size_t len, uint64_t want, uint64_t off)
{
    uint64_t words[2] = {1, 1};
    int e;
    *(volatile uint64_t *)g_hout = ~want;
    e = wsync_cuda_copy_digest_out_async(ddst, dsrc, len, off, g_dacc, (unsigned int *)(g_dacc + 1), g_hdev, NULL);
    if (e != 0 || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(words, g_dacc, sizeof(words), cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "  out variant: %s\n", cudaGetErrorString(e ? (cudaError_t)e : cudaGetLastError()));
        return 1;
    }
    if (*(volatile uint64_t *)g_hout != want || words[0] != 0 || (unsigned int)words[1] != 0) {
        fprintf(stderr, "  size %zu off %llu, out variant: sum %016llx (CPU %016llx), left %llx %llx\n", len,
                (unsigned long long)off, (unsigned long long)*(volatile uint64_t *)g_hout,
                (unsigned long long)want, (unsigned long long)words[0], (unsigned long long)words[1]);
        return 1;
    }
    return 0;
}

/* One fused copy of `len` bytes from src_mis into dst_mis keyed `off`;
 * 0 if the bytes, the guards and the sum are right. */
static int one_copy(unsigned char *dsrc, unsigned char *ddst, const unsigned char *host, unsigned char *back,
                    uint64_t *dsum, size_t len, size_t smis, size_t dmis, uint64_t off)
{
    uint64_t got = 0, want = wsync_digest_sum(host + smis, len, off);
    size_t i;
    int e, bad = 0;
    if (cudaMemset(ddst, 0xa5, MAX + 2 * GUARD) != cudaSuccess || cudaMemset(dsum, 0, 8) != cudaSuccess)
        return 1;
    e = wsync_cuda_copy_digest_async(ddst + GUARD + dmis, dsrc + smis, len, off, dsum, NULL);
    if (e != 0 || cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "  launch: %s\n", cudaGetErrorString(e ? (cudaError_t)e : cudaGetLastError()));
        return 1;
    }
    if (cudaMemcpy(&got, dsum, 8, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(back, ddst, len + 2 * GUARD + dmis, cudaMemcpyDeviceToHost) != cudaSuccess)
        return 1;
    if (got != want) {
        fprintf(stderr, "  size %zu src+%zu dst+%zu off %llu: fused sum %016llx, CPU %016llx\n", len, smis, dmis,
                (unsigned long long)off, (unsigned long long)got, (unsigned long long)want);
        bad = 1;
    }
    if (memcmp(back + GUARD + dmis, host + smis, len) != 0) {
        fprintf(stderr, "  size %zu src+%zu dst+%zu: copied bytes differ from the source\n", len, smis, dmis);
        bad = 1;
    }
    for (i = 0; i < GUARD + dmis; i++)
        bad |= back[i] != 0xa5;
    for (i = GUARD + dmis + len; i < len + 2 * GUARD + dmis; i++)
        bad |= back[i] != 0xa5;
    if (bad)
        fprintf(stderr, "  size %zu src+%zu dst+%zu: wrong bytes or bytes written outside the copy\n", len, smis,
                dmis);
    return bad | one_copy_out(dsrc + smis, ddst + GUARD + dmis, len, want, off);
}
#endif

static void test_fused_copy_equals_cpu_on_random_data(void)
{
#if WSYNC_HAVE_CUDA
    static const size_t sizes[] = {0,
                                   1,
                                   7,
                                   8,
                                   9,
                                   15,
                                   16,
                                   17,
                                   24,
                                   31,
                                   33,
                                   255,
                                   256,
                                   4095,
                                   4096,
                                   65537,
                                   1 << 20,
                                   (1 << 20) + 13,
                                   3 * (1 << 20) + 5,
                                   (16u << 20) + 8,
                                   16u << 20};
    /* source and destination misalignments: equal mod 16, equal mod 8 only, different mod 8 */
    static const size_t mis[][2] = {{0, 0}, {8, 8}, {8, 0}, {0, 8}, {24, 40}, {1, 1}, {3, 0}, {0, 5}, {7, 13}};
    static const uint64_t offs[] = {0, 5, 4096, 1ULL << 33, 123456789};
    unsigned char *host = malloc(MAX + GUARD), *back = malloc(MAX + 3 * GUARD), *dsrc = NULL, *ddst = NULL;
    uint64_t *dsum = NULL;
    size_t i, k, fails = 0;
    if (ngpu == 0) {
        free(host);
        free(back);
        SKIP("no CUDA device");
    }
    CHECK(host != NULL && back != NULL);
    CHECK_OK(wsync_mem_cuda.alloc(MAX + GUARD, (void **)&dsrc));
    CHECK_OK(wsync_mem_cuda.alloc(MAX + 3 * GUARD, (void **)&ddst));
    CHECK(cudaMalloc((void **)&dsum, 8) == cudaSuccess);
    CHECK(cudaMalloc((void **)&g_dacc, 16) == cudaSuccess && cudaMemset(g_dacc, 0, 16) == cudaSuccess);
    CHECK(cudaHostAlloc((void **)&g_hout, 8, cudaHostAllocMapped) == cudaSuccess &&
          cudaHostGetDevicePointer((void **)&g_hdev, g_hout, 0) == cudaSuccess);
    if (host == NULL || back == NULL || dsrc == NULL || ddst == NULL || dsum == NULL || g_dacc == NULL ||
        g_hdev == NULL)
        goto out;
    fill_random(host, MAX + GUARD, 7);
    CHECK_OK(wsync_mem_cuda.copy(dsrc, host, MAX + GUARD));
    for (i = 0; i < WSYNC_ARRAY_LEN(sizes); i++)
        for (k = 0; k < WSYNC_ARRAY_LEN(mis); k++)
            fails += (size_t)one_copy(dsrc, ddst, host, back, dsum, sizes[i], mis[k][0], mis[k][1],
                                      offs[(i + k) % WSYNC_ARRAY_LEN(offs)]);
    CHECK(fails == 0);
    /* One changed source byte changes the sum. */
    {
        uint64_t a = 0, b = 0;
        unsigned char x = host[4321] ^ 0x01;
        CHECK(cudaMemset(dsum, 0, 8) == cudaSuccess);
        CHECK(wsync_cuda_copy_digest_async(ddst, dsrc, 1 << 20, 0, dsum, NULL) == 0);
        CHECK(cudaMemcpy(&a, dsum, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK_OK(wsync_mem_cuda.copy(dsrc + 4321, &x, 1));
        CHECK(cudaMemset(dsum, 0, 8) == cudaSuccess);
        CHECK(wsync_cuda_copy_digest_async(ddst, dsrc, 1 << 20, 0, dsum, NULL) == 0);
        CHECK(cudaMemcpy(&b, dsum, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
        host[4321] = x;
        CHECK(a != b);
        CHECK(b == wsync_digest_sum(host, 1 << 20, 0));
    }
out:
    cudaFree(dsum);
    cudaFree(g_dacc);
    cudaFreeHost(g_hout);
    wsync_mem_cuda.free(dsrc);
    wsync_mem_cuda.free(ddst);
    free(host);
    free(back);
#else
    SKIP("not built with CUDA");
#endif
}

/* copy_digest_start through the backend: a chunk cut into pieces (the
 * fan-out job), ranges at odd offsets and lengths, and ranges outside the
 * copied bytes (digested after the copy), each sum the CPU digest. */
static void test_mem_job_sums_equal_cpu(void)
{
    enum { N = 7 };
    static const size_t cuts[N + 1] = {0, 8, 1000, 4096, 65536 + 3, 1 << 20, (3u << 20) + 1, 4u << 20};
    const size_t len = 4u << 20;
    unsigned char *host = malloc(2 * len), *src = NULL, *dst = NULL;
    wsync_digest_range_t rg[N + 1];
    uint64_t sums[N + 1];
    wsync_mem_job_t *job = NULL;
    size_t i, mis;
    int done = 0;
    if (ngpu == 0) {
        free(host);
        SKIP("no CUDA device");
    }
    CHECK(host != NULL);
    CHECK_OK(wsync_mem_cuda.alloc(2 * len, (void **)&src));
    CHECK_OK(wsync_mem_cuda.alloc(2 * len, (void **)&dst));
    if (host == NULL || src == NULL || dst == NULL)
        goto out;
    fill_random(host, 2 * len, 11);
    CHECK_OK(wsync_mem_cuda.copy(src, host, 2 * len));
    for (mis = 0; mis < 3; mis++) {
        const size_t so = mis == 2 ? 3 : 0, d0 = mis * 8; /* same, 8-apart, and byte-apart alignments */
        for (i = 0; i < N; i++)
            rg[i] = (wsync_digest_range_t){.ptr = dst + d0 + cuts[i],
                                           .len = cuts[i + 1] - cuts[i],
                                           .off = cuts[i] * 3};
        /* a range outside the copy: bytes of dst the copy does not write */
        rg[N] = (wsync_digest_range_t){.ptr = dst + d0 + len + 5, .len = 1000, .off = 77};
        CHECK_OK(wsync_mem_cuda.copy(dst + d0 + len + 5, host + len + 5, 1000));
        CHECK_OK(wsync_mem_cuda.copy_digest_start(dst + d0, src + so, len, rg, N + 1, &job));
        CHECK_OK(wsync_mem_cuda.job_poll(job, 1, sums, &done));
        CHECK(done == 1);
        wsync_mem_cuda.job_free(job);
        for (i = 0; i < N; i++)
            if (sums[i] != wsync_digest_sum(host + so + cuts[i], cuts[i + 1] - cuts[i], cuts[i] * 3)) {
                fprintf(stderr, "  alignment case %zu, piece %zu: sum differs from the CPU digest\n", mis, i);
                CHECK(0);
            }
        CHECK(sums[N] == wsync_digest_sum(host + len + 5, 1000, 77));
    }
out:
    wsync_mem_cuda.free(src);
    wsync_mem_cuda.free(dst);
    free(host);
}

/* A batch of pieces in one launch (the local transport's gathered puts):
 * every piece's bytes and sum, for batches of 1..WSYNC_CD_BATCH_MAX pieces
 * of uneven sizes, one with a piece the vector kernel cannot take, and
 * (round 2) small pieces of 16 bytes to 4 KiB with one of 1 MiB, which
 * the launch's blocks are shared by (wsync_cd_blocks). */
static void test_batch_sums_equal_cpu(void)
{
#if WSYNC_HAVE_CUDA
    enum { N = WSYNC_CD_BATCH_MAX, PIECE = 1 << 20 };
    unsigned char *host = malloc((size_t)N * PIECE), *back = malloc((size_t)N * PIECE), *dsrc = NULL, *ddst = NULL;
    uint64_t *dacc = NULL, *hout = NULL, *hdev = NULL;
    int n, i, round, bad = 0;
    if (ngpu == 0) {
        free(host);
        free(back);
        SKIP("no CUDA device");
    }
    CHECK(host != NULL && back != NULL);
    CHECK_OK(wsync_mem_cuda.alloc((size_t)N * PIECE, (void **)&dsrc));
    CHECK_OK(wsync_mem_cuda.alloc((size_t)N * PIECE, (void **)&ddst));
    CHECK(cudaMalloc((void **)&dacc, 2 * N * sizeof(uint64_t)) == cudaSuccess &&
          cudaMemset(dacc, 0, 2 * N * sizeof(uint64_t)) == cudaSuccess);
    CHECK(cudaHostAlloc((void **)&hout, N * sizeof(uint64_t), cudaHostAllocMapped) == cudaSuccess &&
          cudaHostGetDevicePointer((void **)&hdev, hout, 0) == cudaSuccess);
    if (host == NULL || back == NULL || dsrc == NULL || ddst == NULL || dacc == NULL || hdev == NULL)
        goto out;
    fill_random(host, (size_t)N * PIECE, 11);
    CHECK_OK(wsync_mem_cuda.copy(dsrc, host, (size_t)N * PIECE));
    for (round = 0; round < 3; round++)
        for (n = 1; n <= N; n++) {
            wsync_cd_piece_t pc[N];
            uint64_t left[2 * N];
            for (i = 0; i < n; i++) {
                /* uneven lengths; round 1: piece n/2 starts 8 bytes off (a word kernel of its own) */
                size_t at = (size_t)i * PIECE + (round == 1 && i == n / 2 ? 8 : 0);
                pc[i] = (wsync_cd_piece_t){.dst = ddst + at + (round == 1 && i == n / 2 ? 8 : 0),
                                           .src = dsrc + at,
                                           .len = round < 2    ? PIECE - 64 - (size_t)i * 4093 % 1000
                                                  : i == n - 1 ? PIECE - 64
                                                               : 16 + (size_t)i * 997 % 4096,
                                           .off = (uint64_t)at + 77,
                                           .hout = hdev + i};
                hout[i] = 0;
            }
            CHECK(cudaMemset(ddst, 0, (size_t)N * PIECE) == cudaSuccess);
            CHECK(wsync_cuda_copy_digest_batch_async(pc, n, dacc, (unsigned int *)(dacc + N), NULL) == 0);
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            CHECK(cudaMemcpy(left, dacc, sizeof(left), cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK_OK(wsync_mem_cuda.copy(back, ddst, (size_t)N * PIECE));
            for (i = 0; i < n; i++) {
                const size_t so = (size_t)((const unsigned char *)pc[i].src - dsrc);
                const size_t dof = (size_t)((unsigned char *)pc[i].dst - ddst);
                if (((volatile uint64_t *)hout)[i] != wsync_digest_sum(host + so, pc[i].len, pc[i].off) ||
                    memcmp(back + dof, host + so, pc[i].len) != 0) {
                    fprintf(stderr, "  batch of %d (round %d), piece %d: wrong sum or bytes\n", n, round, i);
                    bad = 1;
                }
            }
            for (i = 0; i < 2 * N; i++)
                bad |= left[i] != 0;
        }
    CHECK(bad == 0);
out:
    cudaFree(dacc);
    cudaFreeHost(hout);
    wsync_mem_cuda.free(dsrc);
    wsync_mem_cuda.free(ddst);
    free(host);
    free(back);
#else
    SKIP("not built with CUDA");
#endif
}

int main(void)
{
    ngpu = gpu_count();
    RUN(test_fused_copy_equals_cpu_on_random_data);
    RUN(test_mem_job_sums_equal_cpu);
    RUN(test_batch_sums_equal_cpu);
    TEST_EXIT();
}
