/* manifest.c: dtypes, the manifest of an image, its JSON form and digest, and
 * the synthetic LLM-shaped model the stand-ins use. */
#include "common/model/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation to fail */
#include <xxhash.h>

#include "common/base/checks.h"
#include "common/base/util.h"

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
    m->by_name_ = json_object();
    if (m->by_name_ == NULL) {
        free(m);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory creating a manifest");
    }
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
    json_decref(m->by_name_);
    free(m);
}

long wsync_manifest_find(const wsync_manifest_t *m, const char *name)
{
    const json_t *ix = json_object_get(m->by_name_, name);
    return ix ? (long)json_integer_value(ix) : -1;
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
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': %d dimensions (at most %d)", name, ndim, WSYNC_MAX_DIMS);
    if (wsync_manifest_find(m, name) >= 0)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s' appears twice; tensor names must be unique", name);
    nelem = shape_elems(ndim, shape);
    nbytes = nelem < 0 ? -1 : wsync_dtype_nbytes(dtype, (uint64_t)nelem);
    if (nbytes < 0)
        return wsync_error(WSYNC_ERR_INVALID,
                           "tensor '%s': shape has a negative dimension, overflows, or "
                           "does not pack %s elements into whole bytes",
                           name, wsync_dtype_name(dtype));
    off = wsync_align_up(m->image_size, WSYNC_ALIGN);
    if (off + (uint64_t)nbytes < off)
        return wsync_error(WSYNC_ERR_INVALID, "tensor '%s': image size overflows", name);
    /* Capacity doubles at powers of two (16 first): no separate field. */
    if (m->ntensors < 16 ? m->ntensors == 0 : (m->ntensors & (m->ntensors - 1)) == 0) {
        size_t cap = m->ntensors ? m->ntensors * 2 : 16;
        wsync_tensor_t *nt = realloc(m->tensors, cap * sizeof(*nt));
        WSYNC_CHECK_ALLOC(nt);
        m->tensors = nt;
    }
    t = &m->tensors[m->ntensors];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    WSYNC_CHECK_ALLOC(t->name);
    /* nocheck: a name need not be UTF-8 to be a C string we can index. */
    if (json_object_set_new_nocheck(m->by_name_, name, json_integer((json_int_t)m->ntensors)) != 0) {
        free(t->name);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory indexing tensor '%s'", name);
    }
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
    uint64_t off;
    wsync_tensor_t *t;

    if (!json_is_object(e))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensors[%zu] is not an object", i);
    if (!json_is_string(jn))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensors[%zu].name must be a string", i);
    name = json_string_value(jn);
    if (!json_is_string(jd) || wsync_dtype_parse(json_string_value(jd), &dtype) != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': unknown or missing dtype", name);
    if (!json_is_array(js) || json_array_size(js) > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "manifest: tensor '%s': shape must be an array of at most %d "
                           "integers",
                           name, WSYNC_MAX_DIMS);
    for (d = 0; d < json_array_size(js); d++) {
        const json_t *x = json_array_get(js, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "manifest: tensor '%s': shape[%zu] must be a non-negative "
                               "integer",
                               name, d);
        shape[d] = json_integer_value(x);
    }
    if (wsync_manifest_add(m, name, dtype, (int)json_array_size(js), shape) != WSYNC_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", wsync_last_error());
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensors[%zu]: %s", i, why);
    }
    t = &m->tensors[m->ntensors - 1];
    /* The image packs tensors in order, each at the next aligned offset, so
     * exactly one offset is right; say which rule a wrong one breaks. */
    if (!json_is_integer(jo) || json_integer_value(jo) < 0)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': offset must be a non-negative integer", name);
    off = (uint64_t)json_integer_value(jo);
    if (off % WSYNC_ALIGN)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': offset %llu is not aligned to %d", name,
                           (unsigned long long)off, WSYNC_ALIGN);
    if (off < t->offset)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "manifest: tensor '%s': offset %llu overlaps the previous tensor "
                           "(offsets must increase; expected %llu)",
                           name, (unsigned long long)off, (unsigned long long)t->offset);
    if (off != t->offset)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "manifest: tensor '%s': offset %llu leaves a gap (tensors are packed, "
                           "each at the next multiple of %d; expected %llu)",
                           name, (unsigned long long)off, WSYNC_ALIGN, (unsigned long long)t->offset);
    if (!json_is_integer(jz) || (uint64_t)json_integer_value(jz) != t->size)
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: tensor '%s': size must be %llu (shape x dtype)", name,
                           (unsigned long long)t->size);
    return WSYNC_OK;
}

wsync_status_t wsync_manifest_from_json(const json_t *j, wsync_manifest_t **out)
{
    const json_t *tensors = json_object_get(j, "tensors"), *meta = json_object_get(j, "metadata");
    const json_t *isz = json_object_get(j, "image_size"), *align = json_object_get(j, "align");
    const json_t *ver = json_object_get(j, "version");
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    size_t i;

    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: expected a JSON object");
    if (!json_is_array(tensors))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: 'tensors' must be an array");
    if (ver && (!json_is_integer(ver) || json_integer_value(ver) != 1))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: version must be 1 (written by a newer wsync?)");
    if (align && (!json_is_integer(align) || json_integer_value(align) != WSYNC_ALIGN))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: align must be %d", WSYNC_ALIGN);
    if (meta && !json_is_object(meta) && !json_is_null(meta))
        return wsync_error(WSYNC_ERR_FORMAT, "manifest: 'metadata' must be an object of strings");
    if (json_is_object(meta)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)meta, k,
                            v) if (!json_is_string(v)) return wsync_error(WSYNC_ERR_FORMAT,
                                                                          "manifest: metadata['%s'] must be a "
                                                                          "string",
                                                                          k);
    }
    WSYNC_CHECK(wsync_manifest_create(&m));
    for (i = 0; i < json_array_size(tensors); i++)
        WSYNC_CHECK_GOTO(tensor_from_json(m, json_array_get(tensors, i), i), st, err);
    if (!json_is_integer(isz) || (uint64_t)json_integer_value(isz) != m->image_size) {
        st = wsync_error(WSYNC_ERR_FORMAT,
                         "manifest: image_size must be %llu (end of the last tensor, padded "
                         "to %d)",
                         (unsigned long long)m->image_size, WSYNC_ALIGN);
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

/* Feeds a 64-bit value little-endian, so the digest is the same on every host. */
static void digest_u64(XXH3_state_t *h, uint64_t v)
{
    unsigned char b[8];
    int i;
    for (i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    XXH3_128bits_update(h, b, sizeof(b));
}

/* Canonical form: a tag, the image size, then per tensor its name and dtype
 * name (each with its terminator, so "ab"+"c" and "a"+"bc" differ), rank,
 * dims, offset and size. Dtype by name, not enum value, so reordering the
 * enum never changes a digest. */
void wsync_manifest_digest(const wsync_manifest_t *m, char out[33])
{
    static const char tag[] = "wsync-manifest-v1";
    XXH3_state_t h;
    XXH128_hash_t d;
    size_t i;
    int k;
    XXH3_128bits_reset(&h);
    XXH3_128bits_update(&h, tag, sizeof(tag));
    digest_u64(&h, m->image_size);
    digest_u64(&h, m->ntensors);
    for (i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        const char *dn = wsync_dtype_name(t->dtype);
        XXH3_128bits_update(&h, t->name, strlen(t->name) + 1);
        XXH3_128bits_update(&h, dn, strlen(dn) + 1);
        digest_u64(&h, (uint64_t)t->ndim);
        for (k = 0; k < t->ndim; k++)
            digest_u64(&h, (uint64_t)t->shape[k]);
        digest_u64(&h, t->offset);
        digest_u64(&h, t->size);
    }
    d = XXH3_128bits_digest(&h);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)d.high64, (unsigned long long)d.low64);
}

/* BF16 bytes of one decoder layer: q, k, v, o (hidden^2 each), gate and up
 * (inter x hidden), down (hidden x inter), two norms. */
static uint64_t layer_bytes(uint64_t hidden, uint64_t inter)
{
    return 2 * (4 * hidden * hidden + 3 * hidden * inter + 2 * hidden);
}

/* Shape of the synthetic model for a budget: the widest hidden size (a power
 * of two, 64..16384) that still leaves room for hidden/256 layers (at least 2)
 * after the embedding and lm_head, which together take at most a quarter of
 * the budget and a vocabulary of at most 32000 -- about the proportions of
 * Llama-style models (4096 wide, 32 layers, 32000 words). Layers fill the
 * budget; what is left over (less than a layer) widens the vocabulary, so
 * the total lands within a few tensor paddings of `bytes`. */
static int synthetic_dims(uint64_t bytes, uint64_t *hidden_p, uint64_t *inter_p, uint64_t *layers_p,
                          uint64_t *vocab_p)
{
    uint64_t hidden;
    for (hidden = 16384; hidden >= 64; hidden /= 2) {
        uint64_t inter = hidden * 11 / 4, lb = layer_bytes(hidden, inter);
        uint64_t min_layers = hidden / 256 < 2 ? 2 : hidden / 256;
        uint64_t vocab = bytes / 16 / hidden, fixed, layers;
        if (vocab > 32000)
            vocab = 32000;
        fixed = 4 * vocab * hidden + 2 * hidden;
        if (vocab < 256 || fixed + min_layers * lb > bytes)
            continue;
        layers = (bytes - fixed) / lb;
        vocab += (bytes - fixed - layers * lb) / (4 * hidden);
        *hidden_p = hidden;
        *inter_p = inter;
        *layers_p = layers;
        *vocab_p = vocab;
        return 0;
    }
    return -1;
}

wsync_status_t wsync_manifest_synthetic(uint64_t bytes, wsync_manifest_t **out)
{
    uint64_t hidden, vocab, inter, layers, l;
    wsync_manifest_t *m = NULL;
    wsync_status_t st;
    char name[128];

    if (bytes < 1024 * 1024 || synthetic_dims(bytes, &hidden, &inter, &layers, &vocab) != 0)
        return wsync_error(WSYNC_ERR_INVALID, "synthetic model: %llu bytes is too small (at least 1M)",
                           (unsigned long long)bytes);
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

/* First tensor whose data ends after `off` (tensors are in image order). */
static size_t first_ending_after(const wsync_manifest_t *m, uint64_t off)
{
    size_t lo = 0, hi = m->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->tensors[mid].offset + m->tensors[mid].size <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void wsync_manifest_describe_range(const wsync_manifest_t *m, uint64_t off, uint64_t end, char *out, size_t len)
{
    size_t first, last, n = 0;
    if (len == 0)
        return;
    snprintf(out, len, "no tensor");
    if (m == NULL || end <= off)
        return;
    first = first_ending_after(m, off);
    for (last = first; last < m->ntensors && m->tensors[last].offset < end; last++)
        if (m->tensors[last].size > 0)
            n++;
    if (n == 0)
        return;
    if (n == 1)
        snprintf(out, len, "tensor '%s'", m->tensors[first].name);
    else
        snprintf(out, len, "tensors '%s' to '%s' (%zu)", m->tensors[first].name, m->tensors[last - 1].name, n);
}
