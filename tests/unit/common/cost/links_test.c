/* links_test.c: the links file reader: the shipped files parse, a file
 * written by cost_links_to_json reads back the same, and bad files are
 * refused naming the file, the key and what is accepted. */
#include <math.h>

#include "common/cost/cost.h"
#include "tests/test.h"

static wsync_status_t parse(const char *text, cost_links_t *l)
{
    return cost_links_parse(text, strlen(text), "links file x.json", l);
}

static void test_shipped_files_parse(void)
{
    const char *root = getenv("WSYNC_ROOT");
    static const char *files[] = {"h20-roce-2x8.json", "h200-1gpu.json", "h200-calibrated.json"};
    char path[1024];
    cost_links_t l;
    size_t i;
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/configs/links/%s", root ? root : ".", files[i]);
        CHECK_OK(cost_links_load(path, &l));
    }
    snprintf(path, sizeof(path), "%s/configs/links/%s", root ? root : ".", files[1]);
    CHECK_OK(cost_links_load(path, &l)); /* the one-H200 figures of bench/RESULTS.md */
    CHECK(l.link[COST_DIGEST_GPU].present && fabs(l.link[COST_DIGEST_GPU].bw - 4362.8e9) < 1e6);
    CHECK(!l.link[COST_GPU_PEER].present);
}

static void test_round_trip(void)
{
    cost_links_t a, b;
    json_t *j;
    char *text;
    CHECK_OK(
        parse("{\"machine\": \"m\", \"host\": {\"gpus\": 2, \"nics\": 1}, \"links\": {\"nic_put\": "
              "{\"alpha_us\": 5, \"gbps\": 12.5, \"fan_in_gbps\": 20, \"min_gbps\": 11, \"max_gbps\": 13, "
              "\"reps\": 5}, \"control\": {\"alpha_us\": 100}, \"tcp\": {\"present\": false, \"note\": \"x\"}}}",
              &a));
    j = cost_links_to_json(&a);
    text = json_dumps(j, 0);
    CHECK_OK(parse(text, &b));
    CHECK(b.link[COST_NIC_PUT].present && fabs(b.link[COST_NIC_PUT].bw - 12.5e9) < 1);
    CHECK(fabs(b.link[COST_NIC_PUT].alpha_s - 5e-6) < 1e-12 && b.link[COST_NIC_PUT].reps == 5);
    CHECK(fabs(b.link[COST_NIC_PUT].fan_in_bw - 20e9) < 1 && fabs(b.link[COST_NIC_PUT].bw_min - 11e9) < 1);
    CHECK(b.link[COST_CONTROL].present && !b.link[COST_TCP].present && b.host_gpus == 2);
    free(text);
    json_decref(j);
    /* The host-role tcp classes, the fused copy and a version's fixed cost read back too */
    CHECK_OK(parse("{\"links\": {\"tcp_trainer\": {\"gbps\": 0.03}, \"tcp_engine\": {\"gbps\": 0.11, "
                   "\"alpha_us\": 4}, \"copy_digest_gpu\": {\"gbps\": 1808}, \"version\": {\"alpha_us\": 1163}}}",
                   &a));
    j = cost_links_to_json(&a);
    text = json_dumps(j, 0);
    CHECK_OK(parse(text, &b));
    CHECK(fabs(b.link[COST_TCP_TRAINER].bw - 0.03e9) < 1 && fabs(b.link[COST_TCP_ENGINE].bw - 0.11e9) < 1);
    CHECK(fabs(b.link[COST_FUSED_GPU].bw - 1808e9) < 1e3 && fabs(b.link[COST_VERSION].alpha_s - 1163e-6) < 1e-12);
    free(text);
    json_decref(j);
}

static void test_bad_files_named(void)
{
    cost_links_t l;
    CHECK_FAILS(parse("{", &l), WSYNC_ERR_FORMAT, "links file x.json: not JSON");
    CHECK_FAILS(parse("{\"links\": {\"nvlink\": {}}}", &l), WSYNC_ERR_FORMAT,
                "unknown link class 'nvlink' (accepted");
    CHECK_FAILS(parse("{\"links\": {\"tcp\": {\"gbps\": \"fast\"}}}", &l), WSYNC_ERR_FORMAT,
                "links.tcp.gbps: expected a number");
    CHECK_FAILS(parse("{\"links\": {\"tcp\": {\"gbps\": 1, \"speed\": 2}}}", &l), WSYNC_ERR_FORMAT,
                "links.tcp: unknown key 'speed'");
    CHECK_FAILS(parse("{\"links\": {\"tcp\": {\"alpha_us\": 3}}}", &l), WSYNC_ERR_FORMAT,
                "links.tcp: gbps is required");
    CHECK_FAILS(parse("{\"links\": {\"control\": {}}}", &l), WSYNC_ERR_FORMAT, "links.control: alpha_us");
    CHECK_FAILS(parse("{\"links\": {\"version\": {\"gbps\": 1}}}", &l), WSYNC_ERR_FORMAT,
                "links.version: alpha_us (the fixed cost of a version) is required");
    CHECK_FAILS(parse("{\"links\": {\"tcp_trainer\": {}}}", &l), WSYNC_ERR_FORMAT,
                "links.tcp_trainer: gbps is required");
    CHECK_FAILS(parse("{\"host\": {\"gpus\": -1}, \"links\": {}}", &l), WSYNC_ERR_FORMAT, "host.gpus");
    CHECK_FAILS(parse("{\"machine\": \"m\"}", &l), WSYNC_ERR_FORMAT, "no \"links\" object");
    CHECK_FAILS(parse("{\"links\": {}, \"extra\": 1}", &l), WSYNC_ERR_FORMAT, "unknown key 'extra'");
    CHECK_FAILS(cost_links_load("/nonexistent/x.json", &l), WSYNC_ERR_IO, "links file /nonexistent/x.json");
}

int main(void)
{
    RUN(test_shipped_files_parse);
    RUN(test_round_trip);
    RUN(test_bad_files_named);
    TEST_EXIT();
}
