/* delta_test.c: delta pulls in the cost model (common/cost/delta.c): the
 * crossing carries delta_wire of the bytes, the trainers' encode and the
 * ranks' base copy and apply are their own pipelined stages at their
 * classes' rates, auto picks the faster of full and delta (delta over a
 * slow network, full inside one GPU where a copy beats encode + apply), and
 * a delta plan without its rates or its fraction is refused naming them.
 * Expected figures are worked out here from bytes / rate. */
#include <math.h>
#include <string.h>

#include "common/cost/cost.h"
#include "tests/test.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (fabs(b) + 1e-12))
#define GB 1e9

static cost_links_t links_of(double net_gbps)
{
    cost_links_t l;
    memset(&l, 0, sizeof(l));
    l.host_nics = 1;
    l.link[COST_NIC_PUT] = (cost_link_t){.present = 1, .bw = net_gbps * GB};
    l.link[COST_LOCAL] = (cost_link_t){.present = 1, .bw = 2000 * GB};
    l.link[COST_DIGEST_GPU] = (cost_link_t){.present = 1, .bw = 4000 * GB};
    l.link[COST_WINDOW] = (cost_link_t){.present = 1, .bw = 400 * GB};
    l.link[COST_DELTA_ENCODE_GPU] = (cost_link_t){.present = 1, .bw = 1600 * GB};
    l.link[COST_DELTA_APPLY_GPU] = (cost_link_t){.present = 1, .bw = 3000 * GB};
    return l;
}

static const cost_stage_t *stage(const cost_plan_t *p, const char *name)
{
    for (int i = 0; i < p->nstages; i++)
        if (strcmp(p->stages[i].name, name) == 0)
            return &p->stages[i];
    return NULL;
}

/* One trainer, one node of one rank, 10 GB, puts at 40 GB/s, 10% on the wire. */
static void test_delta_stages_and_bytes(void)
{
    cost_links_t l = links_of(40);
    cost_deploy_t d;
    cost_plan_t p[COST_MAX_PLANS];
    size_t n = 0;
    cost_deploy_init(&d, 1, 1, 1, 1, 10000000000ULL, 1ULL << 30, COST_MEM_GPU, COST_NET_PUT);
    d.delta = COST_DELTA_ON;
    d.delta_wire = 0.1;
    d.delta_base_copy = 1;
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK_EQ(n, 1);
    CHECK_STR(p[0].name, "direct+delta");
    CHECK(p[0].delta && p[0].runnable);
    const cost_stage_t *cross = stage(&p[0], "cross"), *enc = stage(&p[0], "encode"), *app = stage(&p[0], "apply");
    const cost_stage_t *base = stage(&p[0], "base");
    CHECK(cross && enc && app && base);
    if (!(cross && enc && app && base))
        return;
    CHECK(NEAR(cross->seconds, 1e9 / (40 * GB))); /* a tenth of 10 GB at 40 GB/s */
    CHECK(NEAR(enc->seconds, 10e9 / (1600 * GB)));
    CHECK(NEAR(app->seconds, 10e9 / (3000 * GB)));
    CHECK(NEAR(base->seconds, 10e9 / (2000 * GB)));
    CHECK(enc->pipelined && app->pipelined && base->pipelined);
}

/* Over a 40 GB/s network 2% changed is worth encoding; on one GPU (the
 * local transport's fused copy at 2 TB/s) it is not. */
static void test_auto_picks_the_faster(void)
{
    cost_links_t l = links_of(40);
    cost_deploy_t d;
    cost_choice_t ch, full;
    cost_deploy_init(&d, 8, 1, 4, 8, 100000000000ULL, 64ULL << 20, COST_MEM_GPU, COST_NET_PUT);
    CHECK_OK(cost_choose(&l, &d, &full));
    d.delta = COST_DELTA_AUTO;
    d.delta_wire = 0.0634; /* bf16 at 2%: 0.02 * (4 + 2) / 2 + header */
    CHECK_OK(cost_choose(&l, &d, &ch));
    CHECK(ch.delta);
    CHECK(NEAR(ch.full_s, full.predicted_s));
    CHECK(ch.predicted_s < 0.5 * ch.full_s);
    CHECK(strchr(ch.name, '+') == NULL); /* the runtime plan name, without +delta */

    l.link[COST_FUSED_GPU] = (cost_link_t){.present = 1, .bw = 2000 * GB};
    cost_deploy_init(&d, 1, 1, 1, 1, 10000000000ULL, 64ULL << 20, COST_MEM_GPU, COST_NET_LOCAL);
    d.delta = COST_DELTA_AUTO;
    d.delta_wire = 0.0634;
    d.delta_base_copy = 1;
    CHECK_OK(cost_choose(&l, &d, &ch));
    CHECK(!ch.delta);
}

static void test_refusals(void)
{
    cost_links_t l = links_of(40);
    cost_deploy_t d;
    cost_plan_t p[COST_MAX_PLANS];
    size_t n = 0;
    cost_deploy_init(&d, 1, 1, 1, 1, 1ULL << 30, 64ULL << 20, COST_MEM_GPU, COST_NET_PUT);
    d.delta = COST_DELTA_ON;
    CHECK_FAILS(cost_predict(&l, &d, p, COST_MAX_PLANS, &n), WSYNC_ERR_INVALID, "--delta-density");
    d.delta_wire = 0.1;
    l.link[COST_DELTA_ENCODE_GPU].present = 0;
    CHECK_FAILS(cost_predict(&l, &d, p, COST_MAX_PLANS, &n), WSYNC_ERR_INVALID, "delta_encode_gpu");
}

/* Full pulls are costed as before: delta off gives the same plans, none
 * marked delta. */
static void test_off_is_unchanged(void)
{
    cost_links_t l = links_of(40);
    cost_deploy_t d;
    cost_plan_t a[COST_MAX_PLANS], b[COST_MAX_PLANS];
    size_t na = 0, nb = 0;
    cost_deploy_init(&d, 8, 1, 4, 8, 1ULL << 34, 64ULL << 20, COST_MEM_GPU, COST_NET_PUT);
    CHECK_OK(cost_predict(&l, &d, a, COST_MAX_PLANS, &na));
    d.delta_wire = 0.1; /* ignored while delta is off */
    CHECK_OK(cost_predict(&l, &d, b, COST_MAX_PLANS, &nb));
    CHECK_EQ(na, nb);
    for (size_t i = 0; i < na && i < nb; i++) {
        CHECK(!a[i].delta);
        CHECK(NEAR(a[i].predicted_s, b[i].predicted_s));
    }
}

int main(void)
{
    RUN(test_delta_stages_and_bytes);
    RUN(test_auto_picks_the_faster);
    RUN(test_refusals);
    RUN(test_off_is_unchanged);
    TEST_EXIT();
}
