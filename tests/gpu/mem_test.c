/* mem_test.c: the cuda memory backend copies host->device, device->host,
 * device->device and across GPUs (every byte compared), and its blocking copy
 * is complete when it returns; copies queued by copy_many without waiting
 * come before a later digest on the same thread, and a drain ends them. */
#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

static int ngpu;

static void test_copies_every_direction(void)
{
    size_t len = (32u << 20) + 11, i;
    static const size_t lens[] = {1, 4095, 65536, (32u << 20) + 11};
    unsigned char *src = malloc(len), *back = malloc(len), *d0 = NULL, *d1 = NULL;
    if (ngpu == 0) {
        free(src);
        free(back);
        SKIP("no CUDA device");
    }
    fill_random(src, len, 7);
    CHECK_OK(wsync_mem_cuda.alloc(len, (void **)&d0));
    CHECK_OK(wsync_mem_cuda.alloc(len + 8, (void **)&d1));
    for (i = 0; d0 && d1 && i < WSYNC_ARRAY_LEN(lens); i++) {
        memset(back, 0, len);
        CHECK_OK(wsync_mem_cuda.copy(d0, src, lens[i]));      /* H2D */
        CHECK_OK(wsync_mem_cuda.copy(d1 + 3, d0, lens[i]));   /* D2D, unaligned */
        CHECK_OK(wsync_mem_cuda.copy(back, d1 + 3, lens[i])); /* D2H */
        CHECK(memcmp(src, back, lens[i]) == 0);
    }
    wsync_mem_cuda.free(d0);
    wsync_mem_cuda.free(d1);
    free(src);
    free(back);
}

static void test_queued_copies_come_before_a_digest(void)
{
    enum { N = 64, PART = 1 << 20 };
    unsigned char *src = malloc((size_t)N * PART), *back = malloc((size_t)N * PART), *d0 = NULL, *d1 = NULL;
    wsync_copy_t cs[N];
    wsync_digest_range_t rg = {0};
    uint64_t sum = 0;
    int i;
    if (ngpu == 0) {
        free(src);
        free(back);
        SKIP("no CUDA device");
    }
    fill_random(src, (size_t)N * PART, 11);
    CHECK_OK(wsync_mem_cuda.alloc((size_t)N * PART, (void **)&d0));
    CHECK_OK(wsync_mem_cuda.alloc((size_t)N * PART, (void **)&d1));
    if (d0 && d1) {
        CHECK_OK(wsync_mem_cuda.copy(d0, src, (size_t)N * PART));
        for (i = 0; i < N; i++) /* the parts in reverse order, each to its own place */
            cs[i] = (wsync_copy_t){d1 + (size_t)(N - 1 - i) * PART, d0 + (size_t)(N - 1 - i) * PART, PART};
        CHECK_OK(wsync_mem_cuda.copy_many(cs, N, 0));
        rg = (wsync_digest_range_t){.ptr = d1, .len = (size_t)N * PART, .off = 4096};
        CHECK_OK(wsync_mem_cuda.digest_many(&rg, 1, &sum));
        CHECK(sum == wsync_digest_sum(src, (size_t)N * PART, 4096));
        CHECK_OK(wsync_mem_cuda.copy_many(cs, N, 0));
        CHECK_OK(wsync_mem_cuda.copy_many(NULL, 0, 1));
        CHECK_OK(wsync_mem_cuda.copy(back, d1, (size_t)N * PART));
        CHECK(memcmp(src, back, (size_t)N * PART) == 0);
    }
    wsync_mem_cuda.free(d0);
    wsync_mem_cuda.free(d1);
    free(src);
    free(back);
}

static void test_copy_across_gpus(void)
{
    size_t len = 64u << 20;
    unsigned char *src = malloc(len), *back = malloc(len), *d0 = NULL, *d1 = NULL;
    if (ngpu < 2) {
        free(src);
        free(back);
        SKIP(ngpu ? "one CUDA device" : "no CUDA device");
    }
    fill_random(src, len, 9);
    CHECK_OK(wsync_mem_cuda.init(0));
    CHECK_OK(wsync_mem_cuda.alloc(len, (void **)&d0));
    CHECK_OK(wsync_mem_cuda.init(1));
    CHECK_OK(wsync_mem_cuda.alloc(len, (void **)&d1));
    CHECK_OK(wsync_mem_cuda.init(0));
    if (d0 && d1) {
        CHECK_OK(wsync_mem_cuda.copy(d0, src, len));
        CHECK_OK(wsync_mem_cuda.copy(d1, d0, len)); /* peer copy GPU0 -> GPU1 */
        CHECK_OK(wsync_mem_cuda.init(1));
        CHECK_OK(wsync_mem_cuda.copy(back, d1, len));
        CHECK(memcmp(src, back, len) == 0);
    }
    wsync_mem_cuda.free(d0);
    wsync_mem_cuda.free(d1);
    CHECK_OK(wsync_mem_cuda.init(0));
    free(src);
    free(back);
}

int main(void)
{
    ngpu = gpu_count();
    RUN(test_copies_every_direction);
    RUN(test_queued_copies_come_before_a_digest);
    RUN(test_copy_across_gpus);
    TEST_EXIT();
}
