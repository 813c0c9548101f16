/* delta_form.h: the rule that picks a piece's wire form from its counts,
 * and the header that names it (delta.h's layout), shared by the host
 * encoder (delta.c) and the GPU's, which picks the form and writes the
 * header on the device (delta_cuda_pass.cu): one rule, so both sides make
 * the same wire. Plain C, compiled for the device too under nvcc. */
#ifndef WSYNC_COMMON_DELTA_FORM_H
#define WSYNC_COMMON_DELTA_FORM_H

#include <stdint.h>

/* The wire's magic, "WSD1", and its header's bytes. */
#define WSYNC_DELTA_MAGIC 0x31445357u
#define WSYNC_DELTA_HEADER 32u

#ifdef __CUDACC__
#define WSYNC_DELTA_HD __host__ __device__
#else
#define WSYNC_DELTA_HD
#endif

/* Bytes of a pairs index for a piece of n elements: 4 while every index
 * fits 32 bits, else 8. */
static inline WSYNC_DELTA_HD unsigned wsync_delta_index_width(uint64_t n)
{
    return n > (uint64_t)UINT32_MAX + 1 ? 8 : 4;
}

/* bytes[form]: the wire's size in each form (header included) for n
 * elements of `width` bytes, c changed; returns the smallest form (ties go
 * to full, then bitmap: cheaper to apply): 0 full, 1 bitmap, 2 pairs. */
static inline WSYNC_DELTA_HD unsigned wsync_delta_pick(uint64_t n, uint64_t c, unsigned width, uint64_t bytes[3])
{
    unsigned form = 0;
    bytes[0] = WSYNC_DELTA_HEADER + n * width;
    bytes[1] = WSYNC_DELTA_HEADER + (n + 7) / 8 + c * width;
    bytes[2] = WSYNC_DELTA_HEADER + c * (wsync_delta_index_width(n) + width);
    if (bytes[1] < bytes[form])
        form = 1;
    if (bytes[2] < bytes[form])
        form = 2;
    return form;
}

/* The 32-byte header (little-endian fields, delta.h) of a wire in `form`
 * for a piece of len bytes, c changed, `payload` bytes after it. */
static inline WSYNC_DELTA_HD void wsync_delta_header_bytes(unsigned char *p, unsigned form, unsigned width,
                                                           unsigned iw, uint64_t len, uint64_t c, uint64_t payload)
{
    const uint64_t f[4] = {WSYNC_DELTA_MAGIC | (uint64_t)form << 32 | (uint64_t)width << 40 | (uint64_t)iw << 48,
                           len, c, payload};
    for (unsigned k = 0; k < WSYNC_DELTA_HEADER; k++)
        p[k] = (unsigned char)(f[k / 8] >> (8 * (k % 8)));
}

#endif
