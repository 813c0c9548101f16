/* delta_simd.c: the delta passes with AVX2. The encode pass is bound by
 * reading base and next once: a compare per 32 bytes and one movemask give
 * 32 elements' bits, and only set bits cost a store (2-4% of bf16 elements
 * per RL step). The apply passes gain hardware popcount and tzcnt. */
#include "common/delta/delta_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2,popcnt,bmi,bmi2")))

AVX2_TARGET static inline __m256i load(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Bits of 32 elements that differ, for each width. */
AVX2_TARGET static inline uint32_t mask32_avx2(const unsigned char *a, const unsigned char *b, unsigned w)
{
    uint32_t eq;
    if (w == 2) {
        __m256i c0 = _mm256_cmpeq_epi16(load(a), load(b));
        __m256i c1 = _mm256_cmpeq_epi16(load(a + 32), load(b + 32));
        /* packs interleaves 128-bit lanes; the permute puts elements back in order. */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(c0, c1), 0xD8);
        eq = (uint32_t)_mm256_movemask_epi8(p);
    } else if (w == 1) {
        eq = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(load(a), load(b)));
    } else if (w == 4) {
        eq = 0;
        for (int k = 0; k < 4; k++) {
            __m256i c = _mm256_cmpeq_epi32(load(a + 32 * k), load(b + 32 * k));
            eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(c)) << (8 * k);
        }
    } else {
        eq = 0;
        for (int k = 0; k < 8; k++) {
            __m256i c = _mm256_cmpeq_epi64(load(a + 32 * k), load(b + 32 * k));
            eq |= (uint32_t)_mm256_movemask_pd(_mm256_castsi256_pd(c)) << (4 * k);
        }
    }
    return ~eq;
}

AVX2_TARGET static uint64_t pass_avx2(const unsigned char *base, const unsigned char *next, uint64_t n, unsigned w,
                                      unsigned char *bitmap, unsigned char *vals)
{
    WSYNC_DELTA_PASS_BODY(mask32_avx2);
}

AVX2_TARGET static uint64_t popcount_avx2(const unsigned char *bitmap, uint64_t n)
{
    WSYNC_DELTA_POPCOUNT_BODY;
}

AVX2_TARGET static void scatter_avx2(unsigned char *dst, const unsigned char *bitmap, uint64_t n, unsigned w,
                                     const unsigned char *vals)
{
    WSYNC_DELTA_SCATTER_BODY
}

static const wsync_delta_ops_t avx2_ops = {
    .name = "avx2",
    .pass = pass_avx2,
    .popcount = popcount_avx2,
    .scatter = scatter_avx2,
};

const wsync_delta_ops_t *wsync_delta_avx2_ops(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi") &&
                   __builtin_cpu_supports("bmi2")
               ? &avx2_ops
               : NULL;
}

#else

const wsync_delta_ops_t *wsync_delta_avx2_ops(void)
{
    return NULL;
}

#endif
