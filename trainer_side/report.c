/* report.c: a trainer rank's registration, layout and version reports to
 * the control endpoint, and sending them again when it lost them
 * (report.h). */
#include "trainer_side/report.h"

#include <stdio.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "common/base/settings.h"
#include "common/digest/digest.h"
#include "trainer_side/publisher_internal.h"

wsync_status_t pub_report_register(wsync_publisher_t *p)
{
    char pull[192];
    json_t *ep;
    wsync_status_t st;

    snprintf(pull, sizeof(pull), "%s:%d", p->advertise, p->serving.listen_port);
    /* delta_bases: the versions before the one served that this rank can
     * encode deltas from (docs/DELTA.md): the other publish slot's, with
     * copy slots (host or GPU memory); the version record carries it to the
     * engines. */
    ep = json_pack("{s:s, s:s, s:s, s:i}", "pull", pull, "host_id", p->host_id, "device",
                   p->cfg.device ? p->cfg.device : "host", "delta_bases",
                   p->cfg.zero_copy ? 0 : (int)wsync_setting_int(WSYNC_SET_DELTA_BASES));
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
wsync_status_t pub_report_layout(wsync_publisher_t *p)
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
    const json_t *layout = p->report.layout_json;
    wsync_status_t st = wsync_control_publish(p->control, p->cfg.rank, p->cfg.world, version, layout, pieces);
    if (st == WSYNC_ERR_NOT_FOUND && p->cfg.rank == 0) {
        WSYNC_CHECK(pub_report_layout(p));
        st = wsync_control_publish(p->control, p->cfg.rank, p->cfg.world, version, layout, pieces);
    }
    return st;
}

wsync_status_t pub_report_send(wsync_publisher_t *p, uint64_t version, json_t *pieces)
{
    pub_report_t *r = &p->report;
    WSYNC_CHECK(report(p, version, pieces));
    json_decref(r->pieces);
    r->pieces = json_incref(pieces);
    r->version = version;
    r->resend_check_ns = wsync_now_ns() + 2000000000ULL;
    return WSYNC_OK;
}

json_t *pub_report_pieces(const wsync_publisher_t *p, uint64_t version, const uint64_t *sums, long bad)
{
    const wsync_plan_t *plan = p->sl->plan;
    json_t *pieces = json_array();
    size_t i;
    for (i = 0; pieces && i < p->share.nmy; i++) {
        const wsync_piece_t *pc = &plan->pieces[p->share.my_pieces[i]];
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

/* The endpoint forgot this rank's report of `version` (it restarted while the
 * version waited for other ranks: only published versions are durable) or its
 * registration (restarted without its state file): send them again. */
static wsync_status_t resend_if_lost(wsync_publisher_t *p, uint64_t version)
{
    json_t *arr = NULL, *t;
    size_t i;
    int registered = 0;
    uint64_t known = 0;
    if (p->report.version != version || p->report.pieces == NULL)
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
        WSYNC_CHECK(pub_report_register(p));
    }
    if (known >= version)
        return WSYNC_OK;
    LOG_WARN("trainer rank %d: the control endpoint %s lost this rank's report of version %llu (restarted?): "
             "sending it again",
             p->cfg.rank, p->control_url, (unsigned long long)version);
    return report(p, version, p->report.pieces);
}

wsync_status_t pub_report_check(wsync_publisher_t *p, uint64_t version)
{
    uint64_t now = wsync_now_ns();
    if (now < p->report.resend_check_ns)
        return WSYNC_OK;
    WSYNC_CHECK(resend_if_lost(p, version));
    p->report.resend_check_ns = now + 2000000000ULL;
    return WSYNC_OK;
}

void pub_report_free(pub_report_t *r)
{
    json_decref(r->layout_json);
    json_decref(r->pieces);
}
