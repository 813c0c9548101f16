// quant_cuda_parts.cu: the block maxima and the codes of many band parts in
// one launch each (quant.h, wsync_fp8_parts_amax_cuda and
// wsync_fp8_parts_quantize_cuda; docs/FP8.md, "Across trainer ranks"). One
// thread block per (part, block column): it walks the part's elements of
// that block column row by row (a row's stretch is contiguous, so a warp
// reads it coalesced), reduces their maxima in shared memory, and raises the
// part's maximum for that column (each (part, column) has its own slot, so
// no atomics); the codes use the whole band's maxima the caller merged. The
// arithmetic is quant_math.h's, the host's: the bytes equal
// wsync_fp8_part_quantize_host's.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/quant/quant_cuda.h"
#include "common/quant/quant_math.h"

#define PT 256

struct part_dev {
    const void *src;
    uint64_t e0, n, cols, amax_at;
    uint8_t *q;
    float *scale;
    int fmt, bc, ue8m0;
};

static __device__ __forceinline__ float load_at(const void *src, int fmt, uint64_t i)
{
    return fmt == 0 ? qm_bf16(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

// The part and block column of thread block b: first[p] is part p's first
// thread block (one per block column), nparts entries, increasing.
static __device__ __forceinline__ uint32_t part_of(const uint64_t *first, uint32_t nparts, uint64_t b)
{
    uint32_t lo = 0, hi = nparts - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Calls f(i) for every element i (counted from the part's first) of block
// column kc: rows r0..r1 of the band, columns [c0, c1) of each, inside
// [e0, e0 + n).
template <typename F> static __device__ __forceinline__ void each_elem(const part_dev &p, uint64_t kc, F f)
{
    const uint64_t c0 = kc * (uint64_t)p.bc, c1 = c0 + (uint64_t)p.bc < p.cols ? c0 + p.bc : p.cols;
    const uint64_t w = c1 - c0, r0 = p.e0 / p.cols, r1 = (p.e0 + p.n - 1) / p.cols;
    for (uint64_t j = threadIdx.x; j < (r1 - r0 + 1) * w; j += PT) {
        const uint64_t f_at = (r0 + j / w) * p.cols + c0 + j % w;
        if (f_at >= p.e0 && f_at < p.e0 + p.n)
            f(f_at - p.e0);
    }
}

static __global__ void parts_amax_kernel(const part_dev *parts, const uint64_t *first, uint32_t nparts,
                                         float *amax, unsigned long long *bad)
{
    __shared__ float red[PT / 32];
    const uint32_t pi = part_of(first, nparts, blockIdx.x);
    const part_dev p = parts[pi];
    const uint64_t kc = blockIdx.x - first[pi];
    float m = 0.0f;
    each_elem(p, kc, [&](uint64_t i) {
        const float a = fabsf(load_at(p.src, p.fmt, i));
        if (!isfinite(a))
            atomicMin(bad, ((unsigned long long)pi << 40) | i);
        else
            m = fmaxf(m, a);
    });
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < PT / 32; k++)
            m = fmaxf(m, red[k]);
        if (m > amax[p.amax_at + kc])
            amax[p.amax_at + kc] = m;
    }
}

static __global__ void parts_quant_kernel(const part_dev *parts, const uint64_t *first, uint32_t nparts,
                                          const float *amax)
{
    const uint32_t pi = part_of(first, nparts, blockIdx.x);
    const part_dev p = parts[pi];
    const uint64_t kc = blockIdx.x - first[pi];
    const float s = qm_scale(amax[p.amax_at + kc], p.ue8m0);
    if (threadIdx.x == 0 && p.scale != NULL)
        p.scale[kc] = s;
    each_elem(p, kc, [&](uint64_t i) {
        const float x = load_at(p.src, p.fmt, i), y = __fdiv_rn(x, s);
        p.q[i] = (uint8_t)(((qm_bits(x) >> 24) & 0x80u) | (qm_encode_mag_lo(fabsf(y)) & 0xffu));
    });
}

extern "C" int wsync_cuda_fp8_parts_async(int quantize, const void *parts_dev, const uint64_t *first_dev,
                                          uint32_t nparts, uint64_t nblocks, float *amax_dev,
                                          unsigned long long *bad_dev, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const part_dev *pd = (const part_dev *)parts_dev;
    if (nparts == 0 || nblocks == 0)
        return 0;
    if (nblocks > 0x7fffffffu)
        return (int)cudaErrorInvalidValue;
    if (quantize)
        parts_quant_kernel<<<(unsigned)nblocks, PT, 0, s>>>(pd, first_dev, nparts, amax_dev);
    else
        parts_amax_kernel<<<(unsigned)nblocks, PT, 0, s>>>(pd, first_dev, nparts, amax_dev, bad_dev);
    return (int)cudaGetLastError();
}

extern "C" size_t wsync_cuda_fp8_part_desc_size(void)
{
    return sizeof(part_dev);
}

extern "C" void wsync_cuda_fp8_part_desc_set(void *descs, size_t i, const void *src, uint64_t e0, uint64_t n,
                                             uint64_t cols, uint64_t amax_at, uint8_t *q, float *scale, int fmt,
                                             int bc, int ue8m0)
{
    ((part_dev *)descs)[i] = part_dev{src, e0, n, cols, amax_at, q, scale, fmt, bc, ue8m0};
}
