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

/* The wire's size in `form` (0 full, 1 bitmap, 2 pairs), header included,
 * for n elements of `width` bytes, c changed. */
static inline WSYNC_DELTA_HD uint64_t wsync_delta_form_bytes(unsigned form, uint64_t n, uint64_t c, unsigned width)
{
    return WSYNC_DELTA_HEADER + (form == 0   ? n * width
                                 : form == 1 ? (n + 7) / 8 + c * width
                                             : c * (wsync_delta_index_width(n) + width));
}

/* The smallest form (ties go to full, then bitmap: cheaper to apply). */
static inline WSYNC_DELTA_HD unsigned wsync_delta_choose(uint64_t n, uint64_t c, unsigned width)
{
    unsigned form = 0;
    if (wsync_delta_form_bytes(1, n, c, width) < wsync_delta_form_bytes(form, n, c, width))
        form = 1;
    if (wsync_delta_form_bytes(2, n, c, width) < wsync_delta_form_bytes(form, n, c, width))
        form = 2;
    return form;
}

/* bytes[form]: each form's size; returns wsync_delta_choose's form. */
static inline WSYNC_DELTA_HD unsigned wsync_delta_pick(uint64_t n, uint64_t c, unsigned width, uint64_t bytes[3])
{
    for (unsigned f = 0; f < 3; f++)
        bytes[f] = wsync_delta_form_bytes(f, n, c, width);
    return wsync_delta_choose(n, c, width);
}

/* Field k (0-3) of the 32-byte header (delta.h) of a wire in `form` for a
 * piece of len bytes, c changed, `payload` bytes after it. */
static inline WSYNC_DELTA_HD uint64_t wsync_delta_header_field(unsigned k, unsigned form, unsigned width,
                                                               unsigned iw, uint64_t len, uint64_t c,
                                                               uint64_t payload)
{
    return k == 0   ? WSYNC_DELTA_MAGIC | (uint64_t)form << 32 | (uint64_t)width << 40 | (uint64_t)iw << 48
           : k == 1 ? len
           : k == 2 ? c
                    : payload;
}

/* The header's bytes: its fields little-endian. */
static inline WSYNC_DELTA_HD void wsync_delta_header_bytes(unsigned char *p, unsigned form, unsigned width,
                                                           unsigned iw, uint64_t len, uint64_t c, uint64_t payload)
{
    for (unsigned k = 0; k < WSYNC_DELTA_HEADER; k++)
        p[k] = (unsigned char)(wsync_delta_header_field(k / 8, form, width, iw, len, c, payload) >> (8 * (k % 8)));
}

#endif
