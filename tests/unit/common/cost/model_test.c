/* model_test.c: the cost model's arithmetic on hand-made links: one load
 * reduces to alpha + bytes / beta; fan-out and fan-in caps; the share of a
 * fan-out above one link when several senders fan out at once; serial
 * stages add up and pipelined ones overlap; a wave adds the smaller unit;
 * relays beat direct exactly when the trainers' adapters are the
 * bottleneck; tcp classes per host role; one GPU's stages add up. */
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

/* A stage completing its units 4 at a time: the next stage gets them a wave
 * late, 3 of the smaller unit. */
static void test_wave_adds_the_smaller_unit(void)
{
    cost_links_t l = links_of(0, 1);
    cost_plan_t p;
    cost_stage_t *b, *c;
    memset(&p, 0, sizeof(p));
    b = cost_plan_stage(&p, "b", 1, 10);
    c = cost_plan_stage(&p, "c", 1, 10);
    CHECK_OK(cost_stage_add(b, &l, COST_NIC_PUT, "b", 4e9, 0, 1e9)); /* unit 0.4 s */
    CHECK_OK(cost_stage_add(c, &l, COST_NIC_PUT, "c", 2e9, 0, 1e9)); /* unit 0.2 s */
    b->wave = 4;
    cost_plan_finish(&p);
    CHECK(NEAR(p.predicted_s, 4 + 0.2 + 3 * 0.2));
    c->loads[0].seconds = 8; /* the next stage the slower: 3 of the first's units */
    cost_plan_finish(&p);
    CHECK(NEAR(p.predicted_s, 8 + 0.4 + 3 * 0.4));
}

/* Host memory over tcp, the trainer host's uplink (tcp_trainer) slower than
 * the engine hosts' links (tcp_engine), no plain tcp class: direct is the
 * trainer uplink carrying the image once per node; a chain's crossing waits
 * for waves of trainers x tcp_conns chunks, its hops run at the engines'
 * rate. Without tcp_engine the plain tcp class stands in. */
static void test_tcp_classes_per_host_role(void)
{
    cost_links_t l;
    cost_deploy_t d;
    cost_plan_t p[COST_MAX_PLANS];
    size_t n = 0;
    double S = 32.0 * (1 << 20), chunk = 2 << 20, te = 1e8, tt = 2.5e7;
    memset(&l, 0, sizeof(l));
    l.link[COST_TCP_TRAINER] = (cost_link_t){.present = 1, .bw = tt};
    l.link[COST_TCP_ENGINE] = (cost_link_t){.present = 1, .bw = te};
    l.link[COST_DIGEST_HOST] = (cost_link_t){.present = 1, .bw = 1e15};
    cost_deploy_init(&d, 2, 1, 6, 1, (uint64_t)S, (uint64_t)chunk, COST_MEM_HOST, COST_NET_TCP);
    d.tcp_conns = 4;
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK_STR(p[0].name, "direct");
    CHECK_EQ(p[0].stages[1].loads[0].cls, COST_TCP_TRAINER);
    CHECK(NEAR(p[0].stages[1].seconds, 6 * S / 2 / (tt / 2))); /* each rank its half, sharing the uplink */
    CHECK_STR(p[1].name, "relay:1");
    CHECK_EQ(p[1].stages[1].wave, 8);
    CHECK_EQ(p[1].stages[2].loads[0].cls, COST_TCP_ENGINE);
    /* the digest, then cross S / tt (the slowest), 7 relay units (the smaller) for the wave, 5 hops, a verify unit */
    CHECK(NEAR(p[1].predicted_s, S / 2 / 1e15 + S / tt + 7 * chunk / te + 5 * chunk / te + chunk / 1e15));
    l.link[COST_TCP_ENGINE].present = 0;
    CHECK_FAILS(cost_predict(&l, &d, p, COST_MAX_PLANS, &n), WSYNC_ERR_INVALID, "no 'tcp' link class");
    l.link[COST_TCP] = (cost_link_t){.present = 1, .bw = te};
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK_EQ(p[1].stages[2].loads[0].cls, COST_TCP);
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
    /* With the fused copy's own rate and a version's fixed cost measured: those instead */
    l.link[COST_FUSED_GPU] = (cost_link_t){.present = 1, .bw = 1.6e12};
    l.link[COST_VERSION] = (cost_link_t){.present = 1, .alpha_s = 1e-3};
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK(NEAR(p[0].predicted_s, 2e-3 + 1e-3 + 10e-3));
    CHECK_STR(p[0].bottleneck, "cross: the GPU's copies+digests into every rank");
}

/* Targets on one GPU (TP=2, two trainer ranks): every pass shares the GPU,
 * so digest, fixed cost, slot copy, pack, landing, the trainers' segment
 * digests and the ranks' verification add up. */
static void test_targets_on_one_gpu_add_up(void)
{
    cost_links_t l = links_of(0, 1);
    cost_deploy_t d;
    cost_plan_t p[COST_MAX_PLANS];
    size_t n = 0;
    int i;
    double sum = 0;
    l.link[COST_LOCAL] = (cost_link_t){.present = 1, .bw = 2e12};
    l.link[COST_PACK_GPU] = (cost_link_t){.present = 1, .bw = 1.6e12};
    l.link[COST_DIGEST_GPU].bw = 4e12;
    l.link[COST_VERSION] = (cost_link_t){.present = 1, .alpha_s = 1e-3};
    cost_deploy_init(&d, 2, 1, 1, 2, 8000000000ULL, 64ULL << 20, COST_MEM_GPU, COST_NET_LOCAL);
    d.rank_land_bytes = d.rank_hold_bytes = 4000000000ULL;
    d.rank_copy_bytes = 0;
    d.pack_bytes = 8000000000ULL;
    d.slot_copy = d.verify_after = 1;
    CHECK_OK(cost_predict(&l, &d, p, COST_MAX_PLANS, &n));
    CHECK_EQ(p[0].nstages, 7);
    for (i = 0; i < p[0].nstages; i++)
        sum += p[0].stages[i].seconds;
    CHECK(NEAR(sum, 2e-3 + 1e-3 + 4e-3 + 5e-3 + 4e-3 + 2e-3 + 2e-3));
    CHECK(NEAR(p[0].predicted_s, sum));
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
    RUN(test_wave_adds_the_smaller_unit);
    RUN(test_tcp_classes_per_host_role);
    RUN(test_targets_on_one_gpu_add_up);
    TEST_EXIT();
}
