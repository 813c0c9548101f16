/* put_list_test.c: what the one put loop of a trainer rank is given
 * (trainer_side/put_list.c). A whole-image request lists exactly the puts of
 * the identity node plan for the same landing (ids, sources, destinations,
 * chunks), and both are the pieces of this rank in chunks c with c mod L ==
 * the asking rank, by a filter written here over plan.h's pieces. With TP
 * targets the list holds every put of the node plan this rank owns that
 * lands on the asker, the ones whose source is not one range packed (checked
 * against the runs here), in the order the loop needs: chunk by chunk with
 * the slot's puts first when in_order, else the slot's in source order and
 * then the stage's. */
#include "common/control/sync_layout.h"
#include "common/model/manifest.h"
#include "common/targets/rules.h"
#include "common/targets/target_plan.h"
#include "tests/test.h"
#include "trainer_side/put_list.h"

#define IMAGE (24u << 20)

/* A publisher as far as the lists read it: rank, layout, plan, my pieces. */
static void fake_publisher(wsync_publisher_t *p, wsync_sync_layout_t *sl, int rank)
{
    memset(p, 0, sizeof(*p));
    p->cfg.rank = rank;
    p->sl = sl;
    p->share.my_pieces = sl->plan->rank_pieces[rank];
    p->share.nmy = sl->plan->rank_npieces[rank];
}

/* The puts of l in the order the loop makes them, into a new array. */
static pub_put_t *collect(const pub_put_list_t *l, size_t *n, uint64_t *bytes)
{
    size_t k, len = pub_put_list_len(l);
    pub_put_t *all = calloc(len + 1, sizeof(*all));
    *n = 0;
    *bytes = 0;
    for (k = 0; all && k < len; k++)
        if (pub_put_list_at(l, k, &all[*n])) {
            *bytes += all[*n].len;
            (*n)++;
        }
    return all;
}

static wsync_sync_layout_t *layout(int kind, int world, uint64_t chunk)
{
    wsync_manifest_t *m = NULL;
    wsync_sync_layout_t *sl = NULL;
    if (wsync_manifest_synthetic(IMAGE, &m) != WSYNC_OK)
        return NULL;
    if (wsync_sync_layout_build(m, kind, world, chunk, &sl) != WSYNC_OK) {
        fprintf(stderr, "  layout: %s\n", wsync_last_error());
        return NULL;
    }
    return sl;
}

static void test_whole_image_is_the_identity_node_plan(void)
{
    static const uint64_t chunks[] = {1u << 20, (3u << 20) + 8192};
    int kind, world, L, ci, cases = 0;
    for (kind = 0; kind < 2; kind++)
        for (world = 1; world <= 3; world++)
            for (ci = 0; ci < 2; ci++) {
                wsync_sync_layout_t *sl = layout(kind, world, chunks[ci]);
                wsync_target_t *id = NULL;
                CHECK(sl != NULL);
                if (sl == NULL)
                    return;
                CHECK_OK(wsync_target_identity(sl->manifest, &id));
                for (L = 1; L <= 4 && id; L++) {
                    const wsync_target_t *ts[4] = {id, id, id, id};
                    wsync_node_plan_t *np = NULL;
                    int t, a, order;
                    CHECK_OK(wsync_node_plan_build(sl->manifest, sl->layout, L, ts, chunks[ci], NULL, &np));
                    for (t = 0; np && t < world; t++)
                        for (a = 0; a < L; a++)
                            for (order = 0; order < 2; order++) {
                                wsync_publisher_t p;
                                wsync_pull_request_t q = {.local_rank = a, .local_ranks = L, .in_order = order};
                                pub_treq_t tr = {.np = np};
                                pub_put_list_t wl = {0}, il = {0};
                                const wsync_plan_t *plan = sl->plan;
                                pub_put_t *whole, *ident;
                                size_t i, k = 0, nw = 0, ni = 0;
                                uint64_t bytes = 0, bw = 0, bi = 0;
                                fake_publisher(&p, sl, t);
                                CHECK_OK(pub_put_list_pieces(&p, &q, &wl));
                                CHECK_OK(pub_put_list_targets(&p, &tr, &q, &il));
                                whole = collect(&wl, &nw, &bw);
                                ident = collect(&il, &ni, &bi);
                                CHECK(whole && ident);
                                CHECK_EQ(nw, ni);
                                CHECK_EQ(bw, bi);
                                CHECK_EQ(il.npacked, 0);
                                for (i = 0; whole && ident && i < nw && i < ni; i++) {
                                    CHECK_EQ(whole[i].id, ident[i].id);
                                    CHECK_EQ(whole[i].src, ident[i].src);
                                    CHECK_EQ(whole[i].dst_off, ident[i].dst_off);
                                    CHECK_EQ(whole[i].len, ident[i].len);
                                    CHECK_EQ(whole[i].chunk, ident[i].chunk);
                                    CHECK_EQ(whole[i].stage, PUB_PUT_FROM_SLOT);
                                }
                                /* The pieces by hand, in offset order. */
                                for (i = 0; i < plan->npieces; i++) {
                                    const wsync_piece_t *pc = &plan->pieces[i];
                                    if (pc->src_rank != t || pc->len == 0 || (int)(pc->chunk % (uint32_t)L) != a)
                                        continue;
                                    if (whole && k < nw) {
                                        CHECK_EQ(whole[k].id, pc->id);
                                        CHECK_EQ(whole[k].src, pc->offset);
                                        CHECK_EQ(whole[k].dst_off, pc->offset);
                                    }
                                    bytes += pc->len;
                                    k++;
                                }
                                CHECK_EQ(k, nw);
                                CHECK_EQ(bytes, bw);
                                free(whole);
                                free(ident);
                                pub_put_list_clear(&wl);
                                pub_put_list_clear(&il);
                                cases++;
                            }
                    wsync_node_plan_free(np);
                }
                wsync_target_free(id);
                wsync_sync_layout_free(sl);
                if (test_case_failed_)
                    return;
            }
    fprintf(stderr, "  %d lists compared\n", cases);
}

/* One range of the source, read here without the library's helper. */
static int one_range(const wsync_node_plan_t *np, const wsync_tput_t *pu, uint64_t *src)
{
    uint64_t at = np->runs[pu->first_run].src_off;
    size_t j;
    *src = at;
    for (j = 0; j < pu->nruns; j++) {
        const wsync_run2d_t *r = &np->runs[pu->first_run + j];
        if (r->src_off != at || (r->rows > 1 && r->src_stride != r->row_bytes))
            return 0;
        at += r->rows * r->row_bytes;
    }
    return 1;
}

static void check_order(const pub_put_list_t *l, int in_order)
{
    size_t i;
    for (i = 1; i < l->n; i++) {
        const pub_put_t *x = &l->puts[i - 1], *y = &l->puts[i];
        int xs = x->stage != PUB_PUT_FROM_SLOT, ys = y->stage != PUB_PUT_FROM_SLOT;
        if (in_order && x->chunk != y->chunk) {
            CHECK(x->chunk < y->chunk);
            continue;
        }
        CHECK(xs <= ys); /* the slot's first */
        if (xs == ys && !xs)
            CHECK(x->src < y->src);
        if (xs == ys && xs)
            CHECK(x->stage < y->stage);
    }
}

static void test_tp_targets_listed_packed_and_ordered(void)
{
    wsync_sync_layout_t *sl = layout(0, 2, 1u << 20);
    wsync_target_t *tg[2] = {NULL, NULL};
    wsync_node_plan_t *np = NULL;
    size_t packed_seen = 0;
    int t, a, order;
    CHECK(sl != NULL);
    if (sl == NULL)
        return;
    CHECK_OK(wsync_target_from_rules(sl->manifest, NULL, 2, 0, &tg[0]));
    CHECK_OK(wsync_target_from_rules(sl->manifest, NULL, 2, 1, &tg[1]));
    if (tg[0] && tg[1])
        CHECK_OK(wsync_node_plan_build(sl->manifest, sl->layout, 2, (const wsync_target_t *const *)tg,
                                       sl->plan->chunk_size, NULL, &np));
    for (t = 0; np && t < 2; t++)
        for (a = 0; a < 2; a++)
            for (order = 0; order < 2; order++) {
                wsync_publisher_t p;
                wsync_pull_request_t q = {.local_rank = a, .local_ranks = 2, .in_order = order};
                pub_treq_t tr = {.np = np};
                pub_put_list_t l = {0};
                size_t k, i, n = 0;
                fake_publisher(&p, sl, t);
                CHECK_OK(pub_put_list_targets(&p, &tr, &q, &l));
                for (k = 0; k < np->nputs; k++) {
                    const wsync_tput_t *pu = &np->puts[k];
                    uint64_t src;
                    int found = 0, contiguous;
                    if (pu->src_rank != t || pu->land_rank != a || pu->len == 0 ||
                        (int)(pu->chunk % 2u) != a) /* no chunk map: c mod L lands on the asker */
                        continue;
                    contiguous = one_range(np, pu, &src);
                    for (i = 0; i < l.n; i++) {
                        const pub_put_t *e = &l.puts[i];
                        if (e->id != pu->id)
                            continue;
                        found++;
                        CHECK_EQ(e->dst_off, pu->dst_off);
                        CHECK_EQ(e->len, pu->len);
                        CHECK_EQ(e->chunk, pu->chunk);
                        CHECK_EQ(e->stage == PUB_PUT_FROM_SLOT, contiguous);
                        if (contiguous)
                            CHECK_EQ(e->src, src);
                        else
                            CHECK(e->stage < l.npacked && l.packed[e->stage] == pu->id);
                    }
                    CHECK_EQ(found, 1);
                    n++;
                }
                CHECK_EQ(n, l.n);
                check_order(&l, order);
                packed_seen += l.npacked;
                pub_put_list_clear(&l);
            }
    CHECK(packed_seen > 0); /* the TP=2 split has column slices to pack */
    wsync_node_plan_free(np);
    wsync_target_free(tg[0]);
    wsync_target_free(tg[1]);
    wsync_sync_layout_free(sl);
}

int main(void)
{
    RUN(test_whole_image_is_the_identity_node_plan);
    RUN(test_tp_targets_listed_packed_and_ordered);
    TEST_EXIT();
}
