/* plan_nodes.c: the per-node half of `wsync plan`: each engine node's ranks
 * hold targets (the whole image, or a TP layout by the rules: TP rank = local
 * rank mod T), and the node plan over them says the bytes that cross into the
 * node and, per rank, the bytes it lands and the bytes it holds. */
#include "cli/plan_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/base/checks.h"
#include "common/targets/rules.h"
#include "common/targets/target_plan.h"
#include "common/base/util.h"

/* One distinct node kind: its TP size (0: the whole image) and its plan. */
typedef struct node_kind {
    int tp;
    wsync_node_plan_t *plan;
    uint64_t copy_bytes;
} node_kind_t;

struct plan_nodes {
    int M, L, nkinds;
    int *kind_of; /* [M] */
    node_kind_t kinds[16];
};

void plan_nodes_free(plan_nodes_t *pn)
{
    int k;
    if (pn == NULL)
        return;
    for (k = 0; k < pn->nkinds; k++)
        wsync_node_plan_free(pn->kinds[k].plan);
    free(pn->kind_of);
    free(pn);
}

/* "2,4,image": node i takes element i (the last repeats); "image" (or 0) is
 * the whole image. */
static int parse_spec(const char *spec, int M, int L, int *tp_of)
{
    const char *p = spec;
    int i = 0, last = 0;
    while (i < M) {
        if (p != NULL && *p) {
            char item[32];
            size_t n = strcspn(p, ",");
            if (n == 0 || n >= sizeof(item)) {
                fprintf(stderr, "wsync plan: --tp '%s': expected T[,T...] (a TP size or 'image' per node)\n", spec);
                return -1;
            }
            memcpy(item, p, n);
            item[n] = '\0';
            if (strcmp(item, "image") == 0) {
                last = 0;
            } else if (cli_parse_int("plan", "--tp", item, 0, 4096, &last)) {
                return -1;
            }
            if (last > 0 && L % last != 0) {
                fprintf(stderr,
                        "wsync plan: --tp %d: a node's %d local ranks must form whole TP groups (a "
                        "multiple of %d)\n",
                        last, L, last);
                return -1;
            }
            p += n + (p[n] == ',');
        }
        tp_of[i++] = last;
    }
    if (p != NULL && *p) {
        fprintf(stderr, "wsync plan: --tp '%s' lists more nodes than --engines %d\n", spec, M);
        return -1;
    }
    return 0;
}

static wsync_status_t build_kind(node_kind_t *k, const wsync_manifest_t *m, const wsync_layout_t *layout, int L,
                                 uint64_t chunk, const wsync_rules_t *rules)
{
    wsync_target_t **t = calloc((size_t)L, sizeof(*t));
    const wsync_target_t **tp = calloc((size_t)L, sizeof(*tp));
    wsync_status_t st = WSYNC_OK;
    size_t c;
    int r, T = k->tp ? k->tp : 1;
    if (t == NULL || tp == NULL) {
        free(t);
        free(tp);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    /* Ranks of one TP rank share one target. */
    for (r = 0; r < T && st == WSYNC_OK; r++)
        st = k->tp ? wsync_target_from_rules(m, rules, T, r, &t[r]) : wsync_target_identity(m, &t[r]);
    for (r = 0; r < L; r++)
        tp[r] = t[r % T];
    if (st == WSYNC_OK)
        st = wsync_node_plan_build(m, layout, L, tp, chunk, NULL, &k->plan);
    for (c = 0; st == WSYNC_OK && c < k->plan->ncopies; c++)
        k->copy_bytes += k->plan->copies[c].len;
    for (r = 0; r < T; r++)
        wsync_target_free(t[r]);
    free(t);
    free(tp);
    return st;
}

int plan_nodes_build(const char *tp_spec, const char *rules_path, const wsync_manifest_t *m,
                     const wsync_layout_t *layout, int M, int L, uint64_t chunk, plan_nodes_t **out)
{
    plan_nodes_t *pn = calloc(1, sizeof(*pn));
    wsync_rules_t *rules = NULL;
    int *tp_of = calloc((size_t)M, sizeof(int)), i, k, rc = 0;
    wsync_status_t st;

    if (pn == NULL || tp_of == NULL) {
        fprintf(stderr, "wsync plan: out of memory\n");
        free(pn);
        free(tp_of);
        return 1;
    }
    pn->M = M;
    pn->L = L;
    pn->kind_of = tp_of;
    if (parse_spec(tp_spec, M, L, tp_of)) {
        rc = 2;
        goto out;
    }
    if (rules_path != NULL && (st = wsync_rules_load(rules_path, &rules)) != WSYNC_OK) {
        cli_report("plan", "--rules", st);
        rc = st == WSYNC_ERR_IO ? 1 : 2;
        goto out;
    }
    for (i = 0; i < M; i++) {
        for (k = 0; k < pn->nkinds && pn->kinds[k].tp != tp_of[i]; k++)
            ;
        if (k == pn->nkinds) {
            if (k == (int)WSYNC_ARRAY_LEN(pn->kinds)) {
                fprintf(stderr, "wsync plan: --tp lists more than %d different node layouts\n", k);
                rc = 2;
                goto out;
            }
            pn->kinds[k].tp = tp_of[i];
            pn->nkinds++;
            st = build_kind(&pn->kinds[k], m, layout, L, chunk, rules);
            if (st != WSYNC_OK) {
                cli_report("plan", tp_of[i] ? "TP layout" : "node plan", st);
                rc = st == WSYNC_ERR_NOMEM ? 1 : 2;
                goto out;
            }
        }
        tp_of[i] = k;
    }
out:
    wsync_rules_free(rules);
    if (rc != 0) {
        plan_nodes_free(pn);
        return rc;
    }
    *out = pn;
    return 0;
}

json_t *plan_nodes_json(const plan_nodes_t *pn)
{
    json_t *nodes = json_array();
    int i, r;
    for (i = 0; i < pn->M; i++) {
        const node_kind_t *k = &pn->kinds[pn->kind_of[i]];
        const wsync_node_plan_t *np = k->plan;
        json_t *ranks = json_array(), *sends = json_array();
        for (r = 0; r < pn->L; r++)
            json_array_append_new(ranks, json_pack("{s:i, s:o, s:I, s:I, s:I}", "local_rank", r, "tp_rank",
                                                   k->tp ? json_integer(r % k->tp) : json_null(), "land_bytes",
                                                   (json_int_t)np->land_bytes[r], "holds_bytes",
                                                   (json_int_t)np->holds_bytes[r], "copy_in_bytes",
                                                   (json_int_t)(np->holds_bytes[r] - np->land_bytes[r])));
        for (r = 0; r < np->world; r++)
            json_array_append_new(sends, json_integer((json_int_t)wsync_node_plan_send_bytes(np, r)));
        json_array_append_new(nodes, json_pack("{s:i, s:o, s:I, s:I, s:i, s:I, s:I, s:o, s:o}", "engine", i, "tp",
                                               k->tp ? json_integer(k->tp) : json_null(), "network_bytes",
                                               (json_int_t)np->network_bytes, "intra_node_copy_bytes",
                                               (json_int_t)k->copy_bytes, "chunks", (int)np->nchunks, "puts",
                                               (json_int_t)np->nputs, "copies", (json_int_t)np->ncopies,
                                               "trainer_send_bytes", sends, "ranks", ranks));
    }
    return nodes;
}

void plan_nodes_print(const plan_nodes_t *pn)
{
    char a[64], b[64], c[64], h[32];
    int k, r, i;
    for (k = 0; k < pn->nkinds; k++) {
        const node_kind_t *nk = &pn->kinds[k];
        const wsync_node_plan_t *np = nk->plan;
        int n = 0;
        printf("\nnodes");
        for (i = 0; i < pn->M && n < 8; i++)
            if (pn->kind_of[i] == k)
                printf("%s %d", n++ ? "," : "", i);
        if (n == 8)
            printf(", ...");
        if (nk->tp)
            printf(": TP=%d (%d groups of %d), ", nk->tp, pn->L / nk->tp, nk->tp);
        else
            printf(": whole image on every rank, ");
        snprintf(a, sizeof(a), "%s (%llu)", wsync_fmt_size(np->network_bytes, h, sizeof(h)),
                 (unsigned long long)np->network_bytes);
        printf("network in %s, %u chunks, %zu puts, %zu copies\n", a, np->nchunks, np->nputs, np->ncopies);
        printf("%-12s %8s %30s %30s %30s\n", "LOCAL RANK", "TP RANK", "LANDS (NETWORK)", "COPIES IN", "HOLDS");
        for (r = 0; r < pn->L; r++) {
            char tpr[16];
            snprintf(tpr, sizeof(tpr), nk->tp ? "%d" : "-", r % (nk->tp ? nk->tp : 1));
            snprintf(a, sizeof(a), "%s (%llu)", wsync_fmt_size(np->land_bytes[r], h, sizeof(h)),
                     (unsigned long long)np->land_bytes[r]);
            snprintf(b, sizeof(b), "%s (%llu)", wsync_fmt_size(np->holds_bytes[r] - np->land_bytes[r], h, sizeof(h)),
                     (unsigned long long)(np->holds_bytes[r] - np->land_bytes[r]));
            snprintf(c, sizeof(c), "%s (%llu)", wsync_fmt_size(np->holds_bytes[r], h, sizeof(h)),
                     (unsigned long long)np->holds_bytes[r]);
            printf("%-12d %8s %30s %30s %30s\n", r, tpr, a, b, c);
        }
    }
}

void plan_nodes_max(const plan_nodes_t *pn, uint64_t *node, uint64_t *land, uint64_t *hold)
{
    int k, r;
    *node = *land = *hold = 0;
    for (k = 0; pn != NULL && k < pn->nkinds; k++) {
        const wsync_node_plan_t *np = pn->kinds[k].plan;
        if (np->network_bytes > *node)
            *node = np->network_bytes;
        for (r = 0; r < pn->L; r++) {
            if (np->land_bytes[r] > *land)
                *land = np->land_bytes[r];
            if (np->holds_bytes[r] > *hold)
                *hold = np->holds_bytes[r];
        }
    }
}
