/* cuda_checks.h: CUDA_CHECK and NCCL_CHECK: turn a raw cudaError_t
 * or ncclResult_t into WSYNC_ERR_CUDA / WSYNC_ERR_NCCL with the call's text and
 * the library's own explanation in the last error. Include only where
 * WSYNC_HAVE_CUDA (and WSYNC_HAVE_NCCL) are 1. */
#ifndef WSYNC_COMMON_CUDA_CHECKS_H
#define WSYNC_COMMON_CUDA_CHECKS_H

#include <cuda_runtime.h>

#include "common/base/checks.h"

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t cuda_e_ = (call);                                                             \
        if (cuda_e_ != cudaSuccess)                                                               \
            return wsync_error(WSYNC_ERR_CUDA, "%s: %s (%s)", #call, cudaGetErrorString(cuda_e_), \
                               cudaGetErrorName(cuda_e_));                                        \
    } while (0)

#define CUDA_CHECK_GOTO(call, st, label)                                                          \
    do {                                                                                          \
        cudaError_t cuda_e_ = (call);                                                             \
        if (cuda_e_ != cudaSuccess) {                                                             \
            (st) = wsync_error(WSYNC_ERR_CUDA, "%s: %s (%s)", #call, cudaGetErrorString(cuda_e_), \
                               cudaGetErrorName(cuda_e_));                                        \
            goto label;                                                                           \
        }                                                                                         \
    } while (0)

#if WSYNC_HAVE_NCCL
#include <nccl.h>

#define NCCL_CHECK(call)                                                                      \
    do {                                                                                      \
        ncclResult_t nccl_r_ = (call);                                                        \
        if (nccl_r_ != ncclSuccess && nccl_r_ != ncclInProgress)                              \
            return wsync_error(WSYNC_ERR_NCCL, "%s: %s", #call, ncclGetErrorString(nccl_r_)); \
    } while (0)

#define NCCL_CHECK_GOTO(call, st, label)                                                      \
    do {                                                                                      \
        ncclResult_t nccl_r_ = (call);                                                        \
        if (nccl_r_ != ncclSuccess && nccl_r_ != ncclInProgress) {                            \
            (st) = wsync_error(WSYNC_ERR_NCCL, "%s: %s", #call, ncclGetErrorString(nccl_r_)); \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)
#endif

#endif
