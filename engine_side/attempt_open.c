/* attempt_open.c: the open phase of a pull attempt (attempt.c): local
 * rank 0 chooses the version to pull (the one asked for, a newer one than
 * it holds, or the one it holds again when a rank came back without it)
 * and opens an attempt on the node board; the other local ranks wait for
 * it to. */
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

int recv_left_ms(uint64_t deadline)
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
        if (recv_cancelled(r))
            return wsync_cancel_error("waiting for the other local ranks");
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s: local rank %d is not running", r->engine_id, missing);
        usleep(10000);
    }
}

/* The long poll for a version newer than the held one; its answer carries
 * the version's record, kept for fetch_record (one round trip per version
 * instead of two). */
wsync_status_t recv_wait_newer(wsync_receiver_t *r, uint64_t deadline, uint64_t *v)
{
    json_decref(r->run.next_record);
    r->run.next_record = NULL;
    return wsync_control_wait_version_record(r->control, r->held.version, recv_left_ms(deadline), v,
                                             &r->run.next_record);
}

/* While the node is degraded (a local rank went), rank 0's wait for a newer
 * version looks this often whether the rank came back: its new process
 * holds nothing until the node pulls the held version again. */
#define REJOIN_LOOK_MS 1000

/* The newest version, as wait_newer; or, on a degraded node whose missing
 * rank is back as a new process, the held version again (*repair 1): the
 * node holds it on every rank after that pull, and is ready without a new
 * version (26 item 4; it stayed "node degraded" until the next one). */
static wsync_status_t wait_or_repair(wsync_receiver_t *r, uint64_t deadline, uint64_t *v, int *repair)
{
    *repair = 0;
    for (;;) {
        uint64_t now = wsync_now_ns(), until = now + REJOIN_LOOK_MS * 1000000ULL;
        if (r->held.version && __atomic_exchange_n(&r->rejoined, 0, __ATOMIC_ACQ_REL)) {
            LOG_INFO("engine %s: a local rank rejoined: pulling the held version %llu again, so every rank holds "
                     "it",
                     r->engine_id, (unsigned long long)r->held.version);
            json_decref(r->run.next_record);
            r->run.next_record = NULL;
            *v = r->held.version;
            *repair = 1;
            return WSYNC_OK;
        }
        if (!__atomic_load_n(&r->degraded, __ATOMIC_ACQUIRE) || !r->held.version || until >= deadline)
            return recv_wait_newer(r, deadline, v);
        WSYNC_CHECK(recv_wait_newer(r, until, v));
        if (*v != 0)
            return WSYNC_OK;
    }
}

/* After a failed attempt, the next one waits this long for a version newer
 * than the one that failed before it tries that one again: a version whose
 * trainer rank died cannot be had, and its replacement publishes the next
 * (the wait is the long poll: it ends when that is published). */
#define RETRY_WAIT_MS 2000

/* The version the caller named: published already, or waited for up to the
 * deadline (an engine started before its trainers). One no longer retained
 * fails in fetch_record, where the endpoint says which are. */
wsync_status_t recv_wait_named(wsync_receiver_t *r, uint64_t version, uint64_t deadline)
{
    uint64_t got = 0;
    json_decref(r->run.next_record);
    r->run.next_record = NULL;
    WSYNC_CHECK(wsync_control_wait_version_record(r->control, version - 1, recv_left_ms(deadline), &got,
                                                  &r->run.next_record));
    if (got < version)
        return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s: version %llu was not published in time (waited for it)",
                           r->engine_id, (unsigned long long)version);
    return WSYNC_OK;
}

/* The version to pull: the one named, or the newest (newer than the held
 * one; after a failed attempt of the newest, a newer one if it comes within
 * RETRY_WAIT_MS). */
static wsync_status_t choose_version(wsync_receiver_t *r, uint64_t version, uint64_t deadline, uint64_t *v)
{
    uint64_t newer = 0;
    json_t *rec = NULL;
    int wait_ms, repair = 0;
    *v = version;
    if (version != 0)
        return recv_wait_named(r, version, deadline);
    WSYNC_CHECK(r->cfg.local_rank == 0 ? wait_or_repair(r, deadline, v, &repair) : recv_wait_newer(r, deadline, v));
    if (repair)
        return WSYNC_OK;
    if (*v == 0)
        return wsync_error(WSYNC_ERR_TIMEOUT, "no version newer than %llu was published in time",
                           (unsigned long long)r->held.version);
    if (*v != r->held.failed_version)
        return WSYNC_OK;
    wait_ms = recv_left_ms(deadline) < RETRY_WAIT_MS ? recv_left_ms(deadline) : RETRY_WAIT_MS;
    if (wsync_control_wait_version_record(r->control, *v, wait_ms, &newer, &rec) == WSYNC_OK && newer > *v) {
        wsync_trace("engine %s: version %llu failed before; version %llu came since", r->engine_id,
                    (unsigned long long)*v, (unsigned long long)newer);
        json_decref(r->run.next_record);
        r->run.next_record = rec;
        *v = newer;
        return WSYNC_OK;
    }
    json_decref(rec);
    return WSYNC_OK; /* none newer: the failed one again (its peer may be back) */
}

/* Local rank 0, before it opens an attempt on version v: the record that
 * came with the long poll's answer, for the other local ranks (board.h); an
 * empty text when none came (a version the caller named): they then ask the
 * control endpoint, and never take an earlier attempt's record. */
static void share_record(wsync_receiver_t *r, uint64_t v)
{
    const int have = r->run.next_record != NULL &&
                     (uint64_t)json_integer_value(json_object_get(r->run.next_record, "version")) == v;
    char *text;
    if (r->cfg.local_world < 2)
        return;
    text = have ? json_dumps(r->run.next_record, JSON_COMPACT) : NULL;
    if (board_put_text(r->board, BOARD_TEXT_RECORD, text ? text : "", text ? strlen(text) : 0) != WSYNC_OK)
        LOG_WARN("engine %s: the other local ranks ask the control endpoint for version %llu's record (%s)",
                 r->engine_id, (unsigned long long)v, wsync_last_error());
    free(text);
}

/* Local rank 0: choose the version and open an attempt on the board. */
static wsync_status_t lead_attempt(wsync_receiver_t *r, uint64_t version, uint64_t deadline, board_attempt_t *a)
{
    uint64_t v = 0;
    int most = 0, least = 0;
    WSYNC_CHECK(choose_version(r, version, deadline, &v));
    wsync_trace("engine %s: version %llu is the one to pull%s", r->engine_id, (unsigned long long)v,
                r->run.next_record ? " (its record came with the answer)" : "");
    if (wait_ranks(r, deadline) != WSYNC_OK) { /* status says so, with the node (reporter.h) */
        reporter_note_node(r->reporter, wsync_last_error());
        return WSYNC_ERR_TIMEOUT;
    }
    reporter_note_node(r->reporter, "");
    WSYNC_CHECK(board_node_slots(r->board, recv_left_ms(deadline), &most, &least));
    if (least < r->images.nslots)
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "engine %s: a local rank set up %d image slot(s), local rank 0 %d (ranks started with "
                           "different modes or destination tensors, then one restarted): give every rank the same "
                           "mode and dests, and restart the node",
                           r->engine_id, least, r->images.nslots);
    share_record(r, v);
    board_attempt_open(r->board, v, r->images.nslots, a);
    return WSYNC_OK;
}

/* Ranks > 0: wait for rank 0 to open an attempt this rank has not joined. */
static wsync_status_t follow_attempt(wsync_receiver_t *r, uint64_t version, uint64_t deadline, board_attempt_t *a)
{
    for (;;) {
        uint32_t seq = board_attempt_seq(r->board);
        int found = board_attempt_find(r->board, r->run.gen, version, a);
        WSYNC_CHECK(recv_rejoin_if_needed(r));
        if (found)
            return WSYNC_OK;
        if (recv_cancelled(r))
            return wsync_cancel_error("waiting for local rank 0 to start a pull");
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s rank %d: local rank 0 started no pull in time",
                               r->engine_id, r->cfg.local_rank);
        board_wait_attempt(r->board, seq, 20); /* woken when rank 0 opens one */
    }
}

wsync_status_t recv_attempt_open(wsync_receiver_t *r, uint64_t version, uint64_t deadline, board_attempt_t *a)
{
    if (r->cfg.local_rank == 0)
        return lead_attempt(r, version, deadline, a);
    WSYNC_CHECK(recv_rejoin_if_needed(r));
    return follow_attempt(r, version, deadline, a);
}

/* The record's trainer ranks as GET /v1/trainers lists them ([{"rank",
 * "endpoint"}]), or NULL (a record from before they came with it: the
 * attempt asks the endpoint). */
