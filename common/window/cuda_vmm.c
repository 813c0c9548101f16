/* cuda_vmm.c: sparse GPU windows (cuda_vmm.h): one reservation of address
 * space for the whole window and one physical allocation per run of backed
 * granules, mapped at its offset (cuMemMap maps a whole allocation: it takes
 * no offset into one). The driver's calls are reached through the runtime's
 * entry points, so the static cudart build needs no -lcuda. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/window/window.h"

#if WSYNC_HAVE_CUDA
#include <cuda.h>

#include "common/base/cuda_checks.h"
#include "common/mem/cuda_stream.h"
#include "common/window/cuda_vmm.h"

typedef struct vmm_run {
    uint64_t granule, count;
    CUmemGenericAllocationHandle h;
    int mapped;
} vmm_run_t;

typedef struct vmm {
    CUdeviceptr va;
    size_t vlen, granule, nruns;
    vmm_run_t *runs;
} vmm_t;

static struct {
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*addr_free)(CUdeviceptr, size_t);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static const char *drv_missing; /* the first entry point not found, or NULL */

static void drv_entry(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || *fn == NULL) {
        *fn = NULL;
        if (drv_missing == NULL)
            drv_missing = name;
    }
}

static void drv_load(void)
{
    drv_entry("cuMemCreate", (void **)&drv.create);
    drv_entry("cuMemRelease", (void **)&drv.release);
    drv_entry("cuMemAddressReserve", (void **)&drv.reserve);
    drv_entry("cuMemAddressFree", (void **)&drv.addr_free);
    drv_entry("cuMemMap", (void **)&drv.map);
    drv_entry("cuMemUnmap", (void **)&drv.unmap);
    drv_entry("cuMemSetAccess", (void **)&drv.set_access);
    drv_entry("cuMemGetAllocationGranularity", (void **)&drv.granularity);
}

#define DRV_CHECK_GOTO(call, st, label)                                                               \
    do {                                                                                              \
        CUresult drv_r_ = (call);                                                                     \
        if (drv_r_ != CUDA_SUCCESS) {                                                                 \
            (st) = wsync_error(drv_r_ == CUDA_ERROR_OUT_OF_MEMORY ? WSYNC_ERR_NOMEM : WSYNC_ERR_CUDA, \
                               "%s failed (CUresult %d)", #call, (int)drv_r_);                        \
            goto label;                                                                               \
        }                                                                                             \
    } while (0)

static void vmm_undo(vmm_t *v)
{
    size_t i;
    for (i = 0; i < v->nruns; i++) {
        if (v->runs[i].mapped)
            drv.unmap(v->va + v->runs[i].granule * v->granule, v->runs[i].count * v->granule);
        if (v->runs[i].h)
            drv.release(v->runs[i].h);
    }
    if (v->va)
        drv.addr_free(v->va, v->vlen);
    free(v->runs);
    free(v);
}

/* The runs of granules that cover back[0..n) (sorted by offset). */
static wsync_status_t vmm_runs(vmm_t *v, const wsync_window_range_t *back, size_t n, size_t len)
{
    size_t i;
    v->runs = calloc(n + 1, sizeof(*v->runs));
    WSYNC_CHECK_ALLOC(v->runs);
    for (i = 0; i < n; i++) {
        uint64_t g0, g1;
        if (back[i].len == 0)
            continue;
        if (back[i].off + back[i].len > len || (i > 0 && back[i].off < back[i - 1].off))
            return wsync_error(WSYNC_ERR_INVALID, "range %zu is out of order or past the end", i);
        g0 = back[i].off / v->granule;
        g1 = (back[i].off + back[i].len + v->granule - 1) / v->granule;
        if (v->nruns && g0 <= v->runs[v->nruns - 1].granule + v->runs[v->nruns - 1].count) {
            vmm_run_t *last = &v->runs[v->nruns - 1];
            if (g1 > last->granule + last->count)
                last->count = g1 - last->granule;
        } else {
            v->runs[v->nruns++] = (vmm_run_t){.granule = g0, .count = g1 - g0};
        }
    }
    return WSYNC_OK;
}

wsync_status_t wsync_cuda_alloc_sparse(size_t len, const wsync_window_range_t *back, size_t n, wsync_window_t *out,
                                       size_t *backed)
{
    vmm_t *v = NULL;
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    size_t i, total = 0;
    int device;
    cudaStream_t s;
    wsync_status_t st = WSYNC_OK;
    pthread_once(&drv_once, drv_load);
    if (drv_missing)
        return wsync_error(WSYNC_ERR_CUDA,
                           "a sparse GPU image needs the CUDA driver's %s (virtual memory management); "
                           "set WSYNC_SPARSE_IMAGE=0 to keep a whole image",
                           drv_missing);
    WSYNC_CHECK(wsync_cuda_stream(&device, &s, NULL));
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    v = calloc(1, sizeof(*v));
    WSYNC_CHECK_ALLOC(v);
    DRV_CHECK_GOTO(drv.granularity(&v->granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), st, fail);
    v->vlen = (len + v->granule - 1) / v->granule * v->granule;
    if (v->vlen == 0)
        v->vlen = v->granule;
    WSYNC_CHECK_GOTO(vmm_runs(v, back, n, len), st, fail);
    DRV_CHECK_GOTO(drv.reserve(&v->va, v->vlen, v->granule, 0, 0), st, fail);
    for (i = 0; i < v->nruns; i++) {
        vmm_run_t *run = &v->runs[i];
        CUdeviceptr at = v->va + run->granule * v->granule;
        size_t bytes = run->count * v->granule;
        DRV_CHECK_GOTO(drv.create(&run->h, bytes, &prop, 0), st, fail);
        DRV_CHECK_GOTO(drv.map(at, bytes, 0, run->h, 0), st, fail);
        run->mapped = 1;
        DRV_CHECK_GOTO(drv.set_access(at, bytes, &acc, 1), st, fail);
        CUDA_CHECK_GOTO(cudaMemsetAsync((void *)(uintptr_t)at, 0, bytes, s), st, fail); /* as a fresh image */
        total += bytes;
    }
    CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, fail);
    *out = (wsync_window_t){.ptr = (void *)(uintptr_t)v->va, .len = len, .fd = -1, .priv = v};
    if (backed)
        *backed = total;
    return WSYNC_OK;
fail:
    vmm_undo(v);
    return wsync_error(st, "cannot reserve a sparse %zu-byte GPU image: %s", len, wsync_last_error());
}

void cuda_vmm_free(wsync_window_t *w)
{
    if (w->priv == NULL)
        return;
    cudaDeviceSynchronize(); /* no copy may still read or write it */
    vmm_undo(w->priv);
    *w = (wsync_window_t){.fd = -1};
}

#else /* !WSYNC_HAVE_CUDA */

wsync_status_t wsync_cuda_alloc_sparse(size_t len, const wsync_window_range_t *back, size_t n, wsync_window_t *out,
                                       size_t *backed)
{
    (void)back;
    (void)n;
    (void)out;
    (void)backed;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "a sparse %zu-byte GPU image needs a build with CUDA", len);
}

#endif
