/* target_digests.c: the digests of a target's segments a trainer rank owns
 * (target_verify.h), for one version, computed once per (target, version)
 * and answered to every engine rank holding that target. The segments fall
 * in three batches, sorted once per target:
 *   contiguous  read as one range of the slot: one digest_many call;
 *   strided     (column slices) of whole words in one memory area, in GPU
 *               memory: one digest-runs launch (digest_runs.h) that reads
 *               the strided bytes where they are, no packed copy;
 *   other       gathered into a scratch buffer, then digested, one by one
 *               (host memory, odd widths, several areas).
 * Before, every segment was its own blocking digest and every strided one a
 * blocking gather first: on a 7B TP=2 target (hundreds of segments) that
 * took ~50 ms after the last put landed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/mem/digest_runs.h"
#include "common/proto/pull_reply.h"
#include "common/targets/target_verify.h"
#include "trainer_side/publisher_internal.h"

struct pub_tdig {
    size_t *contig, ncontig;   /* segment ids (indices into seg->puts) */
    uint64_t *contig_src;      /* their source image offsets */
    size_t *strided, nstrided; /* in plan order */
    int area;                  /* the memory area the strided ones read */
    wsync_digest_runs_plan_t *plan;
    size_t *other, nother;
};

void pub_tdig_free(pub_tdig_t *d)
{
    if (d == NULL)
        return;
    free(d->contig);
    free(d->contig_src);
    free(d->strided);
    wsync_digest_runs_free(d->plan);
    free(d->other);
    free(d);
}

/* Sorts this rank's segments of `seg` into the three batches. */
static wsync_status_t tdig_build(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                 pub_tdig_t **out)
{
    const int me = p->cfg.rank;
    const size_t n = seg->rank_nputs[me];
    pub_tdig_t *d = calloc(1, sizeof(*d));
    wsync_digest_seg_t *ds = NULL;
    wsync_run2d_t *rel = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t k, nrel = 0, used = 0;
    WSYNC_CHECK_ALLOC(d);
    d->area = -1;
    for (k = 0; k < n; k++)
        nrel += seg->puts[seg->rank_puts[me][k]].nruns;
    d->contig = calloc(n + 1, sizeof(*d->contig));
    d->contig_src = calloc(n + 1, sizeof(*d->contig_src));
    d->strided = calloc(n + 1, sizeof(*d->strided));
    d->other = calloc(n + 1, sizeof(*d->other));
    ds = calloc(n + 1, sizeof(*ds));
    rel = calloc(nrel + 1, sizeof(*rel));
    if (!d->contig || !d->contig_src || !d->strided || !d->other || !ds || !rel) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < n; k++) {
        const size_t id = seg->rank_puts[me][k];
        const wsync_tput_t *pu = &seg->puts[id];
        uint64_t src;
        int area = -1;
        if (wsync_runs_contiguous(&seg->runs[pu->first_run], pu->nruns, &src)) {
            d->contig_src[d->ncontig] = src;
            d->contig[d->ncontig++] = id;
        } else if (p->mem->kind == WSYNC_MEM_CUDA && pub_area_runs(p, s, seg, pu, rel + used, &area) &&
                   (d->area < 0 || area == d->area) && wsync_digest_runs_ok(rel + used, pu->nruns)) {
            d->area = area;
            ds[d->nstrided] = (wsync_digest_seg_t){.dst_off = pu->dst_off, .runs = rel + used, .nruns = pu->nruns};
            d->strided[d->nstrided++] = id;
            used += pu->nruns;
        } else {
            d->other[d->nother++] = id;
        }
    }
    if (d->nstrided)
        st = wsync_digest_runs_prepare(ds, d->nstrided, &d->plan);
out:
    free(ds);
    free(rel);
    if (st != WSYNC_OK) {
        pub_tdig_free(d);
        return st;
    }
    *out = d;
    return WSYNC_OK;
}

int pub_put_digest(json_t *out, uint64_t sum, const wsync_tput_t *pu)
{
    return wsync_pull_reply_add_segment(out, pu->id, wsync_digest_final(sum, pu->len, pu->dst_off));
}

static wsync_status_t digest_contig(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                    const pub_tdig_t *d, json_t *out)
{
    wsync_digest_range_t *rg = calloc(d->ncontig + 1, sizeof(*rg));
    uint64_t *sums = calloc(d->ncontig + 1, sizeof(*sums));
    wsync_status_t st = WSYNC_OK;
    size_t k;
    if (rg == NULL || sums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (k = 0; k < d->ncontig; k++) {
        const wsync_tput_t *pu = &seg->puts[d->contig[k]];
        const pub_span_t *sp = pub_span_at(p, s, d->contig_src[k]);
        if (sp == NULL || d->contig_src[k] + pu->len > sp->offset + sp->len) {
            st = wsync_error(WSYNC_ERR_INVALID, "segment %zu of its target is not this rank's own", d->contig[k]);
            goto out;
        }
        rg[k] = (wsync_digest_range_t){.ptr = (const char *)sp->ptr + (d->contig_src[k] - sp->offset),
                                       .len = pu->len,
                                       .off = pu->dst_off};
    }
    WSYNC_CHECK_GOTO(p->mem->digest_many(rg, d->ncontig, sums), st, out);
    for (k = 0; k < d->ncontig; k++)
        pub_put_digest(out, sums[k], &seg->puts[d->contig[k]]);
out:
    free(rg);
    free(sums);
    return st;
}

/* Segments `ids` gathered into a scratch buffer one by one, then digested. */
static wsync_status_t digest_gathered(const wsync_publisher_t *p, const pub_slot_t *s,
                                      const wsync_node_plan_t *seg, const size_t *ids, size_t n, json_t *out)
{
    void *buf = NULL;
    uint64_t cap = 0, sum = 0;
    wsync_status_t st = WSYNC_OK;
    size_t k;
    for (k = 0; k < n && st == WSYNC_OK; k++) {
        const wsync_tput_t *pu = &seg->puts[ids[k]];
        if (pu->len > cap) {
            p->mem->free(buf);
            buf = NULL;
            cap = pu->len;
            if ((st = p->mem->alloc(cap, &buf)) != WSYNC_OK)
                break;
        }
        st = pub_gather(p, s, &seg->runs[pu->first_run], pu->nruns, buf);
        if (st == WSYNC_OK)
            st = p->mem->digest_sum(buf, pu->len, pu->dst_off, &sum);
        if (st == WSYNC_OK)
            pub_put_digest(out, sum, pu);
    }
    if (buf)
        p->mem->free(buf);
    return st;
}

static wsync_status_t digest_strided(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                     const pub_tdig_t *d, json_t *out)
{
    uint64_t *sums;
    wsync_status_t st;
    size_t k;
    if (d->nstrided == 0)
        return WSYNC_OK;
    if ((uintptr_t)s->area_ptr[d->area] % 8) /* the kernel reads whole words */
        return digest_gathered(p, s, seg, d->strided, d->nstrided, out);
    sums = calloc(d->nstrided, sizeof(*sums));
    WSYNC_CHECK_ALLOC(sums);
    st = wsync_digest_runs_sums(d->plan, s->area_ptr[d->area], sums);
    for (k = 0; st == WSYNC_OK && k < d->nstrided; k++)
        pub_put_digest(out, sums[k], &seg->puts[d->strided[k]]);
    free(sums);
    return st;
}

wsync_status_t pub_tdig_prepare(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                pub_tdig_t **dig)
{
    return *dig ? WSYNC_OK : tdig_build(p, s, seg, dig);
}

wsync_status_t pub_tdig_compute(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                const pub_tdig_t *d, json_t *out)
{
    WSYNC_CHECK(digest_contig(p, s, seg, d, out));
    WSYNC_CHECK(digest_strided(p, s, seg, d, out));
    return digest_gathered(p, s, seg, d->other, d->nother, out);
}
