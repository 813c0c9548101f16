/* digest_test.c: the piece digest catches every single-bit flip, depends on
 * position, and is independent of how the sum is split. */
#include "common/digest.h"
#include "common/util.h"
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
    RUN(hex_round_trip);
    TEST_EXIT();
}
