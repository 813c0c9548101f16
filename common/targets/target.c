/* target.c: building and validating targets, the identity target, and a
 * target's byte mapping as 2-D runs. The JSON form is in target_json.c. */
#include "common/targets/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target_internal.h"
#include "common/base/util.h"

wsync_status_t wsync_target_create(wsync_target_t **out)
{
    wsync_target_t *t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    t->by_name_ = json_object();
    if (t->by_name_ == NULL) {
        free(t);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    *out = t;
    return WSYNC_OK;
}

void wsync_target_free(wsync_target_t *t)
{
    size_t i;
    if (t == NULL)
        return;
    for (i = 0; i < t->ndests; i++)
        free(t->dests[i].name);
    free(t->dests);
    free(t->blocks);
    json_decref(t->by_name_);
    free(t);
}

long wsync_target_find(const wsync_target_t *t, const char *name)
{
    const json_t *ix = json_object_get(t->by_name_, name);
    return ix ? (long)json_integer_value(ix) : -1;
}

static uint64_t shape_elems(int ndim, const int64_t *shape)
{
    uint64_t n = 1;
    int k;
    for (k = 0; k < ndim; k++) {
        if (shape[k] != 0 && n > UINT64_MAX / 64 / (uint64_t)shape[k])
            return UINT64_MAX;
        n *= (uint64_t)shape[k];
    }
    return n;
}

wsync_status_t wsync_target_add_dest(wsync_target_t *t, const char *name, wsync_dtype_t dtype, int ndim,
                                     const int64_t *shape)
{
    wsync_dest_t *d;
    int64_t size;
    uint64_t off;
    size_t cap = t->ndests;
    int k;

    if (name == NULL || name[0] == '\0')
        return wsync_error(WSYNC_ERR_INVALID, "target: destination tensor %zu has an empty name", t->ndests);
    if (wsync_target_find(t, name) >= 0)
        return wsync_error(WSYNC_ERR_INVALID, "target: destination tensor '%s' appears twice", name);
    if (ndim < 0 || ndim > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_INVALID, "target: destination tensor '%s' has %d dimensions (at most %d)",
                           name, ndim, WSYNC_MAX_DIMS);
    for (k = 0; k < ndim; k++)
        if (shape[k] < 0)
            return wsync_error(WSYNC_ERR_INVALID, "target: destination tensor '%s' has a negative dimension %d",
                               name, k);
    size = wsync_dtype_nbytes(dtype, shape_elems(ndim, shape));
    if (wsync_dtype_name(dtype) == NULL || size < 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination tensor '%s': its size overflows or its "
                           "%s elements do not fill whole bytes",
                           name, wsync_dtype_name(dtype) ? wsync_dtype_name(dtype) : "?");
    off = wsync_align_up(t->image_size, WSYNC_ALIGN);
    /* Grow by doubling: capacity is the next power of two above ndests. */
    if ((cap & (cap - 1)) == 0) {
        wsync_dest_t *nd = realloc(t->dests, (cap ? cap * 2 : 16) * sizeof(*nd));
        WSYNC_CHECK_ALLOC(nd);
        t->dests = nd;
    }
    d = &t->dests[t->ndests];
    memset(d, 0, sizeof(*d));
    d->name = strdup(name);
    WSYNC_CHECK_ALLOC(d->name);
    if (json_object_set_new(t->by_name_, name, json_integer((json_int_t)t->ndests)) != 0) {
        free(d->name);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    d->dtype = dtype;
    d->ndim = ndim;
    if (ndim > 0)
        memcpy(d->shape, shape, (size_t)ndim * sizeof(*shape));
    d->offset = off;
    d->size = (uint64_t)size;
    d->first_block = t->nblocks;
    t->ndests++;
    t->image_size = wsync_align_up(off + d->size, WSYNC_ALIGN);
    return WSYNC_OK;
}

wsync_status_t wsync_target_add_block(wsync_target_t *t, const wsync_block_t *b)
{
    size_t cap = t->nblocks;
    if (t->ndests == 0)
        return wsync_error(WSYNC_ERR_INVALID, "target: a block was added before any destination tensor");
    if ((cap & (cap - 1)) == 0) {
        wsync_block_t *nb = realloc(t->blocks, (cap ? cap * 2 : 16) * sizeof(*nb));
        WSYNC_CHECK_ALLOC(nb);
        t->blocks = nb;
    }
    t->blocks[t->nblocks++] = *b;
    t->dests[t->ndests - 1].nblocks++;
    return WSYNC_OK;
}

/* Growable run array. */
wsync_status_t tgt_runs_push(tgt_runs_t *v, const wsync_run2d_t *r)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        wsync_run2d_t *nr = realloc(v->runs, nc * sizeof(*nr));
        WSYNC_CHECK_ALLOC(nr);
        v->runs = nr;
        v->cap = nc;
    }
    v->runs[v->n++] = *r;
    return WSYNC_OK;
}

/* Checks block `bi` of destination `d` against its source and appends its
 * runs to `v`. Inner dimensions whole in both source and destination merge
 * into one contiguous segment; the next dimension out becomes the rows of a
 * 2-D run when the destination rows are back to back; every dimension
 * further out is iterated. */
wsync_status_t tgt_block_runs(const wsync_manifest_t *m, const wsync_dest_t *d, const wsync_block_t *b, size_t bi,
                              tgt_runs_t *v)
{
    const wsync_tensor_t *s;
    uint64_t se[WSYNC_MAX_DIMS], de[WSYNC_MAX_DIMS], ext[WSYNC_MAX_DIMS], idx[WSYNC_MAX_DIMS];
    uint64_t bits, seg, rows, base_src = 0, base_dst = 0;
    int ns, nd, lead, i, k, outer, two_d;

    if (b->src >= m->ntensors)
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination '%s' block %zu: source tensor %u does not exist "
                           "(the manifest has %zu)",
                           d->name, bi, b->src, m->ntensors);
    s = &m->tensors[b->src];
    ns = s->ndim;
    nd = d->ndim;
    lead = nd - ns;
    if (s->dtype != d->dtype)
        return wsync_error(WSYNC_ERR_INVALID, "target: destination '%s' is %s but block %zu copies %s tensor '%s'",
                           d->name, wsync_dtype_name(d->dtype), bi, wsync_dtype_name(s->dtype), s->name);
    if (lead < 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination '%s' has %d dimensions, fewer than its source "
                           "'%s' (%d) in block %zu",
                           d->name, nd, s->name, ns, bi);
    for (k = 0; k < lead; k++)
        if (b->dst_start[k] < 0 || b->dst_start[k] >= d->shape[k])
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: destination '%s' block %zu: dst_start[%d] = %lld is "
                               "outside the dimension (%lld)",
                               d->name, bi, k, (long long)b->dst_start[k], (long long)d->shape[k]);
    for (i = 0; i < ns; i++) {
        int64_t lo = b->src_start[i], hi = b->src_stop[i], at = b->dst_start[lead + i];
        if (lo < 0 || hi <= lo || hi > s->shape[i])
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: destination '%s' block %zu: source '%s' dim %d range "
                               "[%lld, %lld) is empty or outside [0, %lld)",
                               d->name, bi, s->name, i, (long long)lo, (long long)hi, (long long)s->shape[i]);
        if (at < 0 || at + (hi - lo) > d->shape[lead + i])
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: destination '%s' block %zu: dim %d [%lld, %lld) is "
                               "outside [0, %lld)",
                               d->name, bi, lead + i, (long long)at, (long long)(at + (hi - lo)),
                               (long long)d->shape[lead + i]);
        ext[i] = (uint64_t)(hi - lo);
    }
    bits = wsync_dtype_bits(s->dtype);
    if (ns > 0) {
        se[ns - 1] = 1;
        for (i = ns - 2; i >= 0; i--)
            se[i] = se[i + 1] * (uint64_t)s->shape[i + 1];
    }
    if (nd > 0) {
        de[nd - 1] = 1;
        for (i = nd - 2; i >= 0; i--)
            de[i] = de[i + 1] * (uint64_t)d->shape[i + 1];
    }
    for (k = 0; k < lead; k++)
        base_dst += (uint64_t)b->dst_start[k] * de[k];
    if (ns == 0) {
        wsync_run2d_t r = {s->offset, 0, s->size, 1, d->offset + base_dst * bits / 8};
        return tgt_runs_push(v, &r);
    }
    /* k: the outermost dimension of the contiguous segment. */
    k = ns - 1;
    while (k > 0 && ext[k] == (uint64_t)s->shape[k] && ext[k] == (uint64_t)d->shape[lead + k])
        k--;
    seg = ext[k] * se[k];
    two_d = k > 0 && ext[k] == (uint64_t)d->shape[lead + k];
    rows = two_d ? ext[k - 1] : 1;
    outer = two_d ? k - 1 : k; /* dimensions [0, outer) are iterated */
    if ((seg * bits) % 8 || (se[k] * (uint64_t)b->src_start[k] * bits) % 8 ||
        (de[lead + k] * (uint64_t)b->dst_start[lead + k] * bits) % 8 || (k > 0 && (se[k - 1] * bits) % 8))
        return wsync_error(WSYNC_ERR_INVALID,
                           "target: destination '%s' block %zu cuts %s tensor '%s' inside a "
                           "byte: slice sub-byte dtypes on whole bytes",
                           d->name, bi, wsync_dtype_name(s->dtype), s->name);
    for (i = 0; i < ns; i++) {
        if (i < outer)
            continue;
        base_src += (uint64_t)b->src_start[i] * se[i];
        base_dst += (uint64_t)b->dst_start[lead + i] * de[lead + i];
    }
    memset(idx, 0, sizeof(idx));
    for (;;) {
        uint64_t so = base_src, dd = base_dst;
        wsync_run2d_t r;
        for (i = 0; i < outer; i++) {
            so += ((uint64_t)b->src_start[i] + idx[i]) * se[i];
            dd += ((uint64_t)b->dst_start[lead + i] + idx[i]) * de[lead + i];
        }
        r.src_off = s->offset + so * bits / 8;
        r.src_stride = rows > 1 ? se[k - 1] * bits / 8 : 0;
        r.row_bytes = seg * bits / 8;
        r.rows = rows;
        r.dst_off = d->offset + dd * bits / 8;
        WSYNC_CHECK(tgt_runs_push(v, &r));
        for (i = outer - 1; i >= 0; i--) {
            if (++idx[i] < ext[i])
                break;
            idx[i] = 0;
        }
        if (i < 0)
            break;
    }
    return WSYNC_OK;
}

int tgt_cmp_run_dst(const void *a, const void *b)
{
    const wsync_run2d_t *x = a, *y = b;
    return x->dst_off < y->dst_off ? -1 : x->dst_off > y->dst_off;
}

wsync_status_t tgt_runs_disjoint(const wsync_dest_t *d, tgt_runs_t *v)
{
    size_t i;
    if (v->n > 1)
        qsort(v->runs, v->n, sizeof(*v->runs), tgt_cmp_run_dst);
    for (i = 1; i < v->n; i++) {
        const wsync_run2d_t *p = &v->runs[i - 1];
        if (p->dst_off + wsync_run2d_bytes(p) > v->runs[i].dst_off)
            return wsync_error(WSYNC_ERR_INVALID,
                               "target: destination '%s': two blocks write the bytes at "
                               "offset %llu of the tensor: every destination byte must be written at most once",
                               d->name, (unsigned long long)(v->runs[i].dst_off - d->offset));
    }
    return WSYNC_OK;
}

/* Runs of destination `di`, sorted by destination; checks no byte is written
 * twice. Appends to `v` from v->n on. */
wsync_status_t tgt_dest_runs(const wsync_target_t *t, const wsync_manifest_t *m, size_t di, tgt_runs_t *v)
{
    const wsync_dest_t *d = &t->dests[di];
    size_t first = v->n, i;
    tgt_runs_t part;
    if (d->is_fp8)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "target: destination '%s' is FP8 (quantized on the way): its bytes depend on the "
                           "trainer layout (wsync_target_wire_runs, docs/FP8.md)",
                           d->name);
    for (i = 0; i < d->nblocks; i++)
        WSYNC_CHECK(tgt_block_runs(m, d, &t->blocks[d->first_block + i], i, v));
    if (v->n == first)
        return WSYNC_OK;
    part = (tgt_runs_t){v->runs + first, v->n - first, v->n - first};
    return tgt_runs_disjoint(d, &part);
}

wsync_status_t wsync_target_finish(wsync_target_t *t, const wsync_manifest_t *m)
{
    tgt_runs_t v = {0};
    wsync_status_t st = WSYNC_OK;
    size_t i, j;

    t->covered_bytes = 0;
    if (t->whole_image) {
        t->covered_bytes = t->image_size;
    } else {
        for (i = 0; i < t->ndests && st == WSYNC_OK; i++) {
            uint64_t fp8_bytes = 0;
            v.n = 0;
            if (t->dests[i].is_fp8 || t->dests[i].is_scale) {
                if (t->dests[i].is_fp8)
                    st = tgt_fp8_check(t, m, i, &fp8_bytes);
                t->covered_bytes += fp8_bytes;
                continue;
            }
            st = tgt_dest_runs(t, m, i, &v);
            for (j = 0; st == WSYNC_OK && j < v.n; j++)
                t->covered_bytes += wsync_run2d_bytes(&v.runs[j]);
        }
    }
    free(v.runs);
    WSYNC_CHECK(st);
    return tgt_digest(t, m);
}

wsync_status_t wsync_target_identity(const wsync_manifest_t *m, wsync_target_t **out)
{
    wsync_target_t *t;
    wsync_status_t st = WSYNC_OK;
    size_t i;

    WSYNC_CHECK(wsync_target_create(&t));
    for (i = 0; i < m->ntensors && st == WSYNC_OK; i++) {
        const wsync_tensor_t *s = &m->tensors[i];
        wsync_block_t b = {.src = (uint32_t)i};
        int k;
        for (k = 0; k < s->ndim; k++)
            b.src_stop[k] = s->shape[k];
        st = wsync_target_add_dest(t, s->name, s->dtype, s->ndim, s->shape);
        if (st == WSYNC_OK && t->dests[i].offset != s->offset)
            st = wsync_error(WSYNC_ERR_INTERNAL, "identity target: tensor '%s' at %llu, not at the manifest's %llu",
                             s->name, (unsigned long long)t->dests[i].offset, (unsigned long long)s->offset);
        if (st == WSYNC_OK && s->size > 0 && shape_elems(s->ndim, s->shape) > 0)
            st = wsync_target_add_block(t, &b);
    }
    t->whole_image = 1;
    t->image_size = m->image_size;
    if (st == WSYNC_OK)
        st = wsync_target_finish(t, m);
    if (st != WSYNC_OK) {
        wsync_target_free(t);
        return st;
    }
    *out = t;
    return WSYNC_OK;
}

wsync_status_t wsync_target_runs(const wsync_target_t *t, const wsync_manifest_t *m, wsync_run2d_t **runs,
                                 size_t *nruns)
{
    tgt_runs_t v = {0};
    wsync_status_t st = WSYNC_OK;
    size_t i;

    if (t->whole_image) {
        /* The image itself, cut at tensor starts (so runs stay inside one
         * tensor and its padding), the first from 0, the last to the end. */
        for (i = 0; i < m->ntensors && st == WSYNC_OK; i++) {
            uint64_t lo = i == 0 ? 0 : m->tensors[i].offset;
            uint64_t hi = i + 1 < m->ntensors ? m->tensors[i + 1].offset : m->image_size;
            wsync_run2d_t r = {lo, 0, hi - lo, 1, lo};
            if (hi > lo)
                st = tgt_runs_push(&v, &r);
        }
        if (m->ntensors == 0 && m->image_size > 0) {
            wsync_run2d_t r = {0, 0, m->image_size, 1, 0};
            st = tgt_runs_push(&v, &r);
        }
    } else {
        for (i = 0; i < t->ndests && st == WSYNC_OK; i++)
            st = tgt_dest_runs(t, m, i, &v);
    }
    if (st != WSYNC_OK) {
        free(v.runs);
        return st;
    }
    *runs = v.runs;
    *nruns = v.n;
    return WSYNC_OK;
}
