/* digest_impl.h: private to the digest: the word loop shared by every
 * implementation, and the implementations themselves, so tests can check each
 * one the CPU supports against the definition in digest.h. */
#ifndef WSYNC_COMMON_DIGEST_IMPL_H
#define WSYNC_COMMON_DIGEST_IMPL_H

#include <string.h>

#include "common/digest/digest.h"

/* Sum of words [i, ceil(len/8)) of `p` (the last zero-padded), keyed from
 * `base`. Every implementation ends with this for its tail. */
static inline uint64_t wsync_digest_sum_from(const unsigned char *p, size_t len, size_t i, uint64_t base)
{
    size_t nwords = len / 8;
    uint64_t s = 0;
    for (; i < nwords; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        s += wsync_digest_word(w, base + i * WSYNC_DIGEST_GOLDEN);
    }
    if (len % 8) {
        uint64_t w = 0;
        memcpy(&w, p + 8 * nwords, len % 8);
        s += wsync_digest_word(w, base + nwords * WSYNC_DIGEST_GOLDEN);
    }
    return s;
}

typedef uint64_t (*wsync_digest_sum_fn)(const void *data, size_t len, uint64_t off);

/* Portable C; always available. */
uint64_t wsync_digest_sum_scalar(const void *data, size_t len, uint64_t off);
/* AVX2 (64-bit products from 32-bit ones) and AVX-512DQ (vpmullq). NULL when
 * the running CPU (or the compiler) lacks the instructions. */
wsync_digest_sum_fn wsync_digest_sum_avx2_fn(void);
wsync_digest_sum_fn wsync_digest_sum_avx512_fn(void);

#endif
