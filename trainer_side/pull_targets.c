/* pull_targets.c: serving a pull of an engine node whose ranks hold targets
 * (engine layouts). The request names every local rank's target by digest;
 * a target this rank has not seen comes with it (once per trainer rank and
 * layout) and is kept, as is the node plan over each distinct list of
 * targets. The puts of mine that land on the asking rank go out through the
 * one put loop (put_list.c): a put whose source is one contiguous range
 * straight from the publish slot, any other packed first (target_stage.c)
 * so every put is one contiguous write. Then it answers with the digests of
 * the asking rank's target's segments it owns (target_verify.h), computed
 * once per target and version (target_digests.c). In GPU memory the gather
 * is one kernel launch (common/pack/pack.h) and the digests run on the GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/pack/pack.h"
#include "common/targets/target_verify.h"
#include "common/base/util.h"
#include "trainer_side/digest_merge.h"
#include "trainer_side/publisher_internal.h"

struct pub_target {
    struct pub_target *next;
    wsync_target_t *t;
    wsync_node_plan_t *seg; /* its segments: planned when first asked for their digests (never for a node of
                               identity targets, which asks for none: no_segment_digests) */
    pub_tdig_t *dig;        /* how this rank digests its segments of it (target_digests.c) */
};

struct pub_nplan {
    struct pub_nplan *next;
    int L;
    char (*digests)[33]; /* [L]: the key, with the landing hint */
    int hint_world;
    int *colo, *ncolo; /* [hint_world * L], [hint_world] */
    wsync_node_plan_t *np;
    pub_tdig_t *dig;      /* how this rank digests its puts of it (target_digests.c) */
    pub_direct_t *direct; /* [np->nputs]: its packed puts' own pack plans, as first asked (pub_direct_plan) */
    pub_merge_t *merge;   /* its puts' digests with the record's (digest_merge.c), once tried (merge_tried) */
    int merge_tried;
};

/* A packed put's pack plan for direct_pack: state 0 not tried yet, 1 plan
 * (reading memory area `area` of the slot), -1 none (runs in several areas,
 * bytes not in whole words, a failed prepare: the stage packs it). */
struct pub_direct {
    wsync_pack_plan_t *plan;
    int area, state;
};

struct pub_segdig {
    struct pub_segdig *next;
    uint64_t version;
    const pub_target_t *tg;  /* the asker's segments, */
    const pub_nplan_t *plan; /* or (not NULL) the node plan's puts */
    json_t *segments;        /* {"<segment or put id>": "digest hex"} of those this rank owns */
    int computing;           /* a request computes them, tcache.lock released (segments still NULL) */
};

void pub_targets_free(wsync_publisher_t *p)
{
    while (p->tcache.targets) {
        pub_target_t *t = p->tcache.targets;
        p->tcache.targets = t->next;
        wsync_target_free(t->t);
        wsync_node_plan_free(t->seg);
        pub_tdig_free(t->dig);
        free(t);
    }
    while (p->tcache.nplans) {
        pub_nplan_t *n = p->tcache.nplans;
        p->tcache.nplans = n->next;
        free(n->digests);
        free(n->colo);
        free(n->ncolo);
        if (n->direct)
            for (size_t k = 0; k < n->np->nputs; k++)
                wsync_pack_cuda_plan_free(n->direct[k].plan);
        free(n->direct);
        wsync_node_plan_free(n->np);
        pub_tdig_free(n->dig);
        pub_merge_free(n->merge);
        free(n);
    }
    while (p->tcache.segdigs) {
        pub_segdig_t *d = p->tcache.segdigs;
        p->tcache.segdigs = d->next;
        json_decref(d->segments);
        free(d);
    }
}

/* The target named `digest`: known, or defined in the request. Under tlock. */
static wsync_status_t get_target(wsync_publisher_t *p, const wsync_pull_request_t *q, const char *digest,
                                 pub_target_t **out)
{
    const wsync_sync_layout_t *sl = p->sl;
    const json_t *def = q->target_defs ? json_object_get(q->target_defs, digest) : NULL;
    pub_target_t *t;
    wsync_status_t st;
    for (t = p->tcache.targets; t; t = t->next)
        if (strcmp(t->t->digest_hex, digest) == 0) {
            *out = t;
            return WSYNC_OK;
        }
    if (def == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND,
                           "does not know target %s (the engine resends its targets on the next attempt)", digest);
    t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    st = wsync_target_from_json_obj(sl->manifest, def, &t->t);
    if (st == WSYNC_OK && strcmp(t->t->digest_hex, digest) != 0)
        st = wsync_error(WSYNC_ERR_FORMAT, "target sent as %s has digest %s", digest, t->t->digest_hex);
    if (st != WSYNC_OK) {
        wsync_target_free(t->t);
        free(t);
        return st;
    }
    t->next = p->tcache.targets;
    p->tcache.targets = t;
    *out = t;
    return WSYNC_OK;
}

/* The node plan over the request's targets. Under tlock. */
static wsync_status_t get_nplan(wsync_publisher_t *p, const wsync_pull_request_t *q, pub_target_t **tgs,
                                pub_nplan_t **out)
{
    const wsync_sync_layout_t *sl = p->sl;
    const wsync_target_t **ts;
    pub_nplan_t *n;
    wsync_status_t st;
    int k;
    const size_t L = (size_t)q->ntargets, W = (size_t)q->hint_world;
    if (q->hint_world && q->hint_world != sl->world)
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field 'land_hint' has %d trainer ranks, the layout %d",
                           q->hint_world, sl->world);
    for (n = p->tcache.nplans; n; n = n->next)
        if (n->L == q->ntargets && memcmp(n->digests, q->targets, L * 33) == 0 && n->hint_world == q->hint_world &&
            (W == 0 || (memcmp(n->colo, q->colo, W * L * sizeof(int)) == 0 &&
                        memcmp(n->ncolo, q->ncolo, W * sizeof(int)) == 0))) {
            *out = n;
            return WSYNC_OK;
        }
    n = calloc(1, sizeof(*n));
    ts = calloc(L, sizeof(*ts));
    if (n == NULL || ts == NULL || (n->digests = calloc(L, 33)) == NULL ||
        (W && ((n->colo = calloc(W * L, sizeof(int))) == NULL || (n->ncolo = calloc(W, sizeof(int))) == NULL))) {
        if (n) {
            free(n->digests);
            free(n->colo);
        }
        free(n);
        free(ts);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    n->L = q->ntargets;
    n->hint_world = q->hint_world;
    memcpy(n->digests, q->targets, L * 33);
    if (W) {
        memcpy(n->colo, q->colo, W * L * sizeof(int));
        memcpy(n->ncolo, q->ncolo, W * sizeof(int));
    }
    for (k = 0; k < n->L; k++)
        ts[k] = tgs[k]->t;
    {
        wsync_land_hint_t hint = {.colo = n->colo, .ncolo = n->ncolo};
        st = wsync_node_plan_build(sl->manifest, sl->layout, n->L, ts, sl->plan->chunk_size, W ? &hint : NULL,
                                   &n->np);
    }
    free(ts);
    if (st != WSYNC_OK) {
        free(n->digests);
        free(n->colo);
        free(n->ncolo);
        free(n);
        return st;
    }
    n->next = p->tcache.nplans;
    p->tcache.nplans = n;
    *out = n;
    return WSYNC_OK;
}

wsync_status_t pub_targets_resolve(wsync_publisher_t *p, const wsync_pull_request_t *q, pub_treq_t *tr)
{
    pub_target_t **tgs;
    wsync_status_t st = WSYNC_OK;
    int k;
    tgs = calloc((size_t)q->ntargets, sizeof(*tgs));
    WSYNC_CHECK_ALLOC(tgs);
    pthread_mutex_lock(&p->tcache.lock);
    for (k = 0; k < q->ntargets && st == WSYNC_OK; k++)
        st = get_target(p, q, q->targets[k], &tgs[k]);
    if (st == WSYNC_OK)
        st = get_nplan(p, q, tgs, &tr->plan);
    pthread_mutex_unlock(&p->tcache.lock);
    if (st == WSYNC_OK) {
        tr->asker = tgs[q->local_rank];
        tr->np = tr->plan->np;
        st = wsync_pull_request_check_chunks(q, tr->plan->np->nchunks);
    }
    free(tgs);
    return st;
}

/* The pack plan of put `id` of the node plan cached as `key`, prepared the
 * first time (blocking: cudaMalloc) with its runs relative to the memory
 * area of slot s holding them and its destination from the put's first
 * byte; the destination's alignment is assumed that of the put's offset
 * (the receiver's window 16-byte aligned), which the launch checks. */
int pub_direct_plan(wsync_publisher_t *p, const pub_slot_t *s, const void *key, uint32_t id,
                    const wsync_pack_plan_t **plan, int *area)
{
    pub_nplan_t *n = (pub_nplan_t *)key;
    const wsync_tput_t *pu = &n->np->puts[id];
    pub_direct_t *d;
    wsync_run2d_t *runs;
    int ok;
    pthread_mutex_lock(&p->tcache.lock);
    if (n->direct == NULL)
        n->direct = calloc(n->np->nputs + 1, sizeof(*n->direct));
    d = n->direct ? &n->direct[id] : NULL;
    if (d && d->state == 0) {
        d->state = -1;
        runs = calloc(pu->nruns + 1, sizeof(*runs));
        if (runs && pu->len % 8 == 0 && pub_area_runs(p, s, n->np, pu, runs, &d->area) &&
            wsync_pack_cuda_prepare(runs, pu->nruns, (uintptr_t)pu->dst_off, (uintptr_t)s->area_ptr[d->area],
                                    &d->plan) == WSYNC_OK)
            d->state = 1;
        free(runs);
    }
    ok = d && d->state == 1;
    if (ok) {
        *plan = d->plan;
        *area = d->area;
    }
    pthread_mutex_unlock(&p->tcache.lock);
    return ok;
}

/* The span of slot s holding image offset off (spans are in offset order). */
const pub_span_t *pub_span_at(const wsync_publisher_t *p, const pub_slot_t *s, uint64_t off)
{
    size_t lo = 0, hi = p->share.nspans;
    if (wsync_fp8_is_quantized(p->sl->manifest, off)) /* FP8 codes and scales (fp8_quant.c) */
        return pub_fp8_span_at((wsync_publisher_t *)p, s, off);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (off < s->spans[mid].offset)
            hi = mid;
        else if (off >= s->spans[mid].offset + s->spans[mid].len)
            lo = mid + 1;
        else
            return &s->spans[mid];
    }
    return NULL;
}

/* Gathers a put's (or segment's) runs from slot s into dst (memory of the
 * publisher's kind): the host gather, or one GPU gather kernel launch. All
 * its bytes are in one span: the plan never lets a put span two trainer
 * extents. */
wsync_status_t pub_gather(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_run2d_t *runs, size_t n,
                          void *dst)
{
    const pub_span_t *sp = n ? pub_span_at(p, s, runs[0].src_off) : NULL;
    wsync_run2d_t *rel;
    wsync_pack_job_t *job = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t k;
    if (n == 0)
        return WSYNC_OK;
    if (sp == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "byte %llu of a put is not one this rank owns",
                           (unsigned long long)runs[0].src_off);
    rel = malloc(n * sizeof(*rel));
    WSYNC_CHECK_ALLOC(rel);
    for (k = 0; k < n; k++) {
        uint64_t last = runs[k].src_off + (runs[k].rows - 1) * runs[k].src_stride + runs[k].row_bytes;
        if (runs[k].src_off < sp->offset || last > sp->offset + sp->len) {
            free(rel);
            return wsync_error(WSYNC_ERR_INVALID, "a put reads outside this rank's extent");
        }
        rel[k] = runs[k];
        rel[k].src_off -= sp->offset; /* relative to the span's memory */
    }
    if (p->mem->kind == WSYNC_MEM_HOST) {
        wsync_pack_host(dst, sp->ptr, rel, n);
    } else {
        st = wsync_pack_cuda_start(dst, sp->ptr, rel, n, NULL, &job);
        if (st == WSYNC_OK)
            st = wsync_pack_cuda_wait(job);
    }
    free(rel);
    return st;
}

/* Runs relative to their memory area (publisher_internal.h). */
int pub_area_runs(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np,
                  const wsync_tput_t *pu, wsync_run2d_t *out, int *area)
{
    const wsync_run2d_t *runs = &np->runs[pu->first_run];
    const pub_span_t *sp = pu->nruns ? pub_span_at(p, s, runs[0].src_off) : NULL;
    size_t k;
    if (sp == NULL || sp->area < 0) /* quantized bands are in no registered area */
        return 0;
    for (k = 0; k < pu->nruns; k++) {
        uint64_t last = runs[k].src_off + (runs[k].rows ? (runs[k].rows - 1) * runs[k].src_stride : 0) +
                        runs[k].row_bytes;
        if (runs[k].src_off < sp->offset || last > sp->offset + sp->len)
            return 0;
        out[k] = runs[k];
        out[k].src_off = sp->area_off + (runs[k].src_off - sp->offset);
    }
    *area = sp->area;
    return 1;
}

/* Target t's segments, planned the first time their digests are asked for
 * (tcache.lock held, as wherever t->seg is read). */
static wsync_status_t plan_segments(const wsync_publisher_t *p, pub_target_t *t)
{
    const wsync_sync_layout_t *sl = p->sl;
    if (t->seg)
        return WSYNC_OK;
    wsync_trace("trainer rank %d: segments of target %s planned", p->cfg.rank, t->t->digest_hex);
    return wsync_target_segments(sl->manifest, sl->layout, t->t, sl->plan->chunk_size, &t->seg);
}

/* Forgets the digests of versions no slot holds any more (not asked for
 * again), but those being computed and those of a version newer than every
 * slot's (computed at publish, before the version is announced). Under
 * tlock. */
static void segdigs_evict(wsync_publisher_t *p)
{
    pub_segdig_t *d, **pp;
    uint64_t newest = 0;
    int k;
    for (k = 0; k < PUB_NSLOTS; k++)
        newest = p->slots.slot[k].version > newest ? p->slots.slot[k].version : newest;
    for (pp = &p->tcache.segdigs; *pp;) {
        int held = (*pp)->computing || (*pp)->version > newest;
        for (k = 0; k < PUB_NSLOTS; k++)
            held |= p->slots.slot[k].version == (*pp)->version;
        if (held) {
            pp = &(*pp)->next;
            continue;
        }
        d = *pp;
        *pp = d->next;
        json_decref(d->segments);
        free(d);
    }
}

/* The entry for (version, plan or asker's target): one computed or being
 * computed by another request (waited for: it may fail and go, then this
 * request computes), or a new one, marked computing, that the caller fills.
 * Under tlock; *mine says whether the caller computes. */
static wsync_status_t segdig_get(wsync_publisher_t *p, const pub_treq_t *tr, const pub_nplan_t *plan,
                                 uint64_t version, pub_segdig_t **out, int *mine)
{
    pub_segdig_t *d;
    for (;;) {
        for (d = p->tcache.segdigs; d; d = d->next)
            if (d->version == version && d->plan == plan && (plan || d->tg == tr->asker))
                break;
        if (d == NULL || !d->computing)
            break;
        pthread_cond_wait(&p->tcache.cond, &p->tcache.lock);
    }
    *mine = d == NULL;
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        WSYNC_CHECK_ALLOC(d);
        *d = (pub_segdig_t){.version = version, .tg = tr->asker, .plan = plan, .computing = 1};
        d->next = p->tcache.segdigs;
        p->tcache.segdigs = d;
    }
    *out = d;
    return WSYNC_OK;
}

/* Unlinks and frees d (computed or not). Under tlock. */
static void segdig_drop(wsync_publisher_t *p, pub_segdig_t *d)
{
    pub_segdig_t **pp;
    for (pp = &p->tcache.segdigs; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    json_decref(d->segments);
    free(d);
}

void pub_targets_merge_begin(wsync_publisher_t *p, const pub_slot_t *s, uint64_t version, pub_merge_t **m,
                             pub_segdig_t **d)
{
    pub_nplan_t *n;
    pub_segdig_t *e;
    *m = NULL;
    *d = NULL;
    pthread_mutex_lock(&p->tcache.lock);
    for (n = p->tcache.nplans; n && n->dig == NULL; n = n->next) /* newest first */
        ;
    if (n && !n->merge_tried) { /* nplans are never unlinked, nor merge written but here */
        n->merge_tried = 1;
        pthread_mutex_unlock(&p->tcache.lock);
        n->merge = pub_merge_build(p, s, n->np);
        pthread_mutex_lock(&p->tcache.lock);
    }
    for (e = p->tcache.segdigs; n && n->merge && e; e = e->next)
        if (e->version == version && e->plan == n)
            break;
    if (n && n->merge && e == NULL && (e = calloc(1, sizeof(*e))) != NULL) {
        *e = (pub_segdig_t){.version = version, .plan = n, .computing = 1, .next = p->tcache.segdigs};
        p->tcache.segdigs = e;
        *m = n->merge;
        *d = e;
    }
    pthread_mutex_unlock(&p->tcache.lock);
}

void pub_targets_merge_end(wsync_publisher_t *p, pub_segdig_t *d, json_t *puts)
{
    if (d == NULL) {
        json_decref(puts);
        return;
    }
    pthread_mutex_lock(&p->tcache.lock);
    d->computing = 0;
    if (puts)
        d->segments = puts;
    else
        segdig_drop(p, d);
    pthread_cond_broadcast(&p->tcache.cond);
    pthread_mutex_unlock(&p->tcache.lock);
}

/* Computes d's digests with tlock released (held on entry and on return):
 * a GPU digest of a rank's whole share takes milliseconds, and holding the
 * lock meanwhile kept every other request of this rank from resolving its
 * targets, so its puts waited for these digests (measured on one H200: the
 * second engine rank's puts started 5-10 ms late, 2026-12-04). On failure d
 * is unlinked and freed. Waiters are woken either way. */
static wsync_status_t segdig_compute(wsync_publisher_t *p, const pub_slot_t *s, const pub_treq_t *tr,
                                     pub_segdig_t *d)
{
    const wsync_node_plan_t *seg;
    pub_tdig_t **dig, *how = NULL;
    json_t *segs = json_object();
    wsync_status_t st = segs ? WSYNC_OK : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    wsync_trace("trainer rank %d: %s digests of target %s, version %llu", p->cfg.rank, d->plan ? "put" : "segment",
                tr->asker->t->digest_hex, (unsigned long long)d->version);
    if (st == WSYNC_OK && d->plan == NULL)
        st = plan_segments(p, tr->asker);
    seg = d->plan ? tr->np : tr->asker->seg;
    dig = d->plan ? &tr->plan->dig : &tr->asker->dig;
    if (st == WSYNC_OK)
        st = pub_tdig_prepare(p, s, seg, dig); /* built once, then never changed: read unlocked */
    how = *dig;
    pthread_mutex_unlock(&p->tcache.lock);
    if (st == WSYNC_OK)
        st = pub_fp8_ensure(p, s, seg);
    if (st == WSYNC_OK && wsync_fault(WSYNC_FAULT_TDIG_DELAY_MS) > 0) /* test hook: a slow digest */
        usleep((useconds_t)wsync_fault(WSYNC_FAULT_TDIG_DELAY_MS) * 1000);
    if (st == WSYNC_OK)
        st = pub_tdig_compute(p, s, seg, how, segs);
    pthread_mutex_lock(&p->tcache.lock);
    d->computing = 0;
    pthread_cond_broadcast(&p->tcache.cond);
    if (st == WSYNC_OK) {
        d->segments = segs;
        return WSYNC_OK;
    }
    json_decref(segs);
    segdig_drop(p, d);
    return st;
}

wsync_status_t pub_targets_digests(wsync_publisher_t *p, const pub_slot_t *s, const pub_treq_t *tr,
                                   uint64_t version, int by_put, json_t *reply)
{
    const pub_nplan_t *plan = by_put ? tr->plan : NULL;
    pub_segdig_t *d = NULL;
    wsync_status_t st;
    int mine = 0;
    pthread_mutex_lock(&p->tcache.lock);
    segdigs_evict(p);
    st = segdig_get(p, tr, plan, version, &d, &mine);
    if (st == WSYNC_OK && mine)
        st = segdig_compute(p, s, tr, d);
    if (st == WSYNC_OK) /* the cached one stays */
        json_object_set_new(reply, plan ? "puts" : "segments", json_deep_copy(d->segments));
    pthread_mutex_unlock(&p->tcache.lock);
    return st;
}
