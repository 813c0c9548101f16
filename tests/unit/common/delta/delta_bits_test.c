/* delta_bits_test.c: the branch-free mask of the changed bytes of a word
 * (delta_bits.h, the GPU encoders' compare at width 1) against a loop over
 * the bytes: every byte value in every position (the others 0, 0x80, 0x01,
 * 0xff or random), and random words, dense and with few bits set, as
 * changed weights give. */
#include <stdint.h>

#include "common/delta/delta_bits.h"
#include "tests/test.h"

static uint64_t rs = 0x243f6a8885a308d3ULL;

static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

static uint32_t by_bytes(uint32_t x)
{
    uint32_t m = 0;
    for (int j = 0; j < 4; j++)
        m |= (uint32_t)(((x >> (8 * j)) & 0xff) != 0) << j;
    return m;
}

static void bytes_mask_equals_the_loop(void)
{
    static const uint32_t fill[] = {0, 0x80808080u, 0x01010101u, 0xffffffffu};
    int bad = 0;
    for (uint32_t v = 0; v < 256; v++)
        for (int pos = 0; pos < 4; pos++)
            for (int f = 0; f < 5; f++) {
                const uint32_t other = f < 4 ? fill[f] : rnd32();
                const uint32_t x = (other & ~(0xffu << (8 * pos))) | v << (8 * pos);
                bad += wsync_delta_nonzero_bytes(x) != by_bytes(x);
            }
    for (int i = 0; i < 1000000; i++) {
        const uint32_t x = rnd32() & rnd32() & rnd32() & rnd32(); /* sparse bits */
        const uint32_t y = rnd32();
        bad += wsync_delta_nonzero_bytes(x) != by_bytes(x);
        bad += wsync_delta_nonzero_bytes(y) != by_bytes(y);
    }
    CHECK_EQ(bad, 0);
}

int main(void)
{
    RUN(bytes_mask_equals_the_loop);
    TEST_EXIT();
}
