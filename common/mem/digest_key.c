/* digest_key.c: the key of a word inside a digest range, so a range can be
 * digested in parts (digest_key.h). */
#include "common/mem/digest_key.h"

#include "common/digest/digest.h"

/* The inverse of wsync_fmix64: each step of it is a bijection (an xor with
 * its own high half shifted down by >= 32 undoes itself; an odd multiplier
 * has an inverse mod 2^64, found by Newton's iteration). */
static uint64_t inv_odd(uint64_t c)
{
    uint64_t y = c; /* right to 3 bits; each step doubles them */
    int i;
    for (i = 0; i < 5; i++)
        y *= 2 - c * y;
    return y;
}

static uint64_t unfmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= inv_odd(0xc4ceb9fe1a85ec53ULL);
    x ^= x >> 33;
    x *= inv_odd(0xff51afd7ed558ccdULL);
    x ^= x >> 33;
    return x;
}

uint64_t wsync_digest_off_of_base(uint64_t base)
{
    return unfmix64(base) ^ WSYNC_DIGEST_SEED;
}

uint64_t wsync_digest_key_at(uint64_t key, uint64_t word)
{
    if (word == 0)
        return key;
    return wsync_digest_off_of_base(wsync_digest_base_key(key) + word * WSYNC_DIGEST_GOLDEN);
}
