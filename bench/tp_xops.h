/* tp_xops.h: what differs between host and GPU memory for tp_e2e_bench
 * beyond wsync's mem ops: zeroing, the baseline's 2-D slice copy, and
 * waiting for what was queued (on a GPU, one stream of the bench's own;
 * a failed CUDA call sets cuda_bad, which the engine rank reports). */
#ifndef WSYNC_BENCH_TP_XOPS_H
#define WSYNC_BENCH_TP_XOPS_H

#include <stdint.h>
#include <string.h>

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* What differs between host and GPU memory beyond wsync's mem ops. */
typedef struct xops {
    void (*zero)(void *p, size_t len);
    void (*copy2d)(void *dst, const void *src, uint64_t spitch, uint64_t width, uint64_t height);
    void (*sync)(void);
} xops_t;

static void host_zero(void *p, size_t len)
{
    memset(p, 0, len);
}

static void host_copy2d(void *dst, const void *src, uint64_t spitch, uint64_t width, uint64_t height)
{
    uint64_t r;
    for (r = 0; r < height; r++)
        memcpy((char *)dst + r * width, (const char *)src + r * spitch, width);
}

static void host_sync(void) {}

static const xops_t host_x = {host_zero, host_copy2d, host_sync};

#if WSYNC_HAVE_CUDA
static cudaStream_t cstream;
static int cuda_bad;

/* Everything the bench queues goes on one stream of its own, in order. */
static cudaStream_t cuda_stream(void)
{
    if (!cstream)
        cuda_bad |= cudaStreamCreateWithFlags(&cstream, cudaStreamNonBlocking) != cudaSuccess;
    return cstream;
}

static void cuda_zero(void *p, size_t len)
{
    cuda_bad |= cudaMemsetAsync(p, 0, len, cuda_stream()) != cudaSuccess;
}

/* A block of one row is a plain copy; a column slice one cudaMemcpy2DAsync. */
static void cuda_copy2d(void *dst, const void *src, uint64_t spitch, uint64_t width, uint64_t height)
{
    cudaStream_t s = cuda_stream();
    if (height == 1)
        cuda_bad |= cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, s) != cudaSuccess;
    else
        cuda_bad |= cudaMemcpy2DAsync(dst, width, src, spitch, width, height, cudaMemcpyDeviceToDevice, s) !=
                    cudaSuccess;
}

static void cuda_sync(void)
{
    if (cstream)
        cuda_bad |= cudaStreamSynchronize(cstream) != cudaSuccess;
    cuda_bad |= cudaDeviceSynchronize() != cudaSuccess;
}

static const xops_t cuda_x = {cuda_zero, cuda_copy2d, cuda_sync};
#endif

#endif
