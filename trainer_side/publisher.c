/* publisher.c: a trainer rank's publisher: create and destroy its objects
 * (publisher_internal.h), and publish a version: take a slot, digest,
 * announce, report, copy (snapshot.c). Serving pulls is in pull_server.c. */
#include "trainer_side/digest_merge.h"
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
    p->slots.latest = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->tcache.lock, NULL);
    pthread_mutex_init(&p->tcache.qlock, NULL);
    pthread_cond_init(&p->tcache.cond, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->manifest_json = strdup(cfg->manifest_json);
    p->cfg.manifest_json = p->manifest_json;
    wsync_host_id(cfg->host_id, p->host_id, sizeof(p->host_id));
    choose_advertise(cfg, p->advertise, sizeof(p->advertise));

    WSYNC_CHECK_GOTO(wsync_mem_get(cfg->device ? cfg->device : "host", &p->mem, &p->device), st, err);
    WSYNC_CHECK_GOTO(p->mem->init(p->device), st, err);
    WSYNC_CHECK_GOTO(load_layout(cfg->manifest_json, cfg->layout, cfg->world, cfg->chunk_size, &p->sl), st, err);
    WSYNC_CHECK_GOTO(pub_share_init(&p->share, p->sl, &p->cfg), st, err);
    p->report.layout_json = wsync_sync_layout_to_json(p->sl, 0);
    if (p->report.layout_json == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory", p->cfg.rank);
        goto err;
    }
    p->snap_threads = pub_snapshot_threads(cfg->threads);
    WSYNC_CHECK_GOTO(pub_slots_init(&p->slots, &p->share, p->mem, cfg->zero_copy), st, err);
    if (cfg->serve) {
        wsync_control_server_config_t sc = {.listen = cfg->serve, .state_file = cfg->serve_state};
        WSYNC_CHECK_GOTO(wsync_control_server_start(&sc, &p->control_server), st, err);
    }
    p->control_url = strdup(cfg->control_url ? cfg->control_url : wsync_control_server_url(p->control_server));
    p->cfg.control_url = p->control_url;
    WSYNC_CHECK_GOTO(wsync_control_open(p->control_url, cfg->token, &p->control), st, err);
    WSYNC_CHECK_GOTO(wsync_auth_init(&p->auth, cfg->token), st, err);
    WSYNC_CHECK_GOTO(pub_server_start(p), st, err);
    WSYNC_CHECK_GOTO(pub_report_register(p), st, err);
    if (p->cfg.rank == 0)
        WSYNC_CHECK_GOTO(pub_report_layout(p), st, err);
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
    return p->share.owned_bytes;
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
    if (p->slots.held_version && !p->slots.held_released) {
        snprintf(why, sizeof(why),
                 "it was served single-copy and version %llu was published before wsync_publisher_wait_held "
                 "released it",
                 (unsigned long long)version);
        pub_release_direct(p, p->slots.held_version, why);
    }
    for (;;) {
        s = pub_slots_free_copy(&p->slots);
        if (s >= 0 || direct)
            break;
        if (wsync_now_ns() >= deadline) {
            pthread_mutex_unlock(&p->lock);
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "trainer rank %d: every publish slot but the newest is still being pulled by "
                               "engines; "
                               "raise slot_wait_ms or check for stuck engines",
                               p->cfg.rank);
        }
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 50);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    if (direct)
        s = PUB_DIRECT;
    pub_slots_take(&p->slots, s); /* ours: no new pull starts on it */
    pthread_mutex_unlock(&p->lock);
    *slot = s;
    return WSYNC_OK;
}

/* Slot `slot` holds `version` from now on, with no piece copied yet (every
 * piece is in place with zero-copy): pulls may start and wait per piece. */
static void announce(wsync_publisher_t *p, int slot, uint64_t version)
{
    pthread_mutex_lock(&p->lock);
    pub_slots_announce(&p->slots, slot, version, p->share.nmy);
    pthread_mutex_unlock(&p->lock);
}

/* Takes an announced version down: pulls waiting for its pieces fail with
 * `why`, new pulls of it are refused naming it. */
static void withdraw(wsync_publisher_t *p, int slot, uint64_t version, wsync_status_t st, const char *why)
{
    pthread_mutex_lock(&p->lock);
    pub_slots_withdraw(&p->slots, slot, version, st, why);
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
           (v == 1 || (v == 0 && p->mem->kind == WSYNC_MEM_CUDA && p->share.owned_bytes >= LATE_DIGESTS_MIN_BYTES));
}

/* Late digests: announce the version (a report without digests: engines
 * request and land now), digest while they do, then report again with the
 * digests; no engine makes the version ready before it compared every
 * piece with them. A failure after announcing withdraws the version here;
 * engines waiting for the digests fail at their timeout naming this rank. */
static wsync_status_t publish_late(wsync_publisher_t *p, int slot, uint64_t version)
{
    json_t *pieces = NULL, *full = NULL;
    uint64_t *sums = calloc(p->share.nmy ? p->share.nmy : 1, sizeof(*sums));
    pub_dpass_t dp;
    wsync_status_t st = WSYNC_OK, cst;
    char why[512];
    if (sums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    /* On a GPU the digest runs while the report travels (and then beside
     * the engines' landing); on the host after it, on the publish threads.
     * Started before the version is announced: its requests then find the
     * put digests it computes with the record's on their way (pub_dpass).
     * The report is written after the launch, so the GPU starts first. */
    st = pub_dpass_start(p, slot, version, &dp);
    wsync_trace("trainer rank %d: version %llu: digest pass started", p->cfg.rank, (unsigned long long)version);
    if ((pieces = pub_report_pieces(p, version, NULL, -1)) == NULL && st == WSYNC_OK)
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
    announce(p, slot, version);
    if (st == WSYNC_OK)
        st = pub_report_send(p, version, pieces);
    wsync_trace("trainer rank %d: version %llu announced, digests to follow", p->cfg.rank,
                (unsigned long long)version);
    cst = pub_dpass_finish(p, slot, version, &dp, sums); /* frees the job, also after a failed report */
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
    if (st == WSYNC_OK &&
        (full = pub_report_pieces(p, version, sums, (long)wsync_fault(WSYNC_FAULT_BAD_DIGEST))) == NULL)
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory", p->cfg.rank);
    if (st == WSYNC_OK)
        st = pub_report_send(p, version, full);
    wsync_trace("trainer rank %d: version %llu digests posted", p->cfg.rank, (unsigned long long)version);
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
    if ((sums = calloc(p->share.nmy ? p->share.nmy : 1, sizeof(*sums))) == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    {
        pub_dpass_t dp;
        WSYNC_CHECK_GOTO(pub_dpass_start(p, slot, version, &dp), st, out);
        WSYNC_CHECK_GOTO(pub_dpass_finish(p, slot, version, &dp, sums), st, out);
    }
    wsync_trace("trainer rank %d: version %llu digested", p->cfg.rank, (unsigned long long)version);
    if ((pieces = pub_report_pieces(p, version, sums, -1)) == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "trainer rank %d: out of memory publishing version %llu", p->cfg.rank,
                         (unsigned long long)version);
        goto out;
    }
    announce(p, slot, version);
    st = direct ? WSYNC_OK : pub_copy_start(p, &p->slots.slot[slot], &copy);
    if (st == WSYNC_OK)
        st = pub_report_send(p, version, pieces);
    wsync_trace("trainer rank %d: version %llu reported", p->cfg.rank, (unsigned long long)version);
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
        WSYNC_CHECK(pub_report_check(p, version));
    }
}

void wsync_publisher_destroy(wsync_publisher_t *p)
{
    const wsync_transport_ops_t *ops[PUB_MAX_TRANSPORTS] = {NULL};
    int i;
    if (p == NULL)
        return;
    pub_heartbeat_stop(p->heartbeat);
    pub_server_stop(p);
    for (i = 0; i < p->serving.ntransports; i++)
        ops[i] = p->serving.transports[i].ops;
    pub_slots_free(&p->slots, p->mem, ops);
    pub_stages_free(p);
    for (i = 0; i < p->serving.ntransports; i++)
        p->serving.transports[i].ops->close(p->serving.transports[i].t);
    wsync_control_close(p->control);
    wsync_control_server_stop(p->control_server);
    free(p->control_url);
    pub_report_free(&p->report);
    wsync_sync_layout_free(p->sl);
    pub_share_free(&p->share);
    free(p->manifest_json);
    pub_targets_free(p);
    pub_fp8q_free(p);
    pthread_mutex_destroy(&p->tcache.lock);
    pthread_mutex_destroy(&p->tcache.qlock);
    pthread_cond_destroy(&p->tcache.cond);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
