/* fetch.c: one pull attempt on one engine rank. Asks every trainer rank that
 * owns pieces landing here to put them; as pieces land, verifies each chunk
 * and marks it landed on the node board; meanwhile copies every other chunk
 * out of its landing rank's window as soon as the board says it landed, and
 * verifies the copy. Done when every chunk of this rank's image is verified. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/digest.h"
#include "common/msg.h"
#include "common/pull_request.h"
#include "common/settings.h"
#include "common/util.h"
#include "engine_side/receiver_internal.h"

#define FANOUT_INFLIGHT 4   /* fan-out copy jobs queued at once */

typedef struct fan_job {
    wsync_mem_job_t *job;
    uint32_t chunk;
} fan_job_t;

typedef struct trainer_req {
    char pull_addr[160];
    int rank;
    const wsync_auth_t *auth;
    json_t *msg;
    uint64_t deadline;
    pthread_t th;
    int started;
    int done;                   /* atomic */
    wsync_status_t status;
    char error[400];
} trainer_req_t;

static void *req_main(void *arg)
{
    trainer_req_t *q = arg;
    json_t *reply = NULL;
    int fd = -1, left = (int)((q->deadline - wsync_now_ns()) / 1000000ULL);
    const char *err;

    q->status = wsync_tcp_connect(q->pull_addr, left > 0 ? left : 1, &fd);
    if (q->status == WSYNC_OK) {
        /* The request proves the token, bound to the trainer's challenge. */
        left = (int)((q->deadline - wsync_now_ns()) / 1000000ULL);
        q->status = wsync_msg_call(fd, q->auth, WSYNC_HS_PULL, q->pull_addr, q->msg, left > 0 ? left : 1, &reply);
    }
    if (q->status != WSYNC_OK) {
        snprintf(q->error, sizeof(q->error), "trainer rank %d at %s: %s", q->rank, q->pull_addr,
                 wsync_last_error());
    } else if ((err = json_string_value(json_object_get(reply, "error"))) != NULL) {
        q->status = WSYNC_ERR_PEER;
        snprintf(q->error, sizeof(q->error), "%s", err);
    }
    json_decref(reply);
    if (fd >= 0)
        close(fd);
    __atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void recv_transport_reset(wsync_receiver_t *r)
{
    int k, s;
    for (k = 0; k < r->ntr; k++) {
        recv_transport_t *rt = &r->tr[k];
        for (s = 0; s < BOARD_SLOTS; s++)
            if (rt->region[s]) {
                rt->ops->dereg(rt->region[s]);
                rt->region[s] = NULL;
            }
        if (rt->t)
            rt->ops->close(rt->t);
        memset(rt, 0, sizeof(*rt));
    }
    r->ntr = 0;
}

/* The transport asked for as `name`, opened, listening, with every image
 * slot registered; its index in r->tr. */
static wsync_status_t ensure_transport(wsync_receiver_t *r, const char *name, int *idx)
{
    wsync_transport_config_t cfg = {.bind_host = r->bind_host, .conns_per_peer = 0,
                                    .device = r->mem->kind == WSYNC_MEM_CUDA ? r->device : -1,
                                    .timeout_ms = wsync_connect_timeout_ms(0), .auth = &r->auth};
    recv_transport_t *rt = NULL;
    int k, s;
    for (k = 0; k < r->ntr; k++)
        if (strcmp(r->tr[k].want, name) == 0)
            rt = &r->tr[k];
    if (rt == NULL) {
        if (r->ntr == RECV_MAX_TRANSPORTS)
            return wsync_error(WSYNC_ERR_INVALID, "engine %s: more than %d transports in use", r->engine_id,
                               RECV_MAX_TRANSPORTS);
        rt = &r->tr[r->ntr];
        memset(rt, 0, sizeof(*rt));
        snprintf(rt->want, sizeof(rt->want), "%s", name);
        WSYNC_CHECK(wsync_transport_get(name, &cfg, &rt->ops));
        WSYNC_CHECK(rt->ops->open(&cfg, &rt->t));
        r->ntr++;   /* from here recv_transport_reset closes it */
        WSYNC_CHECK(rt->ops->listen(rt->t, &rt->addr));
    }
    for (s = 0; s < r->nslots; s++)
        if (rt->region[s] == NULL)
            WSYNC_CHECK(rt->ops->reg(rt->t, r->win[s].ptr, r->image_len, r->mem->kind, &rt->region[s],
                                     &rt->key[s]));
    *idx = (int)(rt - r->tr);
    return WSYNC_OK;
}

/* Which transport serves trainer rank `host_id`/`device`: "local" when it
 * holds GPU memory on this host and so does this rank (one device-to-device
 * copy instead of a trip through host buffers), else the configured one.
 * The local_transport setting (WSYNC_LOCAL_TRANSPORT=0) turns the choice off (to measure the others). */
static const char *transport_for(wsync_receiver_t *r, const char *host_id, const char *device)
{
    wsync_transport_config_t cfg = {.device = r->device, .timeout_ms = wsync_connect_timeout_ms(0)};
    if (r->mem->kind != WSYNC_MEM_CUDA || !wsync_setting_int(WSYNC_SET_LOCAL_TRANSPORT) || host_id == NULL ||
        device == NULL || strcmp(host_id, r->host_id) != 0 || strncmp(device, "cuda", 4) != 0)
        return r->transport_name;
    return wsync_transport_local.can_use(&cfg) ? "local" : r->transport_name;
}

/* Map every peer's window of `slot` (again, if the peer restarted). */
static wsync_status_t map_peers(wsync_receiver_t *r, int slot, uint64_t deadline)
{
    board_shared_t *sh = board_shared(r->board);
    int p;
    for (p = 0; p < r->cfg.local_world; p++) {
        peer_map_t *pm = &r->peers[p][slot];
        uint32_t epoch = __atomic_load_n(&sh->ranks[p].epoch, __ATOMIC_ACQUIRE);
        wsync_blob_t blob;
        uint64_t len;
        int fd = -1, left;
        wsync_status_t st;
        if (p == r->cfg.local_rank)
            continue;
        if (pm->ptr && pm->epoch == epoch)
            continue;
        if (pm->ptr) {
            r->win_ops->unmap(pm->ptr, pm->len);
            pm->ptr = NULL;
        }
        left = (int)((deadline - wsync_now_ns()) / 1000000ULL);
        WSYNC_CHECK(board_get_window(r->board, p, slot, left > 0 ? left : 1, &blob, &fd, &len, &epoch));
        if (len < r->image_len) {
            if (fd >= 0)
                close(fd);
            return wsync_error(WSYNC_ERR_CONFLICT, "local rank %d's image is %llu bytes, need %zu", p,
                               (unsigned long long)len, r->image_len);
        }
        st = r->win_ops->map(&blob, fd, len, &pm->ptr);
        if (fd >= 0)
            close(fd);
        WSYNC_CHECK(st);
        pm->len = len;
        pm->epoch = epoch;
    }
    return WSYNC_OK;
}

/* Pieces first..first+n-1, whose sums are `sums`, against the published
 * digests. */
static wsync_status_t check_pieces(wsync_receiver_t *r, const wsync_sync_layout_t *sl, const uint64_t *digests,
                                   uint32_t first, size_t n, const uint64_t *sums, uint64_t v)
{
    const wsync_plan_t *p = sl->plan;
    size_t k;
    for (k = 0; k < n; k++) {
        const wsync_piece_t *pc = &p->pieces[first + k];
        uint32_t i = first + (uint32_t)k;
        uint64_t d = wsync_digest_final(sums[k], pc->len, pc->offset);
        if (d != digests[i])
            return wsync_error(WSYNC_ERR_DIGEST,
                               "version %llu, piece %u (bytes %llu..%llu from trainer rank %d) failed "
                               "verification on engine %s rank %d: digest %016llx, published %016llx",
                               (unsigned long long)v, i, (unsigned long long)pc->offset,
                               (unsigned long long)(pc->offset + pc->len), pc->src_rank, r->engine_id,
                               r->cfg.local_rank, (unsigned long long)d, (unsigned long long)digests[i]);
    }
    return WSYNC_OK;
}

/* The digest ranges of chunk `c`'s pieces in `image`; their count. */
static size_t chunk_ranges(const wsync_plan_t *p, const char *image, uint32_t c, wsync_digest_range_t *rg)
{
    uint32_t i;
    size_t n = 0;
    for (i = p->chunk_first[c]; i < p->chunk_first[c + 1]; i++, n++)
        rg[n] = (wsync_digest_range_t){.ptr = image + p->pieces[i].offset, .len = p->pieces[i].len,
                                       .off = p->pieces[i].offset};
    return n;
}

/* Every piece of chunk `c` in `image` against the published digests, with
 * one wait. `rg`, `sums`: room for the chunk's pieces. */
static wsync_status_t verify_chunk(wsync_receiver_t *r, const wsync_sync_layout_t *sl, const uint64_t *digests,
                                   const char *image, uint32_t c, uint64_t v, wsync_digest_range_t *rg,
                                   uint64_t *sums)
{
    size_t n = chunk_ranges(sl->plan, image, c, rg);
    WSYNC_CHECK(r->mem->digest_many(rg, n, sums));
    return check_pieces(r, sl, digests, sl->plan->chunk_first[c], n, sums, v);
}

/* The pull addresses of the trainer ranks, by rank, and the transport each
 * one's pieces come over. */
static wsync_status_t trainer_addrs(wsync_receiver_t *r, int world, char (*addrs)[160], const char **tnames)
{
    json_t *arr = NULL, *e;
    size_t i;
    int rank;
    WSYNC_CHECK(wsync_control_trainers(r->control, &arr));
    for (rank = 0; rank < world; rank++) {
        addrs[rank][0] = '\0';
        tnames[rank] = r->transport_name;
    }
    json_array_foreach(arr, i, e) {
        json_int_t rk = json_integer_value(json_object_get(e, "rank"));
        json_t *ep = json_object_get(e, "endpoint");
        const char *pull = json_string_value(json_object_get(ep, "pull"));
        if (rk >= 0 && rk < world && pull) {
            snprintf(addrs[rk], 160, "%s", pull);
            tnames[rk] = transport_for(r, json_string_value(json_object_get(ep, "host_id")),
                                       json_string_value(json_object_get(ep, "device")));
        }
    }
    json_decref(arr);
    return WSYNC_OK;
}

static int check_peers(wsync_receiver_t *r, uint64_t gen, char *why, size_t whylen)
{
    board_shared_t *sh = board_shared(r->board);
    int p;
    for (p = 0; p < r->cfg.local_world; p++) {
        if (p == r->cfg.local_rank)
            continue;
        if (!board_rank_alive(r->board, p)) {
            snprintf(why, whylen, "local rank %d of engine %s is not running", p, r->engine_id);
            return 1;
        }
        if (__atomic_load_n(&sh->ranks[p].failed_gen, __ATOMIC_ACQUIRE) == gen) {
            snprintf(why, whylen, "local rank %d failed: %s", p, sh->ranks[p].error);
            return 1;
        }
    }
    return 0;
}

/* For a timed-out attempt: whom it still waited for, so a stalled peer is
 * named (the local ranks whose chunks had not landed, the trainer ranks that
 * had not answered its request). */
static void waiting_for(const wsync_plan_t *plan, const uint8_t *land, const uint32_t *pending, uint32_t npending,
                        const uint32_t *remaining, const trainer_req_t *reqs, char *out, size_t len)
{
    uint8_t seen[BOARD_MAX_RANKS] = {0};
    size_t n = 0;
    uint32_t k, c;
    int t, first = 1;
    out[0] = '\0';
    /* Pieces of this rank's own chunks that never came: their trainer ranks. */
    for (t = 0; t < plan->world; t++) {
        int missing = 0;
        for (c = 0; c < plan->nchunks && !missing; c++)
            if (remaining[c] > 0)
                for (k = plan->chunk_first[c]; k < plan->chunk_first[c + 1]; k++)
                    if (plan->pieces[k].src_rank == t)
                        missing = 1;
        if (missing) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d", first ? "; pieces missing from trainer "
                                  "rank " : ", ", t);
            first = 0;
        }
    }
    first = 1;
    for (k = 0; k < npending; k++)
        if (land[pending[k]] < BOARD_MAX_RANKS && !seen[land[pending[k]]]++) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d", first ? "; still waiting for chunks "
                                  "landing on local rank " : ", ", land[pending[k]]);
            first = 0;
        }
    if (!first)
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, " (stalled or stopped?)");
    first = 1;
    for (t = 0; t < plan->world; t++)
        if (reqs[t].started && !__atomic_load_n(&reqs[t].done, __ATOMIC_ACQUIRE)) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d", first ? "; no answer yet from trainer "
                                  "rank " : ", ", t);
            first = 0;
        }
}

wsync_status_t recv_fetch(wsync_receiver_t *r, uint64_t gen, uint64_t v, int slot,
                          const wsync_sync_layout_t *sl, const uint64_t *digests, uint64_t deadline)
{
    const wsync_plan_t *plan = sl->plan;
    board_shared_t *sh = board_shared(r->board);
    const int me = r->cfg.local_rank, L = r->cfg.local_world;
    char *image = r->win[slot].ptr;
    uint32_t *remaining = NULL, reqid;
    const uint8_t *land;
    unsigned char *mine = NULL;     /* bitmap of the chunks landing here */
    char (*addrs)[160] = NULL, why[400];
    const char **tnames = NULL;
    trainer_req_t *reqs = NULL;
    uint32_t ndone = 0, c, nland = 0, nlanded = 0, ncopied = 0, npending = 0, keep, maxp = 1;
    fan_job_t fan[FANOUT_INFLIGHT];
    int fh = 0, fn = 0;
    wsync_digest_range_t *rg = NULL;    /* one chunk's pieces */
    uint64_t *sums = NULL;
    uint32_t *pending = NULL;       /* chunks landing elsewhere, not yet copied here */
    wsync_completion_t comps[64];
    wsync_status_t st = WSYNC_OK;
    uint64_t last_check = 0;
    int t, i;
    /* Test hook (common/fault.h): slow the landing of each chunk so a test
     * can kill a rank in the middle of a pull. */
    const int land_delay_ms = (int)wsync_fault(WSYNC_FAULT_LAND_DELAY_MS);

    WSYNC_CHECK(recv_wait_landing(r, gen, deadline));   /* rank 0 checked the chunk count */
    land = sh->land;
    WSYNC_CHECK(map_peers(r, slot, deadline));
    remaining = calloc(plan->nchunks + 1, sizeof(*remaining));
    mine = calloc((plan->nchunks + 7) / 8 + 1, 1);
    pending = calloc(plan->nchunks + 1, sizeof(*pending));
    for (c = 0; c < plan->nchunks; c++)
        if (plan->chunk_first[c + 1] - plan->chunk_first[c] > maxp)
            maxp = plan->chunk_first[c + 1] - plan->chunk_first[c];
    rg = calloc(maxp, sizeof(*rg));
    sums = calloc(maxp, sizeof(*sums));
    reqs = calloc((size_t)plan->world, sizeof(*reqs));
    addrs = calloc((size_t)plan->world, sizeof(*addrs));
    tnames = calloc((size_t)plan->world, sizeof(*tnames));
    if (!remaining || !mine || !pending || !rg || !sums || !reqs || !addrs || !tnames) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (c = 0; c < plan->nchunks; c++)
        if (land[c] == me) {
            remaining[c] = plan->chunk_first[c + 1] - plan->chunk_first[c];
            mine[c / 8] |= (unsigned char)(1u << (c % 8));
            nland++;
        } else {
            pending[npending++] = c;
        }
    WSYNC_CHECK_GOTO(trainer_addrs(r, plan->world, addrs, tnames), st, out);

    /* Ask each trainer rank that owns pieces landing here. */
    do
        reqid = (uint32_t)(((uint64_t)rand() << 16 ^ (uint64_t)wsync_now_ns() ^ (uint64_t)getpid() << 8) &
                           0x7fffffff);
    while (reqid == 0);
    for (t = 0; t < plan->world; t++) {
        trainer_req_t *q = &reqs[t];
        recv_transport_t *rt;
        size_t k, n = 0;
        int ti = 0;
        for (k = 0; k < plan->rank_npieces[t]; k++)
            if (land[plan->pieces[plan->rank_pieces[t][k]].chunk] == me)
                n++;
        if (n == 0)
            continue;
        WSYNC_CHECK_GOTO(ensure_transport(r, tnames[t], &ti), st, out);
        rt = &r->tr[ti];
        for (k = 0; k < plan->rank_npieces[t]; k++) {
            const wsync_piece_t *pc = &plan->pieces[plan->rank_pieces[t][k]];
            if (land[pc->chunk] != me)
                continue;
            WSYNC_CHECK_GOTO(rt->ops->expect(rt->t, t, rt->region[slot], pc->offset, pc->len,
                                             ((uint64_t)reqid << 32) | pc->id), st, out);
        }
        if (rt->ops->expect_flush)
            rt->ops->expect_flush(rt->t, t);
        if (addrs[t][0] == '\0') {
            st = wsync_error(WSYNC_ERR_NOT_FOUND, "trainer rank %d is not registered at the control endpoint", t);
            goto out;
        }
        q->rank = t;
        q->auth = &r->auth;
        q->deadline = deadline;
        snprintf(q->pull_addr, sizeof(q->pull_addr), "%s", addrs[t]);
        {
            wsync_pull_request_t pr = {.version = v, .local_rank = me, .local_ranks = L, .req = reqid,
                                       .addr = rt->addr, .key = rt->key[slot],
                                       .timeout_ms = (int64_t)((deadline - wsync_now_ns()) / 1000000ULL),
                                       .chunks = mine, .chunk_bytes = (plan->nchunks + 7) / 8};
            snprintf(pr.engine, sizeof(pr.engine), "%s", r->engine_id);
            snprintf(pr.transport, sizeof(pr.transport), "%s", rt->ops->name);
            snprintf(pr.layout_digest, sizeof(pr.layout_digest), "%s", sl->layout_digest);
            q->msg = wsync_pull_request_to_json(&pr);
        }
        if (q->msg == NULL || pthread_create(&q->th, NULL, req_main, q) != 0) {
            st = wsync_error(WSYNC_ERR_NOMEM, "cannot start the request to trainer rank %d", t);
            goto out;
        }
        q->started = 1;
    }
    wsync_trace("engine %s rank %d: requests sent", r->engine_id, me);

    while (ndone < plan->nchunks) {
        int n = 0, got = 0, progressed = 0, k;
        /* Land: pieces arriving here, over each transport in use (only a
         * lone transport may block waiting, or it would starve the other). */
        for (k = 0; k < r->ntr && ndone < plan->nchunks; k++) {
            WSYNC_CHECK_GOTO(r->tr[k].ops->poll(r->tr[k].t, comps, 64, &n,
                                                npending > 0 || fn > 0 || r->ntr > 1 ? 0 : 5), st, out);
            got += n;
            for (i = 0; i < n; i++) {
                wsync_completion_t *cp = &comps[i];
                uint32_t id = (uint32_t)cp->tag;
                const wsync_piece_t *pc;
                /* Errors of no put of this attempt (a port scan, a sender of an
                 * abandoned attempt) are not ours to fail on; a real sender's
                 * failure also reaches us through its answer to the request. */
                if (cp->kind == WSYNC_COMPLETION_ERROR && cp->tag != ~0ULL && (uint32_t)(cp->tag >> 32) == reqid) {
                    st = wsync_error(cp->status ? cp->status : WSYNC_ERR_PEER, "%s", cp->message);
                    goto out;
                }
                if (cp->kind != WSYNC_COMPLETION_LANDED || (uint32_t)(cp->tag >> 32) != reqid)
                    continue;   /* not of this attempt */
                if (id >= plan->npieces || land[plan->pieces[id].chunk] != me ||
                    remaining[plan->pieces[id].chunk] == 0 || cp->len != plan->pieces[id].len) {
                    st = wsync_error(WSYNC_ERR_PEER, "unexpected piece %u (%llu bytes) from trainer rank %d", id,
                                     (unsigned long long)cp->len, cp->peer);
                    goto out;
                }
                pc = &plan->pieces[id];
                if (--remaining[pc->chunk] == 0) {
                    if (land_delay_ms > 0)
                        usleep((useconds_t)land_delay_ms * 1000);
                    WSYNC_CHECK_GOTO(verify_chunk(r, sl, digests, image, pc->chunk, v, rg, sums), st, out);
                    __atomic_store_n(&sh->landed[slot][pc->chunk], gen, __ATOMIC_RELEASE);
                    if (nlanded++ == 0 || nlanded == nland)
                        wsync_trace("engine %s rank %d: chunk %u landed and verified (%u of %u)", r->engine_id,
                                    me, pc->chunk, nlanded, nland);
                    ndone++;
                }
                progressed = 1;
            }
        }
        /* Fan out: copy chunks that landed on other ranks, whichever landed
         * first (a slow source must not hold up the others), each copy and
         * its digests queued as a job, FANOUT_INFLIGHT at a time so the
         * copy engine runs them back to back. */
        for (k = 0, keep = 0; (uint32_t)k < npending; k++) {
            uint32_t cc = pending[k];
            uint64_t off = (uint64_t)cc * plan->chunk_size;
            uint64_t len = off + plan->chunk_size > plan->image_size ? plan->image_size - off : plan->chunk_size;
            size_t np;
            if (fn == FANOUT_INFLIGHT || __atomic_load_n(&sh->landed[slot][cc], __ATOMIC_ACQUIRE) != gen) {
                pending[keep++] = cc;
                continue;
            }
            np = chunk_ranges(plan, image, cc, rg);
            fan[(fh + fn) % FANOUT_INFLIGHT].chunk = cc;
            WSYNC_CHECK_GOTO(r->mem->copy_digest_start(image + off, (char *)r->peers[land[cc]][slot].ptr + off, len,
                                                       rg, np, &fan[(fh + fn) % FANOUT_INFLIGHT].job), st, out);
            fn++;
            progressed = 1;
        }
        npending = keep;
        while (fn > 0) {
            fan_job_t *f = &fan[fh];
            int done = 0;
            uint32_t cc = f->chunk;
            WSYNC_CHECK_GOTO(r->mem->job_poll(f->job, 0, sums, &done), st, out);
            if (!done)
                break;
            r->mem->job_free(f->job);
            f->job = NULL;
            fh = (fh + 1) % FANOUT_INFLIGHT;
            fn--;
            WSYNC_CHECK_GOTO(check_pieces(r, sl, digests, plan->chunk_first[cc],
                                          plan->chunk_first[cc + 1] - plan->chunk_first[cc], sums, v), st, out);
            ndone++;
            progressed = 1;
            if (++ncopied == plan->nchunks - nland)
                wsync_trace("engine %s rank %d: fan-out copies done and verified", r->engine_id, me);
            else if (ncopied % 32 == 0)
                wsync_trace("engine %s rank %d: %u fan-out copies verified", r->engine_id, me, ncopied);
        }
        /* Trainer answers, peers, deadline. */
        for (t = 0; t < plan->world; t++)
            if (reqs[t].started && __atomic_load_n(&reqs[t].done, __ATOMIC_ACQUIRE) && reqs[t].status != WSYNC_OK) {
                st = wsync_error(reqs[t].status, "%s", reqs[t].error);
                goto out;
            }
        if (wsync_now_ns() - last_check > 50000000ULL) {
            last_check = wsync_now_ns();
            if (check_peers(r, gen, why, sizeof(why))) {
                st = wsync_error(WSYNC_ERR_PEER, "%s", why);
                goto out;
            }
            if (last_check > deadline) {
                waiting_for(plan, land, pending, npending, remaining, reqs, why, sizeof(why));
                st = wsync_error(WSYNC_ERR_TIMEOUT,
                                 "version %llu: %u of %u chunks verified on engine %s rank %d when the "
                                 "timeout passed%s", (unsigned long long)v, ndone, plan->nchunks, r->engine_id, me,
                                 why);
                goto out;
            }
        }
        if (!progressed && got == 0 && (npending > 0 || fn > 0 || r->ntr != 1))
            usleep(200);
    }
out:
    for (; fn > 0; fn--, fh = (fh + 1) % FANOUT_INFLIGHT)
        r->mem->job_free(fan[fh].job);     /* waits: the copy must not outlive the attempt */
    if (st != WSYNC_OK)
        recv_transport_reset(r);   /* stale puts of this attempt can no longer land */
    for (t = 0; reqs && t < plan->world; t++) {
        if (reqs[t].started)
            pthread_join(reqs[t].th, NULL);
        json_decref(reqs[t].msg);
    }
    free(remaining);
    free(mine);
    free(pending);
    free(rg);
    free(sums);
    free(reqs);
    free(addrs);
    free(tnames);
    return st;
}
