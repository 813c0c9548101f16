// pack_digest_cuda.cu: the gather of pack_cuda.cu with the piece digest
// (digest.h) of what it writes summed on the way, for one packed put written
// straight into its destination (a receiver's window mapped over CUDA IPC):
// the words stored are the words summed, as in copy_digest_cuda.cu, so the
// sum is the destination's digest and the stage the put was packed into
// before, and its copy out, are not needed. Tasks move whole 8- or 16-byte
// words (pack_gpu.c launches nothing else here). Not yet measured on a GPU:
// the shape is pack_cuda.cu's at DIG_THREADS threads, whose block sum helper
// it uses.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/digest/digest.h"
#include "common/mem/digest_cuda.cuh"
#include "common/pack/pack_cuda.h"

#define PD_UNROLL 4

static __device__ __forceinline__ uint64_t pd_sum(const ulonglong2 &v, uint64_t key)
{
    return wsync_digest_word(v.x, key) + wsync_digest_word(v.y, key + WSYNC_DIGEST_GOLDEN);
}

static __device__ __forceinline__ uint64_t pd_sum(const unsigned long long &v, uint64_t key)
{
    return wsync_digest_word(v, key);
}

// One task: its rows as one flat array of vectors (as pack_cuda.cu's
// gather), each stored and summed; vector i of the task is word
// t.dst / 8 + i * W / 8 of the put, keyed base + that * GOLDEN.
template <typename V>
static __device__ __forceinline__ uint64_t gather_sum(const wsync_pack_task_t &t, const unsigned char *src,
                                                      unsigned char *dst, uint64_t base)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint32_t W = sizeof(V);
    const uint32_t vpr = t.row_bytes / W;
    const uint32_t total = vpr * t.rows;
    const uint32_t step = blockDim.x;
    const uint32_t step_r = step / vpr, step_c = step - step_r * vpr;
    const unsigned char *s = src + t.src;
    V *d = (V *)(dst + t.dst);
    const uint64_t key0 = base + (t.dst / 8) * G;
    uint32_t i = threadIdx.x, r = i / vpr, c = i - r * vpr;
    uint64_t acc = 0;

#define PD_ADVANCE()    \
    do {                \
        c += step_c;    \
        r += step_r;    \
        if (c >= vpr) { \
            c -= vpr;   \
            r++;        \
        }               \
    } while (0)

    for (; i + (PD_UNROLL - 1) * step < total; i += PD_UNROLL * step) {
        V v[PD_UNROLL];
#pragma unroll
        for (int k = 0; k < PD_UNROLL; k++) {
            v[k] = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
            PD_ADVANCE();
        }
#pragma unroll
        for (int k = 0; k < PD_UNROLL; k++)
            d[i + k * step] = v[k];
#pragma unroll
        for (int k = 0; k < PD_UNROLL; k++)
            acc += pd_sum(v[k], key0 + (uint64_t)(i + k * step) * (W / 8) * G);
    }
    for (; i < total; i += step) {
        V v = *(const V *)(s + (uint64_t)r * t.stride + (uint64_t)c * W);
        d[i] = v;
        acc += pd_sum(v, key0 + (uint64_t)i * (W / 8) * G);
        PD_ADVANCE();
    }
#undef PD_ADVANCE
    return acc;
}

__global__ void __launch_bounds__(DIG_THREADS)
    pack_digest_kernel(const wsync_pack_task_t *tasks, size_t n, const unsigned char *src, unsigned char *dst,
                       uint64_t base, unsigned long long *acc, unsigned int *count, unsigned long long *hout)
{
    uint64_t s = 0;
    for (size_t b = blockIdx.x; b < n; b += gridDim.x) {
        const wsync_pack_task_t t = tasks[b];
        s += t.width == 16 ? gather_sum<ulonglong2>(t, src, dst, base)
                           : gather_sum<unsigned long long>(t, src, dst, base);
    }
    d_block_add_out(s, acc, count, hout);
}

extern "C" int wsync_cuda_pack_digest_async(void *dst, const void *src_base, const wsync_pack_task_t *tasks_dev,
                                            size_t n, uint64_t key_off, unsigned long long *acc,
                                            unsigned int *count, unsigned long long *hout, void *stream)
{
    // Every block counts itself in, so the grid is at least one block even
    // for no task (the last block then stores a sum of 0).
    unsigned grid = n == 0 ? 1u : n < 0x7fffffffu ? (unsigned)n : 0x7fffffffu;
    pack_digest_kernel<<<grid, DIG_THREADS, 0, (cudaStream_t)stream>>>(tasks_dev, n, (const unsigned char *)src_base,
                                                                       (unsigned char *)dst,
                                                                       wsync_digest_base_key(key_off), acc, count,
                                                                       hout);
    return (int)cudaGetLastError();
}
