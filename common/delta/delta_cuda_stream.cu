/* delta_cuda_stream.cu: the encoder as two streaming kernels around the
 * segmented scan (delta_cuda.h, WSYNC_DELTA_GPU=v5). The one pass
 * (delta_cuda_pass.cu) ties each chunk to the chunks before it: a block
 * waits in its look-back for the count of every earlier chunk, then
 * writes, and loads nothing meanwhile. Here no warp waits for another:
 *
 *  1. count: each warp compares 2 KiB of each version (four 16-byte loads
 *     a lane, in flight together), places each lane's changed elements
 *     with two warp scans (two loads' counts packed in each), writes its
 *     chunk's count and the chunk's first CAP changed values (1/8 of its
 *     elements, 256 bytes at every width) and the first ICAP of their
 *     indices in the chunk (1/16: a form of pairs is not chosen above that
 *     density) into the chunk's own slot of `held`, gathered in shared
 *     memory and written in whole sectors; its bitmap words only when the
 *     chunk changed more than ICAP (below that its held indices are the
 *     bitmap);
 *  2. the segmented scan of the chunk counts in one launch (its last
 *     block scans the segments; delta_cuda_fast.cu);
 *  3. write: picks the form from the total on the device (delta_form.h's
 *     rule, the host's), writes the header, and each warp takes 32
 *     chunks, copies their held values (and indices) to their place on the
 *     wire in one coalesced sweep; a chunk that changed more than it holds
 *     reads its values from next again through its bitmap words. The
 *     bitmap form's words are the scratch's or, for a chunk that kept them
 *     in its indices, set from those.
 *
 * Nothing waits for the host between the kernels, and the host does not
 * wait for the stream: the write's last block posts the total to host
 * memory mapped for the device (delta_gpu.c). Extra traffic over the one
 * pass: the held values and indices, written and read once (a few percent
 * of the piece where a few percent changed). */
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

/* The 16 bytes at byte `at` of p (len bytes): as load_vec, but through the
 * non-coherent path without the streaming hint (measured on the H200: the
 * count kernel 0.557 ms against 0.573 with __ldcs at 1 GiB). */
__device__ __forceinline__ uint4 load_nc(const unsigned char *p, uint64_t at, uint64_t len)
{
    return at + 16 <= len ? __ldg((const uint4 *)(p + at)) : load_vec(p, at, len);
}

/* A lane's load u of a chunk as bitmap words: word g of the chunk holds
 * elements 32g..32g+31, TPW lanes' masks of E bits each; the first of
 * them stores it. */
template <unsigned W>
__device__ __forceinline__ void put_mask_words(const uint32_t *m, uint64_t ch, uint64_t ngroups, uint32_t *words)
{
    constexpr unsigned E = 16 / W, TPW = 32 / E, WPC = chunk_shape<W>::WPC;
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned u = 0; u < LOADS; u++) {
        const unsigned v = u * 32 + lane;
        uint32_t word = m[u] << ((v % TPW) * E);
#pragma unroll
        for (unsigned off = 1; off < TPW; off *= 2)
            word |= __shfl_xor_sync(0xffffffffu, word, off);
        if (v % TPW == 0 && ch * WPC + v / TPW < ngroups)
            words[ch * WPC + v / TPW] = word;
    }
}

/* Chunk ch of the count kernel, its 2 x LOADS loads in a and b: its count,
 * its first CAP values and ICAP indices into the warp's stage, then out to
 * held in whole sectors, and (over ICAP) its bitmap words. The lanes'
 * positions come from two scans, each over two loads' counts packed in 16
 * bits (a warp's load holds at most 512 elements). One warp. */
template <typename T>
__device__ __forceinline__ void count_chunk(const uint4 *a, const uint4 *b, uint64_t ch, uint64_t ngroups,
                                            uint32_t *words, unsigned long long *counts, unsigned char *held_vals,
                                            uint16_t *held_idx, uint4 *st)
{
    constexpr unsigned W = sizeof(T), E = 16 / W, CAP = chunk_shape<W>::CAP, ICAP = chunk_shape<W>::ICAP;
    constexpr unsigned VBYTES = WSYNC_DELTA_CUDA_HELD_VALS;
    static_assert(LOADS == 4, "two packed scans of two loads each");
    const unsigned lane = threadIdx.x & 31;
    T *vals = (T *)st;
    uint16_t *idx = (uint16_t *)((unsigned char *)st + VBYTES);
    uint32_t m[LOADS];
#pragma unroll
    for (unsigned u = 0; u < LOADS; u++)
        m[u] = diff_bits<W>(a[u], b[u]);
    const unsigned p01 = __popc(m[0]) | __popc(m[1]) << 16, p23 = __popc(m[2]) | __popc(m[3]) << 16;
    const unsigned i01 = warp_inclusive(p01), i23 = warp_inclusive(p23);
    const unsigned t01 = __shfl_sync(0xffffffffu, i01, 31), t23 = __shfl_sync(0xffffffffu, i23, 31);
    const unsigned tot[LOADS] = {t01 & 0xffff, t01 >> 16, t23 & 0xffff, t23 >> 16}; /* the warp's, a load */
    const unsigned excl[LOADS] = {(i01 - p01) & 0xffff, (i01 - p01) >> 16, (i23 - p23) & 0xffff, (i23 - p23) >> 16};
    const unsigned run = tot[0] + tot[1] + tot[2] + tot[3];
    unsigned before = 0; /* the chunk's changed elements before load u */
#pragma unroll
    for (unsigned u = 0; u < LOADS; u++) {
        const unsigned v = u * 32 + lane; /* the lane's 16 bytes in the chunk */
        uint32_t mm = m[u];
        unsigned at = before + excl[u];
        before += tot[u];
        while (mm != 0 && at < CAP) {
            const unsigned j = __ffs(mm) - 1;
            mm &= mm - 1;
            vals[at] = (T)elem<W>(b[u], j);
            if (at < ICAP)
                idx[at] = (uint16_t)(v * E + j);
            at++;
        }
    }
    if (lane == 0)
        counts[ch] = run;
    __syncwarp();
    const unsigned kv = run < CAP ? run : CAP, ki = run < ICAP ? run : ICAP;
    const unsigned nv = (kv * W + 31) / 32 * 2, ni = (ki * 2 + 31) / 32 * 2; /* 16-byte units */
    for (unsigned q = lane; q < nv + ni; q += 32) {
        const unsigned from = q < nv ? q : VBYTES / 16 + (q - nv);
        uint4 *to = q < nv ? (uint4 *)(held_vals + ch * VBYTES) + q : (uint4 *)(held_idx + ch * ICAP) + (q - nv);
        *to = st[from];
    }
    if (run > ICAP) /* below, the held indices are the chunk's bitmap */
        put_mask_words<W>(m, ch, ngroups, words);
    __syncwarp(); /* the stage is read before the next chunk writes it */
}

template <typename T>
__global__ void __launch_bounds__(NT)
    stream_count_kernel(const unsigned char *base, const unsigned char *next, uint64_t n, uint32_t *words,
                        unsigned long long *counts, unsigned char *held_vals, uint16_t *held_idx, uint64_t nch,
                        unsigned *ticket)
{
    constexpr unsigned ICAP = chunk_shape<sizeof(T)>::ICAP;
    /* the warp's held values and indices, gathered here and written out in
     * whole 32-byte sectors (element stores straight to memory would make
     * it read each partly written sector first) */
    __shared__ uint4 stage[NT / 32][(WSYNC_DELTA_CUDA_HELD_VALS + 2 * ICAP) / 16];
    const unsigned lane = threadIdx.x & 31;
    const uint64_t len = n * sizeof(T), ngroups = (n + 31) / 32;
    const uint64_t warps = (uint64_t)gridDim.x * (NT / 32);
    uint64_t ch = ((uint64_t)blockIdx.x * NT + threadIdx.x) / 32;
    if (ticket != NULL && ch == 0 && lane == 0)
        ticket[0] = ticket[1] = 0; /* the write's and the scan's, which run after this kernel */
    for (; ch < nch; ch += warps) {
        uint4 a[LOADS], b[LOADS];
#pragma unroll
        for (unsigned u = 0; u < LOADS; u++) { /* every load first: 2 x LOADS x 16 bytes in flight */
            const uint64_t at = (ch * 32 * LOADS + u * 32 + lane) * 16;
            a[u] = load_nc(base, at, len);
            b[u] = load_nc(next, at, len);
        }
        count_chunk<T>(a, b, ch, ngroups, words, counts, held_vals, held_idx, stage[threadIdx.x / 32]);
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

/* The unsigned integer of NB bytes: a group's values stored as one
 * element (store_elem). */
template <unsigned NB> struct group_word;
template <> struct group_word<1> {
    typedef uint8_t type;
};
template <> struct group_word<2> {
    typedef uint16_t type;
};
template <> struct group_word<4> {
    typedef uint32_t type;
};
template <> struct group_word<8> {
    typedef unsigned long long type;
};

/* Every held value of a run of 32 chunks (o[]: their 33 offsets on the
 * wire) but those of the chunks in `over`, in one coalesced sweep. The
 * sweep goes by groups of P values that share a P-aligned place on the
 * wire (so a group whole in the run is one store of P values, and, in the
 * pairs form, P indices in 8-byte stores; a group cut by the run's ends
 * or by a chunk in `over` is stored value by value, so no two warps store
 * to one word). Value r of the run finds its chunk by a search of the
 * offsets, kept relative to the run's first in rel[] (a run holds at most
 * 32 x 2048 values), so the sweep's arithmetic is 32-bit; a lane loads
 * SWEEP groups before it stores any. hv, hi: the run's held values and
 * indices; e0 its first element. One warp. */
template <typename T, unsigned P, unsigned SWEEP>
__device__ __forceinline__ void sweep_held(const unsigned long long *o, unsigned *rel, unsigned over,
                                           const unsigned char *__restrict__ hv, const uint16_t *__restrict__ hi,
                                           uint64_t e0, unsigned char *vals, unsigned char *idx, unsigned iw)
{
    constexpr unsigned W = sizeof(T), ELEMS = chunk_shape<W>::ELEMS, ICAP = chunk_shape<W>::ICAP;
    static_assert(P * W <= 8, "a group's values in one 8-byte store");
    const unsigned lane = threadIdx.x & 31;
    rel[lane] = (unsigned)(o[lane] - o[0]);
    if (lane == 31)
        rel[32] = (unsigned)(o[32] - o[0]);
    __syncwarp();
    const unsigned nrun = rel[32], lead = (unsigned)(o[0] % P); /* the run's first value's place in its group */
    const unsigned ngrp = (lead + nrun + P - 1) / P;
    unsigned char *vgrp = vals + (o[0] - lead) * W, *igrp = idx != NULL ? idx + (o[0] - lead) * iw : NULL;
    for (unsigned g0 = lane; g0 < ngrp; g0 += 32 * SWEEP) {
        T v[SWEEP][P];
        unsigned e[SWEEP][P]; /* the element, from e0 */
        unsigned ok[SWEEP];   /* bit i: value i of group g0 + 32q is one to put */
#pragma unroll
        for (unsigned q = 0; q < SWEEP; q++) { /* every load first, SWEEP groups in flight */
            ok[q] = 0;
            unsigned j = 0; /* the chunk of value r: rel[j] <= r < rel[j + 1] */
#pragma unroll
            for (unsigned i = 0; i < P; i++) {
                const int ri = (int)((g0 + 32 * q) * P + i) - (int)lead;
                if (ri < 0 || (unsigned)ri >= nrun)
                    continue;
                const unsigned r = (unsigned)ri;
                if (i == 0 || r == 0 || j == 0) {
#pragma unroll
                    for (unsigned step = 16; step > 0; step /= 2)
                        if (rel[j + step] <= r)
                            j += step;
                } else
                    while (rel[j + 1] <= r)
                        j++;
                if (over >> j & 1)
                    continue;
                const unsigned k = r - rel[j];
                ok[q] |= 1u << i;
                v[q][i] = __ldg((const T *)(hv + j * WSYNC_DELTA_CUDA_HELD_VALS) + k);
                e[q][i] = igrp != NULL ? j * ELEMS + __ldg(hi + j * ICAP + k) : 0;
            }
        }
#pragma unroll
        for (unsigned q = 0; q < SWEEP; q++) {
            const unsigned g = g0 + 32 * q;
            if (ok[q] == (1u << P) - 1) { /* the whole group: one store of values, indices by pairs */
                typedef typename group_word<P * W>::type G;
                G bits = 0;
#pragma unroll
                for (unsigned i = 0; i < P; i++)
                    bits |= (G)((G)v[q][i] << (8 * W * i));
                store_elem<G>(vgrp + (uint64_t)g * P * W, bits);
                if (igrp != NULL) {
                    unsigned char *at = igrp + (uint64_t)g * P * iw;
#pragma unroll
                    for (unsigned i = 0; i < P; i += 2)
                        if (i + 1 < P && iw == 4 && ((uintptr_t)at & 7) == 0)
                            *(unsigned long long *)(at + i * 4) = (e0 + e[q][i]) | (e0 + e[q][i + 1]) << 32;
                        else
                            for (unsigned h = i; h < i + 2 && h < P; h++)
                                store_index(at, iw, h, e0 + e[q][h]);
                }
                continue;
            }
#pragma unroll
            for (unsigned i = 0; i < P; i++)
                if (ok[q] >> i & 1) {
                    store_elem<T>(vgrp + ((uint64_t)g * P + i) * W, v[q][i]);
                    if (igrp != NULL)
                        store_index(igrp, iw, (uint64_t)g * P + i, e0 + e[q][i]);
                }
        }
    }
}

/* The wire of a form other than full at out: block 0 writes the header; a
 * warp takes 32 consecutive chunks at a time, whose values are one run on
 * the wire: it learns their offsets (a lane each), copies every held value
 * of the run in one coalesced sweep (sweep_held), gathers the chunks that
 * changed more than they hold, and, in the bitmap form, writes their
 * words. */
template <typename T, unsigned P, unsigned SWEEP>
__device__ __forceinline__ void
write_runs(const T *__restrict__ next, uint64_t n, const uint32_t *__restrict__ words,
           const unsigned long long *__restrict__ offsets, const unsigned long long *__restrict__ seg,
           const unsigned char *__restrict__ held_vals, const uint16_t *__restrict__ held_idx, uint64_t nch,
           unsigned char *out, unsigned long long c, unsigned form)
{
    constexpr unsigned W = sizeof(T), ELEMS = chunk_shape<W>::ELEMS, CAP = chunk_shape<W>::CAP;
    constexpr unsigned ICAP = chunk_shape<W>::ICAP, WPC = chunk_shape<W>::WPC;
    __shared__ unsigned long long offs[NT / 32][33];
    __shared__ unsigned rel[NT / 32][33];
    __shared__ uint32_t wshare[NT / 32][WPC];
    const unsigned iw = wsync_delta_index_width(n);
    const uint64_t bm = (n + 7) / 8, payload = wsync_delta_form_bytes(form, n, c, W) - WSYNC_DELTA_HEADER;
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
        sweep_held<T, P, SWEEP>(o, rel[threadIdx.x / 32], over, held_vals + c0 * WSYNC_DELTA_CUDA_HELD_VALS,
                                held_idx + c0 * ICAP, c0 * ELEMS, vals, idx, iw);
        for (unsigned m = over; m != 0; m &= m - 1) {
            const unsigned j = __ffs(m) - 1;
            gather_chunk<T>(next, ngroups, words, c0 + j, o[j], vals, idx, iw, c);
        }
        if (form == 1)
            put_words<W>(words, held_idx, o, c0, nch, ngroups, pay, bm, wshare[threadIdx.x / 32]);
        __syncwarp(); /* o[] is read before the next run writes it */
    }
}

/* The wire at out in the form the total picks (nothing for the full form,
 * which the host copies); then, with done != NULL (host memory mapped for
 * the device), the last block to finish writes the total + 1 there, after
 * every block's writes (the ticket is zeroed by the count kernel). */
template <typename T, unsigned P, unsigned SWEEP>
__global__ void __launch_bounds__(NT)
    stream_write_kernel(const T *__restrict__ next, uint64_t n, const uint32_t *__restrict__ words,
                        const unsigned long long *__restrict__ offsets, const unsigned long long *__restrict__ seg,
                        const unsigned long long *__restrict__ total, const unsigned char *__restrict__ held_vals,
                        const uint16_t *__restrict__ held_idx, uint64_t nch, unsigned char *out, unsigned *ticket,
                        volatile unsigned long long *done)
{
    const unsigned long long c = *total;
    const unsigned form = wsync_delta_choose(n, c, sizeof(T));
    if (form != 0)
        write_runs<T, P, SWEEP>(next, n, words, offsets, seg, held_vals, held_idx, nch, out, c, form);
    if (done != NULL) {
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(ticket, 1) == gridDim.x - 1)
            *done = c + 1;
    }
}

template <typename T>
static int launch_count(const void *base, const void *next, uint64_t n, uint32_t *words,
                        unsigned long long *counts, unsigned char *held, unsigned *ticket, cudaStream_t s)
{
    static unsigned res;
    const uint64_t nch = wsync_delta_cuda_wchunks(n * sizeof(T));
    unsigned grid = resident_grid((const void *)stream_count_kernel<T>, NT, &res, (nch + NT / 32 - 1) / (NT / 32));
    stream_count_kernel<T><<<grid, NT, 0, s>>>((const unsigned char *)base, (const unsigned char *)next, n, words,
                                               counts, held, (uint16_t *)(held + nch * WSYNC_DELTA_CUDA_HELD_VALS),
                                               nch, ticket);
    return (int)cudaGetLastError();
}

/* The write's groups (P values a lane stores at once) and sweep (groups a
 * lane loads before it stores any) by width. Measured on the H200, 1 GiB at
 * 2% changed, the write kernel alone: width 1 0.134 ms with single values
 * (P 1, 4 in flight) -> 0.097 with groups of 4 (2 in flight); bf16 0.069
 * -> 0.063 (bench/RESULTS.md 2026-12-04, evening). Other widths keep
 * single values (not measured with groups). */
template <typename T> constexpr unsigned write_group = sizeof(T) <= 2 ? 4 : 1;
template <typename T> constexpr unsigned write_sweep = sizeof(T) <= 2 ? 2 : 4;

template <typename T>
static int launch_write(const void *next, uint64_t n, const uint32_t *words, const unsigned long long *offsets,
                        const unsigned long long *seg, const unsigned long long *total, const unsigned char *held,
                        unsigned char *out, unsigned *ticket, unsigned long long *done, cudaStream_t s)
{
    constexpr unsigned P = write_group<T>, SWEEP = write_sweep<T>;
    static unsigned res;
    const uint64_t nch = wsync_delta_cuda_wchunks(n * sizeof(T));
    unsigned grid = resident_grid((const void *)stream_write_kernel<T, P, SWEEP>, NT, &res, (nch + NT - 1) / NT);
    stream_write_kernel<T, P, SWEEP>
        <<<grid, NT, 0, s>>>((const T *)next, n, words, offsets, seg, total, held,
                             (const uint16_t *)(held + nch * WSYNC_DELTA_CUDA_HELD_VALS), nch, out, ticket, done);
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
                                             unsigned *ticket, void *stream)
{
    if (n == 0)
        return 0;
    if ((uintptr_t)base % 16 != 0 || (uintptr_t)next % 16 != 0 || (uintptr_t)held % 16 != 0)
        return (int)cudaErrorInvalidValue;
#define C(T) launch_count<T>(base, next, n, words, counts, held, ticket, (cudaStream_t)stream)
    STREAM_BY_WIDTH(w, C)
#undef C
}

extern "C" int wsync_delta_cuda_stream_write(const void *next, uint64_t n, unsigned w, const uint32_t *words,
                                             const unsigned long long *offsets, const unsigned long long *seg,
                                             const unsigned long long *total, const unsigned char *held,
                                             unsigned char *out, unsigned *ticket, unsigned long long *done,
                                             void *stream)
{
    if (n == 0)
        return 0;
    if ((uintptr_t)out % 8 != 0)
        return (int)cudaErrorInvalidValue;
#define C(T) launch_write<T>(next, n, words, offsets, seg, total, held, out, ticket, done, (cudaStream_t)stream)
    STREAM_BY_WIDTH(w, C)
#undef C
}
