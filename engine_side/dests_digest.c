/* dests_digest.c: digest ranges cut between the caller's destination
 * tensors and the image, keyed so that the parts' sums add up to the
 * range's sum (dests.h: recv_parts_split, recv_dests_digest_many). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/mem/digest_key.h"
#include "engine_side/dests.h"

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

wsync_status_t recv_parts_split(recv_parts_t *p, const recv_dests_t *ds, const char *image, uint64_t off,
                                uint64_t len, uint64_t key, uint32_t of)
{
    const uint64_t end = off + len;
    uint64_t pos = off;
    size_t i = recv_dests_after(ds, off);
    for (; ds && i < ds->n && ds->d[i].off < end; i++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s = d->off > off ? d->off : off, e = d->off + d->size < end ? d->off + d->size : end;
        /* whole words of the range (its own last word may be short) */
        uint64_t cs = off + (s - off + 7) / 8 * 8, ce = e == end ? end : off + (e - off) / 8 * 8;
        if (ce <= cs)
            continue;
        WSYNC_CHECK(parts_add(p, image + pos, cs - pos, wsync_digest_key_at(key, (pos - off) / 8), of, -1));
        WSYNC_CHECK(
            parts_add(p, d->ptr + (cs - d->off), ce - cs, wsync_digest_key_at(key, (cs - off) / 8), of, (long)i));
        pos = ce;
    }
    return parts_add(p, image + pos, end - pos, wsync_digest_key_at(key, (pos - off) / 8), of, -1);
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
