/* relay_tree_test.c: who is whose parent under relay:F (engine_side/relay_tree.c),
 * checked against the rule written out independently here (positions in a
 * sorted order, parent (i - 1) / F), for any order of the input; a chain for
 * F = 1; at most F children each; holders first, so a late joiner hangs below
 * a node holding the version; no cycles when every node sees a different
 * (random) set of holders. Also the plan setting's text (common/base/plan_spec.c)
 * and auto's resolution (engine_side/plan_choice.c: the cost model's choice). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/plan_spec.h"
#include "engine_side/plan_choice.h"
#include "engine_side/relay_tree.h"
#include "tests/test.h"

#define N 9

static void make(relay_node_t *nodes, int n, const int *holds)
{
    int i;
    for (i = 0; i < n; i++) {
        memset(&nodes[i], 0, sizeof(nodes[i]));
        snprintf(nodes[i].id, sizeof(nodes[i].id), "node-%c", 'a' + i);
        snprintf(nodes[i].addr, sizeof(nodes[i].addr), "10.0.0.%d:900%d", i + 1, i);
        nodes[i].holds = holds ? holds[i] : 0;
    }
}

/* The rule, independently: ids of holders (sorted) then of the others
 * (sorted); 'a' + i sorts as i. */
static int expected_parent(const int *holds, int n, int self, int fanout)
{
    int order[N], k = 0, i, me = -1;
    for (i = 0; i < n; i++)
        if (holds[i] && i != self)
            order[k++] = i;
    for (i = 0; i < n; i++)
        if (!holds[i] || i == self)
            order[k++] = i;
    for (i = 0; i < n; i++)
        if (order[i] == self)
            me = i;
    return me <= 0 ? -1 : order[(me - 1) / fanout];
}

static void shuffle(relay_node_t *nodes, int n, unsigned *seed)
{
    int i;
    for (i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(seed) % (unsigned)(i + 1));
        relay_node_t t = nodes[i];
        nodes[i] = nodes[j];
        nodes[j] = t;
    }
}

/* The parent's id letter index, or -1. */
static int parent_of(const relay_node_t *nodes, int n, int self, int fanout)
{
    char id[16];
    int p;
    snprintf(id, sizeof(id), "node-%c", 'a' + self);
    p = relay_tree_parent(nodes, (size_t)n, id, fanout);
    return p < 0 ? -1 : nodes[p].id[5] - 'a';
}

static void matches_the_rule_in_any_input_order(void)
{
    unsigned seed = 7;
    int round;
    for (round = 0; round < 300; round++) {
        relay_node_t nodes[N];
        int holds[N], i, n = 1 + (int)(rand_r(&seed) % N), fanout = 1 + (int)(rand_r(&seed) % 4);
        for (i = 0; i < n; i++)
            holds[i] = rand_r(&seed) % 3 == 0;
        make(nodes, n, holds);
        shuffle(nodes, n, &seed);
        for (i = 0; i < n; i++)
            CHECK_EQ(parent_of(nodes, n, i, fanout), expected_parent(holds, n, i, fanout));
    }
}

static void relay_1_is_a_chain_and_fanout_bounds_children(void)
{
    relay_node_t nodes[N];
    int children[N] = {0}, i, f;
    make(nodes, N, NULL);
    CHECK_EQ(parent_of(nodes, N, 0, 1), -1); /* the first pulls from the trainers */
    for (i = 1; i < N; i++)
        CHECK_EQ(parent_of(nodes, N, i, 1), i - 1);
    for (f = 2; f <= 4; f++) {
        memset(children, 0, sizeof(children));
        for (i = 0; i < N; i++) {
            int p = parent_of(nodes, N, i, f);
            if (p >= 0)
                children[p]++;
        }
        for (i = 0; i < N; i++)
            CHECK(children[i] <= f);
        CHECK_EQ(children[0], f);
    }
    CHECK_EQ(relay_tree_parent(nodes, N, "not-a-relay", 2), -1);
    CHECK_EQ(relay_tree_parent(nodes, 0, "node-a", 2), -1);
}

static void late_joiner_hangs_below_a_holder(void)
{
    relay_node_t nodes[4];
    int holds[4] = {0, 1, 1, 1}; /* node-a joins late: b, c, d hold the version */
    make(nodes, 4, holds);
    CHECK_EQ(parent_of(nodes, 4, 0, 1), 3); /* the last holder in the chain */
    CHECK_EQ(parent_of(nodes, 4, 0, 2), 2); /* position 3 of b c d a: parent at (3-1)/2 = 1, node-c */
}

/* Every node sees its own random set of holders; a holder pulls nothing.
 * Following parents from any pulling node must end at a holder or at a
 * node that pulls from the trainers, never loop. */
static void views_that_differ_make_no_cycle(void)
{
    unsigned seed = 11;
    int round;
    for (round = 0; round < 500; round++) {
        int truly[N], parent[N], i, fanout = 1 + (int)(rand_r(&seed) % 3);
        for (i = 0; i < N; i++)
            truly[i] = rand_r(&seed) % 4 == 0;
        for (i = 0; i < N; i++) {
            relay_node_t nodes[N];
            int view[N], k;
            for (k = 0; k < N; k++) /* a stale view: some holders not seen yet */
                view[k] = truly[k] && rand_r(&seed) % 2;
            make(nodes, N, view);
            parent[i] = truly[i] ? -1 : parent_of(nodes, N, i, fanout);
        }
        for (i = 0; i < N; i++) {
            int at = i, steps = 0;
            while (at >= 0 && !truly[at] && steps <= N) {
                at = parent[at];
                steps++;
            }
            CHECK(steps <= N);
        }
    }
}

static void plan_setting_text(void)
{
    wsync_plan_spec_t s;
    plan_choice_input_t yes = {.relay_capable = 1}, no = {.relay_capable = 0};
    char buf[32];
    CHECK_OK(wsync_plan_spec_parse("relay:3", &s));
    CHECK_EQ(s.kind, WSYNC_PLAN_RELAY);
    CHECK_EQ(s.fanout, 3);
    CHECK_STR(wsync_plan_spec_name(&s, buf, sizeof(buf)), "relay:3");
    CHECK_EQ(plan_choice_resolve(&s, &yes).kind, WSYNC_PLAN_RELAY);
    CHECK_EQ(plan_choice_resolve(&s, &no).kind, WSYNC_PLAN_DIRECT); /* a node with a target pulls direct */
    CHECK_OK(wsync_plan_spec_parse("direct", &s));
    CHECK_EQ(s.kind, WSYNC_PLAN_DIRECT);
    CHECK_OK(wsync_plan_spec_parse("auto", &s));
    CHECK_EQ(s.kind, WSYNC_PLAN_AUTO);
    CHECK(plan_choice_resolve(&s, &yes).kind != WSYNC_PLAN_AUTO); /* auto always names a plan */
    CHECK_FAILS(wsync_plan_spec_parse("relay:0", &s), WSYNC_ERR_INVALID, "relay:F");
    CHECK_FAILS(wsync_plan_spec_parse("relay:65", &s), WSYNC_ERR_INVALID, "1..64");
    CHECK_FAILS(wsync_plan_spec_parse("relay:2x", &s), WSYNC_ERR_INVALID, "'relay:2x'");
    CHECK_FAILS(wsync_plan_spec_parse("chain", &s), WSYNC_ERR_INVALID, "auto, direct, relay:F");
}

/* auto is the cost model's choice (checked against cost_choose itself on a
 * links file of the repository), and direct without links or on a node that
 * cannot relay. */
static void auto_is_the_cost_models_choice(void)
{
    const char *root = getenv("WSYNC_ROOT");
    char path[1024], name[32];
    cost_links_t links;
    cost_deploy_t d;
    cost_choice_t ch;
    wsync_plan_spec_t asked = {.kind = WSYNC_PLAN_AUTO}, s;
    plan_choice_input_t in = {.relay_capable = 1, .links = &links, .deploy = &d};
    snprintf(path, sizeof(path), "%s/configs/links/h200-1gpu.json", root ? root : ".");
    CHECK_OK(cost_links_load(path, &links));
    cost_deploy_init(&d, 2, 1, 6, 1, 1ULL << 30, 64ULL << 20, COST_MEM_HOST, COST_NET_TCP);
    CHECK_OK(cost_choose(&links, &d, &ch));
    s = plan_choice_resolve(&asked, &in);
    CHECK_STR(wsync_plan_spec_name(&s, name, sizeof(name)), ch.name);
    in.relay_capable = 0;
    CHECK_EQ(plan_choice_resolve(&asked, &in).kind, WSYNC_PLAN_DIRECT);
    in = (plan_choice_input_t){.relay_capable = 1};
    CHECK_EQ(plan_choice_resolve(&asked, &in).kind, WSYNC_PLAN_DIRECT);
}

/* delta=auto: deltas over a thin tcp link, full over a fast one (encode and
 * apply at 1 GB/s cost more than the bytes they save), each figure the
 * cost model's own; a links file without the delta rates asks (today's
 * rule) with both figures 0. */
static void delta_auto_is_the_cost_models_choice(void)
{
    cost_links_t links;
    cost_deploy_t d;
    cost_choice_t ch;
    double delta_s, full_s;
    memset(&links, 0, sizeof(links));
    links.host_nics = 1;
    links.link[COST_TCP] = (cost_link_t){.present = 1, .bw = 50e9, .alpha_s = 1e-5};
    links.link[COST_HOST_MEMCPY] = (cost_link_t){.present = 1, .bw = 20e9};
    links.link[COST_DIGEST_HOST] = (cost_link_t){.present = 1, .bw = 20e9};
    links.link[COST_DELTA_ENCODE_HOST] = (cost_link_t){.present = 1, .bw = 1e9};
    links.link[COST_DELTA_APPLY_HOST] = (cost_link_t){.present = 1, .bw = 1e9};
    cost_deploy_init(&d, 2, 1, 1, 2, 64ULL << 20, 1ULL << 20, COST_MEM_HOST, COST_NET_TCP);
    d.delta_wire = 0.06;
    d.delta_base_copy = 1;
    CHECK_EQ(plan_choice_delta(&links, &d, &delta_s, &full_s), 0);
    CHECK(delta_s > full_s && full_s > 0);
    d.delta = COST_DELTA_OFF;
    CHECK_OK(cost_choose(&links, &d, &ch));
    CHECK(fabs(ch.predicted_s - full_s) <= 1e-12);
    links.link[COST_TCP].bw = 50e6;
    CHECK_EQ(plan_choice_delta(&links, &d, &delta_s, &full_s), 1);
    CHECK(delta_s < full_s && delta_s > 0);
    d.delta = COST_DELTA_ON;
    CHECK_OK(cost_choose(&links, &d, &ch));
    CHECK(fabs(ch.predicted_s - delta_s) <= 1e-12);
    links.link[COST_DELTA_APPLY_HOST].present = 0;
    CHECK_EQ(plan_choice_delta(&links, &d, &delta_s, &full_s), 1);
    CHECK(delta_s == 0 && full_s == 0);
}

/* plan auto counting deltas (a node holding a version: relays serve them):
 * the cost model's choice over full and delta plans; a links file without
 * the delta rates costs full pulls (not direct for want of a choice). */
static void auto_counts_deltas(void)
{
    cost_links_t links;
    cost_deploy_t d, full;
    cost_choice_t ch;
    wsync_plan_spec_t asked = {.kind = WSYNC_PLAN_AUTO}, s;
    plan_choice_input_t in = {.relay_capable = 1, .links = &links, .deploy = &d};
    char name[32];
    memset(&links, 0, sizeof(links));
    links.host_nics = 1;
    links.link[COST_TCP] = (cost_link_t){.present = 1, .bw = 50e6, .alpha_s = 1e-5};
    links.link[COST_TCP_ENGINE] = (cost_link_t){.present = 1, .bw = 50e6, .alpha_s = 1e-5};
    links.link[COST_HOST_MEMCPY] = (cost_link_t){.present = 1, .bw = 20e9};
    links.link[COST_DIGEST_HOST] = (cost_link_t){.present = 1, .bw = 20e9};
    links.link[COST_DELTA_ENCODE_HOST] = (cost_link_t){.present = 1, .bw = 1e9};
    links.link[COST_DELTA_APPLY_HOST] = (cost_link_t){.present = 1, .bw = 1e9};
    cost_deploy_init(&d, 2, 1, 4, 1, 64ULL << 20, 1ULL << 20, COST_MEM_HOST, COST_NET_TCP);
    d.delta = COST_DELTA_AUTO;
    d.delta_wire = 0.06;
    d.delta_base_copy = 1;
    CHECK_OK(cost_choose(&links, &d, &ch));
    CHECK(ch.delta); /* 50 MB/s: deltas win */
    s = plan_choice_resolve(&asked, &in);
    CHECK_STR(wsync_plan_spec_name(&s, name, sizeof(name)), ch.name);
    links.link[COST_DELTA_APPLY_HOST].present = 0;
    full = d;
    full.delta = COST_DELTA_OFF;
    CHECK_OK(cost_choose(&links, &full, &ch));
    CHECK(strcmp(ch.name, "direct") != 0); /* 4 nodes on one thin uplink: a relay plan */
    s = plan_choice_resolve(&asked, &in);
    CHECK_STR(wsync_plan_spec_name(&s, name, sizeof(name)), ch.name);
}

int main(void)
{
    RUN(matches_the_rule_in_any_input_order);
    RUN(relay_1_is_a_chain_and_fanout_bounds_children);
    RUN(late_joiner_hangs_below_a_holder);
    RUN(views_that_differ_make_no_cycle);
    RUN(plan_setting_text);
    RUN(auto_is_the_cost_models_choice);
    RUN(delta_auto_is_the_cost_models_choice);
    RUN(auto_counts_deltas);
    TEST_EXIT();
}
