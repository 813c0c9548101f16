/* fp8_amax.c: the block maxima of the FP8 bands that trainer ranks share
 * (docs/FP8.md, "Across trainer ranks"). A band whose rows two or more
 * extents hold (an FSDP shard boundary off the block grid, or shards
 * thinner than a block) is owned in parts (fp8_wire.h): before a rank
 * quantizes its parts it asks every other rank holding a part of the same
 * bands for the maxima of theirs, one request per peer over the peer's pull
 * port (it proves the token as an engine's pull does), takes the largest,
 * and quantizes its elements with the whole band's scales: max is exact, so
 * the codes equal the quantization of the whole block. A rank answers from
 * its slot of that version once its share is copied; answering never waits
 * for another rank, so ranks asking each other at once do not deadlock.
 * Each wait is bounded (AMAX_WAIT_MS) and a failure names the rank asked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/util.h"
#include "common/control/client.h"
#include "common/net/sock.h"
#include "common/proto/fp8_amax_msg.h"
#include "common/proto/msg.h"
#include "common/proto/pull_reply.h"
#include "common/quant/quant.h"
#include "common/targets/fp8_wire.h"
#include "trainer_side/publisher_internal.h"

#define AMAX_WAIT_MS 60000 /* a peer's slot copied and its answer: at most this */

static wsync_quant_src_t src_fmt(const wsync_tensor_t *t)
{
    return t->dtype == WSYNC_DTYPE_F32 ? WSYNC_QSRC_F32 : WSYNC_QSRC_BF16;
}

/* Part b's source elements in slot s (in the slot's memory). */
static wsync_status_t part_src(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_brun_t *b,
                               const void **src)
{
    const wsync_tensor_t *t = &p->sl->manifest->tensors[b->tensor];
    const pub_span_t *sp = pub_span_at(p, s, b->src_off);
    const size_t len = b->q_len * (size_t)(wsync_dtype_bits(t->dtype) / 8);
    if (sp == NULL || sp->area < 0 || b->src_off + len > sp->offset + sp->len)
        return wsync_error(WSYNC_ERR_INTERNAL, "trainer rank %d: FP8 band part of '%s' at %llu is not in its slot",
                           p->cfg.rank, t->name, (unsigned long long)b->src_off);
    *src = (const char *)sp->ptr + (b->src_off - sp->offset);
    return WSYNC_OK;
}

static wsync_status_t part_failed(const wsync_publisher_t *p, const wsync_fp8_brun_t *b, wsync_status_t st)
{
    return wsync_error(st, "trainer rank %d: %s (rows counted from row %llu of matrix %llu)", p->cfg.rank,
                       wsync_last_error(), (unsigned long long)b->row0, (unsigned long long)b->slice);
}

/* Jobs j[0..n) as the GPU parts kernels' parts (slot s in GPU memory). */
static wsync_status_t gpu_parts(const wsync_publisher_t *p, const pub_slot_t *s, const pub_fp8_job_t *j, size_t n,
                                wsync_fp8_part_t **out)
{
    size_t i;
    *out = calloc(n + 1, sizeof(**out));
    WSYNC_CHECK_ALLOC(*out);
    for (i = 0; i < n; i++) {
        const wsync_fp8_brun_t *b = &j[i].b;
        const void *src;
        wsync_status_t st = part_src(p, s, b, &src);
        if (st != WSYNC_OK) {
            free(*out);
            return st;
        }
        (*out)[i] = (wsync_fp8_part_t){src,
                                       b->e0,
                                       b->q_len,
                                       b->cols,
                                       src_fmt(&p->sl->manifest->tensors[b->tensor]),
                                       j[i].spec,
                                       j[i].at,
                                       j[i].q,
                                       j[i].scale};
    }
    return WSYNC_OK;
}

/* Raises amax (namax floats) to the maxima of jobs j[0..n): on the host part
 * by part, on a GPU in one launch. */
static wsync_status_t jobs_amax(const wsync_publisher_t *p, const pub_slot_t *s, const pub_fp8_job_t *j, size_t n,
                                float *amax, size_t namax)
{
    wsync_fp8_part_t *g;
    size_t i, bad_part = 0;
    uint64_t bad_elem = 0;
    wsync_status_t st = WSYNC_OK;
    for (i = 0; p->mem->kind != WSYNC_MEM_CUDA && st == WSYNC_OK && i < n; i++) {
        const wsync_tensor_t *t = &p->sl->manifest->tensors[j[i].b.tensor];
        const void *src;
        st = part_src(p, s, &j[i].b, &src);
        if (st == WSYNC_OK && (st = wsync_fp8_part_amax_host(src, src_fmt(t), j[i].b.e0, j[i].b.q_len, j[i].b.cols,
                                                             &j[i].spec, amax + j[i].at, t->name)) != WSYNC_OK)
            st = part_failed(p, &j[i].b, st);
    }
    if (p->mem->kind != WSYNC_MEM_CUDA || n == 0 || st != WSYNC_OK)
        return st;
    WSYNC_CHECK(gpu_parts(p, s, j, n, &g));
    st = wsync_fp8_parts_amax_cuda(g, n, amax, namax, &bad_part, &bad_elem, NULL);
    free(g);
    if (st == WSYNC_ERR_INVALID && bad_part < n) {
        const wsync_fp8_brun_t *b = &j[bad_part].b;
        wsync_error(st,
                    "fp8: tensor '%s' holds NaN or an infinity at row %llu, column %llu: FP8 cannot carry it; "
                    "find "
                    "where the trainer produced it",
                    p->sl->manifest->tensors[b->tensor].name, (unsigned long long)((b->e0 + bad_elem) / b->cols),
                    (unsigned long long)((b->e0 + bad_elem) % b->cols));
        return part_failed(p, b, st);
    }
    return st;
}

wsync_status_t pub_fp8_parts_quantize(const wsync_publisher_t *p, const pub_slot_t *s, const pub_fp8_job_t *j,
                                      size_t n, const float *amax, size_t namax)
{
    wsync_fp8_part_t *g;
    size_t i;
    wsync_status_t st;
    if (p->mem->kind == WSYNC_MEM_CUDA) {
        if (n == 0)
            return WSYNC_OK;
        WSYNC_CHECK(gpu_parts(p, s, j, n, &g));
        st = wsync_fp8_parts_quantize_cuda(g, n, amax, namax, NULL);
        free(g);
        return st;
    }
    for (i = 0; i < n; i++) {
        const void *src;
        WSYNC_CHECK(part_src(p, s, &j[i].b, &src));
        wsync_fp8_part_quantize_host(src, src_fmt(&p->sl->manifest->tensors[j[i].b.tensor]), j[i].b.e0,
                                     j[i].b.q_len, j[i].b.cols, &j[i].spec, amax + j[i].at, j[i].q, j[i].scale);
    }
    return WSYNC_OK;
}

/* My part of each of the request's parts: their maxima, in order, into
 * *out (*nout of them). */
static wsync_status_t amax_items(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_exts_t *x,
                                 const wsync_fp8_amax_req_t *rq, float **out, size_t *nout)
{
    const wsync_manifest_t *m = p->sl->manifest;
    wsync_fp8_brun_t *br = NULL;
    pub_fp8_job_t *jobs = calloc(rq->nparts + 1, sizeof(*jobs));
    size_t n = 0, cap = 0, i, k, total = 0;
    wsync_fp8_use_t have = {UINT32_MAX, {0, 0, WSYNC_SCALE_FP32}};
    wsync_status_t st = WSYNC_OK;
    *out = NULL;
    WSYNC_CHECK_ALLOC(jobs);
    for (i = 0; st == WSYNC_OK && i < rq->nparts; i++) {
        const wsync_fp8_amax_part_t *q = &rq->parts[i];
        if (q->tensor >= m->ntensors || m->tensors[q->tensor].ndim < 2 ||
            (m->tensors[q->tensor].dtype != WSYNC_DTYPE_BF16 && m->tensors[q->tensor].dtype != WSYNC_DTYPE_F32)) {
            st = wsync_error(WSYNC_ERR_INVALID, "part %zu names no FP8 band of a BF16 or F32 matrix", i);
            break;
        }
        if (have.tensor != q->tensor || have.spec.block_rows != q->block_rows ||
            have.spec.block_cols != q->block_cols) {
            have = (wsync_fp8_use_t){q->tensor, {q->block_rows, q->block_cols, WSYNC_SCALE_FP32}};
            n = 0;
            st = wsync_fp8_bruns(m, x, &have, p->cfg.rank, &br, &n, &cap);
        }
        for (k = 0; st == WSYNC_OK && k < n; k++)
            if (br[k].part && br[k].slice == q->slice && br[k].b0 == q->band)
                break;
        if (st == WSYNC_OK && k == n)
            st = wsync_error(WSYNC_ERR_INVALID, "it holds no part of band %llu of matrix %llu of '%s'",
                             (unsigned long long)q->band, (unsigned long long)q->slice, m->tensors[q->tensor].name);
        if (st == WSYNC_OK) {
            jobs[i] = (pub_fp8_job_t){br[k], have.spec, total, NULL, NULL};
            total += wsync_fp8_scale_cols(&have.spec, br[k].cols);
        }
    }
    free(br);
    if (st == WSYNC_OK && (*out = calloc(total + 1, sizeof(**out))) == NULL)
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st == WSYNC_OK)
        st = jobs_amax(p, s, jobs, rq->nparts, *out, total);
    free(jobs);
    *nout = total;
    return st;
}

void pub_fp8_amax_serve(wsync_publisher_t *p, const json_t *req, json_t *reply)
{
    const uint64_t deadline = wsync_now_ns() + (uint64_t)AMAX_WAIT_MS * 1000000ULL;
    wsync_fp8_amax_req_t rq;
    wsync_fp8_exts_t *x = NULL;
    float *amax = NULL;
    size_t namax = 0;
    pub_slot_t *s = NULL;
    wsync_status_t st = wsync_fp8_amax_req_from_json(req, &rq); /* refused before it waits for anything */
    const uint64_t version = rq.version;
    int k;
    pthread_mutex_lock(&p->lock);
    while (s == NULL && st == WSYNC_OK) { /* announced by now, unless it is still publishing it */
        struct timespec ts;
        for (k = 0; k < PUB_NSLOTS && s == NULL; k++)
            if (version != 0 && p->slots.slot[k].version == version)
                s = &p->slots.slot[k];
        if (s != NULL)
            break;
        if (wsync_now_ns() > deadline || p->serving.stopping)
            st = wsync_error(WSYNC_ERR_NOT_FOUND, "it does not hold version %llu (newest: %llu)",
                             (unsigned long long)version,
                             p->slots.latest >= 0 ? (unsigned long long)p->slots.slot[p->slots.latest].version
                                                  : 0ULL);
        wsync_abstime_after_ms(&ts, 20);
        if (st == WSYNC_OK)
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    if (s != NULL) {
        s->pins++;
        st = pub_wait_range(p, s, 0, UINT64_MAX, deadline);
    }
    if (st == WSYNC_OK && wsync_fault(WSYNC_FAULT_AMAX_REFUSE) == p->cfg.rank) /* test hook */
        st = wsync_error(WSYNC_ERR_PEER, "refused (test hook WSYNC_TEST_AMAX_REFUSE)");
    pthread_mutex_unlock(&p->lock);
    if (st == WSYNC_OK)
        st = wsync_fp8_exts_make(p->sl->layout, &x);
    if (st == WSYNC_OK) /* x: this request's own; the cache's lock may be held by a rank waiting on a peer */
        st = amax_items(p, s, x, &rq, &amax, &namax);
    wsync_fp8_exts_free(x);
    if (s != NULL) {
        pthread_mutex_lock(&p->lock);
        s->pins--;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    if (st == WSYNC_OK)
        st = wsync_fp8_amax_answer_set(reply, amax, namax);
    if (st != WSYNC_OK) {
        wsync_pull_reply_write_error(reply, "trainer rank %d: FP8 block maxima of version %llu: %s", p->cfg.rank,
                                     (unsigned long long)version, wsync_last_error());
    }
    free(amax);
    wsync_fp8_amax_req_clear(&rq);
}

/* A peer's part of one of my parts' bands. */
typedef struct ask {
    int peer;
    size_t k; /* my part br[k] */
} ask_t;

static int cmp_ask(const void *a, const void *b)
{
    const ask_t *x = a, *y = b;
    if (x->peer != y->peer)
        return x->peer < y->peer ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* The peers holding the other parts of my parts' bands: asks[] by peer. */
static wsync_status_t list_asks(wsync_publisher_t *p, const wsync_fp8_use_t *uses, const wsync_fp8_brun_t *br,
                                const size_t *use_of, size_t nbr, ask_t **out, size_t *nout)
{
    wsync_fp8_brun_t *all = NULL;
    ask_t *v = NULL;
    size_t n = 0, cap = 0, nall = 0, acap = 0, k, j, u = SIZE_MAX;
    wsync_status_t st = WSYNC_OK;
    for (k = 0; st == WSYNC_OK && k < nbr; k++) {
        if (!br[k].part)
            continue;
        if (use_of[k] != u) {
            u = use_of[k];
            nall = 0;
            st = wsync_fp8_bruns(p->sl->manifest, p->tcache.fp8x, &uses[u], -1, &all, &nall, &acap);
        }
        for (j = 0; st == WSYNC_OK && j < nall; j++) {
            if (!all[j].part || all[j].rank == p->cfg.rank || all[j].slice != br[k].slice || all[j].b0 != br[k].b0)
                continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                ask_t *nv = realloc(v, nc * sizeof(*nv));
                if (nv == NULL) {
                    st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                    break;
                }
                v = nv;
                cap = nc;
            }
            v[n++] = (ask_t){all[j].rank, k};
        }
    }
    free(all);
    if (st == WSYNC_OK && n > 1)
        qsort(v, n, sizeof(*v), cmp_ask);
    *out = v;
    *nout = n;
    return st;
}

/* Peer's pull address, from the trainers' registrations (read once). */
static wsync_status_t peer_addr(wsync_publisher_t *p, json_t **trainers, int peer, char *addr, size_t len)
{
    size_t i;
    json_t *e;
    if (*trainers == NULL) {
        wsync_control_t *c = NULL;
        wsync_status_t st = wsync_control_open(p->control_url, p->cfg.token, &c);
        if (st == WSYNC_OK)
            st = wsync_control_trainers(c, trainers);
        wsync_control_close(c);
        if (st != WSYNC_OK)
            return wsync_error(st, "the trainers' registrations: %s", wsync_last_error());
    }
    json_array_foreach(*trainers, i, e)
    {
        const char *pull = json_string_value(json_object_get(json_object_get(e, "endpoint"), "pull"));
        if (json_integer_value(json_object_get(e, "rank")) == peer && pull) {
            snprintf(addr, len, "%s", pull);
            return WSYNC_OK;
        }
    }
    return wsync_error(WSYNC_ERR_NOT_FOUND, "it is not registered with the control endpoint");
}

/* Asks peer for the maxima of its parts of asks[0..n) (all of that peer)
 * and raises amax (my parts' columns at off[k]) to them. */
static wsync_status_t ask_peer(wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_use_t *uses,
                               const wsync_fp8_brun_t *br, const size_t *use_of, const ask_t *asks, size_t n,
                               float *amax, const size_t *off, const char *addr)
{
    wsync_fp8_amax_req_t rq = {s->version, calloc(n + 1, sizeof(wsync_fp8_amax_part_t)), n};
    json_t *msg, *reply = NULL;
    float *got = NULL;
    size_t i, at = 0, ngot = 0;
    uint64_t c;
    int fd = -1;
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(rq.parts);
    for (i = 0; i < n; i++) {
        const wsync_fp8_brun_t *b = &br[asks[i].k];
        const wsync_fp8_use_t *u = &uses[use_of[asks[i].k]];
        rq.parts[i] = (wsync_fp8_amax_part_t){b->tensor, u->spec.block_rows, u->spec.block_cols, b->slice, b->b0};
        ngot += wsync_fp8_scale_cols(&u->spec, b->cols);
    }
    msg = wsync_fp8_amax_req_to_json(&rq);
    free(rq.parts);
    got = calloc(ngot + 1, sizeof(*got));
    st = msg && got ? wsync_tcp_dial(addr, AMAX_WAIT_MS, 0, &fd) : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (st == WSYNC_OK)
        st = wsync_msg_call(fd, &p->auth, WSYNC_HS_PULL, addr, msg, AMAX_WAIT_MS + 5000, &reply);
    if (fd >= 0)
        close(fd);
    json_decref(msg);
    if (st == WSYNC_OK)
        st = wsync_fp8_amax_answer_get(reply, got, ngot);
    for (i = 0; st == WSYNC_OK && i < n; i++) {
        const uint64_t scols = wsync_fp8_scale_cols(&uses[use_of[asks[i].k]].spec, br[asks[i].k].cols);
        for (c = 0; c < scols; c++, at++)
            if (got[at] > amax[off[asks[i].k] + c])
                amax[off[asks[i].k] + c] = got[at];
    }
    json_decref(reply);
    free(got);
    return st;
}

wsync_status_t pub_fp8_amax_parts(wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_use_t *uses,
                                  const wsync_fp8_brun_t *br, const size_t *use_of, size_t nbr, float **amax_out,
                                  size_t **off_out, size_t *namax_out)
{
    size_t *off = calloc(nbr + 1, sizeof(*off)), total = 0, k, i, j, nasks = 0, njobs = 0;
    float *amax = NULL;
    pub_fp8_job_t *jobs = calloc(nbr + 1, sizeof(*jobs));
    ask_t *asks = NULL;
    json_t *trainers = NULL;
    wsync_status_t st = WSYNC_OK;
    if (off == NULL || jobs == NULL) {
        free(off);
        free(jobs);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (k = 0; k < nbr; k++) {
        off[k] = total;
        if (br[k].part)
            jobs[njobs++] = (pub_fp8_job_t){br[k], uses[use_of[k]].spec, total, NULL, NULL};
        total += br[k].part ? wsync_fp8_scale_cols(&uses[use_of[k]].spec, br[k].cols) : 0;
    }
    amax = calloc(total + 1, sizeof(*amax));
    st = amax ? jobs_amax(p, s, jobs, njobs, amax, total) : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    free(jobs);
    if (st == WSYNC_OK)
        st = list_asks(p, uses, br, use_of, nbr, &asks, &nasks);
    for (i = 0; st == WSYNC_OK && i < nasks; i = j) {
        char addr[160] = "?";
        for (j = i; j < nasks && asks[j].peer == asks[i].peer; j++)
            ;
        st = peer_addr(p, &trainers, asks[i].peer, addr, sizeof(addr));
        if (st == WSYNC_OK)
            st = ask_peer(p, s, uses, br, use_of, asks + i, j - i, amax, off, addr);
        if (st != WSYNC_OK)
            st = wsync_error(st,
                             "trainer rank %d: the FP8 block maxima of the bands it shares with trainer rank %d "
                             "(at %s, version %llu; waited at most %d s): %s",
                             p->cfg.rank, asks[i].peer, addr, (unsigned long long)s->version, AMAX_WAIT_MS / 1000,
                             wsync_last_error());
    }
    json_decref(trainers);
    free(asks);
    if (st != WSYNC_OK) {
        free(amax);
        free(off);
        return st;
    }
    *amax_out = amax;
    *off_out = off;
    *namax_out = total;
    return WSYNC_OK;
}
