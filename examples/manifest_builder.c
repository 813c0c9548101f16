/* manifest_builder.c: a C trainer rank and an engine in one process, the
 * manifest made with wsync_manifest_builder (no JSON written by hand).
 *
 *   cc -I. examples/manifest_builder.c -Lbuild -lwsync -Wl,-rpath,$PWD/build -o /tmp/mb
 *   wsync serve --listen 127.0.0.1:8470 &  /tmp/mb http://127.0.0.1:8470
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_side/wsync_receiver.h"
#include "trainer_side/wsync_publisher.h"

static int fail(const char *what, wsync_status_t st)
{
    fprintf(stderr, "manifest_builder: %s: %s: %s\n", what, wsync_status_str(st), wsync_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const int64_t embed[2] = {1000, 64}, norm[1] = {64};
    uint64_t off_embed, size_embed, off_norm, size_norm, got = 0;
    wsync_manifest_builder_t *b = NULL;
    wsync_publisher_t *pub = NULL;
    wsync_receiver_t *recv = NULL;
    char *json = NULL, *image;
    wsync_tensor_info_t info;
    void *ptr;
    wsync_status_t st;
    int rc = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: %s CONTROL_URL\n", argv[0]);
        return 2;
    }
    /* The model: two tensors, each placed at the next 256-byte boundary. */
    if ((st = wsync_manifest_builder_create(&b)) != WSYNC_OK ||
        (st = wsync_manifest_builder_add(b, "embed.weight", "BF16", 2, embed, &off_embed, &size_embed)) != WSYNC_OK ||
        (st = wsync_manifest_builder_add(b, "norm.weight", "F32", 1, norm, &off_norm, &size_norm)) != WSYNC_OK ||
        (st = wsync_manifest_builder_json(b, &json)) != WSYNC_OK)
        return fail("manifest", st);
    image = calloc(1, wsync_manifest_builder_image_size(b));
    memset(image + off_embed, 1, size_embed); /* the trainer's weights */
    memset(image + off_norm, 2, size_norm);
    {
        wsync_publisher_config_t pc = {.control_url = argv[1],
                                       .rank = 0,
                                       .world = 1,
                                       .manifest_json = json,
                                       .image = image};
        wsync_receiver_config_t rc_cfg = {.control_url = argv[1], .engine_id = "c-example", .local_world = 1};
        if ((st = wsync_publisher_create(&pc, &pub)) != WSYNC_OK)
            return fail("publisher", st);
        if ((st = wsync_receiver_create(&rc_cfg, &recv)) != WSYNC_OK)
            return fail("receiver", st);
    }
    if ((st = wsync_publisher_publish(pub, 1)) != WSYNC_OK)
        return fail("publish", st);
    if ((st = wsync_receiver_pull(recv, 1, 30000, &got)) != WSYNC_OK)
        return fail("pull", st);
    if ((st = wsync_receiver_tensor(recv, "norm.weight", &ptr, &info)) != WSYNC_OK)
        return fail("tensor", st);
    if (info.offset == off_norm && memcmp(ptr, image + off_norm, size_norm) == 0) {
        printf("engine holds version %llu: norm.weight %s [%lld] at offset %llu, as built\n",
               (unsigned long long)got, info.dtype, (long long)info.shape[0], (unsigned long long)info.offset);
        rc = 0;
    }
    wsync_receiver_destroy(recv);
    wsync_publisher_destroy(pub);
    wsync_manifest_builder_destroy(b);
    free(json);
    free(image);
    return rc;
}
