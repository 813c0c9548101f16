// quant_cuda.cu: the FP8 block quantization kernel's first form (docs/FP8.md),
// and the launcher that picks it or the fast form (quant_cuda_v2.cu). One
// thread block per quantization block: its elements are read once into
// registers where the block is a whole 128 x 128 bf16 tile with rows on
// 16-byte boundaries (each of 256 threads holds 8 rows x 8 columns, read as
// 16-byte vectors, 16 threads per row so a warp reads two whole rows), the
// block's amax is reduced through shared memory, and the same registers are
// scaled and written as 8-byte vectors. Any other block (edges, fp32
// sources, other block shapes) takes the general path, which reads the
// block twice. Both use quant_math.h, the host's arithmetic, so the bytes
// equal wsync_fp8_quantize_host's.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/quant/quant_cuda.h"
#include "common/quant/quant_math.h"

#define QT 256

static __device__ __forceinline__ float block_max(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < QT / 32 ? red[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1)
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (threadIdx.x == 0)
            red[0] = v;
    }
    __syncthreads();
    return red[0];
}

static __device__ __forceinline__ void note_bad(unsigned long long *bad, float a, unsigned long long at)
{
    if (!isfinite(a))
        atomicMin(bad, at);
}

// A whole 128 x 128 bf16 tile starting at (r0, c0), cols % 8 == 0.
static __device__ void tile_bf16(const uint16_t *src, uint64_t cols, uint64_t r0, uint64_t c0, int ue8m0,
                                 uint8_t *q, float *scale_out, unsigned long long *bad, float *red)
{
    const int cv = threadIdx.x & 15, rr = threadIdx.x >> 4; // 16 threads x 8 columns per row, 16 rows per step
    uint4 v[8];
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        uint64_t r = r0 + (uint64_t)(rr + 16 * k);
        v[k] = *(const uint4 *)(src + r * cols + c0 + (uint64_t)cv * 8);
        const uint32_t w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float lo = fabsf(qm_bf16((uint16_t)(w[j] & 0xffff))), hi = fabsf(qm_bf16((uint16_t)(w[j] >> 16)));
            if (!isfinite(lo) || !isfinite(hi)) // rare: the first bad element of the pair
                atomicMin(bad, r * cols + c0 + (uint64_t)cv * 8 + 2 * j + (isfinite(lo) ? 1 : 0));
            amax = fmaxf(amax, fmaxf(lo, hi));
        }
    }
    const float s = qm_scale(block_max(amax, red), ue8m0);
    if (threadIdx.x == 0)
        *scale_out = s;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        uint64_t r = r0 + (uint64_t)(rr + 16 * k);
        const uint32_t w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
        uint32_t out[2] = {0, 0};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t lo = qm_encode(qm_bf16((uint16_t)(w[j] & 0xffff)) / s);
            uint32_t hi = qm_encode(qm_bf16((uint16_t)(w[j] >> 16)) / s);
            out[j >> 1] |= (lo | hi << 8) << (16 * (j & 1));
        }
        *(uint2 *)(q + r * cols + c0 + (uint64_t)cv * 8) = make_uint2(out[0], out[1]);
    }
}

static __device__ __forceinline__ float load(const void *src, int fmt, uint64_t i)
{
    return fmt == 0 ? qm_bf16(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

// Any block: two passes over global memory.
static __device__ void tile_any(const void *src, int fmt, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t c0,
                                int br, int bc, int ue8m0, uint8_t *q, float *scale_out, unsigned long long *bad,
                                float *red)
{
    const uint64_t h = rows - r0 < (uint64_t)br ? rows - r0 : (uint64_t)br;
    const uint64_t w = cols - c0 < (uint64_t)bc ? cols - c0 : (uint64_t)bc;
    float amax = 0.0f;
    for (uint64_t i = threadIdx.x; i < h * w; i += QT) {
        uint64_t at = (r0 + i / w) * cols + c0 + i % w;
        float a = fabsf(load(src, fmt, at));
        note_bad(bad, a, at);
        amax = fmaxf(amax, a);
    }
    const float s = qm_scale(block_max(amax, red), ue8m0);
    if (threadIdx.x == 0)
        *scale_out = s;
    for (uint64_t i = threadIdx.x; i < h * w; i += QT) {
        uint64_t at = (r0 + i / w) * cols + c0 + i % w;
        q[at] = qm_encode(load(src, fmt, at) / s);
    }
}

__global__ void __launch_bounds__(QT)
    quant_kernel(const void *src, int fmt, uint64_t rows, uint64_t cols, int br, int bc, int ue8m0, uint8_t *q,
                 float *scale, unsigned long long *bad, int fast)
{
    __shared__ float red[QT / 32];
    const uint64_t scols = (cols + (uint64_t)bc - 1) / (uint64_t)bc;
    const uint64_t nblocks = (rows + (uint64_t)br - 1) / (uint64_t)br * scols;
    for (uint64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const uint64_t r0 = b / scols * (uint64_t)br, c0 = b % scols * (uint64_t)bc;
        if (fast && r0 + 128 <= rows && c0 + 128 <= cols)
            tile_bf16((const uint16_t *)src, cols, r0, c0, ue8m0, q, scale + b, bad, red);
        else
            tile_any(src, fmt, rows, cols, r0, c0, br, bc, ue8m0, q, scale + b, bad, red);
        __syncthreads(); // red is reused by the next block
    }
}

extern "C" int wsync_cuda_fp8_quant_async(const void *src, int fmt, uint64_t rows, uint64_t cols, int block_rows,
                                          int block_cols, int ue8m0, uint8_t *q, float *scale,
                                          unsigned long long *bad_dev, void *stream)
{
    const uint64_t n = (rows + (uint64_t)block_rows - 1) / (uint64_t)block_rows *
                       ((cols + (uint64_t)block_cols - 1) / (uint64_t)block_cols);
    // The fast path's vectors: bf16, 128 x 128, rows on 16-byte boundaries (q's on 8).
    const int fast = fmt == 0 && block_rows == 128 && block_cols == 128 && cols % 8 == 0 &&
                     (uintptr_t)src % 16 == 0 && (uintptr_t)q % 8 == 0;
    // The register-resident kernel (quant_cuda_v2.cu) where it applies (0.81-0.86
    // of the D2D copy on the H200, bit for bit the host's and torch's); this
    // file's kernel (0.34) for every other shape, or for every shape with
    // WSYNC_QUANT_GPU=v1. Read at each call so that gpu_quant_bench times both.
    const char *form = getenv("WSYNC_QUANT_GPU");
    if (n == 0)
        return 0;
    if (fast && !(form && strcmp(form, "v1") == 0))
        return wsync_cuda_fp8_quant_v2_async(src, rows, cols, ue8m0, q, scale, bad_dev, stream);
    unsigned grid = n < 0x7fffffffu ? (unsigned)n : 0x7fffffffu;
    quant_kernel<<<grid, QT, 0, (cudaStream_t)stream>>>(src, fmt, rows, cols, block_rows, block_cols, ue8m0, q,
                                                        scale, bad_dev, fast);
    return (int)cudaGetLastError();
}
