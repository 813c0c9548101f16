/* fetch_copy.c: the copies of a node of targets inside one engine
 * rank, and out of another rank's window into it (fetch.c calls
 * them; the fan-out ring is chunk_fanout.h's): where a sparse GPU image's
 * bytes lie, copies around its holes, and its fan-out window; and a sparse
 * image's pages freed by what the node plan puts and copies (release.h). */
#include "common/base/checks.h"
#include "engine_side/fetch_internal.h"

char *fetch_mine_at(const fetch_t *f, uint64_t off, uint64_t len, uint64_t *n)
{
    const size_t lo = recv_span_after(f->direct, f->ndirect, off);
    if (lo < f->ndirect && f->direct[lo].off <= off) {
        const wsync_redirect_t *d = &f->direct[lo];
        *n = d->off + d->len - off < len ? d->off + d->len - off : len;
        return (char *)d->ptr + (off - d->off);
    }
    *n = lo < f->ndirect && f->direct[lo].off - off < len ? f->direct[lo].off - off : len;
    return f->image + off;
}

/* A sparse GPU image: `len` bytes to this rank's image offset `to` from
 * `src` (another rank's window), or, src NULL, from this rank's own offset
 * `from`; each side where fetch_mine_at says it lies. */
static wsync_status_t copy_sparse(fetch_t *f, uint64_t to, const char *src, uint64_t from, uint64_t len)
{
    while (len > 0) {
        uint64_t n, m;
        char *dst = fetch_mine_at(f, to, len, &n);
        const char *s = src;
        if (src == NULL) {
            s = fetch_mine_at(f, from, n, &m);
            n = m;
        }
        WSYNC_CHECK(f->p.r->mem->copy(dst, s, n));
        to += n;
        from += n;
        if (src)
            src += n;
        len -= n;
    }
    return WSYNC_OK;
}

/* How many copies of chunk c into this rank come from rank `from`. */
size_t fetch_copies_from(const fetch_t *f, uint32_t c, int from)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k, n = 0;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++)
        n += f->np->copies[k].to_rank == f->p.me && f->np->copies[k].from_rank == from;
    return n;
}

/* The copies of chunk c into this rank that come from rank `from` (out of
 * its fan-out window when its image is a sparse GPU one; with one here,
 * straight into the caller's tensors): with `jobs`, queued on the fan-out
 * ring (chunk_fanout.h; it has room for all of them), else done now. */
wsync_status_t fetch_copy_chunk(fetch_t *f, uint32_t c, int from, int jobs, const wsync_digest_range_t *rg,
                                size_t nrg)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    const peer_map_t *pm = &f->p.r->images.peers[from][f->p.slot];
    const char *src = from == f->p.me ? f->image : pm->ptr;
    const int fan = from != f->p.me && pm->fan;
    size_t k, left = jobs ? fetch_copies_from(f, c, from) : 0;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        uint64_t at;
        if (cp->to_rank != f->p.me || cp->from_rank != from)
            continue;
        at = fan ? recv_fanmap_at(&f->tl->fan[from], cp->from_off) : cp->from_off;
        if (f->p.r->images.gpu_sparse)
            WSYNC_CHECK(copy_sparse(f, cp->to_off, from == f->p.me ? NULL : src + at, cp->from_off, cp->len));
        else if (jobs)
            WSYNC_CHECK(recv_fan_start(&f->fan, f->p.r->mem, c, --left == 0, f->image + cp->to_off, src + at,
                                       cp->len, rg, nrg));
        else
            WSYNC_CHECK(f->p.r->mem->copy(f->image + cp->to_off, src + at, cp->len));
    }
    return WSYNC_OK;
}

/* A sparse GPU image: the bytes of chunk c the other ranks copy out of this
 * one, into its fan-out window (what it exports), before c is marked landed. */
wsync_status_t fetch_fan_publish(fetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    char *fan = f->p.r->images.gpu_fan[f->p.slot].ptr;
    size_t k;
    for (k = ch->first_copy; f->p.r->images.gpu_sparse && k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        uint64_t off = cp->from_off, left = cp->len, n;
        char *dst;
        if (cp->from_rank != f->p.me || cp->to_rank == f->p.me)
            continue;
        dst = fan + recv_fanmap_at(&f->tl->fan[f->p.me], cp->from_off);
        for (; left > 0; off += n, dst += n, left -= n) {
            const char *s = fetch_mine_at(f, off, left, &n);
            WSYNC_CHECK(f->p.r->mem->copy(dst, s, n));
        }
    }
    return WSYNC_OK;
}

/* ---- release: the pages of a sparse image ---- */

/* How many other ranks copy bytes of chunk c out of this rank's image. */
static int chunk_readers(const fetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    uint64_t seen = 0;
    int n = 0;
    size_t k;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        if (cp->from_rank == f->p.me && cp->to_rank != f->p.me && !(seen >> cp->to_rank & 1)) {
            seen |= 1ULL << cp->to_rank;
            n++;
        }
    }
    return n;
}

/* Chunk c's bytes copied into this rank (written through already). */
void fetch_release_copied_in(const fetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_copy; f->rl.on && k < ch->first_copy + ch->ncopies; k++)
        if (f->np->copies[k].to_rank == f->p.me)
            recv_release_range(&f->rl, f->np->copies[k].to_off, f->np->copies[k].len);
}

/* Chunk c's puts that landed here (recv_release_poll's callback). */
void fetch_release_landed(void *arg, uint32_t c)
{
    const fetch_t *f = arg;
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_put; k < ch->first_put + ch->nputs; k++)
        if (f->np->puts[k].land_rank == f->p.me)
            recv_release_range(&f->rl, f->np->puts[k].dst_off, f->np->puts[k].len);
}

/* A chunk that landed here is complete: what was copied into this rank
 * goes now, what landed once every reader copied it. */
void fetch_landed_release(fetch_t *f, uint32_t c)
{
    fetch_release_copied_in(f, c);
    if (recv_release_landed(&f->rl, c, chunk_readers(f, c)))
        fetch_release_landed(f, c);
}
