/* digest.h: the wsync piece digest, defined so a GPU computes the identical value.
 *
 * A range of bytes at image offset `off` is read as little-endian 64-bit words
 * (the last one zero-padded). Word i is mixed with a key that depends on `off`
 * and i, passed through a bijection, and the results are summed mod 2^64; the
 * sum, the length and the offset are then finalized into 64 bits.
 *
 *   key_i = fmix64(off ^ SEED) + i * GOLDEN
 *   x     = word_i ^ key_i;  x *= M1;  x ^= x >> 32;  x *= M2;  x ^= x >> 29
 *   sum  += x
 *   digest = fmix64(sum ^ fmix64(len + GOLDEN) ^ off)
 *
 * Why this shape: the per-word map is a bijection, so changing any single word
 * (in particular any single bit) always changes the sum, hence always the
 * digest; the key makes equal words at different positions (and equal pieces
 * at different offsets) contribute differently, so swapped words, blocks or
 * chunks change it; and the sum is order-free, so a GPU can reduce it across
 * threads in any order and get exactly this value. */
#ifndef WSYNC_COMMON_DIGEST_H
#define WSYNC_COMMON_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define WSYNC_DIGEST_SEED 0x77737966756e6b31ULL
#define WSYNC_DIGEST_GOLDEN 0x9e3779b97f4a7c15ULL
#define WSYNC_DIGEST_M1 0xbf58476d1ce4e5b9ULL
#define WSYNC_DIGEST_M2 0x94d049bb133111ebULL

/* The word functions compile for the GPU too (the kernels of digest_cuda.cu
 * and copy_digest_cuda.cu use them), so both sides mix words alike. */
#ifdef __CUDACC__
#define WSYNC_DIGEST_FN static __host__ __device__ __forceinline__
#else
#define WSYNC_DIGEST_FN static inline
#endif

WSYNC_DIGEST_FN uint64_t wsync_fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

WSYNC_DIGEST_FN uint64_t wsync_digest_word(uint64_t word, uint64_t key)
{
    uint64_t x = word ^ key;
    x *= WSYNC_DIGEST_M1;
    x ^= x >> 32;
    x *= WSYNC_DIGEST_M2;
    x ^= x >> 29;
    return x;
}

static inline uint64_t wsync_digest_base_key(uint64_t off)
{
    return wsync_fmix64(off ^ WSYNC_DIGEST_SEED);
}

static inline uint64_t wsync_digest_final(uint64_t sum, uint64_t len, uint64_t off)
{
    return wsync_fmix64(sum ^ wsync_fmix64(len + WSYNC_DIGEST_GOLDEN) ^ off);
}

/* The word sum of `len` bytes at `data`, keyed as if they sit at image offset
 * `off`. Pure; thread-safe. */
uint64_t wsync_digest_sum(const void *data, size_t len, uint64_t off);

/* The digest of `len` bytes at `data` placed at image offset `off`. */
uint64_t wsync_digest(const void *data, size_t len, uint64_t off);

/* Digests as 16 lowercase hex digits plus NUL, and back (0 on success). */
void wsync_digest_hex(uint64_t digest, char out[17]);
int wsync_digest_parse(const char *hex, uint64_t *out);

/* Deterministic fill of `len` bytes for image offset `off` under `seed`:
 * content depends on (seed, absolute position), so any extent can be filled
 * independently and the whole stays consistent. Used by the synthetic model. */
void wsync_fill_pattern(void *dst, size_t len, uint64_t off, uint64_t seed);

#endif
