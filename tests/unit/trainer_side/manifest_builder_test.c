/* manifest_builder_test.c: the public manifest builder (wsync_publisher.h):
 * offsets on the 256-byte grid, JSON the manifest parser accepts, refusals
 * naming the tensor, and a version published from a built manifest pulled
 * with every tensor where the builder said. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/model/manifest.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

static void test_offsets_sizes_and_json(void)
{
    wsync_manifest_builder_t *b = NULL;
    const int64_t s1[2] = {3, 5}, s2[1] = {7};
    uint64_t off = 99, size = 99;
    wsync_manifest_t *m = NULL;
    json_t *j = NULL;
    json_error_t jerr;
    char *text = NULL;

    CHECK_OK(wsync_manifest_builder_create(&b));
    CHECK_OK(wsync_manifest_builder_add(b, "a.weight", "F32", 2, s1, &off, &size));
    CHECK_EQ(off, 0);
    CHECK_EQ(size, 60);
    CHECK_OK(wsync_manifest_builder_add(b, "b.bias", "BF16", 1, s2, &off, &size));
    CHECK_EQ(off, 256);
    CHECK_EQ(size, 14);
    CHECK_OK(wsync_manifest_builder_add(b, "step", "I64", 0, NULL, &off, NULL));
    CHECK_EQ(off, 512);
    CHECK_EQ(wsync_manifest_builder_image_size(b), 768);
    CHECK_OK(wsync_manifest_builder_json(b, &text));
    j = text ? json_loads(text, 0, &jerr) : NULL;
    CHECK(j != NULL);
    if (j) {
        CHECK_OK(wsync_manifest_from_json(j, &m));
        if (m) {
            CHECK_EQ(m->ntensors, 3);
            CHECK_STR(m->tensors[1].name, "b.bias");
            CHECK_EQ(m->tensors[2].offset, 512);
        }
    }
    wsync_manifest_free(m);
    json_decref(j);
    free(text);
    wsync_manifest_builder_destroy(b);
}

static void test_refusals_name_the_tensor(void)
{
    wsync_manifest_builder_t *b = NULL;
    const int64_t ok[1] = {4}, neg[2] = {4, -1};
    CHECK_OK(wsync_manifest_builder_create(&b));
    CHECK_OK(wsync_manifest_builder_add(b, "x", "F16", 1, ok, NULL, NULL));
    CHECK_FAILS(wsync_manifest_builder_add(b, "x", "F16", 1, ok, NULL, NULL), WSYNC_ERR_INVALID, "'x'");
    CHECK_FAILS(wsync_manifest_builder_add(b, "y", "FLOAT", 1, ok, NULL, NULL), WSYNC_ERR_INVALID, "'y'");
    CHECK_FAILS(wsync_manifest_builder_add(b, "z", "F32", 2, neg, NULL, NULL), WSYNC_ERR_INVALID, "'z'");
    CHECK_FAILS(wsync_manifest_builder_add(b, "w", "F32", WSYNC_MAX_DIMS + 1, ok, NULL, NULL), WSYNC_ERR_INVALID,
                "'w'");
    CHECK_EQ(wsync_manifest_builder_image_size(b), 256); /* the refusals added nothing */
    wsync_manifest_builder_destroy(b);
    wsync_manifest_builder_destroy(NULL);
}

/* A trainer rank publishing two tensors described with the builder; the
 * engine finds each at the builder's offset with the bytes written there. */
static void test_published_and_pulled(void)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_control_server_t *server = NULL;
    wsync_publisher_t *pub = NULL;
    wsync_receiver_t *recv = NULL;
    wsync_manifest_builder_t *b = NULL;
    const int64_t s1[2] = {64, 32}, s2[1] = {100};
    uint64_t off1 = 0, off2 = 0, size1 = 0, size2 = 0, got = 0;
    char *json = NULL, *image = NULL, host_id[64];
    wsync_tensor_info_t info;
    void *ptr = NULL;

    snprintf(host_id, sizeof(host_id), "mbtest-%d", (int)getpid());
    CHECK_OK(wsync_manifest_builder_create(&b));
    CHECK_OK(wsync_manifest_builder_add(b, "embed.weight", "BF16", 2, s1, &off1, &size1));
    CHECK_OK(wsync_manifest_builder_add(b, "norm.weight", "F32", 1, s2, &off2, &size2));
    CHECK_OK(wsync_manifest_builder_json(b, &json));
    image = calloc(1, wsync_manifest_builder_image_size(b));
    if (json == NULL || image == NULL || wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        CHECK(!"set-up");
        goto out;
    }
    memset(image + off1, 0x5a, size1);
    memset(image + off2, 0xa5, size2);
    {
        wsync_publisher_config_t pc = {.control_url = wsync_control_server_url(server),
                                       .rank = 0,
                                       .world = 1,
                                       .manifest_json = json,
                                       .image = image,
                                       .listen = "127.0.0.1:0",
                                       .host_id = "mbtest-trainer"};
        wsync_receiver_config_t rc = {.control_url = wsync_control_server_url(server),
                                      .engine_id = "mbtest",
                                      .local_rank = 0,
                                      .local_world = 1,
                                      .transport = "tcp",
                                      .bind_host = "127.0.0.1",
                                      .host_id = host_id};
        CHECK_OK(wsync_publisher_create(&pc, &pub));
        CHECK_OK(wsync_receiver_create(&rc, &recv));
    }
    if (pub == NULL || recv == NULL)
        goto out;
    CHECK_OK(wsync_publisher_publish(pub, 1));
    CHECK_OK(wsync_receiver_pull(recv, 1, 20000, &got));
    CHECK_EQ(got, 1);
    CHECK_OK(wsync_receiver_tensor(recv, "norm.weight", &ptr, &info));
    CHECK_EQ(info.offset, off2);
    CHECK_EQ(info.size, size2);
    CHECK_STR(info.dtype, "F32");
    CHECK(ptr != NULL && memcmp(ptr, image + off2, size2) == 0);
    CHECK_OK(wsync_receiver_tensor(recv, "embed.weight", &ptr, &info));
    CHECK(ptr != NULL && memcmp(ptr, image + off1, size1) == 0);
out:
    wsync_receiver_destroy(recv);
    wsync_publisher_destroy(pub);
    wsync_control_server_stop(server);
    wsync_manifest_builder_destroy(b);
    free(json);
    free(image);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    RUN(test_offsets_sizes_and_json);
    RUN(test_refusals_name_the_tensor);
    RUN(test_published_and_pulled);
    TEST_EXIT();
}
