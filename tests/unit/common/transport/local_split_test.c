/* local_split_test.c: the local transport's cut of a put by the receiver's
 * redirect (local_redirect.c lo_split, lo_parts_summable, lo_part_key), on
 * host memory with no GPU: random spans on the region's 8-byte grid in a
 * second buffer and random puts; copying each part where it says lands
 * every byte where a byte-by-byte model says (the span's memory inside a
 * span, the region's elsewhere), and the parts' digests, each keyed at its
 * word of the put, add up to the whole put's digest (what the fused kernel
 * does on the GPU; the first H200 run found them keyed at region offsets,
 * a failed verification). A put whose parts are off its word grid is not
 * summable. Builds without CUDA print skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "common/transport/local_internal.h"

#if WSYNC_HAVE_CUDA
#include "tests/test.h"

#define REGION (1u << 18)
#define SPANMEM (1u << 18)
#define NSPANS 40

/* Sorted, disjoint spans on the 8-byte grid of the region, each at its own
 * place in `mem`. */
static size_t make_spans(lo_span_t *sp, char *mem, unsigned *seed)
{
    uint64_t at = 64, mat = 0;
    size_t n = 0;
    while (n < NSPANS) {
        const uint64_t gap = 8 * (uint64_t)(rand_r(seed) % 400), len = 8 * (1 + (uint64_t)(rand_r(seed) % 500));
        if (at + gap + len > REGION || mat + len > SPANMEM)
            break;
        sp[n++] = (lo_span_t){.off = at + gap, .len = len, .ptr = mem + mat};
        at += gap + len;
        mat += len + 8 * (uint64_t)(rand_r(seed) % 4);
    }
    return n;
}

static void puts_land_where_the_spans_say_and_their_sums_add_up(void)
{
    char *region = malloc(REGION), *mem = malloc(SPANMEM), *want_r = malloc(REGION), *want_m = malloc(SPANMEM);
    unsigned char *src = malloc(REGION);
    lo_span_t sp[NSPANS];
    unsigned seed = 7;
    int round, summed = 0, unsummable = 0;
    CHECK(region && mem && want_r && want_m && src);
    if (!(region && mem && want_r && want_m && src))
        goto out;
    for (round = 0; round < 200; round++) {
        const size_t nsp = make_spans(sp, mem, &seed);
        const uint64_t off = (uint64_t)(rand_r(&seed) % (REGION / 2)) & (round % 4 ? ~7ull : ~0ull);
        const uint64_t len = 1 + (uint64_t)(rand_r(&seed) % (REGION / 2 - 1));
        lo_part_t *ps = NULL;
        size_t np = 0, i, k;
        uint64_t at, sum = 0;
        wsync_fill_pattern(src, REGION, 0, (uint64_t)round);
        memset(region, 0, REGION);
        memset(mem, 0, SPANMEM);
        memset(want_r, 0, REGION);
        memset(want_m, 0, SPANMEM);
        CHECK_OK(lo_split(sp, nsp, region, off, len, &ps, &np));
        for (i = 0; i < np; i++)
            memcpy(ps[i].dst, src + (ps[i].off - off), ps[i].len);
        for (at = off; at < off + len; at++) { /* the model: byte by byte */
            char *to = want_r + at;
            for (k = 0; k < nsp; k++)
                if (at >= sp[k].off && at < sp[k].off + sp[k].len)
                    to = want_m + (sp[k].ptr - mem) + (at - sp[k].off);
            *to = (char)src[at - off];
        }
        CHECK(memcmp(region, want_r, REGION) == 0);
        CHECK(memcmp(mem, want_m, SPANMEM) == 0);
        for (i = 0, at = off; i < np; i++) { /* in order, back to back */
            CHECK_EQ(ps[i].off, at);
            at += ps[i].len;
        }
        CHECK_EQ(at, off + len);
        if (off % 8 == 0)
            CHECK(lo_parts_summable(ps, np)); /* spans on the grid, the put too */
        if (lo_parts_summable(ps, np)) {
            for (i = 0; i < np; i++)
                sum += wsync_digest_sum(src + (ps[i].off - off), ps[i].len, lo_part_key(ps, i));
            CHECK_EQ(sum, wsync_digest_sum(src, len, off));
            summed++;
        } else {
            unsummable++;
        }
        free(ps);
    }
    CHECK(summed > 100 && unsummable > 0); /* both kinds were met */
out:
    free(region);
    free(mem);
    free(want_r);
    free(want_m);
    free(src);
}

int main(void)
{
    RUN(puts_land_where_the_spans_say_and_their_sums_add_up);
    TEST_EXIT();
}
#else
int main(void)
{
    printf("SKIP local_split: skipped: the local transport needs CUDA (this build has none)\n");
    return 0;
}
#endif
