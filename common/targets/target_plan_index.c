/* target_plan_index.c: a built node plan's indexes (each chunk's puts and
 * copies, each trainer rank's puts, the bytes each rank lands and holds),
 * its queries and its free. */
#include "common/targets/target_plan_internal.h"

#include <string.h>

void wsync_node_plan_free(wsync_node_plan_t *np)
{
    int r;
    if (np == NULL)
        return;
    for (r = 0; np->rank_puts && r < np->world; r++)
        free(np->rank_puts[r]);
    free(np->rank_puts);
    free(np->rank_nputs);
    free(np->puts);
    free(np->runs);
    free(np->chunks);
    free(np->copies);
    free(np->land_bytes);
    free(np->holds_bytes);
    free(np->fp8);
    free(np);
}

uint64_t wsync_node_plan_send_bytes(const wsync_node_plan_t *np, int rank)
{
    uint64_t b = 0;
    size_t i;
    for (i = 0; i < np->rank_nputs[rank]; i++)
        b += np->puts[np->rank_puts[rank][i]].len;
    return b;
}

void tp_runs_collapse(wsync_node_plan_t *np)
{
    size_t k, i, out = 0;
    for (k = 0; k < np->nputs; k++) {
        wsync_tput_t *p = &np->puts[k];
        const wsync_run2d_t *r = &np->runs[p->first_run];
        int one = 1;
        for (i = 0; i < p->nruns && one; i++)
            one = r[i].rows == 1 && (i == 0 || r[i - 1].src_off + r[i - 1].row_bytes == r[i].src_off);
        if (one && p->nruns > 1) {
            np->runs[out] = r[0];
            np->runs[out].row_bytes = p->len;
            p->first_run = out++;
            p->nruns = 1;
            continue;
        }
        memmove(&np->runs[out], r, p->nruns * sizeof(*r));
        p->first_run = out;
        out += p->nruns;
    }
    np->nruns = out;
}

wsync_status_t tp_index(wsync_node_plan_t *np)
{
    size_t k, *fill;
    int r;
    np->rank_nputs = calloc((size_t)np->world, sizeof(*np->rank_nputs));
    np->rank_puts = calloc((size_t)np->world, sizeof(*np->rank_puts));
    fill = calloc((size_t)np->world, sizeof(*fill));
    if (np->rank_nputs == NULL || np->rank_puts == NULL || fill == NULL) {
        free(fill);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
    }
    for (k = np->nputs; k-- > 0;) {
        wsync_tchunk_t *c = &np->chunks[np->puts[k].chunk];
        c->first_put = k;
        c->nputs++;
        c->bytes += np->puts[k].len;
        np->rank_nputs[np->puts[k].src_rank]++;
        np->network_bytes += np->puts[k].len;
        np->land_bytes[np->puts[k].land_rank] += np->puts[k].len;
        np->holds_bytes[np->puts[k].land_rank] += np->puts[k].len;
    }
    for (k = np->ncopies; k-- > 0;) {
        wsync_tchunk_t *c = &np->chunks[np->copies[k].chunk];
        c->first_copy = k;
        c->ncopies++;
        np->holds_bytes[np->copies[k].to_rank] += np->copies[k].len;
    }
    for (r = 0; r < np->world; r++) {
        np->rank_puts[r] = calloc(np->rank_nputs[r] ? np->rank_nputs[r] : 1, sizeof(uint32_t));
        if (np->rank_puts[r] == NULL) {
            free(fill);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory building the plan");
        }
    }
    for (k = 0; k < np->nputs; k++) {
        r = np->puts[k].src_rank;
        np->rank_puts[r][fill[r]++] = (uint32_t)k;
    }
    free(fill);
    return WSYNC_OK;
}
