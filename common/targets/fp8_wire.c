/* fp8_wire.c: FP8 destinations as runs over quantized source spaces, or as
 * source rows into the aux area where a trainer extent cuts an element of
 * a quantization band (fp8_wire.h). */
#include "common/targets/fp8_wire.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target_internal.h"

#define SPACE_ALIGN 4096ULL

typedef struct ext {
    uint64_t offset, len;
    int rank;
} ext_t;

static uint64_t space_len(const wsync_manifest_t *m)
{
    uint64_t a = (m->image_size + SPACE_ALIGN - 1) / SPACE_ALIGN * SPACE_ALIGN;
    return a ? a : SPACE_ALIGN;
}

wsync_status_t wsync_fp8_space(const wsync_manifest_t *m, const wsync_fp8_spec_t *spec, uint64_t *base)
{
    const uint64_t a = space_len(m);
    uint64_t k;
    if (spec->block_rows < 1 || spec->block_rows > 256 || spec->block_cols < 1 || spec->block_cols > 256)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "fp8: blocks of %d x %d: the node plan moves FP8 blocks of 1 to 256 rows and columns",
                           spec->block_rows, spec->block_cols);
    /* 128 x 128 (the common block) first: k 0 (fp32) and 1 (ue8m0). */
    k = (uint64_t)spec->form +
        2 * ((uint64_t)((spec->block_rows - 128) & 255) + 256 * (uint64_t)((spec->block_cols - 128) & 255));
    if (a > (UINT64_MAX / 4) / (k + 2))
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "fp8: a %llu-byte image is too large to address its FP8 blocks",
                           (unsigned long long)m->image_size);
    *base = a * (1 + k);
    return WSYNC_OK;
}

int wsync_fp8_is_quantized(const wsync_manifest_t *m, uint64_t off)
{
    return off >= m->image_size;
}

static int cmp_use(const void *a, const void *b)
{
    const wsync_fp8_use_t *x = a, *y = b;
    if (x->tensor != y->tensor)
        return x->tensor < y->tensor ? -1 : 1;
    if (x->spec.form != y->spec.form)
        return x->spec.form < y->spec.form ? -1 : 1;
    if (x->spec.block_rows != y->spec.block_rows)
        return x->spec.block_rows < y->spec.block_rows ? -1 : 1;
    return x->spec.block_cols < y->spec.block_cols ? -1 : x->spec.block_cols > y->spec.block_cols;
}

wsync_status_t wsync_fp8_uses(const wsync_manifest_t *m, const wsync_target_t *const *targets, size_t n,
                              wsync_fp8_use_t **uses, size_t *nuses)
{
    wsync_fp8_use_t *v = NULL;
    size_t cnt = 0, cap = 0, i, j, k, out = 0;
    (void)m;
    for (i = 0; i < n; i++) {
        const wsync_target_t *t = targets[i];
        if (i > 0 && targets[i - 1] == t)
            continue;
        for (j = 0; j < t->ndests; j++) {
            const wsync_dest_t *d = &t->dests[j];
            if (!d->is_fp8)
                continue;
            for (k = 0; k < d->nblocks; k++) {
                if (cnt == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    wsync_fp8_use_t *nv = realloc(v, nc * sizeof(*nv));
                    if (nv == NULL) {
                        free(v);
                        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                    }
                    v = nv;
                    cap = nc;
                }
                v[cnt].tensor = t->blocks[d->first_block + k].src;
                v[cnt++].spec = d->fp8;
            }
        }
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof(*v), cmp_use);
    for (i = 0; i < cnt; i++)
        if (out == 0 || cmp_use(&v[out - 1], &v[i]) != 0)
            v[out++] = v[i];
    *uses = v;
    *nuses = out;
    return WSYNC_OK;
}

static int cmp_ext(const void *a, const void *b)
{
    const ext_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

struct wsync_fp8_exts {
    ext_t *ex;
    size_t n;
};

static wsync_status_t sorted_extents(const wsync_layout_t *layout, ext_t **out, size_t *n);

wsync_status_t wsync_fp8_exts_make(const wsync_layout_t *layout, wsync_fp8_exts_t **out)
{
    wsync_fp8_exts_t *x = calloc(1, sizeof(*x));
    WSYNC_CHECK_ALLOC(x);
    if (sorted_extents(layout, &x->ex, &x->n) != WSYNC_OK) {
        free(x);
        return WSYNC_ERR_NOMEM;
    }
    *out = x;
    return WSYNC_OK;
}

void wsync_fp8_exts_free(wsync_fp8_exts_t *x)
{
    if (x == NULL)
        return;
    free(x->ex);
    free(x);
}

static wsync_status_t sorted_extents(const wsync_layout_t *layout, ext_t **out, size_t *n)
{
    size_t cnt = 0, e, k = 0;
    ext_t *v;
    int r;
    for (r = 0; r < layout->world; r++)
        cnt += layout->nextents[r];
    v = calloc(cnt + 1, sizeof(*v));
    WSYNC_CHECK_ALLOC(v);
    for (r = 0; r < layout->world; r++)
        for (e = 0; e < layout->nextents[r]; e++)
            v[k++] = (ext_t){layout->extents[r][e].offset, layout->extents[r][e].len, r};
    qsort(v, cnt, sizeof(*v), cmp_ext);
    *out = v;
    *n = cnt;
    return WSYNC_OK;
}

/* The first extent ending after a (n when none). */
static size_t ext_at(const ext_t *x, size_t n, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x[mid].offset + x[mid].len <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The extent holding all of [a, e), or -1. */
static long holder(const ext_t *x, size_t n, uint64_t a, uint64_t e)
{
    const size_t lo = ext_at(x, n, a);
    if (lo < n && x[lo].offset <= a && e <= x[lo].offset + x[lo].len && x[lo].len > 0)
        return (long)lo;
    return -1;
}

/* Extents [*k0, *k1) share [a, e) in parts of whole elements of es bytes,
 * back to back: 1, else 0 (a gap, or a cut inside an element). */
static int shared(const ext_t *x, size_t n, uint64_t a, uint64_t e, uint64_t es, size_t *k0, size_t *k1)
{
    size_t k = ext_at(x, n, a);
    uint64_t at = a;
    *k0 = k;
    for (; k < n && at < e; k++) {
        if (x[k].len == 0)
            continue;
        if (x[k].offset > at) /* a gap */
            return 0;
        at = x[k].offset + x[k].len;
        if (at < e && (at - a) % es != 0) /* it cuts an element */
            return 0;
    }
    *k1 = k;
    return at >= e;
}

unsigned wsync_fp8_elem_width(const wsync_manifest_t *m, uint64_t off)
{
    const uint64_t rel = off % space_len(m); /* the same offset in every spec's space */
    size_t lo = 0, hi = m->ntensors;
    const wsync_tensor_t *t;
    uint64_t es;
    while (lo < hi) { /* the last tensor starting at or before rel */
        size_t mid = lo + (hi - lo) / 2;
        if (m->tensors[mid].offset <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 1;
    t = &m->tensors[lo - 1];
    es = (uint64_t)wsync_dtype_bits(t->dtype) / 8;
    /* codes first, one byte per source element (padded to 16), then the scales */
    return es && rel - t->offset >= (t->size / es + 15) / 16 * 16 ? 4 : 1;
}

/* A source tensor's matrices, as the quantized space lays them out. */
typedef struct mat {
    uint64_t slices, rows, cols, es;
    uint64_t srows, scols;
    uint64_t q, s; /* the codes' and scales' offsets in the space */
} mat_t;

static wsync_status_t tensor_mat(const wsync_manifest_t *m, const wsync_fp8_use_t *u, mat_t *x)
{
    const wsync_tensor_t *t = &m->tensors[u->tensor];
    uint64_t base, end;
    int i;
    WSYNC_CHECK(wsync_fp8_space(m, &u->spec, &base));
    memset(x, 0, sizeof(*x));
    x->slices = 1;
    for (i = 0; i + 2 < t->ndim; i++)
        x->slices *= (uint64_t)t->shape[i];
    x->rows = (uint64_t)t->shape[t->ndim - 2];
    x->cols = (uint64_t)t->shape[t->ndim - 1];
    x->es = (uint64_t)wsync_dtype_bits(t->dtype) / 8;
    x->srows = wsync_fp8_scale_rows(&u->spec, x->rows);
    x->scols = wsync_fp8_scale_cols(&u->spec, x->cols);
    x->q = base + t->offset;
    x->s = x->q + (x->slices * x->rows * x->cols + 15) / 16 * 16;
    end = u->tensor + 1 < m->ntensors ? m->tensors[u->tensor + 1].offset : space_len(m);
    if (x->s + 4 * x->slices * x->srows * x->scols > base + end)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "fp8: tensor '%s': its %llu scales of %d x %d blocks do not fit the quantized space "
                           "(blocks this small are not moved quantized)",
                           t->name, (unsigned long long)(x->slices * x->srows * x->scols), u->spec.block_rows,
                           u->spec.block_cols);
    return WSYNC_OK;
}

/* Source bytes of band b of matrix sl: [*a, *e). */
static void band_bytes(const wsync_manifest_t *m, const wsync_fp8_use_t *u, const mat_t *x, uint64_t sl,
                       uint64_t b, uint64_t *a, uint64_t *e)
{
    const uint64_t br = (uint64_t)u->spec.block_rows;
    const uint64_t r0 = b * br, r1 = r0 + br < x->rows ? r0 + br : x->rows;
    *a = m->tensors[u->tensor].offset + ((sl * x->rows + r0) * x->cols) * x->es;
    *e = *a + (r1 - r0) * x->cols * x->es;
}

typedef struct bvec {
    wsync_fp8_brun_t *v;
    size_t n, cap;
} bvec_t;

static wsync_status_t bvec_push(bvec_t *bv, const wsync_fp8_brun_t *r)
{
    if (bv->n == bv->cap) {
        size_t nc = bv->cap ? bv->cap * 2 : 16;
        wsync_fp8_brun_t *nv = realloc(bv->v, nc * sizeof(*nv));
        WSYNC_CHECK_ALLOC(nv);
        bv->v = nv;
        bv->cap = nc;
    }
    bv->v[bv->n++] = *r;
    return WSYNC_OK;
}

/* The parts of band b of matrix sl (source bytes [a, e)) that extents share,
 * those of `rank` (-1: all); none when an extent cuts an element (the aux
 * path, fp8_wire.h). */
static wsync_status_t push_parts(const wsync_fp8_use_t *use, const mat_t *x, const ext_t *ex, size_t nex,
                                 uint64_t sl, uint64_t b, uint64_t a, uint64_t e, int rank, bvec_t *bv)
{
    const uint64_t br = (uint64_t)use->spec.block_rows;
    const uint64_t r0 = b * br, r1 = r0 + br < x->rows ? r0 + br : x->rows;
    size_t k0, k1, k;
    if (!shared(ex, nex, a, e, x->es, &k0, &k1))
        return WSYNC_OK;
    for (k = k0; k < k1; k++) {
        const uint64_t lo = ex[k].offset > a ? ex[k].offset : a;
        const uint64_t hi = ex[k].offset + ex[k].len < e ? ex[k].offset + ex[k].len : e;
        const uint64_t e0 = (lo - a) / x->es;
        wsync_fp8_brun_t r;
        if (hi <= lo || (rank >= 0 && ex[k].rank != rank))
            continue;
        r = (wsync_fp8_brun_t){.tensor = use->tensor,
                               .rank = ex[k].rank,
                               .slice = sl,
                               .b0 = b,
                               .b1 = b + 1,
                               .row0 = r0,
                               .rows = r1 - r0,
                               .cols = x->cols,
                               .src_off = lo,
                               .q_off = x->q + (sl * x->rows + r0) * x->cols + e0,
                               .q_len = (hi - lo) / x->es,
                               .s_off = x->s + 4 * (sl * x->srows + b) * x->scols,
                               .s_len = e0 == 0 ? 4 * x->scols : 0,
                               .part = 1,
                               .e0 = e0};
        WSYNC_CHECK(bvec_push(bv, &r));
    }
    return WSYNC_OK;
}

wsync_status_t wsync_fp8_bruns(const wsync_manifest_t *m, const wsync_fp8_exts_t *xs, const wsync_fp8_use_t *use,
                               int rank, wsync_fp8_brun_t **out, size_t *n, size_t *capp)
{
    const uint64_t br = (uint64_t)use->spec.block_rows;
    const ext_t *ex = xs->ex;
    const size_t nex = xs->n;
    bvec_t bv = {*out, *n, *capp};
    size_t first = *n;
    wsync_status_t st = WSYNC_OK;
    long last = -2;
    uint64_t sl, b;
    mat_t x;
    WSYNC_CHECK(tensor_mat(m, use, &x));
    for (sl = 0; sl < x.slices && st == WSYNC_OK; sl++, last = -2)
        for (b = 0; b < x.srows && st == WSYNC_OK; b++) {
            uint64_t a, e, r0 = b * br, r1 = r0 + br < x.rows ? r0 + br : x.rows;
            long h;
            band_bytes(m, use, &x, sl, b, &a, &e);
            h = holder(ex, nex, a, e);
            if (h < 0 || (rank >= 0 && ex[h].rank != rank)) {
                last = -2;
                if (h < 0)
                    st = push_parts(use, &x, ex, nex, sl, b, a, e, rank, &bv);
                continue;
            }
            if (h == last && bv.n > first) { /* the same extent goes on: one run */
                wsync_fp8_brun_t *p = &bv.v[bv.n - 1];
                p->b1 = b + 1;
                p->rows += r1 - r0;
                p->q_len += (r1 - r0) * x.cols;
                p->s_len += 4 * x.scols;
                continue;
            }
            st = bvec_push(&bv, &(wsync_fp8_brun_t){.tensor = use->tensor,
                                                    .rank = ex[h].rank,
                                                    .slice = sl,
                                                    .b0 = b,
                                                    .b1 = b + 1,
                                                    .row0 = r0,
                                                    .rows = r1 - r0,
                                                    .cols = x.cols,
                                                    .src_off = a,
                                                    .q_off = x.q + (sl * x.rows + r0) * x.cols,
                                                    .q_len = (r1 - r0) * x.cols,
                                                    .s_off = x.s + 4 * (sl * x.srows + b) * x.scols,
                                                    .s_len = 4 * x.scols});
            last = h;
        }
    *out = bv.v;
    *n = bv.n;
    *capp = bv.cap;
    return st;
}

typedef struct wire {
    const wsync_target_t *t;
    const wsync_manifest_t *m;
    const ext_t *ex;
    size_t nex;
    tgt_runs_t v;
    wsync_fp8_aux_t *aux;
    size_t naux, capaux;
    uint64_t aux_len;
} wire_t;

/* rows x w bytes from src (stride) to dst with destination pitch dpitch:
 * one run when the destination rows are back to back, else one per row. */
static wsync_status_t push_rows(wire_t *w, uint64_t src, uint64_t stride, uint64_t width, uint64_t rows,
                                uint64_t dst, uint64_t dpitch)
{
    uint64_t i;
    if (rows == 1 || dpitch == width) {
        wsync_run2d_t r = {src, rows > 1 ? stride : 0, width, rows, dst};
        wsync_run2d_t *l = w->v.n ? &w->v.runs[w->v.n - 1] : NULL;
        /* the band before, continued in source and destination: one run
         * (a whole tensor's codes are one run, as its BF16 bytes are) */
        if (l && l->dst_off + wsync_run2d_bytes(l) == dst) {
            if (l->rows == 1 && rows == 1 && l->src_off + l->row_bytes == src) {
                l->row_bytes += width;
                return WSYNC_OK;
            }
            if (l->row_bytes == width && (l->rows == 1 || l->src_stride == stride) &&
                (rows == 1 || stride == (l->rows > 1 ? l->src_stride : stride)) &&
                src == l->src_off + l->rows * stride) {
                l->src_stride = stride;
                l->rows += rows;
                return WSYNC_OK;
            }
        }
        return tgt_runs_push(&w->v, &r);
    }
    for (i = 0; i < rows; i++) {
        wsync_run2d_t r = {src + i * stride, 0, width, 1, dst + i * dpitch};
        WSYNC_CHECK(tgt_runs_push(&w->v, &r));
    }
    return WSYNC_OK;
}

static wsync_status_t push_aux(wire_t *w, const wsync_fp8_aux_t *a)
{
    if (w->naux == w->capaux) {
        size_t nc = w->capaux ? w->capaux * 2 : 16;
        wsync_fp8_aux_t *na = realloc(w->aux, nc * sizeof(*na));
        WSYNC_CHECK_ALLOC(na);
        w->aux = na;
        w->capaux = nc;
    }
    w->aux[w->naux++] = *a;
    return WSYNC_OK;
}

/* One band of block bk of FP8 destination di: source rows [r, r + n) of
 * matrix ssl at destination rows [dr, dr + n) of matrix dsl; its codes (or
 * source rows into the aux area) when !scales, else its scales. */
static wsync_status_t band_runs(wire_t *w, size_t di, const wsync_block_t *bk, const mat_t *x,
                                const wsync_fp8_use_t *u, uint64_t ssl, uint64_t dsl, uint64_t r, uint64_t n,
                                uint64_t dr, int scales)
{
    const wsync_dest_t *d = &w->t->dests[di], *sd = &w->t->dests[d->scale_dest];
    const wsync_tensor_t *s = &w->m->tensors[bk->src];
    const uint64_t br = (uint64_t)d->fp8.block_rows, bc = (uint64_t)d->fp8.block_cols;
    const uint64_t c0 = (uint64_t)bk->src_start[s->ndim - 1], c1 = (uint64_t)bk->src_stop[s->ndim - 1];
    const uint64_t dc = (uint64_t)bk->dst_start[d->ndim - 1];
    const uint64_t DR = (uint64_t)d->shape[d->ndim - 2], DC = (uint64_t)d->shape[d->ndim - 1];
    const uint64_t DSR = (uint64_t)sd->shape[sd->ndim - 2], DSC = (uint64_t)sd->shape[sd->ndim - 1];
    const uint64_t sc0 = c0 / bc, nsc = (c1 + bc - 1) / bc - sc0;
    uint64_t a, e;
    size_t k0, k1;
    band_bytes(w->m, u, x, ssl, r / br, &a, &e);
    if (holder(w->ex, w->nex, a, e) >= 0 || shared(w->ex, w->nex, a, e, x->es, &k0, &k1)) {
        if (scales) /* the stride lets the next band's scale row extend this run */
            return push_rows(w, x->s + 4 * ((ssl * x->srows + r / br) * x->scols + sc0), 4 * x->scols, 4 * nsc, 1,
                             sd->offset + 4 * ((dsl * DSR + dr / br) * DSC + dc / bc), 4 * nsc);
        return push_rows(w, x->q + (ssl * x->rows + r) * x->cols + c0, x->cols, c1 - c0, n,
                         d->offset + (dsl * DR + dr) * DC + dc, DC);
    }
    if (scales)
        return WSYNC_OK; /* made by the engine */
    {
        const uint64_t wb = (c1 - c0) * x->es;
        wsync_fp8_aux_t ax = {.dest = di,
                              .src = bk->src,
                              .slice = dsl,
                              .row0 = dr,
                              .rows = n,
                              .col0 = dc,
                              .cols = c1 - c0,
                              .src_row0 = r,
                              .aux_off = w->t->image_size + w->aux_len,
                              .fmt = s->dtype == WSYNC_DTYPE_F32 ? WSYNC_QSRC_F32 : WSYNC_QSRC_BF16};
        WSYNC_CHECK(push_rows(w, s->offset + ((ssl * x->rows + r) * x->cols + c0) * x->es, x->cols * x->es, wb, n,
                              ax.aux_off, wb));
        w->aux_len += (wb * n + WSYNC_ALIGN - 1) / WSYNC_ALIGN * WSYNC_ALIGN;
        return push_aux(w, &ax);
    }
}

/* The runs of FP8 destination di, block by block, matrix by matrix, band
 * by band. */
static wsync_status_t fp8_dest_runs(wire_t *w, size_t di)
{
    const wsync_dest_t *d = &w->t->dests[di];
    size_t bi;
    for (bi = 0; bi < d->nblocks; bi++) {
        const wsync_block_t *bk = &w->t->blocks[d->first_block + bi];
        const wsync_tensor_t *s = &w->m->tensors[bk->src];
        const wsync_fp8_use_t u = {bk->src, d->fp8};
        const int ns = s->ndim, nd = d->ndim, lead = nd - ns;
        const uint64_t br = (uint64_t)d->fp8.block_rows;
        const uint64_t r0 = (uint64_t)bk->src_start[ns - 2], r1 = (uint64_t)bk->src_stop[ns - 2];
        int64_t idx[WSYNC_MAX_DIMS] = {0};
        mat_t x;
        int i;
        WSYNC_CHECK(tensor_mat(w->m, &u, &x));
        for (;;) {
            uint64_t ssl = 0, dsl = 0, r;
            for (i = 0; i < ns - 2; i++)
                ssl = ssl * (uint64_t)s->shape[i] + (uint64_t)(bk->src_start[i] + idx[i]);
            for (i = 0; i < nd - 2; i++) {
                int64_t at = i < lead ? bk->dst_start[i] : bk->dst_start[i] + idx[i - lead];
                dsl = dsl * (uint64_t)d->shape[i] + (uint64_t)at;
            }
            for (i = 0; i < 2; i++) /* the codes band by band, then the scales: each merges into few runs */
                for (r = r0; r < r1; r = (r / br + 1) * br) {
                    uint64_t n = ((r / br + 1) * br < r1 ? (r / br + 1) * br : r1) - r;
                    WSYNC_CHECK(band_runs(w, di, bk, &x, &u, ssl, dsl, r, n,
                                          (uint64_t)bk->dst_start[nd - 2] + (r - r0), i));
                }
            for (i = ns - 3; i >= 0; i--) {
                if (++idx[i] < bk->src_stop[i] - bk->src_start[i])
                    break;
                idx[i] = 0;
            }
            if (i < 0)
                break;
        }
    }
    return WSYNC_OK;
}

wsync_status_t wsync_target_wire_runs(const wsync_target_t *t, const wsync_manifest_t *m,
                                      const wsync_layout_t *layout, wsync_run2d_t **runs, size_t *nruns,
                                      wsync_fp8_aux_t **aux, size_t *naux, uint64_t *aux_len)
{
    wire_t w = {.t = t, .m = m};
    ext_t *ex = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t i;
    int fp8 = 0;
    for (i = 0; i < t->ndests; i++)
        fp8 |= t->dests[i].is_fp8;
    if (aux) {
        *aux = NULL;
        *naux = 0;
    }
    if (aux_len)
        *aux_len = 0;
    if (!fp8 || t->whole_image)
        return wsync_target_runs(t, m, runs, nruns);
    WSYNC_CHECK(sorted_extents(layout, &ex, &w.nex));
    w.ex = ex;
    for (i = 0; i < t->ndests && st == WSYNC_OK; i++) {
        if (t->dests[i].is_scale)
            continue;
        st = t->dests[i].is_fp8 ? fp8_dest_runs(&w, i) : tgt_dest_runs(t, m, i, &w.v);
    }
    free(ex);
    if (st != WSYNC_OK) {
        free(w.v.runs);
        free(w.aux);
        return st;
    }
    if (w.v.n > 1)
        qsort(w.v.runs, w.v.n, sizeof(*w.v.runs), tgt_cmp_run_dst);
    *runs = w.v.runs;
    *nruns = w.v.n;
    if (aux) {
        *aux = w.aux;
        *naux = w.naux;
    } else {
        free(w.aux);
    }
    if (aux_len)
        *aux_len = w.aux_len;
    return WSYNC_OK;
}

wsync_status_t wsync_target_wire_size(const wsync_target_t *t, const wsync_manifest_t *m,
                                      const wsync_layout_t *layout, uint64_t *len)
{
    wsync_run2d_t *runs = NULL;
    size_t n = 0;
    uint64_t aux = 0;
    WSYNC_CHECK(wsync_target_wire_runs(t, m, layout, &runs, &n, NULL, NULL, &aux));
    free(runs);
    *len = t->image_size + aux;
    return WSYNC_OK;
}
