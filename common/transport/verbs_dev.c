/* verbs_dev.c: the verbs transport's devices: which NIC ports to open
 * (WSYNC_IB_DEVICES, else PCI proximity to the GPU, else all active ports),
 * their PD/CQ/GID set-up and teardown, one completion-polling thread per
 * device, and the memory registration cache (host memory with ibv_reg_mr,
 * GPU memory through dma-buf with a fallback to peer memory). */
#if WSYNC_HAVE_VERBS
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/settings.h"
#include "common/transport/verbs_internal.h"
#include "common/base/verbs_select.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* The sysfs PCI path of the GPU this transport serves, for proximity. */
static int gpu_pci_path(int device, char *out, size_t len)
{
#if WSYNC_HAVE_CUDA
    char bus[32], link[128];
    int i;
    if (device < 0 || cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess)
        return 0;
    for (i = 0; bus[i]; i++)
        bus[i] = (char)(bus[i] >= 'A' && bus[i] <= 'F' ? bus[i] - 'A' + 'a' : bus[i]);
    snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", bus);
    return realpath(link, out) != NULL && strlen(out) < len;
#else
    (void)device;
    (void)out;
    (void)len;
    return 0;
#endif
}

typedef struct candidate {
    struct ibv_device *dev;
    uint8_t port;
    char path[PATH_MAX];
} candidate_t;

/* Active ports that WSYNC_IB_DEVICES selects, in device-list order. */
static int list_candidates(struct ibv_device **list, int n, const char *spec, candidate_t *out, int cap)
{
    int i, k = 0;
    for (i = 0; i < n && k < cap; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr da;
        uint8_t p;
        if (ctx == NULL)
            continue;
        if (ibv_query_device(ctx, &da) == 0)
            for (p = 1; p <= da.phys_port_cnt && k < cap; p++) {
                struct ibv_port_attr pa;
                char link[PATH_MAX];
                if (ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE ||
                    !verbs_dev_selected(spec, ibv_get_device_name(list[i]), p))
                    continue;
                out[k].dev = list[i];
                out[k].port = p;
                snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", ibv_get_device_name(list[i]));
                if (realpath(link, out[k].path) == NULL)
                    out[k].path[0] = '\0';
                k++;
                break; /* one port per device */
            }
        ibv_close_device(ctx);
    }
    return k;
}

/* The ib_devices setting; NULL (everything) when empty. */
static const char *dev_spec(void)
{
    const char *s = wsync_setting_str(WSYNC_SET_IB_DEVICES);
    return s[0] ? s : NULL;
}

int verbs_probe(char *why, size_t whylen)
{
    const char *spec = dev_spec();
    struct ibv_device **list;
    candidate_t c[VERBS_MAX_DEVS];
    int n = 0, k;
    if (!verbs_dev_spec_valid(spec)) {
        snprintf(why, whylen, "%s", wsync_last_error());
        return 0;
    }
    list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        snprintf(why, whylen,
                 "no RDMA device (libibverbs lists none: load a NIC driver, or rdma_rxe for "
                 "software RoCE)");
        if (list)
            ibv_free_device_list(list);
        return 0;
    }
    k = list_candidates(list, n, spec, c, VERBS_MAX_DEVS);
    ibv_free_device_list(list);
    if (k == 0) {
        snprintf(why, whylen, "no active RDMA port%s%s%s", spec ? " selected by WSYNC_IB_DEVICES='" : "",
                 spec ? spec : "", spec ? "'" : "");
        return 0;
    }
    return 1;
}

static int gid_type_of(struct ibv_context *ctx, uint8_t port, int idx, union ibv_gid *gid, int *valid)
{
    struct ibv_gid_entry e;
    *valid = 0;
    if (ibv_query_gid_ex(ctx, port, (uint32_t)idx, &e, 0) != 0)
        return VERBS_GID_IB;
    memcpy(gid->raw, e.gid.raw, 16);
    *valid = 1;
    return e.gid_type == IBV_GID_TYPE_ROCE_V2   ? VERBS_GID_ROCE_V2
           : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? VERBS_GID_ROCE_V1
                                                : VERBS_GID_IB;
}

/* Port attributes, GID choice (RoCE v2, IPv4-mapped unless configured). */
static wsync_status_t dev_port_setup(verbs_dev_t *d, const struct ibv_device_attr *da)
{
    struct ibv_port_attr pa;
    if (ibv_query_port(d->ctx, d->port, &pa) != 0)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot query port %u of %s: %s", d->port, d->name,
                           strerror(errno));
    d->lid = pa.lid;
    d->mtu = pa.active_mtu;
    d->max_msg = pa.max_msg_sz ? pa.max_msg_sz : (1u << 30);
    d->is_roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    d->gid_index = 0;
    if (d->is_roce) {
        verbs_gid_entry_t tab[128];
        int n = pa.gid_tbl_len < 128 ? pa.gid_tbl_len : 128, i;
        for (i = 0; i < n; i++) {
            union ibv_gid g = {.raw = {0}};
            tab[i].type = gid_type_of(d->ctx, d->port, i, &g, &tab[i].valid);
            memcpy(tab[i].gid, g.raw, 16);
        }
        d->gid_index = verbs_gid_pick(tab, n, (int)wsync_setting_int(WSYNC_SET_IB_GID_INDEX));
        if (d->gid_index < 0)
            return wsync_error(WSYNC_ERR_UNSUPPORTED, "verbs: %s port %u: %s", d->name, d->port, wsync_last_error());
    }
    if (ibv_query_gid(d->ctx, d->port, d->gid_index, &d->gid) != 0)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot read GID %d of %s port %u", d->gid_index, d->name,
                           d->port);
    d->send_depth = da->max_qp_wr < VERBS_SEND_DEPTH ? da->max_qp_wr : VERBS_SEND_DEPTH;
    return WSYNC_OK;
}

/* PD -> completion channel -> CQ, unwound in reverse on failure. */
static wsync_status_t dev_open(verbs_transport_t *t, verbs_dev_t *d, struct ibv_device *dev, uint8_t port)
{
    struct ibv_device_attr da;
    wsync_status_t st;
    int cqe;
    snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
    d->t = t;
    d->port = port;
    d->ctx = ibv_open_device(dev);
    if (d->ctx == NULL)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot open device %s: %s", d->name, strerror(errno));
    if (ibv_query_device(d->ctx, &da) != 0) {
        st = wsync_error(WSYNC_ERR_VERBS, "verbs: cannot query device %s: %s", d->name, strerror(errno));
        goto err_close;
    }
    WSYNC_CHECK_GOTO(dev_port_setup(d, &da), st, err_close);
    d->pd = ibv_alloc_pd(d->ctx);
    if (d->pd == NULL) {
        st = wsync_error(WSYNC_ERR_VERBS, "verbs: cannot allocate a protection domain on %s", d->name);
        goto err_close;
    }
    d->ch = ibv_create_comp_channel(d->ctx);
    if (d->ch == NULL) {
        st = wsync_error(WSYNC_ERR_VERBS, "verbs: cannot create a completion channel on %s", d->name);
        goto err_dealloc_pd;
    }
    /* Non-blocking, so the poller can wait with a timeout and notice close. */
    fcntl(d->ch->fd, F_SETFL, fcntl(d->ch->fd, F_GETFL) | O_NONBLOCK);
    cqe = da.max_cqe < VERBS_CQ_DEPTH ? da.max_cqe : VERBS_CQ_DEPTH;
    d->cq = ibv_create_cq(d->ctx, cqe, d, d->ch, 0);
    if (d->cq == NULL) {
        st = wsync_error(WSYNC_ERR_VERBS, "verbs: cannot create a %d-entry completion queue on %s", cqe, d->name);
        goto err_destroy_ch;
    }
    return WSYNC_OK;
err_destroy_ch:
    ibv_destroy_comp_channel(d->ch);
    d->ch = NULL;
err_dealloc_pd:
    ibv_dealloc_pd(d->pd);
    d->pd = NULL;
err_close:
    ibv_close_device(d->ctx);
    d->ctx = NULL;
    return st;
}

static void dev_close(verbs_dev_t *d)
{
    if (d->ctx == NULL)
        return;
    ibv_destroy_cq(d->cq);
    ibv_destroy_comp_channel(d->ch);
    ibv_dealloc_pd(d->pd);
    ibv_close_device(d->ctx);
    d->ctx = NULL;
}

wsync_status_t verbs_devs_open(verbs_transport_t *t)
{
    const char *spec = dev_spec();
    struct ibv_device **list;
    candidate_t *c;
    const char *paths[VERBS_MAX_DEVS];
    int near[VERBS_MAX_DEVS];
    char gpu[PATH_MAX];
    int n = 0, k, i, use_near = 0;
    wsync_status_t st = WSYNC_OK;

    if (!verbs_dev_spec_valid(spec))
        return WSYNC_ERR_INVALID;
    list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        if (list)
            ibv_free_device_list(list);
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "verbs: no RDMA device");
    }
    c = calloc(VERBS_MAX_DEVS, sizeof(*c));
    if (c == NULL) {
        ibv_free_device_list(list);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    k = list_candidates(list, n, spec, c, VERBS_MAX_DEVS);
    /* Without an explicit choice, a GPU's transport uses the NICs nearest to
     * it on the PCI tree (same switch beats same root complex). */
    if ((spec == NULL || *spec == '\0') && gpu_pci_path(t->cfg.device, gpu, sizeof(gpu))) {
        for (i = 0; i < k; i++)
            paths[i] = c[i].path[0] ? c[i].path : NULL;
        use_near = verbs_pci_closest(gpu, paths, k, near) > 0;
    }
    for (i = 0; i < k && st == WSYNC_OK; i++) {
        if (use_near && !near[i])
            continue;
        st = dev_open(t, &t->devs[t->ndev], c[i].dev, c[i].port);
        if (st == WSYNC_OK) {
            t->devs[t->ndev].index = t->ndev;
            t->ndev++;
        }
    }
    ibv_free_device_list(list);
    free(c);
    if (st == WSYNC_OK && t->ndev == 0)
        st = wsync_error(WSYNC_ERR_UNSUPPORTED, "verbs: no active RDMA port%s%s",
                         spec ? " matches WSYNC_IB_DEVICES=" : "", spec ? spec : "");
    if (st != WSYNC_OK)
        verbs_devs_close(t);
    return st;
}

void verbs_devs_close(verbs_transport_t *t)
{
    int i;
    for (i = t->ndev - 1; i >= 0; i--)
        dev_close(&t->devs[i]);
    t->ndev = 0;
}

/* Drains the CQ, then sleeps on the completion channel (armed before the
 * last drain, so no completion slips between the two) up to 50 ms, so close
 * is noticed quickly without spinning a shared core. */
static void *poller_main(void *arg)
{
    verbs_dev_t *d = arg;
    struct ibv_wc wc[32];
    ibv_req_notify_cq(d->cq, 0);
    while (!__atomic_load_n(&d->t->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = d->ch->fd, .events = POLLIN};
        int n = ibv_poll_cq(d->cq, 32, wc), i;
        if (n > 0) {
            for (i = 0; i < n; i++)
                verbs_on_wc(d, &wc[i]);
            continue;
        }
        if (n < 0) {
            wsync_cqueue_push_error(&d->t->cq, ~0ULL, -1, WSYNC_ERR_VERBS,
                                    "verbs: polling the completion queue of %s failed", d->name);
            usleep(10000);
            continue;
        }
        if (poll(&pfd, 1, 50) > 0) {
            struct ibv_cq *cq;
            void *ctx;
            if (ibv_get_cq_event(d->ch, &cq, &ctx) == 0) {
                ibv_ack_cq_events(cq, 1);
                ibv_req_notify_cq(cq, 0);
            }
        }
    }
    return NULL;
}

wsync_status_t verbs_pollers_start(verbs_transport_t *t)
{
    int i;
    for (i = 0; i < t->ndev; i++) {
        if (pthread_create(&t->devs[i].poller, NULL, poller_main, &t->devs[i]) != 0)
            return wsync_error(WSYNC_ERR_IO, "verbs: cannot start the completion thread of %s", t->devs[i].name);
        t->devs[i].poller_started = 1;
    }
    return WSYNC_OK;
}

void verbs_pollers_stop(verbs_transport_t *t)
{
    int i;
    __atomic_store_n(&t->stopping, 1, __ATOMIC_RELEASE);
    for (i = t->ndev - 1; i >= 0; i--)
        if (t->devs[i].poller_started) {
            pthread_join(t->devs[i].poller, NULL);
            t->devs[i].poller_started = 0;
        }
}

/* --- memory registration ---------------------------------------------- */

#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* A dma-buf fd for a GPU range, from the CUDA driver (looked up at run
 * time, so the library does not link libcuda). -1 if unavailable. */
static int cuda_dmabuf_fd(void *base, size_t len)
{
    typedef int (*get_handle_fn)(void *handle, unsigned long long dptr, size_t size, int type,
                                 unsigned long long flags);
    static get_handle_fn fn;
    static int looked;
    int fd = -1;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (lib == NULL)
            lib = dlopen("libcuda.so.1", RTLD_NOW);
        if (lib)
            fn = (get_handle_fn)dlsym(lib, "cuMemGetHandleForAddressRange");
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 */
    if (fn == NULL || fn(&fd, (unsigned long long)(uintptr_t)base, len, 1, 0) != 0)
        return -1;
    return fd;
}

static wsync_status_t reg_one(verbs_dev_t *d, verbs_mr_t *m)
{
    if (m->kind == WSYNC_MEM_HOST) {
        m->mr[d->index] = ibv_reg_mr(d->pd, m->ptr, m->len, MR_ACCESS);
        if (m->mr[d->index] == NULL)
            return wsync_error(WSYNC_ERR_VERBS,
                               "verbs: cannot register %zu bytes of host memory on %s: %s (raise the "
                               "locked-memory "
                               "limit: ulimit -l unlimited)",
                               m->len, d->name, strerror(errno));
        return WSYNC_OK;
    }
    /* GPU memory: dma-buf first (upstream kernels, no extra module); the
     * range must be page-aligned, so register the pages around it. */
    if (m->dmabuf_fd < 0) {
        uintptr_t base = (uintptr_t)m->ptr & ~(uintptr_t)4095;
        size_t span = ((uintptr_t)m->ptr + m->len + 4095 - base) & ~(size_t)4095;
        m->dmabuf_fd = cuda_dmabuf_fd((void *)base, span);
    }
    if (m->dmabuf_fd >= 0) {
        uintptr_t base = (uintptr_t)m->ptr & ~(uintptr_t)4095;
        m->mr[d->index] = ibv_reg_dmabuf_mr(d->pd, (uint64_t)((uintptr_t)m->ptr - base), m->len,
                                            (uint64_t)(uintptr_t)m->ptr, m->dmabuf_fd, MR_ACCESS);
        if (m->mr[d->index])
            return WSYNC_OK;
    }
    /* Fallback: plain registration works where nvidia-peermem is loaded. */
    m->mr[d->index] = ibv_reg_mr(d->pd, m->ptr, m->len, MR_ACCESS);
    if (m->mr[d->index] == NULL)
        return wsync_error(WSYNC_ERR_VERBS,
                           "verbs: cannot register %zu bytes of GPU memory on %s: dma-buf %s and peer memory "
                           "failed (%s); load nvidia-peermem or use a kernel/driver with dma-buf support",
                           m->len, d->name, m->dmabuf_fd >= 0 ? "registration" : "export", strerror(errno));
    return WSYNC_OK;
}

wsync_status_t verbs_mr_get(verbs_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind, verbs_mr_t **out)
{
    verbs_mr_t *m;
    wsync_status_t st = WSYNC_OK;
    int i;
    pthread_mutex_lock(&t->lock);
    /* Registered once: a range inside a cached registration reuses it. */
    for (m = t->mrs; m; m = m->next)
        if (m->kind == kind && (char *)ptr >= m->ptr && (char *)ptr + len <= m->ptr + m->len) {
            m->refs++;
            pthread_mutex_unlock(&t->lock);
            *out = m;
            return WSYNC_OK;
        }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        pthread_mutex_unlock(&t->lock);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    m->ptr = ptr;
    m->len = len;
    m->kind = kind;
    m->refs = 1;
    m->dmabuf_fd = -1;
    for (i = 0; i < t->ndev && st == WSYNC_OK; i++)
        st = reg_one(&t->devs[i], m);
    if (st != WSYNC_OK) {
        for (i = t->ndev - 1; i >= 0; i--)
            if (m->mr[i])
                ibv_dereg_mr(m->mr[i]);
        if (m->dmabuf_fd >= 0)
            close(m->dmabuf_fd);
        free(m);
        pthread_mutex_unlock(&t->lock);
        return st;
    }
    m->next = t->mrs;
    t->mrs = m;
    pthread_mutex_unlock(&t->lock);
    *out = m;
    return WSYNC_OK;
}

static void mr_free(verbs_transport_t *t, verbs_mr_t *m)
{
    int i;
    for (i = t->ndev - 1; i >= 0; i--)
        if (m->mr[i])
            ibv_dereg_mr(m->mr[i]);
    if (m->dmabuf_fd >= 0)
        close(m->dmabuf_fd);
    free(m);
}

void verbs_mr_put(verbs_transport_t *t, verbs_mr_t *m)
{
    verbs_mr_t **pp;
    pthread_mutex_lock(&t->lock);
    if (--m->refs > 0) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    for (pp = &t->mrs; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    mr_free(t, m);
}

void verbs_mrs_free(verbs_transport_t *t)
{
    while (t->mrs) {
        verbs_mr_t *m = t->mrs;
        t->mrs = m->next;
        mr_free(t, m);
    }
}
#endif
