/* cd_blocks_test.c: how a batch launch of the fused copy-digest kernel
 * shares its blocks among its pieces (wsync_cd_blocks): by size when the
 * pieces want more than the budget, every piece at least one block and
 * never more than a thread a vector, the blocks numbered back to back; and,
 * through a CPU model of the kernel's own rule (a block finds its piece by
 * the first blocks, then strides over it), every vector of every piece is
 * visited exactly once. */
#include <stdlib.h>
#include <string.h>

#include "common/mem/copy_digest_cuda.h"
#include "tests/test.h"

#define THREADS 256
#define BUDGET 1056 /* an H200's 132 SMs x 8 */

static uint64_t rnd(uint64_t n)
{
    static uint64_t x = 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return n ? x % n : 0;
}

/* The kernel's rule, on the CPU: block k's piece is the last whose first
 * block is at most k; thread t of it visits vectors (k - b0) * THREADS + t,
 * then on by nb * THREADS. Counts the visits of each vector. */
static int visits_once(const uint64_t *nvec, int n, const uint32_t *b0, const uint32_t *nb)
{
    const uint32_t grid = b0[n - 1] + nb[n - 1];
    uint8_t *seen[WSYNC_CD_BATCH_MAX] = {0};
    int i, ok = 1;
    for (i = 0; i < n; i++)
        seen[i] = calloc(nvec[i] + 1, 1);
    for (uint32_t k = 0; k < grid; k++) {
        int y = 0;
        while (y + 1 < n && k >= b0[y + 1])
            y++;
        for (uint64_t t = 0; t < THREADS; t++)
            for (uint64_t v = (k - b0[y]) * THREADS + t; v < nvec[y]; v += (uint64_t)nb[y] * THREADS)
                seen[y][v]++;
    }
    for (i = 0; i < n; i++) {
        for (uint64_t v = 0; v < nvec[i] && ok; v++)
            ok = seen[i][v] == 1;
        free(seen[i]);
    }
    return ok;
}

static void shares_follow_sizes(void)
{
    uint64_t nvec[WSYNC_CD_BATCH_MAX];
    uint32_t b0[WSYNC_CD_BATCH_MAX], nb[WSYNC_CD_BATCH_MAX];
    int i;
    /* one 64 MiB put and fifteen of 1 MiB: the big one gets most of the GPU */
    nvec[0] = (64u << 20) / 16;
    for (i = 1; i < 16; i++)
        nvec[i] = (1u << 20) / 16;
    wsync_cd_blocks(nvec, 16, THREADS, BUDGET, b0, nb);
    CHECK(nb[0] >= BUDGET * 64 / 79 - 1 && nb[0] <= BUDGET * 64 / 79 + 1);
    for (i = 1; i < 16; i++)
        CHECK(nb[i] >= 12 && nb[i] <= 14);
    /* equal pieces: equal shares */
    for (i = 0; i < 16; i++)
        nvec[i] = (8u << 20) / 16;
    wsync_cd_blocks(nvec, 16, THREADS, BUDGET, b0, nb);
    for (i = 0; i < 16; i++)
        CHECK_EQ(nb[i], BUDGET / 16);
    /* small pieces want fewer than the budget: a thread a vector, one block for edge words only */
    nvec[0] = 0;
    nvec[1] = 1;
    nvec[2] = THREADS;
    nvec[3] = THREADS + 1;
    wsync_cd_blocks(nvec, 4, THREADS, BUDGET, b0, nb);
    CHECK_EQ(nb[0], 1);
    CHECK_EQ(nb[1], 1);
    CHECK_EQ(nb[2], 1);
    CHECK_EQ(nb[3], 2);
    CHECK_EQ(b0[3], 3);
}

static void random_batches_cover_every_vector_once(void)
{
    int iter, bad = 0;
    for (iter = 0; iter < 300; iter++) {
        const int n = 2 + (int)rnd(WSYNC_CD_BATCH_MAX - 1);
        uint64_t nvec[WSYNC_CD_BATCH_MAX], sum = 0;
        uint32_t b0[WSYNC_CD_BATCH_MAX], nb[WSYNC_CD_BATCH_MAX];
        const unsigned budget = 1 + (unsigned)rnd(BUDGET);
        int i;
        for (i = 0; i < n; i++)
            nvec[i] = rnd(4) == 0 ? rnd(300) : rnd(200000);
        wsync_cd_blocks(nvec, n, THREADS, budget, b0, nb);
        for (i = 0; i < n; i++) {
            const uint64_t want = nvec[i] / THREADS + (nvec[i] % THREADS != 0);
            if (nb[i] < 1 || nb[i] > (want ? want : 1) || (i > 0 && b0[i] != b0[i - 1] + nb[i - 1]) ||
                (i == 0 && b0[0] != 0))
                bad++;
            sum += nb[i];
        }
        if (sum > (uint64_t)budget + (uint64_t)n && bad++ < 3)
            fprintf(stderr, "  iteration %d: %llu blocks for a budget of %u and %d pieces\n", iter,
                    (unsigned long long)sum, budget, n);
        if (!visits_once(nvec, n, b0, nb) && bad++ < 3)
            fprintf(stderr, "  iteration %d: a vector is visited other than once\n", iter);
    }
    CHECK_EQ(bad, 0);
}

int main(void)
{
    RUN(shares_follow_sizes);
    RUN(random_batches_cover_every_vector_once);
    TEST_EXIT();
}
