/* target_cells.c: the distinct source bytes a node needs, cut into cells:
 * disjoint regions of the trainer image, each held by one fixed set of
 * (rank, destination place) occurrences. Needs whose source envelopes overlap
 * form a cluster; a cluster of contiguous runs is swept in one dimension; a
 * cluster with column slices of one row pitch is cut on a grid of row bands x
 * column bands (so T column slices of a tensor are T cells, not rows x T);
 * anything else is expanded into rows and swept. Cost: O(needs log needs) for
 * the layouts the rules produce. With holders apart (tp_one_gpu) each rank's
 * needs are cut alone: no cell has two holders. */
#include <string.h>

#include "common/targets/target_plan_internal.h"

int tp_cut(uint64_t src, uint64_t stride, uint64_t width, uint64_t rows, uint64_t a, uint64_t b, tp_sub_t out[3])
{
    uint64_t klo, khi, first, last, rs;
    int n = 0;

    if (rows == 1) {
        uint64_t lo = a > src ? a : src, hi = b < src + width ? b : src + width;
        if (lo >= hi)
            return 0;
        out[0] = (tp_sub_t){0, lo - src, hi - lo, 1};
        return 1;
    }
    if (b <= src || rows == 0)
        return 0;
    klo = a < src + width ? 0 : (a - src - width) / stride + 1;
    khi = (b - src - 1) / stride;
    if (khi > rows - 1)
        khi = rows - 1;
    if (klo > khi)
        return 0;
    if (klo == khi) {
        uint64_t lo, hi;
        rs = src + klo * stride;
        lo = a > rs ? a : rs;
        hi = b < rs + width ? b : rs + width;
        if (lo >= hi)
            return 0;
        out[0] = (tp_sub_t){klo, lo - rs, hi - lo, 1};
        return 1;
    }
    first = klo;
    last = khi;
    rs = src + klo * stride;
    if (rs < a) {
        out[n++] = (tp_sub_t){klo, a - rs, width - (a - rs), 1};
        first++;
    }
    rs = src + khi * stride;
    if (rs + width > b)
        last--;
    if (first <= last)
        out[n++] = (tp_sub_t){first, 0, width, last - first + 1};
    if (rs + width > b)
        out[n++] = (tp_sub_t){khi, 0, b - rs, 1};
    return n;
}

void tp_cells_free(tp_cells_t *c)
{
    free(c->cells);
    free(c->occ);
    free(c->set_ranks);
    free(c->set_first);
    free(c->set_len);
    free(c->hash);
    memset(c, 0, sizeof(*c));
}

static int cmp_occ(const void *a, const void *b)
{
    const tp_occ_t *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->dst < y->dst ? -1 : x->dst > y->dst;
}

static uint64_t set_hash(const int *r, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ (uint64_t)(unsigned)r[i]) * 1099511628211ULL;
    return h;
}

static wsync_status_t hash_grow(tp_cells_t *c)
{
    size_t nc = c->hash_cap ? c->hash_cap * 2 : 64, s, i;
    uint32_t *h = calloc(nc, sizeof(*h));
    WSYNC_CHECK_ALLOC(h);
    for (s = 0; s < c->nsets; s++) {
        i = set_hash(c->set_ranks + c->set_first[s], c->set_len[s]) & (nc - 1);
        while (h[i])
            i = (i + 1) & (nc - 1);
        h[i] = (uint32_t)s + 1;
    }
    free(c->hash);
    c->hash = h;
    c->hash_cap = nc;
    return WSYNC_OK;
}

/* Interns the distinct ranks of the (sorted) occurrences as a set id. */
static wsync_status_t intern_set(tp_cells_t *c, const tp_occ_t *occ, size_t nocc, uint32_t *id)
{
    int buf[64], *r = buf;
    size_t n = 0, k, i;
    wsync_status_t st = WSYNC_OK;

    if (nocc > WSYNC_ARRAY_LEN(buf)) {
        r = malloc(nocc * sizeof(*r));
        WSYNC_CHECK_ALLOC(r);
    }
    for (k = 0; k < nocc; k++)
        if (n == 0 || r[n - 1] != occ[k].rank)
            r[n++] = occ[k].rank;
    if (c->nsets * 2 >= c->hash_cap)
        WSYNC_CHECK_GOTO(hash_grow(c), st, out);
    i = set_hash(r, n) & (c->hash_cap - 1);
    while (c->hash[i]) {
        size_t s = c->hash[i] - 1;
        if (c->set_len[s] == n && memcmp(c->set_ranks + c->set_first[s], r, n * sizeof(*r)) == 0) {
            *id = (uint32_t)s;
            goto out;
        }
        i = (i + 1) & (c->hash_cap - 1);
    }
    if (c->nsets == c->capsets) {
        size_t nc = c->capsets ? c->capsets * 2 : 16;
        size_t *f = realloc(c->set_first, nc * sizeof(*f)), *l;
        if (f == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
            goto out;
        }
        c->set_first = f;
        l = realloc(c->set_len, nc * sizeof(*l));
        if (l == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
            goto out;
        }
        c->set_len = l;
        c->capsets = nc;
    }
    c->set_first[c->nsets] = c->nset_ranks;
    c->set_len[c->nsets] = n;
    for (k = 0; k < n; k++) {
        if (c->nset_ranks == c->capset_ranks) {
            size_t nc = c->capset_ranks ? c->capset_ranks * 2 : 64;
            int *nr = realloc(c->set_ranks, nc * sizeof(*nr));
            if (nr == NULL) {
                st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                goto out;
            }
            c->set_ranks = nr;
            c->capset_ranks = nc;
        }
        c->set_ranks[c->nset_ranks++] = r[k];
    }
    c->hash[i] = (uint32_t)c->nsets + 1;
    *id = (uint32_t)c->nsets++;
out:
    if (r != buf)
        free(r);
    return st;
}

/* Appends one occupant to the cell table's occupant list. */
static wsync_status_t add_occ(tp_cells_t *c, tp_occ_t o)
{
    if (c->nocc == c->capocc) {
        size_t ncap = c->capocc ? c->capocc * 2 : 64;
        tp_occ_t *no = realloc(c->occ, ncap * sizeof(*no));
        if (no == NULL)
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
        c->occ = no;
        c->capocc = ncap;
    }
    c->occ[c->nocc++] = o;
    return WSYNC_OK;
}

/* Appends a cell whose occurrences are the last `nocc` of c->occ. */
static wsync_status_t emit_cell(tp_cells_t *c, uint64_t src, uint64_t stride, uint64_t width, uint64_t rows,
                                size_t nocc)
{
    tp_cell_t cell = {src, stride, width, rows, c->nocc - nocc, nocc, 0};
    if (nocc > 1)
        qsort(c->occ + cell.first_occ, nocc, sizeof(*c->occ), cmp_occ);
    WSYNC_CHECK(intern_set(c, c->occ + cell.first_occ, nocc, &cell.set));
    TP_PUSH(c->cells, c->n, c->cap, cell);
    return WSYNC_OK;
}

static int cmp_need(const void *a, const void *b)
{
    const tp_need_t *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Holders apart: by rank first (each rank's needs cluster alone). */
static int cmp_need_rank(const void *a, const void *b)
{
    const tp_need_t *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return cmp_need(a, b);
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

static size_t uniq(uint64_t *v, size_t n)
{
    size_t i, k = 0;
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_u64);
    for (i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    return k;
}

/* One-dimensional sweep over contiguous needs (rows == 1), sorted by src:
 * a cell per maximal interval with the same active needs. */
static wsync_status_t sweep(tp_cells_t *c, const tp_need_t *it, size_t n)
{
    uint64_t *bd = malloc(2 * n * sizeof(*bd));
    size_t *act = malloc(n * sizeof(*act));
    size_t nb, nact = 0, next = 0, b, k, open_cell = (size_t)-1;
    wsync_status_t st = WSYNC_OK;

    if (bd == NULL || act == NULL) {
        free(bd);
        free(act);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
    }
    for (k = 0; k < n; k++) {
        bd[2 * k] = it[k].src;
        bd[2 * k + 1] = it[k].src + it[k].width;
    }
    nb = uniq(bd, 2 * n);
    for (b = 0; b + 1 < nb && st == WSYNC_OK; b++) {
        uint64_t p = bd[b], q = bd[b + 1];
        int changed = 0;
        for (k = 0; k < nact;) {
            if (it[act[k]].src + it[act[k]].width <= p) {
                act[k] = act[--nact];
                changed = 1;
            } else {
                k++;
            }
        }
        while (next < n && it[next].src == p) {
            act[nact++] = next++;
            changed = 1;
        }
        if (nact == 0) {
            open_cell = (size_t)-1;
            continue;
        }
        if (!changed && open_cell != (size_t)-1) {
            c->cells[open_cell].width += q - p;
            continue;
        }
        for (k = 0; k < nact && st == WSYNC_OK; k++) {
            const tp_need_t *e = &it[act[k]];
            tp_occ_t o = {e->rank, e->dst + (p - e->src), 0};
            st = add_occ(c, o);
        }
        if (st == WSYNC_OK)
            st = emit_cell(c, p, 0, q - p, 1, nact);
        open_cell = c->n - 1;
    }
    free(bd);
    free(act);
    return st;
}

/* Needs expanded into one contiguous need per row, then swept. */
static wsync_status_t expand_sweep(tp_cells_t *c, const tp_need_t *nd, size_t n)
{
    tp_need_t *rows = NULL;
    size_t nr = 0, cap = 0, k;
    uint64_t i;
    wsync_status_t st;
    for (k = 0; k < n; k++)
        for (i = 0; i < nd[k].rows; i++) {
            tp_need_t r = {nd[k].src + i * nd[k].stride, 0,          nd[k].width, 1,
                           nd[k].dst + i * nd[k].width,  nd[k].rank, (uint32_t)nr};
            if (nr == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                tp_need_t *nrw = realloc(rows, ncap * sizeof(*nrw));
                if (nrw == NULL) {
                    free(rows);
                    return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
                }
                rows = nrw;
                cap = ncap;
            }
            rows[nr++] = r;
        }
    if (nr > 1)
        qsort(rows, nr, sizeof(*rows), cmp_need);
    st = sweep(c, rows, nr);
    free(rows);
    return st;
}

typedef struct rect {
    uint64_t r0, r1, c0, c1;
    int rank;
    uint64_t dst, dpitch; /* destination of (r0, c0); bytes between rows */
} rect_t;

static size_t band(const uint64_t *cuts, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;
    while (lo + 1 < hi) {
        size_t mid = (lo + hi) / 2;
        if (cuts[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Needs of one row pitch P as rectangles in (row, byte) coordinates from the
 * cluster's start; the grid of their row and column cuts gives the cells. *ok
 * = 0 (nothing emitted) when a need does not fit the pitch or the grid would
 * be large: the caller expands instead. */
static wsync_status_t grid(tp_cells_t *c, const tp_need_t *nd, size_t n, uint64_t P, int *ok)
{
    uint64_t B = nd[0].src, *rc = NULL, *cc = NULL;
    rect_t *rt = NULL;
    size_t nr = 0, k, nrc, ncc, bi, bj, *cnt = NULL, ncell;
    wsync_status_t st = WSYNC_OK;

    *ok = 0;
    rt = malloc(3 * n * sizeof(*rt));
    rc = malloc(6 * n * sizeof(*rc));
    cc = malloc(6 * n * sizeof(*cc));
    if (rt == NULL || rc == NULL || cc == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
        goto out;
    }
    for (k = 0; k < n; k++) {
        uint64_t s = nd[k].src - B, r = s / P, col = s % P;
        if (nd[k].rows > 1) {
            if (col + nd[k].width > P)
                goto out;
            rt[nr++] = (rect_t){r, r + nd[k].rows, col, col + nd[k].width, nd[k].rank, nd[k].dst, nd[k].width};
        } else if (col + nd[k].width <= P) {
            rt[nr++] = (rect_t){r, r + 1, col, col + nd[k].width, nd[k].rank, nd[k].dst, P};
        } else {
            uint64_t e = s + nd[k].width, full = e / P - (r + 1), rem = e % P;
            rt[nr++] = (rect_t){r, r + 1, col, P, nd[k].rank, nd[k].dst, P};
            if (full > 0)
                rt[nr++] = (rect_t){r + 1, r + 1 + full, 0, P, nd[k].rank, nd[k].dst + (P - col), P};
            if (rem > 0)
                rt[nr++] = (rect_t){e / P, e / P + 1, 0, rem, nd[k].rank, nd[k].dst + (e / P * P - s), P};
        }
    }
    for (k = 0; k < nr; k++) {
        rc[2 * k] = rt[k].r0;
        rc[2 * k + 1] = rt[k].r1;
        cc[2 * k] = rt[k].c0;
        cc[2 * k + 1] = rt[k].c1;
    }
    nrc = uniq(rc, 2 * nr);
    ncc = uniq(cc, 2 * nr);
    ncell = (nrc - 1) * (ncc - 1);
    if (ncell > 64 * nr + 4096)
        goto out;
    cnt = calloc(ncell + 1, sizeof(*cnt));
    if (cnt == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
        goto out;
    }
    for (k = 0; k < nr; k++)
        for (bi = band(rc, nrc, rt[k].r0); rc[bi] < rt[k].r1; bi++)
            for (bj = band(cc, ncc, rt[k].c0); cc[bj] < rt[k].c1; bj++)
                cnt[bi * (ncc - 1) + bj]++;
    *ok = 1;
    /* Cells in source order: row band by row band, column band by column band. */
    for (bi = 0; bi + 1 < nrc && st == WSYNC_OK; bi++)
        for (bj = 0; bj + 1 < ncc && st == WSYNC_OK; bj++) {
            size_t cell = bi * (ncc - 1) + bj;
            if (cnt[cell] == 0)
                continue;
            for (k = 0; k < nr && st == WSYNC_OK; k++) {
                const rect_t *q = &rt[k];
                tp_occ_t o;
                if (q->r0 > rc[bi] || q->r1 <= rc[bi] || q->c0 > cc[bj] || q->c1 <= cc[bj])
                    continue;
                o = (tp_occ_t){q->rank, q->dst + (rc[bi] - q->r0) * q->dpitch + (cc[bj] - q->c0), q->dpitch};
                st = add_occ(c, o);
            }
            if (st == WSYNC_OK)
                st = emit_cell(c, B + rc[bi] * P + cc[bj], P, cc[bj + 1] - cc[bj], rc[bi + 1] - rc[bi], cnt[cell]);
        }
out:
    free(rt);
    free(rc);
    free(cc);
    free(cnt);
    return st;
}

static wsync_status_t cluster(tp_cells_t *c, const tp_need_t *nd, size_t n)
{
    uint64_t P = 0;
    size_t k;
    int all_rows = 1, one_pitch = 1, ok;

    if (n == 1) {
        tp_occ_t o = {nd[0].rank, nd[0].dst, nd[0].width};
        TP_PUSH(c->occ, c->nocc, c->capocc, o);
        return emit_cell(c, nd[0].src, nd[0].rows > 1 ? nd[0].stride : 0, nd[0].width, nd[0].rows, 1);
    }
    for (k = 0; k < n; k++) {
        if (nd[k].rows <= 1)
            continue;
        if (all_rows)
            P = nd[k].stride;
        else if (nd[k].stride != P)
            one_pitch = 0;
        all_rows = 0;
    }
    if (all_rows)
        return sweep(c, nd, n);
    if (one_pitch) {
        WSYNC_CHECK(grid(c, nd, n, P, &ok));
        if (ok)
            return WSYNC_OK;
    }
    return expand_sweep(c, nd, n);
}

int tp_one_gpu(const wsync_land_hint_t *hint, int world, int L)
{
    int t, r, k, on;
    for (t = 0; hint != NULL && L > 1 && t < world; t++)
        for (r = 0; r < L; r++) {
            for (on = 0, k = 0; k < hint->ncolo[t]; k++)
                on |= hint->colo[t * L + k] == r;
            if (!on)
                return 0;
        }
    return hint != NULL && L > 1;
}

wsync_status_t tp_cells_build(tp_need_t *needs, size_t n, int apart, tp_cells_t *out)
{
    size_t k, first = 0;
    uint64_t end = 0;

    memset(out, 0, sizeof(*out));
    if (n > 1)
        qsort(needs, n, sizeof(*needs), apart ? cmp_need_rank : cmp_need);
    for (k = 0; k < n; k++) {
        uint64_t e = needs[k].src + (needs[k].rows - 1) * needs[k].stride + needs[k].width;
        if (k > first && (needs[k].src >= end || (apart && needs[k].rank != needs[first].rank))) {
            wsync_status_t st = cluster(out, needs + first, k - first);
            if (st != WSYNC_OK) {
                tp_cells_free(out);
                return st;
            }
            first = k;
        }
        if (k == first || e > end)
            end = e;
    }
    if (n > 0) {
        wsync_status_t st = cluster(out, needs + first, n - first);
        if (st != WSYNC_OK) {
            tp_cells_free(out);
            return st;
        }
    }
    return WSYNC_OK;
}
