/* target_plan_test.c: the node plan over targets. Property test over random
 * models, trainer layouts (even, fsdp, explicit), targets (random block copies,
 * the rules with T from 1 to 16, the identity, mixed within a node) and node
 * sizes: the plan is executed on a simulated image (every source byte tagged
 * with its offset) and every rank's destination is compared with an
 * element-by-element evaluation of its target. Plus: identity targets give
 * exactly plan.h's plan; the build time on Qwen2.5-7B (reported; the
 * 100k-tensor model is in bench/target_plan_bench). */
#include <time.h>

#include "common/targets/target_plan.h"
#include "tests/test.h"
#include "tests/unit/common/targets/target_gen.h"

typedef struct sim_case {
    wsync_manifest_t *m;
    wsync_layout_t *layout;
    int L;
    wsync_target_t *t[16];
    const wsync_target_t *tp[16];
    uint64_t chunk;
    const char *what;
    int apart; /* built with a hint that puts every rank on every trainer's GPU */
} sim_case_t;

static int owner_of(const wsync_layout_t *l, uint64_t o)
{
    int r;
    size_t k;
    for (r = 0; r < l->world; r++)
        for (k = 0; k < l->nextents[r]; k++)
            if (o >= l->extents[r][k].offset && o < l->extents[r][k].offset + l->extents[r][k].len)
                return r;
    return -1;
}

/* A put gathered from several runs (or rows) has no run across a boundary
 * of its landing rank's destinations (a receiver landing in the caller's
 * tensors cuts it there, between its gather's tasks); 1 if one does. */
static int run_spans_dests(const sim_case_t *c, const wsync_node_plan_t *np)
{
    size_t p, d, k;
    for (p = 0; p < np->nputs; p++) {
        const wsync_tput_t *pu = &np->puts[p];
        const wsync_target_t *t = c->t[pu->land_rank];
        if (pu->nruns == 1 && np->runs[pu->first_run].rows == 1)
            continue; /* a plain copy: cut in parts as it is */
        for (d = 0; d < t->ndests; d++)
            for (k = 0; k < pu->nruns; k++) {
                const wsync_run2d_t *r = &np->runs[pu->first_run + k];
                uint64_t at = pu->dst_off + r->dst_off, end = at + r->row_bytes * r->rows;
                if (t->dests[d].offset > at && t->dests[d].offset < end) {
                    fprintf(stderr, "  put %zu: a run of %llu bytes spans the start of '%s'\n", p,
                            (unsigned long long)(end - at), t->dests[d].name);
                    return 1;
                }
            }
    }
    return 0;
}

/* Executes the plan and checks every property; returns the failures. */
static int check_plan(const sim_case_t *c, const wsync_node_plan_t *np)
{
    const int L = c->L;
    uint64_t img = c->m->image_size, o, net = 0;
    uint32_t *exp[16], *got[16], *chunk_of[16];
    uint8_t *cnt[16], *needr[16], *needed = calloc(img + 1, 1);
    int *owner = malloc((img + 1) * sizeof(int)), bad = 0, r;
    size_t p, k;
    uint64_t *load = calloc((size_t)L, sizeof(uint64_t));

    for (o = 0; o < img; o++)
        owner[o] = owner_of(c->layout, o);
    for (r = 0; r < L; r++) {
        uint64_t n = c->t[r]->image_size + 1;
        exp[r] = calloc(n, sizeof(uint32_t));
        got[r] = calloc(n, sizeof(uint32_t));
        chunk_of[r] = calloc(n, sizeof(uint32_t));
        cnt[r] = calloc(n, 1);
        needr[r] = calloc(img + 1, 1);
        eval_target(c->m, c->t[r], exp[r]);
        for (o = 0; o < c->t[r]->image_size; o++)
            if (exp[r][o]) {
                needed[exp[r][o] - 1] = 1;
                needr[r][exp[r][o] - 1] = 1;
            }
    }
    for (o = 0; o < img; o++)
        for (r = 0; r < (c->apart ? L : 1); r++)
            net += c->apart ? needr[r][o] : needed[o]; /* apart: what each rank needs crosses for it */
    /* Puts: contiguous in the destination, owned by their sender. */
    for (p = 0; p < np->nputs && bad < 5; p++) {
        const wsync_tput_t *pu = &np->puts[p];
        uint64_t at = 0;
        if (pu->chunk >= np->nchunks || np->chunks[pu->chunk].land_rank != pu->land_rank || pu->id != p) {
            fprintf(stderr, "  put %zu: chunk %u / land rank %d disagree with the chunk\n", p, pu->chunk,
                    pu->land_rank);
            bad++;
        }
        for (k = 0; k < pu->nruns; k++) {
            const wsync_run2d_t *ru = &np->runs[pu->first_run + k];
            uint64_t i, b;
            if (ru->dst_off != at) {
                fprintf(stderr, "  put %zu run %zu: dst_off %llu, expected %llu (runs back to back)\n", p, k,
                        (unsigned long long)ru->dst_off, (unsigned long long)at);
                bad++;
            }
            if (ru->rows == 1 && ru->src_stride != 0)
                bad++;
            for (i = 0; i < ru->rows; i++)
                for (b = 0; b < ru->row_bytes; b++) {
                    uint64_t so = ru->src_off + i * ru->src_stride + b, d = pu->dst_off + at + i * ru->row_bytes + b;
                    if (so >= img || owner[so] != pu->src_rank) {
                        if (bad++ < 5)
                            fprintf(stderr, "  put %zu: source byte %llu is owned by %d, not sender %d\n", p,
                                    (unsigned long long)so, so < img ? owner[so] : -1, pu->src_rank);
                        continue;
                    }
                    if (d >= c->t[pu->land_rank]->image_size) {
                        bad++;
                        continue;
                    }
                    got[pu->land_rank][d] = (uint32_t)so + 1;
                    chunk_of[pu->land_rank][d] = pu->chunk + 1;
                    cnt[pu->land_rank][d]++;
                }
            at += wsync_run2d_bytes(ru);
        }
        if (at != pu->len) {
            fprintf(stderr, "  put %zu: runs move %llu bytes, len says %llu\n", p, (unsigned long long)at,
                    (unsigned long long)pu->len);
            bad++;
        }
    }
    /* Copies: out of bytes their chunk landed on the landing rank. */
    for (p = 0; p < np->ncopies && bad < 5; p++) {
        const wsync_tcopy_t *cp = &np->copies[p];
        uint64_t b;
        if (cp->from_rank != np->chunks[cp->chunk].land_rank)
            bad++;
        for (b = 0; b < cp->len; b++) {
            uint64_t f = cp->from_off + b, t = cp->to_off + b;
            if (f >= c->t[cp->from_rank]->image_size || t >= c->t[cp->to_rank]->image_size ||
                chunk_of[cp->from_rank][f] != cp->chunk + 1) {
                if (bad++ < 5)
                    fprintf(stderr, "  copy %zu byte %llu: not from a byte chunk %u landed\n", p,
                            (unsigned long long)b, cp->chunk);
                break;
            }
            got[cp->to_rank][t] = got[cp->from_rank][f];
            cnt[cp->to_rank][t]++;
        }
    }
    for (r = 0; r < L && bad < 5; r++)
        for (o = 0; o < c->t[r]->image_size; o++)
            if (cnt[r][o] != (exp[r][o] ? 1 : 0) || got[r][o] != exp[r][o]) {
                fprintf(stderr, "  rank %d byte %llu: written %d times with source %lld, expected %s%lld\n", r,
                        (unsigned long long)o, cnt[r][o], (long long)got[r][o] - 1,
                        exp[r][o] ? "once with " : "never: ", (long long)exp[r][o] - 1);
                bad++;
                break;
            }
    if (np->network_bytes != net) {
        fprintf(stderr, "  network bytes %llu, distinct source bytes needed %llu\n",
                (unsigned long long)np->network_bytes, (unsigned long long)net);
        bad++;
    }
    bad += run_spans_dests(c, np);
    for (p = 0; c->apart && p < np->ncopies; p++) /* a rank holding bytes twice copies them inside itself */
        if (np->copies[p].from_rank != np->copies[p].to_rank) {
            fprintf(stderr, "  one GPU: a copy from rank %d to rank %d (each rank lands what it holds)\n",
                    np->copies[p].from_rank, np->copies[p].to_rank);
            bad++;
            break;
        }
    /* Landing: every chunk within one source chunk, its bytes needed by one
     * fixed set of ranks, landed on the least loaded of them (apart: the
     * rank that holds them, checked above by every byte written once). */
    for (k = 0; k < np->nchunks && bad < 5 && !c->apart; k++) {
        const wsync_tchunk_t *ch = &np->chunks[k];
        int need_set[16] = {0}, first = 1, s;
        for (p = ch->first_put; p < ch->first_put + ch->nputs; p++) {
            const wsync_tput_t *pu = &np->puts[p];
            uint64_t b;
            for (b = 0; b < pu->len; b++) {
                uint32_t so = got[pu->land_rank][pu->dst_off + b];
                int set[16] = {0};
                if (so == 0 || (so - 1) / np->chunk_bytes != ch->src_chunk) {
                    bad++;
                    break;
                }
                for (r = 0; r < L; r++)
                    set[r] = needr[r][so - 1];
                if (!first && memcmp(set, need_set, sizeof(set)) != 0) {
                    fprintf(stderr, "  chunk %zu mixes bytes of different holder sets\n", k);
                    bad++;
                    break;
                }
                memcpy(need_set, set, sizeof(set));
                first = 0;
            }
        }
        for (s = 0; s < L; s++)
            if (need_set[s] && load[s] < load[ch->land_rank]) {
                fprintf(stderr, "  chunk %zu lands on rank %d (loaded %llu) though rank %d holds it with %llu\n",
                        k, ch->land_rank, (unsigned long long)load[ch->land_rank], s, (unsigned long long)load[s]);
                bad++;
            }
        load[ch->land_rank] += ch->bytes;
    }
    for (r = 0; r < L; r++) {
        if (np->land_bytes[r] != load[r] && !c->apart)
            bad++;
        free(exp[r]);
        free(got[r]);
        free(chunk_of[r]);
        free(cnt[r]);
        free(needr[r]);
    }
    free(needed);
    free(owner);
    free(load);
    return bad;
}

static void free_case(sim_case_t *c)
{
    int r;
    for (r = 0; r < c->L; r++)
        wsync_target_free(c->t[r]);
    wsync_layout_free(c->layout);
    wsync_manifest_free(c->m);
}

/* >= 1000 random cases. */
static void test_plan_properties(void)
{
    int cases = 0, failed = 0, kinds[4] = {0}, iter, apart = 0;
    static int colo[64 * 16], ncolo[64];
    wsync_land_hint_t hint = {colo, ncolo};
    for (iter = 0; iter < 1050 && failed < 3; iter++) {
        sim_case_t c;
        wsync_node_plan_t *np = NULL;
        int T = (int)rr(1, 16), moe = (int)rr(0, 1), llm = (int)rr(0, 2) > 0, r, lk;
        uint64_t seed = gen_state_;
        memset(&c, 0, sizeof(c));
        c.m = llm ? gen_llm_model(T, moe) : gen_random_model();
        if (c.m == NULL || c.m->image_size == 0) {
            wsync_manifest_free(c.m);
            continue;
        }
        c.layout = gen_layout(c.m, &lk);
        c.L = (int)rr(1, 8);
        c.chunk = (uint64_t)rr(16, 64) * 256;
        for (r = 0; r < c.L; r++) {
            int kind = (int)rr(0, 3), st = WSYNC_OK;
            if (kind == 0) {
                st = wsync_target_identity(c.m, &c.t[r]);
            } else if (kind == 1 && llm) {
                st = wsync_target_from_rules(c.m, NULL, T, rr(0, 1) ? r % T : (int)rr(0, T - 1), &c.t[r]);
            } else if (kind == 3 && r > 0) {
                /* The rank before's target, through its JSON form. */
                json_t *j = NULL;
                char *text;
                wsync_target_to_json(c.t[r - 1], c.m, &j);
                text = json_dumps(j, JSON_COMPACT);
                json_decref(j);
                st = wsync_target_from_json(c.m, text, strlen(text), &c.t[r]);
                free(text);
            } else {
                kind = 2;
                c.t[r] = gen_random_target(c.m);
            }
            if (st != WSYNC_OK || c.t[r] == NULL) {
                fprintf(stderr, "  seed %llu: target for rank %d: %s\n", (unsigned long long)seed, r,
                        wsync_last_error());
                failed++;
                c.L = r;
                break;
            }
            c.tp[r] = c.t[r];
            kinds[kind]++;
        }
        if (c.L == 0 || c.layout == NULL || r < c.L) {
            free_case(&c);
            continue;
        }
        c.apart = iter % 4 == 3 && c.L > 1; /* but where every target is the whole image (identity sharing) */
        for (r = 0; r < c.L && c.t[r]->whole_image; r++)
            ;
        c.apart = c.apart && r < c.L;
        for (r = 0; r < c.layout->world * c.L; r++)
            colo[r] = r % c.L; /* apart: every local rank on every trainer rank's GPU */
        for (r = 0; r < c.layout->world; r++)
            ncolo[r] = c.L;
        if (wsync_node_plan_build(c.m, c.layout, c.L, c.tp, c.chunk, c.apart ? &hint : NULL, &np) != WSYNC_OK) {
            fprintf(stderr, "  seed %llu: plan: %s\n", (unsigned long long)seed, wsync_last_error());
            failed++;
        } else if (check_plan(&c, np) != 0) {
            fprintf(stderr, "  seed %llu: case %d (%s model, T=%d, L=%d, layout %d, chunk %llu) failed\n",
                    (unsigned long long)seed, iter, llm ? (moe ? "moe" : "llm") : "random", T, c.L, lk,
                    (unsigned long long)c.chunk);
            failed++;
        }
        cases++;
        apart += c.apart;
        wsync_node_plan_free(np);
        free_case(&c);
    }
    fprintf(stderr,
            "  %d cases, %d of them on one GPU (rank targets: %d identity, %d rules, %d random, %d repeated)\n",
            cases, apart, kinds[0], kinds[1], kinds[2], kinds[3]);
    CHECK(cases >= 1000);
    CHECK(apart >= 150);
    CHECK_EQ(failed, 0);
}

/* Identity targets: exactly plan.h's chunks, landing (c mod L), pieces and
 * one copy of each chunk to every other rank. */
static void test_identity_is_todays_plan(void)
{
    int iter;
    for (iter = 0; iter < 200; iter++) {
        wsync_manifest_t *m = rr(0, 1) ? gen_random_model() : gen_llm_model((int)rr(1, 4), (int)rr(0, 1));
        wsync_target_t *id = NULL;
        const wsync_target_t *tp[8];
        wsync_layout_t *l;
        wsync_plan_t *p = NULL;
        wsync_node_plan_t *np = NULL;
        int L = (int)rr(1, 8), r, kind;
        uint64_t cs = (uint64_t)rr(16, 40) * 256;
        size_t k;
        uint32_t c;
        l = gen_layout(m, &kind);
        CHECK_OK(wsync_target_identity(m, &id));
        for (r = 0; r < L; r++)
            tp[r] = id;
        CHECK_OK(wsync_plan_build(l, cs, &p));
        CHECK_OK(wsync_node_plan_build(m, l, L, tp, cs, NULL, &np));
        if (p == NULL || np == NULL)
            return;
        CHECK_EQ(np->nchunks, p->nchunks);
        CHECK_EQ(np->nputs, p->npieces);
        for (k = 0; k < np->nputs && k < p->npieces; k++) {
            CHECK_EQ(np->puts[k].dst_off, p->pieces[k].offset);
            CHECK_EQ(np->puts[k].len, p->pieces[k].len);
            CHECK_EQ(np->puts[k].src_rank, p->pieces[k].src_rank);
            CHECK_EQ(np->puts[k].chunk, p->pieces[k].chunk);
            CHECK_EQ(np->puts[k].nruns, 1);
            CHECK_EQ(np->runs[np->puts[k].first_run].src_off, p->pieces[k].offset);
        }
        for (c = 0; c < np->nchunks; c++) {
            const wsync_tchunk_t *ch = &np->chunks[c];
            CHECK_EQ(ch->land_rank, wsync_plan_land_rank(p, c, L));
            CHECK_EQ(ch->first_put, p->chunk_first[c]);
            CHECK_EQ(ch->ncopies, (size_t)(L - 1));
            for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++) {
                CHECK_EQ(np->copies[k].from_off, (uint64_t)c * cs);
                CHECK_EQ(np->copies[k].to_off, (uint64_t)c * cs);
                CHECK_EQ(np->copies[k].len, ch->bytes);
            }
        }
        for (r = 0; r < l->world; r++)
            CHECK_EQ(wsync_node_plan_send_bytes(np, r), wsync_plan_rank_send_bytes(p, r));
        for (r = 0; r < L; r++) {
            CHECK_EQ(np->land_bytes[r], wsync_plan_land_bytes(p, r, L));
            CHECK_EQ(np->holds_bytes[r], m->image_size);
        }
        CHECK_EQ(np->network_bytes, m->image_size);
        wsync_node_plan_free(np);
        wsync_plan_free(p);
        wsync_layout_free(l);
        wsync_target_free(id);
        wsync_manifest_free(m);
        if (test_case_failed_)
            return;
    }
}

/* The colocated hint picks landing as engine_side/landing.c does: the chunk's
 * dominant trainer rank's local ranks in turn. */
static void test_identity_hint(void)
{
    wsync_manifest_t *m = NULL;
    wsync_layout_t *l = NULL;
    wsync_target_t *id = NULL;
    wsync_node_plan_t *np = NULL;
    const wsync_target_t *tp[4];
    int colo[3 * 4] = {0}, ncolo[3] = {0}, r;
    wsync_land_hint_t hint = {colo, ncolo};
    uint32_t c;
    CHECK_OK(wsync_manifest_synthetic(4ULL << 20, &m));
    CHECK_OK(wsync_layout_even(m->image_size, 3, &l));
    CHECK_OK(wsync_target_identity(m, &id));
    for (r = 0; r < 4; r++)
        tp[r] = id;
    /* Trainer 1 shares a GPU with local ranks 2 and 3; the others with none. */
    ncolo[1] = 2;
    colo[1 * 4 + 0] = 2;
    colo[1 * 4 + 1] = 3;
    CHECK_OK(wsync_node_plan_build(m, l, 4, tp, 256 << 10, &hint, &np));
    for (c = 0; np && c < np->nchunks; c++) {
        uint64_t lo = (uint64_t)c * (256 << 10), hi = lo + np->chunks[c].bytes;
        uint64_t e1 = l->extents[1][0].offset, e1e = e1 + l->extents[1][0].len;
        uint64_t own1 = (hi < e1e ? hi : e1e) > (lo > e1 ? lo : e1) ? (hi < e1e ? hi : e1e) - (lo > e1 ? lo : e1)
                                                                    : 0;
        /* Trainer 1 owns most of the chunk: its ranks 2, 3 in turn. */
        if (own1 * 2 > hi - lo)
            CHECK_EQ(np->chunks[c].land_rank, c % 2 ? 3 : 2);
    }
    wsync_node_plan_free(np);
    wsync_target_free(id);
    wsync_layout_free(l);
    wsync_manifest_free(m);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Build time of the plan for T=8, L=8 (reported, not asserted). */
static void bench_case(const char *what, wsync_manifest_t *m)
{
    wsync_target_t *t[8];
    const wsync_target_t *tp[8];
    wsync_layout_t *l = NULL;
    wsync_node_plan_t *np = NULL;
    struct timespec t0;
    double tt, pt;
    int r;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (r = 0; r < 8; r++) {
        CHECK_OK(wsync_target_from_rules(m, NULL, 8, r, &t[r]));
        tp[r] = t[r];
    }
    tt = ms_since(&t0);
    CHECK_OK(wsync_layout_fsdp(m, 8, &l));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(wsync_node_plan_build(m, l, 8, tp, WSYNC_DEFAULT_CHUNK, NULL, &np));
    pt = ms_since(&t0);
    if (np)
        fprintf(stderr,
                "  %s: %zu tensors, 8 targets in %.1f ms, node plan (fsdp 8, T=8, L=8) in %.1f ms: %u chunks, "
                "%zu puts, %zu runs, %zu copies\n",
                what, m->ntensors, tt, pt, np->nchunks, np->nputs, np->nruns, np->ncopies);
    wsync_node_plan_free(np);
    wsync_layout_free(l);
    for (r = 0; r < 8; r++)
        wsync_target_free(t[r]);
}

static void test_plan_build_time(void)
{
    wsync_manifest_t *m = NULL;
    char n[128];
    int l;
    /* Qwen2.5-7B: hidden 3584, 28 heads of 128, 4 KV heads, MLP 18944, vocab
     * 152064 (TP=8 needs 4 KV heads to divide: 512 rows of k and v divide). */
    CHECK_OK(wsync_manifest_create(&m));
    add_t(m, "model.embed_tokens.weight", 2, 152064, 3584);
    for (l = 0; l < 28; l++) {
#define Q_(fmt, nd, a, b)                                  \
    do {                                                   \
        snprintf(n, sizeof(n), "model.layers.%d." fmt, l); \
        add_t(m, n, nd, a, b);                             \
    } while (0)
        Q_("input_layernorm.weight", 1, 3584, 0);
        Q_("self_attn.q_proj.weight", 2, 3584, 3584);
        Q_("self_attn.q_proj.bias", 1, 3584, 0);
        Q_("self_attn.k_proj.weight", 2, 512, 3584);
        Q_("self_attn.k_proj.bias", 1, 512, 0);
        Q_("self_attn.v_proj.weight", 2, 512, 3584);
        Q_("self_attn.v_proj.bias", 1, 512, 0);
        Q_("self_attn.o_proj.weight", 2, 3584, 3584);
        Q_("post_attention_layernorm.weight", 1, 3584, 0);
        Q_("mlp.gate_proj.weight", 2, 18944, 3584);
        Q_("mlp.up_proj.weight", 2, 18944, 3584);
        Q_("mlp.down_proj.weight", 2, 3584, 18944);
    }
    add_t(m, "model.norm.weight", 1, 3584, 0);
    add_t(m, "lm_head.weight", 2, 152064, 3584);
    bench_case("Qwen2.5-7B-shaped", m);
    wsync_manifest_free(m);
#undef Q_
    /* The 100k-tensor model: bench/target_plan_bench. */
}

int main(void)
{
    RUN(test_identity_is_todays_plan);
    RUN(test_identity_hint);
    RUN(test_plan_properties);
    RUN(test_plan_build_time);
    TEST_EXIT();
}
