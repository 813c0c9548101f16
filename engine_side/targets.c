/* targets.c: an engine rank's engine layout. Each local rank posts a *spec*
 * of its target on the node board at create (the rules' TP size and rules,
 * or an explicit target); per trainer layout, every rank reads every rank's
 * spec, derives all L targets from the version's manifest, and from them the
 * node plan (target_plan.h) and its own target's verification segments
 * (target_verify.h): every party derives the same plan from the same
 * inputs, so nothing else is exchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/digest/digest.h"
#include "common/targets/rules.h"
#include "engine_side/receiver_internal.h"

#define SPEC_TIMEOUT_MS 30000

wsync_status_t recv_targets_init(wsync_receiver_t *r)
{
    const wsync_receiver_config_t *c = &r->cfg;
    json_t *spec = NULL, *tj = NULL;
    json_error_t jerr;
    wsync_rules_t *rules = NULL;
    char *text;

    if (c->target_json == NULL && c->tp_size <= 1)
        return WSYNC_OK; /* the whole image: today's path, nothing posted */
    if (c->target_json) {
        tj = json_loads(c->target_json, 0, &jerr);
        if (tj == NULL)
            return wsync_error(WSYNC_ERR_FORMAT, "receiver: target JSON, line %d: %s", jerr.line, jerr.text);
        spec = json_pack("{s:s, s:o}", "kind", "target", "target", tj);
    } else {
        if (c->tp_size > BOARD_MAX_RANKS * 4)
            return wsync_error(WSYNC_ERR_INVALID, "receiver: tp_size %d is out of range", c->tp_size);
        if (c->rules_json) {
            WSYNC_CHECK(wsync_rules_from_json(c->rules_json, strlen(c->rules_json), &rules));
            wsync_rules_free(rules);
        }
        spec = json_pack("{s:s, s:i, s:s?}", "kind", "tp", "tp_size", c->tp_size, "rules", c->rules_json);
    }
    if (spec == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    text = json_dumps(spec, JSON_COMPACT);
    json_decref(spec);
    WSYNC_CHECK_ALLOC(text);
    r->held.spec = text;
    return board_put_text(r->board, BOARD_TEXT_SPEC, r->held.spec, strlen(r->held.spec));
}

/* Local rank p's target, from its spec. */
static wsync_status_t target_from_spec(const wsync_manifest_t *m, int p, const char *text, wsync_target_t **out)
{
    json_error_t jerr;
    json_t *spec = json_loads(text, 0, &jerr);
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    wsync_status_t st;
    if (spec == NULL || kind == NULL) {
        json_decref(spec);
        return wsync_error(WSYNC_ERR_FORMAT, "local rank %d posted a malformed layout spec", p);
    }
    if (strcmp(kind, "target") == 0) {
        st = wsync_target_from_json_obj(m, json_object_get(spec, "target"), out);
    } else {
        const char *rules_text = json_string_value(json_object_get(spec, "rules"));
        int tp = (int)json_integer_value(json_object_get(spec, "tp_size"));
        wsync_rules_t *rules = NULL;
        st = rules_text ? wsync_rules_from_json(rules_text, strlen(rules_text), &rules) : WSYNC_OK;
        if (st == WSYNC_OK)
            st = wsync_target_from_rules(m, rules ? rules : wsync_rules_builtin(), tp, p % tp, out);
        wsync_rules_free(rules);
    }
    json_decref(spec);
    if (st != WSYNC_OK)
        return wsync_error(st, "target of local rank %d: %s", p, wsync_last_error());
    return WSYNC_OK;
}

wsync_status_t recv_target_size(const wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t *len,
                                size_t *ntensors)
{
    wsync_target_t *t = NULL;
    wsync_status_t st;
    WSYNC_CHECK(target_from_spec(sl->manifest, r->cfg.local_rank, r->held.spec, &t));
    st = wsync_target_wire_size(t, sl->manifest, sl->layout, len); /* FP8 bands quantized here: their rows too */
    *ntensors = t->ndests;
    wsync_target_free(t);
    return st;
}

void recv_tlayout_free(recv_tlayout_t *tl)
{
    int p;
    if (tl == NULL)
        return;
    for (p = 0; tl->tg && p < tl->L; p++)
        wsync_target_free(tl->tg[p]);
    free(tl->tg);
    wsync_node_plan_free(tl->np);
    wsync_node_plan_free(tl->seg);
    free(tl->defs_sent);
    free(tl->colo);
    free(tl->ncolo);
    for (p = 0; tl->fan && p < tl->L; p++)
        recv_fanmap_free(&tl->fan[p]);
    free(tl->fan);
    free(tl->aux);
    free(tl);
}

/* The colocated landing hint, as the whole-image path derives it (landing.c):
 * kept in tl when some trainer rank shares a GPU with a rank of this node. */
static wsync_status_t land_hint(wsync_receiver_t *r, const wsync_sync_layout_t *sl, recv_tlayout_t *tl)
{
    int t, any = 0;
    tl->colo = calloc((size_t)sl->world * (size_t)tl->L, sizeof(*tl->colo));
    tl->ncolo = calloc((size_t)sl->world, sizeof(*tl->ncolo));
    if (tl->colo == NULL || tl->ncolo == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    WSYNC_CHECK(recv_colocated_ranks(r, sl->world, tl->colo, tl->ncolo));
    for (t = 0; wsync_fault(WSYNC_FAULT_ONE_GPU_HINT) && t < sl->world; t++) /* test hook: every rank everywhere */
        for (tl->ncolo[t] = 0; tl->ncolo[t] < tl->L; tl->ncolo[t]++)
            tl->colo[t * tl->L + tl->ncolo[t]] = tl->ncolo[t];
    for (t = 0; t < sl->world; t++)
        any |= tl->ncolo[t] > 0;
    tl->hint_world = any ? sl->world : 0;
    return WSYNC_OK;
}

wsync_status_t recv_tlayout_build(wsync_receiver_t *r, const wsync_sync_layout_t *sl, recv_tlayout_t **out)
{
    const int L = r->cfg.local_world;
    recv_tlayout_t *tl = calloc(1, sizeof(*tl));
    wsync_status_t st = WSYNC_OK;
    char *text = NULL;
    int p;
    WSYNC_CHECK_ALLOC(tl);
    tl->L = L;
    tl->tg = calloc((size_t)L, sizeof(*tl->tg));
    tl->defs_sent = calloc((size_t)sl->world, 1);
    if (tl->tg == NULL || tl->defs_sent == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    for (p = 0; p < L; p++) {
        if (p == r->cfg.local_rank)
            st = target_from_spec(sl->manifest, p, r->held.spec, &tl->tg[p]);
        else if ((st = board_get_text(r->board, p, BOARD_TEXT_SPEC, SPEC_TIMEOUT_MS, &text, NULL)) == WSYNC_OK)
            st = target_from_spec(sl->manifest, p, text, &tl->tg[p]);
        else
            st = wsync_error(st,
                             "engine %s: %s (every local rank of a node needs a target when one has; "
                             "give all of them --tp or --target)",
                             r->engine_id, wsync_last_error());
        free(text);
        text = NULL;
        if (st != WSYNC_OK)
            goto err;
    }
    WSYNC_CHECK_GOTO(land_hint(r, sl, tl), st, err);
    {
        wsync_land_hint_t hint = {.colo = tl->colo, .ncolo = tl->ncolo};
        WSYNC_CHECK_GOTO(wsync_node_plan_build(sl->manifest, sl->layout, L, (const wsync_target_t *const *)tl->tg,
                                               sl->plan->chunk_size, tl->hint_world ? &hint : NULL, &tl->np),
                         st, err);
    }
    if (tl->np->nchunks > BOARD_MAX_CHUNKS) {
        st = wsync_error(WSYNC_ERR_INVALID,
                         "the node plan has %u chunks; the node board holds %u: raise the chunk size",
                         tl->np->nchunks, BOARD_MAX_CHUNKS);
        goto err;
    }
    tl->fan = calloc((size_t)L, sizeof(*tl->fan));
    if (tl->fan == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    for (p = 0; p < L; p++)
        WSYNC_CHECK_GOTO(recv_fanmap_build(tl->np, p, &tl->fan[p]), st, err);
    WSYNC_CHECK_GOTO(wsync_target_segments(sl->manifest, sl->layout, tl->tg[r->cfg.local_rank],
                                           sl->plan->chunk_size, &tl->seg),
                     st, err);
    {
        wsync_run2d_t *runs = NULL;
        size_t nruns = 0;
        uint64_t aux = 0;
        WSYNC_CHECK_GOTO(wsync_target_wire_runs(tl->tg[r->cfg.local_rank], sl->manifest, sl->layout, &runs, &nruns,
                                                &tl->aux, &tl->naux, &aux),
                         st, err);
        free(runs);
        tl->image_len = tl->tg[r->cfg.local_rank]->image_size + aux;
    }
    *out = tl;
    return WSYNC_OK;
err:
    recv_tlayout_free(tl);
    return st;
}

wsync_status_t recv_tlayout_verify(wsync_receiver_t *r, const recv_tlayout_t *tl, const char *image,
                                   const uint64_t *digests, uint64_t v)
{
    const wsync_node_plan_t *seg = tl->seg;
    const wsync_target_t *t = tl->tg[r->cfg.local_rank];
    wsync_digest_range_t *rg = calloc(seg->nputs + 1, sizeof(*rg));
    uint64_t *sums = calloc(seg->nputs + 1, sizeof(*sums));
    wsync_status_t st = WSYNC_OK;
    size_t i;
    if (rg == NULL || sums == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < seg->nputs; i++)
        rg[i] = (wsync_digest_range_t){.ptr = image + seg->puts[i].dst_off,
                                       .len = seg->puts[i].len,
                                       .off = seg->puts[i].dst_off};
    /* in place with the caller's destination tensors: their bytes */
    WSYNC_CHECK_GOTO(recv_dests_digest_many(r->mem, r->run.dm, image, rg, seg->nputs, sums), st, out);
    for (i = 0; i < seg->nputs; i++) {
        const wsync_tput_t *s = &seg->puts[i];
        uint64_t d = wsync_digest_final(sums[i], s->len, s->dst_off);
        if (d != digests[i]) {
            const wsync_dest_t *dt = wsync_target_dest_at(t, s->dst_off);
            char aux[600];
            st = wsync_error(WSYNC_ERR_DIGEST,
                             "version %llu: tensor %s (bytes %llu..%llu of it, from trainer rank %d) failed "
                             "verification on engine %s rank %d: digest %016llx, the trainer's %016llx",
                             (unsigned long long)v,
                             dt ? dt->name : recv_fp8_aux_name(t, tl, s->dst_off, aux, sizeof(aux)),
                             (unsigned long long)(dt ? s->dst_off - dt->offset : s->dst_off),
                             (unsigned long long)(dt ? s->dst_off - dt->offset + s->len : s->dst_off + s->len),
                             s->src_rank, r->engine_id, r->cfg.local_rank, (unsigned long long)d,
                             (unsigned long long)digests[i]);
            goto out;
        }
    }
out:
    free(rg);
    free(sums);
    return st;
}
