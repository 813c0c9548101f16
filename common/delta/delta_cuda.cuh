/* delta_cuda.cuh: what the delta kernels share (delta_cuda.cu,
 * delta_cuda_pass.cu, delta_cuda_stream.cu): element loads and stores at
 * any byte offset (the wire puts values at an odd offset where a bitmap of
 * n/8 bytes does not end on the width, so an unaligned element goes byte
 * by byte), the 16-byte compare of two versions, and the grid of resident
 * blocks. */
#ifndef WSYNC_COMMON_DELTA_CUDA_CUH
#define WSYNC_COMMON_DELTA_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/delta/delta_bits.h"
#include "common/delta/delta_cuda.h"

template <typename T> __device__ __forceinline__ T load_elem(const unsigned char *p)
{
    if (((uintptr_t)p & (sizeof(T) - 1)) == 0)
        return *(const T *)p;
    T v = 0;
    for (unsigned k = 0; k < sizeof(T); k++)
        v |= (T)p[k] << (8 * k);
    return v;
}

template <typename T> __device__ __forceinline__ void store_elem(unsigned char *p, T v)
{
    if (((uintptr_t)p & (sizeof(T) - 1)) == 0) {
        *(T *)p = v;
        return;
    }
    for (unsigned k = 0; k < sizeof(T); k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* The 16 bytes at byte `at` of p (len bytes in all): one streaming vector
 * load when whole, else the bytes before len and zeros (equal in both
 * versions, so never a change). */
__device__ __forceinline__ uint4 load_vec(const unsigned char *p, uint64_t at, uint64_t len)
{
    if (at + 16 <= len)
        return __ldcs((const uint4 *)(p + at));
    uint32_t r[4] = {0, 0, 0, 0};
#pragma unroll
    for (unsigned k = 0; k < 16; k++)
        if (at + k < len)
            r[k / 4] |= (uint32_t)p[at + k] << (8 * (k % 4));
    return make_uint4(r[0], r[1], r[2], r[3]);
}

/* Bit j set when element j (of 16/W) differs between a and b; bytes a
 * word at a time, branch-free (delta_bits.h: 47 PTX instructions fewer a
 * 16-byte load than a compare a byte; at width 2 the compiler's code for
 * the compare by halves is as short). */
template <unsigned W> __device__ __forceinline__ uint32_t diff_bits(uint4 a, uint4 b)
{
    const uint32_t x[4] = {a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w};
    if constexpr (W == 8) {
        return (uint32_t)((x[0] | x[1]) != 0) | (uint32_t)((x[2] | x[3]) != 0) << 1;
    } else if constexpr (W == 1) {
        return wsync_delta_nonzero_bytes(x[0]) | wsync_delta_nonzero_bytes(x[1]) << 4 |
               wsync_delta_nonzero_bytes(x[2]) << 8 | wsync_delta_nonzero_bytes(x[3]) << 12;
    } else {
        constexpr unsigned PER = 4 / W; /* elements per 32-bit word */
        constexpr uint32_t MASK = W == 4 ? 0xffffffffu : (1u << (8 * W % 32)) - 1;
        uint32_t m = 0;
#pragma unroll
        for (unsigned q = 0; q < 4; q++)
#pragma unroll
            for (unsigned j = 0; j < PER; j++)
                m |= (uint32_t)(((x[q] >> (8 * W * j)) & MASK) != 0) << (q * PER + j);
        return m;
    }
}

/* Element j (a run-time index below 16/W) of v, without indexing an array
 * (which would go through local memory). */
template <unsigned W> __device__ __forceinline__ unsigned long long elem(uint4 v, unsigned j)
{
    if constexpr (W == 8) {
        return j == 0 ? (v.x | (unsigned long long)v.y << 32) : (v.z | (unsigned long long)v.w << 32);
    } else {
        constexpr unsigned PER = 4 / W;
        constexpr uint32_t MASK = W == 4 ? 0xffffffffu : (1u << (8 * W % 32)) - 1;
        const unsigned q = j / PER, sh = (j % PER) * 8 * W;
        const uint32_t word = q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
        return (word >> (sh % 32)) & MASK;
    }
}

/* Index e as the k-th of a pairs form's indices of iw bytes (4 or 8; the
 * indices start the payload, so each is aligned). */
__device__ __forceinline__ void store_index(unsigned char *idx, unsigned iw, uint64_t k, uint64_t e)
{
    if (iw == 4)
        *(uint32_t *)(idx + k * 4) = (uint32_t)e;
    else
        *(unsigned long long *)(idx + k * 8) = e;
}

/* Bitmap word g of a byte bitmap of nbytes (the last word may be partial). */
__device__ __forceinline__ uint32_t bitmap_word(const unsigned char *bm, uint64_t nbytes, uint64_t g)
{
    uint64_t at = 4 * g;
    if (at + 4 <= nbytes && ((uintptr_t)(bm + at) & 3) == 0)
        return *(const uint32_t *)(bm + at);
    uint32_t v = 0;
    for (unsigned k = 0; k < 4 && at + k < nbytes; k++)
        v |= (uint32_t)bm[at + k] << (8 * k);
    return v;
}

/* Where tile (or chunk) b's values start after wsync_delta_cuda_scan_fast. */
__device__ __forceinline__ unsigned long long scanned_offset(const unsigned long long *offsets,
                                                             const unsigned long long *seg, uint64_t b)
{
    return offsets[b] + seg[b / WSYNC_DELTA_CUDA_SEG];
}

/* The sum of v over this lane and the lanes below it (a whole warp calls). */
__device__ __forceinline__ unsigned warp_inclusive(unsigned v)
{
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned off = 1; off < 32; off *= 2) {
        unsigned up = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off)
            v += up;
    }
    return v;
}

/* Resident blocks of kernel k (nt threads) on this device, at most
 * `units`: a grid of them takes the work by ticket or grid stride. Asked
 * once per kernel: *cache. */
static inline unsigned resident_grid(const void *k, unsigned nt, unsigned *cache, uint64_t units)
{
    if (*cache == 0) {
        int dev = 0, sms = 0, per = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, (int)nt, 0) != cudaSuccess || per < 1)
            sms = 132, per = 2;
        *cache = (unsigned)(sms * per);
    }
    return units < *cache ? (unsigned)units : *cache;
}

#endif
