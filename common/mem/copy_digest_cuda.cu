// copy_digest_cuda.cu: the copy with the digest fused into it. Each thread
// loads `U` vectors (16 bytes: two digest words, or 8 bytes: one) before it
// stores any: a copy runs at memory speed only with enough bytes in flight,
// and the digest's arithmetic (about half what the digest kernel does per
// byte at 4.4 TB/s) hides under the loads of the next round. The words
// stored are the words summed, so the sum is the destination's digest.
// A range whose source and destination sit at different addresses modulo 8
// cannot use word loads and stores both; it is copied by the copy engine and
// digested afterwards (digest_cuda.cu), the same sum in two passes.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "common/mem/copy_digest_cuda.h"
#include "common/digest/digest.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/digest_cuda.cuh"

// Measured on an H200 (bench/gpu_digest_bench, fused / cudaMemcpyAsync of
// the same bytes, 4 GiB at once and 64 jobs of 64 MiB): 0.90-0.93 in every
// shape tried (unroll 1, 2, 4, 8 x 4 or 8 blocks per SM); 2 x 8 was the
// best on 64 MiB jobs (0.926), which is what the fan-out and the landings
// queue. bench/RESULTS.md has the table.
#define CD_UNROLL 2
#define CD_BLOCKS_PER_SM 8

// The words outside the vector loop: `nhead` words before it (the source
// is 8 but not 16 bytes aligned), the words after it, and the zero-padded
// tail; one thread, few words.
static __device__ void copy_digest_edges(unsigned char *d, const unsigned char *s, uint64_t len, uint64_t base,
                                         uint64_t nhead, uint64_t body_end, uint64_t *acc)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint64_t nwords = len / 8;
    for (uint64_t i = 0; i < nhead; i++) {
        uint64_t w = *(const uint64_t *)(s + 8 * i);
        *(uint64_t *)(d + 8 * i) = w;
        *acc += wsync_digest_word(w, base + i * G);
    }
    for (uint64_t i = body_end; i < nwords; i++) {
        uint64_t w = *(const uint64_t *)(s + 8 * i);
        *(uint64_t *)(d + 8 * i) = w;
        *acc += wsync_digest_word(w, base + i * G);
    }
    if (len % 8) {
        const int n = (int)(len % 8);
        for (int b = 0; b < n; b++)
            d[8 * nwords + b] = s[8 * nwords + b];
        *acc += wsync_digest_word(d_load_bytes(s + 8 * nwords, n), base + nwords * G);
    }
}

// The word sum of one vector whose first word is keyed `key`.
static __device__ __forceinline__ uint64_t vec_sum(const ulonglong2 &v, uint64_t key)
{
    return wsync_digest_word(v.x, key) + wsync_digest_word(v.y, key + WSYNC_DIGEST_GOLDEN);
}

static __device__ __forceinline__ uint64_t vec_sum(const unsigned long long &v, uint64_t key)
{
    return wsync_digest_word(v, key);
}

// The vector loop of one range, for thread `tid` of `stride`: copies its
// vectors src -> dst, U loads in flight before any store, and returns the
// word sum of what it stored. V: ulonglong2 (two words per vector) or
// unsigned long long (one); vector i holds the range's words from word
// W i of `src` on, the first keyed `key0`. ST: 1 stores with the streaming
// hint (evict first), 0 plain stores.
template <typename V, int U, int ST>
static __device__ __forceinline__ uint64_t copy_digest_vectors(V *dst, const V *src, uint64_t nvec, uint64_t key0,
                                                               uint64_t tid, uint64_t stride)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const int W = sizeof(V) / 8;
    uint64_t acc = 0, i = tid;

    for (; i + (U - 1) * stride < nvec; i += U * stride) {
        V v[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            v[k] = __ldcs(src + i + k * stride);
#pragma unroll
        for (int k = 0; k < U; k++) {
            if (ST)
                __stcs(dst + i + k * stride, v[k]);
            else
                dst[i + k * stride] = v[k];
        }
#pragma unroll
        for (int k = 0; k < U; k++)
            acc += vec_sum(v[k], key0 + W * (i + k * stride) * G);
    }
    for (; i < nvec; i += stride) {
        V v = __ldcs(src + i);
        dst[i] = v;
        acc += vec_sum(v, key0 + W * i * G);
    }
    return acc;
}

// One range: its vectors start at word `nhead`; the edges (copy_digest_edges)
// go to thread 0.
template <typename V, int U, int ST>
__global__ void __launch_bounds__(DIG_THREADS)
    copy_digest_kernel(unsigned char *d, const unsigned char *s, uint64_t len, uint64_t base, uint64_t nhead,
                       uint64_t nvec, unsigned long long *out, unsigned int *count, unsigned long long *hout)
{
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t acc = copy_digest_vectors<V, U, ST>((V *)(d + 8 * nhead), (const V *)(s + 8 * nhead), nvec,
                                                 base + nhead * WSYNC_DIGEST_GOLDEN, tid, stride);
    if (tid == 0)
        copy_digest_edges(d, s, len, base, nhead, nhead + (sizeof(V) / 8) * nvec, &acc);
    d_block_add_out(acc, out, count, hout);
}

// The fallback's end (copy engine, then the digest kernel): the sum to
// *hout, the accumulator back to 0, as the fused kernel's last block does.
__global__ void copy_digest_finish(unsigned long long *out, unsigned long long *hout)
{
    *hout = *out;
    *out = 0;
    __threadfence_system();
}

template <typename V, int ST>
static void launch_st(int unroll, int grid, cudaStream_t st, unsigned char *d, const unsigned char *s,
                      uint64_t len, uint64_t base, uint64_t nhead, uint64_t nvec, unsigned long long *out,
                      unsigned int *count, unsigned long long *hout)
{
    switch (unroll) {
    case 1:
        copy_digest_kernel<V, 1, ST><<<grid, DIG_THREADS, 0, st>>>(d, s, len, base, nhead, nvec, out, count, hout);
        break;
    case 4:
        copy_digest_kernel<V, 4, ST><<<grid, DIG_THREADS, 0, st>>>(d, s, len, base, nhead, nvec, out, count, hout);
        break;
    case 8:
        copy_digest_kernel<V, 8, ST><<<grid, DIG_THREADS, 0, st>>>(d, s, len, base, nhead, nvec, out, count, hout);
        break;
    default:
        copy_digest_kernel<V, 2, ST><<<grid, DIG_THREADS, 0, st>>>(d, s, len, base, nhead, nvec, out, count, hout);
        break;
    }
}

template <typename V>
static void launch(int unroll, int streaming, int grid, cudaStream_t st, unsigned char *d, const unsigned char *s,
                   uint64_t len, uint64_t base, uint64_t nhead, uint64_t nvec, unsigned long long *out,
                   unsigned int *count, unsigned long long *hout)
{
    if (streaming)
        launch_st<V, 1>(unroll, grid, st, d, s, len, base, nhead, nvec, out, count, hout);
    else
        launch_st<V, 0>(unroll, grid, st, d, s, len, base, nhead, nvec, out, count, hout);
}

// A batch: range y of the launch is copied by its nb blocks of the 1-D
// grid, from block b0 on (wsync_cd_blocks: a share by its size), with
// 16-byte vectors; its sum to acc[y] and, by its last block, to r[y].hout
// (d_block_add_out_of).
typedef struct cd_range {
    unsigned char *d;
    const unsigned char *s;
    uint64_t len, base, nhead, nvec;
    unsigned long long *hout;
    uint32_t b0, nb;
} cd_range_t;

typedef struct cd_batch {
    cd_range_t r[WSYNC_CD_BATCH_MAX];
    unsigned long long *acc;
    unsigned int *count;
    int n;
} cd_batch_t;

__global__ void __launch_bounds__(DIG_THREADS) copy_digest_batch_kernel(const cd_batch_t b)
{
    int y = 0;
    while (y + 1 < b.n && blockIdx.x >= b.r[y + 1].b0)
        y++;
    const cd_range_t &r = b.r[y];
    const uint64_t tid = (uint64_t)(blockIdx.x - r.b0) * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)r.nb * blockDim.x;
    uint64_t acc = copy_digest_vectors<ulonglong2, CD_UNROLL, 0>((ulonglong2 *)(r.d + 8 * r.nhead),
                                                                 (const ulonglong2 *)(r.s + 8 * r.nhead), r.nvec,
                                                                 r.base + r.nhead * WSYNC_DIGEST_GOLDEN, tid,
                                                                 stride);
    if (tid == 0)
        copy_digest_edges(r.d, r.s, r.len, r.base, r.nhead, r.nhead + 2 * r.nvec, &acc);
    d_block_add_out_of(acc, b.acc + y, b.count + y, r.hout, r.nb);
}

// The variants gpu_copy_variants_bench measures against cudaMemcpyAsync
// (copy_digest_cuda.h, wsync_cuda_copy_digest_variant_async); the
// library's kernel above was as fast as the best of them (bench/RESULTS.md).
// A tile is DIG_THREADS x U vectors: thread t takes vectors t, t + 256, ...
// of it (each load of a warp 512 contiguous bytes), all U loaded before any
// is stored; tile j of block b is b + j x gridDim. The first key of a
// thread's vectors is one multiply per tile, the others a constant apart.
// LD 1: loads with the L2 256-byte prefetch hint and no L1 allocation;
// 0: __ldcs. DIG 0: copy only (a hand-written copy; no sum).
static __device__ __forceinline__ ulonglong2 ld_vec(const ulonglong2 *p, int hint)
{
    if (hint) {
        ulonglong2 v;
        asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p));
        return v;
    }
    return __ldcs(p);
}

template <int U, int LD, int ST, int DIG>
__global__ void __launch_bounds__(DIG_THREADS)
    copy_digest_tiles_kernel(ulonglong2 *dst, const ulonglong2 *src, uint64_t nvec, uint64_t key0,
                             unsigned long long *out)
{
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint64_t TV = (uint64_t)DIG_THREADS * U;
    const uint64_t ntiles = (nvec + TV - 1) / TV;
    uint64_t acc = 0;
    for (uint64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const uint64_t v0 = t * TV + threadIdx.x;
        ulonglong2 v[U];
        if (v0 + (U - 1) * DIG_THREADS < nvec) {
#pragma unroll
            for (int k = 0; k < U; k++)
                v[k] = ld_vec(src + v0 + k * DIG_THREADS, LD);
#pragma unroll
            for (int k = 0; k < U; k++) {
                if (ST)
                    __stcs(dst + v0 + k * DIG_THREADS, v[k]);
                else
                    dst[v0 + k * DIG_THREADS] = v[k];
            }
            if (DIG) {
                uint64_t key = key0 + 2 * v0 * G;
#pragma unroll
                for (int k = 0; k < U; k++) {
                    acc += vec_sum(v[k], key);
                    key += 2 * DIG_THREADS * G;
                }
            }
        } else {
            for (int k = 0; k < U; k++) {
                const uint64_t i = v0 + k * DIG_THREADS;
                if (i < nvec) {
                    ulonglong2 w = ld_vec(src + i, LD);
                    dst[i] = w;
                    if (DIG)
                        acc += vec_sum(w, key0 + 2 * i * G);
                }
            }
        }
    }
    if (DIG)
        d_block_add(acc, out);
}

// Kind 3: the bulk-copy unit (TMA, sm_90). Each block owns NS stages of S
// bytes in shared memory; one thread moves a tile global -> stage with one
// bulk load (its completion counted on the stage's mbarrier) and stage ->
// global with one bulk store, and every thread digests the stage from
// shared memory while the store drains. Tiles are grid-strided.
static __device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t ok;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, "
                     "0, p;\n}"
                     : "=r"(ok)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!ok);
}

static __device__ __forceinline__ void bulk_load(uint32_t sdst, const void *gsrc, uint32_t bytes, uint32_t bar)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sdst),
                 "l"(gsrc), "r"(bytes), "r"(bar)
                 : "memory");
}

static __device__ __forceinline__ void bulk_store(void *gdst, uint32_t ssrc, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(ssrc), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int S, int NS, int DIG>
__global__ void __launch_bounds__(DIG_THREADS)
    copy_digest_bulk_kernel(ulonglong2 *dst, const ulonglong2 *src, uint64_t nvec, uint64_t key0,
                            unsigned long long *out)
{
    extern __shared__ __align__(128) unsigned char stage[];
    __shared__ __align__(8) uint64_t bars[NS];
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    const uint64_t TV = S / 16;
    const uint64_t ntiles = (nvec + TV - 1) / TV;
    uint64_t acc = 0, k;
    const bool lead = threadIdx.x == 0;
    if (lead) {
        for (int i = 0; i < NS; i++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[i])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (lead)
        for (int i = 0; i < NS; i++) {
            const uint64_t t = blockIdx.x + (uint64_t)i * gridDim.x;
            if (t < ntiles) {
                const uint64_t n = nvec - t * TV < TV ? nvec - t * TV : TV;
                bulk_load(smem_addr(stage + i * S), src + t * TV, (uint32_t)(16 * n), smem_addr(&bars[i]));
            }
        }
    for (k = 0;; k++) {
        const uint64_t t = blockIdx.x + k * gridDim.x;
        const int sidx = (int)(k % NS);
        if (t >= ntiles)
            break;
        const uint64_t n = nvec - t * TV < TV ? nvec - t * TV : TV;
        const ulonglong2 *sv = (const ulonglong2 *)(stage + sidx * S);
        bar_wait(smem_addr(&bars[sidx]), (uint32_t)((k / NS) & 1));
        if (lead) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            bulk_store(dst + t * TV, smem_addr(stage + sidx * S), (uint32_t)(16 * n));
        }
        if (DIG) {
            uint64_t key = key0 + 2 * (t * TV + threadIdx.x) * G;
            for (uint64_t j = threadIdx.x; j < n; j += DIG_THREADS) {
                acc += vec_sum(sv[j], key);
                key += 2 * DIG_THREADS * G;
            }
        }
        __syncthreads(); // every thread is done reading the previous stages
        if (lead && k > 0) {
            // refill the previous stage once its store has read it
            const uint64_t kk = k - 1 + NS, tn = blockIdx.x + kk * gridDim.x;
            if (tn < ntiles) {
                const int pidx = (int)((k - 1) % NS);
                const uint64_t nn = nvec - tn * TV < TV ? nvec - tn * TV : TV;
                asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                bulk_load(smem_addr(stage + pidx * S), src + tn * TV, (uint32_t)(16 * nn), smem_addr(&bars[pidx]));
            }
        }
    }
    if (lead)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    if (DIG)
        d_block_add(acc, out);
}

template <int S, int NS, int DIG>
static int launch_bulk(int blocks_per_sm, cudaStream_t st, ulonglong2 *vd, const ulonglong2 *vs, uint64_t nvec,
                       uint64_t key0, unsigned long long *out)
{
    const uint64_t ntiles = (nvec + S / 16 - 1) / (S / 16);
    uint64_t grid = (uint64_t)wsync_cuda_sm_count() * (uint64_t)blocks_per_sm;
    cudaError_t e = cudaFuncSetAttribute(copy_digest_bulk_kernel<S, NS, DIG>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, S * NS);
    if (e != cudaSuccess)
        return (int)e;
    if (grid > ntiles)
        grid = ntiles;
    copy_digest_bulk_kernel<S, NS, DIG>
        <<<(unsigned)(grid ? grid : 1), DIG_THREADS, S * NS, st>>>(vd, vs, nvec, key0, out);
    return (int)cudaGetLastError();
}

static int launch_bulk_shape(int shape, int dig, int bps, cudaStream_t st, ulonglong2 *vd, const ulonglong2 *vs,
                             uint64_t nvec, uint64_t key0, unsigned long long *out)
{
    switch (shape * 2 + dig) {
    case 0: return launch_bulk<32768, 4, 0>(bps, st, vd, vs, nvec, key0, out);
    case 1: return launch_bulk<32768, 4, 1>(bps, st, vd, vs, nvec, key0, out);
    case 2: return launch_bulk<16384, 4, 0>(bps, st, vd, vs, nvec, key0, out);
    case 3: return launch_bulk<16384, 4, 1>(bps, st, vd, vs, nvec, key0, out);
    default: return (int)cudaErrorInvalidValue;
    }
}

// The variants' words outside their 16-byte body (copy_digest_edges), one
// thread, launched after the body.
__global__ void copy_digest_edges_kernel(unsigned char *d, const unsigned char *s, uint64_t len, uint64_t base,
                                         uint64_t nhead, uint64_t body_end, unsigned long long *out)
{
    uint64_t acc = 0;
    copy_digest_edges(d, s, len, base, nhead, body_end, &acc);
    if (acc)
        atomicAdd(out, (unsigned long long)acc);
}

// The tile shapes the bench times: 4 x 8 copy only and with the digest,
// 8 x 4 with the prefetch hint, 4 x 8 with streaming stores.
static int launch_tiles(const wsync_cd_variant_t *v, int grid, cudaStream_t st, ulonglong2 *vd,
                        const ulonglong2 *vs, uint64_t nvec, uint64_t key0, unsigned long long *out)
{
    const int dig = !v->copy_only;
    if (v->unroll == 4 && !v->l2_hint && !v->streaming_stores)
        if (dig)
            copy_digest_tiles_kernel<4, 0, 0, 1><<<grid, DIG_THREADS, 0, st>>>(vd, vs, nvec, key0, out);
        else
            copy_digest_tiles_kernel<4, 0, 0, 0><<<grid, DIG_THREADS, 0, st>>>(vd, vs, nvec, key0, out);
    else if (v->unroll == 8 && v->l2_hint && !v->streaming_stores && dig)
        copy_digest_tiles_kernel<8, 1, 0, 1><<<grid, DIG_THREADS, 0, st>>>(vd, vs, nvec, key0, out);
    else if (v->unroll == 4 && !v->l2_hint && v->streaming_stores && dig)
        copy_digest_tiles_kernel<4, 0, 1, 1><<<grid, DIG_THREADS, 0, st>>>(vd, vs, nvec, key0, out);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int wsync_cuda_copy_digest_variant_async(void *dst, const void *src, size_t len, uint64_t off,
                                                    uint64_t *dsum, void *stream, const wsync_cd_variant_t *v)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    cudaStream_t st = (cudaStream_t)stream;
    unsigned long long *out = (unsigned long long *)dsum;
    const uint64_t base = wsync_digest_base_key(off), nwords = len / 8;
    uint64_t nhead, nvec, key0, tv;
    int grid;
    if (v->kind == 0)
        return wsync_cuda_copy_digest_shape_async(dst, src, len, off, dsum, stream, v->unroll, v->blocks_per_sm,
                                                  v->streaming_stores);
    if (len < 16 || (uintptr_t)s % 8 != 0 || (uintptr_t)s % 16 != (uintptr_t)d % 16 || v->blocks_per_sm < 1 ||
        v->blocks_per_sm > 8)
        return (int)cudaErrorInvalidValue;
    nhead = (uintptr_t)s % 16 ? 1 : 0;
    nvec = (nwords - nhead) / 2;
    key0 = base + nhead * WSYNC_DIGEST_GOLDEN;
    tv = (uint64_t)DIG_THREADS * (uint64_t)(v->unroll > 0 ? v->unroll : 1);
    grid = wsync_cuda_grid_for((nvec + tv - 1) / tv * DIG_THREADS, v->blocks_per_sm);
    if (v->kind == 3) {
        int e = launch_bulk_shape(v->unroll, !v->copy_only, v->blocks_per_sm, st, (ulonglong2 *)(d + 8 * nhead),
                                  (const ulonglong2 *)(s + 8 * nhead), nvec, key0, out);
        if (e != 0)
            return e;
    } else {
        int e = (v->kind == 1) ? launch_tiles(v, grid, st, (ulonglong2 *)(d + 8 * nhead),
                                              (const ulonglong2 *)(s + 8 * nhead), nvec, key0, out)
                               : (int)cudaErrorInvalidValue;
        if (e != 0)
            return e;
    }
    if (!v->copy_only && (nhead || nwords > nhead + 2 * nvec || len % 8))
        copy_digest_edges_kernel<<<1, 1, 0, st>>>(d, s, len, base, nhead, nhead + 2 * nvec, out);
    return (int)cudaGetLastError();
}

// count and hout both NULL: the sum is added into *dsum; both set: it
// goes to *hout and *dsum and *count end at 0 (copy_digest_cuda.h).
static int copy_digest(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dsum, unsigned int *count,
                       uint64_t *hout, cudaStream_t st, int unroll, int blocks_per_sm, int streaming_stores)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    unsigned long long *out = (unsigned long long *)dsum, *hw = (unsigned long long *)hout;
    const uint64_t base = wsync_digest_base_key(off), nwords = len / 8;
    if (unroll <= 0)
        unroll = CD_UNROLL;
    if (blocks_per_sm <= 0 || blocks_per_sm > 8)
        blocks_per_sm = CD_BLOCKS_PER_SM;
    if (len == 0 || (uintptr_t)s % 8 != 0 || (uintptr_t)d % 8 != 0) {
        // No word access fits both sides: the copy engine, then the digest
        // of what it wrote (stream order makes the second see the first).
        int e = len ? (int)cudaMemcpyAsync(d, s, len, cudaMemcpyDefault, st) : 0;
        if (e == 0)
            e = wsync_cuda_digest_sum_async(d, len, off, dsum, st);
        if (e != 0 || hout == NULL)
            return e;
        copy_digest_finish<<<1, 1, 0, st>>>(out, hw);
        return (int)cudaGetLastError();
    }
    if ((uintptr_t)s % 16 == (uintptr_t)d % 16) {
        const uint64_t nhead = (uintptr_t)s % 16 ? 1 : 0;
        const uint64_t nvec = nwords > nhead ? (nwords - nhead) / 2 : 0;
        launch<ulonglong2>(unroll, streaming_stores, wsync_cuda_grid_for(nvec, blocks_per_sm), st, d, s, len, base,
                           nhead < nwords ? nhead : nwords, nvec, out, count, hw);
    } else {
        launch<unsigned long long>(unroll, streaming_stores, wsync_cuda_grid_for(nwords, blocks_per_sm), st, d, s,
                                   len, base, 0, nwords, out, count, hw);
    }
    return (int)cudaGetLastError();
}

extern "C" int wsync_cuda_copy_digest_shape_async(void *dst, const void *src, size_t len, uint64_t off,
                                                  uint64_t *dsum, void *stream, int unroll, int blocks_per_sm,
                                                  int streaming_stores)
{
    if (len == 0)
        return 0;
    return copy_digest(dst, src, len, off, dsum, NULL, NULL, (cudaStream_t)stream, unroll, blocks_per_sm,
                       streaming_stores);
}

extern "C" int wsync_cuda_copy_digest_async(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dsum,
                                            void *stream)
{
    return wsync_cuda_copy_digest_shape_async(dst, src, len, off, dsum, stream, 0, 0, 0);
}

extern "C" int wsync_cuda_copy_digest_out_async(void *dst, const void *src, size_t len, uint64_t off,
                                                uint64_t *dacc, unsigned int *dcount, uint64_t *hout, void *stream)
{
    if (dacc == NULL || dcount == NULL || hout == NULL)
        return (int)cudaErrorInvalidValue;
    return copy_digest(dst, src, len, off, dacc, dcount, hout, (cudaStream_t)stream, 0, 0, 0);
}

extern "C" int wsync_cuda_copy_digest_batch_async(const wsync_cd_piece_t *p, int n, uint64_t *dacc,
                                                  unsigned int *dcount, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    cd_batch_t b;
    uint64_t nvec[WSYNC_CD_BATCH_MAX];
    uint32_t b0[WSYNC_CD_BATCH_MAX], nb[WSYNC_CD_BATCH_MAX];
    int i, vec = n > 1 && n <= WSYNC_CD_BATCH_MAX;
    if (n < 0 || n > WSYNC_CD_BATCH_MAX || (n > 0 && (dacc == NULL || dcount == NULL)))
        return (int)cudaErrorInvalidValue;
    for (i = 0; i < n && vec; i++) {
        const uintptr_t s = (uintptr_t)p[i].src, d = (uintptr_t)p[i].dst;
        vec = p[i].len >= 16 && s % 8 == 0 && s % 16 == d % 16 && p[i].hout != NULL;
    }
    if (!vec) { // one launch each, the same sums
        for (i = 0; i < n; i++) {
            int e = wsync_cuda_copy_digest_out_async(p[i].dst, p[i].src, p[i].len, p[i].off, dacc + i, dcount + i,
                                                     p[i].hout, stream);
            if (e != 0)
                return e;
        }
        return 0;
    }
    memset(&b, 0, sizeof(b));
    for (i = 0; i < n; i++) {
        const uint64_t nwords = p[i].len / 8, nhead = (uintptr_t)p[i].src % 16 ? 1 : 0;
        b.r[i] = (cd_range_t){.d = (unsigned char *)p[i].dst,
                              .s = (const unsigned char *)p[i].src,
                              .len = p[i].len,
                              .base = wsync_digest_base_key(p[i].off),
                              .nhead = nhead,
                              .nvec = (nwords - nhead) / 2,
                              .hout = (unsigned long long *)p[i].hout};
        nvec[i] = b.r[i].nvec;
    }
    b.acc = (unsigned long long *)dacc;
    b.count = dcount;
    b.n = n;
    // the device's resident blocks shared among the ranges by their sizes
    wsync_cd_blocks(nvec, n, DIG_THREADS, (unsigned)(wsync_cuda_sm_count() * CD_BLOCKS_PER_SM), b0, nb);
    for (i = 0; i < n; i++) {
        b.r[i].b0 = b0[i];
        b.r[i].nb = nb[i];
    }
    copy_digest_batch_kernel<<<b0[n - 1] + nb[n - 1], DIG_THREADS, 0, st>>>(b);
    return (int)cudaGetLastError();
}
