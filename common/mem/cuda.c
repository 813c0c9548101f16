/* cuda.c: the CUDA memory backend: device memory, copies on a dedicated
 * non-blocking stream per thread and device, completion by events, fill and
 * digest by the kernels of digest_cuda.cu. Without CUDA every op says so. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
#include "common/mem/copy_digest_cuda.h"
#include "common/base/cuda_checks.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/cuda_stream.h"

#define CUDA_MAX_DEVICES 64

/* One stream and one event per (thread, device): copies from different
 * threads never serialize behind each other, and a blocking copy waits on
 * its own event only, not on the whole device. */
static __thread cudaStream_t tls_stream[CUDA_MAX_DEVICES];
static __thread cudaEvent_t tls_event[CUDA_MAX_DEVICES];
static __thread uint64_t *tls_dsum[CUDA_MAX_DEVICES]; /* device accumulators */
static __thread uint64_t *tls_hsum[CUDA_MAX_DEVICES]; /* pinned copy of them */
static __thread size_t tls_nsum[CUDA_MAX_DEVICES];    /* words in each */
static __thread int tls_device = -1;
/* The device chosen by the last init in any thread; threads that never
 * called init (a transport's worker threads) use it. */
static int default_device = 0;

/* Thread-exit cleanups (wsync_cuda_at_thread_exit): registered once per
 * module, run by the key's destructor in every thread that armed it. */
#define MAX_CLEANUPS 8
static void (*cleanups[MAX_CLEANUPS])(void);
static int ncleanups;
static pthread_mutex_t cleanup_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void run_cleanups(void *arg)
{
    int i, n;
    (void)arg;
    pthread_mutex_lock(&cleanup_lock);
    n = ncleanups;
    pthread_mutex_unlock(&cleanup_lock);
    for (i = 0; i < n; i++)
        cleanups[i]();
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, run_cleanups);
}

void wsync_cuda_at_thread_exit(void (*cleanup)(void))
{
    int i, known = 0;
    pthread_once(&exit_once, make_exit_key);
    pthread_mutex_lock(&cleanup_lock);
    for (i = 0; i < ncleanups; i++)
        known |= cleanups[i] == cleanup;
    if (!known && ncleanups < MAX_CLEANUPS)
        cleanups[ncleanups++] = cleanup;
    pthread_mutex_unlock(&cleanup_lock);
    pthread_setspecific(exit_key, (void *)1); /* non-NULL: the destructor runs at this thread's exit */
}

static void thread_cleanup(void);

static wsync_status_t cuda_init(int device)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "cuda:%d requested but there is no CUDA device here (%s); "
                           "use --device host or run on a GPU machine",
                           device, e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (device < 0 || device >= n || device >= CUDA_MAX_DEVICES)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "cuda:%d requested but this machine has %d CUDA device%s "
                           "(cuda:0..cuda:%d)",
                           device, n, n == 1 ? "" : "s", n - 1);
    CUDA_CHECK(cudaSetDevice(device));
    tls_device = device;
    __atomic_store_n(&default_device, device, __ATOMIC_RELAXED);
    return WSYNC_OK;
}

wsync_status_t wsync_cuda_stream(int *device_out, cudaStream_t *stream_out, cudaEvent_t *event_out)
{
    int d = tls_device >= 0 ? tls_device : __atomic_load_n(&default_device, __ATOMIC_RELAXED);
    if (tls_device < 0) {
        CUDA_CHECK(cudaSetDevice(d));
        tls_device = d;
    }
    if (tls_stream[d] == NULL) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&tls_stream[d], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&tls_event[d], cudaEventDisableTiming));
        wsync_cuda_at_thread_exit(thread_cleanup);
    }
    if (device_out)
        *device_out = d;
    *stream_out = tls_stream[d];
    if (event_out)
        *event_out = tls_event[d];
    return WSYNC_OK;
}

/* Waits for everything queued on this thread's stream. */
static wsync_status_t stream_wait(cudaStream_t s, cudaEvent_t ev)
{
    CUDA_CHECK(cudaEventRecord(ev, s));
    CUDA_CHECK(cudaEventSynchronize(ev));
    return WSYNC_OK;
}

static wsync_status_t cuda_alloc(size_t len, void **out)
{
    int d;
    cudaStream_t s;
    void *p = NULL;
    cudaError_t e;
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, NULL));
    e = cudaMalloc(&p, len ? len : 1);
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_NOMEM, "cannot allocate %zu bytes on cuda:%d: %s", len, d,
                           cudaGetErrorString(e));
    *out = p;
    return WSYNC_OK;
}

static void cuda_free(void *ptr)
{
    if (ptr)
        cudaFree(ptr);
}

static wsync_status_t cuda_copy(void *dst, const void *src, size_t len)
{
    cudaStream_t s;
    cudaEvent_t ev;
    if (len == 0)
        return WSYNC_OK;
    WSYNC_CHECK(wsync_cuda_stream(NULL, &s, &ev));
    /* Unified addressing: the runtime tells host, device and peer apart;
     * pageable host memory is staged by the driver. */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, s));
    return stream_wait(s, ev);
}

static wsync_status_t cuda_copy_many(const wsync_copy_t *c, size_t n, int wait)
{
    cudaStream_t s;
    cudaEvent_t ev;
    size_t i;
    WSYNC_CHECK(wsync_cuda_stream(NULL, &s, &ev));
    for (i = 0; i < n; i++)
        if (c[i].len)
            CUDA_CHECK(cudaMemcpyAsync(c[i].dst, c[i].src, c[i].len, cudaMemcpyDefault, s));
    return wait ? stream_wait(s, ev) : WSYNC_OK;
}

static int is_device_ptr(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static wsync_status_t cuda_fill(void *dst, size_t len, uint64_t off, uint64_t seed)
{
    cudaStream_t s;
    cudaEvent_t ev;
    int e;
    if (!is_device_ptr(dst)) {
        wsync_fill_pattern(dst, len, off, seed);
        return WSYNC_OK;
    }
    WSYNC_CHECK(wsync_cuda_stream(NULL, &s, &ev));
    e = wsync_cuda_fill_async(dst, len, off, seed, s);
    if (e != 0)
        return wsync_error(WSYNC_ERR_CUDA, "fill kernel: %s", cudaGetErrorString((cudaError_t)e));
    return stream_wait(s, ev);
}

/* Queues on `s`: the n device words dsum zeroed, each range's digest added
 * into its word, and the words copied to pinned hsum. The accumulators live
 * on the device (device atomics on mapped host memory are not guaranteed
 * atomic). */
static wsync_status_t queue_digests(const wsync_digest_range_t *r, size_t n, uint64_t *dsum, uint64_t *hsum,
                                    cudaStream_t s)
{
    int e;
    if (n == 0)
        return WSYNC_OK;
    CUDA_CHECK(cudaMemsetAsync(dsum, 0, n * sizeof(uint64_t), s));
    e = wsync_cuda_digest_batch_async(r, n, dsum, s);
    if (e != 0)
        return wsync_error(WSYNC_ERR_CUDA, "digest kernel: %s", cudaGetErrorString((cudaError_t)e));
    CUDA_CHECK(cudaMemcpyAsync(hsum, dsum, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
    return WSYNC_OK;
}

static wsync_status_t cuda_digest_many(const wsync_digest_range_t *r, size_t n, uint64_t *sums)
{
    cudaStream_t s;
    cudaEvent_t ev;
    size_t i;
    int d;
    if (n == 0)
        return WSYNC_OK;
    if (!is_device_ptr(r[0].ptr)) {
        for (i = 0; i < n; i++)
            sums[i] = wsync_digest_sum(r[i].ptr, r[i].len, r[i].off);
        return WSYNC_OK;
    }
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, &ev));
    if (n > tls_nsum[d]) {
        size_t want = n < 256 ? 256 : n;
        cudaFree(tls_dsum[d]);
        cudaFreeHost(tls_hsum[d]);
        tls_dsum[d] = NULL;
        tls_hsum[d] = NULL;
        tls_nsum[d] = 0;
        CUDA_CHECK(cudaMalloc((void **)&tls_dsum[d], want * sizeof(uint64_t)));
        CUDA_CHECK(cudaMallocHost((void **)&tls_hsum[d], want * sizeof(uint64_t)));
        tls_nsum[d] = want;
    }
    WSYNC_CHECK(queue_digests(r, n, tls_dsum[d], tls_hsum[d], s));
    WSYNC_CHECK(stream_wait(s, ev));
    memcpy(sums, tls_hsum[d], n * sizeof(uint64_t));
    return WSYNC_OK;
}

/* A job: its event and sum buffers, kept on a per-thread free list so a
 * pipeline allocates nothing after its first few chunks. */
struct wsync_mem_job {
    struct wsync_mem_job *next_free;
    int device;
    cudaEvent_t copied, ev; /* the copy is done; everything is done */
    uint64_t *dsum, *hsum;  /* device accumulators, pinned copy */
    size_t cap, n;
    int host; /* the bytes were host memory: done at start */
};

static __thread wsync_mem_job_t *tls_free_jobs;
/* Jobs run on streams of their own: copies on two copy streams taken in
 * turn (as gpu_fanout_bench does), each job's digests on a third once its
 * copy is done (an event between), so no copy waits for a digest; and a
 * blocking copy or digest on the thread's stream never waits for queued
 * jobs. */
static __thread cudaStream_t tls_job_copy[CUDA_MAX_DEVICES][2], tls_job_digest[CUDA_MAX_DEVICES];
static __thread unsigned tls_job_turn;

/* Frees the calling thread's streams, events, sums and free jobs (at its
 * exit). Work still queued on its streams completes first. */
static void thread_cleanup(void)
{
    int d;
    while (tls_free_jobs) {
        wsync_mem_job_t *j = tls_free_jobs;
        tls_free_jobs = j->next_free;
        cudaEventDestroy(j->ev);
        cudaEventDestroy(j->copied);
        cudaFree(j->dsum);
        cudaFreeHost(j->hsum);
        free(j);
    }
    for (d = 0; d < CUDA_MAX_DEVICES; d++) {
        cudaStream_t *all[4] = {&tls_stream[d], &tls_job_copy[d][0], &tls_job_copy[d][1], &tls_job_digest[d]};
        int k;
        for (k = 0; k < 4; k++)
            if (*all[k]) {
                cudaStreamSynchronize(*all[k]);
                cudaStreamDestroy(*all[k]);
                *all[k] = NULL;
            }
        if (tls_event[d]) {
            cudaEventDestroy(tls_event[d]);
            tls_event[d] = NULL;
        }
        cudaFree(tls_dsum[d]);
        cudaFreeHost(tls_hsum[d]);
        tls_dsum[d] = tls_hsum[d] = NULL;
        tls_nsum[d] = 0;
    }
}

static wsync_status_t job_streams(int d, cudaStream_t *copy, cudaStream_t *digest)
{
    if (tls_job_digest[d] == NULL) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&tls_job_copy[d][0], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamCreateWithFlags(&tls_job_copy[d][1], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamCreateWithFlags(&tls_job_digest[d], cudaStreamNonBlocking));
        wsync_cuda_at_thread_exit(thread_cleanup);
    }
    *copy = tls_job_copy[d][tls_job_turn++ & 1];
    *digest = tls_job_digest[d];
    return WSYNC_OK;
}

static wsync_status_t job_get(int device, size_t n, wsync_mem_job_t **out)
{
    wsync_mem_job_t *j, **pp;
    for (pp = &tls_free_jobs; *pp; pp = &(*pp)->next_free)
        if ((*pp)->device == device && (*pp)->cap >= n) {
            j = *pp;
            *pp = j->next_free;
            *out = j;
            return WSYNC_OK;
        }
    j = calloc(1, sizeof(*j));
    WSYNC_CHECK_ALLOC(j);
    j->device = device;
    j->cap = n < 64 ? 64 : n;
    if (cudaEventCreateWithFlags(&j->ev, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&j->copied, cudaEventDisableTiming) != cudaSuccess ||
        cudaMalloc((void **)&j->dsum, j->cap * sizeof(uint64_t)) != cudaSuccess ||
        cudaMallocHost((void **)&j->hsum, j->cap * sizeof(uint64_t)) != cudaSuccess) {
        if (j->ev)
            cudaEventDestroy(j->ev);
        if (j->copied)
            cudaEventDestroy(j->copied);
        cudaFree(j->dsum);
        free(j);
        return wsync_error(WSYNC_ERR_CUDA, "cannot set up a copy job on cuda:%d: %s", device,
                           cudaGetErrorString(cudaGetLastError()));
    }
    *out = j;
    return WSYNC_OK;
}

static void cuda_job_free(wsync_mem_job_t *j)
{
    if (j == NULL)
        return;
    if (!j->host)
        cudaEventSynchronize(j->ev);
    j->host = 0;
    j->next_free = tls_free_jobs;
    tls_free_jobs = j;
}

/* 1 if the copy's digests can come out of the copy itself: the source is
 * device memory of this device (a peer GPU's bytes go by its copy engine,
 * which moves them without taking this GPU's SMs), and the ranges lie in
 * the copied bytes, in order, apart. */
static int fusable(int device, void *dst, const void *src, size_t len, const wsync_digest_range_t *r, size_t n)
{
    struct cudaPointerAttributes a;
    const char *d = dst, *at = dst;
    size_t i;
    if (len == 0 || cudaPointerGetAttributes(&a, src) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (a.type != cudaMemoryTypeDevice || a.device != device)
        return 0;
    for (i = 0; i < n; i++) {
        const char *p = r[i].ptr;
        if (p < at || r[i].len > len || p > d + len - r[i].len)
            return 0;
        at = p + r[i].len;
    }
    return 1;
}

/* Queues on `s`: the sums zeroed, the copy (each range by the fused
 * copy-digest, the bytes between ranges by the copy engine), the sums to
 * pinned hsum. */
static wsync_status_t queue_fused(char *dst, const char *src, size_t len, const wsync_digest_range_t *r, size_t n,
                                  uint64_t *dsum, uint64_t *hsum, cudaStream_t s)
{
    size_t at = 0, i;
    int e;
    if (n > 0)
        CUDA_CHECK(cudaMemsetAsync(dsum, 0, n * sizeof(uint64_t), s));
    for (i = 0; i < n; i++) {
        size_t o = (size_t)((const char *)r[i].ptr - dst);
        if (o > at)
            CUDA_CHECK(cudaMemcpyAsync(dst + at, src + at, o - at, cudaMemcpyDeviceToDevice, s));
        if ((e = wsync_cuda_copy_digest_async(dst + o, src + o, r[i].len, r[i].off, dsum + i, s)) != 0)
            return wsync_error(WSYNC_ERR_CUDA, "copy-digest kernel (%zu bytes): %s", r[i].len,
                               cudaGetErrorString((cudaError_t)e));
        at = o + r[i].len;
    }
    if (at < len)
        CUDA_CHECK(cudaMemcpyAsync(dst + at, src + at, len - at, cudaMemcpyDeviceToDevice, s));
    if (n > 0)
        CUDA_CHECK(cudaMemcpyAsync(hsum, dsum, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
    return WSYNC_OK;
}

static wsync_status_t cuda_copy_digest_start(void *dst, const void *src, size_t len, const wsync_digest_range_t *r,
                                             size_t n, wsync_mem_job_t **job)
{
    cudaStream_t s, cs = NULL;
    wsync_mem_job_t *j = NULL;
    wsync_status_t st = WSYNC_OK;
    int d;
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, NULL));
    WSYNC_CHECK(job_streams(d, &cs, &s));
    WSYNC_CHECK(job_get(d, n, &j));
    j->n = n;
    if (!is_device_ptr(dst)) {
        /* host bytes: copy and digest here and now */
        j->host = 1;
        st = cuda_copy(dst, src, len);
        if (st == WSYNC_OK)
            st = cuda_digest_many(r, n, j->hsum);
        goto out;
    }
    if (fusable(d, dst, src, len, r, n)) {
        /* one pass: the source read once, the copy's sums out of its registers */
        WSYNC_CHECK_GOTO(queue_fused(dst, src, len, r, n, j->dsum, j->hsum, cs), st, out);
        CUDA_CHECK_GOTO(cudaEventRecord(j->ev, cs), st, out);
        goto out;
    }
    if (len > 0)
        CUDA_CHECK_GOTO(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, cs), st, out);
    CUDA_CHECK_GOTO(cudaEventRecord(j->copied, cs), st, out);
    CUDA_CHECK_GOTO(cudaStreamWaitEvent(s, j->copied, 0), st, out);
    WSYNC_CHECK_GOTO(queue_digests(r, n, j->dsum, j->hsum, s), st, out);
    CUDA_CHECK_GOTO(cudaEventRecord(j->ev, s), st, out);
out:
    if (st != WSYNC_OK) {
        cuda_job_free(j);
        return st;
    }
    *job = j;
    return WSYNC_OK;
}

static wsync_status_t cuda_job_poll(wsync_mem_job_t *j, int wait, uint64_t *sums, int *done)
{
    cudaError_t e = cudaSuccess;
    *done = 0;
    if (!j->host) {
        e = wait ? cudaEventSynchronize(j->ev) : cudaEventQuery(j->ev);
        if (e == cudaErrorNotReady)
            return WSYNC_OK;
        if (e != cudaSuccess)
            return wsync_error(WSYNC_ERR_CUDA, "copy job on cuda:%d: %s", j->device, cudaGetErrorString(e));
    }
    memcpy(sums, j->hsum, j->n * sizeof(uint64_t));
    *done = 1;
    return WSYNC_OK;
}

static wsync_status_t cuda_digest_sum(const void *ptr, size_t len, uint64_t off, uint64_t *sum)
{
    wsync_digest_range_t r = {.ptr = ptr, .len = len, .off = off};
    return cuda_digest_many(&r, 1, sum);
}

int wsync_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

#else /* !WSYNC_HAVE_CUDA */

static wsync_status_t no_cuda(void)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "memory cuda: wsync was not built with CUDA "
                                              "(rebuild with CUDA=1 where /usr/local/cuda exists)");
}
int wsync_cuda_device_count(void)
{
    return 0;
}
static wsync_status_t cuda_init(int device)
{
    return no_cuda();
}
static wsync_status_t cuda_alloc(size_t len, void **out)
{
    return no_cuda();
}
static void cuda_free(void *ptr) {}
static wsync_status_t cuda_copy(void *dst, const void *src, size_t len)
{
    return no_cuda();
}
static wsync_status_t cuda_copy_many(const wsync_copy_t *c, size_t n, int wait)
{
    return no_cuda();
}
static wsync_status_t cuda_fill(void *dst, size_t len, uint64_t off, uint64_t seed)
{
    return no_cuda();
}
static wsync_status_t cuda_digest_sum(const void *ptr, size_t len, uint64_t off, uint64_t *sum)
{
    return no_cuda();
}
static wsync_status_t cuda_digest_many(const wsync_digest_range_t *r, size_t n, uint64_t *sums)
{
    return no_cuda();
}
static wsync_status_t cuda_copy_digest_start(void *dst, const void *src, size_t len, const wsync_digest_range_t *r,
                                             size_t n, wsync_mem_job_t **job)
{
    return no_cuda();
}
static wsync_status_t cuda_job_poll(wsync_mem_job_t *j, int wait, uint64_t *sums, int *done)
{
    return no_cuda();
}
static void cuda_job_free(wsync_mem_job_t *j) {}
#endif

/* One table for both builds: without the library every op says why. */
const wsync_mem_ops_t wsync_mem_cuda = {
    .name = "cuda",
    .kind = WSYNC_MEM_CUDA,
    .init = cuda_init,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .copy_many = cuda_copy_many,
    .fill = cuda_fill,
    .digest_sum = cuda_digest_sum,
    .digest_many = cuda_digest_many,
    .copy_digest_start = cuda_copy_digest_start,
    .job_poll = cuda_job_poll,
    .job_free = cuda_job_free,
};
