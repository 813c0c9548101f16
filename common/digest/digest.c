/* digest.c: CPU implementation of the wsync piece digest (see digest.h):
 * portable word loop and the choice of the fastest one the CPU runs. */
#include "common/digest/digest.h"
#include "common/digest/digest_impl.h"

#include <stdio.h>
#include <string.h>

uint64_t wsync_digest_sum_scalar(const void *data, size_t len, uint64_t off)
{
    const unsigned char *p = data;
    const uint64_t base = wsync_digest_base_key(off);
    size_t nwords = len / 8, i = 0;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

    /* Four independent sums keep both multipliers busy; the order of a sum
     * does not change it, so the result equals the one-accumulator form. */
    for (; i + 4 <= nwords; i += 4) {
        uint64_t w0, w1, w2, w3;
        memcpy(&w0, p + 8 * i, 8);
        memcpy(&w1, p + 8 * i + 8, 8);
        memcpy(&w2, p + 8 * i + 16, 8);
        memcpy(&w3, p + 8 * i + 24, 8);
        s0 += wsync_digest_word(w0, base + i * WSYNC_DIGEST_GOLDEN);
        s1 += wsync_digest_word(w1, base + (i + 1) * WSYNC_DIGEST_GOLDEN);
        s2 += wsync_digest_word(w2, base + (i + 2) * WSYNC_DIGEST_GOLDEN);
        s3 += wsync_digest_word(w3, base + (i + 3) * WSYNC_DIGEST_GOLDEN);
    }
    return s0 + s1 + s2 + s3 + wsync_digest_sum_from(p, len, i, base);
}

/* The fastest implementation this CPU runs, picked on first use. Racing
 * threads all pick the same one, so a relaxed store is enough. */
static wsync_digest_sum_fn pick_impl(void)
{
    static wsync_digest_sum_fn chosen;
    wsync_digest_sum_fn f = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (f == NULL) {
        f = wsync_digest_sum_avx512_fn();
        if (f == NULL)
            f = wsync_digest_sum_avx2_fn();
        if (f == NULL)
            f = wsync_digest_sum_scalar;
        __atomic_store_n(&chosen, f, __ATOMIC_RELAXED);
    }
    return f;
}

uint64_t wsync_digest_sum(const void *data, size_t len, uint64_t off)
{
    /* Below a few vectors the set-up costs more than it saves. */
    if (len < 256)
        return wsync_digest_sum_scalar(data, len, off);
    return pick_impl()(data, len, off);
}

uint64_t wsync_digest(const void *data, size_t len, uint64_t off)
{
    return wsync_digest_final(wsync_digest_sum(data, len, off), len, off);
}

void wsync_digest_hex(uint64_t digest, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)digest);
}

int wsync_digest_parse(const char *hex, uint64_t *out)
{
    uint64_t v = 0;
    int i;
    if (hex == NULL || strlen(hex) != 16)
        return -1;
    for (i = 0; i < 16; i++) {
        char c = hex[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return -1;
        v = (v << 4) | (uint64_t)d;
    }
    *out = v;
    return 0;
}

void wsync_fill_pattern(void *dst, size_t len, uint64_t off, uint64_t seed)
{
    unsigned char *p = dst;
    size_t i = 0;
    /* Byte-granular head until `off + i` is 8-aligned, then whole words. */
    while (i < len && (off + i) % 8 != 0) {
        uint64_t w = wsync_fmix64(((off + i) / 8) ^ seed);
        p[i] = (unsigned char)(w >> (8 * ((off + i) % 8)));
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = wsync_fmix64(((off + i) / 8) ^ seed);
        memcpy(p + i, &w, 8);
    }
    for (; i < len; i++) {
        uint64_t w = wsync_fmix64(((off + i) / 8) ^ seed);
        p[i] = (unsigned char)(w >> (8 * ((off + i) % 8)));
    }
}
