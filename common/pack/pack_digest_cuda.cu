// pack_digest_cuda.cu: the gather of pack_cuda.cu with the piece digest
// (digest.h) of what it writes summed on the way, for one packed put written
// straight into its destination (a receiver's window mapped over CUDA IPC):
// the words stored are the words summed, as in copy_digest_cuda.cu, so the
// sum is the destination's digest and the stage the put was packed into
// before, and its copy out, are not needed. Tasks move whole 8- or 16-byte
// words (pack_gpu.c launches nothing else here). A put whose destination is
// cut in parts (the caller's tensors) is one launch too: each task writes
// into its part. Not yet measured on a GPU:
// the shape is pack_cuda.cu's at DIG_THREADS threads, whose block sum helper
// it uses. A batch of such puts (each in one part or several) is one launch
// too: the local transport gathers the puts handed while its stream is
// busy, as it does its fused copies.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/digest/digest.h"
#include "common/mem/digest_cuda.cuh"
#include "common/pack/pack_cuda.h"
#include "common/pack/pack_gather.cuh"

#define PD_UNROLL 4

static __device__ __forceinline__ uint64_t pd_sum(const ulonglong2 &v, uint64_t key)
{
    return wsync_digest_word(v.x, key) + wsync_digest_word(v.y, key + WSYNC_DIGEST_GOLDEN);
}

static __device__ __forceinline__ uint64_t pd_sum(const unsigned long long &v, uint64_t key)
{
    return wsync_digest_word(v, key);
}

// What vector i of a task adds to the put's sum: the vector is word
// t.dst / 8 + i * W / 8 of the put, keyed base + that * GOLDEN.
struct put_sum {
    uint64_t key0; // base + (t.dst / 8) * GOLDEN
    template <typename V> __device__ __forceinline__ uint64_t operator()(const V &v, uint32_t i) const
    {
        return pd_sum(v, key0 + (uint64_t)i * (sizeof(V) / 8) * WSYNC_DIGEST_GOLDEN);
    }
};

// The address the put's byte 0 would have for a task starting at put
// offset `at`: its part's, of the n parts at[0..n), base[0..n) (parts never
// cut a task: pack_gpu.c checks).
static __device__ __forceinline__ unsigned char *part_base(const uint64_t *at_of, const uint64_t *base, uint32_t n,
                                                           uint64_t at)
{
    uint32_t j = n - 1;
    while (j > 0 && at_of[j] > at)
        j--;
    return (unsigned char *)(uintptr_t)base[j];
}

__global__ void __launch_bounds__(DIG_THREADS)
    pack_digest_kernel(const wsync_pack_task_t *tasks, size_t n, const unsigned char *src, const wsync_pack_dsts_t d,
                       uint64_t base, unsigned long long *acc, unsigned int *count, unsigned long long *hout)
{
    uint64_t s = 0;
    for (size_t b = blockIdx.x; b < n; b += gridDim.x) {
        const wsync_pack_task_t t = tasks[b];
        unsigned char *dst = part_base(d.at, d.base, d.n, t.dst);
        const put_sum sum = {base + (t.dst / 8) * WSYNC_DIGEST_GOLDEN};
        s += t.width == 16 ? pack_gather<ulonglong2, PD_UNROLL>(t, src, dst, sum)
                           : pack_gather<unsigned long long, PD_UNROLL>(t, src, dst, sum);
    }
    d_block_add_out(s, acc, count, hout);
}

extern "C" int wsync_cuda_pack_digest_async(const wsync_pack_dsts_t *d, const void *src_base,
                                            const wsync_pack_task_t *tasks_dev, size_t n, uint64_t key_off,
                                            unsigned long long *acc, unsigned int *count, unsigned long long *hout,
                                            void *stream)
{
    // Every block counts itself in, so the grid is at least one block even
    // for no task (the last block then stores a sum of 0).
    unsigned grid = n == 0 ? 1u : n < 0x7fffffffu ? (unsigned)n : 0x7fffffffu;
    if (d->n < 1 || d->n > WSYNC_PACK_MAX_PARTS)
        return (int)cudaErrorInvalidValue;
    pack_digest_kernel<<<grid, DIG_THREADS, 0, (cudaStream_t)stream>>>(tasks_dev, n, (const unsigned char *)src_base,
                                                                       *d, wsync_digest_base_key(key_off), acc,
                                                                       count, hout);
    return (int)cudaGetLastError();
}

// The batch: block b runs task b - first[i] of put i (first[i] <= b <
// first[i + 1]); each put's blocks add into their own acc and count, so its
// last block stores that put's sum.
__global__ void __launch_bounds__(DIG_THREADS)
    pack_digest_batch_kernel(const wsync_pack_batch_t b, unsigned long long *acc, unsigned int *count)
{
    uint32_t i = 0;
    while (i + 1 < b.n && blockIdx.x >= b.first[i + 1])
        i++;
    const wsync_pack_batch_put_t &p = b.p[i];
    const wsync_pack_task_t t = p.tasks[blockIdx.x - b.first[i]];
    unsigned char *dst = p.nparts > 1 ? part_base(b.at + p.part0, b.base + p.part0, p.nparts, t.dst) : p.dst;
    const put_sum sum = {p.key + (t.dst / 8) * WSYNC_DIGEST_GOLDEN};
    const uint64_t s = t.width == 16 ? pack_gather<ulonglong2, PD_UNROLL>(t, p.src, dst, sum)
                                     : pack_gather<unsigned long long, PD_UNROLL>(t, p.src, dst, sum);
    d_block_add_out_of(s, acc + i, count + i, p.hout, (unsigned)p.ntasks);
}

extern "C" int wsync_cuda_pack_digest_batch_async(const wsync_pack_batch_t *b, unsigned long long *acc,
                                                  unsigned int *count, void *stream)
{
    uint32_t i;
    if (b->n < 1 || b->n > WSYNC_PACK_BATCH_MAX || b->first[0] != 0 || b->first[b->n] == 0)
        return (int)cudaErrorInvalidValue;
    for (i = 0; i < b->n; i++)
        if (b->p[i].ntasks == 0 || b->first[i + 1] - b->first[i] != b->p[i].ntasks ||
            (b->p[i].nparts > 1 && b->p[i].part0 + b->p[i].nparts > WSYNC_PACK_BATCH_PARTS))
            return (int)cudaErrorInvalidValue;
    pack_digest_batch_kernel<<<b->first[b->n], DIG_THREADS, 0, (cudaStream_t)stream>>>(*b, acc, count);
    return (int)cudaGetLastError();
}
