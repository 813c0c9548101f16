/* gpu_sparse.c: the GPU image that holds only the bytes passing through it.
 * In place into the caller's GPU tensors with a target, every tensor of the
 * rank given, over transports that can land bytes straight in them (tcp's
 * redirect) and on a node that does not relay: every destination byte that
 * no digest word crossing its edge needs lands in the caller's tensor
 * (recv_dests_direct with no node plan), and so do the node's copies into
 * this rank (fetch_copy.c's copy_sparse), so the image needs memory only
 * for the rest: the words across destination edges off the 8-byte grid and
 * the padding between destinations. Those are
 * known once the layout is (they come from the targets, the node plan and
 * the caller's tensors), so the image is sized at setup as a sparse window
 * (window.h's wsync_cuda_alloc_sparse) backing just them, and every attempt
 * checks that it lands the same bytes straight (a changed layout needs a
 * restart, as a grown model does). A rank then holds its tensors plus the
 * granules (2 MiB) those bytes touch, where a whole image was as large as
 * the tensors. Such an image has no CUDA IPC handle, so the node's other
 * ranks cannot map it: the bytes they copy out of this rank (its fan-out
 * bytes, recv_fanmap_t: replicated tensors under TP) are packed into a
 * window of their own, out of the caller's tensors, as each chunk lands and
 * before it is marked landed; that window is what this rank exports. The
 * setting sparse_image (WSYNC_SPARSE_IMAGE=0) keeps a whole image, as it
 * does on the host. The test hook
 * WSYNC_TEST_HOST_FAN_WINDOW takes this path on host memory, with a whole
 * shm image under it, so the CPU tests cover it. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "engine_side/receiver_internal.h"

/* Every trainer rank's transport can redirect (names resolved as the
 * attempt will resolve them), and none is local: its key is a CUDA IPC
 * handle of the image's allocation, which a sparse image has not (local
 * redirects into a whole image instead). */
static int transports_redirect(wsync_receiver_t *r, int world)
{
    char(*addrs)[160] = calloc((size_t)world, sizeof(*addrs));
    const char **names = calloc((size_t)world, sizeof(*names));
    int t, ok = addrs && names && recv_trainer_addrs(r, world, addrs, names) == WSYNC_OK;
    for (t = 0; ok && t < world; t++) {
        wsync_transport_config_t cfg = {.device = r->device, .timeout_ms = 1000};
        const wsync_transport_ops_t *ops = NULL;
        ok = wsync_transport_get(names[t], &cfg, &ops) == WSYNC_OK && ops->redirect != NULL &&
             ops != &wsync_transport_local;
    }
    free(addrs);
    free(names);
    return ok;
}

static int wanted(wsync_receiver_t *r, const wsync_sync_layout_t *sl, size_t ntensors)
{
    return wsync_setting_int(WSYNC_SET_SPARSE_IMAGE) && r->cfg.mode == WSYNC_MODE_IN_PLACE &&
           (r->mem->kind == WSYNC_MEM_CUDA || wsync_fault(WSYNC_FAULT_HOST_FAN_WINDOW)) && r->cfg.image == NULL &&
           r->held.spec && r->cfg.ndests > 0 && (size_t)r->cfg.ndests >= ntensors && !recv_node_relays(&r->node) &&
           r->node.relay == NULL && transports_redirect(r, sl->world);
}

/* The bytes of [0, len) outside the sorted, disjoint spans d[0..n). */
static wsync_status_t complement(const wsync_redirect_t *d, size_t n, uint64_t len, wsync_window_range_t **out,
                                 size_t *nout)
{
    wsync_window_range_t *c = calloc(n + 1, sizeof(*c));
    uint64_t at = 0;
    size_t i, k = 0;
    WSYNC_CHECK_ALLOC(c);
    for (i = 0; i < n; i++) {
        if (d[i].off > at)
            c[k++] = (wsync_window_range_t){at, d[i].off - at};
        at = d[i].off + d[i].len;
    }
    if (at < len)
        c[k++] = (wsync_window_range_t){at, len - at};
    *out = c;
    *nout = k;
    return WSYNC_OK;
}

wsync_status_t recv_fanmap_build(const wsync_node_plan_t *np, int p, recv_fanmap_t *out)
{
    size_t k, n = 0, m = 0;
    memset(out, 0, sizeof(*out));
    out->r = calloc(np->ncopies + 1, sizeof(*out->r));
    out->at = calloc(np->ncopies + 1, sizeof(*out->at));
    if (out->r == NULL || out->at == NULL) {
        recv_fanmap_free(out);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (k = 0; k < np->ncopies; k++)
        if (np->copies[k].from_rank == p && np->copies[k].to_rank != p)
            out->r[n++] = (wsync_redirect_t){.off = np->copies[k].from_off, .len = np->copies[k].len};
    qsort(out->r, n, sizeof(*out->r), recv_span_cmp);
    for (k = 0; k < n; k++) { /* merge overlapping and touching ranges */
        if (m && out->r[k].off <= out->r[m - 1].off + out->r[m - 1].len) {
            uint64_t end = out->r[k].off + out->r[k].len;
            if (end > out->r[m - 1].off + out->r[m - 1].len)
                out->r[m - 1].len = end - out->r[m - 1].off;
        } else {
            out->r[m++] = out->r[k];
        }
    }
    out->n = m;
    for (k = 0; k < m; k++) {
        out->at[k] = out->len;
        out->len += out->r[k].len;
    }
    return WSYNC_OK;
}

void recv_fanmap_free(recv_fanmap_t *m)
{
    free(m->r);
    free(m->at);
    memset(m, 0, sizeof(*m));
}

uint64_t recv_fanmap_at(const recv_fanmap_t *m, uint64_t off)
{
    const size_t lo = recv_span_after(m->r, m->n, off);
    return lo < m->n ? m->at[lo] + (off - m->r[lo].off) : m->len;
}

wsync_status_t recv_gpu_sparse_setup(wsync_receiver_t *r, const wsync_sync_layout_t *sl, size_t ntensors)
{
    recv_tlayout_t *tl = NULL;
    recv_dests_t *dm = NULL;
    wsync_status_t st;
    const int me = r->cfg.local_rank;
    if (r->images.gpu_sparse || !wanted(r, sl, ntensors))
        return WSYNC_OK;
    st = recv_tlayout_build(r, sl, &tl);
    if (st == WSYNC_OK)
        st = recv_dests_build(&r->cfg, sl->manifest, tl->tg[me], tl->seg, &dm);
    if (st == WSYNC_OK && dm) {
        recv_dests_words(dm, sl->plan, tl->seg);
        st = recv_dests_direct(dm, NULL, me, &r->images.gpu_direct, &r->images.ngpu_direct);
        if (st == WSYNC_OK)
            st = complement(r->images.gpu_direct, r->images.ngpu_direct, tl->image_len, &r->images.gpu_backed,
                            &r->images.ngpu_backed);
        r->images.gpu_fan_len = tl->fan[me].len;
        r->images.gpu_sparse = st == WSYNC_OK;
    }
    recv_dests_free(dm);
    recv_tlayout_free(tl);
    if (st != WSYNC_OK)
        recv_gpu_sparse_free(r);
    return st;
}

wsync_status_t recv_gpu_sparse_check(const wsync_receiver_t *r, int can_direct, const wsync_redirect_t *spans,
                                     size_t n)
{
    size_t i;
    int same = can_direct && n == r->images.ngpu_direct;
    for (i = 0; same && i < n; i++)
        same = spans[i].off == r->images.gpu_direct[i].off && spans[i].len == r->images.gpu_direct[i].len &&
               spans[i].ptr == r->images.gpu_direct[i].ptr;
    if (same)
        return WSYNC_OK;
    return wsync_error(WSYNC_ERR_CONFLICT,
                       "engine %s rank %d: its GPU image holds only the bytes that do not land straight in the "
                       "caller's tensors (in place, setting sparse_image), and this pull %s; restart the engine "
                       "(WSYNC_SPARSE_IMAGE=0 keeps a whole image)",
                       r->engine_id, r->cfg.local_rank,
                       can_direct ? "lands other bytes there (the layout or the tensors changed)"
                                  : "cannot land them there (a transport without redirect, or a relay)");
}

void recv_gpu_sparse_free(wsync_receiver_t *r)
{
    int s;
    for (s = 0; s < BOARD_SLOTS; s++)
        if (r->images.gpu_fan[s].ptr)
            r->win_ops->free(&r->images.gpu_fan[s]);
    free(r->images.gpu_direct);
    free(r->images.gpu_backed);
    r->images.gpu_direct = NULL;
    r->images.gpu_backed = NULL;
    r->images.ngpu_direct = r->images.ngpu_backed = 0;
    r->images.gpu_fan_len = 0;
    r->images.gpu_sparse = 0;
}
