/* dests.c: the caller's destination tensors (config.dests): the checks and
 * the copies into them (staged after the node verified, in place chunk by
 * chunk during the pull). The split of digest ranges between the caller's
 * memory and the image is in dests_digest.c, whole-image chunks written
 * through as jobs in dests_jobs.c. See dests.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "engine_side/dests.h"

/* ---- the checks ---- */

static int by_off(const void *a, const void *b)
{
    const recv_dest_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int by_pair_off(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The tensors this rank holds, as the check_dests callback sees them. */
static wsync_status_t call_check(const wsync_receiver_config_t *cfg, const wsync_manifest_t *m,
                                 const wsync_target_t *t)
{
    size_t i, n = t ? t->ndests : m->ntensors;
    wsync_tensor_info_t *info = calloc(n + 1, sizeof(*info));
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(info);
    for (i = 0; i < n; i++) {
        if (t) {
            const wsync_dest_t *d = &t->dests[i];
            info[i] = (wsync_tensor_info_t){.name = d->name,
                                            .dtype = wsync_dtype_name(d->dtype),
                                            .ndim = d->ndim,
                                            .offset = d->offset,
                                            .size = d->size};
            memcpy(info[i].shape, d->shape, sizeof(info[i].shape));
        } else {
            const wsync_tensor_t *x = &m->tensors[i];
            info[i] = (wsync_tensor_info_t){.name = x->name,
                                            .dtype = wsync_dtype_name(x->dtype),
                                            .ndim = x->ndim,
                                            .offset = x->offset,
                                            .size = x->size};
            memcpy(info[i].shape, x->shape, sizeof(info[i].shape));
        }
    }
    st = cfg->check_dests(cfg->check_dests_arg, info, n);
    free(info);
    if (st != WSYNC_OK)
        return wsync_error(st, "receiver: the caller's check_dests refused this version's tensors (nothing was "
                               "written)");
    return WSYNC_OK;
}

/* The destination bytes no block writes: each destination's range minus the
 * segments (sorted here by offset). */
static wsync_status_t find_gaps(recv_dests_t *ds, const wsync_node_plan_t *seg)
{
    size_t i, k = 0, n = seg ? seg->nputs : 0, cap = 0;
    uint64_t *cov = calloc(2 * n + 2, sizeof(*cov));
    WSYNC_CHECK_ALLOC(cov);
    for (i = 0; i < n; i++) {
        cov[2 * i] = seg->puts[i].dst_off;
        cov[2 * i + 1] = seg->puts[i].len;
    }
    qsort(cov, n, 2 * sizeof(*cov), by_pair_off);
    for (i = 0; i < ds->n; i++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t at = d->off, end = d->off + d->size;
        while (at < end) {
            uint64_t next = end, cov_end = at;
            while (k < n && cov[2 * k] + cov[2 * k + 1] <= at)
                k++;
            if (k < n && cov[2 * k] <= at)
                cov_end = cov[2 * k] + cov[2 * k + 1];
            else if (k < n && cov[2 * k] < end)
                next = cov[2 * k];
            if (cov_end > at) {
                at = cov_end < end ? cov_end : end;
                continue;
            }
            if (ds->ngaps == cap) {
                recv_span_t *g = realloc(ds->gaps, (cap = cap ? 2 * cap : 8) * sizeof(*g));
                if (g == NULL) {
                    free(cov);
                    return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                }
                ds->gaps = g;
            }
            ds->gaps[ds->ngaps++] = (recv_span_t){.ptr = d->ptr + (at - d->off), .len = next - at};
            at = next;
        }
    }
    free(cov);
    return WSYNC_OK;
}

wsync_status_t recv_dests_build(const wsync_receiver_config_t *cfg, const wsync_manifest_t *m,
                                const wsync_target_t *t, const wsync_node_plan_t *seg, recv_dests_t **out)
{
    recv_dests_t *ds;
    wsync_status_t st = WSYNC_OK;
    int i;
    *out = NULL;
    if (cfg->check_dests)
        WSYNC_CHECK(call_check(cfg, m, t));
    if (cfg->ndests <= 0)
        return WSYNC_OK;
    ds = calloc(1, sizeof(*ds));
    WSYNC_CHECK_ALLOC(ds);
    ds->in_place = cfg->mode == WSYNC_MODE_IN_PLACE;
    ds->d = calloc((size_t)cfg->ndests, sizeof(*ds->d));
    if (ds->d == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    for (i = 0; i < cfg->ndests; i++) {
        const wsync_dest_tensor_t *d = &cfg->dests[i];
        long k = d->name == NULL ? -1 : t ? wsync_target_find(t, d->name) : wsync_manifest_find(m, d->name);
        uint64_t off, size;
        if (k < 0) {
            st = t ? wsync_error(WSYNC_ERR_INVALID,
                                 "receiver: destination '%s' is not a tensor of this rank's target",
                                 d->name ? d->name : "(null)")
                   : wsync_error(WSYNC_ERR_INVALID,
                                 "receiver: destination '%s' is not a tensor of the published manifest (which has "
                                 "%zu tensors)",
                                 d->name ? d->name : "(null)", m->ntensors);
            goto err;
        }
        off = t ? t->dests[k].offset : m->tensors[k].offset;
        size = t ? t->dests[k].size : m->tensors[k].size;
        if (d->ptr == NULL || d->nbytes != size) {
            st = wsync_error(WSYNC_ERR_INVALID, "receiver: destination '%s' has %llu bytes at %p; the %s's has %llu",
                             d->name, (unsigned long long)d->nbytes, d->ptr, t ? "target" : "manifest",
                             (unsigned long long)size);
            goto err;
        }
        ds->d[i] = (recv_dest_t){.off = off, .size = size, .ptr = d->ptr, .name = d->name};
    }
    ds->n = (size_t)cfg->ndests;
    qsort(ds->d, ds->n, sizeof(*ds->d), by_off);
    for (i = 1; i < cfg->ndests; i++)
        if (ds->d[i].off == ds->d[i - 1].off) {
            st = wsync_error(WSYNC_ERR_INVALID, "receiver: destination '%s' is given twice", ds->d[i].name);
            goto err;
        }
    if (t)
        WSYNC_CHECK_GOTO(find_gaps(ds, seg), st, err);
    *out = ds;
    return WSYNC_OK;
err:
    recv_dests_free(ds);
    return st;
}

char *recv_dests_ptr(const recv_dests_t *ds, uint64_t off)
{
    size_t lo = 0, hi = ds ? ds->n : 0;
    while (lo < hi) { /* d[] is sorted by offset */
        size_t mid = lo + (hi - lo) / 2;
        if (ds->d[mid].off == off)
            return ds->d[mid].ptr;
        if (ds->d[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void recv_dests_free(recv_dests_t *ds)
{
    if (ds == NULL)
        return;
    free(ds->d);
    free(ds->gaps);
    free(ds);
}

void recv_dests_words(recv_dests_t *ds, const wsync_plan_t *plan, const wsync_node_plan_t *seg)
{
    size_t i;
    if (ds == NULL)
        return;
    ds->word_edges = 1;
    if (seg) {
        for (i = 0; i < seg->nputs; i++)
            ds->word_edges &= seg->puts[i].dst_off % 8 == 0;
    } else {
        for (i = 0; i < plan->npieces; i++)
            ds->word_edges &= plan->pieces[i].offset % 8 == 0;
    }
}

/* ---- copies ---- */

size_t recv_dests_after(const recv_dests_t *ds, uint64_t off)
{
    size_t lo = 0, hi = ds ? ds->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ds->d[mid].off + ds->d[mid].size <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int recv_dest_interior(const recv_dest_t *d, int word_edges, uint64_t *s, uint64_t *e)
{
    const uint64_t end = d->off + d->size;
    if (word_edges) {
        *s = (d->off + 7) / 8 * 8;
        *e = end / 8 * 8;
        return *e > *s;
    }
    if (d->size <= 16)
        return 0;
    *s = d->off + 8;
    *e = end - 8;
    return 1;
}

int recv_span_cmp(const void *a, const void *b)
{
    const wsync_redirect_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

size_t recv_span_after(const wsync_redirect_t *r, size_t n, uint64_t at)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].off + r[mid].len <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The next piece of [*s, e) outside spans r[*k..n) (sorted by offset; they
 * may overlap): *s moves past the spans it lies in, and the piece is
 * [*s, the return value); *s == e when nothing is left. */
static uint64_t outside_next(const wsync_redirect_t *r, size_t n, size_t *k, uint64_t *s, uint64_t e)
{
    while (*s < e) {
        while (*k < n && r[*k].off + r[*k].len <= *s)
            (*k)++;
        if (*k < n && r[*k].off <= *s) {
            *s = r[*k].off + r[*k].len < e ? r[*k].off + r[*k].len : e;
            continue;
        }
        return *k < n && r[*k].off < e ? r[*k].off : e;
    }
    return e;
}

static wsync_status_t add_copy(wsync_copy_t **cs, size_t *n, size_t *cap, wsync_copy_t c)
{
    if (*n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 64;
        wsync_copy_t *nc = realloc(*cs, ncap * sizeof(*nc));
        WSYNC_CHECK_ALLOC(nc);
        *cs = nc;
        *cap = ncap;
    }
    (*cs)[(*n)++] = c;
    return WSYNC_OK;
}

/* The copies of image range [off, off+len) into the caller's tensors but
 * the bytes in skip[0..nskip) (sorted: they landed there directly),
 * appended to cs (grown as needed). */
static wsync_status_t add_writes(const recv_dests_t *ds, const char *image, uint64_t off, uint64_t len,
                                 const wsync_redirect_t *skip, size_t nskip, wsync_copy_t **cs, size_t *n,
                                 size_t *cap)
{
    const uint64_t end = off + len;
    size_t i, k = recv_span_after(skip, nskip, off);
    for (i = recv_dests_after(ds, off); i < ds->n && ds->d[i].off < end; i++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s = d->off > off ? d->off : off, e = d->off + d->size < end ? d->off + d->size : end, stop;
        for (stop = outside_next(skip, nskip, &k, &s, e); s < e;
             s = stop, stop = outside_next(skip, nskip, &k, &s, e))
            WSYNC_CHECK(add_copy(cs, n, cap, (wsync_copy_t){d->ptr + (s - d->off), image + s, stop - s}));
    }
    return WSYNC_OK;
}

wsync_status_t recv_dests_direct(const recv_dests_t *ds, const wsync_node_plan_t *np, int me,
                                 wsync_redirect_t **out, size_t *nout)
{
    size_t i, k, nkeep = 0, n = 0, cap = 0;
    const size_t ncopies = np ? np->ncopies : 0;
    wsync_redirect_t *keep = calloc(2 * ncopies + 1, sizeof(*keep)), *sp = NULL;
    *out = NULL;
    *nout = 0;
    WSYNC_CHECK_ALLOC(keep);
    for (k = 0; k < ncopies; k++) { /* read out of this image, or written into it by a copy */
        const wsync_tcopy_t *cp = &np->copies[k];
        if (cp->from_rank == me)
            keep[nkeep++] = (wsync_redirect_t){.off = cp->from_off, .len = cp->len};
        if (cp->to_rank == me)
            keep[nkeep++] = (wsync_redirect_t){.off = cp->to_off, .len = cp->len};
    }
    qsort(keep, nkeep, sizeof(*keep), recv_span_cmp);
    for (i = 0, k = 0; ds && ds->in_place && i < ds->n; i++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s, e, stop;
        if (!recv_dest_interior(d, ds->word_edges, &s, &e))
            continue;
        for (stop = outside_next(keep, nkeep, &k, &s, e); s < e;
             s = stop, stop = outside_next(keep, nkeep, &k, &s, e)) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                wsync_redirect_t *x = realloc(sp, ncap * sizeof(*x));
                if (x == NULL) {
                    free(sp);
                    free(keep);
                    return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                }
                sp = x;
                cap = ncap;
            }
            sp[n++] = (wsync_redirect_t){.off = s, .len = stop - s, .ptr = d->ptr + (s - d->off)};
        }
    }
    free(keep);
    *out = sp;
    *nout = n;
    return WSYNC_OK;
}

wsync_status_t recv_dests_write(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image,
                                uint64_t off, uint64_t len)
{
    wsync_copy_t *cs = NULL;
    size_t n = 0, cap = 0;
    wsync_status_t st;
    if (ds == NULL || !ds->in_place)
        return WSYNC_OK;
    st = add_writes(ds, image, off, len, NULL, 0, &cs, &n, &cap);
    if (st == WSYNC_OK)
        st = mem->copy_many(cs, n, 1);
    free(cs);
    return st;
}

/* The write-through copies of chunk c into rank me (its puts when it
 * landed here, the copies into me) but the direct bytes, appended to cs. */
static wsync_status_t chunk_writes(const recv_dests_t *ds, const wsync_node_plan_t *np, uint32_t c, int me,
                                   const char *image, const wsync_redirect_t *direct, size_t ndirect,
                                   wsync_copy_t **cs, size_t *n, size_t *cap)
{
    const wsync_tchunk_t *ch = &np->chunks[c];
    size_t k;
    if (ch->land_rank == me)
        for (k = ch->first_put; k < ch->first_put + ch->nputs; k++)
            WSYNC_CHECK(add_writes(ds, image, np->puts[k].dst_off, np->puts[k].len, direct, ndirect, cs, n, cap));
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++)
        if (np->copies[k].to_rank == me)
            WSYNC_CHECK(add_writes(ds, image, np->copies[k].to_off, np->copies[k].len, direct, ndirect, cs, n, cap));
    return WSYNC_OK;
}

wsync_status_t recv_dests_chunk_in(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const wsync_node_plan_t *np,
                                   uint32_t c, int me, const char *image, const wsync_redirect_t *direct,
                                   size_t ndirect)
{
    wsync_copy_t *cs = NULL;
    size_t n = 0, cap = 0;
    wsync_status_t st;
    if (ds == NULL || !ds->in_place)
        return WSYNC_OK;
    st = chunk_writes(ds, np, c, me, image, direct, ndirect, &cs, &n, &cap);
    /* Queued, not waited for: the digests of the caller's bytes run after
     * them on the same stream (recv_dests_digest_many), and recv_dests_drain
     * ends them on every other way out. */
    if (st == WSYNC_OK)
        st = mem->copy_many(cs, n, 0);
    free(cs);
    return st;
}

/* The first pair of ranges of rg (n each side) whose sums differ, or n. */
static size_t first_differing(const uint64_t *sums, size_t n)
{
    size_t i;
    for (i = 0; i < n && sums[i] == sums[n + i]; i++)
        ;
    return i;
}

wsync_status_t recv_dests_verify_writes(const wsync_mem_ops_t *mem, const recv_dests_t *ds,
                                        const wsync_node_plan_t *np, int me, const char *image,
                                        const wsync_redirect_t *direct, size_t ndirect)
{
    wsync_copy_t *cs = NULL;
    wsync_digest_range_t *rg = NULL;
    uint64_t *sums = NULL;
    size_t i, n = 0, cap = 0;
    uint32_t c;
    wsync_status_t st = WSYNC_OK;
    if (ds == NULL || !ds->in_place)
        return WSYNC_OK;
    for (c = 0; c < np->nchunks && st == WSYNC_OK; c++)
        st = chunk_writes(ds, np, c, me, image, direct, ndirect, &cs, &n, &cap);
    if (st != WSYNC_OK || n == 0)
        goto out;
    rg = calloc(2 * n, sizeof(*rg));
    sums = calloc(2 * n, sizeof(*sums));
    if (rg == NULL || sums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) { /* both sides keyed alike: the image offset */
        const uint64_t off = (uint64_t)((const char *)cs[i].src - image);
        rg[i] = (wsync_digest_range_t){.ptr = cs[i].dst, .len = cs[i].len, .off = off};
        rg[n + i] = (wsync_digest_range_t){.ptr = cs[i].src, .len = cs[i].len, .off = off};
    }
    /* one call a side: a GPU backend reads a call's memory kind off its first range */
    WSYNC_CHECK_GOTO(mem->digest_many(rg, n, sums), st, out);
    WSYNC_CHECK_GOTO(mem->digest_many(rg + n, n, sums + n), st, out);
    if ((i = first_differing(sums, n)) < n) {
        const uint64_t off = rg[n + i].off;
        const recv_dest_t *d = &ds->d[recv_dests_after(ds, off)];
        st = wsync_error(WSYNC_ERR_DIGEST,
                         "tensor %s: bytes %llu..%llu copied from the verified image into the caller's tensor "
                         "differ from it",
                         d->name, (unsigned long long)(off - d->off),
                         (unsigned long long)(off - d->off + cs[i].len));
    }
out:
    free(cs);
    free(rg);
    free(sums);
    return st;
}

wsync_status_t recv_dests_drain(const wsync_mem_ops_t *mem, const recv_dests_t *ds)
{
    if (ds == NULL || !ds->in_place)
        return WSYNC_OK;
    return mem->copy_many(NULL, 0, 1);
}

wsync_status_t recv_dests_zero_gaps(const wsync_mem_ops_t *mem, const recv_dests_t *ds)
{
    enum { PART = 1 << 20 };
    void *zeros = NULL;
    size_t i;
    if (ds == NULL || !ds->in_place || ds->ngaps == 0)
        return WSYNC_OK;
    if (mem->kind == WSYNC_MEM_HOST) {
        for (i = 0; i < ds->ngaps; i++)
            memset(ds->gaps[i].ptr, 0, ds->gaps[i].len);
        return WSYNC_OK;
    }
    zeros = calloc(1, PART);
    WSYNC_CHECK_ALLOC(zeros);
    for (i = 0; i < ds->ngaps; i++) {
        uint64_t at;
        for (at = 0; at < ds->gaps[i].len; at += PART) {
            uint64_t n = ds->gaps[i].len - at < PART ? ds->gaps[i].len - at : PART;
            wsync_status_t st = mem->copy(ds->gaps[i].ptr + at, zeros, n);
            if (st != WSYNC_OK) {
                free(zeros);
                return st;
            }
        }
    }
    free(zeros);
    return WSYNC_OK;
}

wsync_status_t recv_dests_copy_all(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image)
{
    wsync_copy_t *cs;
    wsync_status_t st;
    size_t i;
    if (ds == NULL || ds->n == 0)
        return WSYNC_OK;
    cs = calloc(ds->n, sizeof(*cs));
    WSYNC_CHECK_ALLOC(cs);
    for (i = 0; i < ds->n; i++)
        cs[i] = (wsync_copy_t){ds->d[i].ptr, image + ds->d[i].off, ds->d[i].size};
    st = mem->copy_many(cs, ds->n, 1); /* one wait for all of them */
    free(cs);
    return st;
}

void recv_dests_release(const recv_dests_t *ds, const wsync_window_t *w, uint64_t off, uint64_t len)
{
    const uint64_t end = off + len;
    size_t i;
    if (ds == NULL || !ds->in_place || w == NULL || !w->sparse)
        return;
    for (i = recv_dests_after(ds, off); i < ds->n && ds->d[i].off < end; i++) {
        uint64_t s, e;
        if (!recv_dest_interior(&ds->d[i], ds->word_edges, &s, &e))
            continue;
        s = s > off ? s : off;
        e = e < end ? e : end;
        if (e > s)
            wsync_window_release(w, s, e - s);
    }
}
