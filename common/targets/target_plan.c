/* target_plan.c: the plan of one engine node over its ranks' targets: cells
 * (target_cells.c) cut at source chunks into this plan's chunks, landed on one
 * holder each, sent as puts cut at trainer extents, fanned out as copies. */
#include <string.h>

#include "common/targets/target_plan_internal.h"

typedef struct ext_ref {
    uint64_t offset, len;
    int rank;
    uint32_t idx; /* global extent index: puts never span two extents */
} ext_ref_t;

/* A cell cut at one source chunk. */
typedef struct sub {
    size_t cell;
    uint32_t chunk; /* source chunk */
    uint32_t unit;  /* this plan's chunk */
    tp_sub_t s;
    uint64_t src;
} sub_t;

/* A part of a sub that one trainer extent owns: becomes (part of) a put. */
typedef struct frag {
    uint32_t unit;
    int trainer;
    uint32_t ext;
    size_t cell;
    uint64_t i, j;     /* its first byte: row i, byte j of the cell */
    uint64_t dst, len; /* in the landing rank's image, once landing is known */
    wsync_run2d_t run; /* dst_off: absolute in the landing rank's image */
} frag_t;

typedef struct unit {
    uint32_t src_chunk, set;
    int land;
    uint64_t bytes;
} unit_t;

typedef struct build {
    const wsync_node_plan_t *np;
    tp_cells_t cells;
    sub_t *subs;
    size_t nsubs, capsubs;
    unit_t *units;
    size_t nunits, capunits;
    frag_t *frags;
    size_t nfrags, capfrags;
    frag_t *pf; /* frags placed in the landing rank's image, split where not contiguous there */
    size_t npf, cappf;
    wsync_tcopy_t *copies;
    size_t ncopies, capcopies;
    ext_ref_t *ext;
    size_t next;
} build_t;

static int cmp_ext(const void *a, const void *b)
{
    const ext_ref_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_sub(const void *a, const void *b)
{
    const sub_t *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->cell < y->cell ? -1 : x->cell > y->cell; /* holders apart: two ranks' cells of the same bytes */
}

static int cmp_frag(const void *a, const void *b)
{
    const frag_t *x = a, *y = b;
    if (x->unit != y->unit)
        return x->unit < y->unit ? -1 : 1;
    return x->dst < y->dst ? -1 : x->dst > y->dst;
}

static int cmp_frag_src(const void *a, const void *b)
{
    const frag_t *x = a, *y = b;
    if (x->unit != y->unit)
        return x->unit < y->unit ? -1 : 1;
    return x->run.src_off < y->run.src_off ? -1 : x->run.src_off > y->run.src_off;
}

static int cmp_copy(const void *a, const void *b)
{
    const wsync_tcopy_t *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    if (x->to_rank != y->to_rank)
        return x->to_rank < y->to_rank ? -1 : 1;
    if (x->from_off != y->from_off)
        return x->from_off < y->from_off ? -1 : 1;
    return x->to_off < y->to_off ? -1 : x->to_off > y->to_off;
}

/* Every rank's runs as needs. Targets repeated by pointer are expanded once. */
static wsync_status_t collect_needs(const wsync_manifest_t *m, const wsync_layout_t *layout, int L,
                                    const wsync_target_t *const *targets, uint64_t cs, tp_need_t **needs_p,
                                    size_t *n_p)
{
    tp_need_t *needs = NULL;
    size_t n = 0, cap = 0, k;
    wsync_run2d_t *runs = NULL;
    size_t nruns = 0;
    const wsync_target_t *have = NULL;
    wsync_status_t st = WSYNC_OK;
    int r;

    for (r = 0; r < L && st == WSYNC_OK; r++) {
        if (targets[r] == NULL) {
            st = wsync_error(WSYNC_ERR_INVALID, "node plan: local rank %d has no target", r);
            break;
        }
        if (targets[r] != have) {
            free(runs);
            runs = NULL;
            have = NULL;
            st = wsync_target_wire_runs(targets[r], m, layout, &runs, &nruns, NULL, NULL, NULL);
            if (st != WSYNC_OK)
                break;
            have = targets[r];
        }
        for (k = 0; k < nruns; k++) {
            const wsync_run2d_t *u = &runs[k];
            uint64_t end = u->src_off + (u->rows - 1) * u->src_stride + u->row_bytes;
            tp_need_t nd = {u->src_off, u->rows > 1 ? u->src_stride : 0, u->row_bytes, u->rows, u->dst_off, r,
                            (uint32_t)n};
            if (end / cs > UINT32_MAX / 2) {
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "node plan: local rank %d's target reads byte %llu (FP8 blocks are addressed "
                                 "past "
                                 "the image): raise the chunk size",
                                 r, (unsigned long long)end);
                break;
            }
            if (end > m->image_size && !wsync_fp8_is_quantized(m, u->src_off)) {
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "node plan: local rank %d's target reads past the image "
                                 "(%llu > %llu): it was made for another manifest",
                                 r, (unsigned long long)end, (unsigned long long)m->image_size);
                break;
            }
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 256;
                tp_need_t *nn = realloc(needs, nc * sizeof(*nn));
                if (nn == NULL) {
                    st = wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
                    break;
                }
                needs = nn;
                cap = nc;
            }
            needs[n++] = nd;
        }
    }
    free(runs);
    if (st != WSYNC_OK) {
        free(needs);
        return st;
    }
    *needs_p = needs;
    *n_p = n;
    return WSYNC_OK;
}

static wsync_status_t push_ext(build_t *b, size_t *cap, uint64_t off, uint64_t len, int rank)
{
    ext_ref_t e = {off, len, rank, (uint32_t)b->next};
    TP_PUSH(b->ext, b->next, *cap, e);
    return WSYNC_OK;
}

/* The quantized spaces' extents (fp8_wire.h): a band run's codes and its
 * scales are each one extent of the rank that holds its source rows (of a
 * band that ranks share, each part's codes, the scales with the first). The
 * plan keeps the (tensor, spec) pairs for the trainer. */
static wsync_status_t fp8_extents(build_t *b, const wsync_manifest_t *m, const wsync_layout_t *layout, int L,
                                  const wsync_target_t *const *targets, wsync_node_plan_t *np)
{
    size_t u, k, cap = b->next + 1, n = 0, bcap = 0;
    wsync_fp8_exts_t *x = NULL;
    wsync_fp8_brun_t *br = NULL;
    wsync_status_t st;
    WSYNC_CHECK(wsync_fp8_uses(m, targets, (size_t)L, &np->fp8, &np->nfp8));
    if (np->nfp8 == 0)
        return WSYNC_OK;
    WSYNC_CHECK(wsync_fp8_exts_make(layout, &x));
    for (u = 0, st = WSYNC_OK; u < np->nfp8 && st == WSYNC_OK; u++)
        st = wsync_fp8_bruns(m, x, &np->fp8[u], -1, &br, &n, &bcap);
    for (k = 0; st == WSYNC_OK && k < n; k++) {
        st = push_ext(b, &cap, br[k].q_off, br[k].q_len, br[k].rank);
        if (st == WSYNC_OK && br[k].s_len > 0) /* a band's part without its scales: s_len 0 */
            st = push_ext(b, &cap, br[k].s_off, br[k].s_len, br[k].rank);
    }
    free(br);
    wsync_fp8_exts_free(x);
    return st;
}

/* Cells cut at source chunk boundaries, sorted by (source chunk, src), each
 * given its unit: the first (chunk, holder set) seen opens a unit. */
static wsync_status_t cut_chunks(build_t *b, uint64_t cs)
{
    uint32_t *stamp, *unit_of;
    size_t k;

    for (k = 0; k < b->cells.n; k++) {
        const tp_cell_t *c = &b->cells.cells[k];
        uint64_t a = c->src, e = c->src + (c->rows - 1) * c->stride + c->width, ch;
        for (ch = a / cs; ch * cs < e; ch++) {
            tp_sub_t out[3];
            int n = tp_cut(c->src, c->stride, c->width, c->rows, ch * cs, (ch + 1) * cs, out), i;
            for (i = 0; i < n; i++) {
                sub_t s = {k, (uint32_t)ch, 0, out[i], c->src + out[i].i * c->stride + out[i].j};
                TP_PUSH(b->subs, b->nsubs, b->capsubs, s);
            }
        }
    }
    if (b->nsubs > 1)
        qsort(b->subs, b->nsubs, sizeof(*b->subs), cmp_sub);
    stamp = calloc(b->cells.nsets + 1, sizeof(*stamp));
    unit_of = calloc(b->cells.nsets + 1, sizeof(*unit_of));
    if (stamp == NULL || unit_of == NULL) {
        free(stamp);
        free(unit_of);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
    }
    for (k = 0; k < b->nsubs; k++) {
        sub_t *s = &b->subs[k];
        uint32_t set = b->cells.cells[s->cell].set;
        if (stamp[set] != s->chunk + 1) {
            unit_t u = {s->chunk, set, -1, 0};
            if (b->nunits == b->capunits) {
                size_t nc = b->capunits ? b->capunits * 2 : 64;
                unit_t *nu = realloc(b->units, nc * sizeof(*nu));
                if (nu == NULL) {
                    free(stamp);
                    free(unit_of);
                    return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
                }
                b->units = nu;
                b->capunits = nc;
            }
            stamp[set] = s->chunk + 1;
            unit_of[set] = (uint32_t)b->nunits;
            b->units[b->nunits++] = u;
        }
        s->unit = unit_of[set];
    }
    free(stamp);
    free(unit_of);
    if (b->nunits > UINT32_MAX / 2)
        return wsync_error(WSYNC_ERR_INVALID, "node plan: %zu chunks: raise the chunk size", b->nunits);
    return WSYNC_OK;
}

static int set_has(const tp_cells_t *c, uint32_t set, int rank)
{
    size_t k;
    for (k = 0; k < c->set_len[set]; k++)
        if (c->set_ranks[c->set_first[set] + k] == rank)
            return 1;
    return 0;
}

/* Land rank of each unit, in unit order: the colocated rank when the unit's
 * dominant trainer rank shares a GPU with holders of it, else the least
 * loaded holder, ties to the first from source chunk mod L on (which, when
 * every unit is a whole equal chunk every rank holds, is chunk mod L). */
static wsync_status_t choose_landing(build_t *b, const wsync_land_hint_t *hint, uint64_t *load, int world)
{
    const int L = b->np->local_ranks;
    uint64_t *tb = calloc((size_t)world, sizeof(*tb));
    int *cand = malloc((size_t)L * sizeof(*cand));
    size_t f = 0, u;

    if (tb == NULL || cand == NULL) {
        free(tb);
        free(cand);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
    }
    for (u = 0; u < b->nunits; u++) {
        unit_t *un = &b->units[u];
        int best = -1, land = -1, k;
        size_t i;
        memset(tb, 0, (size_t)world * sizeof(*tb));
        for (; f < b->nfrags && b->frags[f].unit == u; f++) {
            int t = b->frags[f].trainer;
            tb[t] += b->frags[f].len;
            un->bytes += b->frags[f].len;
            if (best < 0 || tb[t] > tb[best])
                best = t;
        }
        if (hint != NULL && best >= 0 && hint->ncolo[best] > 0) {
            int nc = 0;
            for (k = 0; k < hint->ncolo[best]; k++)
                if (set_has(&b->cells, un->set, hint->colo[best * L + k]))
                    cand[nc++] = hint->colo[best * L + k];
            if (nc > 0)
                land = cand[u % (size_t)nc];
        }
        if (land < 0) {
            const int start = (int)(un->src_chunk % (uint32_t)L);
            const int *rk = b->cells.set_ranks + b->cells.set_first[un->set];
            int bestkey = 0;
            for (i = 0; i < b->cells.set_len[un->set]; i++) {
                int key = (rk[i] - start + L) % L;
                if (land < 0 || load[rk[i]] < load[land] || (load[rk[i]] == load[land] && key < bestkey)) {
                    land = rk[i];
                    bestkey = key;
                }
            }
        }
        un->land = land;
        load[land] += un->bytes;
    }
    free(tb);
    free(cand);
    return WSYNC_OK;
}

/* Subs cut at trainer extents: frags in (unit, src) order. */
static wsync_status_t cut_extents(build_t *b)
{
    size_t k;
    for (k = 0; k < b->nsubs; k++) {
        const sub_t *s = &b->subs[k];
        const tp_cell_t *c = &b->cells.cells[s->cell];
        uint64_t a = s->src, e = s->src + (s->s.rows - 1) * c->stride + s->s.w;
        size_t lo = 0, hi = b->next;
        while (lo < hi) { /* the first extent ending after a */
            size_t mid = (lo + hi) / 2;
            if (b->ext[mid].offset + b->ext[mid].len <= a)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < b->next && b->ext[lo].offset < e; lo++) {
            tp_sub_t out[3];
            int n = tp_cut(s->src, c->stride, s->s.w, s->s.rows, b->ext[lo].offset,
                           b->ext[lo].offset + b->ext[lo].len, out),
                i;
            for (i = 0; i < n; i++) {
                uint64_t fi = s->s.i + out[i].i, fj = s->s.j + out[i].j;
                frag_t fr = {s->unit,
                             b->ext[lo].rank,
                             b->ext[lo].idx,
                             s->cell,
                             fi,
                             fj,
                             0,
                             out[i].w * out[i].rows,
                             {c->src + fi * c->stride + fj, out[i].rows > 1 ? c->stride : 0, out[i].w, out[i].rows,
                              0}};
                TP_PUSH(b->frags, b->nfrags, b->capfrags, fr);
            }
        }
    }
    return WSYNC_OK;
}

/* The occurrence a cell lands in on rank r: its first on r. */
static const tp_occ_t *land_occ(const tp_cells_t *cs, size_t cell, int r)
{
    const tp_cell_t *c = &cs->cells[cell];
    size_t k;
    for (k = 0; k < c->nocc; k++)
        if (cs->occ[c->first_occ + k].rank == r)
            return &cs->occ[c->first_occ + k];
    return NULL;
}

/* Places frags in their landing rank's image; a frag whose rows are not back
 * to back there becomes a frag per row. */
static wsync_status_t place_frags(build_t *b)
{
    size_t k;
    uint64_t i;
    for (k = 0; k < b->nfrags; k++) {
        frag_t f = b->frags[k];
        const tp_occ_t *o = land_occ(&b->cells, f.cell, b->units[f.unit].land);
        if (o == NULL)
            return wsync_error(WSYNC_ERR_INTERNAL, "node plan: a chunk landed on a rank that does not hold it");
        if (f.run.rows == 1 || o->dpitch == f.run.row_bytes) {
            f.dst = o->dst + f.i * o->dpitch + f.j;
            TP_PUSH(b->pf, b->npf, b->cappf, f);
            continue;
        }
        for (i = 0; i < f.run.rows; i++) {
            frag_t r = f;
            r.i = f.i + i;
            r.dst = o->dst + r.i * o->dpitch + f.j;
            r.len = f.run.row_bytes;
            r.run.src_off = f.run.src_off + i * f.run.src_stride;
            r.run.src_stride = 0;
            r.run.rows = 1;
            TP_PUSH(b->pf, b->npf, b->cappf, r);
        }
    }
    return WSYNC_OK;
}

/* Copies for every holder but the landing occurrence, per sub (a sub lies in
 * one unit); a row per copy where rows are not back to back on both sides. */
static wsync_status_t make_copies(build_t *b)
{
    size_t k, q;
    uint64_t i;
    for (k = 0; k < b->nsubs; k++) {
        const sub_t *s = &b->subs[k];
        const tp_cell_t *c = &b->cells.cells[s->cell];
        const int land = b->units[s->unit].land;
        const tp_occ_t *lo = land_occ(&b->cells, s->cell, land);
        for (q = 0; q < c->nocc; q++) {
            const tp_occ_t *o = &b->cells.occ[c->first_occ + q];
            int whole = s->s.rows == 1 || (lo->dpitch == s->s.w && o->dpitch == s->s.w);
            if (o == lo)
                continue;
            for (i = 0; i < (whole ? 1 : s->s.rows); i++) {
                wsync_tcopy_t cp = {s->unit,
                                    land,
                                    lo->dst + (s->s.i + i) * lo->dpitch + s->s.j,
                                    o->rank,
                                    o->dst + (s->s.i + i) * o->dpitch + s->s.j,
                                    whole ? s->s.w * s->s.rows : s->s.w};
                TP_PUSH(b->copies, b->ncopies, b->capcopies, cp);
            }
        }
    }
    return WSYNC_OK;
}

/* Merges adjacent runs of a put when the source continues them. */
static int run_extends(wsync_run2d_t *last, const wsync_run2d_t *r)
{
    if (last->rows == 1 && r->rows == 1 && last->src_off + last->row_bytes == r->src_off) {
        last->row_bytes += r->row_bytes;
        return 1;
    }
    if (last->rows > 1 && r->rows >= 1 && r->row_bytes == last->row_bytes &&
        (r->rows == 1 || r->src_stride == last->src_stride) &&
        r->src_off == last->src_off + last->rows * last->src_stride) {
        last->rows += r->rows;
        return 1;
    }
    return 0;
}

/* Puts from the placed frags (sorted by unit, dst): consecutive frags of one
 * trainer extent, back to back in the destination, are one put. */
static wsync_status_t make_puts(build_t *b, wsync_node_plan_t *np)
{
    size_t k, cap = 0, rcap = 0;
    if (b->npf > 1)
        qsort(b->pf, b->npf, sizeof(*b->pf), cmp_frag);
    for (k = 0; k < b->npf; k++) {
        const frag_t *f = &b->pf[k];
        wsync_tput_t *p = np->nputs ? &np->puts[np->nputs - 1] : NULL;
        wsync_run2d_t r = f->run;
        if (p == NULL || p->chunk != f->unit || p->src_rank != f->trainer || b->pf[k - 1].ext != f->ext ||
            p->dst_off + p->len != f->dst) {
            wsync_tput_t np_ = {(uint32_t)np->nputs, f->trainer, b->units[f->unit].land, f->unit, f->dst, 0,
                                np->nruns,           0};
            TP_PUSH(np->puts, np->nputs, cap, np_);
            p = &np->puts[np->nputs - 1];
        }
        r.dst_off = p->len;
        /* no run spans two cells (tp_runs_collapse: the receiver's tensors
         * cut puts there, between the tasks of their gather) */
        if (p->nruns == 0 || b->pf[k - 1].cell != f->cell || !run_extends(&np->runs[np->nruns - 1], &r)) {
            TP_PUSH(np->runs, np->nruns, rcap, r);
            p->nruns++;
        }
        p->len += f->len;
    }
    tp_runs_collapse(np);
    return WSYNC_OK;
}

static wsync_status_t merge_copies(build_t *b, wsync_node_plan_t *np)
{
    size_t k, n = 0;
    if (b->ncopies > 1)
        qsort(b->copies, b->ncopies, sizeof(*b->copies), cmp_copy);
    for (k = 0; k < b->ncopies; k++) {
        const wsync_tcopy_t *c = &b->copies[k];
        wsync_tcopy_t *l = n ? &b->copies[n - 1] : NULL;
        if (l != NULL && l->chunk == c->chunk && l->to_rank == c->to_rank && l->from_off + l->len == c->from_off &&
            l->to_off + l->len == c->to_off)
            l->len += c->len;
        else
            b->copies[n++] = *c;
    }
    np->copies = b->copies;
    np->ncopies = n;
    b->copies = NULL;
    return WSYNC_OK;
}

/* The plan's chunks (where each lands, which source chunk it is), then its
 * indexes (target_plan_index.c). */
static wsync_status_t finish(build_t *b, wsync_node_plan_t *np)
{
    size_t k;
    np->nchunks = (uint32_t)b->nunits;
    np->chunks = calloc(b->nunits + 1, sizeof(*np->chunks));
    if (np->chunks == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
    for (k = 0; k < b->nunits; k++) {
        np->chunks[k].land_rank = b->units[k].land;
        np->chunks[k].src_chunk = b->units[k].src_chunk;
    }
    return tp_index(np);
}

wsync_status_t wsync_node_plan_build(const wsync_manifest_t *m, const wsync_layout_t *layout, int local_ranks,
                                     const wsync_target_t *const *targets, uint64_t chunk_bytes,
                                     const wsync_land_hint_t *hint, wsync_node_plan_t **out)
{
    build_t b;
    wsync_node_plan_t *np;
    tp_need_t *needs = NULL;
    uint64_t *load = NULL;
    size_t nneeds = 0, k, e;
    wsync_status_t st = WSYNC_OK;
    int r;

    if (local_ranks < 1 || local_ranks > 4096)
        return wsync_error(WSYNC_ERR_INVALID, "node plan: %d local ranks (1 to 4096)", local_ranks);
    if (chunk_bytes < 4096 || chunk_bytes % WSYNC_ALIGN)
        return wsync_error(WSYNC_ERR_INVALID, "chunk size %llu: use at least 4096 bytes, a multiple of %d",
                           (unsigned long long)chunk_bytes, WSYNC_ALIGN);
    if (layout->image_size != m->image_size)
        return wsync_error(WSYNC_ERR_INVALID, "node plan: the trainer layout covers %llu bytes, the image has %llu",
                           (unsigned long long)layout->image_size, (unsigned long long)m->image_size);
    if ((m->image_size + chunk_bytes - 1) / chunk_bytes > UINT32_MAX / 2)
        return wsync_error(WSYNC_ERR_INVALID, "chunk size %llu gives too many chunks for a %llu-byte image",
                           (unsigned long long)chunk_bytes, (unsigned long long)m->image_size);
    memset(&b, 0, sizeof(b));
    np = calloc(1, sizeof(*np));
    WSYNC_CHECK_ALLOC(np);
    b.np = np;
    np->local_ranks = local_ranks;
    np->world = layout->world;
    np->chunk_bytes = chunk_bytes;
    np->land_bytes = calloc((size_t)local_ranks, sizeof(*np->land_bytes));
    np->holds_bytes = calloc((size_t)local_ranks, sizeof(*np->holds_bytes));
    load = calloc((size_t)local_ranks, sizeof(*load));
    for (r = 0; r < layout->world; r++)
        b.next += layout->nextents[r];
    b.ext = calloc(b.next + 1, sizeof(*b.ext));
    if (np->land_bytes == NULL || np->holds_bytes == NULL || load == NULL || b.ext == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
        goto out;
    }
    for (r = 0, k = 0; r < layout->world; r++)
        for (e = 0; e < layout->nextents[r]; e++, k++)
            b.ext[k] = (ext_ref_t){layout->extents[r][e].offset, layout->extents[r][e].len, r, (uint32_t)k};
    WSYNC_CHECK_GOTO(collect_needs(m, layout, local_ranks, targets, chunk_bytes, &needs, &nneeds), st, out);
    WSYNC_CHECK_GOTO(fp8_extents(&b, m, layout, local_ranks, targets, np), st, out);
    if (b.next > 1)
        qsort(b.ext, b.next, sizeof(*b.ext), cmp_ext);
    for (r = 0; r < local_ranks && targets[r]->whole_image; r++) /* identity targets: landing.c's sharing */
        ;
    WSYNC_CHECK_GOTO(tp_cells_build(needs, nneeds, r < local_ranks && tp_one_gpu(hint, layout->world, local_ranks),
                                    &b.cells),
                     st, out);
    WSYNC_CHECK_GOTO(cut_chunks(&b, chunk_bytes), st, out);
    WSYNC_CHECK_GOTO(cut_extents(&b), st, out);
    if (b.nfrags > 1)
        qsort(b.frags, b.nfrags, sizeof(*b.frags), cmp_frag_src);
    WSYNC_CHECK_GOTO(choose_landing(&b, hint, load, layout->world), st, out);
    WSYNC_CHECK_GOTO(place_frags(&b), st, out);
    WSYNC_CHECK_GOTO(make_copies(&b), st, out);
    WSYNC_CHECK_GOTO(make_puts(&b, np), st, out);
    WSYNC_CHECK_GOTO(merge_copies(&b, np), st, out);
    WSYNC_CHECK_GOTO(finish(&b, np), st, out);
out:
    free(needs);
    free(load);
    free(b.ext);
    free(b.subs);
    free(b.units);
    free(b.frags);
    free(b.pf);
    free(b.copies);
    tp_cells_free(&b.cells);
    if (st != WSYNC_OK) {
        wsync_node_plan_free(np);
        return st;
    }
    *out = np;
    return WSYNC_OK;
}
