/* digest_test.c: the piece digest catches every single-bit flip, depends on
 * position, is independent of how the sum is split, and every implementation
 * (scalar, AVX2, AVX-512) equals a reference written from digest.h's text. */
#include "common/digest/digest.h"
#include "common/digest/digest_impl.h"
#include "common/base/util.h"
#include "tests/test.h"

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
    wsync_fill_pattern(b, n, 0, seed);
}

static void every_single_bit_flip_changes_the_digest(void)
{
    size_t sizes[] = {1, 7, 8, 9, 63, 256, 1000};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        unsigned char *b = malloc(n);
        fill(b, n, 42 + s);
        uint64_t d = wsync_digest(b, n, 4096);
        for (size_t i = 0; i < n * 8; i++) {
            b[i / 8] ^= (unsigned char)(1u << (i % 8));
            CHECK(wsync_digest(b, n, 4096) != d);
            b[i / 8] ^= (unsigned char)(1u << (i % 8));
        }
        CHECK(wsync_digest(b, n, 4096) == d);
        free(b);
    }
}

static void swapped_words_and_blocks_change_the_digest(void)
{
    unsigned char b[4096];
    fill(b, sizeof(b), 7);
    uint64_t d = wsync_digest(b, sizeof(b), 0);
    for (size_t blk = 8; blk <= 1024; blk *= 2) {
        unsigned char t[1024];
        memcpy(t, b, blk);
        memcpy(b, b + blk, blk);
        memcpy(b + blk, t, blk);
        CHECK(wsync_digest(b, sizeof(b), 0) != d);
        memcpy(t, b, blk);
        memcpy(b, b + blk, blk);
        memcpy(b + blk, t, blk);
    }
    CHECK(wsync_digest(b, sizeof(b), 0) == d);
}

static void offset_and_length_matter(void)
{
    unsigned char b[512];
    memset(b, 0, sizeof(b));
    CHECK(wsync_digest(b, 256, 0) != wsync_digest(b, 256, 256));
    CHECK(wsync_digest(b, 256, 0) != wsync_digest(b, 255, 0));
    CHECK(wsync_digest(b, 0, 0) != wsync_digest(b, 0, 8));
}

static void sum_of_word_aligned_parts_equals_whole(void)
{
    unsigned char b[8192];
    fill(b, sizeof(b), 3);
    uint64_t whole = wsync_digest_sum(b, sizeof(b), 64);
    /* Split at word boundaries: each part keyed by its word index. The key of
     * word i of a part at byte p is base(off) + (p/8 + i) * GOLDEN, which is
     * what the GPU kernel computes per thread. */
    uint64_t base = wsync_digest_base_key(64), s = 0;
    for (size_t i = 0; i < sizeof(b) / 8; i++) {
        uint64_t w;
        memcpy(&w, b + 8 * i, 8);
        s += wsync_digest_word(w, base + i * WSYNC_DIGEST_GOLDEN);
    }
    CHECK(s == whole);
}

/* The definition in digest.h, spelled out byte by byte and word by word with
 * nothing shared with the library but the constants. */
static uint64_t ref_fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t ref_sum(const unsigned char *b, size_t len, uint64_t off)
{
    uint64_t sum = 0, key0 = ref_fmix(off ^ WSYNC_DIGEST_SEED);
    size_t i, k;
    for (i = 0; i * 8 < len; i++) {
        uint64_t w = 0, x;
        for (k = 0; k < 8 && i * 8 + k < len; k++) /* little-endian, zero-padded */
            w |= (uint64_t)b[i * 8 + k] << (8 * k);
        x = w ^ (key0 + (uint64_t)i * WSYNC_DIGEST_GOLDEN);
        x *= WSYNC_DIGEST_M1;
        x ^= x >> 32;
        x *= WSYNC_DIGEST_M2;
        x ^= x >> 29;
        sum += x;
    }
    return sum;
}

static uint64_t ref_digest(const unsigned char *b, size_t len, uint64_t off)
{
    return ref_fmix(ref_sum(b, len, off) ^ ref_fmix(len + WSYNC_DIGEST_GOLDEN) ^ off);
}

static uint64_t rng = 0x243f6a8885a308d3ULL;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void random_data_matches_reference_in_every_implementation(void)
{
    enum { BUF = 1 << 20 };
    static const char *names[] = {"scalar", "avx2", "avx512"};
    wsync_digest_sum_fn fns[3] = {wsync_digest_sum_scalar, wsync_digest_sum_avx2_fn(), wsync_digest_sum_avx512_fn()};
    unsigned char *b = malloc(BUF);
    int trial, k, mismatches = 0;

    for (size_t i = 0; i < BUF; i++)
        b[i] = (unsigned char)rnd();
    for (trial = 0; trial < 3000; trial++) {
        /* Mostly small and odd lengths (tails, vector edges), some large. */
        size_t len = trial % 10 == 0 ? (size_t)(rnd() % (BUF / 2)) : (size_t)(rnd() % 1200);
        size_t at = (size_t)(rnd() % (BUF - len + 1)); /* any alignment of the data pointer */
        uint64_t off = trial % 3 == 0 ? rnd() : (rnd() % (1ULL << 40)) & ~7ULL;
        uint64_t want_sum = ref_sum(b + at, len, off);
        if (wsync_digest(b + at, len, off) != ref_digest(b + at, len, off) ||
            wsync_digest_sum(b + at, len, off) != want_sum) {
            if (mismatches++ < 5)
                fprintf(stderr, "  wsync_digest differs from the reference: len %zu at %zu off %llu\n", len, at,
                        (unsigned long long)off);
        }
        for (k = 0; k < 3; k++) {
            if (fns[k] != NULL && fns[k](b + at, len, off) != want_sum && mismatches++ < 5)
                fprintf(stderr, "  %s sum differs from the reference: len %zu at %zu off %llu\n", names[k], len,
                        at, (unsigned long long)off);
        }
    }
    CHECK_EQ(mismatches, 0);
    for (k = 0; k < 3; k++)
        if (fns[k] == NULL)
            fprintf(stderr, "  note: %s not supported by this CPU, not compared\n", names[k]);
    free(b);
}

static void hex_round_trip(void)
{
    char hex[17];
    uint64_t v = 0;
    wsync_digest_hex(0x0123456789abcdefULL, hex);
    CHECK_STR(hex, "0123456789abcdef");
    CHECK(wsync_digest_parse(hex, &v) == 0 && v == 0x0123456789abcdefULL);
    CHECK(wsync_digest_parse("0123", &v) != 0);
    CHECK(wsync_digest_parse("0123456789abcdeg", &v) != 0);
}

int main(void)
{
    RUN(every_single_bit_flip_changes_the_digest);
    RUN(swapped_words_and_blocks_change_the_digest);
    RUN(offset_and_length_matter);
    RUN(sum_of_word_aligned_parts_equals_whole);
    RUN(random_data_matches_reference_in_every_implementation);
    RUN(hex_round_trip);
    TEST_EXIT();
}
