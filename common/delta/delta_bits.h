/* delta_bits.h: which bytes of a 32-bit word of the xor of two versions
 * changed, as a bit mask, without a branch or a compare per byte: the GPU
 * encoders' compare (delta_cuda.cuh's diff_bits) at width 1 (FP8), where a
 * byte at a time took about five instructions. Plain C, compiled for the
 * device too under nvcc; unit-tested on the CPU. */
#ifndef WSYNC_COMMON_DELTA_BITS_H
#define WSYNC_COMMON_DELTA_BITS_H

#include <stdint.h>

#include "common/delta/delta_form.h"

/* Bit j (j < 4) set when byte j of x is not 0. Each byte's top bit becomes
 * "any of its bits set" (its low seven bits added to 0x7f carry into the top
 * bit, never out of the byte); one multiply then moves bits 7, 15, 23, 31 to
 * 28..31 (every partial product lands on its own bit: no carries). */
static inline WSYNC_DELTA_HD uint32_t wsync_delta_nonzero_bytes(uint32_t x)
{
    const uint32_t t = (((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;
    return (t * 0x00204081u) >> 28;
}

#endif
