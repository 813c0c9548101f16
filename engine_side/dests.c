/* dests.c: the caller's destination tensors (config.dests): the checks, the
 * split of digest ranges between the caller's memory and the image, and the
 * copies into them (staged after the node verified, in place chunk by chunk
 * during the pull). See dests.h. */
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

/* ---- cutting digest ranges ---- */

/* The inverse of wsync_fmix64: each step of it is a bijection (an xor with
 * its own high half shifted down by >= 32 undoes itself; an odd multiplier
 * has an inverse mod 2^64, found by Newton's iteration). */
static uint64_t inv_odd(uint64_t c)
{
    uint64_t y = c; /* right to 3 bits; each step doubles them */
    int i;
    for (i = 0; i < 5; i++)
        y *= 2 - c * y;
    return y;
}

static uint64_t unfmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= inv_odd(0xc4ceb9fe1a85ec53ULL);
    x ^= x >> 33;
    x *= inv_odd(0xff51afd7ed558ccdULL);
    x ^= x >> 33;
    return x;
}

uint64_t recv_digest_key_at(uint64_t key, uint64_t word)
{
    if (word == 0)
        return key;
    return unfmix64(wsync_digest_base_key(key) + word * WSYNC_DIGEST_GOLDEN) ^ WSYNC_DIGEST_SEED;
}

static wsync_status_t parts_add(recv_parts_t *p, const void *ptr, uint64_t len, uint64_t key, uint32_t of, long dest)
{
    if (len == 0)
        return WSYNC_OK;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        wsync_digest_range_t *rg = realloc(p->rg, cap * sizeof(*rg));
        uint32_t *o;
        long *d;
        if (rg)
            p->rg = rg;
        o = rg ? realloc(p->of, cap * sizeof(*o)) : NULL;
        if (o)
            p->of = o;
        d = o ? realloc(p->dest, cap * sizeof(*d)) : NULL;
        if (d == NULL)
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        p->dest = d;
        p->cap = cap;
    }
    p->rg[p->n] = (wsync_digest_range_t){.ptr = ptr, .len = len, .off = key};
    p->of[p->n] = of;
    p->dest[p->n] = dest;
    p->n++;
    return WSYNC_OK;
}

/* The first destination that ends after image offset `off`. */
static size_t dest_after(const recv_dests_t *ds, uint64_t off)
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

wsync_status_t recv_parts_split(recv_parts_t *p, const recv_dests_t *ds, const char *image, uint64_t off,
                                uint64_t len, uint64_t key, uint32_t of)
{
    const uint64_t end = off + len;
    uint64_t pos = off;
    size_t i = dest_after(ds, off);
    for (; ds && i < ds->n && ds->d[i].off < end; i++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s = d->off > off ? d->off : off, e = d->off + d->size < end ? d->off + d->size : end;
        /* whole words of the range (its own last word may be short) */
        uint64_t cs = off + (s - off + 7) / 8 * 8, ce = e == end ? end : off + (e - off) / 8 * 8;
        if (ce <= cs)
            continue;
        WSYNC_CHECK(parts_add(p, image + pos, cs - pos, recv_digest_key_at(key, (pos - off) / 8), of, -1));
        WSYNC_CHECK(
            parts_add(p, d->ptr + (cs - d->off), ce - cs, recv_digest_key_at(key, (cs - off) / 8), of, (long)i));
        pos = ce;
    }
    return parts_add(p, image + pos, end - pos, recv_digest_key_at(key, (pos - off) / 8), of, -1);
}

void recv_parts_free(recv_parts_t *p)
{
    free(p->rg);
    free(p->of);
    free(p->dest);
    memset(p, 0, sizeof(*p));
}

wsync_status_t recv_dests_digest_many(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image,
                                      const wsync_digest_range_t *rg, size_t n, uint64_t *sums)
{
    recv_parts_t p = {0};
    wsync_digest_range_t *sorted = NULL;
    uint64_t *psums = NULL;
    size_t i, nimg = 0, k;
    wsync_status_t st = WSYNC_OK;
    if (ds == NULL || !ds->in_place)
        return mem->digest_many(rg, n, sums);
    for (i = 0; i < n; i++)
        WSYNC_CHECK_GOTO(recv_parts_split(&p, ds, image, (uint64_t)((const char *)rg[i].ptr - image), rg[i].len,
                                          rg[i].off, (uint32_t)i),
                         st, out);
    /* the image's parts, then the caller's: one digest_many each (a GPU
     * backend reads a call's memory kind off its first range) */
    sorted = calloc(p.n + 1, sizeof(*sorted));
    psums = calloc(p.n + 1, sizeof(*psums));
    if (sorted == NULL || psums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < p.n; i++)
        if (p.dest[i] < 0)
            sorted[nimg++] = p.rg[i];
    for (i = 0, k = nimg; i < p.n; i++)
        if (p.dest[i] >= 0)
            sorted[k++] = p.rg[i];
    WSYNC_CHECK_GOTO(mem->digest_many(sorted, nimg, psums), st, out);
    WSYNC_CHECK_GOTO(mem->digest_many(sorted + nimg, p.n - nimg, psums + nimg), st, out);
    memset(sums, 0, n * sizeof(*sums));
    for (i = 0, k = 0; i < p.n; i++)
        if (p.dest[i] < 0)
            sums[p.of[i]] += psums[k++];
    for (i = 0; i < p.n; i++)
        if (p.dest[i] >= 0)
            sums[p.of[i]] += psums[k++];
out:
    recv_parts_free(&p);
    free(sorted);
    free(psums);
    return st;
}

/* ---- copies ---- */

/* Bytes [*s, *e) of destination d that may skip the image: all but the
 * digest words that cross its edges, which are read out of the image
 * (recv_parts_split). With word_edges (every digest range starts at a
 * multiple of 8 in the image) those are the partial words at an edge off
 * the 8-byte grid, none at an edge on it; else its 8 bytes at either end.
 * 0 when nothing is left. */
static int dest_interior(const recv_dest_t *d, int word_edges, uint64_t *s, uint64_t *e)
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
    for (i = dest_after(ds, off); i < ds->n && ds->d[i].off < end; i++) {
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
        if (!dest_interior(d, ds->word_edges, &s, &e))
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

wsync_status_t recv_dests_chunk_in(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const wsync_node_plan_t *np,
                                   uint32_t c, int me, const char *image, const wsync_redirect_t *direct,
                                   size_t ndirect)
{
    const wsync_tchunk_t *ch = &np->chunks[c];
    wsync_copy_t *cs = NULL;
    size_t k, n = 0, cap = 0;
    wsync_status_t st = WSYNC_OK;
    if (ds == NULL || !ds->in_place)
        return WSYNC_OK;
    if (ch->land_rank == me)
        for (k = ch->first_put; k < ch->first_put + ch->nputs && st == WSYNC_OK; k++)
            st = add_writes(ds, image, np->puts[k].dst_off, np->puts[k].len, direct, ndirect, &cs, &n, &cap);
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies && st == WSYNC_OK; k++)
        if (np->copies[k].to_rank == me)
            st = add_writes(ds, image, np->copies[k].to_off, np->copies[k].len, direct, ndirect, &cs, &n, &cap);
    /* Queued, not waited for: the digests of the caller's bytes run after
     * them on the same stream (recv_dests_digest_many), and recv_dests_drain
     * ends them on every other way out. */
    if (st == WSYNC_OK)
        st = mem->copy_many(cs, n, 0);
    free(cs);
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
    for (i = dest_after(ds, off); i < ds->n && ds->d[i].off < end; i++) {
        uint64_t s, e;
        if (!dest_interior(&ds->d[i], ds->word_edges, &s, &e))
            continue;
        s = s > off ? s : off;
        e = e < end ? e : end;
        if (e > s)
            wsync_window_release(w, s, e - s);
    }
}

/* ---- whole-image chunks written through as jobs ---- */

/* Host memory: copy image bytes [s, e) of destination d from `src` block by
 * block and digest each caller part (rg[0..n), in d, in image order) right
 * behind the copy, while its bytes are still in cache: one pass over memory
 * fewer than a streamed copy and a digest after it (which is what
 * copy_digest_start does on the host). Blocks stay under the size from which
 * wsync_host_copy streams past the cache. */
static void host_write_digest(const recv_dest_t *d, const char *src, uint64_t s, uint64_t e,
                              const wsync_digest_range_t *rg, size_t n, uint64_t *sums)
{
    enum { BLOCK = 128 << 10 };
    uint64_t at = s;
    size_t k;
    for (k = 0; k < n; k++) {
        const char *p = rg[k].ptr;
        const uint64_t start = d->off + (uint64_t)(p - d->ptr);
        uint64_t done = 0;
        sums[k] = 0;
        while (done < rg[k].len) {
            uint64_t len = rg[k].len - done < BLOCK ? rg[k].len - done : BLOCK;
            while (at < start + done + len) {
                uint64_t c = e - at < BLOCK ? e - at : BLOCK;
                memcpy(d->ptr + (at - d->off), src + at, c);
                at += c;
            }
            sums[k] += wsync_digest_sum(p + done, len, recv_digest_key_at(rg[k].off, done / 8));
            done += len;
        }
    }
    if (at < e)
        memcpy(d->ptr + (at - d->off), src + at, e - at);
}

/* Direct (recv_dests_direct): image bytes [s, e) of destination d that
 * passed through the image, the words across its edges (dest_interior), copied
 * into it from `src`; then the digests of its parts. */
static void host_ends_digest(const recv_dest_t *d, int word_edges, const char *src, uint64_t s, uint64_t e,
                             const wsync_digest_range_t *rg, size_t n, uint64_t *sums)
{
    uint64_t head, tail, t;
    size_t k;
    if (!dest_interior(d, word_edges, &head, &tail))
        head = tail = d->off + d->size; /* the whole destination passed the image */
    if (s < head)
        memcpy(d->ptr + (s - d->off), src + s, (e < head ? e : head) - s);
    t = s > tail ? s : tail;
    if (t < e)
        memcpy(d->ptr + (t - d->off), src + t, e - t);
    for (k = 0; k < n; k++)
        sums[k] = wsync_digest_sum(rg[k].ptr, rg[k].len, rg[k].off);
}

wsync_status_t recv_dgroup_start(recv_dgroup_t *g, const wsync_mem_ops_t *mem, const recv_dests_t *ds, char *image,
                                 const char *src, uint64_t off, uint64_t len, const wsync_digest_range_t *pieces,
                                 size_t npieces, int direct)
{
    recv_parts_t all = {0};
    wsync_status_t st = WSYNC_OK;
    const size_t base = dest_after(ds, off);
    size_t i, j, nd = 0, *at = NULL;
    memset(g, 0, sizeof(*g));
    g->npieces = npieces;
    for (i = 0; i < npieces; i++)
        WSYNC_CHECK_GOTO(recv_parts_split(&all, ds, image, (uint64_t)((const char *)pieces[i].ptr - image),
                                          pieces[i].len, pieces[i].off, (uint32_t)i),
                         st, out);
    /* job 0: the image (the fan-out copy, the digests of bytes no
     * destination holds); job 1 + j: destination base + j, every one the
     * chunk touches (one too short to hold a whole word still gets its copy) */
    for (i = base; i < ds->n && ds->d[i].off < off + len; i++)
        nd++;
    g->jobs = calloc(nd + 1, sizeof(*g->jobs));
    g->first = calloc(nd + 2, sizeof(*g->first));
    g->ok = calloc(nd + 1, 1);
    g->psums = calloc(all.n + 1, sizeof(*g->psums));
    g->parts.rg = calloc(all.n + 1, sizeof(*g->parts.rg));
    g->parts.of = calloc(all.n + 1, sizeof(*g->parts.of));
    g->parts.dest = calloc(all.n + 1, sizeof(*g->parts.dest));
    at = calloc(nd + 2, sizeof(*at));
    if (!g->jobs || !g->first || !g->ok || !g->psums || !g->parts.rg || !g->parts.of || !g->parts.dest || !at) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the parts in job order (a counting sort: linear in parts) */
    for (i = 0; i < all.n; i++)
        g->first[all.dest[i] < 0 ? 1 : (size_t)all.dest[i] - base + 2]++;
    for (j = 1; j <= nd + 1; j++)
        g->first[j] += g->first[j - 1];
    memcpy(at, g->first, (nd + 1) * sizeof(*at));
    for (i = 0; i < all.n; i++) {
        size_t jb = all.dest[i] < 0 ? 0 : (size_t)all.dest[i] - base + 1, to = at[jb]++;
        g->parts.rg[to] = all.rg[i];
        g->parts.of[to] = all.of[i];
        g->parts.dest[to] = all.dest[i];
    }
    g->parts.n = g->parts.cap = all.n;
    WSYNC_CHECK_GOTO(mem->copy_digest_start(image + off, src + off, src == image ? 0 : len, g->parts.rg,
                                            g->first[1], &g->jobs[0]),
                     st, out);
    g->njobs = 1;
    for (i = base, j = 1; j <= nd; i++, j++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s = d->off > off ? d->off : off, e = d->off + d->size < off + len ? d->off + d->size : off + len;
        g->njobs++;
        if (mem->kind == WSYNC_MEM_HOST) { /* done here and now, as a host job would be */
            if (direct)
                host_ends_digest(d, ds->word_edges, src, s, e, g->parts.rg + g->first[j],
                                 g->first[j + 1] - g->first[j], g->psums + g->first[j]);
            else
                host_write_digest(d, src, s, e, g->parts.rg + g->first[j], g->first[j + 1] - g->first[j],
                                  g->psums + g->first[j]);
            g->ok[j] = 1;
            continue;
        }
        WSYNC_CHECK_GOTO(mem->copy_digest_start(d->ptr + (s - d->off), src + s, e - s, g->parts.rg + g->first[j],
                                                g->first[j + 1] - g->first[j], &g->jobs[j]),
                         st, out);
    }
out:
    free(at);
    recv_parts_free(&all);
    return st;
}

wsync_status_t recv_dgroup_poll(recv_dgroup_t *g, const wsync_mem_ops_t *mem, uint64_t *sums, int *done)
{
    size_t j, i;
    *done = 0;
    for (j = 0; j < g->njobs; j++) {
        int d = 0;
        if (g->ok[j])
            continue;
        WSYNC_CHECK(mem->job_poll(g->jobs[j], 0, g->psums + g->first[j], &d));
        if (!d)
            return WSYNC_OK;
        g->ok[j] = 1;
    }
    memset(sums, 0, g->npieces * sizeof(*sums));
    for (i = 0; i < g->parts.n; i++)
        sums[g->parts.of[i]] += g->psums[i];
    *done = 1;
    return WSYNC_OK;
}

void recv_dgroup_end(recv_dgroup_t *g, const wsync_mem_ops_t *mem)
{
    size_t j;
    for (j = 0; j < g->njobs; j++)
        if (g->jobs[j])
            mem->job_free(g->jobs[j]); /* waits: a copy must not outlive the attempt */
    recv_parts_free(&g->parts);
    free(g->jobs);
    free(g->first);
    free(g->ok);
    free(g->psums);
    memset(g, 0, sizeof(*g));
}
