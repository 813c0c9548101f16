// pack_cuda.cu: the gather kernel. One block per task (pack_task.h): the
// task's rows are read as one flat array of `width`-byte vectors, thread t
// taking vectors t, t + 512, ..., so consecutive threads read consecutive
// bytes of a row and write consecutive bytes of the destination (coalesced
// both ways); four loads are in flight per thread before the stores. The
// (row, column) of a vector is stepped, not divided, per iteration.
//
// The shape was measured on an H200 packing the column slices of
// bench/gpu_pack_bench (kernel alone, table already on the device, against
// a D2D copy of the same bytes): 64 KiB tasks at 256 threads x 4 loads ran
// at 0.93-0.96 of the copy for TP = 2, 4, 8; 256 x 8 at 0.95-1.08; 512 x 4
// at 0.97-1.08, the best or level at every TP. 256 KiB tasks at 512 x 4
// ran at 1.00-1.05, ahead only at TP = 2, and would cut a 64 MiB put into
// 256 blocks, under one wave of 132 SMs.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/pack/pack_cuda.h"

#define PACK_THREADS 512
#define PACK_UNROLL 4

static_assert(sizeof(wsync_pack_task_t) == 40, "the task table is shared with C");

template <typename V>
static __device__ __forceinline__ void gather(const wsync_pack_task_t &t, const unsigned char *src,
                                              unsigned char *dst)
{
    const uint32_t W = sizeof(V);
    const uint32_t vpr = t.row_bytes / W; // vectors per row
    const uint32_t total = vpr * t.rows;  // <= WSYNC_PACK_TASK_BYTES / W
    const uint32_t step = blockDim.x;
    const uint32_t step_r = step / vpr, step_c = step - step_r * vpr;
    const unsigned char *s = src + t.src;
    V *d = (V *)(dst + t.dst);
    uint32_t i = threadIdx.x, r = i / vpr, c = i - r * vpr;

#define PACK_ADVANCE()  \
    do {                \
        c += step_c;    \
        r += step_r;    \
        if (c >= vpr) { \
            c -= vpr;   \
            r++;        \
        }               \
    } while (0)

    for (; i + (PACK_UNROLL - 1) * step < total; i += PACK_UNROLL * step) {
        V v[PACK_UNROLL];
#pragma unroll
        for (int k = 0; k < PACK_UNROLL; k++) {
            v[k] = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
            PACK_ADVANCE();
        }
#pragma unroll
        for (int k = 0; k < PACK_UNROLL; k++)
            d[i + k * step] = v[k];
    }
    for (; i < total; i += step) {
        d[i] = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
        PACK_ADVANCE();
    }
#undef PACK_ADVANCE
}

__global__ void __launch_bounds__(PACK_THREADS)
    pack_kernel(const wsync_pack_task_t *tasks, size_t n, const unsigned char *src, unsigned char *dst)
{
    for (size_t b = blockIdx.x; b < n; b += gridDim.x) {
        const wsync_pack_task_t t = tasks[b];
        switch (t.width) {
        case 16: gather<uint4>(t, src, dst); break;
        case 8: gather<uint2>(t, src, dst); break;
        case 4: gather<uint32_t>(t, src, dst); break;
        case 2: gather<uint16_t>(t, src, dst); break;
        default: gather<uint8_t>(t, src, dst); break;
        }
    }
}

extern "C" int wsync_cuda_pack_async(void *dst_base, const void *src_base, const wsync_pack_task_t *tasks_dev,
                                     size_t n, void *stream)
{
    if (n == 0)
        return 0;
    // Past 2^31 - 1 blocks the grid loops over the tasks.
    unsigned grid = n < 0x7fffffffu ? (unsigned)n : 0x7fffffffu;
    pack_kernel<<<grid, PACK_THREADS, 0, (cudaStream_t)stream>>>(tasks_dev, n, (const unsigned char *)src_base,
                                                                 (unsigned char *)dst_base);
    return (int)cudaGetLastError();
}
