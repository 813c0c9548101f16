/* snapshot.c: one version's digests and snapshot copy. publish() digests every
 * piece this rank sends straight from the caller's extents, announces the
 * version, and only then copies the pieces into the publish slot (unless
 * zero-copy) while engines already pull: the pull server waits for each
 * piece's copy (pub_slot_t.copied), so the copy overlaps the transfer instead
 * of delaying every engine's start. With host memory several threads take the
 * pieces: one core's memory bandwidth (about 10 GB/s) is what bounds the
 * digest and the copy, and a trainer host has cores to spare while it
 * publishes. */
#include "trainer_side/publisher_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/settings.h"

#define SNAP_MAX_THREADS 8
/* Copy threads share each piece in blocks of this size, in plan order: the
 * first piece is ready after 64 MiB / (all threads' bandwidth), not after
 * every thread has copied a piece of its own (8 threads: 8x sooner). */
#define COPY_BLOCK (8u << 20)
/* GPU memory is copied extent by extent on one thread, in parts of this
 * size, each part waking the pulls of the pieces it completed: one device
 * copy per piece costs a wait each (on two H200s, publish() of a 7B model's
 * half returned ~12 ms later than with whole extents), one copy per extent
 * holds every pull until it is done. */
#define COPY_PART_GPU ((uint64_t)1 << 30)

/* Units of work (pieces, copy blocks or extents) shared among threads. */
struct pub_work {
    wsync_publisher_t *p;
    pub_slot_t *s;
    uint64_t *sums; /* digest: per piece of mine, in my_pieces order */
    wsync_status_t (*unit)(pub_work_t *w, size_t i);
    size_t nunits;
    size_t next; /* next unit to take (atomic) */
    pthread_t tid[SNAP_MAX_THREADS];
    int started;
    long corrupt_piece; /* test hooks (see pub_copy_start), -1: none */
    long fail_piece;
    int delay_ms;
    uint64_t block;       /* copy by blocks: bytes per block */
    size_t *first_block;  /* copy by blocks: [nmy + 1], where my piece i starts */
    uint32_t *left;       /* copy by blocks: blocks of piece i still to copy (atomic) */
    pthread_mutex_t lock; /* guards st and why */
    wsync_status_t st;
    char why[512];
};

/* Where my piece i lies in the caller's memory and in slot s. */
static const char *piece_src(const wsync_publisher_t *p, size_t i)
{
    const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[i]];
    const wsync_owned_t *o = &p->share.owned[p->share.piece_slot_off[pc->id]];
    return (const char *)o->ptr + (pc->offset - o->offset);
}

static char *piece_dst(const wsync_publisher_t *p, const pub_slot_t *s, size_t i)
{
    const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[i]];
    const pub_span_t *sp = &s->spans[p->share.piece_slot_off[pc->id]];
    return (char *)sp->ptr + (pc->offset - sp->offset);
}

static wsync_status_t digest_unit(pub_work_t *w, size_t i)
{
    const wsync_piece_t *pc = &w->p->sl->plan->pieces[w->p->share.my_pieces[i]];
    return w->p->mem->digest_sum(piece_src(w->p, i), pc->len, pc->offset, &w->sums[i]);
}

/* Test hook: flip one byte of my piece i in the slot, as a bad link would. */
static void corrupt(pub_work_t *w, size_t i)
{
    const wsync_piece_t *pc = &w->p->sl->plan->pieces[w->p->share.my_pieces[i]];
    unsigned char *b, v;
    if ((long)pc->id != w->corrupt_piece || pc->len == 0)
        return;
    b = (unsigned char *)piece_dst(w->p, w->s, i) + pc->len / 2;
    w->p->mem->copy(&v, b, 1);
    v ^= 0x10;
    w->p->mem->copy(b, &v, 1);
    LOG_WARN("test hook: flipped one byte of piece %u", pc->id);
}

/* My pieces inside extent k (every one when k < 0) are in the slot: wake
 * the pulls waiting for them. */
static void mark_copied(pub_work_t *w, size_t i, long k)
{
    wsync_publisher_t *p = w->p;
    pthread_mutex_lock(&p->lock);
    if (k < 0)
        w->s->copied[i] = 1;
    else
        for (i = 0; i < p->share.nmy; i++)
            if (p->share.piece_slot_off[p->share.my_pieces[i]] == (uint64_t)k)
                w->s->copied[i] = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* My piece that copy block b belongs to. */
static size_t block_piece(const pub_work_t *w, size_t b)
{
    size_t lo = 0, hi = w->p->share.nmy; /* first_block[lo] <= b < first_block[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->first_block[mid] <= b)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static wsync_status_t copy_block_unit(pub_work_t *w, size_t b)
{
    wsync_publisher_t *p = w->p;
    size_t i = block_piece(w, b);
    const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[i]];
    uint64_t off = (uint64_t)(b - w->first_block[i]) * w->block;
    uint64_t len = pc->len - off < w->block ? pc->len - off : w->block;
    if (off == 0 && w->delay_ms > 0)
        usleep((useconds_t)w->delay_ms * 1000);
    if (off == 0 && (long)pc->id == w->fail_piece)
        return wsync_error(WSYNC_ERR_IO, "test hook: the copy of piece %u failed", pc->id);
    WSYNC_CHECK(p->mem->copy(piece_dst(p, w->s, i) + off, piece_src(p, i) + off, len));
    if (__atomic_sub_fetch(&w->left[i], 1, __ATOMIC_ACQ_REL) == 0) {
        corrupt(w, i);
        mark_copied(w, i, -1);
    }
    return WSYNC_OK;
}

/* Extent k, for GPU memory or pieces that do not tile the extents: in
 * COPY_PART_GPU parts, each waking the pulls of the pieces it completed
 * (pieces that do not tile: the whole extent, then every piece in it). */
static wsync_status_t copy_extent_unit(pub_work_t *w, size_t k)
{
    wsync_publisher_t *p = w->p;
    size_t i;
    if (w->delay_ms > 0)
        usleep((useconds_t)w->delay_ms * 1000);
    for (i = 0; i < p->share.nmy; i++)
        if (p->share.piece_slot_off[p->share.my_pieces[i]] == k && (long)p->share.my_pieces[i] == w->fail_piece)
            return wsync_error(WSYNC_ERR_IO, "test hook: the copy of piece %u failed", p->share.my_pieces[i]);
    if (!p->share.pieces_tile) {
        WSYNC_CHECK(p->mem->copy(w->s->spans[k].ptr, p->share.owned[k].ptr, p->share.owned[k].len));
        for (i = 0; i < p->share.nmy; i++)
            if (p->share.piece_slot_off[p->share.my_pieces[i]] == k)
                corrupt(w, i);
        mark_copied(w, 0, (long)k);
        return WSYNC_OK;
    }
    /* In parts; my pieces in extent k come in offset order. */
    {
        uint64_t done = 0, base = p->share.owned[k].offset;
        size_t next = 0;
        while (done < p->share.owned[k].len) {
            uint64_t len = p->share.owned[k].len - done < COPY_PART_GPU ? p->share.owned[k].len - done
                                                                        : COPY_PART_GPU;
            WSYNC_CHECK(
                p->mem->copy((char *)w->s->spans[k].ptr + done, (const char *)p->share.owned[k].ptr + done, len));
            done += len;
            for (; next < p->share.nmy; next++) {
                const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[next]];
                if (p->share.piece_slot_off[pc->id] != k)
                    continue;
                if (pc->offset + pc->len > base + done)
                    break;
                corrupt(w, next);
                mark_copied(w, next, -1);
            }
        }
    }
    return WSYNC_OK;
}

static void *work_main(void *arg)
{
    pub_work_t *w = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        wsync_status_t st;
        if (i >= w->nunits)
            break;
        st = w->unit(w, i);
        if (st != WSYNC_OK) {
            pthread_mutex_lock(&w->lock);
            if (w->st == WSYNC_OK) {
                w->st = st;
                snprintf(w->why, sizeof(w->why), "%s", wsync_last_error());
            }
            pthread_mutex_unlock(&w->lock);
            __atomic_store_n(&w->next, w->nunits, __ATOMIC_RELAXED); /* the others stop too */
        }
    }
    return NULL;
}

/* Starts up to nt threads (fewer if they cannot start: the caller's share
 * in work_finish then does the rest). */
static void work_start(pub_work_t *w, int nt)
{
    pthread_mutex_init(&w->lock, NULL);
    w->st = WSYNC_OK;
    if ((size_t)nt > w->nunits)
        nt = (int)w->nunits;
    for (; w->started < nt; w->started++)
        if (pthread_create(&w->tid[w->started], NULL, work_main, w) != 0)
            break;
}

/* The caller helps (help), or stops what is not started yet (abandon), and
 * joins the threads; the first failure, if any. */
static wsync_status_t work_finish(pub_work_t *w, int help, int abandon)
{
    int i;
    if (abandon)
        __atomic_store_n(&w->next, w->nunits, __ATOMIC_RELAXED);
    if (help || w->started == 0)
        work_main(w);
    for (i = 0; i < w->started; i++)
        pthread_join(w->tid[i], NULL);
    pthread_mutex_destroy(&w->lock);
    if (w->st != WSYNC_OK)
        return wsync_error(w->st, "%s", w->why);
    return WSYNC_OK;
}

int pub_snapshot_threads(int asked)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (asked <= 0)
        asked = (int)wsync_setting_int(WSYNC_SET_PUBLISH_THREADS); /* 0: one per CPU */
    if (asked > 0)
        return asked < SNAP_MAX_THREADS ? asked : SNAP_MAX_THREADS;
    return n < 1 ? 1 : n > SNAP_MAX_THREADS ? SNAP_MAX_THREADS : (int)n;
}

static int host_memory(const wsync_publisher_t *p)
{
    return p->mem == &wsync_mem_host;
}

wsync_status_t pub_digest(wsync_publisher_t *p, uint64_t *sums)
{
    pub_work_t w = {.p = p, .sums = sums, .unit = digest_unit, .nunits = p->share.nmy};
    if (!host_memory(p)) {
        /* GPU: every piece's kernel queued back to back, one wait for all
         * (not one wait per piece). */
        wsync_digest_range_t *rg = calloc(p->share.nmy ? p->share.nmy : 1, sizeof(*rg));
        wsync_status_t st;
        size_t i;
        WSYNC_CHECK_ALLOC(rg);
        for (i = 0; i < p->share.nmy; i++) {
            const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[i]];
            rg[i] = (wsync_digest_range_t){.ptr = piece_src(p, i), .len = pc->len, .off = pc->offset};
        }
        st = p->mem->digest_many(rg, p->share.nmy, sums);
        free(rg);
        return st;
    }
    work_start(&w, p->snap_threads - 1);
    return work_finish(&w, 1, 0);
}

/* GPU memory: every piece's digest queued as one job on this thread's
 * stream (a batched launch per 64 pieces), left running while the caller
 * reports; pub_digest_finish waits for it. Host memory: nothing yet (the
 * threads run in pub_digest_finish). */
wsync_status_t pub_digest_start(wsync_publisher_t *p, wsync_mem_job_t **job)
{
    wsync_digest_range_t *rg;
    wsync_status_t st;
    size_t i;
    *job = NULL;
    if (host_memory(p) || p->share.nmy == 0)
        return WSYNC_OK;
    rg = calloc(p->share.nmy, sizeof(*rg));
    WSYNC_CHECK_ALLOC(rg);
    for (i = 0; i < p->share.nmy; i++) {
        const wsync_piece_t *pc = &p->sl->plan->pieces[p->share.my_pieces[i]];
        rg[i] = (wsync_digest_range_t){.ptr = piece_src(p, i), .len = pc->len, .off = pc->offset};
    }
    /* nothing copied (len 0): the ranges' digests alone */
    st = p->mem->copy_digest_start((void *)rg[0].ptr, rg[0].ptr, 0, rg, p->share.nmy, job);
    free(rg);
    return st;
}

wsync_status_t pub_digest_finish(wsync_publisher_t *p, wsync_mem_job_t *job, uint64_t *sums)
{
    wsync_status_t st;
    int done = 0;
    if (job == NULL)
        return p->share.nmy && host_memory(p) ? pub_digest(p, sums) : WSYNC_OK;
    st = p->mem->job_poll(job, 1, sums, &done);
    p->mem->job_free(job);
    if (st == WSYNC_OK && !done)
        st = wsync_error(WSYNC_ERR_CUDA, "trainer rank %d: the digest job did not finish", p->cfg.rank);
    return st;
}

wsync_status_t pub_copy_start(wsync_publisher_t *p, pub_slot_t *s, pub_work_t **out)
{
    pub_work_t *w = calloc(1, sizeof(*w));
    WSYNC_CHECK_ALLOC(w);
    w->p = p;
    w->s = s;
    /* Block by block when the pieces tile the extents (they do for every
     * plan wsync builds) and the memory is the host's; otherwise extents. */
    if (host_memory(p) && p->share.pieces_tile) {
        size_t i;
        w->block = COPY_BLOCK;
        w->first_block = calloc(p->share.nmy + 1, sizeof(*w->first_block));
        w->left = calloc(p->share.nmy ? p->share.nmy : 1, sizeof(*w->left));
        if (w->first_block == NULL || w->left == NULL) {
            free(w->first_block);
            free(w->left);
            free(w);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory starting a snapshot copy");
        }
        for (i = 0; i < p->share.nmy; i++) {
            uint64_t len = p->sl->plan->pieces[p->share.my_pieces[i]].len;
            w->left[i] = len > w->block ? (uint32_t)((len + w->block - 1) / w->block) : 1;
            w->first_block[i + 1] = w->first_block[i] + w->left[i];
        }
        w->unit = copy_block_unit;
        w->nunits = w->first_block[p->share.nmy];
    } else {
        w->unit = copy_extent_unit;
        w->nunits = p->share.nspans;
    }
    /* Test hooks (common/base/fault.h): corrupt a piece after its digest, fail
     * a piece's copy, or slow every copy. */
    w->corrupt_piece = wsync_fault(WSYNC_FAULT_CORRUPT_PIECE);
    w->fail_piece = wsync_fault(WSYNC_FAULT_COPY_FAIL_PIECE);
    w->delay_ms = (int)wsync_fault(WSYNC_FAULT_COPY_DELAY_MS);
    /* Host memory: every thread copies while the caller reports. GPU memory
     * copies on the caller's thread after the report (a thread per publish
     * would leave a CUDA stream behind each time). */
    work_start(w, host_memory(p) ? p->snap_threads : 0);
    *out = w;
    return WSYNC_OK;
}

wsync_status_t pub_copy_finish(pub_work_t *w, int abandon)
{
    wsync_status_t st = work_finish(w, 0, abandon);
    free(w->first_block);
    free(w->left);
    free(w);
    return st;
}
