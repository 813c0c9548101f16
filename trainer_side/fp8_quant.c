/* fp8_quant.c: the quantized bands a trainer rank serves (fp8_wire.h). For
 * each (source tensor, spec) a node plan's FP8 destinations read, the bands
 * this rank holds whole are quantized once per version and slot, on the
 * host or on the GPU (common/quant), into buffers of the publisher's memory
 * kind; their codes and scales are spans of the quantized space that
 * pub_span_at finds like the slot's own, so the stage packs them and the
 * segment digests read them as any bytes: the digests cover exactly the
 * FP8 bytes and scales this rank produced. Parts of bands that ranks share
 * are quantized with the block maxima of every part (fp8_amax.c). One entry per slot holds every
 * (tensor, spec) quantized for its version so far, in blocks that never
 * move (a span found stays valid while the slot is pinned at that version),
 * indexed by offset; a model of 45k FP8 tensors is one sorted index, not a
 * list per tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/quant/quant.h"
#include "common/targets/fp8_wire.h"
#include "trainer_side/publisher_internal.h"

typedef struct fp8_blk {
    struct fp8_blk *next;
    void *buf;
    size_t n;
    pub_span_t spans[]; /* [n] */
} fp8_blk_t;

struct pub_fp8q {
    struct pub_fp8q *next;
    const pub_slot_t *slot;
    const wsync_sync_layout_t *sl;
    uint64_t version;      /* what its blocks hold */
    wsync_fp8_use_t *done; /* quantized for this version, sorted */
    size_t ndone, capdone;
    const pub_span_t **idx; /* every span of every block, by offset */
    size_t nidx, capidx;
    fp8_blk_t *blocks;
};

static int cmp_use(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(wsync_fp8_use_t));
}

static int cmp_span(const void *a, const void *b)
{
    const pub_span_t *x = *(const pub_span_t *const *)a, *y = *(const pub_span_t *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void fp8q_reset(const wsync_publisher_t *p, pub_fp8q_t *q)
{
    while (q->blocks) {
        fp8_blk_t *b = q->blocks;
        q->blocks = b->next;
        if (b->buf)
            p->mem->free(b->buf);
        free(b);
    }
    q->ndone = q->nidx = 0;
    q->version = 0;
}

void pub_fp8q_free(wsync_publisher_t *p)
{
    while (p->tcache.fp8q) {
        pub_fp8q_t *q = p->tcache.fp8q;
        p->tcache.fp8q = q->next;
        fp8q_reset(p, q);
        free(q->done);
        free(q->idx);
        free(q);
    }
    wsync_fp8_exts_free(p->tcache.fp8x);
    p->tcache.fp8x = NULL;
}

/* Slot s's entry, emptied when it held another version or layout. */
static wsync_status_t fp8q_get(wsync_publisher_t *p, const pub_slot_t *s, pub_fp8q_t **out)
{
    pub_fp8q_t *q;
    for (q = p->tcache.fp8q; q; q = q->next)
        if (q->slot == s)
            break;
    if (q == NULL) {
        q = calloc(1, sizeof(*q));
        WSYNC_CHECK_ALLOC(q);
        q->slot = s;
        q->next = p->tcache.fp8q;
        p->tcache.fp8q = q;
    }
    if (q->version != s->version || q->sl != p->sl) {
        fp8q_reset(p, q);
        q->sl = p->sl;
        q->version = s->version;
    }
    if (p->tcache.fp8x == NULL || p->tcache.fp8x_sl != p->sl) {
        wsync_fp8_exts_free(p->tcache.fp8x);
        p->tcache.fp8x = NULL;
        WSYNC_CHECK(wsync_fp8_exts_make(p->sl->layout, &p->tcache.fp8x));
        p->tcache.fp8x_sl = p->sl;
    }
    *out = q;
    return WSYNC_OK;
}

/* Quantizes band run b from slot s into its two spans. */
static wsync_status_t quantize(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_brun_t *b,
                               const wsync_fp8_spec_t *spec, const pub_span_t *qs, const pub_span_t *ss)
{
    const wsync_tensor_t *t = &p->sl->manifest->tensors[b->tensor];
    const wsync_quant_src_t fmt = t->dtype == WSYNC_DTYPE_F32 ? WSYNC_QSRC_F32 : WSYNC_QSRC_BF16;
    const pub_span_t *sp = pub_span_at(p, s, b->src_off);
    const char *src;
    wsync_status_t st;
    if (sp == NULL || sp->area < 0)
        return wsync_error(WSYNC_ERR_INTERNAL, "trainer rank %d: FP8 band of '%s' at %llu is not in its slot",
                           p->cfg.rank, t->name, (unsigned long long)b->src_off);
    src = (const char *)sp->ptr + (b->src_off - sp->offset);
    if (p->mem->kind == WSYNC_MEM_CUDA)
        st = wsync_fp8_quantize_cuda(src, fmt, b->rows, b->cols, spec, qs->ptr, ss->ptr, t->name, NULL);
    else
        st = wsync_fp8_quantize_host(src, fmt, b->rows, b->cols, spec, qs->ptr, ss->ptr, t->name);
    if (st != WSYNC_OK)
        return wsync_error(st, "trainer rank %d: %s (rows counted from row %llu of matrix %llu)", p->cfg.rank,
                           wsync_last_error(), (unsigned long long)b->row0, (unsigned long long)b->slice);
    return WSYNC_OK;
}

/* The uses of np that q has not quantized yet, quantized into one new block. */
static wsync_status_t fp8q_fill(wsync_publisher_t *p, const pub_slot_t *s, pub_fp8q_t *q, const wsync_node_plan_t *np)
{
    wsync_fp8_brun_t *br = NULL;
    wsync_fp8_use_t *miss = calloc(np->nfp8 + 1, sizeof(*miss));
    size_t *use_of = NULL, nbr = 0, cap = 0, nmiss = 0, u, k, before;
    uint64_t len = 0, at = 0;
    fp8_blk_t *blk = NULL;
    float *amax = NULL; /* bands ranks share: the maxima of every part (fp8_amax.c) */
    size_t *aoff = NULL, namax = 0, njobs = 0;
    pub_fp8_job_t *jobs = NULL; /* my parts of shared bands, quantized together */
    int parts = 0;
    wsync_status_t st = WSYNC_OK;
    WSYNC_CHECK_ALLOC(miss);
    for (u = 0; u < np->nfp8; u++)
        if (q->ndone == 0 || bsearch(&np->fp8[u], q->done, q->ndone, sizeof(*q->done), cmp_use) == NULL)
            miss[nmiss++] = np->fp8[u];
    if (nmiss == 0)
        goto out;
    use_of = calloc(1, sizeof(*use_of)); /* grown below: the use of each band run */
    for (u = 0; st == WSYNC_OK && u < nmiss; u++) {
        size_t *nu;
        before = nbr;
        st = wsync_fp8_bruns(p->sl->manifest, p->tcache.fp8x, &miss[u], p->cfg.rank, &br, &nbr, &cap);
        if (st == WSYNC_OK && (nu = realloc(use_of, (nbr + 1) * sizeof(*nu))) == NULL)
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        else if (st == WSYNC_OK)
            use_of = nu;
        for (k = before; st == WSYNC_OK && k < nbr; k++)
            use_of[k] = u;
    }
    if (st != WSYNC_OK)
        goto out;
    blk = calloc(1, sizeof(*blk) + (2 * nbr + 1) * sizeof(pub_span_t));
    if (blk == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < nbr; k++)
        len += (br[k].q_len + 15) / 16 * 16 + (br[k].s_len + 15) / 16 * 16;
    if (len && (st = p->mem->alloc(len, &blk->buf)) != WSYNC_OK) {
        st = wsync_error(st, "trainer rank %d: %llu bytes for FP8 bands: %s", p->cfg.rank, (unsigned long long)len,
                         wsync_last_error());
        goto out;
    }
    for (k = 0; k < nbr && !parts; k++)
        parts = br[k].part;
    if (parts && (st = pub_fp8_amax_parts(p, s, miss, br, use_of, nbr, &amax, &aoff, &namax)) != WSYNC_OK)
        goto out;
    if (parts && (jobs = calloc(nbr + 1, sizeof(*jobs))) == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < nbr && st == WSYNC_OK; k++) {
        pub_span_t *qs = &blk->spans[blk->n], *ss = &blk->spans[blk->n + 1];
        *qs = (pub_span_t){br[k].q_off, br[k].q_len, (char *)blk->buf + at, -1, 0};
        at += (br[k].q_len + 15) / 16 * 16;
        *ss = (pub_span_t){br[k].s_off, br[k].s_len, (char *)blk->buf + at, -1, 0};
        at += (br[k].s_len + 15) / 16 * 16;
        blk->n += br[k].s_len ? 2 : 1; /* a band's part without its scales: its codes only */
        if (br[k].part)
            jobs[njobs++] = (pub_fp8_job_t){br[k], miss[use_of[k]].spec, aoff[k], qs->ptr,
                                            br[k].s_len ? (float *)ss->ptr : NULL};
        else
            st = quantize(p, s, &br[k], &miss[use_of[k]].spec, qs, ss);
    }
    if (st == WSYNC_OK && njobs)
        st = pub_fp8_parts_quantize(p, s, jobs, njobs, amax, namax);
    if (st != WSYNC_OK)
        goto out;
    if (q->nidx + blk->n > q->capidx) {
        size_t nc = (q->nidx + blk->n) * 2;
        const pub_span_t **ni = realloc(q->idx, nc * sizeof(*ni));
        if (ni == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
            goto out;
        }
        q->idx = ni;
        q->capidx = nc;
    }
    if (q->ndone + nmiss > q->capdone) {
        size_t nc = (q->ndone + nmiss) * 2;
        wsync_fp8_use_t *nd = realloc(q->done, nc * sizeof(*nd));
        if (nd == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
            goto out;
        }
        q->done = nd;
        q->capdone = nc;
    }
    for (k = 0; k < blk->n; k++)
        q->idx[q->nidx++] = &blk->spans[k];
    qsort(q->idx, q->nidx, sizeof(*q->idx), cmp_span);
    memcpy(q->done + q->ndone, miss, nmiss * sizeof(*miss));
    q->ndone += nmiss;
    qsort(q->done, q->ndone, sizeof(*q->done), cmp_use);
    blk->next = q->blocks;
    q->blocks = blk;
    blk = NULL;
out:
    if (blk) {
        if (blk->buf)
            p->mem->free(blk->buf);
        free(blk);
    }
    free(amax);
    free(aoff);
    free(jobs);
    free(use_of);
    free(br);
    free(miss);
    return st;
}

wsync_status_t pub_fp8_ensure(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np)
{
    pub_fp8q_t *q = NULL;
    wsync_status_t st;
    if (np->nfp8 == 0)
        return WSYNC_OK;
    pthread_mutex_lock(&p->tcache.qlock);
    st = fp8q_get(p, s, &q);
    if (st == WSYNC_OK)
        st = fp8q_fill(p, s, q, np);
    pthread_mutex_unlock(&p->tcache.qlock);
    return st;
}

const pub_span_t *pub_fp8_span_at(wsync_publisher_t *p, const pub_slot_t *s, uint64_t off)
{
    const pub_span_t *found = NULL;
    pub_fp8q_t *q;
    pthread_mutex_lock(&p->tcache.qlock);
    for (q = p->tcache.fp8q; q; q = q->next)
        if (q->slot == s && q->version == s->version && q->sl == p->sl)
            break;
    if (q != NULL) {
        size_t lo = 0, hi = q->nidx;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const pub_span_t *sp = q->idx[mid];
            if (off < sp->offset)
                hi = mid;
            else if (off >= sp->offset + sp->len)
                lo = mid + 1;
            else {
                found = sp;
                break;
            }
        }
    }
    pthread_mutex_unlock(&p->tcache.qlock);
    return found;
}
