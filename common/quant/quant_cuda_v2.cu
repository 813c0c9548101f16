// quant_cuda_v2.cu: the FP8 block quantization kernel's fast form (docs/FP8.md)
// for bf16 sources in 128 x 128 blocks with rows on 16-byte boundaries, edge
// blocks included. One thread block per block: 256 threads each read 8 rows x
// 8 columns once as 16-byte vectors and keep them in registers; the amax is an
// integer max over the bf16 magnitudes' bits (a warp reduce, then 8 values in
// shared memory), which also finds NaN and infinities (bits >= 0x7f80) without
// a per-element test; the quotient is qm_quot (a multiply and two FMAs, equal
// in code to the division, quant_math.h) and the code qm_encode_mag_lo, so the
// bytes are the host's. The old kernel (quant_cuda.cu) did a correctly rounded
// division, a rintf and two finiteness tests per element: 0.38 of the copy.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/quant/quant_cuda.h"
#include "common/quant/quant_math.h"

#define QT2 256

// The smallest flat index of a NaN or infinity in this thread's part (rare:
// only when the block's amax bits say there is one).
static __device__ void note_bad(const uint4 *v, uint64_t cols, uint64_t r0, uint64_t c, unsigned long long *bad)
{
    for (int k = 0; k < 8; k++) {
        const uint32_t w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
        for (int e = 0; e < 8; e++) {
            const uint32_t h = (w[e >> 1] >> (16 * (e & 1))) & 0x7fffu;
            if (h >= 0x7f80u)
                atomicMin(bad, (r0 + 16u * (uint64_t)k) * cols + c + (uint64_t)e);
        }
    }
}

// Four elements (two words) to four codes in one word, signs from the source.
template <bool QUOT> static __device__ __forceinline__ uint32_t quant4(uint32_t w0, uint32_t w1, float s, float r)
{
    const uint32_t m0 = w0 & 0x7fff7fffu, m1 = w1 & 0x7fff7fffu;
    const float x[4] = {qm_float(m0 << 16), qm_float(m0 & 0xffff0000u), qm_float(m1 << 16),
                        qm_float(m1 & 0xffff0000u)};
    uint32_t c[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        c[e] = qm_encode_mag_lo(QUOT ? qm_quot(x[e], s, r) : x[e] / s);
    // Byte e of the result is element e's code (the low byte of c[e]); its
    // sign is bit 7 of the bf16's high byte.
    const uint32_t codes = __byte_perm(__byte_perm(c[0], c[1], 0x0040), __byte_perm(c[2], c[3], 0x0040), 0x5410);
    return codes | (__byte_perm(w0, w1, 0x7531) & 0x80808080u);
}

template <bool QUOT>
static __device__ __forceinline__ void store_tile(const uint4 *v, uint8_t *q, uint64_t rows, uint64_t cols,
                                                  uint64_t r0, uint64_t c, bool cok, float s, float r)
{
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint64_t row = r0 + 16u * (uint64_t)k;
        if (cok && row < rows)
            *(uint2 *)(q + row * cols + c) = make_uint2(quant4<QUOT>(v[k].x, v[k].y, s, r),
                                                        quant4<QUOT>(v[k].z, v[k].w, s, r));
    }
}

__global__ void __launch_bounds__(QT2, 4)
    quant_kernel_v2(const uint16_t *src, uint64_t rows, uint64_t cols, int ue8m0, uint8_t *q, float *scale,
                    unsigned long long *bad)
{
    __shared__ uint32_t red[QT2 / 32];
    const uint64_t scols = (cols + 127) / 128, nblocks = (rows + 127) / 128 * scols;
    const int cv = threadIdx.x & 15, rr = threadIdx.x >> 4; // 16 threads x 8 columns per row, 16 rows a step
    for (uint64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const uint64_t r0 = b / scols * 128 + (uint64_t)rr, c = b % scols * 128 + (uint64_t)cv * 8;
        const bool cok = c < cols; // cols % 8 == 0: a vector is wholly in or out
        uint4 v[8];
        uint32_t m = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t row = r0 + 16u * (uint64_t)k;
            v[k] = cok && row < rows ? __ldg((const uint4 *)(src + row * cols + c)) : make_uint4(0, 0, 0, 0);
            m = __vmaxu2(m, __vmaxu2(v[k].x & 0x7fff7fffu, v[k].y & 0x7fff7fffu));
            m = __vmaxu2(m, __vmaxu2(v[k].z & 0x7fff7fffu, v[k].w & 0x7fff7fffu));
        }
        // Magnitude bits order as the values do; NaN and infinity sort above every finite.
        m = __reduce_max_sync(0xffffffffu, max(m & 0xffffu, m >> 16));
        if ((threadIdx.x & 31) == 0)
            red[threadIdx.x >> 5] = m;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < QT2 / 32; i++)
            m = max(m, red[i]);
        if (m >= 0x7f80u) {
            note_bad(v, cols, r0, c, bad); // the call refuses the tensor: nothing to write
        } else {
            const float amax = qm_bf16((uint16_t)m), s = qm_scale(amax, ue8m0), r = 1.0f / s;
            if (threadIdx.x == 0)
                scale[b] = s;
            if (amax >= QM_QUOT_MIN_AMAX)
                store_tile<true>(v, q, rows, cols, r0, c, cok, s, r);
            else
                store_tile<false>(v, q, rows, cols, r0, c, cok, s, r);
        }
        __syncthreads(); // red is reused by the next block
    }
}

extern "C" int wsync_cuda_fp8_quant_v2_async(const void *src, uint64_t rows, uint64_t cols, int ue8m0, uint8_t *q,
                                             float *scale, unsigned long long *bad_dev, void *stream)
{
    const uint64_t n = (rows + 127) / 128 * ((cols + 127) / 128);
    if (n == 0)
        return 0;
    const unsigned grid = n < 0x7fffffffu ? (unsigned)n : 0x7fffffffu;
    quant_kernel_v2<<<grid, QT2, 0, (cudaStream_t)stream>>>((const uint16_t *)src, rows, cols, ue8m0, q, scale,
                                                            bad_dev);
    return (int)cudaGetLastError();
}
