/* manifest_builder.c: the public manifest builder (wsync_publisher.h), a thin
 * wrapper of common/model/manifest.c so a C trainer need not write JSON. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/model/manifest.h"
#include "trainer_side/wsync_publisher.h"

struct wsync_manifest_builder {
    wsync_manifest_t *m;
};

wsync_status_t wsync_manifest_builder_create(wsync_manifest_builder_t **out)
{
    wsync_manifest_builder_t *b = calloc(1, sizeof(*b));
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    if ((st = wsync_manifest_create(&b->m)) != WSYNC_OK) {
        free(b);
        return st;
    }
    *out = b;
    return WSYNC_OK;
}

wsync_status_t wsync_manifest_builder_add(wsync_manifest_builder_t *b, const char *name, const char *dtype,
                                          int ndim, const int64_t *shape, uint64_t *offset, uint64_t *size)
{
    wsync_dtype_t dt;
    const wsync_tensor_t *t;
    if (b == NULL || name == NULL || name[0] == '\0')
        return wsync_error(WSYNC_ERR_INVALID, "manifest builder: a tensor needs a name");
    if (dtype == NULL || wsync_dtype_parse(dtype, &dt) != 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "manifest builder: tensor '%s': dtype '%s' is not a safetensors dtype (BF16, F16, F32, "
                           "I64, U8, ...)",
                           name, dtype ? dtype : "(null)");
    if (ndim < 0 || ndim > WSYNC_MAX_DIMS || (ndim > 0 && shape == NULL))
        return wsync_error(WSYNC_ERR_INVALID, "manifest builder: tensor '%s': %d dimensions, expected 0 to %d%s",
                           name, ndim, WSYNC_MAX_DIMS, ndim > 0 && shape == NULL ? " and a shape" : "");
    WSYNC_CHECK(wsync_manifest_add(b->m, name, dt, ndim, shape));
    t = &b->m->tensors[b->m->ntensors - 1];
    if (offset)
        *offset = t->offset;
    if (size)
        *size = t->size;
    return WSYNC_OK;
}

uint64_t wsync_manifest_builder_image_size(const wsync_manifest_builder_t *b)
{
    return b ? b->m->image_size : 0;
}

wsync_status_t wsync_manifest_builder_json(const wsync_manifest_builder_t *b, char **out)
{
    json_t *j = NULL;
    char *text;
    if (b == NULL || out == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "manifest builder: NULL argument");
    WSYNC_CHECK(wsync_manifest_to_json(b->m, &j));
    text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (text == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "manifest builder: out of memory encoding %zu tensors", b->m->ntensors);
    *out = text;
    return WSYNC_OK;
}

void wsync_manifest_builder_destroy(wsync_manifest_builder_t *b)
{
    if (b == NULL)
        return;
    wsync_manifest_free(b->m);
    free(b);
}
