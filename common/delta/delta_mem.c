/* delta_mem.c: delta encode and apply on either memory (delta_mem.h). */
#include "common/delta/delta_mem.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/base/checks.h"
#include "common/delta/delta_gpu.h"
#if WSYNC_HAVE_CUDA
#include "common/mem/cuda_stream.h"
#endif

struct wsync_delta_dev {
    pthread_mutex_t lock;
    void *buf; /* device: the scratch, then the wire (8-byte aligned) */
    size_t cap;
};

static size_t up8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* The device buffer of at least `need` bytes, locked on success. */
static wsync_status_t dev_take(const wsync_mem_ops_t *mem, wsync_delta_dev_t **devp, size_t need)
{
    static pthread_mutex_t create = PTHREAD_MUTEX_INITIALIZER;
    wsync_delta_dev_t *dev;
    wsync_status_t st = WSYNC_OK;
    pthread_mutex_lock(&create);
    if (*devp == NULL && (*devp = calloc(1, sizeof(**devp))) != NULL)
        pthread_mutex_init(&(*devp)->lock, NULL);
    dev = *devp;
    pthread_mutex_unlock(&create);
    WSYNC_CHECK_ALLOC(dev);
    pthread_mutex_lock(&dev->lock);
    if (dev->cap < need) {
        size_t cap = need + need / 4;
        void *buf = NULL;
        if (dev->buf)
            mem->free(dev->buf);
        dev->buf = NULL;
        dev->cap = 0;
        st = mem->alloc(cap, &buf);
        if (st == WSYNC_OK) {
            dev->buf = buf;
            dev->cap = cap;
        }
    }
    if (st != WSYNC_OK)
        pthread_mutex_unlock(&dev->lock);
    return st;
}

static void *stream_of(void)
{
#if WSYNC_HAVE_CUDA
    cudaStream_t s = NULL;
    if (wsync_cuda_stream(NULL, &s, NULL) != WSYNC_OK)
        return NULL;
    return s;
#else
    return NULL;
#endif
}

wsync_status_t wsync_delta_mem_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                      const void *next, size_t len, unsigned width, void *out, size_t cap,
                                      size_t *out_len)
{
    size_t scratch = up8(wsync_delta_gpu_scratch(len, width)), bound = wsync_delta_bound(len, width);
    wsync_status_t st;
    if (mem->kind == WSYNC_MEM_HOST)
        return wsync_delta_encode(base, next, len, width, out, cap, out_len, NULL);
    if (cap < bound)
        return wsync_error(WSYNC_ERR_INVALID, "delta: output of %zu bytes is under the bound %zu", cap, bound);
    WSYNC_CHECK(dev_take(mem, dev, scratch + bound));
    st = wsync_delta_gpu_encode(base, next, len, width, (char *)(*dev)->buf + scratch, bound, out_len, NULL,
                                (*dev)->buf, stream_of());
    if (st == WSYNC_OK)
        st = mem->copy(out, (char *)(*dev)->buf + scratch, *out_len);
    pthread_mutex_unlock(&(*dev)->lock);
    return st;
}

wsync_status_t wsync_delta_mem_apply(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, void *dst, size_t len,
                                     const void *wire, size_t wire_len)
{
    size_t scratch = up8(wsync_delta_gpu_scratch(len, 1));
    wsync_delta_header_t h;
    wsync_status_t st;
    if (mem->kind == WSYNC_MEM_HOST)
        return wsync_delta_apply(dst, len, wire, wire_len);
    WSYNC_CHECK(wsync_delta_parse_header(wire, wire_len, len, &h)); /* here, not read back from the GPU */
    WSYNC_CHECK(dev_take(mem, dev, scratch + up8(wire_len)));
    st = mem->copy((char *)(*dev)->buf + scratch, wire, wire_len);
    if (st == WSYNC_OK)
        st = wsync_delta_gpu_apply_parsed(dst, len, (char *)(*dev)->buf + scratch, &h, (*dev)->buf, stream_of());
    pthread_mutex_unlock(&(*dev)->lock);
    return st;
}

void wsync_delta_dev_free(const wsync_mem_ops_t *mem, wsync_delta_dev_t *dev)
{
    if (dev == NULL)
        return;
    if (dev->buf)
        mem->free(dev->buf);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}
