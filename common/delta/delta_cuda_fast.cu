/* delta_cuda_fast.cu: the second version of the compare and the scan
 * (delta_cuda.h, WSYNC_DELTA_GPU unset). The compare reads 16 bytes of each
 * version per thread per load (v1 read one element per lane: one byte per
 * lane at width 1) from a grid sized to the device, and writes the same
 * words and tile counts as v1. The scan runs on every SM: each block scans
 * 2048 tile counts and a one-block scan over those segments' sums follows,
 * whose result the gather and scatter add (v1 scanned every tile count in
 * one block, a pass that grew with the piece). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/delta/delta_cuda.h"

#define THREADS 256
#define UNROLL 4                            /* 16-byte loads of each version in flight per thread */
#define CHUNK_BYTES (THREADS * 16 * UNROLL) /* 16 KiB: 8, 4, 2 or 1 tiles for width 1, 2, 4, 8 */
#define SEG_PER_THREAD 8

static_assert(WSYNC_DELTA_CUDA_SEG == THREADS * SEG_PER_THREAD, "one scan block per segment");
static_assert(CHUNK_BYTES % (WSYNC_DELTA_CUDA_TILE * 8) == 0, "a chunk is whole tiles at width 8");

union vec16 {
    uint4 v;
    unsigned char b[16];
};

/* Bit j set when element j (of 16/sizeof(T)) of the two vectors differs. */
template <typename T> __device__ __forceinline__ uint32_t diff_bits(const vec16 &a, const vec16 &b)
{
    uint32_t m = 0;
#pragma unroll
    for (unsigned j = 0; j < 16 / sizeof(T); j++) {
        T x, y;
        memcpy(&x, a.b + j * sizeof(T), sizeof(T));
        memcpy(&y, b.b + j * sizeof(T), sizeof(T));
        m |= (uint32_t)(x != y) << j;
    }
    return m;
}

/* The 16 bytes at byte `at` of p (the piece is `len` bytes): one vector load
 * when whole, else the bytes before len and zeros. p is 16-byte aligned. */
__device__ __forceinline__ vec16 load16(const unsigned char *p, uint64_t at, uint64_t len)
{
    vec16 r;
    if (at + 16 <= len) {
        r.v = *(const uint4 *)(p + at);
        return r;
    }
    for (unsigned k = 0; k < 16; k++)
        r.b[k] = at + k < len ? p[at + k] : 0;
    return r;
}

/* Grid-stride over chunks of CHUNK_BYTES. Vector v (bytes [16v, 16v+16))
 * holds elements [v*E, v*E+E), E = 16/w, so word g is the OR of the bits of
 * the 2w consecutive lanes v = 2w*g ..; a warp's 32 vectors lie in one tile
 * (a tile is 128w vectors), so a warp sum is one tile's share. */
template <typename T>
__global__ void __launch_bounds__(THREADS) mask_fast_kernel(const unsigned char *base, const unsigned char *next,
                                                            uint64_t n, uint32_t *words, unsigned long long *counts)
{
    constexpr unsigned E = 16 / sizeof(T), TPW = 32 / E, VEC_PER_TILE = WSYNC_DELTA_CUDA_TILE / E;
    constexpr unsigned TILES = CHUNK_BYTES / 16 / VEC_PER_TILE;
    __shared__ unsigned tile_sum[TILES];
    const unsigned lane = threadIdx.x & 31;
    const uint64_t len = n * sizeof(T), ngroups = (n + 31) / 32;
    const uint64_t nblk = (n + WSYNC_DELTA_CUDA_TILE - 1) / WSYNC_DELTA_CUDA_TILE;
    const uint64_t nchunks = (len + CHUNK_BYTES - 1) / CHUNK_BYTES;
    for (uint64_t ch = blockIdx.x; ch < nchunks; ch += gridDim.x) {
        const uint64_t v0 = ch * (CHUNK_BYTES / 16);
        vec16 a[UNROLL], b[UNROLL];
        if (threadIdx.x < TILES)
            tile_sum[threadIdx.x] = 0;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) { /* every load first: 2 x UNROLL x 16 bytes in flight */
            uint64_t at = (v0 + (uint64_t)u * THREADS + threadIdx.x) * 16;
            a[u] = load16(base, at, len);
            b[u] = load16(next, at, len);
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            uint64_t v = v0 + (uint64_t)u * THREADS + threadIdx.x, g = v / TPW;
            uint32_t m = diff_bits<T>(a[u], b[u]) << ((v % TPW) * E);
#pragma unroll
            for (unsigned off = 1; off < TPW; off *= 2)
                m |= __shfl_xor_sync(0xffffffffu, m, off);
            unsigned pc = 0;
            if (v % TPW == 0 && g < ngroups) {
                words[g] = m;
                pc = __popc(m);
            }
#pragma unroll
            for (unsigned off = 16; off > 0; off /= 2)
                pc += __shfl_down_sync(0xffffffffu, pc, off);
            if (lane == 0 && pc != 0)
                atomicAdd(&tile_sum[(u * THREADS + threadIdx.x) / VEC_PER_TILE], pc);
        }
        __syncthreads();
        if (threadIdx.x < TILES && ch * TILES + threadIdx.x < nblk)
            counts[ch * TILES + threadIdx.x] = tile_sum[threadIdx.x];
        __syncthreads();
    }
}

/* The tile counts of a wire's bitmap (nbytes = ceil(n/8), 16-byte aligned):
 * a lane reads 16 bytes (4 words), 16 lanes one tile's 64 words; *bad = 1
 * when the last word has a bit at or past n. v1 read one word on 8 lanes. */
__global__ void __launch_bounds__(THREADS)
    bitmap_counts_fast_kernel(const unsigned char *bm, uint64_t n, unsigned long long *counts, unsigned *bad)
{
    const uint64_t nbytes = (n + 7) / 8, ngroups = (n + 31) / 32, nvec = (nbytes + 15) / 16;
    const uint64_t nblk = (n + WSYNC_DELTA_CUDA_TILE - 1) / WSYNC_DELTA_CUDA_TILE;
    for (uint64_t q0 = (uint64_t)blockIdx.x * THREADS; q0 < nvec; q0 += (uint64_t)gridDim.x * THREADS) {
        const uint64_t q = q0 + threadIdx.x;
        vec16 x = load16(bm, q * 16, nbytes);
        unsigned pc = 0;
#pragma unroll
        for (unsigned i = 0; i < 4; i++) {
            uint32_t word;
            memcpy(&word, x.b + 4 * i, 4);
            if (4 * q + i == ngroups - 1 && n % 32 != 0 && (word >> (n % 32)) != 0)
                atomicExch(bad, 1u);
            pc += __popc(word);
        }
#pragma unroll
        for (unsigned off = 8; off > 0; off /= 2) /* within each half warp: one tile */
            pc += __shfl_xor_sync(0xffffffffu, pc, off);
        if (q % 16 == 0 && q / 16 < nblk)
            counts[q / 16] = pc;
    }
}

/* The exclusive scan, in place and plus carry, of a[t .. t + 2048) (those
 * below n); returns their sum. The whole block calls; `coherent` reads
 * through L2 (what other blocks of this kernel wrote). */
__device__ unsigned long long scan_tile(unsigned long long *a, uint64_t t, uint64_t n, unsigned long long carry,
                                        bool coherent)
{
    __shared__ unsigned long long warp_tot[THREADS / 32 + 1];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const uint64_t first = t + (uint64_t)threadIdx.x * SEG_PER_THREAD;
    unsigned long long v[SEG_PER_THREAD], s = 0, incl;
#pragma unroll
    for (int k = 0; k < SEG_PER_THREAD; k++) {
        v[k] = first + k >= n ? 0 : coherent ? __ldcg(a + first + k) : a[first + k];
        s += v[k];
    }
    incl = s;
#pragma unroll
    for (unsigned off = 1; off < 32; off *= 2) {
        unsigned long long up = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off)
            incl += up;
    }
    if (lane == 31)
        warp_tot[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long run = 0;
        for (int k = 0; k < THREADS / 32; k++) {
            unsigned long long w = warp_tot[k];
            warp_tot[k] = run;
            run += w;
        }
        warp_tot[THREADS / 32] = run;
    }
    __syncthreads();
    unsigned long long run = carry + warp_tot[warp] + incl - s;
    const unsigned long long sum = warp_tot[THREADS / 32];
#pragma unroll
    for (int k = 0; k < SEG_PER_THREAD; k++) {
        if (first + k < n)
            a[first + k] = run;
        run += v[k];
    }
    __syncthreads(); /* warp_tot is read before a next call writes it */
    return sum;
}

/* Block b: exclusive scan of counts[2048b ..) in place; seg[b] = their sum.
 * With ticket != NULL (zeroed before) the last block to finish then scans
 * seg in place and writes the sum to *total: the scan in one launch. */
__global__ void __launch_bounds__(THREADS)
    seg_scan_kernel(unsigned long long *counts, uint64_t nblk, unsigned long long *seg, unsigned *ticket,
                    unsigned long long *total)
{
    __shared__ bool last;
    const unsigned long long sum = scan_tile(counts, (uint64_t)blockIdx.x * WSYNC_DELTA_CUDA_SEG, nblk, 0, false);
    if (threadIdx.x == 0)
        seg[blockIdx.x] = sum;
    if (ticket == NULL)
        return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(ticket, 1) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    unsigned long long carry = 0;
    for (uint64_t t = 0; t < gridDim.x; t += WSYNC_DELTA_CUDA_SEG)
        carry += scan_tile(seg, t, gridDim.x, carry, true);
    if (threadIdx.x == 0)
        *total = carry, *ticket = 0;
}

/* Blocks for `units` pieces of work: at most 8 a SM (a full SM at 256
 * threads), the rest by grid stride. */
static unsigned grid_for(uint64_t units)
{
    static int sms;
    if (sms == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
            sms = 132;
    }
    uint64_t cap = (uint64_t)sms * 8;
    return (unsigned)(units < cap ? (units ? units : 1) : cap);
}

template <typename T>
static void launch_mask(const void *base, const void *next, uint64_t n, uint32_t *words,
                        unsigned long long *counts, cudaStream_t s)
{
    uint64_t chunks = (n * sizeof(T) + CHUNK_BYTES - 1) / CHUNK_BYTES;
    mask_fast_kernel<T><<<grid_for(chunks), THREADS, 0, s>>>((const unsigned char *)base,
                                                             (const unsigned char *)next, n, words, counts);
}

extern "C" int wsync_delta_cuda_mask_fast(const void *base, const void *next, uint64_t n, unsigned w,
                                          uint32_t *words, unsigned long long *counts, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    if ((uintptr_t)base % 16 != 0 || (uintptr_t)next % 16 != 0) /* v1 reads any aligned element */
        return wsync_delta_cuda_mask(base, next, n, w, words, counts, stream);
    switch (w) {
    case 1: launch_mask<uint8_t>(base, next, n, words, counts, s); break;
    case 2: launch_mask<uint16_t>(base, next, n, words, counts, s); break;
    case 4: launch_mask<uint32_t>(base, next, n, words, counts, s); break;
    case 8: launch_mask<unsigned long long>(base, next, n, words, counts, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_scan_fast(unsigned long long *counts, uint64_t nblk, unsigned long long *seg,
                                          unsigned long long *total, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t nseg = wsync_delta_cuda_segs(nblk);
    if (nblk == 0)
        return wsync_delta_cuda_scan(counts, 0, total, stream);
    seg_scan_kernel<<<(unsigned)nseg, THREADS, 0, s>>>(counts, nblk, seg, NULL, NULL);
    int err = (int)cudaGetLastError();
    if (err != 0)
        return err;
    return wsync_delta_cuda_scan(seg, nseg, total, stream);
}

extern "C" int wsync_delta_cuda_scan_one(unsigned long long *counts, uint64_t nblk, unsigned long long *seg,
                                         unsigned long long *total, unsigned *ticket, void *stream)
{
    if (nblk == 0)
        return wsync_delta_cuda_scan(counts, 0, total, stream);
    seg_scan_kernel<<<(unsigned)wsync_delta_cuda_segs(nblk), THREADS, 0, (cudaStream_t)stream>>>(counts, nblk, seg,
                                                                                                 ticket, total);
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_bitmap_counts_fast(const unsigned char *bitmap, uint64_t n,
                                                   unsigned long long *counts, unsigned *bad, void *stream)
{
    uint64_t nvec = ((n + 7) / 8 + 15) / 16;
    if (n == 0)
        return 0;
    if ((uintptr_t)bitmap % 16 != 0)
        return wsync_delta_cuda_bitmap_counts(bitmap, n, counts, bad, stream);
    bitmap_counts_fast_kernel<<<grid_for((nvec + THREADS - 1) / THREADS), THREADS, 0, (cudaStream_t)stream>>>(bitmap,
                                                                                                              n,
                                                                                                              counts,
                                                                                                              bad);
    return (int)cudaGetLastError();
}
