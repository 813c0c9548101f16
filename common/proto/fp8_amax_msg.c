/* fp8_amax_msg.c: the FP8 block maxima request and answer between trainer
 * ranks (fp8_amax_msg.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/proto/fp8_amax_msg.h"

#define PART_INTS 5 /* tensor, block_rows, block_cols, slice, band */

json_t *wsync_fp8_amax_req_to_json(const wsync_fp8_amax_req_t *r)
{
    json_t *parts = json_array();
    size_t i;
    int bad = parts == NULL;
    for (i = 0; !bad && i < r->nparts; i++) {
        const wsync_fp8_amax_part_t *p = &r->parts[i];
        const json_int_t v[PART_INTS] = {p->tensor, p->block_rows, p->block_cols, (json_int_t)p->slice,
                                         (json_int_t)p->band};
        int k;
        for (k = 0; k < PART_INTS && !bad; k++)
            bad = json_array_append_new(parts, json_integer(v[k])) != 0;
    }
    if (bad) {
        json_decref(parts);
        return NULL;
    }
    return json_pack("{s:{s:I, s:o}}", "fp8_amax", "version", (json_int_t)r->version, "parts", parts);
}

/* parts[i]'s k-th integer in lo .. hi, or an error naming it. */
static wsync_status_t part_int(const json_t *parts, size_t i, int k, json_int_t lo, json_int_t hi, json_int_t *out)
{
    static const char *const names[PART_INTS] = {"tensor", "block_rows", "block_cols", "slice", "band"};
    const json_t *x = json_array_get(parts, i * PART_INTS + (size_t)k);
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return wsync_error(WSYNC_ERR_FORMAT, "fp8_amax: part %zu's %s must be a whole number from %lld to %lld", i,
                           names[k], (long long)lo, (long long)hi);
    *out = json_integer_value(x);
    return WSYNC_OK;
}

wsync_status_t wsync_fp8_amax_req_from_json(const json_t *j, wsync_fp8_amax_req_t *out)
{
    const json_t *ver = json_object_get(j, "version"), *parts = json_object_get(j, "parts");
    size_t n, i;
    memset(out, 0, sizeof(*out));
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "fp8_amax: must be an object with version and parts");
    if (!json_is_integer(ver) || json_integer_value(ver) < 1)
        return wsync_error(WSYNC_ERR_FORMAT, "fp8_amax: version must be a whole number from 1");
    n = json_is_array(parts) ? json_array_size(parts) : 0;
    if (n == 0 || n % PART_INTS != 0 || n / PART_INTS > WSYNC_AMAX_MAX_PARTS)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "fp8_amax: parts must be a list of 5 integers per part (tensor, block_rows, "
                           "block_cols, "
                           "slice, band), 1 to %u parts",
                           WSYNC_AMAX_MAX_PARTS);
    out->version = (uint64_t)json_integer_value(ver);
    out->nparts = n / PART_INTS;
    WSYNC_CHECK_ALLOC(out->parts = calloc(out->nparts, sizeof(*out->parts)));
    for (i = 0; i < out->nparts; i++) {
        json_int_t v[PART_INTS];
        WSYNC_CHECK(part_int(parts, i, 0, 0, UINT32_MAX - 1, &v[0]));
        WSYNC_CHECK(part_int(parts, i, 1, 1, WSYNC_AMAX_MAX_BLOCK, &v[1]));
        WSYNC_CHECK(part_int(parts, i, 2, 1, WSYNC_AMAX_MAX_BLOCK, &v[2]));
        WSYNC_CHECK(part_int(parts, i, 3, 0, INT64_MAX, &v[3]));
        WSYNC_CHECK(part_int(parts, i, 4, 0, INT64_MAX, &v[4]));
        out->parts[i] = (wsync_fp8_amax_part_t){(uint32_t)v[0], (int)v[1], (int)v[2], (uint64_t)v[3],
                                                (uint64_t)v[4]};
    }
    return WSYNC_OK;
}

void wsync_fp8_amax_req_clear(wsync_fp8_amax_req_t *r)
{
    free(r->parts);
    memset(r, 0, sizeof(*r));
}

wsync_status_t wsync_fp8_amax_answer_set(json_t *reply, const float *amax, size_t n)
{
    json_t *out = json_array();
    size_t i;
    WSYNC_CHECK_ALLOC(out);
    for (i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &amax[i], 4);
        if (json_array_append_new(out, json_integer(bits)) != 0) {
            json_decref(out);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        }
    }
    if (json_object_set_new(reply, "amax", out) != 0 || json_object_set_new(reply, "ok", json_true()) != 0)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    return WSYNC_OK;
}

wsync_status_t wsync_fp8_amax_answer_get(const json_t *reply, float *amax, size_t n)
{
    const json_t *got = json_object_get(reply, "amax");
    const char *why = json_string_value(json_object_get(reply, "error"));
    size_t i;
    if (why != NULL)
        return wsync_error(WSYNC_ERR_PEER, "%s", why);
    if (!json_is_array(got) || json_array_size(got) != n)
        return wsync_error(WSYNC_ERR_PEER, "its answer's amax must be a list of %zu maxima, got %s%zu", n,
                           json_is_array(got) ? "" : "no list: ", json_is_array(got) ? json_array_size(got) : 0);
    for (i = 0; i < n; i++) {
        const json_t *x = json_array_get(got, i);
        const json_int_t b = json_integer_value(x);
        uint32_t bits = (uint32_t)b;
        memcpy(&amax[i], &bits, 4);
        if (!json_is_integer(x) || b < 0 || b > (json_int_t)UINT32_MAX || !isfinite(amax[i]) || amax[i] < 0.0f)
            return wsync_error(WSYNC_ERR_PEER, "its maximum %zu is not the bits of a finite fp32 >= 0", i);
    }
    return WSYNC_OK;
}
