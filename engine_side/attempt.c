/* attempt.c: one pull attempt of the node, on one engine rank, as phases:
 *   setup     the first pull only, before any attempt: image slots sized
 *             and reserved (not counted in the pull's time);
 *   open      local rank 0 chooses the version and opens an attempt on the
 *             board; the other ranks wait for it (attempt_open.c);
 *   layout    the version record: the held layout reused, or a new one;
 *             with targets, the engine layout (targets.c); the caller's
 *             destination tensors checked against it (dests.c); image slots
 *             sized for it; rank 0 posts the landing map;
 *   fetch     the data (fetch.c, the one fetch engine: the whole
 *             image is the identity target, fetch_whole.c); in place
 *             it writes the caller's destination tensors too (dests.h);
 *   settle    this rank done (then wait for the node) or failed;
 *   close     rank 0 closes the attempt on the board and reports it;
 *   deliver   staged, the caller's destination tensors get the version;
 *   keep      the version is held, or (in place, failed) nothing is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "engine_side/receiver_internal.h"

static uint64_t deadline_after(int timeout_ms)
{
    return wsync_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 600000) * 1000000ULL;
}

static json_t *record_trainers_json(const wsync_version_record_t *rec)
{
    json_t *arr = rec->ntrainers > 0 ? json_array() : NULL;
    int i;
    for (i = 0; arr && i < rec->ntrainers; i++)
        json_array_append_new(arr, json_pack("{s:i, s:O}", "rank", rec->trainers[i].rank, "endpoint",
                                             rec->trainers[i].endpoint));
    return arr;
}

/* Ranks > 0: local rank 0's copy of version v's record (board.h), or NULL
 * when it shared none for v (then the control endpoint is asked). */
static json_t *shared_record(wsync_receiver_t *r, uint64_t v)
{
    char *text = NULL;
    size_t len = 0;
    json_t *j;
    if (board_get_text(r->board, 0, BOARD_TEXT_RECORD, 0, &text, &len) != WSYNC_OK)
        return NULL;
    j = json_loadb(text, len, 0, NULL);
    free(text);
    if (j != NULL && (uint64_t)json_integer_value(json_object_get(j, "version")) != v) {
        json_decref(j); /* an earlier attempt's */
        j = NULL;
    }
    if (j != NULL)
        wsync_trace("engine %s rank %d: version %llu's record read from local rank 0", r->engine_id,
                    r->cfg.local_rank, (unsigned long long)v);
    return j;
}

/* The version record of `v`: its layout (the held one when the digests
 * match) and its piece digests; *late: some are still to come (the version
 * was announced before its digests: recv_fetch waits for them). */
static wsync_status_t fetch_record(wsync_receiver_t *r, uint64_t v, wsync_sync_layout_t **sl, uint64_t **digests,
                                   int *late)
{
    size_t missing = 0;
    json_t *j = NULL;
    wsync_version_record_t rec;
    wsync_status_t st;
    if (r->run.next_record && (uint64_t)json_integer_value(json_object_get(r->run.next_record, "version")) == v) {
        j = r->run.next_record; /* came with the long poll's answer */
        r->run.next_record = NULL;
    } else if (r->cfg.local_rank == 0 || (j = shared_record(r, v)) == NULL) {
        WSYNC_CHECK(wsync_control_get_version(r->control, v, &j));
    }
    st = wsync_version_record_from_json(j, &rec);
    json_decref(j);
    WSYNC_CHECK(st);
    json_decref(r->run.trainers);
    r->run.trainers = record_trainers_json(&rec);
    /* Versions of one training run share the layout: reuse the held one
     * (parsing the manifest and building the plan again cost milliseconds
     * per version on a 7B model); only the digests are new. */
    if (r->held.layout && strcmp(rec.manifest_digest, r->held.layout->manifest_digest) == 0 &&
        strcmp(rec.layout_digest, r->held.layout->layout_digest) == 0) {
        *sl = r->held.layout;
        st = WSYNC_OK;
    } else {
        st = wsync_sync_layout_fetch(r->control, &rec, sl); /* the manifest once per layout */
    }
    if (st == WSYNC_OK) {
        st = wsync_sync_layout_digests(*sl, &rec, digests, &missing);
        *late = missing > 0;
        if (st != WSYNC_OK) {
            if (*sl != r->held.layout)
                wsync_sync_layout_free(*sl);
            *sl = NULL;
        }
    }
    wsync_version_record_clear(&rec);
    return st;
}

/* Free the image slots a failed set-up reserved: the next pull sets up
 * again, nothing half reserved stays. */
static void setup_undo(wsync_receiver_t *r)
{
    int s;
    for (s = 0; s < r->images.nslots; s++) {
        if (s == 0 && r->images.caller_image)
            r->images.win[0] = (wsync_window_t){.fd = -1}; /* the caller's: not ours to free */
        else if (r->images.win[s].ptr)
            r->win_ops->free(&r->images.win[s]);
    }
    r->images.caller_image = 0;
    r->images.len = 0;
    recv_gpu_sparse_free(r); /* the next set-up decides again */
}

/* How many image slots this rank needs: in place one; staged two (the held
 * version stays readable in one while the next lands in the other), or one
 * when the caller's tensors hold every tensor of this rank (the held version
 * lives there: the pull may overwrite the image, and the caller's tensors
 * get the new version only once the node verified it). Every rank sets up
 * the node's count, the most any rank needs, so an attempt's slot exists on
 * each (board.h). */
static wsync_status_t agree_slots(wsync_receiver_t *r, size_t ntensors, uint64_t deadline)
{
    int wish = 1, most = 0, least = 0;
    if (r->cfg.mode != WSYNC_MODE_IN_PLACE && (r->cfg.ndests <= 0 || (size_t)r->cfg.ndests < ntensors))
        wish = 2;
    board_post_slots(r->board, wish);
    WSYNC_CHECK(board_node_slots(r->board, recv_left_ms(deadline), &most, &least));
    r->images.nslots = most;
    board_post_slots(r->board, most);
    return WSYNC_OK;
}

/* In place on the host, the caller's tensors holding every tensor of this
 * rank: the image is only where bytes land on their way into them, so its
 * pages are freed chunk by chunk once written through (and copied out by
 * the ranks that need them): release.h. */
static int sparse_images(const wsync_receiver_t *r, size_t ntensors)
{
    return wsync_setting_int(WSYNC_SET_SPARSE_IMAGE) && r->cfg.mode == WSYNC_MODE_IN_PLACE &&
           r->mem->kind == WSYNC_MEM_HOST && r->cfg.image == NULL && r->cfg.ndests > 0 &&
           (size_t)r->cfg.ndests >= ntensors;
}

/* The first pull: size and reserve the image slots before any attempt is
 * opened. Reserving every page of a large image takes seconds (8.5-10 s for
 * two slots of a 4 GiB model on a 2-core host); done inside the attempt it
 * counted in the pull's time and GB/s, and trainers publishing every couple
 * of seconds no longer held the version chosen before it. After it, the
 * attempt picks the newest version. Each rank reserves its own slots, sized
 * for its target's destination image when it has one. */
static wsync_status_t attempt_setup(wsync_receiver_t *r, uint64_t version, uint64_t deadline)
{
    wsync_sync_layout_t *sl = NULL;
    uint64_t *digests = NULL, v = version, need = 0, t0;
    size_t ntensors = 0;
    int late = 0;
    wsync_status_t st;
    if (r->images.len)
        return WSYNC_OK;
    if (r->cfg.local_rank != 0)
        WSYNC_CHECK(recv_rejoin_if_needed(r));
    if (v == 0) {
        WSYNC_CHECK(recv_wait_newer(r, deadline, &v));
        if (v == 0)
            return wsync_error(WSYNC_ERR_TIMEOUT, "no version newer than %llu was published in time",
                               (unsigned long long)r->held.version);
    } else {
        WSYNC_CHECK(recv_wait_named(r, v, deadline));
    }
    WSYNC_CHECK(fetch_record(r, v, &sl, &digests, &late));
    free(digests);
    st = r->held.spec ? recv_target_size(r, sl, &need, &ntensors) : WSYNC_OK;
    if (!r->held.spec) {
        need = sl->manifest->image_size;
        ntensors = sl->manifest->ntensors;
    }
    if (st == WSYNC_OK) {
        st = agree_slots(r, ntensors, deadline);
        if (r->cfg.local_rank == 0) /* a rank missing: status says so with the node (reporter.h) */
            reporter_note_node(r->reporter, st == WSYNC_OK ? "" : wsync_last_error());
    }
    if (st == WSYNC_OK) {
        if (r->cfg.local_rank == 0)
            reporter_post(r->reporter, v, "pulling", 0, 0, NULL);
        r->images.sparse = sparse_images(r, ntensors);
        st = recv_gpu_sparse_setup(r, sl, ntensors);
    }
    if (st == WSYNC_OK) {
        t0 = wsync_now_ns();
        recv_progress_phase(r->run.progress, RECV_PHASE_SETUP, v, (uint64_t)r->images.nslots * need);
        st = recv_ensure_images(r, need);
        if (wsync_fault(WSYNC_FAULT_SETUP_DELAY_MS) > 0 && /* test hook: a slow reserve */
            wsync_sleep_cancellable(wsync_fault(WSYNC_FAULT_SETUP_DELAY_MS), &r->cancelled) && st == WSYNC_OK)
            st = wsync_cancel_error("setting up the image memory");
        recv_progress_setup_took(r->run.progress, (double)(wsync_now_ns() - t0) / 1e9);
        recv_progress_phase(r->run.progress, RECV_PHASE_IDLE, 0, 0);
        wsync_trace("engine %s rank %d: %d image slots of %llu bytes reserved in %.3f s", r->engine_id,
                    r->cfg.local_rank, r->images.nslots, (unsigned long long)need,
                    (double)(wsync_now_ns() - t0) / 1e9);
        if (st != WSYNC_OK)
            setup_undo(r);
    }
    if (sl != r->held.layout)
        wsync_sync_layout_free(sl);
    return st;
}

/* The engine layout for `sl`: the held one when sl is the held layout. */
static wsync_status_t attempt_tlayout(wsync_receiver_t *r, const wsync_sync_layout_t *sl, recv_tlayout_t **tl)
{
    if (sl == r->held.layout && r->held.tl) {
        *tl = r->held.tl;
        return WSYNC_OK;
    }
    return recv_tlayout_build(r, sl, tl);
}

/* The caller's destination tensors for (sl, tl): the held ones when both are
 * the held layout, else checked again (dests.h). */
static wsync_status_t attempt_dests(wsync_receiver_t *r, const wsync_sync_layout_t *sl, const recv_tlayout_t *tl,
                                    recv_dests_t **dm)
{
    if (r->held.layout && sl == r->held.layout && tl == r->held.tl) {
        *dm = r->held.dm;
        return WSYNC_OK;
    }
    if (r->cfg.ndests == 0 && r->cfg.check_dests == NULL)
        return WSYNC_OK;
    WSYNC_CHECK(
        recv_dests_build(&r->cfg, sl->manifest, tl ? tl->tg[r->cfg.local_rank] : NULL, tl ? tl->seg : NULL, dm));
    recv_dests_words(*dm, sl->plan, tl ? tl->seg : NULL);
    return WSYNC_OK;
}

static wsync_status_t attempt_layout(wsync_receiver_t *r, const board_attempt_t *a, wsync_sync_layout_t **sl,
                                     uint64_t **digests, int *late, recv_tlayout_t **tl, recv_dests_t **dm)
{
    WSYNC_CHECK(fetch_record(r, a->version, sl, digests, late));
    if (r->held.spec)
        WSYNC_CHECK(attempt_tlayout(r, *sl, tl));
    WSYNC_CHECK(attempt_dests(r, *sl, *tl, dm));
    WSYNC_CHECK(recv_ensure_images(r, *tl ? (*tl)->image_len : (*sl)->manifest->image_size));
    if (r->cfg.local_rank == 0)
        WSYNC_CHECK(*tl ? recv_post_tlanding(r, *tl, a->gen) : recv_plan_landing(r, *sl, a->gen));
    wsync_trace("engine %s rank %d: version record fetched, images ready", r->engine_id, r->cfg.local_rank);
    return WSYNC_OK;
}

/* Everyone: wait until every rank verified attempt `gen`, or one failed:
 * woken by the board as each rank marks itself (or rank 0 closes), else
 * every 20 ms to see that the ranks' processes live and Ctrl-C. */
static wsync_status_t wait_node(wsync_receiver_t *r, uint64_t gen, uint64_t deadline)
{
    char why[300];
    for (;;) {
        const uint32_t seq = board_ranks_seq(r->board);
        int p, all = 1;
        if (r->cfg.local_rank != 0) {
            switch (board_attempt_outcome(r->board, gen)) {
            case BOARD_ATTEMPT_OK: return WSYNC_OK;
            case BOARD_ATTEMPT_FAILED:
                return wsync_error(WSYNC_ERR_PEER, "engine %s: the node failed this pull", r->engine_id);
            case BOARD_ATTEMPT_SUPERSEDED:
                return wsync_error(WSYNC_ERR_PEER, "engine %s: local rank 0 ended this pull and started another",
                                   r->engine_id);
            case BOARD_ATTEMPT_OPEN: break;
            }
            if (board_leader_gone(r->board))
                return wsync_error(WSYNC_ERR_PEER, "engine %s: local rank 0 died", r->engine_id);
        }
        for (p = 0; p < r->cfg.local_world; p++) {
            if (board_rank_failed(r->board, p, gen, why, sizeof(why)))
                return wsync_error(WSYNC_ERR_PEER, "local rank %d: %s", p, why);
            if (!board_rank_done(r->board, p, gen)) {
                all = 0;
                if (!board_rank_alive(r->board, p))
                    return wsync_error(WSYNC_ERR_PEER, "local rank %d of engine %s died during the pull", p,
                                       r->engine_id);
            }
        }
        if (all && r->cfg.local_rank == 0)
            return WSYNC_OK;
        if (recv_cancelled(r))
            return wsync_cancel_error("waiting for the node to verify the pull");
        if (wsync_now_ns() >= deadline) {
            char who[128] = "";
            size_t n = 0;
            for (p = 0; p < r->cfg.local_world; p++)
                if (!board_rank_done(r->board, p, gen))
                    n += (size_t)snprintf(who + n, n < sizeof(who) ? sizeof(who) - n : 0, "%s%d", n ? ", " : "", p);
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "engine %s: local rank %s did not verify in time (stalled or "
                               "stopped?)",
                               r->engine_id, who);
        }
        board_wait_ranks(r->board, seq, 20000);
    }
}

/* This rank's outcome on the board; with success, the node's. */
static wsync_status_t attempt_settle(wsync_receiver_t *r, const board_attempt_t *a, wsync_status_t st,
                                     uint64_t deadline)
{
    if (st != WSYNC_OK) {
        board_mark_failed(r->board, a->gen, wsync_last_error());
        return st;
    }
    board_set_delta(r->board, &r->held.delta_last);
    wsync_trace("engine %s rank %d: its pull ended, waiting for the node", r->engine_id, r->cfg.local_rank);
    board_mark_done(r->board, a->gen);
    st = wait_node(r, a->gen, deadline);
    wsync_trace("engine %s rank %d: every local rank verified", r->engine_id, r->cfg.local_rank);
    return st;
}

/* Staged: the caller's destination tensors get the version only now, once
 * the node verified it and rank 0 closed the attempt (a version the node
 * does not hold never reaches them), every rank copying at once. A copy that
 * fails (a device error) fails this rank's pull alone and leaves its tensors
 * invalid; the node keeps the version. */
static wsync_status_t attempt_deliver(wsync_receiver_t *r, const board_attempt_t *a, const recv_dests_t *dm)
{
    if (dm == NULL || dm->in_place)
        return WSYNC_OK;
    WSYNC_CHECK(recv_dests_copy_all(r->mem, dm, r->images.win[a->slot].ptr));
    wsync_trace("engine %s rank %d: the caller's tensors hold version %llu", r->engine_id, r->cfg.local_rank,
                (unsigned long long)a->version);
    return WSYNC_OK;
}

/* Local rank 0: close the attempt on the board and report it. */
static void attempt_close(wsync_receiver_t *r, const board_attempt_t *a, wsync_status_t st, double secs,
                          uint64_t image_size, const char *err)
{
    wsync_report_delta_t d = {0}, one;
    int k;
    board_attempt_close(r->board, a, st == WSYNC_OK);
    for (k = 0; st == WSYNC_OK && k < r->cfg.local_world; k++) { /* every rank marked done after setting them */
        board_rank_delta(r->board, k, &one);
        d.pieces += one.pieces;
        d.wire_bytes += one.wire_bytes;
        d.piece_bytes += one.piece_bytes;
        d.refetched += one.refetched;
    }
    if (st == WSYNC_OK)
        reporter_post_ready(r->reporter, a->version, secs, image_size, &d);
    else /* in place the one image was overwritten in part: the node holds nothing now (attempt_drop) */
        reporter_post_held(r->reporter, a->version, "failed", secs, 0, err,
                           r->cfg.mode == WSYNC_MODE_IN_PLACE ? 0 : (int64_t)r->held.version);
    wsync_trace("engine %s: reported", r->engine_id);
}

/* Hold the version this attempt brought (sl, tl become the held ones). */
static void attempt_keep(wsync_receiver_t *r, const board_attempt_t *a, wsync_sync_layout_t *sl,
                         recv_tlayout_t *tl, recv_dests_t *dm, uint64_t t0)
{
    if (r->held.dm != dm)
        recv_dests_free(r->held.dm);
    r->held.dm = dm;
    r->held.last_secs = (double)(wsync_now_ns() - t0) / 1e9;
    r->held.slot = a->slot;
    r->held.version = a->version;
    if (r->held.layout != sl || r->held.tl != tl)
        r->held.layout_generation++;
    if (r->held.layout != sl)
        wsync_sync_layout_free(r->held.layout);
    r->held.layout = sl;
    if (r->held.tl != tl)
        recv_tlayout_free(r->held.tl);
    r->held.tl = tl;
}

/* Drop what a failed attempt leaves: its layout, and in place the held
 * version too (the one image was overwritten in part). */
static void attempt_drop(wsync_receiver_t *r, wsync_sync_layout_t *sl, recv_tlayout_t *tl, recv_dests_t *dm)
{
    if (dm != r->held.dm)
        recv_dests_free(dm);
    if (sl != r->held.layout) /* sl may be the held layout, reused */
        wsync_sync_layout_free(sl);
    if (tl != r->held.tl)
        recv_tlayout_free(tl);
    if (r->cfg.mode == WSYNC_MODE_IN_PLACE && r->held.version) {
        r->held.layout_generation++;
        r->held.version = 0;
        wsync_sync_layout_free(r->held.layout);
        r->held.layout = NULL;
        recv_tlayout_free(r->held.tl);
        r->held.tl = NULL;
        recv_dests_free(r->held.dm);
        r->held.dm = NULL;
    }
}

wsync_status_t wsync_receiver_pull(wsync_receiver_t *r, uint64_t version, int timeout_ms, uint64_t *got)
{
    const uint64_t deadline = deadline_after(timeout_ms);
    const int leader = r->cfg.local_rank == 0;
    board_attempt_t a;
    wsync_sync_layout_t *sl = NULL;
    recv_tlayout_t *tl = NULL;
    recv_dests_t *dm = NULL;
    uint64_t *digests = NULL, t0;
    wsync_status_t st;
    char err[512];
    int late = 0;

    /* This rank's device on the calling thread: a pull may come from any
     * thread (the Python package pulls on a worker thread, to stay
     * interruptible), and device memory calls follow the thread's device. */
    WSYNC_CHECK(r->mem->init(r->device));
    WSYNC_CHECK(attempt_setup(r, version, deadline));
    WSYNC_CHECK(recv_attempt_open(r, version, deadline, &a));
    r->run.gen = a.gen;
    if (r->node.relay) /* before any rank lands a byte in the slot: its relay serves it no more */
        relay_slot_end(r->node.relay, a.slot);
    t0 = wsync_now_ns();
    wsync_trace("engine %s rank %d: pull of version %llu opened (attempt %llu)", r->engine_id, r->cfg.local_rank,
                (unsigned long long)a.version, (unsigned long long)a.gen);
    if (leader)
        reporter_post(r->reporter, a.version, "pulling", 0, 0, NULL);

    st = attempt_layout(r, &a, &sl, &digests, &late, &tl, &dm);
    if (st == WSYNC_OK) {
        uint64_t total = tl ? tl->image_len : sl->manifest->image_size;
        recv_progress_phase(r->run.progress, RECV_PHASE_LANDING, a.version, total);
        r->run.dm = dm;
        memset(&r->held.delta_last, 0, sizeof(r->held.delta_last)); /* a pull that asks for deltas sets them */
        st = recv_dests_zero_gaps(r->mem, dm);                      /* in place: padding no block writes */
        if (st == WSYNC_OK)
            st = recv_fetch(r, &a, sl, tl, digests, late, deadline);
        r->run.dm = NULL;
        recv_progress_bytes(r->run.progress, st == WSYNC_OK ? total : 0);
    }
    recv_progress_phase(r->run.progress, RECV_PHASE_IDLE, 0, 0);
    st = attempt_settle(r, &a, st, deadline);
    snprintf(err, sizeof(err), "%s", st == WSYNC_OK ? "" : wsync_last_error());
    if (leader)
        attempt_close(r, &a, st, (double)(wsync_now_ns() - t0) / 1e9,
                      tl   ? tl->image_len
                      : sl ? sl->manifest->image_size
                           : 0,
                      err);
    free(digests);
    if (st == WSYNC_OK && (st = attempt_deliver(r, &a, dm)) != WSYNC_OK)
        snprintf(err, sizeof(err), "%s", wsync_last_error());
    if (st != WSYNC_OK) {
        r->held.failed_version = a.version;
        attempt_drop(r, sl, tl, dm);
        return wsync_error(st, "%s", err);
    }
    r->held.failed_version = 0;
    if (leader) /* every rank joined it (wait_ranks), and holds the version now */
        __atomic_store_n(&r->degraded, 0, __ATOMIC_RELEASE);
    if (leader && r->node.relay) /* verified on every rank: a base its relay may encode deltas from */
        relay_slot_verified(r->node.relay, a.slot);
    attempt_keep(r, &a, sl, tl, dm, t0);
    if (got)
        *got = a.version;
    return WSYNC_OK;
}
