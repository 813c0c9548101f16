/* quant_gpu.c: wsync_fp8_quantize_cuda, the host side of the quantization
 * kernel (quant_cuda.cu): launch, then wait for the NaN check's result. */
#include "common/base/checks.h"
#include "common/quant/quant.h"

#if WSYNC_HAVE_CUDA
#include <stdint.h>

#include "common/base/cuda_checks.h"
#include "common/quant/quant_cuda.h"

/* One flag per thread, allocated on its first use on a device (cudaMalloc
 * synchronises); a thread that moves to another device gets a new one. */
static __thread unsigned long long *tls_bad_dev;
static __thread int tls_bad_device = -1;

wsync_status_t wsync_fp8_quantize_cuda(const void *src_dev, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q_dev, float *scale_dev,
                                       const char *what, void *stream)
{
    unsigned long long bad = 0;
    cudaStream_t s = (cudaStream_t)stream;
    int e, device;

    if (spec->block_rows < 1 || spec->block_cols < 1 || (fmt != WSYNC_QSRC_BF16 && fmt != WSYNC_QSRC_F32))
        return wsync_error(WSYNC_ERR_INVALID,
                           "fp8: tensor '%s': blocks of %d x %d of source format %d: need blocks "
                           "of at least 1 x 1 of bf16 or fp32",
                           what, spec->block_rows, spec->block_cols, (int)fmt);
    CUDA_CHECK(cudaGetDevice(&device));
    if (tls_bad_dev == NULL || tls_bad_device != device) {
        CUDA_CHECK(cudaMalloc((void **)&tls_bad_dev, sizeof(*tls_bad_dev)));
        tls_bad_device = device;
    }
    CUDA_CHECK(cudaMemsetAsync(tls_bad_dev, 0xff, sizeof(*tls_bad_dev), s));
    e = wsync_cuda_fp8_quant_async(src_dev, (int)fmt, rows, cols, spec->block_rows, spec->block_cols,
                                   spec->form == WSYNC_SCALE_UE8M0, q_dev, scale_dev, tls_bad_dev, stream);
    if (e != 0)
        return wsync_error(WSYNC_ERR_CUDA, "fp8: tensor '%s': the quantization kernel did not start: %s", what,
                           cudaGetErrorString((cudaError_t)e));
    CUDA_CHECK(cudaMemcpyAsync(&bad, tls_bad_dev, sizeof(bad), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (bad != UINT64_MAX)
        return wsync_error(WSYNC_ERR_INVALID,
                           "fp8: tensor '%s' holds NaN or an infinity at row %llu, column %llu: FP8 cannot carry "
                           "it; find where the trainer produced it",
                           what, (unsigned long long)(bad / cols), (unsigned long long)(bad % cols));
    return WSYNC_OK;
}

#else

wsync_status_t wsync_fp8_quantize_cuda(const void *src_dev, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q_dev, float *scale_dev,
                                       const char *what, void *stream)
{
    (void)src_dev, (void)fmt, (void)rows, (void)cols, (void)spec, (void)q_dev, (void)scale_dev, (void)stream;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "fp8: tensor '%s': this wsync was built without CUDA", what);
}

#endif
