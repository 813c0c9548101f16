/* chunk_fanout_test.c: the fan-out ring (engine_side/chunk_fanout.c) on host
 * memory: jobs are reaped oldest first with their chunk, `last` flag and
 * sums (a digest range of the copied bytes, or none); the ring refuses a job
 * past RECV_FAN_INFLIGHT, saying so; recv_fan_end ends what is queued. */
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "engine_side/chunk_fanout.h"
#include "tests/test.h"

#define LEN 4096

static void jobs_reaped_oldest_first_with_their_sums(void)
{
    const wsync_mem_ops_t *mem = &wsync_mem_host;
    recv_fan_t f = {0};
    char *src = malloc(LEN * RECV_FAN_INFLIGHT), *dst = calloc(RECV_FAN_INFLIGHT, LEN);
    uint64_t sums[1];
    uint32_t c = 0;
    int k, last = 0, done = 0;
    CHECK(src != NULL && dst != NULL);
    if (!src || !dst)
        goto out;
    wsync_fill_pattern(src, LEN * RECV_FAN_INFLIGHT, 0, 5);
    CHECK_EQ(recv_fan_room(&f), RECV_FAN_INFLIGHT);
    for (k = 0; k < RECV_FAN_INFLIGHT; k++) {
        wsync_digest_range_t rg = {.ptr = dst + k * LEN, .len = LEN, .off = (uint64_t)k * LEN};
        /* chunk 10 takes two jobs (the second its last), the others one each */
        CHECK_OK(recv_fan_start(&f, mem, k < 2 ? 10 : 10 + (uint32_t)k, k != 0, dst + k * LEN, src + k * LEN, LEN,
                                &rg, k % 2));
    }
    CHECK_EQ(recv_fan_room(&f), 0);
    CHECK_FAILS(recv_fan_start(&f, mem, 99, 1, dst, src, LEN, NULL, 0), WSYNC_ERR_INTERNAL, "fan-out ring full");
    for (k = 0; k < RECV_FAN_INFLIGHT; k++) {
        sums[0] = 0;
        CHECK_OK(recv_fan_reap(&f, mem, &c, &last, sums, &done));
        CHECK_EQ(done, 1);
        CHECK_EQ(c, k < 2 ? 10u : 10u + (uint32_t)k);
        CHECK_EQ(last, k != 0);
        if (k % 2)
            CHECK_EQ(sums[0], wsync_digest_sum(src + k * LEN, LEN, (uint64_t)k * LEN));
    }
    CHECK(memcmp(dst, src, LEN * RECV_FAN_INFLIGHT) == 0);
    CHECK_OK(recv_fan_reap(&f, mem, &c, &last, sums, &done));
    CHECK_EQ(done, 0); /* none queued */
    CHECK_OK(recv_fan_start(&f, mem, 7, 1, dst, src, LEN, NULL, 0));
    recv_fan_end(&f, mem);
    CHECK_EQ(f.n, 0);
out:
    free(src);
    free(dst);
}

int main(void)
{
    RUN(jobs_reaped_oldest_first_with_their_sums);
    TEST_EXIT();
}
