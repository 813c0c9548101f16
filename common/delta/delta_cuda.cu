/* delta_cuda.cu: the delta kernels (delta_cuda.h). Elements are read with
 * their own width, so a group of 32 is one warp's coalesced load; values
 * and indices are written with byte stores where the wire puts them at an
 * odd offset (a bitmap of n/8 bytes need not end on the width). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/delta/delta_cuda.h"
#include "common/delta/delta_cuda.cuh"

#define THREADS 256
#define WARPS (THREADS / 32)
#define GROUPS_PER_BLOCK (WSYNC_DELTA_CUDA_TILE / 32)
#define GROUPS_PER_WARP (GROUPS_PER_BLOCK / WARPS)

/* Sum of a block's per-warp counts into counts[blockIdx.x]. */
__device__ __forceinline__ void block_count(unsigned long long mine, unsigned long long *counts)
{
    __shared__ unsigned long long warp_sum[WARPS];
    if ((threadIdx.x & 31) == 0)
        warp_sum[threadIdx.x / 32] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long s = 0;
        for (int k = 0; k < WARPS; k++)
            s += warp_sum[k];
        counts[blockIdx.x] = s;
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    mask_kernel(const T *base, const T *next, uint64_t n, uint32_t *words, unsigned long long *counts)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const uint64_t g0 = (uint64_t)blockIdx.x * GROUPS_PER_BLOCK + (uint64_t)warp * GROUPS_PER_WARP;
    const uint64_t ngroups = (n + 31) / 32;
    unsigned long long mine = 0;
    T a[GROUPS_PER_WARP], b[GROUPS_PER_WARP];
    /* All loads first, so each thread has GROUPS_PER_WARP pairs in flight. */
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) {
        uint64_t e = (g0 + k) * 32 + lane;
        a[k] = e < n ? base[e] : (T)0;
        b[k] = e < n ? next[e] : (T)0;
    }
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) {
        uint32_t m = __ballot_sync(0xffffffffu, a[k] != b[k]);
        if (lane == 0 && g0 + k < ngroups) {
            words[g0 + k] = m;
            mine += __popc(m);
        }
    }
    block_count(mine, counts);
}

__global__ void __launch_bounds__(THREADS)
    bitmap_counts_kernel(const unsigned char *bm, uint64_t n, unsigned long long *counts, unsigned *bad)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const uint64_t g0 = (uint64_t)blockIdx.x * GROUPS_PER_BLOCK + (uint64_t)warp * GROUPS_PER_WARP;
    const uint64_t ngroups = (n + 31) / 32, nbytes = (n + 7) / 8;
    unsigned long long mine = 0;
    if (lane < GROUPS_PER_WARP && g0 + lane < ngroups) {
        uint64_t g = g0 + lane;
        uint32_t m = bitmap_word(bm, nbytes, g);
        if (g == ngroups - 1 && n % 32 != 0 && (m >> (n % 32)) != 0)
            atomicExch(bad, 1u);
        mine = __popc(m);
    }
    for (int off = 16; off > 0; off /= 2)
        mine += __shfl_down_sync(0xffffffffu, mine, off);
    block_count(mine, counts);
}

/* One block: an exclusive scan of counts in pieces of THREADS x 8 with a
 * running carry. The count of blocks is the elements / 2048: a 64 MiB bf16
 * piece has 16384, one pass of a few microseconds. */
__global__ void __launch_bounds__(THREADS)
    scan_kernel(unsigned long long *counts, uint64_t nblk, unsigned long long *total)
{
    __shared__ unsigned long long part[THREADS];
    __shared__ unsigned long long carry;
    if (threadIdx.x == 0)
        carry = 0;
    __syncthreads();
    for (uint64_t start = 0; start < nblk; start += THREADS * 8) {
        unsigned long long v[8], s = 0;
        for (int k = 0; k < 8; k++) {
            uint64_t i = start + (uint64_t)threadIdx.x * 8 + k;
            v[k] = i < nblk ? counts[i] : 0;
            s += v[k];
        }
        part[threadIdx.x] = s;
        __syncthreads();
        for (int off = 1; off < THREADS; off *= 2) { /* inclusive Hillis-Steele over the threads' sums */
            unsigned long long add = threadIdx.x >= (unsigned)off ? part[threadIdx.x - off] : 0;
            __syncthreads();
            part[threadIdx.x] += add;
            __syncthreads();
        }
        unsigned long long run = carry + part[threadIdx.x] - s;
        for (int k = 0; k < 8; k++) {
            uint64_t i = start + (uint64_t)threadIdx.x * 8 + k;
            if (i < nblk)
                counts[i] = run;
            run += v[k];
        }
        __syncthreads();
        if (threadIdx.x == THREADS - 1)
            carry += part[THREADS - 1];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *total = carry;
}

/* Offsets of a block's groups: the block's offset plus the popcounts of the
 * groups before each (one warp's shuffle scan over the 64). */
__device__ __forceinline__ void group_offsets(const uint32_t *m, unsigned long long block_off,
                                              unsigned long long *goff)
{
    static_assert(GROUPS_PER_BLOCK == 64, "one warp, two groups a lane");
    if (threadIdx.x < 32) { /* one warp scans two groups a lane (v1 had one thread add all 64 in turn) */
        unsigned l = threadIdx.x, a = __popc(m[2 * l]), b = __popc(m[2 * l + 1]), incl = a + b;
        for (unsigned off = 1; off < 32; off *= 2) {
            unsigned up = __shfl_up_sync(0xffffffffu, incl, off);
            if (l >= off)
                incl += up;
        }
        goff[2 * l] = block_off + incl - a - b;
        goff[2 * l + 1] = block_off + incl - b;
    }
    __syncthreads();
}

/* v1's: one thread adds the 64 popcounts in turn. */
__device__ __forceinline__ void group_offsets_v1(const uint32_t *m, unsigned long long block_off,
                                                 unsigned long long *goff)
{
    __shared__ unsigned pc[GROUPS_PER_BLOCK];
    if (threadIdx.x < GROUPS_PER_BLOCK)
        pc[threadIdx.x] = __popc(m[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long s = block_off;
        for (int k = 0; k < GROUPS_PER_BLOCK; k++) {
            goff[k] = s;
            s += pc[k];
        }
    }
    __syncthreads();
}

/* This block's tile's offset: its scanned count, plus its segment's when
 * the scan ran in segments (seg != NULL). */
__device__ __forceinline__ unsigned long long tile_offset(const unsigned long long *offsets,
                                                          const unsigned long long *seg)
{
    return seg != NULL ? scanned_offset(offsets, seg, blockIdx.x) : offsets[blockIdx.x];
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    compact_kernel(const T *next, uint64_t n, const uint32_t *words, const unsigned long long *offsets,
                   const unsigned long long *seg, unsigned char *bitmap, unsigned char *idx, unsigned iw,
                   unsigned char *vals)
{
    __shared__ uint32_t m[GROUPS_PER_BLOCK];
    __shared__ unsigned long long goff[GROUPS_PER_BLOCK];
    const uint64_t ngroups = (n + 31) / 32, gb = (uint64_t)blockIdx.x * GROUPS_PER_BLOCK;
    const uint64_t nbytes = (n + 7) / 8;
    if (threadIdx.x < GROUPS_PER_BLOCK) {
        uint64_t g = gb + threadIdx.x;
        m[threadIdx.x] = g < ngroups ? words[g] : 0;
        if (bitmap != NULL && g < ngroups) /* the wire's bytes of this word (the last may be partial) */
            for (unsigned k = 0; k < 4 && 4 * g + k < nbytes; k++)
                bitmap[4 * g + k] = (unsigned char)(m[threadIdx.x] >> (8 * k));
    }
    __syncthreads();
    if (seg != NULL)
        group_offsets(m, tile_offset(offsets, seg), goff);
    else
        group_offsets_v1(m, offsets[blockIdx.x], goff);
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    T held[GROUPS_PER_WARP];
    /* New path: every load of the warp's groups before any store (the stores
     * go through unsigned char *, which may alias next, so the compiler
     * would not hoist the loads: one DRAM latency per group in turn). */
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) {
        unsigned j = warp * GROUPS_PER_WARP + k;
        held[k] = seg != NULL && (m[j] >> lane & 1) ? next[(gb + j) * 32 + lane] : (T)0;
    }
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) {
        unsigned j = warp * GROUPS_PER_WARP + k;
        uint32_t mk = m[j];
        if (!(mk >> lane & 1))
            continue;
        uint64_t e = (gb + j) * 32 + lane, at = goff[j] + __popc(mk & ((1u << lane) - 1));
        store_elem<T>(vals + at * sizeof(T), seg != NULL ? held[k] : next[e]);
        if (idx != NULL)
            store_index(idx, iw, at, e);
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    scatter_bitmap_kernel(T *dst, uint64_t n, const unsigned char *bm, const unsigned long long *offsets,
                          const unsigned long long *seg, const unsigned char *vals,
                          const unsigned long long *total, const unsigned *bad, uint64_t expect)
{
    __shared__ uint32_t m[GROUPS_PER_BLOCK];
    __shared__ unsigned long long goff[GROUPS_PER_BLOCK];
    const uint64_t ngroups = (n + 31) / 32, gb = (uint64_t)blockIdx.x * GROUPS_PER_BLOCK;
    if (total != NULL && (*total != expect || *bad != 0))
        return; /* a wire its checks refused: dst stays the base */
    if (threadIdx.x < GROUPS_PER_BLOCK) {
        uint64_t g = gb + threadIdx.x;
        m[threadIdx.x] = g < ngroups ? bitmap_word(bm, (n + 7) / 8, g) : 0;
    }
    __syncthreads();
    if (seg != NULL)
        group_offsets(m, tile_offset(offsets, seg), goff);
    else
        group_offsets_v1(m, offsets[blockIdx.x], goff);
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    T held[GROUPS_PER_WARP];
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) { /* new path: loads first, as in the gather */
        unsigned j = warp * GROUPS_PER_WARP + k;
        uint32_t mk = m[j];
        held[k] = seg != NULL && (mk >> lane & 1)
                      ? load_elem<T>(vals + (goff[j] + __popc(mk & ((1u << lane) - 1))) * sizeof(T))
                      : (T)0;
    }
#pragma unroll
    for (int k = 0; k < GROUPS_PER_WARP; k++) {
        unsigned j = warp * GROUPS_PER_WARP + k;
        uint32_t mk = m[j];
        if (!(mk >> lane & 1))
            continue;
        uint64_t e = (gb + j) * 32 + lane, at = goff[j] + __popc(mk & ((1u << lane) - 1));
        dst[e] = seg != NULL ? held[k] : load_elem<T>(vals + at * sizeof(T));
    }
}

__device__ __forceinline__ uint64_t index_at(const unsigned char *idx, unsigned iw, uint64_t k)
{
    return iw == 4 ? (uint64_t)load_elem<uint32_t>(idx + k * 4) : load_elem<uint64_t>(idx + k * 8);
}

__global__ void check_pairs_kernel(const unsigned char *idx, unsigned iw, uint64_t c, uint64_t n,
                                   unsigned long long *first_bad)
{
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < c; k += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t e = index_at(idx, iw, k);
        if (e >= n || (k > 0 && e <= index_at(idx, iw, k - 1)))
            atomicMin(first_bad, (unsigned long long)k);
    }
}

template <typename T>
__global__ void scatter_pairs_kernel(T *dst, const unsigned char *idx, unsigned iw, uint64_t c,
                                     const unsigned char *vals, const unsigned long long *first_bad)
{
    if (first_bad != NULL && *first_bad != ~0ull)
        return; /* a wire its checks refused: dst stays the base */
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < c; k += (uint64_t)gridDim.x * blockDim.x)
        dst[index_at(idx, iw, k)] = load_elem<T>(vals + k * sizeof(T));
}

/* --- launchers ----------------------------------------------------------- */

#define BY_WIDTH(w, LAUNCH)                     \
    switch (w) {                                \
    case 1: LAUNCH(uint8_t); break;             \
    case 2: LAUNCH(uint16_t); break;            \
    case 4: LAUNCH(uint32_t); break;            \
    case 8: LAUNCH(unsigned long long); break;  \
    default: return (int)cudaErrorInvalidValue; \
    }

static unsigned grid_of(uint64_t n)
{
    return (unsigned)wsync_delta_cuda_blocks(n);
}

extern "C" int wsync_delta_cuda_mask(const void *base, const void *next, uint64_t n, unsigned w, uint32_t *words,
                                     unsigned long long *counts, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
#define L(T) mask_kernel<T><<<grid_of(n), THREADS, 0, s>>>((const T *)base, (const T *)next, n, words, counts)
    BY_WIDTH(w, L)
#undef L
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_bitmap_counts(const unsigned char *bitmap, uint64_t n, unsigned long long *counts,
                                              unsigned *bad, void *stream)
{
    if (n == 0)
        return 0;
    bitmap_counts_kernel<<<grid_of(n), THREADS, 0, (cudaStream_t)stream>>>(bitmap, n, counts, bad);
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_scan(unsigned long long *counts, uint64_t nblk, unsigned long long *total,
                                     void *stream)
{
    scan_kernel<<<1, THREADS, 0, (cudaStream_t)stream>>>(counts, nblk, total);
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_compact(const void *next, uint64_t n, unsigned w, const uint32_t *words,
                                        const unsigned long long *offsets, const unsigned long long *seg,
                                        unsigned char *bitmap, unsigned char *idx, unsigned iw,
                                        unsigned char *vals, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
#define L(T)          \
    compact_kernel<T> \
        <<<grid_of(n), THREADS, 0, s>>>((const T *)next, n, words, offsets, seg, bitmap, idx, iw, vals)
    BY_WIDTH(w, L)
#undef L
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_scatter_bitmap(unsigned char *dst, uint64_t n, unsigned w,
                                               const unsigned char *bitmap, const unsigned long long *offsets,
                                               const unsigned long long *seg, const unsigned char *vals,
                                               const unsigned long long *total, const unsigned *bad,
                                               uint64_t expect, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
#define L(T)                 \
    scatter_bitmap_kernel<T> \
        <<<grid_of(n), THREADS, 0, s>>>((T *)dst, n, bitmap, offsets, seg, vals, total, bad, expect)
    BY_WIDTH(w, L)
#undef L
    return (int)cudaGetLastError();
}

static unsigned pairs_grid(uint64_t c)
{
    uint64_t b = (c + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

extern "C" int wsync_delta_cuda_check_pairs(const unsigned char *idx, unsigned iw, uint64_t c, uint64_t n,
                                            unsigned long long *first_bad, void *stream)
{
    if (c == 0)
        return 0;
    check_pairs_kernel<<<pairs_grid(c), THREADS, 0, (cudaStream_t)stream>>>(idx, iw, c, n, first_bad);
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_scatter_pairs(unsigned char *dst, unsigned w, const unsigned char *idx,
                                              unsigned iw, uint64_t c, const unsigned char *vals,
                                              const unsigned long long *first_bad, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (c == 0)
        return 0;
#define L(T) scatter_pairs_kernel<T><<<pairs_grid(c), THREADS, 0, s>>>((T *)dst, idx, iw, c, vals, first_bad)
    BY_WIDTH(w, L)
#undef L
    return (int)cudaGetLastError();
}
