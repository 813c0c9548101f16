/* digest_runs.c: the task table of digest_runs.h, its host executor, and
 * the GPU plan (the table uploaded once, launched per version). */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/digest/digest_impl.h"
#include "common/mem/digest_key.h"
#include "common/mem/digest_runs.h"

#define TASK_BYTES (128u << 10) /* about this much per task (per GPU block) */
#define CUT_BYTES (4u << 10)    /* rows longer than LONG_ROW are cut into rows of this */
/* A block reads its task's rows as one flat array (digest_cuda.cu), so
 * rows up to a task's size go whole, as many as fit (18944-byte column
 * slices: six a task; they were cut into 4 KiB rows, a task per row). */
#define LONG_ROW TASK_BYTES

int wsync_digest_runs_ok(const wsync_run2d_t *runs, size_t n)
{
    size_t k;
    for (k = 0; k < n; k++)
        if (runs[k].rows && runs[k].row_bytes &&
            ((runs[k].dst_off | runs[k].row_bytes | runs[k].src_off | (runs[k].rows > 1 ? runs[k].src_stride : 0)) %
             8))
            return 0;
    return 1;
}

typedef struct task_list {
    wsync_digest_task_t *t;
    size_t n, cap;
} task_list_t;

/* Tasks for `rows` rows of `row_bytes` (<= LONG_ROW or a single-row cut)
 * read from src_off at `stride`, whose row 0 is destination word `word0` of
 * a segment keyed `base`. */
static wsync_status_t add_rows(task_list_t *l, uint64_t src_off, uint64_t stride, uint64_t row_bytes,
                               uint64_t rows, uint64_t base, uint64_t word0, const wsync_digest_seg2_t *sg)
{
    const uint64_t per = row_bytes >= TASK_BYTES ? 1 : TASK_BYTES / row_bytes;
    uint64_t r;
    if (rows > UINT32_MAX || row_bytes / 8 > UINT32_MAX || stride / 8 > UINT32_MAX ||
        (sg->sum2 != WSYNC_DIGEST_NO_SUM && src_off < sg->src2))
        return wsync_error(WSYNC_ERR_INVALID, "digest runs: a run of %llu rows of %llu bytes is too large",
                           (unsigned long long)rows, (unsigned long long)row_bytes);
    for (r = 0; r < rows; r += per) {
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 256;
            wsync_digest_task_t *t = realloc(l->t, cap * sizeof(*t));
            WSYNC_CHECK_ALLOC(t);
            l->t = t;
            l->cap = cap;
        }
        l->t[l->n++] = (wsync_digest_task_t){.src_off = src_off,
                                             .src_stride = stride,
                                             .key0 = base + word0 * WSYNC_DIGEST_GOLDEN,
                                             .row_words = (uint32_t)(row_bytes / 8),
                                             .nrows = (uint32_t)(rows - r < per ? rows - r : per),
                                             .row0 = (uint32_t)r,
                                             .seg = sg->sum,
                                             .seg1 = WSYNC_DIGEST_NO_SUM};
        if (sg->sum2 != WSYNC_DIGEST_NO_SUM) { /* word w of row r sits (src_off - src2) / 8 + r stride / 8 + w */
            wsync_digest_task_t *t = &l->t[l->n - 1];
            t->key1 = wsync_digest_base_key(sg->off2) + (src_off - sg->src2) / 8 * WSYNC_DIGEST_GOLDEN;
            t->step1 = (uint32_t)(stride / 8);
            t->seg1 = sg->sum2;
        }
    }
    return WSYNC_OK;
}

/* One run of segment `seg`: long rows are cut (each row a run of 4 KiB
 * rows, plus its remainder), contiguous rows first merged into one. */
static wsync_status_t add_run(task_list_t *l, const wsync_run2d_t *r, uint64_t base, const wsync_digest_seg2_t *sg)
{
    uint64_t rows = r->rows, row_bytes = r->row_bytes, stride = r->src_stride, i;
    if (rows == 0 || row_bytes == 0)
        return WSYNC_OK;
    if (rows == 1 || stride == row_bytes) { /* contiguous: one long row */
        row_bytes *= rows;
        rows = 1;
        stride = 0;
    }
    if (row_bytes <= LONG_ROW)
        return add_rows(l, r->src_off, stride, row_bytes, rows, base, r->dst_off / 8, sg);
    for (i = 0; i < rows; i++) {
        const uint64_t src = r->src_off + i * stride, word = (r->dst_off + i * row_bytes) / 8;
        const uint64_t whole = row_bytes / CUT_BYTES, rest = row_bytes % CUT_BYTES;
        WSYNC_CHECK(add_rows(l, src, CUT_BYTES, CUT_BYTES, whole, base, word, sg));
        if (rest)
            WSYNC_CHECK(add_rows(l, src + whole * CUT_BYTES, 0, rest, 1, base, word + whole * (CUT_BYTES / 8), sg));
    }
    return WSYNC_OK;
}

wsync_status_t wsync_digest_tasks2(const wsync_digest_seg2_t *segs, size_t n, wsync_digest_task_t **out,
                                   size_t *ntasks)
{
    task_list_t l = {0};
    wsync_status_t st = WSYNC_OK;
    size_t i, k;
    for (i = 0; i < n && st == WSYNC_OK; i++) {
        const wsync_digest_seg_t *sg = &segs[i].seg;
        const uint64_t base = wsync_digest_base_key(sg->dst_off);
        if (!wsync_digest_runs_ok(sg->runs, sg->nruns) || (segs[i].sum2 != WSYNC_DIGEST_NO_SUM && segs[i].src2 % 8)) {
            st = wsync_error(WSYNC_ERR_INVALID,
                             "digest runs: segment %zu (destination offset %llu) has a run that is not whole "
                             "words; pack and digest it instead",
                             i, (unsigned long long)sg->dst_off);
            break;
        }
        for (k = 0; k < sg->nruns && st == WSYNC_OK; k++)
            st = add_run(&l, &sg->runs[k], base, &segs[i]);
    }
    if (st != WSYNC_OK) {
        free(l.t);
        return st;
    }
    *out = l.t;
    *ntasks = l.n;
    return WSYNC_OK;
}

/* The segments as summed one way, each into its own sum. */
static wsync_digest_seg2_t *one_way(const wsync_digest_seg_t *segs, size_t n)
{
    wsync_digest_seg2_t *s2 = calloc(n + 1, sizeof(*s2));
    size_t i;
    for (i = 0; s2 && i < n; i++)
        s2[i] = (wsync_digest_seg2_t){.seg = segs[i], .sum = (uint32_t)i, .sum2 = WSYNC_DIGEST_NO_SUM};
    return s2;
}

wsync_status_t wsync_digest_tasks(const wsync_digest_seg_t *segs, size_t n, wsync_digest_task_t **out, size_t *ntasks)
{
    wsync_digest_seg2_t *s2;
    wsync_status_t st;
    if (n > UINT32_MAX - 1)
        return wsync_error(WSYNC_ERR_INVALID, "digest runs: %zu segments is too many", n);
    s2 = one_way(segs, n);
    WSYNC_CHECK_ALLOC(s2);
    st = wsync_digest_tasks2(s2, n, out, ntasks);
    free(s2);
    return st;
}

void wsync_digest_tasks_host(const wsync_digest_task_t *t, size_t n, const void *src_base, uint64_t *sums)
{
    const unsigned char *src = src_base;
    const uint64_t G = WSYNC_DIGEST_GOLDEN;
    size_t i;
    uint32_t r;
    for (i = 0; i < n; i++) {
        const int two = t[i].seg1 != WSYNC_DIGEST_NO_SUM;
        uint64_t s = 0, s1 = 0;
        for (r = t[i].row0; r < t[i].row0 + t[i].nrows; r++) { /* a row's words are keyed key, key + G, ... */
            const unsigned char *row = src + t[i].src_off + (uint64_t)r * t[i].src_stride;
            const uint64_t key = t[i].key0 + (uint64_t)r * t[i].row_words * G, bytes = 8 * (uint64_t)t[i].row_words;
            s += wsync_digest_sum(row, bytes, wsync_digest_off_of_base(key));
            if (two) /* the same row again, from the cache */
                s1 += wsync_digest_sum(row, bytes,
                                       wsync_digest_off_of_base(t[i].key1 + (uint64_t)r * t[i].step1 * G));
        }
        __atomic_fetch_add(&sums[t[i].seg], s, __ATOMIC_RELAXED);
        if (two)
            __atomic_fetch_add(&sums[t[i].seg1], s1, __ATOMIC_RELAXED);
    }
}

#if WSYNC_HAVE_CUDA
#include "common/base/cuda_checks.h"
#include "common/mem/digest_cuda.h"
#include "common/mem/cuda_stream.h"

struct wsync_digest_runs_plan {
    int device;
    size_t ntasks, nsegs;
    wsync_digest_task_t *dev_tasks;
};

/* Per thread: device sums and their pinned copy, grown as needed. */
static __thread uint64_t *tls_dsum, *tls_hsum;
static __thread size_t tls_cap;
static __thread int tls_dev = -1;

static void free_thread_sums(void)
{
    cudaFree(tls_dsum);
    cudaFreeHost(tls_hsum);
    tls_dsum = tls_hsum = NULL;
    tls_cap = 0;
    tls_dev = -1;
}

wsync_status_t wsync_digest_runs_prepare2(const wsync_digest_seg2_t *segs, size_t n, size_t nsums,
                                          wsync_digest_runs_plan_t **out)
{
    wsync_digest_runs_plan_t *p = calloc(1, sizeof(*p));
    wsync_digest_task_t *t = NULL;
    wsync_status_t st;
    cudaStream_t s;
    WSYNC_CHECK_ALLOC(p);
    p->nsegs = nsums;
    st = wsync_cuda_stream(&p->device, &s, NULL);
    if (st == WSYNC_OK)
        st = wsync_digest_tasks2(segs, n, &t, &p->ntasks);
    if (st == WSYNC_OK && p->ntasks) {
        cudaError_t e = cudaMalloc((void **)&p->dev_tasks, p->ntasks * sizeof(*t));
        if (e == cudaSuccess)
            e = cudaMemcpy(p->dev_tasks, t, p->ntasks * sizeof(*t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = wsync_error(WSYNC_ERR_CUDA, "digest runs: uploading %zu tasks: %s", p->ntasks,
                             cudaGetErrorString(e));
    }
    free(t);
    if (st != WSYNC_OK) {
        wsync_digest_runs_free(p);
        return st;
    }
    *out = p;
    return WSYNC_OK;
}

wsync_status_t wsync_digest_runs_prepare(const wsync_digest_seg_t *segs, size_t n, wsync_digest_runs_plan_t **out)
{
    wsync_digest_seg2_t *s2 = n < UINT32_MAX ? one_way(segs, n) : NULL;
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(s2);
    st = wsync_digest_runs_prepare2(s2, n, n, out);
    free(s2);
    return st;
}

wsync_status_t wsync_digest_runs_start(const wsync_digest_runs_plan_t *p, const void *src_base)
{
    cudaStream_t s;
    int d, e;
    if (p->nsegs == 0)
        return WSYNC_OK;
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, NULL));
    if (d != p->device)
        return wsync_error(WSYNC_ERR_INVALID, "digest runs: plan of cuda:%d used on cuda:%d", p->device, d);
    if (tls_dev != d || tls_cap < p->nsegs) {
        cudaFree(tls_dsum);
        cudaFreeHost(tls_hsum);
        tls_dsum = tls_hsum = NULL;
        tls_cap = 0;
        CUDA_CHECK(cudaMalloc((void **)&tls_dsum, p->nsegs * sizeof(uint64_t)));
        CUDA_CHECK(cudaMallocHost((void **)&tls_hsum, p->nsegs * sizeof(uint64_t)));
        tls_cap = p->nsegs;
        tls_dev = d;
        wsync_cuda_at_thread_exit(free_thread_sums);
    }
    CUDA_CHECK(cudaMemsetAsync(tls_dsum, 0, p->nsegs * sizeof(uint64_t), s));
    if (p->ntasks && (e = wsync_cuda_digest_tasks_async(p->dev_tasks, p->ntasks, src_base, tls_dsum, s)) != 0)
        return wsync_error(WSYNC_ERR_CUDA, "digest runs kernel: %s", cudaGetErrorString((cudaError_t)e));
    CUDA_CHECK(cudaMemcpyAsync(tls_hsum, tls_dsum, p->nsegs * sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
    return WSYNC_OK;
}

wsync_status_t wsync_digest_runs_wait(const wsync_digest_runs_plan_t *p, uint64_t *sums)
{
    cudaStream_t s;
    cudaEvent_t ev;
    int d;
    if (p->nsegs == 0)
        return WSYNC_OK;
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, &ev));
    CUDA_CHECK(cudaEventRecord(ev, s));
    CUDA_CHECK(cudaEventSynchronize(ev));
    memcpy(sums, tls_hsum, p->nsegs * sizeof(uint64_t));
    return WSYNC_OK;
}

wsync_status_t wsync_digest_runs_sums(const wsync_digest_runs_plan_t *p, const void *src_base, uint64_t *sums)
{
    WSYNC_CHECK(wsync_digest_runs_start(p, src_base));
    return wsync_digest_runs_wait(p, sums);
}

void wsync_digest_runs_free(wsync_digest_runs_plan_t *p)
{
    if (p == NULL)
        return;
    cudaFree(p->dev_tasks);
    free(p);
}

#else

wsync_status_t wsync_digest_runs_prepare(const wsync_digest_seg_t *segs, size_t n, wsync_digest_runs_plan_t **out)
{
    (void)segs;
    (void)n;
    *out = NULL;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "digest runs on a GPU: this build has no CUDA");
}

wsync_status_t wsync_digest_runs_prepare2(const wsync_digest_seg2_t *segs, size_t n, size_t nsums,
                                          wsync_digest_runs_plan_t **out)
{
    (void)segs;
    (void)n;
    (void)nsums;
    *out = NULL;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "digest runs on a GPU: this build has no CUDA");
}

wsync_status_t wsync_digest_runs_start(const wsync_digest_runs_plan_t *p, const void *src_base)
{
    (void)p;
    (void)src_base;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "digest runs on a GPU: this build has no CUDA");
}

wsync_status_t wsync_digest_runs_wait(const wsync_digest_runs_plan_t *p, uint64_t *sums)
{
    (void)p;
    (void)sums;
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "digest runs on a GPU: this build has no CUDA");
}

wsync_status_t wsync_digest_runs_sums(const wsync_digest_runs_plan_t *p, const void *src_base, uint64_t *sums)
{
    WSYNC_CHECK(wsync_digest_runs_start(p, src_base));
    return wsync_digest_runs_wait(p, sums);
}

void wsync_digest_runs_free(wsync_digest_runs_plan_t *p)
{
    (void)p;
}
#endif
