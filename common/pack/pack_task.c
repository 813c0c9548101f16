/* pack_task.c: wsync_pack_tasks, the runs of a put cut into GPU blocks. */
#include "common/pack/pack_task.h"

#include "common/base/status.h"

typedef struct emit {
    wsync_pack_task_t *out;
    size_t cap, count;
} emit_t;

/* Largest power of two up to 16 dividing x (16 for 0). */
static uint32_t width_of(uint64_t x)
{
    uint64_t low = x & (~x + 1);
    return x == 0 || low >= 16 ? 16 : (uint32_t)low;
}

static void push(emit_t *e, uint64_t src, uint64_t dst, uint64_t stride, uint32_t row_bytes, uint32_t rows,
                 uint32_t width)
{
    if (e->count < e->cap)
        e->out[e->count] = (wsync_pack_task_t){.src = src,
                                               .dst = dst,
                                               .stride = rows > 1 ? stride : 0,
                                               .row_bytes = row_bytes,
                                               .rows = rows,
                                               .width = width};
    e->count++;
}

/* One task of `len` (< 2^32) contiguous bytes at the widest width its
 * addresses and length allow. */
static void push_flat(emit_t *e, uintptr_t sb, uintptr_t db, uint64_t src, uint64_t dst, uint64_t len)
{
    uint32_t w = width_of((sb + src) | (db + dst) | len);
    if (len)
        push(e, src, dst, 0, (uint32_t)len, 1, w);
}

/* `len` contiguous bytes: a head up to the width the two addresses share
 * modulo 16, the body at that width in pieces of WSYNC_PACK_TASK_BYTES (a
 * multiple of 16, so every piece keeps the body's alignment), and a tail. */
static void push_contig(emit_t *e, uintptr_t sb, uintptr_t db, uint64_t src, uint64_t dst, uint64_t len)
{
    uint32_t w = width_of((sb + src) - (db + dst));
    uint64_t head = (w - (db + dst) % w) % w, body, o;
    if (head > len)
        head = len;
    push_flat(e, sb, db, src, dst, head);
    src += head;
    dst += head;
    len -= head;
    body = len / w * w;
    for (o = 0; o < body; o += WSYNC_PACK_TASK_BYTES) {
        uint64_t piece = body - o < WSYNC_PACK_TASK_BYTES ? body - o : WSYNC_PACK_TASK_BYTES;
        push(e, src + o, dst + o, 0, (uint32_t)piece, 1, w);
    }
    push_flat(e, sb, db, src + body, dst + body, len - body);
}

static void push_run(emit_t *e, uintptr_t sb, uintptr_t db, const wsync_run2d_t *r)
{
    uint64_t i, per, w;
    if (r->rows == 0 || r->row_bytes == 0)
        return;
    if (r->rows == 1 || r->src_stride == r->row_bytes) {
        push_contig(e, sb, db, r->src_off, r->dst_off, r->row_bytes * r->rows);
        return;
    }
    if (r->row_bytes > WSYNC_PACK_TASK_BYTES / 2) {
        /* Long rows: each row is its own contiguous range. */
        for (i = 0; i < r->rows; i++)
            push_contig(e, sb, db, r->src_off + i * r->src_stride, r->dst_off + i * r->row_bytes, r->row_bytes);
        return;
    }
    /* Short rows: as many whole rows per task as fit; one width for the run,
     * since row starts step by row_bytes in the destination and by the
     * stride in the source. */
    per = WSYNC_PACK_TASK_BYTES / r->row_bytes;
    w = width_of((sb + r->src_off) | (db + r->dst_off) | r->row_bytes | r->src_stride);
    for (i = 0; i < r->rows; i += per) {
        uint64_t k = r->rows - i < per ? r->rows - i : per;
        push(e, r->src_off + i * r->src_stride, r->dst_off + i * r->row_bytes, r->src_stride,
             (uint32_t)r->row_bytes, (uint32_t)k, (uint32_t)w);
    }
}

size_t wsync_pack_tasks(const wsync_run2d_t *runs, size_t n, uintptr_t dst_base, uintptr_t src_base,
                        wsync_pack_task_t *out, size_t cap)
{
    emit_t e = {.out = out, .cap = cap, .count = 0};
    size_t i;
    for (i = 0; i < n; i++)
        push_run(&e, src_base, dst_base, &runs[i]);
    return e.count;
}

/* Is `at` the start of a task (binary search of the ascending starts)? */
static int task_starts_at(const uint64_t *start, size_t ntasks, uint64_t at)
{
    size_t lo = 0, hi = ntasks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (start[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ntasks && start[lo] == at;
}

wsync_status_t wsync_pack_parts_check(const uint64_t *start, size_t ntasks, uint64_t len,
                                      const wsync_pack_part_t *parts, size_t n, uint32_t dst_mod, uint32_t align)
{
    size_t i;
    if (n == 0 || n > WSYNC_PACK_MAX_PARTS)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "a packed put lands in %zu parts; one launch takes 1 to %d", n,
                           WSYNC_PACK_MAX_PARTS);
    if (parts[0].at != 0)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "the first part of a packed put begins at byte %llu, not 0",
                           (unsigned long long)parts[0].at);
    for (i = 0; i < n; i++) {
        const uint64_t base = (uint64_t)(uintptr_t)parts[i].dst - parts[i].at; /* where the put's byte 0 would be */
        if (i > 0 && (parts[i].at <= parts[i - 1].at || parts[i].at >= len))
            return wsync_error(WSYNC_ERR_UNSUPPORTED,
                               "part %zu of a packed put of %llu bytes begins at %llu: parts must ascend inside "
                               "it",
                               i, (unsigned long long)len, (unsigned long long)parts[i].at);
        if (i > 0 && !task_starts_at(start, ntasks, parts[i].at))
            return wsync_error(WSYNC_ERR_UNSUPPORTED,
                               "part %zu of a packed put begins at byte %llu, inside a task of its plan", i,
                               (unsigned long long)parts[i].at);
        if ((base % 16 + 16 - dst_mod) % align != 0)
            return wsync_error(WSYNC_ERR_UNSUPPORTED,
                               "part %zu of a packed put lands at 16k+%u where its plan moves %u-byte vectors "
                               "from 16k+%u",
                               i, (unsigned)((uintptr_t)parts[i].dst % 16), align,
                               (unsigned)((dst_mod + parts[i].at) % 16));
    }
    return WSYNC_OK;
}
