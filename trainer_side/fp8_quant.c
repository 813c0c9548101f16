/* fp8_quant.c: the quantized bands a trainer rank serves (fp8_wire.h). For
 * each (source tensor, spec) a node plan's FP8 destinations read, the bands
 * this rank holds whole are quantized once per version and slot, on the
 * host or on the GPU (common/quant), into a buffer of the publisher's
 * memory kind; their codes and scales are spans of the quantized space that
 * pub_span_at finds like the slot's own, so the stage packs them and the
 * segment digests read them as any bytes: the digests cover exactly the
 * FP8 bytes and scales this rank produced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/quant/quant.h"
#include "common/targets/fp8_wire.h"
#include "trainer_side/publisher_internal.h"

struct pub_fp8q {
    struct pub_fp8q *next;
    const pub_slot_t *slot;
    const wsync_sync_layout_t *sl;
    uint64_t version; /* what buf holds (0: nothing yet) */
    wsync_fp8_use_t use;
    wsync_fp8_brun_t *br;
    size_t nbr;
    pub_span_t *spans; /* [2 nbr]: the codes, then the scales, in offset order */
    void *buf;
};

static void fp8q_free(const wsync_publisher_t *p, pub_fp8q_t *q)
{
    if (q->buf)
        p->mem->free(q->buf);
    free(q->br);
    free(q->spans);
    free(q);
}

void pub_fp8q_free(wsync_publisher_t *p)
{
    while (p->tcache.fp8q) {
        pub_fp8q_t *q = p->tcache.fp8q;
        p->tcache.fp8q = q->next;
        fp8q_free(p, q);
    }
}

/* The entry of (slot, use): its bands of this layout and their buffer. */
static wsync_status_t fp8q_get(wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_use_t *u, pub_fp8q_t **out)
{
    pub_fp8q_t *q;
    uint64_t len = 0, at = 0;
    size_t k;
    for (q = p->tcache.fp8q; q; q = q->next)
        if (q->slot == s && q->sl == p->sl && memcmp(&q->use, u, sizeof(*u)) == 0) {
            *out = q;
            return WSYNC_OK;
        }
    q = calloc(1, sizeof(*q));
    WSYNC_CHECK_ALLOC(q);
    q->slot = s;
    q->sl = p->sl;
    q->use = *u;
    if (wsync_fp8_bruns(p->sl->manifest, p->sl->layout, u, p->cfg.rank, &q->br, &q->nbr) != WSYNC_OK ||
        (q->spans = calloc(2 * q->nbr + 1, sizeof(*q->spans))) == NULL) {
        wsync_status_t st = q->br || q->nbr == 0 ? WSYNC_ERR_NOMEM : WSYNC_ERR_INVALID;
        fp8q_free(p, q);
        return st == WSYNC_ERR_NOMEM ? wsync_error(st, "out of memory") : st;
    }
    for (k = 0; k < q->nbr; k++)
        len += (q->br[k].q_len + 15) / 16 * 16 + q->br[k].s_len;
    if (len && p->mem->alloc(len, &q->buf) != WSYNC_OK) {
        fp8q_free(p, q);
        return wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: %llu bytes for FP8 bands: %s", p->cfg.rank,
                           (unsigned long long)len, wsync_last_error());
    }
    for (k = 0; k < q->nbr; k++) {
        q->spans[k] = (pub_span_t){q->br[k].q_off, q->br[k].q_len, (char *)q->buf + at, -1, 0};
        at += (q->br[k].q_len + 15) / 16 * 16;
    }
    for (k = 0; k < q->nbr; k++) {
        q->spans[q->nbr + k] = (pub_span_t){q->br[k].s_off, q->br[k].s_len, (char *)q->buf + at, -1, 0};
        at += q->br[k].s_len;
    }
    q->next = p->tcache.fp8q;
    p->tcache.fp8q = q;
    *out = q;
    return WSYNC_OK;
}

/* Quantizes q's bands from slot s. */
static wsync_status_t fp8q_fill(const wsync_publisher_t *p, const pub_slot_t *s, pub_fp8q_t *q)
{
    const wsync_tensor_t *t = &p->sl->manifest->tensors[q->use.tensor];
    const wsync_quant_src_t fmt = t->dtype == WSYNC_DTYPE_F32 ? WSYNC_QSRC_F32 : WSYNC_QSRC_BF16;
    size_t k;
    for (k = 0; k < q->nbr; k++) {
        const wsync_fp8_brun_t *b = &q->br[k];
        const pub_span_t *sp = pub_span_at(p, s, b->src_off);
        const char *src;
        wsync_status_t st;
        if (sp == NULL || sp->area < 0)
            return wsync_error(WSYNC_ERR_INTERNAL, "trainer rank %d: FP8 band of '%s' at %llu is not in its slot",
                               p->cfg.rank, t->name, (unsigned long long)b->src_off);
        src = (const char *)sp->ptr + (b->src_off - sp->offset);
        if (p->mem->kind == WSYNC_MEM_CUDA)
            st = wsync_fp8_quantize_cuda(src, fmt, b->rows, b->cols, &q->use.spec, q->spans[k].ptr,
                                         q->spans[q->nbr + k].ptr, t->name, NULL);
        else
            st = wsync_fp8_quantize_host(src, fmt, b->rows, b->cols, &q->use.spec, q->spans[k].ptr,
                                         q->spans[q->nbr + k].ptr, t->name);
        if (st != WSYNC_OK)
            return wsync_error(st, "trainer rank %d: %s (rows counted from row %llu of matrix %llu)", p->cfg.rank,
                               wsync_last_error(), (unsigned long long)b->row0, (unsigned long long)b->slice);
    }
    return WSYNC_OK;
}

wsync_status_t pub_fp8_ensure(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np)
{
    wsync_status_t st = WSYNC_OK;
    size_t u;
    if (np->nfp8 == 0)
        return WSYNC_OK;
    pthread_mutex_lock(&p->tcache.qlock);
    for (u = 0; u < np->nfp8 && st == WSYNC_OK; u++) {
        pub_fp8q_t *q = NULL;
        st = fp8q_get(p, s, &np->fp8[u], &q);
        if (st != WSYNC_OK || q->version == s->version)
            continue;
        q->version = 0;
        st = fp8q_fill(p, s, q);
        if (st == WSYNC_OK)
            q->version = s->version;
    }
    pthread_mutex_unlock(&p->tcache.qlock);
    return st;
}

const pub_span_t *pub_fp8_span_at(wsync_publisher_t *p, const pub_slot_t *s, uint64_t off)
{
    const pub_span_t *found = NULL;
    pub_fp8q_t *q;
    pthread_mutex_lock(&p->tcache.qlock);
    for (q = p->tcache.fp8q; q && found == NULL; q = q->next) {
        size_t lo = 0, hi = 2 * q->nbr;
        if (q->slot != s || q->version != s->version || q->sl != p->sl)
            continue;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (off < q->spans[mid].offset)
                hi = mid;
            else if (off >= q->spans[mid].offset + q->spans[mid].len)
                lo = mid + 1;
            else {
                found = &q->spans[mid];
                break;
            }
        }
    }
    pthread_mutex_unlock(&p->tcache.qlock);
    return found;
}
