// digest_cuda.cuh: the device side of the piece digest (digest.h) that the
// kernels of digest_cuda.cu and copy_digest_cuda.cu share: the word mix, a
// word from bytes at any alignment, and the block's sum added with one
// 64-bit atomic (the sum is order-free, so any order gives the CPU value).
#ifndef WSYNC_COMMON_DIGEST_CUDA_CUH
#define WSYNC_COMMON_DIGEST_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/digest/digest.h"

#define DIG_THREADS 256

// Little-endian word from `n` (1..8) bytes at any alignment, zero-padded.
static __device__ __forceinline__ uint64_t d_load_bytes(const unsigned char *p, int n)
{
    uint64_t w = 0;
    for (int b = 0; b < n; b++)
        w |= (uint64_t)p[b] << (8 * b);
    return w;
}

// Adds the block's sum of every thread's `s` into *out. Blocks of
// DIG_THREADS threads; every thread of the block calls it.
static __device__ __forceinline__ void d_block_add(uint64_t s, unsigned long long *out)
{
    __shared__ uint64_t warp_sums[DIG_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < DIG_THREADS / 32 ? warp_sums[threadIdx.x] : 0;
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0 && s != 0)
            atomicAdd(out, (unsigned long long)s);
    }
}

// d_block_add, then, with `count` (a device counter at 0 before the
// launch): the grid's last block to finish stores the total of *out into
// *hout (a word of mapped pinned host memory, or any device word) and puts
// *out and *count back to 0, so the next launch in stream order reuses them
// with no memset and the host reads the sum with no copy.
// d_block_add_out_of: the same where `nblocks` blocks (not the whole grid)
// add into *out.
static __device__ __forceinline__ void d_block_add_out_of(uint64_t s, unsigned long long *out, unsigned int *count,
                                                          unsigned long long *hout, unsigned int nblocks)
{
    d_block_add(s, out);
    if (count == NULL || threadIdx.x != 0)
        return;
    __threadfence(); // this block's add is visible before it is counted
    if (atomicAdd(count, 1u) == nblocks - 1) {
        __threadfence();
        *hout = atomicExch(out, 0ULL);
        *count = 0;
        __threadfence_system();
    }
}

static __device__ __forceinline__ void d_block_add_out(uint64_t s, unsigned long long *out, unsigned int *count,
                                                       unsigned long long *hout)
{
    d_block_add_out_of(s, out, count, hout, gridDim.x);
}

#define WSYNC_CUDA_MAX_DEVICES 64

// The current device's SM count, asked once per device and process (a
// kernel launched per put or per digest would pay the attribute call each
// time); 132 (an H200's) when it cannot be read.
static int wsync_cuda_sm_count(void)
{
    static int cached[WSYNC_CUDA_MAX_DEVICES];
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return 132;
    if (dev < WSYNC_CUDA_MAX_DEVICES && (sms = __atomic_load_n(&cached[dev], __ATOMIC_RELAXED)) > 0)
        return sms;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
        return 132;
    if (dev < WSYNC_CUDA_MAX_DEVICES)
        __atomic_store_n(&cached[dev], sms, __ATOMIC_RELAXED);
    return sms;
}

// Blocks of DIG_THREADS for `items` (one per thread), at most
// `blocks_per_sm` resident per SM (8: full occupancy), at least 1.
static int wsync_cuda_grid_for(uint64_t items, int blocks_per_sm)
{
    uint64_t want = (items + DIG_THREADS - 1) / DIG_THREADS;
    uint64_t cap = (uint64_t)wsync_cuda_sm_count() * (uint64_t)blocks_per_sm;
    if (want > cap)
        want = cap;
    return want ? (int)want : 1;
}

#endif
