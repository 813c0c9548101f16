/* digest.c: CPU implementation of the wsync piece digest (see digest.h). */
#include "common/digest.h"

#include <stdio.h>
#include <string.h>

uint64_t wsync_digest_sum(const void *data, size_t len, uint64_t off)
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
    for (; i < nwords; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        s0 += wsync_digest_word(w, base + i * WSYNC_DIGEST_GOLDEN);
    }
    if (len % 8) {
        uint64_t w = 0;
        memcpy(&w, p + 8 * nwords, len % 8);
        s0 += wsync_digest_word(w, base + nwords * WSYNC_DIGEST_GOLDEN);
    }
    return s0 + s1 + s2 + s3;
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
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        v = (v << 4) | (uint64_t)d;
    }
    *out = v;
    return 0;
}
