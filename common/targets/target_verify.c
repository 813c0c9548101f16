/* target_verify.c: a target's verification segments, and the small run
 * helper both sides use to tell a put that needs no packing. */
#include "common/targets/target_verify.h"

wsync_status_t wsync_target_segments(const wsync_manifest_t *m, const wsync_layout_t *layout,
                                     const wsync_target_t *t, uint64_t chunk_bytes, wsync_node_plan_t **out)
{
    const wsync_target_t *one[1] = {t};
    return wsync_node_plan_build(m, layout, 1, one, chunk_bytes, NULL, out);
}

const wsync_dest_t *wsync_target_dest_at(const wsync_target_t *t, uint64_t off)
{
    size_t lo = 0, hi = t->ndests;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const wsync_dest_t *d = &t->dests[mid];
        if (off < d->offset)
            hi = mid;
        else if (off >= d->offset + d->size)
            lo = mid + 1;
        else
            return d;
    }
    return NULL;
}

int wsync_runs_contiguous(const wsync_run2d_t *runs, size_t n, uint64_t *src_off)
{
    uint64_t next = 0, dnext = 0;
    size_t k;
    for (k = 0; k < n; k++) {
        const wsync_run2d_t *r = &runs[k];
        if (r->rows > 1 && r->src_stride != r->row_bytes)
            return 0;
        if (k > 0 && (r->src_off != next || r->dst_off != dnext))
            return 0;
        next = r->src_off + r->row_bytes * r->rows;
        dnext = r->dst_off + r->row_bytes * r->rows;
    }
    *src_off = n ? runs[0].src_off : 0;
    return 1;
}
