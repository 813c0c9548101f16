/* delta_test.c: the delta encoder and decoder against a reference written
 * here from delta.h's table alone: each form's wire bytes built with plain
 * loops, for every width, densities 0, one element, 2%, 50% and 100%, and
 * sizes that are multiples of nothing. Then hostile wires, each refused with
 * its reason and the destination untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/delta/delta.h"
#include "common/delta/delta_impl.h"
#include "tests/test.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const unsigned widths[] = {1, 2, 4, 8};
/* Element counts: 0, 1, below one group of 32, odd, a prime past 64k. */
static const size_t counts[] = {0, 1, 31, 33, 1000, 65537, 100003};

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* next = base with the chosen elements changed: `density` in 1/1000 (-1:
 * exactly one element, the last). A changed element differs in one random
 * byte, so compares by whole words and by bytes both see it. */
static void make_pair(unsigned char *base, unsigned char *next, size_t n, unsigned w, int density)
{
    for (size_t i = 0; i < n * w; i++)
        base[i] = (unsigned char)rnd();
    memcpy(next, base, n * w);
    for (size_t i = 0; i < n; i++) {
        int change = density < 0 ? i == n - 1 : (int)(rnd() % 1000) < density;
        if (change)
            next[i * w + rnd() % w] ^= (unsigned char)(1 + rnd() % 255);
    }
}

static void le(unsigned char *p, uint64_t v, unsigned bytes)
{
    for (unsigned k = 0; k < bytes; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* The reference: the wire of `form` for base -> next, and its length. */
static unsigned char *ref_wire(const unsigned char *base, const unsigned char *next, size_t n, unsigned w,
                               int form, size_t *len_out)
{
    size_t c = 0, bm = (n + 7) / 8, pay, k = 0;
    unsigned iw = form == 2 ? 4 : 0;
    for (size_t i = 0; i < n; i++)
        c += memcmp(base + i * w, next + i * w, w) != 0;
    pay = form == 0 ? n * w : form == 1 ? bm + c * w : c * (4 + w);
    unsigned char *o = calloc(1, 32 + pay + 1);
    memcpy(o, "WSD1", 4);
    o[4] = (unsigned char)form;
    o[5] = (unsigned char)w;
    o[6] = (unsigned char)iw;
    le(o + 8, n * w, 8);
    le(o + 16, c, 8);
    le(o + 24, pay, 8);
    if (form == 0)
        memcpy(o + 32, next, n * w);
    for (size_t i = 0; form != 0 && i < n; i++) {
        if (memcmp(base + i * w, next + i * w, w) == 0)
            continue;
        if (form == 1) {
            o[32 + i / 8] |= (unsigned char)(1 << (i % 8));
            memcpy(o + 32 + bm + k * w, next + i * w, w);
        } else {
            le(o + 32 + k * 4, i, 4);
            memcpy(o + 32 + c * 4 + k * w, next + i * w, w);
        }
        k++;
    }
    *len_out = 32 + pay;
    return o;
}

static const int densities[] = {0, -1, 20, 500, 1000};

static void check_one(size_t n, unsigned w, int density)
{
    size_t len = n * w, cap = wsync_delta_bound(len, w), out_len = 0, lens[3];
    unsigned char *base = malloc(len + 1), *next = malloc(len + 1), *out = malloc(cap), *dst = malloc(len + 1);
    unsigned char *refs[3];
    wsync_delta_stats_t st;
    int best = 0;
    make_pair(base, next, n, w, density);
    for (int f = 0; f < 3; f++) {
        refs[f] = ref_wire(base, next, n, w, f, &lens[f]);
        if (lens[f] < lens[best])
            best = f;
    }
    CHECK_OK(wsync_delta_encode(base, next, len, w, out, cap, &out_len, &st));
    CHECK_EQ(st.chosen, best);
    CHECK_EQ(out_len, lens[best]);
    CHECK(out_len == lens[best] && memcmp(out, refs[best], out_len) == 0);
    for (int f = 0; f < 3; f++) {
        CHECK_EQ(st.bytes[f], lens[f]);
        /* Every form, chosen or not, applies to the base to give next. */
        memcpy(dst, base, len);
        CHECK_OK(wsync_delta_apply(dst, len, refs[f], lens[f]));
        CHECK(memcmp(dst, next, len) == 0);
        free(refs[f]);
    }
    if (test_case_failed_)
        fprintf(stderr, "  (n %zu, width %u, density %d/1000, impl %s)\n", n, w, density, wsync_delta_impl());
    free(base), free(next), free(out), free(dst);
}

static void test_every_form_width_density(void)
{
    for (size_t a = 0; a < NELEM(counts); a++)
        for (size_t b = 0; b < NELEM(widths); b++)
            for (size_t d = 0; d < NELEM(densities); d++)
                if (!(counts[a] == 0 && densities[d] < 0))
                    check_one(counts[a], widths[b], densities[d]);
}

/* Both implementations' passes give the reference's bitmap, values and
 * count; the apply passes the same popcount and writes. */
static void test_impls_agree(void)
{
    const wsync_delta_ops_t *impls[2] = {&wsync_delta_scalar_ops, wsync_delta_avx2_ops()};
    for (int m = 0; m < 2; m++) {
        if (impls[m] == NULL) {
            printf("  (no AVX2 on this CPU: scalar only)\n");
            continue;
        }
        for (size_t b = 0; b < NELEM(widths); b++) {
            unsigned w = widths[b];
            size_t n = 65537, len = n * w, bm = (n + 7) / 8, rl;
            unsigned char *base = malloc(len), *next = malloc(len), *out = malloc(bm + len), *dst = malloc(len);
            unsigned char *ref;
            make_pair(base, next, n, w, 37);
            ref = ref_wire(base, next, n, w, 1, &rl);
            uint64_t c = impls[m]->pass(base, next, n, w, out, out + bm);
            CHECK_EQ(c, (rl - 32 - bm) / w);
            CHECK(memcmp(out, ref + 32, rl - 32) == 0);
            CHECK_EQ(impls[m]->pass(base, next, n, w, NULL, NULL), c);
            CHECK_EQ(impls[m]->popcount(out, n), c);
            memcpy(dst, base, len);
            impls[m]->scatter(dst, out, n, w, out + bm);
            CHECK(memcmp(dst, next, len) == 0);
            free(ref), free(base), free(next), free(out), free(dst);
        }
    }
}

/* A picked width falls back to bytes when elements do not divide the piece. */
static void test_width_for(void)
{
    CHECK_EQ(wsync_delta_width_for(4096, 2), 2);
    CHECK_EQ(wsync_delta_width_for(4097, 2), 1);
    CHECK_EQ(wsync_delta_width_for(12, 8), 1);
    CHECK_EQ(wsync_delta_width_for(12, 3), 1);
    CHECK_FAILS(wsync_delta_encode("ab", "ac", 3, 2, NULL, 0, NULL, NULL), WSYNC_ERR_INVALID, "use width 1");
}

/* For bf16 the choice turns where delta.h says: pairs below 1/32, bitmap up
 * to 15/16, full above. */
static void test_choice_thresholds(void)
{
    wsync_delta_stats_t st;
    wsync_delta_stats_from(32000, 999, 2, &st);
    CHECK_EQ(st.chosen, WSYNC_DELTA_PAIRS);
    wsync_delta_stats_from(32000, 1001, 2, &st);
    CHECK_EQ(st.chosen, WSYNC_DELTA_BITMAP);
    wsync_delta_stats_from(32000, 29999, 2, &st);
    CHECK_EQ(st.chosen, WSYNC_DELTA_BITMAP);
    wsync_delta_stats_from(32000, 30001, 2, &st);
    CHECK_EQ(st.chosen, WSYNC_DELTA_FULL);
}

/* A hostile wire: refused naming what is wrong, the destination untouched. */
static void refuse(unsigned char *wire, size_t wire_len, const unsigned char *base, size_t len, const char *needle)
{
    unsigned char *dst = malloc(len + 1);
    memcpy(dst, base, len);
    CHECK_FAILS(wsync_delta_apply(dst, len, wire, wire_len), WSYNC_ERR_FORMAT, needle);
    CHECK(memcmp(dst, base, len) == 0);
    free(dst);
}

static void test_hostile(void)
{
    size_t n = 1001, w = 2, len = n * w, lb, lp, lf;
    unsigned char *base = malloc(len), *next = malloc(len);
    make_pair(base, next, n, 2, 100);
    unsigned char *bmw = ref_wire(base, next, n, 2, 1, &lb), *pw = ref_wire(base, next, n, 2, 2, &lp);
    unsigned char *fw = ref_wire(base, next, n, 2, 0, &lf);
    uint64_t c = (lp - 32) / 6;
    CHECK(c > 3);

    refuse(bmw, 31, base, len, "truncated: 31 bytes");
    refuse(bmw, lb - 1, base, len, "truncated");
    refuse(bmw, lb + 1, base, len, "trailing bytes");
    bmw[0] ^= 1, refuse(bmw, lb, base, len, "bad magic"), bmw[0] ^= 1;
    bmw[4] = 3, refuse(bmw, lb, base, len, "form 3"), bmw[4] = 1;
    bmw[5] = 3, refuse(bmw, lb, base, len, "element width 3"), bmw[5] = 2;
    bmw[7] = 1, refuse(bmw, lb, base, len, "reserved"), bmw[7] = 0;
    refuse(bmw, lb, base, len - 2, "the piece has 2000");
    /* A count past the elements; a count that makes the payload wrap. */
    le(bmw + 16, n + 1, 8), refuse(bmw, lb, base, len, "exceeds the piece's 1001"), le(bmw + 16, c, 8);
    le(pw + 16, UINT64_MAX / 3, 8), refuse(pw, lp, base, len, "exceeds"), le(pw + 16, c, 8);
    /* A bitmap whose popcount disagrees with the count (payload adjusted so
     * only the popcount is wrong). */
    {
        size_t bm = (n + 7) / 8;
        unsigned char save = bmw[32 + 3];
        bmw[32 + 3] = (unsigned char)(bmw[32 + 3] ^ 0x10);
        refuse(bmw, lb, base, len, "bitmap marks");
        bmw[32 + 3] = save;
        /* A bit past element 1000 in the last byte. */
        bmw[32 + bm - 1] |= 0x80;
        refuse(bmw, lb, base, len, "past the piece's 1001 elements");
        bmw[32 + bm - 1] &= 0x7f;
    }
    /* Pairs: an index out of range, one repeated, one going back. */
    {
        unsigned char save[8];
        memcpy(save, pw + 32, 8);
        le(pw + 32, n, 4), refuse(pw, lp, base, len, "index 1001, past");
        memcpy(pw + 32 + 4, pw + 32, 4), le(pw + 32, 5, 4), le(pw + 36, 5, 4);
        refuse(pw, lp, base, len, "strictly increase");
        memcpy(pw + 32, save, 8);
        pw[6] = 2, refuse(pw, lp, base, len, "index width 2"), pw[6] = 4;
    }
    {
        unsigned char *dst = malloc(len);
        memcpy(dst, base, len);
        CHECK_OK(wsync_delta_apply(dst, len, fw, lf));
        CHECK(memcmp(dst, next, len) == 0);
        free(dst);
    }
    free(bmw), free(pw), free(fw), free(base), free(next);
}

int main(void)
{
    printf("  (host implementation: %s)\n", wsync_delta_impl());
    RUN(test_every_form_width_density);
    RUN(test_impls_agree);
    RUN(test_width_for);
    RUN(test_choice_thresholds);
    RUN(test_hostile);
    TEST_EXIT();
}
