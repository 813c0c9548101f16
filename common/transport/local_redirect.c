/* local_redirect.c: the local transport's redirect. The sender writes the
 * receiver's memory itself, so the spans must reach it: the receiver
 * resolves each span's memory to its CUDA allocation and that allocation's
 * IPC handle once per redirect, numbers the redirect (a generation carried
 * in the region's key, which goes with every pull request), and answers a
 * sender's ask for it over the connection's socket; a sender fetches a
 * region's spans once per generation, maps their allocations (once per
 * allocation, as it maps the region's) and cuts each put at span edges, a
 * part written to its memory, its sum keyed at its region offset so that
 * the parts' sums add up to the put's. Memory CUDA cannot export over IPC
 * (virtual memory management: expandable segments, cudaMallocAsync pools)
 * makes the redirect refuse (WSYNC_ERR_UNSUPPORTED): the caller keeps
 * landing in the region and copying on. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/mem/digest_key.h"
#include "common/net/fdpass.h"
#include "common/transport/local_internal.h"

#if WSYNC_HAVE_CUDA
static uint64_t next_gen; /* process-wide, so a generation names one redirect of one region */

/* The spans' allocations and handles: *allocs (deduplicated) and *wire.
 * Called on the transport's device. */
static wsync_status_t resolve(const wsync_redirect_t *spans, size_t n, lo_wire_alloc_t **allocs, size_t *nallocs,
                              lo_wire_span_t *wire)
{
    lo_wire_alloc_t *a = calloc(n + 1, sizeof(*a));
    uint64_t base = 0;
    size_t i, k, size = 0, na = 0, last = 0;
    WSYNC_CHECK_ALLOC(a);
    for (i = 0; i < n; i++) {
        const uint64_t p = (uint64_t)(uintptr_t)spans[i].ptr;
        cudaError_t e;
        if (na == 0 || p < base || p + spans[i].len > base + size) {
            if (lo_alloc_of(spans[i].ptr, &base, &size) != WSYNC_OK || p + spans[i].len > base + size) {
                free(a);
                return wsync_error(WSYNC_ERR_UNSUPPORTED,
                                   "transport local: redirect span %zu (%p, %llu bytes) is not inside one CUDA "
                                   "allocation of this process",
                                   i, spans[i].ptr, (unsigned long long)spans[i].len);
            }
            for (k = 0; k < na && a[k].base != base; k++)
                ;
            if (k == na) {
                a[na].base = base;
                if ((e = cudaIpcGetMemHandle(&a[na].handle, (void *)(uintptr_t)base)) != cudaSuccess) {
                    free(a);
                    return wsync_error(WSYNC_ERR_UNSUPPORTED,
                                       "transport local: cannot export the memory at %p (allocation %p, %zu "
                                       "bytes) over CUDA IPC: %s; memory of virtual memory management "
                                       "(expandable segments, cudaMallocAsync pools) cannot be, so its bytes "
                                       "land in the image and are copied on",
                                       spans[i].ptr, (void *)(uintptr_t)base, size, cudaGetErrorString(e));
                }
                na++;
            }
            last = k;
        }
        wire[i] = (lo_wire_span_t){.off = spans[i].off,
                                   .len = spans[i].len,
                                   .alloc_off = p - base,
                                   .alloc = (uint32_t)last};
    }
    *allocs = a;
    *nallocs = na;
    return WSYNC_OK;
}

static int same_table(const lo_region_t *r, const lo_wire_alloc_t *a, size_t na, const lo_wire_span_t *w, size_t n)
{
    return r->nallocs == na && r->nspans == n && (na == 0 || memcmp(r->allocs, a, na * sizeof(*a)) == 0) &&
           (n == 0 || memcmp(r->spans, w, n * sizeof(*w)) == 0);
}

void lo_region_spans_free(lo_region_t *r)
{
    free(r->allocs);
    free(r->spans);
    r->allocs = NULL;
    r->spans = NULL;
    r->nallocs = r->nspans = 0;
}

wsync_status_t lo_redirect(wsync_region_t *rr, const wsync_redirect_t *spans, size_t n, wsync_blob_t *key)
{
    lo_region_t *r = (lo_region_t *)rr;
    lo_transport_t *t = (lo_transport_t *)rr->transport;
    lo_wire_alloc_t *a = NULL;
    lo_wire_span_t *w = NULL;
    size_t na = 0;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    WSYNC_CHECK(wsync_redirect_check(rr, spans, n, "local"));
    if (n > 0) {
        w = calloc(n, sizeof(*w));
        WSYNC_CHECK_ALLOC(w);
        WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, out);
        st = resolve(spans, n, &a, &na, w);
        leave_device(t->device, prev);
        if (st != WSYNC_OK)
            goto out;
    }
    pthread_mutex_lock(&t->lock);
    if (!same_table(r, a, na, w, n)) { /* else the senders' copies stay good: same generation */
        lo_region_spans_free(r);
        r->allocs = a;
        r->spans = w;
        r->nallocs = na;
        r->nspans = n;
        r->key.gen = n ? __atomic_add_fetch(&next_gen, 1, __ATOMIC_RELAXED) : 0;
        a = NULL;
        w = NULL;
    }
    memcpy(key->data, &r->key, sizeof(r->key));
    key->len = sizeof(r->key);
    pthread_mutex_unlock(&t->lock);
out:
    free(a);
    free(w);
    return st;
}

/* Receiver's reader thread: a sender asked for region `id`'s spans. */
wsync_status_t lo_spans_answer(lo_transport_t *t, int fd, uint64_t id)
{
    lo_wire_table_t h = {.magic = LO_MAGIC, .id = id, .status = WSYNC_ERR_NOT_FOUND};
    lo_wire_alloc_t *a = NULL;
    lo_wire_span_t *w = NULL;
    lo_region_t *r;
    wsync_status_t st;
    pthread_mutex_lock(&t->lock);
    for (r = t->regions; r != NULL && r->key.id != id; r = r->next)
        ;
    if (r != NULL) {
        a = malloc(r->nallocs * sizeof(*a) + 1);
        w = malloc(r->nspans * sizeof(*w) + 1);
        if (a && w) {
            memcpy(a, r->allocs, r->nallocs * sizeof(*a));
            memcpy(w, r->spans, r->nspans * sizeof(*w));
            h = (lo_wire_table_t){.magic = LO_MAGIC,
                                  .id = id,
                                  .gen = r->key.gen,
                                  .nallocs = r->nallocs,
                                  .nspans = r->nspans,
                                  .status = WSYNC_OK};
        } else {
            h.status = WSYNC_ERR_NOMEM;
        }
    }
    pthread_mutex_unlock(&t->lock);
    st = wsync_fd_send(fd, &h, sizeof(h), -1);
    if (st == WSYNC_OK && h.nallocs > 0)
        st = wsync_fd_send(fd, a, h.nallocs * sizeof(*a), -1);
    if (st == WSYNC_OK && h.nspans > 0)
        st = wsync_fd_send(fd, w, h.nspans * sizeof(*w), -1);
    free(a);
    free(w);
    return st;
}

wsync_status_t lo_conn_send(lo_conn_t *c, const void *msg, size_t len)
{
    wsync_status_t st;
    pthread_mutex_lock(&c->send_lock);
    st = wsync_fd_send(c->fd, msg, len, -1);
    pthread_mutex_unlock(&c->send_lock);
    return st;
}

static wsync_status_t recv_exact(lo_conn_t *c, void *p, size_t len)
{
    int fd = -1;
    wsync_status_t st = wsync_fd_recv(c->fd, p, len, &fd);
    if (fd >= 0)
        close(fd);
    if (st != WSYNC_OK) /* the stream may be cut mid-answer: nothing more can be read from it */
        __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
    return st;
}

/* The receiver's spans of the region under k, fetched over the connection
 * and each mapped here into `tb` (emptied first). Called with span_lock. */
static wsync_status_t fetch(lo_conn_t *c, const lo_key_t *k, lo_table_t *tb)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_notice_t ask = {.tag = k->id, .len = k->gen, .status = LO_ASK_SPANS};
    lo_wire_table_t h;
    lo_wire_alloc_t *a = NULL;
    lo_wire_span_t *w = NULL;
    char **ptrs = NULL;
    size_t *sizes = NULL; /* of each mapped allocation, from its start */
    struct timeval tv = {.tv_sec = t->timeout_ms / 1000, .tv_usec = (t->timeout_ms % 1000) * 1000};
    wsync_status_t st;
    size_t i;
    free(tb->s);
    tb->s = NULL;
    tb->n = 0;
    tb->gen = 0;
    /* the answer's reads give up after the connect timeout: a receiver that stopped answering fails the put */
    if (t->timeout_ms > 0)
        (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    WSYNC_CHECK(lo_conn_send(c, &ask, sizeof(ask)));
    if (recv_exact(c, &h, sizeof(h)) != WSYNC_OK)
        return wsync_error(WSYNC_ERR_PEER,
                           "the receiver (process %llu) sent no redirect table for its region %llu within %d ms "
                           "(%s)",
                           (unsigned long long)k->pid, (unsigned long long)k->id, t->timeout_ms, wsync_last_error());
    if (h.magic != LO_MAGIC || h.id != k->id || h.status != WSYNC_OK || h.gen != k->gen || h.nspans == 0)
        return wsync_error(h.status != WSYNC_OK ? (wsync_status_t)h.status : WSYNC_ERR_PEER,
                           "the receiver's region %llu has redirect %llu (%llu spans), the put's key names %llu "
                           "(a request of an attempt the receiver left)",
                           (unsigned long long)k->id, (unsigned long long)h.gen, (unsigned long long)h.nspans,
                           (unsigned long long)k->gen);
    if (h.nspans > LO_MAX_SPANS || h.nallocs > h.nspans)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "the receiver's redirect table of region %llu names %llu spans in %llu allocations "
                           "(at most %d spans, no more allocations than spans): refused",
                           (unsigned long long)k->id, (unsigned long long)h.nspans, (unsigned long long)h.nallocs,
                           LO_MAX_SPANS);
    a = malloc(h.nallocs * sizeof(*a) + 1);
    w = malloc(h.nspans * sizeof(*w));
    ptrs = calloc(h.nallocs + 1, sizeof(*ptrs));
    sizes = calloc(h.nallocs + 1, sizeof(*sizes));
    tb->s = calloc(h.nspans, sizeof(*tb->s));
    st = a && w && ptrs && sizes && tb->s ? WSYNC_OK : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st == WSYNC_OK && h.nallocs > 0)
        st = recv_exact(c, a, h.nallocs * sizeof(*a));
    if (st == WSYNC_OK)
        st = recv_exact(c, w, h.nspans * sizeof(*w));
    for (i = 0; st == WSYNC_OK && i < h.nallocs; i++) {
        uint64_t b = 0;
        st = lo_map(t, k->pid, &a[i].handle, a[i].base, &ptrs[i]);
        /* what lies from ptrs[i] on, where the driver can say (else unchecked) */
        if (st == WSYNC_OK && lo_alloc_of(ptrs[i], &b, &sizes[i]) == WSYNC_OK)
            sizes[i] -= (size_t)((uint64_t)(uintptr_t)ptrs[i] - b);
        else
            sizes[i] = SIZE_MAX;
    }
    for (i = 0; st == WSYNC_OK && i < h.nspans; i++) {
        if (w[i].alloc >= h.nallocs ||
            wsync_redirect_span_bad(w[i].off, w[i].len, k->len, i > 0 ? w[i - 1].off + w[i - 1].len : 0) ||
            w[i].alloc_off > sizes[w[i].alloc] || w[i].len > sizes[w[i].alloc] - w[i].alloc_off) {
            st = wsync_error(WSYNC_ERR_FORMAT,
                             "the receiver's redirect span %zu ([%llu, +%llu) of region %llu, %llu bytes; at %llu "
                             "of allocation %u) lies outside the region or the allocation, is empty, or overlaps "
                             "the span before: refused",
                             i, (unsigned long long)w[i].off, (unsigned long long)w[i].len,
                             (unsigned long long)k->id, (unsigned long long)k->len,
                             (unsigned long long)w[i].alloc_off, w[i].alloc);
            break;
        }
        tb->s[i] = (lo_span_t){.off = w[i].off, .len = w[i].len, .ptr = ptrs[w[i].alloc] + w[i].alloc_off};
    }
    if (st == WSYNC_OK) {
        tb->n = h.nspans;
        tb->gen = h.gen;
        wsync_trace("local: redirect %llu of region %llu: %zu spans in %llu allocations",
                    (unsigned long long)h.gen, (unsigned long long)k->id, tb->n, (unsigned long long)h.nallocs);
    }
    free(a);
    free(w);
    free(ptrs);
    free(sizes);
    return st;
}

static wsync_status_t table_of(lo_conn_t *c, const lo_key_t *k, lo_table_t **out)
{
    lo_table_t *tb;
    for (tb = c->tables; tb != NULL && !(tb->pid == k->pid && tb->id == k->id); tb = tb->next)
        ;
    if (tb == NULL) {
        tb = calloc(1, sizeof(*tb));
        WSYNC_CHECK_ALLOC(tb);
        tb->pid = k->pid;
        tb->id = k->id;
        tb->next = c->tables;
        c->tables = tb;
    }
    if (tb->gen != k->gen)
        WSYNC_CHECK(fetch(c, k, tb));
    *out = tb;
    return WSYNC_OK;
}

static int add_part(lo_part_t **ps, size_t *n, size_t *cap, lo_part_t p)
{
    if (*n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 8;
        lo_part_t *x = realloc(*ps, ncap * sizeof(*x));
        if (x == NULL)
            return 0;
        *ps = x;
        *cap = ncap;
    }
    (*ps)[(*n)++] = p;
    return 1;
}

wsync_status_t lo_split(const lo_span_t *sp, size_t nsp, char *image, uint64_t dst_off, uint64_t len,
                        lo_part_t **parts, size_t *nparts)
{
    const uint64_t end = dst_off + len;
    lo_part_t *ps = NULL;
    size_t lo = 0, hi, n = 0, cap = 0;
    uint64_t at = dst_off;
    int ok = 1;
    for (hi = nsp; lo < hi;) { /* the first span ending after dst_off */
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].off + sp[mid].len <= dst_off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; ok && at < end; lo++) {
        const lo_span_t *s = lo < nsp && sp[lo].off < end ? &sp[lo] : NULL;
        uint64_t to = s ? (s->off > at ? s->off : at) : end;
        if (to > at)
            ok = add_part(&ps, &n, &cap, (lo_part_t){.dst = image + at, .off = at, .len = to - at});
        if (ok && s) {
            const uint64_t e = s->off + s->len < end ? s->off + s->len : end;
            ok = add_part(&ps, &n, &cap, (lo_part_t){.dst = s->ptr + (to - s->off), .off = to, .len = e - to});
            at = e;
        } else {
            at = to;
        }
    }
    if (!ok) {
        free(ps);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    *parts = ps;
    *nparts = n;
    return WSYNC_OK;
}

int lo_parts_summable(const lo_part_t *ps, size_t n)
{
    size_t i;
    for (i = 1; i < n && (ps[i].off - ps[0].off) % 8 == 0; i++)
        ;
    return i >= n;
}

uint64_t lo_part_key(const lo_part_t *ps, size_t i)
{
    return wsync_digest_key_at(ps[0].off, (ps[i].off - ps[0].off) / 8);
}

wsync_status_t lo_put_parts(lo_conn_t *c, const lo_key_t *k, char *image, uint64_t dst_off, uint64_t len,
                            lo_part_t **parts, size_t *nparts)
{
    lo_table_t *tb = NULL;
    wsync_status_t st;
    pthread_mutex_lock(&c->span_lock);
    st = k->gen ? table_of(c, k, &tb) : WSYNC_OK;
    if (st == WSYNC_OK)
        st = lo_split(tb ? tb->s : NULL, tb ? tb->n : 0, image, dst_off, len, parts, nparts);
    pthread_mutex_unlock(&c->span_lock);
    return st;
}

void lo_conn_tables_free(lo_conn_t *c)
{
    lo_table_t *tb;
    while ((tb = c->tables) != NULL) {
        c->tables = tb->next;
        free(tb->s);
        free(tb);
    }
}
#endif
