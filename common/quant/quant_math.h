/* quant_math.h: the arithmetic of one element and one scale (docs/FP8.md),
 * written once for the host (quant.c) and the CUDA kernel (quant_cuda.cu) so
 * both give the same bytes. Internal to common/quant. */
#ifndef WSYNC_COMMON_QUANT_MATH_H
#define WSYNC_COMMON_QUANT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define QM_FN static __host__ __device__ __forceinline__
#else
#define QM_FN static inline
#endif

QM_FN uint32_t qm_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t b;
    memcpy(&b, &x, sizeof(b));
    return b;
#endif
}

QM_FN float qm_float(uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    memcpy(&f, &b, sizeof(f));
    return f;
#endif
}

/* e4m3fn of a finite x: nearest, ties to even, saturated to +-448. */
QM_FN uint8_t qm_encode(float x)
{
    uint32_t b = qm_bits(x), r;
    uint8_t sign = (uint8_t)((b >> 24) & 0x80);
    float a = fabsf(x);
    if (a >= 448.0f)
        return sign | 0x7e;
    if (a < 0x1p-6f) /* subnormal: multiples of 2^-9; 8 * 2^-9 is the smallest normal, code 0x08 */
        return sign | (uint8_t)rintf(a * 0x1p9f);
    /* Normal: keep 3 of fp32's 23 mantissa bits, ties to even, then rebias
     * the exponent from 127 to 7; a carry into the exponent is the right
     * next value, and past 0x7e (448) saturates. */
    b &= 0x7fffffffu;
    r = (b + 0x7ffffu + ((b >> 20) & 1u)) >> 20;
    r -= (127u - 7u) << 3;
    return sign | (uint8_t)(r > 0x7eu ? 0x7eu : r);
}

/* The scale of a block whose max |x| is amax (finite, >= 0); form 1 is
 * UE8M0 (rounded up to a power of two). */
QM_FN float qm_scale(float amax, int ue8m0)
{
    float s;
    uint32_t b;
    if (amax == 0.0f)
        return 1.0f;
    s = amax / 448.0f;
    if (!ue8m0)
        return s;
    b = qm_bits(s);
    if (b >= 0x00800000u) /* normal: a mantissa above 1.0 rounds up to the next power of two */
        return qm_float((b & 0x7f800000u) + ((b & 0x007fffffu) ? 0x00800000u : 0u));
    /* subnormal: the highest set bit, doubled unless it is the only one */
    {
        uint32_t p = 1;
        while (p < b)
            p <<= 1;
        return qm_float(p);
    }
}

QM_FN float qm_bf16(uint16_t h)
{
    return qm_float((uint32_t)h << 16);
}

#endif
