/* fetch_identity.c: a node of identity targets (every rank's target
 * the whole image): told apart from other nodes of targets, and its chunks
 * verified one by one against the record's piece digests (chunk_verify.h), in
 * place with the caller's tensors as groups of jobs (chunk_groups.h);
 * fetch.c calls these where fetch_t.identity is set (always for
 * the whole image). */
#include "common/base/checks.h"
#include "engine_side/fetch_internal.h"

/* 1 if this node's plan is the whole image's (every target the identity,
 * each put the record's piece of its id, each copy a whole chunk at its own
 * offset) and this rank's image has no holes: then each chunk is verified
 * as it comes, against the record (fetch_t.identity). */
int fetch_identity_node(const fetch_t *f)
{
    const wsync_plan_t *plan = f->p.sl->plan;
    const wsync_node_plan_t *np = f->np;
    const wsync_receiver_t *r = f->p.r;
    size_t i;
    int k;
    if (f->tl == NULL) /* the whole image itself: its node plan is built as the identity (fetch_whole.c) */
        return 1;
    if (r->images.gpu_sparse || np->nputs != plan->npieces || np->nchunks != plan->nchunks)
        return 0;
    for (k = 0; k < f->tl->L; k++)
        if (!f->tl->tg[k]->whole_image)
            return 0;
    for (i = 0; i < np->nputs; i++) {
        const wsync_tput_t *u = &np->puts[i];
        const wsync_piece_t *pc = &plan->pieces[i];
        if (u->dst_off != pc->offset || u->len != pc->len || u->src_rank != pc->src_rank || u->chunk != pc->chunk)
            return 0;
    }
    for (i = 0; i < np->ncopies; i++) {
        const wsync_tcopy_t *cp = &np->copies[i];
        const wsync_tchunk_t *ch = &np->chunks[cp->chunk];
        const wsync_tput_t *lastp;
        if (ch->nputs == 0)
            return 0;
        lastp = &np->puts[ch->first_put + ch->nputs - 1];
        if (cp->from_off != cp->to_off || cp->from_off != np->puts[ch->first_put].dst_off ||
            lastp->dst_off + lastp->len > cp->from_off + cp->len)
            return 0;
    }
    return 1;
}

/* An identity node's chunk c: image bytes [*off, *off + the length returned). */
static uint64_t identity_chunk(const fetch_t *f, uint32_t c, uint64_t *off)
{
    const wsync_plan_t *plan = f->p.sl->plan;
    *off = (uint64_t)c * plan->chunk_size;
    return *off + plan->chunk_size > plan->image_size ? plan->image_size - *off : plan->chunk_size;
}

/* An identity node in place with the caller's tensors: chunk c written
 * through and digested as a group of jobs (chunk_groups.h), from the image
 * (it landed here) or from rank `from`'s window. */
wsync_status_t fetch_identity_group(fetch_t *f, uint32_t c, int from)
{
    const int landed = from == f->p.me;
    const char *src = landed ? f->image : f->p.r->images.peers[from][f->p.slot].ptr;
    uint64_t off, len = identity_chunk(f, c, &off);
    return recv_groups_start(&f->grp, &f->p, &f->ver, f->image, src, off, len, c, landed, landed && f->ndirect > 0);
}

/* An identity node's chunk c copied in at once: its pieces digested, then
 * compared (chunk_verify.h). */
wsync_status_t fetch_identity_copied(fetch_t *f, uint32_t c)
{
    const size_t n = recv_verify_ranges(&f->p, &f->ver, c, f->image);
    WSYNC_CHECK(f->p.r->mem->digest_many(f->ver.rg, n, f->ver.sums));
    return recv_verify_summed(&f->p, &f->ver, c, 0, f->ver.sums);
}
