/* receiver.c: an engine rank's receiver: set-up, the node-wide agreement on
 * which version to pull (local rank 0 decides and writes it on the board),
 * the outcome of an attempt, reports to the control endpoint, accessors. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/settings.h"
#include "common/util.h"
#include "engine_side/receiver_internal.h"

/* Host images from wsync_image_alloc: remembered so a receiver given one can
 * export its memfd to the other local ranks. */
typedef struct host_image {
    struct host_image *next;
    wsync_window_t win;
} host_image_t;
static host_image_t *host_images;
static pthread_mutex_t host_images_lock = PTHREAD_MUTEX_INITIALIZER;

void *wsync_image_alloc(size_t len)
{
    host_image_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    if (wsync_window_shm.alloc(len, &h->win) != WSYNC_OK) {
        free(h);
        return NULL;
    }
    pthread_mutex_lock(&host_images_lock);
    h->next = host_images;
    host_images = h;
    pthread_mutex_unlock(&host_images_lock);
    return h->win.ptr;
}

void wsync_image_free(void *ptr, size_t len)
{
    host_image_t **pp, *h = NULL;
    (void)len;
    pthread_mutex_lock(&host_images_lock);
    for (pp = &host_images; *pp; pp = &(*pp)->next)
        if ((*pp)->win.ptr == ptr) {
            h = *pp;
            *pp = h->next;
            break;
        }
    pthread_mutex_unlock(&host_images_lock);
    if (h) {
        wsync_window_shm.free(&h->win);
        free(h);
    }
}

static int find_host_image(void *ptr, wsync_window_t *out)
{
    host_image_t *h;
    int found = 0;
    pthread_mutex_lock(&host_images_lock);
    for (h = host_images; h; h = h->next)
        if (h->win.ptr == ptr) {
            *out = h->win;
            found = 1;
        }
    pthread_mutex_unlock(&host_images_lock);
    return found;
}

/* What the node board records of this rank's memory: its GPU, or -1. */
static int board_device(const wsync_receiver_t *r)
{
    return r->mem->kind == WSYNC_MEM_CUDA ? r->device : -1;
}

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s && s[0] ? s : dflt);
}

wsync_status_t wsync_receiver_create(const wsync_receiver_config_t *cfg, wsync_receiver_t **out)
{
    wsync_receiver_t *r;
    wsync_status_t st;
    char host[256];

    WSYNC_CHECK(wsync_settings_init()); /* a bad WSYNC_* value is refused here */
    if (cfg == NULL || cfg->control_url == NULL || cfg->engine_id == NULL || cfg->engine_id[0] == '\0')
        return wsync_error(WSYNC_ERR_INVALID, "receiver: control_url and engine_id are required");
    if (cfg->local_world < 1 || cfg->local_world > BOARD_MAX_RANKS || cfg->local_rank < 0 ||
        cfg->local_rank >= cfg->local_world)
        return wsync_error(WSYNC_ERR_INVALID, "receiver: local rank %d must be in [0, local world %d), "
                           "local world at most %d", cfg->local_rank, cfg->local_world, BOARD_MAX_RANKS);
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    r->cfg = *cfg;
    r->engine_id = strdup(cfg->engine_id);
    r->control_url = strdup(cfg->control_url);
    r->token = cfg->token ? strdup(cfg->token) : NULL;
    r->transport_name = dup_or(cfg->transport, "auto");
    wsync_host_id(cfg->host_id, r->host_id, sizeof(r->host_id));
    if (cfg->bind_host && cfg->bind_host[0]) {
        r->bind_host = strdup(cfg->bind_host);
    } else {
        wsync_primary_ipv4(host, sizeof(host));
        r->bind_host = strdup(host);
    }
    r->nslots = cfg->mode == WSYNC_MODE_IN_PLACE ? 1 : 2;
    snprintf(r->board_name, sizeof(r->board_name), "wsync/%s/%s", r->host_id, r->engine_id);

    WSYNC_CHECK_GOTO(wsync_mem_get(cfg->device ? cfg->device : "host", &r->mem, &r->device), st, err);
    WSYNC_CHECK_GOTO(r->mem->init(r->device), st, err);
    r->win_ops = wsync_window_for(r->mem->kind);
    WSYNC_CHECK_GOTO(wsync_control_open(r->control_url, r->token, &r->control), st, err);
    WSYNC_CHECK_GOTO(wsync_auth_init(&r->auth, r->token), st, err);
    WSYNC_CHECK_GOTO(board_open(r->board_name, cfg->local_rank, cfg->local_world, board_device(r), &r->auth, 30000,
                                &r->board), st, err);
    if (cfg->local_rank == 0) {
        gethostname(host, sizeof(host));
        WSYNC_CHECK_GOTO(wsync_control_register_engine(r->control, r->engine_id, host, cfg->local_world, NULL),
                         st, err);
        WSYNC_CHECK_GOTO(reporter_start(r->control_url, r->token, r->engine_id, host, cfg->local_world,
                                        &r->reporter), st, err);
    }
    *out = r;
    return WSYNC_OK;
err:
    wsync_receiver_destroy(r);
    return st;
}

/* Image slots sized for `need` bytes, exported on the board. */
static wsync_status_t ensure_images(wsync_receiver_t *r, uint64_t need)
{
    int s;
    if (r->image_len) {
        if (need > r->image_len)
            return wsync_error(WSYNC_ERR_CONFLICT,
                               "the model grew: version needs a %llu-byte image, this engine holds %zu; "
                               "restart the engine", (unsigned long long)need, r->image_len);
        return WSYNC_OK;
    }
    r->image_len = need ? need : WSYNC_ALIGN;
    for (s = 0; s < r->nslots; s++) {
        wsync_blob_t blob;
        if (s == 0 && r->cfg.image) {
            if (r->cfg.image_len < r->image_len)
                return wsync_error(WSYNC_ERR_INVALID, "the given image has %zu bytes, the model needs %zu",
                                   r->cfg.image_len, r->image_len);
            if (r->mem->kind == WSYNC_MEM_HOST) {
                if (!find_host_image(r->cfg.image, &r->win[0]))
                    return wsync_error(WSYNC_ERR_INVALID,
                                       "host image memory must come from wsync_image_alloc so the other "
                                       "local ranks can map it");
            } else {
                r->win[0] = (wsync_window_t){.ptr = r->cfg.image, .len = r->cfg.image_len, .fd = -1};
            }
            r->caller_image = 1;
        } else {
            WSYNC_CHECK(r->win_ops->alloc(r->image_len, &r->win[s]));
        }
        WSYNC_CHECK(r->win_ops->export_blob(&r->win[s], &blob));
        WSYNC_CHECK(board_put_window(r->board, s, &blob, r->win[s].fd, r->image_len));
    }
    return WSYNC_OK;
}

static uint64_t deadline_after(int timeout_ms)
{
    return wsync_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 600000) * 1000000ULL;
}

static int left_ms(uint64_t deadline)
{
    uint64_t now = wsync_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL);
}

/* Local rank 0: wait until every local rank is running. */
static wsync_status_t wait_ranks(wsync_receiver_t *r, uint64_t deadline)
{
    for (;;) {
        int p, missing = -1;
        for (p = 1; p < r->cfg.local_world; p++)
            if (!board_rank_alive(r->board, p)) {
                missing = p;
                break;
            }
        if (missing < 0)
            return WSYNC_OK;
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s: local rank %d is not running", r->engine_id,
                               missing);
        usleep(10000);
    }
}

/* Ranks > 0: rejoin when local rank 0 restarted (new board). */
static wsync_status_t rejoin_if_needed(wsync_receiver_t *r)
{
    int p, s;
    if (!board_leader_gone(r->board))
        return WSYNC_OK;
    LOG_WARN("engine %s rank %d: local rank 0 restarted; rejoining its board", r->engine_id, r->cfg.local_rank);
    board_close(r->board);
    r->board = NULL;
    for (p = 0; p < BOARD_MAX_RANKS; p++)
        for (s = 0; s < BOARD_SLOTS; s++)
            if (r->peers[p][s].ptr) {
                r->win_ops->unmap(r->peers[p][s].ptr, r->peers[p][s].len);
                r->peers[p][s].ptr = NULL;
            }
    WSYNC_CHECK(board_open(r->board_name, r->cfg.local_rank, r->cfg.local_world, board_device(r), &r->auth, 30000,
                           &r->board));
    r->last_gen = 0;
    for (s = 0; s < r->nslots && r->image_len; s++) {
        wsync_blob_t blob;
        WSYNC_CHECK(r->win_ops->export_blob(&r->win[s], &blob));
        WSYNC_CHECK(board_put_window(r->board, s, &blob, r->win[s].fd, r->image_len));
    }
    return WSYNC_OK;
}

/* Local rank 0: choose the version and open attempt `gen` on the board. */
static wsync_status_t lead_attempt(wsync_receiver_t *r, uint64_t version, uint64_t deadline, uint64_t *v_out,
                                   uint64_t *gen_out, int *slot_out)
{
    board_shared_t *sh = board_shared(r->board);
    uint64_t v = version;
    int slot;
    if (v == 0) {
        WSYNC_CHECK(wsync_control_wait_version(r->control, r->held_version, left_ms(deadline), &v));
        if (v == 0)
            return wsync_error(WSYNC_ERR_TIMEOUT, "no version newer than %llu was published in time",
                               (unsigned long long)r->held_version);
    }
    wsync_trace("engine %s: version %llu is the one to pull", r->engine_id, (unsigned long long)v);
    WSYNC_CHECK(wait_ranks(r, deadline));
    slot = r->nslots == 2 ? 1 - (int)sh->cur_slot : 0;
    sh->gen_version = v;
    sh->gen_slot = (uint32_t)slot;
    __atomic_store_n(&sh->gen, sh->gen + 1, __ATOMIC_RELEASE);
    board_wake_attempt(r->board);
    *v_out = v;
    *gen_out = sh->gen;
    *slot_out = slot;
    return WSYNC_OK;
}

/* Ranks > 0: wait for rank 0 to open an attempt this rank has not joined. */
static wsync_status_t follow_attempt(wsync_receiver_t *r, uint64_t version, uint64_t deadline, uint64_t *v_out,
                                     uint64_t *gen_out, int *slot_out)
{
    for (;;) {
        board_shared_t *sh = board_shared(r->board);
        uint32_t seq = board_attempt_seq(r->board);
        uint64_t gen = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
        WSYNC_CHECK(rejoin_if_needed(r));
        if (gen > r->last_gen && __atomic_load_n(&sh->closed_gen, __ATOMIC_ACQUIRE) < gen &&
            (version == 0 || sh->gen_version == version)) {
            *v_out = sh->gen_version;
            *gen_out = gen;
            *slot_out = (int)sh->gen_slot;
            return WSYNC_OK;
        }
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s rank %d: local rank 0 started no pull in time",
                               r->engine_id, r->cfg.local_rank);
        board_wait_attempt(r->board, seq, 20);   /* woken when rank 0 opens one */
    }
}

/* Everyone: wait until every rank verified `gen`, or one failed. */
static wsync_status_t wait_node(wsync_receiver_t *r, uint64_t gen, uint64_t deadline)
{
    board_shared_t *sh = board_shared(r->board);
    for (;;) {
        int p, all = 1;
        if (r->cfg.local_rank != 0) {
            uint64_t closed = __atomic_load_n(&sh->closed_gen, __ATOMIC_ACQUIRE);
            if (closed == gen)
                return sh->closed_ok ? WSYNC_OK
                                     : wsync_error(WSYNC_ERR_PEER, "engine %s: the node failed this pull",
                                                   r->engine_id);
            if (board_leader_gone(r->board))
                return wsync_error(WSYNC_ERR_PEER, "engine %s: local rank 0 died", r->engine_id);
        }
        for (p = 0; p < r->cfg.local_world; p++) {
            if (__atomic_load_n(&sh->ranks[p].failed_gen, __ATOMIC_ACQUIRE) == gen)
                return wsync_error(WSYNC_ERR_PEER, "local rank %d: %s", p, sh->ranks[p].error);
            if (__atomic_load_n(&sh->ranks[p].done_gen, __ATOMIC_ACQUIRE) != gen) {
                all = 0;
                if (!board_rank_alive(r->board, p))
                    return wsync_error(WSYNC_ERR_PEER, "local rank %d of engine %s died during the pull", p,
                                       r->engine_id);
            }
        }
        if (all && r->cfg.local_rank == 0)
            return WSYNC_OK;
        if (wsync_now_ns() >= deadline) {
            char who[128] = "";
            size_t n = 0;
            for (p = 0; p < r->cfg.local_world; p++)
                if (__atomic_load_n(&sh->ranks[p].done_gen, __ATOMIC_ACQUIRE) != gen)
                    n += (size_t)snprintf(who + n, n < sizeof(who) ? sizeof(who) - n : 0, "%s%d", n ? ", " : "", p);
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s: local rank %s did not verify in time (stalled or "
                               "stopped?)", r->engine_id, who);
        }
        usleep(500);
    }
}

static wsync_status_t fetch_record(wsync_receiver_t *r, uint64_t v, wsync_sync_layout_t **sl,
                                   uint64_t **digests)
{
    json_t *rec = NULL;
    wsync_status_t st;
    const char *mdig, *ldig;
    WSYNC_CHECK(wsync_control_get_version(r->control, v, &rec));
    mdig = json_string_value(json_object_get(rec, "manifest_digest"));
    ldig = json_string_value(json_object_get(rec, "layout_digest"));
    /* Versions of one training run share the layout: reuse the held one
     * (parsing the manifest and building the plan again cost milliseconds
     * per version on a 7B model); only the digests are new. */
    if (r->held && mdig && ldig && strcmp(mdig, r->held->manifest_digest) == 0 &&
        strcmp(ldig, r->held->layout_digest) == 0) {
        *sl = r->held;
        st = WSYNC_OK;
    } else {
        st = wsync_sync_layout_fetch(r->control, rec, sl);   /* the manifest once per layout */
    }
    if (st == WSYNC_OK) {
        st = wsync_sync_layout_digests(*sl, rec, digests);
        if (st != WSYNC_OK) {
            if (*sl != r->held)
                wsync_sync_layout_free(*sl);
            *sl = NULL;
        }
    }
    json_decref(rec);
    return st;
}

wsync_status_t wsync_receiver_pull(wsync_receiver_t *r, uint64_t version, int timeout_ms, uint64_t *got)
{
    const uint64_t deadline = deadline_after(timeout_ms);
    board_shared_t *sh;
    wsync_sync_layout_t *sl = NULL;
    uint64_t *digests = NULL, v = 0, gen = 0, t0;
    wsync_status_t st;
    int slot = 0, leader = r->cfg.local_rank == 0;
    char err[512];

    if (!leader)
        WSYNC_CHECK(rejoin_if_needed(r));
    if (leader)
        WSYNC_CHECK(lead_attempt(r, version, deadline, &v, &gen, &slot));
    else
        WSYNC_CHECK(follow_attempt(r, version, deadline, &v, &gen, &slot));
    sh = board_shared(r->board);
    r->last_gen = gen;
    t0 = wsync_now_ns();
    wsync_trace("engine %s rank %d: pull of version %llu opened (attempt %llu)", r->engine_id, r->cfg.local_rank,
                (unsigned long long)v, (unsigned long long)gen);
    if (leader)
        reporter_post(r->reporter, v, "pulling", 0, 0, NULL);

    st = fetch_record(r, v, &sl, &digests);
    if (st == WSYNC_OK)
        st = ensure_images(r, sl->manifest->image_size);
    if (st == WSYNC_OK && leader)
        st = recv_plan_landing(r, sl, gen);
    wsync_trace("engine %s rank %d: version record fetched, images ready", r->engine_id, r->cfg.local_rank);
    if (st == WSYNC_OK)
        st = recv_fetch(r, gen, v, slot, sl, digests, deadline);
    if (st == WSYNC_OK) {
        __atomic_store_n(&sh->ranks[r->cfg.local_rank].done_gen, gen, __ATOMIC_RELEASE);
        st = wait_node(r, gen, deadline);
        wsync_trace("engine %s rank %d: every local rank verified", r->engine_id, r->cfg.local_rank);
    } else {
        snprintf(sh->ranks[r->cfg.local_rank].error, sizeof(sh->ranks[0].error), "%s", wsync_last_error());
        __atomic_store_n(&sh->ranks[r->cfg.local_rank].failed_gen, gen, __ATOMIC_RELEASE);
    }
    snprintf(err, sizeof(err), "%s", st == WSYNC_OK ? "" : wsync_last_error());
    if (leader) {
        double secs = (double)(wsync_now_ns() - t0) / 1e9;
        sh->closed_ok = st == WSYNC_OK;
        if (st == WSYNC_OK) {
            sh->cur_slot = (uint32_t)slot;
            sh->held_version = v;
        }
        __atomic_store_n(&sh->closed_gen, gen, __ATOMIC_RELEASE);
        /* Queued: the pull is done whether or not the endpoint is there. */
        if (st == WSYNC_OK)
            reporter_post(r->reporter, v, "ready", secs, sl->manifest->image_size, NULL);
        else
            reporter_post(r->reporter, v, "failed", secs, 0, err);
        wsync_trace("engine %s: reported", r->engine_id);
    }
    free(digests);
    if (st != WSYNC_OK) {
        if (sl != r->held)      /* sl may be the held layout, reused */
            wsync_sync_layout_free(sl);
        if (r->cfg.mode == WSYNC_MODE_IN_PLACE && r->held_version) {
            /* The one image was overwritten in part: nothing is held now. */
            r->held_version = 0;
            wsync_sync_layout_free(r->held);
            r->held = NULL;
        }
        return wsync_error(st, "%s", err);
    }
    r->last_secs = (double)(wsync_now_ns() - t0) / 1e9;
    r->cur_slot = slot;
    r->held_version = v;
    if (r->held != sl)
        wsync_sync_layout_free(r->held);
    r->held = sl;
    if (got)
        *got = v;
    return WSYNC_OK;
}

uint64_t wsync_receiver_version(const wsync_receiver_t *r)
{
    return r->held_version;
}

size_t wsync_receiver_tensor_count(const wsync_receiver_t *r)
{
    return r->held ? r->held->manifest->ntensors : 0;
}

wsync_status_t wsync_receiver_tensor_at(const wsync_receiver_t *r, size_t i, void **ptr, wsync_tensor_info_t *info)
{
    const wsync_tensor_t *t;
    if (r->held == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    if (i >= r->held->manifest->ntensors)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "tensor index %zu out of %zu", i, r->held->manifest->ntensors);
    t = &r->held->manifest->tensors[i];
    if (ptr)
        *ptr = (char *)r->win[r->cur_slot].ptr + t->offset;
    if (info) {
        info->name = t->name;
        info->dtype = wsync_dtype_name(t->dtype);
        info->ndim = t->ndim;
        memcpy(info->shape, t->shape, sizeof(info->shape));
        info->offset = t->offset;
        info->size = t->size;
    }
    return WSYNC_OK;
}

wsync_status_t wsync_receiver_tensor(const wsync_receiver_t *r, const char *name, void **ptr,
                                     wsync_tensor_info_t *info)
{
    long i;
    if (r->held == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    i = wsync_manifest_find(r->held->manifest, name);
    if (i < 0)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "version %llu has no tensor named '%s'",
                           (unsigned long long)r->held_version, name);
    return wsync_receiver_tensor_at(r, (size_t)i, ptr, info);
}

wsync_status_t wsync_receiver_image(const wsync_receiver_t *r, void **ptr, size_t *len)
{
    if (r->held == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    *ptr = r->win[r->cur_slot].ptr;
    *len = r->held->manifest->image_size;
    return WSYNC_OK;
}

void wsync_receiver_destroy(wsync_receiver_t *r)
{
    int p, s;
    if (r == NULL)
        return;
    reporter_stop(r->reporter, 5000);     /* the last reports, if the endpoint is there */
    recv_transport_reset(r);
    for (p = 0; p < BOARD_MAX_RANKS; p++)
        for (s = 0; s < BOARD_SLOTS; s++)
            if (r->peers[p][s].ptr)
                r->win_ops->unmap(r->peers[p][s].ptr, r->peers[p][s].len);
    for (s = 0; s < r->nslots; s++)
        if (r->win[s].ptr && !(s == 0 && r->caller_image))
            r->win_ops->free(&r->win[s]);
    board_close(r->board);
    wsync_control_close(r->control);
    wsync_sync_layout_free(r->held);
    free(r->engine_id);
    free(r->control_url);
    free(r->token);
    free(r->transport_name);
    free(r->bind_host);
    free(r);
}
