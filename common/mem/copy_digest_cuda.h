/* copy_digest_cuda.h: a device copy that computes the piece digest
 * (digest.h) of the bytes it writes while it copies: the source is read
 * once, the destination written once, and the sum comes out of the same
 * registers that are stored, so it is the destination's digest without a
 * second pass over it. Only built with CUDA (WSYNC_HAVE_CUDA); callers are
 * the CUDA memory backend (fan-out jobs), the local transport (landing on
 * one GPU) and the benchmarks. */
#ifndef WSYNC_COMMON_COPY_DIGEST_CUDA_H
#define WSYNC_COMMON_COPY_DIGEST_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copies `len` bytes src -> dst and adds wsync_digest_sum(dst, len, off)
 * into the device word *dsum (mod 2^64), asynchronously on `stream` (a
 * cudaStream_t). dst and src are device memory the current device can
 * reach (its own, or a peer's through a mapping; the kernel reads the
 * source with loads, so a peer's bytes cross the link once). The ranges
 * must not overlap. Source and destination at the same address modulo 8
 * take the fused kernel (16-byte vectors when also equal modulo 16); any
 * other alignment is copied by cudaMemcpyAsync and then digested by the
 * digest kernel (the same value, two passes). Returns a cudaError_t as int
 * (0 = queued). */
int wsync_cuda_copy_digest_async(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dsum, void *stream);

/* The same with the kernel's shape chosen by the caller, for the benchmark
 * that picks it: `unroll` vectors in flight per thread (1, 2, 4 or 8),
 * `blocks_per_sm` blocks of 256 threads per SM (1..8) (0 takes the default
 * of each), and stores plain (0) or with the streaming hint (1). */
int wsync_cuda_copy_digest_shape_async(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dsum,
                                       void *stream, int unroll, int blocks_per_sm, int streaming_stores);

/* A kernel shape for the benchmark that compares them
 * (bench/gpu_copy_variants_bench): kind 0 is the library's kernel
 * (wsync_cuda_copy_digest_shape_async with unroll, blocks_per_sm,
 * streaming_stores); kind 1 tiles of 256 x unroll vectors walked by the
 * grid (unroll 4 copy only or digested, 8 with l2_hint: loads with the L2
 * 256-byte prefetch hint, 4 with streaming stores); kind 3 the bulk-copy
 * unit (TMA), unroll 0 or 1 picking stages of 32 or 16 KiB, copy only or
 * digested. copy_only: the copy without the digest (no sum). */
typedef struct wsync_cd_variant {
    int kind, unroll, blocks_per_sm, streaming_stores, l2_hint, copy_only;
} wsync_cd_variant_t;

/* wsync_cuda_copy_digest_async in shape `v`: source and destination equal
 * modulo 16, source at a multiple of 8, 16 bytes or more (else
 * cudaErrorInvalidValue, as int). */
int wsync_cuda_copy_digest_variant_async(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dsum,
                                         void *stream, const wsync_cd_variant_t *v);

/* The same copy, its sum delivered without a memset before it or a copy
 * after it: *dacc and *dcount are device words at 0 (zeroed once, when
 * allocated); the kernel's last block stores the digest sum of the bytes
 * written into *hout, a word the device can write (mapped pinned host
 * memory, from cudaHostGetDevicePointer, or device memory), and puts *dacc
 * and *dcount back to 0. So launches in one stream reuse the same dacc and
 * dcount, and the put is one kernel on the stream: each small operation
 * between two 64 MiB copies was a bubble (the local transport's landing ran
 * at 1.31 TB/s with a memset and an 8-byte copy around each kernel). *hout
 * is valid once an event recorded after the call has completed. len 0 and
 * other alignments (copy engine, then the digest kernel) deliver the same
 * way. Returns a cudaError_t as int (0 = queued). */
int wsync_cuda_copy_digest_out_async(void *dst, const void *src, size_t len, uint64_t off, uint64_t *dacc,
                                     unsigned int *dcount, uint64_t *hout, void *stream);

/* One piece of a batch: copy len bytes src -> dst, its digest (keyed
 * `off`) to *hout as in wsync_cuda_copy_digest_out_async. */
typedef struct wsync_cd_piece {
    void *dst;
    const void *src;
    size_t len;
    uint64_t off;
    uint64_t *hout;
} wsync_cd_piece_t;

#define WSYNC_CD_BATCH_MAX 16 /* pieces per batch launch */

/* Up to WSYNC_CD_BATCH_MAX pieces in one kernel launch, each with its own
 * sum: dacc[i] and dcount[i] (device words at 0, left at 0) serve piece i.
 * Back-to-back launches of 64 MiB each cost the landing ~8 us a piece on
 * an H200 over the kernel's rate (a launch, its event, its tail); one
 * launch over several pieces pays that once. Pieces that are not all
 * 16-byte vector copies (source and destination equal modulo 16, source at
 * a multiple of 8, 16 bytes or more) go one launch each, with the same
 * result. Returns a cudaError_t as int (0 = queued). */
int wsync_cuda_copy_digest_batch_async(const wsync_cd_piece_t *p, int n, uint64_t *dacc, unsigned int *dcount,
                                       void *stream);

/* How a batch launch shares its blocks (cd_blocks.c): piece i, of nvec[i]
 * 16-byte vectors, gets blocks b0[i] .. b0[i] + nb[i] - 1 of a 1-D grid:
 * every piece at least one, none more than a thread a vector, and, when
 * the pieces want more than `budget` blocks of `threads` threads, each its
 * share of the budget by its size (the grid then holds at most budget + n
 * blocks). Equal shares, the batch kernel's old rule, left a 64 MiB put
 * batched with fifteen small ones a sixteenth of the GPU's blocks, so the
 * kernel ran long after the small ones ended with most of the GPU idle. */
void wsync_cd_blocks(const uint64_t *nvec, int n, unsigned threads, unsigned budget, uint32_t *b0, uint32_t *nb);

#ifdef __cplusplus
}
#endif

#endif
