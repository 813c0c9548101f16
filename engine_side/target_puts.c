/* target_puts.c: a node of targets verified put by put, with the sums the
 * landing brought along and the trainers' put digests (target_puts.h). */
#include "engine_side/target_puts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/digest/digest.h"
#include "engine_side/dests.h"

/* A part of a chunk copied into this rank: put `put`'s bytes [from, to) of
 * the landing rank's image, at `at` of this rank's. */
typedef struct part {
    size_t put;
    uint64_t from, to, at;
} part_t;

static int by_source(const void *a, const void *b)
{
    const wsync_tcopy_t *x = *(const wsync_tcopy_t *const *)a, *y = *(const wsync_tcopy_t *const *)b;
    return x->from_off < y->from_off ? -1 : x->from_off > y->from_off;
}

/* Chunk c's copies into rank me, by source offset, into order[]; their count. */
static size_t copies_here(const wsync_node_plan_t *np, uint32_t c, int me, const wsync_tcopy_t **order)
{
    const wsync_tchunk_t *ch = &np->chunks[c];
    size_t k, n = 0;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++)
        if (np->copies[k].to_rank == me)
            order[n++] = &np->copies[k];
    if (n > 1)
        qsort(order, n, sizeof(*order), by_source);
    return n;
}

/* The parts of chunk c's puts (by landing offset) and its nc copies here
 * (by source offset), one after another: both lists are walked once. */
typedef struct walk {
    const wsync_node_plan_t *np;
    const wsync_tcopy_t *const *order;
    size_t nc, i, j, first, nputs;
} walk_t;

static walk_t walk_start(const wsync_node_plan_t *np, uint32_t c, const wsync_tcopy_t *const *order, size_t nc)
{
    return (
        walk_t){.np = np, .order = order, .nc = nc, .first = np->chunks[c].first_put, .nputs = np->chunks[c].nputs};
}

static int walk_next(walk_t *w, part_t *pt)
{
    while (w->i < w->nputs && w->j < w->nc) {
        const wsync_tput_t *u = &w->np->puts[w->first + w->i];
        const wsync_tcopy_t *cp = w->order[w->j];
        const uint64_t ue = u->dst_off + u->len, ce = cp->from_off + cp->len;
        const uint64_t from = u->dst_off > cp->from_off ? u->dst_off : cp->from_off, to = ue < ce ? ue : ce;
        if (ue <= ce)
            w->i++;
        else
            w->j++;
        if (from < to) {
            *pt = (part_t){.put = w->first + (ue <= ce ? w->i - 1 : w->i),
                           .from = from,
                           .to = to,
                           .at = cp->to_off + (from - cp->from_off)};
            return 1;
        }
    }
    return 0;
}

/* 1 if chunk c's copies here cover each of its puts exactly once, every part
 * starting on a whole word of its put and ending on one or at its end (so the
 * parts' sums add up to the put's). t->sum counts the bytes meanwhile. */
static int copies_tile_puts(recv_tputs_t *t, uint32_t c, size_t nc)
{
    const wsync_node_plan_t *np = t->np;
    const wsync_tchunk_t *ch = &np->chunks[c];
    walk_t w = walk_start(np, c, t->order, nc);
    uint64_t copied = 0, parts = 0;
    part_t pt;
    size_t k;
    for (k = 0; k < nc; k++) {
        const wsync_tcopy_t *cp = t->order[k];
        if (k > 0 && t->order[k - 1]->from_off + t->order[k - 1]->len > cp->from_off)
            return 0; /* the same bytes twice here */
        copied += cp->len;
    }
    while (walk_next(&w, &pt)) {
        const wsync_tput_t *u = &np->puts[pt.put];
        if ((pt.from - u->dst_off) % 8 != 0 || ((pt.to - u->dst_off) % 8 != 0 && pt.to != u->dst_off + u->len))
            return 0;
        t->sum[pt.put] += pt.to - pt.from;
        parts += pt.to - pt.from;
    }
    for (k = ch->first_put; k < ch->first_put + ch->nputs; k++)
        if (t->sum[k] != np->puts[k].len)
            return 0;
    return parts == copied;
}

wsync_status_t recv_tputs_begin(recv_tputs_t *t, const wsync_node_plan_t *np, int me, int allowed)
{
    uint32_t c;
    memset(t, 0, sizeof(*t));
    t->np = np;
    t->me = me;
    if (!allowed)
        return WSYNC_OK;
    t->state = calloc((size_t)np->nchunks + 1, 1);
    t->sum = calloc(np->nputs + 1, sizeof(*t->sum));
    t->digest = calloc(np->nputs + 1, sizeof(*t->digest));
    t->have = calloc(np->nputs + 1, 1);
    t->order = calloc(np->ncopies + 1, sizeof(*t->order));
    if (!t->state || !t->sum || !t->digest || !t->have || !t->order) {
        recv_tputs_end(t);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    t->on = 1;
    for (c = 0; c < np->nchunks && t->on; c++) {
        const size_t nc = copies_here(np, c, me, t->order);
        if (np->chunks[c].land_rank == me)
            t->on = nc == 0; /* else bytes landed here twice */
        else if (nc > 0)
            t->on = copies_tile_puts(t, c, nc);
    }
    memset(t->sum, 0, (np->nputs + 1) * sizeof(*t->sum));
    return WSYNC_OK;
}

wsync_status_t recv_tputs_landed(recv_tputs_t *t, const recv_pull_t *p, recv_verify_t *ver, uint32_t c,
                                 const wsync_mem_ops_t *mem, const recv_dests_t *dm, const char *image)
{
    const wsync_tchunk_t *ch = &t->np->chunks[c];
    const uint64_t *sums = recv_verify_put_sums(p, ver, c);
    size_t n;
    if (sums != NULL) {
        memcpy(t->sum + ch->first_put, sums, ch->nputs * sizeof(*sums));
        t->state[c] = TPUTS_SUMMED;
        return WSYNC_OK;
    }
    memset(t->sum + ch->first_put, 0, ch->nputs * sizeof(*t->sum));
    t->state[c] = TPUTS_LANDED_RAW; /* summed at the check, from 0 */
    if (image == NULL || mem->kind != WSYNC_MEM_HOST)
        return WSYNC_OK;
    n = recv_verify_ranges(p, ver, c, image); /* host memory: each put whole, now */
    WSYNC_CHECK(recv_dests_digest_many(mem, dm, image, ver->rg, n, t->sum + ch->first_put));
    t->state[c] = TPUTS_SUMMED;
    return WSYNC_OK;
}

void recv_tputs_copied(recv_tputs_t *t, uint32_t c)
{
    const wsync_tchunk_t *ch = &t->np->chunks[c];
    memset(t->sum + ch->first_put, 0, ch->nputs * sizeof(*t->sum)); /* its parts add up from 0 at the check */
    t->state[c] = TPUTS_COPIED;
}

wsync_status_t recv_tputs_answer(recv_tputs_t *t, int src, const wsync_pull_reply_t *rep)
{
    size_t k;
    if (!t->on)
        return WSYNC_OK;
    if (rep->puts == NULL) { /* an older trainer rank: segments, verified at the end */
        t->on = 0;
        return WSYNC_OK;
    }
    for (k = 0; k < rep->nputs; k++) {
        const uint32_t id = rep->put_ids[k];
        if (id >= t->np->nputs || t->np->puts[id].src_rank != src)
            return wsync_error(WSYNC_ERR_PEER,
                               "trainer rank %d answered a digest for put %u, which %s of the node plan's %zu "
                               "puts",
                               src, id, id >= t->np->nputs ? "is none" : "it does not send", t->np->nputs);
        t->digest[id] = rep->put_digests[k];
        t->have[id] = 1;
    }
    return WSYNC_OK;
}

/* Where put u's first byte is in this rank's image. */
static uint64_t put_here(const recv_tputs_t *t, size_t u)
{
    const uint32_t c = t->np->puts[u].chunk;
    const wsync_tcopy_t **order = t->order;
    size_t nc;
    walk_t w;
    part_t pt;
    if (t->np->chunks[c].land_rank == t->me)
        return t->np->puts[u].dst_off;
    nc = copies_here(t->np, c, t->me, order);
    w = walk_start(t->np, c, order, nc);
    while (walk_next(&w, &pt))
        if (pt.put == u)
            return pt.at;
    return 0;
}

/* Put u failed verification here: named by the tensor of this rank holding it. */
static wsync_status_t mismatch(const recv_tputs_t *t, const recv_pull_t *p, const recv_tlayout_t *tl, size_t u,
                               uint64_t d)
{
    const wsync_tput_t *pu = &t->np->puts[u];
    const wsync_target_t *mine = tl->tg[t->me];
    const uint64_t at = put_here(t, u);
    const wsync_dest_t *dt = wsync_target_dest_at(mine, at);
    char aux[600];
    return wsync_error(WSYNC_ERR_DIGEST,
                       "version %llu: tensor %s (bytes %llu..%llu of it, from trainer rank %d) failed "
                       "verification "
                       "on engine %s rank %d: digest %016llx, the trainer's %016llx (put %zu)",
                       (unsigned long long)p->v, dt ? dt->name : recv_fp8_aux_name(mine, tl, at, aux, sizeof(aux)),
                       (unsigned long long)(dt ? at - dt->offset : at),
                       (unsigned long long)(dt ? at - dt->offset + pu->len : at + pu->len), pu->src_rank,
                       p->r->engine_id, t->me, (unsigned long long)d, (unsigned long long)t->digest[u], u);
}

/* The ranges of what has no sum yet, in `image`, into rg (rg_put: their
 * puts); their count (rg NULL: only counted). */
static size_t unsummed(const recv_tputs_t *t, const char *image, wsync_digest_range_t *rg, size_t *rg_put)
{
    const wsync_node_plan_t *np = t->np;
    size_t n = 0, u;
    uint32_t c;
    for (c = 0; c < np->nchunks; c++) {
        const wsync_tchunk_t *ch = &np->chunks[c];
        walk_t w;
        part_t pt;
        if (t->state[c] == TPUTS_LANDED_RAW) /* landed here without its puts' sums: each put whole */
            for (u = ch->first_put; u < ch->first_put + ch->nputs; u++, n++)
                if (rg) {
                    const wsync_tput_t *pu = &np->puts[u];
                    rg[n] = (wsync_digest_range_t){.ptr = image + pu->dst_off, .len = pu->len, .off = pu->dst_off};
                    rg_put[n] = u;
                }
        if (t->state[c] != TPUTS_COPIED)
            continue;
        w = walk_start(np, c, t->order, copies_here(np, c, t->me, t->order));
        for (; walk_next(&w, &pt); n++)
            if (rg) {
                const wsync_tput_t *pu = &np->puts[pt.put];
                rg[n] = (wsync_digest_range_t){.ptr = image + pt.at,
                                               .len = pt.to - pt.from,
                                               .off = wsync_digest_key_at(pu->dst_off, (pt.from - pu->dst_off) / 8)};
                rg_put[n] = pt.put;
            }
    }
    return n;
}

/* What has no sum yet, digested in one call and added to its puts' sums
 * (a put landed raw has one range; a copied one, parts that add up). In
 * place (dm), the caller's bytes where they hold them (dests.h). */
static wsync_status_t sum_the_rest(recv_tputs_t *t, const wsync_mem_ops_t *mem, const recv_dests_t *dm,
                                   const char *image, uint64_t *bytes)
{
    const size_t n = unsummed(t, image, NULL, NULL);
    wsync_digest_range_t *rg;
    size_t *rg_put, k;
    uint64_t *sums;
    wsync_status_t st;
    if (n == 0)
        return WSYNC_OK;
    rg = calloc(n, sizeof(*rg));
    rg_put = calloc(n, sizeof(*rg_put));
    sums = calloc(n, sizeof(*sums));
    st = rg && rg_put && sums ? WSYNC_OK : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st == WSYNC_OK) {
        unsummed(t, image, rg, rg_put);
        st = recv_dests_digest_many(mem, dm, image, rg, n, sums);
    }
    for (k = 0; st == WSYNC_OK && k < n; k++) {
        t->sum[rg_put[k]] += sums[k];
        *bytes += rg[k].len;
    }
    free(rg);
    free(rg_put);
    free(sums);
    return st;
}

wsync_status_t recv_tputs_check(recv_tputs_t *t, const recv_pull_t *p, const recv_tlayout_t *tl,
                                const wsync_mem_ops_t *mem, const recv_dests_t *dm, const char *image)
{
    const wsync_node_plan_t *np = t->np;
    uint64_t rest = 0;
    uint32_t c;
    WSYNC_CHECK(sum_the_rest(t, mem, dm, image, &rest));
    if (rest > 0)
        wsync_trace("engine %s rank %d: %llu bytes without sums digested at the check", p->r->engine_id, t->me,
                    (unsigned long long)rest);
    for (c = 0; c < np->nchunks; c++) {
        const wsync_tchunk_t *ch = &np->chunks[c];
        size_t u;
        if (ch->land_rank != t->me && copies_here(np, c, t->me, t->order) == 0)
            continue; /* none of its bytes here */
        if (t->state[c] == TPUTS_NONE)
            return wsync_error(WSYNC_ERR_INTERNAL, "chunk %u was never summed on engine %s rank %d", c,
                               p->r->engine_id, t->me);
        for (u = ch->first_put; u < ch->first_put + ch->nputs; u++) {
            const wsync_tput_t *pu = &np->puts[u];
            uint64_t d;
            if (!t->have[u])
                return wsync_error(WSYNC_ERR_PEER, "trainer rank %d sent no digest for put %zu of the node plan",
                                   pu->src_rank, u);
            d = wsync_digest_final(t->sum[u], pu->len, pu->dst_off);
            if (d != t->digest[u])
                return mismatch(t, p, tl, u, d);
        }
    }
    return WSYNC_OK;
}

void recv_tputs_end(recv_tputs_t *t)
{
    free(t->state);
    free(t->sum);
    free(t->digest);
    free(t->have);
    free(t->order);
    memset(t, 0, sizeof(*t));
}
