/* rules_target.c: the target a rule set gives one TP rank: source tensors
 * grouped by destination name, then each group split as its rule says. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/rules.h"
#include "common/targets/rules_internal.h"

/* --- targets from rules -------------------------------------------------- */

typedef struct member {
    size_t tensor;
    long expert;
    int alt;
} member_t;

typedef struct group {
    char *name;
    long rule; /* -1: no rule matched (replicated) */
    member_t *m;
    size_t n, cap;
} group_t;

typedef struct gen {
    const wsync_manifest_t *mf;
    const wsync_rules_t *rules;
    int T, K;
    group_t *g;
    size_t ng, capg;
    json_t *by_name;
} gen_t;

static void gen_free(gen_t *g)
{
    size_t i;
    for (i = 0; i < g->ng; i++) {
        free(g->g[i].name);
        free(g->g[i].m);
    }
    free(g->g);
    json_decref(g->by_name);
}

static wsync_status_t add_member(gen_t *g, const char *name, long rule, const member_t *mb)
{
    const json_t *ix = json_object_get(g->by_name, name);
    group_t *gr;
    if (ix == NULL) {
        if (g->ng == g->capg) {
            size_t nc = g->capg ? g->capg * 2 : 64;
            group_t *ng = realloc(g->g, nc * sizeof(*ng));
            WSYNC_CHECK_ALLOC(ng);
            g->g = ng;
            g->capg = nc;
        }
        gr = &g->g[g->ng];
        memset(gr, 0, sizeof(*gr));
        gr->name = strdup(name);
        WSYNC_CHECK_ALLOC(gr->name);
        gr->rule = rule;
        json_object_set_new(g->by_name, name, json_integer((json_int_t)g->ng));
        g->ng++;
    } else {
        gr = &g->g[json_integer_value(ix)];
        if (gr->rule != rule)
            return wsync_error(WSYNC_ERR_INVALID, "rules: tensor '%s' and '%s' both become '%s' by different rules",
                               g->mf->tensors[gr->m[0].tensor].name, g->mf->tensors[mb->tensor].name, name);
    }
    if (gr->n == gr->cap) {
        size_t nc = gr->cap ? gr->cap * 2 : 4;
        member_t *nm = realloc(gr->m, nc * sizeof(*nm));
        WSYNC_CHECK_ALLOC(nm);
        gr->m = nm;
        gr->cap = nc;
    }
    gr->m[gr->n++] = *mb;
    return WSYNC_OK;
}

/* Matching is the cost on models of 100k tensors: names that differ only in
 * their numbers (layer, expert) match the same rule when no pattern holds a
 * digit, so the rule is looked up by the name with its digit runs replaced. */
static int rules_have_digits(const wsync_rules_t *rs)
{
    size_t r;
    for (r = 0; r < rs->nrules; r++)
        if (strpbrk(rs->rules[r].match, "0123456789") != NULL)
            return 1;
    return 0;
}

static void skeleton(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (; *name && k + 2 < len; name++) {
        if (isdigit((unsigned char)*name)) {
            if (k == 0 || out[k - 1] != '#')
                out[k++] = '#';
        } else {
            out[k++] = *name;
        }
    }
    out[k] = '\0';
}

static long find_rule(gen_t *g, const char *tn, json_t *memo, capture_t *c)
{
    char sk[4096];
    const json_t *hit = NULL;
    size_t r;
    if (memo != NULL) {
        skeleton(tn, sk, sizeof(sk));
        hit = json_object_get(memo, sk);
    }
    r = hit ? (size_t)json_integer_value(hit) : 0;
    memset(c, 0, sizeof(*c));
    c->expert = -1;
    if (hit == NULL || !rules_match(g->rules->rules[r].match, tn, c)) {
        /* No memo, or (never expected) the memo's rule does not match: scan. */
        for (r = 0; r < g->rules->nrules; r++) {
            memset(c, 0, sizeof(*c));
            c->expert = -1;
            if (rules_match(g->rules->rules[r].match, tn, c))
                break;
        }
    }
    if (memo != NULL && hit == NULL)
        json_object_set_new(memo, sk, json_integer(r < g->rules->nrules ? (json_int_t)r : -1));
    if (r >= g->rules->nrules) {
        memset(c, 0, sizeof(*c));
        c->expert = -1;
        return -1;
    }
    return (long)r;
}

static wsync_status_t group_tensors(gen_t *g)
{
    char name[4096];
    json_t *memo = rules_have_digits(g->rules) ? NULL : json_object();
    wsync_status_t st = WSYNC_OK;
    size_t i;
    for (i = 0; i < g->mf->ntensors && st == WSYNC_OK; i++) {
        const char *tn = g->mf->tensors[i].name;
        capture_t c;
        long rule;
        member_t mb;
        const json_t *hit = NULL;
        if (memo != NULL) {
            char sk[4096];
            skeleton(tn, sk, sizeof(sk));
            hit = json_object_get(memo, sk);
        }
        if (hit != NULL && json_integer_value(hit) < 0) {
            memset(&c, 0, sizeof(c));
            c.expert = -1;
            rule = -1;
        } else {
            rule = find_rule(g, tn, memo, &c);
        }
        snprintf(name, sizeof(name), "%s", tn);
        if (rule >= 0 && g->rules->rules[rule].into != NULL) {
            const char *into = g->rules->rules[rule].into, *star = strchr(into, '*');
            if (star != NULL)
                snprintf(name, sizeof(name), "%.*s%.*s%s", (int)(star - into), into, (int)c.star_len, c.star,
                         star + 1);
            else
                snprintf(name, sizeof(name), "%s", into);
        }
        mb = (member_t){i, c.expert, c.alt};
        st = add_member(g, name, rule, &mb);
    }
    json_decref(memo);
    return st;
}

static wsync_status_t divides(const wsync_tensor_t *s, int dim, int64_t n, int T, const char *what)
{
    if (n % T)
        return wsync_error(WSYNC_ERR_INVALID,
                           "rules: tensor '%s': %s %lld (dim %d) does not divide by the TP size "
                           "%d",
                           s->name, what, (long long)n, dim, T);
    return WSYNC_OK;
}

static void full_block(const wsync_tensor_t *s, size_t idx, wsync_block_t *b)
{
    int k;
    memset(b, 0, sizeof(*b));
    b->src = (uint32_t)idx;
    for (k = 0; k < s->ndim; k++)
        b->src_stop[k] = s->shape[k];
}

static int cmp_member(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    return x->alt - y->alt;
}

/* Shapes of every member agree beyond dim 0 (and in dim 0 within one part). */
static wsync_status_t same_shapes(const gen_t *g, const group_t *gr, int nalts, int64_t *d0)
{
    const wsync_tensor_t *f = &g->mf->tensors[gr->m[0].tensor];
    size_t i;
    int k;
    for (k = 0; k < nalts; k++)
        d0[k] = -1;
    for (i = 0; i < gr->n; i++) {
        const wsync_tensor_t *s = &g->mf->tensors[gr->m[i].tensor];
        int same = s->ndim == f->ndim && s->dtype == f->dtype && s->ndim >= 1;
        for (k = 1; same && k < s->ndim; k++)
            same = s->shape[k] == f->shape[k];
        if (same && d0[gr->m[i].alt] >= 0)
            same = d0[gr->m[i].alt] == s->shape[0];
        if (!same)
            return wsync_error(WSYNC_ERR_INVALID,
                               "rules: tensor '%s' does not match the dtype and shape of '%s', "
                               "which '%s' fuses it with",
                               s->name, f->name, gr->name);
        d0[gr->m[i].alt] = s->shape[0];
    }
    return WSYNC_OK;
}

/* The destination's dtype: FP8 where the rule quantizes, else the source's. */
static wsync_dtype_t dest_dtype(const wsync_rule_t *ru, const wsync_tensor_t *s)
{
    return ru && ru->fp8 ? WSYNC_DTYPE_F8_E4M3 : s->dtype;
}

/* vocab: rows padded to a multiple of ru->pad, then split; the last ranks
 * may hold padding only. */
static wsync_status_t split_vocab(const gen_t *g, const group_t *gr, const wsync_rule_t *ru, wsync_target_t *t)
{
    const wsync_tensor_t *s = &g->mf->tensors[gr->m[0].tensor];
    int64_t shape[WSYNC_MAX_DIMS], V, Vp, per, lo, hi;
    wsync_block_t b;
    if (s->ndim < 1)
        return wsync_error(WSYNC_ERR_INVALID, "rules: tensor '%s' is a scalar; a vocab split needs rows", s->name);
    memcpy(shape, s->shape, sizeof(shape));
    full_block(s, gr->m[0].tensor, &b);
    V = s->shape[0];
    Vp = (V + ru->pad - 1) / ru->pad * ru->pad;
    WSYNC_CHECK(divides(s, 0, Vp, g->T, "the padded vocabulary"));
    per = Vp / g->T;
    lo = g->K * per;
    hi = lo + per < V ? lo + per : V;
    shape[0] = per;
    WSYNC_CHECK(wsync_target_add_dest(t, gr->name, dest_dtype(ru, s), s->ndim, shape));
    if (lo >= hi)
        return WSYNC_OK; /* all padding */
    b.src_start[0] = lo;
    b.src_stop[0] = hi;
    return wsync_target_add_block(t, &b);
}

/* rows: each part's rows split by T, this rank's slices of the parts one
 * after another (a fused qkv). */
static wsync_status_t split_rows(const gen_t *g, const group_t *gr, const wsync_rule_t *ru, int nalts,
                                 wsync_target_t *t)
{
    const wsync_tensor_t *s = &g->mf->tensors[gr->m[0].tensor];
    const int T = g->T, K = g->K;
    int64_t shape[WSYNC_MAX_DIMS], d0[64], rows = 0;
    member_t *m = gr->m;
    wsync_block_t b;
    int k;
    memcpy(shape, s->shape, sizeof(shape));
    qsort(m, gr->n, sizeof(*m), cmp_member);
    for (k = 0; k < nalts; k++)
        if ((size_t)k >= gr->n || m[k].alt != k)
            return wsync_error(WSYNC_ERR_INVALID,
                               "rules: '%s' fuses %d parts by \"%s\" but part %d is missing "
                               "or repeated (next to tensor '%s')",
                               gr->name, nalts, ru->match, k, s->name);
    if (gr->n != (size_t)nalts)
        return wsync_error(WSYNC_ERR_INVALID, "rules: '%s': tensors of %d parts expected by \"%s\", found %zu",
                           gr->name, nalts, ru->match, gr->n);
    WSYNC_CHECK(same_shapes(g, gr, nalts, d0));
    for (k = 0; k < nalts; k++) {
        WSYNC_CHECK(divides(&g->mf->tensors[m[k].tensor], 0, d0[k], T, "rows"));
        rows += d0[k] / T;
    }
    shape[0] = rows;
    WSYNC_CHECK(wsync_target_add_dest(t, gr->name, dest_dtype(ru, s), s->ndim, shape));
    for (k = 0, rows = 0; k < nalts; k++) {
        int64_t per = d0[k] / T;
        full_block(&g->mf->tensors[m[k].tensor], m[k].tensor, &b);
        b.src_start[0] = K * per;
        b.src_stop[0] = (K + 1) * per;
        b.dst_start[0] = rows;
        rows += per;
        if (per > 0 && g->mf->tensors[m[k].tensor].size > 0)
            WSYNC_CHECK(wsync_target_add_block(t, &b));
    }
    return WSYNC_OK;
}

/* experts: E experts of nalts parts each, stacked into [E/T, sum of the
 * parts' rows, ...]; this rank holds experts K*E/T up to (K+1)*E/T. */
static wsync_status_t split_experts(const gen_t *g, const group_t *gr, const wsync_rule_t *ru, int nalts,
                                    wsync_target_t *t)
{
    const wsync_tensor_t *s = &g->mf->tensors[gr->m[0].tensor];
    const int T = g->T, K = g->K;
    int64_t shape[WSYNC_MAX_DIMS], d0[64], off[64], sum = 0;
    member_t *m = gr->m;
    wsync_block_t b;
    long E, e;
    size_t i;
    int k;
    qsort(m, gr->n, sizeof(*m), cmp_member);
    E = (long)(gr->n / (size_t)nalts);
    for (i = 0; i < gr->n; i++)
        if (m[i].expert != (long)(i / (size_t)nalts) || m[i].alt != (int)(i % (size_t)nalts) || gr->n % (size_t)nalts)
            return wsync_error(WSYNC_ERR_INVALID,
                               "rules: '%s': expert %ld part %d is missing or repeated "
                               "(experts 0..E-1 must each have all %d parts of \"%s\"; near tensor '%s')",
                               gr->name, (long)(i / (size_t)nalts), (int)(i % (size_t)nalts), nalts, ru->match,
                               g->mf->tensors[m[i].tensor].name);
    WSYNC_CHECK(same_shapes(g, gr, nalts, d0));
    if (E % T)
        return wsync_error(WSYNC_ERR_INVALID,
                           "rules: '%s': %ld experts (from tensor '%s') do not divide by the "
                           "TP size %d",
                           gr->name, E, s->name, T);
    if (s->ndim + 1 > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_INVALID, "rules: tensor '%s' has too many dimensions to stack", s->name);
    for (k = 0; k < nalts; k++) {
        off[k] = sum;
        sum += d0[k];
    }
    shape[0] = E / T;
    shape[1] = sum;
    for (k = 1; k < s->ndim; k++)
        shape[k + 1] = s->shape[k];
    WSYNC_CHECK(wsync_target_add_dest(t, gr->name, dest_dtype(ru, s), s->ndim + 1, shape));
    for (e = K * (E / T); e < (K + 1) * (E / T); e++)
        for (k = 0; k < nalts; k++) {
            const member_t *mb = &m[(size_t)e * (size_t)nalts + (size_t)k];
            full_block(&g->mf->tensors[mb->tensor], mb->tensor, &b);
            b.dst_start[0] = e - K * (E / T);
            b.dst_start[1] = off[k];
            if (g->mf->tensors[mb->tensor].size > 0)
                WSYNC_CHECK(wsync_target_add_block(t, &b));
        }
    return WSYNC_OK;
}

static wsync_status_t gen_group(gen_t *g, const group_t *gr, wsync_target_t *t)
{
    const wsync_rule_t *ru = gr->rule >= 0 ? &g->rules->rules[gr->rule] : NULL;
    const wsync_tensor_t *s = &g->mf->tensors[gr->m[0].tensor];
    int64_t shape[WSYNC_MAX_DIMS];
    wsync_split_t split = ru ? ru->split : WSYNC_SPLIT_REPLICATE;
    wsync_block_t b;
    int nalts = ru ? rules_alt_count(ru->match) : 1;

    if (nalts > 64)
        return wsync_error(WSYNC_ERR_INVALID, "rules: rule \"%s\" lists more than 64 parts", ru->match);
    memcpy(shape, s->shape, sizeof(shape));
    if ((split == WSYNC_SPLIT_REPLICATE || split == WSYNC_SPLIT_COLS || split == WSYNC_SPLIT_VOCAB) && gr->n > 1)
        return wsync_error(WSYNC_ERR_INVALID,
                           "rules: tensors '%s' and '%s' both become '%s', but only rows and "
                           "experts splits fuse tensors",
                           s->name, g->mf->tensors[gr->m[1].tensor].name, gr->name);
    full_block(s, gr->m[0].tensor, &b);
    switch (split) {
    case WSYNC_SPLIT_REPLICATE:
        WSYNC_CHECK(wsync_target_add_dest(t, gr->name, dest_dtype(ru, s), s->ndim, s->shape));
        return s->size > 0 ? wsync_target_add_block(t, &b) : WSYNC_OK;
    case WSYNC_SPLIT_COLS:
        if (s->ndim < 2)
            return wsync_error(WSYNC_ERR_INVALID,
                               "rules: tensor '%s' has %d dimensions; a cols split needs 2 or "
                               "more",
                               s->name, s->ndim);
        WSYNC_CHECK(divides(s, 1, s->shape[1], g->T, "columns"));
        shape[1] = s->shape[1] / g->T;
        b.src_start[1] = g->K * shape[1];
        b.src_stop[1] = (g->K + 1) * shape[1];
        WSYNC_CHECK(wsync_target_add_dest(t, gr->name, dest_dtype(ru, s), s->ndim, shape));
        return shape[1] > 0 ? wsync_target_add_block(t, &b) : WSYNC_OK;
    case WSYNC_SPLIT_VOCAB: return split_vocab(g, gr, ru, t);
    case WSYNC_SPLIT_ROWS: return split_rows(g, gr, ru, nalts, t);
    case WSYNC_SPLIT_EXPERTS: return split_experts(g, gr, ru, nalts, t);
    }
    return wsync_error(WSYNC_ERR_INTERNAL, "rules: unknown split %d", (int)split);
}

/* Makes the destination just generated FP8, its scale named by the rule. */
static wsync_status_t set_fp8(wsync_target_t *t, const wsync_rule_fp8_t *f, const char *dest)
{
    char name[4096];
    const char *star = strchr(f->scale, '*');
    if (star != NULL)
        snprintf(name, sizeof(name), "%.*s%s%s", (int)(star - f->scale), f->scale, dest, star + 1);
    else
        snprintf(name, sizeof(name), "%s", f->scale);
    return wsync_target_set_fp8(t, &f->spec, name);
}

wsync_status_t wsync_target_from_rules(const wsync_manifest_t *m, const wsync_rules_t *rules, int tp_size,
                                       int tp_rank, wsync_target_t **out)
{
    gen_t g = {m, rules ? rules : &rules_builtin_, tp_size, tp_rank, NULL, 0, 0, json_object()};
    wsync_target_t *t = NULL;
    wsync_status_t st;
    size_t i;

    if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
        json_decref(g.by_name);
        return wsync_error(WSYNC_ERR_INVALID, "rules: TP rank %d of %d: need 0 <= rank < size", tp_rank, tp_size);
    }
    if (g.by_name == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    WSYNC_CHECK_GOTO(group_tensors(&g), st, out);
    WSYNC_CHECK_GOTO(wsync_target_create(&t), st, out);
    for (i = 0; i < g.ng; i++) {
        WSYNC_CHECK_GOTO(gen_group(&g, &g.g[i], t), st, out);
        if (g.g[i].rule >= 0 && g.rules->rules[g.g[i].rule].fp8 != NULL)
            WSYNC_CHECK_GOTO(set_fp8(t, g.rules->rules[g.g[i].rule].fp8, g.g[i].name), st, out);
    }
    WSYNC_CHECK_GOTO(wsync_target_finish(t, m), st, out);
out:
    gen_free(&g);
    if (st != WSYNC_OK) {
        wsync_target_free(t);
        return st;
    }
    *out = t;
    return WSYNC_OK;
}
