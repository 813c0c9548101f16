/* target_stage.c: the staging of a node plan's packed puts for one asking
 * rank. The puts of mine landing on that rank whose source is not one
 * contiguous range (column slices) are gathered, in destination order, into
 * a stage the puts then read. A stage is kept per (node plan, asking rank,
 * list of puts) for the publisher's life: its buffer, registration with
 * each transport and, in GPU memory, one prepared pack plan over all its
 * puts (common/pack/pack.h) are made once; each version is one kernel launch
 * (or, on the host, a gather per put), done once and shared by every
 * request of that version for the same list (several nodes with the same
 * targets). A stage a request of an older version still reads is left
 * alone: a new one is made beside it. Before, each request allocated and
 * registered its stage and gathered put by put, building a pack table for
 * every put (0.71-0.80 of the D2D copy against 0.95-0.98 prepared). All of
 * it under p->lock, which is dropped while packing (the slot is pinned). */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/pack/pack.h"
#include "common/targets/target_verify.h"
#include "trainer_side/publisher_internal.h"

struct pub_stage {
    struct pub_stage *next;
    const void *plan_key; /* the node plan */
    int asker;            /* and the asking local rank */
    uint32_t *puts;       /* [n]: indices into np->puts, in stage order */
    uint64_t *off;        /* [n]: each one's offset in buf */
    size_t n;
    char *buf;
    uint64_t len;
    wsync_pack_plan_t *gpu; /* all n in one launch (GPU memory, one area), or NULL */
    int area;               /* the memory area gpu reads */
    uint64_t version;       /* what buf holds (0: nothing) */
    int packing, users;
    wsync_region_t *region[PUB_MAX_TRANSPORTS];
};

static void stage_free(wsync_publisher_t *p, pub_stage_t *st)
{
    int t;
    for (t = 0; t < PUB_MAX_TRANSPORTS; t++)
        if (st->region[t])
            p->serving.transports[t].ops->dereg(st->region[t]);
    wsync_pack_cuda_plan_free(st->gpu);
    if (st->buf)
        p->mem->free(st->buf);
    free(st->puts);
    free(st->off);
    free(st);
}

void pub_stages_free(wsync_publisher_t *p)
{
    while (p->tcache.stages) {
        pub_stage_t *st = p->tcache.stages;
        p->tcache.stages = st->next;
        stage_free(p, st);
    }
}

/* A put of FP8 codes or scales (fp8_quant.c): gathered from the quantized
 * bands, in no memory area of the slot, so never in the prepared pack. */
static int put_quantized(const wsync_publisher_t *p, const wsync_node_plan_t *np, const wsync_tput_t *pu)
{
    return pu->nruns > 0 && wsync_fp8_is_quantized(p->sl->manifest, np->runs[pu->first_run].src_off);
}

/* The one prepared GPU pack of all the stage's puts but the quantized ones,
 * when they read one memory area of slot s; else NULL (the puts are
 * gathered one by one). */
static void stage_prepare_gpu(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np,
                              pub_stage_t *st)
{
    size_t k, j, nruns = 0, at = 0;
    wsync_run2d_t *runs;
    int area = -1;
    if (p->mem->kind != WSYNC_MEM_CUDA || st->n == 0)
        return;
    for (k = 0; k < st->n; k++)
        nruns += np->puts[st->puts[k]].nruns;
    runs = calloc(nruns + 1, sizeof(*runs));
    if (runs == NULL)
        return;
    for (k = 0; k < st->n; k++) {
        const wsync_tput_t *pu = &np->puts[st->puts[k]];
        int a = -1;
        if (put_quantized(p, np, pu))
            continue;
        if (!pub_area_runs(p, s, np, pu, runs + at, &a) || (area >= 0 && a != area))
            goto out;
        area = a;
        for (j = 0; j < pu->nruns; j++)
            runs[at + j].dst_off += st->off[k]; /* inside the stage, not the put */
        at += pu->nruns;
    }
    if (at == 0)
        goto out;
    if (wsync_pack_cuda_prepare(runs, at, (uintptr_t)st->buf, (uintptr_t)s->area_ptr[area], &st->gpu) == WSYNC_OK)
        st->area = area;
    else
        st->gpu = NULL; /* the per-put gather still works */
out:
    free(runs);
}

static wsync_status_t stage_new(wsync_publisher_t *p, const pub_slot_t *s, const void *key,
                                const wsync_node_plan_t *np, int asker, const uint32_t *puts, size_t n,
                                pub_stage_t **out)
{
    pub_stage_t *st = calloc(1, sizeof(*st));
    wsync_status_t rc = WSYNC_OK;
    size_t k;
    WSYNC_CHECK_ALLOC(st);
    st->plan_key = key;
    st->asker = asker;
    st->n = n;
    st->puts = malloc((n + 1) * sizeof(*st->puts));
    st->off = malloc((n + 1) * sizeof(*st->off));
    if (st->puts == NULL || st->off == NULL) {
        rc = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    memcpy(st->puts, puts, n * sizeof(*puts));
    for (k = 0; k < n; k++) {
        st->off[k] = st->len;
        st->len += np->puts[puts[k]].len;
    }
    WSYNC_CHECK_GOTO(p->mem->alloc(st->len, (void **)&st->buf), rc, err);
    stage_prepare_gpu(p, s, np, st);
    st->next = p->tcache.stages;
    p->tcache.stages = st;
    *out = st;
    return WSYNC_OK;
err:
    stage_free(p, st);
    return rc;
}

/* Test hook (common/base/fault.h): flip a byte in the middle of the first column
 * slice of a stage, after the trainer's digests were taken from the slot. */
static void corrupt_first_slice(const wsync_publisher_t *p, const wsync_node_plan_t *np, const pub_stage_t *st)
{
    size_t k, j;
    for (k = 0; k < st->n; k++) {
        const wsync_tput_t *pu = &np->puts[st->puts[k]];
        for (j = 0; j < pu->nruns; j++) {
            const wsync_run2d_t *r = &np->runs[pu->first_run + j];
            if (r->rows > 1 && r->src_stride != r->row_bytes) {
                char *at = st->buf + st->off[k] + pu->len / 2;
                unsigned char b = 0;
                if (p->mem->kind == WSYNC_MEM_HOST) {
                    *at ^= 0x5a;
                } else if (p->mem->copy(&b, at, 1) == WSYNC_OK) {
                    b ^= 0x5a;
                    p->mem->copy(at, &b, 1);
                }
                return;
            }
        }
    }
}

/* Packs the version of slot s into st. p->lock is not held. */
static wsync_status_t stage_pack(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np,
                                 const pub_stage_t *st)
{
    size_t k;
    int packed = 0;
    if (st->gpu) {
        wsync_pack_job_t *job = NULL;
        wsync_status_t rc = wsync_pack_cuda_launch(st->gpu, st->buf, s->area_ptr[st->area], NULL, &job);
        if (rc == WSYNC_OK)
            rc = wsync_pack_cuda_wait(job);
        if (rc != WSYNC_OK && rc != WSYNC_ERR_INVALID) /* INVALID: this slot's base is aligned otherwise */
            return rc;
        packed = rc == WSYNC_OK;
    }
    for (k = 0; k < st->n; k++) { /* the rest put by put: all of them, or the quantized ones */
        const wsync_tput_t *pu = &np->puts[st->puts[k]];
        if (packed && !put_quantized(p, np, pu))
            continue;
        WSYNC_CHECK(pub_gather(p, s, &np->runs[pu->first_run], pu->nruns, st->buf + st->off[k]));
    }
    return WSYNC_OK;
}

wsync_status_t pub_stage_acquire(wsync_publisher_t *p, pub_slot_t *s, const void *key, const wsync_node_plan_t *np,
                                 int asker, const uint32_t *puts, size_t n, int ti, pub_stage_t **out)
{
    pub_stage_t *st, *idle;
    wsync_status_t rc;
    wsync_blob_t k;
    for (;;) {
        int waiting = 0;
        idle = NULL;
        for (st = p->tcache.stages; st; st = st->next) {
            if (st->plan_key != key || st->asker != asker || st->n != n ||
                memcmp(st->puts, puts, n * sizeof(*puts)) != 0)
                continue;
            if (st->version == s->version && !st->packing)
                goto ready;
            if (st->version == s->version)
                waiting = 1;
            else if (st->users == 0 && !st->packing)
                idle = st;
        }
        if (!waiting)
            break;
        pthread_cond_wait(&p->cond, &p->lock); /* another request packs this version */
    }
    st = idle;
    if (st == NULL)
        WSYNC_CHECK(stage_new(p, s, key, np, asker, puts, n, &st));
    st->version = s->version;
    st->packing = 1;
    st->users++;
    pthread_mutex_unlock(&p->lock);
    rc = stage_pack(p, s, np, st);
    if (rc == WSYNC_OK && wsync_fault(WSYNC_FAULT_CORRUPT_PACKED) == 1)
        corrupt_first_slice(p, np, st);
    pthread_mutex_lock(&p->lock);
    st->packing = 0;
    st->users--;
    if (rc != WSYNC_OK)
        st->version = 0;
    pthread_cond_broadcast(&p->cond);
    WSYNC_CHECK(rc);
ready:
    if (st->region[ti] == NULL)
        WSYNC_CHECK(p->serving.transports[ti].ops->reg(p->serving.transports[ti].t, st->buf, st->len, p->mem->kind,
                                                       &st->region[ti], &k));
    st->users++;
    *out = st;
    return WSYNC_OK;
}

void pub_stage_release(wsync_publisher_t *p, pub_stage_t *st)
{
    if (st && --st->users == 0)
        pthread_cond_broadcast(&p->cond);
}

wsync_region_t *pub_stage_region(const pub_stage_t *st, int ti)
{
    return st->region[ti];
}

uint64_t pub_stage_offset(const pub_stage_t *st, size_t k)
{
    return st->off[k];
}
