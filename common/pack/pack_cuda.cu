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
#include "common/pack/pack_gather.cuh"

#define PACK_THREADS 512
#define PACK_UNROLL 4

static_assert(sizeof(wsync_pack_task_t) == 40, "the task table is shared with C");

__global__ void __launch_bounds__(PACK_THREADS)
    pack_kernel(const wsync_pack_task_t *tasks, size_t n, const unsigned char *src, unsigned char *dst)
{
    for (size_t b = blockIdx.x; b < n; b += gridDim.x) {
        const wsync_pack_task_t t = tasks[b];
        switch (t.width) {
        case 16: pack_gather<uint4, PACK_UNROLL>(t, src, dst, no_sum()); break;
        case 8: pack_gather<uint2, PACK_UNROLL>(t, src, dst, no_sum()); break;
        case 4: pack_gather<uint32_t, PACK_UNROLL>(t, src, dst, no_sum()); break;
        case 2: pack_gather<uint16_t, PACK_UNROLL>(t, src, dst, no_sum()); break;
        default: pack_gather<uint8_t, PACK_UNROLL>(t, src, dst, no_sum()); break;
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
