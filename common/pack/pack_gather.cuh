/* pack_gather.cuh: one pack task's gather (pack_task.h), shared by the
 * pack kernel (pack_cuda.cu) and the pack that sums what it writes
 * (pack_digest_cuda.cu). The task's rows are read as one flat array of
 * V vectors, thread t of the block taking vectors t, t + blockDim.x, ...,
 * so consecutive threads read consecutive bytes of a row and write
 * consecutive bytes of the destination (coalesced both ways); UNROLL loads
 * are in flight per thread before the stores. The (row, column) of a vector
 * is stepped, not divided, per iteration (flat_walk.cuh). sum(v, i) is what vector i adds to
 * the returned sum (no_sum: nothing, and the compiler keeps no sum). */
#ifndef WSYNC_COMMON_PACK_GATHER_CUH
#define WSYNC_COMMON_PACK_GATHER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/base/flat_walk.cuh"
#include "common/pack/pack_cuda.h"

struct no_sum {
    template <typename V> __device__ __forceinline__ uint64_t operator()(const V &, uint32_t) const
    {
        return 0;
    }
};

template <typename V, int UNROLL, typename Sum>
static __device__ __forceinline__ uint64_t pack_gather(const wsync_pack_task_t &t, const unsigned char *src,
                                                       unsigned char *dst, const Sum &sum)
{
    const uint32_t W = sizeof(V);
    const uint32_t vpr = t.row_bytes / W; /* vectors per row */
    const uint32_t total = vpr * t.rows;  /* <= WSYNC_PACK_TASK_BYTES / W */
    const uint32_t step = blockDim.x;
    const uint32_t step_r = step / vpr, step_c = step - step_r * vpr;
    const unsigned char *s = src + t.src;
    V *d = (V *)(dst + t.dst);
    uint32_t i = threadIdx.x, r = i / vpr, c = i - r * vpr;
    uint64_t acc = 0;
    for (; i + (UNROLL - 1) * step < total; i += UNROLL * step) {
        V v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            v[k] = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
            WSYNC_FLAT_STEP(r, c, vpr, step_r, step_c);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            d[i + k * step] = v[k];
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            acc += sum(v[k], i + k * step);
    }
    for (; i < total; i += step) {
        V v = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
        d[i] = v;
        acc += sum(v, i);
        WSYNC_FLAT_STEP(r, c, vpr, step_r, step_c);
    }
    return acc;
}

#endif
