/* delta_cuda_stream.cu: the encoder as two streaming kernels around the
 * segmented scan (delta_cuda.h, WSYNC_DELTA_GPU=v5). The one pass
 * (delta_cuda_pass.cu) ties each chunk to the chunks before it: a block
 * waits in its look-back for the count of every earlier chunk, then
 * writes, and loads nothing meanwhile. Here no warp waits for another:
 *
 *  1. count: each warp compares 2 KiB of each version (four 16-byte loads
 *     a lane, in flight together), writes its chunk's count and the
 *     chunk's first CAP changed values (1/8 of its elements, 256 bytes at
 *     every width) and the first ICAP of their indices in the chunk (1/16:
 *     a form of pairs is not chosen above that density) into the chunk's
 *     own slot of `held`, gathered in shared memory and written in whole
 *     sectors; its bitmap words only when the chunk changed more than
 *     ICAP (below that its held indices are the bitmap);
 *  2. the segmented scan of the chunk counts (delta_cuda_fast.cu);
 *  3. write: picks the form from the total on the device (delta_form.h's
 *     rule, the host's), writes the header, and each warp takes 32
 *     chunks, copies their held values (and indices) to their place on the
 *     wire in one coalesced sweep; a chunk that changed more than it holds
 *     reads its values from next again through its bitmap words. The
 *     bitmap form's words are the scratch's or, for a chunk that kept them
 *     in its indices, set from those.
 *
 * Nothing waits for the host between the kernels: it reads the total back
 * once, after the write. Extra traffic over the one pass: the held values
 * and indices, written and read once (a few percent of the piece where a
 * few percent changed). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/delta/delta_cuda.cuh"
#include "common/delta/delta_cuda.h"
#include "common/delta/delta_form.h"

#define NT 256  /* threads a block */
#define LOADS 4 /* 16-byte loads of each version a lane, per chunk */
static_assert(WSYNC_DELTA_CUDA_WCHUNK == 32 * LOADS * 16, "a warp's chunk: 32 lanes x LOADS x 16 bytes");

/* Elements of width W in a chunk, the chunk's held values (CAP) and
 * indices (ICAP). */
template <unsigned W> struct chunk_shape {
    static constexpr unsigned ELEMS = WSYNC_DELTA_CUDA_WCHUNK / W;
    static constexpr unsigned CAP = WSYNC_DELTA_CUDA_HELD_VALS / W;
    static constexpr unsigned ICAP = ELEMS / 16;
    static constexpr unsigned WPC = ELEMS / 32; /* bitmap words */
};

template <typename T>
__global__ void __launch_bounds__(NT)
    stream_count_kernel(const unsigned char *base, const unsigned char *next, uint64_t n, uint32_t *words,
                        unsigned long long *counts, unsigned char *held_vals, uint16_t *held_idx, uint64_t nch)
{
    constexpr unsigned W = sizeof(T), E = 16 / W, TPW = 32 / E, CAP = chunk_shape<W>::CAP;
    constexpr unsigned ICAP = chunk_shape<W>::ICAP, WPC = chunk_shape<W>::WPC;
    constexpr unsigned VBYTES = WSYNC_DELTA_CUDA_HELD_VALS, IBYTES = 2 * ICAP;
    /* the warp's held values, indices and bitmap words, gathered here and
     * written out in whole 32-byte sectors (element stores straight to
     * memory would make it read each partly written sector first) */
    __shared__ uint4 stage[NT / 32][(VBYTES + IBYTES + 4 * WPC) / 16];
    const unsigned lane = threadIdx.x & 31;
    const uint64_t len = n * W, ngroups = (n + 31) / 32;
    const uint64_t warps = (uint64_t)gridDim.x * (NT / 32);
    T *vals = (T *)stage[threadIdx.x / 32];
    uint16_t *idx = (uint16_t *)((unsigned char *)stage[threadIdx.x / 32] + VBYTES);
    uint32_t *wsh = (uint32_t *)((unsigned char *)stage[threadIdx.x / 32] + VBYTES + IBYTES);
    for (uint64_t ch = ((uint64_t)blockIdx.x * NT + threadIdx.x) / 32; ch < nch; ch += warps) {
        const uint64_t v0 = ch * 32 * LOADS;
        uint4 a[LOADS], b[LOADS];
#pragma unroll
        for (unsigned u = 0; u < LOADS; u++) { /* every load first: 2 x LOADS x 16 bytes in flight */
            const uint64_t at = (v0 + u * 32 + lane) * 16;
            a[u] = load_vec(base, at, len);
            b[u] = load_vec(next, at, len);
        }
        unsigned run = 0; /* changed elements of the chunk before load u (the same on every lane) */
#pragma unroll
        for (unsigned u = 0; u < LOADS; u++) {
            const unsigned v = u * 32 + lane; /* the lane's 16 bytes in the chunk */
            uint32_t m = diff_bits<W>(a[u], b[u]);
            uint32_t word = m << ((v % TPW) * E);
#pragma unroll
            for (unsigned off = 1; off < TPW; off *= 2)
                word |= __shfl_xor_sync(0xffffffffu, word, off);
            if (v % TPW == 0)
                wsh[v / TPW] = word;
            const unsigned incl = warp_inclusive(__popc(m));
            unsigned at = run + incl - __popc(m);
            while (m != 0 && at < CAP) {
                const unsigned j = __ffs(m) - 1;
                m &= m - 1;
                vals[at] = (T)elem<W>(b[u], j);
                if (at < ICAP)
                    idx[at] = (uint16_t)(v * E + j);
                at++;
            }
            run += __shfl_sync(0xffffffffu, incl, 31);
        }
        if (lane == 0)
            counts[ch] = run;
        __syncwarp();
        const unsigned kv = run < CAP ? run : CAP, ki = run < ICAP ? run : ICAP;
        const unsigned nv = (kv * W + 31) / 32 * 2, ni = (ki * 2 + 31) / 32 * 2; /* 16-byte units */
        for (unsigned q = lane; q < nv + ni; q += 32) {
            const unsigned from = q < nv ? q : VBYTES / 16 + (q - nv);
            uint4 *to = q < nv ? (uint4 *)(held_vals + ch * VBYTES) + q : (uint4 *)(held_idx + ch * ICAP) + (q - nv);
            *to = stage[threadIdx.x / 32][from];
        }
        if (run > ICAP)
            for (unsigned q = lane; q < WPC && ch * WPC + q < ngroups; q += 32)
                words[ch * WPC + q] = wsh[q];
        __syncwarp(); /* the stage is read before the next chunk writes it */
    }
}

/* Element e's value at k (vals) and, while k < idx_fit, its index. */
template <typename T>
__device__ __forceinline__ void put_one(T v, uint64_t e, uint64_t k, unsigned char *vals, unsigned char *idx,
                                        unsigned iw, uint64_t idx_fit)
{
    store_elem<T>(vals + k * sizeof(T), v);
    if (idx != NULL && k < idx_fit)
        store_index(idx, iw, k, e);
}

/* The values (and indices) of chunk ch, which changed more than it holds:
 * read from next through its bitmap words, written from `at` on. One warp. */
template <typename T>
__device__ __forceinline__ void gather_chunk(const T *__restrict__ next, uint64_t ngroups,
                                             const uint32_t *__restrict__ words, uint64_t ch, unsigned long long at,
                                             unsigned char *vals, unsigned char *idx, unsigned iw, uint64_t idx_fit)
{
    constexpr unsigned WPC = chunk_shape<sizeof(T)>::ELEMS / 32; /* bitmap words of a chunk */
    const unsigned lane = threadIdx.x & 31;
    for (unsigned r = 0; r < (WPC + 31) / 32; r++) {
        const unsigned k = r * 32 + lane;
        const uint64_t g = ch * WPC + k;
        uint32_t m = k < WPC && g < ngroups ? words[g] : 0;
        const unsigned incl = warp_inclusive(__popc(m));
        unsigned long long to = at + incl - __popc(m);
        while (m != 0) {
            const unsigned j = __ffs(m) - 1;
            m &= m - 1;
            put_one<T>(next[g * 32 + j], g * 32 + j, to++, vals, idx, iw, idx_fit);
        }
        at += __shfl_sync(0xffffffffu, incl, 31);
    }
}

/* The bitmap form's words of the 32 chunks from c0 (o[]: their values'
 * offsets), from byte 4g of the wire's bitmap (bm bytes): a chunk that
 * changed more than its ICAP held indices has its words in the scratch;
 * the others' are set from those indices, in wsh (the warp's WPC words). */
template <unsigned W>
__device__ __forceinline__ void put_words(const uint32_t *__restrict__ words, const uint16_t *__restrict__ held_idx,
                                          const unsigned long long *o, uint64_t c0, uint64_t nch, uint64_t ngroups,
                                          unsigned char *bitmap, uint64_t bm, uint32_t *wsh)
{
    constexpr unsigned ICAP = chunk_shape<W>::ICAP, WPC = chunk_shape<W>::WPC;
    const unsigned lane = threadIdx.x & 31;
    for (unsigned j = 0; j < 32 && c0 + j < nch; j++) {
        const uint64_t ch = c0 + j;
        const unsigned long long cnt = o[j + 1] - o[j];
        for (unsigned q = lane; q < WPC; q += 32)
            wsh[q] = cnt > ICAP && ch * WPC + q < ngroups ? words[ch * WPC + q] : 0;
        __syncwarp();
        if (cnt <= ICAP)
            for (unsigned q = lane; q < cnt; q += 32) {
                const unsigned e = held_idx[ch * ICAP + q];
                atomicOr(&wsh[e / 32], 1u << (e % 32));
            }
        __syncwarp();
        for (unsigned q = lane; q < WPC && ch * WPC + q < ngroups; q += 32) {
            const uint64_t at = (ch * WPC + q) * 4;
            if (at + 4 <= bm)
                *(uint32_t *)(bitmap + at) = wsh[q];
            else
                for (unsigned k = 0; at + k < bm; k++)
                    bitmap[at + k] = (unsigned char)(wsh[q] >> (8 * k));
        }
        __syncwarp(); /* wsh is read before the next chunk sets it */
    }
}

/* The wire at out in the form the total picks (nothing for the full form,
 * which the host copies): block 0 writes the header; a warp takes 32
 * consecutive chunks at a time, whose values are one run on the wire: it
 * learns their offsets (a lane each), copies every held value of the run
 * in one coalesced sweep (value k of the run: its chunk found by a search
 * of the 33 offsets), gathers the chunks that changed more than they hold,
 * and, in the bitmap form, writes their words. */
template <typename T>
__global__ void __launch_bounds__(NT)
    stream_write_kernel(const T *__restrict__ next, uint64_t n, const uint32_t *__restrict__ words,
                        const unsigned long long *__restrict__ offsets, const unsigned long long *__restrict__ seg,
                        const unsigned long long *__restrict__ total, const unsigned char *__restrict__ held_vals,
                        const uint16_t *__restrict__ held_idx, uint64_t nch, unsigned char *out)
{
    constexpr unsigned W = sizeof(T), ELEMS = chunk_shape<W>::ELEMS, CAP = chunk_shape<W>::CAP;
    constexpr unsigned ICAP = chunk_shape<W>::ICAP, WPC = chunk_shape<W>::WPC;
    __shared__ unsigned long long offs[NT / 32][33];
    __shared__ uint32_t wshare[NT / 32][WPC];
    const unsigned long long c = *total;
    const unsigned form = wsync_delta_choose(n, c, W), iw = wsync_delta_index_width(n);
    const uint64_t bm = (n + 7) / 8, payload = wsync_delta_form_bytes(form, n, c, W) - WSYNC_DELTA_HEADER;
    if (form == 0)
        return;
    unsigned char *pay = out + WSYNC_DELTA_HEADER, *idx = form == 2 ? pay : NULL;
    unsigned char *vals = form == 2 ? pay + c * iw : pay + bm;
    if (blockIdx.x == 0 && threadIdx.x < WSYNC_DELTA_HEADER / 8) /* little-endian, as the host's bytes */
        ((uint64_t *)out)[threadIdx.x] = wsync_delta_header_field(threadIdx.x, form, W, form == 2 ? iw : 0, n * W,
                                                                  c, payload);
    unsigned long long *o = offs[threadIdx.x / 32];
    const unsigned lane = threadIdx.x & 31;
    const uint64_t ngroups = (n + 31) / 32, warps = (uint64_t)gridDim.x * (NT / 32);
    for (uint64_t c0 = ((uint64_t)blockIdx.x * NT + threadIdx.x) / 32 * 32; c0 < nch; c0 += warps * 32) {
        const uint64_t ch = c0 + lane;
        o[lane] = ch < nch ? scanned_offset(offsets, seg, ch) : c;
        if (lane == 31)
            o[32] = ch + 1 < nch ? scanned_offset(offsets, seg, ch + 1) : c;
        __syncwarp();
        const unsigned long long mine = o[lane + 1] - o[lane];
        const unsigned over = __ballot_sync(0xffffffffu, mine > (idx != NULL ? ICAP : CAP));
#pragma unroll 4
        for (unsigned long long f = o[0] + lane; f < o[32]; f += 32) {
            unsigned j = 0; /* the chunk of value f: o[j] <= f < o[j + 1] */
#pragma unroll
            for (unsigned step = 16; step > 0; step /= 2)
                if (o[j + step] <= f)
                    j += step;
            if (over >> j & 1)
                continue;
            const unsigned k = (unsigned)(f - o[j]);
            const T v = ((const T *)(held_vals + (c0 + j) * WSYNC_DELTA_CUDA_HELD_VALS))[k];
            put_one<T>(v, (c0 + j) * ELEMS + (idx != NULL ? held_idx[(c0 + j) * ICAP + k] : 0), f, vals, idx, iw, c);
        }
        for (unsigned m = over; m != 0; m &= m - 1) {
            const unsigned j = __ffs(m) - 1;
            gather_chunk<T>(next, ngroups, words, c0 + j, o[j], vals, idx, iw, c);
        }
        if (form == 1)
            put_words<W>(words, held_idx, o, c0, nch, ngroups, pay, bm, wshare[threadIdx.x / 32]);
        __syncwarp(); /* o[] is read before the next run writes it */
    }
}

template <typename T>
static int launch_count(const void *base, const void *next, uint64_t n, uint32_t *words,
                        unsigned long long *counts, unsigned char *held, cudaStream_t s)
{
    static unsigned res;
    const uint64_t nch = wsync_delta_cuda_wchunks(n * sizeof(T));
    unsigned grid = resident_grid((const void *)stream_count_kernel<T>, NT, &res, (nch + NT / 32 - 1) / (NT / 32));
    stream_count_kernel<T><<<grid, NT, 0, s>>>((const unsigned char *)base, (const unsigned char *)next, n, words,
                                               counts, held, (uint16_t *)(held + nch * WSYNC_DELTA_CUDA_HELD_VALS),
                                               nch);
    return (int)cudaGetLastError();
}

template <typename T>
static int launch_write(const void *next, uint64_t n, const uint32_t *words, const unsigned long long *offsets,
                        const unsigned long long *seg, const unsigned long long *total, const unsigned char *held,
                        unsigned char *out, cudaStream_t s)
{
    static unsigned res;
    const uint64_t nch = wsync_delta_cuda_wchunks(n * sizeof(T));
    unsigned grid = resident_grid((const void *)stream_write_kernel<T>, NT, &res, (nch + NT - 1) / NT);
    stream_write_kernel<T><<<grid, NT, 0, s>>>((const T *)next, n, words, offsets, seg, total, held,
                                               (const uint16_t *)(held + nch * WSYNC_DELTA_CUDA_HELD_VALS), nch,
                                               out);
    return (int)cudaGetLastError();
}

#define STREAM_BY_WIDTH(w, CALL)                \
    switch (w) {                                \
    case 1: return CALL(uint8_t);               \
    case 2: return CALL(uint16_t);              \
    case 4: return CALL(uint32_t);              \
    case 8: return CALL(unsigned long long);    \
    default: return (int)cudaErrorInvalidValue; \
    }

extern "C" int wsync_delta_cuda_stream_count(const void *base, const void *next, uint64_t n, unsigned w,
                                             uint32_t *words, unsigned long long *counts, unsigned char *held,
                                             void *stream)
{
    if (n == 0)
        return 0;
    if ((uintptr_t)base % 16 != 0 || (uintptr_t)next % 16 != 0 || (uintptr_t)held % 16 != 0)
        return (int)cudaErrorInvalidValue;
#define C(T) launch_count<T>(base, next, n, words, counts, held, (cudaStream_t)stream)
    STREAM_BY_WIDTH(w, C)
#undef C
}

extern "C" int wsync_delta_cuda_stream_write(const void *next, uint64_t n, unsigned w, const uint32_t *words,
                                             const unsigned long long *offsets, const unsigned long long *seg,
                                             const unsigned long long *total, const unsigned char *held,
                                             unsigned char *out, void *stream)
{
    if (n == 0)
        return 0;
    if ((uintptr_t)out % 8 != 0)
        return (int)cudaErrorInvalidValue;
#define C(T) launch_write<T>(next, n, words, offsets, seg, total, held, out, (cudaStream_t)stream)
    STREAM_BY_WIDTH(w, C)
#undef C
}
