/* delta_cuda_pass.cu: the encoder's compare, count and gather in one pass
 * over both versions (delta_cuda.h, wsync_delta_cuda_encode_pass). The
 * earlier kernels compared, wrote the bitmap, scanned the counts in
 * further launches and then read next again for the changed values; here
 * each block takes a chunk of 16 or 32 KiB of each version by ticket,
 * compares it from 16-byte loads held in registers, counts its changed
 * elements with a block scan, learns the count before it by a decoupled
 * look-back over the earlier chunks' published counts (Merrill and
 * Garland's single-pass scan: a chunk publishes its own count, then its
 * inclusive prefix once it knows it), and writes the changed values and
 * indices from the registers. Tickets go out in order, so every chunk a
 * look-back waits for is held by a running block that publishes its count
 * before it waits on anything: no deadlock, whatever the grid. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "common/delta/delta_cuda.cuh"
#include "common/delta/delta_cuda.h"

#define ST_AGG (1ull << 62)    /* a chunk's status: its own count is known */
#define ST_PREFIX (2ull << 62) /* ... and the count of every element before it */
#define ST_VALUE (ST_AGG - 1)

static_assert(WSYNC_DELTA_CUDA_CHUNK == 256 * 4 * 16, "the smaller chunk: 256 threads x 4 loads x 16 bytes");

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v)
{
#pragma unroll
    for (unsigned off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* One warp: publish chunk ch's count `agg`, find the count of every
 * element before the chunk from the statuses of the 32 chunks before the
 * window's end (a lane each), walking back until one holds its prefix, and
 * publish the chunk's own prefix. Returns the count before the chunk. A
 * status is one 64-bit word (flag and value together), so no fence. */
__device__ unsigned long long look_back(unsigned long long *status, unsigned long long ch, unsigned long long agg)
{
    volatile unsigned long long *st = status;
    const unsigned lane = threadIdx.x & 31;
    unsigned long long before = 0;
    if (ch == 0) {
        if (lane == 0)
            st[0] = ST_PREFIX | agg;
        return 0;
    }
    if (lane == 0)
        st[ch] = ST_AGG | agg;
    for (long long end = (long long)ch - 1;; end -= 32) {
        const long long i = end - (long long)lane;
        unsigned long long s = ST_PREFIX; /* before chunk 0: a prefix of 0 */
        if (i >= 0)
            while (((s = st[i]) >> 62) == 0)
                __nanosleep(32);
        const unsigned pre = __ballot_sync(0xffffffffu, (s >> 62) == 2);
        unsigned long long v = s & ST_VALUE;
        if (pre != 0 && lane > (unsigned)(__ffs(pre) - 1)) /* only up to the nearest prefix */
            v = 0;
        before += warp_sum(v);
        if (pre != 0)
            break;
    }
    if (lane == 0)
        st[ch] = ST_PREFIX | (before + agg);
    return before;
}

/* Warp 0: the exclusive offsets of the block's S = U x warps (load, warp)
 * counts in sums[] (load-major: element order), each lane taking S/32 in a
 * row; their total goes through the look-back and sums[] becomes the
 * global offsets. Returns nothing: the block reads sums[] after a barrier. */
template <unsigned S>
__device__ __forceinline__ void block_offsets(unsigned long long *sums, unsigned long long *status,
                                              unsigned long long ch, unsigned long long *total, uint64_t nchunks)
{
    constexpr unsigned PER = S / 32;
    const unsigned lane = threadIdx.x & 31;
    unsigned long long v[PER], mine = 0, incl;
#pragma unroll
    for (unsigned k = 0; k < PER; k++) {
        v[k] = sums[lane * PER + k];
        mine += v[k];
    }
    incl = mine;
#pragma unroll
    for (unsigned off = 1; off < 32; off *= 2) {
        unsigned long long up = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off)
            incl += up;
    }
    const unsigned long long agg = __shfl_sync(0xffffffffu, incl, 31);
    unsigned long long run = look_back(status, ch, agg) + incl - mine;
    if (lane == 31 && ch == nchunks - 1)
        *total = run + mine;
#pragma unroll
    for (unsigned k = 0; k < PER; k++) {
        sums[lane * PER + k] = run;
        run += v[k];
    }
}

/* The changed elements of one thread's vector (bits m, its first element
 * e0) from position `at`: values into vals, indices into idx while they
 * stay below idx_fit (where the pairs form could still be chosen). */
template <typename T>
__device__ __forceinline__ void put_changed(uint4 b, uint32_t m, unsigned long long at, uint64_t e0,
                                            unsigned char *vals, unsigned char *idx, unsigned iw, uint64_t idx_fit)
{
    constexpr unsigned W = sizeof(T);
    while (m != 0) {
        const unsigned j = __ffs(m) - 1;
        m &= m - 1;
        store_elem<T>(vals + at * W, (T)elem<W>(b, j));
        if (at < idx_fit)
            store_index(idx, iw, at, e0 + j);
        at++;
    }
}

/* U 16-byte loads of each version per thread, NT threads: a chunk of
 * NT*U*16 bytes. words[g] = the changed mask of elements [32g, 32g+32);
 * state[0] the ticket, state[1] the total count, state[2..] the chunks'
 * statuses (all zero at launch). */
template <typename T, unsigned U, unsigned NT>
__global__ void __launch_bounds__(NT)
    encode_pass_kernel(const unsigned char *base, const unsigned char *next, uint64_t n, uint32_t *words,
                       unsigned long long *state, unsigned char *idx, unsigned iw, uint64_t idx_fit,
                       unsigned char *vals)
{
    constexpr unsigned W = sizeof(T), E = 16 / W, TPW = 32 / E, WARPS = NT / 32, S = U * WARPS;
    static_assert(S % 32 == 0, "whole lanes in the block scan");
    __shared__ unsigned long long sums[S];
    __shared__ unsigned long long next_ticket;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const uint64_t len = n * W, ngroups = (n + 31) / 32, nchunks = (len + NT * U * 16 - 1) / (NT * U * 16);
    if (threadIdx.x == 0)
        next_ticket = atomicAdd(&state[0], 1ull);
    __syncthreads();
    for (unsigned long long ch = next_ticket; ch < nchunks; ch = next_ticket) {
        const uint64_t v0 = ch * NT * U;
        uint4 a[U], b[U];
        uint32_t m[U];
        unsigned incl[U];
#pragma unroll
        for (unsigned u = 0; u < U; u++) { /* every load first: 2 x U x 16 bytes in flight */
            const uint64_t at = (v0 + u * NT + threadIdx.x) * 16;
            a[u] = load_vec(base, at, len);
            b[u] = load_vec(next, at, len);
        }
#pragma unroll
        for (unsigned u = 0; u < U; u++) {
            const uint64_t v = v0 + u * NT + threadIdx.x, g = v / TPW;
            m[u] = diff_bits<W>(a[u], b[u]);
            uint32_t word = m[u] << ((v % TPW) * E);
#pragma unroll
            for (unsigned off = 1; off < TPW; off *= 2)
                word |= __shfl_xor_sync(0xffffffffu, word, off);
            if (v % TPW == 0 && g < ngroups)
                words[g] = word;
            incl[u] = __popc(m[u]);
#pragma unroll
            for (unsigned off = 1; off < 32; off *= 2) {
                unsigned up = __shfl_up_sync(0xffffffffu, incl[u], off);
                if (lane >= off)
                    incl[u] += up;
            }
            if (lane == 31)
                sums[u * WARPS + warp] = incl[u];
        }
        __syncthreads();
        if (warp == 0) {
            block_offsets<S>(sums, state + 2, ch, state + 1, nchunks);
            if (lane == 0)
                next_ticket = atomicAdd(&state[0], 1ull);
        }
        __syncthreads();
#pragma unroll
        for (unsigned u = 0; u < U; u++)
            if (m[u] != 0)
                put_changed<T>(b[u], m[u], sums[u * WARPS + warp] + incl[u] - __popc(m[u]),
                               (v0 + u * NT + threadIdx.x) * E, vals, idx, iw, idx_fit);
        __syncthreads(); /* sums[] and next_ticket are read before the next chunk writes them */
    }
}

template <typename T, unsigned U, unsigned NT>
static int launch_pass(const void *base, const void *next, uint64_t n, uint32_t *words, unsigned long long *state,
                       unsigned char *idx, unsigned iw, uint64_t idx_fit, unsigned char *vals, cudaStream_t s)
{
    static unsigned res;
    const uint64_t chunks = (n * sizeof(T) + NT * U * 16 - 1) / (NT * U * 16);
    const unsigned char *b = (const unsigned char *)base, *x = (const unsigned char *)next;
    unsigned grid = resident_grid((const void *)encode_pass_kernel<T, U, NT>, NT, &res, chunks);
    encode_pass_kernel<T, U, NT><<<grid, NT, 0, s>>>(b, x, n, words, state, idx, iw, idx_fit, vals);
    return (int)cudaGetLastError();
}

extern "C" int wsync_delta_cuda_encode_pass(const void *base, const void *next, uint64_t n, unsigned w,
                                            unsigned chunk, uint32_t *words, unsigned long long *state,
                                            unsigned char *idx, unsigned iw, uint64_t idx_fit, unsigned char *vals,
                                            void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    if ((uintptr_t)base % 16 != 0 || (uintptr_t)next % 16 != 0 ||
        (chunk != WSYNC_DELTA_CUDA_CHUNK && chunk != 2 * WSYNC_DELTA_CUDA_CHUNK))
        return (int)cudaErrorInvalidValue;
#define L(T)                                                                                    \
    return chunk == WSYNC_DELTA_CUDA_CHUNK                                                      \
               ? launch_pass<T, 4, 256>(base, next, n, words, state, idx, iw, idx_fit, vals, s) \
               : launch_pass<T, 8, 256>(base, next, n, words, state, idx, iw, idx_fit, vals, s)
    switch (w) {
    case 1: L(uint8_t);
    case 2: L(uint16_t);
    case 4: L(uint32_t);
    case 8: L(unsigned long long);
    default: return (int)cudaErrorInvalidValue;
    }
#undef L
}

/* 32 bytes (a wire's header) into device memory, passed as the kernel's
 * argument: no copy from pageable host memory. */
struct bytes32 {
    unsigned char b[32];
};

__global__ void put_bytes_kernel(unsigned char *dst, bytes32 src)
{
    dst[threadIdx.x] = src.b[threadIdx.x];
}

extern "C" int wsync_delta_cuda_put_header(void *dst, const unsigned char *hdr, void *stream)
{
    bytes32 h;
    memcpy(h.b, hdr, sizeof(h.b));
    put_bytes_kernel<<<1, 32, 0, (cudaStream_t)stream>>>((unsigned char *)dst, h);
    return (int)cudaGetLastError();
}
