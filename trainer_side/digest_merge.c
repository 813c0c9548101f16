/* digest_merge.c: one read of a trainer rank's share for both of its
 * digests. The record's piece digests (R: every version, at publish) and a
 * node plan's put digests (T: target_digests.c, after the version's first
 * request) are word sums over the same source bytes under different keys
 * (a piece's offset, a put's destination offset). On one H200 serving a
 * TP=2 node (bench/RESULTS.md, 2026-12-04) the two reads of the 15.2 GB
 * model shared the GPU's memory with the puts: T alone was ~3.5 ms of a
 * 23 ms version. For a node plan whose puts were digested before (every
 * version after a layout's first), the publish's digest pass reads each
 * source word once and sums it into its piece and its put: one digest-runs
 * launch (digest_runs.h) whose tasks carry a second key, on the host the
 * same tasks on the publish threads.
 *
 * The tasks. Every row of every put of mine is cut at my pieces' bounds and
 * swept in image order: a row's bytes no earlier row counted go to its put
 * and its piece; bytes another put already read (replicated tensors, such
 * as norms, land on every rank) go to the put alone; bytes of a piece no
 * put reads go to the piece alone. So each piece sums each of its words
 * once, each put each of its own. Rows of one run that go the same way
 * stay one strided task. Anything not in whole words, not in one memory
 * area, or not in my pieces (FP8 bands) leaves the plan unmerged: T is then
 * computed the old way. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/digest/digest.h"
#include "common/mem/digest_runs.h"
#include "trainer_side/digest_merge.h"
#include "trainer_side/publisher_internal.h"

#define HOST_BLOCK 64 /* tasks a publish thread takes at a time */

struct pub_merge {
    const wsync_node_plan_t *np;
    const uint32_t *put_ids; /* np->rank_puts[me]: sums [0, nput) */
    size_t nput, nmy;        /* my pieces: sums [nput, nput + nmy), in my_pieces order */
    int area;
    wsync_digest_task_t *tasks; /* host memory */
    size_t ntasks;
    wsync_digest_runs_plan_t *plan; /* GPU memory */
};

/* A row of a put (or its part inside one piece). */
typedef struct mrow {
    uint64_t img, len; /* its image bytes */
    uint64_t dst;      /* its offset inside the put */
    uint64_t row;      /* in its run */
    size_t run;        /* np->runs index */
    uint32_t put;      /* index in my puts */
    uint32_t piece;    /* index in my pieces */
    uint64_t tonly;    /* its first tonly bytes count for the put alone */
} mrow_t;

typedef struct mbuild {
    const wsync_publisher_t *p;
    const wsync_node_plan_t *np;
    const uint32_t *ids; /* my puts */
    size_t *ord;         /* my pieces by offset */
    uint64_t *area_off;  /* [nmy] where each piece starts in the area */
    int area;
    mrow_t *rows;
    size_t nrows, caprows;
    wsync_digest_seg2_t *segs;
    wsync_run2d_t *runs; /* segs[i].seg.runs = &runs[i] */
    size_t nsegs, capsegs;
} mbuild_t;

static const wsync_piece_t *my_piece(const wsync_publisher_t *p, size_t i)
{
    return &p->sl->plan->pieces[p->share.my_pieces[i]];
}

static int by_offset(const void *a, const void *b, void *arg)
{
    const wsync_publisher_t *p = arg;
    uint64_t x = my_piece(p, *(const size_t *)a)->offset, y = my_piece(p, *(const size_t *)b)->offset;
    return x < y ? -1 : x > y;
}

/* My pieces in offset order, each whole words in one memory area of s. */
static int merge_pieces(mbuild_t *b, const pub_slot_t *s)
{
    const wsync_publisher_t *p = b->p;
    size_t i;
    b->area = -1;
    for (i = 0; i < p->share.nmy; i++) {
        const wsync_piece_t *pc = my_piece(p, i);
        const pub_span_t *sp = &s->spans[p->share.piece_slot_off[pc->id]];
        b->ord[i] = i;
        b->area_off[i] = sp->area_off + (pc->offset - sp->offset);
        if (sp->area < 0 || (b->area >= 0 && sp->area != b->area) || pc->len % 8 || b->area_off[i] % 8)
            return 0;
        b->area = sp->area;
    }
    qsort_r(b->ord, p->share.nmy, sizeof(*b->ord), by_offset, (void *)p);
    return b->area >= 0 && (uintptr_t)s->area_ptr[b->area] % 8 == 0;
}

/* The position in ord of my piece holding image byte off, or -1. */
static long piece_at(const mbuild_t *b, uint64_t off)
{
    size_t lo = 0, hi = b->p->share.nmy;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const wsync_piece_t *pc = my_piece(b->p, b->ord[mid]);
        if (off < pc->offset)
            hi = mid;
        else if (off >= pc->offset + pc->len)
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

/* Room for every row of my puts, each cut at most once per piece bound and
 * run (a run's rows are disjoint), and for the segments: at most two a row
 * and a gap before each row and at each piece's end. */
static int merge_room(mbuild_t *b, size_t nput)
{
    size_t k, j, rows = 0, runs = 0;
    for (k = 0; k < nput; k++) {
        const wsync_tput_t *pu = &b->np->puts[b->ids[k]];
        for (j = pu->first_run; j < pu->first_run + pu->nruns; j++)
            rows += b->np->runs[j].rows;
        runs += pu->nruns;
    }
    b->caprows = rows + (b->p->share.nmy + 1) * (runs + 1);
    b->capsegs = 3 * b->caprows + b->p->share.nmy + 1;
    b->rows = malloc(b->caprows * sizeof(*b->rows));
    b->segs = malloc(b->capsegs * sizeof(*b->segs));
    b->runs = malloc(b->capsegs * sizeof(*b->runs));
    return b->rows && b->segs && b->runs;
}

/* Rows fit (merge_room). */
static int add_row(mbuild_t *b, const mrow_t *r)
{
    if (b->nrows == b->caprows)
        return 0;
    b->rows[b->nrows++] = *r;
    return 1;
}

/* Every row of my puts, cut at my pieces' bounds; 0 when a byte is not in
 * my pieces (or out of memory). */
static int merge_rows(mbuild_t *b, size_t nput)
{
    size_t k, j;
    uint64_t r;
    for (k = 0; k < nput; k++) {
        const wsync_tput_t *pu = &b->np->puts[b->ids[k]];
        if (pu->len % 8)
            return 0;
        for (j = pu->first_run; j < pu->first_run + pu->nruns; j++) {
            const wsync_run2d_t *rn = &b->np->runs[j];
            for (r = 0; r < rn->rows; r++) {
                uint64_t at = rn->src_off + r * rn->src_stride, done = 0;
                while (done < rn->row_bytes) {
                    long q = piece_at(b, at + done);
                    const wsync_piece_t *pc = q < 0 ? NULL : my_piece(b->p, b->ord[q]);
                    uint64_t len, end;
                    if (pc == NULL)
                        return 0;
                    end = pc->offset + pc->len;
                    len = end - (at + done) < rn->row_bytes - done ? end - (at + done) : rn->row_bytes - done;
                    if (!add_row(b, &(mrow_t){.img = at + done,
                                              .len = len,
                                              .dst = rn->dst_off + r * rn->row_bytes + done,
                                              .row = r,
                                              .run = j,
                                              .put = (uint32_t)k,
                                              .piece = (uint32_t)b->ord[q]}))
                        return 0;
                    done += len;
                }
            }
        }
    }
    return 1;
}

static int by_image(const void *a, const void *b, void *arg)
{
    const mrow_t *rows = arg, *x = &rows[*(const size_t *)a], *y = &rows[*(const size_t *)b];
    if (x->img != y->img)
        return x->img < y->img ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Segments fit: at most two a row and one gap a row and piece. */
static wsync_run2d_t *add_seg(mbuild_t *b, uint64_t dst_off, uint32_t sum, uint32_t sum2, uint32_t piece)
{
    const wsync_piece_t *pc = my_piece(b->p, piece);
    if (b->nsegs == b->capsegs)
        return NULL;
    b->segs[b->nsegs] = (wsync_digest_seg2_t){.seg = {.dst_off = dst_off, .nruns = 1},
                                              .sum = sum,
                                              .sum2 = sum2,
                                              .off2 = pc->offset,
                                              .src2 = b->area_off[piece]};
    return &b->runs[b->nsegs++];
}

/* Bytes [img, img + len) of piece i as a task summed into the piece alone. */
static int add_gap(mbuild_t *b, size_t nput, uint32_t i, uint64_t img, uint64_t len)
{
    const wsync_piece_t *pc = my_piece(b->p, i);
    wsync_run2d_t *r = len ? add_seg(b, pc->offset, (uint32_t)(nput + i), WSYNC_DIGEST_NO_SUM, i) : NULL;
    if (len && r == NULL)
        return 0;
    if (r)
        *r = (wsync_run2d_t){.src_off = b->area_off[i] + (img - pc->offset),
                             .row_bytes = len,
                             .rows = 1,
                             .dst_off = img - pc->offset};
    return 1;
}

/* In image order: each row's bytes an earlier row covered count for its put
 * alone (tonly), and every piece's bytes no row covers become tasks of
 * their own. */
static int merge_sweep(mbuild_t *b, size_t nput)
{
    size_t *idx = malloc((b->nrows + 1) * sizeof(*idx)), at = 0, q, k;
    int ok = idx != NULL;
    for (k = 0; ok && k < b->nrows; k++)
        idx[k] = k;
    if (ok)
        qsort_r(idx, b->nrows, sizeof(*idx), by_image, b->rows);
    for (q = 0; ok && q < b->p->share.nmy; q++) {
        const uint32_t i = (uint32_t)b->ord[q];
        const wsync_piece_t *pc = my_piece(b->p, i);
        uint64_t c = pc->offset; /* counted up to here */
        for (; ok && at < b->nrows && b->rows[idx[at]].piece == i; at++) {
            mrow_t *r = &b->rows[idx[at]];
            ok = add_gap(b, nput, i, c, r->img > c ? r->img - c : 0);
            r->tonly = c <= r->img ? 0 : c - r->img < r->len ? c - r->img : r->len;
            if (r->img + r->len > c)
                c = r->img + r->len;
        }
        if (ok)
            ok = add_gap(b, nput, i, c, pc->offset + pc->len - c);
    }
    free(idx);
    return ok;
}

/* A task of `rows` rows of row r's run from r on (a part of r alone when
 * rows is 1 and to - from < its row), summed into r's put and, unless the
 * bytes count for the put alone, into r's piece. */
static int add_rows(mbuild_t *b, size_t nput, const mrow_t *r, uint64_t from, uint64_t to, uint64_t rows)
{
    const wsync_piece_t *pc = my_piece(b->p, r->piece);
    const int both = from >= r->tonly;
    wsync_run2d_t *run = add_seg(b, b->np->puts[b->ids[r->put]].dst_off, r->put,
                                 both ? (uint32_t)(nput + r->piece) : WSYNC_DIGEST_NO_SUM, r->piece);
    if (run == NULL)
        return 0;
    *run = (wsync_run2d_t){.src_off = b->area_off[r->piece] + (r->img + from - pc->offset),
                           .src_stride = b->np->runs[r->run].src_stride,
                           .row_bytes = to - from,
                           .rows = rows,
                           .dst_off = r->dst + from};
    return 1;
}

/* The rows as tasks, in put order: consecutive whole rows of a run in one
 * piece that count alike stay one strided run; a row counted partly by an
 * earlier put is two. */
static int merge_segs(mbuild_t *b, size_t nput)
{
    size_t k = 0, m;
    while (k < b->nrows) {
        const mrow_t *r = &b->rows[k];
        const uint64_t row_bytes = b->np->runs[r->run].row_bytes;
        if (r->len != row_bytes || (r->tonly && r->tonly < r->len)) {
            if (r->tonly && !add_rows(b, nput, r, 0, r->tonly, 1))
                return 0;
            if (r->tonly < r->len && !add_rows(b, nput, r, r->tonly, r->len, 1))
                return 0;
            k++;
            continue;
        }
        for (m = 1; k + m < b->nrows; m++) {
            const mrow_t *n = &b->rows[k + m];
            if (n->run != r->run || n->row != r->row + m || n->piece != r->piece || n->len != row_bytes ||
                n->tonly != r->tonly)
                break;
        }
        if (!add_rows(b, nput, r, 0, r->len, m))
            return 0;
        k += m;
    }
    return 1;
}

void pub_merge_free(pub_merge_t *m)
{
    if (m) {
        free(m->tasks);
        wsync_digest_runs_free(m->plan);
    }
    free(m);
}

pub_merge_t *pub_merge_build(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np)
{
    const size_t nput = np->rank_nputs[p->cfg.rank], nmy = p->share.nmy;
    mbuild_t b = {.p = p, .np = np, .ids = np->rank_puts[p->cfg.rank]};
    pub_merge_t *m = NULL;
    wsync_status_t st = WSYNC_ERR_INVALID;
    size_t i;
    b.ord = calloc(nmy + 1, sizeof(*b.ord));
    b.area_off = calloc(nmy + 1, sizeof(*b.area_off));
    if (b.ord && b.area_off && nput + nmy < UINT32_MAX && merge_pieces(&b, s) && merge_room(&b, nput) &&
        merge_rows(&b, nput) && merge_sweep(&b, nput) && merge_segs(&b, nput) &&
        (m = calloc(1, sizeof(*m))) != NULL) {
        for (i = 0; i < b.nsegs; i++)
            b.segs[i].seg.runs = &b.runs[i];
        *m = (pub_merge_t){.np = np, .put_ids = b.ids, .nput = nput, .nmy = nmy, .area = b.area};
        if (p->mem->kind == WSYNC_MEM_HOST)
            st = wsync_digest_tasks2(b.segs, b.nsegs, &m->tasks, &m->ntasks);
        else
            st = wsync_digest_runs_prepare2(b.segs, b.nsegs, nput + nmy, &m->plan);
    }
    if (st != WSYNC_OK) {
        pub_merge_free(m);
        m = NULL;
    }
    wsync_trace("trainer rank %d: a node plan's put digests %s the record's (%zu puts, %zu rows, %zu runs)",
                p->cfg.rank, m ? "will be computed with" : "cannot be computed with", nput, b.nrows, b.nsegs);
    free(b.ord);
    free(b.area_off);
    free(b.rows);
    free(b.segs);
    free(b.runs);
    return m;
}

/* Host memory: the publish threads take the tasks in blocks. */
typedef struct host_run {
    const pub_merge_t *m;
    const void *base;
    uint64_t *sums;
    size_t next; /* atomic */
} host_run_t;

static void *host_main(void *arg)
{
    host_run_t *h = arg;
    for (;;) {
        size_t at = __atomic_fetch_add(&h->next, HOST_BLOCK, __ATOMIC_RELAXED);
        if (at >= h->m->ntasks)
            return NULL;
        wsync_digest_tasks_host(h->m->tasks + at, h->m->ntasks - at < HOST_BLOCK ? h->m->ntasks - at : HOST_BLOCK,
                                h->base, h->sums);
    }
}

static void host_sums(const wsync_publisher_t *p, const pub_merge_t *m, const void *base, uint64_t *sums)
{
    host_run_t h = {.m = m, .base = base, .sums = sums};
    pthread_t tid[8];
    int n = 0, i;
    while (n < p->snap_threads - 1 && n < 8 && pthread_create(&tid[n], NULL, host_main, &h) == 0)
        n++;
    host_main(&h);
    for (i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
}

wsync_status_t pub_merge_start(const wsync_publisher_t *p, const pub_merge_t *m, const pub_slot_t *s)
{
    return m->plan ? wsync_digest_runs_start(m->plan, s->area_ptr[m->area]) : WSYNC_OK;
}

wsync_status_t pub_merge_finish(const wsync_publisher_t *p, const pub_merge_t *m, const pub_slot_t *s,
                                uint64_t *rsums, json_t *puts)
{
    uint64_t *sums = calloc(m->nput + m->nmy + 1, sizeof(*sums));
    wsync_status_t st = WSYNC_OK;
    size_t k;
    WSYNC_CHECK_ALLOC(sums);
    if (m->plan)
        st = wsync_digest_runs_wait(m->plan, sums);
    else
        host_sums(p, m, s->area_ptr[m->area], sums);
    for (k = 0; st == WSYNC_OK && k < m->nput; k++)
        if (pub_put_digest(puts, sums[k], &m->np->puts[m->put_ids[k]]) != 0)
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st == WSYNC_OK)
        memcpy(rsums, sums + m->nput, m->nmy * sizeof(*rsums));
    free(sums);
    return st;
}

wsync_status_t pub_dpass_start(wsync_publisher_t *p, int slot, uint64_t version, pub_dpass_t *dp)
{
    const long long merge = wsync_setting_int(WSYNC_SET_DIGEST_MERGE); /* 0 auto, 1 on, 2 off */
    memset(dp, 0, sizeof(*dp));
    if (slot == PUB_DIRECT && p->share.nmy && (merge == 1 || (merge == 0 && p->mem->kind == WSYNC_MEM_CUDA)))
        pub_targets_merge_begin(p, &p->slots.slot[slot], version, &dp->m, &dp->d);
    if (dp->m && pub_merge_start(p, dp->m, &p->slots.slot[slot]) != WSYNC_OK) {
        LOG_WARN("trainer rank %d: version %llu: the digest pass with a node plan's puts did not start (%s); "
                 "the record's digests alone now",
                 p->cfg.rank, (unsigned long long)version, wsync_last_error());
        pub_targets_merge_end(p, dp->d, NULL);
        dp->m = NULL;
        dp->d = NULL;
    }
    return dp->m ? WSYNC_OK : pub_digest_start(p, &dp->job);
}

wsync_status_t pub_dpass_finish(wsync_publisher_t *p, int slot, uint64_t version, pub_dpass_t *dp, uint64_t *sums)
{
    json_t *puts;
    wsync_status_t st;
    if (dp->m == NULL)
        return pub_digest_finish(p, dp->job, sums);
    puts = json_object();
    st = puts ? pub_merge_finish(p, dp->m, &p->slots.slot[slot], sums, puts)
              : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st != WSYNC_OK) {
        LOG_WARN("trainer rank %d: version %llu: the digest pass with a node plan's puts failed (%s); the "
                 "record's digests are taken again, requests digest the puts",
                 p->cfg.rank, (unsigned long long)version, wsync_last_error());
        json_decref(puts);
        puts = NULL;
    }
    wsync_trace("trainer rank %d: version %llu: put digests of a node plan computed with the record's%s",
                p->cfg.rank, (unsigned long long)version, puts ? "" : ": failed");
    pub_targets_merge_end(p, dp->d, puts);
    return st == WSYNC_OK ? WSYNC_OK : pub_digest(p, sums);
}
