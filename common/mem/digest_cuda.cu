// digest_cuda.cu: the piece digest and the fill pattern on the GPU. The digest
// is a sum over words mod 2^64 (digest.h), so each thread sums its own words,
// a warp and a block reduce, and one 64-bit atomic per block adds the block's
// sum: any order gives exactly the CPU value.
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/digest/digest.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/digest_cuda.cuh"

// The word sum of thread `tid`'s 16-byte vectors of a 16-byte aligned
// range (`npairs` of them) for a grid of `stride` threads: four loads in
// flight per thread before any math (memory speed needs bytes in flight).
static __device__ __forceinline__ uint64_t digest_pairs(const ulonglong2 *q, uint64_t npairs, uint64_t base,
                                                        uint64_t tid, uint64_t stride)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    uint64_t s = 0, i = tid;
    for (; i + 3 * stride < npairs; i += 4 * stride) {
        ulonglong2 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            v[k] = __ldcs(q + i + k * stride);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint64_t key = base + 2 * (i + k * stride) * G;
            s += wsync_digest_word(v[k].x, key) + wsync_digest_word(v[k].y, key + G);
        }
    }
    for (; i < npairs; i += stride) {
        ulonglong2 v = __ldcs(q + i);
        uint64_t key = base + 2 * i * G;
        s += wsync_digest_word(v.x, key) + wsync_digest_word(v.y, key + G);
    }
    return s;
}

// The words from `done` on (at most one whole word on the 16-byte path)
// and the zero-padded tail: one thread.
static __device__ uint64_t digest_rest(const unsigned char *p, uint64_t len, uint64_t base, uint64_t done)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint64_t nwords = len / 8;
    uint64_t s = 0;
    for (uint64_t i = done; i < nwords; i++)
        s += wsync_digest_word(d_load_bytes(p + 8 * i, 8), base + i * G);
    if (len % 8)
        s += wsync_digest_word(d_load_bytes(p + 8 * nwords, (int)(len % 8)), base + nwords * G);
    return s;
}

// MODE 16: pointer 16-byte aligned, two words per 16-byte load (the fast path);
// MODE 8: 8-byte aligned; MODE 1: any alignment, byte loads.
template <int MODE>
__global__ void __launch_bounds__(DIG_THREADS)
    digest_kernel(const unsigned char *p, uint64_t len, uint64_t base, unsigned long long *out)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint64_t nwords = len / 8;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t s = 0, done;

    if (MODE == 16) {
        s = digest_pairs((const ulonglong2 *)p, nwords / 2, base, tid, stride);
        done = nwords / 2 * 2;
    } else if (MODE == 8) {
        const uint64_t *q = (const uint64_t *)p;
        for (uint64_t i = tid; i < nwords; i += stride)
            s += wsync_digest_word(__ldcs(q + i), base + i * G);
        done = nwords;
    } else {
        for (uint64_t i = tid; i < nwords; i += stride)
            s += wsync_digest_word(d_load_bytes(p + 8 * i, 8), base + i * G);
        done = nwords;
    }
    // Leftover whole word (odd count on the 16-byte path) and the padded tail.
    if (tid == 0)
        s += digest_rest(p, len, base, done);
    d_block_add(s, out);
}

// Many 16-byte aligned ranges in one launch: range y is blockIdx.y, read
// by the gridDim.x blocks of its row, its sum added into its own word. A
// launch per range of 64 MiB left a ramp-down between kernels (the
// trainer's 227 piece digests of the Qwen2.5-7B image took ~0.9 ms over
// the kernel's rate).
typedef struct dg_range {
    const unsigned char *p;
    uint64_t len, base;
    unsigned long long *out;
} dg_range_t;

#define DG_BATCH_MAX 64

typedef struct dg_batch {
    dg_range_t r[DG_BATCH_MAX];
} dg_batch_t;

__global__ void __launch_bounds__(DIG_THREADS) digest_batch_kernel(const dg_batch_t b)
{
    const dg_range_t &r = b.r[blockIdx.y];
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t nwords = r.len / 8;
    uint64_t s = digest_pairs((const ulonglong2 *)r.p, nwords / 2, r.base, tid, stride);
    if (tid == 0)
        s += digest_rest(r.p, r.len, r.base, nwords / 2 * 2);
    d_block_add(s, r.out);
}

extern "C" int wsync_cuda_digest_batch_async(const wsync_digest_range_t *r, size_t n, uint64_t *dsum, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    size_t at = 0;
    while (at < n) {
        dg_batch_t b;
        uint64_t most = 0;
        int k = 0;
        // consecutive 16-byte aligned ranges of 16 bytes or more go together
        while (at + (size_t)k < n && k < DG_BATCH_MAX && (uintptr_t)r[at + k].ptr % 16 == 0 && r[at + k].len >= 16) {
            b.r[k] = (dg_range_t){.p = (const unsigned char *)r[at + k].ptr,
                                  .len = r[at + k].len,
                                  .base = wsync_digest_base_key(r[at + k].off),
                                  .out = (unsigned long long *)(dsum + at + k)};
            if (r[at + k].len / 16 > most)
                most = r[at + k].len / 16;
            k++;
        }
        if (k < 2) { // alone: its own launch, any alignment
            int e = wsync_cuda_digest_sum_async(r[at].ptr, r[at].len, r[at].off, dsum + at, stream);
            if (e != 0)
                return e;
            at++;
            continue;
        }
        {
            int gx = (wsync_cuda_sm_count() * 8) / k;
            const uint64_t want = (most + DIG_THREADS - 1) / DIG_THREADS;
            if ((uint64_t)gx > want)
                gx = (int)want;
            digest_batch_kernel<<<dim3(gx > 0 ? gx : 1, k), DIG_THREADS, 0, st>>>(b);
        }
        at += (size_t)k;
    }
    return (int)cudaGetLastError();
}

extern "C" int wsync_cuda_digest_sum_async(const void *ptr, size_t len, uint64_t off, uint64_t *dsum, void *stream)
{
    const unsigned char *p = (const unsigned char *)ptr;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned long long *out = (unsigned long long *)dsum;
    uint64_t base = wsync_digest_base_key(off);
    if (len == 0)
        return 0;
    if ((uintptr_t)p % 16 == 0)
        digest_kernel<16><<<wsync_cuda_grid_for(len / 16 + 1, 8), DIG_THREADS, 0, s>>>(p, len, base, out);
    else if ((uintptr_t)p % 8 == 0)
        digest_kernel<8><<<wsync_cuda_grid_for(len / 8 + 1, 8), DIG_THREADS, 0, s>>>(p, len, base, out);
    else
        digest_kernel<1><<<wsync_cuda_grid_for(len / 8 + 1, 8), DIG_THREADS, 0, s>>>(p, len, base, out);
    return (int)cudaGetLastError();
}

// digest_runs.h: one block per task, whose rows its threads read as one
// flat array of words (thread t takes words t, t + 256, ...: consecutive
// threads read consecutive words of a row, whatever its length), four words
// in flight per thread. A thread's word address and keys are stepped by
// additions, not computed: its flat index i advances by 256, which moves
// its (row, word) by (step_r, step_w), one row more where the word passes
// the row's end (flat_walk.cuh); key0's word index is row0 * rw + i, so it
// advances by 256 words; key1's (row * step1 + word) and the address by
// what (step_r, step_w) and the wrap add. (Computed per word, the address
// and keys cost five 64-bit multiplies beside the digest's own four: the
// kernel ran at 0.55 of the plain digest's speed on the H200.)
// The block's sum goes to its segment. A task with a second sum (seg1: the
// record's piece digest beside a put's, one read for both) mixes each word
// it read under both keys. (A warp a row left most of a block idle on the
// few rows of a task of long rows: 18944-byte column slices made tasks of
// 16 KiB and 2.5 KiB, one or four of a block's eight warps busy.)
#define DT_UNROLL 4

/* One thread's place in a task: its word's address, keys and word in row. */
typedef struct dt_walk {
    uintptr_t at;
    uint64_t k0, k1;
    uint32_t w;
} dt_walk_t;

/* The additions of one step (i += DIG_THREADS), and of a wrap to the next row. */
typedef struct dt_steps {
    uint64_t at, k0, k1, wrap_at, wrap_k1;
    uint32_t w, rw;
} dt_steps_t;

static __device__ __forceinline__ void dt_step(dt_walk_t &x, const dt_steps_t &d)
{
    x.w += d.w;
    x.at += d.at;
    x.k0 += d.k0;
    x.k1 += d.k1;
    if (x.w >= d.rw) {
        x.w -= d.rw;
        x.at += d.wrap_at;
        x.k1 += d.wrap_k1;
    }
}

template <bool TWO>
static __device__ __forceinline__ void digest_task(const wsync_digest_task_t &t, const unsigned char *src,
                                                   unsigned long long *dsum)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint32_t rw = t.row_words, step_r = DIG_THREADS / rw, step_w = DIG_THREADS - step_r * rw;
    const uint64_t total = (uint64_t)rw * t.nrows;
    const uint32_t r = threadIdx.x / rw, w = threadIdx.x - r * rw; /* r from row0 */
    const uint64_t row = (uint64_t)t.row0 + r;
    const dt_steps_t d = {.at = step_r * t.src_stride + step_w * 8ull,
                          .k0 = (uint64_t)DIG_THREADS * G,
                          .k1 = ((uint64_t)step_r * t.step1 + step_w) * G,
                          .wrap_at = t.src_stride - rw * 8ull,
                          .wrap_k1 = ((uint64_t)t.step1 - rw) * G,
                          .w = step_w,
                          .rw = rw};
    dt_walk_t x = {.at = (uintptr_t)(src + t.src_off + row * t.src_stride) + w * 8ull,
                   .k0 = t.key0 + ((uint64_t)t.row0 * rw + threadIdx.x) * G,
                   .k1 = t.key1 + (row * t.step1 + w) * G,
                   .w = w};
    uint64_t i = threadIdx.x, s = 0, s1 = 0;
    for (; i + (DT_UNROLL - 1) * DIG_THREADS < total; i += DT_UNROLL * DIG_THREADS) {
        uint64_t a[DT_UNROLL], k0[DT_UNROLL], k1[DT_UNROLL];
#pragma unroll
        for (int k = 0; k < DT_UNROLL; k++) { /* every load first */
            a[k] = __ldcs((const uint64_t *)x.at);
            k0[k] = x.k0;
            k1[k] = x.k1;
            dt_step(x, d);
        }
#pragma unroll
        for (int k = 0; k < DT_UNROLL; k++) {
            s += wsync_digest_word(a[k], k0[k]);
            if (TWO)
                s1 += wsync_digest_word(a[k], k1[k]);
        }
    }
    for (; i < total; i += DIG_THREADS) {
        const uint64_t a = __ldcs((const uint64_t *)x.at);
        s += wsync_digest_word(a, x.k0);
        if (TWO)
            s1 += wsync_digest_word(a, x.k1);
        dt_step(x, d);
    }
    d_block_add(s, dsum + t.seg);
    if (TWO) {
        __syncthreads(); // d_block_add's shared words are reused
        d_block_add(s1, dsum + t.seg1);
    }
}

__global__ void __launch_bounds__(DIG_THREADS, 6) /* 40 registers: 6 blocks an SM */
    digest_tasks_kernel(const wsync_digest_task_t *tasks, const unsigned char *src, unsigned long long *dsum)
{
    const wsync_digest_task_t t = tasks[blockIdx.x];
    if (t.seg1 == WSYNC_DIGEST_NO_SUM) // block-uniform
        digest_task<false>(t, src, dsum);
    else
        digest_task<true>(t, src, dsum);
}

extern "C" int wsync_cuda_digest_tasks_async(const wsync_digest_task_t *dev_tasks, size_t n, const void *src_base,
                                             uint64_t *dsum, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    // Grids are at most 2^31 - 1 blocks: launch in parts.
    for (size_t at = 0; at < n; at += 1u << 30) {
        size_t k = n - at < (1u << 30) ? n - at : (1u << 30);
        digest_tasks_kernel<<<(unsigned)k, DIG_THREADS, 0, s>>>(dev_tasks + at, (const unsigned char *)src_base,
                                                                (unsigned long long *)dsum);
    }
    return (int)cudaGetLastError();
}

// Fill: byte i of dst holds byte (off+i)%8 of fmix64(((off+i)/8) ^ seed).
__global__ void fill_words_kernel(uint64_t *dst, uint64_t nwords, uint64_t first_word, uint64_t seed)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        dst[i] = wsync_fmix64((first_word + i) ^ seed);
}

__global__ void fill_bytes_kernel(unsigned char *dst, uint64_t len, uint64_t off, uint64_t seed)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += stride) {
        uint64_t pos = off + i;
        dst[i] = (unsigned char)(wsync_fmix64((pos / 8) ^ seed) >> (8 * (pos % 8)));
    }
}

extern "C" int wsync_cuda_fill_async(void *dst, size_t len, uint64_t off, uint64_t seed, void *stream)
{
    unsigned char *d = (unsigned char *)dst;
    cudaStream_t s = (cudaStream_t)stream;
    if (len == 0)
        return 0;
    // Words where the destination and the image offset agree on alignment;
    // bytes for the head and tail (and for everything when they do not).
    if ((uintptr_t)d % 8 == off % 8) {
        uint64_t head = (8 - off % 8) % 8;
        if (head > len)
            head = len;
        if (head)
            fill_bytes_kernel<<<1, 32, 0, s>>>(d, head, off, seed);
        uint64_t nwords = (len - head) / 8;
        if (nwords)
            fill_words_kernel<<<wsync_cuda_grid_for(nwords, 8), DIG_THREADS, 0, s>>>((uint64_t *)(d + head), nwords,
                                                                                     (off + head) / 8, seed);
        uint64_t tail_at = head + nwords * 8;
        if (tail_at < len)
            fill_bytes_kernel<<<1, 32, 0, s>>>(d + tail_at, len - tail_at, off + tail_at, seed);
    } else {
        fill_bytes_kernel<<<wsync_cuda_grid_for(len, 8), DIG_THREADS, 0, s>>>(d, len, off, seed);
    }
    return (int)cudaGetLastError();
}
