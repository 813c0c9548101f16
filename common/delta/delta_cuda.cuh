/* delta_cuda.cuh: element loads and stores at any byte offset, shared by
 * the delta kernels (delta_cuda.cu, delta_cuda_pass.cu): the wire puts
 * values at an odd offset where a bitmap of n/8 bytes does not end on the
 * width, so an unaligned element goes byte by byte. */
#ifndef WSYNC_COMMON_DELTA_CUDA_CUH
#define WSYNC_COMMON_DELTA_CUDA_CUH

#include <stdint.h>

template <typename T> __device__ __forceinline__ T load_elem(const unsigned char *p)
{
    if (((uintptr_t)p & (sizeof(T) - 1)) == 0)
        return *(const T *)p;
    T v = 0;
    for (unsigned k = 0; k < sizeof(T); k++)
        v |= (T)p[k] << (8 * k);
    return v;
}

template <typename T> __device__ __forceinline__ void store_elem(unsigned char *p, T v)
{
    if (((uintptr_t)p & (sizeof(T) - 1)) == 0) {
        *(T *)p = v;
        return;
    }
    for (unsigned k = 0; k < sizeof(T); k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

#endif
