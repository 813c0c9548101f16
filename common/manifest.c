/* manifest.c: dtypes, the manifest of an image, its JSON form and digest, and
 * the synthetic LLM-shaped model the stand-ins use. */
#include "common/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/checks.h"
#include "common/util.h"

static const struct {
    const char *name;
    unsigned bits;
} dtypes[WSYNC_DTYPE_COUNT] = {
    [WSYNC_DTYPE_BOOL] = {"BOOL", 8},       [WSYNC_DTYPE_F4] = {"F4", 4},
    [WSYNC_DTYPE_F6_E2M3] = {"F6_E2M3", 6}, [WSYNC_DTYPE_F6_E3M2] = {"F6_E3M2", 6},
    [WSYNC_DTYPE_U8] = {"U8", 8},           [WSYNC_DTYPE_I8] = {"I8", 8},
    [WSYNC_DTYPE_F8_E5M2] = {"F8_E5M2", 8}, [WSYNC_DTYPE_F8_E4M3] = {"F8_E4M3", 8},
    [WSYNC_DTYPE_F8_E8M0] = {"F8_E8M0", 8}, [WSYNC_DTYPE_I16] = {"I16", 16},
    [WSYNC_DTYPE_U16] = {"U16", 16},        [WSYNC_DTYPE_F16] = {"F16", 16},
    [WSYNC_DTYPE_BF16] = {"BF16", 16},      [WSYNC_DTYPE_I32] = {"I32", 32},
    [WSYNC_DTYPE_U32] = {"U32", 32},        [WSYNC_DTYPE_F32] = {"F32", 32},
    [WSYNC_DTYPE_F64] = {"F64", 64},        [WSYNC_DTYPE_I64] = {"I64", 64},
    [WSYNC_DTYPE_U64] = {"U64", 64},        [WSYNC_DTYPE_C64] = {"C64", 64},
};

const char *wsync_dtype_name(wsync_dtype_t dtype)
{
    return (unsigned)dtype < WSYNC_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

int wsync_dtype_parse(const char *name, wsync_dtype_t *out)
{
    int i;
    for (i = 0; name && i < WSYNC_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (wsync_dtype_t)i;
            return 0;
        }
    return -1;
}

unsigned wsync_dtype_bits(wsync_dtype_t dtype)
{
    return (unsigned)dtype < WSYNC_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

int64_t wsync_dtype_nbytes(wsync_dtype_t dtype, uint64_t nelem)
{
    unsigned bits = wsync_dtype_bits(dtype);
    uint64_t total;
    if (bits == 0 || nelem > (uint64_t)INT64_MAX / 64)
        return -1;
    total = nelem * bits;
    if (total % 8)
        return -1;
    return (int64_t)(total / 8);
}

wsync_status_t wsync_manifest_create(wsync_manifest_t **out)
{
    wsync_manifest_t *m = calloc(1, sizeof(*m));
    WSYNC_CHECK_ALLOC(m);
    *out = m;
    return WSYNC_OK;
}

void wsync_manifest_free(wsync_manifest_t *m)
{
    size_t i;
    if (m == NULL)
        return;
    for (i = 0; i < m->ntensors; i++)
        free(m->tensors[i].name);
    free(m->tensors);
    json_decref(m->metadata);
    free(m);
}

long wsync_manifest_find(const wsync_manifest_t *m, const char *name)
{
    size_t i;
    for (i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* Elements of a shape, or -1 on a negative dimension or overflow. */
static int64_t shape_elems(int ndim, const int64_t *shape)
{
    uint64_t n = 1;
    int d;
    for (d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return -1;
        if (shape[d] != 0 && n > (uint64_t)INT64_MAX / (uint64_t)shape[d])
            return -1;
        n *= (uint64_t)shape[d];
    }
    return (int64_t)n;
}

wsync_status_t wsync_manifest_add(wsync_manifest_t *m, const char *name, wsync_dtype_t dtype, int ndim,
                                  const int64_t *shape)
{
    wsync_tensor_t *t;
    int64_t nelem, nbytes;
    uint64_t off;

    if (name == NULL || name[0] == '\0')
        return wsync_error(WSYNC_ERR_INVALID, "tensor name is empty");
    if (wsync_dtype_name(dtype) == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': unknown dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': %d dimensions (at most %d)", name, ndim,
                           WSYNC_MAX_DIMS);
    if (wsync_manifest_find(m, name) >= 0)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s' appears twice", name);
    nelem = shape_elems(ndim, shape);
    nbytes = nelem < 0 ? -1 : wsync_dtype_nbytes(dtype, (uint64_t)nelem);
    if (nbytes < 0)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': shape has a negative dimension, overflows, or "
                           "does not pack %s elements into whole bytes", name, wsync_dtype_name(dtype));
    off = wsync_align_up(m->image_size, WSYNC_ALIGN);
    if (off + (uint64_t)nbytes < off)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': image size overflows", name);
    if ((m->ntensors & (m->ntensors - 1)) == 0) {
        size_t cap = m->ntensors ? m->ntensors * 2 : 16;
        wsync_tensor_t *nt = realloc(m->tensors, cap * sizeof(*nt));
        WSYNC_CHECK_ALLOC(nt);
        m->tensors = nt;
    }
    t = &m->tensors[m->ntensors];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    WSYNC_CHECK_ALLOC(t->name);
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    t->offset = off;
    t->size = (uint64_t)nbytes;
    m->ntensors++;
    m->image_size = wsync_align_up(off + (uint64_t)nbytes, WSYNC_ALIGN);
    return WSYNC_OK;
}

wsync_status_t wsync_manifest_to_json(const wsync_manifest_t *m, json_t **out)
{
    json_t *j = json_object(), *arr = json_array();
    size_t i;
    int d;
    if (j == NULL || arr == NULL) {
        json_decref(j);
        json_decref(arr);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    json_object_set_new(j, "version", json_integer(1));
    json_object_set_new(j, "align", json_integer(WSYNC_ALIGN));
    json_object_set_new(j, "image_size", json_integer((json_int_t)m->image_size));
    for (i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        json_t *shape = json_array();
        for (d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", t->name, "dtype",
                                             wsync_dtype_name(t->dtype), "shape", shape, "offset",
                                             (json_int_t)t->offset, "size", (json_int_t)t->size));
    }
    json_object_set_new(j, "tensors", arr);
    if (m->metadata)
        json_object_set(j, "metadata", m->metadata);
    *out = j;
    return WSYNC_OK;
}

static wsync_status_t tensor_from_json(wsync_manifest_t *m, const json_t *e, size_t i)
{
    const json_t *jn = json_object_get(e, "name"), *jd = json_object_get(e, "dtype");
    const json_t *js = json_object_get(e, "shape"), *jo = json_object_get(e, "offset");
    const json_t *jz = json_object_get(e, "size");
    int64_t shape[WSYNC_MAX_DIMS];
    const char *name;
    wsync_dtype_t dtype;
    size_t d;
    wsync_tensor_t *t;

    if (!json_is_object(e))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensors[%zu] is not an object", i);
    if (!json_is_string(jn))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensors[%zu].name must be a string", i);
    name = json_string_value(jn);
    if (!json_is_string(jd) || wsync_dtype_parse(json_string_value(jd), &dtype) != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': unknown or missing dtype", name);
    if (!json_is_array(js) || json_array_size(js) > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': shape must be an array of at most %d "
                           "integers", name, WSYNC_MAX_DIMS);
    for (d = 0; d < json_array_size(js); d++) {
        const json_t *x = json_array_get(js, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': shape[%zu] must be a non-negative "
                               "integer", name, d);
        shape[d] = json_integer_value(x);
    }
    WSYNC_CHECK(wsync_manifest_add(m, name, dtype, (int)json_array_size(js), shape));
    t = &m->tensors[m->ntensors - 1];
    if (!json_is_integer(jo) || (uint64_t)json_integer_value(jo) != t->offset)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': offset must be %llu (tensors in order, "
                           "each aligned to %d)", name, (unsigned long long)t->offset, WSYNC_ALIGN);
    if (!json_is_integer(jz) || (uint64_t)json_integer_value(jz) != t->size)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': size must be %llu (shape x dtype)", name,
                           (unsigned long long)t->size);
    return WSYNC_OK;
}

wsync_status_t wsync_manifest_from_json(const json_t *j, wsync_manifest_t **out)
{
    const json_t *tensors = json_object_get(j, "tensors"), *meta = json_object_get(j, "metadata");
    const json_t *isz = json_object_get(j, "image_size"), *align = json_object_get(j, "align");
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    size_t i;

    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: expected a JSON object");
    if (!json_is_array(tensors))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: 'tensors' must be an array");
    if (align && json_integer_value(align) != WSYNC_ALIGN)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: align must be %d", WSYNC_ALIGN);
    if (meta && !json_is_object(meta) && !json_is_null(meta))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: 'metadata' must be an object");
    WSYNC_CHECK(wsync_manifest_create(&m));
    for (i = 0; i < json_array_size(tensors); i++)
        WSYNC_CHECK_GOTO(tensor_from_json(m, json_array_get(tensors, i), i), st, err);
    if (!json_is_integer(isz) || (uint64_t)json_integer_value(isz) != m->image_size) {
        st = wsync_error(WSYNC_ERR_FORMAT, "manifest: image_size must be %llu", (unsigned long long)m->image_size);
        goto err;
    }
    if (json_is_object(meta))
        m->metadata = json_deep_copy(meta);
    *out = m;
    return WSYNC_OK;
err:
    wsync_manifest_free(m);
    return st;
}

void wsync_manifest_digest(const wsync_manifest_t *m, char out[33])
{
    XXH3_state_t *st = XXH3_createState();
    XXH128_hash_t h;
    size_t i;
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, &m->image_size, sizeof(m->image_size));
    for (i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        uint64_t fields[4] = {(uint64_t)t->dtype, (uint64_t)t->ndim, t->offset, t->size};
        /* Name with its terminator so "ab"+"c" and "a"+"bc" differ. */
        XXH3_128bits_update(st, t->name, strlen(t->name) + 1);
        XXH3_128bits_update(st, fields, sizeof(fields));
        XXH3_128bits_update(st, t->shape, (size_t)t->ndim * sizeof(int64_t));
    }
    h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

/* Bytes of a model with these dimensions, in BF16. */
static uint64_t llm_bytes(uint64_t vocab, uint64_t hidden, uint64_t inter, uint64_t layers)
{
    uint64_t per_layer = 4 * hidden * hidden + 3 * hidden * inter + 2 * hidden;
    return 2 * (2 * vocab * hidden + layers * per_layer + hidden);
}

wsync_status_t wsync_manifest_synthetic(uint64_t bytes, wsync_manifest_t **out)
{
    uint64_t hidden = 64, vocab, inter, layers = 2, l;
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    char name[128];

    if (bytes < 1024 * 1024)
        return wsync_error(WSYNC_ERR_INVALID, "synthetic model: %llu bytes is too small (at least 1M)",
                           (unsigned long long)bytes);
    /* Grow the hidden size (and with it the layer count) until the model
     * would exceed the budget; vocabulary then takes what is left. */
    while (llm_bytes(8 * hidden * 2, hidden * 2, (hidden * 2) * 11 / 4, layers + 2) <= bytes * 9 / 10 &&
           hidden < 16384) {
        hidden *= 2;
        layers += 2;
    }
    inter = hidden * 11 / 4;
    {
        uint64_t body = llm_bytes(0, hidden, inter, layers);
        vocab = body < bytes ? (bytes - body) / (4 * hidden) : 8;
        if (vocab < 8)
            vocab = 8;
    }
    WSYNC_CHECK(wsync_manifest_create(&m));
    {
        int64_t emb[2] = {(int64_t)vocab, (int64_t)hidden};
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, "model.embed_tokens.weight", WSYNC_DTYPE_BF16, 2, emb), st, err);
    }
    for (l = 0; l < layers; l++) {
        int64_t sq[2] = {(int64_t)hidden, (int64_t)hidden}, up[2] = {(int64_t)inter, (int64_t)hidden};
        int64_t down[2] = {(int64_t)hidden, (int64_t)inter}, norm[1] = {(int64_t)hidden};
        static const char *attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        int a;
        snprintf(name, sizeof(name), "model.layers.%llu.input_layernorm.weight", (unsigned long long)l);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 1, norm), st, err);
        for (a = 0; a < 4; a++) {
            snprintf(name, sizeof(name), "model.layers.%llu.self_attn.%s.weight", (unsigned long long)l, attn[a]);
            WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 2, sq), st, err);
        }
        snprintf(name, sizeof(name), "model.layers.%llu.post_attention_layernorm.weight", (unsigned long long)l);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 1, norm), st, err);
        snprintf(name, sizeof(name), "model.layers.%llu.mlp.gate_proj.weight", (unsigned long long)l);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 2, up), st, err);
        snprintf(name, sizeof(name), "model.layers.%llu.mlp.up_proj.weight", (unsigned long long)l);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 2, up), st, err);
        snprintf(name, sizeof(name), "model.layers.%llu.mlp.down_proj.weight", (unsigned long long)l);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 2, down), st, err);
    }
    {
        int64_t norm[1] = {(int64_t)hidden}, head[2] = {(int64_t)vocab, (int64_t)hidden};
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, "model.norm.weight", WSYNC_DTYPE_BF16, 1, norm), st, err);
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, "lm_head.weight", WSYNC_DTYPE_BF16, 2, head), st, err);
    }
    *out = m;
    return WSYNC_OK;
err:
    wsync_manifest_free(m);
    return st;
}
