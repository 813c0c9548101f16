/* publisher.c: a trainer rank's publisher: owned extents, two publish slots,
 * digest + report + snapshot copy per version (snapshot.c). Serving pulls is
 * in pull_server.c. */
#include "trainer_side/publisher_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/fault.h"
#include "common/proto/msg.h"
#include "common/base/settings.h"
#include "common/base/util.h"

static wsync_status_t load_layout(const char *manifest_json, wsync_layout_kind_t kind, int world, uint64_t chunk,
                                  wsync_sync_layout_t **out)
{
    json_error_t jerr;
    json_t *j = json_loads(manifest_json ? manifest_json : "", 0, &jerr);
    wsync_manifest_t *m = NULL;
    wsync_status_t st;

    if (j == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest JSON: %s (line %d)", jerr.text, jerr.line);
    st = wsync_manifest_from_json(j, &m);
    json_decref(j);
    WSYNC_CHECK(st);
    return wsync_sync_layout_build(m, (int)kind, world, chunk, out);
}

wsync_status_t wsync_publisher_owned_extents(const char *manifest_json, wsync_layout_kind_t layout, int world,
                                             int rank, wsync_owned_t *out, int max, int *n)
{
    wsync_sync_layout_t *sl = NULL;
    size_t i;

    if (rank < 0 || rank >= world)
        return wsync_error(WSYNC_ERR_INVALID, "rank %d is outside world %d", rank, world);
    WSYNC_CHECK(load_layout(manifest_json, layout, world, 0, &sl));
    *n = (int)sl->layout->nextents[rank];
    for (i = 0; i < sl->layout->nextents[rank] && (int)i < max; i++) {
        out[i].offset = sl->layout->extents[rank][i].offset;
        out[i].len = sl->layout->extents[rank][i].len;
        out[i].ptr = NULL;
    }
    wsync_sync_layout_free(sl);
    return WSYNC_OK;
}

/* The caller's extents, checked against the layout. */
static wsync_status_t collect_owned(wsync_publisher_t *p)
{
    const wsync_layout_t *l = p->sl->layout;
    int r = p->cfg.rank;
    size_t i, n = l->nextents[r];

    p->nspans = n;
    p->owned = calloc(n ? n : 1, sizeof(*p->owned));
    WSYNC_CHECK_ALLOC(p->owned);
    if (p->cfg.image == NULL && (size_t)p->cfg.nowned != n)
        return wsync_error(WSYNC_ERR_INVALID,
                           "rank %d owns %zu extents under this layout but %d were given "
                           "(wsync_publisher_owned_extents lists them)",
                           r, n, p->cfg.nowned);
    for (i = 0; i < n; i++) {
        const wsync_extent_t *e = &l->extents[r][i];
        p->owned[i].offset = e->offset;
        p->owned[i].len = e->len;
        if (p->cfg.image) {
            p->owned[i].ptr = (const char *)p->cfg.image + e->offset;
        } else {
            const wsync_owned_t *o = &p->cfg.owned[i];
            if (o->offset != e->offset || o->len != e->len || (o->ptr == NULL && o->len))
                return wsync_error(WSYNC_ERR_INVALID,
                                   "owned extent %zu of rank %d should be [%llu, +%llu) with a pointer, "
                                   "got [%llu, +%llu)",
                                   i, r, (unsigned long long)e->offset, (unsigned long long)e->len,
                                   (unsigned long long)o->offset, (unsigned long long)o->len);
            p->owned[i].ptr = o->ptr;
        }
        p->owned_bytes += e->len;
    }
    return WSYNC_OK;
}

/* A copy slot (`direct` 0: one buffer the owned bytes are copied into) or
 * the direct slot (the caller's extents, served as they are). */
static wsync_status_t slot_init(wsync_publisher_t *p, pub_slot_t *s, int direct)
{
    uint64_t pos = 0;
    size_t i;

    s->spans = calloc(p->nspans ? p->nspans : 1, sizeof(*s->spans));
    s->copied = calloc(p->nmy ? p->nmy : 1, 1);
    WSYNC_CHECK_ALLOC(s->spans);
    WSYNC_CHECK_ALLOC(s->copied);
    if (direct) {
        /* Every extent is its own area, registered where the caller keeps it. */
        s->nareas = (int)p->nspans;
        s->area_ptr = calloc(p->nspans ? p->nspans : 1, sizeof(void *));
        s->area_len = calloc(p->nspans ? p->nspans : 1, sizeof(uint64_t));
        WSYNC_CHECK_ALLOC(s->area_ptr);
        WSYNC_CHECK_ALLOC(s->area_len);
        for (i = 0; i < p->nspans; i++) {
            s->area_ptr[i] = (void *)p->owned[i].ptr;
            s->area_len[i] = p->owned[i].len;
            s->spans[i] = (pub_span_t){p->owned[i].offset, p->owned[i].len, (void *)p->owned[i].ptr, (int)i, 0};
        }
        return WSYNC_OK;
    }
    WSYNC_CHECK(p->mem->alloc(p->owned_bytes ? p->owned_bytes : 1, &s->buf));
    s->nareas = 1;
    s->area_ptr = calloc(1, sizeof(void *));
    s->area_len = calloc(1, sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(s->area_ptr);
    WSYNC_CHECK_ALLOC(s->area_len);
    s->area_ptr[0] = s->buf;
    s->area_len[0] = p->owned_bytes ? p->owned_bytes : 1;
    for (i = 0; i < p->nspans; i++) {
        s->spans[i] = (pub_span_t){p->owned[i].offset, p->owned[i].len, (char *)s->buf + pos, 0, pos};
        pos += p->owned[i].len;
    }
    return WSYNC_OK;
}

static void slot_free(wsync_publisher_t *p, pub_slot_t *s)
{
    int t, a;
    for (t = 0; t < PUB_MAX_TRANSPORTS; t++) {
        if (s->regions[t] == NULL)
            continue;
        for (a = 0; a < s->nareas; a++)
            if (s->regions[t][a])
                p->transports[t].ops->dereg(s->regions[t][a]);
        free(s->regions[t]);
    }
    if (s->buf)
        p->mem->free(s->buf);
    free(s->area_ptr);
    free(s->area_len);
    free(s->spans);
    free(s->copied);
}

/* Pieces this rank sends, with the span each lies in. */
static wsync_status_t index_pieces(wsync_publisher_t *p)
{
    const wsync_plan_t *plan = p->sl->plan;
    int r = p->cfg.rank;
    size_t i, s = 0;
    uint64_t covered = 0;

    p->nmy = plan->rank_npieces[r];
    p->my_pieces = plan->rank_pieces[r];
    p->piece_slot_off = calloc(plan->npieces ? plan->npieces : 1, sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(p->piece_slot_off);
    for (i = 0; i < p->nmy; i++) {
        const wsync_piece_t *pc = &plan->pieces[p->my_pieces[i]];
        while (s < p->nspans && p->owned[s].offset + p->owned[s].len <= pc->offset)
            s++;
        if (s == p->nspans || pc->offset < p->owned[s].offset)
            return wsync_error(WSYNC_ERR_INTERNAL, "piece %u is not inside an owned extent", pc->id);
        p->piece_slot_off[pc->id] = s;
        covered += pc->len;
    }
    /* Pieces never overlap, so equal byte counts mean they tile the extents. */
    p->pieces_tile = covered == p->owned_bytes;
    return WSYNC_OK;
}

static wsync_status_t register_with_control(wsync_publisher_t *p)
{
    char pull[192];
    json_t *ep;
    wsync_status_t st;

    snprintf(pull, sizeof(pull), "%s:%d", p->advertise, p->listen_port);
    ep = json_pack("{s:s, s:s, s:s}", "pull", pull, "host_id", p->host_id, "device",
                   p->cfg.device ? p->cfg.device : "host");
    WSYNC_CHECK_ALLOC(ep);
    st = wsync_control_register_trainer(p->control, p->cfg.rank, p->cfg.world, p->advertise, ep);
    if (st == WSYNC_OK && p->heartbeat == NULL) { /* the same registration, as a heartbeat */
        json_t *b = json_pack("{s:i, s:i, s:s, s:O}", "rank", p->cfg.rank, "world", p->cfg.world, "host",
                              p->advertise, "endpoint", ep);
        st = b ? pub_heartbeat_start(p->control_url, p->cfg.token, "/v1/trainers/register", b, &p->heartbeat)
               : WSYNC_ERR_NOMEM;
        json_decref(b);
    }
    json_decref(ep);
    return st;
}

/* Rank 0 posts the manifest once per layout, under its digest; versions
 * name it by that digest (a manifest of 100k tensors is ~10 MB of JSON that
 * used to travel, and be parsed again, with every version). */
static wsync_status_t post_layout(wsync_publisher_t *p)
{
    json_t *m = NULL;
    wsync_status_t st;
    WSYNC_CHECK(wsync_manifest_to_json(p->sl->manifest, &m));
    st = wsync_control_put_layout(p->control, p->sl->manifest_digest, m);
    json_decref(m);
    return st;
}

/* The report of one version; an endpoint that lost the layout (restarted
 * without its state file) answers 404 to rank 0, which posts it again. */
static wsync_status_t report(wsync_publisher_t *p, uint64_t version, const json_t *pieces)
{
    wsync_status_t st = wsync_control_publish(p->control, p->cfg.rank, p->cfg.world, version, p->layout_json,
                                              pieces);
    if (st == WSYNC_ERR_NOT_FOUND && p->cfg.rank == 0) {
        WSYNC_CHECK(post_layout(p));
        st = wsync_control_publish(p->control, p->cfg.rank, p->cfg.world, version, p->layout_json, pieces);
    }
    return st;
}

/* The host engines dial: advertise_host; else the listen address's host
 * when it names one address (a server bound to 127.0.0.1 is not reached at
 * the machine's primary address, issue 25.13); else the primary IPv4. */
static void choose_advertise(const wsync_publisher_config_t *cfg, char *out, size_t len)
{
    const char *colon = cfg->listen ? strrchr(cfg->listen, ':') : NULL;
    char host[256] = "";
    if (cfg->advertise_host && cfg->advertise_host[0]) {
        snprintf(out, len, "%s", cfg->advertise_host);
        return;
    }
    if (colon && (size_t)(colon - cfg->listen) < sizeof(host))
        snprintf(host, sizeof(host), "%.*s", (int)(colon - cfg->listen), cfg->listen);
    if (host[0] && strcmp(host, "0.0.0.0") != 0 && strcmp(host, "*") != 0 && strcmp(host, "[::]") != 0)
        snprintf(out, len, "%s", host);
    else
        wsync_primary_ipv4(out, len);
}

wsync_status_t wsync_publisher_create(const wsync_publisher_config_t *cfg, wsync_publisher_t **out)
{
    wsync_publisher_t *p;
    wsync_status_t st;
    int i;

    WSYNC_CHECK(wsync_settings_init()); /* a bad WSYNC_* value is refused here */
    if (cfg == NULL || (cfg->control_url == NULL && cfg->serve == NULL) || cfg->manifest_json == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "publisher: control_url (or serve) and manifest_json are required");
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return wsync_error(WSYNC_ERR_INVALID, "publisher: rank %d must be in [0, world %d)", cfg->rank, cfg->world);
    if (cfg->image == NULL && cfg->owned == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "publisher: give either image or owned extents");
    p = calloc(1, sizeof(*p));
    WSYNC_CHECK_ALLOC(p);
    p->cfg = *cfg;
    p->latest = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->tlock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->manifest_json = strdup(cfg->manifest_json);
    p->cfg.manifest_json = p->manifest_json;
    wsync_host_id(cfg->host_id, p->host_id, sizeof(p->host_id));
    choose_advertise(cfg, p->advertise, sizeof(p->advertise));

    WSYNC_CHECK_GOTO(wsync_mem_get(cfg->device ? cfg->device : "host", &p->mem, &p->device), st, err);
    WSYNC_CHECK_GOTO(p->mem->init(p->device), st, err);
    WSYNC_CHECK_GOTO(load_layout(cfg->manifest_json, cfg->layout, cfg->world, cfg->chunk_size, &p->sl), st, err);
    WSYNC_CHECK_GOTO(collect_owned(p), st, err);
    WSYNC_CHECK_GOTO(index_pieces(p), st, err);
    p->layout_json = wsync_sync_layout_to_json(p->sl, 0);
    if (p->layout_json == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory", p->cfg.rank);
        goto err;
    }
    p->snap_threads = pub_snapshot_threads(cfg->threads);
    for (i = 0; i < PUB_SLOTS && !cfg->zero_copy; i++) /* zero_copy: no slot memory at all */
        WSYNC_CHECK_GOTO(slot_init(p, &p->slots[i], 0), st, err);
    WSYNC_CHECK_GOTO(slot_init(p, &p->slots[PUB_DIRECT], 1), st, err);
    if (cfg->serve) {
        wsync_control_server_config_t sc = {.listen = cfg->serve, .state_file = cfg->serve_state};
        WSYNC_CHECK_GOTO(wsync_control_server_start(&sc, &p->control_server), st, err);
    }
    p->control_url = strdup(cfg->control_url ? cfg->control_url : wsync_control_server_url(p->control_server));
    p->cfg.control_url = p->control_url;
    WSYNC_CHECK_GOTO(wsync_control_open(p->control_url, cfg->token, &p->control), st, err);
    WSYNC_CHECK_GOTO(wsync_auth_init(&p->auth, cfg->token), st, err);
    WSYNC_CHECK_GOTO(pub_server_start(p), st, err);
    WSYNC_CHECK_GOTO(register_with_control(p), st, err);
    if (p->cfg.rank == 0)
        WSYNC_CHECK_GOTO(post_layout(p), st, err);
    *out = p;
    return WSYNC_OK;
err:
    wsync_publisher_destroy(p);
    return st;
}

const char *wsync_publisher_control_url(const wsync_publisher_t *p)
{
    return p->control_url;
}

uint64_t wsync_publisher_owned_bytes(const wsync_publisher_t *p)
{
    return p->owned_bytes;
}

/* A slot that is neither the newest version nor being pulled, or with
 * `direct` the caller's extents. Either way the caller has written its
 * extents since the last publish: a single-copy version still served from
 * them is released first. */
static wsync_status_t take_slot(wsync_publisher_t *p, int direct, uint64_t version, int *slot)
{
    uint64_t deadline = wsync_now_ns() +
                        (uint64_t)(p->cfg.slot_wait_ms > 0 ? p->cfg.slot_wait_ms : 60000) * 1000000ULL;
    char why[160];
    int s;
    pthread_mutex_lock(&p->lock);
    if (p->held_version && !p->held_released) {
        snprintf(why, sizeof(why),
                 "it was served single-copy and version %llu was published before wsync_publisher_wait_held "
                 "released it",
                 (unsigned long long)version);
        pub_release_direct(p, p->held_version, why);
    }
    for (;;) {
        for (s = 0; s < PUB_SLOTS; s++)
            if (s != p->latest && p->slots[s].pins == 0)
                break;
        if (s < PUB_SLOTS || direct)
            break;
        if (wsync_now_ns() >= deadline) {
            pthread_mutex_unlock(&p->lock);
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "trainer rank %d: both publish slots are still being pulled by engines; "
                               "raise slot_wait_ms or check for stuck engines",
                               p->cfg.rank);
        }
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 50);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    if (direct)
        s = PUB_DIRECT;
    /* The slot is ours: mark it empty so no new pull starts on it. */
    p->slots[s].version = 0;
    if (p->latest == s)
        p->latest = -1;
    pthread_mutex_unlock(&p->lock);
    *slot = s;
    return WSYNC_OK;
}

/* Slot `slot` holds `version` from now on, with no piece copied yet (every
 * piece is in place with zero-copy): pulls may start and wait per piece. */
static void announce(wsync_publisher_t *p, int slot, uint64_t version)
{
    pub_slot_t *s = &p->slots[slot];
    pthread_mutex_lock(&p->lock);
    memset(s->copied, slot == PUB_DIRECT ? 1 : 0, p->nmy ? p->nmy : 1);
    s->copy_status = WSYNC_OK;
    s->version = version;
    p->latest = slot;
    if (slot == PUB_DIRECT) {
        p->held_version = version;
        p->held_released = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

/* Takes an announced version down: pulls waiting for its pieces fail with
 * `why`, new pulls of it are refused naming it. */
static void withdraw(wsync_publisher_t *p, int slot, uint64_t version, wsync_status_t st, const char *why)
{
    pub_slot_t *s = &p->slots[slot];
    pthread_mutex_lock(&p->lock);
    s->copy_status = st;
    s->version = 0;
    if (p->latest == slot)
        p->latest = -1;
    if (slot == PUB_DIRECT && p->held_version == version)
        p->held_released = 1; /* nothing left to wait for */
    p->withdrawn = version;
    snprintf(p->withdrawn_why, sizeof(p->withdrawn_why), "%s", why);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* Digest from the caller's extents, announce, report, and copy into the slot
 * while engines already pull: they start after the digest pass, not after
 * the copy, and the copy overlaps their transfer. */
wsync_status_t wsync_publisher_publish(wsync_publisher_t *p, uint64_t version)
{
    return wsync_publisher_publish_opts(p, version, NULL);
}

/* Single copy or a slot, for this publish: the flags, else the publisher's
 * default (zero_copy). */
static wsync_status_t publish_direct(const wsync_publisher_t *p, const wsync_publish_opts_t *opts, int *direct)
{
    unsigned f = opts ? opts->flags : 0;
    if ((f & WSYNC_PUBLISH_SINGLE_COPY) && (f & WSYNC_PUBLISH_SLOT))
        return wsync_error(WSYNC_ERR_INVALID, "publish: WSYNC_PUBLISH_SINGLE_COPY and WSYNC_PUBLISH_SLOT exclude "
                                              "each other");
    if (f & ~(unsigned)(WSYNC_PUBLISH_SINGLE_COPY | WSYNC_PUBLISH_SLOT))
        return wsync_error(WSYNC_ERR_INVALID, "publish: unknown flags 0x%x", f);
    if ((f & WSYNC_PUBLISH_SLOT) && p->cfg.zero_copy)
        return wsync_error(WSYNC_ERR_INVALID,
                           "publish: WSYNC_PUBLISH_SLOT needs publish slots, and this publisher has none "
                           "(zero_copy = 1); create it with zero_copy = 0");
    *direct = (f & WSYNC_PUBLISH_SINGLE_COPY) || (p->cfg.zero_copy && !(f & WSYNC_PUBLISH_SLOT));
    return WSYNC_OK;
}

/* This rank's pieces as a report lists them: id, offset, len and, with
 * `sums`, the digest (piece `bad` given a wrong one: a test hook). */
static json_t *pieces_json(const wsync_publisher_t *p, uint64_t version, const uint64_t *sums, long bad)
{
    const wsync_plan_t *plan = p->sl->plan;
    json_t *pieces = json_array();
    size_t i;
    for (i = 0; pieces && i < p->nmy; i++) {
        const wsync_piece_t *pc = &plan->pieces[p->my_pieces[i]];
        json_t *e = json_pack("{s:I, s:I, s:I}", "id", (json_int_t)pc->id, "offset", (json_int_t)pc->offset, "len",
                              (json_int_t)pc->len);
        if (e && sums) {
            char hex[17];
            uint64_t d = wsync_digest_final(sums[i], pc->len, pc->offset);
            if ((long)pc->id == bad) {
                d ^= 1;
                LOG_WARN("test hook: trainer rank %d posts a wrong digest for piece %u of version %llu",
                         p->cfg.rank, pc->id, (unsigned long long)version);
            }
            wsync_digest_hex(d, hex);
            json_object_set_new(e, "digest", json_string(hex));
        }
        if (e == NULL || json_array_append_new(pieces, e) != 0) {
            json_decref(pieces);
            return NULL;
        }
    }
    return pieces;
}

/* `auto` announces before digesting from this rank's share up: below it the
 * digest (~0.1 ms per 512 MiB on an H200) costs less than the second report
 * and the engine's wait for it (one H200, bench/RESULTS.md: 4-64 MiB
 * versions were ready 0.1-0.3 ms later with late digests, 15.23 GB ones
 * 3.6 ms sooner). */
#define LATE_DIGESTS_MIN_BYTES (512ULL << 20)

/* Whether this publish announces its version before digesting it (setting
 * late_digests): single-copy only (the bytes engines copy are the caller's
 * own, which it does not write until wait_held), and with `auto` only GPU
 * memory, where the engines' landing and this digest share the GPU instead
 * of waiting for each other, of a share large enough for it to pay. */
static int late_digests(const wsync_publisher_t *p, int direct)
{
    long long v = wsync_setting_int(WSYNC_SET_LATE_DIGESTS); /* auto | on | off */
    return direct &&
           (v == 1 || (v == 0 && p->mem->kind == WSYNC_MEM_CUDA && p->owned_bytes >= LATE_DIGESTS_MIN_BYTES));
}

static void remember_report(wsync_publisher_t *p, uint64_t version, json_t *pieces)
{
    json_decref(p->reported_pieces);
    p->reported_pieces = json_incref(pieces);
    p->reported_version = version;
    p->resend_check_ns = wsync_now_ns() + 2000000000ULL;
}

/* Late digests: announce the version (a report without digests: engines
 * request and land now), digest while they do, then report again with the
 * digests; no engine makes the version ready before it compared every
 * piece with them. A failure after announcing withdraws the version here;
 * engines waiting for the digests fail at their timeout naming this rank. */
static wsync_status_t publish_late(wsync_publisher_t *p, int slot, uint64_t version)
{
    json_t *pieces = pieces_json(p, version, NULL, -1), *full = NULL;
    uint64_t *sums = calloc(p->nmy ? p->nmy : 1, sizeof(*sums));
    wsync_mem_job_t *job = NULL;
    wsync_status_t st = WSYNC_OK, cst;
    char why[512];
    if (pieces == NULL || sums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    announce(p, slot, version);
    /* On a GPU the digest runs while the report travels (and then beside
     * the engines' landing); on the host after it, on the publish threads. */
    st = pub_digest_start(p, &job);
    if (st == WSYNC_OK)
        st = report(p, version, pieces);
    wsync_trace("trainer rank %d: version %llu announced, digests to follow", p->cfg.rank,
                (unsigned long long)version);
    if (st == WSYNC_OK)
        remember_report(p, version, pieces);
    cst = pub_digest_finish(p, job, sums); /* frees the job, also after a failed report */
    if (st == WSYNC_OK)
        st = cst;
    wsync_trace("trainer rank %d: version %llu digested", p->cfg.rank, (unsigned long long)version);
    if (st == WSYNC_OK && wsync_fault(WSYNC_FAULT_DIGEST_DELAY_MS) > 0) /* test hook: engines land first */
        usleep((useconds_t)wsync_fault(WSYNC_FAULT_DIGEST_DELAY_MS) * 1000);
    if (st == WSYNC_OK && wsync_fault(WSYNC_FAULT_NO_DIGESTS)) {
        LOG_WARN("test hook: trainer rank %d never posts the digests of version %llu", p->cfg.rank,
                 (unsigned long long)version);
        goto out;
    }
    if (st == WSYNC_OK && (full = pieces_json(p, version, sums, (long)wsync_fault(WSYNC_FAULT_BAD_DIGEST))) == NULL)
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory", p->cfg.rank);
    if (st == WSYNC_OK)
        st = report(p, version, full);
    wsync_trace("trainer rank %d: version %llu digests posted", p->cfg.rank, (unsigned long long)version);
    if (st == WSYNC_OK)
        remember_report(p, version, full);
    if (st != WSYNC_OK) {
        snprintf(why, sizeof(why), "%s", wsync_last_error());
        withdraw(p, slot, version, st, why);
        st = wsync_error(st, "trainer rank %d: version %llu was announced before its digests, but %s", p->cfg.rank,
                         (unsigned long long)version, why);
    }
out:
    json_decref(pieces);
    json_decref(full);
    free(sums);
    return st;
}

wsync_status_t wsync_publisher_publish_opts(wsync_publisher_t *p, uint64_t version, const wsync_publish_opts_t *opts)
{
    json_t *pieces = NULL;
    pub_work_t *copy = NULL;
    wsync_status_t st, cst;
    uint64_t *sums = NULL;
    char why[512];
    int slot = 0, direct = 0;

    /* The start of publish-to-ready on the trace clock (the engine's
     * "reported" line is its end): bench/python_hf_bench.py reads both. */
    wsync_trace("trainer rank %d: publish of version %llu started", p->cfg.rank, (unsigned long long)version);
    WSYNC_CHECK(publish_direct(p, opts, &direct));
    WSYNC_CHECK(take_slot(p, direct, version, &slot));
    if (late_digests(p, direct))
        return publish_late(p, slot, version);
    if ((sums = calloc(p->nmy ? p->nmy : 1, sizeof(*sums))) == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    WSYNC_CHECK_GOTO(pub_digest(p, sums), st, out);
    wsync_trace("trainer rank %d: version %llu digested", p->cfg.rank, (unsigned long long)version);
    if ((pieces = pieces_json(p, version, sums, -1)) == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    announce(p, slot, version);
    st = direct ? WSYNC_OK : pub_copy_start(p, &p->slots[slot], &copy);
    if (st == WSYNC_OK)
        st = report(p, version, pieces);
    wsync_trace("trainer rank %d: version %llu reported", p->cfg.rank, (unsigned long long)version);
    if (st == WSYNC_OK)
        remember_report(p, version, pieces);
    if (st != WSYNC_OK)
        snprintf(why, sizeof(why), "%s", wsync_last_error());
    if (copy) {
        cst = pub_copy_finish(copy, st != WSYNC_OK);
        if (st == WSYNC_OK && cst != WSYNC_OK) {
            snprintf(why, sizeof(why), "its copy into the publish slot failed: %s", wsync_last_error());
            st = wsync_error(cst,
                             "trainer rank %d: version %llu was announced, but %s; it is withdrawn on "
                             "this rank: publish a newer version",
                             p->cfg.rank, (unsigned long long)version, why);
        }
    }
    if (st != WSYNC_OK)
        withdraw(p, slot, version, st, why);
out:
    json_decref(pieces);
    free(sums);
    return st;
}

/* The endpoint forgot this rank's report of `version` (it restarted while the
 * version waited for other ranks: only published versions are durable) or its
 * registration (restarted without its state file): send them again. */
static wsync_status_t resend_if_lost(wsync_publisher_t *p, uint64_t version)
{
    json_t *arr = NULL, *t;
    size_t i;
    int registered = 0;
    uint64_t known = 0;
    if (p->reported_version != version || p->reported_pieces == NULL)
        return WSYNC_OK;
    WSYNC_CHECK(wsync_control_trainers(p->control, &arr));
    json_array_foreach(arr, i, t) if (json_integer_value(json_object_get(t, "rank")) == p->cfg.rank)
    {
        registered = json_is_true(json_object_get(t, "registered"));
        known = (uint64_t)json_integer_value(json_object_get(t, "version"));
    }
    json_decref(arr);
    if (!registered) {
        LOG_WARN("trainer rank %d: the control endpoint %s does not know this rank (restarted without its "
                 "state?): "
                 "registering again",
                 p->cfg.rank, p->control_url);
        WSYNC_CHECK(register_with_control(p));
    }
    if (known >= version)
        return WSYNC_OK;
    LOG_WARN("trainer rank %d: the control endpoint %s lost this rank's report of version %llu (restarted?): "
             "sending it again",
             p->cfg.rank, p->control_url, (unsigned long long)version);
    return report(p, version, p->reported_pieces);
}

wsync_status_t wsync_publisher_wait_published(wsync_publisher_t *p, uint64_t version, int timeout_ms)
{
    const uint64_t end = wsync_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    for (;;) {
        uint64_t latest = 0, now = wsync_now_ns();
        int left = now >= end ? 0 : (int)((end - now) / 1000000ULL);
        WSYNC_CHECK(wsync_control_wait_version(p->control, version - 1, left < 500 ? left : 500, &latest));
        if (latest >= version)
            return WSYNC_OK;
        now = wsync_now_ns();
        if (now >= end)
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "trainer rank %d: version %llu was not published within %d ms "
                               "(another trainer rank has not reported it)",
                               p->cfg.rank, (unsigned long long)version, timeout_ms);
        /* Every 2 s of waiting: did the endpoint lose what this rank sent? */
        if (now >= p->resend_check_ns) {
            WSYNC_CHECK(resend_if_lost(p, version));
            p->resend_check_ns = now + 2000000000ULL;
        }
    }
}

void wsync_publisher_destroy(wsync_publisher_t *p)
{
    int i;
    if (p == NULL)
        return;
    pub_heartbeat_stop(p->heartbeat);
    pub_server_stop(p);
    for (i = 0; i < PUB_NSLOTS; i++)
        slot_free(p, &p->slots[i]);
    pub_stages_free(p);
    for (i = 0; i < p->ntransports; i++)
        p->transports[i].ops->close(p->transports[i].t);
    wsync_control_close(p->control);
    wsync_control_server_stop(p->control_server);
    free(p->control_url);
    json_decref(p->layout_json);
    json_decref(p->reported_pieces);
    wsync_sync_layout_free(p->sl);
    free(p->piece_slot_off);
    free(p->owned);
    free(p->manifest_json);
    pub_targets_free(p);
    pthread_mutex_destroy(&p->tlock);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
