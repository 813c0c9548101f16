/* delta_cuda_merge.cu: the bitmap form's apply as a merge (delta_cuda.h).
 * The scatter (delta_cuda.cu) stores each changed element alone: where many
 * of dst's 32-byte sectors change (at 10% of bf16 elements, 81% of them)
 * each touched sector is a partial write, which the memory completes by
 * reading the sector first. Here a warp takes a tile of
 * WSYNC_DELTA_CUDA_TILE elements, BATCH 16-byte vectors a lane at a time:
 * each lane reads the vectors of its changed sectors whole, the warp loads
 * the batch's values (one run of the wire) together into shared memory,
 * and each lane merges its new values in registers and writes its sectors
 * whole; a sector with no change is neither read nor written. The traffic
 * is at most a copy of dst plus the wire, where the scatter's grows with
 * the sectors touched; below a few changes a sector the scatter moves less
 * (delta_gpu.c picks). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/delta/delta_cuda.cuh"
#include "common/delta/delta_cuda.h"

#define NT 256
#define BATCH 4 /* 16-byte vectors of dst a lane reads before it writes */

template <typename T>
__global__ void __launch_bounds__(NT)
    merge_bitmap_kernel(unsigned char *dst, uint64_t n, const unsigned char *bm, const unsigned long long *offsets,
                        const unsigned long long *seg, const unsigned char *vals, const unsigned long long *total,
                        const unsigned *bad, uint64_t expect)
{
    constexpr unsigned W = sizeof(T), E = 16 / W, STEPS = WSYNC_DELTA_CUDA_TILE / E / 32;
    constexpr uint32_t EMASK = (uint32_t)((1ull << E) - 1);
    static_assert(STEPS % BATCH == 0 && WSYNC_DELTA_CUDA_TILE == 64 * 32,
                  "a tile: 64 bitmap words, whole batches");
    if (total != NULL && (*total != expect || *bad != 0))
        return; /* a wire its checks refused: dst stays the base */
    const unsigned lane = threadIdx.x & 31;
    const uint64_t len = n * W, nbytes = (n + 7) / 8, ngroups = (n + 31) / 32;
    const uint64_t nblk = (n + WSYNC_DELTA_CUDA_TILE - 1) / WSYNC_DELTA_CUDA_TILE;
    const uint64_t warps = (uint64_t)gridDim.x * (NT / 32);
    __shared__ uint4 held[NT / 32][BATCH * 32]; /* a batch's values: at most its 16-byte vectors' elements */
    for (uint64_t b = ((uint64_t)blockIdx.x * NT + threadIdx.x) / 32; b < nblk; b += warps) {
        const uint64_t g0 = b * 64; /* the tile's 64 words, two a lane */
        const uint32_t w0 = g0 + lane < ngroups ? bitmap_word(bm, nbytes, g0 + lane) : 0;
        const uint32_t w1 = g0 + 32 + lane < ngroups ? bitmap_word(bm, nbytes, g0 + 32 + lane) : 0;
        unsigned long long run = scanned_offset(offsets, seg, b);
        for (unsigned s0 = 0; s0 < STEPS; s0 += BATCH) {
            uint32_t m[BATCH];
            bool dirty[BATCH];
            uint4 d[BATCH];
            unsigned long long at[BATCH];
            const unsigned long long r0 = run;
#pragma unroll
            for (unsigned u = 0; u < BATCH; u++) { /* the lane's bits, its changed sectors' loads, its values' place */
                const unsigned k = ((s0 + u) * 32 + lane) * E / 32;
                const uint32_t lo = __shfl_sync(0xffffffffu, w0, k % 32), hi = __shfl_sync(0xffffffffu, w1, k % 32);
                const uint64_t v = (b * STEPS + s0 + u) * 32 + lane; /* the lane's vector of dst */
                m[u] = ((k < 32 ? lo : hi) >> (lane * E % 32)) & EMASK;
                dirty[u] = (m[u] | __shfl_xor_sync(0xffffffffu, m[u], 1)) != 0; /* its sector (two lanes) */
                if (dirty[u] && (v + 1) * 16 <= len)
                    d[u] = *(const uint4 *)(dst + v * 16);
                const unsigned cnt = __popc(m[u]), incl = warp_inclusive(cnt);
                at[u] = run + incl - cnt - r0;
                run += __shfl_sync(0xffffffffu, incl, 31);
            }
            /* the batch's values, one run of the wire, loaded together */
            T *sv = (T *)held[threadIdx.x / 32];
#pragma unroll 4
            for (unsigned q = lane; q < run - r0; q += 32)
                sv[q] = load_elem<T>(vals + (r0 + q) * W);
            __syncwarp();
#pragma unroll
            for (unsigned u = 0; u < BATCH; u++) {
                const uint64_t v = (b * STEPS + s0 + u) * 32 + lane;
                if (!dirty[u])
                    continue;
                if ((v + 1) * 16 <= len) {
                    for (uint32_t r = m[u]; r != 0; r &= r - 1)
                        set_elem<W>(d[u], __ffs(r) - 1, sv[at[u]++]);
                    *(uint4 *)(dst + v * 16) = d[u];
                } else { /* the piece's last, partial vector: by element */
                    for (uint32_t r = m[u]; r != 0; r &= r - 1)
                        store_elem<T>(dst + (v * E + __ffs(r) - 1) * W, sv[at[u]++]);
                }
            }
            __syncwarp(); /* sv is read before the next batch fills it */
        }
    }
}

extern "C" int wsync_delta_cuda_merge_bitmap(unsigned char *dst, uint64_t n, unsigned w, const unsigned char *bitmap,
                                             const unsigned long long *offsets, const unsigned long long *seg,
                                             const unsigned char *vals, const unsigned long long *total,
                                             const unsigned *bad, uint64_t expect, void *stream)
{
    static unsigned res[4];
    const uint64_t nblk = wsync_delta_cuda_blocks(n);
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    if ((uintptr_t)dst % 16 != 0 || seg == NULL)
        return (int)cudaErrorInvalidValue;
#define L(T, r)                                                                                                     \
    merge_bitmap_kernel<T>                                                                                          \
        <<<resident_grid((const void *)merge_bitmap_kernel<T>, NT, &res[r], (nblk + 7) / 8), NT, 0, s>>>(dst, n,    \
                                                                                                         bitmap,    \
                                                                                                         offsets,   \
                                                                                                         seg, vals, \
                                                                                                         total,     \
                                                                                                         bad,       \
                                                                                                         expect)
    switch (w) {
    case 1: L(uint8_t, 0); break;
    case 2: L(uint16_t, 1); break;
    case 4: L(uint32_t, 2); break;
    case 8: L(unsigned long long, 3); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef L
    return (int)cudaGetLastError();
}
