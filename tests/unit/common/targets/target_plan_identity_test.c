/* target_plan_identity_test.c: wsync_node_plan_identity (the whole image's
 * node plan built from plan.h's plan) against wsync_node_plan_build's plan
 * for identity targets, an independent route to the same plan, over random
 * models, trainer layouts, chunk sizes and node sizes; and a map that lands
 * chunks on every rank of a GPU (also_lands) drops exactly those copies. */
#include <stdlib.h>

#include "common/targets/target_plan.h"
#include "tests/test.h"
#include "tests/unit/common/targets/target_gen.h"

/* also_lands: ranks whose bit is set in the chunk's mask (arg: uint8_t[nchunks]). */
static int in_mask(void *arg, uint32_t c, int q)
{
    return (((const uint8_t *)arg)[c] >> q) & 1;
}

/* The identity plan of p under land (and `shared` masks, or none) matches
 * np (wsync_node_plan_build's for identity targets, landing c mod L) in every
 * put and chunk; its copies are np's without those to the shared ranks. */
static void compare(const wsync_plan_t *p, const wsync_node_plan_t *np, const uint8_t *land, uint8_t *shared, int L)
{
    const wsync_identity_landing_t how = {.land = land,
                                          .rank_mask = 0xff,
                                          .also_lands = shared ? in_mask : NULL,
                                          .arg = shared};
    wsync_node_plan_t *ip = NULL;
    size_t k, j;
    uint32_t c;
    int r;
    CHECK_OK(wsync_node_plan_identity(p, L, &how, &ip));
    if (ip == NULL)
        return;
    CHECK_EQ(ip->nchunks, np->nchunks);
    CHECK_EQ(ip->nputs, np->nputs);
    CHECK_EQ(ip->network_bytes, np->network_bytes);
    CHECK_EQ(ip->chunk_bytes, np->chunk_bytes);
    for (k = 0; k < ip->nputs && k < np->nputs; k++) {
        CHECK_EQ(ip->puts[k].id, np->puts[k].id);
        CHECK_EQ(ip->puts[k].dst_off, np->puts[k].dst_off);
        CHECK_EQ(ip->puts[k].len, np->puts[k].len);
        CHECK_EQ(ip->puts[k].src_rank, np->puts[k].src_rank);
        CHECK_EQ(ip->puts[k].chunk, np->puts[k].chunk);
        CHECK_EQ(ip->puts[k].land_rank, np->puts[k].land_rank);
    }
    for (c = 0; c < ip->nchunks && c < np->nchunks; c++) {
        const wsync_tchunk_t *a = &ip->chunks[c], *b = &np->chunks[c];
        CHECK_EQ(a->land_rank, b->land_rank);
        CHECK_EQ(a->first_put, b->first_put);
        CHECK_EQ(a->nputs, b->nputs);
        CHECK_EQ(a->bytes, b->bytes);
        for (k = a->first_copy, j = b->first_copy; j < b->first_copy + b->ncopies; j++) {
            const wsync_tcopy_t *y = &np->copies[j];
            if (shared && in_mask(shared, c, y->to_rank))
                continue;
            CHECK(k < a->first_copy + a->ncopies);
            if (k >= a->first_copy + a->ncopies)
                break;
            CHECK_EQ(ip->copies[k].to_rank, y->to_rank);
            CHECK_EQ(ip->copies[k].from_rank, y->from_rank);
            CHECK_EQ(ip->copies[k].from_off, y->from_off);
            CHECK_EQ(ip->copies[k].to_off, y->to_off);
            CHECK_EQ(ip->copies[k].len, y->len);
            k++;
        }
        CHECK_EQ(k, a->first_copy + a->ncopies);
    }
    for (r = 0; r < p->world; r++)
        CHECK_EQ(wsync_node_plan_send_bytes(ip, r), wsync_node_plan_send_bytes(np, r));
    for (r = 0; r < L; r++) {
        CHECK_EQ(ip->land_bytes[r], np->land_bytes[r]);
        CHECK_EQ(ip->holds_bytes[r], np->holds_bytes[r]);
    }
    wsync_node_plan_free(ip);
}

static void test_identity_from_plan(void)
{
    int iter;
    for (iter = 0; iter < 200 && !test_case_failed_; iter++) {
        wsync_manifest_t *m = rr(0, 1) ? gen_random_model() : gen_llm_model((int)rr(1, 4), (int)rr(0, 1));
        wsync_target_t *id = NULL;
        const wsync_target_t *tp[8];
        wsync_plan_t *p = NULL;
        wsync_node_plan_t *np = NULL;
        int L = (int)rr(1, 8), r, kind;
        uint64_t cs = (uint64_t)rr(16, 40) * 256;
        wsync_layout_t *l = gen_layout(m, &kind);
        uint8_t *land = NULL, *shared = NULL;
        uint32_t c;
        CHECK_OK(wsync_target_identity(m, &id));
        for (r = 0; r < L; r++)
            tp[r] = id;
        CHECK_OK(wsync_plan_build(l, cs, &p));
        CHECK_OK(wsync_node_plan_build(m, l, L, tp, cs, NULL, &np));
        if (p && np) {
            land = calloc(p->nchunks + 1, 1);
            shared = calloc(p->nchunks + 1, 1);
            CHECK(land && shared);
            for (c = 0; land && shared && c < p->nchunks; c++) {
                land[c] = (uint8_t)wsync_plan_land_rank(p, c, L);
                shared[c] = (uint8_t)(rnd() & ((1u << L) - 1) & ~(1u << land[c]));
            }
            if (land && shared) {
                compare(p, np, land, NULL, L);
                compare(p, np, land, shared, L);
            }
        }
        free(land);
        free(shared);
        wsync_node_plan_free(np);
        wsync_plan_free(p);
        wsync_layout_free(l);
        wsync_target_free(id);
        wsync_manifest_free(m);
    }
}

/* A map that names a rank past the node is refused by name. */
static void test_bad_rank(void)
{
    wsync_manifest_t *m = gen_llm_model(1, 0);
    int kind;
    wsync_layout_t *l = gen_layout(m, &kind);
    wsync_plan_t *p = NULL;
    wsync_node_plan_t *ip = NULL;
    uint8_t *land;
    CHECK_OK(wsync_plan_build(l, 4096, &p));
    land = p ? calloc(p->nchunks + 1, 1) : NULL;
    if (land) {
        const wsync_identity_landing_t how = {.land = land, .rank_mask = 0xff};
        land[p->nchunks - 1] = 2;
        CHECK_EQ(wsync_node_plan_identity(p, 2, &how, &ip), WSYNC_ERR_INVALID);
        CHECK(ip == NULL);
    }
    free(land);
    wsync_plan_free(p);
    wsync_layout_free(l);
    wsync_manifest_free(m);
}

int main(void)
{
    RUN(test_identity_from_plan);
    RUN(test_bad_rank);
    TEST_EXIT();
}
