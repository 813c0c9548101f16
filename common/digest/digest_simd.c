/* digest_simd.c: the digest's word sum with AVX2 and AVX-512. The per-word
 * map needs two 64-bit multiplies; scalar code does one a cycle at best, so a
 * core tops out near 4 bytes a cycle. Vector lanes lift that well past memory
 * bandwidth. The sum is order-free, so lane order does not change the value. */
#include "common/digest/digest_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2")))
#define AVX512_TARGET __attribute__((target("avx512f,avx512dq")))

/* x * m mod 2^64 per lane from three 32x32->64 products (AVX2 has no vpmullq). */
AVX2_TARGET static inline __m256i mul64_avx2(__m256i x, __m256i mlo, __m256i mhi)
{
    __m256i lo = _mm256_mul_epu32(x, mlo);
    __m256i c1 = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), mlo);
    __m256i c2 = _mm256_mul_epu32(x, mhi);
    return _mm256_add_epi64(lo, _mm256_slli_epi64(_mm256_add_epi64(c1, c2), 32));
}

AVX2_TARGET static inline __m256i word_avx2(__m256i w, __m256i key, __m256i m1lo, __m256i m1hi, __m256i m2lo,
                                            __m256i m2hi)
{
    __m256i x = _mm256_xor_si256(w, key);
    x = mul64_avx2(x, m1lo, m1hi);
    x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
    x = mul64_avx2(x, m2lo, m2hi);
    return _mm256_xor_si256(x, _mm256_srli_epi64(x, 29));
}

AVX2_TARGET static uint64_t sum_avx2(const void *data, size_t len, uint64_t off)
{
    const unsigned char *p = data;
    const uint64_t base = wsync_digest_base_key(off), G = WSYNC_DIGEST_GOLDEN;
    const __m256i m1lo = _mm256_set1_epi64x((long long)(WSYNC_DIGEST_M1 & 0xffffffffULL));
    const __m256i m1hi = _mm256_set1_epi64x((long long)(WSYNC_DIGEST_M1 >> 32));
    const __m256i m2lo = _mm256_set1_epi64x((long long)(WSYNC_DIGEST_M2 & 0xffffffffULL));
    const __m256i m2hi = _mm256_set1_epi64x((long long)(WSYNC_DIGEST_M2 >> 32));
    const __m256i step4 = _mm256_set1_epi64x((long long)(4 * G)), step8 = _mm256_set1_epi64x((long long)(8 * G));
    __m256i key = _mm256_set_epi64x((long long)(base + 3 * G), (long long)(base + 2 * G), (long long)(base + G),
                                    (long long)base);
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t nwords = len / 8, i = 0;
    uint64_t lanes[4];

    /* Two independent accumulators of 4 words each hide the multiply latency. */
    for (; i + 8 <= nwords; i += 8) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(p + 8 * i));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 8 * i + 32));
        a0 = _mm256_add_epi64(a0, word_avx2(w0, key, m1lo, m1hi, m2lo, m2hi));
        a1 = _mm256_add_epi64(a1, word_avx2(w1, _mm256_add_epi64(key, step4), m1lo, m1hi, m2lo, m2hi));
        key = _mm256_add_epi64(key, step8);
    }
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(a0, a1));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + wsync_digest_sum_from(p, len, i, base);
}

AVX512_TARGET static inline __m512i word_avx512(__m512i w, __m512i key, __m512i m1, __m512i m2)
{
    __m512i x = _mm512_xor_si512(w, key);
    x = _mm512_mullo_epi64(x, m1);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
    x = _mm512_mullo_epi64(x, m2);
    return _mm512_xor_si512(x, _mm512_srli_epi64(x, 29));
}

AVX512_TARGET static uint64_t sum_avx512(const void *data, size_t len, uint64_t off)
{
    const unsigned char *p = data;
    const uint64_t base = wsync_digest_base_key(off), G = WSYNC_DIGEST_GOLDEN;
    const __m512i m1 = _mm512_set1_epi64((long long)WSYNC_DIGEST_M1);
    const __m512i m2 = _mm512_set1_epi64((long long)WSYNC_DIGEST_M2);
    const __m512i step8 = _mm512_set1_epi64((long long)(8 * G)), step16 = _mm512_set1_epi64((long long)(16 * G));
    __m512i key = _mm512_set_epi64((long long)(base + 7 * G), (long long)(base + 6 * G), (long long)(base + 5 * G),
                                   (long long)(base + 4 * G), (long long)(base + 3 * G), (long long)(base + 2 * G),
                                   (long long)(base + G), (long long)base);
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    size_t nwords = len / 8, i = 0;

    for (; i + 16 <= nwords; i += 16) {
        __m512i w0 = _mm512_loadu_si512((const void *)(p + 8 * i));
        __m512i w1 = _mm512_loadu_si512((const void *)(p + 8 * i + 64));
        a0 = _mm512_add_epi64(a0, word_avx512(w0, key, m1, m2));
        a1 = _mm512_add_epi64(a1, word_avx512(w1, _mm512_add_epi64(key, step8), m1, m2));
        key = _mm512_add_epi64(key, step16);
    }
    {
        /* Sum the lanes as unsigned: GCC's _mm512_reduce_add_epi64 adds them
         * as signed long long, which overflows (undefined) for digest sums. */
        uint64_t lanes[8], sum = 0;
        int k;
        _mm512_storeu_si512((void *)lanes, _mm512_add_epi64(a0, a1));
        for (k = 0; k < 8; k++)
            sum += lanes[k];
        return sum + wsync_digest_sum_from(p, len, i, base);
    }
}

wsync_digest_sum_fn wsync_digest_sum_avx2_fn(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? sum_avx2 : NULL;
}

wsync_digest_sum_fn wsync_digest_sum_avx512_fn(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") ? sum_avx512 : NULL;
}

#else

wsync_digest_sum_fn wsync_digest_sum_avx2_fn(void)
{
    return NULL;
}

wsync_digest_sum_fn wsync_digest_sum_avx512_fn(void)
{
    return NULL;
}

#endif
