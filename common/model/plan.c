/* plan.c: pieces (chunk x owned extent), per-rank send lists, landing bytes. */
#include "common/model/plan.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

typedef struct ext_ref {
    uint64_t offset, len;
    int rank;
} ext_ref_t;

static int cmp_ref(const void *a, const void *b)
{
    const ext_ref_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void wsync_plan_free(wsync_plan_t *p)
{
    int r;
    if (p == NULL)
        return;
    for (r = 0; p->rank_pieces && r < p->world; r++)
        free(p->rank_pieces[r]);
    free(p->rank_pieces);
    free(p->rank_npieces);
    free(p->chunk_first);
    free(p->pieces);
    free(p);
}

wsync_status_t wsync_plan_build(const wsync_layout_t *l, uint64_t chunk_size, wsync_plan_t **out)
{
    wsync_plan_t *p;
    ext_ref_t *refs;
    size_t nrefs = 0, i, cap = 0, *fill;
    uint64_t nchunks;
    uint32_t c;
    int r;

    /* Pieces start on 256-byte tensor boundaries and chunks below a page cost
     * more in signalling than they move. */
    if (chunk_size < 4096)
        return wsync_error(WSYNC_ERR_INVALID, "chunk size %llu is too small: use at least 4096 bytes (4K)",
                           (unsigned long long)chunk_size);
    if (chunk_size % WSYNC_ALIGN)
        return wsync_error(WSYNC_ERR_INVALID, "chunk size %llu is not a multiple of %d: use e.g. %llu",
                           (unsigned long long)chunk_size, WSYNC_ALIGN,
                           (unsigned long long)(chunk_size / WSYNC_ALIGN * WSYNC_ALIGN));
    nchunks = (l->image_size + chunk_size - 1) / chunk_size;
    if (nchunks > UINT32_MAX / 2)
        return wsync_error(WSYNC_ERR_INVALID, "chunk size %llu gives too many chunks for a %llu-byte image",
                           (unsigned long long)chunk_size, (unsigned long long)l->image_size);
    for (r = 0; r < l->world; r++)
        nrefs += l->nextents[r];
    refs = calloc(nrefs ? nrefs : 1, sizeof(*refs));
    p = calloc(1, sizeof(*p));
    if (refs == NULL || p == NULL) {
        free(refs);
        free(p);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (r = 0, i = 0; r < l->world; r++) {
        size_t k;
        for (k = 0; k < l->nextents[r]; k++)
            refs[i++] = (ext_ref_t){l->extents[r][k].offset, l->extents[r][k].len, r};
    }
    qsort(refs, nrefs, sizeof(*refs), cmp_ref);
    p->image_size = l->image_size;
    p->chunk_size = chunk_size;
    p->nchunks = (uint32_t)nchunks;
    p->world = l->world;
    p->chunk_first = calloc(nchunks + 1, sizeof(*p->chunk_first));
    p->rank_npieces = calloc((size_t)l->world, sizeof(*p->rank_npieces));
    p->rank_pieces = calloc((size_t)l->world, sizeof(*p->rank_pieces));
    fill = calloc((size_t)l->world, sizeof(*fill));
    if (!p->chunk_first || !p->rank_npieces || !p->rank_pieces || !fill)
        goto nomem;
    /* Cut every extent at chunk boundaries; extents are in offset order, so
     * pieces come out sorted by offset and chunk. */
    for (i = 0; i < nrefs; i++) {
        uint64_t off = refs[i].offset, end = refs[i].offset + refs[i].len;
        while (off < end) {
            uint64_t cend = (off / chunk_size + 1) * chunk_size;
            uint64_t len = (cend < end ? cend : end) - off;
            if (p->npieces == cap) {
                size_t nc = cap ? cap * 2 : 64;
                wsync_piece_t *np = realloc(p->pieces, nc * sizeof(*np));
                if (np == NULL)
                    goto nomem;
                p->pieces = np;
                cap = nc;
            }
            p->pieces[p->npieces] = (wsync_piece_t){(uint32_t)p->npieces, (uint32_t)(off / chunk_size),
                                                    refs[i].rank, off, len};
            p->rank_npieces[refs[i].rank]++;
            p->npieces++;
            off += len;
        }
    }
    for (i = 0, c = 0; c <= p->nchunks; c++) {
        while (i < p->npieces && p->pieces[i].chunk < c)
            i++;
        p->chunk_first[c] = (uint32_t)i;
    }
    for (r = 0; r < l->world; r++) {
        p->rank_pieces[r] = calloc(p->rank_npieces[r] ? p->rank_npieces[r] : 1, sizeof(uint32_t));
        if (p->rank_pieces[r] == NULL)
            goto nomem;
    }
    for (i = 0; i < p->npieces; i++) {
        r = p->pieces[i].src_rank;
        p->rank_pieces[r][fill[r]++] = (uint32_t)i;
    }
    free(fill);
    free(refs);
    *out = p;
    return WSYNC_OK;
nomem:
    free(fill);
    free(refs);
    wsync_plan_free(p);
    return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
}

uint64_t wsync_plan_rank_send_bytes(const wsync_plan_t *p, int rank)
{
    uint64_t b = 0;
    size_t i;
    for (i = 0; i < p->rank_npieces[rank]; i++)
        b += p->pieces[p->rank_pieces[rank][i]].len;
    return b;
}

uint64_t wsync_plan_land_bytes(const wsync_plan_t *p, int local_rank, int local_ranks)
{
    uint64_t b = 0;
    size_t i;
    for (i = 0; i < p->npieces; i++)
        if (wsync_plan_land_rank(p, p->pieces[i].chunk, local_ranks) == local_rank)
            b += p->pieces[i].len;
    return b;
}
