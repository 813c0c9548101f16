/* pack_gpu.c: the GPU pack's host side: prepared plans (a task table built
 * and uploaded once, launched put after put) and wsync_pack_cuda_start
 * (build, upload and launch in one call). A job owns an event and, for
 * start, a pinned task table and its device copy; finished jobs go on a
 * per-thread free list, so a sender packing put after put allocates nothing
 * after its first few (cudaMalloc and cudaMallocHost synchronise the
 * device). The upload and the launch are queued on the same stream, in that
 * order. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/pack/pack.h"
#include "common/pack/pack_task.h"

#if WSYNC_HAVE_CUDA
#include "common/base/cuda_checks.h"
#include "common/digest/digest.h"
#include "common/mem/cuda_stream.h"
#include "common/pack/pack_cuda.h"

struct wsync_pack_plan {
    int device;
    size_t nruns, ntasks;
    wsync_pack_task_t *dev_tasks; /* NULL when ntasks == 0 */
    /* The bases it was built for, modulo 16, and the widest task width:
     * any bases congruent to them modulo `align` keep every access of the
     * table aligned (each width divides align). */
    uint32_t dst_mod, src_mod, align;
    uint32_t min_width; /* the narrowest task's (launch_sum needs 8) */
    uint64_t len;       /* the put's bytes */
    uint64_t *start;    /* each task's first destination byte, ascending (NULL: not so, no parts) */
};

struct wsync_pack_job {
    struct wsync_pack_job *next_free;
    int device;
    wsync_pack_task_t *host_tasks, *dev_tasks; /* start's pinned table, its device copy */
    size_t cap;                                /* tasks each holds (0: none, a launch job) */
    cudaEvent_t done;
};

static __thread wsync_pack_job_t *tls_free_jobs;

static void job_drop_tables(wsync_pack_job_t *j)
{
    cudaFree(j->dev_tasks);
    cudaFreeHost(j->host_tasks);
    j->dev_tasks = j->host_tasks = NULL;
    j->cap = 0;
}

/* The calling thread's free jobs, at its exit (wsync_cuda_at_thread_exit). */
static void free_thread_jobs(void)
{
    while (tls_free_jobs) {
        wsync_pack_job_t *j = tls_free_jobs;
        tls_free_jobs = j->next_free;
        job_drop_tables(j);
        cudaEventDestroy(j->done);
        free(j);
    }
}

static void job_put(wsync_pack_job_t *j)
{
    if (tls_free_jobs == NULL)
        wsync_cuda_at_thread_exit(free_thread_jobs);
    j->next_free = tls_free_jobs;
    tls_free_jobs = j;
}

/* Gives j tables of at least ntasks (none needed for 0). */
static wsync_status_t job_reserve(wsync_pack_job_t *j, size_t ntasks)
{
    cudaError_t e;
    size_t cap = ntasks < 256 ? 256 : ntasks;
    if (j->cap >= ntasks)
        return WSYNC_OK;
    job_drop_tables(j);
    if ((e = cudaMallocHost((void **)&j->host_tasks, cap * sizeof(wsync_pack_task_t))) != cudaSuccess ||
        (e = cudaMalloc((void **)&j->dev_tasks, cap * sizeof(wsync_pack_task_t))) != cudaSuccess) {
        job_drop_tables(j);
        return wsync_error(WSYNC_ERR_CUDA, "pack: cannot set up a task table of %zu tasks on cuda:%d: %s", ntasks,
                           j->device, cudaGetErrorString(e));
    }
    j->cap = cap;
    return WSYNC_OK;
}

/* A finished job of this device with room for `ntasks`: the free job that
 * fits most tightly (so launches, which need no table, leave the tables to
 * start), else a too small one grown, else a new one; so the list stays as
 * long as the most jobs a thread had in flight at once. */
static wsync_status_t job_get(int device, size_t ntasks, wsync_pack_job_t **out)
{
    wsync_pack_job_t *j, **pp, **fit = NULL, **small = NULL;
    wsync_status_t st;
    cudaError_t e;
    for (pp = &tls_free_jobs; *pp; pp = &(*pp)->next_free) {
        j = *pp;
        if (j->device != device)
            continue;
        if (j->cap >= ntasks) {
            if (fit == NULL || j->cap < (*fit)->cap)
                fit = pp;
        } else if (small == NULL) {
            small = pp;
        }
    }
    if (fit || small) {
        pp = fit ? fit : small;
        j = *pp;
        *pp = j->next_free;
    } else {
        j = calloc(1, sizeof(*j));
        WSYNC_CHECK_ALLOC(j);
        j->device = device;
        if ((e = cudaEventCreateWithFlags(&j->done, cudaEventDisableTiming)) != cudaSuccess) {
            free(j);
            return wsync_error(WSYNC_ERR_CUDA, "pack: cannot create an event on cuda:%d: %s", device,
                               cudaGetErrorString(e));
        }
    }
    if ((st = job_reserve(j, ntasks)) != WSYNC_OK) {
        job_put(j);
        return st;
    }
    *out = j;
    return WSYNC_OK;
}

/* Queues the kernel over ntasks tasks of a device table, then the job's
 * event. */
static wsync_status_t job_queue(wsync_pack_job_t *j, const wsync_pack_task_t *dev_tasks, size_t ntasks,
                                size_t nruns, void *dst_dev, const void *src_dev_base, cudaStream_t s)
{
    if (ntasks > 0) {
        cudaError_t e = (cudaError_t)wsync_cuda_pack_async(dst_dev, src_dev_base, dev_tasks, ntasks, s);
        if (e != cudaSuccess)
            return wsync_error(WSYNC_ERR_CUDA, "pack kernel (%zu runs, %zu tasks) on cuda:%d: %s", nruns, ntasks,
                               j->device, cudaGetErrorString(e));
    }
    CUDA_CHECK(cudaEventRecord(j->done, s));
    return WSYNC_OK;
}

wsync_status_t wsync_pack_cuda_start(void *dst_dev, const void *src_dev_base, const wsync_run2d_t *runs, size_t n,
                                     void *stream, wsync_pack_job_t **job)
{
    cudaStream_t own, s;
    wsync_pack_job_t *j = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t ntasks = wsync_pack_tasks(runs, n, (uintptr_t)dst_dev, (uintptr_t)src_dev_base, NULL, 0);
    int d;
    WSYNC_CHECK(wsync_cuda_stream(&d, &own, NULL));
    s = stream ? (cudaStream_t)stream : own;
    WSYNC_CHECK(job_get(d, ntasks, &j));
    wsync_pack_tasks(runs, n, (uintptr_t)dst_dev, (uintptr_t)src_dev_base, j->host_tasks, j->cap);
    if (ntasks > 0)
        CUDA_CHECK_GOTO(cudaMemcpyAsync(j->dev_tasks, j->host_tasks, ntasks * sizeof(wsync_pack_task_t),
                                        cudaMemcpyHostToDevice, s),
                        st, err_put_job);
    WSYNC_CHECK_GOTO(job_queue(j, j->dev_tasks, ntasks, n, dst_dev, src_dev_base, s), st, err_put_job);
    *job = j;
    return WSYNC_OK;
err_put_job:
    /* What was queued may still read the table: wait before reusing it. */
    cudaStreamSynchronize(s);
    job_put(j);
    return st;
}

wsync_status_t wsync_pack_cuda_prepare(const wsync_run2d_t *runs, size_t n, uintptr_t dst_align,
                                       uintptr_t src_align, wsync_pack_plan_t **plan)
{
    wsync_pack_plan_t *p;
    wsync_pack_task_t *host = NULL;
    wsync_status_t st = WSYNC_OK;
    cudaStream_t s;
    size_t bytes, i;
    int d;
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, NULL));
    p = calloc(1, sizeof(*p));
    WSYNC_CHECK_ALLOC(p);
    *p = (wsync_pack_plan_t){.device = d,
                             .nruns = n,
                             .dst_mod = (uint32_t)(dst_align % 16),
                             .src_mod = (uint32_t)(src_align % 16),
                             .align = 1};
    /* Only the bases' low four bits shape the table (pack_task.h). */
    p->ntasks = wsync_pack_tasks(runs, n, p->dst_mod, p->src_mod, NULL, 0);
    if (p->ntasks == 0)
        goto out;
    bytes = p->ntasks * sizeof(wsync_pack_task_t);
    host = malloc(bytes);
    if (host == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "pack plan: no host memory for a table of %zu tasks (%zu runs)",
                         p->ntasks, n);
        goto err_free_plan;
    }
    wsync_pack_tasks(runs, n, p->dst_mod, p->src_mod, host, p->ntasks);
    p->min_width = 16;
    p->len = wsync_pack_bytes(runs, n);
    p->start = malloc(p->ntasks * sizeof(*p->start));
    for (i = 0; i < p->ntasks; i++) {
        if (host[i].width > p->align)
            p->align = host[i].width;
        if (host[i].width < p->min_width)
            p->min_width = host[i].width;
        if (p->start != NULL)
            p->start[i] = host[i].dst;
        if (p->start != NULL && i > 0 && host[i].dst <= host[i - 1].dst) { /* parts need them in order */
            free(p->start);
            p->start = NULL;
        }
    }
    CUDA_CHECK_GOTO(cudaMalloc((void **)&p->dev_tasks, bytes), st, err_free_host);
    CUDA_CHECK_GOTO(cudaMemcpyAsync(p->dev_tasks, host, bytes, cudaMemcpyHostToDevice, s), st, err_free_dev);
    CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, err_free_dev);
    free(host);
out:
    *plan = p;
    return WSYNC_OK;
err_free_dev:
    cudaStreamSynchronize(s);
    cudaFree(p->dev_tasks);
err_free_host:
    free(host);
    free(p->start);
err_free_plan:
    free(p);
    return st;
}

/* The checks launch and launch_sum share: the calling thread on the plan's
 * device, both bases congruent to the prepared ones. */
static wsync_status_t launch_check(const wsync_pack_plan_t *p, const void *dst_dev, const void *src_dev_base,
                                   int *device, cudaStream_t *own)
{
    uint32_t dm = (uint32_t)((uintptr_t)dst_dev % 16), sm = (uint32_t)((uintptr_t)src_dev_base % 16);
    WSYNC_CHECK(wsync_cuda_stream(device, own, NULL));
    if (*device != p->device)
        return wsync_error(WSYNC_ERR_INVALID,
                           "pack plan (%zu runs) was prepared on cuda:%d but launched on cuda:%d: "
                           "prepare it on the device it packs on",
                           p->nruns, p->device, *device);
    if ((dm - p->dst_mod) % p->align != 0 || (sm - p->src_mod) % p->align != 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "pack plan (%zu runs) moves %u-byte vectors for a destination at 16k+%u and a source "
                           "at 16k+%u, but was launched with 16k+%u and 16k+%u: prepare it with the alignment of "
                           "the bases it packs",
                           p->nruns, p->align, p->dst_mod, p->src_mod, dm, sm);
    return WSYNC_OK;
}

wsync_status_t wsync_pack_cuda_launch(const wsync_pack_plan_t *p, void *dst_dev, const void *src_dev_base,
                                      void *stream, wsync_pack_job_t **job)
{
    cudaStream_t own;
    wsync_pack_job_t *j = NULL;
    wsync_status_t st;
    int d;
    WSYNC_CHECK(launch_check(p, dst_dev, src_dev_base, &d, &own));
    WSYNC_CHECK(job_get(d, 0, &j));
    st = job_queue(j, p->dev_tasks, p->ntasks, p->nruns, dst_dev, src_dev_base, stream ? (cudaStream_t)stream : own);
    if (st != WSYNC_OK) {
        job_put(j);
        return st;
    }
    *job = j;
    return WSYNC_OK;
}

wsync_status_t wsync_pack_cuda_launch_sum(const wsync_pack_plan_t *p, void *dst_dev, const void *src_dev_base,
                                          uint64_t key_off, uint64_t *dacc, unsigned int *dcount, uint64_t *hout,
                                          void *stream)
{
    const wsync_pack_part_t one = {.at = 0, .dst = dst_dev};
    return wsync_pack_cuda_launch_sum_parts(p, &one, 1, src_dev_base, key_off, dacc, dcount, hout, stream);
}

/* A digest of what a plan writes sums whole words: every task of it moves
 * 8 or 16 bytes at a time. */
static wsync_status_t sum_width_check(const wsync_pack_plan_t *p)
{
    if (p->min_width < 8)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "pack plan (%zu runs) moves %u-byte vectors: its digest needs whole 8-byte words",
                           p->nruns, p->min_width);
    return WSYNC_OK;
}

/* Can the plan land its put in these n parts, summing whole words? As
 * launch_check, and the parts (more than one) against its tasks. */
static wsync_status_t sum_parts_check(const wsync_pack_plan_t *p, const wsync_pack_part_t *parts, size_t n,
                                      const void *src_dev_base, int *d, cudaStream_t *own)
{
    if (p->ntasks > 0)
        WSYNC_CHECK(sum_width_check(p));
    if (n > 1 && p->start == NULL)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "pack plan (%zu runs): its tasks are not in destination order, "
                           "so it cannot land in parts",
                           p->nruns);
    if (n != 1)
        WSYNC_CHECK(wsync_pack_parts_check(p->start, p->ntasks, p->len, parts, n, p->dst_mod, p->align));
    return launch_check(p, parts[0].dst, src_dev_base, d, own);
}

wsync_status_t wsync_pack_cuda_launch_sum_parts(const wsync_pack_plan_t *p, const wsync_pack_part_t *parts,
                                                size_t n, const void *src_dev_base, uint64_t key_off,
                                                uint64_t *dacc, unsigned int *dcount, uint64_t *hout, void *stream)
{
    wsync_pack_dsts_t dsts = {.n = (uint32_t)n};
    cudaStream_t own;
    cudaError_t e;
    size_t i;
    int d;
    WSYNC_CHECK(sum_parts_check(p, parts, n, src_dev_base, &d, &own));
    for (i = 0; i < n; i++) {
        dsts.at[i] = parts[i].at;
        dsts.base[i] = (uint64_t)(uintptr_t)parts[i].dst - parts[i].at;
    }
    e = (cudaError_t)wsync_cuda_pack_digest_async(&dsts, src_dev_base, p->dev_tasks, p->ntasks, key_off,
                                                  (unsigned long long *)dacc, dcount, (unsigned long long *)hout,
                                                  stream ? (cudaStream_t)stream : own);
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_CUDA, "pack-digest kernel (%zu runs, %zu tasks, %zu parts) on cuda:%d: %s",
                           p->nruns, p->ntasks, n, d, cudaGetErrorString(e));
    return WSYNC_OK;
}

wsync_status_t wsync_pack_cuda_sum_check(const wsync_pack_plan_t *p, const wsync_pack_part_t *parts, size_t n,
                                         const void *src_dev_base)
{
    cudaStream_t own;
    int d;
    if (p->ntasks == 0)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "pack plan (%zu runs) has no task to batch", p->nruns);
    if (n < 1 || n > WSYNC_PACK_MAX_PARTS)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "a put in %zu parts (1 to %d)", n, WSYNC_PACK_MAX_PARTS);
    return sum_parts_check(p, parts, n, src_dev_base, &d, &own);
}

wsync_status_t wsync_pack_cuda_launch_sum_batch(const wsync_pack_sum_put_t *puts, size_t n, uint64_t *dacc,
                                                unsigned int *dcount, void *stream)
{
    wsync_pack_batch_t b;
    uint64_t total = 0;
    uint32_t nparts = 0;
    cudaError_t e;
    size_t i, k;
    if (n < 1 || n > WSYNC_PACK_SUM_BATCH)
        return wsync_error(WSYNC_ERR_INVALID, "a batch of %zu packed puts (1 to %d)", n, WSYNC_PACK_SUM_BATCH);
    memset(&b, 0, sizeof(b));
    for (i = 0; i < n; i++) {
        const wsync_pack_plan_t *p = puts[i].plan;
        const size_t np = puts[i].nparts;
        if (np < 1 || (np > 1 && nparts + np > WSYNC_PACK_BATCH_PARTS))
            return wsync_error(WSYNC_ERR_INVALID, "a batch of packed puts in more than %d parts",
                               WSYNC_PACK_BATCH_PARTS);
        b.first[i] = (uint32_t)total;
        b.p[i] = (wsync_pack_batch_put_t){.tasks = p->dev_tasks,
                                          .ntasks = p->ntasks,
                                          .src = puts[i].src_base,
                                          .dst = puts[i].parts[0].dst,
                                          .key = wsync_digest_base_key(puts[i].key_off),
                                          .hout = (unsigned long long *)puts[i].hout,
                                          .part0 = nparts,
                                          .nparts = (uint32_t)np};
        for (k = 0; np > 1 && k < np; k++, nparts++) {
            b.at[nparts] = puts[i].parts[k].at;
            b.base[nparts] = (uint64_t)(uintptr_t)puts[i].parts[k].dst - puts[i].parts[k].at;
        }
        total += p->ntasks;
    }
    if (total > 0x7fffffffu) { /* more blocks than a grid: one launch each */
        for (i = 0; i < n; i++)
            WSYNC_CHECK(wsync_pack_cuda_launch_sum_parts(puts[i].plan, puts[i].parts, puts[i].nparts,
                                                         puts[i].src_base, puts[i].key_off, dacc + i, dcount + i,
                                                         puts[i].hout, stream));
        return WSYNC_OK;
    }
    b.n = (uint32_t)n;
    b.first[n] = (uint32_t)total;
    e = (cudaError_t)wsync_cuda_pack_digest_batch_async(&b, (unsigned long long *)dacc, dcount, stream);
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_CUDA, "pack-digest kernel of %zu puts (%llu tasks): %s", n,
                           (unsigned long long)total, cudaGetErrorString(e));
    return WSYNC_OK;
}

void wsync_pack_cuda_plan_free(wsync_pack_plan_t *p)
{
    if (p == NULL)
        return;
    cudaFree(p->dev_tasks);
    free(p->start);
    free(p);
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

wsync_status_t wsync_pack_cuda_prepare(const wsync_run2d_t *runs, size_t n, uintptr_t dst_align,
                                       uintptr_t src_align, wsync_pack_plan_t **plan)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_launch(const wsync_pack_plan_t *plan, void *dst_dev, const void *src_dev_base,
                                      void *stream, wsync_pack_job_t **job)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_launch_sum(const wsync_pack_plan_t *plan, void *dst_dev, const void *src_dev_base,
                                          uint64_t key_off, uint64_t *dacc, unsigned int *dcount, uint64_t *hout,
                                          void *stream)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_launch_sum_parts(const wsync_pack_plan_t *plan, const wsync_pack_part_t *parts,
                                                size_t n, const void *src_dev_base, uint64_t key_off,
                                                uint64_t *dacc, unsigned int *dcount, uint64_t *hout, void *stream)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_sum_check(const wsync_pack_plan_t *plan, const wsync_pack_part_t *parts, size_t n,
                                         const void *src_dev_base)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_launch_sum_batch(const wsync_pack_sum_put_t *puts, size_t n, uint64_t *dacc,
                                                unsigned int *dcount, void *stream)
{
    return no_cuda();
}

void wsync_pack_cuda_plan_free(wsync_pack_plan_t *plan) {}

wsync_status_t wsync_pack_cuda_poll(wsync_pack_job_t *job, int *done)
{
    return no_cuda();
}

wsync_status_t wsync_pack_cuda_wait(wsync_pack_job_t *job)
{
    return job == NULL ? WSYNC_OK : no_cuda();
}
#endif
