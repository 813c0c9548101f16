/* delta_impl.h: private to the delta module: the two streamed passes every
 * host implementation provides, and the loops they share. The loops are
 * macros so each implementation compiles them with its own instruction set
 * (the AVX2 build gets hardware popcount and tzcnt as well as the compares). */
#ifndef WSYNC_COMMON_DELTA_IMPL_H
#define WSYNC_COMMON_DELTA_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The encode pass: compare n elements of width w, write the bitmap (ceil(n/8)
 * bytes, may be NULL) and the changed values in index order (may be NULL);
 * returns the count of changed elements. */
typedef uint64_t (*wsync_delta_pass_fn)(const unsigned char *base, const unsigned char *next, uint64_t n,
                                        unsigned w, unsigned char *bitmap, unsigned char *vals);
/* The bitmap apply: the popcount of the bitmap of n elements, or UINT64_MAX
 * when a bit past n is set (check); write each set element's value (apply). */
typedef uint64_t (*wsync_delta_popcount_fn)(const unsigned char *bitmap, uint64_t n);
typedef void (*wsync_delta_scatter_fn)(unsigned char *dst, const unsigned char *bitmap, uint64_t n, unsigned w,
                                       const unsigned char *vals);

typedef struct wsync_delta_ops {
    const char *name;
    wsync_delta_pass_fn pass;
    wsync_delta_popcount_fn popcount;
    wsync_delta_scatter_fn scatter;
} wsync_delta_ops_t;

extern const wsync_delta_ops_t wsync_delta_scalar_ops;
/* NULL when the CPU (or compiler) has no AVX2. */
const wsync_delta_ops_t *wsync_delta_avx2_ops(void);
/* The implementation in use (WSYNC_DELTA_SIMD=scalar forces scalar). */
const wsync_delta_ops_t *wsync_delta_ops(void);

/* One element of width w (1, 2, 4 or 8): fixed-size copies the compiler
 * turns into one move each. */
static inline void wsync_delta_copy_elem(unsigned char *dst, const unsigned char *src, unsigned w)
{
    switch (w) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

static inline int wsync_delta_elem_differs(const unsigned char *a, const unsigned char *b, unsigned w)
{
    uint64_t x = 0, y = 0;
    switch (w) {
    case 1: return *a != *b;
    case 2: memcpy(&x, a, 2), memcpy(&y, b, 2); break;
    case 4: memcpy(&x, a, 4), memcpy(&y, b, 4); break;
    default: memcpy(&x, a, 8), memcpy(&y, b, 8); break;
    }
    return x != y;
}

/* The encode pass's tail from element i (fewer than 32 left), one element
 * at a time; c is the count so far. Returns the count. */
static inline uint64_t wsync_delta_pass_tail(const unsigned char *base, const unsigned char *next, uint64_t n,
                                             unsigned w, unsigned char *bitmap, unsigned char *vals, uint64_t i,
                                             uint64_t c)
{
    if (bitmap != NULL && i < n)
        memset(bitmap + i / 8, 0, (size_t)((n - i + 7) / 8));
    for (; i < n; i++) {
        if (!wsync_delta_elem_differs(base + i * w, next + i * w, w))
            continue;
        if (bitmap != NULL)
            bitmap[i / 8] |= (unsigned char)(1u << (i % 8));
        if (vals != NULL)
            wsync_delta_copy_elem(vals + c * w, next + i * w, w);
        c++;
    }
    return c;
}

/* The encode pass around MASK32(base, next, w), a 32-bit mask of which of
 * 32 elements differ, and EXTRACT(src, m, w, vals, c), which appends the
 * values of the set elements of the group at src and returns the new count.
 * Full groups of 32 first, then the tail. */
#define WSYNC_DELTA_PASS_BODY(MASK32, EXTRACT)                                         \
    uint64_t c = 0, i = 0;                                                             \
    for (; i + 32 <= n; i += 32) {                                                     \
        uint32_t m = MASK32(base + i * w, next + i * w, w);                            \
        if (bitmap != NULL)                                                            \
            memcpy(bitmap + i / 8, &m, 4); /* little-endian hosts only (x86, arm64) */ \
        if (vals == NULL)                                                              \
            c += (uint64_t)__builtin_popcount(m);                                      \
        else                                                                           \
            c = EXTRACT(next + i * w, m, w, vals, c);                                  \
    }                                                                                  \
    return wsync_delta_pass_tail(base, next, n, w, bitmap, vals, i, c)

/* EXTRACT by walking the set bits (the scalar one). */
static inline uint64_t wsync_delta_extract_bits(const unsigned char *src, uint32_t m, unsigned w,
                                                unsigned char *vals, uint64_t c)
{
    while (m != 0) {
        unsigned k = (unsigned)__builtin_ctz(m);
        wsync_delta_copy_elem(vals + c * w, src + k * w, w);
        c++;
        m &= m - 1;
    }
    return c;
}

#define WSYNC_DELTA_POPCOUNT_BODY                       \
    uint64_t c = 0, nb = (n + 7) / 8, j = 0;            \
    for (; j + 8 <= nb; j += 8) {                       \
        uint64_t x;                                     \
        memcpy(&x, bitmap + j, 8);                      \
        c += (uint64_t)__builtin_popcountll(x);         \
    }                                                   \
    for (; j < nb; j++)                                 \
        c += (uint64_t)__builtin_popcount(bitmap[j]);   \
    if (n % 8 != 0 && (bitmap[nb - 1] >> (n % 8)) != 0) \
        return UINT64_MAX;                              \
    return c

#define WSYNC_DELTA_SCATTER_BODY                                 \
    uint64_t c = 0, nb = (n + 7) / 8, j = 0;                     \
    for (; j + 8 <= nb; j += 8) {                                \
        uint64_t x;                                              \
        memcpy(&x, bitmap + j, 8);                               \
        while (x != 0) {                                         \
            uint64_t e = j * 8 + (uint64_t)__builtin_ctzll(x);   \
            wsync_delta_copy_elem(dst + e * w, vals + c * w, w); \
            c++;                                                 \
            x &= x - 1;                                          \
        }                                                        \
    }                                                            \
    for (; j < nb; j++) {                                        \
        unsigned x = bitmap[j];                                  \
        while (x != 0) {                                         \
            uint64_t e = j * 8 + (uint64_t)__builtin_ctz(x);     \
            wsync_delta_copy_elem(dst + e * w, vals + c * w, w); \
            c++;                                                 \
            x &= x - 1;                                          \
        }                                                        \
    }

#endif
