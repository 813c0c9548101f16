/* model_test.c: the cost model's arithmetic on hand-made links: one load
 * reduces to alpha + bytes / beta; fan-out and fan-in caps; the share of a
 * fan-out above one link when several senders fan out at once; serial
 * stages add up and pipelined ones overlap; relays beat direct exactly
 * when the trainers' adapters are the bottleneck. */
#include <math.h>

#include "common/cost/cost.h"
#include "common/cost/cost_internal.h"
#include "tests/test.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (fabs(b) + 1e-12))

static cost_links_t links_of(double alpha_us, double gbps)
{
    cost_links_t l;
    memset(&l, 0, sizeof(l));
    l.host_nics = 1;
    l.link[COST_NIC_PUT] = (cost_link_t){.present = 1, .alpha_s = alpha_us * 1e-6, .bw = gbps * 1e9};
    l.link[COST_DIGEST_GPU] = (cost_link_t){.present = 1, .bw = 1e15};
    l.link[COST_WINDOW] = (cost_link_t){.present = 1, .bw = 1e15};
    return l;
}

static void test_single_link_is_alpha_plus_bytes_over_beta(void)
{
    cost_links_t l = links_of(50, 10);
    cost_plan_t p;
    cost_stage_t *s;
    memset(&p, 0, sizeof(p));
    s = cost_plan_stage(&p, "cross", 0, 1);
    CHECK_OK(cost_stage_add(s, &l, COST_NIC_PUT, "one link", 1e9, 3, 10e9));
    cost_plan_finish(&p);
    CHECK(NEAR(p.predicted_s, 3 * 50e-6 + 0.1));
    CHECK_STR(p.bottleneck, "cross: one link");
}

static void test_fan_caps(void)
{
    cost_link_t l = {.present = 1, .bw = 20e9, .fan_out_bw = 80e9, .fan_in_bw = 22e9};
    CHECK(NEAR(cost_send_rate(&l, 1, 1), 20e9));
    CHECK(NEAR(cost_send_rate(&l, 8, 1), 80e9)); /* alone: the whole fan-out */
    CHECK(NEAR(cost_send_rate(&l, 8, 4), 35e9)); /* 20 + 60 / 4 */
    CHECK(NEAR(cost_recv_rate(&l, 1), 20e9));
    CHECK(NEAR(cost_recv_rate(&l, 5), 22e9));
    l.fan_in_bw = 0;
    CHECK(NEAR(cost_recv_rate(&l, 5), 20e9)); /* no cap given: the link's rate */
}

static void test_serial_add_pipelined_overlap(void)
{
    cost_links_t l = links_of(0, 1);
    cost_plan_t p;
    cost_stage_t *a, *b, *c;
    memset(&p, 0, sizeof(p));
    a = cost_plan_stage(&p, "a", 0, 1);
    b = cost_plan_stage(&p, "b", 1, 10);
    c = cost_plan_stage(&p, "c", 1, 10);
    CHECK_OK(cost_stage_add(a, &l, COST_NIC_PUT, "a", 1e9, 0, 1e9)); /* 1 s */
    CHECK_OK(cost_stage_add(b, &l, COST_NIC_PUT, "b", 4e9, 0, 1e9)); /* 4 s in 10 units */
    CHECK_OK(cost_stage_add(c, &l, COST_NIC_PUT, "c", 2e9, 0, 1e9)); /* 2 s in 10 units */
    cost_plan_finish(&p);
    CHECK(NEAR(p.predicted_s, 1 + 4 + 0.2)); /* serial + slowest + one unit of the other */
    c->hops = 3;
    cost_plan_finish(&p);
    CHECK(NEAR(p.predicted_s, 1 + 4 + 0.6));
}

static void test_missing_class_names_it(void)
{
    cost_links_t l = links_of(0, 1);
    cost_plan_t p;
    memset(&p, 0, sizeof(p));
    CHECK_FAILS(cost_stage_add(cost_plan_stage(&p, "x", 0, 1), &l, COST_TCP, "trainer rank's adapter", 1, 1, 1),
                WSYNC_ERR_INVALID, "no 'tcp' link class");
}

/* One trainer host (one adapter) and 8 whole-image nodes: direct sends the
 * image 8 times through the trainer's adapter, a chain once; with one node
 * there is nothing to relay. */
static void test_relay_wins_when_trainers_are_the_bottleneck(void)
{
    cost_links_t l = links_of(10, 10);
    cost_deploy_t d;
    cost_plan_t plans[COST_MAX_PLANS];
    cost_choice_t ch;
    size_t n = 0, i;
    cost_deploy_init(&d, 1, 1, 8, 1, 1ull << 30, 64ull << 20, COST_MEM_GPU, COST_NET_PUT);
    CHECK_OK(cost_predict(&l, &d, plans, COST_MAX_PLANS, &n));
    CHECK(n >= 4);
    CHECK_STR(plans[0].name, "direct");
    CHECK(NEAR(plans[0].stages[1].seconds, 8 * (16 * 10e-6 + (double)(1ull << 30) / 10e9)));
    CHECK_OK(cost_choose(&l, &d, &ch));
    CHECK_STR(ch.name, "relay:1");
    for (i = 0; i < n; i++)
        CHECK(plans[i].predicted_s > 0);
    cost_deploy_init(&d, 1, 1, 1, 1, 1ull << 30, 64ull << 20, COST_MEM_GPU, COST_NET_PUT);
    CHECK_OK(cost_predict(&l, &d, plans, COST_MAX_PLANS, &n));
    CHECK_EQ(n, 1);
    CHECK_OK(cost_choose(&l, &d, &ch));
    CHECK_STR(ch.name, "direct");
}

static void test_bad_deployment_refused(void)
{
    cost_links_t l = links_of(0, 1);
    cost_deploy_t d;
    cost_plan_t plans[COST_MAX_PLANS];
    size_t n;
    cost_deploy_init(&d, 2, 3, 1, 1, 1 << 20, 1 << 20, COST_MEM_GPU, COST_NET_PUT);
    CHECK_FAILS(cost_predict(&l, &d, plans, COST_MAX_PLANS, &n), WSYNC_ERR_INVALID, "2 trainer ranks on 3 hosts");
}

/* Colocated on one GPU: the trainer's digest, then every rank's copy of the
 * whole image through the one GPU's memory (fused with its digest: no
 * verification pass of its own). */
static void test_colocated_ranks_share_the_gpu(void)
{
    cost_links_t l = links_of(0, 1);
    cost_deploy_t d;
    cost_plan_t p[COST_MAX_PLANS];
    size_t n = 0;
    l.link[COST_LOCAL] = (cost_link_t){.present = 1, .bw = 2e12};
    l.link[COST_DIGEST_GPU].bw = 4e12;
    cost_deploy_init(&d, 1, 1, 1, 2, 8000000000ULL, 64ULL << 20, COST_MEM_GPU, COST_NET_LOCAL);
    d.rank_land_bytes = d.rank_hold_bytes; /* as plan --predict sets it: each rank lands all it holds */
    d.rank_copy_bytes = 0;
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK_EQ((int)n, 1);
    /* 8 GB digested at 4 TB/s, then 2 x 8 GB copied at 2 TB/s */
    CHECK(NEAR(p[0].predicted_s, 2e-3 + 8e-3));
    CHECK_STR(p[0].bottleneck, "cross: the GPU's copies into every rank");
}

int main(void)
{
    RUN(test_single_link_is_alpha_plus_bytes_over_beta);
    RUN(test_fan_caps);
    RUN(test_serial_add_pipelined_overlap);
    RUN(test_missing_class_names_it);
    RUN(test_relay_wins_when_trainers_are_the_bottleneck);
    RUN(test_bad_deployment_refused);
    RUN(test_colocated_ranks_share_the_gpu);
    TEST_EXIT();
}
