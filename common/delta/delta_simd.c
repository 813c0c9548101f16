/* delta_simd.c: the delta passes with AVX2. The encode pass is bound by
 * reading base and next once: a compare per 32 bytes and one movemask give
 * 32 elements' bits, and only set bits cost a store (2-4% of bf16 elements
 * per RL step). The apply passes gain hardware popcount and tzcnt. */
#include "common/delta/delta_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <pthread.h>

#define AVX2_TARGET __attribute__((target("avx2,popcnt,bmi,bmi2")))

AVX2_TARGET static inline __m256i load(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Bits of 32 elements that differ, for each width. */
AVX2_TARGET static inline __attribute__((always_inline)) uint32_t mask32_avx2(const unsigned char *a,
                                                                              const unsigned char *b, unsigned w)
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

/* Left-packing: a set-bit mask of the elements in 16 bytes (8 for width 1)
 * indexes a shuffle that moves those elements to the front; the whole 16
 * bytes are stored and the count advances by the popcount, so no branch
 * depends on the data (at 2% changed half the 32-element groups hold one,
 * a coin toss for a branch). Stores stay inside the group's own span of the
 * values (at most as many values as elements so far), so no slack is needed. */
static unsigned char lut1[256][16], lut2[256][16], lut4[16][16], lut8[4][16];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_fill(unsigned char (*lut)[16], unsigned entries, unsigned w)
{
    for (unsigned m = 0; m < entries; m++) {
        unsigned o = 0;
        memset(lut[m], 0x80, 16);
        for (unsigned b = 0; b < 16 / (w == 1 ? 2 : w); b++)
            if (m >> b & 1)
                for (unsigned k = 0; k < w; k++)
                    lut[m][o++] = (unsigned char)(b * w + k);
    }
}

static void lut_init(void)
{
    lut_fill(lut1, 256, 1);
    lut_fill(lut2, 256, 2);
    lut_fill(lut4, 16, 4);
    lut_fill(lut8, 4, 8);
}

AVX2_TARGET static inline __attribute__((always_inline)) uint64_t
extract_avx2(const unsigned char *src, uint32_t m, unsigned w, unsigned char *vals, uint64_t c)
{
    if (w == 1) {
        for (unsigned k = 0; k < 4; k++, m >>= 8) {
            __m128i v = _mm_loadl_epi64((const __m128i *)(src + 8 * k));
            v = _mm_shuffle_epi8(v, _mm_loadu_si128((const __m128i *)lut1[m & 0xff]));
            _mm_storel_epi64((__m128i *)(vals + c), v);
            c += (uint64_t)__builtin_popcount(m & 0xff);
        }
        return c;
    }
    /* 16 bytes hold 16/w elements: mask bits per chunk, and the table. */
    const unsigned per = 16 / w, bits = (1u << per) - 1;
    const unsigned char(*lut)[16] = w == 2 ? lut2 : w == 4 ? lut4 : lut8;
    for (unsigned k = 0; k < 32 / per; k++, m >>= per) {
        __m128i v = _mm_loadu_si128((const __m128i *)(src + 16 * k));
        v = _mm_shuffle_epi8(v, _mm_loadu_si128((const __m128i *)lut[m & bits]));
        _mm_storeu_si128((__m128i *)(vals + c * w), v);
        c += (uint64_t)__builtin_popcount(m & bits);
    }
    return c;
}

/* Inlined once per width, so the compare and the value copy are one path. */
AVX2_TARGET static inline __attribute__((always_inline)) uint64_t pass_avx2_w(const unsigned char *base,
                                                                              const unsigned char *next, uint64_t n,
                                                                              unsigned w, unsigned char *bitmap,
                                                                              unsigned char *vals)
{
    WSYNC_DELTA_PASS_BODY(mask32_avx2, extract_avx2);
}

AVX2_TARGET static uint64_t pass_avx2(const unsigned char *base, const unsigned char *next, uint64_t n, unsigned w,
                                      unsigned char *bitmap, unsigned char *vals)
{
    switch (w) {
    case 1: return pass_avx2_w(base, next, n, 1, bitmap, vals);
    case 2: return pass_avx2_w(base, next, n, 2, bitmap, vals);
    case 4: return pass_avx2_w(base, next, n, 4, bitmap, vals);
    default: return pass_avx2_w(base, next, n, 8, bitmap, vals);
    }
}

AVX2_TARGET static uint64_t popcount_avx2(const unsigned char *bitmap, uint64_t n)
{
    WSYNC_DELTA_POPCOUNT_BODY;
}

AVX2_TARGET static inline __attribute__((always_inline)) void
scatter_avx2_w(unsigned char *dst, const unsigned char *bitmap, uint64_t n, unsigned w,
               const unsigned char *vals){WSYNC_DELTA_SCATTER_BODY}

AVX2_TARGET static void scatter_avx2(unsigned char *dst, const unsigned char *bitmap, uint64_t n, unsigned w,
                                     const unsigned char *vals)
{
    switch (w) {
    case 1: scatter_avx2_w(dst, bitmap, n, 1, vals); break;
    case 2: scatter_avx2_w(dst, bitmap, n, 2, vals); break;
    case 4: scatter_avx2_w(dst, bitmap, n, 4, vals); break;
    default: scatter_avx2_w(dst, bitmap, n, 8, vals); break;
    }
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
    pthread_once(&lut_once, lut_init);
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
