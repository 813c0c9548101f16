/* delta_cuda.h: the delta passes as CUDA kernels (delta_cuda.cu), for
 * delta_gpu.c, which strings them into wsync_delta_gpu_encode and _apply.
 * Correct by construction rather than clever: a warp compares 32 elements
 * and its ballot is the bitmap word of that group (bit i = lane i, the wire's
 * bit order); a block of 8 warps owns 64 groups and counts them; one
 * single-block scan turns the blocks' counts into their offsets; a second
 * kernel writes each set element's value (and index) at its block's offset
 * plus the popcounts before it. Every launcher returns a cudaError_t as int
 * (0 = queued) and runs on `stream` (a cudaStream_t). Only with CUDA. */
#ifndef WSYNC_COMMON_DELTA_CUDA_H
#define WSYNC_COMMON_DELTA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per block: 64 groups of 32. */
#define WSYNC_DELTA_CUDA_TILE 2048u

static inline uint64_t wsync_delta_cuda_blocks(uint64_t n)
{
    return (n + WSYNC_DELTA_CUDA_TILE - 1) / WSYNC_DELTA_CUDA_TILE;
}

/* Tile counts per block of the segmented scan (delta_cuda_fast.cu). */
#define WSYNC_DELTA_CUDA_SEG 2048u

static inline uint64_t wsync_delta_cuda_segs(uint64_t nblk)
{
    return (nblk + WSYNC_DELTA_CUDA_SEG - 1) / WSYNC_DELTA_CUDA_SEG;
}

/* Compare n elements of width w: words[g] = the changed mask of elements
 * [32g, 32g+32) (ceil(n/32) words), counts[b] = the changed elements of
 * block b. */
int wsync_delta_cuda_mask(const void *base, const void *next, uint64_t n, unsigned w, uint32_t *words,
                          unsigned long long *counts, void *stream);
/* The same counts from a wire's bitmap (ceil(n/8) bytes, any alignment);
 * *bad (set to 0 by the caller) becomes 1 when a bit past n is set. */
int wsync_delta_cuda_bitmap_counts(const unsigned char *bitmap, uint64_t n, unsigned long long *counts,
                                   unsigned *bad, void *stream);
/* Exclusive scan of counts[0..nblk) in place; *total gets the sum. */
int wsync_delta_cuda_scan(unsigned long long *counts, uint64_t nblk, unsigned long long *total, void *stream);
/* Second version (delta_cuda_fast.cu): the same words and counts as
 * wsync_delta_cuda_mask from 16-byte loads (v1's kernel where base or next
 * is not 16-byte aligned). */
int wsync_delta_cuda_mask_fast(const void *base, const void *next, uint64_t n, unsigned w, uint32_t *words,
                               unsigned long long *counts, void *stream);
/* Second version of wsync_delta_cuda_bitmap_counts: 16 bytes of bitmap a
 * lane (v1's kernel where the bitmap is not 16-byte aligned). */
int wsync_delta_cuda_bitmap_counts_fast(const unsigned char *bitmap, uint64_t n, unsigned long long *counts,
                                        unsigned *bad, void *stream);
/* The scan in segments of WSYNC_DELTA_CUDA_SEG counts: counts[b] becomes
 * the exclusive sum within b's segment and seg[s] (wsync_delta_cuda_segs
 * entries) the exclusive sum of the segments before s: b's offset is
 * counts[b] + seg[b / WSYNC_DELTA_CUDA_SEG]. *total gets the sum. */
int wsync_delta_cuda_scan_fast(unsigned long long *counts, uint64_t nblk, unsigned long long *seg,
                               unsigned long long *total, void *stream);
/* The same in one launch: the last block to finish scans the segments'
 * sums (ticket: a word that is zero when it starts, and is left zero). */
int wsync_delta_cuda_scan_one(unsigned long long *counts, uint64_t nblk, unsigned long long *seg,
                              unsigned long long *total, unsigned *ticket, void *stream);
/* Bytes of each version a block of the one-pass encoder takes at a time
 * (delta_cuda_pass.cu: 256 threads x 4 loads x 16 bytes), or twice that. */
#define WSYNC_DELTA_CUDA_CHUNK 16384u

static inline uint64_t wsync_delta_cuda_chunks(uint64_t len, unsigned chunk)
{
    return (len + chunk - 1) / chunk;
}

/* The encoder in one pass over both versions (16-byte aligned; chunk
 * WSYNC_DELTA_CUDA_CHUNK or twice it): words as wsync_delta_cuda_mask's;
 * the k-th changed element's value at vals + k*w and, for k < idx_fit, its
 * index (iw bytes) at idx + k*iw; state[1] the changed count. state holds
 * 2 + wsync_delta_cuda_chunks(n*w, chunk) words, zero at launch. */
int wsync_delta_cuda_encode_pass(const void *base, const void *next, uint64_t n, unsigned w, unsigned chunk,
                                 uint32_t *words, unsigned long long *state, unsigned char *idx, unsigned iw,
                                 uint64_t idx_fit, unsigned char *vals, void *stream);
/* The encoder as two streaming kernels (delta_cuda_stream.cu): bytes of
 * each version one warp compares at a time; the bytes of changed values
 * each such chunk holds for the write (1/8 of its elements), and of their
 * 16-bit indices in the chunk at width 1 (1/16 of its elements: more
 * changed than that, the pairs form is not chosen). */
#define WSYNC_DELTA_CUDA_WCHUNK 2048u
#define WSYNC_DELTA_CUDA_HELD_VALS (WSYNC_DELTA_CUDA_WCHUNK / 8)
#define WSYNC_DELTA_CUDA_HELD_IDX (2 * WSYNC_DELTA_CUDA_WCHUNK / 16)

static inline uint64_t wsync_delta_cuda_wchunks(uint64_t len)
{
    return (len + WSYNC_DELTA_CUDA_WCHUNK - 1) / WSYNC_DELTA_CUDA_WCHUNK;
}

/* Bytes of `held` for a piece of len bytes at width 1 (the most elements
 * a chunk, so enough at every width): each chunk's values and their
 * 16-bit indices in the chunk. */
static inline uint64_t wsync_delta_cuda_held_bytes(uint64_t len)
{
    return wsync_delta_cuda_wchunks(len) * (WSYNC_DELTA_CUDA_HELD_VALS + WSYNC_DELTA_CUDA_HELD_IDX);
}

/* Compare both versions (16-byte aligned, as `held`): counts[ch] = the
 * changed elements of chunk ch (wsync_delta_cuda_wchunks(n*w) of them), each
 * chunk's first changed values and indices into held, and, for a chunk
 * that changed more than its held indices, its words as
 * wsync_delta_cuda_mask's; ticket (NULL, or two words) is zeroed for the
 * scan and the write. Then wsync_delta_cuda_scan_one (ticket + 1) or
 * _scan_fast over the counts, and the write: */
int wsync_delta_cuda_stream_count(const void *base, const void *next, uint64_t n, unsigned w, uint32_t *words,
                                  unsigned long long *counts, unsigned char *held, unsigned *ticket, void *stream);
/* The wire at out (8-byte aligned, wsync_delta_bound bytes) in the form
 * delta_form.h's rule picks from *total, header included; for the full
 * form nothing is written (the caller copies next). The values come from
 * held, or from next through the words for a chunk that changed more than
 * held holds. With done != NULL (host memory mapped for the device; ticket:
 * a word the count kernel zeroed, which it was given) the last block to
 * finish writes the total + 1 to *done, after every block's writes: the
 * host may read the total, and use the wire, without waiting for the
 * stream. */
int wsync_delta_cuda_stream_write(const void *next, uint64_t n, unsigned w, const uint32_t *words,
                                  const unsigned long long *offsets, const unsigned long long *seg,
                                  const unsigned long long *total, const unsigned char *held, unsigned char *out,
                                  unsigned *ticket, unsigned long long *done, void *stream);
/* A wire's 32-byte header into device memory at dst (as a launch's
 * argument: no staging of pageable host memory). */
int wsync_delta_cuda_put_header(void *dst, const unsigned char *hdr, void *stream);
/* Write the values of the set elements of next (and, with idx != NULL,
 * their indices of iw bytes; with bitmap != NULL, the wire's bitmap bytes)
 * at their offsets: offsets[b], plus seg[b / WSYNC_DELTA_CUDA_SEG] when seg
 * is not NULL (after wsync_delta_cuda_scan_fast). */
int wsync_delta_cuda_compact(const void *next, uint64_t n, unsigned w, const uint32_t *words,
                             const unsigned long long *offsets, const unsigned long long *seg, unsigned char *bitmap,
                             unsigned char *idx, unsigned iw, unsigned char *vals, void *stream);
/* Write the values of a wire's bitmap form into dst (offsets as above),
 * only when the checks before it passed on the device: with total != NULL,
 * *total (the scan's) == expect (the header's count) and *bad == 0 (no bit
 * past n); else nothing is written. */
int wsync_delta_cuda_scatter_bitmap(unsigned char *dst, uint64_t n, unsigned w, const unsigned char *bitmap,
                                    const unsigned long long *offsets, const unsigned long long *seg,
                                    const unsigned char *vals, const unsigned long long *total,
                                    const unsigned *bad, uint64_t expect, void *stream);
/* *first_bad (set to ~0 by the caller) = the lowest k whose index is >= n
 * or not above index k-1. */
int wsync_delta_cuda_check_pairs(const unsigned char *idx, unsigned iw, uint64_t c, uint64_t n,
                                 unsigned long long *first_bad, void *stream);
/* The pairs' values into dst, only when *first_bad (wsync_delta_cuda_check_pairs's,
 * unless NULL) is still ~0: every index in range and increasing. */
int wsync_delta_cuda_scatter_pairs(unsigned char *dst, unsigned w, const unsigned char *idx, unsigned iw, uint64_t c,
                                   const unsigned char *vals, const unsigned long long *first_bad, void *stream);

#ifdef __cplusplus
}
#endif

#endif
