/* target_json.c: the JSON form of a target (docs/TARGETS.md) and its digest,
 * XXH3-128 over the canonical (compact, keys sorted) JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/base/checks.h"
#include "common/targets/target.h"
#include "common/targets/target_internal.h"

static json_t *int_array(const int64_t *v, int n)
{
    json_t *a = json_array();
    int k;
    for (k = 0; a && k < n; k++)
        json_array_append_new(a, json_integer((json_int_t)v[k]));
    return a;
}

static json_t *fp8_json(const wsync_fp8_spec_t *q, const char *scale)
{
    return json_pack("{s:s, s:[i,i], s:s, s:s}", "dtype", "float8_e4m3fn", "block", q->block_rows, q->block_cols,
                     "scale", scale, "scale_form", wsync_scale_form_name(q->form));
}

/* The "quant" object of a destination or a rule (docs/TARGETS.md):
 * {"dtype": "float8_e4m3fn", "block": [R, C], "scale": NAME, "scale_form":
 * "fp32" | "ue8m0"}, all but dtype optional. *scale: the "scale" string or
 * NULL (borrowed from q). `what` names the owner in errors. */
wsync_status_t tgt_fp8_from_json(const json_t *q, wsync_fp8_spec_t *spec, const char **scale, const char *what)
{
    const char *dt = json_string_value(json_object_get(q, "dtype"));
    const json_t *blk = json_object_get(q, "block"), *sc = json_object_get(q, "scale");
    const json_t *form = json_object_get(q, "scale_form");
    const char *key;
    json_t *v;

    *spec = (wsync_fp8_spec_t){WSYNC_FP8_DEFAULT_BLOCK, WSYNC_FP8_DEFAULT_BLOCK, WSYNC_SCALE_FP32};
    *scale = NULL;
    if (!json_is_object(q))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"quant\" must be an object", what);
    json_object_foreach((json_t *)q, key, v)
    {
        if (strcmp(key, "dtype") && strcmp(key, "block") && strcmp(key, "scale") && strcmp(key, "scale_form") &&
            strcmp(key, "about"))
            return wsync_error(WSYNC_ERR_FORMAT,
                               "%s: \"quant\" has an unknown key \"%s\" (known: dtype, block, scale, scale_form)",
                               what, key);
    }
    if (dt == NULL || strcmp(dt, "float8_e4m3fn") != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"quant\".\"dtype\" must be \"float8_e4m3fn\"", what);
    if (blk != NULL) {
        const json_t *r = json_array_get(blk, 0), *c = json_array_get(blk, 1);
        if (!json_is_array(blk) || json_array_size(blk) != 2 || !json_is_integer(r) || !json_is_integer(c) ||
            json_integer_value(r) < 1 || json_integer_value(c) < 1 || json_integer_value(r) > 65536 ||
            json_integer_value(c) > 65536)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "%s: \"quant\".\"block\" must be [rows, columns], each 1 to 65536 (default "
                               "[128, 128])",
                               what);
        spec->block_rows = (int)json_integer_value(r);
        spec->block_cols = (int)json_integer_value(c);
    }
    if (sc != NULL && (!json_is_string(sc) || json_string_length(sc) == 0))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"quant\".\"scale\" must be a non-empty name", what);
    *scale = json_string_value(sc);
    if (form != NULL && wsync_scale_form_parse(json_string_value(form), &spec->form) != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"quant\".\"scale_form\" must be \"fp32\" or \"ue8m0\"", what);
    return WSYNC_OK;
}

wsync_status_t wsync_target_to_json(const wsync_target_t *t, const wsync_manifest_t *m, json_t **out)
{
    char md[33];
    json_t *j, *arr;
    size_t i, k;

    wsync_manifest_digest(m, md);
    j = json_pack("{s:i, s:s, s:I}", "version", 1, "manifest", md, "image_size", (json_int_t)t->image_size);
    if (j == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (t->whole_image) {
        json_object_set_new(j, "whole_image", json_true());
        *out = j;
        return WSYNC_OK;
    }
    arr = json_array();
    json_object_set_new(j, "tensors", arr);
    for (i = 0; i < t->ndests; i++) {
        const wsync_dest_t *d = &t->dests[i];
        json_t *blocks, *e;
        if (d->is_scale)
            continue; /* implied by its FP8 destination's "quant" */
        blocks = json_array();
        e = json_pack("{s:s, s:s, s:o, s:I, s:o}", "name", d->name, "dtype", wsync_dtype_name(d->dtype), "shape",
                      int_array(d->shape, d->ndim), "offset", (json_int_t)d->offset, "blocks", blocks);
        if (e == NULL || json_array_append_new(arr, e) != 0) {
            json_decref(j);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        }
        if (d->is_fp8 && json_object_set_new(e, "quant", fp8_json(&d->fp8, t->dests[d->scale_dest].name)) != 0) {
            json_decref(j);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        }
        for (k = 0; k < d->nblocks; k++) {
            const wsync_block_t *b = &t->blocks[d->first_block + k];
            const wsync_tensor_t *s = &m->tensors[b->src];
            json_array_append_new(blocks, json_pack("{s:s, s:o, s:o, s:o}", "src", s->name, "src_start",
                                                    int_array(b->src_start, s->ndim), "src_stop",
                                                    int_array(b->src_stop, s->ndim), "dst_start",
                                                    int_array(b->dst_start, d->ndim)));
        }
    }
    *out = j;
    return WSYNC_OK;
}

wsync_status_t tgt_digest(wsync_target_t *t, const wsync_manifest_t *m)
{
    json_t *j;
    char *text;
    XXH128_hash_t h;
    int i;

    WSYNC_CHECK(wsync_target_to_json(t, m, &j));
    text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    WSYNC_CHECK_ALLOC(text);
    h = XXH3_128bits(text, strlen(text));
    free(text);
    for (i = 0; i < 8; i++) {
        t->digest[i] = (uint8_t)(h.high64 >> (56 - 8 * i));
        t->digest[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
    }
    snprintf(t->digest_hex, sizeof(t->digest_hex), "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
    return WSYNC_OK;
}

/* Reads an optional array of `n` integers in [lo, ...) into v; absent keeps v. */
static wsync_status_t get_ints(const json_t *obj, const char *key, int n, int64_t lo, int64_t *v, const char *what,
                               size_t idx)
{
    const json_t *a = json_object_get(obj, key), *e;
    size_t i;
    if (a == NULL)
        return WSYNC_OK;
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return wsync_error(WSYNC_ERR_FORMAT, "target: %s block %zu: \"%s\" must be an array of %d integers", what,
                           idx, key, n);
    json_array_foreach(a, i, e)
    {
        if (!json_is_integer(e) || json_integer_value(e) < lo)
            return wsync_error(WSYNC_ERR_FORMAT, "target: %s block %zu: \"%s\"[%zu] must be an integer >= %lld",
                               what, idx, key, i, (long long)lo);
        v[i] = (int64_t)json_integer_value(e);
    }
    return WSYNC_OK;
}

static wsync_status_t parse_block(const wsync_manifest_t *m, wsync_target_t *t, const wsync_dest_t *d,
                                  const json_t *jb, size_t bi)
{
    const char *src = json_string_value(json_object_get(jb, "src"));
    const wsync_tensor_t *s;
    wsync_block_t b;
    long si;
    int k;

    if (!json_is_object(jb))
        return wsync_error(WSYNC_ERR_FORMAT, "target: '%s' block %zu is not an object", d->name, bi);
    if (src == NULL)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "target: '%s' block %zu has no \"src\" string (the source tensor's "
                           "name)",
                           d->name, bi);
    si = wsync_manifest_find(m, src);
    if (si < 0)
        return wsync_error(WSYNC_ERR_NOT_FOUND,
                           "target: '%s' block %zu: source tensor '%s' is not in the "
                           "manifest",
                           d->name, bi, src);
    s = &m->tensors[si];
    memset(&b, 0, sizeof(b));
    b.src = (uint32_t)si;
    for (k = 0; k < s->ndim; k++)
        b.src_stop[k] = s->shape[k];
    WSYNC_CHECK(get_ints(jb, "src_start", s->ndim, 0, b.src_start, d->name, bi));
    WSYNC_CHECK(get_ints(jb, "src_stop", s->ndim, 0, b.src_stop, d->name, bi));
    WSYNC_CHECK(get_ints(jb, "dst_start", d->ndim, 0, b.dst_start, d->name, bi));
    return wsync_target_add_block(t, &b);
}

static wsync_status_t parse_dest(const wsync_manifest_t *m, wsync_target_t *t, const json_t *je, size_t i)
{
    const char *name = json_string_value(json_object_get(je, "name"));
    const char *dt = json_string_value(json_object_get(je, "dtype"));
    const json_t *shape = json_object_get(je, "shape"), *off = json_object_get(je, "offset"), *e;
    const json_t *blocks = json_object_get(je, "blocks");
    int64_t dims[WSYNC_MAX_DIMS];
    wsync_dtype_t dtype;
    const wsync_dest_t *d;
    size_t k;

    if (!json_is_object(je))
        return wsync_error(WSYNC_ERR_FORMAT, "target: tensors[%zu] is not an object", i);
    if (name == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "target: tensors[%zu] has no \"name\" string", i);
    if (dt == NULL || wsync_dtype_parse(dt, &dtype) != 0)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "target: tensor '%s': \"dtype\" %s%s%s is not a safetensors dtype "
                           "(BF16, F32, ...)",
                           name, dt ? "'" : "", dt ? dt : "missing", dt ? "'" : "");
    if (!json_is_array(shape) || json_array_size(shape) > WSYNC_MAX_DIMS)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "target: tensor '%s': \"shape\" must be an array of at most %d "
                           "integers",
                           name, WSYNC_MAX_DIMS);
    json_array_foreach(shape, k, e)
    {
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return wsync_error(WSYNC_ERR_FORMAT, "target: tensor '%s': shape[%zu] is not an integer >= 0", name, k);
        dims[k] = (int64_t)json_integer_value(e);
    }
    if (blocks != NULL && !json_is_array(blocks))
        return wsync_error(WSYNC_ERR_FORMAT, "target: tensor '%s': \"blocks\" must be an array", name);
    WSYNC_CHECK(wsync_target_add_dest(t, name, dtype, (int)json_array_size(shape), dims));
    d = &t->dests[t->ndests - 1];
    if (off != NULL && (!json_is_integer(off) || (uint64_t)json_integer_value(off) != d->offset))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "target: tensor '%s': \"offset\" must be %llu (destination tensors "
                           "sit back to back in order, each aligned to %d bytes) or left out",
                           name, (unsigned long long)d->offset, WSYNC_ALIGN);
    json_array_foreach(blocks, k, e) WSYNC_CHECK(parse_block(m, t, d, e, k));
    if (json_object_get(je, "quant") != NULL) {
        char what[4200];
        wsync_fp8_spec_t spec;
        const char *scale;
        snprintf(what, sizeof(what), "target: tensor '%s'", name);
        WSYNC_CHECK(tgt_fp8_from_json(json_object_get(je, "quant"), &spec, &scale, what));
        WSYNC_CHECK(wsync_target_set_fp8(t, &spec, scale));
    }
    return WSYNC_OK;
}

wsync_status_t wsync_target_from_json_obj(const wsync_manifest_t *m, const json_t *j, wsync_target_t **out)
{
    const json_t *tensors = json_object_get(j, "tensors"), *whole = json_object_get(j, "whole_image"), *e;
    const char *md = json_string_value(json_object_get(j, "manifest"));
    const json_t *ver = json_object_get(j, "version");
    char mine[33];
    wsync_target_t *t = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t i;

    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "target: the JSON is not an object");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1)
        return wsync_error(WSYNC_ERR_FORMAT, "target: \"version\" must be 1");
    wsync_manifest_digest(m, mine);
    if (json_object_get(j, "manifest") != NULL && (md == NULL || strcmp(md, mine) != 0))
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "target: made for manifest %s, but the model's manifest is %s: "
                           "regenerate the target for this model",
                           md ? md : "(not a string)", mine);
    if (whole != NULL && !json_is_boolean(whole))
        return wsync_error(WSYNC_ERR_FORMAT, "target: \"whole_image\" must be true or false");
    if (json_is_true(whole)) {
        if (tensors != NULL)
            return wsync_error(WSYNC_ERR_FORMAT, "target: give \"whole_image\": true or \"tensors\", not both");
        return wsync_target_identity(m, out);
    }
    if (!json_is_array(tensors))
        return wsync_error(WSYNC_ERR_FORMAT, "target: \"tensors\" must be an array of destination tensors");
    WSYNC_CHECK(wsync_target_create(&t));
    json_array_foreach(tensors, i, e)
    {
        st = parse_dest(m, t, e, i);
        if (st != WSYNC_OK)
            break;
    }
    if (st == WSYNC_OK)
        st = wsync_target_finish(t, m);
    if (st == WSYNC_OK && json_object_get(j, "image_size") != NULL &&
        (!json_is_integer(json_object_get(j, "image_size")) ||
         (uint64_t)json_integer_value(json_object_get(j, "image_size")) != t->image_size))
        st = wsync_error(WSYNC_ERR_FORMAT,
                         "target: \"image_size\" must be %llu (the end of the last destination "
                         "tensor, aligned to %d) or left out",
                         (unsigned long long)t->image_size, WSYNC_ALIGN);
    if (st != WSYNC_OK) {
        wsync_target_free(t);
        return st;
    }
    *out = t;
    return WSYNC_OK;
}

wsync_status_t wsync_target_from_json(const wsync_manifest_t *m, const char *json, size_t len, wsync_target_t **out)
{
    json_error_t err;
    json_t *j = json_loadb(json, len, 0, &err);
    wsync_status_t st;
    if (j == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "target: not JSON (line %d, column %d: %s)", err.line, err.column,
                           err.text);
    st = wsync_target_from_json_obj(m, j, out);
    json_decref(j);
    return st;
}
