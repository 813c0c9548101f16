/* host_test.c: the host memory backend (page-aligned, writable, copy, fill
 * and digest_sum agree with the reference functions) and wsync_mem_get's
 * parsing of device specs. */
#include <stdint.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/base/util.h"
#include "tests/test.h"

static void alloc_is_page_aligned_writable_and_freeable(void)
{
    size_t sizes[] = {1, 4095, 4096, 1 << 20, (3 << 20) + 7};
    long page = sysconf(_SC_PAGESIZE);
    CHECK_OK(wsync_mem_host.init(0));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        unsigned char *p = NULL;
        CHECK_OK(wsync_mem_host.alloc(sizes[i], (void **)&p));
        CHECK(p != NULL && (uintptr_t)p % (uintptr_t)page == 0);
        if (p == NULL)
            continue;
        CHECK(p[0] == 0 && p[sizes[i] - 1] == 0); /* fresh anonymous memory */
        p[sizes[i] - 1] = 2;                      /* the last byte is ours */
        p[0] = 1;
        CHECK(p[0] == 1 && (sizes[i] == 1 || p[sizes[i] - 1] == 2));
        wsync_mem_host.free(p);
    }
    wsync_mem_host.free(NULL);
}

static void copy_fill_and_digest_match_the_reference(void)
{
    size_t len = (1 << 20) + 13;
    unsigned char *a = NULL, *b = NULL, *ref = malloc(len);
    uint64_t sum = 0;
    CHECK_OK(wsync_mem_host.alloc(len, (void **)&a));
    CHECK_OK(wsync_mem_host.alloc(len, (void **)&b));
    /* fill at an image offset equals the reference pattern at that offset */
    CHECK_OK(wsync_mem_host.fill(a, len, 12345, 7));
    wsync_fill_pattern(ref, len, 12345, 7);
    CHECK(memcmp(a, ref, len) == 0);
    CHECK_OK(wsync_mem_host.copy(b, a, len));
    CHECK(memcmp(b, ref, len) == 0);
    CHECK_OK(wsync_mem_host.digest_sum(b, len, 12345, &sum));
    CHECK(sum == wsync_digest_sum(ref, len, 12345));
    {
        /* digest_many: range by range what digest_sum gives */
        wsync_digest_range_t rg[3] = {{b, len, 12345}, {b + 8, 100, 7}, {b + 3, 0, 0}};
        uint64_t sums[3];
        CHECK_OK(wsync_mem_host.digest_many(rg, 3, sums));
        CHECK(sums[0] == wsync_digest_sum(ref, len, 12345));
        CHECK(sums[1] == wsync_digest_sum(ref + 8, 100, 7));
        CHECK(sums[2] == wsync_digest_sum(ref + 3, 0, 0));
    }
    b[len / 2] ^= 1;
    CHECK_OK(wsync_mem_host.digest_sum(b, len, 12345, &sum));
    CHECK(sum != wsync_digest_sum(ref, len, 12345));
    wsync_mem_host.free(a);
    wsync_mem_host.free(b);
    free(ref);
}

static void copy_many_copies_every_part(void)
{
    unsigned char src[4096], dst[4096];
    wsync_copy_t cs[3] = {{dst, src + 100, 1000}, {dst + 1000, src, 100}, {dst + 1100, src + 1100, 2996}};
    size_t i;
    for (i = 0; i < sizeof(src); i++)
        src[i] = (unsigned char)(i * 7 + 3);
    memset(dst, 0, sizeof(dst));
    CHECK_OK(wsync_mem_host.copy_many(cs, 3, 0));
    CHECK(memcmp(dst, src + 100, 1000) == 0);
    CHECK(memcmp(dst + 1000, src, 100) == 0);
    CHECK(memcmp(dst + 1100, src + 1100, 2996) == 0);
    CHECK_OK(wsync_mem_host.copy_many(NULL, 0, 1));
}

static void mem_get_parses_device_specs(void)
{
    const wsync_mem_ops_t *ops = NULL;
    int dev = -1;
    CHECK_OK(wsync_mem_get("host", &ops, &dev));
    CHECK(ops == &wsync_mem_host && ops->kind == WSYNC_MEM_HOST);
    CHECK_EQ(dev, 0);
    CHECK_OK(wsync_mem_get("cuda", &ops, &dev));
    CHECK(ops == &wsync_mem_cuda);
    CHECK_EQ(dev, 0);
    CHECK_OK(wsync_mem_get("cuda:3", &ops, &dev));
    CHECK(ops == &wsync_mem_cuda);
    CHECK_EQ(dev, 3);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_FAILS(wsync_mem_get(bad[i], &ops, &dev), WSYNC_ERR_INVALID, "expected host, cuda or cuda:N");
}

int main(void)
{
    RUN(alloc_is_page_aligned_writable_and_freeable);
    RUN(copy_fill_and_digest_match_the_reference);
    RUN(copy_many_copies_every_part);
    RUN(mem_get_parses_device_specs);
    TEST_EXIT();
}
