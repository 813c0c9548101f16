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

/* The e4m3fn code of a finite a >= 0 in the low byte (the bits above it are
 * not defined: the GPU kernel packs low bytes with byte permutes): nearest,
 * ties to even, saturated to 448 (0x7e). Branch-free so the kernel computes
 * it for every element without diverging; checked equal, over every finite
 * float, to the form with a rintf for the subnormals and a compare against
 * 448. */
QM_FN uint32_t qm_encode_mag_lo(float a)
{
    uint32_t b = qm_bits(a), r, sub, lt;
    /* Subnormal codes are multiples of 2^-9: a * 2^9 (exact) plus 2^23, whose
     * ulp is 1, rounds to the integer once, ties to even; the low byte of the
     * sum's bits is that integer (8 is the smallest normal's code, 0x08). */
    sub = qm_bits(a * 0x1p9f + 0x1p23f);
    /* Normal: keep 3 of fp32's 23 mantissa bits, ties to even, rebias the
     * exponent from 127 to 7; a carry into the exponent is the right next
     * value, and past 0x7e (448) saturates. */
    r = (b + 0x7ffffu + ((b >> 20) & 1u) - ((127u - 7u) << 23)) >> 20;
    r = r > 0x7eu ? 0x7eu : r;
    lt = 0u - (uint32_t)(b < 0x3c800000u); /* a < 2^-6, as a mask: the host's loops vectorize it */
    return (sub & lt) | (r & ~lt);
}

QM_FN uint32_t qm_encode_mag(float a)
{
    return qm_encode_mag_lo(a) & 0xffu;
}

/* e4m3fn of a finite x: |x|'s code with x's sign. */
QM_FN uint8_t qm_encode(float x)
{
    return (uint8_t)(((qm_bits(x) >> 24) & 0x80u) | qm_encode_mag(fabsf(x)));
}

/* x / s where r = 1 / s, both correctly rounded, as the GPU kernel computes
 * it: one multiply and two fused corrections instead of a division. Its
 * e4m3fn code equals qm_encode_mag(x / s) for every bf16 x with |x| <= amax
 * and s = qm_scale(amax, either form), for every finite bf16 amax >= 2^-100
 * (checked exhaustively, 5.3e8 pairs per form; below that the residual can
 * underflow, and the kernel divides). */
#define QM_QUOT_MIN_AMAX 0x1p-100f
QM_FN float qm_quot(float x, float s, float r)
{
#ifdef __CUDA_ARCH__
    float y = __fmul_rn(x, r);
    return __fmaf_rn(__fmaf_rn(-y, s, x), r, y);
#else
    float y = x * r;
    return fmaf(fmaf(-y, s, x), r, y);
#endif
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
