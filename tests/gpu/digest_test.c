/* digest_test.c: the GPU digest kernel gives exactly the CPU digest, on
 * random data of many sizes, pointer alignments and image offsets, both ways
 * (bytes made on the CPU digested on the GPU, and the GPU fill pattern
 * digested on the CPU); and without a GPU, asking for CUDA fails clearly. */
#include <sys/wait.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

static int ngpu;

static void test_no_device_is_a_clear_error(void)
{
    if (ngpu > 0) {
        /* With GPUs: a device number past the last one is the clear error. */
        CHECK_FAILS(wsync_mem_cuda.init(ngpu), WSYNC_ERR_UNSUPPORTED, "CUDA device");
        CHECK_OK(wsync_mem_cuda.init(0));
        return;
    }
    CHECK_FAILS(wsync_mem_cuda.init(0), WSYNC_ERR_UNSUPPORTED, "cuda");
    CHECK(strstr(wsync_last_error(), "no CUDA device") != NULL ||
          strstr(wsync_last_error(), "not built with CUDA") != NULL);
}

static void test_gpu_digest_equals_cpu_on_random_data(void)
{
    static const size_t sizes[] = {0,
                                   1,
                                   7,
                                   8,
                                   9,
                                   15,
                                   16,
                                   17,
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
                                   64u << 20};
    size_t max = (64u << 20) + 64, i, k;
    unsigned char *host = malloc(max), *dev = NULL;
    if (ngpu == 0) {
        free(host);
        SKIP("no CUDA device");
    }
    CHECK(host != NULL);
    CHECK_OK(wsync_mem_cuda.alloc(max, (void **)&dev));
    if (host == NULL || dev == NULL)
        goto out;
    fill_random(host, max, 42);
    CHECK_OK(wsync_mem_cuda.copy(dev, host, max));
    for (i = 0; i < WSYNC_ARRAY_LEN(sizes); i++)
        for (k = 0; k < 5; k++) {
            /* pointer misalignment 0, 1, 3, 8, 24 bytes; image offsets at and off words */
            static const size_t mis[] = {0, 1, 3, 8, 24};
            static const uint64_t offs[] = {0, 5, 4096, 1ULL << 33, 123456789};
            uint64_t gpu = 0, cpu = wsync_digest_sum(host + mis[k], sizes[i], offs[k]);
            CHECK_OK(wsync_mem_cuda.digest_sum(dev + mis[k], sizes[i], offs[k], &gpu));
            if (gpu != cpu) {
                fprintf(stderr, "  size %zu misalign %zu off %llu: gpu %016llx cpu %016llx\n", sizes[i], mis[k],
                        (unsigned long long)offs[k], (unsigned long long)gpu, (unsigned long long)cpu);
                CHECK(gpu == cpu);
            }
        }
    /* A batch of ranges (more than one allocation of accumulators holds,
     * with every size and misalignment above) equals the CPU range by range. */
    {
        enum { N = 300 };
        wsync_digest_range_t rg[N];
        uint64_t sums[N];
        size_t j;
        for (j = 0; j < N; j++) {
            size_t len = sizes[j % WSYNC_ARRAY_LEN(sizes)] % (max / 2), at = (j * 7919) % (max - len);
            rg[j] = (wsync_digest_range_t){.ptr = dev + at, .len = len, .off = (uint64_t)j * 4099};
        }
        CHECK_OK(wsync_mem_cuda.digest_many(rg, N, sums));
        for (j = 0; j < N; j++)
            if (sums[j] != wsync_digest_sum(host + ((const unsigned char *)rg[j].ptr - dev), rg[j].len, rg[j].off)) {
                fprintf(stderr, "  batch range %zu (%zu bytes) differs from the CPU digest\n", j, rg[j].len);
                CHECK(0);
                break;
            }
    }
    /* Runs of 16-byte aligned ranges (one launch for up to 64 of them),
     * broken by misaligned and short ones, equal the CPU range by range. */
    {
        enum { N = 200 };
        wsync_digest_range_t rg[N];
        uint64_t sums[N];
        size_t j;
        for (j = 0; j < N; j++) {
            size_t len = sizes[(j * 5) % WSYNC_ARRAY_LEN(sizes)] % (max / 2), at = (j * 7919) % (max - len);
            if (j % 37 != 5)
                at &= ~(size_t)15;
            rg[j] = (wsync_digest_range_t){.ptr = dev + at, .len = len, .off = (uint64_t)j * 65537};
        }
        CHECK_OK(wsync_mem_cuda.digest_many(rg, N, sums));
        for (j = 0; j < N; j++)
            if (sums[j] != wsync_digest_sum(host + ((const unsigned char *)rg[j].ptr - dev), rg[j].len, rg[j].off)) {
                fprintf(stderr, "  aligned batch range %zu (%zu bytes) differs from the CPU digest\n", j, rg[j].len);
                CHECK(0);
                break;
            }
    }
    /* One changed byte changes the GPU sum. */
    {
        uint64_t a = 0, b = 0;
        unsigned char x = host[777] ^ 0x10;
        CHECK_OK(wsync_mem_cuda.digest_sum(dev, 1 << 20, 0, &a));
        CHECK_OK(wsync_mem_cuda.copy(dev + 777, &x, 1));
        CHECK_OK(wsync_mem_cuda.digest_sum(dev, 1 << 20, 0, &b));
        CHECK(a != b);
    }
out:
    wsync_mem_cuda.free(dev);
    free(host);
}

static void test_gpu_fill_equals_cpu_fill(void)
{
    static const size_t sizes[] = {1, 7, 8, 13, 4096, 1000003, 16u << 20};
    static const uint64_t offs[] = {0, 3, 8, 4093, 1ULL << 32};
    size_t max = (16u << 20) + 16, i, k;
    unsigned char *want = malloc(max), *got = malloc(max), *dev = NULL;
    if (ngpu == 0) {
        free(want);
        free(got);
        SKIP("no CUDA device");
    }
    CHECK_OK(wsync_mem_cuda.alloc(max, (void **)&dev));
    for (i = 0; dev && i < WSYNC_ARRAY_LEN(sizes); i++)
        for (k = 0; k < WSYNC_ARRAY_LEN(offs); k++) {
            size_t mis = k % 3; /* destination alignment differs from the offset's sometimes */
            uint64_t gsum = 0;
            wsync_fill_pattern(want, sizes[i], offs[k], 99 + k);
            CHECK_OK(wsync_mem_cuda.fill(dev + mis, sizes[i], offs[k], 99 + k));
            CHECK_OK(wsync_mem_cuda.copy(got, dev + mis, sizes[i]));
            CHECK(memcmp(want, got, sizes[i]) == 0);
            /* the other way: GPU-made bytes, CPU digest == GPU digest */
            CHECK_OK(wsync_mem_cuda.digest_sum(dev + mis, sizes[i], offs[k], &gsum));
            CHECK(gsum == wsync_digest_sum(got, sizes[i], offs[k]));
        }
    wsync_mem_cuda.free(dev);
    free(want);
    free(got);
}

int main(void)
{
    ngpu = gpu_count();
    RUN(test_no_device_is_a_clear_error);
    RUN(test_gpu_digest_equals_cpu_on_random_data);
    RUN(test_gpu_fill_equals_cpu_fill);
    TEST_EXIT();
}
