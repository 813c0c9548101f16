/* layout.c: trainer layouts: which extents of the image each trainer rank owns. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/model/plan.h"
#include "common/base/util.h"

static wsync_status_t layout_alloc(uint64_t image_size, int world, wsync_layout_t **out)
{
    wsync_layout_t *l;
    if (world < 1)
        return wsync_error(WSYNC_ERR_INVALID, "layout: world size must be at least 1, got %d", world);
    l = calloc(1, sizeof(*l));
    WSYNC_CHECK_ALLOC(l);
    l->world = world;
    l->image_size = image_size;
    l->nextents = calloc((size_t)world, sizeof(*l->nextents));
    l->extents = calloc((size_t)world, sizeof(*l->extents));
    if (l->nextents == NULL || l->extents == NULL) {
        wsync_layout_free(l);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    *out = l;
    return WSYNC_OK;
}

void wsync_layout_free(wsync_layout_t *l)
{
    int r;
    if (l == NULL)
        return;
    for (r = 0; l->extents && r < l->world; r++)
        free(l->extents[r]);
    free(l->extents);
    free(l->nextents);
    free(l);
}

/* Append [off, off+len) to rank r, merging with its last extent if adjacent. */
static wsync_status_t push(wsync_layout_t *l, size_t *cap, int r, uint64_t off, uint64_t len)
{
    size_t n = l->nextents[r];
    if (len == 0)
        return WSYNC_OK;
    if (n > 0 && l->extents[r][n - 1].offset + l->extents[r][n - 1].len == off) {
        l->extents[r][n - 1].len += len;
        return WSYNC_OK;
    }
    if (n == cap[r]) {
        size_t nc = cap[r] ? cap[r] * 2 : 4;
        wsync_extent_t *e = realloc(l->extents[r], nc * sizeof(*e));
        WSYNC_CHECK_ALLOC(e);
        l->extents[r] = e;
        cap[r] = nc;
    }
    l->extents[r][n] = (wsync_extent_t){off, len};
    l->nextents[r] = n + 1;
    return WSYNC_OK;
}

wsync_status_t wsync_layout_even(uint64_t image_size, int world, wsync_layout_t **out)
{
    wsync_layout_t *l;
    size_t *cap;
    uint64_t share;
    wsync_status_t st = WSYNC_OK;
    int r;

    WSYNC_CHECK(layout_alloc(image_size, world, &l));
    cap = calloc((size_t)world, sizeof(*cap));
    if (cap == NULL) {
        wsync_layout_free(l);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    share = wsync_align_up((image_size + (uint64_t)world - 1) / (uint64_t)world, WSYNC_ALIGN);
    for (r = 0; r < world && st == WSYNC_OK; r++) {
        uint64_t lo = (uint64_t)r * share, hi = lo + share;
        if (lo >= image_size)
            break;
        if (hi > image_size)
            hi = image_size;
        st = push(l, cap, r, lo, hi - lo);
    }
    free(cap);
    if (st != WSYNC_OK) {
        wsync_layout_free(l);
        return st;
    }
    *out = l;
    return WSYNC_OK;
}

wsync_status_t wsync_layout_fsdp(const wsync_manifest_t *m, int world, wsync_layout_t **out)
{
    wsync_layout_t *l;
    size_t *cap, i;
    uint64_t pos = 0;
    wsync_status_t st = WSYNC_OK;

    WSYNC_CHECK(layout_alloc(m->image_size, world, &l));
    cap = calloc((size_t)world, sizeof(*cap));
    if (cap == NULL) {
        wsync_layout_free(l);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (i = 0; i < m->ntensors && st == WSYNC_OK; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        /* Padding before the tensor belongs to rank 0. */
        st = push(l, cap, 0, pos, t->offset - pos);
        if (st == WSYNC_OK && (t->ndim == 0 || t->shape[0] == 0 || t->size == 0)) {
            st = push(l, cap, 0, t->offset, t->size);
        } else if (st == WSYNC_OK) {
            uint64_t rows = (uint64_t)t->shape[0], row_bytes = t->size / rows;
            uint64_t per = (rows + (uint64_t)world - 1) / (uint64_t)world;
            int r;
            /* Rows of sub-byte dtypes may not be whole bytes: fall back to rank 0. */
            if (row_bytes * rows != t->size) {
                st = push(l, cap, 0, t->offset, t->size);
            } else {
                for (r = 0; r < world && st == WSYNC_OK; r++) {
                    uint64_t lo = (uint64_t)r * per, hi = lo + per;
                    if (lo >= rows)
                        break;
                    if (hi > rows)
                        hi = rows;
                    st = push(l, cap, r, t->offset + lo * row_bytes, (hi - lo) * row_bytes);
                }
            }
        }
        pos = t->offset + t->size;
    }
    if (st == WSYNC_OK)
        st = push(l, cap, 0, pos, m->image_size - pos);
    free(cap);
    if (st != WSYNC_OK) {
        wsync_layout_free(l);
        return st;
    }
    *out = l;
    return WSYNC_OK;
}

typedef struct owned_ext {
    uint64_t offset, len;
    int rank;
} owned_ext_t;

static int cmp_ext(const void *a, const void *b)
{
    const owned_ext_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

wsync_status_t wsync_layout_explicit(uint64_t image_size, int world, const size_t *nextents,
                                     const wsync_extent_t *const *extents, wsync_layout_t **out)
{
    wsync_layout_t *l;
    owned_ext_t *all;
    size_t total = 0, i, k;
    uint64_t pos = 0;
    int r;

    WSYNC_CHECK(layout_alloc(image_size, world, &l));
    for (r = 0; r < world; r++)
        total += nextents[r];
    all = calloc(total ? total : 1, sizeof(*all));
    if (all == NULL) {
        wsync_layout_free(l);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (r = 0, k = 0; r < world; r++) {
        for (i = 0; i < nextents[r]; i++) {
            const wsync_extent_t *e = &extents[r][i];
            const char *why = NULL;
            if (e->len == 0)
                why = "is empty";
            else if (e->offset + e->len < e->offset || e->offset + e->len > image_size)
                why = "ends past the image";
            else if (i > 0 && e->offset < extents[r][i - 1].offset + extents[r][i - 1].len)
                why = "starts before the end of the rank's previous extent (extents must be sorted and disjoint)";
            if (why != NULL) {
                free(all);
                wsync_layout_free(l);
                return wsync_error(WSYNC_ERR_INVALID,
                                   "layout: rank %d extent %zu at offset %llu (+%llu) %s "
                                   "(image of %llu bytes)",
                                   r, i, (unsigned long long)e->offset, (unsigned long long)e->len, why,
                                   (unsigned long long)image_size);
            }
            all[k++] = (owned_ext_t){e->offset, e->len, r};
        }
        l->extents[r] = calloc(nextents[r] ? nextents[r] : 1, sizeof(wsync_extent_t));
        if (l->extents[r] == NULL) {
            free(all);
            wsync_layout_free(l);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        }
        if (nextents[r])
            memcpy(l->extents[r], extents[r], nextents[r] * sizeof(wsync_extent_t));
        l->nextents[r] = nextents[r];
    }
    qsort(all, total, sizeof(*all), cmp_ext);
    for (i = 0; i < total; i++) {
        if (all[i].offset != pos) {
            wsync_status_t st;
            if (all[i].offset > pos)
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "layout: bytes from offset %llu to %llu are owned by no rank "
                                 "(the next extent is rank %d's, at offset %llu)",
                                 (unsigned long long)pos, (unsigned long long)all[i].offset, all[i].rank,
                                 (unsigned long long)all[i].offset);
            else
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "layout: rank %d's extent at offset %llu overlaps bytes up to "
                                 "offset %llu that rank %d owns: bytes owned twice",
                                 all[i].rank, (unsigned long long)all[i].offset, (unsigned long long)pos,
                                 all[i - 1].rank);
            free(all);
            wsync_layout_free(l);
            return st;
        }
        pos += all[i].len;
    }
    free(all);
    if (pos != image_size) {
        wsync_layout_free(l);
        return wsync_error(WSYNC_ERR_INVALID,
                           "layout: bytes from offset %llu to the end (%llu) are owned by no rank",
                           (unsigned long long)pos, (unsigned long long)image_size);
    }
    *out = l;
    return WSYNC_OK;
}
