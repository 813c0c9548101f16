/* digest_runs_test.c (GPU): the digest-runs kernel gives every segment the
 * word sum of its runs packed byte by byte and digested on the host, on
 * random segments of every run shape, from a source at several 8-byte
 * aligned offsets; a plan of zero segments and one of a column slice of a
 * 7B-sized o_proj (3584 rows) agree too; so do the random segments summed
 * two ways (a second key and sum per segment, launched with start/wait);
 * without a GPU it says why. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"
#include "tests/unit/common/mem/digest_runs_random.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int ngpu;
static unsigned char *src, *buf;
#if WSYNC_HAVE_CUDA
static wsync_run2d_t runs[DR_MAX_RUNS];
static wsync_digest_seg_t segs[64];
#endif

static void without_gpu_digest_runs_say_why(void)
{
    wsync_digest_runs_plan_t *p = NULL;
    wsync_digest_seg_t s = {0};
    if (ngpu > 0)
        SKIP("a CUDA device is present");
    CHECK(wsync_digest_runs_prepare(&s, 1, &p) != WSYNC_OK);
    CHECK(p == NULL && wsync_last_error()[0] != '\0');
    wsync_digest_runs_free(NULL);
}

static void gpu_sums_equal_pack_then_digest(void)
{
#if WSYNC_HAVE_CUDA
    unsigned char *dev = NULL;
    int round;
    if (ngpu == 0)
        SKIP("needs a CUDA device");
    CHECK(cudaMalloc((void **)&dev, SRC_LEN + 64) == cudaSuccess);
    for (round = 0; round < 40 && dev; round++) {
        const size_t at = 8 * (size_t)(round % 4); /* the source base at 0, 8, 16, 24 mod 32 */
        size_t n = round == 0 ? 0 : dr_random_segments(segs, 64, runs), ns = 0, i;
        wsync_digest_seg2_t s2[64];
        wsync_digest_runs_plan_t *p = NULL;
        uint64_t sums[64], sums2[128];
        memset(sums, 0xee, sizeof(sums));
        CHECK(cudaMemcpy(dev + at, src, SRC_LEN, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_OK(wsync_digest_runs_prepare(segs, n, &p));
        if (p == NULL)
            break;
        CHECK_OK(wsync_digest_runs_sums(p, dev + at, sums));
        for (i = 0; i < n; i++)
            if (sums[i] != dr_reference_sum(&segs[i], src, buf)) {
                fprintf(stderr, "  round %d segment %zu of %zu differs\n", round, i, n);
                CHECK(0);
                break;
            }
        CHECK_OK(wsync_digest_runs_sums(p, dev + at, sums)); /* a plan launches again */
        for (i = 0; i < n; i++)
            CHECK(sums[i] == dr_reference_sum(&segs[i], src, buf));
        wsync_digest_runs_free(p);
        /* The same segments summed two ways, launched with start/wait. */
        dr_two_way(segs, n, s2, &ns);
        CHECK_OK(wsync_digest_runs_prepare2(s2, n, ns, &p));
        if (p) {
            CHECK_OK(wsync_digest_runs_start(p, dev + at));
            CHECK_OK(wsync_digest_runs_wait(p, sums2));
            CHECK(dr_two_way_differs(s2, n, ns, sums2, src, buf, round) < 0);
        }
        wsync_digest_runs_free(p);
    }
    cudaFree(dev);
#else
    SKIP("built without CUDA");
#endif
}

static void a_column_slice_of_o_proj(void)
{
#if WSYNC_HAVE_CUDA
    /* Rank 1 of TP=2: columns [1792, 3584) of a 3584 x 3584 bf16 matrix,
     * in a source that holds the matrix at byte 8 of a 2 x 3584 x 7168 area. */
    const uint64_t H = 3584, row = H * 2, len = 2 * H * row;
    wsync_run2d_t r = {.src_off = 8 + row / 2, .src_stride = row, .row_bytes = row / 2, .rows = H};
    wsync_digest_seg_t s = {.dst_off = 123456, .runs = &r, .nruns = 1};
    wsync_digest_runs_plan_t *p = NULL;
    unsigned char *host = malloc(len), *packed = malloc(H * row / 2), *dev = NULL;
    uint64_t sum = 0, want, i;
    if (ngpu == 0) {
        free(host);
        free(packed);
        SKIP("needs a CUDA device");
    }
    for (i = 0; i < len; i++)
        host[i] = (unsigned char)rnd(256);
    gather_bytes(packed, host, &r, 1);
    want = wsync_digest_sum(packed, H * row / 2, s.dst_off);
    CHECK(cudaMalloc((void **)&dev, len) == cudaSuccess);
    CHECK(cudaMemcpy(dev, host, len, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_OK(wsync_digest_runs_prepare(&s, 1, &p));
    if (p)
        CHECK_OK(wsync_digest_runs_sums(p, dev, &sum));
    CHECK(sum == want);
    wsync_digest_runs_free(p);
    cudaFree(dev);
    free(host);
    free(packed);
#else
    SKIP("built without CUDA");
#endif
}

int main(void)
{
    ngpu = gpu_count();
    if (!dr_buffers(&src, &buf))
        return 1;
    RUN(without_gpu_digest_runs_say_why);
    RUN(gpu_sums_equal_pack_then_digest);
    RUN(a_column_slice_of_o_proj);
    free(src);
    free(buf);
    TEST_EXIT();
}
