/* pack_gpu.c: wsync_pack_cuda_start/poll/wait. A job owns a pinned task
 * table, its device copy and an event; finished jobs go on a per-thread free
 * list, so a sender packing put after put allocates nothing after its first
 * few (cudaMalloc and cudaMallocHost synchronise the device). The upload and
 * the launch are queued on the same stream, in that order. */
#include <stdlib.h>
#include <string.h>

#include "common/checks.h"
#include "common/pack.h"
#include "common/pack_task.h"

#if WSYNC_HAVE_CUDA
#include "common/cuda_checks.h"
#include "common/mem/cuda_stream.h"
#include "common/pack_cuda.h"

struct wsync_pack_job {
    struct wsync_pack_job *next_free;
    int device;
    wsync_pack_task_t *host_tasks, *dev_tasks;   /* pinned table, its device copy */
    size_t cap;                                  /* tasks each holds */
    cudaEvent_t done;
};

static __thread wsync_pack_job_t *tls_free_jobs;

static void job_destroy(wsync_pack_job_t *j)
{
    if (j->done)
        cudaEventDestroy(j->done);
    cudaFree(j->dev_tasks);
    cudaFreeHost(j->host_tasks);
    free(j);
}

/* A finished job of this device with room for `ntasks`, else a new one (and
 * one free job of this device too small for it is dropped, so the list
 * stays as long as the most jobs a thread had in flight at once). */
static wsync_status_t job_get(int device, size_t ntasks, wsync_pack_job_t **out)
{
    wsync_pack_job_t *j, **pp, **small = NULL;
    cudaError_t e;
    for (pp = &tls_free_jobs; *pp; pp = &(*pp)->next_free) {
        j = *pp;
        if (j->device != device)
            continue;
        if (j->cap >= ntasks) {
            *pp = j->next_free;
            *out = j;
            return WSYNC_OK;
        }
        if (small == NULL)
            small = pp;
    }
    if (small) {
        j = *small;
        *small = j->next_free;
        job_destroy(j);
    }
    j = calloc(1, sizeof(*j));
    WSYNC_CHECK_ALLOC(j);
    j->device = device;
    j->cap = ntasks < 256 ? 256 : ntasks;
    if ((e = cudaEventCreateWithFlags(&j->done, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaMallocHost((void **)&j->host_tasks, j->cap * sizeof(wsync_pack_task_t))) != cudaSuccess ||
        (e = cudaMalloc((void **)&j->dev_tasks, j->cap * sizeof(wsync_pack_task_t))) != cudaSuccess) {
        job_destroy(j);
        return wsync_error(WSYNC_ERR_CUDA, "pack: cannot set up a task table of %zu tasks on cuda:%d: %s", ntasks,
                           device, cudaGetErrorString(e));
    }
    *out = j;
    return WSYNC_OK;
}

static void job_put(wsync_pack_job_t *j)
{
    j->next_free = tls_free_jobs;
    tls_free_jobs = j;
}

wsync_status_t wsync_pack_cuda_start(void *dst_dev, const void *src_dev_base, const wsync_run2d_t *runs, size_t n,
                                     void *stream, wsync_pack_job_t **job)
{
    cudaStream_t own;
    wsync_pack_job_t *j = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t ntasks = wsync_pack_tasks(runs, n, (uintptr_t)dst_dev, (uintptr_t)src_dev_base, NULL, 0);
    int d, e;
    WSYNC_CHECK(wsync_cuda_stream(&d, &own, NULL));
    if (stream == NULL)
        stream = own;
    WSYNC_CHECK(job_get(d, ntasks, &j));
    wsync_pack_tasks(runs, n, (uintptr_t)dst_dev, (uintptr_t)src_dev_base, j->host_tasks, j->cap);
    if (ntasks > 0) {
        CUDA_CHECK_GOTO(cudaMemcpyAsync(j->dev_tasks, j->host_tasks, ntasks * sizeof(wsync_pack_task_t),
                                        cudaMemcpyHostToDevice, (cudaStream_t)stream), st, err);
        e = wsync_cuda_pack_async(dst_dev, src_dev_base, j->dev_tasks, ntasks, stream);
        if (e != 0) {
            st = wsync_error(WSYNC_ERR_CUDA, "pack kernel (%zu runs, %zu tasks) on cuda:%d: %s", n, ntasks, d,
                             cudaGetErrorString((cudaError_t)e));
            goto err;
        }
    }
    CUDA_CHECK_GOTO(cudaEventRecord(j->done, (cudaStream_t)stream), st, err);
    *job = j;
    return WSYNC_OK;
err:
    /* What was queued may still read the table: wait before reusing it. */
    cudaStreamSynchronize((cudaStream_t)stream);
    job_put(j);
    return st;
}

wsync_status_t wsync_pack_cuda_poll(wsync_pack_job_t *j, int *done)
{
    cudaError_t e = cudaEventQuery(j->done);
    *done = 0;
    if (e == cudaErrorNotReady)
        return WSYNC_OK;
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_CUDA, "pack on cuda:%d: %s", j->device, cudaGetErrorString(e));
    *done = 1;
    return WSYNC_OK;
}

wsync_status_t wsync_pack_cuda_wait(wsync_pack_job_t *j)
{
    cudaError_t e;
    int device;
    if (j == NULL)
        return WSYNC_OK;
    e = cudaEventSynchronize(j->done);
    device = j->device;
    job_put(j);
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_CUDA, "pack on cuda:%d: %s", device, cudaGetErrorString(e));
    return WSYNC_OK;
}

#else /* !WSYNC_HAVE_CUDA */

static wsync_status_t no_cuda(void)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "GPU pack: wsync was not built with CUDA "
                       "(rebuild with CUDA=1 where /usr/local/cuda exists)");
}

wsync_status_t wsync_pack_cuda_start(void *dst_dev, const void *src_dev_base, const wsync_run2d_t *runs, size_t n,
                                     void *stream, wsync_pack_job_t **job)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_poll(wsync_pack_job_t *job, int *done)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_wait(wsync_pack_job_t *job)
{
    return job == NULL ? WSYNC_OK : no_cuda();
}
#endif
