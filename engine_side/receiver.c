/* receiver.c: an engine rank's receiver: set-up, the node-wide agreement on
 * which version to pull (local rank 0 decides and writes it on the board),
 * rejoining the node, images, accessors (a pull attempt is attempt.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/proto/msg.h"
#include "common/proto/relay_registration.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "engine_side/plan_choice.h"
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

/* How long a local rank > 0 waits for local rank 0's board, at start and
 * when rank 0 restarted (a test may shorten it: WSYNC_TEST_REJOIN_MS). */
#define RECV_REJOIN_MS 30000

static int rejoin_ms(void)
{
    long long t = wsync_fault(WSYNC_FAULT_REJOIN_MS);
    return t > 0 ? (int)t : RECV_REJOIN_MS;
}

/* What the node board records of this rank's memory: its GPU, or -1. */
static int board_device(const wsync_receiver_t *r)
{
    return r->mem->kind == WSYNC_MEM_CUDA ? r->device : -1;
}

/* Checked at create, not at the first pull (where it failed once per
 * attempt): the names common/transport/registry.c knows. */
static int known_transport(const char *name)
{
    static const char *const names[] = {"auto", "tcp", "nccl", "verbs", "local"};
    size_t i;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s && s[0] ? s : dflt);
}

/* The plan setting resolved for this node (plan_choice.c); under auto with
 * a links file (the links setting) the file is read here, once, and the
 * choice is made again for each version (fetch_relay.c). delta=auto reads
 * the same file: it costs each version's delta pull (delta_land.c). */
static wsync_status_t choose_plan(wsync_receiver_t *r)
{
    plan_choice_input_t in = {0};
    const char *links = wsync_setting_str(WSYNC_SET_LINKS);
    r->node.relay_capable = (strcmp(r->transport_name, "tcp") == 0 || strcmp(r->transport_name, "auto") == 0);
    WSYNC_CHECK(wsync_plan_spec_parse(wsync_setting_str(WSYNC_SET_PLAN), &r->node.asked));
    if (((r->node.asked.kind == WSYNC_PLAN_AUTO && r->node.relay_capable) ||
         wsync_setting_int(WSYNC_SET_DELTA) == 0) &&
        links[0]) {
        r->node.links = calloc(1, sizeof(*r->node.links));
        WSYNC_CHECK_ALLOC(r->node.links);
        WSYNC_CHECK(cost_links_load(links, r->node.links));
    }
    in.relay_capable = r->node.relay_capable;
    r->node.plan = plan_choice_resolve(&r->node.asked, &in);
    return WSYNC_OK;
}

/* Local rank 0, from the board's service thread: a local rank went, or
 * came back as a new process. The node is degraded until every rank holds
 * the version again: the log and the node's report say so (state
 * "failed", the error starting "node degraded:"), so status never shows it
 * ready while a rank is missing. A rank back as a new process holds
 * nothing: rank 0's pull waiting for a newer version pulls the held one
 * again instead (attempt.c), and the node is ready again without waiting
 * for the next version. */
static void rank_changed(void *ctx, int rank, int32_t old_pid, int32_t new_pid)
{
    wsync_receiver_t *r = ctx;
    uint64_t v = __atomic_load_n(&r->held.version, __ATOMIC_ACQUIRE);
    char why[400];
    if (new_pid == 0)
        snprintf(why, sizeof(why),
                 "node degraded: local rank %d (pid %d) is gone (exited or killed); restart it with --local-rank "
                 "%d",
                 rank, (int)old_pid, rank);
    else
        snprintf(why, sizeof(why),
                 "node degraded: local rank %d was replaced (pid %d went, pid %d joined); it holds no version "
                 "until "
                 "the node's next pull",
                 rank, (int)old_pid, (int)new_pid);
    LOG_WARN("engine %s: %s", r->engine_id, why);
    __atomic_store_n(&r->degraded, 1, __ATOMIC_RELEASE);
    if (new_pid != 0)
        __atomic_store_n(&r->rejoined, 1, __ATOMIC_RELEASE);
    reporter_post(r->reporter, v, "failed", 0, 0, why);
}

wsync_status_t wsync_receiver_create(const wsync_receiver_config_t *cfg, wsync_receiver_t **out)
{
    wsync_receiver_t *r;
    wsync_status_t st;
    char host[256];

    WSYNC_CHECK(wsync_settings_init()); /* a bad WSYNC_* value is refused here */
    if (cfg == NULL || cfg->control_url == NULL || cfg->engine_id == NULL || cfg->engine_id[0] == '\0')
        return wsync_error(WSYNC_ERR_INVALID, "receiver: control_url and engine_id are required");
    if (strlen(cfg->engine_id) > WSYNC_ENGINE_ID_MAX)
        return wsync_error(WSYNC_ERR_INVALID,
                           "engine id '%.20s...' has %zu characters: at most %d (it names the "
                           "node's local socket and goes into URLs); choose a shorter one",
                           cfg->engine_id, strlen(cfg->engine_id), WSYNC_ENGINE_ID_MAX);
    if (cfg->local_world < 1 || cfg->local_world > BOARD_MAX_RANKS || cfg->local_rank < 0 ||
        cfg->local_rank >= cfg->local_world)
        return wsync_error(WSYNC_ERR_INVALID,
                           "receiver: local rank %d must be in [0, local world %d), "
                           "local world at most %d",
                           cfg->local_rank, cfg->local_world, BOARD_MAX_RANKS);
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    recv_pull_conns_init(&r->transports.pull_conns);
    r->cfg = *cfg;
    r->engine_id = strdup(cfg->engine_id);
    r->control_url = strdup(cfg->control_url);
    r->token = cfg->token ? strdup(cfg->token) : NULL;
    r->transport_name = dup_or(cfg->transport, "auto");
    if (!known_transport(r->transport_name)) {
        st = wsync_error(WSYNC_ERR_INVALID, "unknown transport '%s' (valid: auto, tcp, nccl, verbs, local)",
                         r->transport_name);
        wsync_receiver_destroy(r);
        return st;
    }
    if (strcmp(r->transport_name, "nccl") == 0 && wsync_cuda_device_count() == 0) {
        wsync_receiver_destroy(r);
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl needs a CUDA device, and there is none here (or "
                                                  "wsync was built without CUDA): use transport tcp or auto");
    }
    wsync_host_id(cfg->host_id, r->host_id, sizeof(r->host_id));
    if (cfg->bind_host && cfg->bind_host[0]) {
        r->bind_host = strdup(cfg->bind_host);
    } else {
        wsync_primary_ipv4(host, sizeof(host));
        r->bind_host = strdup(host);
    }
    r->images.nslots = cfg->mode == WSYNC_MODE_IN_PLACE ? 1 : 2; /* the first pull agrees on the node's count */
    snprintf(r->board_name, sizeof(r->board_name), "wsync/%s/%s", r->host_id, r->engine_id);

    WSYNC_CHECK_GOTO(wsync_mem_get(cfg->device ? cfg->device : "host", &r->mem, &r->device), st, err);
    WSYNC_CHECK_GOTO(r->mem->init(r->device), st, err);
    r->win_ops = wsync_window_for(r->mem->kind);
    WSYNC_CHECK_GOTO(wsync_control_open(r->control_url, r->token, &r->control), st, err);
    /* Until create returns, the caller's flag stops its waits (a binding
     * interrupts a construction this way); the receiver's own after. */
    wsync_control_set_cancel(r->control, cfg->cancel ? cfg->cancel : &r->cancelled);
    r->run.progress = recv_progress_open(r->control_url, r->token, r->engine_id, cfg->local_rank == 0);
    WSYNC_CHECK_GOTO(wsync_auth_init(&r->auth, r->token), st, err);
    WSYNC_CHECK_GOTO(board_open_cancellable(r->board_name, cfg->local_rank, cfg->local_world, board_device(r),
                                            &r->auth, rejoin_ms(), cfg->cancel, &r->board),
                     st, err);
    WSYNC_CHECK_GOTO(recv_targets_init(r), st, err);
    WSYNC_CHECK_GOTO(choose_plan(r), st, err);
    if (cfg->local_rank == 0) {
        /* The host id tells a single-copy trainer on this host that this
         * node reads its memory (wsync_publisher_wait_held); under relay:F
         * the node serves what it holds to other nodes, which find its relay
         * in its registration. */
        wsync_relay_registration_t reg = {.holds = -1};
        json_t *endpoint = NULL;
        snprintf(reg.host_id, sizeof(reg.host_id), "%s", r->host_id);
        st = WSYNC_OK;
        if (r->node.plan.kind == WSYNC_PLAN_RELAY || recv_plan_auto(&r->node)) { /* auto may choose a relay plan */
            st = relay_start(r->bind_host, &r->auth, r->engine_id, r->mem->kind, r->device, &r->node.relay);
            if (st == WSYNC_OK)
                snprintf(reg.relay, sizeof(reg.relay), "%s", relay_address(r->node.relay));
        }
        if (st == WSYNC_OK && (endpoint = wsync_relay_registration_endpoint(&reg)) == NULL)
            WSYNC_CHECK_GOTO(wsync_error(WSYNC_ERR_NOMEM, "engine %s: out of memory", r->engine_id), st, err);
        gethostname(host, sizeof(host));
        if (st == WSYNC_OK)
            st = wsync_control_register_engine(r->control, r->engine_id, host, cfg->local_world, endpoint);
        if (st == WSYNC_OK)
            st = reporter_start(r->control_url, r->token, r->engine_id, host, cfg->local_world, endpoint,
                                &r->reporter);
        json_decref(endpoint);
        if (st != WSYNC_OK)
            goto err;
        board_watch(r->board, rank_changed, r);
    }
    wsync_control_set_cancel(r->control, &r->cancelled);
    r->cfg.cancel = NULL; /* the caller's flag is not read after create */
    *out = r;
    return WSYNC_OK;
err:
    wsync_receiver_destroy(r);
    return st;
}

/* Zero `len` bytes of image memory (host or this rank's device). */
static wsync_status_t zero_image(wsync_receiver_t *r, void *ptr, size_t len)
{
    enum { PART = 16 << 20 };
    void *zeros;
    size_t at;
    if (r->mem->kind == WSYNC_MEM_HOST) {
        memset(ptr, 0, len);
        return WSYNC_OK;
    }
    zeros = calloc(1, PART);
    WSYNC_CHECK_ALLOC(zeros);
    for (at = 0; at < len; at += PART) {
        wsync_status_t st = r->mem->copy((char *)ptr + at, zeros, len - at < PART ? len - at : PART);
        if (st != WSYNC_OK) {
            free(zeros);
            return st;
        }
    }
    free(zeros);
    return WSYNC_OK;
}

/* Slot s's window on the board: the image, or with a sparse GPU image (which
 * has no CUDA IPC handle) its fan-out window (recv_fanmap_t), which holds
 * all the node's other ranks read of it. */
static wsync_status_t export_slot(wsync_receiver_t *r, int s)
{
    const wsync_window_t *w = r->images.gpu_sparse ? &r->images.gpu_fan[s] : &r->images.win[s];
    wsync_blob_t blob;
    WSYNC_CHECK(r->win_ops->export_blob(w, &blob));
    return board_put_window(r->board, s, &blob, w->fd, r->images.gpu_sparse ? r->images.gpu_fan_len : r->images.len);
}

/* Image slots sized for `need` bytes, exported on the board. With a target
 * they start zeroed: destination bytes no block covers (vocabulary padding)
 * are never sent, and must read zero. */
wsync_status_t recv_ensure_images(wsync_receiver_t *r, uint64_t need)
{
    int s;
    if (r->images.len) {
        if (need > r->images.len)
            return wsync_error(WSYNC_ERR_CONFLICT,
                               "the model grew: version needs a %llu-byte image, this engine holds %zu; "
                               "restart the engine",
                               (unsigned long long)need, r->images.len);
        return WSYNC_OK;
    }
    r->images.len = need ? need : WSYNC_ALIGN;
    for (s = 0; s < r->images.nslots; s++) {
        if (s == 0 && r->cfg.image) {
            if (r->cfg.image_len < r->images.len)
                return wsync_error(WSYNC_ERR_INVALID, "the given image has %zu bytes, the model needs %zu",
                                   r->cfg.image_len, r->images.len);
            if (r->mem->kind == WSYNC_MEM_HOST) {
                if (!find_host_image(r->cfg.image, &r->images.win[0]))
                    return wsync_error(WSYNC_ERR_INVALID,
                                       "host image memory must come from wsync_image_alloc so the other "
                                       "local ranks can map it");
            } else {
                r->images.win[0] = (wsync_window_t){.ptr = r->cfg.image, .len = r->cfg.image_len, .fd = -1};
            }
            r->images.caller_image = 1;
        } else if (r->images.gpu_sparse && r->mem->kind == WSYNC_MEM_CUDA) {
            size_t backed = 0;
            WSYNC_CHECK(wsync_cuda_alloc_sparse(r->images.len, r->images.gpu_backed, r->images.ngpu_backed,
                                                &r->images.win[s], &backed));
            LOG_INFO("engine %s rank %d: in place into the caller's GPU tensors, the image backs %zu of its %zu "
                     "bytes (%zu ranges pass through it; the rest lands straight in the tensors), its fan-out "
                     "window %llu",
                     r->engine_id, r->cfg.local_rank, backed, r->images.len, r->images.ngpu_backed,
                     (unsigned long long)r->images.gpu_fan_len);
        } else if (r->images.sparse && !r->images.gpu_sparse) {
            WSYNC_CHECK(wsync_shm_alloc_sparse(r->images.len, &r->images.win[s]));
        } else {
            WSYNC_CHECK(r->win_ops->alloc(r->images.len, &r->images.win[s]));
            if (r->images.gpu_sparse) /* WSYNC_TEST_HOST_FAN_WINDOW: that path on a whole host image */
                LOG_INFO("engine %s rank %d: test hook: the sparse GPU image's path on host memory, its fan-out "
                         "window %llu",
                         r->engine_id, r->cfg.local_rank, (unsigned long long)r->images.gpu_fan_len);
        }
        if (r->images.gpu_sparse) /* its fan-out window, exported instead of it */
            WSYNC_CHECK(r->win_ops->alloc(r->images.gpu_fan_len ? r->images.gpu_fan_len : 1, &r->images.gpu_fan[s]));
        if (r->held.spec && (r->images.caller_image || r->mem->kind != WSYNC_MEM_HOST) &&
            !r->images.gpu_sparse) /* fresh shm is zero */
            WSYNC_CHECK(zero_image(r, r->images.win[s].ptr, r->images.len));
        WSYNC_CHECK(export_slot(r, s));
    }
    return WSYNC_OK;
}

/* What a rank > 0 posts on a board it (re)joined: its spec, slots, windows. */
static wsync_status_t post_on_board(wsync_receiver_t *r)
{
    int s;
    if (r->held.spec)
        WSYNC_CHECK(board_put_text(r->board, BOARD_TEXT_SPEC, r->held.spec, strlen(r->held.spec)));
    if (r->images.len)
        board_post_slots(r->board, r->images.nslots);
    for (s = 0; s < r->images.nslots && r->images.len; s++)
        WSYNC_CHECK(export_slot(r, s));
    return WSYNC_OK;
}

/* Ranks > 0: rejoin when local rank 0 restarted (new board). The new board
 * is joined and posted on before the old one is let go: when rank 0 is not
 * back in time, came back with another --local-world, or the posting fails,
 * this rank keeps its old (dead) board, says why, and tries again at its
 * next pull. */
wsync_status_t recv_rejoin_if_needed(wsync_receiver_t *r)
{
    board_t *old = r->board, *nb = NULL;
    wsync_status_t st;
    int p, s;
    if (!board_leader_gone(old))
        return WSYNC_OK;
    LOG_WARN("engine %s rank %d: local rank 0 restarted; rejoining its board", r->engine_id, r->cfg.local_rank);
    st = board_open_cancellable(r->board_name, r->cfg.local_rank, r->cfg.local_world, board_device(r), &r->auth,
                                rejoin_ms(), &r->cancelled, &nb);
    if (st == WSYNC_OK) {
        r->board = nb;
        st = post_on_board(r);
        if (st != WSYNC_OK) {
            r->board = old;
            board_close(nb);
        }
    }
    if (st != WSYNC_OK)
        return wsync_error(st,
                           "engine %s rank %d: local rank 0 is gone and this rank could not rejoin the node: "
                           "%s%s; "
                           "this rank tries again at its next pull",
                           r->engine_id, r->cfg.local_rank, wsync_last_error(),
                           st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_IO || st == WSYNC_ERR_PEER
                               ? " (restart local rank 0 with the same --engine and --local-world)"
                               : "");
    board_close(old);
    for (p = 0; p < BOARD_MAX_RANKS; p++)
        for (s = 0; s < BOARD_SLOTS; s++)
            if (r->images.peers[p][s].ptr) {
                r->win_ops->unmap(r->images.peers[p][s].ptr, r->images.peers[p][s].len);
                r->images.peers[p][s].ptr = NULL;
            }
    r->run.gen = 0;
    return WSYNC_OK;
}

uint64_t wsync_receiver_version(const wsync_receiver_t *r)
{
    return r->held.version;
}

uint64_t wsync_receiver_layout_generation(const wsync_receiver_t *r)
{
    return r->held.layout_generation;
}

size_t wsync_receiver_tensor_count(const wsync_receiver_t *r)
{
    if (r->held.tl)
        return r->held.tl->tg[r->cfg.local_rank]->ndests;
    return r->held.layout ? r->held.layout->manifest->ntensors : 0;
}

/* Where the held tensor at image offset `off` is: in the caller's memory
 * when a destination holds it (staged with one image, the image may already
 * hold part of the next version), else in the image. */
static void *held_ptr(const wsync_receiver_t *r, uint64_t off)
{
    char *p = recv_dests_ptr(r->held.dm, off);
    return p ? p : (char *)r->images.win[r->held.slot].ptr + off;
}

wsync_status_t wsync_receiver_tensor_at(const wsync_receiver_t *r, size_t i, void **ptr, wsync_tensor_info_t *info)
{
    const wsync_tensor_t *t;
    if (r->held.layout == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    if (i >= wsync_receiver_tensor_count(r))
        return wsync_error(WSYNC_ERR_NOT_FOUND, "tensor index %zu out of %zu", i, wsync_receiver_tensor_count(r));
    if (r->held.tl) {
        const wsync_dest_t *d = &r->held.tl->tg[r->cfg.local_rank]->dests[i];
        if (ptr)
            *ptr = held_ptr(r, d->offset);
        if (info) {
            info->name = d->name;
            info->dtype = wsync_dtype_name(d->dtype);
            info->ndim = d->ndim;
            memcpy(info->shape, d->shape, sizeof(info->shape));
            info->offset = d->offset;
            info->size = d->size;
        }
        return WSYNC_OK;
    }
    t = &r->held.layout->manifest->tensors[i];
    if (ptr)
        *ptr = held_ptr(r, t->offset);
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
    if (r->held.layout == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    i = r->held.tl ? wsync_target_find(r->held.tl->tg[r->cfg.local_rank], name)
                   : wsync_manifest_find(r->held.layout->manifest, name);
    if (i < 0)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "version %llu has no tensor named '%s'%s",
                           (unsigned long long)r->held.version, name, r->held.tl ? " in this rank's target" : "");
    return wsync_receiver_tensor_at(r, (size_t)i, ptr, info);
}

void wsync_receiver_cancel(wsync_receiver_t *r)
{
    __atomic_store_n(&r->cancelled, 1, __ATOMIC_RELEASE);
}

void wsync_receiver_cancel_clear(wsync_receiver_t *r)
{
    __atomic_store_n(&r->cancelled, 0, __ATOMIC_RELEASE);
}

wsync_status_t wsync_receiver_image(const wsync_receiver_t *r, void **ptr, size_t *len)
{
    if (r->held.layout == NULL)
        return wsync_error(WSYNC_ERR_NOT_FOUND, "no version held yet: pull first");
    *ptr = r->images.win[r->held.slot].ptr;
    *len = r->held.tl ? r->held.tl->image_len : r->held.layout->manifest->image_size;
    return WSYNC_OK;
}

void wsync_receiver_destroy(wsync_receiver_t *r)
{
    int p, s;
    if (r == NULL)
        return;
    board_watch(r->board, NULL, NULL);    /* its calls post to the reporter */
    reporter_stop(r->reporter, 5000);     /* the last reports, if the endpoint is there */
    relay_stop(r->node.relay);            /* before the images it serves go */
    recv_progress_close(r->run.progress); /* its thread reports through its own client */
    recv_transport_reset(r);
    for (p = 0; p < BOARD_MAX_RANKS; p++)
        for (s = 0; s < BOARD_SLOTS; s++)
            if (r->images.peers[p][s].ptr)
                r->win_ops->unmap(r->images.peers[p][s].ptr, r->images.peers[p][s].len);
    for (s = 0; s < r->images.nslots; s++)
        if (r->images.win[s].ptr && !(s == 0 && r->images.caller_image))
            r->win_ops->free(&r->images.win[s]);
    recv_gpu_sparse_free(r);
    board_close(r->board);
    wsync_control_close(r->control);
    wsync_sync_layout_free(r->held.layout);
    recv_tlayout_free(r->held.tl);
    recv_dests_free(r->held.dm);
    free(r->node.links);
    json_decref(r->run.next_record);
    json_decref(r->run.trainers);
    free(r->held.spec);
    free(r->engine_id);
    free(r->control_url);
    free(r->token);
    free(r->transport_name);
    free(r->bind_host);
    pthread_mutex_destroy(&r->transports.pull_conns.lock);
    free(r);
}
