/* cd_blocks.c: how one batch launch of the fused copy-digest kernel
 * (copy_digest_cuda.cu) shares its blocks among its pieces, in proportion
 * to their sizes. Pure host arithmetic, unit-tested without a GPU. */
#include "common/mem/copy_digest_cuda.h"

/* At most a thread a vector; one block for a piece of edge words only. */
static uint64_t blocks_wanted(uint64_t nvec, unsigned threads)
{
    const uint64_t want = nvec / threads + (nvec % threads != 0);
    return want > 0 ? want : 1;
}

void wsync_cd_blocks(const uint64_t *nvec, int n, unsigned threads, unsigned budget, uint32_t *b0, uint32_t *nb)
{
    uint64_t total = 0, wanted = 0;
    uint32_t at = 0;
    int i;
    for (i = 0; i < n; i++) {
        total += nvec[i];
        wanted += blocks_wanted(nvec[i], threads);
    }
    for (i = 0; i < n; i++) {
        uint64_t k = blocks_wanted(nvec[i], threads);
        if (wanted > budget && total > 0) {
            const uint64_t share = (uint64_t)((double)budget * (double)nvec[i] / (double)total);
            if (share < k)
                k = share > 0 ? share : 1;
        }
        b0[i] = at;
        nb[i] = (uint32_t)k;
        at += (uint32_t)k;
    }
}
